# tests/data — suite "data": Unicode/NFC, tokenizer exactness, shards, records,
# chat templates, prepare. `make test-data` (also under SAN=1).
TEST_SUITES += data

DATA_OBJ := $(addprefix $(BUILD)/runtime/,tokenizer.o unicode.o unicode_tables.o shard_io.o json_stream.o \
            chat_template.o records.o) \
            $(BUILD)/gen-obj/rt_pretok.o
DATA_TESTS := nfc_test tokenizer_test shard_test json_stream_test chat_test

$(BUILD)/tests/data/%: tests/data/%.c $(DATA_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(DATA_OBJ) -lcjson -lpthread -lm

.PHONY: test-data
test-data: $(addprefix $(BUILD)/tests/data/,$(DATA_TESTS)) $(BUILD)/llmc-train
	@BUILD=$(BUILD) bash tests/data/run.sh
