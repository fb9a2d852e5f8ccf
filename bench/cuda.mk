# bench/cuda — the CUDA trainer against PyTorch+transformers (eager, torch.compile)
# on Qwen2.5-0.5B (8 x 2048) and 1.5B (4 x 2048); needs a GPU (docs/PERFORMANCE.md).
BENCH_TARGETS += bench-cuda
.PHONY: bench-cuda
bench-cuda:
	@if nvidia-smi -L > /dev/null 2>&1; then bash bench/cuda/run.sh build/bench-cuda; \
	else echo "bench-cuda: no GPU on this machine; run bench/cuda/run.sh on a GPU machine"; fi
