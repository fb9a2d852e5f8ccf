#!/bin/bash
# Everything the CUDA backend checks on a GPU machine, in one go (the device lease is
# short): build, correctness against HF/PyTorch, benchmark, two-GPU data parallelism.
#   tests/cuda/device.sh OUTDIR [quick]
# Logs go to OUTDIR; the last lines printed are the summary.
set -uo pipefail
out=${1:?usage: device.sh OUTDIR [quick]}
mode=${2:-full}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
note() { echo "$*" >> "$out/summary.txt"; }
: > "$out/summary.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
ngpu=$(nvidia-smi -L | wc -l)
if ! make -s cuda > "$out/build.log" 2>&1; then tail -40 "$out/build.log"; exit 1; fi
steps=200; [[ $mode == quick ]] && steps=50
python3 tests/cuda/check_vs_hf.py --bin build/llmc-train-cuda --work /tmp/chk --steps $steps > "$out/check.log" 2>&1
note "check: $(tail -1 "$out/check.log")"
cp /tmp/chk/curve.tsv "$out/" 2>/dev/null
python3 tests/cuda/check_vs_hf.py --bin build/llmc-train-cuda --work /tmp/chk_rc --steps 20 --recompute > "$out/check_recompute.log" 2>&1
note "check --recompute: $(tail -1 "$out/check_recompute.log")"
python3 tests/cuda/check_vs_hf.py --bin build/llmc-train-cuda --work /tmp/chk_eager --steps 20 --eager-attention > "$out/check_eager.log" 2>&1
note "check --eager-attention: $(tail -1 "$out/check_eager.log")"
for hd in 64 128; do
    python3 tests/cuda/check_vs_hf.py --bin build/llmc-train-cuda --work /tmp/chk_$hd --steps 20 --head-dim $hd > "$out/check_hd$hd.log" 2>&1
    note "check --head-dim $hd: $(tail -1 "$out/check_hd$hd.log")"
done
for model in "qwen2.5-0.5b 8" "qwen2.5-1.5b 4"; do
    set -- $model
    ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 2048 --steps 10 --warmup 3 --eager-attention \
        > "$out/eager_$1.json" 2> "$out/eager_$1.log"
    note "eager attention $1: $(cat "$out/eager_$1.json")"
done
if [[ $ngpu -ge 2 ]]; then
    for z in "" "--zero1"; do
        for r in 0 1; do
            RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
                ./build/llmc-train-cuda bench --model qwen2.5-0.5b --batch 8 --seq 2048 --steps 10 --warmup 3 $z \
                > "$out/dp${z}_$r.json" 2> "$out/dp${z}_$r.log" &
        done
        wait
        note "dp2 $z: $(cat "$out/dp${z}_0.json")"
    done
fi
./build/llmc-train-cuda bench --model qwen2.5-1.5b --batch 4 --seq 2048 --steps 10 --warmup 3 --recompute \
    > "$out/recompute.json" 2> "$out/recompute.log"
note "1.5b recompute: $(cat "$out/recompute.json")"
BENCH_TORCH=${BENCH_TORCH:-1} bash bench/cuda/run.sh "$out/bench" > "$out/bench.txt" 2>&1
cp "$out/bench/bench.jsonl" "$out/" 2>/dev/null
cat "$out/summary.txt"
grep -E "^(PASS|FAIL)" "$out/check.log" | grep FAIL | head -20
grep -E "worst|loss curve" "$out/check.log"
cat "$out/bench.txt" | tail -12
