# bench/sha256.mk — checkpoint hashing: libcrypto's SHA-256, and a checkpoint
# file hashed while written against written-then-read (docs/PERFORMANCE.md,
# "Checkpoint hashing"). SHA_BENCH_FILE (on the disk checkpoints go to) and
# SHA_BENCH_MIB (1536: a file of 1.6 GB) choose what is written.
BENCH_TARGETS += bench-sha256
SHA_BENCH_FILE ?= $(BUILD)/bench/sha256_bench.safetensors
SHA_BENCH_MIB  ?= 1536

$(BUILD)/bench/sha256_bench: bench/sha256_bench.c $(call runtime_objs,safetensors sha256)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call runtime_objs,safetensors sha256) \
	    $(CJSON_LIBS) $(CRYPTO_LIBS) -lm

.PHONY: bench-sha256
bench-sha256: $(BUILD)/bench/sha256_bench
	$(BUILD)/bench/sha256_bench $(SHA_BENCH_FILE) $(SHA_BENCH_MIB)
