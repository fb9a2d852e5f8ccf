#!/bin/bash
# The CUDA suite for machines without a GPU; closes with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh   # bad, finish
ok() { echo "PASS $1"; pass=$((pass + 1)); }   # this suite's word for a pass
tmp=$(mktemp -d /tmp/llmc-cuda-ci.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bin=${BUILD:-build}/llmc-train-cuda
# The CUDA runtime maps memory where ASan's shadow gap would be.
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0}

if make -s cuda SAN="${SAN:-0}" > "$tmp/build.log" 2>&1 && [[ -x $bin ]]; then ok "make cuda"
else bad "make cuda"; tail -30 "$tmp/build.log"; finish; fi

# expect NAME WANT_EXIT WANT_TEXT CMD...: exit status and a phrase of the output
expect() {
    local name=$1 want=$2 text=$3; shift 3
    "$@" > "$tmp/out" 2>&1
    local rc=$?
    if [[ $rc -eq $want ]] && grep -qF -- "$text" "$tmp/out"; then ok "$name"
    else bad "$name (exit $rc, want $want and '$text')"; head -5 "$tmp/out"; fi
}

# The split master weights' arithmetic (runtime/cuda/master_split.h), on the CPU.
if make -s "${BUILD:-build}/master_split_test" SAN="${SAN:-0}" > "$tmp/ms.log" 2>&1 &&
   "${BUILD:-build}/master_split_test" > "$tmp/ms.out" 2>&1; then ok "split master weights: $(tail -1 "$tmp/ms.out")"
else bad "split master weights"; cat "$tmp/ms.log"; tail -12 "$tmp/ms.out"; fi

# ZeRO-2/3's shards, units and window ownership (runtime/cuda/zero_layout.c), on the CPU.
if make -s "${BUILD:-build}/zero_layout_test" SAN="${SAN:-0}" > "$tmp/zl.log" 2>&1 &&
   "${BUILD:-build}/zero_layout_test" > "$tmp/zl.out" 2>&1; then ok "ZeRO layout: $(tail -1 "$tmp/zl.out")"
else bad "ZeRO layout"; cat "$tmp/zl.log"; tail -12 "$tmp/zl.out"; fi

# The GEMM choices file (runtime/cuda/gemm_choices.c), on the CPU.
if make -s "${BUILD:-build}/gemm_choices_test" SAN="${SAN:-0}" > "$tmp/gc.log" 2>&1 &&
   "${BUILD:-build}/gemm_choices_test" "$tmp" > "$tmp/gc.out" 2>&1; then ok "GEMM choices file: $(tail -1 "$tmp/gc.out")"
else bad "GEMM choices file"; cat "$tmp/gc.log"; tail -12 "$tmp/gc.out"; fi

# Parameter counts of the published checkpoints (Qwen2.5-0.5B: 494,032,768; 1.5B: 1,543,714,304).
expect "qwen2.5-0.5b parameter count" 0 "parameters 494032768" $bin params --model qwen2.5-0.5b
expect "qwen2.5-1.5b parameter count" 0 "parameters 1543714304" $bin params --model qwen2.5-1.5b
expect "HF tensor names" 0 "model.layers.23.self_attn.k_proj.bias" $bin params --model qwen2.5-0.5b
cat > "$tmp/config.json" <<'JSON'
{"model_type": "qwen2", "num_hidden_layers": 24, "hidden_size": 896, "num_attention_heads": 14,
 "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936, "rope_theta": 1000000.0,
 "rms_norm_eps": 1e-06, "tie_word_embeddings": false}
JSON
# Untied: one more [vocab, hidden] matrix (lm_head.weight).
expect "config.json, untied head" 0 "parameters 630167424" $bin params --config "$tmp/config.json"
expect "config.json lm_head" 0 "lm_head.weight" $bin params --config "$tmp/config.json"
echo '{"model_type": "qwen2", "hidden_size": 896}' > "$tmp/partial.json"
expect "config.json missing keys" 2 "num_hidden_layers" $bin params --config "$tmp/partial.json"
echo '{"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 100, "vocab_size": 512}' > "$tmp/odd.json"
expect "shape the kernels cannot take" 1 "multiples of 8" $bin params --config "$tmp/odd.json"
expect "unknown model" 2 "unknown model 'qwen9'" $bin params --model qwen9
expect "bad integer option" 2 "bad integer" $bin bench --model tiny --batch x
expect "unknown option" 2 "unknown option '--frobnicate'" $bin bench --frobnicate
expect "unknown command" 2 "unknown command 'train'" $bin train
expect "check needs its files" 2 "check needs" $bin check --config "$tmp/config.json"
expect "run without a plan" 2 "usage: llmc-train-cuda run" $bin run
expect "run: the one loop's options (--eval-shards)" 2 "--eval-shards DIR" $bin run
expect "run with a missing plan" 2 "$tmp/nope.json" $bin run "$tmp/nope.json"
echo '{"llmc_plan_version": 1' > "$tmp/broken.json"
expect "run with a broken plan" 2 "broken.json" $bin run "$tmp/broken.json"
expect "help" 0 "run PLAN.json" $bin --help
echo '{"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512, "head_dim": 16}' > "$tmp/qwen3.json"
expect "Qwen3 (qk_norm) refused" 2 "qk_norm" $bin params --config "$tmp/qwen3.json"
if make -s attn-check SAN="${SAN:-0}" > "$tmp/attn.log" 2>&1; then ok "make attn-check"
else bad "make attn-check"; tail -20 "$tmp/attn.log"; fi
expect "attention documents for cuDNN's ragged layout" 0 "5 passed, 0 failed" ${BUILD:-build}/attn_check --documents
# fp8_check runs on the GPU machine (device.sh's fp8 and fp8-san); here it builds, and
# a section it does not have is refused before any CUDA call
if make -s fp8-check SAN="${SAN:-0}" > "$tmp/fp8.log" 2>&1; then ok "make fp8-check"
else bad "make fp8-check"; tail -20 "$tmp/fp8.log"; fi
expect "fp8_check: an unknown section refused" 2 "unknown section 'gemms' (want quant, gemm, fused, norm or loss)" \
    ${BUILD:-build}/fp8_check quant gemms
# the cross-entropy experiment runs on the GPU machine; here it builds
if make -s ce-variants SAN="${SAN:-0}" > "$tmp/cev.log" 2>&1; then ok "make ce-variants"
else bad "make ce-variants"; tail -20 "$tmp/cev.log"; fi
# gemm_sm90_check runs on the GPU machine (device.sh's gemm-sm90); here it builds (the
# sm_90a kernels compile) and refuses a bad argument before any CUDA call
if make -s gemm-sm90-check SAN="${SAN:-0}" > "$tmp/sm90.log" 2>&1; then ok "make gemm-sm90-check"
else bad "make gemm-sm90-check"; tail -20 "$tmp/sm90.log"; fi
expect "gemm_sm90_check: an unknown model refused" 2 "no model '13b'" ${BUILD:-build}/gemm_sm90_check --time --models 3b,13b
expect "gemm_sm90_check: --sustain 0 refused" 2 "--sustain takes 1 to 600 seconds, not '0'" \
    ${BUILD:-build}/gemm_sm90_check --sustain 0
# kernel_trace (a CUPTI trace preloaded into a CUDA program, bench/cuda) builds; gpu_gaps.py
# finds the GPU's idle time in a small trace (two 5 us gaps, one 17 ms gap left out as
# the host's own work), and refuses a record that ends before it starts
if make -s kernel-trace SAN="${SAN:-0}" > "$tmp/kt.log" 2>&1; then ok "make kernel-trace"
else bad "make kernel-trace"; tail -20 "$tmp/kt.log"; fi
printf '0\t1000000\tkernel\tgemm\n500000\t1005000\tmemcpy\t8 bytes\n1010000\t2000000\tkernel\tswiglu\n2000000\t3000000\tkernel\tgemm\n20000000\t21000000\tkernel\tswiglu\n21005000\t22000000\tkernel\tgemm\n' > "$tmp/trace.tsv"
expect "gpu_gaps: the idle time of a trace" 0 "busy 4.99 ms, idle in short gaps 0.010 ms (0.20% of busy + idle), 2 gaps, 6 records" \
    python3 bench/cuda/gpu_gaps.py "$tmp/trace.tsv"
expect "gpu_gaps: the last 2.5 ms" 0 "busy 2.00 ms, idle in short gaps 0.005 ms (0.25% of busy + idle), 1 gaps, 2 records" \
    python3 bench/cuda/gpu_gaps.py "$tmp/trace.tsv" --last-ms 2.5
printf '0\t10\tkernel\ta\n9\t8\tkernel\tb\n' > "$tmp/trace_bad.tsv"
expect "gpu_gaps: a record that ends before it starts refused" 1 "trace_bad.tsv:2: ends before it starts" \
    python3 bench/cuda/gpu_gaps.py "$tmp/trace_bad.tsv"
# power_summary.py (device.sh llmq1k's power and SM clock): busy samples only, a sample
# with a missing value or cut short skipped; a file without dmon's header refused
printf '# gpu pwr gtemp mtemp mclk pclk\n# Idx W C C MHz MHz\n 0 75 30 35 2619 1980\n 0 699 60 55 2619 1395\n 0 700 61 55 2619 1335\n 0 650 61 55 2619 1755\n 0 698 61 55 2619 -\n 0 69\n' > "$tmp/dmon.txt"
expect "power_summary: power and clock of the busy samples" 0 "pclk MHz: p10 1335, median 1395, p90 1755, max 1755 (3 busy samples)" \
    python3 bench/cuda/power_summary.py "$tmp/dmon.txt"
expect "power_summary --json: the medians as one object" 0 '{"power_w_median": 699.0, "sm_mhz_median": 1395.0, "power_samples": 3}' \
    python3 bench/cuda/power_summary.py --json "$tmp/dmon.txt"
printf 'gpu pwr\n' > "$tmp/dmon_bad.txt"
expect "power_summary: no dmon header refused" 1 "dmon_bad.txt:1: a sample before the header line" \
    python3 bench/cuda/power_summary.py "$tmp/dmon_bad.txt"
# What the CUDA backend does not do yet is refused before any rank starts (cu_unsupported).
python3 - tests/cpu/tiny_plan.json "$tmp/zero3.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["model"].update(heads=2, kv_heads=2, head_dim=16)
p["parallel"].update(zero_stage=3, world_size=2, data_parallel=2)
p["train"]["global_batch"] = 2 * p["train"]["global_batch"]
json.dump(p, open(sys.argv[2], "w"))
PY
# ZeRO-2/3 and fine-tuning on several ranks pass the plan check (then: no GPU here)
expect "run: ZeRO-3 on 2 ranks accepted" 1 "no CUDA device" $bin run "$tmp/zero3.json"
# LLMC_TRANSPORT=solo (one rank of an N-rank job alone: bench's memory measurement) is
# refused by run: it measures, it does not train
expect "run: LLMC_TRANSPORT=solo refused" 1 "LLMC_TRANSPORT=solo measures one rank's memory" \
    env LLMC_TRANSPORT=solo $bin run "$tmp/zero3.json"
# The number formats (issue 31) through backend_caps.h's CUDA row, as llmc refuses them
fmt_plan() {   # OUT KEY=JSON...: the tiny plan with train/parallel keys set
    python3 - tests/cpu/tiny_plan.json "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["model"].update(heads=2, kv_heads=2, head_dim=16)
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1); a, b = k.split(".")
    p[a][b] = json.loads(v)
json.dump(p, open(sys.argv[2], "w"))
PY
}
fmt_plan "$tmp/f8z3.json" 'train.precision="fp8"' parallel.zero_stage=3
expect "run: fp8 with ZeRO-3 refused" 2 "train.precision = fp8 with ZeRO-3" $bin run "$tmp/f8z3.json"
fmt_plan "$tmp/f8.json" 'train.precision="fp8"' parallel.zero_stage=2
expect "run: fp8 with ZeRO-2 accepted" 1 "no CUDA device" $bin run "$tmp/f8.json"
fmt_plan "$tmp/splitz2.json" 'train.master_weights="split"' parallel.zero_stage=2
expect "run: split master with ZeRO-2 refused" 2 "train.master_weights = split with ZeRO-2" $bin run "$tmp/splitz2.json"
fmt_plan "$tmp/statesoff.json" 'train.optimizer_states="bf16"' 'parallel.offload="optimizer"'
expect "run: bf16 moments with offload refused" 2 "train.optimizer_states = bf16 with offload" $bin run "$tmp/statesoff.json"
fmt_plan "$tmp/formats.json" 'train.optimizer_states="bf16"' 'train.master_weights="split"' 'train.precision="fp8"'
expect "run: fp8, split master, bf16 moments accepted" 1 "no CUDA device" $bin run "$tmp/formats.json"
python3 - tests/cpu/tiny_plan.json "$tmp/lora.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["model"].update(heads=2, kv_heads=2, head_dim=16)
p["finetune"] = {"method": "lora", "lora_rank": 4, "lora_alpha": 8, "lora_dropout": 0.0, "lora_target": ["q_proj"],
                 "rslora": False, "freeze_layers": 1}
json.dump(p, open(sys.argv[2], "w"))
PY
expect "run: LoRA rank 4 refused" 2 "lora_rank = 4: the CUDA backend takes ranks that are multiples of 8" $bin run "$tmp/lora.json"
python3 - "$tmp/lora.json" "$tmp/lora2.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["finetune"]["lora_rank"] = 8
p["parallel"].update(world_size=2, data_parallel=2)
p["train"]["global_batch"] = 2 * p["train"]["global_batch"]
json.dump(p, open(sys.argv[2], "w"))
PY
expect "run: LoRA on 2 ranks accepted" 1 "no CUDA device" $bin run "$tmp/lora2.json"
# bench/cuda/run.sh: its settings are checked before anything is built or run,
# torch_bench.py knows every model of its rows, and the table of hand-made
# results (tests/cuda/bench_table_input.jsonl: not measurements; a failed run,
# one not run, a line that is not JSON, an eager run) is as expected.
if bash -n bench/cuda/run.sh; then ok "bench/cuda/run.sh parses"; else bad "bench/cuda/run.sh parses"; fi
for f in tests/cuda/device.sh tests/cuda/trust.sh; do   # the GPU machine's scripts: no GPU here, but they parse
    if bash -n "$f"; then ok "$f parses"; else bad "$f parses"; fi
done
expect "BENCH_SHAPES: unknown row" 2 "BENCH_SHAPES: unknown row '3b-4096' (rows: 0.5b-2048 1.5b-2048" \
    env BENCH_SHAPES="1.5b-2048,3b-4096" bash bench/cuda/run.sh "$tmp/bench-bad"
expect "BENCH_STEPS: not a number" 2 "take a positive integer, not 'ten'" env BENCH_STEPS=ten bash bench/cuda/run.sh "$tmp/bench-bad"
expect "BENCH_PHASES: 0 or 1" 2 "BENCH_PHASES takes 0 or 1, not 'yes'" env BENCH_PHASES=yes bash bench/cuda/run.sh "$tmp/bench-bad"
if [[ ! -e $tmp/bench-bad ]]; then ok "bad settings write nothing"; else bad "bad settings write nothing"; fi
mapfile -t bench_rows < <(bash bench/cuda/run.sh --rows)
expect "run.sh rows: 3B at 2048, 1.5B at 4096 and 8192" 0 "3b-2048 qwen2.5-3b 4 2048 1" bash bench/cuda/run.sh --rows
expect "BENCH_ACCUM_STEPS: not a number" 2 "take a positive integer, not '0'" \
    env BENCH_SHAPES=llmq BENCH_ACCUM_STEPS=0 bash bench/cuda/run.sh "$tmp/bench-bad"
if [[ ${#bench_rows[@]} -eq 12 && ${bench_rows[3]} == "1.5b-4096 qwen2.5-1.5b 2 4096 1" &&
      ${bench_rows[4]} == "1.5b-8192 qwen2.5-1.5b 1 8192 1" ]]; then ok "run.sh: five rows, then three, then four"
else bad "run.sh: five rows, then three, then four: ${bench_rows[*]}"; fi
# llmq's published shapes: its micro batch, 524,288 tokens per optimizer step
if [[ ${bench_rows[5]} == "0.5b-llmq qwen2.5-0.5b 32 2048 8" && ${bench_rows[6]} == "1.5b-llmq qwen2.5-1.5b 16 2048 16" &&
      ${bench_rows[7]} == "3b-llmq qwen2.5-3b 8 2048 32" ]]; then ok "run.sh: llmq's shapes"
else bad "run.sh: llmq's shapes: ${bench_rows[*]:5}"; fi
# llmq's benchmarks/H100x1.md: T = 1024, its micro batches, 524,288 tokens per step
if [[ ${bench_rows[8]} == "0.5b-llmq1k qwen2.5-0.5b 32 1024 16" && ${bench_rows[9]} == "1.5b-llmq1k qwen2.5-1.5b 32 1024 16" &&
      ${bench_rows[10]} == "3b-llmq1k qwen2.5-3b 16 1024 32" && ${bench_rows[11]} == "7b-llmq1k qwen2.5-7b 8 1024 64" ]]
then ok "run.sh: llmq's 1024-token shapes"
else bad "run.sh: llmq's 1024-token shapes: ${bench_rows[*]:8}"; fi
expect "BENCH_FP8: 0 or 1" 2 "BENCH_FP8 takes 0 or 1, not 'on'" env BENCH_FP8=on bash bench/cuda/run.sh "$tmp/bench-bad"
expect "BENCH_GEMM_TUNE: 0 or 1" 2 "BENCH_GEMM_TUNE takes 0 or 1, not 'yes'" \
    env BENCH_GEMM_TUNE=yes bash bench/cuda/run.sh "$tmp/bench-bad"
expect "BENCH_POWER: 0 or 1" 2 "BENCH_POWER takes 0 or 1, not 'on'" \
    env BENCH_POWER=on bash bench/cuda/run.sh "$tmp/bench-bad"
expect "bench_table: a row without ACCUM" 2 "want 'ID MODEL BATCH SEQ ACCUM'" \
    python3 bench/cuda/bench_table.py tests/cuda/bench_table_input.jsonl "1.5b-2048 qwen2.5-1.5b 4 2048"
python3 - bench/cuda/torch_bench.py "${bench_rows[@]}" > "$tmp/shapes.out" 2>&1 <<'PY'
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
shapes = next(n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SHAPES")
known = {k.value for k in shapes.keys}
missing = sorted({r.split()[1] for r in sys.argv[2:]} - known)
print("missing:", missing) if missing else print("every row's model is in SHAPES")
PY
expect "torch_bench.py takes every row's model" 0 "every row's model is in SHAPES" cat "$tmp/shapes.out"
python3 bench/cuda/bench_table.py tests/cuda/bench_table_input.jsonl "${bench_rows[@]}" > "$tmp/table.txt" 2>&1
if diff -u tests/cuda/bench_table_expected.txt "$tmp/table.txt"; then ok "bench table from hand-made results"
else bad "bench table from hand-made results"; fi
# the "tuned GEMMs" note of ours' column: every run tuned, or some
printf '%s\n' '{"row":"0.5b-2048","bench_impl":"ours","tokens_per_s":1000,"peak_mem_gib":1,"gemm_choices":"tuned"}' \
    '{"row":"3b-2048","bench_impl":"ours","tokens_per_s":500,"peak_mem_gib":2}' > "$tmp/tuned.jsonl"
expect "bench table: ours tuned in some rows" 0 "ours tok/s (tuned GEMMs in 1 of 2 rows)" \
    python3 bench/cuda/bench_table.py "$tmp/tuned.jsonl" "0.5b-2048 qwen2.5-0.5b 8 2048 1" "3b-2048 qwen2.5-3b 4 2048 1"
expect "bench table: ours tuned in every row" 0 "ours tok/s (tuned GEMMs)  " \
    python3 bench/cuda/bench_table.py "$tmp/tuned.jsonl" "0.5b-2048 qwen2.5-0.5b 8 2048 1"
if ! nvidia-smi -L > /dev/null 2>&1 && [[ ${SAN:-0} != 1 ]]; then   # run.sh builds build/, not build/san
    # BENCH_GEMM_TUNE=1: both columns' tuning runs fail here; each timed run runs untuned, unmarked
    BENCH_SHAPES=0.5b-2048 BENCH_GEMM_TUNE=1 BENCH_TORCH=0 BENCH_STEPS=1 BENCH_TIMEOUT=120 \
        bash bench/cuda/run.sh "$tmp/bench-tune" > "$tmp/tune.out" 2> "$tmp/tune.err"
    rc=$?
    if [[ $rc -eq 1 ]] && grep -q "0.5b-2048: the bf16 tuning run failed" "$tmp/tune.err" &&
       grep -q "0.5b-2048: the fp8 tuning run failed" "$tmp/tune.err" &&
       (( $(grep -c '"error"' "$tmp/bench-tune/bench.jsonl") == 2 )) && ! grep -q "tuned" "$tmp/tune.out"; then
        ok "bench BENCH_GEMM_TUNE=1 without a GPU: both tuning runs' failures said, the runs not marked tuned"
    else bad "bench BENCH_GEMM_TUNE=1 without a GPU (exit $rc)"; cat "$tmp/tune.err" "$tmp/tune.out"; fi
    # Every run fails without a GPU: each is reported, the others still run, exit 1.
    BENCH_SHAPES=0.5b-2048,1.5b-8192 BENCH_STEPS=1 BENCH_TIMEOUT=120 bash bench/cuda/run.sh "$tmp/bench" \
        > "$tmp/bench.out" 2> "$tmp/bench.err"
    rc=$?
    n_err=$(grep -c '"error"' "$tmp/bench/bench.jsonl" 2>/dev/null)
    if [[ $rc -eq 1 && $n_err -eq 6 ]] && grep -q "^qwen2.5-1.5b 1x8192 .*failed.*failed.*N/A$" "$tmp/bench.out" &&
       grep -q "^0.5b-2048 ours: exit 1: " "$tmp/bench.out"; then ok "bench without a GPU: every run reported"
    else bad "bench without a GPU: every run reported (exit $rc, $n_err error lines)"; cat "$tmp/bench.out"; fi
fi
if ! nvidia-smi -L > /dev/null 2>&1; then
    expect "bench without a GPU" 1 "no CUDA device" $bin bench --model tiny --steps 1
    expect "attn_check without a GPU" 1 "no GPU" ${BUILD:-build}/attn_check
fi
expect "bench --zero 4 refused (ZeRO stages 0-3)" 2 "--zero" $bin bench --zero 4 --model tiny
expect "LLMC_TRANSPORT unknown: the words it takes" 1 "use nccl or host" env LLMC_TRANSPORT=shm $bin bench --model tiny
# the zero section's memory check (device.sh): every case's estimate from `llmc explain`
# of its plan, then within 10% passes and 20% off fails
if make -s ${BUILD:-build}/llmc SAN="${SAN:-0}" > "$tmp/llmc.log" 2>&1 &&
   python3 tests/cuda/zero_check.py estimates "$tmp" ${BUILD:-build}/llmc > "$tmp/est.log" 2>&1; then
    read -r n lo h3 < <(python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); print(len(e), min(e.values()), e["h-z3-r2"])' \
        "$tmp/zero_estimates.json")
    g_ok=$(python3 -c "print($h3 * 1.05)") g_bad=$(python3 -c "print($h3 * 1.2)")
    want=$(python3 -c 'import sys; sys.path.insert(0, "tests/cuda"); import zero_check as z; print(len(z.CASES) + len(z.HALF))')
    if [[ $n -eq $want ]] && python3 -c "import sys; sys.exit(not $lo > 0)" &&
       python3 tests/cuda/zero_check.py mem "$tmp" h-z3-r2 "$g_ok" > "$tmp/m1" &&
       ! python3 tests/cuda/zero_check.py mem "$tmp" h-z3-r2 "$g_bad" > "$tmp/m2" &&
       ! python3 tests/cuda/zero_check.py mem "$tmp" zres-a 1 > "$tmp/m3"; then
        ok "zero_check.py: $n cases estimated by llmc explain; 5% off passes, 20% off and no estimate fail"
    else bad "zero_check.py estimates/mem ($n cases, smallest $lo)"; cat "$tmp/est.log" "$tmp/m1" "$tmp/m2" 2>/dev/null; fi
else bad "zero_check.py estimates"; tail -5 "$tmp/llmc.log" "$tmp/est.log"; fi
# zero_check.py's tolerance comparison on made-up runs: a difference after the first
# update passes; one at step 1 (computed from the same weights) fails; the early bound
# is relative: 0.5% of a loss of 8 passes (0.04 absolute), 2% fails
python3 - "$tmp/zc" <<'PY' > "$tmp/zc.log" 2>&1
import json, os, sys
sys.path.insert(0, "tests/cuda")
import zero_check as z
d = sys.argv[1]
def run(name, bump_at, base=5.0, rel=0.0):
    os.makedirs(f"{d}/run-{name}", exist_ok=True)
    with open(f"{d}/run-{name}/metrics.jsonl", "w") as f:
        for i in range(1, z.STEPS + 1):
            loss = (base - 0.01 * i) * (1 + (rel if i >= 3 else 0)) + (2e-5 if i >= bump_at else 0)
            f.write(json.dumps({"step": i, "loss": loss, "lr": 0 if i == 1 else 1e-3, "grad_norm": 1.0}) + "\n")
run("z1-full-r1", 10**9); run("z1-full-r2", 3); run("z1-full-r4", 1)
run("z1-lora-r1", 10**9, 8.0); run("z2-lora-r2", 10**9, 8.0, 0.005); run("z3-lora-r2", 10**9, 8.0, 0.02)
got = (z.cmp(d, "z1-full-r1", "z1-full-r2", "tol"), z.cmp(d, "z1-full-r1", "z1-full-r4", "tol"),
       z.cmp(d, "z1-lora-r1", "z2-lora-r2", "tol"), z.cmp(d, "z1-lora-r1", "z3-lora-r2", "tol"))
sys.exit(0 if got == (0, 1, 0, 1) else 1)
PY
if [[ $? -eq 0 ]]; then ok "zero_check.py tol: from the same weights within 1e-6, later within the trajectory's relative tolerances"
else bad "zero_check.py tol on made-up runs"; cat "$tmp/zc.log"; fi
# compare_runs.py on made-up runs: near the same losses pass; a final loss 20% apart
# fails; two final losses under the floor (a run that has learnt its data) pass
python3 - "$tmp/cr" <<'PY'
import json, os, sys
os.makedirs(sys.argv[1], exist_ok=True)
def run(name, end):
    with open(f"{sys.argv[1]}/{name}.jsonl", "w") as f:
        for i in range(1, 201):
            f.write(json.dumps({"step": i, "loss": end + 2.0 * (200 - i) / 200}) + "\n")
run("a", 0.5); run("b", 0.51); run("c", 0.6); run("d", 1e-5); run("e", 1.3e-5)
PY
cr() { python3 tests/cuda/compare_runs.py "$tmp/cr/$1.jsonl" "$tmp/cr/$2.jsonl" --early 10 --tol-early 0.2 > "$tmp/cr/$1$2.log" 2>&1; }
if cr a b && ! cr a c && cr d e; then ok "compare_runs.py: 2% apart passes, 20% fails, both under the floor pass"
else bad "compare_runs.py on made-up runs"; cat "$tmp/cr/"*.log; fi
# the FP8 convergence check's comparison (issue 31): 0.5% apart passes, 2% fails, a cut run fails
if bash tests/cuda/fp8_converge.sh selftest > "$tmp/converge.log" 2>&1; then ok "fp8_converge.sh selftest"
else bad "fp8_converge.sh selftest"; tail -8 "$tmp/converge.log"; fi
finish
