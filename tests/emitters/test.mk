# tests/emitters — the llmc emitters (compiler/emit*.c, templates/, golden/).
#   make test-emitters   unit tests on hand-built plans (also under ASan+UBSan), artifact validation
#                        (bash -n, JSON, LLaMA-Factory YAML keys and types),
#                        hostile plans, and sbatch --test-only on a real local
#                        two-node Slurm (tests/slurm/cluster.sh; needs root)
#   make test-golden     every example compiled and diffed against golden/,
#                        and compiled from two working directories: same bytes
#   make golden          re-record golden/ (review the diff before committing)
EMIT_TEST := $(BUILD)/tests/emitters/emit_test
EMIT_TEST_OBJ := $(filter $(BUILD)/compiler/emit%.o,$(COMPILER_OBJ)) \
                 $(BUILD)/compiler/diag.o $(BUILD)/compiler/arena.o

# The templates are compiled into llmc (.incbin): rebuild when one changes.
$(BUILD)/compiler/emit_template_data.o: $(wildcard templates/*.tmpl)

$(BUILD)/tests/emitters/emit_test.o: tests/emitters/emit_test.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(EMIT_TEST): $(BUILD)/tests/emitters/emit_test.o $(EMIT_TEST_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lcjson -lyaml -lm

TEST_SUITES += emitters golden
GOLDEN_TARGETS += golden-record
.PHONY: test-emitters test-golden golden-record
# The unit tests run a second time built with ASan+UBSan (build/san).
test-emitters: $(EMIT_TEST) $(BUILD)/llmc
	@$(MAKE) --no-print-directory -s SAN=1 build/san/tests/emitters/emit_test
	@bash tests/emitters/run.sh $(EMIT_TEST) $(BUILD)/llmc build/san/tests/emitters/emit_test

test-golden: $(BUILD)/llmc
	@bash tests/emitters/golden.sh check $(BUILD)/llmc

golden-record: $(BUILD)/llmc
	@bash tests/emitters/golden.sh record $(BUILD)/llmc
