# bench/frontend — `llmc check` time on generated plans of 12,500..100,000 lines and
# hostlists of 12,500..100,000 nodes; shows per-line / per-node cost stays flat
# (front end, estimator and emit_check lints together).
BENCH_TARGETS += bench-frontend
.PHONY: bench-frontend
bench-frontend: $(BUILD)/llmc
	@python3 bench/frontend/bench.py $(BUILD)/llmc
