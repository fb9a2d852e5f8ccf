/* plan.c — load and check plan.json for the trainer (plan.h). */
#include "plan.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *file;
    char *err;
    size_t errlen;
    int failed;
} Ctx;

static void fail(Ctx *c, const char *key, const char *fmt, ...)
{
    if (c->failed) return;    /* the first error is the one reported */
    c->failed = 1;
    int n = snprintf(c->err, c->errlen, "%s: %s: ", c->file, key);
    if (n < 0 || (size_t)n >= c->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static cJSON *member(Ctx *c, const cJSON *obj, const char *sect, const char *key)
{
    char path[128];
    snprintf(path, sizeof path, "%s%s%s", sect ? sect : "", sect ? "." : "", key);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) fail(c, path, "missing key");
    return v;
}

static cJSON *get_obj(Ctx *c, const cJSON *obj, const char *key)
{
    cJSON *v = member(c, obj, NULL, key);
    if (v && !cJSON_IsObject(v)) { fail(c, key, "expected an object"); return NULL; }
    return v;
}

/* A string; NULL (without error) when null and nullable. */
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

static double get_num(Ctx *c, const cJSON *obj, const char *sect, const char *key, double lo, double hi,
                      int nullable, double if_null)
{
    cJSON *v = member(c, obj, sect, key);
    char path[128];
    snprintf(path, sizeof path, "%s.%s", sect, key);
    if (!v) return if_null;
    if (cJSON_IsNull(v) && nullable) return if_null;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        fail(c, path, nullable ? "expected a number or null" : "expected a number");
        return if_null;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        fail(c, path, "%g is outside %g..%g", v->valuedouble, lo, hi);
        return if_null;
    }
    return v->valuedouble;
}

static int64_t get_int(Ctx *c, const cJSON *obj, const char *sect, const char *key, double lo, double hi,
                       int nullable)
{
    double d = get_num(c, obj, sect, key, lo, hi, nullable, -1);
    char path[128];
    snprintf(path, sizeof path, "%s.%s", sect, key);
    if (!c->failed && d != floor(d)) fail(c, path, "expected an integer, got %g", d);
    return (int64_t)d;
}

static int get_bool(Ctx *c, const cJSON *obj, const char *sect, const char *key)
{
    cJSON *v = member(c, obj, sect, key);
    char path[128];
    snprintf(path, sizeof path, "%s.%s", sect, key);
    if (v && !cJSON_IsBool(v)) fail(c, path, "expected true or false");
    return cJSON_IsTrue(v);
}

static int one_of(Ctx *c, const char *sect, const char *key, const char *val, const char *const *opts)
{
    if (!val) return -1;
    for (int i = 0; opts[i]; i++)
        if (!strcmp(val, opts[i])) return i;
    char path[128], list[256] = "";
    snprintf(path, sizeof path, "%s.%s", sect, key);
    for (int i = 0; opts[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, opts[i], sizeof list - strlen(list) - 1);
    }
    fail(c, path, "'%s' is not one of %s", val, list);
    return -1;
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

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
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

int run_plan_load(RunPlan *p, const char *path, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    Ctx c = {path, err, errlen, 0};
    char *text = read_file(path, err, errlen);
    if (!text) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        /* cJSON points at the failure; give line and column */
        const char *at = end ? end : text;
        int line = 1, col = 1;
        for (const char *s = text; s < at && *s; s++) { if (*s == '\n') { line++; col = 1; } else col++; }
        snprintf(err, errlen, "%s:%d:%d: invalid JSON", path, line, col);
        free(text);
        return -1;
    }
    free(text);
    p->json = root;
    p->path = strdup(path);
    const char *slash = strrchr(path, '/');
    p->dir = slash ? strndup(path, (size_t)(slash - path == 0 ? 1 : slash - path)) : strdup(".");

    if (!cJSON_IsObject(root)) { fail(&c, "(top level)", "expected an object"); goto done; }
    cJSON *ver = member(&c, root, NULL, "llmc_plan_version");
    if (ver && (!cJSON_IsNumber(ver) || ver->valuedouble != RUN_PLAN_VERSION)) {
        if (cJSON_IsNumber(ver))
            fail(&c, "llmc_plan_version", "this llmc-train reads version %d; the plan is version %g",
                 RUN_PLAN_VERSION, ver->valuedouble);
        else
            fail(&c, "llmc_plan_version", "expected the number %d", RUN_PLAN_VERSION);
        goto done;
    }
    cJSON *jj = member(&c, root, NULL, "job");
    if (jj && !cJSON_IsString(jj)) fail(&c, "job", "expected a string");
    else if (jj) p->job = strdup(jj->valuestring);
    cJSON *st = member(&c, root, NULL, "stage");
    if (st && cJSON_IsString(st)) p->stage = strdup(st->valuestring);
    else if (st) fail(&c, "stage", "expected a string");
    one_of(&c, "", "stage", p->stage, (const char *const[]){"pt", "sft", NULL});

    cJSON *m = get_obj(&c, root, "model");
    cJSON *tk = get_obj(&c, root, "tokenizer");
    cJSON *da = get_obj(&c, root, "data");
    cJSON *tr = get_obj(&c, root, "train");
    cJSON *pa = get_obj(&c, root, "parallel");
    cJSON *ck = get_obj(&c, root, "checkpoint");
    cJSON *ou = get_obj(&c, root, "output");
    if (c.failed) goto done;

    p->model_name = get_str(&c, m, "model", "name", 0);
    char *arch = get_str(&c, m, "model", "arch", 0);
    int a = one_of(&c, "model", "arch", arch, (const char *const[]){"llama", "qwen2", "qwen3", NULL});
    free(arch);
    char *mp = get_str(&c, m, "model", "path", 1);
    p->model_path = run_plan_resolve(p, mp);
    free(mp);
    p->init = get_str(&c, m, "model", "init", 0);
    one_of(&c, "model", "init", p->init, (const char *const[]){"pretrained", "scratch", NULL});
    ModelConfig *mc = &p->model;
    mc->arch = a == 0 ? MODEL_LLAMA : a == 1 ? MODEL_QWEN2 : MODEL_QWEN3;
    mc->layers = (int)get_int(&c, m, "model", "layers", 1, 1024, 0);
    mc->hidden = (int)get_int(&c, m, "model", "hidden", 1, 1 << 20, 0);
    mc->heads = (int)get_int(&c, m, "model", "heads", 1, 4096, 0);
    mc->kv_heads = (int)get_int(&c, m, "model", "kv_heads", 1, 4096, 0);
    mc->head_dim = (int)get_int(&c, m, "model", "head_dim", 2, 1024, 0);
    mc->ffn = (int)get_int(&c, m, "model", "ffn", 1, 1 << 22, 0);
    mc->vocab = (int)get_int(&c, m, "model", "vocab", 2, 1 << 24, 0);
    mc->max_context = (int)get_int(&c, m, "model", "max_context", 1, 1 << 24, 0);
    mc->rope_theta = get_num(&c, m, "model", "rope_theta", 1e-9, 1e12, 0, 0);
    mc->rms_eps = get_num(&c, m, "model", "rms_eps", 1e-12, 1, 0, 0);
    mc->tie_embeddings = get_bool(&c, m, "model", "tie_embeddings");
    mc->qkv_bias = get_bool(&c, m, "model", "qkv_bias");
    mc->qk_norm = get_bool(&c, m, "model", "qk_norm");
    if (!c.failed && !strcmp(p->init, "pretrained") && !p->model_path)
        fail(&c, "model.path", "init is \"pretrained\" but path is null");
    char cerr[160];
    if (!c.failed && model_config_check(mc, cerr, sizeof cerr)) fail(&c, "model", "%s", cerr);

    char *tp = get_str(&c, tk, "tokenizer", "path", 1);
    p->tokenizer_path = run_plan_resolve(p, tp);
    free(tp);
    p->template_ = get_str(&c, tk, "tokenizer", "template", 1);

    p->context = (int)get_int(&c, da, "data", "context", 2, 1 << 24, 0);
    p->packing = get_bool(&c, da, "data", "packing");
    char *sd = get_str(&c, da, "data", "shards_dir", 0);
    p->shards_dir = run_plan_resolve(p, sd);
    free(sd);

    p->epochs = get_num(&c, tr, "train", "epochs", 0, 1e9, 1, -1);
    p->max_steps = get_int(&c, tr, "train", "max_steps", 1, 1e15, 1);
    if (!c.failed && p->epochs < 0 && p->max_steps < 0) fail(&c, "train", "epochs and max_steps are both null");
    p->micro_batch = (int)get_int(&c, tr, "train", "micro_batch", 1, 1 << 20, 0);
    p->grad_accum = (int)get_int(&c, tr, "train", "grad_accum", 1, 1 << 20, 0);
    p->global_batch = (int)get_int(&c, tr, "train", "global_batch", 1, 1 << 30, 0);
    p->lr = get_num(&c, tr, "train", "lr", 0, 10, 0, 0);
    p->min_lr = get_num(&c, tr, "train", "min_lr", 0, 10, 1, 0);
    char *sch = get_str(&c, tr, "train", "schedule", 0);
    int s = one_of(&c, "train", "schedule", sch, (const char *const[]){"cosine", "linear", "constant", NULL});
    p->schedule = s == 1 ? SCHEDULE_LINEAR : s == 2 ? SCHEDULE_CONSTANT : SCHEDULE_COSINE;
    free(sch);
    p->warmup_ratio = get_num(&c, tr, "train", "warmup_ratio", 0, 1, 1, -1);
    p->warmup_steps = get_int(&c, tr, "train", "warmup_steps", 0, 1e15, 1);
    if (!c.failed && (p->warmup_ratio < 0) == (p->warmup_steps < 0))
        fail(&c, "train.warmup_ratio", "exactly one of warmup_ratio and warmup_steps must be non-null");
    p->weight_decay = get_num(&c, tr, "train", "weight_decay", 0, 10, 0, 0);
    p->beta1 = get_num(&c, tr, "train", "beta1", 0, 0.999999999, 0, 0);
    p->beta2 = get_num(&c, tr, "train", "beta2", 0, 0.999999999, 0, 0);
    p->eps = get_num(&c, tr, "train", "eps", 0, 1, 0, 0);
    p->grad_clip = get_num(&c, tr, "train", "grad_clip", 0, 1e9, 1, 0);
    p->seed = (uint64_t)get_int(&c, tr, "train", "seed", 0, 9007199254740991.0, 0);
    p->precision = get_str(&c, tr, "train", "precision", 0);
    one_of(&c, "train", "precision", p->precision, (const char *const[]){"bf16", "fp16", "fp32", NULL});

    p->world_size = (int)get_int(&c, pa, "parallel", "world_size", 1, 1 << 20, 0);
    p->data_parallel = (int)get_int(&c, pa, "parallel", "data_parallel", 1, 1 << 20, 0);
    if (!c.failed && p->global_batch != p->micro_batch * p->grad_accum * p->data_parallel)
        fail(&c, "train.global_batch", "%d is not micro_batch (%d) x grad_accum (%d) x data_parallel (%d)",
             p->global_batch, p->micro_batch, p->grad_accum, p->data_parallel);

    char *cd = get_str(&c, ck, "checkpoint", "dir", 0);
    p->ckpt_dir = run_plan_resolve(p, cd);
    free(cd);
    p->ckpt_every_steps = get_int(&c, ck, "checkpoint", "every_steps", 1, 1e15, 1);
    p->ckpt_every_seconds = get_num(&c, ck, "checkpoint", "every_seconds", 1e-3, 1e12, 1, -1);
    p->ckpt_keep = (int)get_int(&c, ck, "checkpoint", "keep", 1, 1000000, 0);
    p->resume = get_bool(&c, ck, "checkpoint", "resume");

    char *od = get_str(&c, ou, "output", "dir", 0);
    p->out_dir = run_plan_resolve(p, od);
    free(od);
    char *mt = get_str(&c, ou, "output", "metrics", 0);
    if (mt && p->out_dir) {
        if (mt[0] == '/') p->metrics_path = strdup(mt);
        else {
            size_t n = strlen(p->out_dir) + strlen(mt) + 2;
            p->metrics_path = malloc(n);
            if (p->metrics_path) snprintf(p->metrics_path, n, "%s/%s", p->out_dir, mt);
        }
    }
    free(mt);
    p->log_every = (int)get_int(&c, ou, "output", "log_every", 1, 1e9, 0);
done:
    if (c.failed) { run_plan_free(p); return -1; }
    return 0;
}

void run_plan_free(RunPlan *p)
{
    char *all[] = {p->path, p->dir, p->job, p->stage, p->model_name, p->model_path, p->init,
                   p->tokenizer_path, p->template_, p->shards_dir, p->precision, p->ckpt_dir,
                   p->out_dir, p->metrics_path};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    cJSON_Delete(p->json);
    memset(p, 0, sizeof *p);
}
