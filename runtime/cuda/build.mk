# runtime/cuda/ -> build/llmc-train-cuda (needs nvcc; builds without a GPU).
# Kernels (*.cu) go through nvcc for sm_90 (H100/H200); host code (*.c) is C11
# through $(CC) with the same warnings as the rest of the tree.
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode=arch=compute_90,code=sm_90
CUDA_SRC    := $(sort $(wildcard runtime/cuda/*.c))
CUDA_CU     := $(sort $(wildcard runtime/cuda/*.cu))
# Host objects follow SAN=1 (into build/san, with the sanitizers); kernels never do.
CUDA_OBJ    := $(patsubst runtime/cuda/%.c,$(BUILD)/cuda/%.o,$(CUDA_SRC)) \
               $(patsubst runtime/cuda/%.cu,$(BUILD)/cuda/%.cu.o,$(CUDA_CU))
CUDA_CFLAGS := $(CFLAGS)
# What runtime/cuda/ may include: itself and what the training loop's folder may
# (runtime/build.mk), the CUDA headers; like cpu/, never compiler/. The same
# folders' objects link into llmc-train-cuda (CUDA_RT_OBJ).
CUDA_RT_DIRS := train data store plan model base
CUDA_INC    := -Iruntime/cuda $(call runtime_inc,$(CUDA_RT_DIRS)) -I$(CUDA_HOME)/include \
               $(if $(wildcard .deps/usr/include),-I.deps/usr/include)
NVCC_COMMON := -O3 -std=c++17 -lineinfo -Xcompiler -Wall,-Wextra$(if $(filter 1,$(WERROR)),$(comma)-Werror) -Xptxas -v
NVCCFLAGS   := $(CUDA_ARCH) $(NVCC_COMMON)
# gemm_sm90.cu's wgmma and TMA instructions exist only in the arch-specific sm_90a target
CUDA_ARCH_SM90A ?= -gencode=arch=compute_90a,code=sm_90a
CUDA_DEPS_LIB := $(wildcard .deps/usr/lib/x86_64-linux-gnu)
CUDA_LDFLAGS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64
ifneq ($(CUDA_DEPS_LIB),)
CUDA_LDFLAGS += -L$(CUDA_DEPS_LIB) -Wl,-rpath,$(abspath $(CUDA_DEPS_LIB))
endif
# What llmc-train-cuda shares with llmc-train: every object of the folders the
# CUDA backend stands on, as cpu/ does (runtime/build.mk) -- the training loop,
# the data (tokenizer, prepare, shards; their generated lexer and tables), store
# (safetensors, checkpoints, HF config), the plan loader, the host model layout
# (model.o links ops_cpu.o, hence a CBLAS: OpenBLAS here, netlib BLAS from .deps
# on the GPU machine) and base, whose dist.c is the ranks' host transport
# (cuda_coll.c's host collectives; with Open MPI when the build found mpicc,
# runtime/build.mk's MPI_LIBS). A file added to those folders links here too.
CUDA_RT_OBJ := $(filter $(foreach d,$(CUDA_RT_DIRS),$(BUILD)/runtime/$(d)/%.o) $(BUILD)/gen-obj/rt_%.o,$(RUNTIME_OBJ))
CUDA_NETLIB := $(wildcard .deps/usr/lib/x86_64-linux-gnu/blas/libblas.so.3)
ifneq ($(CUDA_NETLIB),)
CUDA_BLAS   := $(abspath $(CUDA_NETLIB)) -Wl,-rpath,$(abspath $(dir $(CUDA_NETLIB)))
else
CUDA_BLAS   := -lopenblas
endif
CUDA_LIBS   := -lcublasLt -lnccl -lcudart $(CJSON_LIBS) $(CRYPTO_LIBS) $(CUDA_BLAS) $(MPI_LIBS) -lstdc++ -lm -lpthread
# cuDNN (runtime/cuda/attn_cudnn.c) when its header is found: under CUDNN_HOME if
# given, else beside CUDA, else in the system directories (Debian/Ubuntu packages
# put it in /usr/include/x86_64-linux-gnu). Linked by soname, since some installs
# ship only libcudnn.so.9. Without it the build still works (flash kernels only).
CUDNN_INC_DIR := $(firstword $(foreach d,$(CUDNN_HOME)/include $(CUDA_HOME)/include /usr/include \
                   /usr/include/x86_64-linux-gnu,$(if $(wildcard $(d)/cudnn.h),$(d))))
CUDNN_LIB_DIR := $(firstword $(foreach d,$(CUDNN_HOME)/lib64 $(CUDNN_HOME)/lib $(CUDA_HOME)/lib64 \
                   /usr/lib/x86_64-linux-gnu /usr/lib64,$(if $(wildcard $(d)/libcudnn.so.9),$(d))))
ifneq ($(and $(CUDNN_INC_DIR),$(CUDNN_LIB_DIR)),)
CUDA_CFLAGS += -DLLMC_HAVE_CUDNN
CUDA_INC    += -I$(CUDNN_INC_DIR)
CUDNN_LIBS  := -L$(CUDNN_LIB_DIR) -Wl,-rpath,$(CUDNN_LIB_DIR) -l:libcudnn.so.9
CUDA_LIBS   := $(CUDNN_LIBS) $(CUDA_LIBS)
endif

.PHONY: cuda
cuda: $(BUILD)/llmc-train-cuda

$(BUILD)/cuda/%.o: runtime/cuda/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) $(CUDA_INC) -c -o $@ $<

$(BUILD)/cuda/%.cu.o: runtime/cuda/%.cu runtime/cuda/kernels.h runtime/cuda/kernels_common.cuh \
                      runtime/cuda/flash_attn.h contract/cuda_layout.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(CUDA_INC) -c -o $@ $< 2> $(BUILD)/cuda/$*.ptxas.txt || { cat $(BUILD)/cuda/$*.ptxas.txt; exit 1; }

$(BUILD)/cuda/gemm_sm90.cu.o: NVCCFLAGS := $(CUDA_ARCH_SM90A) $(NVCC_COMMON)
$(BUILD)/cuda/gemm_sm90.cu.o: runtime/cuda/gemm_sm90.h runtime/cuda/gemm.h

$(BUILD)/llmc-train-cuda: $(CUDA_OBJ) $(CUDA_RT_OBJ)
	$(CC) -pthread -o $@ $^ $(LDFLAGS) $(CUDA_LDFLAGS) $(CUDA_LIBS)
