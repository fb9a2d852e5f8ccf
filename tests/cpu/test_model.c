/* test_model.c — the CPU model against PyTorch fixtures (tests/cpu/make_fixtures.py):
 * logits, loss, every gradient, AdamW steps with accumulation + clipping + schedule
 * (each recorded step alone, and ten in a row), and a finite-difference check of a
 * few gradients. Tolerances: see "Error analysis" below.
 * Usage: test_model [--export-hf DIR] FIXTURE.safetensors... ; prints "N passed, N failed".
 * --export-hf DIR: also export each fixture's initial weights as a HF model
 * DIR/CASE/ and write our logits for one document to DIR/CASE.logits.safetensors
 * (tests/cpu/check_hf_load.py compares them with transformers on a GPU machine). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "model.h"
#include "optim.h"
#include "safetensors.h"

static int passed, failed;

static void check(int ok, const char *what, const char *fixture)
{
    if (ok) { passed++; if (getenv("VERBOSE_OK")) printf("ok   %s: %s\n", fixture, what); }
    else { failed++; printf("FAIL %s: %s\n", fixture, what); }
}

/* Relative-or-absolute closeness: |a-b| <= atol + rtol*|b| everywhere. */
static int close_all(const float *a, const float *b, size_t n, double rtol, double atol, double *worst)
{
    int ok = 1;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]), lim = atol + rtol * fabs(b[i]);
        if (d / lim > *worst) *worst = d / lim;
        if (!(d <= lim)) { ok = 0; if (getenv("VERBOSE")) printf("  [%zu] %.8g vs %.8g\n", i, a[i], b[i]); }
    }
    return ok;
}

static float *read_tensor(StModel *st, const char *name, size_t *numel)
{
    const StTensor *t = st_find(st, name);
    char err[256];
    if (!t) { fprintf(stderr, "fixture lacks %s\n", name); exit(2); }
    float *p = malloc(t->numel * sizeof(float) + 1);
    if (!p || st_read_f32(st, t, p, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(2); }
    if (numel) *numel = t->numel;
    return p;
}

static double jnum(cJSON *o, const char *k) { return cJSON_GetNumberValue(cJSON_GetObjectItem(o, k)); }

/* Header metadata (the python writer puts it in __metadata__). */
static cJSON *read_meta(const char *path, const char *key)
{
    FILE *f = fopen(path, "rb");
    unsigned char lb[8];
    if (!f || fread(lb, 1, 8, f) != 8) exit(2);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | lb[i];
    char *h = malloc(n + 1);
    if (!h || fread(h, 1, n, f) != n) exit(2);
    h[n] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(h);
    free(h);
    cJSON *s = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "__metadata__"), key);
    cJSON *r = cJSON_Parse(cJSON_GetStringValue(s));
    cJSON_Delete(root);
    if (!r) { fprintf(stderr, "%s: no metadata %s\n", path, key); exit(2); }
    return r;
}

typedef struct { uint32_t *ids, *pos; uint8_t *mask; Batch b; } OwnedBatch;

static void load_batch(StModel *st, const char *tag, OwnedBatch *ob)
{
    char name[64];
    size_t n;
    snprintf(name, sizeof name, "batch.%s.ids", tag);
    const StTensor *t = st_find(st, name);
    float *f = read_tensor(st, name, &n);
    ob->ids = malloc(n * 4); ob->pos = malloc(n * 4); ob->mask = malloc(n);
    for (size_t i = 0; i < n; i++) ob->ids[i] = (uint32_t)f[i];
    free(f);
    snprintf(name, sizeof name, "batch.%s.pos", tag);
    f = read_tensor(st, name, NULL);
    for (size_t i = 0; i < n; i++) ob->pos[i] = (uint32_t)f[i];
    free(f);
    snprintf(name, sizeof name, "batch.%s.mask", tag);
    f = read_tensor(st, name, NULL);
    for (size_t i = 0; i < n; i++) ob->mask[i] = (uint8_t)f[i];
    free(f);
    ob->b = (Batch){ob->ids, ob->pos, ob->mask, (int)t->shape[0], (int)t->shape[1]};
}

static const char *export_dir;

/* Export the model and our logits for one document (positions 0..T-1) of batch A's ids. */
static void export_hf(const char *path, Model *m, const OwnedBatch *A)
{
    char dir[4096], err[512], lp[4200];
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(dir, sizeof dir, "%s/%.*s", export_dir, (int)(strlen(base) - strlen(".safetensors")), base);
    int T = A->b.T;
    uint32_t *pos = malloc((size_t)T * 4);
    for (int t = 0; t < T; t++) pos[t] = (uint32_t)t;
    Batch one = {A->ids, pos, A->mask, 1, T};
    ModelActs *acts = model_acts_new(&m->cfg, 1, T);
    model_forward(m, acts, &one, NULL);
    float *ids = malloc((size_t)T * sizeof(float));
    for (int t = 0; t < T; t++) ids[t] = (float)A->ids[t];
    StWriteTensor t2[2] = {{"input_ids", 2, {1, T}, ids}, {"logits", 3, {1, T, m->cfg.vocab}, model_logits(acts)}};
    snprintf(lp, sizeof lp, "%s.logits.safetensors", dir);
    int ok = hf_export(dir, m, ST_F32, NULL, NULL, err, sizeof err) == 0 &&
             st_write(lp, t2, 2, ST_F32, NULL, err, sizeof err) == 0;
    check(ok, "HF export of the fixture model and our logits", path);
    if (!ok) printf("  %s\n", err);
    free(ids);
    free(pos);
    model_acts_free(acts);
}

/* Error analysis behind the tolerances (u = 2^-24, fp32 unit roundoff).
 *
 * Forward and backward are fp32 GEMMs whose summation order depends on OpenBLAS's
 * kernel set (Prescott, Haswell, Zen, SkylakeX differ in blocking and FMA use). A dot
 * product of length K in any order errs by at most gamma_K = K u / (1 - K u) times
 * the sum of |terms| (Higham, Accuracy and Stability, Thm 3.1); here K <= 40, so
 * 2.4e-6 per product, and rounding errors of random sign grow like sqrt(K) u
 * (Higham & Mary 2019), 4e-7. A value of these 2-layer models passes through about a
 * dozen such products, norms and softmaxes of modest condition, hence the
 * comparisons against the float64 reference: logits and gradients within
 * rel 1e-4 + abs 1e-5 (abs for elements that cancel to near zero), the mean loss
 * within 2e-5 (about 1e-5 relative at losses near 2).
 *
 * Adam is not a smooth function of its gradient where the gradient is near zero:
 * m/sqrt(v) turns a rounding-sized gradient into a step of size up to lr. So ten
 * steps of two fp32 implementations (or of one with two kernel sets) diverge in such
 * elements by up to 2 lr per step, and no elementwise tolerance on a trajectory can be
 * both tight and safe. Hence the split: each recorded step is replayed from torch's
 * state with torch's gradient, where the update is well conditioned (relative errors
 * in m, v and g stay relative in m/sqrt(v)) and bounded per element below; our
 * gradient at torch's weights is compared as any gradient is; and the trajectory of
 * ten steps of our own is held to the bound Adam itself guarantees. */
#define U 0x1p-24

static const int state_steps[] = {1, 9};   /* make_fixtures.py STATE_STEPS */

typedef struct {
    Model *m;
    ModelActs *acts;
    const Batch *A, *B;
    StModel *st;
    AdamW *opt;
    const LrSchedule *sch;
    double clip;
    const char *path;
} Ctx;

/* dst[offset of each parameter] = fixture tensor PREFIX.NAME */
static void read_flat(StModel *st, const Model *m, const char *prefix, float *dst)
{
    for (int i = 0; i < m->n_params; i++) {
        char name[160];
        size_t n;
        snprintf(name, sizeof name, "%s.%s", prefix, m->params[i].name);
        float *t = read_tensor(st, name, &n);
        if (n != m->params[i].numel) { fprintf(stderr, "%s: %zu elements\n", name, n); exit(2); }
        memcpy(dst + m->params[i].offset, t, n * sizeof(float));
        free(t);
    }
}

/* One optimizer step's gradient: micro-batches A and B accumulated, divided by all
 * label tokens (HF), pre-clip norm into *gn, clipped. Returns the mean loss. */
static double accumulate(Ctx *c, float *acc, double *gn)
{
    int64_t ca, cb;
    double sa = model_forward(c->m, c->acts, c->A, &ca);
    model_backward(c->m, c->acts, c->A, 1.0f);
    memcpy(acc, c->m->g, c->m->n_floats * sizeof(float));
    double sb = model_forward(c->m, c->acts, c->B, &cb);
    model_backward(c->m, c->acts, c->B, 1.0f);
    float inv = (float)(1.0 / (double)(ca + cb));
    for (size_t i = 0; i < c->m->n_floats; i++) acc[i] = (acc[i] + c->m->g[i]) * inv;
    *gn = grad_global_norm(acc, c->m->n_floats);
    grad_clip(acc, c->m->n_floats, *gn, c->clip);
    return (sa + sb) / (double)(ca + cb);
}

/* Step S alone: loss, norm and clipped gradient of ours at torch's weights, then
 * adamw_step on torch's (w, m, v, g) against torch's result, each element within its
 * own rounding bound. For m' = b1 m + (1-b1) g and v' = b2 v + (1-b2) g^2 the inputs
 * are rounded (u each), each product and sum adds u, and 1 - b in fp32 carries b's
 * rounding relative to 1 - b: b u / (1 - b). Then d = sqrt(v'/bc2) + eps, r = m'/d,
 * w' = w (1 - lr wd) - (lr/bc1) r; the bound is twice the first-order sum. */
static void adam_step_alone(Ctx *c, int s, double ref_loss, double ref_gn, float *acc)
{
    Model *m = c->m;
    AdamW *o = c->opt;
    size_t n = m->n_floats;
    char pre[64], what[256];
    float *g = malloc(n * sizeof(float)), *w1 = malloc(n * sizeof(float)), *m1 = malloc(n * sizeof(float)),
          *v1 = malloc(n * sizeof(float)), *w0 = malloc(n * sizeof(float));
    snprintf(pre, sizeof pre, "adam.%d.w", s); read_flat(c->st, m, pre, m->w);
    snprintf(pre, sizeof pre, "adam.%d.m", s); read_flat(c->st, m, pre, o->m);
    snprintf(pre, sizeof pre, "adam.%d.v", s); read_flat(c->st, m, pre, o->v);
    snprintf(pre, sizeof pre, "adam.%d.g", s); read_flat(c->st, m, pre, g);
    snprintf(pre, sizeof pre, "adam.%d.next.w", s); read_flat(c->st, m, pre, w1);
    snprintf(pre, sizeof pre, "adam.%d.next.m", s); read_flat(c->st, m, pre, m1);
    snprintf(pre, sizeof pre, "adam.%d.next.v", s); read_flat(c->st, m, pre, v1);
    memcpy(w0, m->w, n * sizeof(float));

    double gn, loss = accumulate(c, acc, &gn), worst;
    snprintf(what, sizeof what, "step %d at torch's weights: loss %.7f vs %.7f", s, loss, ref_loss);
    check(fabs(loss - ref_loss) <= 2e-5, what, c->path);
    snprintf(what, sizeof what, "step %d at torch's weights: grad norm %.7g vs %.7g", s, gn, ref_gn);
    check(fabs(gn - ref_gn) <= 1e-4 * ref_gn + 1e-6, what, c->path);
    int ok = close_all(acc, g, n, 1e-4, 1e-5, &worst);
    snprintf(what, sizeof what, "step %d: clipped accumulated gradient within rel 1e-4 / abs 1e-5 (worst %.3g)", s, worst);
    check(ok, what, c->path);

    /* the step itself, from torch's gradient */
    double lr = lr_at(c->sch, s), b1 = o->beta1, b2 = o->beta2;
    o->t = s;
    double bc1 = 1 - pow(b1, s + 1), bc2 = 1 - pow(b2, s + 1);
    float *mm = malloc(n * sizeof(float)), *vv = malloc(n * sizeof(float));
    memcpy(mm, o->m, n * sizeof(float));
    memcpy(vv, o->v, n * sizeof(float));
    adamw_step(o, m->params, m->n_params, m->w, g, lr);
    double wm = 0, mmw = 0, vmw = 0;
    int wok = 1, mok = 1, vok = 1;
    for (int p = 0; p < m->n_params; p++) {
        double wd = m->params[p].decay ? o->weight_decay : 0;
        for (size_t k = m->params[p].offset; k < m->params[p].offset + m->params[p].numel; k++) {
            double gk = fabs(g[k]), mk = fabs(mm[k]), vk = vv[k];
            double em = b1 * mk * 2 * U + (1 - b1) * gk * (2 * U + b1 * U / (1 - b1)) + U * fabs(m1[k]);
            double ev = b2 * vk * 2 * U + (1 - b2) * gk * gk * (3 * U + b2 * U / (1 - b2)) + U * v1[k];
            double d = sqrt(v1[k] / bc2) + o->eps, r = fabs(m1[k]) / d;
            double ed = sqrt(v1[k] / bc2) * (v1[k] > 0 ? ev / v1[k] / 2 : 0) + d * 4 * U;
            double er = em / d + r * (ed / d + U);
            double ew = fabs(w0[k]) * 3 * U * (1 + lr * wd) + lr / bc1 * (er + 2 * U * r) + U * fabs(w1[k]);
            double dw = fabs((double)m->w[k] - w1[k]) / (2 * ew + 1e-30);
            double dm = fabs((double)o->m[k] - m1[k]) / (2 * em + 1e-30);
            double dv = fabs((double)o->v[k] - v1[k]) / (2 * ev + 1e-30);
            if (!(dw <= 1)) wok = 0;
            if (!(dm <= 1)) mok = 0;
            if (!(dv <= 1)) vok = 0;
            if (dw > wm) wm = dw;
            if (dm > mmw) mmw = dm;
            if (dv > vmw) vmw = dv;
        }
    }
    snprintf(what, sizeof what, "step %d alone: weights within their rounding bound (worst %.3g of it)", s, wm);
    check(wok, what, c->path);
    snprintf(what, sizeof what, "step %d alone: first moment within its rounding bound (worst %.3g of it)", s, mmw);
    check(mok, what, c->path);
    snprintf(what, sizeof what, "step %d alone: second moment within its rounding bound (worst %.3g of it)", s, vmw);
    check(vok, what, c->path);
    check(o->t == s + 1, "adamw_step counts the step (bias correction)", c->path);
    free(g); free(w1); free(m1); free(v1); free(w0); free(mm); free(vv);
}

/* Adam's own bound on |m^/sqrt(v^)| after t steps, by Cauchy-Schwarz over the
 * gradient history: m^ = sum a_k g_k, v^ = sum b_k g_k^2, so |m^|/sqrt(v^) <=
 * sqrt(sum a_k^2 / b_k). */
static double adam_ratio_bound(double b1, double b2, int t)
{
    double s = 0;
    for (int k = 1; k <= t; k++) {
        double a = (1 - b1) * pow(b1, t - k) / (1 - pow(b1, t)), b = (1 - b2) * pow(b2, t - k) / (1 - pow(b2, t));
        s += a * a / b;
    }
    return sqrt(s);
}

/* Ten steps of our own from torch's initial weights. Each step moves an element by
 * at most lr * bound (decay only shrinks differences), so ours and torch's can differ
 * by at most sum 2 lr_s bound_s; anything beyond is a wrong step, not rounding. */
static void adam_trajectory(Ctx *c, float *acc)
{
    Model *m = c->m;
    AdamW *o = c->opt;
    size_t n = m->n_floats;
    char what[256];
    read_flat(c->st, m, "w", m->w);
    memset(o->m, 0, n * sizeof(float));
    memset(o->v, 0, n * sizeof(float));
    o->t = 0;
    double limit = 1e-6;
    for (int s = 0; s < c->sch->total_steps; s++) {
        double gn, lr = lr_at(c->sch, s);
        accumulate(c, acc, &gn);
        adamw_step(o, m->params, m->n_params, m->w, acc, lr);
        limit += 2 * lr * adam_ratio_bound(o->beta1, o->beta2, s + 1);
    }
    float *w = malloc(n * sizeof(float));
    read_flat(c->st, m, "adam.w", w);
    double far = 0;
    for (size_t k = 0; k < n; k++) if (fabs((double)m->w[k] - w[k]) > far) far = fabs((double)m->w[k] - w[k]);
    snprintf(what, sizeof what, "after %d AdamW steps of our own: max abs diff %.3g within Adam's bound %.3g",
             (int)c->sch->total_steps, far, limit);
    check(far <= limit, what, c->path);
    free(w);
}

/* ---- LoRA and freeze (tests/cpu/make_lora_fixtures.py) ----
 *
 * The same analysis holds: an adapter adds two GEMMs of length in (<= 24) and
 * rank (<= 4) per targeted linear layer, and frozen tensors change nothing but
 * which gradients exist, so the comparisons keep their tolerances (logits and
 * gradients rel 1e-4 + abs 1e-5, loss 1e-5), and the AdamW trajectory over the
 * trainable tensors keeps Adam's own bound. */

/* The base's tensors that freeze trains: LLaMA-Factory's freeze_trainable_layers,
 * the last n layers (n > 0) or the first -n; all of their tensors, nothing else. */
static unsigned char *freeze_mask(const Model *m, int n)
{
    unsigned char *frozen = malloc((size_t)m->n_params);
    int L = m->cfg.layers;
    for (int i = 0; i < m->n_params; i++) {
        int l = m->params[i].layer;
        frozen[i] = !(l >= 0 && (n > 0 ? l >= L - n : l < -n));
    }
    return frozen;
}

static void run_ft_fixture(const char *path, StModel *st, Model *m, cJSON *oj, cJSON *fj, const OwnedBatch *A,
                           const OwnedBatch *B)
{
    char what[256];
    double worst;
    const char *method = cJSON_GetStringValue(cJSON_GetObjectItem(fj, "method"));
    int is_lora = !strcmp(method, "lora");
    unsigned char *frozen = NULL;
    if (is_lora) {
        unsigned targets = 0;
        static const char *const mods[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
        cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(fj, "targets"))
            for (int k = 0; k < LORA_TARGETS; k++) if (!strcmp(t->valuestring, mods[k])) targets |= 1u << k;
        m->lora = lora_new(m, targets, (int)jnum(fj, "rank"), (int)jnum(fj, "alpha"),
                           cJSON_IsTrue(cJSON_GetObjectItem(fj, "rslora")), 1);
        frozen = malloc((size_t)m->n_params);
        memset(frozen, 1, (size_t)m->n_params);
        read_flat(st, &m->lora->p, "lora", m->lora->p.w);   /* the fixture's adapters, not our init */
    } else {
        frozen = freeze_mask(m, (int)jnum(fj, "freeze_layers"));
    }
    m->frozen = frozen;
    Model tv;
    check(model_trainable(m, &tv) == 0, "the trainable tensors form one view", path);

    ModelActs *acts = model_acts_new(&m->cfg, A->b.B, A->b.T);
    int64_t count;
    double sum = model_forward(m, acts, &A->b, &count);
    size_t nl;
    float *ref_logits = read_tensor(st, "logits", &nl), *ref_loss = read_tensor(st, "loss", NULL);
    int ok = close_all(model_logits(acts), ref_logits, nl, 1e-4, 1e-5, &worst);
    snprintf(what, sizeof what, "%s: logits within rel 1e-4 / abs 1e-5 (worst %.3g of tolerance)", method, worst);
    check(ok, what, path);
    snprintf(what, sizeof what, "%s: loss %.7f vs torch %.7f", method, sum / count, ref_loss[0]);
    check(fabs(sum / count - ref_loss[0]) < 1e-5, what, path);

    /* gradients of every trainable tensor; frozen ones stay zero */
    model_backward(m, acts, &A->b, (float)(1.0 / count));
    for (int i = 0; i < tv.n_params; i++) {
        char name[160];
        snprintf(name, sizeof name, "g.%s", tv.params[i].name);
        float *g = read_tensor(st, name, NULL);
        ok = close_all(tv.g + tv.params[i].offset, g, tv.params[i].numel, 1e-4, 1e-5, &worst);
        snprintf(what, sizeof what, "%s: gradient %s within rel 1e-4 / abs 1e-5 (worst %.3g)", method,
                 tv.params[i].name, worst);
        check(ok, what, path);
        free(g);
    }
    int zero = 1;
    for (int i = 0; i < m->n_params; i++)
        for (size_t k = 0; frozen[i] && k < m->params[i].numel; k++) zero &= m->g[m->params[i].offset + k] == 0;
    check(zero, "frozen tensors get no gradient", path);

    /* AdamW over the trainable tensors from torch's start, accumulation over A and B */
    AdamW opt;
    adamw_init(&opt, tv.n_floats, jnum(oj, "beta1"), jnum(oj, "beta2"), jnum(oj, "eps"), jnum(oj, "weight_decay"));
    LrSchedule sch = {SCHED_COSINE, jnum(oj, "lr"), jnum(oj, "min_lr"), (int64_t)jnum(oj, "warmup_steps"),
                      (int64_t)jnum(oj, "steps")};
    float *acc = malloc(tv.n_floats * sizeof(float)), *ref_l = read_tensor(st, "adam.loss", NULL);
    double limit = 1e-6, loss_far = 0;
    for (int s = 0; s < sch.total_steps; s++) {
        int64_t ca, cb;
        double sa = model_forward(m, acts, &A->b, &ca);
        model_backward(m, acts, &A->b, 1.0f);
        memcpy(acc, tv.g, tv.n_floats * sizeof(float));
        double sb = model_forward(m, acts, &B->b, &cb);
        model_backward(m, acts, &B->b, 1.0f);
        float inv = (float)(1.0 / (double)(ca + cb));
        for (size_t k = 0; k < tv.n_floats; k++) acc[k] = (acc[k] + tv.g[k]) * inv;
        double gn = grad_global_norm(acc, tv.n_floats), lr = lr_at(&sch, s);
        grad_clip(acc, tv.n_floats, gn, jnum(oj, "grad_clip"));
        if (s == 0 && fabs((sa + sb) / (ca + cb) - ref_l[0]) > loss_far) loss_far = fabs((sa + sb) / (ca + cb) - ref_l[0]);
        adamw_step(&opt, tv.params, tv.n_params, tv.w, acc, lr);
        limit += 2 * lr * adam_ratio_bound(opt.beta1, opt.beta2, s + 1);
    }
    snprintf(what, sizeof what, "%s: first step's accumulated loss within 1e-5 of torch (%.3g)", method, loss_far);
    check(loss_far <= 1e-5, what, path);
    float *w = malloc(tv.n_floats * sizeof(float));
    read_flat(st, &tv, "adam.w", w);
    double far = 0;
    for (size_t k = 0; k < tv.n_floats; k++) if (fabs((double)tv.w[k] - w[k]) > far) far = fabs((double)tv.w[k] - w[k]);
    snprintf(what, sizeof what, "%s: after %d AdamW steps of the trainable tensors: max abs diff %.3g within Adam's "
             "bound %.3g", method, (int)sch.total_steps, far, limit);
    check(far <= limit, what, path);
    free(w); free(acc); free(ref_l); free(ref_logits); free(ref_loss);
    adamw_free(&opt);
    model_acts_free(acts);
    model_trainable_free(m, &tv);
    lora_free(m->lora);
    m->lora = NULL;
    m->frozen = NULL;
    free(frozen);
}

/* The fixture's __metadata__ KEY, or NULL when it has none. */
static cJSON *read_meta_opt(const char *path, const char *key)
{
    FILE *f = fopen(path, "rb");
    unsigned char lb[8];
    if (!f || fread(lb, 1, 8, f) != 8) exit(2);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | lb[i];
    char *h = malloc(n + 1);
    if (!h || fread(h, 1, n, f) != n) exit(2);
    h[n] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(h);
    free(h);
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "__metadata__"), key));
    cJSON *r = s ? cJSON_Parse(s) : NULL;
    cJSON_Delete(root);
    return r;
}

static void run_fixture(const char *path)
{
    StModel st;
    char err[256], what[256];
    if (st_open(&st, path, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(2); }
    cJSON *cj = read_meta(path, "config"), *oj = read_meta(path, "optim"), *fj = read_meta_opt(path, "finetune");
    const char *arch = cJSON_GetStringValue(cJSON_GetObjectItem(cj, "arch"));
    if (plan_vocab_find(arch_json_names, arch) < 0) { fprintf(stderr, "%s: arch '%s' is none of plan_vocab.h's\n", path, arch ? arch : "(none)"); exit(2); }
    ModelConfig c = {
        .arch = (ModelArch)plan_vocab_find(arch_json_names, arch),
        .layers = (int)jnum(cj, "layers"), .hidden = (int)jnum(cj, "hidden"), .heads = (int)jnum(cj, "heads"),
        .kv_heads = (int)jnum(cj, "kv_heads"), .head_dim = (int)jnum(cj, "head_dim"), .ffn = (int)jnum(cj, "ffn"),
        .vocab = (int)jnum(cj, "vocab"), .max_context = (int)jnum(cj, "max_context"),
        .rope_theta = jnum(cj, "rope_theta"), .rms_eps = jnum(cj, "rms_eps"),
        .tie_embeddings = cJSON_IsTrue(cJSON_GetObjectItem(cj, "tie_embeddings")),
        .qkv_bias = cJSON_IsTrue(cJSON_GetObjectItem(cj, "qkv_bias")),
        .qk_norm = cJSON_IsTrue(cJSON_GetObjectItem(cj, "qk_norm")),
    };
    Model m;
    if (model_init(&m, &c)) { fprintf(stderr, "model_init failed\n"); exit(2); }
    for (int i = 0; i < m.n_params; i++) {
        char name[128];
        snprintf(name, sizeof name, "w.%s", m.params[i].name);
        size_t n;
        float *w = read_tensor(&st, name, &n);
        check(n == m.params[i].numel, "parameter size matches", path);
        memcpy(m.w + m.params[i].offset, w, m.params[i].numel * sizeof(float));
        free(w);
    }
    check(st_find(&st, "w.lm_head.weight") == NULL || !c.tie_embeddings, "tied model has no lm_head", path);

    OwnedBatch A, B;
    load_batch(&st, "A", &A);
    load_batch(&st, "B", &B);
    if (fj) {   /* LoRA / freeze: their own checks (no HF export of a fine-tuning fixture) */
        run_ft_fixture(path, &st, &m, oj, fj, &A, &B);
        model_free(&m);
        free(A.ids); free(A.pos); free(A.mask); free(B.ids); free(B.pos); free(B.mask);
        cJSON_Delete(cj); cJSON_Delete(oj); cJSON_Delete(fj);
        st_close(&st);
        return;
    }
    ModelActs *acts = model_acts_new(&c, A.b.B, A.b.T);
    if (export_dir) export_hf(path, &m, &A);

    /* forward: logits and mean loss */
    int64_t count;
    double sum = model_forward(&m, acts, &A.b, &count);
    size_t nl;
    float *ref_logits = read_tensor(&st, "logits", &nl), *ref_loss = read_tensor(&st, "loss", NULL);
    double worst;
    int ok = close_all(model_logits(acts), ref_logits, nl, 1e-4, 1e-5, &worst);
    snprintf(what, sizeof what, "logits within rel 1e-4 / abs 1e-5 (worst %.3g of tolerance)", worst);
    check(ok, what, path);
    snprintf(what, sizeof what, "loss %.7f vs torch %.7f", sum / count, ref_loss[0]);
    check(fabs(sum / count - ref_loss[0]) < 1e-5, what, path);

    /* backward: every gradient of the mean loss */
    model_backward(&m, acts, &A.b, (float)(1.0 / count));
    for (int i = 0; i < m.n_params; i++) {
        char name[128];
        snprintf(name, sizeof name, "g.%s", m.params[i].name);
        float *g = read_tensor(&st, name, NULL);
        ok = close_all(m.g + m.params[i].offset, g, m.params[i].numel, 1e-4, 1e-5, &worst);
        snprintf(what, sizeof what, "gradient %s within rel 1e-4 / abs 1e-5 (worst %.3g)", m.params[i].name, worst);
        check(ok, what, path);
        free(g);
    }

    /* finite differences on the largest-gradient element of a few tensors */
    float *g0 = malloc(m.n_floats * sizeof(float));
    memcpy(g0, m.g, m.n_floats * sizeof(float));
    int picks[] = {0, 2, m.n_params / 2, m.n_params - 1};
    for (int k = 0; k < 4; k++) {
        const ParamInfo *p = &m.params[picks[k]];
        size_t best = 0;
        for (size_t i = 0; i < p->numel; i++)
            if (fabsf(g0[p->offset + i]) > fabsf(g0[p->offset + best])) best = i;
        float *w = m.w + p->offset + best, saved = *w, h = 2e-3f;
        *w = saved + h;
        double lp = model_forward(&m, acts, &A.b, NULL) / count;
        *w = saved - h;
        double lm = model_forward(&m, acts, &A.b, NULL) / count;
        *w = saved;
        double fd = (lp - lm) / (2 * h), an = g0[p->offset + best];
        snprintf(what, sizeof what, "finite difference %s[%zu]: %.6g vs analytic %.6g", p->name, best, fd, an);
        check(fabs(fd - an) <= 2e-3 + 2e-2 * fabs(an), what, path);
    }
    free(g0);

    /* AdamW: each recorded step alone from torch's state, then the whole trajectory */
    AdamW opt;
    adamw_init(&opt, m.n_floats, jnum(oj, "beta1"), jnum(oj, "beta2"), jnum(oj, "eps"), jnum(oj, "weight_decay"));
    LrSchedule sch = {SCHED_COSINE, jnum(oj, "lr"), jnum(oj, "min_lr"), (int64_t)jnum(oj, "warmup_steps"),
                      (int64_t)jnum(oj, "steps")};
    float *ref_lr = read_tensor(&st, "adam.lr", NULL), *ref_l = read_tensor(&st, "adam.loss", NULL);
    float *ref_gn = read_tensor(&st, "adam.grad_norm", NULL);
    float *acc = malloc(m.n_floats * sizeof(float));
    int steps = (int)sch.total_steps, sched_ok = 1;
    for (int s = 0; s < steps; s++) {
        double lr = lr_at(&sch, s);
        if (fabs(lr - ref_lr[s]) > 1e-9 + 1e-6 * ref_lr[s]) sched_ok = 0;
    }
    check(sched_ok, "learning-rate schedule matches LambdaLR (warmup + cosine with min_lr)", path);
    Ctx cx = {&m, acts, &A.b, &B.b, &st, &opt, &sch, jnum(oj, "grad_clip"), path};
    for (size_t k = 0; k < sizeof state_steps / sizeof state_steps[0]; k++)
        adam_step_alone(&cx, state_steps[k], ref_l[state_steps[k]], ref_gn[state_steps[k]], acc);
    adam_trajectory(&cx, acc);
    free(acc); free(ref_lr); free(ref_l); free(ref_gn); free(ref_logits); free(ref_loss);
    adamw_free(&opt);
    model_acts_free(acts);
    model_free(&m);
    free(A.ids); free(A.pos); free(A.mask); free(B.ids); free(B.pos); free(B.mask);
    cJSON_Delete(cj);
    cJSON_Delete(oj);
    st_close(&st);
}

int main(int argc, char **argv)
{
    int i = 1;
    if (argc > 2 && !strcmp(argv[1], "--export-hf")) { export_dir = argv[2]; i = 3; }
    for (; i < argc; i++) run_fixture(argv[i]);
    printf("model: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
