# compiler/ + grammar/ -> build/llmc
# grammar/*.re are re2c lexers, grammar/*.y Lemon grammars; their C goes to $(GEN).
COMPILER_SRC := $(sort $(wildcard compiler/*.c))
GRAMMAR_RE   := $(sort $(wildcard grammar/*.re))
GRAMMAR_Y    := $(sort $(wildcard grammar/*.y))
COMPILER_GEN := $(patsubst grammar/%.re,$(GEN)/%.c,$(GRAMMAR_RE)) \
                $(patsubst grammar/%.y,$(GEN)/%.c,$(GRAMMAR_Y))
COMPILER_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(COMPILER_SRC)) \
                $(patsubst $(GEN)/%.c,$(BUILD)/gen-obj/%.o,$(COMPILER_GEN))
# Objects for tests and fuzzers: everything but the CLI's main().
COMPILER_LIB_OBJ := $(filter-out $(BUILD)/compiler/main.o,$(COMPILER_OBJ))
COMPILER_LIBS := $(CJSON_LIBS) $(YAML_LIBS) -lm
# What llmc's objects may include: compiler/, contract/ (the limits of a valid
# plan, shared with the runtime: plan_limits.h) and the generated parser.
COMPILER_INC := -Icompiler -Icontract
$(BUILD)/compiler/%.o $(patsubst $(GEN)/%.c,$(BUILD)/gen-obj/%.o,$(COMPILER_GEN)): override CPPFLAGS += $(COMPILER_INC)

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
$(BUILD)/compiler/emit_template_data.o: $(wildcard templates/*.tmpl)
