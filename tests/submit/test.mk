# tests/submit — llmc submit, cancel, logs and status on a chain's directory
# (docs/status.md), against the local two-node Slurm (tests/slurm/cluster.sh;
# root, about a minute): a chain of two jobs submitted in order (afterok), its
# state while running and completed, the right log files, a failed job (exit 1),
# a chain cancelled; bad input first.
TEST_SUITES += submit
.PHONY: test-submit
test-submit: $(BUILD)/llmc
	@bash tests/submit/submit.sh $(BUILD)/llmc
