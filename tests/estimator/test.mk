# tests/estimator — check vectors for the estimator and `llmc explain` goldens.
#   make test-estimator          (SAN=1 for ASan + UBSan)
EST_TEST_BIN := $(BUILD)/tests/estimator/test_estimate

$(EST_TEST_BIN): tests/estimator/test_estimate.c $(COMPILER_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(COMPILER_LIBS)

TEST_SUITES += estimator
.PHONY: test-estimator
test-estimator: $(EST_TEST_BIN) $(BUILD)/llmc $(BUILD)/llmc-train
	@bash tests/estimator/run.sh $(EST_TEST_BIN) $(BUILD)/llmc $(BUILD)/llmc-train
