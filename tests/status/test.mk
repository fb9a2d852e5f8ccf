# tests/status — `llmc status` (docs/status.md): bad input, then a real run on the
# local Slurm (running, requeued), --format=json, --plot, --watch (root, ~60 s).
TEST_SUITES += status
.PHONY: test-status
test-status: $(BUILD)/llmc $(BUILD)/llmc-train
	@bash tests/status/status.sh $(BUILD)/llmc $(BUILD)/llmc-train
