# tests/cli — the Unix conventions of llmc and llmc-train: --help (exit 0) of every
# command, --version, --opt=v and --opt v, bad values named, NO_COLOR, log_every into
# plan.json, the build's CC/CFLAGS/WERROR, `make install DESTDIR PREFIX`, and make
# without re2c or lemon naming them and `make deps`.
TEST_SUITES += cli
.PHONY: test-cli
test-cli: $(BUILD)/llmc $(BUILD)/llmc-train
	@MAKE="$(MAKE)" bash tests/cli/cli.sh $(BUILD)/llmc $(BUILD)/llmc-train $(BUILD)/llmc-train-cuda
