# tests/data — suite "data": Unicode/NFC, tokenizer exactness, shards, records,
# chat templates, prepare. `make test-data` (also under SAN=1).
TEST_SUITES += data

DATA_OBJ := $(call runtime_objs,tokenizer unicode shard_io json_stream \
            chat_template records log pretok unicode_tables)
DATA_TESTS := nfc_test tokenizer_test shard_test json_stream_test chat_test

$(BUILD)/tests/data/%: tests/data/%.c $(DATA_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(DATA_OBJ) -lcjson -lpthread -lm

.PHONY: test-data
TEST_BUILD += $(addprefix $(BUILD)/tests/data/,$(DATA_TESTS))
test-data: $(addprefix $(BUILD)/tests/data/,$(DATA_TESTS)) $(BUILD)/llmc-train $(BUILD)/llmc
	@BUILD=$(BUILD) bash tests/data/run.sh

# libFuzzer targets (clang): `make fuzz-data` runs each for FUZZ_TIME, from the repository root.
FUZZ_TARGETS += fuzz-data
FUZZ_BINS += $(BUILD)/fuzz/fuzz_tokenizer $(BUILD)/fuzz/fuzz_json
FUZZ_CC := clang
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
              $(RUNTIME_INC)
DATA_FUZZ_SRC := runtime/data/tokenizer.c runtime/data/unicode.c $(GEN)/rt_unicode_tables.c runtime/base/json_stream.c \
                 runtime/data/records.c runtime/data/chat_template.c $(GEN)/rt_pretok.c
DATA_FUZZ_LIBS := -lcjson -lm -pthread

$(BUILD)/fuzz/%: tests/data/%.c $(DATA_FUZZ_SRC) $(wildcard runtime/*/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(DATA_FUZZ_SRC) $(DATA_FUZZ_LIBS)

.PHONY: fuzz-data
fuzz-data: $(BUILD)/fuzz/fuzz_tokenizer $(BUILD)/fuzz/fuzz_json
	@mkdir -p $(BUILD)/fuzz/corpus-tokenizer $(BUILD)/fuzz/corpus-json
	$(BUILD)/fuzz/fuzz_tokenizer -max_total_time=$(FUZZ_TIME) -max_len=4096 -timeout=10 -artifact_prefix=$(BUILD)/fuzz/ \
	    $(BUILD)/fuzz/corpus-tokenizer tests/data/fuzz-seeds/tokenizer
	$(BUILD)/fuzz/fuzz_json -max_total_time=$(FUZZ_TIME) -max_len=8192 -timeout=10 -artifact_prefix=$(BUILD)/fuzz/ \
	    $(BUILD)/fuzz/corpus-json tests/data/fuzz-seeds/json
