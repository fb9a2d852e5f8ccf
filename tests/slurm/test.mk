# tests/slurm — the local Slurm harness (cluster.sh) tested on its own. Needs root.
TEST_SUITES += slurm
.PHONY: test-slurm
test-slurm:
	@bash tests/slurm/harness.sh
