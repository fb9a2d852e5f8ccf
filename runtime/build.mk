# runtime/ -> build/llmc-train (CPU backend). runtime/data/*.re are re2c sources.
# One folder per stage, each using only the ones below it (RUNTIME_INC_* below):
#   base   logging, command-line conventions, JSON reader, RNG, CPUs, stop signals,
#          ranks and their collectives (dist: MPI or TCP, used by both backends)
#   model  the transformer (shapes, HF tensor names, init), its CPU math, AdamW
#   plan   the one plan.json reader
#   data   tokenizer, chat templates, records, prepare, token shards, data order
#   store  checkpoints, safetensors, HF config.json, SHA-256 manifests
#   train  the one training loop, run start and end, metrics, Prometheus file
#   cpu    the CPU backend of the loop
#   cli    llmc-train's main and `generate`
# runtime/cuda/ (runtime/cuda/build.mk) is the CUDA backend, beside cpu.
RUNTIME_DIRS := base model plan data store train cpu cli
RUNTIME_SRC := $(sort $(foreach d,$(RUNTIME_DIRS),$(wildcard runtime/$(d)/*.c)))
RUNTIME_RE  := $(sort $(wildcard runtime/data/*.re))
RUNTIME_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(RUNTIME_SRC)) \
               $(patsubst runtime/data/%.re,$(BUILD)/gen-obj/rt_%.o,$(RUNTIME_RE)) \
               $(BUILD)/gen-obj/rt_unicode_tables.o
RUNTIME_LIB_OBJ := $(filter-out $(BUILD)/runtime/cli/main.o,$(RUNTIME_OBJ))
# The objects of the named modules, wherever their folder (for tests: log sha256 ...).
runtime_objs = $(foreach n,$(1),$(filter %/$(n).o %/rt_$(n).o,$(RUNTIME_OBJ)))
RUNTIME_LIBS := $(CJSON_LIBS) $(BLAS_LIBS) $(CRYPTO_LIBS) -lpthread -lm

# The tokenizer's Unicode tables (NFC data, letter/number/space classes) come
# from the Unicode Character Database of Debian's unicode-data package.
UCD_DIR ?= /usr/share/unicode
$(GEN)/rt_unicode_tables.c $(GEN)/pretok_unicode.inc &: runtime/data/gen_unicode.py
	@mkdir -p $(GEN)
	@test -f $(UCD_DIR)/UnicodeData.txt || { echo "no $(UCD_DIR)/UnicodeData.txt: apt-get install unicode-data" >&2; exit 1; }
	python3 runtime/data/gen_unicode.py $(UCD_DIR) $(GEN)

$(GEN)/rt_pretok.c: $(GEN)/pretok_unicode.inc

$(GEN)/rt_%.c: runtime/data/%.re
	@mkdir -p $(dir $@)
	re2c -W --no-generation-date -Iruntime/data -I$(GEN) -o $@ $<

$(BUILD)/gen-obj/rt_%.o: $(GEN)/rt_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -Wno-implicit-fallthrough -c -o $@ $<

$(BUILD)/runtime/%.o: runtime/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BLAS_CFLAGS) $(CFLAGS) -pthread -c -o $@ $<

$(BUILD)/llmc-train: $(RUNTIME_OBJ)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS)

# MPI for runtime/base/dist.c: Open MPI's own flags from mpicc. Without mpicc the
# trainer still builds (srun + TCP rendezvous work) and refuses, with a message,
# to start under mpirun; the warning below makes such a build visible.
# pkg-config's mpi-c first (Open MPI and MPICH ship it), else mpicc's own flags.
MPICC      ?= mpicc
MPI_CFLAGS := $(or $(call pkg_cflags,mpi-c),$(shell $(MPICC) --showme:compile 2>/dev/null))
MPI_LIBS   := $(or $(shell $(PKG_CONFIG) --libs mpi-c 2>/dev/null),$(shell $(MPICC) --showme:link 2>/dev/null))
ifneq ($(strip $(MPI_LIBS)),)
$(BUILD)/runtime/base/dist.o: override CPPFLAGS += -DLLMC_WITH_MPI $(MPI_CFLAGS)
RUNTIME_LIBS += $(MPI_LIBS)
else
$(warning llmc-train: mpicc not found; building without MPI (mpirun launches are refused, srun works))
endif

# What each folder's objects may include: its own folder, the folders below it,
# and contract/ (what llmc and llmc-train must agree on: plan_limits.h); never
# compiler/. Any other include fails to build ("No such file or directory";
# make test-boundaries). The re2c pretokenizer is part of data.
runtime_inc = $(addprefix -Iruntime/,$(1)) -Icontract
RUNTIME_INC_base  := $(call runtime_inc,base)
RUNTIME_INC_model := $(call runtime_inc,model base)
RUNTIME_INC_plan  := $(call runtime_inc,plan model base)
RUNTIME_INC_data  := $(call runtime_inc,data plan model base)
RUNTIME_INC_store := $(call runtime_inc,store model base)
RUNTIME_INC_train := $(call runtime_inc,train data store plan model base)
RUNTIME_INC_cpu   := $(call runtime_inc,cpu train data store plan model base)
RUNTIME_INC_cli   := $(call runtime_inc,cli cpu train data store plan model base)
$(BUILD)/runtime/base/%.o:  override CPPFLAGS += $(RUNTIME_INC_base)
$(BUILD)/runtime/model/%.o: override CPPFLAGS += $(RUNTIME_INC_model)
$(BUILD)/runtime/plan/%.o:  override CPPFLAGS += $(RUNTIME_INC_plan)
$(BUILD)/runtime/data/%.o $(BUILD)/gen-obj/rt_%.o: override CPPFLAGS += $(RUNTIME_INC_data)
$(BUILD)/runtime/store/%.o: override CPPFLAGS += $(RUNTIME_INC_store)
$(BUILD)/runtime/train/%.o: override CPPFLAGS += $(RUNTIME_INC_train)
$(BUILD)/runtime/cpu/%.o:   override CPPFLAGS += $(RUNTIME_INC_cpu)
$(BUILD)/runtime/cli/%.o:   override CPPFLAGS += $(RUNTIME_INC_cli)
# Every folder of llmc-train (the tests' view).
RUNTIME_INC := $(RUNTIME_INC_cli)
