/* lora_cuda.c — LoRA adapters on the GPU: layout, the forward and backward
 * products beside each base GEMM, and moving their state to and from the host.
 *
 * For a group with k targets, in features and output y of the base GEMM:
 *   forward   u_t  = x A_t^T                  [N, r]  (one GEMM: A stacked [k*r, in])
 *             y_t += scale * u_t B_t^T         y_t: the target's columns of y
 *   backward  dB_t  = scale * dy_t^T u_t       [out_t, r]
 *             du_t  = scale * dy_t B_t         [N, r]  (stacked like u)
 *             dA    = du^T x                   [k*r, in] (one GEMM)
 *             dx   += du A                     (one GEMM)
 * which is PEFT's LoRA Linear without dropout: y = x W^T + scale * (x A^T) B^T. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "log.h"
#include "lora_cuda.h"
#include "cuda_check.h"
#include "cuda_layout.h"
#include "backend_caps.h"

#define LORA_ALIGN LLMC_CUDA_ALIGN_ELEMS   /* every tensor starts 128-byte aligned in bf16 */

/* The group each target rides on, in LORA_* order (runtime/model/model.h). */
static const int group_of[LORA_TARGETS] = {CL_QKV, CL_QKV, CL_QKV, CL_O, CL_GU, CL_GU, CL_DOWN};

/* Target t's output columns in its group's base GEMM output: [*col, *col + *out). */
static void target_cols(const ModelConfig *c, int t, int *col, int *out)
{
    int HD = c->heads * c->head_dim, KVD = c->kv_heads * c->head_dim;
    switch (t) {
    case LORA_Q: *col = 0; *out = HD; return;
    case LORA_K: *col = HD; *out = KVD; return;
    case LORA_V: *col = HD + KVD; *out = KVD; return;
    case LORA_O: *col = 0; *out = c->hidden; return;
    case LORA_GATE: *col = 0; *out = c->ffn; return;
    case LORA_UP: *col = c->ffn; *out = c->ffn; return;
    default: *col = 0; *out = c->hidden; return;   /* LORA_DOWN */
    }
}

/* In features of group g's base GEMM. */
static int group_in(const ModelConfig *c, int g)
{
    return g == CL_O ? c->heads * c->head_dim : g == CL_DOWN ? c->ffn : c->hidden;
}

int cuda_lora_supported(int rank, char *err, size_t errlen)
{
    /* the row llmc check refuses by (contract/backend_caps.h): u_t starts at
     * column t*r of u and B_t's rows are r long, whole 16-byte bf16 vectors */
    if (!llmc_lora_rank_ok(LLMC_BACKEND_CUDA, rank)) {
        const LlmcBackendCaps *caps = &llmc_backend_caps[LLMC_BACKEND_CUDA];
        snprintf(err, errlen, "lora_rank = %d: the CUDA backend takes ranks that are multiples of %d up to %d", rank,
                 caps->lora_rank_step, caps->lora_rank_max);
        return -1;
    }
    return 0;
}

static size_t take(size_t *cur, size_t n)
{
    size_t o = *cur;
    *cur += (n + LORA_ALIGN - 1) / LORA_ALIGN * LORA_ALIGN;
    return o;
}

static void add_param(CudaLora *a, const ParamInfo *hp, size_t off)
{
    CudaParam *p = &a->params[a->n_params++];
    snprintf(p->name, sizeof p->name, "%s", hp->name);
    p->off = off;
    p->host_off = hp->offset;
    p->rows = (int)hp->shape[0];
    p->cols = (int)hp->shape[1];
    p->numel = hp->numel;
}

/* Per layer and group: the stacked A of the group's targets, then each B. */
static int lora_layout(CudaLora *a, const ModelConfig *c, const Lora *hl)
{
    int L = c->layers, r = hl->rank;
    a->rank = r;
    a->scale = hl->scale;
    a->targets = hl->targets;
    a->a_off = calloc((size_t)L * CL_GROUPS, sizeof *a->a_off);
    a->b_off = calloc((size_t)L * LORA_TARGETS, sizeof *a->b_off);
    a->params = calloc((size_t)hl->p.n_params, sizeof *a->params);
    if (!a->a_off || !a->b_off || !a->params) return -1;
    for (int t = 0; t < LORA_TARGETS; t++)
        if (hl->targets & (1u << t)) a->width[group_of[t]] += r;
    size_t cur = 0;
    for (int l = 0; l < L; l++)
        for (int g = 0; g < CL_GROUPS; g++) {
            if (!a->width[g]) continue;
            a->a_off[l * CL_GROUPS + g] = take(&cur, (size_t)a->width[g] * group_in(c, g));
            size_t row = a->a_off[l * CL_GROUPS + g];
            for (int t = 0; t < LORA_TARGETS; t++) {
                if (group_of[t] != g || !(hl->targets & (1u << t))) continue;
                int ia = hl->a_index[l * LORA_TARGETS + t], col, out;
                target_cols(c, t, &col, &out);
                if (ia < 0 || hl->p.params[ia].numel != (size_t)r * group_in(c, g) ||
                    hl->p.params[ia + 1].numel != (size_t)out * r)
                    return -1;
                add_param(a, &hl->p.params[ia], row);
                row += (size_t)r * group_in(c, g);
                a->b_off[l * LORA_TARGETS + t] = take(&cur, (size_t)out * r);
                add_param(a, &hl->p.params[ia + 1], a->b_off[l * LORA_TARGETS + t]);
            }
        }
    a->n_total = cur;
    return a->n_params == hl->p.n_params ? 0 : -1;
}

int cuda_lora_create(CudaModel *m, const Lora *hl, int *fail)
{
    const ModelConfig *c = &m->cfg;
    CudaLora *a = calloc(1, sizeof *a);
    if (!a) { log_error("out of memory"); return -1; }
    m->lora = a;
    if (lora_layout(a, c, hl)) {
        log_error("LoRA: the host adapters do not match the model's shapes");
        return -1;
    }
    size_t N = (size_t)m->B * m->T, BB = sizeof(bf16_t), FF = sizeof(float);
    a->w = cuda_model_alloc(m, a->n_total * BB, fail);
    a->grad = cuda_model_alloc(m, a->n_total * FF, fail);
    a->master = cuda_model_alloc(m, a->n_total * FF, fail);
    a->m = cuda_model_alloc(m, a->n_total * FF, fail);
    a->v = cuda_model_alloc(m, a->n_total * FF, fail);
    int widest = 0;
    for (int g = 0; g < CL_GROUPS; g++) widest = a->width[g] > widest ? a->width[g] : widest;
    a->du = cuda_model_alloc(m, N * (size_t)widest * BB, fail);
    for (int l = 0; l < c->layers; l++)
        for (int g = 0; g < CL_GROUPS; g++) {
            if (!a->width[g]) continue;
            CudaLayerActs *x = &m->acts[l];
            x->lu[g] = m->recompute == RECOMPUTE_FULL && l > 0 ? m->acts[0].lu[g]
                                                                   : cuda_model_alloc(m, N * a->width[g] * BB, fail);
        }
    if (*fail) return -1;
    /* padding between tensors is never written: zero once */
    CUDA_CHECK(cudaMemset(a->grad, 0, a->n_total * FF));
    CUDA_CHECK(cudaMemset(a->w, 0, a->n_total * BB));
    return 0;
}

void cuda_lora_destroy(CudaModel *m)
{
    CudaLora *a = m->lora;
    if (!a) return;
    free(a->params); free(a->a_off); free(a->b_off);
    free(a);
    m->lora = NULL;
}

static void lmm(CudaModel *m, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                void *D, int ldd, int d_f32, float alpha, float beta)
{
    GemmArgs g = {.transA = ta, .transB = tb, .M = M, .N = N, .K = K, .A = A, .lda = lda, .B = B, .ldb = ldb,
                  .D = D, .ldd = ldd, .d_f32 = d_f32, .alpha = alpha, .beta = beta, .batch = 1};
    gemm_run(m->gemm, &g);
}

void cuda_lora_fwd(CudaModel *m, int l, int g, const bf16_t *x, bf16_t *y, int ldy)
{
    CudaLora *a = m->lora;
    const ModelConfig *c = &m->cfg;
    int W = a->width[g], N = m->B * m->T, in = group_in(c, g), r = a->rank;
    if (!W) return;
    bf16_t *u = m->acts[l].lu[g];
    /* u [N, W] = x [N, in] . A [W, in]^T */
    lmm(m, 0, 1, N, W, in, x, in, a->w + a->a_off[l * CL_GROUPS + g], in, u, W, 0, 1.f, 0.f);
    for (int t = 0, j = 0; y && t < LORA_TARGETS; t++) {
        if (group_of[t] != g || !(a->targets & (1u << t))) continue;
        int col, out;
        target_cols(c, t, &col, &out);
        /* y_t [N, out] += scale * u_t [N, r] . B_t [out, r]^T */
        lmm(m, 0, 1, N, out, r, u + (size_t)j * r, W, a->w + a->b_off[l * LORA_TARGETS + t], r, y + col, ldy, 0,
            a->scale, 1.f);
        j++;
    }
}

void cuda_lora_bwd(CudaModel *m, int l, int g, const bf16_t *x, const bf16_t *dy, int lddy, bf16_t *dx)
{
    CudaLora *a = m->lora;
    const ModelConfig *c = &m->cfg;
    int W = a->width[g], N = m->B * m->T, in = group_in(c, g), r = a->rank;
    if (!W) return;
    const bf16_t *u = m->acts[l].lu[g];
    float beta = m->grad_fresh ? 0.f : 1.f;
    for (int t = 0, j = 0; t < LORA_TARGETS; t++) {
        if (group_of[t] != g || !(a->targets & (1u << t))) continue;
        int col, out;
        target_cols(c, t, &col, &out);
        size_t bo = a->b_off[l * LORA_TARGETS + t];
        /* dB_t [out, r] = scale * dy_t^T . u_t */
        lmm(m, 1, 0, out, r, N, dy + col, lddy, u + (size_t)j * r, W, a->grad + bo, r, 1, a->scale, beta);
        /* du_t [N, r] = scale * dy_t [N, out] . B_t [out, r] */
        lmm(m, 0, 0, N, r, out, dy + col, lddy, a->w + bo, r, a->du + (size_t)j * r, W, 0, a->scale, 0.f);
        j++;
    }
    size_t ao = a->a_off[l * CL_GROUPS + g];
    /* dA [W, in] = du^T . x;  dx [N, in] += du [N, W] . A [W, in] */
    lmm(m, 1, 0, W, in, N, a->du, W, x, in, a->grad + ao, in, 1, 1.f, beta);
    lmm(m, 0, 0, N, in, W, a->du, W, a->w + ao, in, dx, in, 0, 1.f, 1.f);
}

/* Host (Lora.p layout) -> device flat through one host staging array (the
 * adapters are a few MiB to a few hundred). The copy is ordered on the model's
 * stream: a plain cudaMemcpy from pageable memory may return before its DMA
 * lands, and the model's non-blocking stream would not wait for it. */
static int to_device(const CudaLora *a, const float *host, float *dev, cudaStream_t st)
{
    float *flat = calloc(a->n_total ? a->n_total : 1, sizeof *flat);
    if (!flat) return -1;
    for (int i = 0; i < a->n_params; i++)
        memcpy(flat + a->params[i].off, host + a->params[i].host_off, a->params[i].numel * sizeof *flat);
    CUDA_CHECK(cudaMemcpyAsync(dev, flat, a->n_total * sizeof *flat, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    free(flat);
    return 0;
}

static int to_host(const CudaLora *a, const float *dev, float *host)
{
    float *flat = malloc((a->n_total ? a->n_total : 1) * sizeof *flat);
    if (!flat) return -1;
    CUDA_CHECK(cudaMemcpy(flat, dev, a->n_total * sizeof *flat, cudaMemcpyDeviceToHost));
    for (int i = 0; i < a->n_params; i++)
        memcpy(host + a->params[i].host_off, flat + a->params[i].off, a->params[i].numel * sizeof *flat);
    free(flat);
    return 0;
}

static void oom(void)
{
    log_error("out of memory (LoRA host staging)");
    exit(1);
}

void cuda_lora_set(CudaModel *m, const float *w, const float *mom1, const float *mom2)
{
    CudaLora *a = m->lora;
    cudaStream_t st = m->stream;
    CUDA_CHECK(cudaStreamSynchronize(st));
    if (to_device(a, w, a->master, st)) oom();
    k_f32_to_bf16(a->w, a->master, a->n_total, st);
    if (mom1 && mom2) {
        if (to_device(a, mom1, a->m, st) || to_device(a, mom2, a->v, st)) oom();
    } else {
        CUDA_CHECK(cudaMemsetAsync(a->m, 0, a->n_total * sizeof(float), st));
        CUDA_CHECK(cudaMemsetAsync(a->v, 0, a->n_total * sizeof(float), st));
    }
    CUDA_CHECK(cudaMemsetAsync(a->grad, 0, a->n_total * sizeof(float), st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
}

void cuda_lora_get(CudaModel *m, float *w, float *mom1, float *mom2)
{
    CudaLora *a = m->lora;
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
    if ((w && to_host(a, a->master, w)) || (mom1 && to_host(a, a->m, mom1)) || (mom2 && to_host(a, a->v, mom2)))
        oom();
}
