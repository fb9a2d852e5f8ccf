# tests/limits — one notion of a valid plan: every row of contract/plan_limits.h
# walked at its edges through llmc (check, compile) and llmc-train check-plan,
# plus the cases of issue 11 on the trainer's side.
TEST_SUITES += limits
.PHONY: test-limits
test-limits: $(BUILD)/llmc $(BUILD)/llmc-train
	@python3 tests/limits/walk.py $(BUILD)/llmc $(BUILD)/llmc-train
