/* model.c — parameter layout, init, forward and backward of the decoder (model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ops_cpu.h"
#include "rng.h"

int model_config_check(const ModelConfig *c, char *err, size_t errlen)
{
    const char *why = NULL;
    if (c->layers < 1 || c->layers > 1024) why = "layers must be in 1..1024";
    else if (c->hidden < 1 || c->heads < 1 || c->kv_heads < 1 || c->head_dim < 2 || c->ffn < 1 || c->vocab < 2)
        why = "hidden, heads, kv_heads, head_dim, ffn and vocab must be positive";
    else if (c->heads % c->kv_heads) why = "heads must be a multiple of kv_heads";
    else if (c->head_dim % 2) why = "head_dim must be even (RoPE rotates halves)";
    else if (c->head_dim > 1024) why = "head_dim must be at most 1024";
    else if (!(c->rope_theta > 0) || !(c->rms_eps > 0)) why = "rope_theta and rms_eps must be positive";
    if (why) { snprintf(err, errlen, "model config: %s", why); return -1; }
    return 0;
}

/* Per-layer parameter count: the order in model.h. */
static int layer_param_count(const ModelConfig *c)
{
    return 9 + (c->qkv_bias ? 3 : 0) + (c->qk_norm ? 2 : 0);
}

typedef struct {
    float *in_norm, *wq, *bq, *wk, *bk, *wv, *bv, *q_norm, *k_norm, *wo, *post_norm, *wg, *wu, *wd;
} LayerW;

/* Pointers to layer l's tensors inside buf (the weights or the gradients),
 * which holds the parameter buffer from flat offset base on; with grads, NULL
 * for a frozen tensor (no gradient wanted). */
static LayerW layer_ptrs(const Model *m, float *buf, size_t base, int l, int grads)
{
    const ModelConfig *c = &m->cfg;
    int i = 1 + l * layer_param_count(c);
    LayerW w = {0};
#define NEXT() (grads && m->frozen && m->frozen[i] ? (i++, (float *)NULL) : buf + (m->params[i++].offset - base))
    w.in_norm = NEXT();
    w.wq = NEXT(); if (c->qkv_bias) w.bq = NEXT();
    w.wk = NEXT(); if (c->qkv_bias) w.bk = NEXT();
    w.wv = NEXT(); if (c->qkv_bias) w.bv = NEXT();
    if (c->qk_norm) { w.q_norm = NEXT(); w.k_norm = NEXT(); }
    w.wo = NEXT(); w.post_norm = NEXT(); w.wg = NEXT(); w.wu = NEXT(); w.wd = NEXT();
#undef NEXT
    return w;
}

static LayerW layer_w(const Model *m, float *buf, size_t base, int l) { return layer_ptrs(m, buf, base, l, 0); }
static LayerW layer_g(const Model *m, int l) { return layer_ptrs(m, m->g, 0, l, 1); }

size_t model_param_count(const ModelConfig *c)
{
    size_t H = (size_t)c->hidden, V = (size_t)c->vocab, F = (size_t)c->ffn, hd = (size_t)c->head_dim;
    size_t qd = (size_t)c->heads * hd, kd = (size_t)c->kv_heads * hd;
    size_t layer = H + qd * H + 2 * kd * H + (c->qkv_bias ? qd + 2 * kd : 0) + (c->qk_norm ? 2 * hd : 0) +
                   H * qd + H + 3 * F * H;
    return V * H + (size_t)c->layers * layer + H + (c->tie_embeddings ? 0 : V * H);
}

static void add_param(Model *m, const char *name, TensorKind kind, int layer, int64_t d0, int64_t d1, int decay)
{
    ParamInfo *p = &m->params[m->n_params++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->kind = kind;
    p->layer = layer;
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    p->offset = m->n_floats;
    p->decay = decay;
    m->n_floats += p->numel;
}

int model_layout(Model *m, const ModelConfig *c)
{
    char err[128];
    memset(m, 0, sizeof *m);
    if (model_config_check(c, err, sizeof err)) return -1;
    m->cfg = *c;
    int total = 3 + c->layers * layer_param_count(c);
    m->params = calloc((size_t)total, sizeof *m->params);
    if (!m->params) return -1;
    int64_t H = c->hidden, qd = (int64_t)c->heads * c->head_dim, kd = (int64_t)c->kv_heads * c->head_dim;
    char name[96];
    add_param(m, "model.embed_tokens.weight", TENSOR_EMBED, -1, c->vocab, H, 1);
    for (int l = 0; l < c->layers; l++) {
#define P(suffix, kind, d0, d1, decay) \
        (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), add_param(m, name, kind, l, d0, d1, decay))
        P("input_layernorm.weight", TENSOR_IN_NORM, H, 0, 0);
        P("self_attn.q_proj.weight", TENSOR_Q, qd, H, 1);
        if (c->qkv_bias) P("self_attn.q_proj.bias", TENSOR_Q_BIAS, qd, 0, 0);
        P("self_attn.k_proj.weight", TENSOR_K, kd, H, 1);
        if (c->qkv_bias) P("self_attn.k_proj.bias", TENSOR_K_BIAS, kd, 0, 0);
        P("self_attn.v_proj.weight", TENSOR_V, kd, H, 1);
        if (c->qkv_bias) P("self_attn.v_proj.bias", TENSOR_V_BIAS, kd, 0, 0);
        if (c->qk_norm) {
            P("self_attn.q_norm.weight", TENSOR_Q_NORM, c->head_dim, 0, 0);
            P("self_attn.k_norm.weight", TENSOR_K_NORM, c->head_dim, 0, 0);
        }
        P("self_attn.o_proj.weight", TENSOR_O, H, qd, 1);
        P("post_attention_layernorm.weight", TENSOR_POST_NORM, H, 0, 0);
        P("mlp.gate_proj.weight", TENSOR_GATE, c->ffn, H, 1);
        P("mlp.up_proj.weight", TENSOR_UP, c->ffn, H, 1);
        P("mlp.down_proj.weight", TENSOR_DOWN, H, c->ffn, 1);
#undef P
    }
    add_param(m, "model.norm.weight", TENSOR_FINAL_NORM, -1, H, 0, 0);
    if (!c->tie_embeddings) add_param(m, "lm_head.weight", TENSOR_LM_HEAD, -1, c->vocab, H, 1);
    if (m->n_floats != model_param_count(c)) abort();   /* the two must describe one layout */
    return 0;
}

int model_init(Model *m, const ModelConfig *c)
{
    if (model_layout(m, c)) return -1;
    m->w = calloc(m->n_floats, sizeof(float));
    m->g = calloc(m->n_floats, sizeof(float));
    if (!m->w || !m->g) { model_free(m); return -1; }
    return 0;
}

int model_preset(const char *name, ModelConfig *c)
{
    /* Qwen2.5: tied embeddings, q/k/v biases, rope_theta 1e6, rms_eps 1e-6 */
    *c = (ModelConfig){.arch = ARCH_QWEN2, .vocab = 151936, .head_dim = 64, .max_context = 32768,
                       .rope_theta = 1000000.0, .rms_eps = 1e-6, .tie_embeddings = 1, .qkv_bias = 1};
    if (!strcmp(name, "qwen2.5-0.5b")) {
        c->layers = 24; c->hidden = 896; c->heads = 14; c->kv_heads = 2; c->ffn = 4864;
    } else if (!strcmp(name, "qwen2.5-1.5b")) {
        c->layers = 28; c->hidden = 1536; c->heads = 12; c->kv_heads = 2; c->ffn = 8960; c->head_dim = 128;
    } else if (!strcmp(name, "qwen2.5-3b")) {
        c->layers = 36; c->hidden = 2048; c->heads = 16; c->kv_heads = 2; c->ffn = 11008; c->head_dim = 128;
    } else if (!strcmp(name, "qwen2.5-7b")) {   /* untied LM head, a wider vocabulary */
        c->layers = 28; c->hidden = 3584; c->heads = 28; c->kv_heads = 4; c->ffn = 18944; c->head_dim = 128;
        c->vocab = 152064; c->tie_embeddings = 0;
    } else if (!strcmp(name, "qwen2.5-14b")) {
        c->layers = 48; c->hidden = 5120; c->heads = 40; c->kv_heads = 8; c->ffn = 13824; c->head_dim = 128;
        c->vocab = 152064; c->tie_embeddings = 0; c->rms_eps = 1e-5;
    } else if (!strcmp(name, "qwen2.5-72b")) {   /* bench's per-rank memory of the 72B plans (LLMC_TRANSPORT=solo) */
        c->layers = 80; c->hidden = 8192; c->heads = 64; c->kv_heads = 8; c->ffn = 29568; c->head_dim = 128;
        c->vocab = 152064; c->tie_embeddings = 0;
    } else if (!strcmp(name, "qwen3-1.7b")) {   /* q/k RMSNorm, no biases */
        c->arch = ARCH_QWEN3; c->layers = 28; c->hidden = 2048; c->heads = 16; c->kv_heads = 8; c->ffn = 6144;
        c->head_dim = 128; c->qkv_bias = 0; c->qk_norm = 1; c->max_context = 40960;
    } else if (!strcmp(name, "tiny")) {
        c->layers = 2; c->hidden = 128; c->heads = 4; c->kv_heads = 2; c->ffn = 256; c->head_dim = 32;
        c->vocab = 512;
    } else {
        return -1;
    }
    return 0;
}

void model_free(Model *m)
{
    free(m->params);
    free(m->w);
    free(m->g);
    memset(m, 0, sizeof *m);
}

const ParamInfo *model_find(const Model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) return &m->params[i];
    return NULL;
}

void model_unit_range(const Model *m, int unit, size_t *start, size_t *len)
{
    const ModelConfig *c = &m->cfg;
    int per = layer_param_count(c);
    int first = unit == 0 ? 0 : 1 + (unit - 1) * per;   /* its first tensor */
    int end = unit == 0 ? 1 : unit <= c->layers ? first + per : m->n_params;
    *start = m->params[first].offset;
    *len = m->params[end - 1].offset + m->params[end - 1].numel - *start;
}

/* Unit u's weights, unit-relative: from the hooks, or m->w. */
static float *unit_acquire(Model *m, int unit, size_t *base)
{
    size_t len;
    model_unit_range(m, unit, base, &len);
    if (m->hooks) return (float *)m->hooks->acquire(m->hooks->ctx, unit);
    return m->w + *base;
}

static void unit_release(Model *m, int unit)
{
    if (m->hooks) m->hooks->release(m->hooks->ctx, unit);
}

static void unit_grad_ready(Model *m, int unit)
{
    if (m->hooks && m->hooks->grad_ready) m->hooks->grad_ready(m->hooks->ctx, unit);
}

static int is_norm_or_bias(const char *name)
{
    size_t n = strlen(name);
    return (n > 5 && !strcmp(name + n - 5, ".bias")) || strstr(name, "norm.weight") != NULL;
}

void model_init_random(Model *m, uint64_t seed, double std)
{
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        float *w = m->w + p->offset;
        if (strstr(p->name, "norm.weight")) {
            for (size_t k = 0; k < p->numel; k++) w[k] = 1.0f;
        } else if (is_norm_or_bias(p->name)) {
            memset(w, 0, p->numel * sizeof(float));
        } else {
            for (size_t k = 0; k < p->numel; k++) w[k] = (float)(rng_normal(&r) * std);
        }
    }
}


/* ---- LoRA (model.h) ---- */

static const TensorKind lora_kind[LORA_TARGETS] = {TENSOR_Q, TENSOR_K, TENSOR_V, TENSOR_O, TENSOR_GATE, TENSOR_UP,
                                                   TENSOR_DOWN};
static const char *const lora_module_path[LORA_TARGETS] = {"self_attn.q_proj", "self_attn.k_proj",
    "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

/* [out, in] of target t's base weight */
static void lora_target_shape(const ModelConfig *c, int t, int64_t *out, int64_t *in)
{
    int64_t H = c->hidden, F = c->ffn, qd = (int64_t)c->heads * c->head_dim, kd = (int64_t)c->kv_heads * c->head_dim;
    static const int kind_out[LORA_TARGETS] = {0, 1, 1, 2, 3, 3, 2}, kind_in[LORA_TARGETS] = {2, 2, 2, 0, 2, 2, 3};
    const int64_t dims[4] = {qd, kd, H, F};
    *out = dims[kind_out[t]];
    *in = dims[kind_in[t]];
}

Lora *lora_new(const Model *base, unsigned targets, int rank, int alpha, int rslora, uint64_t seed)
{
    const ModelConfig *c = &base->cfg;
    Lora *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->rank = rank;
    l->scale = (float)(rslora ? alpha / sqrt((double)rank) : (double)alpha / rank);
    l->targets = targets;
    l->p.cfg = *c;
    l->a_index = malloc((size_t)c->layers * LORA_TARGETS * sizeof *l->a_index);
    l->p.params = calloc((size_t)c->layers * LORA_TARGETS * 2, sizeof *l->p.params);
    if (!l->a_index || !l->p.params) { lora_free(l); return NULL; }
    char name[96];
    for (int layer = 0; layer < c->layers; layer++)
        for (int t = 0; t < LORA_TARGETS; t++) {
            l->a_index[layer * LORA_TARGETS + t] = -1;
            if (!(targets & (1u << t))) continue;
            int64_t out, in;
            lora_target_shape(c, t, &out, &in);
            l->a_index[layer * LORA_TARGETS + t] = l->p.n_params;
            snprintf(name, sizeof name, "base_model.model.model.layers.%d.%s.lora_A.weight", layer, lora_module_path[t]);
            add_param(&l->p, name, lora_kind[t], layer, rank, in, 1);
            snprintf(name, sizeof name, "base_model.model.model.layers.%d.%s.lora_B.weight", layer, lora_module_path[t]);
            add_param(&l->p, name, lora_kind[t], layer, out, rank, 1);
        }
    l->p.w = calloc(l->p.n_floats ? l->p.n_floats : 1, sizeof(float));
    l->p.g = calloc(l->p.n_floats ? l->p.n_floats : 1, sizeof(float));
    if (!l->p.w || !l->p.g) { lora_free(l); return NULL; }
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < l->p.n_params; i += 2) {   /* A uniform, B zero */
        const ParamInfo *a = &l->p.params[i];
        double bound = 1.0 / sqrt((double)a->shape[1]);
        for (size_t k = 0; k < a->numel; k++) l->p.w[a->offset + k] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
    }
    return l;
}

void lora_free(Lora *l)
{
    if (!l) return;
    model_free(&l->p);
    free(l->a_index);
    free(l->tmp);
    free(l);
}

void lora_merge(const Lora *l, Model *m)
{
    int per = layer_param_count(&m->cfg);
    for (int i = 0; i < l->p.n_params; i += 2) {
        const ParamInfo *A = &l->p.params[i], *B = A + 1;
        const float *a = l->p.w + A->offset, *b = l->p.w + B->offset;
        /* the base weight of this target: its kind inside its layer */
        const ParamInfo *base = NULL;
        for (int k = 1 + A->layer * per; k < 1 + (A->layer + 1) * per && !base; k++)
            if (m->params[k].kind == A->kind) base = &m->params[k];
        float *w = m->w + base->offset;
        int64_t out = B->shape[0], in = A->shape[1], r = A->shape[0];
        for (int64_t o = 0; o < out; o++)
            for (int64_t j = 0; j < in; j++) {
                double s = 0;
                for (int64_t k = 0; k < r; k++) s += (double)b[o * r + k] * a[k * in + j];
                w[o * in + j] += (float)(l->scale * s);
            }
    }
}

/* Scratch for n tokens of the rank: x A^T and its gradient. */
static float *lora_tmp(Lora *l, int n)
{
    size_t need = (size_t)n * l->rank;
    if (need > l->tmp_n) {
        float *t = realloc(l->tmp, 2 * need * sizeof(float));
        if (!t) {   /* mid-step, no caller to report to: as ops_cpu.c's attention scratch */
            log_error("out of memory (LoRA scratch)");
            exit(1);
        }
        l->tmp = t;
        l->tmp_n = need;
    }
    return l->tmp;
}

/* y[N, out] += scale * (x A^T) B^T for layer's target t (when it has one). */
static void lora_fwd(Model *m, int layer, int t, float *y, const float *x, int N)
{
    Lora *l = m->lora;
    int ai = l ? l->a_index[layer * LORA_TARGETS + t] : -1;
    if (ai < 0) return;
    const ParamInfo *A = &l->p.params[ai], *B = A + 1;
    int r = l->rank, in = (int)A->shape[1], out = (int)B->shape[0];
    float *xa = lora_tmp(l, N);
    op_linear(xa, x, l->p.w + A->offset, NULL, N, in, r);
    op_linear_acc(y, xa, l->p.w + B->offset, N, r, out, l->scale);
}

/* Backward of lora_fwd given dy: gradients of A and B into l->p.g (added), and
 * dx[N, in] += the adapter's part of d(input). */
static void lora_bwd(Model *m, int layer, int t, const float *dy, const float *x, float *dx, int N)
{
    Lora *l = m->lora;
    int ai = l ? l->a_index[layer * LORA_TARGETS + t] : -1;
    if (ai < 0) return;
    const ParamInfo *A = &l->p.params[ai], *B = A + 1;
    int r = l->rank, in = (int)A->shape[1], out = (int)B->shape[0];
    float *xa = lora_tmp(l, N), *dxa = xa + (size_t)N * r;
    op_linear(xa, x, l->p.w + A->offset, NULL, N, in, r);          /* x A^T, as in forward */
    for (size_t i = 0; i < (size_t)N * r; i++) xa[i] *= l->scale;
    op_linear_dw(l->p.g + B->offset, dy, xa, N, r, out);           /* dB = dy^T (s x A^T) */
    op_linear_dx(dxa, dy, l->p.w + B->offset, N, r, out, 0);        /* d(x A^T) = s dy B */
    for (size_t i = 0; i < (size_t)N * r; i++) dxa[i] *= l->scale;
    op_linear_dw(l->p.g + A->offset, dxa, x, N, in, r);            /* dA = d(x A^T)^T x */
    op_linear_dx(dx, dxa, l->p.w + A->offset, N, in, r, 1);         /* dx += d(x A^T) A */
}

/* Does layer l need a backward pass for itself (trainable tensors or adapters)? */
static int layer_trains(const Model *m, int l)
{
    int per = layer_param_count(&m->cfg), first = 1 + l * per;
    if (m->lora)
        for (int t = 0; t < LORA_TARGETS; t++)
            if (m->lora->a_index[l * LORA_TARGETS + t] >= 0) return 1;
    if (!m->frozen) return 1;
    for (int i = first; i < first + per; i++) if (!m->frozen[i]) return 1;
    return 0;
}

static int param_trains(const Model *m, int i) { return !m->frozen || !m->frozen[i]; }

int model_trainable(const Model *m, Model *view)
{
    memset(view, 0, sizeof *view);
    view->cfg = m->cfg;
    if (m->lora) {
        const Model *p = &m->lora->p;
        view->params = p->params; view->n_params = p->n_params; view->n_floats = p->n_floats;
        view->w = p->w; view->g = p->g;
        return 0;
    }
    if (!m->frozen) {
        view->params = m->params; view->n_params = m->n_params; view->n_floats = m->n_floats;
        view->w = m->w; view->g = m->g;
        return 0;
    }
    int first = -1, last = -1;
    for (int i = 0; i < m->n_params; i++)
        if (!m->frozen[i]) { if (first < 0) first = i; last = i; }
    for (int i = first; first >= 0 && i <= last; i++) if (m->frozen[i]) return -1;
    if (first < 0) return -1;
    size_t lo = m->params[first].offset;
    view->n_params = last - first + 1;
    if (!(view->params = malloc((size_t)view->n_params * sizeof *view->params))) return -1;
    for (int i = 0; i < view->n_params; i++) {
        view->params[i] = m->params[first + i];
        view->params[i].offset -= lo;
    }
    view->n_floats = m->params[last].offset + m->params[last].numel - lo;
    view->w = m->w ? m->w + lo : NULL;
    view->g = m->g ? m->g + lo : NULL;
    return 0;
}

void model_trainable_free(const Model *m, Model *view)
{
    if (m->frozen && !m->lora) free(view->params);
    memset(view, 0, sizeof *view);
}

/* ---- activations ---- */

struct ModelActs {
    int B, T, N;
    ModelConfig c;
    /* saved for backward, per layer l at offset l * (N * width) */
    float *x;                 /* [L+1][N,H] residual stream at each layer input; x[L] final */
    float *xmid;              /* [L][N,H] after the attention residual */
    float *h1, *rstd1;        /* [L][N,H] normed input, [L][N] */
    float *qraw, *kraw;       /* [L][N,qd], [L][N,kd] projections before qk-norm (qk_norm only) */
    float *qn_rstd, *kn_rstd; /* [L][N*H], [L][N*KV] */
    float *q, *k, *v;         /* [L][N,qd], [L][N,kd] after qk-norm and RoPE */
    float *probs;             /* [L][B,H,T,T] */
    float *att;               /* [L][N,qd] attention output before o_proj */
    float *h2, *rstd2;        /* [L][N,H], [L][N] */
    float *gate, *up, *act;   /* [L][N,F] */
    float *hf, *rstdf;        /* [N,H], [N] final norm */
    float *logits;            /* [N,V] */
    /* backward scratch */
    float *dx, *dh, *dq, *dk, *dv, *datt, *dgate, *dup, *dact, *dlogits;
};

static float *alloc_f(size_t n, int *fail)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) *fail = 1;
    return p;
}

double model_acts_bytes(const ModelConfig *c, int B, int T)
{
    double N = (double)B * T, L = c->layers, H = c->hidden, F = c->ffn, V = c->vocab;
    double qd = (double)c->heads * c->head_dim, kd = (double)c->kv_heads * c->head_dim;
    double per_layer = N * (3 * H + 2 + qd * 2 + kd * 2 + 3 * F) + (double)B * c->heads * T * T;
    if (c->qk_norm) per_layer += N * (qd + kd + c->heads + c->kv_heads);
    double floats = L * per_layer + N * H /* final x */ + N * (H + 1) + 2 * N * V /* logits, dlogits */
                    + N * (2 * H + 2 * qd + 2 * kd + 3 * F) /* backward scratch */;
    return floats * sizeof(float);
}

ModelActs *model_acts_new(const ModelConfig *c, int B, int T)
{
    ModelActs *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    size_t N = (size_t)B * T, L = c->layers, H = c->hidden, F = c->ffn, V = c->vocab;
    size_t qd = (size_t)c->heads * c->head_dim, kd = (size_t)c->kv_heads * c->head_dim;
    int fail = 0;
    a->B = B; a->T = T; a->N = (int)N; a->c = *c;
    a->x = alloc_f((L + 1) * N * H, &fail);
    a->xmid = alloc_f(L * N * H, &fail);
    a->h1 = alloc_f(L * N * H, &fail);
    a->rstd1 = alloc_f(L * N, &fail);
    if (c->qk_norm) {
        a->qraw = alloc_f(L * N * qd, &fail);
        a->kraw = alloc_f(L * N * kd, &fail);
        a->qn_rstd = alloc_f(L * N * c->heads, &fail);
        a->kn_rstd = alloc_f(L * N * c->kv_heads, &fail);
    }
    a->q = alloc_f(L * N * qd, &fail);
    a->k = alloc_f(L * N * kd, &fail);
    a->v = alloc_f(L * N * kd, &fail);
    a->probs = alloc_f(L * (size_t)B * c->heads * T * T, &fail);
    a->att = alloc_f(L * N * qd, &fail);
    a->h2 = alloc_f(L * N * H, &fail);
    a->rstd2 = alloc_f(L * N, &fail);
    a->gate = alloc_f(L * N * F, &fail);
    a->up = alloc_f(L * N * F, &fail);
    a->act = alloc_f(L * N * F, &fail);
    a->hf = alloc_f(N * H, &fail);
    a->rstdf = alloc_f(N, &fail);
    a->logits = alloc_f(N * V, &fail);
    a->dx = alloc_f(N * H, &fail);
    a->dh = alloc_f(N * H, &fail);
    a->dq = alloc_f(N * qd, &fail);
    a->dk = alloc_f(N * kd, &fail);
    a->dv = alloc_f(N * kd, &fail);
    a->datt = alloc_f(N * qd, &fail);
    a->dgate = alloc_f(N * F, &fail);
    a->dup = alloc_f(N * F, &fail);
    a->dact = alloc_f(N * F, &fail);
    a->dlogits = alloc_f(N * V, &fail);
    if (fail) { model_acts_free(a); return NULL; }
    return a;
}

void model_acts_free(ModelActs *a)
{
    if (!a) return;
    float *all[] = {a->x, a->xmid, a->h1, a->rstd1, a->qraw, a->kraw, a->qn_rstd, a->kn_rstd,
                    a->q, a->k, a->v, a->probs, a->att, a->h2, a->rstd2, a->gate, a->up, a->act,
                    a->hf, a->rstdf, a->logits, a->dx, a->dh, a->dq, a->dk, a->dv, a->datt,
                    a->dgate, a->dup, a->dact, a->dlogits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(a);
}

const float *model_logits(const ModelActs *a) { return a->logits; }

/* Does row position t (in a row of T) carry a loss term, predicting id[t+1]? */
static int is_label(const Batch *b, size_t row_base, int t)
{
    if (t + 1 >= b->T) return 0;
    size_t n = row_base + (size_t)t + 1;
    return b->mask[n] && b->pos[n] > 0;
}

/* The last unit (final norm, untied LM head) and, when tied, the embedding as
 * the LM head: returns the final norm's weights, *lm_head the head's. */
static const float *head_acquire(Model *m, const float **lm_head)
{
    const ModelConfig *c = &m->cfg;
    size_t base, ebase;
    float *u = unit_acquire(m, c->layers + 1, &base);
    const float *final_norm = u + (m->params[1 + c->layers * layer_param_count(c)].offset - base);
    if (c->tie_embeddings) *lm_head = unit_acquire(m, 0, &ebase);
    else *lm_head = u + (m->params[m->n_params - 1].offset - base);
    return final_norm;
}

static void head_release(Model *m)
{
    if (m->cfg.tie_embeddings) unit_release(m, 0);
    unit_release(m, m->cfg.layers + 1);
}

double model_forward(Model *m, ModelActs *a, const Batch *b, int64_t *n_labels)
{
    const ModelConfig *c = &m->cfg;
    int N = a->N, H = c->hidden, F = c->ffn, V = c->vocab, hd = c->head_dim;
    int qd = c->heads * hd, kd = c->kv_heads * hd;
    size_t NH = (size_t)N * H;
    float eps = (float)c->rms_eps;
    size_t base;
    const float *embed = unit_acquire(m, 0, &base);
    for (int n = 0; n < N; n++)
        memcpy(a->x + (size_t)n * H, embed + (size_t)b->ids[n] * H, (size_t)H * sizeof(float));
    unit_release(m, 0);

    for (int l = 0; l < c->layers; l++) {
        float *wbuf = unit_acquire(m, 1 + l, &base);
        LayerW w = layer_w(m, wbuf, base, l);
        float *x = a->x + l * NH, *xmid = a->xmid + l * NH, *xout = a->x + (l + 1) * NH;
        float *h1 = a->h1 + l * NH, *h2 = a->h2 + l * NH;
        float *q = a->q + (size_t)l * N * qd, *k = a->k + (size_t)l * N * kd, *v = a->v + (size_t)l * N * kd;
        float *att = a->att + (size_t)l * N * qd;
        float *probs = a->probs + (size_t)l * a->B * c->heads * a->T * a->T;
        float *gate = a->gate + (size_t)l * N * F, *up = a->up + (size_t)l * N * F, *act = a->act + (size_t)l * N * F;

        op_rmsnorm(h1, a->rstd1 + (size_t)l * N, x, w.in_norm, N, H, eps);
        if (c->qk_norm) {
            float *qraw = a->qraw + (size_t)l * N * qd, *kraw = a->kraw + (size_t)l * N * kd;
            op_linear(qraw, h1, w.wq, w.bq, N, H, qd);
            lora_fwd(m, l, LORA_Q, qraw, h1, N);
            op_linear(kraw, h1, w.wk, w.bk, N, H, kd);
            lora_fwd(m, l, LORA_K, kraw, h1, N);
            op_rmsnorm(q, a->qn_rstd + (size_t)l * N * c->heads, qraw, w.q_norm, N * c->heads, hd, eps);
            op_rmsnorm(k, a->kn_rstd + (size_t)l * N * c->kv_heads, kraw, w.k_norm, N * c->kv_heads, hd, eps);
        } else {
            op_linear(q, h1, w.wq, w.bq, N, H, qd);
            lora_fwd(m, l, LORA_Q, q, h1, N);
            op_linear(k, h1, w.wk, w.bk, N, H, kd);
            lora_fwd(m, l, LORA_K, k, h1, N);
        }
        op_linear(v, h1, w.wv, w.bv, N, H, kd);
        lora_fwd(m, l, LORA_V, v, h1, N);
        op_rope(q, b->pos, N, c->heads, hd, c->rope_theta, 0);
        op_rope(k, b->pos, N, c->kv_heads, hd, c->rope_theta, 0);
        op_attention(att, probs, q, k, v, b->pos, a->B, a->T, c->heads, c->kv_heads, hd);
        op_linear(xmid, att, w.wo, NULL, N, qd, H);
        lora_fwd(m, l, LORA_O, xmid, att, N);
        for (size_t i = 0; i < NH; i++) xmid[i] += x[i];

        op_rmsnorm(h2, a->rstd2 + (size_t)l * N, xmid, w.post_norm, N, H, eps);
        op_linear(gate, h2, w.wg, NULL, N, H, F);
        lora_fwd(m, l, LORA_GATE, gate, h2, N);
        op_linear(up, h2, w.wu, NULL, N, H, F);
        lora_fwd(m, l, LORA_UP, up, h2, N);
        op_swiglu(act, gate, up, (size_t)N * F);
        op_linear(xout, act, w.wd, NULL, N, F, H);
        lora_fwd(m, l, LORA_DOWN, xout, act, N);
        for (size_t i = 0; i < NH; i++) xout[i] += xmid[i];
        unit_release(m, 1 + l);
    }

    const float *lm_head;
    const float *final_norm = head_acquire(m, &lm_head);
    op_rmsnorm(a->hf, a->rstdf, a->x + (size_t)c->layers * NH, final_norm, N, H, eps);
    op_linear(a->logits, a->hf, lm_head, NULL, N, H, V);
    head_release(m);

    double loss = 0.0;
    int64_t count = 0;
    for (int r = 0; r < b->B; r++) {
        size_t base = (size_t)r * b->T;
        for (int t = 0; t < b->T; t++) {
            if (!is_label(b, base, t)) continue;
            const float *lg = a->logits + (base + t) * V;
            float mx = lg[0];
            for (int i = 1; i < V; i++) if (lg[i] > mx) mx = lg[i];
            double s = 0.0;
            for (int i = 0; i < V; i++) s += exp((double)(lg[i] - mx));
            loss += log(s) + mx - lg[b->ids[base + t + 1]];
            count++;
        }
    }
    if (n_labels) *n_labels = count;
    return loss;
}

void model_backward(Model *m, ModelActs *a, const Batch *b, float scale)
{
    const ModelConfig *c = &m->cfg;
    int N = a->N, H = c->hidden, F = c->ffn, V = c->vocab, hd = c->head_dim;
    int qd = c->heads * hd, kd = c->kv_heads * hd;
    size_t NH = (size_t)N * H;
    memset(m->g, 0, m->n_floats * sizeof(float));
    if (m->lora) memset(m->lora->p.g, 0, m->lora->p.n_floats * sizeof(float));

    /* d(scale * sum CE)/dlogits = scale * (softmax - onehot) at label positions */
    memset(a->dlogits, 0, (size_t)N * V * sizeof(float));
    for (int r = 0; r < b->B; r++) {
        size_t base = (size_t)r * b->T;
        for (int t = 0; t < b->T; t++) {
            if (!is_label(b, base, t)) continue;
            const float *lg = a->logits + (base + t) * V;
            float *dl = a->dlogits + (base + t) * V;
            float mx = lg[0];
            for (int i = 1; i < V; i++) if (lg[i] > mx) mx = lg[i];
            float s = 0.0f;
            for (int i = 0; i < V; i++) { dl[i] = expf(lg[i] - mx); s += dl[i]; }
            float inv = scale / s;
            for (int i = 0; i < V; i++) dl[i] *= inv;
            dl[b->ids[base + t + 1]] -= scale;
        }
    }

    size_t norm_off = m->params[1 + c->layers * layer_param_count(c)].offset;
    size_t head_off = c->tie_embeddings ? m->params[0].offset : m->params[m->n_params - 1].offset;
    const float *lm_head;
    const float *final_norm = head_acquire(m, &lm_head);
    int norm_i = 1 + c->layers * layer_param_count(c), head_i = c->tie_embeddings ? 0 : m->n_params - 1;
    if (param_trains(m, head_i)) op_linear_dw(m->g + head_off, a->dlogits, a->hf, N, H, V);
    op_linear_dx(a->dh, a->dlogits, lm_head, N, H, V, 0);
    op_rmsnorm_bwd(a->dx, param_trains(m, norm_i) ? m->g + norm_off : NULL, a->dh, a->x + (size_t)c->layers * NH,
                   a->rstdf, final_norm, N, H, 0);
    head_release(m);
    unit_grad_ready(m, c->layers + 1);

    /* below the lowest layer that trains, nothing needs a gradient */
    int lowest = param_trains(m, 0) ? 0 : c->layers;
    for (int l = 0; l < lowest; l++) if (layer_trains(m, l)) lowest = l;
    for (int l = c->layers - 1; l >= lowest; l--) {
        size_t base;
        float *wbuf = unit_acquire(m, 1 + l, &base);
        LayerW w = layer_w(m, wbuf, base, l), g = layer_g(m, l);
        float *x = a->x + l * NH, *xmid = a->xmid + l * NH;
        float *h1 = a->h1 + l * NH, *h2 = a->h2 + l * NH;
        float *q = a->q + (size_t)l * N * qd, *k = a->k + (size_t)l * N * kd, *v = a->v + (size_t)l * N * kd;
        float *att = a->att + (size_t)l * N * qd;
        float *probs = a->probs + (size_t)l * a->B * c->heads * a->T * a->T;
        float *gate = a->gate + (size_t)l * N * F, *up = a->up + (size_t)l * N * F, *act = a->act + (size_t)l * N * F;

        /* MLP: a->dx holds d(layer output) = d(xmid) through the residual */
        if (g.wd) op_linear_dw(g.wd, a->dx, act, N, F, H);
        op_linear_dx(a->dact, a->dx, w.wd, N, F, H, 0);
        lora_bwd(m, l, LORA_DOWN, a->dx, act, a->dact, N);
        op_swiglu_bwd(a->dgate, a->dup, a->dact, gate, up, (size_t)N * F);
        if (g.wg) op_linear_dw(g.wg, a->dgate, h2, N, H, F);
        if (g.wu) op_linear_dw(g.wu, a->dup, h2, N, H, F);
        op_linear_dx(a->dh, a->dgate, w.wg, N, H, F, 0);
        lora_bwd(m, l, LORA_GATE, a->dgate, h2, a->dh, N);
        op_linear_dx(a->dh, a->dup, w.wu, N, H, F, 1);
        lora_bwd(m, l, LORA_UP, a->dup, h2, a->dh, N);
        op_rmsnorm_bwd(a->dx, g.post_norm, a->dh, xmid, a->rstd2 + (size_t)l * N, w.post_norm, N, H, 1);

        /* attention: a->dx now holds d(xmid) = d(x) through the residual */
        if (g.wo) op_linear_dw(g.wo, a->dx, att, N, qd, H);
        op_linear_dx(a->datt, a->dx, w.wo, N, qd, H, 0);
        lora_bwd(m, l, LORA_O, a->dx, att, a->datt, N);
        op_attention_bwd(a->dq, a->dk, a->dv, a->datt, probs, q, k, v, b->pos, a->B, a->T,
                         c->heads, c->kv_heads, hd);
        op_rope(a->dq, b->pos, N, c->heads, hd, c->rope_theta, 1);
        op_rope(a->dk, b->pos, N, c->kv_heads, hd, c->rope_theta, 1);
        if (c->qk_norm) {
            /* dq/dk become gradients of the raw projections (reuse datt/dh-sized scratch) */
            float *qraw = a->qraw + (size_t)l * N * qd, *kraw = a->kraw + (size_t)l * N * kd;
            op_rmsnorm_bwd(a->datt, g.q_norm, a->dq, qraw, a->qn_rstd + (size_t)l * N * c->heads,
                           w.q_norm, N * c->heads, hd, 0);
            memcpy(a->dq, a->datt, (size_t)N * qd * sizeof(float));
            op_rmsnorm_bwd(a->datt, g.k_norm, a->dk, kraw, a->kn_rstd + (size_t)l * N * c->kv_heads,
                           w.k_norm, N * c->kv_heads, hd, 0);
            memcpy(a->dk, a->datt, (size_t)N * kd * sizeof(float));
        }
        if (g.bq) op_bias_dw(g.bq, a->dq, N, qd);
        if (g.bk) op_bias_dw(g.bk, a->dk, N, kd);
        if (g.bv) op_bias_dw(g.bv, a->dv, N, kd);
        if (g.wq) op_linear_dw(g.wq, a->dq, h1, N, H, qd);
        if (g.wk) op_linear_dw(g.wk, a->dk, h1, N, H, kd);
        if (g.wv) op_linear_dw(g.wv, a->dv, h1, N, H, kd);
        op_linear_dx(a->dh, a->dq, w.wq, N, H, qd, 0);
        lora_bwd(m, l, LORA_Q, a->dq, h1, a->dh, N);
        op_linear_dx(a->dh, a->dk, w.wk, N, H, kd, 1);
        lora_bwd(m, l, LORA_K, a->dk, h1, a->dh, N);
        op_linear_dx(a->dh, a->dv, w.wv, N, H, kd, 1);
        lora_bwd(m, l, LORA_V, a->dv, h1, a->dh, N);
        op_rmsnorm_bwd(a->dx, g.in_norm, a->dh, x, a->rstd1 + (size_t)l * N, w.in_norm, N, H, 1);
        unit_release(m, 1 + l);
        unit_grad_ready(m, 1 + l);
    }

    float *dembed = m->g + m->params[0].offset;
    for (int n = 0; n < N && param_trains(m, 0); n++) {
        float *d = dembed + (size_t)b->ids[n] * H;
        const float *s = a->dx + (size_t)n * H;
        for (int i = 0; i < H; i++) d[i] += s[i];
    }
    unit_grad_ready(m, 0);
}
