# tests/limits — one notion of a valid plan: every row of contract/plan_limits.h
# walked at its edges through llmc (check, compile) and llmc-train check-plan,
# plus the cases of issue 11 on the trainer's side.
TEST_SUITES += limits
.PHONY: test-limits
test-limits: $(BUILD)/llmc $(BUILD)/llmc-train
	@python3 tests/limits/walk.py $(BUILD)/llmc $(BUILD)/llmc-train

# The boundary, shown: a file that includes a compiler header does not build
# with the runtime's include paths, and does with the compiler's (and a runtime
# header the other way round).
.PHONY: test-boundaries
TEST_SUITES += boundaries
test-boundaries:
	@bash tests/limits/boundaries.sh "$(CC) $(filter-out -I%,$(CPPFLAGS)) -I$(GEN) $(CFLAGS)" "$(RUNTIME_INC)" "$(COMPILER_INC)"
