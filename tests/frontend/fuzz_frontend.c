/* fuzz_frontend.c — libFuzzer target: any bytes through lexer, parser, checker
 * and formatter. Properties: nothing crashes (ASan/UBSan), and for input that
 * parses, fmt is idempotent and its output parses again. */
#include "ast.h"
#include "fmt.h"
#include "frontend.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    Arena *a = arena_new();
    Diags *d = diags_new();
    diags_add_source(d, "fuzz.llm", text, size);
    SourceFile *sf = parse_source("fuzz.llm", text, size, a, d);
    Plan *plan = arena_alloc(a, sizeof(Plan));
    plan->arena = a;
    check_plan(&sf, 1, plan, d);
    FILE *null = fopen("/dev/null", "w");
    diags_render(d, null, DIAG_FMT_HUMAN, 1);
    diags_render(d, null, DIAG_FMT_JSON, 0);
    fclose(null);

    if (sf->syntax_errors == 0) {
        size_t len1, len2;
        char *once = fmt_source(sf, &len1);
        Diags *d2 = diags_new();
        Arena *a2 = arena_new();
        SourceFile *sf2 = parse_source("fmt.llm", once, len1, a2, d2);
        if (sf2->syntax_errors != 0) abort();            /* fmt produced bad syntax */
        char *twice = fmt_source(sf2, &len2);
        if (len1 != len2 || memcmp(once, twice, len1) != 0) abort();   /* not idempotent */
        free(twice);
        arena_free(a2);
        diags_free(d2);
        free(once);
    }
    diags_free(d);
    arena_free(a);
    free(text);
    return 0;
}
