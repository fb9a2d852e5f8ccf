# bench/cpu.mk — CPU trainer throughput (tests/cpu/bench.sh; docs/PERFORMANCE.md "CPU trainer").
BENCH_TARGETS += bench-cpu
.PHONY: bench-cpu
bench-cpu: $(BUILD)/llmc-train $(BUILD)/tests/cpu/make_shards
	@bash tests/cpu/bench.sh $(BUILD)/llmc-train $(BUILD)/tests/cpu/make_shards
