# bench/tokenizer.mk — tokenizer throughput (docs/PERFORMANCE.md, "Tokenizer").
#   make bench-tokenizer            llmc vs @lenml/tokenizers (node) here
#   bash bench/tokenizer_bench.sh   the same, plus Hugging Face tokenizers where installed
BENCH_TARGETS += bench-tokenizer
TOKBENCH_OBJ := $(call runtime_objs,tokenizer unicode json_stream pretok unicode_tables)

$(BUILD)/bench/tokenizer_bench: bench/tokenizer_bench.c $(TOKBENCH_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -pthread -o $@ $< $(TOKBENCH_OBJ) -lcjson -lpthread -lm

.PHONY: bench-tokenizer
bench-tokenizer: $(BUILD)/bench/tokenizer_bench
	@BUILD=$(BUILD) bash bench/tokenizer_bench.sh
