#!/usr/bin/env python3
"""The table bench/cuda/run.sh prints: one line per benchmark row.

    bench_table.py BENCH_JSONL "ID MODEL BATCH SEQ ACCUM"...

BENCH_JSONL holds run.sh's lines: the JSON of one run (llmc-train-cuda bench or
torch_bench.py) tagged with "row" (the row ID) and "bench_impl" (ours, compile,
eager), or {"row", "bench_impl", "error"} for a run that failed. Columns: the
shape (micro batch x context, then "x ACCUM acc" when several micro-batches make
one optimizer step; the attention ours ran, and "split master" under
LLMC_MASTER=split), ours and torch.compile tokens/s and their ratio, each one's
peak GPU memory (GiB), then llmq's published tokens/s on one H100 — a fixed
reference from its README, with the micro batch it was measured at (2048-token
sequences, 524,288 tokens per optimizer step, bf16 weights and AdamW moments) —
and ours over it where the row has that shape (N/A elsewhere). An eager
column appears when the file has eager runs. A run that is missing prints
"not run", a failed one "failed" (its error follows the table).
"""
import json
import sys

# llmq (C++/CUDA trainer) README, "H100" table, bf16 rows: tokens/s and the micro
# batch, sequences of 2048 tokens, 524,288 tokens per optimizer step (the 7B row
# half that), --model-dtype=bf16 --opt-m-dtype=bf16 --opt-v-dtype=bf16.
LLMQ_PUBLISHED = {"qwen2.5-0.5b": (144_000, 32), "qwen2.5-1.5b": (58_000, 16), "qwen2.5-3b": (30_000, 8),
                  "qwen2.5-7b": (14_000, 4)}
LLMQ_SEQ = 2048
LLMQ_STEP_TOKENS = {"qwen2.5-7b": 262_144}
LLMQ_STEP_TOKENS_DEFAULT = 524_288


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


def table(runs, rows):
    eager = any(impl == "eager" for _, impl in runs)
    head = ["shape", "ours tok/s", "torch.compile tok/s", "ours/compile", "ours GiB", "compile GiB"]
    if eager:
        head += ["eager tok/s", "eager GiB"]
    head += ["llmq (published, H100) tok/s", "ours/llmq"]
    lines, errors = [head], []
    for spec in rows:
        rid, model, batch, seq, accum = spec.split()
        ours, comp, eag = runs.get((rid, "ours")), runs.get((rid, "compile")), runs.get((rid, "eager"))
        ratio = "N/A"
        if ours and comp and "error" not in ours and "error" not in comp and comp.get("tokens_per_s"):
            ratio = f"{ours['tokens_per_s'] / comp['tokens_per_s']:.2f}x"
        attn = f", {ours['attention']}" if ours and "attention" in ours else ""
        if ours and ours.get("master", "fp32") != "fp32":   # LLMC_MASTER=split
            attn += f", {ours['master']} master"
        acc = f" x{accum} acc" if int(accum) > 1 else ""
        line = [f"{model} {batch}x{seq}{acc}{attn}", cell(ours, "tokens_per_s", tok), cell(comp, "tokens_per_s", tok),
                ratio, cell(ours, "peak_mem_gib", gib), cell(comp, "peak_mem_gib", gib)]
        if eager:
            line += [cell(eag, "tokens_per_s", tok), cell(eag, "peak_mem_gib", gib)]
        pub, pub_batch = LLMQ_PUBLISHED.get(model, (None, None))
        line.append(f"{tok(pub)} at {pub_batch}x{LLMQ_SEQ}" if pub else "N/A")
        same = (pub and int(batch) == pub_batch and int(seq) == LLMQ_SEQ and
                int(batch) * int(seq) * int(accum) == LLMQ_STEP_TOKENS.get(model, LLMQ_STEP_TOKENS_DEFAULT))
        line.append(f"{ours['tokens_per_s'] / pub:.2f}x" if same and ours and "error" not in ours and
                    "tokens_per_s" in ours else "N/A")
        lines.append(line)
        for impl, r in (("ours", ours), ("compile", comp), ("eager", eag)):
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
