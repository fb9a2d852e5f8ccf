# llmc — top-level build.
#
#   make            build/llmc and build/llmc-train (CPU backend)
#   make test       every test suite; closes with "N passed, N failed"
#   make demo       install what is missing, build, compile the tiny plan, train it
#   make cuda       the CUDA backend (needs nvcc; builds without a GPU)
#   make bench      benchmarks (docs/PERFORMANCE.md)
#   make fuzz       fuzz the parsers (clang libFuzzer), FUZZ_TIME seconds each (600)
#   make golden     re-record golden/ from examples/
#   make SAN=1 ...  the same with AddressSanitizer + UBSan (into build/san)
#
# Each area adds its sources and suites in its own fragment (*.mk below):
#   TEST_SUITES += name   with a target test-name printing "N passed, N failed"
#   BENCH_TARGETS += target, FUZZ_TARGETS += target

.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
SHELL := /bin/bash

CC      := cc
SAN     ?= 0
BUILD   := build
OPT     := -O2 -g
ifeq ($(SAN),1)
BUILD   := build/san
OPT     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif
GEN     := $(BUILD)/gen
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(OPT) -MMD -MP
CPPFLAGS += -Icompiler -Iruntime -I$(GEN)
# The GPU machine has no cJSON/libyaml headers: they are unpacked into .deps/.
ifneq ($(wildcard .deps/usr/include),)
CPPFLAGS += -I.deps/usr/include
LDFLAGS  += -L.deps/usr/lib/x86_64-linux-gnu -Wl,-rpath,$(abspath .deps/usr/lib/x86_64-linux-gnu)
endif
LDLIBS  :=

TEST_SUITES   :=
BENCH_TARGETS :=
FUZZ_TARGETS  :=
# seconds each fuzz target runs in `make fuzz` (issue 11: ten minutes each, no finding)
FUZZ_TIME ?= 600
GOLDEN_TARGETS :=

include compiler/build.mk
include runtime/build.mk
-include runtime/cuda/build.mk
-include $(sort $(wildcard tests/*/test.mk))
-include $(sort $(wildcard bench/*.mk))

.PHONY: all test demo deps cuda bench fuzz golden clean
all: $(BUILD)/llmc $(BUILD)/llmc-train

test: deps
	@$(MAKE) --no-print-directory all
	@bash tests/run-suites.sh $(TEST_SUITES)

deps:
	@bash .ci/deps.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@bash examples/tiny/demo.sh

bench: $(BENCH_TARGETS)
fuzz: $(FUZZ_TARGETS)
golden: $(GOLDEN_TARGETS)

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
