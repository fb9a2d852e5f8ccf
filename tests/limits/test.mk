# tests/limits — one notion of a valid plan: every row of contract/plan_limits.h
# walked at its edges through llmc (check, compile) and llmc-train check-plan,
# plus the cases of issue 11 on the trainer's side.
TEST_SUITES += limits
.PHONY: test-limits
test-limits: $(BUILD)/llmc $(BUILD)/llmc-train
	@python3 tests/limits/walk.py $(BUILD)/llmc $(BUILD)/llmc-train

# The boundaries, shown: each folder of compiler/ and runtime/ compiled with the
# build's own command finds the headers of the folders it may use and no other
# (tests/limits/boundaries.sh: a runtime/data file including train_loop.h, a
# compiler/front file including estimate.h, a runtime file including a compiler
# header fail with "No such file or directory"); and no hand-written source file
# over 1,500 lines (issue 29).
.PHONY: test-boundaries
TEST_SUITES += boundaries
test-boundaries: $(patsubst grammar/%.y,$(GEN)/%.h,$(GRAMMAR_Y))
	@bash tests/limits/boundaries.sh "$(MAKE) SAN=$(SAN)" "$(BUILD)"
