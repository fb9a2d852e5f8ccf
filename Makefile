# llmc — top-level build.
#
#   make            build/llmc and build/llmc-train (CPU backend)
#   make deps       install the build tools and libraries (.ci/deps.sh)
#   make test       every test suite; closes with "N passed, N failed"
#   make demo       install what is missing, build, compile the tiny plan, train it
#   make cuda       the CUDA backend (needs nvcc; builds without a GPU)
#   make bench      benchmarks (docs/PERFORMANCE.md)
#   make fuzz       fuzz the parsers (clang libFuzzer), FUZZ_TIME seconds each (600)
#   make golden     re-record golden/ from examples/
#   make SAN=1 ...  the same with AddressSanitizer + UBSan (into build/san)
#   make install    PREFIX (/usr/local) and DESTDIR: binaries, man pages, templates
#
# Distributions: CC, CFLAGS, CPPFLAGS and LDFLAGS from the environment or the
# command line are kept (ours are appended); WERROR=0 builds without -Werror
# (on by default, for developers and CI: a new compiler's new warning must not
# break a distribution's build of a released tree).
#
# Each area adds its sources and suites in its own fragment (*.mk below); a
# fragment adds flags with `override CPPFLAGS += ...` (a plain += is ignored
# once the caller's flags are kept with override, below):
#   TEST_SUITES += name   with a target test-name printing "N passed, N failed"
#   BENCH_TARGETS += target, FUZZ_TARGETS += target

.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
SHELL := /bin/bash

# make's built-in CC is cc; CC=clang in the environment or on the command line wins.
CC      ?= cc
SAN     ?= 0
WERROR  ?= 1
BUILD   := build
OPT     ?= -O2 -g
ifeq ($(SAN),1)
BUILD   := build/san
OPT     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
override LDFLAGS += -fsanitize=address,undefined
endif
GEN     := $(BUILD)/gen
WARN    := -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror)
# The caller's CFLAGS first (a distribution's hardening flags), then ours:
# `override` so that `make CFLAGS=...` appends instead of replacing them.
override CFLAGS += -std=c11 -D_GNU_SOURCE $(WARN) $(OPT) -MMD -MP
# Include boundaries: each folder of compiler/ and runtime/ is compiled with the
# include paths of the folders it may use (COMPILER_INC_*, RUNTIME_INC_* in the
# fragments), contract/ on both sides, never the other program's; only the
# compiler's front end sees the generated parser ($(GEN)). Tests, fuzzers and
# benchmarks, which drive both, see every folder. `make test-boundaries` shows a
# file including a header its folder may not use failing to build.
# The GPU machine has no cJSON/libyaml/OpenSSL headers: they are unpacked into .deps/.
ifneq ($(wildcard .deps/usr/include),)
override CPPFLAGS += -I.deps/usr/include $(if $(wildcard .deps/usr/include/x86_64-linux-gnu),-I.deps/usr/include/x86_64-linux-gnu)
override LDFLAGS  += -L.deps/usr/lib/x86_64-linux-gnu -Wl,-rpath,$(abspath .deps/usr/lib/x86_64-linux-gnu)
endif
LDLIBS  :=
comma   := ,

# Libraries: flags from pkg-config where the library ships a .pc file, else the
# plain -l flag (cJSON from .deps/ has no usable .pc; MPI falls back to mpicc).
PKG_CONFIG ?= pkg-config
pkg_cflags = $(shell $(PKG_CONFIG) --cflags $(1) 2>/dev/null)
pkg_libs   = $(or $(shell $(PKG_CONFIG) --libs $(1) 2>/dev/null),$(2))
CJSON_CFLAGS  := $(call pkg_cflags,libcjson)
CJSON_LIBS    := $(call pkg_libs,libcjson,-lcjson)
YAML_CFLAGS   := $(call pkg_cflags,yaml-0.1)
YAML_LIBS     := $(call pkg_libs,yaml-0.1,-lyaml)
BLAS_CFLAGS   := $(call pkg_cflags,openblas)
BLAS_LIBS     := $(call pkg_libs,openblas,-lopenblas)
CRYPTO_CFLAGS := $(call pkg_cflags,libcrypto)
CRYPTO_LIBS   := $(call pkg_libs,libcrypto,-lcrypto)
override CPPFLAGS += $(CJSON_CFLAGS) $(YAML_CFLAGS) $(CRYPTO_CFLAGS)

# Installation (GNU conventions): make install PREFIX=/usr DESTDIR=/tmp/pkg
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
MANDIR  ?= $(DATADIR)/man
INSTALL ?= install

TEST_SUITES   :=
BENCH_TARGETS :=
FUZZ_TARGETS  :=
# What the suites build for themselves (test binaries; under build/san the
# sanitized ones; the fuzz targets' binaries), built ahead by `make test`.
TEST_BUILD     :=
TEST_BUILD_SAN :=
FUZZ_BINS      :=
# seconds each fuzz target runs in `make fuzz` (issue 11: ten minutes each, no finding)
FUZZ_TIME ?= 600
GOLDEN_TARGETS :=

include compiler/build.mk
include runtime/build.mk
# The generated lexers and parsers need re2c and lemon: without them, name the
# missing ones and `make deps` before any rule fails with a bare "Error 127".
# Each generated file checks only the tools it needs (llmc-train-cuda's build
# needs re2c, never lemon).
$(COMPILER_GEN): | build-tools-re2c-lemon
$(patsubst runtime/data/%.re,$(GEN)/rt_%.c,$(RUNTIME_RE)): | build-tools-re2c
build-tools-%:
	@missing=; for t in $(subst -, ,$*); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [[ -n $$missing ]]; then \
	    echo "make: missing build tools:$$missing; \`make deps\` installs them (.ci/deps.sh, as root or with sudo)" >&2; exit 1; fi
# Tests, fuzzers and benchmarks (private: their prerequisites, the compiler's
# and the runtime's own objects, keep their boundaries). Both programs have a
# plan.h and the first path holding one wins, also for a header that includes it
# ("plan.h" from runtime/train/train_loop.h): the runtime's tests get the
# runtime's folders first, the others the compiler's.
RUNTIME_TESTS := $(BUILD)/tests/cpu/% $(BUILD)/tests/data/% $(BUILD)/tests/e2e/% $(BUILD)/bench/%
TEST_INC = $(if $(filter $(RUNTIME_TESTS),$@),$(RUNTIME_INC) $(COMPILER_INC),$(COMPILER_INC) $(RUNTIME_INC))
$(BUILD)/tests/% $(BUILD)/bench/% $(BUILD)/fuzz/%: private override CPPFLAGS += $(TEST_INC)
-include runtime/cuda/build.mk
-include $(sort $(wildcard tests/*/test.mk))
-include $(sort $(wildcard bench/*.mk))

.PHONY: all test demo deps cuda bench fuzz golden clean install uninstall
all: $(BUILD)/llmc $(BUILD)/llmc-train

# `make test` first builds, in parallel, what the suites would otherwise build one
# at a time (TEST_BUILD, and what the cuda suite, tests/cuda/ci.sh, makes; with
# SAN=1, TEST_BUILD_SAN and FUZZ_BINS), so that the suites that run side by side
# (tests/run-suites.sh) find it built. With -k and its output in
# build/test-build.log: what fails to build here fails again in its suite, which
# shows the error and counts the failure.
CUDA_SUITE_BUILD := cuda attn-check fp8-check gemm-sm90-check $(addprefix $(BUILD)/,master_split_test zero_layout_test gemm_choices_test)
test: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@t0=$$SECONDS; \
	{ $(MAKE) --no-print-directory -s -k -j$$(nproc) $(TEST_BUILD) $(CUDA_SUITE_BUILD) & \
	  $(MAKE) --no-print-directory -s -k -j$$(nproc) SAN=1 test-build-san & wait; } >$(BUILD)/test-build.log 2>&1; \
	echo "=== test binaries built ahead: $$((SECONDS - t0)) s ($(BUILD)/test-build.log)"
	@bash tests/run-suites.sh $(TEST_SUITES)

.PHONY: test-build-san
test-build-san: $(TEST_BUILD_SAN) $(FUZZ_BINS)

deps:
	@bash .ci/deps.sh

demo: deps
	@echo "== build (make all, quiet: warnings and errors still show)"
	@$(MAKE) --no-print-directory -s -j$$(nproc) all
	@bash examples/tiny/demo.sh

bench: $(BENCH_TARGETS)
fuzz: $(FUZZ_TARGETS)
golden: $(GOLDEN_TARGETS)

clean:
	rm -rf build

# The templates are compiled into llmc (compiler/emit/emit_template_data.c), so the
# installed binary needs no data file; share/llmc/templates holds the same
# text for reading. llmc-train-cuda is installed when it was built (make cuda).
install: all
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)/llmc/templates
	$(INSTALL) -m 755 $(BUILD)/llmc $(BUILD)/llmc-train $(DESTDIR)$(BINDIR)/
	$(if $(wildcard $(BUILD)/llmc-train-cuda),$(INSTALL) -m 755 $(BUILD)/llmc-train-cuda $(DESTDIR)$(BINDIR)/)
	$(INSTALL) -m 644 docs/llmc.1 docs/llmc-train.1 $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 templates/*.tmpl $(DESTDIR)$(DATADIR)/llmc/templates/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/llmc $(DESTDIR)$(BINDIR)/llmc-train $(DESTDIR)$(BINDIR)/llmc-train-cuda
	rm -f $(DESTDIR)$(MANDIR)/man1/llmc.1 $(DESTDIR)$(MANDIR)/man1/llmc-train.1
	rm -rf $(DESTDIR)$(DATADIR)/llmc/templates

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
