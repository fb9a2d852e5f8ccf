/* plan.c — load and check plan.json for the trainer (plan.h). */
#include "plan.h"
#include "args.h"

#include "json_stream.h"   /* open_regular_file */
#include "log.h"
#include "plan_limits.h"   /* contract/: the limits llmc checks with */
#include "path_policy.h"   /* contract/: where a run may write, as llmc checks it */

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reader's state for one plan file. Every getter below records the first refusal here and returns a harmless
 * default, so a section is read to its end without a check after each key; the caller tests `failed` once. */
typedef struct {
    const char *file;
    char *err;
    size_t errlen;
    int failed;
    char elem[32];      /* "datasets[3]": the element being read, for rows of "datasets" */
} Ctx;


/* Refuse the plan at KEY (a dotted plan.json path, "train.lr"): "FILE: KEY: message" into c->err. */
static void fail(Ctx *c, const char *key, const char *fmt, ...)
{
    if (c->failed) return;    /* the first error is the one reported */
    c->failed = 1;
    /* the message quotes plan values: control characters in them (a C1
     * U+0085 in a path) are escaped, never sent to the terminal raw */
    char raw[2048];
    int n = snprintf(raw, sizeof raw, "%s: %s: ", c->file, key);
    if (n < 0 || (size_t)n >= sizeof raw) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw + n, sizeof raw - (size_t)n, fmt, ap);
    va_end(ap);
    log_escape(c->err, c->errlen, raw, strlen(raw));
}

/* OBJ's member KEY, or NULL with "SECT.KEY: missing key" recorded (SECT NULL: a top-level key). For required
 * keys; a key that plans written before it lack goes through opt_enum/opt_bool, which look first. */
static cJSON *member(Ctx *c, const cJSON *obj, const char *sect, const char *key)
{
    char path[128];
    snprintf(path, sizeof path, "%s%s%s", sect ? sect : "", sect ? "." : "", key);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) fail(c, path, "missing key");
    return v;
}

/* A top-level section; NULL (recorded) when missing or not an object. */
static cJSON *get_obj(Ctx *c, const cJSON *obj, const char *key)
{
    cJSON *v = member(c, obj, NULL, key);
    if (v && !cJSON_IsObject(v)) { fail(c, key, "expected an object"); return NULL; }
    return v;
}

/* A string; NULL (without error) when null and nullable.
 * The string is a malloc'd copy the caller frees; "" is refused like a wrong type. */
static char *get_str(Ctx *c, const cJSON *obj, const char *sect, const char *key, int nullable)
{
    cJSON *v = member(c, obj, sect, key);
    char path[128];
    snprintf(path, sizeof path, "%s.%s", sect, key);
    if (!v) return NULL;
    if (cJSON_IsNull(v) && nullable) return NULL;
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        fail(c, path, nullable ? "expected a string or null" : "expected a non-empty string");
        return NULL;
    }
    return strdup(v->valuestring);
}

/* A path the plan names (a model, tokenizer or data file; a directory the
 * run writes): a string with no control character, C1 included, as llmc's
 * checker refuses it (contract/plan_limits.h, plan_control_char_at). */
static char *get_path(Ctx *c, const cJSON *obj, const char *sect, const char *key, int nullable)
{
    char *v = get_str(c, obj, sect, key, nullable);
    long at = v ? plan_control_char_at(v) : -1;
    if (at >= 0) {
        char path[128], ch[16];
        snprintf(path, sizeof path, "%s.%s", sect, key);
        fail(c, path, "contains a control character (%s at offset %ld)", plan_control_char_name(v, at, ch), at);
        free(v);
        return NULL;
    }
    return v;
}

/* A number checked against its row of the contract (contract/plan_limits.h):
 * the same limits llmc's checker applies. if_null when null and nullable,
 * and after a refusal too: the caller reads on, Ctx holds the message. */
static double get_lim(Ctx *c, const cJSON *obj, PlanLimitId id, double if_null)
{
    const PlanLimit *l = plan_limit(id);
    int nullable = (l->flags & PLAN_NULLABLE) != 0;
    /* a datasets row is named by its element in messages: "datasets[3].samples" */
    const char *sect = strcmp(l->sect, "datasets") ? l->sect : c->elem;
    cJSON *v = member(c, obj, sect, l->key);
    char path[128];
    snprintf(path, sizeof path, "%s.%s", sect, l->key);
    if (!v) return if_null;
    if (cJSON_IsNull(v) && nullable) return if_null;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        fail(c, path, nullable ? "expected a number or null" : "expected a number");
        return if_null;
    }
    double x = v->valuedouble;
    /* 2: not an integer; 3: below the minimum; 4: above the maximum (1, not finite, is caught above) */
    int why = plan_limit_violation(l, x);
    if (why == 2) {
        fail(c, path, "expected an integer, got %.17g", x);
        return if_null;
    }
    if (why) {
        char bound[32];
        snprintf(bound, sizeof bound, l->kind == PLAN_INT ? "%.0f" : "%.17g", why == 3 ? l->min : l->max);
        fail(c, path, "must be %s %s (%s), found %.17g", plan_limit_bound_word(l, why), bound, l->meaning, x);
        return if_null;
    }
    return x;
}

/* A required bool; false (with the failure recorded) when missing or not true/false. */
static int get_bool(Ctx *c, const cJSON *obj, const char *sect, const char *key)
{
    cJSON *v = member(c, obj, sect, key);
    char path[128];
    snprintf(path, sizeof path, "%s.%s", sect, key);
    if (v && !cJSON_IsBool(v)) fail(c, path, "expected true or false");
    return cJSON_IsTrue(v);
}

/* val looked up in a concept's plan.json spellings (contract/plan_vocab.h,
 * the rows llmc wrote it from): its enum value, or -1 with the words this
 * trainer takes (the rows in accept, a mask of PLAN_VOCAB_BIT) named. */
static int one_of(Ctx *c, const char *sect, const char *key, const char *val, const char *const *names,
                  unsigned accept)
{
    /* VAL NULL: the getter has recorded why already */
    if (!val) return -1;
    int k = plan_vocab_find(names, val);
    if (k >= 0 && (accept & PLAN_VOCAB_BIT(k))) return k;
    /* LIST: the accepted spellings, comma-separated, for the message (strncat cuts a longer list) */
    char path[128], list[256] = "";
    snprintf(path, sizeof path, "%s%s%s", sect, sect[0] ? "." : "", key);
    for (int i = 0, n = 0; names[i]; i++) {
        if (!(accept & PLAN_VOCAB_BIT(i))) continue;
        strncat(list, n++ ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, names[i], sizeof list - strlen(list) - 1);
    }
    fail(c, path, "'%s' is not one of %s", val, list);
    return -1;
}

/* A required enum key: its value, dflt (with the failure recorded) when
 * missing, not a string, or not one of the accepted words. */
static int req_enum(Ctx *c, const cJSON *obj, const char *sect, const char *key, const char *const *names,
                    unsigned accept, int dflt)
{
    char *v = get_str(c, obj, sect, key, 0);
    int k = one_of(c, sect, key, v, names, accept);
    free(v);
    return k < 0 ? dflt : k;
}

/* An optional enum key: the index of its spelling in names, dflt when absent. */
static int opt_enum(Ctx *c, const cJSON *obj, const char *sect, const char *key, const char *const *names, int dflt)
{
    if (!cJSON_GetObjectItemCaseSensitive(obj, key)) return dflt;
    return req_enum(c, obj, sect, key, names, PLAN_VOCAB_ALL_ROWS, dflt);
}

/* An optional bool key: dflt when absent (plans written before it). */
static int opt_bool(Ctx *c, const cJSON *obj, const char *sect, const char *key, int dflt)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key) ? get_bool(c, obj, sect, key) : dflt;
}

/* A directory the trainer writes (and rotates checkpoints) in.
 * DIR NULL: the key was missing or not a string, which the getter has already recorded. */
static void check_write_dir(Ctx *c, const char *key, const char *dir)
{
    const char *why = dir ? plan_write_dir_problem(dir) : NULL;
    if (why) fail(c, key, "'%s' %s", dir, why);
}

/* A string member that may be null; a control character in it is refused
 * (it would reach the terminal and the shards' metadata raw). */
static void check_text(Ctx *c, const cJSON *obj, const char *sect, const char *key)
{
    char path[128];
    snprintf(path, sizeof path, "%s.%s", sect, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return;
    if (!cJSON_IsString(v)) { fail(c, path, "expected a string or null"); return; }
    long at = plan_control_char_at(v->valuestring);
    char ch[16];
    if (at >= 0)
        fail(c, path, "contains a control character (%s at offset %ld)", plan_control_char_name(v->valuestring, at, ch), at);
}

char *run_plan_resolve(const RunPlan *p, const char *rel)
{
    if (!rel) return NULL;
    if (rel[0] == '/' || !p->dir) return strdup(rel);
    size_t n = strlen(p->dir) + strlen(rel) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", p->dir, rel);
    return s;
}

/* datasets[]: what llmc's checker also refuses (file type for the llmc
 * trainer, counts, control characters in names). Absent in hand-written plans
 * that only `run` prepared shards. */
static void check_datasets(Ctx *c, const cJSON *ds, int llmc_backend)
{
    if (!ds) return;
    if (!cJSON_IsArray(ds)) { fail(c, "datasets", "expected an array"); return; }
    int i = 0;
    for (const cJSON *d = ds->child; d && !c->failed; d = d->next, i++) {
        snprintf(c->elem, sizeof c->elem, "datasets[%d]", i);
        if (!cJSON_IsObject(d)) { fail(c, c->elem, "expected an object"); return; }
        char *file = get_path(c, d, c->elem, "file", 0);
        if (file && llmc_backend && !plan_llmc_reads_dataset(file)) {
            char path[64];
            snprintf(path, sizeof path, "%s.file", c->elem);
            fail(c, path, "'%s': the llmc trainer reads .json and .jsonl files only (backend llamafactory reads Parquet)",
                 file);
        }
        free(file);
        check_text(c, d, c->elem, "name");
        static const char *const subs[] = {"columns", "tags"};
        for (int k = 0; k < 2; k++) {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(d, subs[k]);
            if (!o || cJSON_IsNull(o)) continue;
            char sect[64];
            snprintf(sect, sizeof sect, "%s.%s", c->elem, subs[k]);
            if (!cJSON_IsObject(o)) { fail(c, sect, "expected an object"); continue; }
            for (const cJSON *f = o->child; f; f = f->next) check_text(c, o, sect, f->string);
        }
        get_lim(c, d, PL_DATASET_SAMPLES, -1);
        get_lim(c, d, PL_DATASET_SIZE, -1);
        get_lim(c, d, PL_DATASET_TOKENS, -1);
    }
}

/* "finetune" (optional: absent means full training, as in plans written before it). */
static void read_finetune(Ctx *c, const cJSON *root, RunFinetune *ft, const ModelConfig *mc)
{
    memset(ft, 0, sizeof *ft);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "finetune");
    if (!f) return;
    if (!cJSON_IsObject(f)) { fail(c, "finetune", "expected an object"); return; }
    ft->method = (FinetuneMethod)req_enum(c, f, "finetune", "method", method_json_names, PLAN_VOCAB_ALL_ROWS, METHOD_FULL);
    ft->lora_rank = (int)get_lim(c, f, PL_FINETUNE_LORA_RANK, 0);
    ft->lora_alpha = (int)get_lim(c, f, PL_FINETUNE_LORA_ALPHA, 0);
    ft->lora_dropout = get_lim(c, f, PL_FINETUNE_LORA_DROPOUT, 0);
    ft->rslora = get_bool(c, f, "finetune", "rslora");
    ft->freeze_layers = (int)get_lim(c, f, PL_FINETUNE_FREEZE_LAYERS, 0);
    if (!c->failed && ft->method == METHOD_FREEZE && (ft->freeze_layers == 0 || abs(ft->freeze_layers) > mc->layers))
        fail(c, "finetune.freeze_layers", "%d is not a number of trainable layers (1..%d, or -1..-%d for the first)",
             ft->freeze_layers, mc->layers, mc->layers);
    const cJSON *t = member(c, f, "finetune", "lora_target");
    if (c->failed) return;
    if (!cJSON_IsArray(t) || !t->child) { fail(c, "finetune.lora_target", "expected a non-empty array of module names"); return; }
    for (const cJSON *e = t->child; e; e = e->next) {
        int m = cJSON_IsString(e) ? one_of(c, "finetune", "lora_target", e->valuestring, lora_module_json_names, PLAN_VOCAB_ALL_ROWS) : -1;
        /* m is -1 only when a failure was just recorded, so the shift below never sees it */
        if (!cJSON_IsString(e)) fail(c, "finetune.lora_target", "expected module names (strings)");
        if (c->failed) return;
        ft->lora_targets |= 1u << m;
    }
}

/* A column or tag of datasets[i]: its string, or NULL when null or absent.
 * The string is malloc'd (freed by free_datasets). NEEDED: FORMAT reads this field, so its absence is a refusal. */
static char *spec_field(Ctx *c, const cJSON *d, const char *sub, const char *key, int needed, const char *format)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(d, sub);
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (cJSON_IsString(v) && v->valuestring[0]) return strdup(v->valuestring);
    if (needed) {
        char path[96];
        snprintf(path, sizeof path, "%s.%s.%s", c->elem, sub, key);
        fail(c, path, "format %s reads this %s; expected a non-empty string (llmc writes LLaMA-Factory's default)",
             format, !strcmp(sub, "columns") ? "column" : "tag");
    }
    return NULL;
}

/* datasets[] as `prepare` reads them (after check_datasets): at least one, each
 * with its file resolved, a format the stage takes, and the columns and tags
 * that format reads. The compiler writes LLaMA-Factory's defaults into the
 * plan, so nothing is filled in here. */
static void load_datasets(Ctx *c, RunPlan *p, const cJSON *ds, int pretrain)
{
    int n = cJSON_IsArray(ds) ? cJSON_GetArraySize(ds) : 0;
    if (n == 0) { fail(c, "datasets", "expected at least one dataset"); return; }
    p->datasets = calloc((size_t)n, sizeof *p->datasets);
    if (!p->datasets) { fail(c, "datasets", "out of memory"); return; }
    int i = 0;
    for (const cJSON *d = ds->child; d && !c->failed; d = d->next, i++) {
        /* counted before it is filled: calloc zeroed it, so run_plan_free frees a half-read element too */
        DatasetSpec *s = &p->datasets[p->n_datasets++];
        snprintf(c->elem, sizeof c->elem, "datasets[%d]", i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(d, "name");
        /* for messages; check_datasets has refused a control character in it */
        s->name = strdup(cJSON_IsString(name) ? name->valuestring : "?");
        char *file = get_path(c, d, c->elem, "file", 0);
        s->file = run_plan_resolve(p, file);
        free(file);
        int f = req_enum(c, d, c->elem, "format", format_json_names, PLAN_VOCAB_ALL_ROWS, -1);
        /* which columns and tags are needed depends on the format */
        if (f < 0) return;
        s->format = (DataFormat)f;
        if (s->format != FORMAT_TEXT && pretrain)
            fail(c, c->elem, "dataset %s: a pt plan takes format text", s->name);
        if (s->format == FORMAT_TEXT && !pretrain)
            fail(c, c->elem, "dataset %s: format text is for pt plans; sft needs sharegpt or alpaca", s->name);
        const char *fn = format_json_names[f];
        int sg = s->format == FORMAT_SHAREGPT, al = s->format == FORMAT_ALPACA;
        s->messages = spec_field(c, d, "columns", "messages", sg, fn);
        s->system = spec_field(c, d, "columns", "system", 0, fn);
        s->tools = spec_field(c, d, "columns", "tools", 0, fn);
        s->prompt = spec_field(c, d, "columns", "prompt", al, fn);
        s->query = spec_field(c, d, "columns", "query", 0, fn);
        s->response = spec_field(c, d, "columns", "response", al, fn);
        s->history = spec_field(c, d, "columns", "history", 0, fn);
        s->text = spec_field(c, d, "columns", "text", s->format == FORMAT_TEXT, fn);
        s->role = spec_field(c, d, "tags", "role", sg, fn);
        s->content = spec_field(c, d, "tags", "content", sg, fn);
        s->user = spec_field(c, d, "tags", "user", sg, fn);
        s->assistant = spec_field(c, d, "tags", "assistant", sg, fn);
        s->observation = spec_field(c, d, "tags", "observation", 0, fn);
        s->function = spec_field(c, d, "tags", "function", 0, fn);
        s->system_tag = spec_field(c, d, "tags", "system", 0, fn);
    }
}

/* Every string load_datasets may have set; NULL members (unset tags) are fine for free. */
static void free_datasets(RunPlan *p)
{
    for (size_t i = 0; i < p->n_datasets; i++) {
        DatasetSpec *d = &p->datasets[i];
        char *all[] = {d->name, d->file, d->messages, d->system, d->tools, d->prompt, d->query, d->response,
                       d->history, d->text, d->role, d->content, d->user, d->assistant, d->observation,
                       d->function, d->system_tag};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]);
    }
    free(p->datasets);
}

/* The whole plan file, NUL-terminated and malloc'd, or NULL with the message in err. The buffer starts at 64 KiB
 * (a plan.json is a few KiB) and doubles; a file past 64 MiB is refused, which bounds the memory a wrong file
 * (a dataset given as the plan) can take. A short read means end of file; ferror tells it from a read error. */
static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = open_regular_file(path, "plan file", err, errlen);   /* a FIFO must not block */
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        /* a short read: the end of the file (or an error, which ferror tells below) */
        if (len < cap - 1) break;
        if (cap > (64u << 20)) { free(buf); buf = NULL; snprintf(err, errlen, "%s: larger than 64 MiB", path); fclose(f); return NULL; }
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) { free(buf); snprintf(err, errlen, "%s: cannot read", path); return NULL; }
    buf[len] = 0;
    return buf;
}

/* Read and parse path into p->json, then the top level every reader checks:
 * the version, job, stage and backend. *llmc_backend: backend absent or "llmc". */
static void open_plan(Ctx *c, RunPlan *p, const char *path, int *llmc_backend)
{
    memset(p, 0, sizeof *p);
    /* -1: no model.vocab to check the tokenizer against (prepare of a plan with no model) */
    p->model_vocab = -1;
    *llmc_backend = 1;
    char *text = read_file(path, c->err, c->errlen);
    if (!text) { c->failed = 1; return; }
    const char *end = NULL;
    /* require_null_terminated = 1: anything after the top-level value is an error, not ignored */
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        /* cJSON points at the failure; give line and column */
        const char *at = end ? end : text;
        int line = 1, col = 1;
        for (const char *s = text; s < at && *s; s++) { if (*s == '\n') { line++; col = 1; } else col++; }
        snprintf(c->err, c->errlen, "%s:%d:%d: invalid JSON", path, line, col);
        c->failed = 1;
        free(text);
        return;
    }
    free(text);
    p->json = root;
    p->path = strdup(path);
    const char *slash = strrchr(path, '/');
    /* the directory plan-relative paths resolve against: "/plan.json" gives "/", "plan.json" gives "." */
    p->dir = slash ? strndup(path, (size_t)(slash - path == 0 ? 1 : slash - path)) : strdup(".");

    if (!cJSON_IsObject(root)) { fail(c, "(top level)", "expected an object"); return; }
    /* the version first: nothing else is read from a plan of another version */
    cJSON *ver = member(c, root, NULL, "llmc_plan_version");
    if (ver && (!cJSON_IsNumber(ver) || ver->valuedouble != RUN_PLAN_VERSION)) {
        if (cJSON_IsNumber(ver))
            fail(c, "llmc_plan_version", "this llmc-train reads version %d; the plan is version %g",
                 RUN_PLAN_VERSION, ver->valuedouble);
        else
            fail(c, "llmc_plan_version", "expected the number %d", RUN_PLAN_VERSION);
        return;
    }
    cJSON *jj = member(c, root, NULL, "job");
    if (jj && !cJSON_IsString(jj)) fail(c, "job", "expected a string");
    else if (jj) p->job = strdup(jj->valuestring);
    cJSON *st = member(c, root, NULL, "stage");
    if (st && !cJSON_IsString(st)) fail(c, "stage", "expected a string");
    else if (st) {
        /* LLMC_TRAIN_STAGE: the stages this trainer runs; a known stage it does not run is refused by name */
        int k = one_of(c, "", "stage", st->valuestring, stage_json_names, LLMC_TRAIN_STAGE);
        p->stage = k < 0 ? STAGE_SFT : (TrainStage)k;
    }

    /* backend: absent in hand-written plans means llmc */
    cJSON *be = cJSON_GetObjectItemCaseSensitive(root, "backend");
    if (be && !cJSON_IsString(be)) fail(c, "backend", "expected a string");
    else if (be) {
        int k = one_of(c, "", "backend", be->valuestring, backend_json_names, PLAN_VOCAB_ALL_ROWS);
        p->backend = k < 0 ? BACKEND_LLMC : (PlanBackend)k;
        *llmc_backend = p->backend == BACKEND_LLMC;
    }
}

/* tokenizer.path and .template; data.context, .packing, .train_on_prompt,
 * .mask_history and .shards_dir: what both `run` and `prepare` read. The two
 * masking switches as LLaMA-Factory allows them: sft only, not both. */
static void read_tokenizer_and_data(Ctx *c, RunPlan *p, const cJSON *tk, const cJSON *da)
{
    char *tp = get_path(c, tk, "tokenizer", "path", 1);
    p->tokenizer_path = run_plan_resolve(p, tp);
    free(tp);
    p->template_ = get_str(c, tk, "tokenizer", "template", 1);

    p->context = (int)get_lim(c, da, PL_DATA_CONTEXT, 0);
    p->packing = get_bool(c, da, "data", "packing");
    p->train_on_prompt = opt_bool(c, da, "data", "train_on_prompt", 0);
    p->mask_history = opt_bool(c, da, "data", "mask_history", 0);
    if (p->train_on_prompt && p->mask_history)
        fail(c, "data.mask_history", "cannot be true together with data.train_on_prompt");
    else if ((p->train_on_prompt || p->mask_history) && p->stage != STAGE_SFT)
        fail(c, p->train_on_prompt ? "data.train_on_prompt" : "data.mask_history", "is only for stage \"%s\", not \"%s\"",
             stage_json_names[STAGE_SFT], stage_json_names[p->stage]);
    char *sd = get_path(c, da, "data", "shards_dir", 0);
    p->shards_dir = run_plan_resolve(p, sd);
    free(sd);
}

/* "model": name, arch, path (resolved against the plan's directory), init
 * and the shape into p->model, checked as a whole by model_config_check. */
static void read_model(Ctx *c, RunPlan *p, const cJSON *m)
{
    p->model_name = get_str(c, m, "model", "name", 0);
    int a = req_enum(c, m, "model", "arch", arch_json_names, LLMC_TRAIN_ARCH, ARCH_LLAMA);
    char *mp = get_path(c, m, "model", "path", 1);
    p->model_path = run_plan_resolve(p, mp);
    free(mp);
    p->init = (ModelInit)req_enum(c, m, "model", "init", init_json_names, PLAN_VOCAB_ALL_ROWS, INIT_PRETRAINED);
    ModelConfig *mc = &p->model;
    mc->arch = (ModelArch)a;
    mc->layers = (int)get_lim(c, m, PL_MODEL_LAYERS, 0);
    mc->hidden = (int)get_lim(c, m, PL_MODEL_HIDDEN, 0);
    mc->heads = (int)get_lim(c, m, PL_MODEL_HEADS, 0);
    mc->kv_heads = (int)get_lim(c, m, PL_MODEL_KV_HEADS, 0);
    mc->head_dim = (int)get_lim(c, m, PL_MODEL_HEAD_DIM, 0);
    mc->ffn = (int)get_lim(c, m, PL_MODEL_FFN, 0);
    mc->vocab = (int)get_lim(c, m, PL_MODEL_VOCAB, 0);
    mc->max_context = (int)get_lim(c, m, PL_MODEL_MAX_CONTEXT, 0);
    mc->rope_theta = get_lim(c, m, PL_MODEL_ROPE_THETA, 0);
    mc->rms_eps = get_lim(c, m, PL_MODEL_RMS_EPS, 0);
    mc->tie_embeddings = get_bool(c, m, "model", "tie_embeddings");
    mc->qkv_bias = get_bool(c, m, "model", "qkv_bias");
    mc->qk_norm = get_bool(c, m, "model", "qk_norm");
    if (!c->failed && p->init == INIT_PRETRAINED && !p->model_path)
        fail(c, "model.path", "init is \"%s\" but path is null", init_json_names[INIT_PRETRAINED]);
    /* the shape as a whole (heads a multiple of kv_heads, an even head_dim for RoPE): the model's own rule */
    char cerr[160];
    if (!c->failed && model_config_check(mc, cerr, sizeof cerr)) fail(c, "model", "%s", cerr);
}

/* "train": length, batch (global = micro x accumulation x data parallel,
 * checked with "parallel"), the schedule (warmup as a ratio or as steps,
 * exactly one), AdamW, precision, the master weights' and optimizer states'
 * formats (absent in plans written before them: fp32), recompute and
 * attention. */
static void read_train(Ctx *c, RunPlan *p, const cJSON *tr)
{
    p->epochs = get_lim(c, tr, PL_TRAIN_EPOCHS, -1);
    p->max_steps = (int64_t)get_lim(c, tr, PL_TRAIN_MAX_STEPS, -1);
    /* -1 is null: one of the two must bound the run */
    if (!c->failed && p->epochs < 0 && p->max_steps < 0) fail(c, "train", "epochs and max_steps are both null");
    p->micro_batch = (int)get_lim(c, tr, PL_TRAIN_MICRO_BATCH, 0);
    p->grad_accum = (int)get_lim(c, tr, PL_TRAIN_GRAD_ACCUM, 0);
    p->global_batch = (int)get_lim(c, tr, PL_TRAIN_GLOBAL_BATCH, 0);
    p->lr = get_lim(c, tr, PL_TRAIN_LR, 0);
    p->min_lr = get_lim(c, tr, PL_TRAIN_MIN_LR, 0);
    if (!c->failed && p->min_lr > p->lr)   /* the schedule would climb from lr to min_lr */
        fail(c, "train.min_lr", "%.17g must not exceed lr (%.17g)", p->min_lr, p->lr);
    p->schedule = (LrScheduleKind)req_enum(c, tr, "train", "schedule", schedule_json_names, LLMC_TRAIN_SCHEDULE, SCHED_COSINE);
    p->warmup_ratio = get_lim(c, tr, PL_TRAIN_WARMUP_RATIO, -1);
    p->warmup_steps = (int64_t)get_lim(c, tr, PL_TRAIN_WARMUP_STEPS, -1);
    if (!c->failed && (p->warmup_ratio < 0) == (p->warmup_steps < 0))
        fail(c, "train.warmup_ratio", "exactly one of warmup_ratio and warmup_steps must be non-null");
    p->weight_decay = get_lim(c, tr, PL_TRAIN_WEIGHT_DECAY, 0);
    p->beta1 = get_lim(c, tr, PL_TRAIN_BETA1, 0);
    p->beta2 = get_lim(c, tr, PL_TRAIN_BETA2, 0);
    p->eps = get_lim(c, tr, PL_TRAIN_EPS, 0);
    p->grad_clip = get_lim(c, tr, PL_TRAIN_GRAD_CLIP, 0);
    p->seed = (uint64_t)get_lim(c, tr, PL_TRAIN_SEED, 0);
    p->precision = (Precision)req_enum(c, tr, "train", "precision", precision_json_names, LLMC_TRAIN_PRECISION, PREC_FP32);
    p->master_weights = (MasterWeights)opt_enum(c, tr, "train", "master_weights", master_weights_json_names, MASTER_FP32);
    p->optimizer_states = (OptimStates)opt_enum(c, tr, "train", "optimizer_states", optimizer_states_json_names,
                                                OSTATES_FP32);
    /* the LM head's GEMMs in FP8 beside the projections': only with fp8, and so by default */
    p->fp8_lm_head = opt_bool(c, tr, "train", "fp8_lm_head", p->precision == PREC_FP8);
    if (!c->failed && p->fp8_lm_head && p->precision != PREC_FP8)
        fail(c, "train.fp8_lm_head", "true needs precision fp8, found %s",
             plan_vocab_name(precision_json_names, PREC_COUNT, p->precision));
    p->recompute = (Recompute)opt_enum(c, tr, "train", "recompute", recompute_json_names, RECOMPUTE_NONE);
    p->attention = (AttentionKind)opt_enum(c, tr, "train", "attention", attention_json_names, ATTN_FLASH);
    p->deterministic = opt_bool(c, tr, "train", "deterministic", 1);
}

/* "parallel": world size, data parallel (at most the world), ZeRO stage,
 * offload; then the global batch against train's three factors. */
static void read_parallel(Ctx *c, RunPlan *p, const cJSON *pa)
{
    p->world_size = (int)get_lim(c, pa, PL_PARALLEL_WORLD, 0);
    p->data_parallel = (int)get_lim(c, pa, PL_PARALLEL_DP, 0);
    p->zero_stage = (int)get_lim(c, pa, PL_PARALLEL_ZERO, 0);
    p->offload = (OffloadKind)opt_enum(c, pa, "parallel", "offload", offload_json_names, OFFLOAD_NONE);
    if (!c->failed && p->data_parallel > p->world_size)
        fail(c, "parallel.data_parallel", "%d exceeds world_size (%d)", p->data_parallel, p->world_size);
    /* in 64 bits: three in-range ints can multiply past INT_MAX */
    if (!c->failed && (int64_t)p->global_batch != (int64_t)p->micro_batch * p->grad_accum * p->data_parallel)
        fail(c, "train.global_batch", "%d is not micro_batch (%d) x grad_accum (%d) x data_parallel (%d)",
             p->global_batch, p->micro_batch, p->grad_accum, p->data_parallel);
}

/* "checkpoint" (a directory this process may write) and "output" (the
 * metrics file inside output.dir unless absolute). */
static void read_checkpoint_and_output(Ctx *c, RunPlan *p, const cJSON *ck, const cJSON *ou)
{
    char *cd = get_path(c, ck, "checkpoint", "dir", 0);
    check_write_dir(c, "checkpoint.dir", cd);
    p->ckpt_dir = run_plan_resolve(p, cd);
    free(cd);
    p->ckpt_every_steps = (int64_t)get_lim(c, ck, PL_CKPT_EVERY_STEPS, -1);
    p->ckpt_every_seconds = get_lim(c, ck, PL_CKPT_EVERY_SECONDS, -1);
    p->ckpt_keep = (int)get_lim(c, ck, PL_CKPT_KEEP, 0);
    p->resume = get_bool(c, ck, "checkpoint", "resume");

    char *od = get_path(c, ou, "output", "dir", 0);
    check_write_dir(c, "output.dir", od);
    p->out_dir = run_plan_resolve(p, od);
    free(od);
    char *mt = get_str(c, ou, "output", "metrics", 0);
    const char *mwhy = mt ? plan_inner_file_problem(mt) : NULL;
    if (mwhy) fail(c, "output.metrics", "'%s' %s", mt, mwhy);
    if (mt && p->out_dir) {
        if (mt[0] == '/') p->metrics_path = strdup(mt);
        else {
            size_t n = strlen(p->out_dir) + strlen(mt) + 2;
            p->metrics_path = malloc(n);
            if (p->metrics_path) snprintf(p->metrics_path, n, "%s/%s", p->out_dir, mt);
        }
    }
    free(mt);
    p->log_every = (int)get_lim(c, ou, PL_OUTPUT_LOG_EVERY, 0);
}

/* plan.json's SECT.KEY as written (for messages), or dflt. */
static const char *written(const RunPlan *p, const char *sect, const char *key, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p->json, sect), key);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

/* The directories of the inputs of a run (contract/path_policy.h's overlap
 * rules): the model (nothing written inside it), the tokenizer, each
 * dataset's directory, the plan's own directory. Up to max; returns how many.
 * dsdirs receives the malloc'd dataset directories (freed by the caller). */
static int run_inputs(const RunPlan *p, const cJSON *ds, PathInput *in, int max, char **dsdirs, int *ndsdirs)
{
    int n = 0;
    *ndsdirs = 0;
    if (p->model_path && n < max)
        in[n++] = (PathInput){"the model directory", written(p, "model", "path", p->model_path), p->model_path,
                              PATH_INPUT_WITHIN};
    if (p->tokenizer_path && n < max)
        in[n++] = (PathInput){"the tokenizer directory", written(p, "tokenizer", "path", p->tokenizer_path),
                              p->tokenizer_path, PATH_INPUT_EQUAL};
    if (p->dir && n < max) in[n++] = (PathInput){"the directory of plan file", p->path, p->dir, PATH_INPUT_EQUAL};
    for (const cJSON *d = cJSON_IsArray(ds) ? ds->child : NULL; d && n < max; d = d->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(d, "file");
        if (!cJSON_IsString(f)) continue;
        char *file = run_plan_resolve(p, f->valuestring);
        if (!file) continue;
        char *slash = strrchr(file, '/');
        if (!slash) strcpy(file, ".");
        else if (slash == file) slash[1] = 0;
        else *slash = 0;
        dsdirs[(*ndsdirs)++] = file;
        in[n++] = (PathInput){"the directory of a dataset file", f->valuestring, file, PATH_INPUT_EQUAL};
    }
    return n;
}

/* Where the run writes (output.dir, checkpoint.dir; prepare: data.shards_dir)
 * against contract/path_policy.h, as llmc check applies it: plan.json may
 * have been edited by hand, and nothing is written before this passes. The
 * model and tokenizer directories must not be the file-system root. */
static void check_run_paths(Ctx *c, const RunPlan *p, const cJSON *ds, int prepare)
{
    if (c->failed) return;
    /* path_policy_output's message quotes up to four paths (the output and an input, each as written and
     * resolved); snprintf cuts what passes 3 x PATH_POLICY_MAX */
    char msg[3 * PATH_POLICY_MAX];
    const char *const insect[] = {"model", "tokenizer"};
    const char *const indir[] = {p->model_path, p->tokenizer_path};
    for (int i = 0; i < 2; i++)
        if (indir[i] && path_policy_input_dir(written(p, insect[i], "path", indir[i]), indir[i], msg, sizeof msg)) {
            fail(c, i ? "tokenizer.path" : "model.path", "%s", msg);
            return;
        }
    /* the model, the tokenizer and the plan directory, then room for 256 dataset directories: run_inputs stops at
     * MAX_IN, so a plan of more datasets has only the first ones' directories checked */
    enum { MAX_IN = 3 + 256 };
    PathInput in[MAX_IN];
    char *dsdirs[MAX_IN];
    int ndsdirs;
    int n = run_inputs(p, ds, in, MAX_IN, dsdirs, &ndsdirs);
    const char *const outkey[] = {"output.dir", "checkpoint.dir", "data.shards_dir"};
    const char *const outdir[] = {prepare ? NULL : p->out_dir, prepare ? NULL : p->ckpt_dir, prepare ? p->shards_dir : NULL};
    for (int i = 0; i < 3 && !c->failed; i++) {
        if (!outdir[i]) continue;
        /* the shards are the plan directory's own (shards/ beside plan.json): only other inputs count */
        int skip_plan_dir = i == 2;
        /* the inputs this output must not overlap */
        PathInput sub[MAX_IN];
        int m = 0;
        for (int k = 0; k < n; k++)
            if (!(skip_plan_dir && in[k].path == p->dir)) sub[m++] = in[k];
        const char *dot = strchr(outkey[i], '.');
        char sect[32];
        /* SECT.KEY split again to find the value as plan.json wrote it */
        snprintf(sect, sizeof sect, "%.*s", (int)(dot - outkey[i]), outkey[i]);
        if (path_policy_output(written(p, sect, dot + 1, outdir[i]), outdir[i], sub, m, msg, sizeof msg))
            fail(c, outkey[i], "%s", msg);
    }
    for (int k = 0; k < ndsdirs; k++) free(dsdirs[k]);
}

/* The plan, section by section (docs/plan.md); every value checked against
 * contract/plan_limits.h as llmc checks it. 0, or -1 with err naming the
 * field (p then holds nothing). */
int run_plan_load(RunPlan *p, const char *path, char *err, size_t errlen)
{
    Ctx c = {path, err, errlen, 0, ""};
    int llmc_backend;
    open_plan(&c, p, path, &llmc_backend);
    if (c.failed) goto done;
    cJSON *root = p->json;
    /* checked, not loaded: `run` trains from the shards prepare wrote; load_datasets is prepare's */
    check_datasets(&c, cJSON_GetObjectItemCaseSensitive(root, "datasets"), llmc_backend);

    cJSON *m = get_obj(&c, root, "model");
    cJSON *tk = get_obj(&c, root, "tokenizer");
    cJSON *da = get_obj(&c, root, "data");
    cJSON *tr = get_obj(&c, root, "train");
    cJSON *pa = get_obj(&c, root, "parallel");
    cJSON *ck = get_obj(&c, root, "checkpoint");
    cJSON *ou = get_obj(&c, root, "output");
    if (c.failed) goto done;

    /* model before finetune: freeze_layers is checked against model.layers, and only once the model passed */
    read_model(&c, p, m);
    read_tokenizer_and_data(&c, p, tk, da);
    /* as llmc's checker (check_train_model_rules): no sequence longer than the model takes */
    if (!c.failed && p->context > p->model.max_context)
        fail(&c, "data.context", "%d exceeds model.max_context (%d)", p->context, p->model.max_context);
    read_train(&c, p, tr);
    read_parallel(&c, p, pa);
    if (!c.failed) read_finetune(&c, root, &p->ft, &p->model);
    read_checkpoint_and_output(&c, p, ck, ou);
    /* last: the overlap rules need every path read and resolved */
    check_run_paths(&c, p, cJSON_GetObjectItemCaseSensitive(root, "datasets"), 0);
done:
    if (c.failed) { run_plan_free(p); return -1; }
    return 0;
}

int run_plan_load_data(RunPlan *p, const char *path, char *err, size_t errlen)
{
    Ctx c = {path, err, errlen, 0, ""};
    int llmc_backend;
    open_plan(&c, p, path, &llmc_backend);
    if (c.failed) goto done;
    const cJSON *root = p->json;
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(root, "datasets");
    check_datasets(&c, ds, llmc_backend);
    if (!c.failed) load_datasets(&c, p, ds, p->stage == STAGE_PT);
    /* model.vocab, when the plan has a model: the tokenizer must not exceed it */
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *mv = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    if (!c.failed && mv) p->model_vocab = (int64_t)get_lim(&c, m, PL_MODEL_VOCAB, -1);
    cJSON *tk = get_obj(&c, root, "tokenizer");
    cJSON *da = get_obj(&c, root, "data");
    if (c.failed) goto done;
    read_tokenizer_and_data(&c, p, tk, da);
    if (!c.failed && !p->tokenizer_path) fail(&c, "tokenizer.path", "preparing data needs the tokenizer; expected a string");
    p->bad_records = (BadRecordPolicy)req_enum(&c, da, "data", "on_bad_record", bad_records_json_names, PLAN_VOCAB_ALL_ROWS,
                                               BADREC_FAIL);
    check_run_paths(&c, p, ds, 1);
done:
    if (c.failed) { run_plan_free(p); return -1; }
    return 0;
}

void run_plan_free(RunPlan *p)
{
    char *all[] = {p->path, p->dir, p->job, p->model_name, p->model_path,
                   p->tokenizer_path, p->template_, p->shards_dir, p->ckpt_dir,
                   p->out_dir, p->metrics_path};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free_datasets(p);
    cJSON_Delete(p->json);
    memset(p, 0, sizeof *p);
}

int run_plan_tokenizer_check(const RunPlan *p, int strict, char *why, size_t n)
{
    const char *t = p->tokenizer_path;
    if (!t) return 0;
    /* messages quote the path as plan.json spells it; the checks use it resolved against the plan's directory */
    const char *value = written(p, "tokenizer", "path", t);
    struct stat st;
    if (stat(t, &st) != 0) {
        int e = errno;
        if (!strict && e == ENOENT) {
            /* checkable here when the directory that would hold it is readable here */
            char *dir = strdup(t);
            char *slash = dir ? strrchr(dir, '/') : NULL;
            /* "/tok" has "/" for its directory, not "" */
            if (slash) *(slash == dir ? slash + 1 : slash) = 0;
            const char *parent = !dir ? NULL : slash ? dir : ".";
            struct stat ps;
            int here = parent && stat(parent, &ps) == 0 && S_ISDIR(ps.st_mode) && access(parent, R_OK | X_OK) == 0;
            if (here)
                snprintf(why, n, "\"%s\" does not exist (its directory \"%s\" is readable here); the run exports "
                         "the tokenizer's files with the model", value, parent);
            free(dir);
            if (here) return 1;
        }
        snprintf(why, n, "\"%s\": %s", value, strerror(e));
        return strict ? 1 : 2;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, n, "\"%s\" is not a directory; the run exports the tokenizer's files (tokenizer.json, "
                 "tokenizer_config.json) from it with the model", value);
        return 1;
    }
    /* either one will do (plan.h): the export copies the tokenizer files that exist */
    static const char *const need[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char f[PATH_POLICY_MAX + 64];
        snprintf(f, sizeof f, "%s/%s", t, need[i]);
        struct stat fs;
        if (stat(f, &fs) == 0 && S_ISREG(fs.st_mode) && access(f, R_OK) == 0) return 0;
    }
    snprintf(why, n, "\"%s\" holds neither tokenizer.json nor tokenizer_config.json (readable), which the run's "
             "export copies beside the model", value);
    return 1;
}

/* llmc-train check-plan PLAN.json: read the plan as `run` does (the reader,
 * then what this build's backend runs: backend_check, may be NULL), exit 0
 * when the trainer accepts it, 1 with the refusal (the field named) when not. */
int cmd_check_plan(int argc, char **argv, RunPlanBackendCheck backend_check, void *self)
{
    const char *path;
    int rc = args_one_operand("llmc-train check-plan",
                              "usage: llmc-train check-plan PLAN.json\n"
                              "  read the plan as run does: exit 0 accepted, 1 refused (the field named)\n",
                              argc, argv, &path);
    /* rc >= 0: --help or a usage error, already answered */
    if (rc >= 0) return rc;
    RunPlan p;
    char err[1024];
    if (run_plan_load(&p, path, err, sizeof err)) {
        log_error("%s", err);
        return 1;
    }
    if (backend_check && backend_check(self, &p, err, sizeof err)) {
        log_error("%s: %s", path, err);
        run_plan_free(&p);
        return 1;
    }
    int tk = run_plan_tokenizer_check(&p, 0, err, sizeof err);
    if (tk == 1) {
        log_error("%s: tokenizer.path: %s", path, err);
        run_plan_free(&p);
        return 1;
    }
    /* 2: a path of another machine (the cluster's): said, not refused, as llmc check says "not readable here" */
    if (tk == 2) log_info("%s: tokenizer.path %s: not readable here, not checked (run checks it at start)", path, err);
    printf("%s: accepted (job %s)\n", path, p.job);
    run_plan_free(&p);
    return 0;
}
