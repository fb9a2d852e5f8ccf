# tests/cuda — the CUDA backend on a machine without a GPU (CI): `make cuda` compiles
# with nvcc, and the host side of build/llmc-train-cuda behaves (parameter tables
# against the published Qwen2.5 sizes, usage and plan errors, a clean refusal
# without a GPU); under SAN=1 with the host code sanitized. GPU correctness and speed:
# tests/cuda/device.sh on a GPU machine.
TEST_SUITES += cuda
.PHONY: test-cuda
test-cuda:
	@SAN=$(SAN) BUILD=$(BUILD) bash tests/cuda/ci.sh

# tests/cuda/master_split_test.c: the split master weights' bit arithmetic
# (runtime/cuda/master_split.h, shared with the kernels) on the CPU.
$(BUILD)/master_split_test: tests/cuda/master_split_test.c runtime/cuda/master_split.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iruntime/cuda -o $@ $< $(LDFLAGS)

# tests/cuda/zero_layout_test.c: ZeRO-2/3's shards, units and window ownership
# (runtime/cuda/zero_layout.c, plain C) on the CPU.
$(BUILD)/zero_layout_test: tests/cuda/zero_layout_test.c runtime/cuda/zero_layout.c runtime/cuda/zero_layout.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iruntime/cuda -Icontract -o $@ tests/cuda/zero_layout_test.c runtime/cuda/zero_layout.c $(LDFLAGS)

# tests/cuda/gemm_choices_test.c: the GEMM choices file (runtime/cuda/gemm_choices.c,
# plain C) on the CPU: round trip, and every malformed file refused with its line.
$(BUILD)/gemm_choices_test: tests/cuda/gemm_choices_test.c runtime/cuda/gemm_choices.c runtime/cuda/gemm_choices.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iruntime/cuda -o $@ tests/cuda/gemm_choices_test.c runtime/cuda/gemm_choices.c $(LDFLAGS)

# tests/cuda/attn_check.c: cuDNN attention against the flash kernels and an fp64
# reference (needs a GPU to run; device.sh's `attn` step). `attn_check --time` times both.
.PHONY: attn-check
attn-check: $(BUILD)/attn_check
$(BUILD)/attn_check: tests/cuda/attn_check.c $(BUILD)/cuda/attn_cudnn.o $(BUILD)/cuda/flash_attn.cu.o \
                    $(filter $(BUILD)/cuda/kernels_%.cu.o,$(CUDA_OBJ)) $(BUILD)/runtime/base/log.o
	$(CC) $(CUDA_CFLAGS) $(CUDA_INC) -o $@ $(filter %.c %.o,$^) $(LDFLAGS) $(CUDA_LDFLAGS) $(CUDNN_LIBS) -lcudart -lstdc++ -lm

# tests/cuda/gemm_sm90_check.c: runtime/cuda/gemm_sm90.cu's bf16 products against
# cuBLASLt and fp64, `--time` their speeds side by side (needs an sm_90 GPU; device.sh's
# `gemm-sm90` step).
.PHONY: gemm-sm90-check
gemm-sm90-check: $(BUILD)/gemm_sm90_check
$(BUILD)/gemm_sm90_check: tests/cuda/gemm_sm90_check.c tests/cuda/host_bf16.h $(BUILD)/cuda/gemm.o \
                         $(BUILD)/cuda/gemm_choices.o $(BUILD)/cuda/gemm_sm90.cu.o $(BUILD)/cuda/kernels_swiglu.cu.o \
                         $(BUILD)/runtime/base/log.o
	$(CC) $(CUDA_CFLAGS) $(CUDA_INC) -o $@ $(filter %.c %.o,$^) $(LDFLAGS) $(CUDA_LDFLAGS) -lcublasLt -lcudart -lstdc++ -lm

# tests/cuda/initcheck_probe.c: the QKV product into a never-written buffer, read by
# the RoPE kernel, checked on the host (needs a GPU; trust.sh runs it plain and under
# compute-sanitizer initcheck: issue 27's qkv_rope_fwd_k report).
.PHONY: initcheck-probe
initcheck-probe: $(BUILD)/initcheck_probe
$(BUILD)/initcheck_probe: tests/cuda/initcheck_probe.c tests/cuda/host_bf16.h $(BUILD)/cuda/gemm.o $(BUILD)/cuda/gemm_choices.o \
                         $(filter $(BUILD)/cuda/kernels_%.cu.o,$(CUDA_OBJ)) $(BUILD)/runtime/base/log.o
	$(CC) $(CUDA_CFLAGS) $(CUDA_INC) -o $@ $(filter %.c %.o,$^) $(LDFLAGS) $(CUDA_LDFLAGS) -lcublasLt -lcudart -lstdc++ -lm

# tests/cuda/fp8_check.c: precision = fp8's quantisation (kernels_fp8.cu) and FP8
# GEMMs (gemm.c) against fp64 references (needs a GPU; device.sh's `fp8` step).
.PHONY: fp8-check
fp8-check: $(BUILD)/fp8_check
$(BUILD)/fp8_check: tests/cuda/fp8_check.c tests/cuda/host_bf16.h $(BUILD)/cuda/gemm.o $(BUILD)/cuda/gemm_choices.o \
                   $(filter $(BUILD)/cuda/kernels_%.cu.o,$(CUDA_OBJ)) $(BUILD)/runtime/base/log.o
	$(CC) $(CUDA_CFLAGS) $(CUDA_INC) -o $@ $(filter %.c %.o,$^) $(LDFLAGS) $(CUDA_LDFLAGS) -lcublasLt -lcudart -lstdc++ -lm

# bench/cuda/kernel_trace.c: a CUPTI activity trace of any CUDA program, preloaded
# (KERNEL_TRACE=out.tsv LD_PRELOAD=build/libkernel_trace.so ...); bench/cuda/gpu_gaps.py
# reads it: the GPU's idle time between kernels inside a step.
.PHONY: kernel-trace
kernel-trace: $(BUILD)/libkernel_trace.so
$(BUILD)/libkernel_trace.so: bench/cuda/kernel_trace.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -fPIC -shared -I$(CUDA_HOME)/include -o $@ $< $(CUDA_LDFLAGS) -L$(CUDA_HOME)/extras/CUPTI/lib64 -lcupti

# bench/cuda/ce_variants.cu: issue 31's cross-entropy experiment (the runtime's kernel
# against a one-read cluster kernel and persistent L2-resident ones, timed; needs a GPU
# to run, builds without one).
.PHONY: ce-variants
ce-variants: $(BUILD)/ce_variants
$(BUILD)/ce_variants: bench/cuda/ce_variants.cu runtime/cuda/kernels_common.cuh $(filter $(BUILD)/cuda/kernels_%.cu.o,$(CUDA_OBJ))
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(CUDA_INC) -o $@ $< $(filter %.o,$^) 2> $(BUILD)/ce_variants.ptxas.txt || \
	    { cat $(BUILD)/ce_variants.ptxas.txt; exit 1; }
