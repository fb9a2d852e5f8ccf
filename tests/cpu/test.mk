# tests/cpu — the CPU trainer: model/optimizer against PyTorch fixtures, formats,
# plan loading, and training runs (resume bit-identity, export, verify).
#   make test-cpu
CPU_TEST_OBJ := $(call runtime_objs,model ops_cpu cpus rng safetensors optim sha256 hf_config plan checkpoint store_files model_tensors hf_export lock_holder json_stream log metrics args)

$(BUILD)/tests/cpu/%.o: tests/cpu/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/cpu/test_model: $(BUILD)/tests/cpu/test_model.o $(CPU_TEST_OBJ)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(CJSON_LIBS) $(BLAS_LIBS) $(CRYPTO_LIBS) -lm

$(BUILD)/tests/cpu/test_states: $(BUILD)/tests/cpu/test_states.o $(CPU_TEST_OBJ)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(CJSON_LIBS) $(BLAS_LIBS) $(CRYPTO_LIBS) -lm

$(BUILD)/tests/cpu/make_shards: $(BUILD)/tests/cpu/make_shards.o $(call runtime_objs,shard_io rng)
	$(CC) $(LDFLAGS) -o $@ $^ -lcjson -lm

$(BUILD)/tests/cpu/test_formats: $(BUILD)/tests/cpu/test_formats.o $(CPU_TEST_OBJ)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(CJSON_LIBS) $(BLAS_LIBS) $(CRYPTO_LIBS) -lm

TEST_SUITES += cpu
.PHONY: test-cpu
CPU_TEST_BINS := $(addprefix $(BUILD)/tests/cpu/,loop_test test_model test_states test_formats make_shards)
TEST_BUILD += $(CPU_TEST_BINS)
test-cpu: $(CPU_TEST_BINS) $(BUILD)/llmc-train $(BUILD)/llmc
	@bash tests/cpu/run.sh $(BUILD)

# libFuzzer target for the safetensors reader (FUZZ_CC/FUZZ_FLAGS from tests/data/test.mk):
#   make fuzz-cpu  runs it for FUZZ_TIME, from the repository root.
FUZZ_TARGETS += fuzz-cpu
FUZZ_BINS += $(BUILD)/fuzz/fuzz_safetensors
$(BUILD)/fuzz/fuzz_safetensors: tests/cpu/fuzz_safetensors.c runtime/store/safetensors.c runtime/store/safetensors.h runtime/store/sha256.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< runtime/store/safetensors.c runtime/store/sha256.c $(CJSON_LIBS) $(CRYPTO_LIBS) -lm

.PHONY: fuzz-cpu
fuzz-cpu: $(BUILD)/fuzz/fuzz_safetensors
	@mkdir -p $(BUILD)/fuzz/corpus-safetensors
	$(BUILD)/fuzz/fuzz_safetensors -max_total_time=$(FUZZ_TIME) -max_len=4096 -timeout=10 -artifact_prefix=$(BUILD)/fuzz/ \
	    $(BUILD)/fuzz/corpus-safetensors tests/cpu/fuzz-seeds/safetensors

# The training loop over a backend that keeps its own copy of the state, as the
# CUDA backend does (tests/cpu/loop_test.c, tests/cpu/loop_test.sh).
$(BUILD)/tests/cpu/loop_test: $(BUILD)/tests/cpu/loop_test.o $(RUNTIME_LIB_OBJ)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS)
