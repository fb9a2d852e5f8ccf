#!/usr/bin/env python3
"""The table bench/cuda/run.sh prints: one line per benchmark row.

    bench_table.py BENCH_JSONL "ID MODEL BATCH SEQ ACCUM"...

BENCH_JSONL holds run.sh's lines: the JSON of one run (llmc-train-cuda bench or
torch_bench.py) tagged with "row" (the row ID) and "bench_impl" (ours, compile,
eager), or {"row", "bench_impl", "error"} for a run that failed. Columns: the
shape (micro batch x context, then "x ACCUM acc" when several micro-batches make
one optimizer step; the attention ours ran, "split master" and "bf16 states" when
ours ran with --master-weights split / --optimizer-states bf16), ours and
torch.compile tokens/s and their ratio, each one's peak GPU memory (GiB), then
llmq's published bf16 tokens/s on one H100 — a fixed reference, with the micro
batch it was measured at (its README for 2048-token sequences, its
benchmarks/H100x1.md for 1024; 524,288 tokens per optimizer step, bf16 weights
and AdamW moments) — and ours over it where the row has llmq's context and
tokens per step (N/A elsewhere). When the file has FP8 runs (bench_impl
"ours-fp8"): ours with --fp8, its memory, llmq's published FP8 figure (1024-token
rows) and the ratio ("LM head in FP8" or "in
bf16" as its runs' "fp8_lm_head" says, train.fp8_lm_head). An eager column appears
when the file has eager runs. Ours' and the FP8 column's headings say "tuned
GEMMs" when every run of theirs took its GEMM choices from a tuned file
("gemm_choices": "tuned", run.sh's BENCH_GEMM_TUNE=1), "tuned GEMMs in N of M
rows" when some did. A run
that is missing prints "not run", a failed one "failed" (its error follows the
table).
"""
import json
import sys

# llmq (C++/CUDA trainer), one H100, --model-dtype=bf16 --opt-m-dtype=bf16
# --opt-v-dtype=bf16: (tokens/s, micro batch, tokens per optimizer step) by
# (model, context, matmul type). 2048: its README's "H100" table (bf16 only; the
# 7B row at half the tokens per step). 1024: benchmarks/H100x1.md, steady-state
# steps of its logs (--matmul-dtype=bf16 and =e4m3).
LLMQ_PUBLISHED = {
    ("qwen2.5-0.5b", 2048, "bf16"): (144_000, 32, 524_288), ("qwen2.5-1.5b", 2048, "bf16"): (58_000, 16, 524_288),
    ("qwen2.5-3b", 2048, "bf16"): (30_000, 8, 524_288), ("qwen2.5-7b", 2048, "bf16"): (14_000, 4, 262_144),
    ("qwen2.5-0.5b", 1024, "bf16"): (149_000, 32, 524_288), ("qwen2.5-0.5b", 1024, "fp8"): (164_000, 32, 524_288),
    ("qwen2.5-1.5b", 1024, "bf16"): (59_000, 32, 524_288), ("qwen2.5-1.5b", 1024, "fp8"): (73_000, 32, 524_288),
    ("qwen2.5-3b", 1024, "bf16"): (31_000, 16, 524_288), ("qwen2.5-3b", 1024, "fp8"): (40_000, 16, 524_288),
    ("qwen2.5-7b", 1024, "bf16"): (13_800, 4, 524_288), ("qwen2.5-7b", 1024, "fp8"): (19_100, 16, 524_288),
}


def load(path):
    runs = {}
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except ValueError:
                print(f"{path}:{n}: not JSON, skipped", file=sys.stderr)
                continue
            if isinstance(r, dict) and "row" in r and "bench_impl" in r:
                runs[(r["row"], r["bench_impl"])] = r
    return runs


def cell(r, key, fmt):
    if r is None:
        return "not run"
    if "error" in r or key not in r:
        return "failed"
    return fmt(r[key])


def tok(v):
    return f"{int(round(v)):,}"


def gib(v):
    return f"{v:.2f}"


def published(model, batch, seq, accum, kind, run):
    """llmq's figure for this model, context and matmul type ("N/A" without one)
    and ours over it when the row has llmq's context and tokens per optimizer
    step (the micro batch may differ: llmq's is printed beside its figure)."""
    pub = LLMQ_PUBLISHED.get((model, int(seq), kind))
    if not pub:
        return ["N/A", "N/A"]
    tps, pub_batch, step_tokens = pub
    same = int(batch) * int(seq) * int(accum) == step_tokens
    ok = same and run and "error" not in run and "tokens_per_s" in run
    return [f"{tok(tps)} at {pub_batch}x{seq}", f"{run['tokens_per_s'] / tps:.2f}x" if ok else "N/A"]


def tuned_note(done):
    """The heading's note on GEMM choices for a column's successful runs."""
    n = sum(1 for r in done if r.get("gemm_choices") == "tuned")
    if n == 0:
        return []
    return ["tuned GEMMs" if n == len(done) else f"tuned GEMMs in {n} of {len(done)} rows"]


def table(runs, rows):
    eager = any(impl == "eager" for _, impl in runs)
    fp8 = any(impl == "ours-fp8" for _, impl in runs)
    ids = {spec.split()[0] for spec in rows}   # the notes count the rows shown
    done = [r for (rid, impl), r in runs.items() if rid in ids and impl == "ours" and "error" not in r]
    ours_head = "ours tok/s" + "".join(f" ({n})" for n in tuned_note(done))
    head = ["shape", ours_head, "torch.compile tok/s", "ours/compile", "ours GiB", "compile GiB"]
    if eager:
        head += ["eager tok/s", "eager GiB"]
    head += ["llmq (published, H100) tok/s", "ours/llmq"]
    if fp8:
        f8 = [r for (rid, impl), r in runs.items() if rid in ids and impl == "ours-fp8" and "error" not in r]
        notes = tuned_note(f8)
        lm_head = {r["fp8_lm_head"] for r in f8 if "fp8_lm_head" in r}
        if lm_head:   # which way the LM head's GEMMs ran (train.fp8_lm_head); "mixed" if the runs differ
            notes.append("LM head " + ("mixed" if len(lm_head) > 1 else "in FP8" if 1 in lm_head else "in bf16"))
        head += ["ours fp8 tok/s" + (" (" + ", ".join(notes) + ")" if notes else ""), "fp8 GiB",
                 "llmq fp8 (published, H100)", "fp8/llmq fp8"]
    lines, errors = [head], []
    for spec in rows:
        rid, model, batch, seq, accum = spec.split()
        ours, comp, eag = runs.get((rid, "ours")), runs.get((rid, "compile")), runs.get((rid, "eager"))
        ours8 = runs.get((rid, "ours-fp8"))
        ratio = "N/A"
        if ours and comp and "error" not in ours and "error" not in comp and comp.get("tokens_per_s"):
            ratio = f"{ours['tokens_per_s'] / comp['tokens_per_s']:.2f}x"
        attn = f", {ours['attention']}" if ours and "attention" in ours else ""
        if ours and ours.get("master", "fp32") != "fp32":   # --master-weights split
            attn += f", {ours['master']} master"
        if ours and ours.get("states", "fp32") != "fp32":   # --optimizer-states bf16
            attn += f", {ours['states']} states"
        acc = f" x{accum} acc" if int(accum) > 1 else ""
        line = [f"{model} {batch}x{seq}{acc}{attn}", cell(ours, "tokens_per_s", tok), cell(comp, "tokens_per_s", tok),
                ratio, cell(ours, "peak_mem_gib", gib), cell(comp, "peak_mem_gib", gib)]
        if eager:
            line += [cell(eag, "tokens_per_s", tok), cell(eag, "peak_mem_gib", gib)]
        line += published(model, batch, seq, accum, "bf16", ours)
        if fp8:
            line += [cell(ours8, "tokens_per_s", tok), cell(ours8, "peak_mem_gib", gib)]
            line += published(model, batch, seq, accum, "fp8", ours8)
        lines.append(line)
        for impl, r in (("ours", ours), ("ours-fp8", ours8), ("compile", comp), ("eager", eag)):
            if r and "error" in r:
                errors.append(f"{rid} {impl}: {r['error']}")
    width = [max(len(l[i]) for l in lines) for i in range(len(head))]
    out = []
    for l in lines:
        out.append("  ".join(l[0].ljust(width[0]) if i == 0 else l[i].rjust(width[i]) for i in range(len(l))))
    return out + errors


def main():
    if len(sys.argv) < 3:
        print("usage: bench_table.py BENCH_JSONL 'ID MODEL BATCH SEQ ACCUM'...", file=sys.stderr)
        return 2
    for spec in sys.argv[2:]:
        parts = spec.split()
        if len(parts) != 5 or not all(p.isdigit() and int(p) > 0 for p in parts[2:]):
            print(f"bench_table.py: row '{spec}': want 'ID MODEL BATCH SEQ ACCUM' (positive integers)",
                  file=sys.stderr)
            return 2
    try:
        runs = load(sys.argv[1])
    except OSError as e:
        print(f"bench_table.py: {sys.argv[1]}: {e.strerror}", file=sys.stderr)
        return 2
    print("\n".join(table(runs, sys.argv[2:])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
