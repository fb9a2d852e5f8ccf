# tests/frontend — the llmc front end: bad plans with exact expected diagnostics,
# JSON output, fmt, hostile inputs, CLI, and C unit tests; again under ASan+UBSan.
TEST_SUITES += frontend frontend-san

FRONTEND_LIB_SRC := $(addprefix compiler/front/,arena.c diag.c fmt.c parse.c) \
                    $(sort $(wildcard compiler/check/*.c))
FRONTEND_LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(FRONTEND_LIB_SRC)) \
                    $(BUILD)/gen-obj/lexer.o $(BUILD)/gen-obj/parser.o

$(BUILD)/tests/frontend_unit: tests/frontend/unit.c $(FRONTEND_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) -lcjson -lm

.PHONY: test-frontend test-frontend-san fuzz-frontend
TEST_BUILD += $(BUILD)/tests/frontend_unit
TEST_BUILD_SAN += build/san/tests/frontend_unit
test-frontend: $(BUILD)/llmc $(BUILD)/tests/frontend_unit
	@bash tests/frontend/run.sh $(BUILD)/llmc $(BUILD)/tests/frontend_unit

# `make SAN=1 fuzz` builds and runs: every fuzz target a few seconds (clang-14).
TEST_SUITES += fuzz-smoke
.PHONY: test-fuzz-smoke
test-fuzz-smoke:
	@bash tests/frontend/fuzz_smoke.sh

# The same suite with AddressSanitizer + UndefinedBehaviorSanitizer.
test-frontend-san:
	@$(MAKE) --no-print-directory -s SAN=1 build/san/llmc build/san/tests/frontend_unit >/dev/null
	@ASAN_OPTIONS=detect_leaks=1 bash tests/frontend/run.sh build/san/llmc build/san/tests/frontend_unit san

# libFuzzer over lexer, parser, checker and formatter (clang); corpus: examples + bad plans.
FUZZ_TARGETS += fuzz-frontend
FUZZ_BINS += $(BUILD)/fuzz/fuzz_frontend
$(BUILD)/fuzz/fuzz_frontend: tests/frontend/fuzz_frontend.c $(FRONTEND_LIB_SRC) $(GEN)/lexer.c $(GEN)/parser.c | $(GEN)/parser.h
	@mkdir -p $(dir $@)
	clang-14 -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    $(CPPFLAGS) -o $@ $(filter %.c,$^) -lcjson -lm

fuzz-frontend: $(BUILD)/fuzz/fuzz_frontend
	@rm -rf $(BUILD)/fuzz/corpus-frontend && mkdir -p $(BUILD)/fuzz/corpus-frontend
	@cp examples/*.llm examples/tiny/*.llm tests/frontend/bad/*.llm tests/frontend/fmt/*.llm $(BUILD)/fuzz/corpus-frontend/
	$(BUILD)/fuzz/fuzz_frontend -max_total_time=$(FUZZ_TIME) -max_len=4096 -timeout=10 -artifact_prefix=$(BUILD)/fuzz/ \
	    -dict=tests/frontend/fuzz.dict $(BUILD)/fuzz/corpus-frontend
