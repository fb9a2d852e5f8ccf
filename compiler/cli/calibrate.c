/* calibrate.c — `llmc calibrate RUN... [-o PROFILE.llm]`: fit a site profile
 * (docs/estimator.md, "Site profiles") from what runs measured.
 *
 * A RUN is a run directory (or a file in one): the llmc trainer's
 * metrics.jsonl (or the CUDA trainer's gpu_metrics.jsonl), or LLaMA-Factory's
 * trainer_log.jsonl. The plan that produced it is the plan.json llmc compiled,
 * found in the run directory or the nearest directory above it (the compiled
 * output the run sits in). The estimator is run on that plan with a candidate
 * profile, and the profile's values are those for which the estimate's step
 * time matches the measured one (least squares on log step times): the mfu
 * always; with runs on several nodes the effective network bandwidth, with
 * several GPUs a node the GPU-link bandwidth, and on runs without
 * communication a fixed time per step; never more values than distinct run
 * shapes. Every value read is range-checked; a bad line is reported as
 * FILE:LINE: and nothing is written. */
#include "cli.h"
#include "estimate.h"
#include "arena.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CAL_OK = 0, CAL_BAD_INPUT = 1, CAL_USAGE = 2 };
#define CAL_MAX_RUNS 64
#define CAL_MAX_FILE (256u << 20)
#define CAL_PLAN_LEVELS 4          /* directories above a run searched for plan.json */
#define CAL_WARMUP_SHARE 0.1       /* of a run's logged steps skipped as warm-up (at least 1) */
#define CAL_MIN_STEPS 3            /* steps left to take the median of */
#define CAL_MAX_STEP_S 86400.0     /* a step time above a day is not a measurement */
#define CAL_LF_MIN_SPAN_S 10.0     /* elapsed_time has whole seconds: at least this span */
#define CAL_MFU_PLAUSIBLE 0.7      /* the highest published HFU (FSDP + FlashAttention-2 on A100, 0.67) */

static const char cmd[] = "llmc calibrate";
static const char calibrate_usage[] =
    "usage: llmc calibrate [-o PROFILE.llm] [--name NAME] [--check RUN]... RUN...\n"
    "Fit a site profile from measured runs: each RUN is a run directory with the llmc\n"
    "trainer's metrics.jsonl (or gpu_metrics.jsonl) or LLaMA-Factory's trainer_log.jsonl,\n"
    "inside the directory llmc compiled (its plan.json is the plan that produced it).\n"
    "One run fits the mfu; runs on different node counts or batches also fit the\n"
    "network / GPU-link bandwidth (or, without communication, a time per step).\n"
    "  -o, --output FILE  write the profile block there (default: standard output)\n"
    "  --name NAME        the profile's name (default: site)\n"
    "  --check RUN        a run not fitted on: print its step time against the prediction\n"
    "exit status: 0 fitted, 1 a run's data or plan is unusable, 2 usage or I/O error\n"
    "see docs/estimator.md, \"Site profiles\"\n";

typedef enum { SRC_LLMC, SRC_LLMC_GPU, SRC_LF } RunSource;
static const char *const src_names[] = {"metrics.jsonl", "gpu_metrics.jsonl", "trainer_log.jsonl"};

typedef struct {
    const char *arg;              /* as given */
    char *data_path, *plan_path;
    RunSource src;
    double step_s;                /* measured: median (llmc) or mean over the span (LF) */
    int steps_used;
    /* the plan, rebuilt */
    Arena *arena;
    PlanJob job;
    double est_default_s;         /* the plan's own estimate, as compiled */
    char shape[160];
    bool check_only;
} Run;

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CAL_BAD_INPUT;
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) { fprintf(stderr, "%s: out of memory\n", cmd); exit(CAL_USAGE); }
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool is_file(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISREG(st.st_mode); }
static bool is_dir(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISDIR(st.st_mode); }

/* The whole file, NUL-terminated; NULL with errno on failure. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap >= CAL_MAX_FILE) { free(buf); buf = NULL; errno = EFBIG; break; }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb; cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (r == 0) { if (ferror(f)) { free(buf); buf = NULL; errno = EIO; } break; }
    }
    fclose(f);
    if (buf) { buf[n] = 0; if (len) *len = n; }
    return buf;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the measurement ---- */

/* str(timedelta(seconds=int(t))) as LLaMA-Factory writes elapsed_time
 * (callbacks.py, LogCallback._timing): "H:MM:SS" or "D day(s), H:MM:SS". */
static bool parse_lf_elapsed(const char *t, double *out)
{
    double days = 0;
    const char *p = strstr(t, "day");
    if (p) {
        char *end;
        long d = strtol(t, &end, 10);
        if (end == t || d < 0 || d > 36500) return false;
        days = (double)d;
        p = strchr(p, ',');
        if (!p) return false;
        t = p + 1;
    }
    int h, m, s, used = 0;
    if (sscanf(t, " %d:%2d:%2d%n", &h, &m, &s, &used) != 3 || t[used] != 0) return false;
    if (h < 0 || h > 23 + (days == 0 ? 1000000 : 0) || m < 0 || m > 59 || s < 0 || s > 59) return false;
    *out = days * 86400 + h * 3600.0 + m * 60.0 + s;
    return true;
}

/* A number in [lo, hi] under key, else an error naming FILE:LINE. */
static bool line_num(const cJSON *o, const char *key, double lo, double hi, const char *path, int line, double *out,
                     bool required)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (required) fail("%s:%d: no '%s' in this line", path, line, key);
        return false;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        char *t = cJSON_PrintUnformatted(v);
        fail("%s:%d: '%s' must be a number in [%g, %g], found %s", path, line, key, lo, hi, t ? t : "?");
        free(t);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

/* Each complete line one JSON object (a last line without its newline is
 * being written and is skipped). llmc: step and step_time_s on every line;
 * the first CAL_WARMUP_SHARE of the steps (at least the first) are warm-up;
 * the step time is the median of the rest. */
static int read_llmc_metrics(Run *r, char *buf, size_t len)
{
    size_t cap = 1024, n = 0;
    double *dt = malloc(cap * sizeof *dt);
    int line = 0, rc = CAL_OK;
    double last_step = 0;
    for (char *p = buf; p < buf + len && dt;) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        line++;
        if (!nl) break;   /* being written */
        *nl = 0;
        char *s = p;
        p = nl + 1;
        while (*s == ' ' || *s == '\t' || *s == '\r') s++;
        if (!*s) continue;
        cJSON *o = cJSON_Parse(s);
        if (!cJSON_IsObject(o)) {
            cJSON_Delete(o);
            rc = fail("%s:%d: not a JSON object", r->data_path, line);
            break;
        }
        double step, t;
        bool ok = line_num(o, "step", 1, 1e15, r->data_path, line, &step, true) &&
                  line_num(o, "step_time_s", 0, CAL_MAX_STEP_S, r->data_path, line, &t, true);
        cJSON_Delete(o);
        if (!ok) { rc = CAL_BAD_INPUT; break; }
        if (step != floor(step)) { rc = fail("%s:%d: 'step' must be a whole number, found %g", r->data_path, line, step); break; }
        if (!(t > 0)) { rc = fail("%s:%d: 'step_time_s' must be above 0, found %g", r->data_path, line, t); break; }
        if (step < last_step) n = 0;   /* a resumed run starts over: the latest segment counts */
        last_step = step;
        if (n == cap) {
            double *nd = realloc(dt, 2 * cap * sizeof *dt);
            if (!nd) break;
            dt = nd; cap *= 2;
        }
        dt[n++] = t;
    }
    if (!dt) return fail("out of memory");
    if (rc == CAL_OK) {
        size_t skip = (size_t)ceil(CAL_WARMUP_SHARE * (double)n);
        if (skip < 1) skip = 1;
        if (n < skip + CAL_MIN_STEPS) {
            rc = fail("%s: %zu step%s logged; calibration needs at least %d after the first %zu (warm-up)",
                      r->data_path, n, n == 1 ? "" : "s", CAL_MIN_STEPS, skip);
        } else {
            size_t m = n - skip;
            qsort(dt + skip, m, sizeof *dt, cmp_dbl);
            r->step_s = m % 2 ? dt[skip + m / 2] : 0.5 * (dt[skip + m / 2 - 1] + dt[skip + m / 2]);
            r->steps_used = (int)m;
        }
    }
    free(dt);
    return rc;
}

/* LLaMA-Factory's trainer_log.jsonl (callbacks.py, LogCallback.on_log):
 * current_steps, total_steps, elapsed_time on every line; training lines carry
 * loss, evaluation lines eval_loss. The step time is the slope of
 * elapsed_time over the longest stretch of training lines with no evaluation
 * inside, from its first line to its last (the first line's time includes
 * start-up). */
static int read_lf_log(Run *r, char *buf, size_t len)
{
    int line = 0;
    double best_span = 0, best_steps = 0;
    double s0 = -1, e0 = 0, s1 = -1, e1 = 0, prev_step = -1, prev_el = -1;
    for (char *p = buf; p < buf + len;) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        line++;
        if (!nl) break;
        *nl = 0;
        char *s = p;
        p = nl + 1;
        while (*s == ' ' || *s == '\t' || *s == '\r') s++;
        if (!*s) continue;
        cJSON *o = cJSON_Parse(s);
        if (!cJSON_IsObject(o)) { cJSON_Delete(o); return fail("%s:%d: not a JSON object", r->data_path, line); }
        double cur, tot, el;
        bool ok = line_num(o, "current_steps", 0, 1e15, r->data_path, line, &cur, true) &&
                  line_num(o, "total_steps", 0, 1e15, r->data_path, line, &tot, true);
        const cJSON *et = cJSON_GetObjectItemCaseSensitive(o, "elapsed_time");
        if (ok && !cJSON_IsString(et)) { fail("%s:%d: no 'elapsed_time' string in this line", r->data_path, line); ok = false; }
        if (ok && !parse_lf_elapsed(et->valuestring, &el)) {
            fail("%s:%d: 'elapsed_time' must be H:MM:SS or 'D days, H:MM:SS', found \"%s\"", r->data_path, line,
                 et->valuestring);
            ok = false;
        }
        if (ok && (cur != floor(cur) || tot != floor(tot) || (tot > 0 && cur > tot))) {
            fail("%s:%d: current_steps %g of total_steps %g: whole numbers, current at most total", r->data_path,
                 line, cur, tot);
            ok = false;
        }
        bool train = cJSON_GetObjectItemCaseSensitive(o, "loss") != NULL;
        cJSON_Delete(o);
        if (!ok) return CAL_BAD_INPUT;
        if (prev_step >= 0 && (cur < prev_step || el < prev_el)) {
            /* a new process (resumed run): a new stretch */
            s0 = -1;
        }
        prev_step = cur; prev_el = el;
        if (!train) { s0 = -1; continue; }   /* evaluation inside: the stretch ends */
        if (s0 < 0 || cur <= s0) { s0 = cur; e0 = el; continue; }
        s1 = cur; e1 = el;
        if (e1 - e0 > best_span) { best_span = e1 - e0; best_steps = s1 - s0; }
    }
    (void)s1;
    if (best_steps < CAL_MIN_STEPS || best_span < CAL_LF_MIN_SPAN_S)
        return fail("%s: no stretch of at least %d training steps over %.0f s without evaluation (elapsed_time has "
                    "whole seconds); log more steps (logging_steps) or train longer", r->data_path, CAL_MIN_STEPS,
                    CAL_LF_MIN_SPAN_S);
    r->step_s = best_span / best_steps;
    r->steps_used = (int)best_steps;
    return CAL_OK;
}

/* The run's data file and the compiled plan.json above it. */
static int locate(Run *r)
{
    char *dir;
    if (is_dir(r->arg)) {
        dir = xstrdup(r->arg);
        for (int k = 0; k < 3 && !r->data_path; k++) {
            char *p = path_join(dir, src_names[k]);
            if (is_file(p)) { r->data_path = p; r->src = (RunSource)k; } else free(p);
        }
        if (!r->data_path) {
            free(dir);
            fprintf(stderr, "%s: error: %s: no metrics.jsonl, gpu_metrics.jsonl or trainer_log.jsonl in this "
                            "directory\n", cmd, r->arg);
            return CAL_USAGE;
        }
    } else if (is_file(r->arg)) {
        r->data_path = xstrdup(r->arg);
        const char *base = strrchr(r->arg, '/');
        base = base ? base + 1 : r->arg;
        r->src = strstr(base, "trainer_log") ? SRC_LF : strstr(base, "gpu_metrics") ? SRC_LLMC_GPU : SRC_LLMC;
        dir = xstrdup(r->arg);
        char *sl = strrchr(dir, '/');
        if (sl) *sl = 0; else { free(dir); dir = xstrdup("."); }
    } else {
        fprintf(stderr, "%s: error: %s: %s\n", cmd, r->arg, strerror(errno ? errno : ENOENT));
        return CAL_USAGE;
    }
    for (int lv = 0; lv <= CAL_PLAN_LEVELS && !r->plan_path; lv++) {
        char *p = path_join(dir, "plan.json");
        if (is_file(p)) { r->plan_path = p; break; }
        free(p);
        char *up = path_join(dir, "..");
        free(dir);
        dir = up;
    }
    free(dir);
    if (!r->plan_path) {
        fprintf(stderr, "%s: error: %s: no plan.json in the run directory or the %d above it; calibrate needs the "
                        "plan llmc compiled for the run (llmc PLAN -o DIR)\n", cmd, r->arg, CAL_PLAN_LEVELS);
        return CAL_USAGE;
    }
    return CAL_OK;
}

/* ---- the plan, from plan.json ---- */

static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

typedef struct { const char *path; bool ok; } JCtx;

static double jnum(JCtx *c, const cJSON *o, const char *sect, const char *k, double lo, double hi, double dflt)
{
    const cJSON *v = jget(o, k);
    if (!v || cJSON_IsNull(v)) return dflt;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        if (c->ok) fail("%s: %s.%s must be a number in [%.15g, %.15g]", c->path, sect, k, lo, hi);
        c->ok = false;
        return dflt;
    }
    return v->valuedouble;
}

static int jenum(JCtx *c, const cJSON *o, const char *sect, const char *k, const char *const *names, int n, int dflt)
{
    const cJSON *v = jget(o, k);
    if (!v || cJSON_IsNull(v)) return dflt;
    if (cJSON_IsString(v))
        for (int i = 0; i < n; i++) if (names[i] && strcmp(v->valuestring, names[i]) == 0) return i;
    if (c->ok) fail("%s: %s.%s: not a value llmc writes", c->path, sect, k);
    c->ok = false;
    return dflt;
}

static bool jbool(const cJSON *o, const char *k, bool dflt)
{
    const cJSON *v = jget(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* The catalogue GPU whose dense peak is the plan's peak_flops_per_device
 * (plan.json names no GPU; halved for fp32 plans as the estimator does). */
static const GpuSpec *gpu_by_peak(double peak, bool fp32)
{
    for (int i = 0; i < gpu_catalog_count(); i++) {
        const GpuSpec *g = gpu_catalog_at(i);
        double p = g->bf16_tflops * 1e12 / (fp32 ? 2 : 1);
        if (fabs(p - peak) <= 1e-9 * peak) return g;
    }
    return NULL;
}

static int build_plan(Run *r)
{
    size_t len;
    char *text = read_all(r->plan_path, &len);
    if (!text) { fprintf(stderr, "%s: error: %s: %s\n", cmd, r->plan_path, strerror(errno)); return CAL_USAGE; }
    cJSON *p = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(p) || !cJSON_IsNumber(jget(p, "llmc_plan_version"))) {
        cJSON_Delete(p);
        return fail("%s: not a plan.json written by llmc (no llmc_plan_version)", r->plan_path);
    }
    JCtx c = {r->plan_path, true};
    Arena *a = r->arena = arena_new();
    PlanModel *m = arena_alloc(a, sizeof *m);
    PlanTrain *t = arena_alloc(a, sizeof *t);
    PlanCluster *cl = arena_alloc(a, sizeof *cl);
    PlanJob *j = &r->job;
    const cJSON *jm = jget(p, "model"), *jd = jget(p, "data"), *jt = jget(p, "train"), *jf = jget(p, "finetune"),
                *jp = jget(p, "parallel"), *je = jget(p, "estimate"), *js = jget(p, "slurm");
    if (!cJSON_IsObject(jm) || !cJSON_IsObject(jd) || !cJSON_IsObject(jt) || !cJSON_IsObject(jp) ||
        !cJSON_IsObject(je)) {
        cJSON_Delete(p);
        return fail("%s: needs its model, data, train, parallel and estimate sections", r->plan_path);
    }
    m->name = "model";
    m->arch = (ModelArch)jenum(&c, jm, "model", "arch", arch_json_names, ARCH_COUNT, ARCH_QWEN2);
    m->layers = (int)jnum(&c, jm, "model", "layers", 1, 1000, 1);
    m->hidden = (int)jnum(&c, jm, "model", "hidden", 1, 1 << 20, 1);
    m->heads = (int)jnum(&c, jm, "model", "heads", 1, 1 << 14, 1);
    m->kv_heads = (int)jnum(&c, jm, "model", "kv_heads", 1, 1 << 14, m->heads);
    m->head_dim = (int)jnum(&c, jm, "model", "head_dim", 0, 1 << 14, 0);
    m->ffn = (int)jnum(&c, jm, "model", "ffn", 1, 1 << 22, 1);
    m->vocab = (int)jnum(&c, jm, "model", "vocab", 1, 1 << 24, 1);
    m->max_context = (int)jnum(&c, jm, "model", "max_context", 0, 1 << 24, 0);
    m->tie_embeddings = jbool(jm, "tie_embeddings", false);
    m->qkv_bias = jbool(jm, "qkv_bias", m->arch == ARCH_QWEN2);
    m->qk_norm = jbool(jm, "qk_norm", m->arch == ARCH_QWEN3);
    const cJSON *init = jget(jm, "init");
    m->from_scratch = cJSON_IsString(init) && strcmp(init->valuestring, init_json_names[INIT_SCRATCH]) == 0;

    t->name = "run";
    t->model = m;
    t->stage = (TrainStage)jenum(&c, p, "plan", "stage", stage_json_names, STAGE_COUNT, STAGE_SFT);
    t->backend = (PlanBackend)jenum(&c, p, "plan", "backend", backend_json_names, BACKEND_COUNT, BACKEND_LLMC);
    t->context = (int)jnum(&c, jd, "data", "context", 1, 1 << 24, 1);
    t->packing = jbool(jd, "packing", t->stage == STAGE_PT);
    t->micro_batch = (int)jnum(&c, jt, "train", "micro_batch", 1, 1 << 20, 1);
    t->grad_accum = (int)jnum(&c, jt, "train", "grad_accum", 1, 1 << 20, 1);
    t->epochs = jnum(&c, jt, "train", "epochs", 0, 1e6, 1);
    t->max_steps = (int64_t)jnum(&c, jt, "train", "max_steps", 0, 1e15, 0);
    t->precision = (Precision)jenum(&c, jt, "train", "precision", precision_json_names, PREC_COUNT, PREC_BF16);
    t->recompute = (Recompute)jenum(&c, jt, "train", "recompute", recompute_json_names, RECOMPUTE_COUNT, RECOMPUTE_NONE);
    t->attention = (AttentionKind)jenum(&c, jt, "train", "attention", attention_json_names, ATTN_COUNT, ATTN_FLASH);
    t->deterministic = jbool(jt, "deterministic", t->backend == BACKEND_LLMC);
    t->bytes_per_token = 4.0;
    if (cJSON_IsObject(jf)) {
        t->method = (FinetuneMethod)jenum(&c, jf, "finetune", "method", method_json_names, METHOD_COUNT, METHOD_FULL);
        t->lora_rank = (int)jnum(&c, jf, "finetune", "lora_rank", 1, 1 << 16, 8);
        t->freeze_layers = (int)jnum(&c, jf, "finetune", "freeze_layers", -1e6, 1e6, 2);
        const cJSON *lt = jget(jf, "lora_target");
        if (cJSON_IsArray(lt)) {
            int n = cJSON_GetArraySize(lt);
            const char **names = arena_alloc(a, sizeof(char *) * (size_t)(n + 1));
            int k = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, lt) if (cJSON_IsString(x)) names[k++] = arena_strdup(a, x->valuestring);
            t->lora_target = names; t->nlora_target = k;
        }
    }
    if (t->method == METHOD_QLORA) t->quant_bits = 4;
    int zero = (int)jnum(&c, jp, "parallel", "zero_stage", 0, 3, 0);
    t->shard = (ShardStage)zero;
    t->offload = (OffloadKind)jenum(&c, jp, "parallel", "offload", offload_json_names, OFFLOAD_COUNT, OFFLOAD_NONE);

    /* one dataset carrying the tokens and samples the compiled estimate counted */
    PlanDataset *ds = arena_alloc(a, sizeof *ds);
    ds->name = "data";
    double tok = jnum(&c, je, "estimate", "tokens_per_epoch", 0, 1e18, -1);
    double smp = jnum(&c, je, "estimate", "samples_per_epoch", 0, 1e18, -1);
    ds->tokens = tok >= 0 ? (int64_t)llround(tok) : -1;
    ds->samples = smp > 0 ? (int64_t)llround(smp) : -1;
    ds->format = t->stage == STAGE_PT ? FORMAT_TEXT : FORMAT_SHAREGPT;
    PlanDataset **dl = arena_alloc(a, sizeof *dl);
    dl[0] = ds;
    t->data = dl; t->ndata = 1;

    int nodes = (int)jnum(&c, jp, "parallel", "nodes", 1, 1 << 20, 1);
    int gpn = (int)jnum(&c, jp, "parallel", "gpus_per_node", 0, 1024, 0);
    int tpn = (int)jnum(&c, jp, "parallel", "tasks_per_node", 1, 1024, 1);
    double peak = jnum(&c, je, "estimate", "peak_flops_per_device", 1, 1e18, 0);
    bool cpu = jbool(je, "cpu_only", gpn == 0);
    cl->name = "cluster";
    if (cpu) {
        int cores = (int)llround(peak / 64e9);   /* the estimator's CPU peak: cores x 64 GFLOP/s */
        if (cores < 1) cores = 1;
        cl->cpus = cores * tpn;
        j->cpus_per_task = cores;
    } else {
        const GpuSpec *g = gpu_by_peak(peak, t->precision == PREC_FP32);
        if (!g) {
            GpuSpec *sp = arena_alloc(a, sizeof *sp);
            sp->name = "declared";
            sp->bf16_tflops = peak / 1e12 * (t->precision == PREC_FP32 ? 2 : 1);
            sp->usable_bytes = jnum(&c, je, "estimate", "usable_bytes", 0, 1e15, 80e9);
            if (sp->usable_bytes <= 0) sp->usable_bytes = 80e9;
            sp->mem_bytes = sp->usable_bytes;
            sp->default_mfu = jnum(&c, je, "estimate", "mfu", 1e-6, 1, 0.4);
            g = sp;
        }
        cl->gpu = g;
        cl->gpus_per_node = gpn;
        const GpuFabric *fab = gpu_catalog_fabric(g);
        if (fab) {
            cl->link_bytes_per_s = fab->link_bytes_per_s; cl->link_default = true;
            cl->nics = fab->nics; cl->nic_bits_per_s = fab->nic_bits_per_s; cl->network_default = true;
            cl->host_link_bytes_per_s = fab->host_link_bytes_per_s; cl->host_link_default = true;
        }
        j->cpus_per_task = cJSON_IsObject(js) ? (int)jnum(&c, js, "slurm", "cpus_per_task", 0, 1 << 20, 0) : 0;
    }
    j->name = "job";
    j->run = t;
    j->cluster = cl;
    j->nodes = nodes;
    j->tasks_per_node = cpu ? tpn : gpn;
    r->est_default_s = jnum(&c, je, "estimate", "step_seconds", 0, 1e12, 0);
    const cJSON *jn = jget(p, "job");
    snprintf(r->shape, sizeof r->shape, "%s: %d layers x %d, %d node%s x %d %s, %d x %d x %d",
             cJSON_IsString(jn) ? jn->valuestring : "?", m->layers, m->hidden, nodes, nodes == 1 ? "" : "s",
             cpu ? tpn : gpn, cpu ? (tpn == 1 ? "rank" : "ranks") : "GPUs", t->micro_batch, t->context, t->grad_accum);
    cJSON_Delete(p);
    return c.ok ? CAL_OK : CAL_BAD_INPUT;
}

/* ---- the fit ---- */

enum { P_MFU, P_INTER, P_INTRA, P_OVERHEAD, P_COUNT };
static const char *const param_names[P_COUNT] = {"mfu", "inter_node_bw", "intra_node_bw", "step_overhead"};

typedef struct {
    double v[P_COUNT];
    bool on[P_COUNT];
} Fit;

static void to_profile(const Fit *f, PlanProfile *pf)
{
    memset(pf, 0, sizeof *pf);
    pf->name = "candidate";
    pf->step_overhead_s = -1;
    if (f->on[P_MFU]) pf->mfu = f->v[P_MFU];
    if (f->on[P_INTER]) pf->inter_bytes_per_s = f->v[P_INTER];
    if (f->on[P_INTRA]) pf->intra_bytes_per_s = f->v[P_INTRA];
    if (f->on[P_OVERHEAD]) pf->step_overhead_s = f->v[P_OVERHEAD];
}

static double predict(Run *r, const PlanProfile *pf, Estimate *e)
{
    r->job.profile = pf;
    Diags *d = diags_new();
    estimate_job(&r->job, e, d);
    diags_free(d);
    r->job.profile = NULL;
    return e->step_seconds;
}

static double loss(Run *runs, int n, const Fit *f)
{
    PlanProfile pf;
    to_profile(f, &pf);
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (runs[i].check_only) continue;
        Estimate e;
        double p = predict(&runs[i], &pf, &e);
        double q = p > 0 ? log(p / runs[i].step_s) : 50;
        s += q * q;
    }
    return s;
}

/* Golden-section search of parameter k over [lo, hi] (log-spaced when logsp). */
static void search(Run *runs, int n, Fit *f, int k, double lo, double hi, bool logsp)
{
    double a = logsp ? log(lo) : lo, b = logsp ? log(hi) : hi;
    const double g = (sqrt(5.0) - 1) / 2;
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
#define AT(x) (f->v[k] = logsp ? exp(x) : (x), loss(runs, n, f))
    double f1 = AT(x1), f2 = AT(x2);
    for (int it = 0; it < 80; it++) {
        if (f1 <= f2) { b = x2; x2 = x1; f2 = f1; x1 = b - g * (b - a); f1 = AT(x1); }
        else { a = x1; x1 = x2; f1 = f2; x2 = a + g * (b - a); f2 = AT(x2); }
    }
    double best = f1 <= f2 ? x1 : x2;
    /* the bracket's ends too: a value at a bound is reported as such */
    double fa = AT(a), fb = AT(b), fm = AT(best);
    f->v[k] = logsp ? exp(fa < fm && fa <= fb ? a : fb < fm ? b : best) : (fa < fm && fa <= fb ? a : fb < fm ? b : best);
#undef AT
}

static void fit(Run *runs, int n, Fit *f, double min_step)
{
    static const double lo[P_COUNT] = {1e-5, 1e6, 1e6, 0}, hi[P_COUNT] = {1, 1e13, 1e13, 0};
    for (int round = 0; round < 40; round++) {
        double before = loss(runs, n, f);
        for (int k = 0; k < P_COUNT; k++) {
            if (!f->on[k]) continue;
            if (k == P_OVERHEAD) search(runs, n, f, k, 0, min_step, false);
            else search(runs, n, f, k, lo[k], hi[k], true);
        }
        if (before - loss(runs, n, f) < 1e-14) break;
    }
    /* at its lower bound: none (the runs show no fixed cost per step) */
    if (f->on[P_OVERHEAD] && f->v[P_OVERHEAD] < 1e-9 * min_step) f->v[P_OVERHEAD] = 0;
}

/* Distinct shapes among the fitted runs (what more values could be told apart by). */
static int distinct_shapes(const Run *runs, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++) {
        if (runs[i].check_only) continue;
        bool seen = false;
        for (int k = 0; k < i; k++)
            if (!runs[k].check_only && strcmp(runs[k].shape + (strchr(runs[k].shape, ':') - runs[k].shape),
                                              runs[i].shape + (strchr(runs[i].shape, ':') - runs[i].shape)) == 0)
                seen = true;
        if (!seen) d++;
    }
    return d;
}

/* ---- output ---- */

static void fmt_s(char *b, size_t n, double s)
{
    if (s < 1) snprintf(b, n, "%.4g ms", s * 1e3);
    else snprintf(b, n, "%.4g s", s);
}

static void print_row(FILE *o, const char *lead, Run *r, const PlanProfile *pf)
{
    Estimate e;
    double after = predict(r, pf, &e);
    char m[32], b[32], af[32];
    fmt_s(m, sizeof m, r->step_s);
    fmt_s(b, sizeof b, r->est_default_s);
    fmt_s(af, sizeof af, after);
    fprintf(o, "%s%s  (%s; %s, %d steps)\n", lead, r->arg, r->shape, src_names[r->src], r->steps_used);
    fprintf(o, "%s    step %s measured; estimate %s before (%+.1f%%), %s with the profile (%+.1f%%)\n",
            lead, m, b, r->est_default_s > 0 ? 100 * (r->est_default_s - r->step_s) / r->step_s : 0.0, af,
            100 * (after - r->step_s) / r->step_s);
}

/* The escaped form of a string inside "..." in a plan. */
static void put_str(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', o);
        fputc(*s, o);
    }
    fputc('"', o);
}

static void write_profile(FILE *o, const char *name, Run *runs, int n, const Fit *f, PlanBackend be,
                          const PlanProfile *pf)
{
    int nf = 0;
    for (int i = 0; i < n; i++) nf += !runs[i].check_only;
    fprintf(o, "# Site profile fitted by `llmc calibrate` from %d run%s (docs/estimator.md, \"Site profiles\").\n",
            nf, nf == 1 ? "" : "s");
    fprintf(o, "# A job takes it with: use \"THIS_FILE\" and profile = %s in the job block.\n", name);
    for (int i = 0; i < n; i++) if (!runs[i].check_only) print_row(o, "#   ", &runs[i], pf);
    fprintf(o, "profile %s {\n", name);
    fprintf(o, "  backend       = %s\n", backend_llm_names[be]);
    if (f->on[P_MFU]) fprintf(o, "  mfu           = %.4g\n", f->v[P_MFU]);
    if (f->on[P_OVERHEAD]) fprintf(o, "  step_overhead = %.4g s\n", f->v[P_OVERHEAD]);
    if (f->on[P_INTRA]) fprintf(o, "  intra_node_bw = %.4g GBps\n", f->v[P_INTRA] / 1e9);
    if (f->on[P_INTER]) fprintf(o, "  inter_node_bw = %.4g GBps\n", f->v[P_INTER] / 1e9);
    fprintf(o, "  from          = [");
    for (int i = 0, k = 0; i < n; i++) {
        if (runs[i].check_only) continue;
        if (k++) fputs(", ", o);
        put_str(o, runs[i].arg);
    }
    fprintf(o, "]\n}\n");
}

static bool name_ok(const char *s)
{
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

int calibrate_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"name", required_argument, NULL, 'n'},
        {"check", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *out = NULL, *name = "site";
    Run runs[CAL_MAX_RUNS];
    memset(runs, 0, sizeof runs);
    int n = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        if (c == 'h') { fputs(calibrate_usage, stdout); return CAL_OK; }
        if (c == 'o') out = optarg;
        else if (c == 'n') name = optarg;
        else if (c == 'c') {
            if (n == CAL_MAX_RUNS) return cli_usage_error(cmd, "at most %d runs", CAL_MAX_RUNS);
            runs[n].arg = optarg; runs[n].check_only = true; n++;
        } else return cli_getopt_error(cmd, c, argv);
    }
    if (!name_ok(name)) return cli_usage_error(cmd, "--name: '%s' is not a block name (letters, digits, _)", name);
    for (int i = optind; i < argc; i++) {
        if (n == CAL_MAX_RUNS) return cli_usage_error(cmd, "at most %d runs", CAL_MAX_RUNS);
        runs[n++].arg = argv[i];
    }
    int nfit = 0;
    for (int i = 0; i < n; i++) {
        nfit += !runs[i].check_only;
        /* the runs are written into the profile: one line each, in a string */
        for (const char *q = runs[i].arg; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f)
                return cli_usage_error(cmd, "a run's path has a control character: rename it");
    }
    if (!nfit) return cli_usage_error(cmd, "no RUN given");

    int rc = CAL_OK;
    for (int i = 0; i < n && rc == CAL_OK; i++) {
        Run *r = &runs[i];
        if ((rc = locate(r)) != CAL_OK) break;
        size_t len;
        char *buf = read_all(r->data_path, &len);
        if (!buf) { fprintf(stderr, "%s: error: %s: %s\n", cmd, r->data_path, strerror(errno)); rc = CAL_USAGE; break; }
        rc = r->src == SRC_LF ? read_lf_log(r, buf, len) : read_llmc_metrics(r, buf, len);
        free(buf);
        if (rc == CAL_OK) rc = build_plan(r);
        if (rc == CAL_OK && (r->src == SRC_LF) != (r->job.run->backend == BACKEND_LLAMAFACTORY))
            rc = fail("%s: %s is %s's log, but %s is a plan for backend = %s", r->arg, src_names[r->src],
                      r->src == SRC_LF ? "LLaMA-Factory" : "the llmc trainer", r->plan_path,
                      backend_llm_names[r->job.run->backend]);
    }
    /* one trainer per profile */
    PlanBackend be = BACKEND_LLMC;
    for (int i = 0, first = 1; i < n && rc == CAL_OK; i++) {
        if (runs[i].check_only) continue;
        if (first) { be = runs[i].job.run->backend; first = 0; }
        else if (runs[i].job.run->backend != be)
            rc = fail("%s and %s ran different trainers (backend = llmc and llamafactory): calibrate each on its own",
                      runs[0].arg, runs[i].arg);
    }
    if (rc == CAL_OK) {
        /* what the runs can tell apart: mfu; the network with several nodes;
         * the GPU link with several GPUs a node; else a time per step */
        Fit f = {{0}, {0}};
        bool multi_node = false, multi_gpu = false;
        double min_step = INFINITY;
        for (int i = 0; i < n; i++) {
            if (runs[i].check_only) continue;
            Estimate e;
            predict(&runs[i], NULL, &e);
            if (e.fabric_known && e.data_parallel > 1 && runs[i].job.nodes > 1) multi_node = true;
            if (e.fabric_known && e.data_parallel > 1 && runs[i].job.cluster->gpus_per_node > 1) multi_gpu = true;
            if (runs[i].step_s < min_step) min_step = runs[i].step_s;
            /* start from what the plan assumed */
            if (f.v[P_MFU] == 0) f.v[P_MFU] = e.mfu > 0 ? e.mfu : 0.3;
        }
        int room = distinct_shapes(runs, n);
        int order[P_COUNT] = {P_MFU, P_INTER, P_INTRA, P_OVERHEAD};
        bool want[P_COUNT] = {true, multi_node, multi_gpu && !multi_node, !multi_node && !multi_gpu};
        if (multi_node && multi_gpu) want[P_INTRA] = true;
        for (int k = 0, used = 0; k < P_COUNT; k++)
            if (want[order[k]] && used < room) { f.on[order[k]] = true; used++; }
        f.v[P_INTER] = 10e9; f.v[P_INTRA] = 100e9; f.v[P_OVERHEAD] = 0;
        fit(runs, n, &f, min_step);
        PlanProfile pf;
        to_profile(&f, &pf);
        fprintf(stderr, "%s: fitted", cmd);
        for (int k = 0; k < P_COUNT; k++)
            if (f.on[k]) fprintf(stderr, " %s", param_names[k]);
        fprintf(stderr, " from %d run%s (%d shape%s)\n", nfit, nfit == 1 ? "" : "s", room, room == 1 ? "" : "s");
        if (f.on[P_MFU] && f.v[P_MFU] > CAL_MFU_PLAUSIBLE && f.v[P_MFU] < 0.999)
            fprintf(stderr, "%s: warning: the fitted mfu %.2f is above what published training runs reach (~%.1f): "
                            "the runs hid more communication than the estimate's model of this trainer allows, and "
                            "the mfu absorbs it (docs/estimator.md, \"Site profiles\")\n", cmd, f.v[P_MFU],
                    CAL_MFU_PLAUSIBLE);
        if (f.on[P_MFU] && f.v[P_MFU] >= 0.999)
            fprintf(stderr, "%s: warning: the fitted mfu is at its bound (1): the runs were faster than the plan's "
                            "FLOPs allow at the peak the plan assumes\n", cmd);
        for (int i = 0; i < n; i++) print_row(stderr, runs[i].check_only ? "  check " : "  fit   ", &runs[i], &pf);
        if (!out) {
            write_profile(stdout, name, runs, n, &f, be, &pf);
        } else {
            size_t L = strlen(out) + 8;
            char *tmp = malloc(L);
            if (!tmp) return CAL_USAGE;
            snprintf(tmp, L, "%s.tmp", out);
            FILE *o = fopen(tmp, "w");
            if (!o) { fprintf(stderr, "%s: error: %s: %s\n", cmd, tmp, strerror(errno)); free(tmp); rc = CAL_USAGE; }
            else {
                write_profile(o, name, runs, n, &f, be, &pf);
                if (fflush(o) || fsync(fileno(o)) || fclose(o) || rename(tmp, out)) {
                    fprintf(stderr, "%s: error: %s: %s\n", cmd, out, strerror(errno));
                    unlink(tmp);
                    rc = CAL_USAGE;
                } else {
                    fprintf(stderr, "%s: wrote %s\n", cmd, out);
                }
            }
            free(tmp);
        }
    }
    for (int i = 0; i < n; i++) {
        free(runs[i].data_path);
        free(runs[i].plan_path);
        if (runs[i].arena) arena_free(runs[i].arena);
    }
    return rc;
}
