#!/bin/bash
# What the llmc CUDA trainer really allocates (its cudaMalloc high-water mark,
# "allocated_gib" of `llmc-train-cuda bench`), for the estimator's check vectors.
# Each case names its attention: flash (LLMC_ATTN=flash, the trainer's own
# kernels) or cudnn (the default: cuDNN's fused attention, deterministic
# backward, whose workspace the estimate adds); the row records what ran.
# Needs a GPU machine (nvcc, NCCL; cJSON via .deps/). Run from the repository root:
#   bash tests/estimator/llmc_cuda_reference.sh > tests/estimator/llmc_cuda_reference.json
set -euo pipefail
make -s cuda >&2
rows=()
while read -r attn model batch seq flags; do
    # shellcheck disable=SC2086  # flags: several words
    line=$(LLMC_ATTN=$attn LLMC_CUDNN_DETERMINISTIC=1 ./build/llmc-train-cuda bench --model "$model" \
           --batch "$batch" --seq "$seq" --steps 2 --warmup 1 $flags 2>/dev/null | tail -n 1)
    rows+=("$line")
done <<'CASES'
flash qwen2.5-0.5b 4 2048
flash qwen2.5-0.5b 4 2048 --recompute
flash qwen2.5-0.5b 2 1024 --eager-attention
flash qwen2.5-1.5b 2 2048
flash qwen2.5-1.5b 2 2048 --recompute
flash qwen2.5-7b 4 2048 --offload
flash qwen2.5-7b 4 2048 --offload --selective-recompute
flash qwen2.5-3b 4 2048
flash qwen2.5-3b 4 2048 --selective-recompute
flash qwen3-1.7b 4 2048
flash qwen2.5-1.5b 4 2048 --selective-recompute
flash qwen2.5-0.5b 4 2048 --lora-rank 16
flash qwen2.5-1.5b 4 2048 --lora-rank 16
flash qwen2.5-1.5b 4 2048 --lora-rank 8 --recompute
flash qwen2.5-7b 4 2048 --lora-rank 16
flash qwen3-1.7b 4 2048 --lora-rank 64 --selective-recompute
cudnn qwen2.5-1.5b 4 2048
cudnn qwen2.5-0.5b 8 2048
cudnn qwen2.5-3b 4 2048 --selective-recompute
cudnn qwen2.5-7b 4 2048 --offload
CASES
printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
keep = ("model", "batch", "seq", "world", "zero1", "recompute", "offload", "lora_rank", "attention", "params",
        "allocated_gib")
rows = [json.loads(l) for l in sys.stdin if l.strip()]
json.dump([{k: r[k] for k in keep if k in r} for r in rows], sys.stdout, indent=1)
print()'
