/* check_site.c — site settings (env, sbatch, setup, container) of a cluster
 * or job block, and a job's settings merged over its cluster's. */
#include "check_internal.h"
#include "shell_parse.h"

/* ---- site settings (docs/language.md, "Site settings") ----
 * `env { NAME = value }`, `sbatch { constraint = "..." ... }`, `setup = ["..."]`
 * and `container { image = "..." }`, in a cluster block (for every job on it)
 * or a job block (merged over its cluster's). Every string here reaches the
 * job script; check_site refuses what would not mean what it says there. */

/* A site key: a row of both the cluster's and the job's keys (it compiles
 * only if it is), spelled as the rows spell it. */
#define SITE_KEY(KEY) (&PLAN_KEY(CLUSTER, KEY)[0 * sizeof(PLAN_KEY(JOB, KEY))])

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
        char ch[16];
        Diag *g = diag_error(c->d, t->at, "environment variable '%s' contains a control character (%s at offset %ld)",
                             e->key, plan_control_char_name(text, cc, ch), cc);
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

/* One setup line: no control character, not empty, no trailing backslash
 * (bash takes it as a literal '\' argument, not the continuation the writer
 * meant: each line runs by itself), and it parses as bash (shell_parse.c:
 * bash -n on the exact text `eval` gets). An error at the line's position
 * now, not a syntax error when the job starts. */
static bool setup_line_ok(Checker *c, SrcRange at, int i, const char *line, bool *unchecked)
{
    long cc = plan_control_char_at(line);
    char ch[16], msg[512];
    if (cc >= 0) {
        Diag *g = diag_error(c->d, at, "setup line %d contains a control character (%s at offset %ld)", i + 1,
                             plan_control_char_name(line, cc, ch), cc);
        diag_help(g, "write one list item per line");
        return false;
    }
    if (!line[0]) {
        diag_error(c->d, at, "setup line %d is empty", i + 1);
        return false;
    }
    size_t n = strlen(line), bs = 0;
    while (bs < n && line[n - 1 - bs] == '\\') bs++;
    if (bs % 2) {
        Diag *g = diag_error(c->d, at, "setup line %d ends with a backslash", i + 1);
        diag_note(g, "each setup line runs by itself in the batch shell (eval), so it must be complete");
        return false;
    }
    if (*unchecked) return true;
    switch (shell_parse_line(line, msg, sizeof msg)) {
    case SHELL_OK: return true;
    case SHELL_WARNS:
        diag_note(diag_warning(c->d, at, "setup line %d: bash warns: %s", i + 1, msg),
                  "bash -n parsed the line as the job script's eval will");
        return true;
    case SHELL_BAD: {
        Diag *g = diag_error(c->d, at, "setup line %d does not parse as shell: %s", i + 1, msg);
        diag_note(g, "bash -n parsed the line as the job script's eval will; the job would stop there when it starts");
        return false;
    }
    case SHELL_UNCHECKED:
        diag_note(diag_warning(c->d, at, "setup line %d not parsed: %s", i + 1, msg),
                  "the job script runs it with bash; a syntax error would stop the job when it starts");
        return true;
    case SHELL_NO_SHELL:   /* said once for the plan's lines, not once per line */
        diag_note(diag_warning(c->d, at, "setup lines not parsed: %s", msg),
                  "the job script runs them with bash; a syntax error would stop the job when it starts");
        *unchecked = true;
        return true;
    }
    return true;
}

/* A string or a list of strings; *ats (when given) gets each item's range. */
const char **get_string_list(Checker *c, const Entry *e, int *n, const char *what, SrcRange **ats)
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
    long cc = plan_control_char_at(s);
    char ch[16];
    if (cc >= 0) {
        Diag *g = diag_error(c->d, at, "'%s' contains a control character (%s at offset %ld)", e->key,
                             plan_control_char_name(s, cc, ch), cc);
        diag_note(g, "it would end the #SBATCH line");
        return false;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (!isalnum(*p) && !strchr(allowed, *p)) {
            Diag *g = diag_error(c->d, at, "'%s' contains '%c' (offset %ld), which %s cannot take", e->key, *p,
                                 (long)(p - (const unsigned char *)s), what);
            diag_note(g, "#SBATCH lines are not shell: they cannot be quoted");
            return false;
        }
    }
    return true;
}

/* The sbatch and container keys contract/plan_keys.h's rows alone describe
 * (READ ROW, ROW_AT_VALUE), read by check_row_keys into the site before the
 * rules below run; mail_type's words and container runtime's are
 * contract/plan_vocab.h's (PLAN_MAIL_TYPE, PLAN_CONTAINER_RUNTIME). */
static const RowRead sbatch_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanSite, type, row, field),
    PLAN_KEYS_SBATCH(X)
#undef X
};
static const RowRead container_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanSite, type, row, field),
    PLAN_KEYS_CONTAINER(X)
#undef X
};

/* The #SBATCH options llmc writes itself (templates/job_*.slurm.tmpl,
 * emit_slurm.c), long and short spellings: a free-form line may not set them
 * again (sbatch takes the last, so the plan and its script would disagree). */
static const char *const sbatch_written[] = {
    "account", "cpus-per-task", "error", "job-name", "mem", "requeue", "no-requeue", "nodes", "ntasks-per-node",
    "open-mode", "output", "partition", "qos", "signal", "time", "gres", "gpus-per-node", "constraint", "exclusive",
    "reservation", "mail-type", "mail-user", "comment", "exclude", "nodelist", "switches", "gpus-per-task",
    "dependency", "ntasks", "gpus", "mem-per-cpu", "mem-per-gpu", "array", "chdir", "export", "wrap"};

/* sbatch { exclude = "HOSTLIST"  nodelist = "HOSTLIST"  extra = ["--opt=value", ...] }
 * (docs/language.md, "Site settings"; switches and gpus_per_task: their rows). */
static void check_site_sbatch_extra(Checker *c, Scope *s, PlanSite *site)
{
    Entry *e;
    const char *str;
    if ((e = find(s, PLAN_KEY(SBATCH, exclude))) && get_string(c, e, &str) && directive_ok(c, e, str, "_.-[],", "--exclude")) {
        site->exclude = str; site->exclude_at = e->value->at;
    }
    if ((e = find(s, PLAN_KEY(SBATCH, nodelist))) && get_string(c, e, &str) && directive_ok(c, e, str, "_.-[],", "--nodelist")) {
        site->nodelist = str; site->nodelist_at = e->value->at;
    }
    if (!(e = find(s, PLAN_KEY(SBATCH, extra)))) return;
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
    Scope s = scope_of(c, it, blk->sub, blk->nsub, SITE_KEY(sbatch));
    s.at = blk->key_at;
    check_keys(c, &s, PKB_SBATCH);
    check_row_keys(c, &s, PKB_SBATCH, sbatch_reads, site, NULL);
    Entry *e;
    const char *str;
    bool b;
    if ((e = find(&s, PLAN_KEY(SBATCH, constraint))) && get_string(c, e, &str) &&
        directive_ok(c, e, str, "_.-&|*[]():,!", "--constraint")) {
        site->constraint = str; site->constraint_at = e->value->at;
    }
    if ((e = find(&s, PLAN_KEY(SBATCH, exclusive))) && get_bool(c, e, &b)) { site->exclusive = b; site->exclusive_at = e->value->at; }
    if ((e = find(&s, PLAN_KEY(SBATCH, reservation))) && get_string(c, e, &str) &&
        directive_ok(c, e, str, "_.-", "--reservation")) {
        site->reservation = str; site->reservation_at = e->value->at;
    }
    if ((e = find(&s, PLAN_KEY(SBATCH, gpus_per_node))) && get_bool(c, e, &b)) {
        site->gpus_per_node = b;
        site->gpus_per_node_at = e->value->at;
    }
    if ((e = find(&s, PLAN_KEY(SBATCH, gres_type))) && want_terms(c, e, 1, "a GRES type name or none")) {
        const Term *t = e->value->terms[0];
        if (t->kind == TERM_IDENT && strcmp(t->str, "none") == 0) {
            site->gres = 2; site->gres_type = NULL; site->gres_at = t->at;
        } else if (get_string(c, e, &str) && directive_ok(c, e, str, "_.-", "a GRES type")) {
            site->gres = 1; site->gres_type = str; site->gres_at = t->at;
        }
    }
    if ((e = find(&s, PLAN_KEY(SBATCH, mail_user))) && get_string(c, e, &str) &&
        directive_ok(c, e, str, "_.-+@", "--mail-user")) {
        if (!strchr(str, '@')) diag_warning(c->d, e->value->at, "'mail_user' has no '@'; Slurm sends it to a local user");
        site->mail_user = str; site->mail_user_at = e->value->at;
    }
    if ((e = find(&s, PLAN_KEY(SBATCH, mail_type))) && want_terms(c, e, 1, "a list of mail events")) {
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
                k = plan_vocab_find(mail_type_llm_names, w->str);
            if (k < 0 || items[i]->nterms != 1) {
                const char *dym = w->kind == TERM_IDENT ? did_you_mean(w->str, mail_type_llm_names, MAIL_TYPE_COUNT) : NULL;
                Diag *g = dym ? diag_error(c->d, w->at, "unknown mail_type '%s'; did you mean '%s'?", w->str, dym)
                              : diag_error(c->d, w->at, "'mail_type' must be Slurm mail events, found %s", term_desc(c, w));
                diag_note(g, "'mail_type' is a list of: %s", join_names(c->a, mail_type_llm_names, MAIL_TYPE_COUNT));
                ok = false;
                break;
            }
            if (strlen(joined) + strlen(mail_type_json_names[k]) + 2 > 255) break;
            if (i) strcat(joined, ",");
            strcat(joined, mail_type_json_names[k]);
        }
        if (ok) { site->mail_type = joined; site->mail_type_at = e->value->at; }
    }
    if ((e = find(&s, PLAN_KEY(SBATCH, comment))) && get_string(c, e, &str) &&
        directive_ok(c, e, str, " _.-+@:=,/()", "--comment")) {
        if (strlen(str) > 200) diag_error(c->d, e->value->at, "'comment' is longer than 200 characters");
        else if (str[0] == ' ' || str[strlen(str) - 1] == ' ') diag_error(c->d, e->value->at, "'comment' begins or ends with a space");
        else { site->comment = str; site->comment_at = e->value->at; }
    }
    check_site_sbatch_extra(c, &s, site);
}

/* A container mount "SRC[:DST[:FLAGS]]", both paths absolute: pyxis
 * (--container-mounts) and Apptainer (--bind) take the same form, ','-separated.
 * Both sides are normalised by the path policy (path_policy_mount). */
static bool mount_ok(Checker *c, SrcRange at, const char *m)
{
    long cc = plan_control_char_at(m);
    char ch[16], msg[3 * PATH_POLICY_MAX];
    if (cc >= 0) {
        Diag *g = diag_error(c->d, at, "container mount '%s' contains a control character (%s at offset %ld)", m,
                             plan_control_char_name(m, cc, ch), cc);
        diag_note(g, "mounts are joined with ',' into one --container-mounts / --bind argument");
        return false;
    }
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        if (*p == ',' || isspace(*p)) {
            Diag *g = diag_error(c->d, at, "container mount '%s' contains %s", m, *p == ',' ? "','" : "white space");
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
    int side = path_policy_mount(src, dst, msg, sizeof msg);
    if (side) {
        Diag *g = diag_error(c->d, at, "container mount '%s': %s", m, msg);
        if (side == 1) diag_help(g, "mount only the directory the job needs, e.g. \"/etc/slurm:/etc/slurm:ro\"");
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
    Scope s = scope_of(c, it, blk->sub, blk->nsub, SITE_KEY(container));
    s.at = blk->key_at;
    s.broken = it->broken;
    check_keys(c, &s, PKB_CONTAINER);
    bool ok[PLAN_KEYS_MAX];
    check_row_keys(c, &s, PKB_CONTAINER, container_reads, site, ok);
    Entry *e;
    const char *img = NULL;
    require(c, &s, PLAN_KEY(CONTAINER, runtime), container_runtime_llm_names[CONTAINER_PYXIS]);   /* read by its row */
    if ((e = require(c, &s, PLAN_KEY(CONTAINER, image), "\"nvcr.io#nvidia/pytorch:24.05-py3\"")) && get_string(c, e, &img)) {
        long cc = plan_control_char_at(img);
        if (!img[0]) { diag_error(c->d, e->value->at, "'image' must not be empty"); img = NULL; }
        else if (cc >= 0) {
            char ch[16];
            diag_error(c->d, e->value->at, "'image' contains a control character (%s at offset %ld)",
                       plan_control_char_name(img, cc, ch), cc);
            img = NULL;
        }
        else if (strpbrk(img, " \t,")) { diag_error(c->d, e->value->at, "'image' contains white space or ','"); img = NULL; }
        else site->image_at = e->value->at;
    }
    if ((e = find(&s, PLAN_KEY(CONTAINER, mounts)))) {
        int n = 0;
        SrcRange *ats = NULL;
        const char **ms = get_string_list(c, e, &n, "a list of \"SRC:DST\" mounts", &ats);
        bool ok = ms != NULL;
        for (int i = 0; i < n; i++) ok &= mount_ok(c, ats[i], ms[i]);
        if (ok) { site->mounts = ms; site->nmounts = n; site->mounts_at = e->value->at; }
    }
    report_missing(c, &s);
    if (ok[PLAN_KEY_INDEX(CONTAINER, runtime)] && img) {
        site->image = img;
        site->container_at = blk->key_at;
    }
}

/* The site keys of a cluster or job block (already passed check_keys). */
void check_site(Checker *c, const Item *it, Scope *s, PlanSite *site)
{
    site->exclusive = -1;
    site->gpus_per_node = -1;
    Entry *e;
    if ((e = find(s, SITE_KEY(env)))) check_site_env(c, e, site);
    if ((e = find(s, SITE_KEY(sbatch)))) check_site_sbatch(c, it, e, site);
    if ((e = find(s, SITE_KEY(container)))) check_site_container(c, it, e, site);
    if ((e = find(s, SITE_KEY(setup)))) {
        int n = 0;
        SrcRange *ats = NULL;
        const char **lines = get_string_list(c, e, &n, "a list of shell lines", &ats);
        bool ok = lines != NULL, unchecked = false;
        for (int i = 0; i < n && ok; i++) ok = setup_line_ok(c, ats[i], i, lines[i], &unchecked);
        if (ok) { site->setup = lines; site->nsetup = n; site->setup_at = e->value->at; }
    }
}

/* The job's settings over its cluster's: env by name (the job's value wins,
 * in the cluster's order, the job's new names after), setup lines cluster
 * first, every other setting the job's where it sets one. */
void merge_site(Checker *c, const PlanSite *cl, PlanSite *j)
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
    if (j->image) {
        m.container = j->container; m.container_at = j->container_at;
        m.image = j->image; m.image_at = j->image_at;
        m.mounts = j->mounts; m.nmounts = j->nmounts; m.mounts_at = j->mounts_at;
    }
    *j = m;
}
