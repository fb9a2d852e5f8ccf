# tests/vocab — one spelling per word: every row of contract/plan_vocab.h
# round-tripped (.llm spelling through llmc check and compile into plan.json,
# and back through llmc-train's plan reader to the same enum value), and the
# tree searched for the rows' spellings written anywhere but contract/
# (tests/vocab/vocab.py).
VOCAB_READBACK_OBJ := $(call runtime_objs,plan model ops_cpu rng cpus args json_stream log chat_template tokenizer \
                      unicode unicode_tables pretok)

$(BUILD)/tests/vocab/%.o: tests/vocab/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/vocab/rows: $(BUILD)/tests/vocab/rows.o $(BUILD)/compiler/check/chat_templates.o
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/tests/vocab/readback: $(BUILD)/tests/vocab/readback.o $(VOCAB_READBACK_OBJ)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(CJSON_LIBS) $(BLAS_LIBS) -lm

TEST_SUITES += vocab
TEST_BUILD += $(BUILD)/tests/vocab/rows $(BUILD)/tests/vocab/readback
.PHONY: test-vocab
test-vocab: $(BUILD)/llmc $(BUILD)/llmc-train $(BUILD)/tests/vocab/rows $(BUILD)/tests/vocab/readback
	@python3 tests/vocab/vocab.py $(BUILD)/llmc $(BUILD)/tests/vocab/rows $(BUILD)/tests/vocab/readback
