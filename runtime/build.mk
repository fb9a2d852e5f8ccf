# runtime/ -> build/llmc-train (CPU backend). runtime/*.re are re2c sources.
RUNTIME_SRC := $(sort $(wildcard runtime/*.c))
RUNTIME_RE  := $(sort $(wildcard runtime/*.re))
RUNTIME_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(RUNTIME_SRC)) \
               $(patsubst runtime/%.re,$(BUILD)/gen-obj/rt_%.o,$(RUNTIME_RE)) \
               $(BUILD)/gen-obj/rt_unicode_tables.o
RUNTIME_LIB_OBJ := $(filter-out $(BUILD)/runtime/main.o,$(RUNTIME_OBJ))
RUNTIME_LIBS := $(CJSON_LIBS) $(BLAS_LIBS) $(CRYPTO_LIBS) -lpthread -lm

# The tokenizer's Unicode tables (NFC data, letter/number/space classes) come
# from the Unicode Character Database of Debian's unicode-data package.
UCD_DIR ?= /usr/share/unicode
$(GEN)/rt_unicode_tables.c $(GEN)/pretok_unicode.inc &: runtime/gen_unicode.py
	@mkdir -p $(GEN)
	@test -f $(UCD_DIR)/UnicodeData.txt || { echo "no $(UCD_DIR)/UnicodeData.txt: apt-get install unicode-data" >&2; exit 1; }
	python3 runtime/gen_unicode.py $(UCD_DIR) $(GEN)

$(GEN)/rt_pretok.c: $(GEN)/pretok_unicode.inc

$(GEN)/rt_%.c: runtime/%.re
	@mkdir -p $(dir $@)
	re2c -W --no-generation-date -Iruntime -I$(GEN) -o $@ $<

$(BUILD)/gen-obj/rt_%.o: $(GEN)/rt_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -Wno-implicit-fallthrough -c -o $@ $<

$(BUILD)/runtime/%.o: runtime/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BLAS_CFLAGS) $(CFLAGS) -pthread -c -o $@ $<

$(BUILD)/llmc-train: $(RUNTIME_OBJ)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS)

# MPI for runtime/dist.c: Open MPI's own flags from mpicc. Without mpicc the
# trainer still builds (srun + TCP rendezvous work) and refuses, with a message,
# to start under mpirun; the warning below makes such a build visible.
# pkg-config's mpi-c first (Open MPI and MPICH ship it), else mpicc's own flags.
MPICC      ?= mpicc
MPI_CFLAGS := $(or $(call pkg_cflags,mpi-c),$(shell $(MPICC) --showme:compile 2>/dev/null))
MPI_LIBS   := $(or $(shell $(PKG_CONFIG) --libs mpi-c 2>/dev/null),$(shell $(MPICC) --showme:link 2>/dev/null))
ifneq ($(strip $(MPI_LIBS)),)
$(BUILD)/runtime/dist.o: override CPPFLAGS += -DLLMC_WITH_MPI $(MPI_CFLAGS)
RUNTIME_LIBS += $(MPI_LIBS)
else
$(warning llmc-train: mpicc not found; building without MPI (mpirun launches are refused, srun works))
endif

# What llmc-train's objects may include: runtime/ and contract/ (what llmc and
# llmc-train must agree on: plan_limits.h), never compiler/.
RUNTIME_INC := -Iruntime -Icontract
$(BUILD)/runtime/%.o $(BUILD)/gen-obj/rt_%.o: override CPPFLAGS += $(RUNTIME_INC)

