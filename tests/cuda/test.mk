# tests/cuda — the CUDA backend on a machine without a GPU (CI): `make cuda` compiles
# with nvcc, and the host side of build/llmc-train-cuda behaves (parameter tables
# against the published Qwen2.5 sizes, usage and plan errors, a clean refusal
# without a GPU); under SAN=1 with the host code sanitized. GPU correctness and speed:
# tests/cuda/device.sh on a GPU machine.
TEST_SUITES += cuda
.PHONY: test-cuda
test-cuda:
	@SAN=$(SAN) BUILD=$(BUILD) bash tests/cuda/ci.sh
