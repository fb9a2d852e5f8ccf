# tests/estimator — check vectors for the estimator and `llmc explain` goldens.
#   make test-estimator          (SAN=1 for ASan + UBSan)
EST_TEST_BIN := $(BUILD)/tests/estimator/test_estimate

# The checks, one file per topic (test_estimate.h lists them).
EST_TEST_SRC := $(sort $(wildcard tests/estimator/*.c))

$(EST_TEST_BIN): $(EST_TEST_SRC) tests/estimator/test_estimate.h $(COMPILER_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter-out %.h,$^) $(COMPILER_LIBS)

TEST_SUITES += estimator
TEST_BUILD += $(EST_TEST_BIN)
.PHONY: test-estimator
test-estimator: $(EST_TEST_BIN) $(BUILD)/llmc
	@bash tests/estimator/run.sh $(EST_TEST_BIN) $(BUILD)/llmc

# The prediction check on runs of the CPU trainer made here, timed by the wall clock:
# its own suite, which tests/run-suites.sh runs alone at the end (QUIET_SUITES).
TEST_SUITES += estimator-live
.PHONY: test-estimator-live
test-estimator-live: $(BUILD)/llmc $(BUILD)/llmc-train
	@bash tests/estimator/calibrate_live_test.sh $(BUILD)/llmc $(BUILD)/llmc-train
