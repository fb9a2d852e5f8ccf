# compiler/ + grammar/ -> build/llmc
# grammar/*.re are re2c lexers, grammar/*.y Lemon grammars; their C goes to $(GEN).
# One folder per stage of the pipeline, each using only the ones before it:
#   front     text -> AST: lexer and parser (grammar/), diagnostics, arena, fmt
#   check     AST -> typed plan (plan.h): the checker, `use`, catalogs, hostlists
#   estimate  typed plan -> memory and time figures
#   emit      typed plan + figures -> out/ (templates/)
#   cli       the llmc command and its subcommands
COMPILER_DIRS := front check estimate emit cli
COMPILER_SRC := $(sort $(foreach d,$(COMPILER_DIRS),$(wildcard compiler/$(d)/*.c)))
GRAMMAR_RE   := $(sort $(wildcard grammar/*.re))
GRAMMAR_Y    := $(sort $(wildcard grammar/*.y))
COMPILER_GEN := $(patsubst grammar/%.re,$(GEN)/%.c,$(GRAMMAR_RE)) \
                $(patsubst grammar/%.y,$(GEN)/%.c,$(GRAMMAR_Y))
COMPILER_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(COMPILER_SRC)) \
                $(patsubst $(GEN)/%.c,$(BUILD)/gen-obj/%.o,$(COMPILER_GEN))
# Objects for tests and fuzzers: everything but the CLI's main().
COMPILER_LIB_OBJ := $(filter-out $(BUILD)/compiler/cli/main.o,$(COMPILER_OBJ))
# The objects of the named modules, wherever their folder (for tests: arena diag ...).
compiler_objs = $(foreach n,$(1),$(filter %/$(n).o,$(COMPILER_OBJ)))
COMPILER_LIBS := $(CJSON_LIBS) $(YAML_LIBS) -lm
# What each folder's objects may include: its own folder, the folders before it
# in the pipeline, contract/ (the limits of a valid plan, shared with the
# runtime: plan_limits.h), and for the front end the generated parser. Any other
# include fails to build ("No such file or directory"; make test-boundaries).
compiler_inc = $(addprefix -Icompiler/,$(1)) -Icontract
COMPILER_INC_front    := $(call compiler_inc,front) -I$(GEN)
COMPILER_INC_check    := $(call compiler_inc,check front)
COMPILER_INC_estimate := $(call compiler_inc,estimate check front)
COMPILER_INC_emit     := $(call compiler_inc,emit estimate check front)
COMPILER_INC_cli      := $(call compiler_inc,cli emit estimate check front)
$(BUILD)/compiler/front/%.o $(patsubst $(GEN)/%.c,$(BUILD)/gen-obj/%.o,$(COMPILER_GEN)): override CPPFLAGS += $(COMPILER_INC_front)
$(BUILD)/compiler/check/%.o:    override CPPFLAGS += $(COMPILER_INC_check)
$(BUILD)/compiler/estimate/%.o: override CPPFLAGS += $(COMPILER_INC_estimate)
$(BUILD)/compiler/emit/%.o:     override CPPFLAGS += $(COMPILER_INC_emit)
$(BUILD)/compiler/cli/%.o:      override CPPFLAGS += $(COMPILER_INC_cli)
# Every folder of llmc (the tests' view).
COMPILER_INC := $(COMPILER_INC_cli) -I$(GEN)

$(GEN)/%.c: grammar/%.re
	@mkdir -p $(dir $@)
	re2c -W --no-generation-date -o $@ $<

# Lemon writes NAME.c and NAME.h beside each other in -d.
$(GEN)/%.c $(GEN)/%.h: grammar/%.y
	@mkdir -p $(GEN)
	lemon -q -d$(GEN) -T/usr/share/lemon/lempar.c $<
	@touch $(GEN)/$*.h

$(BUILD)/compiler/%.o: compiler/%.c | $(patsubst grammar/%.y,$(GEN)/%.h,$(GRAMMAR_Y))
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# Generated code: same warnings, minus the ones its generators cannot avoid.
$(BUILD)/gen-obj/%.o: $(GEN)/%.c | $(patsubst grammar/%.y,$(GEN)/%.h,$(GRAMMAR_Y))
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable -Wno-implicit-fallthrough -c -o $@ $<

$(BUILD)/llmc: $(COMPILER_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(COMPILER_LIBS)

# The templates are compiled into llmc (.incbin): rebuild when one changes.
$(BUILD)/compiler/emit/emit_template_data.o: $(wildcard templates/*.tmpl)
