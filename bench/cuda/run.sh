#!/bin/bash
# CUDA trainer benchmark: llmc-train-cuda against PyTorch+transformers (eager and
# torch.compile) on the same shapes in the same run, on one GPU.
#   bench/cuda/run.sh [OUTDIR]      (on the GPU machine, from the repository root)
# Writes OUTDIR/bench.jsonl (one JSON line per run) and prints a table.
# BENCH_TORCH=0 skips the PyTorch runs, BENCH_COMPILE=0 the torch.compile ones; BENCH_STEPS sets the timed steps (default 10).
set -uo pipefail
out=${1:-/tmp/llmc-cuda-bench}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
steps=${BENCH_STEPS:-10}
make -s cuda || exit 1
: > "$out/bench.jsonl"
run() {   # label, command...
    local label=$1; shift
    echo "== $label" >&2
    "$@" 2> "$out/$label.log" | tee -a "$out/bench.jsonl" || { echo "$label failed:"; tail -5 "$out/$label.log"; }
}
shapes=("qwen2.5-0.5b 8" "qwen2.5-1.5b 4")
for shape in "${shapes[@]}"; do
    set -- $shape
    run "llmc-$1" ./build/llmc-train-cuda bench --model "$1" --batch "$2" --seq 2048 --steps "$steps" --warmup 3
done
if [[ ${BENCH_TORCH:-1} == 1 ]]; then
    for shape in "${shapes[@]}"; do
        set -- $shape
        run "torch-eager-$1" python3 bench/cuda/torch_bench.py --model "$1" --batch "$2" --seq 2048 --steps "$steps"
    done
    if [[ ${BENCH_COMPILE:-1} == 1 ]]; then
        for shape in "${shapes[@]}"; do
            set -- $shape
            run "torch-compile-$1" python3 bench/cuda/torch_bench.py --model "$1" --batch "$2" --seq 2048 --steps "$steps" --compile
        done
    fi
fi
python3 - "$out/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"{'impl':<16} {'model':<14} {'batch':>5} {'tok/s':>9} {'MFU':>6} {'step ms':>8} {'peak GiB':>9}")
for r in rows:
    print(f"{r['impl']:<16} {r['model']:<14} {r['batch']:>5} {int(r['tokens_per_s']):>9,} {r['mfu']*100:>5.1f}% "
          f"{r['step_ms']:>8.1f} {r['peak_mem_gib']:>9.2f}")
PY
