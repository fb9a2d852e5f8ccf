#!/bin/bash
# What the llmc CUDA trainer really allocates (its cudaMalloc high-water mark,
# "allocated_gib" of `llmc-train-cuda bench`), for the estimator's check vectors.
# Needs a GPU machine (nvcc, NCCL; cJSON via .deps/). Run from the repository root:
#   bash tests/estimator/llmc_cuda_reference.sh > tests/estimator/llmc_cuda_reference.json
set -euo pipefail
# The flash kernels' allocations (the rows say "flash"); cuDNN's attention
# workspace is a term of its own in the estimator.
export LLMC_ATTN=flash
make -s cuda >&2
rows=()
while read -r model batch seq flags; do
    line=$(./build/llmc-train-cuda bench --model "$model" --batch "$batch" --seq "$seq" \
           --steps 2 --warmup 1 $flags 2>/dev/null | tail -n 1)
    rows+=("$line")
done <<'CASES'
qwen2.5-0.5b 4 2048
qwen2.5-0.5b 4 2048 --recompute
qwen2.5-0.5b 2 1024 --eager-attention
qwen2.5-1.5b 2 2048
qwen2.5-1.5b 2 2048 --recompute
qwen2.5-7b 4 2048 --offload
qwen2.5-7b 4 2048 --offload --selective-recompute
qwen2.5-3b 4 2048
qwen2.5-3b 4 2048 --selective-recompute
qwen3-1.7b 4 2048
qwen2.5-1.5b 4 2048 --selective-recompute
qwen2.5-0.5b 4 2048 --lora-rank 16
qwen2.5-1.5b 4 2048 --lora-rank 16
qwen2.5-1.5b 4 2048 --lora-rank 8 --recompute
qwen2.5-7b 4 2048 --lora-rank 16
qwen3-1.7b 4 2048 --lora-rank 64 --selective-recompute
CASES
printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
keep = ("model", "batch", "seq", "world", "zero1", "recompute", "offload", "lora_rank", "attention", "params",
        "allocated_gib")
rows = [json.loads(l) for l in sys.stdin if l.strip()]
json.dump([{k: r[k] for k in keep if k in r} for r in rows], sys.stdout, indent=1)
print()'
