/* check.c — the checker: AST of every file -> typed plan (plan.h).
 *
 * Reports, in one run, every unknown/duplicate/missing key, wrong type, wrong or
 * missing unit, out-of-range value, undefined or wrong-kind reference, and the
 * cross-field rules (model shape, context, hostlist size, dataset format vs
 * columns/tags, stage vs data, template, global batch, paths). A plan with
 * errors is still filled as far as possible so that later rules can run.
 */
#include "frontend.h"
#include "hostlist.h"
#include "model_files.h"
#include "chat_templates.h"
#include "plan_limits.h"   /* contract/: the limits llmc-train's plan reader also applies */
#include "backend_caps.h"  /* contract/: what each llmc-train backend runs, which it also refuses */
#include "path_policy.h"   /* contract/: where a run may write, which llmc-train also refuses */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { K_CLUSTER, K_MODEL, K_DATASET, K_TRAIN, K_JOB, K_GPU, K_PROFILE, K_COUNT } BlockKind;
static const char *const kind_names[K_COUNT] = {"cluster", "model", "dataset", "train", "job", "gpu", "profile"};

typedef struct {
    const char *name;
    BlockKind kind;
    const Item *item;
    void *obj;           /* PlanCluster *, PlanModel *, ... */
} Symbol;

typedef struct {
    Arena *a;
    Diags *d;
    Plan *plan;
    Symbol *syms;
    int nsyms, capsyms;
    int *index;          /* open-addressing hash of syms by name: slot -> index + 1 */
    size_t nindex;
} Checker;

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The entries of one block or sub-block, with how to name it in messages. */
typedef struct {
    Entry **es;
    int n;
    const char *where;   /* "model block 'qwen72b'" */
    SrcRange at;         /* where "missing key" points */
    bool broken;         /* syntax error inside: do not report missing keys */
    const char *missing[32], *examples[32];   /* required keys not set */
    int nmissing;
    const char *suggested[32];   /* keys offered by "did you mean": not also "missing" */
    int nsuggested;
} Scope;

/* ---- did you mean ---- */

static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + cost;
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

const char *did_you_mean(const char *word, const char *const *cands, int n)
{
    int len = (int)strlen(word);
    int limit = (len + 2) / 3;
    if (limit < 1) limit = 1;
    if (limit > 3) limit = 3;
    const char *best = NULL;
    int bestd = limit + 1;
    for (int i = 0; i < n; i++) {
        int dist = edit_distance(word, cands[i]);
        if (dist < bestd && dist < (int)strlen(cands[i])) { best = cands[i]; bestd = dist; }
    }
    return best;
}

static const char *join_names(Arena *a, const char *const *names, int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(names[i]) + 2;
    char *s = arena_alloc(a, len);
    for (int i = 0; i < n; i++) {
        if (i) strcat(s, ", ");
        strcat(s, names[i]);
    }
    return s;
}

/* ---- describing values ---- */

static const char *term_desc(Checker *c, const Term *t)
{
    switch (t->kind) {
    case TERM_INT: return arena_printf(c->a, "integer %s", t->text);
    case TERM_FLOAT: return arena_printf(c->a, "number %s", t->text);
    case TERM_STRING: return "a string";
    case TERM_IDENT: return arena_printf(c->a, "name '%s'", t->text);
    case TERM_HOSTLIST: return "a hostlist";
    case TERM_PERCENT: return "'%'";
    case TERM_LIST: return "a list";
    }
    return "a value";
}

static const char *value_desc(Checker *c, const Value *v)
{
    if (v->nterms == 2 && (v->terms[0]->kind == TERM_INT || v->terms[0]->kind == TERM_FLOAT)) {
        if (v->terms[1]->kind == TERM_IDENT)
            return arena_printf(c->a, "'%s %s'", v->terms[0]->text, v->terms[1]->text);
        if (v->terms[1]->kind == TERM_PERCENT)
            return arena_printf(c->a, "percentage %s%%", v->terms[0]->text);
    }
    if (v->nterms > 1) return "several values";
    return term_desc(c, v->terms[0]);
}

static bool is_number(const Term *t) { return t->kind == TERM_INT || t->kind == TERM_FLOAT; }

/* ---- keys ---- */

static Scope scope_of(Checker *c, const Item *it, Entry **es, int n, const char *sub)
{
    Scope s = {.es = es, .n = n, .at = it->name ? it->name_at : it->kind_at, .broken = it->broken};
    if (sub) s.where = arena_printf(c->a, "'%s' of %s block '%s'", sub, it->kind_name, it->name ? it->name : "?");
    else s.where = arena_printf(c->a, "%s block '%s'", it->kind_name, it->name ? it->name : "?");
    return s;
}

static void check_keys(Checker *c, Scope *s, const char *const *keys, int nkeys)
{
    enum { MAX_BLOCK_KEYS = 128 };   /* the train block's list is the longest */
    const Entry *first[MAX_BLOCK_KEYS] = {0};   /* first entry of each known key */
    for (int i = 0; i < s->n; i++) {
        Entry *e = s->es[i];
        int known = -1;
        for (int k = 0; k < nkeys && k < MAX_BLOCK_KEYS; k++)
            if (strcmp(e->key, keys[k]) == 0) known = k;
        if (known < 0) {
            const char *dym = did_you_mean(e->key, keys, nkeys);
            if (dym) {
                diag_error(c->d, e->key_at, "unknown key '%s' in %s; did you mean '%s'?", e->key, s->where, dym);
                if (s->nsuggested < 32) s->suggested[s->nsuggested++] = dym;
            } else {
                Diag *g = diag_error(c->d, e->key_at, "unknown key '%s' in %s", e->key, s->where);
                diag_note(g, "valid keys: %s", join_names(c->a, keys, nkeys));
            }
            continue;
        }
        if (first[known]) {
            Diag *g = diag_error(c->d, e->key_at, "duplicate key '%s' in %s", e->key, s->where);
            diag_note(g, "first set at line %d", first[known]->key_at.start.line);
        } else {
            first[known] = e;
        }
    }
}

static Entry *find(const Scope *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->es[i]->key, key) == 0) return s->es[i];
    return NULL;
}

/* Find a required key; missing ones are reported together by report_missing(). */
static Entry *require(Checker *c, Scope *s, const char *key, const char *example)
{
    (void)c;
    Entry *e = find(s, key);
    for (int i = 0; i < s->nsuggested; i++)
        if (strcmp(s->suggested[i], key) == 0) return e;   /* already reported as a misspelling */
    if (!e && s->nmissing < 32) {
        s->missing[s->nmissing] = key;
        s->examples[s->nmissing++] = example;
    }
    return e;
}

static void report_missing(Checker *c, const Scope *s)
{
    if (s->nmissing == 0 || s->broken) return;
    Diag *g;
    if (s->nmissing == 1) {
        g = diag_error(c->d, s->at, "missing required key '%s' in %s", s->missing[0], s->where);
    } else {
        char list[512] = "";
        for (int i = 0; i < s->nmissing; i++) {
            if (i) strcat(list, i == s->nmissing - 1 ? " and " : ", ");
            strcat(list, "'");
            strcat(list, s->missing[i]);
            strcat(list, "'");
        }
        g = diag_error(c->d, s->at, "missing required keys %s in %s", list, s->where);
    }
    for (int i = 0; i < s->nmissing; i++) diag_help(g, "add '%s = %s'", s->missing[i], s->examples[i]);
}

/* The entry must hold a value (not a sub-block) of exactly n terms. */
static bool want_terms(Checker *c, const Entry *e, int n, const char *what)
{
    if (!e->value) {
        diag_error(c->d, e->key_at, "'%s' takes %s, not a block", e->key, what);
        return false;
    }
    if (e->value->nterms == n) return true;
    if (e->value->nterms > n) {
        SrcRange r = {e->value->terms[n]->at.start, e->value->at.end};
        Diag *g = diag_error(c->d, r, "unexpected %s after the value of '%s'",
                             term_desc(c, e->value->terms[n]), e->key);
        diag_note(g, "'%s' takes %s", e->key, what);
        return false;
    }
    return true;   /* fewer terms: the caller reports what is missing */
}

static bool get_int(Checker *c, const Entry *e, int64_t min, int64_t max, int64_t *out)
{
    if (!e->value) return want_terms(c, e, 1, "an integer");
    const Value *v = e->value;
    const Term *t = v->terms[0];
    if (v->nterms == 2 && is_number(t) && (v->terms[1]->kind == TERM_IDENT || v->terms[1]->kind == TERM_PERCENT)) {
        diag_error(c->d, v->terms[1]->at, "'%s' is a plain integer and takes no unit", e->key);
        return false;
    }
    if (!want_terms(c, e, 1, "an integer")) return false;
    if (t->kind != TERM_INT) {
        diag_error(c->d, t->at, "'%s' must be an integer, found %s", e->key, term_desc(c, t));
        return false;
    }
    if (t->overflow || t->ival < min || t->ival > max) {
        if (t->ival < min && !t->overflow)
            diag_error(c->d, t->at, "'%s' must be at least %lld, found %s", e->key, (long long)min, t->text);
        else
            diag_error(c->d, t->at, "'%s' must be at most %lld, found %s", e->key, (long long)max, t->text);
        return false;
    }
    *out = t->ival;
    return true;
}

static bool get_int32(Checker *c, const Entry *e, int min, int max, int *out)
{
    int64_t v;
    if (!get_int(c, e, min, max, &v)) return false;
    *out = (int)v;
    return true;
}

/* A plain number; min_open: the minimum itself is not allowed. */
static bool get_number(Checker *c, const Entry *e, double min, bool min_open, double max, double *out)
{
    if (!e->value) return want_terms(c, e, 1, "a number");
    const Value *v = e->value;
    const Term *t = v->terms[0];
    if (v->nterms == 2 && is_number(t) && (v->terms[1]->kind == TERM_IDENT || v->terms[1]->kind == TERM_PERCENT)) {
        diag_error(c->d, v->terms[1]->at, "'%s' is a plain number and takes no unit", e->key);
        return false;
    }
    if (!want_terms(c, e, 1, "a number")) return false;
    if (!is_number(t)) {
        diag_error(c->d, t->at, "'%s' must be a number, found %s", e->key, term_desc(c, t));
        return false;
    }
    double x = t->fval;
    if (t->overflow || x < min || (min_open && x == min)) {
        if (t->overflow) diag_error(c->d, t->at, "'%s' is out of range", e->key);
        else diag_error(c->d, t->at, "'%s' must be %s %g, found %s", e->key, min_open ? "greater than" : "at least", min, t->text);
        return false;
    }
    if (x > max) {
        diag_error(c->d, t->at, "'%s' must be at most %g, found %s", e->key, max, t->text);
        return false;
    }
    *out = x;
    return true;
}

/* ---- limits of the contract (contract/plan_limits.h) ---- */

static const char *bound_text(Checker *c, const PlanLimit *l, double b)
{
    return l->kind == PLAN_INT || (b == floor(b) && fabs(b) < 1e16) ? arena_printf(c->a, "%.0f", b)
                                                                       : arena_printf(c->a, "%g", b);
}

/* A value the plan derives or converts (a percentage, a beta of a list, a
 * product) against its row; `what` names it in the message. */
static bool within(Checker *c, SrcRange at, const char *what, PlanLimitId id, double x, const char *shown)
{
    const PlanLimit *l = plan_limit(id);
    int why = plan_limit_violation(l, x);
    if (!why) return true;
    if (why == 1) diag_error(c->d, at, "'%s' is out of range", what);
    else if (why == 2) diag_error(c->d, at, "'%s' must be an integer, found %s", what, shown);
    else diag_error(c->d, at, "'%s' must be %s %s, found %s", what, plan_limit_bound_word(l, why),
                    bound_text(c, l, why == 3 ? l->min : l->max), shown);
    return false;
}

static bool get_int_lim(Checker *c, const Entry *e, PlanLimitId id, int64_t *out)
{
    const PlanLimit *l = plan_limit(id);
    return get_int(c, e, (int64_t)l->min, (int64_t)l->max, out);
}

static bool get_int32_lim(Checker *c, const Entry *e, PlanLimitId id, int *out)
{
    int64_t v;
    if (!get_int_lim(c, e, id, &v)) return false;
    *out = (int)v;
    return true;
}

static bool get_number_lim(Checker *c, const Entry *e, PlanLimitId id, double *out)
{
    const PlanLimit *l = plan_limit(id);
    double x;
    if (!get_number(c, e, l->min, (l->flags & PLAN_MIN_OPEN) != 0, l->max, &x)) return false;
    if (!within(c, e->value->terms[0]->at, e->key, id, x, e->value->terms[0]->text)) return false;
    *out = x;
    return true;
}

static bool get_string(Checker *c, const Entry *e, const char **out)
{
    if (!want_terms(c, e, 1, "a string")) return false;
    const Term *t = e->value->terms[0];
    if (t->kind != TERM_STRING) {
        Diag *g = diag_error(c->d, t->at, "'%s' must be a string, found %s", e->key, term_desc(c, t));
        if (t->kind == TERM_IDENT || t->kind == TERM_HOSTLIST)
            diag_help(g, "put it in double quotes: %s = \"%s\"", e->key, t->text);
        return false;
    }
    *out = t->str;
    return true;
}

static bool get_bool(Checker *c, const Entry *e, bool *out)
{
    if (!want_terms(c, e, 1, "true or false")) return false;
    const Term *t = e->value->terms[0];
    if (t->kind == TERM_IDENT && strcmp(t->str, "true") == 0) { *out = true; return true; }
    if (t->kind == TERM_IDENT && strcmp(t->str, "false") == 0) { *out = false; return true; }
    diag_error(c->d, t->at, "'%s' must be true or false, found %s", e->key, term_desc(c, t));
    return false;
}

static bool get_enum(Checker *c, const Entry *e, const char *const *names, int n, int *out)
{
    if (!want_terms(c, e, 1, "a name")) return false;
    const Term *t = e->value->terms[0];
    const char *word = t->kind == TERM_IDENT || t->kind == TERM_STRING ? t->str : NULL;
    if (word)
        for (int i = 0; i < n; i++)
            if (strcmp(word, names[i]) == 0) {
                if (t->kind == TERM_STRING) {
                    Diag *g = diag_error(c->d, t->at, "'%s' takes a name, not a string", e->key);
                    diag_help(g, "write it without quotes: %s = %s", e->key, word);
                    return false;
                }
                *out = i;
                return true;
            }
    Diag *g;
    if (word) {
        const char *dym = did_you_mean(word, names, n);
        if (dym) g = diag_error(c->d, t->at, "unknown %s '%s'; did you mean '%s'?", e->key, word, dym);
        else g = diag_error(c->d, t->at, "unknown %s '%s'", e->key, word);
    } else {
        g = diag_error(c->d, t->at, "'%s' must be one of its names, found %s", e->key, term_desc(c, t));
    }
    diag_note(g, "'%s' is one of: %s", e->key, join_names(c->a, names, n));
    return false;
}

/* ---- quantities with units ---- */

typedef struct {
    const char *unit;
    double scale;
} Unit;

static const Unit size_units[] = {
    {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
};
static const Unit duration_units[] = {{"s", 1}, {"min", 60}, {"h", 3600}, {"d", 86400}};

#define NUNITS(u) ((int)(sizeof(u) / sizeof((u)[0])))

/* `NUMBER UNIT` with UNIT from the table. what: "a size", example: "2 TiB". */
static bool get_quantity(Checker *c, const Entry *e, const Unit *units, int nunits,
                         const char *what, const char *example, double *out)
{
    if (!e->value) return want_terms(c, e, 2, what);
    const Value *v = e->value;
    const Term *num = v->terms[0];
    const char *names[16];
    for (int i = 0; i < nunits; i++) names[i] = units[i].unit;
    const char *list = join_names(c->a, names, nunits);
    if (!is_number(num)) {
        Diag *g = diag_error(c->d, num->at, "'%s' must be %s, found %s", e->key, what, value_desc(c, v));
        diag_help(g, "for example: %s = %s", e->key, example);
        return false;
    }
    if (v->nterms == 1) {
        Diag *g = diag_error(c->d, num->at, "'%s' needs a unit: %s", e->key, list);
        diag_help(g, "for example: %s = %s", e->key, example);
        return false;
    }
    if (!want_terms(c, e, 2, what)) return false;
    const Term *u = v->terms[1];
    if (u->kind != TERM_IDENT) {
        Diag *g = diag_error(c->d, u->at, "'%s' needs a unit (%s), found %s", e->key, list, term_desc(c, u));
        if (u->kind == TERM_PERCENT) diag_note(g, "'%s' is %s, not a percentage", e->key, what);
        return false;
    }
    for (int i = 0; i < nunits; i++) {
        if (strcmp(u->str, units[i].unit) != 0) continue;
        if (num->fval < 0 || num->overflow) {
            diag_error(c->d, num->at, "'%s' must not be negative", e->key);
            return false;
        }
        *out = num->fval * units[i].scale;
        return true;
    }
    Diag *g = diag_error(c->d, u->at, "'%s' is not a unit of %s; '%s' takes %s", u->str,
                         units == size_units ? "size" : "time", e->key, list);
    if (units == duration_units && strcmp(u->str, "m") == 0) {
        diag_help(g, "write 'min' for minutes ('m' could be read as months or metres)");
        return false;
    }
    const char *dym = did_you_mean(u->str, names, nunits);
    if (dym && strcasecmp(dym, u->str) == 0)
        diag_help(g, "units are case-sensitive: did you mean '%s'?", dym);
    else if (dym)
        diag_help(g, "did you mean '%s'?", dym);
    bool other = false;
    const Unit *ou = units == size_units ? duration_units : size_units;
    int no = units == size_units ? NUNITS(duration_units) : NUNITS(size_units);
    for (int i = 0; i < no; i++)
        if (strcmp(u->str, ou[i].unit) == 0) other = true;
    if (other) diag_note(g, "'%s' is a unit of %s", u->str, units == size_units ? "time" : "size");
    return false;
}

static bool get_size(Checker *c, const Entry *e, uint64_t *out)
{
    double x;
    if (!get_quantity(c, e, size_units, NUNITS(size_units), "a size", "64 GiB", &x)) return false;
    if (x > 1.8e19) {
        diag_error(c->d, e->value->at, "'%s' is out of range", e->key);
        return false;
    }
    if (fabs(x - (double)llround(x)) > 1e-6 * (x > 1 ? x : 1)) {   /* "1.5 B"; "0.1 KB" is 100 bytes */
        diag_error(c->d, e->value->at, "'%s' must be a whole number of bytes, found %s", e->key,
                   value_desc(c, e->value));
        return false;
    }
    *out = (uint64_t)llround(x);
    return true;
}

static bool get_duration(Checker *c, const Entry *e, double *out)
{
    if (!get_quantity(c, e, duration_units, NUNITS(duration_units), "a duration", "48 h", out)) return false;
    if (*out > 366.0 * 86400) {
        diag_error(c->d, e->value->at, "'%s' is longer than a year", e->key);
        return false;
    }
    return true;
}

/* `NUMBER %`, as a fraction. */
static bool is_percent(const Value *v)
{
    return v && v->nterms >= 2 && is_number(v->terms[0]) && v->terms[1]->kind == TERM_PERCENT;
}

static bool get_percent(Checker *c, const Entry *e, double max_pct, double *out)
{
    if (!want_terms(c, e, 2, "a percentage")) return false;
    const Value *v = e->value;
    if (!is_percent(v)) {
        Diag *g = diag_error(c->d, v->terms[0]->at, "'%s' must be a percentage, found %s", e->key, value_desc(c, v));
        diag_help(g, "for example: %s = 3%%", e->key);
        return false;
    }
    double x = v->terms[0]->fval;
    if (x < 0 || x > max_pct) {
        diag_error(c->d, v->at, "'%s' must be between 0%% and %g%%, found %s%%", e->key, max_pct, v->terms[0]->text);
        return false;
    }
    *out = x / 100.0;
    return true;
}

/* `N WORD` (e.g. "100 steps"); true with *n set when the value has that shape. */
static bool is_count_of(const Value *v, const char *word)
{
    return v && v->nterms == 2 && v->terms[0]->kind == TERM_INT && v->terms[1]->kind == TERM_IDENT &&
           strcmp(v->terms[1]->str, word) == 0;
}

/* ---- references ---- */

static Symbol *lookup(Checker *c, const char *name)
{
    if (!c->nindex) return NULL;
    for (size_t j = hash_name(name) & (c->nindex - 1);; j = (j + 1) & (c->nindex - 1)) {
        int k = c->index[j];
        if (!k) return NULL;
        if (strcmp(c->syms[k - 1].name, name) == 0) return &c->syms[k - 1];
    }
}

static void index_symbol(Checker *c, int i)
{
    size_t j = hash_name(c->syms[i].name) & (c->nindex - 1);
    while (c->index[j]) j = (j + 1) & (c->nindex - 1);
    c->index[j] = i + 1;
}

static void add_symbol(Checker *c, Symbol s)
{
    if (c->nsyms == c->capsyms) {
        c->capsyms = c->capsyms ? c->capsyms * 2 : 64;
        c->syms = xrealloc(c->syms, sizeof(Symbol) * (size_t)c->capsyms);
    }
    c->syms[c->nsyms++] = s;
    if ((size_t)c->nsyms * 2 > c->nindex) {
        free(c->index);
        c->nindex = c->nindex ? c->nindex * 2 : 128;
        while ((size_t)c->nsyms * 2 > c->nindex) c->nindex *= 2;
        c->index = xcalloc(c->nindex, sizeof(int));
        for (int i = 0; i < c->nsyms; i++) index_symbol(c, i);
    } else {
        index_symbol(c, c->nsyms - 1);
    }
}

static void *resolve_ref(Checker *c, const Entry *e, const Term *t, BlockKind kind)
{
    if (t->kind != TERM_IDENT) {
        Diag *g = diag_error(c->d, t->at, "'%s' must name a %s block, found %s", e->key, kind_names[kind], term_desc(c, t));
        if (t->kind == TERM_STRING) diag_help(g, "write the name without quotes");
        return NULL;
    }
    Symbol *s = lookup(c, t->str);
    if (s && s->kind == kind) return s->obj;
    if (s) {
        Diag *g = diag_error(c->d, t->at, "'%s' is a %s, not a %s", t->str, kind_names[s->kind], kind_names[kind]);
        diag_note(g, "'%s' is defined at %s:%d", t->str, s->item->at.start.file, s->item->at.start.line);
        return NULL;
    }
    const char **cands = arena_alloc(c->a, sizeof(char *) * (size_t)(c->nsyms + 1));
    int n = 0;
    for (int i = 0; i < c->nsyms; i++)
        if (c->syms[i].kind == kind) cands[n++] = c->syms[i].name;
    const char *dym = did_you_mean(t->str, cands, n);
    if (dym) diag_error(c->d, t->at, "undefined %s '%s'; did you mean '%s'?", kind_names[kind], t->str, dym);
    else if (n) {
        Diag *g = diag_error(c->d, t->at, "undefined %s '%s'", kind_names[kind], t->str);
        diag_note(g, "defined %ss: %s", kind_names[kind], join_names(c->a, cands, n < 10 ? n : 10));
    } else {
        diag_error(c->d, t->at, "undefined %s '%s'; the plan defines no %s block", kind_names[kind], t->str, kind_names[kind]);
    }
    return NULL;
}

static void *get_ref(Checker *c, const Entry *e, BlockKind kind)
{
    if (!want_terms(c, e, 1, arena_printf(c->a, "the name of a %s block", kind_names[kind]))) return NULL;
    return resolve_ref(c, e, e->value->terms[0], kind);
}

/* ---- paths ---- */

/* Paths are written verbatim into shell scripts and JSON: refuse what would
 * break them or does not mean what the user thinks. */
static bool check_path(Checker *c, const Entry *e, const char *path, bool is_file)
{
    SrcRange at = e->value->at;
    if (!path[0]) {
        diag_error(c->d, at, "'%s' is an empty path", e->key);
        return false;
    }
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            diag_error(c->d, at, "'%s' contains a control character", e->key);
            return false;
        }
        if (strchr("\"'`$\\", *p)) {
            Diag *g = diag_error(c->d, at, "'%s' contains '%c', which is not allowed in paths", e->key, *p);
            diag_note(g, "paths are written verbatim into the job script and must not need quoting");
            return false;
        }
    }
    if (path[0] == '~') {
        Diag *g = diag_error(c->d, at, "'%s' starts with '~', which is not expanded", e->key);
        diag_help(g, "write the full path, or a path relative to where llmc and sbatch run");
        return false;
    }
    if (isspace((unsigned char)path[0]) || isspace((unsigned char)path[strlen(path) - 1])) {
        diag_error(c->d, at, "'%s' begins or ends with white space", e->key);
        return false;
    }
    if (is_file && path[strlen(path) - 1] == '/') {
        diag_error(c->d, at, "'%s' names a file but ends with '/'", e->key);
        return false;
    }
    if (!is_file && strcmp(path, "/") == 0) {
        diag_error(c->d, at, "'%s' must not be the root directory", e->key);
        return false;
    }
    return true;
}

static const char *get_path(Checker *c, const Entry *e, bool is_file)
{
    const char *s = NULL;
    if (!get_string(c, e, &s)) return NULL;
    return check_path(c, e, s, is_file) ? s : NULL;
}

/* A path the plan names for a file or directory the run reads or writes: a
 * relative one means relative to the directory of the .llm file that writes
 * it (as `use` does), not to where llmc happens to run. The result is that
 * directory as llmc was given it joined with the path ("examples/tiny" +
 * "data/a.json"); the emitters rewrite it relative to each artifact's
 * directory (emit_text.c: artifact_path), so the artifacts do not depend on
 * the working directory. */
/* cwd + path, with "." and ".." resolved lexically (symbolic links are not
 * followed: the same spelling gives the same bytes). */
static char *lexical_abs(Checker *c, const char *cwd, const char *path)
{
    char *in = path[0] == '/' ? arena_strdup(c->a, path) : arena_printf(c->a, "%s/%s", cwd, path);
    char *out = arena_alloc(c->a, strlen(in) + 2);
    path_policy_lexical(in, out);   /* contract/path_policy.h: the one normalisation */
    return out;
}

/* A relative path with "." and "dir/.." removed lexically, leading ".." kept
 * ("tests/plans/../files/x" -> "tests/files/x"), as artifact_path resolves it. */
static const char *lexical_rel(Checker *c, const char *path)
{
    char *out = arena_alloc(c->a, strlen(path) + 2);
    size_t n = 0;
    int normal = 0;   /* components in out that are not ".." */
    for (const char *q = path; *q;) {
        while (*q == '/') q++;
        const char *end = q;
        while (*end && *end != '/') end++;
        size_t len = (size_t)(end - q);
        if (len == 2 && q[0] == '.' && q[1] == '.' && normal > 0) {
            while (n > 0 && out[n - 1] != '/') n--;
            if (n > 0) n--;
            normal--;
        } else if (len > 0 && !(len == 1 && q[0] == '.')) {
            if (n) out[n++] = '/';
            memcpy(out + n, q, len);
            n += len;
            if (!(len == 2 && q[0] == '.' && q[1] == '.')) normal++;
        }
        q = end;
    }
    if (n == 0) out[n++] = '.';
    out[n] = 0;
    return out;
}

static const char *get_plan_path(Checker *c, const Entry *e, bool is_file)
{
    const char *p = get_path(c, e, is_file);
    if (!p || p[0] == '/') return p;
    const char *file = e->value->at.start.file;
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (!slash) return p;   /* a file in the working directory */
    const char *joined = slash == file ? arena_printf(c->a, "/%s", p)
                                       : arena_printf(c->a, "%.*s/%s", (int)(slash - file), file, p);
    if (file[0] != '/') return lexical_rel(c, joined);
    /* A plan named by its absolute path: the path relative to the working
     * directory again, so that the emitters rewrite it relative to each
     * artifact (they keep absolute paths as the plan wrote them). */
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return joined;
    const char *from = lexical_abs(c, cwd, "."), *to = lexical_abs(c, cwd, joined);
    size_t i = 0, common = 0;
    while (from[i] && from[i] == to[i]) {
        i++;
        if ((from[i] == '/' || from[i] == '\0') && (to[i] == '/' || to[i] == '\0')) common = i;
    }
    if (strcmp(from, "/") == 0) common = 0;
    size_t ups = 0;
    for (const char *q = from + common; *q; q++) ups += *q == '/';
    const char *rest = to + common;
    if (*rest == '/') rest++;
    char *r = arena_alloc(c->a, ups * 3 + strlen(rest) + 2);
    for (size_t k = 0; k < ups; k++) strcat(r, "../");
    strcat(r, rest);
    if (!r[0]) strcpy(r, ".");
    else if (r[strlen(r) - 1] == '/') r[strlen(r) - 1] = 0;
    return r;
}

/* ---- site settings (docs/language.md, "Site settings") ----
 * `env { NAME = value }`, `sbatch { constraint = "..." ... }`, `setup = ["..."]`
 * and `container { image = "..." }`, in a cluster block (for every job on it)
 * or a job block (merged over its cluster's). Every string here reaches the
 * job script; check_site refuses what would not mean what it says there. */

typedef enum { NV_STRING, NV_INT, NV_BOOL, NV_ENUM } NcclValueKind;
typedef struct {
    const char *name;
    NcclValueKind kind;
    int64_t min, max;          /* NV_INT */
    const char *values;        /* NV_ENUM: names separated by '|'; NV_INT: also these words */
} NcclVar;

/* NCCL's documented environment variables (NCCL 2.28 user guide, "Environment
 * Variables"), with the type each takes. Booleans are 0/1. Integer ranges: the
 * InfiniBand verbs fields (timeout 5 bits, retry count 3 bits, service level
 * 4 bits, traffic class 8 bits) or NCCL's own limits. */
static const NcclVar nccl_vars[] = {
    {"NCCL_ALGO", NV_STRING, 0, 0, NULL},
    {"NCCL_BUFFSIZE", NV_INT, 1, INT64_MAX, NULL},
    {"NCCL_COLLNET_ENABLE", NV_BOOL, 0, 1, NULL},
    {"NCCL_CROSS_NIC", NV_INT, 0, 2, NULL},
    {"NCCL_CUMEM_ENABLE", NV_BOOL, 0, 1, NULL},
    {"NCCL_DEBUG", NV_ENUM, 0, 0, "VERSION|WARN|INFO|TRACE"},
    {"NCCL_DEBUG_FILE", NV_STRING, 0, 0, NULL},
    {"NCCL_DEBUG_SUBSYS", NV_STRING, 0, 0, NULL},
    {"NCCL_IB_ADAPTIVE_ROUTING", NV_BOOL, 0, 1, NULL},
    {"NCCL_IB_DISABLE", NV_BOOL, 0, 1, NULL},
    {"NCCL_IB_GID_INDEX", NV_INT, -1, 255, NULL},
    {"NCCL_IB_HCA", NV_STRING, 0, 0, NULL},
    {"NCCL_IB_MERGE_NICS", NV_BOOL, 0, 1, NULL},
    {"NCCL_IB_PCI_RELAXED_ORDERING", NV_INT, 0, 2, NULL},
    {"NCCL_IB_QPS_PER_CONNECTION", NV_INT, 1, 128, NULL},
    {"NCCL_IB_RETRY_CNT", NV_INT, 0, 7, NULL},
    {"NCCL_IB_SL", NV_INT, 0, 15, NULL},
    {"NCCL_IB_TC", NV_INT, 0, 255, NULL},
    {"NCCL_IB_TIMEOUT", NV_INT, 1, 31, NULL},
    {"NCCL_IGNORE_CPU_AFFINITY", NV_BOOL, 0, 1, NULL},
    {"NCCL_LAUNCH_MODE", NV_ENUM, 0, 0, "PARALLEL|GROUP"},
    {"NCCL_MAX_NCHANNELS", NV_INT, 1, 64, NULL},
    {"NCCL_MIN_NCHANNELS", NV_INT, 1, 64, NULL},
    {"NCCL_NET", NV_STRING, 0, 0, NULL},
    {"NCCL_NET_GDR_LEVEL", NV_INT, 0, 5, "LOC|PIX|PXB|PHB|SYS"},
    {"NCCL_NET_GDR_READ", NV_BOOL, 0, 1, NULL},
    {"NCCL_NET_PLUGIN", NV_STRING, 0, 0, NULL},
    {"NCCL_NSOCKS_PERTHREAD", NV_INT, 1, 64, NULL},
    {"NCCL_NTHREADS", NV_INT, 64, 512, NULL},
    {"NCCL_NVLS_ENABLE", NV_BOOL, 0, 1, NULL},
    {"NCCL_P2P_DISABLE", NV_BOOL, 0, 1, NULL},
    {"NCCL_P2P_LEVEL", NV_INT, 0, 5, "LOC|NVL|PIX|PXB|PHB|SYS"},
    {"NCCL_PROTO", NV_STRING, 0, 0, NULL},
    {"NCCL_SHM_DISABLE", NV_BOOL, 0, 1, NULL},
    {"NCCL_SOCKET_FAMILY", NV_ENUM, 0, 0, "AF_INET|AF_INET6"},
    {"NCCL_SOCKET_IFNAME", NV_STRING, 0, 0, NULL},
    {"NCCL_SOCKET_NTHREADS", NV_INT, 1, 16, NULL},
    {"NCCL_TOPO_FILE", NV_STRING, 0, 0, NULL},
};
#define N_NCCL_VARS ((int)(sizeof nccl_vars / sizeof nccl_vars[0]))

/* Names the job script sets itself, or that change how bash runs it. */
static bool env_name_reserved(const char *n)
{
    static const char *const exact[] = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                                        "NODE_RANK", "NNODES", "NPROC_PER_NODE", "FORCE_TORCHRUN",
                                        "IFS", "PS4", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "CDPATH",
                                        "GLOBIGNORE", "HOME", "PATH", "LD_PRELOAD"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(n, exact[i]) == 0) return true;
    return strncmp(n, "LLMC_", 5) == 0 || strncmp(n, "SLURM_", 6) == 0 || strncmp(n, "SBATCH_", 7) == 0 ||
           strncmp(n, "SRUN_", 5) == 0 || strncmp(n, "BASH_", 5) == 0;
}

static bool word_in(const char *w, const char *list)
{
    size_t n = strlen(w);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, w, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static const char *bar_list(Checker *c, const char *list)
{
    const char *s = list;
    size_t n = 0;
    for (const char *p = s; *p; p++) n += *p == '|' ? 2 : 1;
    char *out = arena_alloc(c->a, n + 1);
    char *o = out;
    for (const char *p = s; *p; p++) {
        if (*p == '|') { *o++ = ','; *o++ = ' '; }
        else *o++ = *p;
    }
    *o = 0;
    return out;
}

/* The value of one `env` entry, as the shell will see it (NULL after an error). */
static const char *env_value(Checker *c, const Entry *e)
{
    if (!want_terms(c, e, 1, "a string, a number or true/false")) return NULL;
    const Term *t = e->value->terms[0];
    const NcclVar *known = NULL;
    for (int i = 0; i < N_NCCL_VARS; i++)
        if (strcmp(e->key, nccl_vars[i].name) == 0) known = &nccl_vars[i];
    const char *text = NULL;
    if (t->kind == TERM_STRING) text = t->str;
    else if (t->kind == TERM_INT && !t->overflow) text = arena_printf(c->a, "%lld", (long long)t->ival);
    else if (t->kind == TERM_FLOAT && !known) text = t->text;
    else if (t->kind == TERM_IDENT && (strcmp(t->str, "true") == 0 || strcmp(t->str, "false") == 0))
        text = strcmp(t->str, "true") == 0 ? "1" : "0";
    else if (t->kind == TERM_IDENT && known && known->values) text = t->str;   /* a level name: checked below */
    if (!text) {
        Diag *g = diag_error(c->d, t->at, "environment variable '%s' must be %s, found %s", e->key,
                             known && known->kind == NV_INT ? "an integer" : "a string, a number or true/false",
                             term_desc(c, t));
        if (t->kind == TERM_IDENT) diag_help(g, "put it in double quotes: %s = \"%s\"", e->key, t->text);
        return NULL;
    }
    long cc = plan_control_char_at(text);
    if (cc >= 0) {
        Diag *g = diag_error(c->d, t->at, "environment variable '%s' contains a control character (byte 0x%02x at offset %ld)",
                             e->key, (unsigned char)text[cc], cc);
        diag_note(g, "environment values are written into the job script, one line each");
        return NULL;
    }
    if (!known) return text;
    switch (known->kind) {
    case NV_STRING:
        if (!text[0]) { diag_error(c->d, t->at, "'%s' must not be empty", e->key); return NULL; }
        return text;
    case NV_BOOL:
        if (strcmp(text, "0") && strcmp(text, "1")) {
            Diag *g = diag_error(c->d, t->at, "'%s' takes 0 or 1, found %s", e->key, term_desc(c, t));
            diag_note(g, "NCCL reads it as a switch: 1 (or true) turns it on");
            return NULL;
        }
        return text;
    case NV_INT: {
        if (known->values && word_in(text, known->values)) return text;
        char *end = NULL;
        long long v = strtoll(text, &end, 10);
        if (!text[0] || *end || v < known->min || v > known->max) {
            Diag *g = diag_error(c->d, t->at, "'%s' takes an integer from %lld to %lld%s, found %s", e->key,
                                 (long long)known->min, (long long)known->max, known->values ? " or a level name" : "",
                                 t->kind == TERM_STRING ? arena_printf(c->a, "\"%s\"", text) : t->text);
            if (known->values) diag_note(g, "levels: %s", bar_list(c, known->values));
            return NULL;
        }
        return text;
    }
    case NV_ENUM:
        if (!word_in(text, known->values)) {
            const char *vals[8];
            int n = 0;
            char *copy = arena_strdup(c->a, known->values);
            for (char *p = strtok(copy, "|"); p && n < 8; p = strtok(NULL, "|")) vals[n++] = p;
            const char *dym = did_you_mean(text, vals, n);
            Diag *g = dym ? diag_error(c->d, t->at, "unknown %s value '%s'; did you mean '%s'?", e->key, text, dym)
                          : diag_error(c->d, t->at, "unknown %s value '%s'", e->key, text);
            diag_note(g, "'%s' is one of: %s", e->key, join_names(c->a, vals, n));
            return NULL;
        }
        return text;
    }
    return text;
}

static void check_site_env(Checker *c, const Entry *blk, PlanSite *site)
{
    if (!blk->sub && blk->value) {
        Diag *g = diag_error(c->d, blk->value->at, "'env' is a block of variables, not a value");
        diag_help(g, "write env { NCCL_SOCKET_IFNAME = \"ib0\" }");
        return;
    }
    site->env = arena_alloc(c->a, sizeof(PlanEnvVar) * (size_t)(blk->nsub + 1));
    for (int i = 0; i < blk->nsub; i++) {
        const Entry *e = blk->sub[i];
        bool dup = false;
        for (int k = 0; k < i; k++)
            if (strcmp(blk->sub[k]->key, e->key) == 0) {
                Diag *g = diag_error(c->d, e->key_at, "environment variable '%s' is set twice", e->key);
                diag_note(g, "first set at line %d", blk->sub[k]->key_at.start.line);
                dup = true;
                break;
            }
        if (dup) continue;
        if (env_name_reserved(e->key)) {
            Diag *g = diag_error(c->d, e->key_at, "environment variable '%s' is set by the job script or Slurm", e->key);
            diag_note(g, "the script sets MASTER_ADDR/MASTER_PORT and the launcher's variables itself; "
                         "LLMC_*, SLURM_*, SBATCH_*, SRUN_*, BASH_* and shell variables are not the plan's");
            continue;
        }
        if (!e->value) {
            diag_error(c->d, e->key_at, "environment variable '%s' takes a value, not a block", e->key);
            continue;
        }
        if (strncmp(e->key, "NCCL_", 5) == 0) {
            bool known = false;
            const char *names[N_NCCL_VARS];
            for (int k = 0; k < N_NCCL_VARS; k++) {
                names[k] = nccl_vars[k].name;
                if (strcmp(e->key, names[k]) == 0) known = true;
            }
            if (!known) {
                const char *dym = did_you_mean(e->key, names, N_NCCL_VARS);
                Diag *g = dym ? diag_warning(c->d, e->key_at, "'%s' is not an NCCL variable llmc knows; did you mean '%s'?",
                                             e->key, dym)
                              : diag_warning(c->d, e->key_at, "'%s' is not an NCCL variable llmc knows", e->key);
                diag_note(g, "it is exported as written; NCCL ignores names it does not know");
            }
        }
        const char *v = env_value(c, e);
        if (!v) continue;
        site->env[site->nenv++] = (PlanEnvVar){e->key, v, e->at};
    }
}

/* Quotes in a setup line must close on that line: each line is run by
 * itself (eval), and an open quote would be a syntax error only at run time. */
static bool shell_line_balanced(const char *s, char *open)
{
    char q = 0;
    for (const char *p = s; *p; p++) {
        if (q == '\'') { if (*p == '\'') q = 0; continue; }
        if (*p == '\\') { if (p[1]) p++; else { *open = '\\'; return false; } continue; }
        if (q == '"') { if (*p == '"') q = 0; continue; }
        if (*p == '\'' || *p == '"') q = *p;
        else if (*p == '#' && (p == s || isspace((unsigned char)p[-1]))) break;   /* comment */
    }
    *open = q;
    return q == 0;
}

/* A string or a list of strings; *ats (when given) gets each item's range. */
static const char **get_string_list(Checker *c, const Entry *e, int *n, const char *what, SrcRange **ats)
{
    *n = 0;
    if (!want_terms(c, e, 1, what)) return NULL;
    const Term *x = e->value->terms[0];
    if (x->kind == TERM_STRING) {
        const char **out = arena_alloc(c->a, sizeof(char *));
        out[0] = x->str;
        if (ats) { *ats = arena_alloc(c->a, sizeof(SrcRange)); (*ats)[0] = x->at; }
        *n = 1;
        return out;
    }
    if (x->kind != TERM_LIST) {
        diag_error(c->d, x->at, "'%s' must be %s, found %s", e->key, what, term_desc(c, x));
        return NULL;
    }
    const char **out = arena_alloc(c->a, sizeof(char *) * (size_t)(x->nitems + 1));
    if (ats) *ats = arena_alloc(c->a, sizeof(SrcRange) * (size_t)(x->nitems + 1));
    for (int i = 0; i < x->nitems; i++) {
        const Value *iv = x->items[i];
        if (iv->nterms != 1 || iv->terms[0]->kind != TERM_STRING) {
            const Term *bad = iv->nterms != 1 ? iv->terms[1] : iv->terms[0];
            Diag *g = diag_error(c->d, bad->at, "'%s' must be a list of strings, found %s", e->key, term_desc(c, bad));
            diag_help(g, "quote each item: %s = [\"...\", \"...\"]", e->key);
            continue;
        }
        if (ats) (*ats)[*n] = iv->terms[0]->at;
        out[(*n)++] = iv->terms[0]->str;
    }
    return out;
}

/* A string in an #SBATCH line: no control characters, and only `allowed`. */
static bool directive_ok(Checker *c, const Entry *e, const char *s, const char *allowed, const char *what)
{
    SrcRange at = e->value->at;
    if (!s[0]) { diag_error(c->d, at, "'%s' must not be empty", e->key); return false; }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            Diag *g = diag_error(c->d, at, "'%s' contains a control character (byte 0x%02x at offset %ld)", e->key,
                                 *p, (long)(p - (const unsigned char *)s));
            diag_note(g, "it would end the #SBATCH line");
            return false;
        }
        if (!isalnum(*p) && !strchr(allowed, *p)) {
            Diag *g = diag_error(c->d, at, "'%s' contains '%c' (offset %ld), which %s cannot take", e->key, *p,
                                 (long)(p - (const unsigned char *)s), what);
            diag_note(g, "#SBATCH lines are not shell: they cannot be quoted");
            return false;
        }
    }
    return true;
}

static const char *const sbatch_keys[] = {"constraint", "exclusive", "reservation", "gpus_per_node", "gres_type",
                                          "mail_user", "mail_type", "comment",
                                          /* escape hatches (issue 33): check_site_sbatch_extra */
                                          "exclude", "nodelist", "switches", "gpus_per_task", "extra"};
static const char *const mail_type_names[] = {"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND",
                                              "STAGE_OUT", "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80",
                                              "TIME_LIMIT_50", "ARRAY_TASKS"};
static const char *const container_keys[] = {"runtime", "image", "mounts"};
static const char *const container_runtimes[] = {"pyxis", "apptainer"};

/* The #SBATCH options llmc writes itself (templates/job_*.slurm.tmpl,
 * emit_slurm.c), long and short spellings: a free-form line may not set them
 * again (sbatch takes the last, so the plan and its script would disagree). */
static const char *const sbatch_written[] = {
    "account", "cpus-per-task", "error", "job-name", "mem", "requeue", "no-requeue", "nodes", "ntasks-per-node",
    "open-mode", "output", "partition", "qos", "signal", "time", "gres", "gpus-per-node", "constraint", "exclusive",
    "reservation", "mail-type", "mail-user", "comment", "exclude", "nodelist", "switches", "gpus-per-task",
    "dependency", "ntasks", "gpus", "mem-per-cpu", "mem-per-gpu", "array", "chdir", "export", "wrap"};

/* sbatch { exclude = "HOSTLIST"  nodelist = "HOSTLIST"  switches = N  gpus_per_task = N
 *          extra = ["--opt=value", ...] } (docs/language.md, "Site settings"). */
static void check_site_sbatch_extra(Checker *c, Scope *s, PlanSite *site)
{
    Entry *e;
    const char *str;
    int64_t v;
    if ((e = find(s, "exclude")) && get_string(c, e, &str) && directive_ok(c, e, str, "_.-[],", "--exclude")) {
        site->exclude = str; site->exclude_at = e->value->at;
    }
    if ((e = find(s, "nodelist")) && get_string(c, e, &str) && directive_ok(c, e, str, "_.-[],", "--nodelist")) {
        site->nodelist = str; site->nodelist_at = e->value->at;
    }
    if ((e = find(s, "switches")) && get_int(c, e, 1, 1024, &v)) { site->switches = (int)v; site->switches_at = e->value->at; }
    if ((e = find(s, "gpus_per_task")) && get_int(c, e, 1, 64, &v)) {
        site->gpus_per_task = (int)v; site->gpus_per_task_at = e->value->at;
    }
    if (!(e = find(s, "extra"))) return;
    int n = 0;
    SrcRange *ats = NULL;
    const char **items = get_string_list(c, e, &n, "a list of \"--option=value\" strings", &ats);
    if (!items) return;
    const char **ok = arena_alloc(c->a, sizeof(char *) * (size_t)(n + 1));
    int nok = 0;
    for (int i = 0; i < n; i++) {
        const char *x = items[i];
        SrcRange at = ats[i];
        if (strncmp(x, "--", 2) != 0 || !isalpha((unsigned char)x[2])) {
            Diag *g = diag_error(c->d, at, "sbatch extra \"%s\" must start with \"--\" and an option name", x);
            diag_help(g, "write the long form: \"--licenses=fluent:2\"");
            continue;
        }
        long cc = plan_control_char_at(x);
        if (cc >= 0 || strpbrk(x, "\"'`$\\")) {
            Diag *g = diag_error(c->d, at, "sbatch extra \"%s\" contains %s", x,
                                 cc >= 0 ? "a control character (a newline would start another line)" : "a quote, '$', '`' or '\\'");
            diag_note(g, "each item becomes one #SBATCH line as written");
            continue;
        }
        size_t len = strcspn(x + 2, "= ");
        if (strchr(x, ' ')) {
            diag_error(c->d, at, "sbatch extra \"%s\" contains a space; write --option=value", x);
            continue;
        }
        bool clash = false;
        for (size_t k = 0; k < NUNITS(sbatch_written) && !clash; k++)
            clash = strlen(sbatch_written[k]) == len && strncmp(sbatch_written[k], x + 2, len) == 0;
        if (clash) {
            Diag *g = diag_error(c->d, at, "sbatch extra \"%s\" sets --%.*s, which llmc writes itself", x, (int)len, x + 2);
            diag_help(g, "use the plan's own key for it (job: nodes, time, mem, account, qos; sbatch { exclude, "
                         "nodelist, switches, gpus_per_task, constraint, ... })");
            continue;
        }
        ok[nok++] = x;
    }
    site->extra = ok;
    site->nextra = nok;
    site->extra_at = e->value->at;
}

static void check_site_sbatch(Checker *c, const Item *it, const Entry *blk, PlanSite *site)
{
    if (!blk->sub && blk->value) {
        Diag *g = diag_error(c->d, blk->value->at, "'sbatch' is a block of directives, not a value");
        diag_help(g, "write sbatch { constraint = \"a100\" }");
        return;
    }
    Scope s = scope_of(c, it, blk->sub, blk->nsub, "sbatch");
    s.at = blk->key_at;
    check_keys(c, &s, sbatch_keys, NUNITS(sbatch_keys));
    Entry *e;
    const char *str;
    bool b;
    if ((e = find(&s, "constraint")) && get_string(c, e, &str) &&
        directive_ok(c, e, str, "_.-&|*[]():,!", "--constraint")) {
        site->constraint = str; site->constraint_at = e->value->at;
    }
    if ((e = find(&s, "exclusive")) && get_bool(c, e, &b)) { site->exclusive = b; site->exclusive_at = e->value->at; }
    if ((e = find(&s, "reservation")) && get_string(c, e, &str) &&
        directive_ok(c, e, str, "_.-", "--reservation")) {
        site->reservation = str; site->reservation_at = e->value->at;
    }
    if ((e = find(&s, "gpus_per_node")) && get_bool(c, e, &b)) { site->gpus_per_node = b; site->gpus_per_node_at = e->value->at; }
    if ((e = find(&s, "gres_type")) && want_terms(c, e, 1, "a GRES type name or none")) {
        const Term *t = e->value->terms[0];
        if (t->kind == TERM_IDENT && strcmp(t->str, "none") == 0) {
            site->gres = 2; site->gres_type = NULL; site->gres_at = t->at;
        } else if (get_string(c, e, &str) && directive_ok(c, e, str, "_.-", "a GRES type")) {
            site->gres = 1; site->gres_type = str; site->gres_at = t->at;
        }
    }
    if ((e = find(&s, "mail_user")) && get_string(c, e, &str) &&
        directive_ok(c, e, str, "_.-+@", "--mail-user")) {
        if (!strchr(str, '@')) diag_warning(c->d, e->value->at, "'mail_user' has no '@'; Slurm sends it to a local user");
        site->mail_user = str; site->mail_user_at = e->value->at;
    }
    if ((e = find(&s, "mail_type")) && want_terms(c, e, 1, "a list of mail events")) {
        const Term *x = e->value->terms[0];
        Value one = {.terms = (Term **)&x, .nterms = 1};
        Value *single = &one;
        Value *const *items = x->kind == TERM_LIST ? x->items : &single;
        int n = x->kind == TERM_LIST ? x->nitems : 1;
        char *joined = arena_alloc(c->a, 256);
        bool ok = n > 0;
        if (n == 0) diag_error(c->d, x->at, "'mail_type' needs at least one event");
        for (int i = 0; i < n && ok; i++) {
            const Term *w = items[i]->terms[0];
            int k = -1;
            if (w->kind == TERM_IDENT)
                for (int j = 0; j < NUNITS(mail_type_names); j++)
                    if (strcmp(w->str, mail_type_names[j]) == 0) k = j;
            if (k < 0 || items[i]->nterms != 1) {
                const char *dym = w->kind == TERM_IDENT ? did_you_mean(w->str, mail_type_names, NUNITS(mail_type_names)) : NULL;
                Diag *g = dym ? diag_error(c->d, w->at, "unknown mail_type '%s'; did you mean '%s'?", w->str, dym)
                              : diag_error(c->d, w->at, "'mail_type' must be Slurm mail events, found %s", term_desc(c, w));
                diag_note(g, "'mail_type' is a list of: %s", join_names(c->a, mail_type_names, NUNITS(mail_type_names)));
                ok = false;
                break;
            }
            if (strlen(joined) + strlen(mail_type_names[k]) + 2 > 255) break;
            if (i) strcat(joined, ",");
            strcat(joined, mail_type_names[k]);
        }
        if (ok) { site->mail_type = joined; site->mail_type_at = e->value->at; }
    }
    if ((e = find(&s, "comment")) && get_string(c, e, &str) &&
        directive_ok(c, e, str, " _.-+@:=,/()", "--comment")) {
        if (strlen(str) > 200) diag_error(c->d, e->value->at, "'comment' is longer than 200 characters");
        else if (str[0] == ' ' || str[strlen(str) - 1] == ' ') diag_error(c->d, e->value->at, "'comment' begins or ends with a space");
        else { site->comment = str; site->comment_at = e->value->at; }
    }
    check_site_sbatch_extra(c, &s, site);
}

/* A container mount "SRC[:DST[:FLAGS]]", both paths absolute: pyxis
 * (--container-mounts) and Apptainer (--bind) take the same form, ','-separated. */
static bool mount_ok(Checker *c, SrcRange at, const char *m)
{
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == ',' || isspace(*p)) {
            Diag *g = diag_error(c->d, at, "container mount '%s' contains %s", m,
                                 *p == ',' ? "','" : isspace(*p) && *p >= 0x20 ? "white space" : "a control character");
            diag_note(g, "mounts are joined with ',' into one --container-mounts / --bind argument");
            return false;
        }
    char *copy = arena_strdup(c->a, m);
    char *src = copy, *dst = strchr(copy, ':'), *flags = NULL;
    if (dst) { *dst++ = 0; flags = strchr(dst, ':'); if (flags) *flags++ = 0; }
    if (src[0] != '/' || (dst && dst[0] != '/')) {
        Diag *g = diag_error(c->d, at, "container mount '%s' must name absolute paths", m);
        diag_help(g, "write \"/mnt/data-hps:/mnt/data-hps\" (SRC:DST, optionally :ro)");
        return false;
    }
    if (flags && strcmp(flags, "ro") && strcmp(flags, "rw")) {
        diag_error(c->d, at, "container mount '%s': the flags after the second ':' must be ro or rw", m);
        return false;
    }
    return true;
}

static void check_site_container(Checker *c, const Item *it, const Entry *blk, PlanSite *site)
{
    if (!blk->sub && blk->value) {
        Diag *g = diag_error(c->d, blk->value->at, "'container' is a block, not a value");
        diag_help(g, "write container { runtime = pyxis  image = \"nvcr.io#nvidia/pytorch:24.05-py3\" }");
        return;
    }
    Scope s = scope_of(c, it, blk->sub, blk->nsub, "container");
    s.at = blk->key_at;
    s.broken = it->broken;
    check_keys(c, &s, container_keys, NUNITS(container_keys));
    Entry *e;
    int k = -1;
    const char *img = NULL;
    if ((e = require(c, &s, "runtime", "pyxis"))) get_enum(c, e, container_runtimes, 2, &k);
    if ((e = require(c, &s, "image", "\"nvcr.io#nvidia/pytorch:24.05-py3\"")) && get_string(c, e, &img)) {
        long cc = plan_control_char_at(img);
        if (!img[0]) { diag_error(c->d, e->value->at, "'image' must not be empty"); img = NULL; }
        else if (cc >= 0) { diag_error(c->d, e->value->at, "'image' contains a control character (byte 0x%02x at offset %ld)",
                                       (unsigned char)img[cc], cc); img = NULL; }
        else if (strpbrk(img, " \t,")) { diag_error(c->d, e->value->at, "'image' contains white space or ','"); img = NULL; }
        else site->image_at = e->value->at;
    }
    if ((e = find(&s, "mounts"))) {
        int n = 0;
        SrcRange *ats = NULL;
        const char **ms = get_string_list(c, e, &n, "a list of \"SRC:DST\" mounts", &ats);
        bool ok = ms != NULL;
        for (int i = 0; i < n; i++) ok &= mount_ok(c, ats[i], ms[i]);
        if (ok) { site->mounts = ms; site->nmounts = n; site->mounts_at = e->value->at; }
    }
    report_missing(c, &s);
    if (k >= 0 && img) {
        site->container = k == 0 ? CONTAINER_PYXIS : CONTAINER_APPTAINER;
        site->image = img;
        site->container_at = blk->key_at;
    }
}

/* The site keys of a cluster or job block (already passed check_keys). */
static void check_site(Checker *c, const Item *it, Scope *s, PlanSite *site)
{
    site->exclusive = -1;
    site->gpus_per_node = -1;
    Entry *e;
    if ((e = find(s, "env"))) check_site_env(c, e, site);
    if ((e = find(s, "sbatch"))) check_site_sbatch(c, it, e, site);
    if ((e = find(s, "container"))) check_site_container(c, it, e, site);
    if ((e = find(s, "setup"))) {
        int n = 0;
        SrcRange *ats = NULL;
        const char **lines = get_string_list(c, e, &n, "a list of shell lines", &ats);
        bool ok = lines != NULL;
        for (int i = 0; i < n && ok; i++) {
            long cc = plan_control_char_at(lines[i]);
            char open = 0;
            if (cc >= 0) {
                Diag *g = diag_error(c->d, ats[i], "setup line %d contains a control character (byte 0x%02x at offset %ld)",
                                     i + 1, (unsigned char)lines[i][cc], cc);
                diag_help(g, "write one list item per line");
                ok = false;
            } else if (!lines[i][0]) {
                diag_error(c->d, ats[i], "setup line %d is empty", i + 1);
                ok = false;
            } else if (!shell_line_balanced(lines[i], &open)) {
                Diag *g = diag_error(c->d, ats[i], open == '\\' ? "setup line %d ends with a backslash"
                                                                      : "setup line %d leaves a %c quote open", i + 1, open);
                diag_note(g, "each setup line runs by itself in the batch shell (eval), so it must be complete");
                ok = false;
            }
        }
        if (ok) { site->setup = lines; site->nsetup = n; site->setup_at = e->value->at; }
    }
}

/* The job's settings over its cluster's: env by name (the job's value wins,
 * in the cluster's order, the job's new names after), setup lines cluster
 * first, every other setting the job's where it sets one. */
static void merge_site(Checker *c, const PlanSite *cl, PlanSite *j)
{
    PlanSite m = *cl;
    m.env = arena_alloc(c->a, sizeof(PlanEnvVar) * (size_t)(cl->nenv + j->nenv + 1));
    m.nenv = 0;
    for (int i = 0; i < cl->nenv; i++) {
        m.env[m.nenv] = cl->env[i];
        for (int k = 0; k < j->nenv; k++)
            if (strcmp(j->env[k].name, cl->env[i].name) == 0) m.env[m.nenv] = j->env[k];
        m.nenv++;
    }
    for (int k = 0; k < j->nenv; k++) {
        bool seen = false;
        for (int i = 0; i < cl->nenv; i++) seen |= strcmp(j->env[k].name, cl->env[i].name) == 0;
        if (!seen) m.env[m.nenv++] = j->env[k];
    }
    m.setup = arena_alloc(c->a, sizeof(char *) * (size_t)(cl->nsetup + j->nsetup + 1));
    m.nsetup = 0;
    for (int i = 0; i < cl->nsetup; i++) m.setup[m.nsetup++] = cl->setup[i];
    for (int i = 0; i < j->nsetup; i++) m.setup[m.nsetup++] = j->setup[i];
    if (j->nsetup) m.setup_at = j->setup_at;
    if (j->constraint) { m.constraint = j->constraint; m.constraint_at = j->constraint_at; }
    if (j->exclusive >= 0) { m.exclusive = j->exclusive; m.exclusive_at = j->exclusive_at; }
    if (j->reservation) { m.reservation = j->reservation; m.reservation_at = j->reservation_at; }
    if (j->gpus_per_node >= 0) { m.gpus_per_node = j->gpus_per_node; m.gpus_per_node_at = j->gpus_per_node_at; }
    if (j->gres) { m.gres = j->gres; m.gres_type = j->gres_type; m.gres_at = j->gres_at; }
    if (j->mail_user) { m.mail_user = j->mail_user; m.mail_user_at = j->mail_user_at; }
    if (j->mail_type) { m.mail_type = j->mail_type; m.mail_type_at = j->mail_type_at; }
    if (j->comment) { m.comment = j->comment; m.comment_at = j->comment_at; }
    if (j->exclude) { m.exclude = j->exclude; m.exclude_at = j->exclude_at; }
    if (j->nodelist) { m.nodelist = j->nodelist; m.nodelist_at = j->nodelist_at; }
    if (j->switches) { m.switches = j->switches; m.switches_at = j->switches_at; }
    if (j->gpus_per_task) { m.gpus_per_task = j->gpus_per_task; m.gpus_per_task_at = j->gpus_per_task_at; }
    if (j->nextra) {   /* the cluster's lines, then the job's */
        m.extra = arena_alloc(c->a, sizeof(char *) * (size_t)(cl->nextra + j->nextra + 1));
        m.nextra = 0;
        for (int i = 0; i < cl->nextra; i++) m.extra[m.nextra++] = cl->extra[i];
        for (int i = 0; i < j->nextra; i++) m.extra[m.nextra++] = j->extra[i];
        m.extra_at = j->extra_at;
    }
    if (j->container) {
        m.container = j->container; m.container_at = j->container_at;
        m.image = j->image; m.image_at = j->image_at;
        m.mounts = j->mounts; m.nmounts = j->nmounts; m.mounts_at = j->mounts_at;
    }
    *j = m;
}

/* ---- blocks ---- */

static const char *const cluster_keys[] = {"partition", "nodes", "gpu", "cpus", "memory",
                                           "gpu_link", "network", "network_kind", "host_link", "slurm", "kubernetes",
                                           "env", "sbatch", "setup", "container"};

/* Bandwidths: bytes per second for links between GPUs (as NVIDIA quotes NVLink),
 * bits per second for network adapters (as NICs are sold). Two types: a link
 * in Gbps or a NIC in GBps is an error, never a silent factor of 8. The lexer
 * has no '/', so "GB/s" is written GBps and "Gb/s" Gbps. */
static const Unit byte_rate_units[] = {{"MBps", 1e6}, {"GBps", 1e9}, {"TBps", 1e12}};
static const Unit bit_rate_units[] = {{"Mbps", 1e6}, {"Gbps", 1e9}, {"Tbps", 1e12}};
static const char *const link_names[] = {"nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5"};
static const double link_rates[] = {600e9, 900e9, 1800e9, 64e9, 128e9};
static const char *const network_kinds[] = {"infiniband", "roce"};
/* GPU to host memory, as quoted (both directions): PCIe 4.0 / 5.0 x16, NVLink-C2C (GH200). */
static const char *const host_link_names[] = {"pcie4", "pcie5", "c2c"};
static const double host_link_rates[] = {64e9, 128e9, 900e9};

/* `NUMBER UNIT` for a rate; units: the table of this key, other: the other type. */
static bool get_rate(Checker *c, const Entry *e, const Term *num, const Term *u, const Unit *units,
                     const Unit *other, const char *example, double *out)
{
    const char *names[3] = {units[0].unit, units[1].unit, units[2].unit};
    const char *list = join_names(c->a, names, 3);
    if (!is_number(num)) {
        Diag *g = diag_error(c->d, num->at, "'%s' must be a bandwidth, found %s", e->key, term_desc(c, num));
        diag_help(g, "for example: %s = %s", e->key, example);
        return false;
    }
    if (!u) {
        Diag *g = diag_error(c->d, num->at, "'%s' needs a unit: %s", e->key, list);
        diag_help(g, "for example: %s = %s", e->key, example);
        return false;
    }
    if (u->kind == TERM_IDENT) {
        for (int i = 0; i < 3; i++) {
            if (strcmp(u->str, units[i].unit) != 0) continue;
            if (!(num->fval > 0) || num->overflow || num->fval * units[i].scale > 1e15) {
                diag_error(c->d, num->at, "'%s' must be a positive bandwidth up to 1000 TBps", e->key);
                return false;
            }
            *out = num->fval * units[i].scale;
            return true;
        }
        for (int i = 0; i < 3; i++) {
            if (strcmp(u->str, other[i].unit) != 0) continue;
            Diag *g = diag_error(c->d, u->at, "'%s' takes %s per second, not %s: %s is %s per second",
                                 e->key, units == bit_rate_units ? "bits" : "bytes", u->str, u->str,
                                 other == bit_rate_units ? "bits" : "bytes");
            diag_note(g, "%s", units == bit_rate_units
                                   ? "network adapters are rated in bits per second (400 Gbps = 50 GBps)"
                                   : "GPU links are quoted in bytes per second (NVLink 4 = 900 GBps)");
            diag_help(g, "for example: %s = %s", e->key, example);
            return false;
        }
    }
    Diag *g = diag_error(c->d, u->at, "'%s' is not a unit of bandwidth; '%s' takes %s", u->kind == TERM_IDENT ? u->str : u->text,
                         e->key, list);
    if (u->kind == TERM_IDENT) {
        const char *dym = did_you_mean(u->str, names, 3);
        if (dym) diag_help(g, "did you mean '%s'?", dym);
    }
    return false;
}

/* ---- gpu NAME { } : a GPU the catalogue lacks ---- */

static const char *const gpu_keys[] = {"memory", "usable", "bf16", "hbm", "gres_type", "mfu", "vendor"};
static const char *const vendor_names[] = {"nvidia", "amd"};
static const Unit flops_units[] = {{"TFLOPS", 1}, {"PFLOPS", 1000}};

static void check_gpu(Checker *c, const Item *it, PlanGpu *g)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, gpu_keys, NUNITS(gpu_keys));
    GpuSpec *spec = &g->spec;
    spec->name = g->name;
    spec->default_mfu = 0.35;
    if (gpu_catalog_find(g->name)) {
        Diag *d = diag_error(c->d, g->at, "GPU '%s' is in the catalogue already", g->name);
        diag_help(d, "use it as it is, or give your part another name");
    }
    Entry *e;
    uint64_t bytes = 0;
    if ((e = require(c, &s, "memory", "96 GB")) && get_size(c, e, &bytes)) {
        if (bytes < (1ull << 30)) diag_error(c->d, e->value->at, "GPU memory must be at least 1 GiB");
        else { spec->mem_bytes = (double)bytes; spec->usable_bytes = 0.98 * (double)bytes; }
    }
    if ((e = find(&s, "usable")) && get_size(c, e, &bytes)) {
        if (spec->mem_bytes > 0 && (double)bytes > spec->mem_bytes)
            diag_error(c->d, e->value->at, "'usable' is more than the GPU's memory");
        else if (bytes < (1ull << 30)) diag_error(c->d, e->value->at, "'usable' must be at least 1 GiB");
        else spec->usable_bytes = (double)bytes;
    }
    double x;
    if ((e = require(c, &s, "bf16", "989 TFLOPS")) &&
        get_quantity(c, e, flops_units, NUNITS(flops_units), "a dense bf16 peak", "989 TFLOPS", &x)) {
        if (!(x > 0) || x > 100000) diag_error(c->d, e->value->at, "'bf16' must be between 0 and 100 PFLOPS");
        else spec->bf16_tflops = x;
    }
    if ((e = require(c, &s, "hbm", "4 TBps")) && e->value &&
        get_rate(c, e, e->value->terms[0], e->value->nterms > 1 ? e->value->terms[1] : NULL, byte_rate_units,
                 bit_rate_units, "4 TBps", &x) && want_terms(c, e, 2, "a bandwidth"))
        spec->hbm_tbps = x / 1e12;
    spec->gres_type = NULL;
    const char *str;
    if ((e = find(&s, "gres_type"))) {
        if (get_string(c, e, &str)) {
            bool ok = str[0] && str[0] != '-' && str[0] != '.';
            for (const char *p = str; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.')) ok = false;
            if (!ok) diag_error(c->d, e->value->at, "'gres_type' must be letters, digits, '_', '-' or '.'");
            else spec->gres_type = str;
        }
    } else {
        char *low = arena_strdup(c->a, g->name);
        for (char *p = low; *p; p++) *p = (char)tolower((unsigned char)*p);
        spec->gres_type = low;
    }
    if ((e = find(&s, "mfu")) && get_percent(c, e, 100, &x)) {
        if (x <= 0) diag_error(c->d, e->value->at, "'mfu' must be more than 0%%");
        else spec->default_mfu = x;
    }
    int v;
    if ((e = find(&s, "vendor")) && get_enum(c, e, vendor_names, 2, &v)) g->amd = v == 1;
    report_missing(c, &s);
}

/* A GPU by name: the plan's gpu blocks, then the catalogue; *amd its vendor. */
static const GpuSpec *find_gpu(Checker *c, const char *name, bool *amd)
{
    Symbol *sym = lookup(c, name);
    if (sym && sym->kind == K_GPU) { if (amd) *amd = ((PlanGpu *)sym->obj)->amd; return &((PlanGpu *)sym->obj)->spec; }
    const GpuSpec *g = gpu_catalog_find(name);
    if (amd) *amd = gpu_catalog_is_amd(g);
    return g;
}

/* gpu_link = nvlink4 | 900 GBps;  network = 8 x 400 Gbps;  network_kind = infiniband | roce;
 * host_link = pcie5 | 128 GBps (GPU to host memory: DeepSpeed offload).
 * Without them, the GPU's usual node from the catalogue (gpu_catalog_fabric). */
static void check_cluster_fabric(Checker *c, Scope *s, PlanCluster *cl)
{
    Entry *e;
    const GpuFabric *fab = gpu_catalog_fabric(cl->gpu);
    if (fab) {
        cl->link_bytes_per_s = fab->link_bytes_per_s; cl->link_default = true;
        cl->nics = fab->nics; cl->nic_bits_per_s = fab->nic_bits_per_s; cl->network_default = true;
        cl->host_link_bytes_per_s = fab->host_link_bytes_per_s; cl->host_link_default = true;
    }
    if ((e = find(s, "gpu_link")) && e->value) {
        const Value *v = e->value;
        const Term *t = v->terms[0];
        double x;
        if (t->kind == TERM_IDENT) {
            int k;
            if (want_terms(c, e, 1, "a link name or a bandwidth") &&
                get_enum(c, e, link_names, NUNITS(link_names), &k)) {
                cl->link_bytes_per_s = link_rates[k]; cl->link_default = false; cl->link_at = v->at;
            }
        } else if (v->nterms <= 2 &&
                   get_rate(c, e, t, v->nterms == 2 ? v->terms[1] : NULL, byte_rate_units, bit_rate_units,
                            "900 GBps", &x)) {
            cl->link_bytes_per_s = x; cl->link_default = false; cl->link_at = v->at;
        } else if (v->nterms > 2) {
            want_terms(c, e, 2, "a bandwidth");
        }
    }
    if ((e = find(s, "network")) && e->value) {
        const Value *v = e->value;
        const Term *k = v->terms[0];
        double x;
        if (v->nterms < 3 || k->kind != TERM_INT || v->terms[1]->kind != TERM_IDENT ||
            strcmp(v->terms[1]->str, "x") != 0) {
            Diag *g = diag_error(c->d, v->at, "'network' must be adapters per node x speed, found %s",
                                 value_desc(c, v));
            diag_help(g, "for example: network = 8 x 400 Gbps");
        } else if (k->ival < 1 || k->ival > 64) {
            diag_error(c->d, k->at, "network adapters per node must be between 1 and 64, found %s", k->text);
        } else if (want_terms(c, e, 4, "adapters x speed") &&
                   get_rate(c, e, v->terms[2], v->terms[3], bit_rate_units, byte_rate_units, "8 x 400 Gbps", &x)) {
            cl->nics = (int)k->ival; cl->nic_bits_per_s = x; cl->network_default = false; cl->network_at = v->at;
        }
    }
    if ((e = find(s, "host_link")) && e->value) {
        const Value *v = e->value;
        const Term *t = v->terms[0];
        double x;
        int k;
        if (t->kind == TERM_IDENT) {
            if (want_terms(c, e, 1, "a link name or a bandwidth") &&
                get_enum(c, e, host_link_names, NUNITS(host_link_names), &k)) {
                cl->host_link_bytes_per_s = host_link_rates[k]; cl->host_link_default = false; cl->host_link_at = v->at;
            }
        } else if (v->nterms <= 2 &&
                   get_rate(c, e, t, v->nterms == 2 ? v->terms[1] : NULL, byte_rate_units, bit_rate_units,
                            "128 GBps", &x)) {
            cl->host_link_bytes_per_s = x; cl->host_link_default = false; cl->host_link_at = v->at;
        } else if (v->nterms > 2) {
            want_terms(c, e, 2, "a bandwidth");
        }
    }
    if ((e = find(s, "network_kind"))) {
        int k;
        if (want_terms(c, e, 1, "infiniband or roce") && get_enum(c, e, network_kinds, 2, &k))
            cl->network_roce = k == 1;
    }
    if (!cl->gpu && (cl->link_bytes_per_s > 0 && !cl->link_default)) {
        cl->link_bytes_per_s = 0;
        diag_warning(c->d, cl->link_at, "'gpu_link' on a cluster without GPUs is ignored");
    }
    if (!cl->gpu && (cl->host_link_bytes_per_s > 0 && !cl->host_link_default)) {
        cl->host_link_bytes_per_s = 0;
        diag_warning(c->d, cl->host_link_at, "'host_link' on a cluster without GPUs is ignored");
    }
}

/* ---- Slurm on Kubernetes (docs/language.md, "Slurm on Kubernetes") ---- */

static const char *const slurm_runtimes[] = {"hosts", "slinky", "soperator"};
static const char *const k8s_keys[] = {"namespace", "cluster_name", "image", "munge_image", "jail", "pool_gpus",
                                       "node_selector", "tolerations", "cpu_request", "memory_request", "volumes",
                                       "system_reserve", "shm", "host_network", "rdma", "partition_max_time"};
static const char *const taint_effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute"};

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return true;
    return false;
}

/* RFC 1123 label (Kubernetes namespaces, volume and node set names): at most 63
 * of [a-z0-9-], starting and ending alphanumeric. NULL when s is one, else why not. */
static const char *dns_label_why(const char *s)
{
    size_t n = strlen(s);
    if (n == 0) return "it is empty";
    if (n > 63) return "it is longer than 63 characters";
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
            return isupper((unsigned char)s[i]) ? "it has an upper-case letter" : "it has a character other than a-z, 0-9 and '-'";
    if (s[0] == '-' || s[n - 1] == '-') return "it starts or ends with '-'";
    return NULL;
}

/* RFC 1123 subdomain (claim names, label-key prefixes): labels joined by '.', at most 253. */
static const char *dns_subdomain_why(const char *s)
{
    size_t n = strlen(s);
    if (n == 0) return "it is empty";
    if (n > 253) return "it is longer than 253 characters";
    char part[256];
    const char *p = s;
    while (1) {
        const char *dot = strchr(p, '.');
        size_t k = dot ? (size_t)(dot - p) : strlen(p);
        if (k > 63) return "a part between dots is longer than 63 characters";
        memcpy(part, p, k);
        part[k] = 0;
        const char *why = dns_label_why(part);
        if (why) return k == 0 ? "it has an empty part between dots" : why;
        if (!dot) return NULL;
        p = dot + 1;
    }
}

/* A label name or value: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends
 * (a value may be empty). */
static const char *label_name_why(const char *s, bool may_be_empty)
{
    size_t n = strlen(s);
    if (n == 0) return may_be_empty ? NULL : "it is empty";
    if (n > 63) return "it is longer than 63 characters";
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return "it has a character other than letters, digits, '-', '_' and '.'";
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1])) return "it does not start and end with a letter or digit";
    return NULL;
}

/* A label (or taint) key: [PREFIX/]NAME, PREFIX a DNS subdomain. */
static const char *label_key_why(Arena *a, const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash) return label_name_why(s, false);
    const char *why = dns_subdomain_why(arena_printf(a, "%.*s", (int)(slash - s), s));
    if (why) return arena_printf(a, "its prefix is not a DNS subdomain: %s", why);
    return label_name_why(slash + 1, false);
}

static bool get_k8s_string(Checker *c, Scope *s, const char *key, const char **out, SrcRange *at)
{
    Entry *e = find(s, key);
    if (!e) return false;
    if (at) *at = e->at;
    return get_string(c, e, out);
}

/* A list of strings, a list even of one `[ "a" ]` (unlike get_string_list); returns the terms (NULL + error when not one). */
static const Term *get_strict_string_list(Checker *c, const Entry *e, const char *example)
{
    if (!want_terms(c, e, 1, "a list of strings")) return NULL;
    const Term *x = e->value->terms[0];
    if (x->kind != TERM_LIST) {
        Diag *g = diag_error(c->d, x->at, "'%s' must be a list of strings, found %s", e->key, term_desc(c, x));
        diag_help(g, "for example: %s = [%s]", e->key, example);
        return NULL;
    }
    for (int i = 0; i < x->nitems; i++)
        if (x->items[i]->nterms != 1 || x->items[i]->terms[0]->kind != TERM_STRING) {
            diag_error(c->d, x->items[i]->at, "'%s' must be a list of strings, found %s", e->key, value_desc(c, x->items[i]));
            return NULL;
        }
    return x;
}

/* An image reference with a tag or a digest (what runs must not move). */
static bool check_image(Checker *c, const Entry *e, const char *img)
{
    const char *last_slash = strrchr(img, '/');
    const char *tag = strrchr(last_slash ? last_slash : img, ':');
    bool ok = img[0] && !strchr(img, ' ') && !has_control(img);
    if (!ok) {
        diag_error(c->d, e->value->at, "'%s' is not an image reference", e->key);
        return false;
    }
    if (!strchr(img, '@') && (!tag || !tag[1])) {
        Diag *g = diag_error(c->d, e->value->at, "image '%s' has no tag or digest", img);
        diag_note(g, "an image without a tag is whatever ':latest' is when the pod starts");
        diag_help(g, "name the version: %s = \"%s:TAG\"", e->key, img);
        return false;
    }
    return true;
}

static void check_k8s_volumes(Checker *c, const Entry *e, PlanK8s *k)
{
    if (!want_terms(c, e, 1, "a list of volumes")) return;
    const Term *x = e->value->terms[0];
    if (x->kind != TERM_LIST) {
        Diag *g = diag_error(c->d, x->at, "'volumes' must be a list, found %s", term_desc(c, x));
        diag_help(g, "for example: volumes = [pvc \"data-hps\" at \"/mnt/data-hps\"]");
        return;
    }
    k->volumes = arena_alloc(c->a, sizeof(PlanVolume) * (size_t)(x->nitems ? x->nitems : 1));
    int nhost = 0;
    for (int i = 0; i < x->nitems; i++) {
        const Value *v = x->items[i];
        const Term *t = v->terms[0];
        if (t->kind == TERM_IDENT && strcmp(t->str, "pvc") && strcmp(t->str, "host")) {
            Diag *g = diag_error(c->d, t->at, "unknown volume kind '%s'", t->str);
            diag_note(g, "a volume is pvc \"CLAIM\" at \"/PATH\" (a PersistentVolumeClaim) or host \"/DIR\" at \"/PATH\" (a hostPath)");
            continue;
        }
        if (v->nterms != 4 || t->kind != TERM_IDENT ||
            v->terms[1]->kind != TERM_STRING || v->terms[2]->kind != TERM_IDENT || strcmp(v->terms[2]->str, "at") ||
            v->terms[3]->kind != TERM_STRING) {
            Diag *g = diag_error(c->d, v->at, "a volume is pvc \"CLAIM\" at \"/PATH\" or host \"/DIR\" at \"/PATH\", found %s",
                                 value_desc(c, v));
            diag_help(g, "for example: volumes = [pvc \"data-hps\" at \"/mnt/data-hps\"]");
            continue;
        }
        PlanVolume vol = {.pvc = t->str[0] == 'p', .source = v->terms[1]->str, .mount = v->terms[3]->str, .at = v->at};
        const char *why;
        if (vol.pvc && (why = dns_subdomain_why(vol.source))) {
            diag_error(c->d, v->terms[1]->at, "claim name '%s' is not a Kubernetes name: %s", vol.source, why);
            continue;
        }
        if (vol.pvc && strlen(vol.source) > 63) {
            diag_error(c->d, v->terms[1]->at, "claim name '%s' is longer than 63 characters (it is also the pod's volume name)", vol.source);
            continue;
        }
        if (strcmp(vol.mount, "/dev/shm") == 0 || strncmp(vol.mount, "/dev/shm/", 9) == 0) {
            diag_error(c->d, v->terms[3]->at, "/dev/shm is the pod's shared memory (the kubernetes block's 'shm'), not a volume's mount");
            continue;
        }
        if (vol.pvc && strcmp(vol.source, "shm") == 0) {
            diag_error(c->d, v->terms[1]->at, "claim name 'shm' is the pod's /dev/shm volume (the claim is also the pod's volume name)");
            continue;
        }
        if (!vol.pvc && (vol.source[0] != '/' || has_control(vol.source))) {
            diag_error(c->d, v->terms[1]->at, "a host directory must be an absolute path");
            continue;
        }
        if (vol.mount[0] != '/' || strlen(vol.mount) < 2 || has_control(vol.mount) || strstr(vol.mount, "..") ||
            vol.mount[strlen(vol.mount) - 1] == '/') {
            diag_error(c->d, v->terms[3]->at, "a mount path must be an absolute path without '..' or a trailing '/'");
            continue;
        }
        vol.name = vol.pvc ? vol.source : arena_printf(c->a, "host-%d", ++nhost);
        bool dup = false;
        for (int j = 0; j < k->nvolumes; j++)
            if (strcmp(k->volumes[j].mount, vol.mount) == 0 || strcmp(k->volumes[j].name, vol.name) == 0) {
                Diag *g = diag_error(c->d, v->at, "volume '%s' at '%s' repeats a volume name or mount path", vol.name, vol.mount);
                diag_note(g, "first at line %d", k->volumes[j].at.start.line);
                dup = true;
                break;
            }
        if (!dup) k->volumes[k->nvolumes++] = vol;
    }
}

/* `nodes` on Kubernetes: NAME-[0-N], the names the operator gives its pods
 * (and so the Slurm nodes): NAME is the node set. */
static void check_k8s_nodes(Checker *c, PlanCluster *cl, PlanK8s *k)
{
    if (!cl->hostlist || cl->nhosts < 1) return;
    const char *h0 = cl->hosts[0];
    const char *dash = strrchr(h0, '-');
    const char *why = NULL;
    char *name = dash ? arena_printf(c->a, "%.*s", (int)(dash - h0), h0) : NULL;
    if (!name) why = "the hosts are not NAME-0, NAME-1, ...";
    else if ((why = dns_label_why(name))) why = arena_printf(c->a, "node set name '%s' is not a DNS-1123 label: %s", name, why);
    for (int i = 0; !why && i < cl->nhosts; i++) {
        char *want = arena_printf(c->a, "%s-%d", name, i);
        if (strcmp(cl->hosts[i], want) != 0)
            why = arena_printf(c->a, "host %d is '%s', the operator names it '%s'", i + 1, cl->hosts[i], want);
    }
    if (!why && strlen(cl->hosts[cl->nhosts - 1]) > 63)
        why = arena_printf(c->a, "pod name '%s' is longer than 63 characters", cl->hosts[cl->nhosts - 1]);
    if (why) {
        Diag *g = diag_error(c->d, cl->hostlist_at, "on Kubernetes, 'nodes' must be the pods the operator creates: %s", why);
        diag_note(g, "%s names the pods of node set NAME NAME-0 .. NAME-(N-1), and Slurm's nodes after them",
                  cl->slurm == SLURM_SLINKY ? "Slinky" : "Soperator");
        diag_help(g, "for example: nodes = gpu-[0-%d]", cl->nhosts > 1 ? cl->nhosts - 1 : 0);
        return;
    }
    k->node_set = name;
}

/* cluster: slurm = hosts | slinky "VERSION" | soperator "VERSION" (a
 * version is MAJOR.MINOR[.PATCH][-PRE]); e is the slurm entry or NULL. */
static void check_cluster_slurm(Checker *c, const Entry *e, PlanCluster *cl)
{
    if (e && want_terms(c, e, e->value && e->value->nterms >= 2 ? 2 : 1, "hosts, or an operator and its version")) {
        const Term *t = e->value->terms[0];
        cl->slurm_at = e->value->at;
        int r = -1;
        if (t->kind == TERM_IDENT)
            for (int i = 0; i < 3; i++)
                if (strcmp(t->str, slurm_runtimes[i]) == 0) r = i;
        if (r < 0) {
            const char *dym = t->kind == TERM_IDENT ? did_you_mean(t->str, slurm_runtimes, 3) : NULL;
            Diag *g = dym ? diag_error(c->d, t->at, "unknown slurm '%s'; did you mean '%s'?", t->str, dym)
                          : diag_error(c->d, t->at, "'slurm' must be hosts, slinky or soperator, found %s", term_desc(c, t));
            diag_note(g, "slurm = hosts | slinky \"VERSION\" | soperator \"VERSION\"");
        } else if (r == SLURM_HOSTS && e->value->nterms != 1) {
            diag_error(c->d, e->value->terms[1]->at, "'slurm = hosts' takes no version");
        } else if (r != SLURM_HOSTS && (e->value->nterms != 2 || e->value->terms[1]->kind != TERM_STRING)) {
            Diag *g = diag_error(c->d, e->value->nterms > 1 ? e->value->terms[1]->at : t->at,
                                 "'slurm = %s' needs the operator's version as a string", t->str);
            diag_help(g, "for example: slurm = %s \"%s\"", t->str, r == SLURM_SLINKY ? "1.3.0" : "5.0.0");
        } else {
            const char *v = r == SLURM_HOSTS ? NULL : e->value->terms[1]->str;
            bool ok = true;
            if (v) {   /* MAJOR.MINOR[.PATCH][-PRE] */
                const char *p = v;
                int parts = 0;
                while (isdigit((unsigned char)*p)) {
                    while (isdigit((unsigned char)*p)) p++;
                    parts++;
                    if (*p != '.') break;
                    p++;
                }
                if (*p == '-') { p++; ok = *p != 0; for (; *p; p++) ok &= isalnum((unsigned char)*p) || *p == '.'; }
                ok &= parts >= 2 && parts <= 3 && *p == 0;
                if (!ok) {
                    Diag *g = diag_error(c->d, e->value->terms[1]->at, "'%s' is not an operator version", v);
                    diag_help(g, "write MAJOR.MINOR[.PATCH], for example \"%s\"", r == SLURM_SLINKY ? "1.3.0" : "5.0.0");
                }
            }
            if (ok) { cl->slurm = (SlurmRuntime)r; cl->slurm_version = v; }
        }
    }
}

/* kubernetes: namespace and cluster_name (DNS-1123 labels), image, and
 * for Soperator its munge_image and jail claim (refused for Slinky). */
static void check_k8s_names(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k)
{
    const char *why;
    const char *str;
    SrcRange at;
    Entry *x;
    if (get_k8s_string(c, ks, "namespace", &str, &at)) {
        if ((why = dns_label_why(str))) diag_error(c->d, find(ks, "namespace")->value->at, "namespace '%s' is not a DNS-1123 label: %s", str, why);
        else k->namespace_ = str;
    }
    if (get_k8s_string(c, ks, "cluster_name", &str, &at)) {
        if ((why = dns_label_why(str))) diag_error(c->d, find(ks, "cluster_name")->value->at, "cluster_name '%s' is not a DNS-1123 label: %s", str, why);
        else k->cluster_name = str;
    }
    if ((x = require(c, ks, "image", "\"ghcr.io/slinkyproject/slurmd:25.11-ubuntu24.04\"")) && get_string(c, x, &str) &&
        check_image(c, x, str)) {
        k->image = str; k->image_at = x->value->at;
    }
    if (cl->slurm == SLURM_SOPERATOR) {
        if ((x = require(c, ks, "munge_image", "\"cr.eu-north1.nebius.cloud/soperator/munge:TAG\"")) && get_string(c, x, &str) &&
            check_image(c, x, str)) {
            k->munge_image = str; k->munge_image_at = x->value->at;
        }
        if ((x = require(c, ks, "jail", "\"jail-pvc\"")) && get_string(c, x, &str)) {
            if ((why = dns_subdomain_why(str))) diag_error(c->d, x->value->at, "claim name '%s' is not a Kubernetes name: %s", str, why);
            else { k->jail = str; k->jail_at = x->value->at; }
        }
    } else {
        const char *only[] = {"munge_image", "jail"};
        for (int i = 0; i < 2; i++)
            if ((x = find(ks, only[i]))) diag_error(c->d, x->key_at, "'%s' is a Soperator setting; Slinky has none", only[i]);
    }
}

/* kubernetes: pool_gpus = INT, the nvidia.com/gpu a node of the pool
 * offers: at least the cluster's GPUs per node, or no slurmd pod is scheduled. */
static void check_k8s_pool_gpus(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k)
{
    Entry *x;
    if (cl->gpu && (x = require(c, ks, "pool_gpus", "8"))) {
        k->pool_gpus_at = x->value ? x->value->at : x->at;
        if (get_int32(c, x, 1, 64, &k->pool_gpus) && cl->gpus_per_node > k->pool_gpus) {
            Diag *g = diag_error(c->d, cl->gpu_at, "%d GPUs per node, but the Kubernetes pool offers %d per node (nvidia.com/gpu)",
                                 cl->gpus_per_node, k->pool_gpus);
            diag_note(g, "pool_gpus = %d at line %d: a slurmd pod asking for nvidia.com/gpu: %d is never scheduled",
                      k->pool_gpus, k->pool_gpus_at.start.line, cl->gpus_per_node);
        }
    } else if (!cl->gpu && (x = find(ks, "pool_gpus"))) {
        diag_warning(c->d, x->key_at, "'pool_gpus' on a cluster without GPUs is ignored");
    }
}

/* kubernetes: node_selector = ["KEY=VALUE", ...], Kubernetes label
 * keys and values, each key once. */
static void check_k8s_node_selector(Checker *c, Scope *ks, PlanK8s *k)
{
    const char *why;
    Entry *x;
    if ((x = find(ks, "node_selector"))) {
        const Term *l = get_strict_string_list(c, x, "\"nvidia.com/gpu.present=true\"");
        if (l) {
            k->node_selector = arena_alloc(c->a, sizeof(char *) * (size_t)(l->nitems + 1));
            for (int i = 0; i < l->nitems; i++) {
                const Term *t = l->items[i]->terms[0];
                const char *eq = strchr(t->str, '=');
                if (!eq) {
                    Diag *g = diag_error(c->d, t->at, "a node selector is \"KEY=VALUE\", found \"%s\"", t->str);
                    diag_help(g, "for example: \"nvidia.com/gpu.present=true\"");
                    continue;
                }
                const char *key = arena_printf(c->a, "%.*s", (int)(eq - t->str), t->str);
                if ((why = label_key_why(c->a, key))) { diag_error(c->d, t->at, "label key '%s' is not a Kubernetes label key: %s", key, why); continue; }
                if ((why = label_name_why(eq + 1, true))) { diag_error(c->d, t->at, "label value '%s' is not a Kubernetes label value: %s", eq + 1, why); continue; }
                bool dup = false;
                for (int j = 0; j < k->nnode_selector; j++)
                    dup |= strncmp(k->node_selector[j], t->str, (size_t)(eq - t->str) + 1) == 0;
                if (dup) diag_error(c->d, t->at, "label key '%s' is selected twice", key);
                else k->node_selector[k->nnode_selector++] = t->str;
            }
        }
    }
}

/* kubernetes: tolerations = ["KEY[=VALUE]:EFFECT", ...], as kubectl
 * taint writes taints. */
static void check_k8s_tolerations(Checker *c, Scope *ks, PlanK8s *k)
{
    const char *why;
    Entry *x;
    if ((x = find(ks, "tolerations"))) {
        const Term *l = get_strict_string_list(c, x, "\"nvidia.com/gpu:NoSchedule\"");
        if (l) {
            k->tolerations = arena_alloc(c->a, sizeof(PlanToleration) * (size_t)(l->nitems + 1));
            for (int i = 0; i < l->nitems; i++) {
                const Term *t = l->items[i]->terms[0];
                const char *colon = strrchr(t->str, ':');
                if (!colon) {
                    Diag *g = diag_error(c->d, t->at, "a toleration is \"KEY[=VALUE]:EFFECT\" (as kubectl taint writes taints), found \"%s\"", t->str);
                    diag_help(g, "for example: \"nvidia.com/gpu:NoSchedule\"");
                    continue;
                }
                int eff = -1;
                for (int j = 0; j < 3; j++)
                    if (strcmp(colon + 1, taint_effects[j]) == 0) eff = j;
                if (eff < 0) {
                    Diag *g = diag_error(c->d, t->at, "unknown taint effect '%s'", colon + 1);
                    diag_note(g, "effects: NoSchedule, PreferNoSchedule, NoExecute");
                    continue;
                }
                char *kv = arena_printf(c->a, "%.*s", (int)(colon - t->str), t->str);
                char *eq = strchr(kv, '=');
                if (eq) *eq = 0;
                if ((why = label_key_why(c->a, kv))) { diag_error(c->d, t->at, "taint key '%s' is not a Kubernetes key: %s", kv, why); continue; }
                if (eq && (why = label_name_why(eq + 1, true))) { diag_error(c->d, t->at, "taint value '%s' is not a Kubernetes label value: %s", eq + 1, why); continue; }
                k->tolerations[k->ntolerations++] = (PlanToleration){kv, eq ? eq + 1 : NULL, taint_effects[eff]};
            }
        }
    }
}

/* kubernetes: cpu_request (CPUs, in Kubernetes' 1m steps) and
 * memory_request (at least 1 MiB), each at most the pod's limit: the
 * cluster's cpus and memory. */
static void check_k8s_requests(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k)
{
    Entry *x;
    if ((x = find(ks, "cpu_request"))) {
        double v;
        if (get_number(c, x, 0, true, 100000, &v)) {
            double m = v * 1000;
            if (fabs(m - llround(m)) > 1e-6) {
                Diag *g = diag_error(c->d, x->value->at, "'cpu_request' is finer than Kubernetes' 1m (a thousandth of a CPU)");
                diag_help(g, "round it to three decimals: %.3f", v);
            } else if (m > (double)cl->cpus * 1000 && cl->cpus) {
                Diag *g = diag_error(c->d, x->value->at, "'cpu_request' %s is more than the node's 'cpus' %d (the limit)", x->value->terms[0]->text, cl->cpus);
                diag_note(g, "the slurmd pod's CPU limit is the cluster's cpus; a request cannot exceed its limit");
            } else {
                k->cpu_request_milli = llround(m); k->cpu_request_at = x->value->at;
            }
        }
    }
    if ((x = find(ks, "memory_request"))) {
        uint64_t b;
        if (get_size(c, x, &b)) {
            if (b < (1u << 20)) diag_error(c->d, x->value->at, "'memory_request' must be at least 1 MiB");
            else if (cl->memory_bytes && b > cl->memory_bytes) {
                Diag *g = diag_error(c->d, x->value->at, "'memory_request' is more than the node's 'memory' (the limit)");
                diag_note(g, "the slurmd pod's memory limit is the cluster's memory; a request cannot exceed its limit");
            } else if (k->memory_limit && b > k->memory_limit) {
                Diag *g = diag_error(c->d, x->value->at, "'memory_request' is more than the slurmd pod's memory limit, %.1f GiB",
                                     (double)k->memory_limit / (1ull << 30));
                diag_note(g, "the limit is the node's memory less system_reserve (%.1f GiB) for the kubelet and the system",
                          (double)k->system_reserve / (1ull << 30));
            } else { k->memory_request = b; k->memory_request_at = x->value->at; }
        }
    }
}

/* The memory a Kubernetes node keeps from its pods by default: GKE's
 * reservation for the kubelet and the system (25% of the first 4 GiB, 20% of
 * the next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB) plus
 * the kubelet's 100 MiB eviction threshold; rounded up to a whole GiB. */
static uint64_t k8s_default_reserve(uint64_t mem)
{
    static const struct { double upto_gib, share; } tier[] = {{4, 0.25}, {8, 0.20}, {16, 0.10}, {128, 0.06}, {1e18, 0.02}};
    double gib = (double)mem / (1ull << 30), r = 100.0 / 1024, from = 0;
    for (size_t i = 0; i < sizeof tier / sizeof *tier && gib > from; i++) {
        double upto = gib < tier[i].upto_gib ? gib : tier[i].upto_gib;
        r += (upto - from) * tier[i].share;
        from = tier[i].upto_gib;
    }
    return (uint64_t)ceil(r) << 30;
}

/* kubernetes: system_reserve (the node's memory its pods may not use; the
 * pod's limit is memory less it, in whole GiB), shm (/dev/shm, at most the
 * limit; default half of it), host_network (Slinky), rdma = "RESOURCE=COUNT"
 * (an extended resource such as rdma/ib or nvidia.com/hostdev) and
 * partition_max_time (the partition's MaxTime: the site's, not a job's). */
static void check_k8s_node_fit(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k)
{
    Entry *x;
    uint64_t mem = cl->memory_bytes;
    k->system_reserve = k8s_default_reserve(mem);
    if ((x = find(ks, "system_reserve"))) {
        uint64_t b;
        if (get_size(c, x, &b)) { k->system_reserve = b; k->system_reserve_at = x->value->at; }
    }
    if (mem && k->system_reserve + (1ull << 30) > mem) {
        Diag *g = diag_error(c->d, x && x->value ? x->value->at : cl->memory_at,
                             "system_reserve %.1f GiB leaves the slurmd pod less than 1 GiB of the node's %.1f GiB",
                             (double)k->system_reserve / (1ull << 30), (double)mem / (1ull << 30));
        diag_help(g, "set system_reserve below the node's memory (the default is GKE's reservation for the kubelet)");
        k->system_reserve = 0;
    }
    k->memory_limit = mem > k->system_reserve ? ((mem - k->system_reserve) >> 30) << 30 : mem;
    if (k->memory_limit == 0) k->memory_limit = mem;
    k->memory_request = k->memory_limit;
    k->shm_bytes = (k->memory_limit / 2 >> 30) << 30;
    if (!k->shm_bytes) k->shm_bytes = k->memory_limit / 2;
    if ((x = find(ks, "shm"))) {
        uint64_t b;
        if (get_size(c, x, &b)) {
            if (b < (64u << 20)) diag_error(c->d, x->value->at, "'shm' must be at least 64 MiB (Docker's default, already too small for NCCL)");
            else if (b > k->memory_limit) {
                Diag *g = diag_error(c->d, x->value->at, "'shm' is more than the slurmd pod's memory limit, %.1f GiB",
                                     (double)k->memory_limit / (1ull << 30));
                diag_note(g, "/dev/shm is a memory-backed emptyDir: what it holds counts against the pod's memory limit");
            } else { k->shm_bytes = b; k->shm_at = x->value->at; }
        }
    }
    if ((x = find(ks, "host_network")) && get_bool(c, x, &k->host_network)) {
        k->host_network_at = x->value->at;
        if (k->host_network && cl->slurm == SLURM_SOPERATOR) {
            Diag *g = diag_error(c->d, x->value->at, "'host_network': Soperator's NodeSet has no hostNetwork field");
            diag_note(g, "Soperator sets up its workers' network itself; 'host_network' is a Slinky setting");
        }
    }
    const char *str;
    if ((x = find(ks, "rdma")) && get_string(c, x, &str)) {
        const char *eq = strrchr(str, '=');
        const char *name = eq ? arena_printf(c->a, "%.*s", (int)(eq - str), str) : str;
        const char *why = !eq ? "it has no '=COUNT'"
                          : !strchr(name, '/') ? "a device plugin's resource name has a domain (rdma/ib)"
                                               : label_key_why(c->a, name);
        char *end = NULL;
        long n = eq ? strtol(eq + 1, &end, 10) : 0;
        if (!why && (!end || *end || end == eq + 1 || n < 1 || n > 64)) why = "COUNT is not a whole number from 1 to 64";
        if (why) {
            Diag *g = diag_error(c->d, x->value->at, "'rdma' is \"RESOURCE=COUNT\", an extended resource each slurmd pod asks for: %s", why);
            diag_help(g, "for example: rdma = \"rdma/ib=1\" (an RDMA shared device plugin) or \"nvidia.com/hostdev=8\" (SR-IOV)");
        } else if (!strncmp(name, "nvidia.com/gpu", 14)) {
            diag_error(c->d, x->value->at, "'rdma' names '%s', which the pod asks for already (the cluster's GPUs)", name);
        } else { k->rdma_resource = name; k->rdma_count = (int)n; k->rdma_at = x->value->at; }
    }
    if ((x = find(ks, "partition_max_time"))) {
        double secs;
        if (get_duration(c, x, &secs)) {
            if (secs < 60) diag_error(c->d, x->value->at, "'partition_max_time' must be at least 1 min");
            else { k->partition_max_seconds = secs; k->partition_max_at = x->value->at; }
        }
    }
}

/* cluster: the slurm runtime and, on Kubernetes (Slinky, Soperator), the
 * kubernetes { } block: names, pool, scheduling, requests, volumes, nodes. */
static void check_cluster_k8s(Checker *c, const Item *it, Scope *s, PlanCluster *cl)
{
    Entry *e = find(s, "slurm");
    Entry *kb = find(s, "kubernetes");
    check_cluster_slurm(c, e, cl);
    if (cl->slurm == SLURM_HOSTS) {
        if (kb && (!e || cl->slurm_at.start.line))
            diag_error(c->d, kb->key_at, "'kubernetes' settings need 'slurm = slinky \"VERSION\"' or 'slurm = soperator \"VERSION\"'");
        return;
    }
    if (!kb || kb->value) {
        Diag *g = diag_error(c->d, kb ? kb->key_at : e->key_at, "a cluster with slurm = %s needs a 'kubernetes { }' block",
                             slurm_runtimes[cl->slurm]);
        diag_help(g, "add kubernetes { image = \"...:TAG\"  pool_gpus = 8 }");
        return;
    }
    PlanK8s *k = arena_alloc(c->a, sizeof *k);
    k->at = kb->key_at;
    k->namespace_ = "slurm";
    k->cluster_name = "slurm";
    k->cpu_request_milli = (int64_t)cl->cpus * 1000;
    k->memory_request = cl->memory_bytes;
    Scope ks = scope_of(c, it, kb->sub, kb->nsub, "kubernetes");
    ks.at = kb->key_at;
    check_keys(c, &ks, k8s_keys, NUNITS(k8s_keys));
    check_k8s_node_fit(c, &ks, cl, k);
    check_k8s_names(c, &ks, cl, k);
    check_k8s_pool_gpus(c, &ks, cl, k);
    check_k8s_node_selector(c, &ks, k);
    check_k8s_tolerations(c, &ks, k);
    check_k8s_requests(c, &ks, cl, k);
    Entry *x;
    if ((x = find(&ks, "volumes"))) check_k8s_volumes(c, x, k);
    report_missing(c, &ks);
    check_k8s_nodes(c, cl, k);
    cl->k8s = k;
}

/* A path of the plan that a pod must reach lies on one of the cluster's volumes. */
static void check_k8s_path(Checker *c, const PlanCluster *cl, const char *what, const char *path, SrcRange at)
{
    if (!path || path[0] != '/' || !cl->k8s) return;
    for (int i = 0; i < cl->k8s->nvolumes; i++) {
        size_t n = strlen(cl->k8s->volumes[i].mount);
        if (strncmp(path, cl->k8s->volumes[i].mount, n) == 0 && (path[n] == '/' || path[n] == 0)) return;
    }
    Diag *g = diag_error(c->d, at, "%s '%s' is on no volume of cluster '%s'", what, path, cl->name);
    diag_note(g, "the slurmd pods see only what the cluster's kubernetes block mounts (its 'volumes')");
    diag_help(g, "add volumes = [pvc \"CLAIM\" at \"/MOUNT\"] with a mount path above it");
}

static void check_k8s_paths(Checker *c, const PlanJob *j)
{
    const PlanCluster *cl = j->cluster;
    const PlanTrain *t = j->run;
    if (!cl || !cl->k8s || !t) return;
    if (t->model && !t->model->from_scratch) check_k8s_path(c, cl, "model path", t->model->path, t->model->path_at);
    if (t->model && t->model->tokenizer && (!t->model->path || strcmp(t->model->tokenizer, t->model->path) != 0))
        check_k8s_path(c, cl, "tokenizer", t->model->tokenizer, t->model->tokenizer_at);
    for (int i = 0; i < t->ndata; i++)
        if (t->data[i]) check_k8s_path(c, cl, "data file", t->data[i]->file, t->data[i]->file_at);
    for (int i = 0; i < t->neval_data; i++)
        if (t->eval_data[i]) check_k8s_path(c, cl, "data file", t->eval_data[i]->file, t->eval_data[i]->file_at);
    check_k8s_path(c, cl, "output directory", t->output_dir, t->output_at);
    if (cl->k8s->partition_max_seconds > 0 && j->time_seconds > cl->k8s->partition_max_seconds) {
        Diag *g = diag_error(c->d, j->time_at, "the job's time is more than partition '%s' allows (partition_max_time of cluster '%s')",
                             cl->partition ? cl->partition : "?", cl->name);
        diag_note(g, "partition_max_time at %s:%d: Slurm refuses a job whose --time exceeds the partition's MaxTime",
                  cl->k8s->partition_max_at.start.file, cl->k8s->partition_max_at.start.line);
    }
}

static void check_cluster(Checker *c, const Item *it, PlanCluster *cl)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, cluster_keys, NUNITS(cluster_keys));
    Entry *e;
    if ((e = require(c, &s, "partition", "\"gpu\""))) {
        cl->partition_at = e->at;
        if (get_string(c, e, &cl->partition)) {
            bool ok = cl->partition[0] != 0;
            for (const char *p = cl->partition; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.')) ok = false;
            if (!ok) diag_error(c->d, e->value->at, "partition name must be letters, digits, '_', '-' or '.'");
        }
    }
    if ((e = require(c, &s, "nodes", "hgx[001-032]")) && want_terms(c, e, 1, "a hostlist")) {
        const Term *t = e->value->terms[0];
        cl->hostlist_at = t->at;
        if (t->kind == TERM_INT) {   /* a minimal cluster: a node count, the admin's slurm.conf has the rest */
            cl->minimal = true;
            if (t->overflow || t->ival < 1 || t->ival > HOSTLIST_MAX_HOSTS)
                diag_error(c->d, t->at, "'nodes' must be a hostlist or a node count from 1 to %d", HOSTLIST_MAX_HOSTS);
            else cl->nhosts = (int)t->ival;
        } else if (t->kind == TERM_HOSTLIST || t->kind == TERM_IDENT || t->kind == TERM_STRING) {
            const char *err = NULL;
            int n = hostlist_expand(c->a, t->str, &cl->hosts, &err);
            if (n < 0) diag_error(c->d, t->at, "%s", err);
            else { cl->hostlist = t->str; cl->nhosts = n; }
        } else {
            Diag *g = diag_error(c->d, t->at, "'nodes' must be a hostlist, found %s", term_desc(c, t));
            diag_help(g, "for example: nodes = hgx[001-032]");
        }
    }
    if ((e = require(c, &s, "gpu", "H100_80GB x 8")) && e->value) {
        const Value *v = e->value;
        const Term *t = v->terms[0];
        cl->gpu_at = v->at;
        const char *names[32];
        int n = gpu_catalog_count();
        for (int i = 0; i < n && i < 32; i++) names[i] = gpu_catalog_at(i)->name;
        const char *count_word = v->nterms >= 2 && v->terms[1]->kind == TERM_IDENT ? v->terms[1]->str : NULL;
        if (t->kind == TERM_IDENT && strcmp(t->str, "none") == 0) {
            if (want_terms(c, e, 1, "'none' alone")) { cl->gpu = NULL; cl->gpus_per_node = 0; }
        } else if (t->kind != TERM_IDENT) {
            Diag *g = diag_error(c->d, t->at, "'gpu' must be a GPU model and count, found %s", term_desc(c, t));
            diag_help(g, "for example: gpu = H100_80GB x 8 (or gpu = none for CPU-only nodes)");
        } else if (!find_gpu(c, t->str, NULL)) {
            for (int i = 0; i < c->nsyms && n < 32; i++)
                if (c->syms[i].kind == K_GPU) names[n++] = c->syms[i].name;
            const char *dym = did_you_mean(t->str, names, n);
            Diag *g = dym ? diag_error(c->d, t->at, "unknown GPU '%s'; did you mean '%s'?", t->str, dym)
                          : diag_error(c->d, t->at, "unknown GPU '%s'", t->str);
            diag_note(g, "known GPUs: %s", join_names(c->a, names, n));
        } else if (v->nterms == 1) {
            Diag *g = diag_error(c->d, t->at, "'gpu' needs a count per node");
            diag_help(g, "write gpu = %s x 8", t->str);
        } else if (count_word && count_word[0] == 'x' && count_word[1] && v->nterms == 2 &&
                   strspn(count_word + 1, "0123456789") == strlen(count_word + 1)) {
            int k = atoi(count_word + 1);
            if (k < 1 || k > 16 || strlen(count_word) > 3) diag_error(c->d, v->terms[1]->at, "GPUs per node must be between 1 and 16");
            else { cl->gpu = find_gpu(c, t->str, &cl->gpu_amd); cl->gpus_per_node = k; }
        } else if (!count_word || strcmp(count_word, "x") != 0) {
            Diag *g = diag_error(c->d, v->terms[1]->at, "expected 'x' and a count after the GPU name");
            diag_help(g, "write gpu = %s x 8", t->str);
        } else if (v->nterms < 3) {
            diag_error(c->d, v->terms[1]->at, "expected a GPU count after 'x'");
        } else if (want_terms(c, e, 3, "a GPU model and count")) {
            const Term *k = v->terms[2];
            if (k->kind != TERM_INT) diag_error(c->d, k->at, "GPU count must be an integer, found %s", term_desc(c, k));
            else if (k->ival < 1 || k->ival > 16) diag_error(c->d, k->at, "GPUs per node must be between 1 and 16, found %s", k->text);
            else { cl->gpu = find_gpu(c, t->str, &cl->gpu_amd); cl->gpus_per_node = (int)k->ival; }
        }
    } else if (e) {
        want_terms(c, e, 1, "a GPU model and count");
    }
    /* A node count instead of a hostlist: CPUs and memory are the admin's, optional. */
    bool minimal = cl->minimal;
    if ((e = minimal ? find(&s, "cpus") : require(c, &s, "cpus", "224"))) {
        cl->cpus_at = e->at; get_int32(c, e, 1, 100000, &cl->cpus);
    }
    if ((e = minimal ? find(&s, "memory") : require(c, &s, "memory", "2 TiB"))) {
        cl->memory_at = e->at;
        if (get_size(c, e, &cl->memory_bytes) && cl->memory_bytes < (1u << 20)) {
            diag_error(c->d, e->value->at, "node memory must be at least 1 MiB");
            cl->memory_bytes = 0;
        }
    }
    check_cluster_fabric(c, &s, cl);
    check_cluster_k8s(c, it, &s, cl);
    check_site(c, it, &s, &cl->site);
    report_missing(c, &s);
    if (minimal && !s.broken) {
        Diag *g = diag_note_at(c->d, cl->hostlist_at, "cluster '%s' is declared by node count: no slurm.conf or "
                               "gres.conf snippet is written, the site's slurm.conf is used as it is", cl->name);
        diag_note(g, "not checked: node names%s%s, and that partition '%s' and GPU GRES '%s' exist as the plan says",
                  cl->cpus ? "" : ", CPUs per node (cpus_per_task defaults to 1)",
                  cl->memory_bytes ? "" : ", memory per node (mem and the host-memory estimate)",
                  cl->partition ? cl->partition : "?",
                  !cl->gpu ? "none" : cl->site.gres == 2 ? "gpu (untyped)" : cl->site.gres == 1 ? cl->site.gres_type
                                                                                               : cl->gpu->gres_type);
    }
}

static const char *const model_keys[] = {"arch", "path", "tokenizer", "init", "layers", "hidden", "heads",
                                         "kv_heads", "head_dim", "ffn", "vocab", "max_context",
                                         "rope_theta", "rms_eps", "tie_embeddings", "experts", "experts_per_token"};

/* model: init = pretrained | scratch, path = "DIR". A pretrained model's
 * config.json, when readable here, is read into cfg: the shape keys may then
 * be left out (taken from it) and must agree with it where written. Returns
 * whether cfg holds it. */
static bool check_model_config(Checker *c, const Item *it, Scope *s, PlanModel *m, ModelFileConfig *cfg)
{
    Entry *e;
    int v;
    bool have_cfg = false;
    if ((e = find(s, "init")) && get_enum(c, e, init_llm_names, INIT_COUNT, &v)) m->from_scratch = v == INIT_SCRATCH;
    Entry *pe = find(s, "path");
    if (pe) { m->path_at = pe->at; m->path = get_plan_path(c, pe, false); }
    char pmsg[PATH_POLICY_MAX + 200];
    if (m->path && path_policy_input_dir(pe->value->terms[0]->str, m->path, pmsg, sizeof pmsg)) {
        diag_error(c->d, pe->value->at, "'path' %s", pmsg);
        m->path = NULL;
    }
    if (!m->from_scratch && m->path) {
        const char *dir = m->path;
        char why[600];
        int rc = model_config_read(dir, cfg, why, (int)sizeof why);
        if (rc == 0) have_cfg = true;
        else if (rc < 0) {
            Diag *g = diag_error(c->d, pe->value->at, "model '%s': %s", it->name ? it->name : "?", why);
            diag_note(g, "llmc-train reads the same file (llama, qwen2 and qwen3 configs as transformers writes them)");
        } else {
            Diag *g = diag_note_at(c->d, pe->value->at, "model '%s': %s/config.json is not readable here (%s)",
                                   it->name ? it->name : "?", dir, why);
            diag_note(g, "not checked: the plan's arch and shape against the model's config.json");
        }
    }
    return have_cfg;
}

/* model: arch = llama | qwen2 | qwen3 (required without a config.json; from
 * its model_type otherwise). pe is the path entry. */
static void check_model_arch(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                             const Entry *pe)
{
    Entry *e;
    int v;
    if ((e = have_cfg ? find(s, "arch") : require(c, s, "arch", arch_llm_names[ARCH_QWEN2]))) {
        m->arch_at = e->at;
        if (get_enum(c, e, arch_llm_names, ARCH_COUNT, &v)) {
            m->arch = (ModelArch)v;
            if (have_cfg && v != cfg->arch) {
                Diag *g = diag_error(c->d, e->value->at, "arch = %s, but %s has model_type \"%s\"", arch_llm_names[v],
                                     cfg->file, arch_llm_names[cfg->arch]);
                diag_help(g, "write arch = %s, or leave it out to take it from config.json", arch_llm_names[cfg->arch]);
            }
        }
    } else if (have_cfg) {
        m->arch = (ModelArch)cfg->arch;
        m->arch_at = pe->at;
    }
}

/* model: tokenizer = "DIR" (default: path). A pretrained model is loaded
 * from path; from scratch, path is optional and the tokenizer must be named. */
static void check_model_tokenizer(Checker *c, const Item *it, Scope *s, PlanModel *m)
{
    Entry *e;
    if (!m->from_scratch) require(c, s, "path", "\"/mnt/data-hps/models/NAME\"");   /* read above */
    char pmsg[PATH_POLICY_MAX + 200];
    if ((e = find(s, "tokenizer"))) {
        m->tokenizer_at = e->at;
        m->tokenizer = get_plan_path(c, e, false);
        if (m->tokenizer && path_policy_input_dir(e->value->terms[0]->str, m->tokenizer, pmsg, sizeof pmsg)) {
            diag_error(c->d, e->value->at, "'tokenizer' %s", pmsg);
            m->tokenizer = NULL;
        }
    }
    else if (m->from_scratch && !find(s, "path") && !s->broken) {
        Diag *g = diag_error(c->d, s->at, "model block '%s' trains from scratch and needs 'tokenizer'", it->name ? it->name : "?");
        diag_help(g, "add 'tokenizer = \"DIR\"' (a directory with tokenizer.json)");
    } else { m->tokenizer = m->path; m->tokenizer_at = m->path_at; }
    /* readable here: the files the trainer's export copies beside the model
     * (llmc-train run refuses the same directory at start) */
    struct stat st;
    if (!m->tokenizer || s->broken || stat(m->tokenizer, &st) != 0 || !S_ISDIR(st.st_mode)) return;
    char f[4200];
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "%s/%s", m->tokenizer, i ? "tokenizer_config.json" : "tokenizer.json");
        if (access(f, R_OK) == 0) return;
    }
    Diag *g = diag_error(c->d, m->tokenizer_at, "model '%s': %s \"%s\" holds neither tokenizer.json nor tokenizer_config.json",
                         it->name ? it->name : "?", m->tokenizer == m->path ? "path" : "tokenizer", m->tokenizer);
    diag_note(g, "the trained model is exported with its tokenizer's files; llmc-train refuses to start without them");
    if (m->tokenizer == m->path) diag_help(g, "name the directory that holds them: tokenizer = \"DIR\"");
}

/* model: the shape, layers, hidden, heads, ffn, vocab, max_context (each
 * required without a config.json, else taken from it and compared), kv_heads
 * (default: heads) and head_dim. Returns whether head_dim was given (or read). */
static bool check_model_shape_keys(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                                   const Entry *pe)
{
    Entry *e;
    struct { const char *key; int *out; SrcRange *at; PlanLimitId lim; const char *ex; int cfg; const char *hf; } ints[] = {
        {"layers", &m->layers, &m->layers_at, PL_MODEL_LAYERS, "80", cfg->layers, "num_hidden_layers"},
        {"hidden", &m->hidden, &m->hidden_at, PL_MODEL_HIDDEN, "8192", cfg->hidden, "hidden_size"},
        {"heads", &m->heads, &m->heads_at, PL_MODEL_HEADS, "64", cfg->heads, "num_attention_heads"},
        {"ffn", &m->ffn, &m->ffn_at, PL_MODEL_FFN, "29568", cfg->ffn, "intermediate_size"},
        {"vocab", &m->vocab, &m->vocab_at, PL_MODEL_VOCAB, "152064", cfg->vocab, "vocab_size"},
        {"max_context", &m->max_context, &m->max_context_at, PL_MODEL_MAX_CONTEXT, "32768", cfg->max_context,
         "max_position_embeddings"},
        {"kv_heads", &m->kv_heads, &m->kv_heads_at, PL_MODEL_KV_HEADS, NULL, cfg->kv_heads, "num_key_value_heads"},
        {"head_dim", &m->head_dim, &m->head_dim_at, PL_MODEL_HEAD_DIM, NULL, cfg->head_dim, "head_dim"},
    };
    bool head_dim_set = false, kv_set = false;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        bool optional = ints[i].ex == NULL;
        e = have_cfg || optional ? find(s, ints[i].key) : require(c, s, ints[i].key, ints[i].ex);
        if (e) {
            *ints[i].at = e->at;
            bool ok = get_int32_lim(c, e, ints[i].lim, ints[i].out);
            if (ok && optional) *(i == 6 ? &kv_set : &head_dim_set) = true;
            if (ok && have_cfg && *ints[i].out != ints[i].cfg) {
                Diag *g = diag_error(c->d, e->value->at, "%s = %d, but %s has %s = %d", ints[i].key, *ints[i].out,
                                     cfg->file, ints[i].hf, ints[i].cfg);
                diag_help(g, "write %s = %d, or leave it out to take it from config.json", ints[i].key, ints[i].cfg);
            }
        } else if (have_cfg) {
            *ints[i].out = ints[i].cfg;
            *ints[i].at = pe->value->at;
            within(c, pe->value->at, ints[i].key, ints[i].lim, ints[i].cfg,
                   arena_printf(c->a, "%d in %s", ints[i].cfg, cfg->file));
            if (optional) *(i == 6 ? &kv_set : &head_dim_set) = true;
        }
    }
    if (!kv_set) { m->kv_heads = m->heads; m->kv_heads_at = m->heads_at; }
    return head_dim_set;
}

/* model: rope_theta, rms_eps (defaults by arch: llama 5e5 and 1e-5, qwen
 * 1e6 and 1e-6), tie_embeddings, each compared with config.json; RoPE
 * scaling in config.json is a warning (llmc-train refuses it). */
static void check_model_numbers(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                                const Entry *pe)
{
    Entry *e;
    /* transformers' config defaults: gemma2 10000 and 1e-6 (tied embedding);
     * mistral and mixtral 1e6 and 1e-5 */
    m->rope_theta = m->arch == ARCH_LLAMA ? 500000.0 : m->arch == ARCH_GEMMA2 ? 10000.0 : 1000000.0;
    m->rms_eps = m->arch == ARCH_LLAMA || m->arch == ARCH_MISTRAL || m->arch == ARCH_MIXTRAL ? 1e-5 : 1e-6;
    m->tie_embeddings = m->arch == ARCH_GEMMA2;
    if (have_cfg) { m->rope_theta = cfg->rope_theta; m->rms_eps = cfg->rms_eps; m->tie_embeddings = cfg->tie_embeddings; }
    struct { const char *key, *hf; double *out; PlanLimitId lim; double cfg; } nums[] = {
        {"rope_theta", "rope_theta", &m->rope_theta, PL_MODEL_ROPE_THETA, cfg->rope_theta},
        {"rms_eps", "rms_norm_eps", &m->rms_eps, PL_MODEL_RMS_EPS, cfg->rms_eps},
    };
    for (int i = 0; i < 2; i++)
        if ((e = find(s, nums[i].key)) && get_number_lim(c, e, nums[i].lim, nums[i].out) && have_cfg &&
            fabs(*nums[i].out - nums[i].cfg) > 1e-9 * fabs(nums[i].cfg)) {
            Diag *g = diag_error(c->d, e->value->at, "%s = %g, but %s has %s = %g", nums[i].key, *nums[i].out,
                                 cfg->file, nums[i].hf, nums[i].cfg);
            diag_help(g, "write %s = %g, or leave it out to take it from config.json", nums[i].key, nums[i].cfg);
        }
    if ((e = find(s, "tie_embeddings")) && get_bool(c, e, &m->tie_embeddings) && have_cfg &&
        m->tie_embeddings != cfg->tie_embeddings)
        diag_error(c->d, e->value->at, "tie_embeddings = %s, but %s has tie_word_embeddings = %s",
                   m->tie_embeddings ? "true" : "false", cfg->file, cfg->tie_embeddings ? "true" : "false");
    if (have_cfg && cfg->rope_scaling[0]) {
        m->rope_scaling = arena_printf(c->a, "%s", cfg->rope_scaling);
        Diag *g = diag_warning(c->d, pe->value->at, "%s asks for RoPE scaling %s, which llmc-train does not implement",
                               cfg->file, cfg->rope_scaling);
        diag_note(g, "llmc-train refuses the model; LLaMA-Factory (backend = llamafactory) applies it");
    }
    m->qkv_bias = m->arch == ARCH_QWEN2;
    m->qk_norm = m->arch == ARCH_QWEN3 || m->arch == ARCH_QWEN3_MOE;
    m->norms_per_layer = m->arch == ARCH_GEMMA2 ? 4 : 2;
}

/* model: experts, experts_per_token — mixtral only (required without a
 * config.json, else taken from it and compared); 1 <= top-k <= experts. */
static void check_model_experts(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                                const Entry *pe)
{
    Entry *e;
    bool moe = m->arch == ARCH_MIXTRAL || m->arch == ARCH_QWEN3_MOE;
    struct { const char *key, *hf, *ex; int *out; SrcRange *at; int cfg; } keys[] = {
        {"experts", m->arch == ARCH_QWEN3_MOE ? "num_experts" : "num_local_experts", "8", &m->experts, &m->experts_at,
         cfg->experts},
        {"experts_per_token", "num_experts_per_tok", "2", &m->experts_per_token, &m->experts_per_token_at,
         cfg->experts_per_token},
    };
    for (int i = 0; i < 2; i++) {
        if (!moe) {
            if ((e = find(s, keys[i].key))) {
                Diag *g = diag_error(c->d, e->key_at, "'%s' is only used by mixture-of-experts models (arch = mixtral, "
                                     "qwen3_moe)", keys[i].key);
                diag_note(g, "arch = %s is a dense model", arch_llm_names[m->arch]);
            }
            continue;
        }
        e = have_cfg ? find(s, keys[i].key) : require(c, s, keys[i].key, keys[i].ex);
        if (e) {
            *keys[i].at = e->at;
            if (get_int32(c, e, 1, 1024, keys[i].out) && have_cfg && *keys[i].out != keys[i].cfg) {
                Diag *g = diag_error(c->d, e->value->at, "%s = %d, but %s has %s = %d", keys[i].key, *keys[i].out,
                                     cfg->file, keys[i].hf, keys[i].cfg);
                diag_help(g, "write %s = %d, or leave it out to take it from config.json", keys[i].key, keys[i].cfg);
            }
        } else if (have_cfg) {
            *keys[i].out = keys[i].cfg;
            *keys[i].at = pe->value->at;
        }
    }
    if (moe && m->experts > 0 && m->experts_per_token > m->experts)
        diag_error(c->d, m->experts_per_token_at, "experts_per_token (%d) must not exceed experts (%d)",
                   m->experts_per_token, m->experts);
}

/* Shape rules: grouped-query heads divide evenly, head_dim = hidden / heads
 * (except qwen3, where it is its own key) and even (rotary embeddings rotate
 * pairs). */
static void check_model_shape_rules(Checker *c, PlanModel *m, bool head_dim_set)
{
    if (m->heads > 0 && m->kv_heads > 0) {
        if (m->kv_heads > m->heads) {
            diag_error(c->d, m->kv_heads_at, "kv_heads (%d) must not exceed heads (%d)", m->kv_heads, m->heads);
        } else if (m->heads % m->kv_heads != 0) {
            Diag *g = diag_error(c->d, m->kv_heads_at, "heads (%d) must be divisible by kv_heads (%d)", m->heads, m->kv_heads);
            diag_note(g, "each key/value head serves a whole group of query heads");
        }
    }
    if (m->hidden > 0 && m->heads > 0) {
        if (!head_dim_set) {
            if (m->hidden % m->heads != 0) {
                Diag *g = diag_error(c->d, m->hidden_at, "hidden (%d) must be divisible by heads (%d)", m->hidden, m->heads);
                diag_help(g, "or set head_dim explicitly (qwen3)");
            } else if (within(c, m->hidden_at, "head_dim", PL_MODEL_HEAD_DIM, m->hidden / m->heads,
                              arena_printf(c->a, "hidden / heads = %d", m->hidden / m->heads))) {
                m->head_dim = m->hidden / m->heads;
                m->head_dim_at = m->hidden_at;
            }
        } else if ((m->arch == ARCH_LLAMA || m->arch == ARCH_QWEN2) && (int64_t)m->head_dim * m->heads != m->hidden) {
            Diag *g = diag_error(c->d, m->head_dim_at, "head_dim x heads (%d x %d = %lld) must equal hidden (%d) for %s",
                                 m->head_dim, m->heads, (long long)m->head_dim * m->heads, m->hidden, arch_llm_names[m->arch]);
            diag_note(g, "qwen3, mistral, gemma2, mixtral and qwen3_moe have a head_dim independent of hidden; llama and "
                         "qwen2 do not");
        }
        if (m->head_dim > 0 && m->head_dim % 2 != 0)
            diag_error(c->d, m->head_dim_at, "head_dim (%d) must be even for rotary embeddings", m->head_dim);
    }
}

/* model NAME { ... }: config.json (when readable), arch, tokenizer, the
 * shape and the numbers, then the shape rules. */
static void check_model(Checker *c, const Item *it, PlanModel *m)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, model_keys, NUNITS(model_keys));
    ModelFileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    bool have_cfg = check_model_config(c, it, &s, m, &cfg);
    const Entry *pe = find(&s, "path");
    check_model_arch(c, &s, m, &cfg, have_cfg, pe);
    check_model_tokenizer(c, it, &s, m);
    bool head_dim_set = check_model_shape_keys(c, &s, m, &cfg, have_cfg, pe);
    check_model_numbers(c, &s, m, &cfg, have_cfg, pe);
    check_model_experts(c, &s, m, &cfg, have_cfg, pe);
    report_missing(c, &s);
    check_model_shape_rules(c, m, head_dim_set);
}

static const char *const dataset_keys[] = {"file", "format", "columns", "tags", "ranking", "samples", "size", "tokens",
                                           "hf_hub"};
static const char *const column_keys[] = {"prompt", "query", "response", "history", "messages",
                                          "system", "tools", "text", "chosen", "rejected", "kto_tag"};
static const char *const tag_keys[] = {"role", "content", "user", "assistant", "observation", "function", "system"};

/* Fill a columns/tags sub-block; `slots` parallels `keys`. */
static void get_string_table(Checker *c, const Item *it, const Entry *e, const char *const *keys, int nkeys,
                             const char **slots[])
{
    if (!e->sub && e->value) {
        Diag *g = diag_error(c->d, e->value->at, "'%s' is a block of names, not a value", e->key);
        diag_help(g, "write %s { %s = \"...\" }", e->key, keys[0]);
        return;
    }
    Scope s = scope_of(c, it, e->sub, e->nsub, e->key);
    s.at = e->key_at;
    check_keys(c, &s, keys, nkeys);
    for (int k = 0; k < nkeys; k++) {
        Entry *x = find(&s, keys[k]);
        const char *str;
        if (!x || !get_string(c, x, &str)) continue;
        if (!str[0]) { diag_error(c->d, x->value->at, "'%s' must not be empty", x->key); continue; }
        long cc = plan_control_char_at(str);
        if (cc >= 0) {
            Diag *g = diag_error(c->d, x->value->at, "'%s' contains a control character (byte 0x%02x at offset %ld)",
                                 x->key, (unsigned char)str[cc], cc);
            diag_note(g, "names of columns and tags reach dataset_info.json, the trainer's messages and terminals");
        }   /* kept: the rules below need not also call it missing */
        *slots[k] = str;
    }
}

static void check_dataset_block(Checker *c, const Item *it, PlanDataset *ds);

/* ---- data as it is stored (issue 33): a directory of shards, a Hub name,
 * no glob (LLaMA-Factory's data/loader.py reads a file, or every file of a
 * directory, all of one type; a Hub dataset by hf_hub_url). ---- */

/* LLaMA-Factory's FILEEXT2TYPE (extras/constants.py) that llmc plans take. */
static bool dataset_shard_ext_ok(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcmp(dot, ".json") || !strcmp(dot, ".jsonl") || !strcmp(dot, ".parquet"));
}

/* The files of a directory of shards, when readable here: one extension for
 * all (LLaMA-Factory: "File types should be identical"), no subdirectory (it
 * would be passed on as a file), at least one; their sizes summed into the
 * dataset's size when none is stated. */
static void check_dataset_directory(Checker *c, const Entry *e, PlanDataset *ds)
{
    DIR *dir = opendir(ds->file);
    if (!dir) {
        Diag *g = diag_note_at(c->d, e->value->at, "dataset '%s': directory %s is not readable here (%s)", ds->name,
                               ds->file, strerror(errno));
        diag_note(g, "not checked: its shards' types and records");
        return;
    }
    struct dirent *de;
    const char *first_ext = NULL, *first_name = NULL;
    int files = 0;
    uint64_t total = 0;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.') continue;
        char *path = arena_printf(c->a, "%s/%s", ds->file, de->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            Diag *g = diag_error(c->d, e->value->at, "dataset '%s': %s holds a subdirectory '%s'", ds->name, ds->file,
                                 de->d_name);
            diag_note(g, "LLaMA-Factory passes every entry of the directory on as a data file");
            closedir(dir);
            return;
        }
        const char *dot = strrchr(de->d_name, '.');
        if (!dataset_shard_ext_ok(de->d_name)) {
            Diag *g = diag_error(c->d, e->value->at, "dataset '%s': shard '%s' in %s is not .json, .jsonl or .parquet",
                                 ds->name, de->d_name, ds->file);
            diag_note(g, "LLaMA-Factory reads every file of the directory, all of one type");
            closedir(dir);
            return;
        }
        if (!first_ext) { first_ext = arena_strdup(c->a, dot); first_name = arena_strdup(c->a, de->d_name); }
        else if (strcmp(first_ext, dot)) {
            Diag *g = diag_error(c->d, e->value->at, "dataset '%s': %s mixes shard types ('%s' and '%s')", ds->name,
                                 ds->file, first_name, de->d_name);
            diag_note(g, "LLaMA-Factory refuses a directory whose files differ in type (\"File types should be identical\")");
            closedir(dir);
            return;
        }
        files++;
        total += (uint64_t)st.st_size;
    }
    closedir(dir);
    if (files == 0) {
        diag_error(c->d, e->value->at, "dataset '%s': directory %s holds no data files", ds->name, ds->file);
        return;
    }
    if (!ds->size_bytes) ds->size_bytes = total;
}

/* file = "...": a directory of shards (trailing '/') or a glob (refused).
 * Returns true when the entry was handled here (directory or error). */
static bool check_dataset_file_kind(Checker *c, const Entry *e, PlanDataset *ds)
{
    const char *raw;
    if (!e->value || e->value->nterms != 1 || e->value->terms[0]->kind != TERM_STRING) return false;
    raw = e->value->terms[0]->str;
    if (raw && strpbrk(raw, "*?[")) {
        Diag *g = diag_error(c->d, e->value->at, "dataset '%s': file \"%s\" is a pattern, which LLaMA-Factory cannot "
                             "read", ds->name, raw);
        diag_note(g, "LLaMA-Factory's loader takes one file, or a directory whose every file it reads (all of one type)");
        diag_help(g, "put the shards in one directory and write file = \"DIR/\"");
        return true;
    }
    size_t n = raw ? strlen(raw) : 0;
    if (n < 2 || raw[n - 1] != '/') return false;
    ds->directory = true;
    ds->file = get_plan_path(c, e, false);
    if (ds->file) check_dataset_directory(c, e, ds);
    return true;
}

/* hf_hub = "ORG/NAME": a dataset on the Hugging Face Hub (dataset_info.json's
 * hf_hub_url), instead of file. */
static void check_dataset_hub(Checker *c, Scope *s, const Entry *hub, PlanDataset *ds)
{
    Entry *f = find(s, "file");
    if (f) {
        Diag *g = diag_error(c->d, f->key_at, "dataset '%s' names both 'file' and 'hf_hub'", ds->name);
        diag_help(g, "keep one: a local file or directory, or a Hub dataset");
    }
    const char *name;
    if (!get_string(c, hub, &name)) return;
    ds->hf_hub_at = hub->at;
    const char *slash = strchr(name, '/');
    bool ok = slash && slash != name && slash[1] && !strchr(slash + 1, '/');
    for (const char *p = name; ok && *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr("._-/", *p))) ok = false;
    if (!ok) {
        Diag *g = diag_error(c->d, hub->value->at, "'hf_hub' must be a Hub dataset name \"ORG/NAME\", found \"%s\"", name);
        diag_note(g, "letters, digits, '.', '_' and '-', one '/' (as huggingface.co/datasets/ORG/NAME)");
        return;
    }
    ds->hf_hub = name;
}

/* A dataset block, then (when the block itself is right) the first records of
 * its file where it is readable here (model_files.c). */
static void check_dataset(Checker *c, const Item *it, PlanDataset *ds)
{
    int before = diags_error_count(c->d);
    check_dataset_block(c, it, ds);
    if (diags_error_count(c->d) == before && ds->file && !ds->directory) dataset_check_records(ds, c->d);
}

static void check_dataset_block(Checker *c, const Item *it, PlanDataset *ds)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, dataset_keys, NUNITS(dataset_keys));
    Entry *e;
    int v;
    ds->samples = -1;
    ds->tokens = -1;
    Entry *hub = find(&s, "hf_hub");
    if (hub) check_dataset_hub(c, &s, hub, ds);
    else if ((e = require(c, &s, "file", "\"/mnt/data-hps/data/NAME.json\""))) {
        ds->file_at = e->at;
        if (!check_dataset_file_kind(c, e, ds)) ds->file = get_plan_path(c, e, true);
        if (ds->file && !ds->directory) {
            const char *dot = strrchr(ds->file, '.');
            const char *slash = strrchr(ds->file, '/');
            if (!dot || (slash && dot < slash) ||
                (strcmp(dot, ".json") && strcmp(dot, ".jsonl") && strcmp(dot, ".parquet"))) {
                Diag *g = diag_error(c->d, e->value->at, "dataset file must end in .json, .jsonl or .parquet");
                diag_note(g, "these are the formats LLaMA-Factory and llmc-train read");
            }
        }
    }
    bool format_ok = false;
    if ((e = require(c, &s, "format", format_llm_names[FORMAT_SHAREGPT]))) {
        ds->format_at = e->at;
        if (get_enum(c, e, format_llm_names, FORMAT_COUNT, &v)) { ds->format = (DataFormat)v; format_ok = true; }
    }
    if ((e = find(&s, "ranking"))) get_bool(c, e, &ds->ranking);
    const char **col_slots[] = {&ds->columns.prompt, &ds->columns.query, &ds->columns.response,
                                &ds->columns.history, &ds->columns.messages, &ds->columns.system,
                                &ds->columns.tools, &ds->columns.text, &ds->columns.chosen,
                                &ds->columns.rejected, &ds->columns.kto_tag};
    const char **tag_slots[] = {&ds->tags.role, &ds->tags.content, &ds->tags.user, &ds->tags.assistant,
                                &ds->tags.observation, &ds->tags.function, &ds->tags.system};
    Entry *cols = find(&s, "columns"), *tags = find(&s, "tags");
    if (cols) { ds->columns_at = cols->at; get_string_table(c, it, cols, column_keys, NUNITS(column_keys), col_slots); }
    if (tags) { ds->tags_at = tags->at; get_string_table(c, it, tags, tag_keys, NUNITS(tag_keys), tag_slots); }
    if ((e = find(&s, "samples"))) { ds->samples_at = e->at; get_int_lim(c, e, PL_DATASET_SAMPLES, &ds->samples); }
    if ((e = find(&s, "size")) && get_size(c, e, &ds->size_bytes)) {
        ds->size_at = e->at;
        if (!within(c, e->value->at, "size", PL_DATASET_SIZE, (double)ds->size_bytes,
                    arena_printf(c->a, "%llu bytes", (unsigned long long)ds->size_bytes)))
            ds->size_bytes = 0;
    }
    if ((e = find(&s, "tokens"))) { ds->tokens_at = e->at; get_int_lim(c, e, PL_DATASET_TOKENS, &ds->tokens); }
    report_missing(c, &s);

    if (!format_ok) return;
    /* LLaMA-Factory's rules for which columns and tags each format uses. */
    const char *fmt = format_llm_names[ds->format];
    SrcRange cat = cols ? cols->key_at : ds->format_at;
    const DatasetColumns *co = &ds->columns;
    struct { const char *name, *val; bool alpaca, sharegpt, text; } use[] = {
        {"prompt", co->prompt, 1, 0, 0}, {"query", co->query, 1, 0, 0}, {"response", co->response, 1, 0, 0},
        {"history", co->history, 1, 0, 0}, {"messages", co->messages, 0, 1, 0}, {"system", co->system, 1, 1, 0},
        {"tools", co->tools, 1, 1, 0}, {"text", co->text, 0, 0, 1}, {"chosen", co->chosen, 1, 1, 0},
        {"rejected", co->rejected, 1, 1, 0}, {"kto_tag", co->kto_tag, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof use / sizeof use[0]; i++) {
        if (!use[i].val) continue;
        bool ok = ds->format == FORMAT_ALPACA ? use[i].alpaca : ds->format == FORMAT_SHAREGPT ? use[i].sharegpt : use[i].text;
        Entry *x = NULL;
        for (int k = 0; cols && k < cols->nsub; k++)
            if (strcmp(cols->sub[k]->key, use[i].name) == 0) { x = cols->sub[k]; break; }
        SrcRange at = x ? x->key_at : cat;
        if (!ok) {
            Diag *g = diag_error(c->d, at, "column '%s' is not used by %s datasets", use[i].name, fmt);
            diag_note(g, ds->format == FORMAT_ALPACA ? "alpaca columns: prompt, query, response, history, system, tools"
                         : ds->format == FORMAT_SHAREGPT ? "sharegpt columns: messages, system, tools"
                                                         : "text columns: text");
        } else if ((i == 8 || i == 9) && !ds->ranking) {
            Diag *g = diag_error(c->d, at, "column '%s' is only used by ranking datasets", use[i].name);
            diag_help(g, "add 'ranking = true' for preference data");
        } else if (i == 10 && ds->ranking) {
            Diag *g = diag_error(c->d, at, "column 'kto_tag' is not used by ranking datasets");
            diag_note(g, "KTO data holds one answer per example and a true/false label (kto_tag), not pairs");
        }
    }
    Diag *g;
    switch (ds->format) {
    case FORMAT_SHAREGPT:
        if (!co->messages) {
            g = diag_error(c->d, cat, "sharegpt dataset '%s' needs columns { messages = \"...\" }", ds->name);
            diag_note(g, "the column that holds the list of turns (LLaMA-Factory: \"conversations\" by default)");
        }
        if (!ds->tags.role || !ds->tags.content) {
            g = diag_error(c->d, tags ? tags->key_at : ds->format_at,
                           "sharegpt dataset '%s' needs tags { role = \"...\" content = \"...\" }", ds->name);
            diag_note(g, "the keys of each turn that hold the speaker and the text");
        }
        break;
    case FORMAT_ALPACA:
        if (!co->prompt) {
            g = diag_error(c->d, cat, "alpaca dataset '%s' needs columns { prompt = \"...\" }", ds->name);
            diag_note(g, "the column with the instruction (LLaMA-Factory: \"instruction\")");
        }
        if (!ds->ranking && !co->response) {
            g = diag_error(c->d, cat, "alpaca dataset '%s' needs columns { response = \"...\" }", ds->name);
            diag_note(g, "the column with the answer (LLaMA-Factory: \"output\")");
        }
        break;
    case FORMAT_TEXT:
        if (!co->text) diag_error(c->d, cat, "text dataset '%s' needs columns { text = \"...\" }", ds->name);
        if (ds->ranking) diag_error(c->d, find(&s, "ranking")->value->at, "text datasets cannot be ranking datasets");
        break;
    }
    if (ds->ranking && ds->format != FORMAT_TEXT && (!co->chosen || !co->rejected)) {
        g = diag_error(c->d, cat, "ranking dataset '%s' needs columns { chosen = \"...\" rejected = \"...\" }", ds->name);
        diag_note(g, "preference data holds a preferred and a rejected answer per example");
    }
    if (tags && ds->format != FORMAT_SHAREGPT) {
        g = diag_error(c->d, tags->key_at, "tags are only used by sharegpt datasets, not %s", fmt);
        diag_help(g, "remove the tags block, or set format = sharegpt");
    }
}

static const char *const train_keys[] = {
    "stage", "model", "data", "template", "context", "epochs", "max_steps", "batch", "grad_accum", "lr",
    "min_lr", "schedule", "warmup", "weight_decay", "betas", "eps", "grad_clip", "seed", "precision",
    "shard", "recompute", "attention", "deterministic", "packing", "train_on_prompt", "mask_history", "bad_records", "mfu",
    "bytes_per_token", "backend", "output", "checkpoint_every", "checkpoint_keep",
    /* LLaMA-Factory-only keys (docs/language.md, "train NAME") */
    "method", "lora_rank", "lora_alpha", "lora_dropout", "lora_target", "dora", "rslora", "freeze_layers",
    "quant_bits", "quant_method", "offload", "pref_loss", "pref_beta", "pref_ftx", "ref_model",
    "val_size", "eval_data", "eval_every", "eval_batch", "tokenized_path", "data_shared_fs", "streaming",
    "ddp_timeout", "report_to", "run_name", "log_every",
    /* LLaMA-Factory run-time keys of issue 33 (check_train_lf_extras) */
    "tokenize_rate", "mix_strategy", "interleave_probs", "max_samples", "optim", "liger_kernel", "neat_packing",
    "wsd_decay"};
_Static_assert(sizeof train_keys / sizeof train_keys[0] <= 128, "check_keys' MAX_BLOCK_KEYS");
static const char *const pref_loss_names[] = {"sigmoid", "hinge", "ipo", "kto_pair", "orpo", "simpo"};
static const char *const quant_method_names[] = {"bnb", "hqq", "eetq"};
static const char *const report_names[] = {"none", "tensorboard", "wandb"};

/* `data = [a, b]` or `data = a`: distinct dataset references. */
static void get_dataset_list(Checker *c, const Entry *e, PlanDataset ***out, int *nout)
{
    if (!want_terms(c, e, 1, "a list of dataset names")) return;
    const Term *x = e->value->terms[0];
    PtrVec list = {0};
    if (x->kind == TERM_LIST) {
        if (x->nitems == 0) diag_error(c->d, x->at, "'%s' needs at least one dataset", e->key);
        for (int i = 0; i < x->nitems; i++) {
            const Value *iv = x->items[i];
            if (iv->nterms != 1) {
                diag_error(c->d, iv->terms[1]->at, "unexpected %s in the list of datasets", term_desc(c, iv->terms[1]));
                continue;
            }
            PlanDataset *ds = resolve_ref(c, e, iv->terms[0], K_DATASET);
            if (!ds) continue;
            bool dup = false;
            for (int k = 0; k < list.n; k++) dup |= list.items[k] == ds;
            if (dup) diag_error(c->d, iv->at, "dataset '%s' is listed twice", ds->name);
            else ptrvec_push(c->a, &list, ds);
        }
    } else {
        PlanDataset *ds = resolve_ref(c, e, x, K_DATASET);
        if (ds) ptrvec_push(c->a, &list, ds);
    }
    *out = (PlanDataset **)list.items;
    *nout = list.n;
}

/* ---- the LLaMA-Factory-only keys of a train block ---- */

/* What data a stage trains on (LLaMA-Factory's processors: pretrain reads text,
 * supervised and feedback (kto) one answer per example, pairwise (rm, dpo)
 * a chosen and a rejected answer). */
static void check_stage_data(Checker *c, const PlanTrain *t, const PlanDataset *ds, SrcRange at)
{
    const char *st = stage_llm_names[t->stage];
    Diag *g;
    if (t->stage == STAGE_PT) {
        if (ds->format != FORMAT_TEXT) {
            g = diag_error(c->d, at, "pre-training (pt) needs text data, but dataset '%s' is %s", ds->name, format_llm_names[ds->format]);
            diag_help(g, "use a dataset with format = text, or stage = sft");
        }
        return;
    }
    if (ds->format == FORMAT_TEXT) {
        g = diag_error(c->d, at, "%s needs conversations, but dataset '%s' is text", st, ds->name);
        diag_help(g, "use an alpaca or sharegpt dataset, or stage = pt");
        return;
    }
    bool pairs = t->stage == STAGE_RM || t->stage == STAGE_DPO;
    if (pairs && !ds->ranking) {
        g = diag_error(c->d, at, "stage %s needs ranking data, but dataset '%s' is not a ranking dataset", st, ds->name);
        diag_note(g, "%s learns from pairs: a chosen and a rejected answer to each prompt", st);
        diag_help(g, "set 'ranking = true' and columns { chosen = \"...\" rejected = \"...\" } in dataset '%s'", ds->name);
    } else if (!pairs && ds->ranking) {
        g = diag_error(c->d, at, "dataset '%s' is a ranking dataset; stage %s cannot train on it", ds->name, st);
        diag_note(g, "ranking data (chosen/rejected pairs) is for stage = rm or stage = dpo");
    } else if (t->stage == STAGE_KTO && !ds->columns.kto_tag) {
        g = diag_error(c->d, at, "stage kto needs a kto tag, but dataset '%s' has no columns { kto_tag = \"...\" }", ds->name);
        diag_note(g, "KTO learns from single answers labelled desirable (true) or undesirable (false)");
    } else if (t->stage != STAGE_KTO && ds->columns.kto_tag) {
        g = diag_warning(c->d, ds->columns_at, "column 'kto_tag' of dataset '%s' is ignored by stage %s", ds->name, st);
        diag_note(g, "only stage = kto reads it");
    }
}

static bool get_steps(Checker *c, const Entry *e, int64_t *out)
{
    const Value *v = e->value;
    if (v && (is_count_of(v, "steps") || (v->nterms == 1 && v->terms[0]->kind == TERM_INT))) {
        const Term *n = v->terms[0];
        if (n->overflow || n->ival < 1) { diag_error(c->d, v->at, "'%s' must be at least 1 step", e->key); return false; }
        if (!within(c, n->at, e->key, PL_CKPT_EVERY_STEPS, (double)n->ival, n->text)) return false;
        *out = n->ival;
        return true;
    }
    if (!v) return want_terms(c, e, 2, "a step count");
    Diag *g = diag_error(c->d, v->at, "'%s' must be a step count, found %s", e->key, value_desc(c, v));
    diag_help(g, "for example: %s = 100 steps", e->key);
    return false;
}

/* train: lora_target = all | [MODULE, ...], the linear layers of the
 * model (q_proj ... down_proj), each once. */
static void check_train_lora_target(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, "lora_target")) && want_terms(c, e, 1, "'all' or a list of module names")) {
        const Term *x = e->value->terms[0];
        if (x->kind == TERM_IDENT && strcmp(x->str, "all") == 0) {
            t->lora_target = NULL;
            t->nlora_target = 0;
        } else if (x->kind != TERM_LIST || x->nitems == 0) {
            Diag *g = diag_error(c->d, x->at, "'lora_target' must be 'all' or a list of module names, found %s", term_desc(c, x));
            diag_help(g, "for example: lora_target = [q_proj, v_proj]");
        } else {
            const char **names = arena_alloc(c->a, sizeof(char *) * (size_t)x->nitems);
            int n = 0;
            for (int i = 0; i < x->nitems; i++) {
                const Value *iv = x->items[i];
                const Term *m = iv->terms[0];
                if (iv->nterms != 1 || (m->kind != TERM_IDENT && m->kind != TERM_STRING)) {
                    diag_error(c->d, iv->at, "'lora_target' takes module names, found %s", value_desc(c, iv));
                    continue;
                }
                bool known = false, dup = false;
                for (int k = 0; k < LORA_TARGETS; k++) known |= strcmp(m->str, lora_module_llm_names[k]) == 0;
                for (int k = 0; k < n; k++) dup |= strcmp(names[k], m->str) == 0;
                if (!known) {
                    const char *dym = did_you_mean(m->str, lora_module_llm_names, LORA_TARGETS);
                    Diag *g = dym ? diag_error(c->d, m->at, "unknown module '%s' for lora_target; did you mean '%s'?", m->str, dym)
                                  : diag_error(c->d, m->at, "unknown module '%s' for lora_target", m->str);
                    diag_note(g, "the linear layers of %s models: %s",
                              t->model ? arch_llm_names[t->model->arch] : "llama/qwen", join_names(c->a, lora_module_llm_names, LORA_TARGETS));
                } else if (dup) {
                    diag_error(c->d, m->at, "module '%s' is listed twice", m->str);
                } else {
                    names[n++] = m->str;
                }
            }
            t->lora_target = names;
            t->nlora_target = n;
        }
    }
}

/* train: val_size = PERCENT (of the data, above 0 and below 100) | INT
 * (samples held out). */
static void check_train_val_size(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, "val_size")) && e->value) {
        t->val_at = e->at;
        if (is_percent(e->value)) {
            double f;
            if (get_percent(c, e, 100, &f)) {
                if (f <= 0 || f >= 1) diag_error(c->d, e->value->at, "'val_size' as a percentage must be above 0%% and below 100%%");
                else t->val_size = f;
            }
        } else {
            int64_t n;
            if (get_int(c, e, 1, (int64_t)1 << 40, &n)) t->val_size = (double)n;
        }
    } else if (e) {
        want_terms(c, e, 1, "a percentage or a sample count");
    }
}

/* train: eval_batch = INT per gpu (as batch). */
static void check_train_eval_batch(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, "eval_batch")) && e->value) {
        const Value *bv = e->value;
        if (bv->nterms == 3 && bv->terms[0]->kind == TERM_INT && bv->terms[1]->kind == TERM_IDENT &&
            strcmp(bv->terms[1]->str, "per") == 0 && bv->terms[2]->kind == TERM_IDENT && strcmp(bv->terms[2]->str, "gpu") == 0) {
            const PlanLimit *l = plan_limit(PL_TRAIN_MICRO_BATCH);
            if (bv->terms[0]->overflow || plan_limit_violation(l, (double)bv->terms[0]->ival))
                diag_error(c->d, bv->terms[0]->at, "'eval_batch' must be between %.0f and %.0f per gpu, found %s",
                           l->min, l->max, bv->terms[0]->text);
            else
                t->eval_batch = (int)bv->terms[0]->ival;
        } else {
            Diag *g = diag_error(c->d, bv->at, "'eval_batch' must be a count per gpu, found %s", value_desc(c, bv));
            diag_help(g, "for example: eval_batch = 8 per gpu");
        }
    } else if (e) {
        want_terms(c, e, 3, "a count per gpu");
    }
}

/* train: the keys LLaMA-Factory reads beside the llmc trainer's: method and
 * its LoRA/freeze/quantization settings, offload, preference training,
 * evaluation, data loading, the DDP timeout and reporting. Defaults as
 * LLaMA-Factory's (lora_rank 8, lora_alpha 2 x rank, freeze_layers 2,
 * pref_beta 0.1, ddp_timeout 30 min). */
static void check_train_lf_keys(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    int v;
    t->method = METHOD_FULL;
    if ((e = find(s, "method"))) { t->method_at = e->at; if (get_enum(c, e, method_llm_names, METHOD_COUNT, &v)) t->method = (FinetuneMethod)v; }
    t->lora_rank = 8;
    t->quant_bits = t->method == METHOD_QLORA ? 4 : 0;
    t->freeze_layers = 2;
    if ((e = find(s, "lora_rank"))) get_int32(c, e, 1, 4096, &t->lora_rank);
    t->lora_alpha = 2 * t->lora_rank;
    if ((e = find(s, "lora_alpha"))) get_int32(c, e, 1, 1 << 20, &t->lora_alpha);
    if ((e = find(s, "lora_dropout"))) {
        double x;
        if (get_number(c, e, 0, false, 1, &x)) {
            if (x >= 1) diag_error(c->d, e->value->at, "'lora_dropout' must be below 1, found %s", e->value->terms[0]->text);
            else t->lora_dropout = x;
        }
    }
    check_train_lora_target(c, s, t);
    if ((e = find(s, "dora"))) get_bool(c, e, &t->use_dora);
    if ((e = find(s, "rslora"))) get_bool(c, e, &t->use_rslora);
    if ((e = find(s, "freeze_layers")) && get_int32(c, e, -1000, 1000, &t->freeze_layers)) {
        if (t->freeze_layers == 0)
            diag_error(c->d, e->value->at, "'freeze_layers' must not be 0 (the number of trainable layers: N last, -N first)");
        else if (t->model && t->model->layers > 0 && abs(t->freeze_layers) > t->model->layers)
            diag_error(c->d, e->value->at, "'freeze_layers' (%d) is more than the %d layers of model '%s'",
                       t->freeze_layers, t->model->layers, t->model->name);
    }
    if ((e = find(s, "quant_bits")) && get_int32(c, e, 1, 64, &t->quant_bits) && t->quant_bits != 4 && t->quant_bits != 8) {
        diag_error(c->d, e->value->at, "'quant_bits' must be 4 or 8, found %d", t->quant_bits);
        t->quant_bits = 4;
    }
    if ((e = find(s, "quant_method")) && get_enum(c, e, quant_method_names, 3, &v)) t->quant_method = (QuantMethod)v;
    if ((e = find(s, "offload"))) { t->offload_at = e->at; if (get_enum(c, e, offload_llm_names, OFFLOAD_COUNT, &v)) t->offload = (OffloadKind)v; }
    t->pref_beta = 0.1;
    if ((e = find(s, "pref_loss"))) { t->pref_loss_at = e->at; if (get_enum(c, e, pref_loss_names, 6, &v)) t->pref_loss = (PrefLoss)v; }
    if ((e = find(s, "pref_beta"))) get_number(c, e, 0, true, 1000, &t->pref_beta);
    if ((e = find(s, "pref_ftx"))) get_number(c, e, 0, false, 1000, &t->pref_ftx);
    if ((e = find(s, "ref_model"))) { t->ref_model_at = e->at; t->ref_model = get_ref(c, e, K_MODEL); }
    check_train_val_size(c, s, t);
    if ((e = find(s, "eval_data"))) { t->eval_data_at = e->at; get_dataset_list(c, e, &t->eval_data, &t->neval_data); }
    if ((e = find(s, "eval_every"))) { t->eval_every_at = e->at; get_steps(c, e, &t->eval_every_steps); }
    check_train_eval_batch(c, s, t);
    if ((e = find(s, "tokenized_path"))) { t->tokenized_at = e->at; t->tokenized_path = get_plan_path(c, e, false); }
    t->data_shared_fs = true;
    if ((e = find(s, "data_shared_fs"))) get_bool(c, e, &t->data_shared_fs);
    if ((e = find(s, "streaming"))) { t->streaming_at = e->at; get_bool(c, e, &t->streaming); }
    t->ddp_timeout_seconds = 1800;
    if ((e = find(s, "ddp_timeout"))) {
        t->ddp_timeout_at = e->at;
        double secs;
        if (get_duration(c, e, &secs)) {
            if (secs < 60) diag_error(c->d, e->value->at, "'ddp_timeout' must be at least 1 min (loading a large model takes longer)");
            else if (secs > 86400) diag_error(c->d, e->value->at, "'ddp_timeout' must be at most 1 d: a hung collective must end the job");
            else t->ddp_timeout_seconds = secs;
        }
    }
    if ((e = find(s, "report_to")) && get_enum(c, e, report_names, 3, &v)) t->report_to = (ReportTo)v;
    if ((e = find(s, "run_name")) && get_string(c, e, &t->run_name)) {
        if (!t->run_name[0] || plan_control_char_at(t->run_name) >= 0) {
            diag_error(c->d, e->value->at, "'run_name' must be non-empty text without control characters");
            t->run_name = NULL;
        }
    }
    t->log_every = 1;
    if ((e = find(s, "log_every"))) get_steps(c, e, &t->log_every);
}

/* The first LLaMA-Factory-only key the plan sets, for the llmc backend's refusal. */
static const char *const lf_only_keys[] = {
    "lora_rank", "lora_alpha", "lora_dropout", "lora_target", "dora", "rslora", "freeze_layers", "quant_bits",
    "quant_method", "pref_loss", "pref_beta", "pref_ftx", "ref_model", "val_size", "eval_data",
    "eval_every", "eval_batch", "tokenized_path", "data_shared_fs", "streaming", "ddp_timeout", "report_to",
    "run_name", "tokenize_rate", "mix_strategy", "interleave_probs", "max_samples", "optim", "liger_kernel",
    "neat_packing", "wsd_decay"};   /* log_every: both backends (plan.json output.log_every) */

/* backend = llmc: the llmc trainer does pt and sft, full, freeze or LoRA
 * (the backends' limits are contract/backend_caps.h, checked with the job), and
 * reads no other LLaMA-Factory key; a LoRA or freeze key needs its method. */
static void check_train_llmc_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    static const char *const llmc_ft_keys[] = {"lora_rank", "lora_alpha", "lora_dropout", "lora_target", "rslora",
                                               "freeze_layers"};
    const char *what = NULL;
    SrcRange at = t->at;
    Entry *sched = find(s, "schedule"), *ck = find(s, "checkpoint_every");
    if (t->method == METHOD_QLORA) { what = "method = qlora"; at = t->method_at; }
    else if (t->stage > STAGE_SFT) { what = arena_printf(c->a, "stage = %s", stage_llm_names[t->stage]); at = t->stage_at; }
    else if (t->schedule == SCHED_WSD && sched) { what = "schedule = wsd"; at = sched->value->at; }
    else if (t->checkpoint_epoch && ck) { what = "checkpoint_every = epoch"; at = ck->value->at; }
    else {
        for (int k = 0; k < NUNITS(lf_only_keys) && !what; k++) {
            bool ft_key = false;
            for (int j = 0; j < NUNITS(llmc_ft_keys); j++) ft_key |= !strcmp(lf_only_keys[k], llmc_ft_keys[j]);
            if (ft_key) continue;   /* their method is checked below */
            if ((e = find(s, lf_only_keys[k]))) { what = lf_only_keys[k]; at = e->key_at; }
        }
    }
    if (what) {
        g = diag_error(c->d, at, "%s is not implemented by the llmc trainer yet", what);
        diag_note(g, "run '%s' uses backend = llmc%s; the llmc trainer does pt and sft with method = full, "
                  "freeze or lora", t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s' (LLaMA-Factory runs it)", t->name);
        return;
    }
    if (t->method == METHOD_LORA && t->lora_dropout > 0) {
        e = find(s, "lora_dropout");
        g = diag_error(c->d, e ? e->value->at : t->method_at,
                       "lora_dropout = %g is not implemented by the llmc trainer (its LoRA has no dropout)",
                       t->lora_dropout);
        diag_help(g, "set lora_dropout = 0, or backend = llamafactory in run '%s'", t->name);
    }
    if (t->method == METHOD_FREEZE && !find(s, "freeze_layers") && t->model && t->model->layers > 0 &&
        t->freeze_layers > t->model->layers)
        diag_error(c->d, t->method_at, "method = freeze trains the last %d layers by default, but model '%s' has %d",
                   t->freeze_layers, t->model->name, t->model->layers);
    for (int k = 0; k < NUNITS(llmc_ft_keys); k++) {
        bool freeze_key = k == NUNITS(llmc_ft_keys) - 1;
        if ((e = find(s, llmc_ft_keys[k])) && t->method != (freeze_key ? METHOD_FREEZE : METHOD_LORA)) {
            g = diag_error(c->d, e->key_at, "'%s' is only used with method = %s", e->key, method_llm_names[freeze_key ? METHOD_FREEZE : METHOD_LORA]);
            diag_note(g, "run '%s' uses method = %s", t->name, method_llm_names[t->method]);
        }
    }
}

/* backend = llamafactory: each method's keys only with that method, and
 * the combinations LLaMA-Factory and DeepSpeed load (qlora's quantization,
 * DoRA, offload by ZeRO stage). */
static void check_train_lf_method_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    bool lora = t->method == METHOD_LORA || t->method == METHOD_QLORA;
    static const char *const lora_keys[] = {"lora_rank", "lora_alpha", "lora_dropout", "lora_target", "dora", "rslora"};
    for (int k = 0; k < NUNITS(lora_keys); k++)
        if (!lora && (e = find(s, lora_keys[k]))) {
            g = diag_error(c->d, e->key_at, "'%s' is only used with method = lora or qlora", e->key);
            diag_note(g, "run '%s' uses method = %s", t->name, method_llm_names[t->method]);
        }
    if (t->method != METHOD_FREEZE && (e = find(s, "freeze_layers")))
        diag_error(c->d, e->key_at, "'freeze_layers' is only used with method = freeze");
    if (t->method != METHOD_QLORA && ((e = find(s, "quant_bits")) || (e = find(s, "quant_method")))) {
        g = diag_error(c->d, e->key_at, "'%s' is only used with method = qlora", e->key);
        diag_note(g, "qlora quantises the frozen base model and trains LoRA adapters on it");
    }
    if (t->method == METHOD_QLORA && t->quant_method == QUANT_EETQ && t->quant_bits != 8)
        diag_error(c->d, (e = find(s, "quant_method")) ? e->value->at : t->method_at, "quant_method = eetq quantises to 8 bits only; set quant_bits = 8");
    /* LLaMA-Factory's quantization.py: only bitsandbytes at 4 bits loads
     * under ZeRO-3 (hqq, eetq and 8-bit bnb refuse it); adapter.py: DoRA
     * only on a bitsandbytes-quantised base */
    if (t->method == METHOD_QLORA && t->shard == SHARD_ZERO3 && (t->quant_method != QUANT_BNB || t->quant_bits != 4)) {
        g = diag_error(c->d, t->shard_at, "method = qlora with shard = zero3 needs quant_method = bnb and quant_bits = 4");
        diag_note(g, "LLaMA-Factory loads only a 4-bit bitsandbytes base under DeepSpeed ZeRO-3");
        diag_help(g, "use shard = zero2, or quant_bits = 4 with quant_method = bnb");
    }
    if (t->method == METHOD_QLORA && t->use_dora && t->quant_method != QUANT_BNB) {
        e = find(s, "dora");
        diag_error(c->d, e ? e->key_at : t->at, "dora needs quant_method = bnb (LLaMA-Factory: DoRA is not compatible with %s)",
                   quant_method_names[t->quant_method]);
    }
    if (t->offload != OFFLOAD_NONE) {
        if (t->shard < SHARD_ZERO2 || (t->offload == OFFLOAD_ALL && t->shard != SHARD_ZERO3)) {
            g = diag_error(c->d, t->offload_at, "offload = %s needs shard = %s", offload_llm_names[t->offload],
                           t->offload == OFFLOAD_ALL ? shard_llm_names[SHARD_ZERO3] : "zero2 or zero3");
            diag_note(g, "DeepSpeed offloads optimizer states from ZeRO-2 on and parameters only with ZeRO-3");
        }
    }
}

/* backend = llamafactory: preference keys per stage (pref_loss for dpo;
 * pref_beta, pref_ftx, ref_model for dpo and kto), a reference model only
 * where the loss uses one, with the model's vocabulary. */
static void check_train_lf_pref_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    bool dpo = t->stage == STAGE_DPO, pref = dpo || t->stage == STAGE_KTO;
    if (!dpo && (e = find(s, "pref_loss"))) {
        g = diag_error(c->d, e->key_at, "'pref_loss' is only used with stage = dpo");
        diag_note(g, "orpo and simpo are dpo's pref_loss = orpo / simpo");
    }
    static const char *const pref_keys[] = {"pref_beta", "pref_ftx", "ref_model"};
    for (int k = 0; k < NUNITS(pref_keys); k++)
        if (!pref && (e = find(s, pref_keys[k])))
            diag_error(c->d, e->key_at, "'%s' is only used with stage = dpo or stage = kto", e->key);
    if (dpo && t->ref_model && (t->pref_loss == PREF_ORPO || t->pref_loss == PREF_SIMPO)) {
        g = diag_error(c->d, t->ref_model_at, "pref_loss = %s uses no reference model", pref_loss_names[t->pref_loss]);
        diag_help(g, "remove ref_model");
    }
    if (t->ref_model && t->model && t->ref_model->vocab != t->model->vocab) {
        g = diag_error(c->d, t->ref_model_at, "reference model '%s' has vocab %d, model '%s' has %d",
                       t->ref_model->name, t->ref_model->vocab, t->model->name, t->model->vocab);
        diag_note(g, "both score the same tokens: they must share the tokenizer");
    }
}

/* backend = llamafactory: evaluation (val_size or eval_data, the eval keys
 * only with one) and data loading (streaming for pt with max_steps, the
 * tokenized cache not the output directory). */
static void check_train_lf_eval_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    if (t->val_size > 0 && t->neval_data > 0) {
        g = diag_error(c->d, t->eval_data_at, "set either val_size or eval_data, not both");
        diag_note(g, "val_size holds out part of 'data'; eval_data names separate datasets");
    }
    bool evals = t->val_size > 0 || t->neval_data > 0;
    if (!evals && ((e = find(s, "eval_every")) || (e = find(s, "eval_batch")))) {
        g = diag_error(c->d, e->key_at, "'%s' needs an evaluation set", e->key);
        diag_help(g, "add 'val_size = 5%%' or 'eval_data = [NAME]'");
    }
    if (evals && t->streaming && t->val_size > 0 && t->val_size < 1)
        diag_error(c->d, t->val_at, "with streaming = true, val_size must be a sample count, not a percentage");
    if (t->max_steps > 0 && t->eval_every_steps > t->max_steps)
        diag_warning(c->d, t->eval_every_at, "eval_every (%lld steps) is more than max_steps (%lld): no evaluation runs",
                     (long long)t->eval_every_steps, (long long)t->max_steps);
    /* data */
    if (t->streaming && t->stage != STAGE_PT) {
        g = diag_error(c->d, t->streaming_at, "streaming is for pre-training corpora (stage = pt)");
        diag_note(g, "run '%s' is stage %s", t->name, stage_llm_names[t->stage]);
    } else if (t->streaming && t->max_steps <= 0) {
        g = diag_error(c->d, t->streaming_at, "streaming = true needs max_steps");
        diag_note(g, "a streamed dataset has no length, so epochs cannot decide when the run ends");
    }
    if (t->tokenized_path && t->output_dir && strcmp(t->tokenized_path, t->output_dir) == 0)
        diag_error(c->d, t->tokenized_at, "'tokenized_path' must not be the output directory");
}

/* The rules across the LLaMA-Factory keys, for the backend that reads them. */
/* ---- LLaMA-Factory run-time keys (issue 33; docs/language.md, "train NAME",
 * "Start-up and data") ---- */

/* mix_strategy = concat | interleave_under | interleave_over | interleave_once;
 * interleave_probs = [P, ...]: one per dataset of `data`, each in (0, 1],
 * summing to 1 (datasets' interleave_datasets draws with them), only with an
 * interleave strategy. */
static void check_train_lf_mix(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e, *pe = find(s, "interleave_probs");
    int v;
    if ((e = find(s, "mix_strategy"))) {
        t->mix_at = e->at;
        if (get_enum(c, e, mix_llm_names, MIX_COUNT, &v)) t->mix = (MixStrategy)v;
    }
    if (!pe) return;
    t->interleave_probs_at = pe->at;
    if (t->mix == MIX_CONCAT) {
        Diag *g = diag_error(c->d, pe->key_at, "'interleave_probs' needs mix_strategy = interleave_under, "
                             "interleave_over or interleave_once");
        diag_note(g, "concatenated datasets are not drawn from by weight");
        return;
    }
    if (!want_terms(c, pe, 1, "a list of numbers")) return;
    const Term *x = pe->value->terms[0];
    if (x->kind != TERM_LIST || x->nitems < 1) {
        Diag *g = diag_error(c->d, x->at, "'interleave_probs' must be a list of numbers, one per dataset");
        diag_help(g, "for example: interleave_probs = [0.7, 0.3]");
        return;
    }
    double *p = arena_alloc(c->a, sizeof(double) * (size_t)x->nitems), sum = 0;
    for (int i = 0; i < x->nitems; i++) {
        const Value *iv = x->items[i];
        if (iv->nterms != 1 || !is_number(iv->terms[0]) || iv->terms[0]->overflow || !(iv->terms[0]->fval > 0) ||
            iv->terms[0]->fval > 1) {
            diag_error(c->d, iv->at, "each of 'interleave_probs' must be a number above 0 and at most 1");
            return;
        }
        p[i] = iv->terms[0]->fval;
        sum += p[i];
    }
    if (x->nitems != t->ndata && t->ndata > 0) {
        Diag *g = diag_error(c->d, x->at, "'interleave_probs' has %d values, but run '%s' has %d datasets", x->nitems,
                             t->name, t->ndata);
        diag_note(g, "one probability per dataset of 'data', in its order");
        return;
    }
    if (fabs(sum - 1) > 1e-6) {
        Diag *g = diag_error(c->d, x->at, "'interleave_probs' sum to %g, not 1", sum);
        diag_note(g, "datasets' interleave_datasets draws each example from a dataset with these probabilities");
        return;
    }
    t->interleave_probs = p;
    t->ninterleave_probs = x->nitems;
}

/* The keys that pass to LLaMA-Factory's own arguments (names and types from
 * its dataclasses: tests/emitters/lf_keys.txt): optim = NAME (transformers'
 * OptimizerNames llmc estimates), liger_kernel = BOOL (enable_liger_kernel),
 * neat_packing = BOOL (sft only; packing on), wsd_decay = PERCENT (schedule =
 * wsd: the decay's share of the steps, default 10%). */
static void check_train_lf_passthrough(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    int v;
    if ((e = find(s, "optim"))) {
        t->optim_at = e->at;
        if (get_enum(c, e, optim_llm_names, OPTIM_COUNT, &v)) t->optim = (OptimKind)v;
        if (t->offload != OFFLOAD_NONE && t->optim != OPTIM_ADAMW_TORCH && t->optim != OPTIM_ADAMW_TORCH_FUSED) {
            Diag *g = diag_error(c->d, e->value->at, "optim = %s does not go with offload = %s",
                                 optim_llm_names[t->optim], offload_llm_names[t->offload]);
            diag_note(g, "DeepSpeed's CPU offload steps its own CPU Adam on the host (zero_force_ds_cpu_optimizer)");
            diag_help(g, "offload = none, or optim = adamw_torch");
        }
        if (t->precision == PREC_PURE_BF16 && (t->optim == OPTIM_ADAMW_8BIT || t->optim == OPTIM_PAGED_ADAMW_8BIT))
            diag_warning(c->d, e->value->at, "optim = %s keeps 8-bit moments of bf16 weights: pure_bf16 saves "
                         "little more", optim_llm_names[t->optim]);
    }
    if ((e = find(s, "liger_kernel"))) { t->liger_at = e->at; get_bool(c, e, &t->liger_kernel); }
    if ((e = find(s, "neat_packing")) && get_bool(c, e, &t->neat_packing)) {
        t->neat_packing_at = e->at;
        if (t->neat_packing && t->stage != STAGE_SFT) {
            Diag *g = diag_error(c->d, e->key_at, "'neat_packing' is only used with stage = sft");
            diag_note(g, "LLaMA-Factory refuses it for other stages (hparams/parser.py)");
        } else if (t->neat_packing) {
            t->packing = true;   /* LLaMA-Factory's data_args: neat_packing turns packing on */
        }
    }
    t->wsd_decay = 0.1;
    if ((e = find(s, "wsd_decay"))) {
        t->wsd_decay_at = e->at;
        if (t->schedule != SCHED_WSD) {
            Diag *g = diag_error(c->d, e->key_at, "'wsd_decay' is only used with schedule = wsd");
            diag_help(g, "schedule = wsd");
        } else {
            double x;
            if (get_percent(c, e, 100, &x)) {
                if (!(x > 0)) diag_error(c->d, e->value->at, "'wsd_decay' must be above 0%%");
                else t->wsd_decay = x;
            }
        }
    }
}

/* tokenize_rate = N: tokens per second one preprocessing worker tokenises
 * (the estimator's default otherwise; docs/estimator.md). max_samples = N:
 * LLaMA-Factory keeps the first N samples of each dataset. */
static void check_train_lf_extras(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, "tokenize_rate"))) {
        t->tokenize_rate_at = e->at;
        get_number(c, e, 0, true, 1e9, &t->tokenize_rate);
    }
    if ((e = find(s, "max_samples"))) {
        t->max_samples_at = e->at;
        get_int(c, e, 1, (int64_t)1 << 50, &t->max_samples);
    }
    check_train_lf_mix(c, s, t);
    check_train_lf_passthrough(c, s, t);
}

static void check_train_lf_rules(Checker *c, Scope *s, PlanTrain *t)
{
    if (t->backend == BACKEND_LLMC) {
        check_train_llmc_rules(c, s, t);
        return;
    }
    check_train_lf_method_rules(c, s, t);
    check_train_lf_extras(c, s, t);
    check_train_lf_pref_rules(c, s, t);
    check_train_lf_eval_rules(c, s, t);
}

/* precision = pure_bf16 is LLaMA-Factory's (pure_bf16: the model stays bf16,
 * trainable parameters are not upcast, torch's AdamW keeps m and v in bf16),
 * and only without DeepSpeed ZeRO: LLaMA-Factory refuses it under ZeRO-3
 * (hparams/parser.py), and ZeRO-1/2 (offload included) keep fp32 partitions of
 * the weights and fp32 moments whatever the model's dtype (DeepSpeed's
 * runtime/zero/stage_1_and_2.py), so the run would not be the one planned. */
static void check_train_precision_rules(Checker *c, const PlanTrain *t)
{
    if (t->precision != PREC_PURE_BF16) return;
    Diag *g;
    if (t->backend == BACKEND_LLMC) {
        g = diag_error(c->d, t->precision_at, "precision = pure_bf16 is not implemented by the llmc trainer");
        diag_note(g, "run '%s' uses backend = llmc%s; the llmc trainer trains bf16 mixed precision with fp32 master "
                  "weights and Adam moments; pure_bf16 is LLaMA-Factory's", t->name,
                  t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s', or precision = bf16", t->name);
        return;
    }
    if (t->shard == SHARD_NONE && t->offload == OFFLOAD_NONE) return;
    const char *shard = shard_llm_names[t->shard], *offload = offload_llm_names[t->offload];
    const char *what = t->shard == SHARD_NONE ? arena_printf(c->a, "offload = %s", offload)
                     : t->offload == OFFLOAD_NONE ? arena_printf(c->a, "shard = %s", shard)
                     : arena_printf(c->a, "shard = %s and offload = %s", shard, offload);
    if (t->shard == SHARD_ZERO3) {
        g = diag_error(c->d, t->precision_at, "precision = pure_bf16 is incompatible with DeepSpeed ZeRO-3 (%s)", what);
        diag_note(g, "LLaMA-Factory refuses it before training starts");
    } else {
        g = diag_error(c->d, t->precision_at, "precision = pure_bf16 does not train in pure bf16 under DeepSpeed ZeRO (%s)",
                       what);
        diag_note(g, "DeepSpeed's ZeRO optimizer keeps fp32 copies of the weights and fp32 Adam moments whatever "
                  "the model's dtype: the run would take bf16 mixed precision's memory, not pure_bf16's");
    }
    if (t->shard == SHARD_NONE)
        diag_help(g, "remove offload: pure_bf16 runs with shard = none and no offload");
    else
        diag_help(g, "precision = bf16 with %s, or precision = pure_bf16 with shard = none and no offload", what);
}

/* Does the last component of a model path (lower case) contain one of the
 * NULL-terminated words? */
static bool path_names(const char *path, const char *const *words)
{
    if (!path) return false;
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--;   /* "/models/x/": x */
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    char low[256];
    size_t n = 0;
    for (size_t k = start; k < end && n + 1 < sizeof low; k++)
        low[n++] = (char)(path[k] >= 'A' && path[k] <= 'Z' ? path[k] - 'A' + 'a' : path[k]);
    low[n] = '\0';
    for (int i = 0; words[i]; i++) if (strstr(low, words[i])) return true;
    return false;
}

/* The chat template against the model (compiler/check/chat_templates.c): the family
 * its path names, else its arch (a warning either way: a template may be
 * meant); the llmc trainer's templates; the special tokens of the template in
 * the model's tokenizer.json when it is readable here (an error: the turns
 * would be cut into plain-text pieces, or LLaMA-Factory adds a token with an
 * untrained embedding that LoRA leaves frozen). */
static void check_train_template(Checker *c, const PlanTrain *t, SrcRange at)
{
    const PlanModel *m = t->model;
    const ChatTemplateInfo *ti = chat_template_info(t->template_);
    const char *path = m->path ? m->path : m->tokenizer;
    if (ti->families[0]) {
        const ChatTemplateInfo *named = NULL;   /* a template whose family the path names */
        for (int i = 1; i < chat_template_count() && !named; i++) {
            const ChatTemplateInfo *o = chat_template_info((ChatTemplate)i);
            if (o->families[0] && path_names(path, o->families)) named = o;
        }
        if (named && !path_names(path, ti->families)) {
            Diag *g = diag_warning(c->d, at, "template %s, but the path of model '%s' names a %s model", ti->name, m->name,
                                   named->name);
            diag_note(g, "a chat template must match the format the model was (or will be) trained with");
            diag_help(g, "template = %s (LLaMA-Factory's template for that family)", named->name);
        } else if (!named && !(ti->archs & (1u << m->arch))) {
            Diag *g = diag_warning(c->d, at, "template %s with %s model '%s'", ti->name, arch_llm_names[m->arch], m->name);
            diag_note(g, "a chat template must match the format the model was (or will be) trained with");
        }
    }
    if (t->backend == BACKEND_LLMC && !ti->llmc) {
        Diag *g = diag_error(c->d, at, "template %s is not implemented by the llmc trainer yet", ti->name);
        diag_note(g, "llmc-train renders the qwen and llama3 templates; LLaMA-Factory renders all of llmc's");
        diag_help(g, "use backend = llamafactory in run '%s', or template = qwen or llama3", t->name);
    }
    if (!ti->tokens[0] || !m->tokenizer) return;
    int n = 0;
    while (ti->tokens[n]) n++;
    bool miss[8] = {false};
    char file[4200], why[600];
    if (n > 8) n = 8;
    int rc = tokenizer_missing_tokens(m->tokenizer, ti->tokens, n, miss, file, (int)sizeof file, why, (int)sizeof why);
    if (rc > 0) {
        /* a pretrained model's unreadable directory has its own note (check_model) */
        char cfg[4200];
        snprintf(cfg, sizeof cfg, "%s/config.json", m->path ? m->path : "");
        bool noted = !m->from_scratch && m->path && strcmp(m->tokenizer, m->path) == 0 && access(cfg, R_OK) != 0;
        if (!noted) {
            Diag *g = diag_note_at(c->d, m->tokenizer_at, "model '%s': %s is not readable here (%s)", m->name, file, why);
            diag_note(g, "not checked: the special tokens of template %s against the tokenizer", ti->name);
        }
        return;
    }
    if (rc < 0) {
        diag_error(c->d, m->tokenizer_at, "model '%s': %s", m->name, why);
        return;
    }
    char missing[400] = "";
    int nmissing = 0;
    for (int i = 0; i < n; i++) {
        if (!miss[i]) continue;
        size_t l = strlen(missing);
        snprintf(missing + l, sizeof missing - l, "%s%s", nmissing++ ? ", " : "", ti->tokens[i]);
    }
    if (!nmissing) return;
    bool lf = t->backend == BACKEND_LLAMAFACTORY;
    Diag *g = (lf ? diag_warning : diag_error)(c->d, at, "template %s writes %s: not tokens of %s", ti->name, missing,
                                               file);
    diag_note(g, lf ? "LLaMA-Factory adds the stop word as a new token with an untrained embedding (LoRA leaves it "
                      "frozen) and splits the other markers into plain-text pieces"
                    : "llmc-train cannot end a turn without the stop word as one token, and would split the others "
                      "into pieces");
    diag_help(g, "the tokenizer of the model's chat (instruct) version, or a template made for this tokenizer");
}

/* train: stage = ENUM, model = NAME, data = [NAME], template = ENUM,
 * context = INT. Returns whether the stage was read (the rules that depend
 * on it are skipped otherwise). */
static bool check_train_what(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    int v;
    bool stage_ok = false;
    if ((e = require(c, s, "stage", stage_llm_names[STAGE_SFT]))) {
        t->stage_at = e->at;
        if (get_enum(c, e, stage_llm_names, STAGE_COUNT, &v)) { t->stage = (TrainStage)v; stage_ok = true; }
    }
    if ((e = require(c, s, "model", "NAME"))) { t->model_at = e->at; t->model = get_ref(c, e, K_MODEL); }
    if ((e = require(c, s, "data", "[NAME]"))) {
        t->data_at = e->at;
        get_dataset_list(c, e, &t->data, &t->ndata);
    }
    t->template_ = TEMPLATE_NONE;
    Entry *tmpl = find(s, "template");
    const char *template_names[TEMPLATE_COUNT];
    for (int i = 0; i < TEMPLATE_COUNT; i++) template_names[i] = chat_template_info((ChatTemplate)i)->name;
    if (tmpl) { t->template_at = tmpl->at; if (get_enum(c, tmpl, template_names, TEMPLATE_COUNT, &v)) t->template_ = (ChatTemplate)v; }
    if ((e = require(c, s, "context", "4096"))) { t->context_at = e->at; get_int32_lim(c, e, PL_DATA_CONTEXT, &t->context); }
    return stage_ok;
}

/* train: batch = INT per gpu (the micro batch; the global batch follows
 * from the nodes and grad_accum). */
static void check_train_batch(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = require(c, s, "batch", "4 per gpu")) && e->value) {
        t->batch_at = e->at;
        const Value *bv = e->value;
        if (bv->nterms >= 3 && bv->terms[0]->kind == TERM_INT && bv->terms[1]->kind == TERM_IDENT &&
            strcmp(bv->terms[1]->str, "per") == 0) {
            const Term *unit = bv->terms[2];
            if (unit->kind != TERM_IDENT || strcmp(unit->str, "gpu") != 0) {
                Diag *g = diag_error(c->d, unit->at, "'batch' is counted per gpu, found 'per %s'", unit->text);
                diag_note(g, "on CPU-only clusters 'per gpu' means per trainer process");
            } else if (want_terms(c, e, 3, "a count per gpu")) {
                const PlanLimit *l = plan_limit(PL_TRAIN_MICRO_BATCH);
                if (bv->terms[0]->overflow || plan_limit_violation(l, (double)bv->terms[0]->ival))
                    diag_error(c->d, bv->terms[0]->at, "'batch' must be between %.0f and %.0f per gpu, found %s",
                               l->min, l->max, bv->terms[0]->text);
                else
                    t->micro_batch = (int)bv->terms[0]->ival;
            }
        } else {
            Diag *g = diag_error(c->d, bv->at, "'batch' must be a count per gpu, found %s", value_desc(c, bv));
            diag_help(g, "for example: batch = 4 per gpu (the global batch follows from nodes and grad_accum)");
        }
    }
}

/* train: warmup = PERCENT | INT [steps]. */
static void check_train_warmup(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, "warmup")) && e->value) {
        t->warmup_at = e->at;
        const Value *wv = e->value;
        if (is_percent(wv)) get_percent(c, e, plan_limit(PL_TRAIN_WARMUP_RATIO)->max * 100, &t->warmup_ratio);
        else if (is_count_of(wv, "steps")) {
            if (wv->terms[0]->ival < 0) diag_error(c->d, wv->at, "'warmup' must not be negative");
            else if (within(c, wv->terms[0]->at, "warmup", PL_TRAIN_WARMUP_STEPS,
                            wv->terms[0]->overflow ? INFINITY : (double)wv->terms[0]->ival, wv->terms[0]->text))
                t->warmup_steps = wv->terms[0]->ival;
        } else if (wv->nterms == 1 && wv->terms[0]->kind == TERM_INT) {
            get_int_lim(c, e, PL_TRAIN_WARMUP_STEPS, &t->warmup_steps);
        } else {
            Diag *g = diag_error(c->d, wv->at, "'warmup' must be a percentage of the steps or a step count, found %s", value_desc(c, wv));
            diag_help(g, "for example: warmup = 3%% or warmup = 100 steps");
        }
    } else if (e) {
        want_terms(c, e, 1, "a percentage or a step count");
    }
}

/* train: betas = [NUMBER, NUMBER] (Adam's beta1, beta2). */
static void check_train_betas(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, "betas")) && want_terms(c, e, 1, "a list of two numbers")) {
        const Term *x = e->value->terms[0];
        if (x->kind != TERM_LIST || x->nitems != 2 || x->items[0]->nterms != 1 || x->items[1]->nterms != 1 ||
            !is_number(x->items[0]->terms[0]) || !is_number(x->items[1]->terms[0])) {
            Diag *g = diag_error(c->d, x->at, "'betas' must be a list of two numbers");
            diag_help(g, "for example: betas = [0.9, 0.95]");
        } else {
            double b1 = x->items[0]->terms[0]->fval, b2 = x->items[1]->terms[0]->fval;
            const Term *t1 = x->items[0]->terms[0], *t2 = x->items[1]->terms[0];
            if (within(c, t1->at, "beta1", PL_TRAIN_BETA1, t1->overflow ? INFINITY : b1, t1->text) &&
                within(c, t2->at, "beta2", PL_TRAIN_BETA2, t2->overflow ? INFINITY : b2, t2->text)) {
                t->beta1 = b1;
                t->beta2 = b2;
            }
        }
    }
}

/* train: seed = INT, at most 2^53 - 1 (plan.json's numbers are doubles). */
static void check_train_seed(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    int64_t seed;
    if ((e = find(s, "seed"))) {
        const Term *st = e->value && e->value->nterms == 1 ? e->value->terms[0] : NULL;
        const PlanLimit *l = plan_limit(PL_TRAIN_SEED);
        if (st && st->kind == TERM_INT && (st->overflow || (double)st->ival > l->max)) {
            Diag *g = diag_error(c->d, st->at, "'seed' must be at most %.0f, found %s", l->max, st->text);
            diag_note(g, "plan.json numbers are read as doubles, exact up to 2^53 - 1; a larger seed would change");
        } else if (get_int_lim(c, e, PL_TRAIN_SEED, &seed)) {
            t->seed = (uint64_t)seed;
        }
    }
}

/* train: the length and the optimizer: epochs, max_steps, batch,
 * grad_accum, lr, min_lr, schedule, warmup, weight_decay, betas, eps,
 * grad_clip, seed (defaults: AdamW as torch's, clip 1, seed 42). */
static void check_train_optimizer(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    int v;
    t->epochs = 1.0;
    if ((e = find(s, "epochs"))) { t->epochs_at = e->at; get_number_lim(c, e, PL_TRAIN_EPOCHS, &t->epochs); }
    if ((e = find(s, "max_steps"))) { t->max_steps_at = e->at; get_int_lim(c, e, PL_TRAIN_MAX_STEPS, &t->max_steps); }
    check_train_batch(c, s, t);
    t->grad_accum = 1;
    if ((e = find(s, "grad_accum"))) { t->grad_accum_at = e->at; get_int32_lim(c, e, PL_TRAIN_GRAD_ACCUM, &t->grad_accum); }
    if ((e = require(c, s, "lr", "1e-5"))) { t->lr_at = e->at; get_number_lim(c, e, PL_TRAIN_LR, &t->lr); }
    if ((e = find(s, "min_lr")) && get_number_lim(c, e, PL_TRAIN_MIN_LR, &t->min_lr) && t->lr > 0 && t->min_lr > t->lr)
        diag_error(c->d, e->value->at, "min_lr (%g) must not exceed lr (%g)", t->min_lr, t->lr);
    if ((e = find(s, "schedule")) && get_enum(c, e, schedule_llm_names, SCHED_COUNT, &v)) t->schedule = (LrScheduleKind)v;
    check_train_warmup(c, s, t);
    t->weight_decay = 0.0;
    t->beta1 = 0.9;
    t->beta2 = 0.999;
    t->adam_eps = 1e-8;
    t->grad_clip = 1.0;
    t->seed = 42;
    if ((e = find(s, "weight_decay"))) get_number_lim(c, e, PL_TRAIN_WEIGHT_DECAY, &t->weight_decay);
    check_train_betas(c, s, t);
    if ((e = find(s, "eps"))) get_number_lim(c, e, PL_TRAIN_EPS, &t->adam_eps);
    if ((e = find(s, "grad_clip"))) get_number_lim(c, e, PL_TRAIN_GRAD_CLIP, &t->grad_clip);
    check_train_seed(c, s, t);
}

/* train: mfu = PERCENT | NUMBER (a fraction of the GPU's peak, for the
 * time estimate). */
static void check_train_mfu(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, "mfu")) && e->value) {
        t->mfu_at = e->at;
        if (is_percent(e->value)) {
            if (get_percent(c, e, 100, &t->mfu) && t->mfu == 0) { diag_error(c->d, e->value->at, "'mfu' must be above 0%%"); t->mfu = 0; }
        } else {
            get_number(c, e, 0, true, 1, &t->mfu);
        }
    } else if (e) {
        want_terms(c, e, 1, "a fraction or percentage");
    }
}

/* train: how it runs: precision, shard, recompute, attention, deterministic
 * (default: on with backend = llmc, off with llamafactory, as HF's
 * full_determinism), packing
 * (default: on for pt), train_on_prompt and mask_history (default off; their
 * rules in check_train_masking_rules), bad_records, mfu, bytes_per_token,
 * backend, output (default runs/NAME). */
static void check_train_execution(Checker *c, Scope *s, PlanTrain *t, bool stage_ok)
{
    Entry *e;
    int v;
    if ((e = find(s, "precision"))) { t->precision_at = e->at; if (get_enum(c, e, precision_llm_names, PREC_COUNT, &v)) t->precision = (Precision)v; }
    if ((e = find(s, "shard"))) { t->shard_at = e->at; if (get_enum(c, e, shard_llm_names, SHARD_COUNT, &v)) t->shard = (ShardStage)v; }
    if ((e = find(s, "recompute"))) { t->recompute_at = e->at; if (get_enum(c, e, recompute_llm_names, RECOMPUTE_COUNT, &v)) t->recompute = (Recompute)v; }
    if ((e = find(s, "attention")) && get_enum(c, e, attention_llm_names, ATTN_COUNT, &v)) t->attention = (AttentionKind)v;
    t->packing = stage_ok && t->stage == STAGE_PT;
    if ((e = find(s, "packing"))) get_bool(c, e, &t->packing);
    if ((e = find(s, "train_on_prompt"))) { t->train_on_prompt_at = e->key_at; get_bool(c, e, &t->train_on_prompt); }
    if ((e = find(s, "mask_history"))) { t->mask_history_at = e->key_at; get_bool(c, e, &t->mask_history); }
    if ((e = find(s, "bad_records")) && get_enum(c, e, bad_records_llm_names, BADREC_COUNT, &v)) t->bad_records = (BadRecordPolicy)v;
    check_train_mfu(c, s, t);
    t->bytes_per_token = 4.0;
    if ((e = find(s, "bytes_per_token"))) get_number(c, e, 0, true, 1000, &t->bytes_per_token);
    if ((e = find(s, "backend"))) { t->backend_at = e->at; if (get_enum(c, e, backend_llm_names, BACKEND_COUNT, &v)) t->backend = (PlanBackend)v; }
    t->deterministic = t->backend == BACKEND_LLMC;
    if ((e = find(s, "deterministic"))) { t->deterministic_at = e->key_at; get_bool(c, e, &t->deterministic); }
    if ((e = find(s, "output"))) { t->output_at = e->at; t->output_dir = get_plan_path(c, e, false); }
    else { t->output_dir = arena_printf(c->a, "runs/%s", t->name); t->output_default = true; }
}

/* train: checkpoint_every = DURATION | INT steps (default 30 min),
 * checkpoint_keep = INT (default 2). */
static void check_train_checkpoints(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    t->checkpoint_every_seconds = 1800;
    if ((e = find(s, "checkpoint_every")) && e->value) {
        t->checkpoint_at = e->at;
        if (e->value->nterms == 1 && e->value->terms[0]->kind == TERM_IDENT && !strcmp(e->value->terms[0]->str, "epoch")) {
            /* LLaMA-Factory's save_strategy: epoch (backend = llamafactory only: check_train_llmc_rules) */
            t->checkpoint_epoch = true;
            t->checkpoint_every_seconds = 0;
        } else if (is_count_of(e->value, "steps")) {
            const Term *n = e->value->terms[0];
            if (n->ival < 1 && !n->overflow) diag_error(c->d, e->value->at, "'checkpoint_every' must be at least 1 step");
            else if (within(c, n->at, "checkpoint_every", PL_CKPT_EVERY_STEPS, n->overflow ? INFINITY : (double)n->ival, n->text)) { t->checkpoint_every_steps = e->value->terms[0]->ival; t->checkpoint_every_seconds = 0; }
        } else {
            double secs;
            if (get_duration(c, e, &secs)) {
                const PlanLimit *l = plan_limit(PL_CKPT_EVERY_SECONDS);
                if (plan_limit_violation(l, secs) == 3)
                    diag_error(c->d, e->value->at, "'checkpoint_every' must be more than 0 s");
                else if (plan_limit_violation(l, secs))
                    diag_error(c->d, e->value->at, "'checkpoint_every' must be at most %g d", l->max / 86400);
                else {
                    t->checkpoint_every_seconds = secs;
                    /* valid, but a large model then spends its time writing checkpoints */
                    if (secs < 60)
                        diag_warning(c->d, e->value->at, "checkpoint every %g s: more often than once a minute", secs);
                }
            }
        }
    } else if (e) {
        want_terms(c, e, 1, "a duration or a step count");
    }
    t->checkpoint_keep = 2;
    if ((e = find(s, "checkpoint_keep"))) get_int32_lim(c, e, PL_CKPT_KEEP, &t->checkpoint_keep);
}

/* The run's rules across its model: context within max_context, no RoPE
 * scaling for llmc-train, the template's markers tokens of the tokenizer. */
static void check_train_model_rules(Checker *c, PlanTrain *t, const Entry *tmpl)
{
    if (t->model && t->context > 0 && t->model->max_context > 0 && t->context > t->model->max_context) {
        Diag *g = diag_error(c->d, t->context_at, "context %d exceeds the max_context %d of model '%s'",
                             t->context, t->model->max_context, t->model->name);
        diag_note(g, "max_context of '%s' is set at %s:%d", t->model->name, t->model->max_context_at.start.file,
                  t->model->max_context_at.start.line);
    }
    if (t->model && t->model->arch >= ARCH_LLMC_COUNT && t->backend == BACKEND_LLMC) {
        static const char *const why[] = {
            [ARCH_MISTRAL] = "its head_dim and sliding-window attention are outside llmc-train's one model code path",
            [ARCH_GEMMA2] = "Gemma 2's four norms per layer, GeGLU, logit soft-capping and alternating sliding-window "
                            "attention are not in llmc-train's model",
            [ARCH_MIXTRAL] = "llmc-train has no mixture-of-experts layers (router, experts, load balancing)",
            [ARCH_QWEN3_MOE] = "llmc-train has no mixture-of-experts layers (router, experts, load balancing)",
        };
        Diag *g = diag_error(c->d, t->model_at, "model '%s' (arch = %s) cannot be trained by llmc-train",
                             t->model->name, arch_llm_names[t->model->arch]);
        diag_note(g, "%s; run '%s' uses backend = llmc%s", why[t->model->arch], t->name,
                  t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s' (LLaMA-Factory trains %s models)", t->name,
                  arch_llm_names[t->model->arch]);
    }
    if (t->model && t->model->rope_scaling && t->backend == BACKEND_LLMC) {
        Diag *g = diag_error(c->d, t->model_at, "model '%s' uses RoPE scaling %s, which llmc-train does not implement",
                             t->model->name, t->model->rope_scaling);
        diag_note(g, "run '%s' uses backend = llmc%s; llmc-train refuses such a model rather than train it as plain RoPE",
                  t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s' (LLaMA-Factory applies the scaling)", t->name);
    }
    if (t->model && tmpl && t->template_ != TEMPLATE_NONE && t->stage != STAGE_PT && tmpl->value)
        check_train_template(c, t, tmpl->value->at);
}

/* The run's rules across its stage (read): a chat template for sft, the
 * datasets' formats for the stage and the backend, epochs vs max_steps,
 * warmup within max_steps. */
static void check_train_stage_rules(Checker *c, const Scope *s, PlanTrain *t, const Entry *tmpl)
{
    if (t->stage != STAGE_PT && !tmpl && !s->broken) {
        Diag *g = diag_error(c->d, s->at, "%s run '%s' needs a chat template", stage_llm_names[t->stage], t->name);
        diag_help(g, "add 'template = qwen' or 'template = llama3' (the model's chat format)");
    } else if (t->stage != STAGE_PT && tmpl && t->template_ == TEMPLATE_NONE && tmpl->value && tmpl->value->terms[0]->kind == TERM_IDENT &&
               strcmp(tmpl->value->terms[0]->str, "none") == 0) {
        diag_error(c->d, tmpl->value->at, "%s needs a chat template; 'none' is only for pt", stage_llm_names[t->stage]);
    } else if (t->stage == STAGE_PT && tmpl && t->template_ != TEMPLATE_NONE) {
        diag_warning(c->d, tmpl->value->at, "template is ignored for pt (pre-training reads raw text)");
    }
    for (int i = 0; i < t->ndata; i++) check_stage_data(c, t, t->data[i], t->data_at);
    for (int i = 0; i < t->neval_data; i++) check_stage_data(c, t, t->eval_data[i], t->eval_data_at);
    /* The llmc trainer reads JSON and JSON Lines (runtime/data/records.c), no Parquet. */
    for (int i = 0; i < t->ndata + t->neval_data; i++) {
        const PlanDataset *ds = i < t->ndata ? t->data[i] : t->eval_data[i - t->ndata];
        if (t->backend != BACKEND_LLMC || !ds || (!ds->directory && !ds->hf_hub)) continue;
        Diag *g = diag_error(c->d, ds->hf_hub ? ds->hf_hub_at : ds->file_at, "dataset '%s' is %s, which the llmc "
                             "trainer cannot read", ds->name, ds->hf_hub ? "a Hub dataset" : "a directory of shards");
        diag_note(g, "llmc-train prepare reads one local JSON or JSON Lines file; run '%s' uses backend = llmc%s",
                  t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s', or give one local file", t->name);
    }
    for (int i = 0; i < t->ndata; i++) {
        const PlanDataset *ds = t->data[i];
        if (t->backend != BACKEND_LLMC || !ds->file || ds->directory || plan_llmc_reads_dataset(ds->file)) continue;
        Diag *g = diag_error(c->d, ds->file_at, "dataset '%s' is a Parquet file, which the llmc trainer cannot read",
                             ds->name);
        diag_note(g, "run '%s' uses backend = llmc%s", t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "convert it to JSON Lines (.jsonl), or set backend = llamafactory in run '%s'", t->name);
    }
    if (t->max_steps > 0 && t->epochs_at.start.file)
        diag_warning(c->d, t->epochs_at, "epochs is ignored: max_steps is set and decides the length of run '%s'", t->name);
    if (t->max_steps > 0 && t->warmup_steps > 0 && t->warmup_steps >= t->max_steps)
        diag_error(c->d, t->warmup_at, "warmup (%lld steps) must be shorter than max_steps (%lld)",
                   (long long)t->warmup_steps, (long long)t->max_steps);
}

/* train_on_prompt and mask_history as LLaMA-Factory allows them: sft only
 * (hparams/parser.py), not both (hparams/data_args.py), and train_on_prompt
 * not with a template that ends responses with an efficient eos
 * (data/template.py, get_template_and_fix_tokenizer). */
static void check_train_masking_rules(Checker *c, const PlanTrain *t)
{
    Diag *g;
    const SrcRange *at[2] = {&t->train_on_prompt_at, &t->mask_history_at};
    const bool set[2] = {t->train_on_prompt, t->mask_history};
    static const char *const key[2] = {"train_on_prompt", "mask_history"};
    for (int k = 0; k < 2; k++)
        if (set[k] && t->stage != STAGE_SFT) {
            g = diag_error(c->d, *at[k], "'%s' is only used with stage = sft, not %s", key[k], stage_llm_names[t->stage]);
            diag_note(g, "LLaMA-Factory refuses it outside sft (hparams/parser.py)");
        }
    if (t->stage != STAGE_SFT) return;
    if (t->train_on_prompt && t->mask_history) {
        g = diag_error(c->d, t->mask_history_at, "'mask_history' and 'train_on_prompt' cannot both be set");
        diag_note(g, "LLaMA-Factory refuses the pair (hparams/data_args.py): mask_history trains only the last "
                  "response, train_on_prompt every prompt");
        diag_help(g, "remove one of them from run '%s'", t->name);
    }
    if (t->train_on_prompt && chat_template_info(t->template_)->efficient_eos) {
        g = diag_error(c->d, t->train_on_prompt_at, "'train_on_prompt' cannot be used with template = %s",
                       chat_template_info(t->template_)->name);
        diag_note(g, "LLaMA-Factory refuses train_on_prompt with a template whose efficient_eos is set "
                  "(data/template.py)");
    }
}

/* train: output, normalised (contract/path_policy.h), is no system directory
 * and does not overlap what the run reads: not inside the model directory,
 * not the directory of a dataset, of the tokenizer or of the plan that names
 * it. llmc-train refuses the same plan.json (runtime/plan/plan.c). The
 * default (runs/NAME in the compiled directory) is always its own. */
static void check_train_output_path(Checker *c, Scope *s, const PlanTrain *t)
{
    if (t->output_default || !t->output_dir) return;
    const Entry *oe = find(s, "output");
    const char *value = oe && oe->value && oe->value->nterms == 1 && oe->value->terms[0]->kind == TERM_STRING
                        ? oe->value->terms[0]->str : t->output_dir;
    PathInput in[4 + 2 * 64];
    int n = 0;
    const PlanModel *m = t->model;
    if (m && m->path) in[n++] = (PathInput){"the model directory", m->path, m->path, PATH_INPUT_WITHIN};
    if (m && m->tokenizer && (!m->path || strcmp(m->tokenizer, m->path)))
        in[n++] = (PathInput){"the tokenizer directory", m->tokenizer, m->tokenizer, PATH_INPUT_EQUAL};
    const char *file = t->output_at.start.file, *slash = file ? strrchr(file, '/') : NULL;
    const char *plan_dir = !file ? NULL : !slash ? "." : slash == file ? "/" : arena_printf(c->a, "%.*s", (int)(slash - file), file);
    if (plan_dir) in[n++] = (PathInput){"the directory of plan file", file, plan_dir, PATH_INPUT_EQUAL};
    for (int k = 0; k < 2; k++) {
        PlanDataset *const *ds = k ? t->eval_data : t->data;
        int nds = k ? t->neval_data : t->ndata;
        for (int i = 0; i < nds && n < (int)NUNITS(in); i++) {
            const char *f = ds[i] ? ds[i]->file : NULL;
            if (!f) continue;
            const char *sl = strrchr(f, '/');
            const char *dir = !sl ? "." : sl == f ? "/" : arena_printf(c->a, "%.*s", (int)(sl - f), f);
            in[n++] = (PathInput){arena_printf(c->a, "the directory of dataset '%s', file", ds[i]->name), f, dir, PATH_INPUT_EQUAL};
        }
    }
    char msg[3 * PATH_POLICY_MAX];
    if (path_policy_output(value, t->output_dir, in, n, msg, sizeof msg))
        diag_error(c->d, t->output_at, "'output' %s", msg);
}

/* train NAME { ... }: every key in the order below, then the rules across
 * keys (LLaMA-Factory's own keys and rules last). */
static void check_train(Checker *c, const Item *it, PlanTrain *t)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, train_keys, NUNITS(train_keys));
    bool stage_ok = check_train_what(c, &s, t);
    Entry *tmpl = find(&s, "template");
    check_train_optimizer(c, &s, t);
    check_train_execution(c, &s, t, stage_ok);
    check_train_checkpoints(c, &s, t);
    check_train_lf_keys(c, &s, t);
    report_missing(c, &s);
    check_train_model_rules(c, t, tmpl);
    check_train_output_path(c, &s, t);
    if (!stage_ok) return;
    check_train_stage_rules(c, &s, t, tmpl);
    check_train_masking_rules(c, t);
    check_train_lf_rules(c, &s, t);
    check_train_precision_rules(c, t);
}

/* Rules on a job's merged site settings. */
static void check_job_site(Checker *c, const PlanJob *j)
{
    const PlanSite *s = &j->site;
    const PlanCluster *cl = j->cluster;
    if (!cl->gpu && (cl->hostlist || cl->minimal)) {
        if (s->gres)
            diag_error(c->d, s->gres_at, "'gres_type' on cluster '%s', which has no GPUs", cl->name);
        if (s->gpus_per_node == 1)
            diag_error(c->d, s->gpus_per_node_at, "'gpus_per_node' on cluster '%s', which has no GPUs", cl->name);
    }
    if (s->mail_type && !s->mail_user && strcmp(s->mail_type, "NONE") != 0) {
        Diag *g = diag_warning(c->d, s->mail_type_at, "'mail_type' without 'mail_user': Slurm mails the submitting user");
        diag_help(g, "add mail_user = \"NAME@SITE\" to the sbatch block");
    }
}

static const char *const job_keys[] = {"run", "cluster", "nodes", "tasks", "time", "mem", "cpus_per_task",
                                       "account", "qos", "logs", "requeue", "env", "sbatch", "setup", "container",
                                       "after", "profile"};

/* job: run = NAME, cluster = NAME, nodes = INT, time = DURATION (at least
 * 1 min), mem, cpus_per_task, account, qos, logs (default "logs"), requeue
 * (default on), tasks, after = JOB, and the site keys. Returns the tasks
 * entry (NULL when not given: the default follows from the cluster). */
static Entry *check_job_keys(Checker *c, const Item *it, Scope *s, PlanJob *j)
{
    check_keys(c, s, job_keys, NUNITS(job_keys));
    Entry *e;
    if ((e = require(c, s, "run", "NAME"))) { j->run_at = e->at; j->run = get_ref(c, e, K_TRAIN); }
    if ((e = require(c, s, "cluster", "NAME"))) { j->cluster_at = e->at; j->cluster = get_ref(c, e, K_CLUSTER); }
    if ((e = require(c, s, "nodes", "32"))) { j->nodes_at = e->at; get_int32(c, e, 1, HOSTLIST_MAX_HOSTS, &j->nodes); }
    if ((e = require(c, s, "time", "48 h"))) {
        j->time_at = e->at;
        if (get_duration(c, e, &j->time_seconds) && j->time_seconds < 60) {
            diag_error(c->d, e->value->at, "'time' must be at least 1 min");
            j->time_seconds = 0;
        }
    }
    if ((e = find(s, "mem"))) { j->mem_at = e->at; get_size(c, e, &j->mem_bytes); }
    if ((e = find(s, "cpus_per_task"))) { j->cpus_per_task_at = e->at; get_int32(c, e, 1, 100000, &j->cpus_per_task); }
    if ((e = find(s, "account")) && get_string(c, e, &j->account)) {
        j->account_at = e->value->at;
        if (!j->account[0]) diag_error(c->d, e->value->at, "'account' must not be empty");
    }
    if ((e = find(s, "qos")) && get_string(c, e, &j->qos)) {
        j->qos_at = e->value->at;
        if (!j->qos[0]) diag_error(c->d, e->value->at, "'qos' must not be empty");
    }
    j->log_dir = "logs";
    if ((e = find(s, "logs"))) { j->log_dir_at = e->at; const char *p = get_path(c, e, false); if (p) j->log_dir = p; }
    j->requeue = true;
    if ((e = find(s, "requeue"))) get_bool(c, e, &j->requeue);
    Entry *tasks = find(s, "tasks");
    if (tasks) { j->tasks_at = tasks->at; get_int32(c, tasks, 1, 1024, &j->tasks_per_node); }
    if ((e = find(s, "after"))) { j->after_at = e->at; j->after = get_ref(c, e, K_JOB); }
    if ((e = find(s, "profile"))) { j->profile_at = e->at; j->profile = get_ref(c, e, K_PROFILE); }
    check_site(c, it, s, &j->site);
    report_missing(c, s);
    return tasks;
}

/* The job against its cluster: site settings merged, nodes within the
 * cluster, one task per GPU (1 on CPU nodes), cpus_per_task (default: the
 * node's CPUs shared by its tasks) and mem within a node. */
static void check_job_fits_cluster(Checker *c, PlanJob *j, const PlanCluster *cl, const Entry *tasks)
{
    merge_site(c, &cl->site, &j->site);
    check_job_site(c, j);
    if (j->nodes > 0 && cl->nhosts > 0 && j->nodes > cl->nhosts) {
        Diag *g = diag_error(c->d, j->nodes_at, "job asks for %d nodes, but cluster '%s' has %d", j->nodes, cl->name, cl->nhosts);
        if (cl->hostlist) diag_note(g, "cluster '%s' nodes = %s", cl->name, cl->hostlist);
        else diag_note(g, "cluster '%s' nodes = %d", cl->name, cl->nhosts);
    }
    if (cl->gpus_per_node > 0) {
        if (tasks && j->tasks_per_node > 0 && j->tasks_per_node != cl->gpus_per_node) {
            Diag *g = diag_error(c->d, tasks->value->at, "'tasks' must equal the %d GPUs per node of cluster '%s'",
                                 cl->gpus_per_node, cl->name);
            diag_note(g, "llmc runs one trainer process per GPU");
        }
        if (!tasks) j->tasks_per_node = cl->gpus_per_node;
    } else if (!tasks) {
        j->tasks_per_node = 1;
    }
    /* sbatch { gpus_per_task }: the allocation's tasks x it must be the GPUs the
     * script asks per node; LLaMA-Factory's launcher is one task per node that
     * needs them all (srun would inherit one GPU per task) */
    if (j->site.gpus_per_task > 0 && cl->gpus_per_node > 0) {
        if (j->run && j->run->backend == BACKEND_LLAMAFACTORY) {
            Diag *g = diag_error(c->d, j->site.gpus_per_task_at, "'gpus_per_task' does not go with backend = "
                                 "llamafactory (run '%s')", j->run->name);
            diag_note(g, "its job step is one launcher per node over all %d GPUs; srun would give it only %d",
                      cl->gpus_per_node, j->site.gpus_per_task);
        } else if (j->tasks_per_node > 0 && j->site.gpus_per_task * j->tasks_per_node != cl->gpus_per_node) {
            Diag *g = diag_error(c->d, j->site.gpus_per_task_at, "gpus_per_task = %d with %d tasks per node asks for %d "
                                 "GPUs per node; the script asks for the %d of cluster '%s'", j->site.gpus_per_task,
                                 j->tasks_per_node, j->site.gpus_per_task * j->tasks_per_node, cl->gpus_per_node, cl->name);
            diag_help(g, "gpus_per_task = %d", cl->gpus_per_node / j->tasks_per_node > 0 ? cl->gpus_per_node / j->tasks_per_node : 1);
        }
    }
    if (!j->cpus_per_task && cl->cpus > 0 && j->tasks_per_node > 0) {
        j->cpus_per_task = cl->cpus / j->tasks_per_node;
        if (j->cpus_per_task < 1) j->cpus_per_task = 1;
    }
    if (j->tasks_per_node > 0 && cl->cpus > 0 && j->cpus_per_task * j->tasks_per_node > cl->cpus) {
        Diag *g = diag_error(c->d, j->cpus_per_task_at.start.file ? j->cpus_per_task_at : j->tasks_at,
                             "%d tasks x %d cpus_per_task = %d CPUs, but nodes of cluster '%s' have %d",
                             j->tasks_per_node, j->cpus_per_task, j->tasks_per_node * j->cpus_per_task, cl->name, cl->cpus);
        diag_help(g, "cpus_per_task = %d fits", cl->cpus / j->tasks_per_node > 0 ? cl->cpus / j->tasks_per_node : 1);
    }
    if (j->mem_bytes && cl->memory_bytes && j->mem_bytes > cl->memory_bytes) {
        Diag *g = diag_error(c->d, j->mem_at, "'mem' asks for more memory than a node of cluster '%s' has", cl->name);
        diag_note(g, "cluster '%s' memory is set at %s:%d", cl->name, cl->memory_at.start.file, cl->memory_at.start.line);
    }
}

/* What the llmc trainer's backend for this cluster implements (the table
 * llmc_backend_caps, contract/backend_caps.h): a plan that relies on more would pass the estimate and
 * then run out of memory, or be refused by llmc-train after the queue wait.
 * On one rank there is nothing to shard: every stage is the same. */
static void check_job_llmc_caps(Checker *c, const PlanJob *j, const PlanCluster *cl, const PlanTrain *t)
{
    int64_t llmc_world = (int64_t)(j->nodes > 0 ? j->nodes : 1) * (j->tasks_per_node > 0 ? j->tasks_per_node : 1);
    LlmcBackendId backend = cl->gpu ? LLMC_BACKEND_CUDA : LLMC_BACKEND_CPU;
    const LlmcBackendCaps *caps = &llmc_backend_caps[backend];
    bool finetune = t->method == METHOD_LORA || t->method == METHOD_FREEZE;
    if (t->backend == BACKEND_LLMC && finetune && !caps->finetune) {
        Diag *g = diag_error(c->d, t->method_at.start.file ? t->method_at : t->at,
                             "method = %s is not implemented by the llmc trainer on %s", method_llm_names[t->method],
                             caps->where);
        diag_help(g, "use backend = llamafactory in run '%s'", t->name);
    } else if (t->backend == BACKEND_LLMC && finetune && caps->finetune_one_rank && llmc_world > 1) {
        Diag *g = diag_error(c->d, t->method_at.start.file ? t->method_at : t->at,
                             "method = %s on %lld ranks is not implemented by the llmc trainer on %s",
                             method_llm_names[t->method], (long long)llmc_world, caps->where);
        diag_note(g, "the llmc CUDA backend trains freeze and lora on one GPU; job '%s' has %lld ranks", j->name,
                  (long long)llmc_world);
        diag_help(g, "use backend = llamafactory in run '%s', or a job of one GPU", t->name);
    } else if (t->backend == BACKEND_LLMC && finetune && caps->finetune_one_rank && t->offload != OFFLOAD_NONE) {
        Diag *g = diag_error(c->d, t->offload_at.start.file ? t->offload_at : t->at,
                             "offload with method = %s is not implemented by the llmc trainer on %s",
                             method_llm_names[t->method], caps->where);
        diag_note(g, "the llmc CUDA backend offloads full training's optimizer; the trainable part of freeze or "
                  "lora is small");
        diag_help(g, "remove offload from run '%s'", t->name);
    } else if (t->backend == BACKEND_LLMC && t->method == METHOD_LORA && !llmc_lora_rank_ok(backend, t->lora_rank)) {
        bool too_big = caps->lora_rank_max && t->lora_rank > caps->lora_rank_max;
        Diag *g = diag_error(c->d, t->method_at.start.file ? t->method_at : t->at,
                             "lora_rank = %d: the llmc trainer on %s takes ranks that are multiples of %d%s",
                             t->lora_rank, caps->where, caps->lora_rank_step,
                             too_big ? arena_printf(c->a, " up to %d", caps->lora_rank_max) : "");
        diag_help(g, "lora_rank = %d", llmc_lora_rank_nearest(backend, t->lora_rank));
    } else if (t->backend == BACKEND_LLMC && finetune && (int)t->shard > caps->max_shard_finetune) {
        Diag *g = diag_error(c->d, t->shard_at.start.file ? t->shard_at : t->at,
                             "shard = %s with method = %s is not implemented by the llmc trainer on %s",
                             shard_llm_names[t->shard], method_llm_names[t->method], caps->where);
        diag_note(g, "the llmc trainer shards full training only; the trainable part of freeze or lora is small");
        diag_help(g, "use shard = none");
    } else if (t->backend == BACKEND_LLMC && (int)t->shard > caps->max_shard && llmc_world > 1) {
        Diag *g = diag_error(c->d, t->shard_at.start.file ? t->shard_at : t->at,
                             "shard = %s is not implemented by the llmc trainer on %s",
                             shard_llm_names[t->shard], caps->where);
        diag_note(g, "%s; job '%s' has %lld ranks", caps->shard_note, j->name, (long long)llmc_world);
        diag_help(g, "use backend = llamafactory (DeepSpeed ZeRO-%d), or shard = %s if it fits (llmc explain)",
                  (int)t->shard, shard_llm_names[caps->max_shard]);
    }
    /* The llmc GPU backend is CUDA: an AMD part runs LLaMA-Factory (ROCm). */
    if (t->backend == BACKEND_LLMC && cl->gpu && cl->gpu_amd) {
        Diag *g = diag_error(c->d, t->backend_at.start.file ? t->backend_at : j->cluster_at,
                             "the llmc trainer has no backend for %s (AMD) GPUs", cl->gpu->name);
        diag_note(g, "llmc-train-cuda is built with CUDA, cuBLASLt and NCCL");
        diag_help(g, "use backend = llamafactory in run '%s' (PyTorch on ROCm)", t->name);
    }
    /* Optimizer offload in the llmc trainer: the CUDA backend, one GPU, the
     * optimizer only (master weights and moments in pinned host memory). */
    if (t->backend == BACKEND_LLMC && t->offload != OFFLOAD_NONE) {
        const char *why = !cl->gpu ? "the CPU backend keeps everything in host memory already"
                        : t->offload == OFFLOAD_ALL ? "the llmc CUDA backend offloads the optimizer, not the parameters"
                        : llmc_world > 1 ? arena_printf(c->a, "the llmc CUDA backend offloads the optimizer on one GPU "
                                                        "only; job '%s' has %lld ranks", j->name, (long long)llmc_world)
                        : NULL;
        if (why) {
            Diag *g = diag_error(c->d, t->offload_at, "offload = %s is not implemented by the llmc trainer here",
                                 offload_llm_names[t->offload]);
            diag_note(g, "%s", why);
            diag_help(g, "use backend = llamafactory in run '%s' (DeepSpeed offload)", t->name);
        }
    }
}

/* Global batch arithmetic: sequences per optimizer step (batch per gpu x
 * grad_accum x processes) within the limit and, for sft, within the samples
 * of the data (else an epoch has no step). */
static void check_job_global_batch(Checker *c, const PlanJob *j, const PlanTrain *t)
{
    if (j->nodes > 0 && j->tasks_per_node > 0 && t->micro_batch > 0 && t->grad_accum > 0) {
        int64_t world = (int64_t)j->nodes * j->tasks_per_node;
        int64_t global = world * t->micro_batch * t->grad_accum;
        const PlanLimit *gl = plan_limit(PL_TRAIN_GLOBAL_BATCH);
        if (within(c, j->nodes_at, "world size", PL_PARALLEL_WORLD, (double)world,
                   arena_printf(c->a, "%lld processes (%d nodes x %d)", (long long)world, j->nodes, j->tasks_per_node)) &&
            plan_limit_violation(gl, (double)global)) {
            Diag *g = diag_error(c->d, j->nodes_at, "global batch of %lld sequences is more than %.0f",
                                 (long long)global, gl->max);
            diag_note(g, "global batch = batch %d per gpu x grad_accum %d x %lld processes (%d nodes x %d)",
                      t->micro_batch, t->grad_accum, (long long)world, j->nodes, j->tasks_per_node);
        }
        int64_t samples = 0;
        bool known = t->ndata > 0;
        for (int i = 0; i < t->ndata; i++) {
            if (t->data[i]->samples < 0) known = false;
            else samples += t->data[i]->samples;
        }
        if (known && t->stage == STAGE_SFT && global > samples) {
            Diag *g = diag_error(c->d, j->nodes_at,
                                 "global batch of %lld sequences is larger than the %lld samples of run '%s'",
                                 (long long)global, (long long)samples, t->name);
            diag_note(g, "global batch = batch %d per gpu x grad_accum %d x %lld processes (%d nodes x %d)",
                      t->micro_batch, t->grad_accum, (long long)world, j->nodes, j->tasks_per_node);
            diag_help(g, "use fewer nodes or a smaller batch so that an epoch has at least one step");
        }
    }
}

/* job NAME { ... }: its keys, then the job against its cluster and against
 * its run (checkpoint cadence, precision on CPUs, the llmc backend's
 * capabilities, the global batch). */
/* ---- profile NAME { } : a site profile (docs/estimator.md, "Site profiles") ---- */

static const char *const profile_keys[] = {"backend", "mfu", "step_overhead", "intra_node_bw", "inter_node_bw", "from"};

static void check_profile(Checker *c, const Item *it, PlanProfile *p)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, profile_keys, NUNITS(profile_keys));
    Entry *e;
    int v;
    p->step_overhead_s = -1;
    if ((e = find(&s, "backend"))) {
        p->backend_at = e->at;
        if (get_enum(c, e, backend_llm_names, BACKEND_COUNT, &v)) { p->backend = (PlanBackend)v; p->backend_set = true; }
    }
    if ((e = find(&s, "mfu")) && e->value) {
        p->mfu_at = e->at;
        if (is_percent(e->value)) {
            if (get_percent(c, e, 100, &p->mfu) && p->mfu == 0) { diag_error(c->d, e->value->at, "'mfu' must be above 0%%"); p->mfu = 0; }
        } else {
            get_number(c, e, 0, true, 1, &p->mfu);
        }
    } else if (e) {
        want_terms(c, e, 1, "a fraction or percentage");
    }
    if ((e = find(&s, "step_overhead"))) {
        p->step_overhead_at = e->at;
        double x;
        if (get_duration(c, e, &x)) {
            if (x > 3600) diag_error(c->d, e->value->at, "'step_overhead' must be at most 1 h per optimizer step");
            else p->step_overhead_s = x;
        }
    }
    struct { const char *key; double *out; SrcRange *at; } bws[] = {
        {"intra_node_bw", &p->intra_bytes_per_s, &p->intra_at}, {"inter_node_bw", &p->inter_bytes_per_s, &p->inter_at}};
    for (int i = 0; i < 2; i++) {
        if (!(e = find(&s, bws[i].key)) || !e->value) continue;
        *bws[i].at = e->at;
        const Value *val = e->value;
        if (val->nterms > 2) { want_terms(c, e, 2, "a bandwidth"); continue; }
        get_rate(c, e, val->terms[0], val->nterms == 2 ? val->terms[1] : NULL, byte_rate_units, bit_rate_units,
                 "40 GBps", bws[i].out);
    }
    if ((e = find(&s, "from"))) p->from = get_string_list(c, e, &p->nfrom, "a list of run directories", NULL);
    if (!p->mfu_at.start.file && !p->step_overhead_at.start.file && !p->intra_at.start.file && !p->inter_at.start.file) {
        Diag *g = diag_error(c->d, it->name_at, "profile '%s' sets none of mfu, step_overhead, intra_node_bw, inter_node_bw",
                             p->name);
        diag_help(g, "llmc calibrate RUN_DIR... -o PROFILE.llm writes one from measured runs");
    }
}

/* A job's profile measured one trainer: the other's efficiency is not the same. */
static void check_job_profile(Checker *c, const PlanJob *j, const PlanTrain *t)
{
    const PlanProfile *p = j->profile;
    if (!p || !p->backend_set || p->backend == t->backend) return;
    Diag *g = diag_error(c->d, j->profile_at, "profile '%s' was measured on backend = %s, but run '%s' uses backend = %s",
                         p->name, backend_llm_names[p->backend], t->name, backend_llm_names[t->backend]);
    diag_note(g, "profile '%s' backend is set at %s:%d", p->name, p->backend_at.start.file, p->backend_at.start.line);
    diag_help(g, "calibrate a profile from runs of backend = %s (llmc calibrate)", backend_llm_names[t->backend]);
}

static void check_job(Checker *c, const Item *it, PlanJob *j)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    Entry *tasks = check_job_keys(c, it, &s, j);
    const PlanCluster *cl = j->cluster;
    if (!cl) return;
    check_job_fits_cluster(c, j, cl, tasks);
    const PlanTrain *t = j->run;
    if (!t) return;
    if (t->checkpoint_at.start.file && t->checkpoint_every_seconds > 0 && j->time_seconds > 0 &&
        t->checkpoint_every_seconds >= j->time_seconds) {
        Diag *g = diag_warning(c->d, t->checkpoint_at, "run '%s' checkpoints less often than job '%s' may run",
                               t->name, j->name);
        diag_note(g, "a job stopped at its time limit before the first checkpoint loses all of its work");
    }
    if (!cl->gpu && (cl->hostlist || cl->minimal) && t->precision != PREC_FP32) {
        Diag *g = diag_error(c->d, t->precision_at.start.file ? t->precision_at : j->cluster_at,
                             "cluster '%s' has no GPUs, so run '%s' must use precision = fp32", cl->name, t->name);
        diag_note(g, "the CPU backend trains in fp32; bf16 is the default");
    }
    check_job_llmc_caps(c, j, cl, t);
    check_job_global_batch(c, j, t);
    check_job_profile(c, j, t);
}

/* ---- chained jobs (`after = JOB`) and output directories ---- */

static bool method_is_adapter(FinetuneMethod m) { return m == METHOD_LORA || m == METHOD_QLORA; }

/* One job after another: the later run starts from the earlier one's trained
 * model (LLaMA-Factory full/freeze: its output_dir; llmc: output_dir/final)
 * or, after LoRA/QLoRA, from the same base with that adapter. */
static void check_job_after(Checker *c, const Plan *plan, int idx)
{
    const PlanJob *j = plan->jobs[idx];
    const PlanJob *a = j->after;
    if (!a) return;
    if (a == j) {
        diag_error(c->d, j->after_at, "job '%s' cannot run after itself", j->name);
        return;
    }
    /* a cycle: reported once, at the job of the cycle that comes first in the plan */
    const PlanJob *p = a;
    for (int n = 0; p && n <= plan->njobs; n++, p = p->after) {
        if (p != j) continue;
        bool first = true;
        const PlanJob *q = a;
        for (int m = 0; q && q != j && m <= plan->njobs; m++, q = q->after)
            for (int k = 0; k < idx; k++) if (plan->jobs[k] == q) first = false;
        if (first) {
            Diag *g = diag_error(c->d, j->after_at, "jobs form a cycle through 'after': job '%s' waits for itself", j->name);
            diag_help(g, "the first job of a chain has no 'after'");
        }
        return;
    }
    const PlanTrain *t = j->run, *ta = a->run;
    if (!t || !ta) return;
    if (t->model && ta->model && t->model != ta->model) {
        Diag *g = diag_error(c->d, t->model_at.start.file ? t->model_at : j->after_at,
                             "run '%s' trains model '%s', but job '%s' it runs after trains model '%s'",
                             t->name, t->model->name, a->name, ta->model->name);
        diag_note(g, "job '%s' starts from the model job '%s' trained: the same network", j->name, a->name);
        diag_help(g, "model = %s in run '%s'", ta->model->name, t->name);
    }
    bool adapter = ta->backend == BACKEND_LLAMAFACTORY && method_is_adapter(ta->method);
    if (adapter && (t->backend != BACKEND_LLAMAFACTORY || !method_is_adapter(t->method))) {
        Diag *g = diag_error(c->d, j->after_at, "run '%s' cannot start from the LoRA adapter job '%s' trains", t->name, a->name);
        if (t->backend != BACKEND_LLAMAFACTORY)
            diag_note(g, "the llmc trainer loads whole models, not adapters");
        else
            diag_note(g, "LLaMA-Factory takes an adapter (adapter_name_or_path) only with method lora or qlora");
        diag_help(g, "method = lora in run '%s' (with backend = llamafactory), or a full run '%s'", t->name, ta->name);
        /* a full run needs the merged model: LLaMA-Factory's export merges base + adapter */
        if (ta->model && ta->model->path) {
            const char *tmpl = chat_template_info(ta->template_)->name;
            diag_help(g, "or merge first, then train the merged model: llamafactory-cli export with "
                         "model_name_or_path: %s, adapter_name_or_path: %s, finetuning_type: lora, template: %s, "
                         "export_dir: DIR; and a model block with path = \"DIR\" for run '%s' (without 'after')",
                      ta->model->path, ta->output_dir ? ta->output_dir : "(its output)", tmpl ? tmpl : "empty", t->name);
        }
    } else if (adapter && (t->method == METHOD_QLORA || t->shard == SHARD_ZERO3) &&
               (t->stage == STAGE_DPO || t->stage == STAGE_KTO)) {
        /* model/adapter.py: no merge on a quantised base or under ZeRO-3, so the
         * adapter is trained further and the reference is the base without it */
        Diag *g = diag_warning(c->d, j->after_at, "run '%s' trains the adapter of job '%s' further; its reference model is "
                               "the base without that adapter", t->name, a->name);
        diag_note(g, "LLaMA-Factory merges an adapter into the base only when the base is not quantised and not under "
                     "ZeRO-3 (%s)", t->method == METHOD_QLORA ? "method = qlora" : "shard = zero3");
        diag_help(g, "method = lora with shard = zero2 or none, so the %s reference is the model after '%s'",
                  t->stage == STAGE_DPO ? "DPO" : "KTO", ta->name);
    }
}

/* A job resumes from the checkpoints in its output directory: two jobs writing
 * one (or one inside the other) would resume from each other's. Default
 * outputs (runs/NAME in each job's own compiled directory) never meet. */
static bool path_within(const char *outer, const char *inner)
{
    size_t n = strlen(outer);
    while (n > 1 && outer[n - 1] == '/') n--;
    return strncmp(outer, inner, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

static void check_job_outputs(Checker *c, const Plan *plan, int idx)
{
    const PlanJob *j = plan->jobs[idx];
    const PlanTrain *t = j->run;
    if (!t || t->output_default || !t->output_dir) return;
    for (int k = 0; k < idx; k++) {
        const PlanTrain *o = plan->jobs[k]->run;
        if (!o || o->output_default || !o->output_dir) continue;
        if (!path_within(o->output_dir, t->output_dir) && !path_within(t->output_dir, o->output_dir)) continue;
        Diag *g = o == t
            ? diag_error(c->d, j->run_at, "jobs '%s' and '%s' both run '%s', so both write to output directory \"%s\"",
                         plan->jobs[k]->name, j->name, t->name, t->output_dir)
            : diag_error(c->d, t->output_at.start.file ? t->output_at : j->run_at,
                         "jobs '%s' and '%s' write to one output directory: \"%s\" and \"%s\"",
                         plan->jobs[k]->name, j->name, o->output_dir, t->output_dir);
        diag_note(g, "a job resumes from the checkpoints in its output directory; it would take the other job's");
        diag_help(g, "give each job's run its own 'output'");
        return;
    }
}

/* ---- the plan ---- */

static void add_block(Checker *c, const Item *it)
{
    BlockKind kind = K_COUNT;
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(it->kind_name, kind_names[k]) == 0) kind = (BlockKind)k;
    if (kind == K_COUNT) {
        const char *dym = did_you_mean(it->kind_name, kind_names, K_COUNT);
        Diag *g = dym ? diag_error(c->d, it->kind_at, "unknown block '%s'; did you mean '%s'?", it->kind_name, dym)
                      : diag_error(c->d, it->kind_at, "unknown block '%s'", it->kind_name);
        diag_note(g, "blocks: cluster, model, dataset, train, job, gpu, profile");
        return;
    }
    if (!it->name) {
        Diag *g = diag_error(c->d, it->kind_at, "%s block needs a name", it->kind_name);
        diag_help(g, "write '%s NAME { ... }'", it->kind_name);
        return;
    }
    Symbol *prev = lookup(c, it->name);
    if (prev) {
        Diag *g = diag_error(c->d, it->name_at, "duplicate block name '%s'", it->name);
        diag_note(g, "'%s' is already a %s block at %s:%d", it->name, kind_names[prev->kind],
                  prev->item->name_at.start.file, prev->item->name_at.start.line);
        return;
    }
    size_t sizes[K_COUNT] = {sizeof(PlanCluster), sizeof(PlanModel), sizeof(PlanDataset), sizeof(PlanTrain), sizeof(PlanJob),
                             sizeof(PlanGpu), sizeof(PlanProfile)};
    void *obj = arena_alloc(c->a, sizes[kind]);
    /* Every Plan* struct starts with `const char *name; SrcRange at;`. */
    PlanCluster *head = obj;
    head->name = it->name;
    head->at = it->name_at;
    add_symbol(c, (Symbol){it->name, kind, it, obj});
}

void check_plan(SourceFile **files, int nfiles, Plan *plan, Diags *d)
{
    Checker c = {.a = plan->arena, .d = d, .plan = plan};
    for (int f = 0; f < nfiles; f++)
        for (int i = 0; i < files[f]->nitems; i++) {
            const Item *it = files[f]->items[i];
            if (it->kind == ITEM_BLOCK) {
                add_block(&c, it);
            } else if (strcmp(it->kind_name, "use") != 0) {
                static const char *const stmts[] = {"use"};
                const char *dym = did_you_mean(it->kind_name, stmts, 1);
                Diag *g = diag_error(d, it->kind_at, "unknown statement '%s'%s", it->kind_name,
                                     dym ? "; did you mean 'use'?" : "");
                diag_note(g, "a string at the top level follows 'use': use \"cluster.llm\"");
            }
        }
    /* Check in dependency order: later kinds refer to earlier ones. */
    PtrVec lists[K_COUNT] = {{0}};
    static const BlockKind order[K_COUNT] = {K_GPU, K_PROFILE, K_CLUSTER, K_MODEL, K_DATASET, K_TRAIN, K_JOB};
    for (int o = 0; o < K_COUNT; o++)
        for (int i = 0; i < c.nsyms; i++) {
            Symbol *s = &c.syms[i];
            if (s->kind != order[o]) continue;
            switch (s->kind) {
            case K_GPU: check_gpu(&c, s->item, s->obj); break;
            case K_CLUSTER: check_cluster(&c, s->item, s->obj); break;
            case K_MODEL: check_model(&c, s->item, s->obj); break;
            case K_DATASET: check_dataset(&c, s->item, s->obj); break;
            case K_TRAIN: check_train(&c, s->item, s->obj); break;
            case K_JOB: check_job(&c, s->item, s->obj); break;
            case K_PROFILE: check_profile(&c, s->item, s->obj); break;
            case K_COUNT: break;
            }
            ptrvec_push(c.a, &lists[s->kind], s->obj);
        }
    plan->clusters = (PlanCluster **)lists[K_CLUSTER].items; plan->nclusters = lists[K_CLUSTER].n;
    plan->models = (PlanModel **)lists[K_MODEL].items; plan->nmodels = lists[K_MODEL].n;
    plan->datasets = (PlanDataset **)lists[K_DATASET].items; plan->ndatasets = lists[K_DATASET].n;
    plan->trains = (PlanTrain **)lists[K_TRAIN].items; plan->ntrains = lists[K_TRAIN].n;
    plan->jobs = (PlanJob **)lists[K_JOB].items; plan->njobs = lists[K_JOB].n;
    for (int i = 0; i < plan->njobs; i++) check_k8s_paths(&c, plan->jobs[i]);
    for (int i = 0; i < plan->njobs; i++) {
        check_job_after(&c, plan, i);
        check_job_outputs(&c, plan, i);
    }
    free(c.syms);
    free(c.index);
}
