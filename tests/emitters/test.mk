# tests/emitters — the llmc emitters (compiler/emit/, templates/, golden/).
#   make test-emitters   unit tests on hand-built plans (also under ASan+UBSan), artifact validation
#                        (bash -n, JSON, LLaMA-Factory YAML keys and types),
#                        hostile plans, and sbatch --test-only on a real local
#                        two-node Slurm (tests/slurm/cluster.sh; needs root)
#   make test-golden     every example compiled and diffed against golden/,
#                        and compiled from two working directories: same bytes
#   make golden          re-record golden/ (review the diff before committing)
EMIT_TEST := $(BUILD)/tests/emitters/emit_test
EMIT_TEST_OBJ := $(filter $(BUILD)/compiler/emit/%.o $(BUILD)/compiler/estimate/%.o,$(COMPILER_OBJ)) \
                 $(call compiler_objs,diag arena model_files chat_templates gpu_catalog hostlist)


$(BUILD)/tests/emitters/emit_test.o: tests/emitters/emit_test.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(EMIT_TEST): $(BUILD)/tests/emitters/emit_test.o $(EMIT_TEST_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lcjson -lyaml -lm

TEST_SUITES += emitters golden
GOLDEN_TARGETS += golden-record
.PHONY: test-emitters test-golden golden-record
# The unit tests run a second time built with ASan+UBSan (build/san).
# So does llmc on every plan (its output compared byte for byte).
TEST_BUILD += $(EMIT_TEST)
TEST_BUILD_SAN += build/san/tests/emitters/emit_test build/san/llmc
test-emitters: $(EMIT_TEST) $(BUILD)/llmc
	@$(MAKE) --no-print-directory -s SAN=1 build/san/tests/emitters/emit_test build/san/llmc
	@bash tests/emitters/run.sh $(EMIT_TEST) $(BUILD)/llmc build/san/tests/emitters/emit_test build/san/llmc

test-golden: $(BUILD)/llmc
	@bash tests/emitters/golden.sh check $(BUILD)/llmc

golden-record: $(BUILD)/llmc
	@bash tests/emitters/golden.sh record $(BUILD)/llmc

# libFuzzer over the whole compile (front end, estimator, emit_check, every
# artifact writer in memory): artifacts of accepted plans must be well formed
# with nothing injected (tests/emitters/fuzz_emitters.c). clang-14.
FUZZ_TARGETS += fuzz-emitters
FUZZ_BINS += $(BUILD)/fuzz/fuzz_emitters
EMIT_FUZZ_SRC := $(filter-out compiler/cli/main.c,$(COMPILER_SRC))
$(BUILD)/fuzz/fuzz_emitters: tests/emitters/fuzz_emitters.c $(EMIT_FUZZ_SRC) $(GEN)/lexer.c $(GEN)/parser.c \
                          $(wildcard templates/*.tmpl) | $(GEN)/parser.h
	@mkdir -p $(dir $@)
	clang-14 -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    $(CPPFLAGS) -o $@ $(filter %.c,$^) -lcjson -lyaml -lm

.PHONY: fuzz-emitters
fuzz-emitters: $(BUILD)/fuzz/fuzz_emitters
	@rm -rf $(BUILD)/fuzz/corpus-emitters && mkdir -p $(BUILD)/fuzz/corpus-emitters
	@cp examples/tiny/*.llm tests/emitters/plans/*.llm tests/emitters/plans/hostile/*.llm tests/emitters/fuzz_seeds/* \
	    $(BUILD)/fuzz/corpus-emitters/
	$(BUILD)/fuzz/fuzz_emitters -max_total_time=$(FUZZ_TIME) -max_len=4096 -timeout=10 -artifact_prefix=$(BUILD)/fuzz/ \
	    $(if $(wildcard tests/frontend/fuzz.dict),-dict=tests/frontend/fuzz.dict) $(BUILD)/fuzz/corpus-emitters
