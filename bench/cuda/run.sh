#!/bin/bash
# CUDA trainer benchmark: llmc-train-cuda against PyTorch+transformers
# (torch.compile, optionally eager) on the same shapes in the same run, on one GPU.
#   bench/cuda/run.sh [OUTDIR]      (on the GPU machine, from the repository root)
#   bench/cuda/run.sh --rows        the rows, one "ID MODEL BATCH SEQ" a line
# Writes OUTDIR/bench.jsonl (one JSON line per run, with its "row"; a run that
# failed is a line with "error") and OUTDIR/IMPL-ROW.log, and prints one table:
# shape, ours and torch.compile tokens/s, their ratio, the peak GPU memory of
# each, and llmq's published tokens/s on one H100 as a fixed reference (llmq's
# README figures for its 2048-token benchmark; N/A where it publishes none).
# A run that fails (out of memory, a crash, BENCH_TIMEOUT) is reported in its
# cell and the other runs still go; the script then exits 1 (2: bad settings).
#
# Rows (ID: model, micro batch x context, micro-batches per optimizer step):
#   0.5b-2048  qwen2.5-0.5b 8 x 2048        1.5b-4096  qwen2.5-1.5b 2 x 4096
#   1.5b-2048  qwen2.5-1.5b 4 x 2048        1.5b-8192  qwen2.5-1.5b 1 x 8192
#   3b-2048    qwen2.5-3b   4 x 2048        (these five, one step per micro-batch: the default)
#   0.5b-llmq  qwen2.5-0.5b 32 x 2048 x 8   1.5b-llmq  qwen2.5-1.5b 16 x 2048 x 16
#   3b-llmq    qwen2.5-3b   8 x 2048 x 32   (llmq's published H100 runs: its micro batch,
#              524,288 tokens per optimizer step; BENCH_SHAPES=llmq picks these three)
#   0.5b-llmq1k qwen2.5-0.5b 32 x 1024 x 16  3b-llmq1k qwen2.5-3b 16 x 1024 x 32
#   1.5b-llmq1k qwen2.5-1.5b 32 x 1024 x 16  7b-llmq1k qwen2.5-7b  8 x 1024 x 64
#              (llmq's benchmarks/H100x1.md: T = 1024, 524,288 tokens per step, bf16
#              master weights and moments; ours runs these with llmq's state sizes:
#              --master-weights split --optimizer-states bf16, 12 bytes a parameter;
#              BENCH_SHAPES=llmq1k picks these four; 7B full fine-tuning without offload,
#              at micro batch 8: llmq runs 4 in bf16 and 16 with recompute in FP8, ours
#              fits 8 without recompute in both and it halves the fp32 gradient
#              accumulations a step: 5% faster than 4 in bf16, 2026-12-04)
# Environment:
#   BENCH_SHAPES   the row IDs to run, space or comma separated; "llmq" and "all"
#                  name the sets (default: the five)
#   BENCH_FP8=0    no FP8 column (default: ours again with --fp8, precision = fp8, on every row)
#   BENCH_GEMM_TUNE=1  both columns' GEMMs (ours bf16 and FP8) as a tuned run chooses
#                  them: before each of ours, one optimizer step of two micro-batches
#                  times cuBLASLt's candidates for every GEMM shape into
#                  OUTDIR/gemm-choices-ROW-bf16.txt or -fp8.txt (LLMC_GEMM_TUNE=1), and
#                  the timed run takes its choices from that file (LLMC_GEMM_CHOICES: the
#                  same bits every run of the file); the table marks each column
#                  "tuned GEMMs" (a run whose tuning failed runs untuned and is not marked)
#   BENCH_TORCH=0  no PyTorch runs;  BENCH_COMPILE=0  no torch.compile runs
#   BENCH_EAGER=1  PyTorch eager as well (a column of its own)
#   BENCH_STEPS    timed steps (default 10, after 3 warm-up steps; rows of several
#                  micro-batches per step: BENCH_ACCUM_STEPS, default 2 after 1)
#   BENCH_TIMEOUT  seconds one run may take (default 900)
#   BENCH_POWER=1  nvidia-smi dmon beside each timed run (OUTDIR/IMPL-ROW.dmon): the
#                  busy samples' median power and SM clock go into its JSON line
#                  (power_w_median, sm_mhz_median, power_samples; bench/cuda/power_summary.py)
#   BENCH_PHASES=1 ours runs its timed steps again with an event after every
#                  operation (LLMC_PHASE_TIMES=1): the GPU time per phase lands in
#                  OUTDIR/ours-ROW.log (the step time in the table is unaffected)
set -uo pipefail
out=${1:-/tmp/llmc-cuda-bench}
steps=${BENCH_STEPS:-10}
accum_steps=${BENCH_ACCUM_STEPS:-2}
limit=${BENCH_TIMEOUT:-900}
export NCCL_NVLS_ENABLE=0

# ID MODEL BATCH SEQ ACCUM
default_rows=("0.5b-2048 qwen2.5-0.5b 8 2048 1" "1.5b-2048 qwen2.5-1.5b 4 2048 1" "3b-2048 qwen2.5-3b 4 2048 1"
              "1.5b-4096 qwen2.5-1.5b 2 4096 1" "1.5b-8192 qwen2.5-1.5b 1 8192 1")
llmq_rows=("0.5b-llmq qwen2.5-0.5b 32 2048 8" "1.5b-llmq qwen2.5-1.5b 16 2048 16" "3b-llmq qwen2.5-3b 8 2048 32")
llmq1k_rows=("0.5b-llmq1k qwen2.5-0.5b 32 1024 16" "1.5b-llmq1k qwen2.5-1.5b 32 1024 16"
             "3b-llmq1k qwen2.5-3b 16 1024 32" "7b-llmq1k qwen2.5-7b 8 1024 64")
all_rows=("${default_rows[@]}" "${llmq_rows[@]}" "${llmq1k_rows[@]}")
if [[ ${1:-} == --rows ]]; then printf '%s\n' "${all_rows[@]}"; exit 0; fi
ids=()
for r in "${all_rows[@]}"; do ids+=("${r%% *}"); done
rows=()
if [[ -n ${BENCH_SHAPES:-} ]]; then
    for want in ${BENCH_SHAPES//,/ }; do
        case $want in
            llmq) rows+=("${llmq_rows[@]}"); continue ;;
            llmq1k) rows+=("${llmq1k_rows[@]}"); continue ;;
            all) rows+=("${all_rows[@]}"); continue ;;
        esac
        hit=
        for r in "${all_rows[@]}"; do [[ ${r%% *} == "$want" ]] && hit=$r; done
        if [[ -z $hit ]]; then
            echo "bench/cuda/run.sh: BENCH_SHAPES: unknown row '$want' (rows: ${ids[*]}; sets: llmq llmq1k all)" >&2
            exit 2
        fi
        rows+=("$hit")
    done
else
    rows=("${default_rows[@]}")
fi
case ${BENCH_PHASES:-0} in
    0) ;;
    1) export LLMC_PHASE_TIMES=1 ;;
    *) echo "bench/cuda/run.sh: BENCH_PHASES takes 0 or 1, not '$BENCH_PHASES'" >&2; exit 2 ;;
esac
case ${BENCH_FP8:-1} in
    0|1) ;;
    *) echo "bench/cuda/run.sh: BENCH_FP8 takes 0 or 1, not '$BENCH_FP8'" >&2; exit 2 ;;
esac
case ${BENCH_GEMM_TUNE:-0} in
    0|1) ;;
    *) echo "bench/cuda/run.sh: BENCH_GEMM_TUNE takes 0 or 1, not '$BENCH_GEMM_TUNE'" >&2; exit 2 ;;
esac
case ${BENCH_POWER:-0} in
    0|1) ;;
    *) echo "bench/cuda/run.sh: BENCH_POWER takes 0 or 1, not '$BENCH_POWER'" >&2; exit 2 ;;
esac
for v in "$steps" "$accum_steps" "$limit"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench/cuda/run.sh: BENCH_STEPS, BENCH_ACCUM_STEPS and BENCH_TIMEOUT take a positive integer, not '$v'" >&2; exit 2; }
done

mkdir -p "$out" || exit 2
make -s cuda || { echo "bench/cuda/run.sh: make cuda failed" >&2; exit 1; }
: > "$out/bench.jsonl"

# One run: impl, row ID, command... Appends its JSON line tagged with the row
# (and "gemm_choices": "tuned" when RUN_TUNED=1), or an error line (exit status and
# the log's last line); never stops the script.
run() {
    local impl=$1 row=$2; shift 2
    local log="$out/$impl-$row.log" res="$out/$impl-$row.json" rc
    local dmon=$out/$impl-$row.dmon dm=
    echo "== $impl $row" >&2
    rm -f "$dmon"
    if [[ ${BENCH_POWER:-0} == 1 ]]; then nvidia-smi dmon -s pc -d 1 > "$dmon" 2>&1 & dm=$!; fi
    timeout --kill-after=30 "$limit" "$@" > "$res" 2> "$log"
    rc=$?
    local power=
    if [[ -n $dm ]]; then
        kill "$dm" 2>/dev/null; wait "$dm" 2>/dev/null
        power=$(python3 bench/cuda/power_summary.py --json "$dmon" 2>/dev/null)
    fi
    python3 - "$res" "$log" "$impl" "$row" "$rc" "${RUN_TUNED:-0}" "$power" >> "$out/bench.jsonl" <<'PY'
import json, sys
res, log, impl, row, rc, tuned, power = sys.argv[1:8]
line = None
for l in open(res, errors="replace"):
    if l.startswith("{"):
        try:
            line = json.loads(l)
        except ValueError:
            pass
if rc == "0" and line is not None:
    line["row"] = row
    line["bench_impl"] = impl
    if tuned == "1":
        line["gemm_choices"] = "tuned"
    if power:
        line.update(json.loads(power))
else:
    tail = [l.strip() for l in open(log, errors="replace") if l.strip()][-1:] or ["no output"]
    why = "timed out" if rc in ("124", "137") else f"exit {rc}"
    line = {"row": row, "bench_impl": impl, "error": f"{why}: {tail[0][:200]}"}
print(json.dumps(line))
PY
    [[ $rc == 0 ]] || { echo "$impl $row failed (exit $rc):" >&2; tail -n 3 "$log" >&2; }
}

# The timed and warm-up steps of a row: a step of several micro-batches is long
# enough to measure in two.
step_args() {   # ACCUM: sets the array sa
    if [[ $1 == 1 ]]; then sa=(--steps "$steps" --warmup 3); else sa=(--accum "$1" --steps "$accum_steps" --warmup 1); fi
}
# llmq's T = 1024 rows: its state sizes (bf16 master copy and moments)
state_args() {   # ID: sets the array st
    st=(); [[ $1 == *-llmq1k ]] && st=(--master-weights split --optimizer-states bf16)
}
# BENCH_GEMM_TUNE=1: one optimizer step of the row (two micro-batches where it has
# several) times cuBLASLt's candidates into a choices file; sets pre (the timed
# run's prefix) and tuned, both empty/0 when tuning is off or failed.
tune() {   # ID COLUMN (bf16 or fp8) BENCH ARGS...
    local id=$1 col=$2; shift 2
    pre=() tuned=0
    [[ ${BENCH_GEMM_TUNE:-0} == 1 ]] || return 0
    local gc tsa=(--steps 1 --warmup 0)
    gc=$(cd "$out" && pwd)/gemm-choices-$id-$col.txt
    rm -f "$gc"
    [[ $accum != 1 ]] && tsa=(--accum 2 --steps 1 --warmup 0)
    if LLMC_GEMM_TUNE=1 LLMC_GEMM_CHOICES=$gc timeout --kill-after=30 "$limit" ./build/llmc-train-cuda bench \
        "$@" "${tsa[@]}" > /dev/null 2> "$out/tune-$id-$col.log"; then
        pre=(env LLMC_GEMM_CHOICES="$gc") tuned=1
    else
        echo "bench/cuda/run.sh: $id: the $col tuning run failed (exit $?; $out/tune-$id-$col.log): its timed run chooses as untuned" >&2
    fi
}
for r in "${rows[@]}"; do
    read -r id model batch seq accum <<< "$r"
    step_args "$accum"; state_args "$id"
    base=(--model "$model" --batch "$batch" --seq "$seq" "${st[@]}")
    tune "$id" bf16 "${base[@]}"
    RUN_TUNED=$tuned run ours "$id" ${pre[@]+"${pre[@]}"} ./build/llmc-train-cuda bench "${base[@]}" "${sa[@]}"
    if [[ ${BENCH_FP8:-1} == 1 ]]; then
        tune "$id" fp8 "${base[@]}" --fp8
        RUN_TUNED=$tuned run ours-fp8 "$id" ${pre[@]+"${pre[@]}"} ./build/llmc-train-cuda bench "${base[@]}" "${sa[@]}" --fp8
    fi
done
if [[ ${BENCH_TORCH:-1} == 1 ]]; then
    if [[ ${BENCH_EAGER:-0} == 1 ]]; then
        for r in "${rows[@]}"; do
            read -r id model batch seq accum <<< "$r"
            step_args "$accum"
            run eager "$id" python3 bench/cuda/torch_bench.py --model "$model" --batch "$batch" --seq "$seq" "${sa[@]}"
        done
    fi
    if [[ ${BENCH_COMPILE:-1} == 1 ]]; then   # last: compiling is the slowest
        for r in "${rows[@]}"; do
            read -r id model batch seq accum <<< "$r"
            step_args "$accum"
            run compile "$id" python3 bench/cuda/torch_bench.py --model "$model" --batch "$batch" --seq "$seq" \
                "${sa[@]}" --compile
        done
    fi
fi
python3 bench/cuda/bench_table.py "$out/bench.jsonl" "${rows[@]}" || exit 2
# Exit 1 when a run failed (the table says which), after every row was tried.
! grep -q '"error"' "$out/bench.jsonl"
