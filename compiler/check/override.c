/* override.c — `--set BLOCK.KEY=VALUE` and each point of `--sweep`: a value
 * from the command line put into the plan's syntax tree before the checker
 * runs (frontend.h: frontend_load_overrides).
 *
 * The value goes through the same lexer and parser as a .llm file: the
 * argument is registered as a one-line source named after the option and its
 * key ("--set train.batch"), and parsed as the entry `KEY=VALUE` of a block
 * whose header sits where the argument's "--set BLOCK." was, so every
 * position (and so every diagnostic, the checker's included) points into the
 * argument as the user typed it:
 *
 *     --set train.batch:1:18: error: 'batch' takes a whole number ...
 *         1 | --set train.batch=x
 *           |                  ^
 *
 * The source's name holds no '/', so a relative path given on the command line
 * is relative to the working directory (a path in a plan is relative to its
 * file). */
#include "frontend.h"

#include <string.h>

/* [start, end) columns of the one line of an override's source. */
static SrcRange cols(const char *file, int c0, int c1)
{
    return (SrcRange){{file, 1, c0}, {file, 1, c1 > c0 ? c1 : c0 + 1}};
}

static bool name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
}

/* Every block of every file, in load order. */
typedef struct {
    Item **items;
    int n;
} Blocks;

static Blocks all_blocks(Arena *a, SourceFile **files, int nfiles)
{
    PtrVec v = {0};
    for (int f = 0; f < nfiles; f++)
        for (int i = 0; i < files[f]->nitems; i++)
            if (files[f]->items[i]->kind == ITEM_BLOCK) ptrvec_push(a, &v, files[f]->items[i]);
    return (Blocks){(Item **)v.items, v.n};
}

static const char *block_names(Arena *a, const Blocks *b, const char *kind)
{
    char *s = arena_strdup(a, "");
    int shown = 0;
    for (int i = 0; i < b->n; i++) {
        if (kind && strcmp(b->items[i]->kind_name, kind) != 0) continue;
        if (!b->items[i]->name) continue;
        s = shown == 10 ? arena_printf(a, "%s, ...", s)
            : shown > 10 ? s
            : arena_printf(a, "%s%s%s", s, shown ? ", " : "", b->items[i]->name);
        shown++;
    }
    return s;
}

/* Append e to the entry list (*list, *n). */
static void push_entry(Arena *a, Entry ***list, int *n, Entry *e)
{
    Entry **grown = arena_alloc(a, sizeof(Entry *) * (size_t)(*n + 1));
    if (*n) memcpy(grown, *list, sizeof(Entry *) * (size_t)*n);
    grown[(*n)++] = e;
    *list = grown;
}

/* One override: parsed, then applied to the block it names. */
static void apply_one(Arena *a, Diags *d, const Blocks *blocks, const PlanOverride *ov)
{
    const char *arg = ov->arg;
    size_t optlen = strlen(ov->option);
    const char *eq = strchr(arg, '=');
    size_t keylen = eq ? (size_t)(eq - arg) : strlen(arg);
    /* the source: "--set BLOCK.KEY=VALUE", named "--set BLOCK.KEY" */
    const char *file = arena_printf(a, "%s %.*s", ov->option, (int)keylen, arg);
    const char *text = arena_printf(a, "%s %s", ov->option, arg);
    size_t len = strlen(text);
    diags_add_source(d, file, text, len);
    int at0 = (int)optlen + 2;   /* column of BLOCK */
    int ateq = at0 + (int)keylen;  /* column of '=' */
    int atend = (int)len + 1;

    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p == 0x7f) {
            diag_error(d, cols(file, (int)(p - (const unsigned char *)text) + 1, 0),
                       "a control character in %s's argument", ov->option);
            return;
        }
    if (!eq) {
        diag_help(diag_error(d, cols(file, at0, atend), "%s takes BLOCK.KEY=VALUE; this has no '='", ov->option),
                  "e.g. %s train.batch=8", ov->option);
        return;
    }
    /* BLOCK.KEY: names separated by dots, at least two */
    const char *parts[MAX_NESTING + 2];
    int partcol[MAX_NESTING + 2], partlen[MAX_NESTING + 2], nparts = 0;
    for (size_t i = 0; i <= keylen;) {
        size_t j = i;
        while (j < keylen && name_char(arg[j])) j++;
        if (j == i || (j < keylen && arg[j] != '.') || nparts == MAX_NESTING + 2) {
            diag_help(diag_error(d, cols(file, at0 + (int)j, at0 + (int)j + 1),
                                 "%s: expected BLOCK.KEY before '=', a block (its kind or its name) and a key",
                                 ov->option),
                      "e.g. %s train.batch=8, or %s NAME.KEY=VALUE for the block called NAME", ov->option,
                      ov->option);
            return;
        }
        parts[nparts] = arena_strndup(a, arg + i, j - i);
        partcol[nparts] = at0 + (int)i;
        partlen[nparts++] = (int)(j - i);
        i = j + 1;
    }
    if (nparts < 2) {
        diag_help(diag_error(d, cols(file, at0, ateq), "%s: '%s' names no key; expected BLOCK.KEY", ov->option,
                             parts[0]),
                  "e.g. %s %s.KEY=VALUE", ov->option, parts[0]);
        return;
    }
    const char *v = eq + 1;
    while (*v == ' ' || *v == '\t') v++;
    if (!*v) {
        diag_error(d, cols(file, ateq, ateq + 1), "%s: no value after '='", ov->option);
        return;
    }

    /* The entry KEY=VALUE, parsed inside a block whose header "s{" replaces
     * "--set BLOCK." (same columns), closed on the next line. */
    int last = nparts - 1;
    size_t keycol0 = (size_t)partcol[last] - 1;   /* offset of the last name */
    char *buf = arena_alloc(a, len + 4);
    memcpy(buf, text, len);
    memset(buf, ' ', keycol0);
    buf[0] = 's';
    buf[1] = '{';
    memcpy(buf + len, "\n}\n", 4);
    int errors = diags_error_count(d);
    SourceFile *sf = parse_source(file, buf, len + 3, a, d);
    if (diags_error_count(d) > errors || sf->syntax_errors) return;
    Entry *got = sf->nitems == 1 && sf->items[0]->kind == ITEM_BLOCK && sf->items[0]->nentries == 1
                     ? sf->items[0]->entries[0] : NULL;
    if (!got || !got->value) {
        diag_help(diag_error(d, cols(file, ateq + 1, atend), "%s: expected one value after '='", ov->option),
                  "a value as a plan writes it: 8, 2 TiB, \"text\", [a, b], 4 per gpu");
        return;
    }
    got->at = cols(file, at0, atend);

    /* the block: a kind the plan has (one block of it, or the next name
     * picks one), else a block's name */
    int first = 1, nkind = 0;
    Item *target = NULL;
    for (int i = 0; i < blocks->n; i++)
        if (strcmp(blocks->items[i]->kind_name, parts[0]) == 0) {
            nkind++;
            target = blocks->items[i];
        }
    if (nkind > 1) {
        target = NULL;
        for (int i = 0; nparts > 2 && i < blocks->n; i++)
            if (strcmp(blocks->items[i]->kind_name, parts[0]) == 0 && blocks->items[i]->name &&
                strcmp(blocks->items[i]->name, parts[1]) == 0)
                target = blocks->items[i];
        if (!target) {
            Diag *g = diag_error(d, cols(file, partcol[0], partcol[0] + partlen[0]),
                                 "%s: the plan has %d %s blocks; which one?", ov->option, nkind, parts[0]);
            diag_note(g, "%s blocks: %s", parts[0], block_names(a, blocks, parts[0]));
            diag_help(g, "name it: %s %s.NAME.%s or %s NAME.%s", ov->option, parts[0], parts[last], ov->option,
                      parts[last]);
            return;
        }
        first = 2;
    } else if (nkind == 0) {
        for (int i = 0; i < blocks->n; i++)
            if (blocks->items[i]->name && strcmp(blocks->items[i]->name, parts[0]) == 0) target = blocks->items[i];
        if (!target) {
            const char *cands[64];
            int nc = 0;
            for (int i = 0; i < blocks->n && nc < 62; i++) {
                cands[nc++] = blocks->items[i]->kind_name;
                if (blocks->items[i]->name) cands[nc++] = blocks->items[i]->name;
            }
            const char *dym = did_you_mean(parts[0], cands, nc);
            Diag *g = dym ? diag_error(d, cols(file, partcol[0], partcol[0] + partlen[0]),
                                       "%s: the plan has no block '%s'; did you mean '%s'?", ov->option, parts[0], dym)
                          : diag_error(d, cols(file, partcol[0], partcol[0] + partlen[0]),
                                       "%s: the plan has no block '%s' (neither a kind nor a name)", ov->option,
                                       parts[0]);
            diag_note(g, "its blocks: %s", block_names(a, blocks, NULL));
            return;
        }
    }
    if (first > last) {
        diag_help(diag_error(d, cols(file, at0, ateq), "%s: names the %s block '%s' but no key", ov->option,
                             target->kind_name, target->name ? target->name : "?"),
                  "e.g. %s %s.%s.KEY=VALUE", ov->option, parts[0], parts[1]);
        return;
    }

    /* sub-blocks on the way (made when the plan has none), then the key */
    Entry ***list = &target->entries;
    int *n = &target->nentries;
    for (int k = first; k < last; k++) {
        Entry *sub = NULL;
        for (int i = 0; i < *n; i++)
            if (strcmp((*list)[i]->key, parts[k]) == 0) sub = (*list)[i];
        if (sub && sub->value) {
            diag_error(d, cols(file, partcol[k], partcol[k] + partlen[k]),
                       "%s: '%s' is a value in %s block '%s', not a sub-block", ov->option, parts[k],
                       target->kind_name, target->name ? target->name : "?");
            return;
        }
        if (!sub) {
            sub = arena_alloc(a, sizeof(Entry));
            sub->key = parts[k];
            sub->key_at = sub->at = sub->close_at = cols(file, partcol[k], partcol[k] + partlen[k]);
            push_entry(a, list, n, sub);
        }
        list = &sub->sub;
        n = &sub->nsub;
    }
    bool replaced = false;
    for (int i = 0; i < *n; i++) {
        Entry *e = (*list)[i];
        if (strcmp(e->key, got->key) != 0) continue;
        if (!e->value) {
            diag_help(diag_error(d, cols(file, partcol[last], partcol[last] + partlen[last]),
                                 "%s: '%s' is a sub-block; set one of its keys", ov->option, got->key),
                      "e.g. %s %.*s.KEY=VALUE", ov->option, (int)keylen, arg);
            return;
        }
        e->value = got->value;   /* the file's key, the command line's value */
        e->at = got->at;
        replaced = true;
    }
    if (!replaced) push_entry(a, list, n, got);   /* a key the block lacks: checked like any */
}

void apply_overrides(SourceFile **files, int nfiles, const PlanOverride *ov, int nov, Arena *a, Diags *d)
{
    Blocks blocks = all_blocks(a, files, nfiles);
    for (int i = 0; i < nov; i++) apply_one(a, d, &blocks, &ov[i]);
}
