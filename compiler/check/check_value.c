/* check_value.c — the checker's vocabulary: a block's keys (unknown, duplicate,
 * missing, "did you mean"), typed values (integers, numbers within a
 * limit row, strings, enums, quantities with units, percentages),
 * references between blocks, and the paths a plan names. Every block's file
 * reads its keys through these, so one message reads the same everywhere. */
#include "check_internal.h"

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

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

const char *join_names(Arena *a, const char *const *names, int n)
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

const char *term_desc(Checker *c, const Term *t)
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

const char *value_desc(Checker *c, const Value *v)
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

/* ---- keys ---- */

Scope scope_of(Checker *c, const Item *it, Entry **es, int n, const char *sub)
{
    Scope s = {.es = es, .n = n, .at = it->name ? it->name_at : it->kind_at, .broken = it->broken};
    if (sub) s.where = arena_printf(c->a, "'%s' of %s block '%s'", sub, it->kind_name, it->name ? it->name : "?");
    else s.where = arena_printf(c->a, "%s block '%s'", it->kind_name, it->name ? it->name : "?");
    return s;
}

/* The entries of s against block b's rows in contract/plan_keys.h: unknown
 * keys (with the nearest row as "did you mean", rows earlier winning a tie)
 * and duplicates. */
void check_keys(Checker *c, Scope *s, PlanKeyBlock b)
{
    const char *keys[PLAN_KEYS_MAX];
    int nkeys = plan_key_lists[b].n;
    for (int k = 0; k < nkeys; k++) keys[k] = plan_key_lists[b].keys[k].key;
    const Entry *first[PLAN_KEYS_MAX] = {0};   /* first entry of each known key */
    for (int i = 0; i < s->n; i++) {
        Entry *e = s->es[i];
        int known = -1;
        for (int k = 0; k < nkeys; k++)
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

/* A row's default (its DEFAULT column, as the `.llm` writes it) into v. A
 * default derived by the block's rules ("") or a required key leaves v as
 * the rules set it before the rows are read. */
static void row_default(const PlanKey *k, const RowRead *r, void *v)
{
    if (!k->dflt[0] || strcmp(k->dflt, "required") == 0) return;
    switch (k->type) {
    case PK_INT: *(int *)v = (int)strtod(k->dflt, NULL); break;
    case PK_INT64: *(int64_t *)v = (int64_t)strtod(k->dflt, NULL); break;
    case PK_NUM: *(double *)v = strtod(k->dflt, NULL); break;
    case PK_BOOL: *(bool *)v = strcmp(k->dflt, "true") == 0; break;
    case PK_ENUM:
        *(int *)v = 0;
        for (int i = 0; r->names[i]; i++)
            if (strcmp(r->names[i], k->dflt) == 0) *(int *)v = i;
        break;
    default: break;
    }
}

/* The keys of block b that its rows alone describe (READ ROW, ROW_AT): each
 * gets its default, then the plan's value if written, read by its TYPE within
 * its limit or vocabulary row into obj (the block's struct). The block's
 * rules read the rest, and may rely on these being read first. ok (NULL: not
 * wanted) gets, per row, whether the plan wrote the key and its value was
 * read: the rules that compare a value with another source (a model's
 * config.json) or derive a default need to know. */
void check_row_keys(Checker *c, const Scope *s, PlanKeyBlock b, const RowRead *reads, void *obj, bool *ok)
{
    const PlanKeyList *l = &plan_key_lists[b];
    for (int k = 0; k < l->n; k++) {
        const RowRead *r = &reads[k];
        if (ok) ok[k] = false;
        if (!r->read) continue;
        void *v = (char *)obj + r->off;
        row_default(&l->keys[k], r, v);
        Entry *e = find(s, l->keys[k].key);
        if (!e) continue;
        if (r->at_off != SIZE_MAX)
            *(SrcRange *)(void *)((char *)obj + r->at_off) = r->value_at && e->value ? e->value->at : e->at;
        int n = 0, x;
        bool got = false;
        switch (l->keys[k].type) {
        case PK_INT: got = get_int32_lim(c, e, r->limit, v); break;
        case PK_INT64: got = get_int_lim(c, e, r->limit, v); break;
        case PK_NUM: got = get_number_lim(c, e, r->limit, v); break;
        case PK_BOOL: got = get_bool(c, e, v); break;
        case PK_SIZE: got = get_size_lim(c, e, r->limit, v); break;
        case PK_ENUM:
            while (r->names[n]) n++;
            if ((got = get_enum(c, e, r->names, n, &x))) *(int *)v = x;
            break;
        default: break;
        }
        if (ok) ok[k] = got;
    }
}

Entry *find(const Scope *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->es[i]->key, key) == 0) return s->es[i];
    return NULL;
}

/* Find a required key; missing ones are reported together by report_missing(). */
Entry *require(Checker *c, Scope *s, const char *key, const char *example)
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

void report_missing(Checker *c, const Scope *s)
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
bool want_terms(Checker *c, const Entry *e, int n, const char *what)
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

bool get_int(Checker *c, const Entry *e, int64_t min, int64_t max, int64_t *out)
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

bool get_int32(Checker *c, const Entry *e, int min, int max, int *out)
{
    int64_t v;
    if (!get_int(c, e, min, max, &v)) return false;
    *out = (int)v;
    return true;
}

/* A plain number; min_open: the minimum itself is not allowed. */
bool get_number(Checker *c, const Entry *e, double min, bool min_open, double max, double *out)
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

/* ---- limits of the contract ----
 * A limit id names a row of contract/plan_limits.h (a plan.json field, which
 * llmc-train also checks) or of plan_keys.h's PLAN_KEY_LIMITS (a key it never
 * reads); plan_key_limit finds either. */

static const char *bound_text(Checker *c, const PlanLimit *l, double b)
{
    return l->kind == PLAN_INT || (b == floor(b) && fabs(b) < 1e16) ? arena_printf(c->a, "%.0f", b)
                                                                       : arena_printf(c->a, "%g", b);
}

/* A value the plan derives or converts (a percentage, a beta of a list, a
 * product) against its row; `what` names it in the message. */
bool within(Checker *c, SrcRange at, const char *what, int id, double x, const char *shown)
{
    const PlanLimit *l = plan_key_limit(id);
    int why = plan_limit_violation(l, x);
    if (!why) return true;
    if (why == 1) diag_error(c->d, at, "'%s' is out of range", what);
    else if (why == 2) diag_error(c->d, at, "'%s' must be an integer, found %s", what, shown);
    else diag_error(c->d, at, "'%s' must be %s %s, found %s", what, plan_limit_bound_word(l, why),
                    bound_text(c, l, why == 3 ? l->min : l->max), shown);
    return false;
}

bool get_int_lim(Checker *c, const Entry *e, int id, int64_t *out)
{
    const PlanLimit *l = plan_key_limit(id);
    return get_int(c, e, (int64_t)l->min, (int64_t)l->max, out);
}

bool get_int32_lim(Checker *c, const Entry *e, int id, int *out)
{
    int64_t v;
    if (!get_int_lim(c, e, id, &v)) return false;
    *out = (int)v;
    return true;
}

bool get_number_lim(Checker *c, const Entry *e, int id, double *out)
{
    const PlanLimit *l = plan_key_limit(id);
    double x;
    if (!get_number(c, e, l->min, (l->flags & PLAN_MIN_OPEN) != 0, l->max, &x)) return false;
    if (!within(c, e->value->terms[0]->at, e->key, id, x, e->value->terms[0]->text)) return false;
    *out = x;
    return true;
}

bool get_string(Checker *c, const Entry *e, const char **out)
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

bool get_bool(Checker *c, const Entry *e, bool *out)
{
    if (!want_terms(c, e, 1, "true or false")) return false;
    const Term *t = e->value->terms[0];
    if (t->kind == TERM_IDENT && strcmp(t->str, "true") == 0) { *out = true; return true; }
    if (t->kind == TERM_IDENT && strcmp(t->str, "false") == 0) { *out = false; return true; }
    diag_error(c->d, t->at, "'%s' must be true or false, found %s", e->key, term_desc(c, t));
    return false;
}

bool get_enum(Checker *c, const Entry *e, const char *const *names, int n, int *out)
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


static const Unit size_units[] = {
    {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
};
static const Unit duration_units[] = {{"s", 1}, {"min", 60}, {"h", 3600}, {"d", 86400}};


/* `NUMBER UNIT` with UNIT from the table. what: "a size", example: "2 TiB". */
bool get_quantity(Checker *c, const Entry *e, const Unit *units, int nunits,
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

bool get_size(Checker *c, const Entry *e, uint64_t *out)
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

/* A size within its limit row (bytes). */
bool get_size_lim(Checker *c, const Entry *e, int id, uint64_t *out)
{
    uint64_t x;
    if (!get_size(c, e, &x)) return false;
    if (!within(c, e->value->at, e->key, id, (double)x, arena_printf(c->a, "%llu bytes", (unsigned long long)x)))
        return false;
    *out = x;
    return true;
}

bool get_duration(Checker *c, const Entry *e, double *out)
{
    if (!get_quantity(c, e, duration_units, NUNITS(duration_units), "a duration", "48 h", out)) return false;
    if (*out > 366.0 * 86400) {
        diag_error(c->d, e->value->at, "'%s' is longer than a year", e->key);
        return false;
    }
    return true;
}

/* `NUMBER %`, as a fraction. */
bool is_percent(const Value *v)
{
    return v && v->nterms >= 2 && is_number(v->terms[0]) && v->terms[1]->kind == TERM_PERCENT;
}

bool get_percent(Checker *c, const Entry *e, double max_pct, double *out)
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
bool is_count_of(const Value *v, const char *word)
{
    return v && v->nterms == 2 && v->terms[0]->kind == TERM_INT && v->terms[1]->kind == TERM_IDENT &&
           strcmp(v->terms[1]->str, word) == 0;
}

/* ---- references ---- */

Symbol *lookup(Checker *c, const char *name)
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

void add_symbol(Checker *c, Symbol s)
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

void *resolve_ref(Checker *c, const Entry *e, const Term *t, BlockKind kind)
{
    if (t->kind != TERM_IDENT) {
        Diag *g = diag_error(c->d, t->at, "'%s' must name a %s block, found %s", e->key, kind_names[kind], term_desc(c, t));
        if (t->kind == TERM_STRING) diag_help(g, "write the name without quotes");
        return NULL;
    }
    Symbol *s = lookup(c, t->str);
    if (s && s->kind == kind) return s->obj;
    /* a merge block stands for the model it writes (checked before the
     * train blocks; a merge named by an earlier merge is not filled yet) */
    if (s && s->kind == K_MERGE && kind == K_MODEL) {
        PlanMerge *m = s->obj;
        if (m->merged.merged_from) return &m->merged;
        if (m->model && m->output_dir) {
            Diag *g = diag_error(c->d, t->at, "merge '%s' is defined after the merge that names it", t->str);
            diag_help(g, "define merge '%s' first", t->str);
        }
        return NULL;
    }
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

void *get_ref(Checker *c, const Entry *e, BlockKind kind)
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
    long cc = plan_control_char_at(path);   /* C0, DEL and C1 (U+0085 ...), as llmc-train refuses them */
    char ch[16];
    if (cc >= 0) {
        diag_error(c->d, at, "'%s' contains a control character (%s at offset %ld)", e->key,
                   plan_control_char_name(path, cc, ch), cc);
        return false;
    }
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
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

const char *get_path(Checker *c, const Entry *e, bool is_file)
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

const char *get_plan_path(Checker *c, const Entry *e, bool is_file)
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
