/* calib_fit.c — the site profile fitted to what runs measured (calib_fit.h):
 * the trainers' logs read into a step time, plan.json read back into the
 * PlanJob the estimator takes, and the least-squares fit of the profile's
 * values. Shared by `llmc calibrate` and `llmc status`. Every value read is
 * range-checked; a bad line is reported as FILE:LINE: in the run's err. */
#include "calib_fit.h"
#include "cli.h"
#include "plan_keys.h"   /* contract/: the profile block's keys */

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CAL_MAX_FILE: a log or plan.json larger than 256 MiB is refused (read_all), not read into memory. */
#define CAL_MAX_FILE (256u << 20)
#define CAL_WARMUP_SHARE 0.1       /* of a run's logged steps skipped as warm-up (at least 1) */
#define CAL_MIN_STEPS 3            /* steps left to take the median of */
#define CAL_MAX_STEP_S 86400.0     /* a step time above a day is not a measurement */
#define CAL_LF_MIN_SPAN_S 10.0     /* elapsed_time has whole seconds: at least this span */

const char *const calib_src_names[CALIB_SRC_COUNT] = {"metrics.jsonl", "gpu_metrics.jsonl", "trainer_log.jsonl"};
const char *const calib_param_names[CALIB_P_COUNT] = {PLAN_KEY(PROFILE, mfu), PLAN_KEY(PROFILE, inter_node_bw),
                                                      PLAN_KEY(PROFILE, intra_node_bw), PLAN_KEY(PROFILE, step_overhead)};

/* The reason into r->err; returns CALIB_BAD_INPUT (the first reason is kept). */
static int rfail(CalibRun *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rfail(CalibRun *r, const char *fmt, ...)
{
    if (r->err[0]) return CALIB_BAD_INPUT;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return CALIB_BAD_INPUT;
}

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

/* qsort's order for doubles, without the overflow of a subtraction cast to int. */
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
    /* the whole rest must be H:MM:SS: a trailing fraction or text means another format, not a time */
    if (sscanf(t, " %d:%2d:%2d%n", &h, &m, &s, &used) != 3 || t[used] != 0) return false;
    /* hours stay under 24 once there is a day part; without one the bound only keeps the arithmetic sane */
    if (h < 0 || h > 23 + (days == 0 ? 1000000 : 0) || m < 0 || m > 59 || s < 0 || s > 59) return false;
    *out = days * 86400 + h * 3600.0 + m * 60.0 + s;
    return true;
}

/* A number in [lo, hi] under key, else an error naming FILE:LINE.
 * An absent key is an error only when REQUIRED; false either way, with the first error kept in r->err. */
static bool line_num(CalibRun *r, const cJSON *o, const char *key, double lo, double hi, int line, double *out,
                     bool required)
{
    const char *path = r->data_path;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (required) rfail(r, "%s:%d: no '%s' in this line", path, line, key);
        return false;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        char *t = cJSON_PrintUnformatted(v);
        rfail(r, "%s:%d: '%s' must be a number in [%g, %g], found %s", path, line, key, lo, hi, t ? t : "?");
        free(t);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

/* One logged step and its time, sorted by time for the median. */
typedef struct { double step, t; } StepTime;

/* By step time, for the median. */
static int cmp_step_time(const void *a, const void *b)
{
    return cmp_dbl(&((const StepTime *)a)->t, &((const StepTime *)b)->t);
}

/* Each complete line one JSON object (a last line without its newline is
 * being written and is skipped). llmc: step and step_time_s on every line;
 * the first CAL_WARMUP_SHARE of the steps (at least the first) are warm-up;
 * the step time is the median of the rest. */
static int read_llmc_metrics(CalibRun *r, char *buf, size_t len)
{
    size_t cap = 1024, n = 0;
    StepTime *dt = malloc(cap * sizeof *dt);
    int line = 0, rc = CALIB_OK;
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
            rc = rfail(r, "%s:%d: not a JSON object", r->data_path, line);
            break;
        }
        double step, t;
        bool ok = line_num(r, o, "step", 1, 1e15, line, &step, true) &&
                  line_num(r, o, "step_time_s", 0, CAL_MAX_STEP_S, line, &t, true);
        cJSON_Delete(o);
        if (!ok) { rc = CALIB_BAD_INPUT; break; }
        if (step != floor(step)) { rc = rfail(r, "%s:%d: 'step' must be a whole number, found %g", r->data_path, line, step); break; }
        if (!(t > 0)) { rc = rfail(r, "%s:%d: 'step_time_s' must be above 0, found %g", r->data_path, line, t); break; }
        /* (the steps before the resume ran in another process: its warm-up and speed are not this one's) */
        if (step < last_step) n = 0;   /* a resumed run starts over: the latest segment counts */
        last_step = step;
        if (n == cap) {
            StepTime *nd = realloc(dt, 2 * cap * sizeof *dt);
            if (!nd) break;
            dt = nd; cap *= 2;
        }
        dt[n++] = (StepTime){step, t};
    }
    if (!dt) return rfail(r, "out of memory");
    if (rc == CALIB_OK) {
        /* warm-up: the first steps pay one-time costs and are not the steady step time */
        size_t skip = (size_t)ceil(CAL_WARMUP_SHARE * (double)n);
        if (skip < 1) skip = 1;
        if (n < skip + CAL_MIN_STEPS) {
            rc = rfail(r, "%s: %zu step%s logged; calibration needs at least %d after the first %zu (warm-up)",
                      r->data_path, n, n == 1 ? "" : "s", CAL_MIN_STEPS, skip);
        } else {
            size_t m = n - skip;
            r->first_step = dt[skip].step;
            r->last_step = dt[n - 1].step;
            qsort(dt + skip, m, sizeof *dt, cmp_step_time);
            r->step_s = m % 2 ? dt[skip + m / 2].t : 0.5 * (dt[skip + m / 2 - 1].t + dt[skip + m / 2].t);
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
static int read_lf_log(CalibRun *r, char *buf, size_t len)
{
    int line = 0;
    double best_span = 0, best_steps = 0, best_first = 0, best_last = 0;
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
        if (!cJSON_IsObject(o)) { cJSON_Delete(o); return rfail(r, "%s:%d: not a JSON object", r->data_path, line); }
        double cur, tot, el;
        bool ok = line_num(r, o, "current_steps", 0, 1e15, line, &cur, true) &&
                  line_num(r, o, "total_steps", 0, 1e15, line, &tot, true);
        const cJSON *et = cJSON_GetObjectItemCaseSensitive(o, "elapsed_time");
        if (ok && !cJSON_IsString(et)) { rfail(r, "%s:%d: no 'elapsed_time' string in this line", r->data_path, line); ok = false; }
        if (ok && !parse_lf_elapsed(et->valuestring, &el)) {
            rfail(r, "%s:%d: 'elapsed_time' must be H:MM:SS or 'D days, H:MM:SS', found \"%s\"", r->data_path, line,
                 et->valuestring);
            ok = false;
        }
        if (ok && (cur != floor(cur) || tot != floor(tot) || (tot > 0 && cur > tot))) {
            rfail(r, "%s:%d: current_steps %g of total_steps %g: whole numbers, current at most total", r->data_path,
                 line, cur, tot);
            ok = false;
        }
        bool train = cJSON_GetObjectItemCaseSensitive(o, "loss") != NULL;
        cJSON_Delete(o);
        if (!ok) return CALIB_BAD_INPUT;
            /* (steps or elapsed time going back) */
        if (prev_step >= 0 && (cur < prev_step || el < prev_el)) {
            /* a new process (resumed run): a new stretch */
            s0 = -1;
        }
        prev_step = cur; prev_el = el;
        /* (elapsed_time then includes the evaluation's time, which is not a step's) */
        if (!train) { s0 = -1; continue; }   /* evaluation inside: the stretch ends */
        /* the stretch starts at its first training line: later spans exclude the start-up it includes */
        if (s0 < 0 || cur <= s0) { s0 = cur; e0 = el; continue; }
        s1 = cur; e1 = el;
        /* the longest span wins: whole-second timestamps are least coarse over the most time */
        if (e1 - e0 > best_span) { best_span = e1 - e0; best_steps = s1 - s0; best_first = s0; best_last = s1; }
    }
    if (best_steps < CAL_MIN_STEPS || best_span < CAL_LF_MIN_SPAN_S)
        return rfail(r, "%s: no stretch of at least %d training steps over %.0f s without evaluation (elapsed_time has "
                    "whole seconds); log more steps (logging_steps) or train longer", r->data_path, CAL_MIN_STEPS,
                    CAL_LF_MIN_SPAN_S);
    r->step_s = best_span / best_steps;
    r->steps_used = (int)best_steps;
    r->first_step = best_first;
    r->last_step = best_last;
    return CALIB_OK;
}

/* ---- the plan, from plan.json ---- */

/* plan.json read back: a key the plan lacks takes a default; a key of the wrong type or range is an error
 * (the first one kept), never silently replaced. */
static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* JCtx: the run whose err collects the first failure, the plan's path for messages, and whether all went well. */
typedef struct { CalibRun *r; const char *path; bool ok; } JCtx;

/* A number in [LO, HI]; DFLT when absent or null, and after a refusal (recorded once, in c->r->err). */
static double jnum(JCtx *c, const cJSON *o, const char *sect, const char *k, double lo, double hi, double dflt)
{
    const cJSON *v = jget(o, k);
    if (!v || cJSON_IsNull(v)) return dflt;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        if (c->ok) rfail(c->r, "%s: %s.%s must be a number in [%.15g, %.15g]", c->path, sect, k, lo, hi);
        c->ok = false;
        return dflt;
    }
    return v->valuedouble;
}

/* The index of a plan.json spelling in NAMES (N rows); DFLT when absent; an unknown spelling is refused. */
static int jenum(JCtx *c, const cJSON *o, const char *sect, const char *k, const char *const *names, int n, int dflt)
{
    const cJSON *v = jget(o, k);
    if (!v || cJSON_IsNull(v)) return dflt;
    if (cJSON_IsString(v))
        for (int i = 0; i < n; i++) if (names[i] && strcmp(v->valuestring, names[i]) == 0) return i;
    if (c->ok) rfail(c->r, "%s: %s.%s: not a value llmc writes", c->path, sect, k);
    c->ok = false;
    return dflt;
}

/* A bool, DFLT when absent or not a bool (the switches have safe defaults; no error). */
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

/* plan.json back into the PlanJob the estimator takes (r->job, its parts in r->arena), with the estimate's own
 * step time and mfu kept for comparison. Only what the estimate of a step reads is rebuilt: the model, the
 * training shape, the parallel layout and the device, found from its peak (plan.json names no GPU). */
static int build_plan(CalibRun *r)
{
    size_t len;
    char *text = read_all(r->plan_path, &len);
    if (!text) { snprintf(r->err, sizeof r->err, "%s: %s", r->plan_path, strerror(errno)); return CALIB_IO; }
    cJSON *p = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(p) || !cJSON_IsNumber(jget(p, "llmc_plan_version"))) {
        cJSON_Delete(p);
        return rfail(r, "%s: not a plan.json written by llmc (no llmc_plan_version)", r->plan_path);
    }
    JCtx c = {r, r->plan_path, true};
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
        return rfail(r, "%s: needs its model, data, train, parallel and estimate sections", r->plan_path);
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
    /* the families' own defaults when an older plan.json lacks the flag */
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
    /* used only to guess tokens from a file size; the dataset below carries the estimate's own token count */
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
    /* QLoRA's base weights are 4-bit (the estimator's memory and speed follow them) */
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
        /* a GPU not in the catalogue: declared from the plan's own figures (peak, usable memory, mfu) */
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
        /* the catalogue GPU's fabric, marked as defaults (the *_default flags) that a profile may override */
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
    /* the compiled estimate's own figures, for the before/after comparison */
    r->est_default_s = jnum(&c, je, "estimate", "step_seconds", 0, 1e12, 0);
    r->est_default_mfu = jnum(&c, je, "estimate", "mfu", 0, 1, 0);
    const cJSON *jn = jget(p, "job");
    /* the shape line: what tells runs apart (distinct_shapes compares it past the job's name) */
    snprintf(r->shape, sizeof r->shape, "%s: %d layers x %d, %d node%s x %d %s, %d x %d x %d",
             cJSON_IsString(jn) ? jn->valuestring : "?", m->layers, m->hidden, nodes, nodes == 1 ? "" : "s",
             cpu ? tpn : gpn, cpu ? (tpn == 1 ? "rank" : "ranks") : "GPUs", t->micro_batch, t->context, t->grad_accum);
    cJSON_Delete(p);
    return c.ok ? CALIB_OK : CALIB_BAD_INPUT;
}


/* ---- the fit ---- */

/* Only the fitted values go into the profile; the others stay unset so the estimator keeps its own defaults
 * (step_overhead -1: unset). */
void calib_fit_profile(const CalibFit *f, PlanProfile *pf)
{
    memset(pf, 0, sizeof *pf);
    pf->name = "candidate";
    pf->step_overhead_s = -1;
    if (f->on[CALIB_P_MFU]) pf->mfu = f->v[CALIB_P_MFU];
    if (f->on[CALIB_P_INTER]) pf->inter_bytes_per_s = f->v[CALIB_P_INTER];
    if (f->on[CALIB_P_INTRA]) pf->intra_bytes_per_s = f->v[CALIB_P_INTRA];
    if (f->on[CALIB_P_OVERHEAD]) pf->step_overhead_s = f->v[CALIB_P_OVERHEAD];
}

/* The run's step time as the estimator predicts it under profile PF (NULL: the built-in defaults). The
 * estimate's diagnostics are not wanted here and are dropped. */
double calib_predict(CalibRun *r, const PlanProfile *pf, Estimate *e)
{
    r->job.profile = pf;
    Diags *d = diags_new();
    estimate_job(&r->job, e, d);
    diags_free(d);
    r->job.profile = NULL;
    return e->step_seconds;
}

/* The fit's objective: the sum over the fitted runs of log(predicted / measured) squared, so a run off by a
 * factor counts the same whether it is fast or slow; a run the estimate cannot time counts as far off (50). */
static double loss(CalibRun *runs, int n, const CalibFit *f)
{
    PlanProfile pf;
    calib_fit_profile(f, &pf);
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (runs[i].check_only) continue;
        Estimate e;
        double p = calib_predict(&runs[i], &pf, &e);
        /* log ratio: 10% slow and 10% fast weigh about the same */
        double q = p > 0 ? log(p / runs[i].step_s) : 50;
        s += q * q;
    }
    return s;
}

/* Golden-section search of parameter k over [lo, hi] (log-spaced when logsp). */
static void search(CalibRun *runs, int n, CalibFit *f, int k, double lo, double hi, bool logsp)
{
    double a = logsp ? log(lo) : lo, b = logsp ? log(hi) : hi;
    const double g = (sqrt(5.0) - 1) / 2;
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
#define AT(x) (f->v[k] = logsp ? exp(x) : (x), loss(runs, n, f))
    double f1 = AT(x1), f2 = AT(x2);
    /* 80 iterations shrink the bracket by 0.618^80, about 1e-17: below a double's resolution */
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

/* Coordinate descent: each parameter searched in turn with the others fixed, repeated until a round no longer
 * lowers the loss (at most 40 rounds). mfu and the bandwidths are searched in log space over their plausible
 * ranges (lo, hi); the step overhead linearly from 0 to the fastest run's step time, which bounds it. */
static void fit_values(CalibRun *runs, int n, CalibFit *f, double min_step)
{
    /* mfu in (0, 1]; bandwidths from 1 MB/s to 10 TB/s; the overhead's range is set per fit (min_step) */
    static const double lo[CALIB_P_COUNT] = {1e-5, 1e6, 1e6, 0}, hi[CALIB_P_COUNT] = {1, 1e13, 1e13, 0};
    for (int round = 0; round < 40; round++) {
        double before = loss(runs, n, f);
        for (int k = 0; k < CALIB_P_COUNT; k++) {
            if (!f->on[k]) continue;
            if (k == CALIB_P_OVERHEAD) search(runs, n, f, k, 0, min_step, false);
            else search(runs, n, f, k, lo[k], hi[k], true);
        }
        /* no round improved the fit: converged */
        if (before - loss(runs, n, f) < 1e-14) break;
    }
    /* at its lower bound: none (the runs show no fixed cost per step) */
    if (f->on[CALIB_P_OVERHEAD] && f->v[CALIB_P_OVERHEAD] < 1e-9 * min_step) f->v[CALIB_P_OVERHEAD] = 0;
}

/* Distinct shapes among the fitted runs (what more values could be told apart by). */
static int distinct_shapes(const CalibRun *runs, int n)
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


void calib_fit(CalibRun *runs, int n, CalibFit *f)
{
    memset(f, 0, sizeof *f);
    /* what the runs can tell apart: mfu; the network with several nodes;
     * the GPU link with several GPUs a node; else a time per step */
    bool multi_node = false, multi_gpu = false;
    double min_step = INFINITY;
    for (int i = 0; i < n; i++) {
        if (runs[i].check_only) continue;
        Estimate e;
        calib_predict(&runs[i], NULL, &e);
        if (e.fabric_known && e.data_parallel > 1 && runs[i].job.nodes > 1) multi_node = true;
        if (e.fabric_known && e.data_parallel > 1 && runs[i].job.cluster->gpus_per_node > 1) multi_gpu = true;
        if (runs[i].step_s < min_step) min_step = runs[i].step_s;
        /* start from what the plan assumed */
        if (f->v[CALIB_P_MFU] == 0) f->v[CALIB_P_MFU] = e.mfu > 0 ? e.mfu : 0.3;
    }
    f->shapes = distinct_shapes(runs, n);
    static const int order[CALIB_P_COUNT] = {CALIB_P_MFU, CALIB_P_INTER, CALIB_P_INTRA, CALIB_P_OVERHEAD};
    /* no more parameters than distinct shapes: a value the runs cannot tell apart from another would be noise */
    bool want[CALIB_P_COUNT] = {true, multi_node, multi_gpu && !multi_node, !multi_node && !multi_gpu};
    if (multi_node && multi_gpu) want[CALIB_P_INTRA] = true;
    for (int k = 0, used = 0; k < CALIB_P_COUNT; k++)
        if (want[order[k]] && used < f->shapes) { f->on[order[k]] = true; used++; }
    /* starting points only (10 GB/s between nodes, 100 GB/s inside one): the search moves them */
    f->v[CALIB_P_INTER] = 10e9; f->v[CALIB_P_INTRA] = 100e9; f->v[CALIB_P_OVERHEAD] = 0;
    fit_values(runs, n, f, min_step);
}

/* The measurement from the run's log, then its plan.json; a log of one trainer with a plan for the other is
 * refused (the step time would be compared with the wrong estimate). */
int calib_run_load(CalibRun *r)
{
    r->err[0] = 0;
    size_t len;
    char *buf = read_all(r->data_path, &len);
    if (!buf) { snprintf(r->err, sizeof r->err, "%s: %s", r->data_path, strerror(errno)); return CALIB_IO; }
    int rc = r->src == CALIB_SRC_LF ? read_lf_log(r, buf, len) : read_llmc_metrics(r, buf, len);
    free(buf);
    if (rc == CALIB_OK) rc = build_plan(r);
    if (rc == CALIB_OK && (r->src == CALIB_SRC_LF) != (r->job.run->backend == BACKEND_LLAMAFACTORY))
        rc = rfail(r, "%s: %s is %s's log, but %s is a plan for backend = %s", r->arg, calib_src_names[r->src],
                   r->src == CALIB_SRC_LF ? "LLaMA-Factory" : "the llmc trainer", r->plan_path,
                   backend_llm_names[r->job.run->backend]);
    return rc;
}

/* The paths and the arena holding the rebuilt PlanJob; arg is the caller's and stays. */
void calib_run_free(CalibRun *r)
{
    free(r->data_path);
    free(r->plan_path);
    if (r->arena) arena_free(r->arena);
    r->data_path = r->plan_path = NULL;
    r->arena = NULL;
}
