/* unit.c — C unit tests of front-end pieces: hostlists, the GPU catalogue,
 * did-you-mean, diagnostics rendering, frontend_load. Prints TAP-like lines;
 * `unit keys` prints the key rows instead (print_key_rows). */
#include "fmt.h"
#include "frontend.h"
#include "hostlist.h"
#include "plan_keys.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(int cond, const char *what)
{
    printf("%s - %s\n", cond ? "ok" : "not ok", what);
    if (!cond) failures++;
}

static void hosts(const char *expr, int n, const char *first, const char *last)
{
    Arena *a = arena_new();
    char **h = NULL;
    const char *err = NULL;
    int got = hostlist_expand(a, expr, &h, &err);
    char what[256];
    snprintf(what, sizeof what, "hostlist %s -> %d hosts %s..%s", expr, n, first, last);
    check(got == n && strcmp(h[0], first) == 0 && strcmp(h[got - 1], last) == 0, what);
    arena_free(a);
}

static void hosts_bad(const char *expr, const char *msg)
{
    Arena *a = arena_new();
    char **h = NULL;
    const char *err = NULL;
    int got = hostlist_expand(a, expr, &h, &err);
    char what[256];
    snprintf(what, sizeof what, "hostlist %s is rejected: %s", expr, msg);
    check(got == -1 && err && strstr(err, msg), what);
    arena_free(a);
}

/* Render diagnostics of a plan in memory into a string. */
static char *render(const char *text, DiagFormat f)
{
    Arena *a = arena_new();
    Diags *d = diags_new();
    diags_add_source(d, "t.llm", text, strlen(text));
    SourceFile *sf = parse_source("t.llm", text, strlen(text), a, d);
    Plan *p = arena_alloc(a, sizeof(Plan));
    p->arena = a;
    check_plan(&sf, 1, p, d);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    diags_render(d, out, f, 0);
    fclose(out);
    diags_free(d);
    plan_free(p);
    return buf;
}

/* One source text through the parser and the checker, diagnostics into dd. */
static Plan *checked_plan(const char *name, const char *text, Diags *dd)
{
    Arena *a = arena_new();
    SourceFile *sf = parse_source(name, text, strlen(text), a, dd);
    Plan *pl = arena_alloc(a, sizeof(Plan));
    pl->arena = a;
    check_plan(&sf, 1, pl, dd);
    return pl;
}

/* The row of contract/plan_keys.h spelled "block.key" (a block's spelling
 * ends at its last '.'), or NULL. */
static const PlanKey *key_row(const char *dotted)
{
    const char *dot = strrchr(dotted, '.');
    if (!dot) return NULL;
    for (int b = 0; b < PKB_COUNT; b++) {
        const PlanKeyList *l = &plan_key_lists[b];
        if (strlen(l->spelled) != (size_t)(dot - dotted) || strncmp(l->spelled, dotted, (size_t)(dot - dotted))) continue;
        for (int k = 0; k < l->n; k++)
            if (!strcmp(l->keys[k].key, dot + 1)) return &l->keys[k];
    }
    return NULL;
}

/* The `.llm` spellings of a concept of plan_vocab.h named in a ROW column
 * (one plan.json holds, or one it does not: PLAN_VOCAB_LLM_CONCEPTS). */
static const char *const *concept_names(const char *row)
{
#define CONCEPT(name, rows, llm, json, mask) if (!strcmp(row, #name)) return name##_llm_names;
    PLAN_VOCAB_CONCEPTS(CONCEPT)
#undef CONCEPT
#define LLM_CONCEPT(name, rows, llm) if (!strcmp(row, #name)) return name##_llm_names;
    PLAN_VOCAB_LLM_CONCEPTS(LLM_CONCEPT)
#undef LLM_CONCEPT
    return NULL;
}

/* contract/plan_keys.h against itself and the other contract tables: keys
 * unique in a block, every default the checker reads by its row parses, every
 * vocabulary concept, every limit the `.llm` sets and every key limit
 * (PLAN_KEY_LIMITS) names a key row. */
static void key_rows(void)
{
    int bad = 0, nrows = 0;
    for (int b = 0; b < PKB_COUNT; b++) {
        const PlanKeyList *l = &plan_key_lists[b];
        for (int k = 0; k < l->n; k++, nrows++) {
            const PlanKey *r = &l->keys[k];
            for (int j = 0; j < k; j++)
                if (!strcmp(l->keys[j].key, r->key)) { printf("# %s.%s: twice\n", l->spelled, r->key); bad++; }
            if (!r->read_by_row) continue;
            char *end;
            bool ok = false;
            /* "" or "required": the block's rules give the default (check_row_keys leaves the field) */
            bool rules_default = !r->dflt[0] || !strcmp(r->dflt, "required");
            switch (r->type) {
            case PK_INT: case PK_INT64: case PK_NUM:
                strtod(r->dflt, &end);
                ok = (rules_default || !*end) && !strncmp(r->row, "PL_", 3);
                break;
            case PK_BOOL: ok = rules_default || !strcmp(r->dflt, "true") || !strcmp(r->dflt, "false"); break;
            case PK_SIZE: ok = !r->dflt[0] && !strncmp(r->row, "PL_", 3); break;
            case PK_ENUM:
                ok = concept_names(r->row) && (rules_default || plan_vocab_find(concept_names(r->row), r->dflt) == 0);
                break;
            default: break;
            }
            if (!ok) { printf("# %s.%s: read by its row, but TYPE, ROW or DEFAULT \"%s\" does not fit\n", l->spelled, r->key, r->dflt); bad++; }
        }
    }
#define CONCEPT(name, rows, llm, json, mask) \
    if (!key_row(llm) || strcmp(key_row(llm)->row, #name)) { printf("# concept %s: no key row %s naming it\n", #name, llm); bad++; }
    PLAN_VOCAB_CONCEPTS(CONCEPT)
#undef CONCEPT
#define LLM_CONCEPT(name, rows, llm) \
    if (!key_row(llm) || strcmp(key_row(llm)->row, #name)) { printf("# concept %s: no key row %s naming it\n", #name, llm); bad++; }
    PLAN_VOCAB_LLM_CONCEPTS(LLM_CONCEPT)
#undef LLM_CONCEPT
    for (int i = 0; i < PL_COUNT; i++) {
        const char *llm = plan_limit((PlanLimitId)i)->llm;
        char key[64];
        if (!strcmp(llm, "-")) continue;
        snprintf(key, sizeof key, "%.*s", (int)strcspn(llm, " "), llm);
        if (!key_row(key)) { printf("# limit %s: no key row %s\n", plan_limit((PlanLimitId)i)->key, key); bad++; }
    }
    /* every key limit of plan_keys.h bounds a key: some row names it */
#define KEY_LIMIT(id, kind, min, max, flags, meaning) \
    { \
        bool named = false; \
        for (int b = 0; b < PKB_COUNT; b++) \
            for (int k = 0; k < plan_key_lists[b].n; k++) named |= !strcmp(plan_key_lists[b].keys[k].row, "PL_KEY_" #id); \
        if (!named) { printf("# key limit PL_KEY_%s: no key row names it\n", #id); bad++; } \
    }
    PLAN_KEY_LIMITS(KEY_LIMIT)
#undef KEY_LIMIT
    char what[128];
    snprintf(what, sizeof what, "plan_keys.h: %d rows agree with themselves, plan_vocab.h and plan_limits.h", nrows);
    check(bad == 0 && nrows > 100, what);
}

/* `unit keys`: every row of contract/plan_keys.h, one a line, for
 * tests/frontend/run.sh's docs test (the rows as llmc is built from them,
 * not a second parse of the header): BLOCK KEY JSON, tab-separated. */
static void print_key_rows(void)
{
    for (int b = 0; b < PKB_COUNT; b++)
        for (int k = 0; k < plan_key_lists[b].n; k++)
            printf("%s\t%s\t%s\n", plan_key_lists[b].spelled, plan_key_lists[b].keys[k].key,
                   plan_key_lists[b].keys[k].json);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "keys")) {
        print_key_rows();
        return 0;
    }
    key_rows();
    hosts("hgx[001-032]", 32, "hgx001", "hgx032");
    hosts("hgx[01-04,07]", 5, "hgx01", "hgx07");
    hosts("a,b", 2, "a", "b");
    hosts("localhost", 1, "localhost", "localhost");
    hosts("r[1-2]n[1-3]", 6, "r1n1", "r2n3");
    hosts("n[8-10]", 3, "n8", "n10");
    hosts("gpu-[1-2].ib,login", 3, "gpu-1.ib", "login");
    hosts("n[000001-100000]", 100000, "n000001", "n100000");
    hosts_bad("n[5-1]", "backwards");
    hosts_bad("n[1-3],n2", "appears twice");
    hosts_bad("n[1-", "unclosed");
    hosts_bad("n[0-1999999]", "more than 1000000");
    hosts_bad("a,", "ends with ','");
    hosts_bad("n[a-b]", "malformed");
    hosts_bad("n[1][2][3][4][5][6][7][8][9]", "more than 8");
    hosts("a[1-2]b[1-2]c[1-2]d[1-2]e[1-2]f[1-2]g[1-2]h[1-2]", 256, "a1b1c1d1e1f1g1h1", "a2b2c2d2e2f2g2h2");
    hosts_bad("n[1-9][1-9][1-9][1-9][1-9][1-9][1-9][1-9]", "more than 1000000");

    check(gpu_catalog_count() >= 6, "catalogue has at least 6 GPUs");
    const char *need[] = {"A100_40GB", "A100_80GB", "H100_80GB", "H200_141GB", "B200", "L40S"};
    for (int i = 0; i < 6; i++) {
        const GpuSpec *g = gpu_catalog_find(need[i]);
        char what[128];
        snprintf(what, sizeof what, "catalogue: %s is sane", need[i]);
        check(g && g->usable_bytes < g->mem_bytes && g->usable_bytes > 0.9 * g->mem_bytes && g->bf16_tflops > 100 &&
              g->hbm_tbps > 0.5 && g->default_mfu > 0.2 && g->default_mfu < 0.7 && g->gres_type[0] >= 'a',
              what);
    }
    check(fabs(gpu_catalog_find("H100_80GB")->usable_bytes / 1073741824.0 - 79.6) < 0.05, "H100 usable is 79.6 GiB");
    check(gpu_catalog_find("H100") == NULL && gpu_catalog_at(-1) == NULL && gpu_catalog_at(99) == NULL,
          "catalogue rejects unknown names and indexes");

    const char *keys[] = {"epochs", "context", "max_steps"};
    check(did_you_mean("epoch", keys, 3) && strcmp(did_you_mean("epoch", keys, 3), "epochs") == 0, "did you mean epochs");
    check(did_you_mean("zzzzzz", keys, 3) == NULL, "no suggestion for a far word");
    check(did_you_mean("CONTEXT", keys, 3) && strcmp(did_you_mean("CONTEXT", keys, 3), "context") == 0, "case-insensitive");

    char *h = render("job j {\n\tnodes = \"x\"\n}\n", DIAG_FMT_HUMAN);
    check(strstr(h, "t.llm:2:10: error: 'nodes' must be an integer, found a string\n") != NULL, "human: header line");
    check(strstr(h, "    2 | \tnodes = \"x\"\n      | \t        ^~~\n") != NULL, "human: gutter, tab kept in caret line");
    free(h);
    char *j = render("job j {\n  nodes = \"x\"\n}\n", DIAG_FMT_JSON);
    check(strstr(j, "\"summary\":\t\"'nodes' must be an integer, found a string\"") != NULL, "json: summary");
    check(strstr(j, "\"start\":\t{\n\t\t\t\t\"line\":\t2,\n\t\t\t\t\"column\":\t11") != NULL, "json: range start");
    free(j);
    char *u = render("job j { nodes = 1 time = 1 h run = r cluster = c }\n# caf\xc3\xa9\n", DIAG_FMT_HUMAN);
    check(strstr(u, "undefined train 'r'") && strstr(u, "undefined cluster 'c'"), "two errors in one run");
    free(u);

    {
        Diags *dd = diags_new();
        Plan *pl = checked_plan("o.llm", "train t { stage = pt model = m data = [x] context = 8 batch = 1 per gpu lr = 0.1 }\n",
                                dd);
        check(pl->ntrains == 1 && strcmp(pl->trains[0]->output_dir, "runs/t") == 0, "output defaults to runs/NAME");
        check(pl->trains[0]->packing && pl->trains[0]->epochs == 1.0 && pl->trains[0]->checkpoint_every_seconds == 1800 &&
              pl->trains[0]->checkpoint_keep == 2 && pl->trains[0]->grad_accum == 1 && pl->trains[0]->seed == 42,
              "train defaults: packing for pt, 1 epoch, checkpoint every 30 min, keep 2");
        diags_free(dd);
        plan_free(pl);
    }

    {
        /* precision = pure_bf16 is its own value, accepted for LLaMA-Factory without ZeRO */
        Diags *dd = diags_new();
        Plan *pl = checked_plan("p.llm",
                                "train t { stage = pt model = m data = [x] context = 8 batch = 1 per gpu lr = 0.1\n"
                                "  precision = pure_bf16 backend = llamafactory }\n", dd);
        bool pure = pl->ntrains == 1 && pl->trains[0]->precision == PREC_PURE_BF16;
        char *shown = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&shown, &n);
        diags_render(dd, f, DIAG_FMT_HUMAN, 0);
        fclose(f);
        check(pure && !strstr(shown, "precision"), "precision = pure_bf16 parses to PREC_PURE_BF16, no diagnostic on it");
        free(shown);
        diags_free(dd);
        plan_free(pl);
    }

    Diags *d = diags_new();
    Plan *p = frontend_load("examples/qwen72b_sft.llm", d);
    check(p && diags_error_count(d) == 0, "frontend_load: qwen72b_sft has no errors");
    if (p && p->njobs == 1 && p->ntrains == 1 && p->nclusters == 1) {
        const PlanJob *job = p->jobs[0];
        const PlanTrain *t = job->run;
        check(job->cluster->nhosts == 32 && strcmp(job->cluster->hosts[31], "hgx032") == 0, "hosts expanded");
        check(job->cluster->gpus_per_node == 8 && job->tasks_per_node == 8 && job->cpus_per_task == 28, "tasks and cpus per task");
        check(job->cluster->memory_bytes == 2ull << 40, "2 TiB is binary");
        check(job->time_seconds == 48 * 3600.0, "48 h in seconds");
        check(t->micro_batch == 4 && fabs(t->warmup_ratio - 0.03) < 1e-12 && t->lr == 1e-5, "batch, warmup, lr");
        check(t->model->head_dim == 128 && t->model->qkv_bias && !t->model->qk_norm, "derived model fields");
        check(t->ndata == 1 && t->data[0]->samples == 37123 && strcmp(t->data[0]->tags.assistant, "assistant") == 0,
              "dataset fields");
        check(t->shard == SHARD_ZERO3 && t->recompute == RECOMPUTE_FULL && t->precision == PREC_BF16, "enums");
    } else {
        check(0, "frontend_load: plan shape");
    }
    plan_free(p);
    diags_free(d);
    d = diags_new();
    p = frontend_load("examples/qwen32b_pt.llm", d);
    check(p && p->ndatasets == 1 && p->datasets[0]->size_bytes == 48740000000ull, "48.74 GB is SI");
    plan_free(p);
    diags_free(d);
    d = diags_new();
    check(frontend_load("/nonexistent/plan.llm", d) == NULL && diags_error_count(d) == 1, "frontend_load: NULL on I/O failure");
    diags_free(d);

    /* the cap: DIAG_MAX_SHOWN kept and shown, the rest counted */
    d = diags_new();
    SrcRange at = {{"cap.llm", 1, 1}, {"cap.llm", 1, 2}};
    int nulls = 0;
    for (int i = 0; i < 250; i++) {
        at.start.line = at.end.line = i + 1;
        Diag *g = diag_error(d, at, "error %d", i);
        diag_note(g, "a note");   /* NULL past the cap: ignored */
        nulls += g == NULL;
    }
    diag_warning(d, at, "one warning");
    check(diags_error_count(d) == 250 && diags_warning_count(d) == 1 && nulls == 250 - DIAG_MAX_SHOWN && diags_full(d),
          "diagnostics past the cap are counted, not kept");
    char *buf = NULL;
    size_t blen = 0;
    FILE *mem = open_memstream(&buf, &blen);
    diags_render(d, mem, DIAG_FMT_HUMAN, 0);
    fclose(mem);
    int shown = 0;
    for (char *q = buf; (q = strstr(q, ": error: ")); q++) shown++;
    check(shown == DIAG_MAX_SHOWN && strstr(buf, "error 99\n") && !strstr(buf, "error 100\n") &&
          strstr(buf, "llmc: note: 150 more errors not shown") && strstr(buf, "one warning"),
          "the first 100 errors and a count of the rest");
    free(buf);
    diags_free(d);

    /* one escaping helper for every message */
    char *e = diag_escape("a\x1b[2Jb\xc2\x9b" "c\xff\x7f\td\xc3\xa9");
    check(strcmp(e, "a\\x1b[2Jb\\u{9b}c\\xff\\x7f\td\xc3\xa9") == 0, "diag_escape: C0, C1, DEL and bad bytes escaped; tab and UTF-8 kept");
    free(e);
    return failures ? 1 : 0;
}
