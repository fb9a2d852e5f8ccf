# bench/frontend — `llmc check` time on generated plans of 12,500..100,000 lines and
# hostlists of 12,500..100,000 nodes; shows per-line / per-node cost stays flat.
BENCH_TARGETS += bench-frontend
.PHONY: bench-frontend
# First the front end alone (lexer, parser, use, checker: must stay linear), then the
# whole `llmc check` (plus estimator and emit_check lints) for information.
bench-frontend: $(BUILD)/llmc $(BUILD)/tests/llmc_frontend
	@echo "== front end alone ($(BUILD)/tests/llmc_frontend)"
	@python3 bench/frontend/bench.py $(BUILD)/tests/llmc_frontend
	@echo "== whole llmc check ($(BUILD)/llmc)"
	@python3 bench/frontend/bench.py $(BUILD)/llmc --report-only
