/* model_cuda.c — the decoder's forward and backward passes on the GPU, the fused
 * LM-head cross-entropy, bucketed gradient reduction and AdamW.
 *
 * Attention is computed with materialised scores per (batch, kv-head) group:
 * S = Q K^T for the G query heads that share one K/V head is one strided-batched
 * GEMM of (G*T) x T, so grouped-query attention needs no K/V copies. The softmax
 * applies causality and document boundaries from pos (see shard.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "log.h"
#include "model_cuda.h"
#include "cuda_check.h"
#include "cuda_coll.h"
#include "flash_attn.h"
#include "attn_cudnn.h"
#include "phase_timer.h"
#include "lora_cuda.h"
#include "cuda_layout.h"
#include "optim.h"
#include "zero_layout.h"

#define ALIGN_ELEMS LLMC_CUDA_ALIGN_ELEMS

/* ---- FP8 projections (precision = fp8; kernels_fp8.cu) ----
 * Projection p of layer l (F8_QKV, F8_O, F8_GU, F8_DOWN): Y[N, out] = X[N, in] . W^T.
 * Its tensors' maxima and scales sit at F8_SLOT: the weight, the input X, the
 * output gradient dY. */
enum { F8_QKV, F8_O, F8_GU, F8_DOWN };
enum { F8_WEIGHT, F8_INPUT, F8_GRAD };
/* Each scalar 16 bytes apart: cuBLASLt refuses (NOT_SUPPORTED) an FP8 product whose
 * scale pointer is only 4-byte aligned (measured on the H200: the products whose
 * scales sat at 16-byte offsets ran, the others were refused). */
#define F8_SLOT_FLOATS 4
#define F8_SLOT(m, l, p, kind) \
    (((size_t)(kind) * 4 * (m)->cfg.layers + (size_t)(l) * 4 + (size_t)(p)) * F8_SLOT_FLOATS)


static size_t take(size_t *cur, size_t n)
{
    size_t o = *cur;
    *cur += (n + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
    return o;
}

int cuda_model_supports(const ModelConfig *c, char *err, size_t errlen)
{
    if (c->qk_norm && c->qkv_bias) {
        snprintf(err, errlen, "qk_norm with q/k/v biases: no such architecture (Qwen3 has no biases)");
        return -1;
    }
    if (c->qk_norm && (c->head_dim % 32 || c->head_dim > 256)) {
        snprintf(err, errlen, "qk_norm (Qwen3) needs head_dim a multiple of 32 up to 256, found %d", c->head_dim);
        return -1;
    }
    if (c->layers < 1 || c->layers > 500 || c->hidden < 8 || c->heads < 1 || c->kv_heads < 1 ||
        c->heads % c->kv_heads || c->head_dim < 8 || c->ffn < 8 || c->vocab < 8) {
        snprintf(err, errlen, "model shape out of range (layers %d hidden %d heads %d kv_heads %d head_dim %d "
                 "ffn %d vocab %d)", c->layers, c->hidden, c->heads, c->kv_heads, c->head_dim, c->ffn, c->vocab);
        return -1;
    }
    if (c->hidden % 8 || c->head_dim % 16 || c->ffn % 8 || c->vocab % 8) {
        snprintf(err, errlen, "hidden, ffn and vocab must be multiples of 8 and head_dim of 16 "
                 "(16-byte vector access)");
        return -1;
    }
    return 0;
}

/* Where tensor p of model.h's layout lies in the flat buffer (q/k/v and their
 * biases one block per layer, gate/up one block). */
static size_t flat_offset(const CudaModel *m, const ParamInfo *p)
{
    const ModelConfig *c = &m->cfg;
    size_t C = c->hidden, HD = (size_t)c->heads * c->head_dim, KVD = (size_t)c->kv_heads * c->head_dim;
    const CudaLayerOffsets *o = p->layer >= 0 ? &m->lo[p->layer] : NULL;
    switch (p->kind) {
    case TENSOR_EMBED: return m->off_embed;
    case TENSOR_IN_NORM: return o->ln1;
    case TENSOR_Q: return o->qkv_w;
    case TENSOR_K: return o->qkv_w + HD * C;
    case TENSOR_V: return o->qkv_w + (HD + KVD) * C;
    case TENSOR_Q_BIAS: return o->qkv_b;
    case TENSOR_K_BIAS: return o->qkv_b + HD;
    case TENSOR_V_BIAS: return o->qkv_b + HD + KVD;
    case TENSOR_O: return o->o_w;
    case TENSOR_POST_NORM: return o->ln2;
    case TENSOR_GATE: return o->gu_w;
    case TENSOR_UP: return o->gu_w + (size_t)c->ffn * C;
    case TENSOR_DOWN: return o->down_w;
    case TENSOR_FINAL_NORM: return m->off_norm;
    case TENSOR_LM_HEAD: return m->off_lm;
    case TENSOR_Q_NORM: return o->qk_norm;
    case TENSOR_K_NORM: return o->qk_norm + c->head_dim;
    }
    abort();
}

int cuda_model_layout(CudaModel *m, const ModelConfig *cfg, int world)
{
    const ModelConfig *c = cfg;
    char err[256];
    if (cuda_model_supports(c, err, sizeof err)) {
        log_error("%s", err);
        return -1;
    }
    m->cfg = *cfg;
    int L = c->layers, C = c->hidden, HD = c->heads * c->head_dim, KVD = c->kv_heads * c->head_dim;
    int QKVD = HD + 2 * KVD, F = c->ffn, V = c->vocab;
    Model hl;   /* the tensors, names and order: runtime/model/model.h */
    m->lo = calloc((size_t)L, sizeof *m->lo);
    if (!m->lo || model_layout(&hl, c)) { log_error("out of memory"); return -1; }
    m->params = calloc((size_t)hl.n_params, sizeof *m->params);
    if (!m->params) { model_free(&hl); log_error("out of memory"); return -1; }
    size_t cur = 0;
    for (int l = 0; l < L; l++) {
        m->lo[l].qkv_w = take(&cur, (size_t)QKVD * C);
        m->lo[l].o_w = take(&cur, (size_t)C * HD);
        m->lo[l].gu_w = take(&cur, (size_t)2 * F * C);
        m->lo[l].down_w = take(&cur, (size_t)C * F);
    }
    m->off_embed = take(&cur, (size_t)V * C);
    m->off_lm = c->tie_embeddings ? m->off_embed : take(&cur, (size_t)V * C);
    m->decay_end = cur;
    for (int l = 0; l < L; l++) {
        m->lo[l].ln1 = take(&cur, C);
        m->lo[l].qkv_b = c->qkv_bias ? take(&cur, QKVD) : 0;
        m->lo[l].qk_norm = c->qk_norm ? take(&cur, 2 * (size_t)c->head_dim) : 0;
        m->lo[l].ln2 = take(&cur, C);
    }
    m->off_norm = take(&cur, C);
    size_t unit = (size_t)ALIGN_ELEMS * (world > 0 ? world : 1);
    m->n_total = (cur + unit - 1) / unit * unit;

    for (int i = 0; i < hl.n_params; i++) {
        const ParamInfo *hp = &hl.params[i];
        CudaParam *p = &m->params[m->n_params++];
        snprintf(p->name, sizeof p->name, "%s", hp->name);
        p->off = flat_offset(m, hp);
        p->host_off = hp->offset;
        p->rows = (int)hp->shape[0];
        p->cols = hp->ndim == 2 ? (int)hp->shape[1] : 0;
        p->numel = hp->numel;
        m->n_real += p->numel;
    }
    model_free(&hl);
    return 0;
}

static void *dalloc(CudaModel *m, size_t bytes, int *fail)
{
    void *p = NULL;
    if (*fail) return NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        log_error("out of GPU memory allocating %.2f GiB (%.2f GiB allocated so far, "
                "%.2f GiB free)", bytes / 1073741824.0, m->bytes_allocated / 1073741824.0, fr / 1073741824.0);
        *fail = 1;
        return NULL;
    }
    /* zeroed once, here: a kernel that reads an element before any step wrote
     * it (padding, a tail) reads 0, the same in every run; and compute-sanitizer's
     * initcheck, which does not see cuBLASLt's (TMA) stores, then reports only
     * what no one wrote (docs/cuda.md, compute-sanitizer) */
    if (cudaMemset(p, 0, bytes ? bytes : 16) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(p);
        log_error("cannot clear %.2f GiB of GPU memory", bytes / 1073741824.0);
        *fail = 1;
        return NULL;
    }
    m->bytes_allocated += bytes;
    return p;
}

void *cuda_model_alloc(CudaModel *m, size_t bytes, int *fail) { return dalloc(m, bytes, fail); }

/* Pin the host state and make the staging sets, streams and events of the
 * offloaded optimizer step. */
static int offload_create(CudaModel *m, const CudaHostState *h, int *fail)
{
    CudaOffload *o = &m->off;
    if (m->par.world > 1) {
        log_error("optimizer offload runs on one GPU (this run has %d ranks)", m->par.world);
        return -1;
    }
    if (h->n != m->n_real) {
        log_error("offload: the host state has %zu floats, the model %zu", h->n, m->n_real);
        return -1;
    }
    o->host_w = h->w; o->host_m = h->m; o->host_v = h->v;
    /* Pinned, so the copies run at PCIe speed and asynchronously. */
    float *arr[3] = {h->w, h->m, h->v};
    for (int k = 0; k < 3; k++)
        if (cudaHostRegister(arr[k], h->n * sizeof(float), cudaHostRegisterDefault) != cudaSuccess) {
            cudaGetLastError();
            log_error("offload: cannot pin %.2f GiB of host memory",
                    h->n * sizeof(float) / 1073741824.0);
            for (int j = 0; j < k; j++) cudaHostUnregister(arr[j]);
            return -1;
        }
    m->offload = 1;
    /* 32 Mi floats per array: 384 MiB per set, large enough that each copy runs at
     * full PCIe bandwidth, small enough that three sets are a sliver of the GPU. */
    o->chunk = (size_t)LLMC_CUDA_OFFLOAD_CHUNK;
    if (o->chunk > m->n_total) o->chunk = (m->n_total + 63) / 64 * 64;
    cudaStream_t up, down;
    CUDA_CHECK(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking));
    o->up = up; o->down = down;
    for (int b = 0; b < CUDA_OFFLOAD_BUFS; b++) {
        o->stage[b] = dalloc(m, 3 * o->chunk * sizeof(float), fail);
        cudaEvent_t e[3];
        for (int k = 0; k < 3; k++) CUDA_CHECK(cudaEventCreateWithFlags(&e[k], cudaEventDisableTiming));
        o->ev_in[b] = e[0]; o->ev_done[b] = e[1]; o->ev_free[b] = e[2];
    }
    return *fail ? -1 : 0;
}

/* The fused-attention implementation: cuDNN's when it was built in, takes the
 * shape and LLMC_ATTN (cudnn|flash, default cudnn) does not say flash; the flash
 * kernels otherwise, and for micro-batches cuDNN declines (attn_cudnn_set_rows).
 * A deterministic run takes cuDNN's deterministic backward (a far larger
 * workspace) when it fits, else the flash kernels' deterministic pass; a
 * non-deterministic one the atomics' form unless LLMC_CUDNN_DETERMINISTIC=1. */
static int attn_cudnn_setup(CudaModel *m, int *fail)
{
    const char *env = getenv("LLMC_ATTN"), *det = getenv("LLMC_CUDNN_DETERMINISTIC");
    if (env && strcmp(env, "cudnn") && strcmp(env, "flash")) {
        log_error("LLMC_ATTN=%s: want cudnn or flash", env);
        return -1;
    }
    if (!m->flash || (env && !strcmp(env, "flash"))) return 0;
    if (m->deterministic) det = "1";
    const ModelConfig *c = &m->cfg;
    char err[512];
    if (!attn_cudnn_built() || !attn_cudnn_supported(c->heads, c->kv_heads, m->T, c->head_dim)) {
        if (env) log_warn("LLMC_ATTN=cudnn: %s; using the flash kernels",
                         attn_cudnn_built() ? "cuDNN attention needs head_dim 64/128 and T % 64 == 0"
                                            : "this build has no cuDNN");
        return 0;
    }
    /* A non-deterministic run takes the backward with fp32 atomics: the
     * deterministic form's workspace holds bf16 scores for every sequence of the
     * document plan (8 per row), 3.5 against 0.5 GiB at 1.5B x 4 and 30 GiB at
     * 7B x 4 x 4096. Both forms pass check_vs_hf.py on the H200 (docs/cuda.md). */
    if (det && strcmp(det, "0") && strcmp(det, "1")) {
        log_error("LLMC_CUDNN_DETERMINISTIC=%s: want 0 or 1", det);
        return -1;
    }
    AttnCudnn *a = attn_cudnn_create(det && !strcmp(det, "1"), err, sizeof err);
    size_t ws = a ? attn_cudnn_prepare(a, m->B, c->heads, c->kv_heads, m->T, c->head_dim, err, sizeof err) : 0;
    if (!ws) {
        log_warn("%s; using the flash kernels", err);
        attn_cudnn_destroy(a);
        return 0;
    }
    /* Deterministic by default: cuDNN's deterministic form is as fast as its
     * atomics (52.8K tokens/s both at 1.5B x 4 x 2048 on the H200) and the flash
     * kernels' deterministic pass 12-17% slower (docs/cuda.md), but its workspace
     * is large; it is taken when it fits beside LLMC_CUDNN_RESERVE_GIB (default 2)
     * of free memory for what the libraries allocate at the first step. */
    size_t fr = 0, tot = 0;
    double reserve = 2.0;
    const char *rs = getenv("LLMC_CUDNN_RESERVE_GIB");
    if (rs) {
        char *end;
        reserve = strtod(rs, &end);
        if (end == rs || *end || !(reserve >= 0 && reserve <= 1024)) {
            log_error("LLMC_CUDNN_RESERVE_GIB=%s: want GiB from 0 to 1024", rs);
            attn_cudnn_destroy(a);
            return -1;
        }
    }
    if (m->deterministic && !env && cudaMemGetInfo(&fr, &tot) == cudaSuccess &&
        (double)ws + reserve * 1073741824.0 > (double)fr) {
        log_info("deterministic attention: cuDNN's deterministic backward needs %.2f GiB of workspace, "
                 "%.2f GiB are free; using the flash kernels' deterministic pass",
                 ws / 1073741824.0, fr / 1073741824.0);
        attn_cudnn_destroy(a);
        return 0;
    }
    m->cudnn = a;
    m->cudnn_ws = dalloc(m, ws, fail);
    m->cudnn_ws_bytes = ws;
    return 0;
}

/* Bytes of one AdamW moment element. */
static size_t state_bytes(const CudaModel *m)
{
    return m->bf16_states ? sizeof(uint16_t) : sizeof(float);
}

static void train_spans(CudaModel *m)
{
    int L = m->cfg.layers, lo = m->train_lo, hi = m->train_hi;
    if (m->finetune == METHOD_FREEZE) {
        size_t mat_end = hi < L ? m->lo[hi].qkv_w : m->off_embed, nd_end = hi < L ? m->lo[hi].ln1 : m->off_norm;
        m->span[0] = (CudaSpan){m->lo[lo].qkv_w, mat_end - m->lo[lo].qkv_w};
        m->span[1] = (CudaSpan){m->lo[lo].ln1, nd_end - m->lo[lo].ln1};
        m->n_spans = 2;
    } else if (m->finetune == METHOD_FULL) {
        m->span[0] = (CudaSpan){m->shard_off, m->shard_len};
        m->n_spans = 1;
    }
    m->n_state = 0;
    for (int i = 0; i < m->n_spans; i++) m->n_state += m->span[i].len;
}

/* ZeRO-3: the gathered buffers hold nothing (the weights changed). */
static void gathers_forget(CudaModel *m)
{
    m->wlayer_unit[0] = m->wlayer_unit[1] = -1;
    m->wtail_ok = 0;
}

/* ZeRO-2/3: the shards (whole GRAD_NORM_BLOCKs, as the CPU backend cuts them)
 * and the units of this layout (zero_layout.h). */
static int zero_plan(CudaModel *m)
{
    int L = m->cfg.layers, W = m->par.world;
    size_t *mat = malloc(((size_t)L + 1) * sizeof *mat), *nd = malloc(((size_t)L + 1) * sizeof *nd);
    m->starts = malloc(((size_t)W + 1) * sizeof *m->starts);
    m->units = malloc(((size_t)L + 1) * sizeof *m->units);
    if (!mat || !nd || !m->starts || !m->units) {
        free(mat); free(nd);
        log_error("out of memory");
        return -1;
    }
    for (int l = 0; l < L; l++) {
        mat[l] = m->lo[l].qkv_w;
        nd[l] = m->lo[l].ln1;
    }
    mat[L] = m->off_embed;
    nd[L] = m->off_norm;
    int rc = zl_units(L, mat, m->decay_end, nd, m->n_total, ZL_ALIGN_ELEMS, m->units);
    free(mat); free(nd);
    if (rc) {
        log_error("internal error: the flat layout does not split into ZeRO units");
        return -1;
    }
    zl_starts(m->n_total, W, GRAD_NORM_BLOCK, m->starts);
    m->shard_off = m->starts[m->par.rank];
    m->shard_len = m->starts[m->par.rank + 1] - m->shard_off;
    m->unit_max = 0;
    for (int l = 0; l < L; l++)
        if (zl_unit_len(&m->units[l]) > m->unit_max) m->unit_max = zl_unit_len(&m->units[l]);
    gathers_forget(m);
    return 0;
}

/* Offload under ZeRO-2/3: the shard's master weights and moments in pinned
 * host memory, zeroed (the moments start there; the weights come from set). */
static int offload_shard_alloc(CudaModel *m)
{
    size_t bytes = (m->n_state ? m->n_state : 1) * sizeof(float);
    void **arr[3] = {(void **)&m->master, &m->m, &m->v};
    for (int k = 0; k < 3; k++) {
        /* mapped: AdamW's kernel reads and writes it in place (one pointer for both sides, UVA) */
        if (cudaHostAlloc((void **)arr[k], bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError();
            log_error("offload: cannot pin %.2f GiB of host memory for this rank's optimizer shard",
                      3.0 * bytes / 1073741824.0);
            return -1;
        }
        memset(*arr[k], 0, bytes);
    }
    return 0;
}

/* ZeRO-2: whole bf16 weights; ZeRO-3: this rank's and one gathered layer and
 * the gathered last unit. Both: two layer buckets, the last unit's bucket, the
 * shard's gradient, the norm's block sums. */
static void zero_alloc(CudaModel *m, int *fail)
{
    const size_t BB = sizeof(bf16_t), FF = sizeof(float), tail = zl_unit_len(&m->units[m->cfg.layers]);
    if (m->zero == 3) {
        m->wsh = dalloc(m, m->shard_len * BB, fail);
        m->wlayer[0] = dalloc(m, m->unit_max * BB, fail);
        m->wlayer[1] = dalloc(m, m->unit_max * BB, fail);
        m->wtail = dalloc(m, tail * BB, fail);
    } else {
        m->w = dalloc(m, m->n_total * BB, fail);
    }
    m->gbuf[0] = dalloc(m, m->unit_max * FF, fail);
    m->gbuf[1] = dalloc(m, m->unit_max * FF, fail);
    m->gtail = dalloc(m, tail * FF, fail);
    m->gacc = dalloc(m, m->shard_len * FF, fail);
    m->norm_parts = dalloc(m, grad_norm_blocks(m->n_total) * FF, fail);
}

int cuda_model_create(CudaModel *m, const ModelConfig *cfg, int B, int T, int recompute, int attn,
                      const CudaParallel *par, const CudaHostState *offload)
{
    return cuda_model_create_ft(m, cfg, B, T, recompute, attn, par, offload, NULL, NULL);
}

/* The number formats this setup can run (the checker refuses the same plans,
 * contract/backend_caps.h); 0 or -1 with a message. */
static int numerics_setup(CudaModel *m, const CudaNumerics *num, const CudaHostState *offload, int zero)
{
    CudaNumerics none = {0};
    if (!num) num = &none;
    if ((num->master_split || num->bf16_states) && (offload || m->par.offload_shard)) {
        log_error("optimizer offload keeps the master weights and moments in host memory as fp32: "
                  "master_weights = split and optimizer_states = bf16 are for training without offload");
        return -1;
    }
    if (num->master_split && zero >= 2) {
        log_error("master_weights = split keeps the master weights beside whole bf16 weights: use it with "
                  "ZeRO-0/1, not ZeRO-%d", zero);
        return -1;
    }
    if (num->fp8 && zero >= 3) {
        log_error("precision = fp8 with ZeRO-3 is not yet in llmc-train: use ZeRO-0/1/2");
        return -1;
    }
    const ModelConfig *c = &m->cfg;
    long long N = (long long)m->B * m->T, HD = (long long)c->heads * c->head_dim;
    long long QKVD = HD + 2LL * c->kv_heads * c->head_dim;
    if (num->fp8 && (N % 16 || c->hidden % 16 || HD % 16 || QKVD % 16 || c->ffn % 16)) {
        log_error("precision = fp8: the FP8 GEMMs need multiples of 16 for the tokens per micro-batch (%lld), "
                  "hidden (%d), heads x head_dim (%lld), the q/k/v width (%lld) and ffn (%d)",
                  N, c->hidden, HD, QKVD, c->ffn);
        return -1;
    }
    m->fp8 = num->fp8;
    m->bf16_states = num->bf16_states;
    m->seed = num->seed;
    return num->master_split;
}

/* FP8's buffers: every projection weight and its transpose, the maxima and
 * scales, the activation scratch (the largest input and output gradient). */
static void fp8_alloc(CudaModel *m, int *fail)
{
    const ModelConfig *c = &m->cfg;
    size_t L = c->layers, N = (size_t)m->B * m->T, C = c->hidden, F = c->ffn;
    size_t HD = (size_t)c->heads * c->head_dim, QKVD = HD + 2 * (size_t)c->kv_heads * c->head_dim;
    size_t dims[4][2] = {{QKVD, C}, {C, HD}, {2 * F, C}, {C, F}};   /* out, in */
    m->f8_woff = calloc(4 * L, sizeof *m->f8_woff);
    if (!m->f8_woff) { log_error("out of memory"); *fail = 1; return; }
    size_t tot = 0, max_in = 0, max_out = 0;
    for (size_t l = 0; l < L; l++)
        for (int p = 0; p < 4; p++) {
            m->f8_woff[l * 4 + p] = tot;
            tot += (dims[p][0] * dims[p][1] + 255) / 256 * 256;
        }
    for (int p = 0; p < 4; p++) {
        if (dims[p][1] > max_in) max_in = dims[p][1];
        if (dims[p][0] > max_out) max_out = dims[p][0];
    }
    m->f8_w = dalloc(m, tot, fail);
    m->f8_wt = dalloc(m, tot, fail);
    m->f8_a = dalloc(m, N * max_in, fail);
    m->f8_dy = dalloc(m, N * max_out, fail);
    m->f8_dyt = dalloc(m, N * max_out, fail);
    m->f8_amax = dalloc(m, 12 * L * F8_SLOT_FLOATS * sizeof(float), fail);
    m->f8_sinv = dalloc(m, 12 * L * F8_SLOT_FLOATS * sizeof(float), fail);
    m->f8_stale = 1;
}

/* What trains, from ft: refused here when this backend cannot do it. */
static int finetune_setup(CudaModel *m, const CudaFinetune *ft, const CudaHostState *offload)
{
    m->finetune = ft ? ft->method : METHOD_FULL;
    m->train_lo = 0;
    m->train_hi = m->cfg.layers;
    if (m->finetune == METHOD_FULL) return 0;
    if (offload) {
        log_error("freeze and LoRA train without optimizer offload");
        return -1;
    }
    if (m->finetune == METHOD_FREEZE) {
        if (ft->train_lo < 0 || ft->train_hi > m->cfg.layers || ft->train_lo >= ft->train_hi) {
            log_error("freeze: trained layers [%d, %d) of %d", ft->train_lo, ft->train_hi,
                    m->cfg.layers);
            return -1;
        }
        m->train_lo = ft->train_lo;
        m->train_hi = ft->train_hi;
        return 0;
    }
    char err[256];
    if (!ft->lora || cuda_lora_supported(ft->lora->rank, err, sizeof err)) {
        log_error("%s", ft->lora ? err : "LoRA without adapters");
        return -1;
    }
    m->train_lo = m->train_hi = 0;   /* no base layer's weights train */
    return 0;
}

int cuda_model_create_ft(CudaModel *m, const ModelConfig *cfg, int B, int T, int recompute, int attn,
                         const CudaParallel *par, const CudaHostState *offload, const CudaFinetune *ft,
                         const CudaNumerics *num)
{
    memset(m, 0, sizeof *m);
    m->par = *par;
    if (cuda_model_layout(m, cfg, par->world) != 0) return -1;
    if (finetune_setup(m, ft, offload)) return -1;
    if (B < 1 || T < 8 || T % 8) {
        log_error("micro-batch %d x %d: need B >= 1 and T a multiple of 8", B, T);
        return -1;
    }
    if ((long long)B * T > (1LL << 30) / cfg->hidden) {
        log_error("micro-batch %d x %d too large", B, T);
        return -1;
    }
    m->B = B; m->T = T; m->recompute = recompute;
    int zero_want = (ft ? ft->method : METHOD_FULL) == METHOD_FULL && !offload ? par->zero : 0;
    int split = numerics_setup(m, num, offload, zero_want);   /* refused before any allocation */
    if (split < 0) return -1;
    m->flash = attn != CUDA_ATTN_EAGER && k_flash_supported(cfg->head_dim, T);
    m->deterministic = attn != CUDA_ATTN_FUSED;
    if (attn != CUDA_ATTN_EAGER && !m->flash)
        log_warn("fused attention needs head_dim 32/64/128 and T %% 64 == 0; "
                "using materialised attention");
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, C = c->hidden, L = c->layers, H = c->heads;
    size_t HD = H * c->head_dim, KVD = (size_t)c->kv_heads * c->head_dim, QKVD = HD + 2 * KVD;
    size_t F = c->ffn, V = c->vocab, BB = sizeof(bf16_t), FF = sizeof(float);
    size_t PP = (size_t)B * H * T * T;
    int fail = 0;

    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    m->stream = st;
    m->gemm = gemm_create(st, 64u << 20);
    if (!m->gemm) return -1;
    m->timer = phase_timer_new(st);

    /* Fine-tuning on several ranks: its small trained state is replicated and
     * its gradients all-reduced at the step, whatever the plan's stage. Optimizer
     * offload keeps its own layout (one rank). */
    if (m->finetune != METHOD_FULL) m->par.zero1 = 0;
    m->zero = m->finetune == METHOD_FULL && !offload && par->zero >= 2 ? (par->zero > 3 ? 3 : par->zero) : 0;
    if (par->offload_shard && !m->zero) {
        log_error("optimizer offload on %d ranks shards the optimizer with ZeRO-2 or ZeRO-3 (full training)",
                  par->world);
        return -1;
    }
    m->off_shard = m->zero && par->offload_shard;
    if (m->zero) {
        if (zero_plan(m)) return -1;
    } else if (par->world > 1 && m->par.zero1) {
        m->shard_len = m->n_total / par->world;
        m->shard_off = (size_t)par->rank * m->shard_len;
    } else {
        m->shard_len = m->n_total;
        m->shard_off = 0;
    }
    train_spans(m);
    /* LoRA: the base is bf16 weights only; freeze: a gradient buffer of the whole
     * layout (the frozen parts never written) and master/moments for the spans;
     * ZeRO-2/3: buckets and shards (zero_alloc). */
    if (m->zero) {
        zero_alloc(m, &fail);
    } else {
        m->w = dalloc(m, m->n_total * BB, &fail);
        if (m->finetune != METHOD_LORA) m->grad = dalloc(m, m->n_total * FF, &fail);
    }
    if (offload) {
        if (offload_create(m, offload, &fail)) return -1;
    } else if (m->off_shard) {
        if (offload_shard_alloc(m)) return -1;
    } else if (m->n_state) {
        if (split) m->master_lo = dalloc(m, m->n_state * sizeof(uint16_t), &fail);
        else m->master = dalloc(m, m->n_state * FF, &fail);
        m->m = dalloc(m, m->n_state * state_bytes(m), &fail);
        m->v = dalloc(m, m->n_state * state_bytes(m), &fail);
    }
    if (m->fp8) fp8_alloc(m, &fail);
    if (m->finetune != METHOD_FULL) {
        size_t junk = C > QKVD ? C : QKVD;
        if (junk < 2 * (size_t)c->head_dim) junk = 2 * (size_t)c->head_dim;
        m->junk = dalloc(m, junk * FF, &fail);
    }

    m->xs = calloc(L + 1, sizeof *m->xs);
    m->acts = calloc(L, sizeof *m->acts);
    if (!m->xs || !m->acts) { log_error("out of memory"); return -1; }
    for (size_t l = 0; l <= L; l++) m->xs[l] = dalloc(m, N * C * BB, &fail);
    for (size_t l = 0; l < L; l++) {
        CudaLayerActs *a = &m->acts[l];
        if (recompute == RECOMPUTE_FULL && l > 0) { *a = m->acts[0]; continue; }
        int shared = recompute == RECOMPUTE_SELECTIVE && l > 0;   /* h and att: recomputed */
        a->ln1 = dalloc(m, N * C * BB, &fail);
        a->ln2 = dalloc(m, N * C * BB, &fail);
        a->q = dalloc(m, N * HD * BB, &fail);
        a->k = dalloc(m, N * KVD * BB, &fail);
        a->v = dalloc(m, N * KVD * BB, &fail);
        if (m->flash) a->lse = dalloc(m, (size_t)B * H * T * FF, &fail);
        else a->P = dalloc(m, PP * BB, &fail);
        a->att = shared ? m->acts[0].att : dalloc(m, N * HD * BB, &fail);
        a->xmid = dalloc(m, N * C * BB, &fail);
        a->gu = dalloc(m, N * 2 * F * BB, &fail);
        a->h = shared ? m->acts[0].h : dalloc(m, N * F * BB, &fail);
        if (c->qk_norm) a->qkv_raw = dalloc(m, N * QKVD * BB, &fail);
        a->rstd1 = dalloc(m, N * FF, &fail);
        a->rstd2 = dalloc(m, N * FF, &fail);
    }
    m->ce_chunk = (int)(N < LLMC_CUDA_CE_CHUNK_ROWS ? N : LLMC_CUDA_CE_CHUNK_ROWS);
    m->qkv = dalloc(m, N * QKVD * BB, &fail);
    if (!m->flash) m->o = dalloc(m, N * HD * BB, &fail);
    m->hf = dalloc(m, N * C * BB, &fail);
    /* The logits chunk doubles as the scratch of the column sums (norm-weight and
     * bias gradients), which run outside the LM-head phase. */
    size_t logit_bytes = (size_t)m->ce_chunk * V * BB, colsum_bytes = k_colsum_scratch((int)C, (int)QKVD) * FF;
    if (c->qk_norm && k_head_norm_scratch(c->head_dim) * FF > colsum_bytes)
        colsum_bytes = k_head_norm_scratch(c->head_dim) * FF;
    m->logits = dalloc(m, logit_bytes > colsum_bytes ? logit_bytes : colsum_bytes, &fail);
    m->rstdf = dalloc(m, N * FF, &fail);
    m->losses = dalloc(m, N * FF, &fail);
    m->loss_acc = dalloc(m, FF, &fail);
    m->sumsq = dalloc(m, LLMC_CUDA_SUMSQ_SLOTS * FF, &fail);   /* the sum, then one partial per span */
    m->sumsq_scratch = dalloc(m, (size_t)k_sumsq_scratch() * FF, &fail);
    m->ids = dalloc(m, N * sizeof(int), &fail);
    m->pos = dalloc(m, N * sizeof(int), &fail);
    m->targets = dalloc(m, N * sizeof(int), &fail);
    m->emb_plan = dalloc(m, (3 * N + 1) * sizeof(int), &fail);
    m->h_emb_plan = malloc((3 * N + 1) * sizeof(int));
    m->h_emb_next = malloc(((size_t)V + 1) * sizeof(int));
    if (!m->h_emb_plan || !m->h_emb_next) { log_error("out of memory"); return -1; }
    m->dres = dalloc(m, N * C * BB, &fail);
    m->dln = dalloc(m, N * C * BB, &fail);
    m->dgu = dalloc(m, N * 2 * F * BB, &fail);
    m->dh = dalloc(m, N * F * BB, &fail);
    m->datt = dalloc(m, N * HD * BB, &fail);
    if (m->flash) {
        size_t nfa = k_flash_bwd_scratch_floats(B, (int)H, T, c->head_dim, m->deterministic);
        m->fa_scratch = dalloc(m, nfa * FF, &fail);
    } else {
        m->dO = dalloc(m, N * HD * BB, &fail);
        m->dP = dalloc(m, PP * BB, &fail);
    }
    m->dq = dalloc(m, N * HD * BB, &fail);
    m->dk = dalloc(m, N * KVD * BB, &fail);
    m->dv = dalloc(m, N * KVD * BB, &fail);
    m->dqkv = dalloc(m, N * QKVD * BB, &fail);
    if (m->finetune == METHOD_LORA && cuda_lora_create(m, ft->lora, &fail)) return -1;
    if (attn_cudnn_setup(m, &fail)) return -1;   /* last: it weighs its workspace against what is free */
    if (fail) return -1;
    if (L + 1 > sizeof m->layer_done / sizeof m->layer_done[0]) {
        log_error("too many layers");
        return -1;
    }
    if (m->zero) {
        cudaEvent_t e[7];
        for (int k = 0; k < 7; k++) CUDA_CHECK(cudaEventCreateWithFlags(&e[k], cudaEventDisableTiming));
        m->ev_ready = e[0];
        for (int k = 0; k < 3; k++) {
            m->ev_free[k] = e[k + 1];
            m->ev_gathered[k] = e[k + 4];
        }
    }
    if (par->world > 1)
        for (size_t l = 0; l <= L; l++) {
            cudaEvent_t e;
            CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            m->layer_done[l] = e;
        }
    if (!m->offload && !m->off_shard && m->n_state) {   /* zero bits are 0.0 in bf16 too */
        CUDA_CHECK(cudaMemsetAsync(m->m, 0, m->n_state * state_bytes(m), st));
        CUDA_CHECK(cudaMemsetAsync(m->v, 0, m->n_state * state_bytes(m), st));
    }
    if (m->grad) CUDA_CHECK(cudaMemsetAsync(m->grad, 0, m->n_total * FF, st));
    CUDA_CHECK(cudaMemsetAsync(m->loss_acc, 0, FF, st));
    return 0;
}

void cuda_model_destroy(CudaModel *m)
{
    /* Device memory goes with the process; the host tables are freed and the
     * pinned host state unpinned here. */
    if (m->offload) {
        cudaDeviceSynchronize();
        cudaHostUnregister(m->off.host_w);
        cudaHostUnregister(m->off.host_m);
        cudaHostUnregister(m->off.host_v);
    }
    if (m->gemm) gemm_destroy(m->gemm);
    attn_cudnn_destroy(m->cudnn);
    cuda_lora_destroy(m);
    phase_timer_free(m->timer);
    free(m->params); free(m->lo); free(m->xs); free(m->acts);
    free(m->h_emb_plan); free(m->h_emb_next);
    free(m->starts); free(m->units); free(m->f8_woff);
    if (m->off_shard) {
        cudaDeviceSynchronize();
        cudaFreeHost(m->master); cudaFreeHost(m->m); cudaFreeHost(m->v);
    }
    memset(m, 0, sizeof *m);
}

/* Where span i starts in master/m/v. */
static size_t span_state_off(const CudaModel *m, int i)
{
    size_t o = 0;
    for (int k = 0; k < i; k++) o += m->span[k].len;
    return o;
}

/* A full fp32 copy of the weights (tmp, on the device) becomes the bf16 weights
 * and the master weights of what trains (this rank's shard, or the spans). */
static void adopt_weights(CudaModel *m, float *tmp)
{
    m->f8_stale = 1;
    cudaStream_t st = m->stream;
    if (m->zero) {   /* the shard's master weights; the bf16 weights whole (ZeRO-2) or the shard's */
        if (m->zero == 2) k_f32_to_bf16(m->w, tmp, m->n_total, st);
        else if (m->shard_len) k_f32_to_bf16(m->wsh, tmp + m->shard_off, m->shard_len, st);
        if (m->shard_len)   /* Default: master may be pinned host memory (off_shard) */
            CUDA_CHECK(cudaMemcpyAsync(m->master, tmp + m->shard_off, m->shard_len * sizeof(float),
                                       cudaMemcpyDefault, st));
        gathers_forget(m);
        CUDA_CHECK(cudaStreamSynchronize(st));
        CUDA_CHECK(cudaGetLastError());
        return;
    }
    /* split: every bf16 weight rounded as the pairs' upper halves, so that ranks
     * holding another rank's shard compute with the same weights as its owner */
    if (m->master_lo) k_master_split(m->w, NULL, tmp, m->n_total, st);
    else k_f32_to_bf16(m->w, tmp, m->n_total, st);
    if (m->offload)   /* the master weights are the host's, in its layout */
        for (int i = 0; i < m->n_params; i++) {
            const CudaParam *p = &m->params[i];
            CUDA_CHECK(cudaMemcpyAsync(m->off.host_w + p->host_off, tmp + p->off, p->numel * sizeof(float),
                                       cudaMemcpyDeviceToHost, st));
        }
    else if (m->master_lo)   /* the spans' bf16 weights become the split pair's upper halves */
        for (int i = 0; i < m->n_spans; i++)
            k_master_split(m->w + m->span[i].off, m->master_lo + span_state_off(m, i), tmp + m->span[i].off,
                           m->span[i].len, st);
    else
        for (int i = 0; i < m->n_spans; i++)
            CUDA_CHECK(cudaMemcpyAsync(m->master + span_state_off(m, i), tmp + m->span[i].off,
                                       m->span[i].len * sizeof(float), cudaMemcpyDeviceToDevice, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
}

void cuda_model_init_random(CudaModel *m, uint64_t seed, float std)
{
    float *tmp = m->grad;   /* whole gradient buffer: scratch before training (7B: 30 GB not allocated twice) */
    cudaStream_t st = m->stream;
    if (!tmp) CUDA_CHECK(cudaMalloc((void **)&tmp, m->n_total * sizeof(float)));
    CUDA_CHECK(cudaMemsetAsync(tmp, 0, m->n_total * sizeof(float), st));
    for (int i = 0; i < m->n_params; i++) {
        const CudaParam *p = &m->params[i];
        if (p->cols) k_init_normal(tmp + p->off, p->numel, seed * 1000003ull + (uint64_t)i, std, st);
        else if (strstr(p->name, "norm")) k_fill(tmp + p->off, p->numel, 1.f, st);
    }
    adopt_weights(m, tmp);
    if (tmp == m->grad) CUDA_CHECK(cudaMemsetAsync(m->grad, 0, m->n_total * sizeof(float), st));
    else CUDA_CHECK(cudaFree(tmp));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

/* ---- forward / backward ---- */

static void mm(CudaModel *m, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
               void *D, int ldd, int d_f32, const void *C, float alpha, float beta)
{
    GemmArgs a = {.transA = ta, .transB = tb, .M = M, .N = N, .K = K, .A = A, .lda = lda, .B = B, .ldb = ldb,
                  .D = D, .ldd = ldd, .C = C, .d_f32 = d_f32, .alpha = alpha, .beta = beta, .batch = 1};
    gemm_run(m->gemm, &a);
}

static void bmm(CudaModel *m, int ta, int tb, int M, int N, int K, const void *A, int lda, long long sA,
                const void *B, int ldb, long long sB, void *D, int ldd, long long sD, float alpha, int batch)
{
    GemmArgs a = {.transA = ta, .transB = tb, .M = M, .N = N, .K = K, .A = A, .lda = lda, .strideA = sA,
                  .B = B, .ldb = ldb, .strideB = sB, .D = D, .ldd = ldd, .strideD = sD, .alpha = alpha,
                  .beta = 0.f, .batch = batch};
    gemm_run(m->gemm, &a);
}

/* Where unit u's tensor at flat offset off lies: in the whole buffers, or under
 * ZeRO-2/3 in the unit's gradient bucket (the layer bucket backward writes now:
 * gsel) and, under ZeRO-3, its gathered weights (zero_layout.h). */
static size_t unit_pos(const CudaModel *m, int u, size_t off)
{
    size_t p = zl_unit_pos(&m->units[u], off);
    if (p == (size_t)-1) {
        log_error("internal error: flat offset %zu is not in unit %d", off, u);
        abort();
    }
    return p;
}

static bf16_t *wp(CudaModel *m, int u, size_t off)
{
    if (m->zero < 3) return m->w + off;
    return (u == m->cfg.layers ? m->wtail : m->wlayer[u & 1]) + unit_pos(m, u, off);
}

static float *gp(CudaModel *m, int u, size_t off)
{
    if (m->zero < 2) return m->grad + off;
    return (u == m->cfg.layers ? m->gtail : m->gbuf[m->gsel]) + unit_pos(m, u, off);
}

/* One layer's tensors and shape, for layer_fwd and layer_bwd. */
typedef struct {
    CudaLayerActs *a;
    const CudaLayerOffsets *o;
    cudaStream_t st;
    int B, T, N, C, H, KV, D, HD, QKVD, F, G;
} LayerCtx;

static LayerCtx layer_ctx(CudaModel *m, int l)
{
    const ModelConfig *c = &m->cfg;
    LayerCtx x = {.a = &m->acts[l], .o = &m->lo[l], .st = (cudaStream_t)m->stream,
                  .B = m->B, .T = m->T, .N = m->B * m->T, .C = c->hidden, .H = c->heads, .KV = c->kv_heads,
                  .D = c->head_dim, .F = c->ffn};
    x.HD = x.H * x.D;
    x.QKVD = x.HD + 2 * x.KV * x.D;
    x.G = x.H / x.KV;
    return x;
}

/* A weight gradient dW[M,N] (fp32) = op(A) . op(B): written by the first micro-batch
 * after cuda_model_zero_grad, accumulated by the others (no zeroing pass, no read of zeros). */
static void wgrad(CudaModel *m, int M, int N, int K, const void *A, int lda, const void *B, int ldb, float *dW)
{
    mm(m, 1, 0, M, N, K, A, lda, B, ldb, dW, N, 1, NULL, 1.f, m->grad_fresh ? 0.f : 1.f);
}

/* The E4M3 copies of every projection weight and of its transpose, from the
 * current bf16 weights (after a step, a load, an initialisation). */
static void fp8_weights(CudaModel *m)
{
    cudaStream_t st = m->stream;
    int L = m->cfg.layers;
    CUDA_CHECK(cudaMemsetAsync(m->f8_amax, 0, 4 * (size_t)L * F8_SLOT_FLOATS * sizeof(float), st));
    for (int l = 0; l < L; l++) {
        LayerCtx z = layer_ctx(m, l);
        const CudaLayerOffsets *o = z.o;
        size_t off[4] = {o->qkv_w, o->o_w, o->gu_w, o->down_w};
        int dims[4][2] = {{z.QKVD, z.C}, {z.C, z.HD}, {2 * z.F, z.C}, {z.C, z.F}};
        for (int p = 0; p < 4; p++) {
            size_t k = F8_SLOT(m, l, p, F8_WEIGHT), wo = m->f8_woff[l * 4 + p];
            const bf16_t *w = wp(m, l, off[p]);
            k_fp8_amax(m->f8_amax + k, w, (size_t)dims[p][0] * dims[p][1], st);
            k_fp8_quant(m->f8_w + wo, m->f8_wt + wo, m->f8_sinv + k, w, dims[p][0], dims[p][1], m->f8_amax + k, 0,
                        st);
        }
    }
    m->f8_stale = 0;
}

static void mm_fp8(CudaModel *m, int M, int N, int K, const uint8_t *A, int a_type, const float *a_scale,
                   const uint8_t *B, const float *b_scale, void *D, int d_f32, const void *C, float beta, int fast)
{
    GemmArgs a = {.transB = 1, .M = M, .N = N, .K = K, .A = A, .lda = K, .B = B, .ldb = K, .D = D, .ldd = N,
                  .C = C, .d_f32 = d_f32, .alpha = 1.f, .beta = beta, .batch = 1, .a_type = a_type,
                  .b_type = GEMM_E4M3, .a_scale = a_scale, .b_scale = b_scale, .fast_accum = fast};
    gemm_run(m->gemm, &a);
}

/* Y[N, out] = X[N, in] . W[out, in]^T (+ R, the residual, when not NULL). fp8: X
 * in E4M3 with its own scale, Hopper's fast accumulation (as in Transformer
 * Engine's forward; the gradients' products accumulate exactly). */
static void proj_fwd(CudaModel *m, const LayerCtx *z, int l, int p, const bf16_t *X, int in, size_t woff, int out,
                     bf16_t *Y, const bf16_t *R)
{
    if (!m->fp8) {
        mm(m, 0, 1, z->N, out, in, X, in, wp(m, l, woff), in, Y, out, 0, R, 1.f, R ? 1.f : 0.f);
        return;
    }
    size_t k = F8_SLOT(m, l, p, F8_INPUT), w = F8_SLOT(m, l, p, F8_WEIGHT);
    k_fp8_amax(m->f8_amax + k, X, (size_t)z->N * in, z->st);
    k_fp8_quant(m->f8_a, NULL, m->f8_sinv + k, X, z->N, in, m->f8_amax + k, 0, z->st);
    /* the residual: cuBLASLt takes no separate bf16 C beside FP8 operands (status 15,
     * measured on the H200), so D starts as R and accumulates in place */
    if (R) CUDA_CHECK(cudaMemcpyAsync(Y, R, (size_t)z->N * out * sizeof(bf16_t), cudaMemcpyDeviceToDevice, z->st));
    mm_fp8(m, z->N, out, in, m->f8_a, GEMM_E4M3, m->f8_sinv + k, m->f8_w + m->f8_woff[l * 4 + p], m->f8_sinv + w, Y,
           0, NULL, R ? 1.f : 0.f, 1);
}

/* dX[N, in] = dY[N, out] . W[out, in]. fp8: dY in E5M2 against W's transposed
 * E4M3 copy; with_wgrad: dY's transposed copy for proj_wgrad in the same pass. */
static void proj_dgrad(CudaModel *m, const LayerCtx *z, int l, int p, const bf16_t *dY, int out, size_t woff, int in,
                       bf16_t *dX, int with_wgrad)
{
    if (!m->fp8) {
        mm(m, 0, 0, z->N, in, out, dY, out, wp(m, l, woff), in, dX, in, 0, NULL, 1.f, 0.f);
        return;
    }
    size_t k = F8_SLOT(m, l, p, F8_GRAD), w = F8_SLOT(m, l, p, F8_WEIGHT);
    k_fp8_amax(m->f8_amax + k, dY, (size_t)z->N * out, z->st);
    k_fp8_quant(m->f8_dy, with_wgrad ? m->f8_dyt : NULL, m->f8_sinv + k, dY, z->N, out, m->f8_amax + k, 1, z->st);
    mm_fp8(m, z->N, in, out, m->f8_dy, GEMM_E5M2, m->f8_sinv + k, m->f8_wt + m->f8_woff[l * 4 + p], m->f8_sinv + w,
           dX, 0, NULL, 0.f, 0);
}

/* dW[out, in] (fp32; written by the step's first micro-batch, then accumulated)
 * = dY^T . X. fp8: from the transposed copies (dY's from proj_dgrad; X's made here
 * with the forward pass's scale). */
static void proj_wgrad(CudaModel *m, const LayerCtx *z, int l, int p, const bf16_t *dY, int out, const bf16_t *X,
                       int in, float *dW)
{
    if (!m->fp8) {
        wgrad(m, out, in, z->N, dY, out, X, in, dW);
        return;
    }
    size_t kx = F8_SLOT(m, l, p, F8_INPUT), kg = F8_SLOT(m, l, p, F8_GRAD);
    k_fp8_quant(NULL, m->f8_a, NULL, X, z->N, in, m->f8_amax + kx, 0, z->st);
    mm_fp8(m, out, in, z->N, m->f8_dyt, GEMM_E5M2, m->f8_sinv + kg, m->f8_a, m->f8_sinv + kx, dW, 1, NULL,
           m->grad_fresh ? 0.f : 1.f, 0);
}

#define PHASE(m, p) do { if ((m)->timer) phase_mark((m)->timer, (p)); } while (0)

/* Fused attention of one layer: cuDNN when it took this micro-batch, the flash
 * kernels otherwise (the same path forward and backward). */
static void attn_fused_fwd(CudaModel *m, const LayerCtx *z)
{
    CudaLayerActs *a = z->a;
    if (m->attn_cudnn_now)
        attn_cudnn_fwd(m->cudnn, a->att, a->lse, a->q, a->k, a->v, m->cudnn_ws, z->st);
    else
        k_flash_fwd(a->att, a->lse, a->q, a->k, a->v, m->pos, z->B, z->H, z->KV, z->T, z->D, z->st);
}

static void attn_fused_bwd(CudaModel *m, const LayerCtx *z)
{
    CudaLayerActs *a = z->a;
    if (m->attn_cudnn_now)
        attn_cudnn_bwd(m->cudnn, m->dq, m->dk, m->dv, a->q, a->k, a->v, a->att, m->datt, a->lse, m->cudnn_ws,
                       z->st);
    else
        k_flash_bwd(m->dq, m->dk, m->dv, a->q, a->k, a->v, a->att, m->datt, a->lse, m->pos, m->fa_scratch,
                    z->B, z->H, z->KV, z->T, z->D, m->deterministic, z->st);
}

/* The attention core from the rotated q, k, v: a->att [N, HD] (flash: and a->lse).
 * with_scores: the eager path computes its probabilities P too (else they are
 * kept from the forward pass). */
static void attn_fwd(CudaModel *m, const LayerCtx *z, int with_scores)
{
    CudaLayerActs *a = z->a;
    if (m->flash) {
        attn_fused_fwd(m, z);
        return;
    }
    int G = z->G, T = z->T, D = z->D;
    if (with_scores) {
        /* S = Q K^T per (b, kv head): [G*T, D] x [T, D]^T */
        bmm(m, 0, 1, G * T, T, D, a->q, D, (long long)G * T * D, a->k, D, (long long)T * D,
            a->P, T, (long long)G * T * T, 1.f, z->B * z->KV);
        k_attn_softmax_fwd(a->P, m->pos, z->B, z->H, T, 1.f / sqrtf((float)D), z->st);
    }
    /* O = P V: [G*T, T] x [T, D] */
    bmm(m, 0, 0, G * T, D, T, a->P, T, (long long)G * T * T, a->v, D, (long long)T * D,
        m->o, D, (long long)G * T * D, 1.f, z->B * z->KV);
    k_swap12(a->att, m->o, z->B, z->H, T, D, z->st);
}

/* Forward of one layer from xs[l]; with stop_before_down (recompute inside the
 * backward pass) the last GEMM, whose output is not needed, is skipped. */
static void layer_fwd(CudaModel *m, int l, int stop_before_down)
{
    const ModelConfig *c = &m->cfg;
    LayerCtx z = layer_ctx(m, l);
    CudaLayerActs *a = z.a;
    const CudaLayerOffsets *o = z.o;
    bf16_t *x = m->xs[l];

    k_rmsnorm_fwd(a->ln1, a->rstd1, x, wp(m, l, o->ln1), z.N, z.C, (float)c->rms_eps, z.st);
    PHASE(m, PH_NORM);
    /* Qwen3: the GEMM output is kept for the head norms' backward pass */
    bf16_t *qkv_out = c->qk_norm ? a->qkv_raw : m->qkv;
    proj_fwd(m, &z, l, F8_QKV, a->ln1, z.C, o->qkv_w, z.QKVD, qkv_out, NULL);
    if (m->lora) cuda_lora_fwd(m, l, CL_QKV, a->ln1, qkv_out, z.QKVD);
    PHASE(m, PH_QKV_GEMM);
    if (c->qk_norm)
        k_head_norm_fwd(m->qkv, a->qkv_raw, wp(m, l, o->qk_norm), z.N, z.H, z.KV, z.D, (float)c->rms_eps, z.st);
    k_qkv_rope_fwd(a->q, a->k, a->v, m->qkv, c->qkv_bias ? wp(m, l, o->qkv_b) : NULL, m->pos, z.B, z.T, z.H, z.KV, z.D,
                   (float)c->rope_theta, z.st);
    PHASE(m, PH_ROPE);
    attn_fwd(m, &z, 1);
    PHASE(m, PH_ATTN);
    proj_fwd(m, &z, l, F8_O, a->att, z.HD, o->o_w, z.C, a->xmid, x);
    if (m->lora) cuda_lora_fwd(m, l, CL_O, a->att, a->xmid, z.C);
    PHASE(m, PH_O_GEMM);
    k_rmsnorm_fwd(a->ln2, a->rstd2, a->xmid, wp(m, l, o->ln2), z.N, z.C, (float)c->rms_eps, z.st);
    PHASE(m, PH_NORM);
    proj_fwd(m, &z, l, F8_GU, a->ln2, z.C, o->gu_w, 2 * z.F, a->gu, NULL);
    if (m->lora) cuda_lora_fwd(m, l, CL_GU, a->ln2, a->gu, 2 * z.F);
    PHASE(m, PH_GU_GEMM);
    k_swiglu_fwd(a->h, a->gu, z.N, z.F, z.st);
    PHASE(m, PH_SWIGLU);
    if (!stop_before_down) {
        proj_fwd(m, &z, l, F8_DOWN, a->h, z.F, o->down_w, z.C, m->xs[l + 1], a->xmid);
        if (m->lora) cuda_lora_fwd(m, l, CL_DOWN, a->h, m->xs[l + 1], z.C);
        PHASE(m, PH_DOWN_GEMM);
    } else if (m->lora) {   /* the down adapter's u, which its backward needs */
        cuda_lora_fwd(m, l, CL_DOWN, a->h, NULL, 0);
    }
    CUDA_CHECK(cudaGetLastError());
}

/* Backward of one layer: m->dres holds dLoss/dxs[l+1] on entry and dLoss/dxs[l] on exit. */
static void layer_bwd(CudaModel *m, int l)
{
    const ModelConfig *c = &m->cfg;
    if (m->recompute == RECOMPUTE_FULL) layer_fwd(m, l, 1);   /* its time shows in the forward phases */
    LayerCtx z = layer_ctx(m, l);
    CudaLayerActs *a = z.a;
    const CudaLayerOffsets *o = z.o;
    float scale = 1.f / sqrtf((float)z.D);
    int N = z.N, C = z.C, F = z.F, HD = z.HD, QKVD = z.QKVD;
    /* this layer's own weights train (else their gradients are skipped, and the
     * norm/bias kernels, which always write one, write it to junk) */
    int wt = m->finetune != METHOD_LORA && l >= m->train_lo && l < m->train_hi;
    float *gj = m->junk;
    if (m->recompute == RECOMPUTE_SELECTIVE) {
        /* this layer's h and att from the kept GEMM outputs (shared buffers) */
        k_swiglu_fwd(a->h, a->gu, N, F, z.st);
        PHASE(m, PH_SWIGLU);
        attn_fwd(m, &z, 0);
        PHASE(m, PH_ATTN);
    }

    /* MLP */
    proj_dgrad(m, &z, l, F8_DOWN, m->dres, C, o->down_w, F, m->dh, wt);
    PHASE(m, PH_DOWN_DX);
    if (wt) proj_wgrad(m, &z, l, F8_DOWN, m->dres, C, a->h, F, gp(m, l, o->down_w));
    if (m->lora) cuda_lora_bwd(m, l, CL_DOWN, a->h, m->dres, C, m->dh);
    PHASE(m, PH_DOWN_DW);
    k_swiglu_bwd(m->dgu, m->dh, a->gu, N, F, z.st);
    PHASE(m, PH_SWIGLU_BWD);
    proj_dgrad(m, &z, l, F8_GU, m->dgu, 2 * F, o->gu_w, C, m->dln, wt);
    PHASE(m, PH_GU_DX);
    if (wt) proj_wgrad(m, &z, l, F8_GU, m->dgu, 2 * F, a->ln2, C, gp(m, l, o->gu_w));
    if (m->lora) cuda_lora_bwd(m, l, CL_GU, a->ln2, m->dgu, 2 * F, m->dln);
    PHASE(m, PH_GU_DW);
    k_rmsnorm_bwd(m->dres, wt ? gp(m, l, o->ln2) : gj, m->dln, a->xmid, wp(m, l, o->ln2), a->rstd2, m->dres, N, C,
                  (float *)m->logits, z.st);
    PHASE(m, PH_NORM_BWD);
    /* attention output projection */
    proj_dgrad(m, &z, l, F8_O, m->dres, C, o->o_w, HD, m->datt, wt);
    PHASE(m, PH_O_DX);
    if (wt) proj_wgrad(m, &z, l, F8_O, m->dres, C, a->att, HD, gp(m, l, o->o_w));
    if (m->lora) cuda_lora_bwd(m, l, CL_O, a->att, m->dres, C, m->datt);
    PHASE(m, PH_O_DW);
    if (m->flash) {
        attn_fused_bwd(m, &z);
    } else {
        int G = z.G, T = z.T, D = z.D, BKV = z.B * z.KV;
        k_swap12(m->dO, m->datt, z.B, T, z.H, D, z.st);
        /* dP = dO V^T; dS = softmax'; dV = P^T dO; dQ = scale dS K; dK = scale dS^T Q */
        bmm(m, 0, 1, G * T, T, D, m->dO, D, (long long)G * T * D, a->v, D, (long long)T * D,
            m->dP, T, (long long)G * T * T, 1.f, BKV);
        k_attn_softmax_bwd(m->dP, a->P, (long long)z.B * z.H * T, T, z.st);
        bmm(m, 1, 0, T, D, G * T, a->P, T, (long long)G * T * T, m->dO, D, (long long)G * T * D,
            m->dv, D, (long long)T * D, 1.f, BKV);
        bmm(m, 0, 0, G * T, D, T, m->dP, T, (long long)G * T * T, a->k, D, (long long)T * D,
            m->dq, D, (long long)G * T * D, scale, BKV);
        bmm(m, 1, 0, T, D, G * T, m->dP, T, (long long)G * T * T, a->q, D, (long long)G * T * D,
            m->dk, D, (long long)T * D, scale, BKV);
    }
    PHASE(m, PH_ATTN_BWD);
    k_qkv_rope_bwd(m->dqkv, m->dq, m->dk, m->dv, m->pos, z.B, z.T, z.H, z.KV, z.D, (float)c->rope_theta, z.st);
    if (c->qkv_bias && wt) k_bias_grad(gp(m, l, o->qkv_b), m->dqkv, N, QKVD, (float *)m->logits, z.st);
    if (c->qk_norm)   /* dqkv: from the normed q, k to the GEMM output; q_norm/k_norm gradients accumulated */
        k_head_norm_bwd(m->dqkv, wt ? gp(m, l, o->qk_norm) : gj, a->qkv_raw, wp(m, l, o->qk_norm), N, z.H, z.KV, z.D,
                        (float)c->rms_eps, (float *)m->logits, z.st);
    PHASE(m, PH_ROPE_BWD);
    proj_dgrad(m, &z, l, F8_QKV, m->dqkv, QKVD, o->qkv_w, C, m->dln, wt);
    PHASE(m, PH_QKV_DX);
    if (wt) proj_wgrad(m, &z, l, F8_QKV, m->dqkv, QKVD, a->ln1, C, gp(m, l, o->qkv_w));
    if (m->lora) cuda_lora_bwd(m, l, CL_QKV, a->ln1, m->dqkv, QKVD, m->dln);
    PHASE(m, PH_QKV_DW);
    k_rmsnorm_bwd(m->dres, wt ? gp(m, l, o->ln1) : gj, m->dln, m->xs[l], wp(m, l, o->ln1), a->rstd1, m->dres, N, C,
                  (float *)m->logits, z.st);
    PHASE(m, PH_NORM_BWD);
    CUDA_CHECK(cudaGetLastError());
}

/* All-reduce (sum) a gradient range on the communication stream once the compute
 * stream has produced it (event ev). */
static void reduce_bucket(CudaModel *m, size_t off, size_t count, int ev)
{
    cudaStream_t cs = (cudaStream_t)m->par.comm_stream;
    cudaEvent_t e = (cudaEvent_t)m->layer_done[ev];
    CUDA_CHECK(cudaEventRecord(e, (cudaStream_t)m->stream));
    CUDA_CHECK(cudaStreamWaitEvent(cs, e, 0));
    cuda_coll_allreduce_f32(m->par.comm, m->grad + off, count, cs);
}

/* The matrix gradients are written by their GEMMs (beta 0, see wgrad) in the next
 * micro-batch; only what is accumulated with atomics is zeroed here: the norm
 * weights and biases, and an untied embedding (a tied one is first written by the
 * LM-head GEMM). Padding between tensors is never written and stays zero. */
void cuda_model_zero_grad(CudaModel *m)
{
    cudaStream_t st = (cudaStream_t)m->stream;
    if (m->grad) {
        CUDA_CHECK(cudaMemsetAsync(m->grad + m->decay_end, 0, (m->n_total - m->decay_end) * sizeof(float), st));
        if (!m->cfg.tie_embeddings)
            CUDA_CHECK(cudaMemsetAsync(m->grad + m->off_embed, 0,
                                       (size_t)m->cfg.vocab * m->cfg.hidden * sizeof(float), st));
    }
    if (m->junk) {   /* never read; kept from growing without bound */
        size_t C = m->cfg.hidden, QKVD = (size_t)(m->cfg.heads + 2 * m->cfg.kv_heads) * m->cfg.head_dim;
        size_t n = C > QKVD ? C : QKVD;
        if (n < 2 * (size_t)m->cfg.head_dim) n = 2 * (size_t)m->cfg.head_dim;
        CUDA_CHECK(cudaMemsetAsync(m->junk, 0, n * sizeof(float), st));
    }
    m->grad_fresh = 1;
    m->acc_fresh = 1;
    PHASE(m, PH_ZERO_GRAD);
}

/* The rows of a micro-batch grouped by token id, for the embedding gradient
 * (k_embed_bwd): a stable counting sort, so rows keep their order inside a
 * group and the sum is the same every run. Uploads [order | start | id]; returns
 * the number of distinct ids. ids are inside the vocabulary (batch_read checks). */
static int emb_bwd_plan(CudaModel *m, const int *ids, int N, cudaStream_t st)
{
    int V = m->cfg.vocab, *next = m->h_emb_next, *order = m->h_emb_plan;
    memset(next, 0, ((size_t)V + 1) * sizeof *next);
    for (int n = 0; n < N; n++) next[ids[n] + 1]++;
    for (int v = 0; v < V; v++) next[v + 1] += next[v];
    for (int n = 0; n < N; n++) order[next[ids[n]]++] = n;
    int U = 0, *start = order + N;
    for (int r = 0; r < N; r++)
        if (r == 0 || ids[order[r]] != ids[order[r - 1]]) start[U++] = r;
    start[U] = N;
    int *seg_id = start + U + 1;
    for (int s = 0; s < U; s++) seg_id[s] = ids[order[start[s]]];
    CUDA_CHECK(cudaMemcpyAsync(m->emb_plan, order, (size_t)(N + 2 * U + 1) * sizeof(int), cudaMemcpyHostToDevice, st));
    return U;
}

/* ---- ZeRO-2/3: buckets, gathers (zero_layout.h) ----
 * Collectives run on the communication stream (one stream for all of them, so
 * every rank issues them in one order); events order it against the compute
 * stream. On one rank they are plain copies and adds on the compute stream. */

static cudaStream_t comm_stream(const CudaModel *m)
{
    return m->par.world > 1 ? (cudaStream_t)m->par.comm_stream : (cudaStream_t)m->stream;
}

/* Stream b waits for what stream a has enqueued so far. */
static void stream_after(CudaModel *m, cudaStream_t b, cudaStream_t a)
{
    if (a == b) return;
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev_ready, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, (cudaEvent_t)m->ev_ready, 0));
}

/* [base, base+n) of the flat vector whose shards (elem bytes each, this rank's
 * from starts[rank]) are shard, whole into out on stream s. */
static void zero_allgather(CudaModel *m, const void *shard, size_t elem, size_t base, size_t n, void *out,
                           cudaStream_t s)
{
    if (m->par.world > 1)
        cuda_coll_allgather_range(m->par.comm, shard, m->starts, base, n, elem, out, s);
    else
        CUDA_CHECK(cudaMemcpyAsync(out, (const char *)shard + base * elem, n * elem, cudaMemcpyDeviceToDevice, s));
}

/* ZeRO-3: unit u's bf16 weights into its gathered buffer (layer u in slot u & 1,
 * the last unit in its own), enqueued on the communication stream once the
 * compute stream has finished with what the slot held; the slot's event marks
 * it gathered. Kept until the slot is needed again or the weights change.
 * Forward fetches layer l + 1 while layer l computes, backward layer l - 1. */
static void zero_fetch(CudaModel *m, int u)
{
    int tail = u == m->cfg.layers, slot = tail ? 2 : u & 1;
    if (tail ? m->wtail_ok : m->wlayer_unit[slot] == u) return;
    const ZeroUnit *z = &m->units[u];
    bf16_t *dst = tail ? m->wtail : m->wlayer[slot];
    cudaStream_t st = (cudaStream_t)m->stream, cs = comm_stream(m);
    if (m->local_w) {   /* one rank alone: from the host's fp32 weights, rounded as the shards are */
        size_t chunk = zl_unit_len(&m->units[m->cfg.layers]);
        for (int k = 0; k < 2; k++)
            for (size_t o = 0; o < z->len[k]; o += chunk) {
                size_t n = z->len[k] - o < chunk ? z->len[k] - o : chunk;
                CUDA_CHECK(cudaMemcpyAsync(m->gtail, m->local_w + z->off[k] + o, n * sizeof(float),
                                           cudaMemcpyHostToDevice, st));
                k_f32_to_bf16(dst + z->pos[k] + o, m->gtail, n, st);
            }
        cs = st;
    } else {
        stream_after(m, cs, st);   /* the slot's last reader is done */
        for (int k = 0; k < 2; k++)
            if (z->len[k])
                zero_allgather(m, m->wsh, sizeof(bf16_t), z->off[k], z->len[k], dst + z->pos[k], cs);
    }
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev_gathered[slot], cs));
    if (tail) m->wtail_ok = 1;
    else m->wlayer_unit[slot] = u;
}

/* Unit u's weights gathered before the compute stream goes on (fetched now if
 * they were not prefetched). */
static void zero_use(CudaModel *m, int u)
{
    int slot = u == m->cfg.layers ? 2 : u & 1;
    zero_fetch(m, u);
    CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)m->stream, (cudaEvent_t)m->ev_gathered[slot], 0));
    PHASE(m, PH_GATHER);
}

/* Unit u's bucket, before backward writes it: free again (its last reduction
 * done), and zero where the kernels add rather than write (the norm weights and
 * biases; the last unit whole: its embedding rows are added to). */
static void zero_bucket_begin(CudaModel *m, int u)
{
    int tail = u == m->cfg.layers, b = tail ? 2 : u & 1;
    cudaStream_t st = (cudaStream_t)m->stream;
    if (m->par.world > 1) CUDA_CHECK(cudaStreamWaitEvent(st, (cudaEvent_t)m->ev_free[b], 0));
    const ZeroUnit *z = &m->units[u];
    if (tail) {
        CUDA_CHECK(cudaMemsetAsync(m->gtail, 0, zl_unit_len(z) * sizeof(float), st));
    } else {
        m->gsel = b;
        CUDA_CHECK(cudaMemsetAsync(m->gbuf[b] + z->pos[1], 0, z->len[1] * sizeof(float), st));
    }
}

/* Unit u's bucket (complete on the compute stream) summed over ranks onto this
 * rank's shard of the step's gradient: written by the step's first micro-batch,
 * added to by the others. */
static void zero_bucket_reduce(CudaModel *m, int u)
{
    int tail = u == m->cfg.layers, b = tail ? 2 : u & 1, add = !m->acc_fresh;
    float *buf = tail ? m->gtail : m->gbuf[b];
    const ZeroUnit *z = &m->units[u];
    cudaStream_t st = (cudaStream_t)m->stream, cs = comm_stream(m);
    stream_after(m, cs, st);
    for (int k = 0; k < 2; k++) {
        float *src = buf + z->pos[k];
        size_t base = z->off[k], n = z->len[k];
        if (!n) continue;
        if (m->par.world > 1)
            cuda_coll_reduce_range_f32(m->par.comm, src, base, n, m->starts, m->gacc, add, cs);
        else if (add)
            k_add_f32(m->gacc + base, src, n, cs);
        else
            CUDA_CHECK(cudaMemcpyAsync(m->gacc + base, src, n * sizeof(float), cudaMemcpyDeviceToDevice, cs));
    }
    if (m->par.world > 1) CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev_free[b], cs));
    PHASE(m, PH_GRAD_REDUCE);
}

void cuda_model_zero3_local(CudaModel *m, const float *w)
{
    m->local_w = w;
    gathers_forget(m);
}

void cuda_model_micro(CudaModel *m, const int *ids, const int *pos, const int *targets,
                      float grad_scale, float *logits_out, int last_micro)
{
    const ModelConfig *c = &m->cfg;
    cudaStream_t st = m->stream;
    int N = m->B * m->T, C = c->hidden, V = c->vocab, L = c->layers;
    int train = grad_scale != 0.f, full = m->finetune == METHOD_FULL;
    int bucketed = train && last_micro && full && m->par.world > 1 && !m->par.zero1 && m->zero < 2;
    int zero2 = train && m->zero >= 2;
    if (zero2) m->grad_fresh = 1;   /* every micro-batch's gradients are its own (buckets) */

    CUDA_CHECK(cudaMemcpyAsync(m->ids, ids, N * sizeof(int), cudaMemcpyHostToDevice, st));
    int emb_segs = train && full ? emb_bwd_plan(m, ids, N, st) : 0;
    CUDA_CHECK(cudaMemcpyAsync(m->pos, pos, N * sizeof(int), cudaMemcpyHostToDevice, st));
    m->attn_cudnn_now = m->cudnn && attn_cudnn_set_rows(m->cudnn, pos, m->cudnn_ws_bytes, st);
    CUDA_CHECK(cudaMemcpyAsync(m->targets, targets, N * sizeof(int), cudaMemcpyHostToDevice, st));
    if (m->zero == 3) zero_use(m, L);
    if (m->fp8) {   /* the inputs' and gradients' maxima start again every micro-batch */
        if (m->f8_stale) fp8_weights(m);
        CUDA_CHECK(cudaMemsetAsync(m->f8_amax + F8_SLOT(m, 0, 0, F8_INPUT), 0,
                                   8 * (size_t)L * F8_SLOT_FLOATS * sizeof(float), st));
    }
    k_embed_fwd(m->xs[0], m->ids, wp(m, L, m->off_embed), N, C, st);
    PHASE(m, PH_EMBED);
    for (int l = 0; l < L; l++) {
        if (m->zero == 3) {
            zero_use(m, l);
            if (l + 1 < L) zero_fetch(m, l + 1);
        }
        layer_fwd(m, l, 0);
    }
    if (zero2) zero_bucket_begin(m, L);   /* the head's gradient comes with the loss */

    /* Final norm, then LM head + cross-entropy chunk by chunk: bf16 logits of at
     * most ce_chunk rows exist at a time, and become dlogits in place. */
    k_rmsnorm_fwd(m->hf, m->rstdf, m->xs[L], wp(m, L, m->off_norm), N, C, (float)c->rms_eps, st);
    PHASE(m, PH_NORM);
    for (int r0 = 0; r0 < N; r0 += m->ce_chunk) {
        int rn = N - r0 < m->ce_chunk ? N - r0 : m->ce_chunk;
        mm(m, 0, 1, rn, V, C, m->hf + (size_t)r0 * C, C, wp(m, L, m->off_lm), C, m->logits, V, 0, NULL, 1.f, 0.f);
        PHASE(m, PH_LM_GEMM);
        if (logits_out) {
            uint16_t *hb = malloc((size_t)rn * V * 2);
            if (!hb) { log_error("out of memory"); exit(1); }
            CUDA_CHECK(cudaMemcpyAsync(hb, m->logits, (size_t)rn * V * 2, cudaMemcpyDeviceToHost, st));
            CUDA_CHECK(cudaStreamSynchronize(st));
            for (size_t i = 0; i < (size_t)rn * V; i++) {
                uint32_t u = (uint32_t)hb[i] << 16;
                memcpy(&logits_out[(size_t)r0 * V + i], &u, 4);
            }
            free(hb);
        }
        k_cross_entropy(m->logits, m->losses + r0, m->targets + r0, rn, V, grad_scale, st);
        PHASE(m, PH_CE);
        if (!train) continue;
        mm(m, 0, 0, rn, C, V, m->logits, V, wp(m, L, m->off_lm), C, m->dln + (size_t)r0 * C, C, 0, NULL, 1.f, 0.f);
        PHASE(m, PH_LM_DX);
        if (full)   /* fine-tuning keeps the head (and the embedding) frozen */
            mm(m, 1, 0, V, C, rn, m->logits, V, m->hf + (size_t)r0 * C, C, gp(m, L, m->off_lm), C, 1, NULL, 1.f,
               m->grad_fresh && r0 == 0 ? 0.f : 1.f);
        PHASE(m, PH_LM_DW);
    }
    k_sum_add(m->loss_acc, m->losses, N, st);
    CUDA_CHECK(cudaGetLastError());
    if (!train) return;
    k_rmsnorm_bwd(m->dres, full ? gp(m, L, m->off_norm) : m->junk, m->dln, m->xs[L], wp(m, L, m->off_norm), m->rstdf,
                  NULL, N, C, (float *)m->logits, st);
    PHASE(m, PH_NORM_BWD);
    /* freeze: nothing below the lowest trained layer needs a gradient */
    int lowest = m->finetune == METHOD_FREEZE ? m->train_lo : 0;
    for (int l = L - 1; l >= lowest; l--) {
        if (m->zero == 3) {
            zero_use(m, l);
            if (l - 1 >= lowest) zero_fetch(m, l - 1);
        }
        if (zero2) zero_bucket_begin(m, l);
        layer_bwd(m, l);
        if (zero2) zero_bucket_reduce(m, l);
        if (bucketed) {
            size_t end = l + 1 < L ? m->lo[l + 1].qkv_w : m->off_embed;
            reduce_bucket(m, m->lo[l].qkv_w, end - m->lo[l].qkv_w, l);
        }
    }
    if (train && full) k_embed_bwd(gp(m, L, m->off_embed), m->emb_plan, N, emb_segs, m->dres, C, st);
    PHASE(m, PH_EMBED_BWD);
    m->grad_fresh = 0;
    if (zero2) {
        zero_bucket_reduce(m, L);
        m->acc_fresh = 0;
    }
    if (bucketed) reduce_bucket(m, m->off_embed, m->n_total - m->off_embed, L);
    CUDA_CHECK(cudaGetLastError());
}

/* Element i of a moment array (fp32 or bf16 bits). */
static void *mom_at(const CudaModel *m, void *mom, size_t i)
{
    return (char *)mom + i * state_bytes(m);
}

/* AdamW on n elements whose flat index starts at goff, with this model's moment
 * format (the bf16 moments' rounding keyed by the plan's seed and the step). */
static void adamw_state(CudaModel *m, float *master, uint16_t *lo, bf16_t *param, const float *grad, void *mo,
                        void *ve, size_t n, size_t goff, float lr, float b1, float b2, float eps, float wd, float bc1,
                        float bc2, float grad_mult, float clip)
{
    cudaStream_t st = m->stream;
    if (m->bf16_states)
        k_adamw_bf16(master, lo, param, grad, mo, ve, n, goff, m->decay_end, lr, b1, b2, eps, wd, bc1, bc2, m->sumsq,
                     grad_mult, clip, m->seed, (uint32_t)m->step, st);
    else
        k_adamw(master, lo, param, grad, mo, ve, n, goff, m->decay_end, lr, b1, b2, eps, wd, bc1, bc2, m->sumsq,
                grad_mult, clip, st);
}

/* AdamW with the master weights and moments in host memory: each tensor in
 * chunks, uploaded on off.up, updated on the compute stream, downloaded on
 * off.down, three staging sets in flight so both copy directions and the update
 * overlap. The uploads of this step wait for the previous step's downloads; this
 * step's downloads finish behind the next forward pass (offload_sync waits). */
static void offload_adamw(CudaModel *m, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                          float grad_mult, float clip)
{
    CudaOffload *o = &m->off;
    cudaStream_t st = m->stream, up = o->up, down = o->down;
    const size_t FB = sizeof(float);
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)o->ev_free[0], down));
    CUDA_CHECK(cudaStreamWaitEvent(up, (cudaEvent_t)o->ev_free[0], 0));
    size_t k = 0;
    for (int i = 0; i < m->n_params; i++) {
        const CudaParam *p = &m->params[i];
        for (size_t j = 0; j < p->numel; j += o->chunk, k++) {
            size_t n = p->numel - j < o->chunk ? p->numel - j : o->chunk, h = p->host_off + j, d = p->off + j;
            int b = (int)(k % CUDA_OFFLOAD_BUFS);
            float *sw = o->stage[b], *sm = sw + o->chunk, *sv = sm + o->chunk;
            cudaEvent_t in = o->ev_in[b], done = o->ev_done[b], fr = o->ev_free[b];
            if (k >= CUDA_OFFLOAD_BUFS) CUDA_CHECK(cudaStreamWaitEvent(up, fr, 0));
            CUDA_CHECK(cudaMemcpyAsync(sw, o->host_w + h, n * FB, cudaMemcpyHostToDevice, up));
            CUDA_CHECK(cudaMemcpyAsync(sm, o->host_m + h, n * FB, cudaMemcpyHostToDevice, up));
            CUDA_CHECK(cudaMemcpyAsync(sv, o->host_v + h, n * FB, cudaMemcpyHostToDevice, up));
            CUDA_CHECK(cudaEventRecord(in, up));
            CUDA_CHECK(cudaStreamWaitEvent(st, in, 0));
            k_adamw(sw, NULL, m->w + d, m->grad + d, sm, sv, n, d, m->decay_end, lr, b1, b2, eps, wd, bc1, bc2, m->sumsq,
                    grad_mult, clip, st);
            CUDA_CHECK(cudaEventRecord(done, st));
            CUDA_CHECK(cudaStreamWaitEvent(down, done, 0));
            CUDA_CHECK(cudaMemcpyAsync(o->host_w + h, sw, n * FB, cudaMemcpyDeviceToHost, down));
            CUDA_CHECK(cudaMemcpyAsync(o->host_m + h, sm, n * FB, cudaMemcpyDeviceToHost, down));
            CUDA_CHECK(cudaMemcpyAsync(o->host_v + h, sv, n * FB, cudaMemcpyDeviceToHost, down));
            CUDA_CHECK(cudaEventRecord(fr, down));
        }
    }
}

/* The host state is final (every download of the last step done). */
static void offload_sync(CudaModel *m)
{
    if (m->offload) CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->off.down));
}

void cuda_model_offload_adopt(CudaModel *m, int step)
{
    m->f8_stale = 1;
    CudaOffload *o = &m->off;
    cudaStream_t st = m->stream;
    offload_sync(m);
    for (int i = 0; i < m->n_params; i++) {
        const CudaParam *p = &m->params[i];
        for (size_t j = 0; j < p->numel; j += o->chunk) {
            size_t n = p->numel - j < o->chunk ? p->numel - j : o->chunk;
            CUDA_CHECK(cudaMemcpyAsync(o->stage[0], o->host_w + p->host_off + j, n * sizeof(float),
                                       cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->w + p->off + j, o->stage[0], n, st);
        }
    }
    m->step = step;
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
}

/* ZeRO-2/3's step: the shard's summed gradient is in gacc once the
 * communication stream is done. The norm: each fixed block's sum of squares
 * (blocks never straddle shards), zero elsewhere, summed over ranks (one term
 * per block is not zero, so the sum is exact) and then in block order: the same
 * bits on any number of ranks. AdamW on the shard; ZeRO-2 all-gathers the
 * updated bf16 weights, ZeRO-3 gathers them as the next pass needs them. */
static float zero_step(CudaModel *m, float grad_mult, float lr, float b1, float b2, float eps, float wd,
                       float clip)
{
    cudaStream_t st = m->stream;
    stream_after(m, st, comm_stream(m));
    PHASE(m, PH_GRAD_REDUCE);
    size_t nb = grad_norm_blocks(m->n_total);
    CUDA_CHECK(cudaMemsetAsync(m->norm_parts, 0, nb * sizeof(float), st));
    k_sumsq_blocks(m->norm_parts + m->shard_off / GRAD_NORM_BLOCK, m->gacc, m->shard_len, GRAD_NORM_BLOCK, st);
    if (m->par.world > 1) cuda_coll_allreduce_f32(m->par.comm, m->norm_parts, nb, st);
    CUDA_CHECK(cudaMemsetAsync(m->sumsq, 0, sizeof(float), st));
    k_sum_add(m->sumsq, m->norm_parts, (int)nb, st);
    PHASE(m, PH_GRAD_NORM);
    m->step++;
    float bc1 = 1.f - powf(b1, (float)m->step), bc2 = 1.f - powf(b2, (float)m->step);
    if (m->shard_len)
        adamw_state(m, m->master, NULL, m->zero == 3 ? m->wsh : m->w + m->shard_off, m->gacc, m->m, m->v,
                    m->shard_len, m->shard_off, lr, b1, b2, eps, wd, bc1, bc2, grad_mult, clip);
    if (m->zero == 2 && m->par.world > 1)
        cuda_coll_allgather_range(m->par.comm, m->w + m->shard_off, m->starts, 0, m->n_total, sizeof(bf16_t), m->w,
                                  st);
    gathers_forget(m);
    PHASE(m, PH_ADAMW);
    float ss = 0.f;
    CUDA_CHECK(cudaMemcpyAsync(&ss, m->sumsq, sizeof ss, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    return sqrtf(ss) * grad_mult;
}

float cuda_model_step(CudaModel *m, float grad_mult, float lr, float b1, float b2, float eps, float wd,
                      float clip)
{
    m->f8_stale = 1;
    cudaStream_t st = m->stream;
    CudaColl *comm = m->par.comm;
    CudaLora *ad = m->lora;
    if (m->zero) return zero_step(m, grad_mult, lr, b1, b2, eps, wd, clip);
    if (m->par.world > 1) {
        if (m->finetune != METHOD_FULL) {   /* replicated: every rank steps the summed gradients */
            if (ad) cuda_coll_allreduce_f32(comm, ad->grad, ad->n_total, st);
            else
                for (int i = 0; i < m->n_spans; i++)
                    cuda_coll_allreduce_f32(comm, m->grad + m->span[i].off, m->span[i].len, st);
        } else if (m->par.zero1) {
            /* ZeRO-1: each rank receives the summed gradient of its own shard. */
            cuda_coll_reduce_scatter_f32(comm, m->grad, m->grad + m->shard_off, m->shard_len, st);
        } else {
            cudaEvent_t e = (cudaEvent_t)m->layer_done[m->cfg.layers];
            CUDA_CHECK(cudaEventRecord(e, (cudaStream_t)m->par.comm_stream));
            CUDA_CHECK(cudaStreamWaitEvent(st, e, 0));
        }
    }
    PHASE(m, PH_GRAD_REDUCE);
    if (ad) {
        k_sumsq(m->sumsq, m->sumsq_scratch, ad->grad, ad->n_total, st);
    } else if (m->n_spans == 1) {
        k_sumsq(m->sumsq, m->sumsq_scratch, m->grad + m->span[0].off, m->span[0].len, st);
    } else {   /* one partial per span, summed in a fixed order */
        for (int i = 0; i < m->n_spans; i++)
            k_sumsq(m->sumsq + 1 + i, m->sumsq_scratch, m->grad + m->span[i].off, m->span[i].len, st);
        CUDA_CHECK(cudaMemsetAsync(m->sumsq, 0, sizeof(float), st));
        k_sum_add(m->sumsq, m->sumsq + 1, m->n_spans, st);
    }
    if (m->par.world > 1 && m->par.zero1)
        cuda_coll_allreduce_f32(comm, m->sumsq, 1, st);
    PHASE(m, PH_GRAD_NORM);
    m->step++;
    float bc1 = 1.f - powf(b1, (float)m->step), bc2 = 1.f - powf(b2, (float)m->step);
    if (ad)   /* every adapter is a matrix: all take weight decay */
        k_adamw(ad->master, NULL, ad->w, ad->grad, ad->m, ad->v, ad->n_total, 0, ad->n_total, lr, b1, b2, eps, wd, bc1,
                bc2, m->sumsq, grad_mult, clip, st);
    else if (m->offload)
        offload_adamw(m, lr, b1, b2, eps, wd, bc1, bc2, grad_mult, clip);
    else
        for (int i = 0; i < m->n_spans; i++) {
            size_t so = span_state_off(m, i), off = m->span[i].off;
            adamw_state(m, m->master ? m->master + so : NULL, m->master_lo ? m->master_lo + so : NULL, m->w + off,
                        m->grad + off, mom_at(m, m->m, so), mom_at(m, m->v, so), m->span[i].len, off, lr, b1, b2,
                        eps, wd, bc1, bc2, grad_mult, clip);
        }
    if (m->par.world > 1 && m->par.zero1)
        cuda_coll_allgather_bf16(comm, m->w + m->shard_off, m->w, m->shard_len, st);
    PHASE(m, PH_ADAMW);
    float ss = 0.f;
    CUDA_CHECK(cudaMemcpyAsync(&ss, m->sumsq, sizeof ss, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    return sqrtf(ss) * grad_mult;
}

/* ZeRO-2/3: the shard's master weights and moments straight from the host
 * arrays; the bf16 weights whole through the last unit's bucket (ZeRO-2), or
 * the shard's from its master weights (ZeRO-3: the same rounding). */
static void zero_set_flat(CudaModel *m, const float *w, const float *mom1, const float *mom2, int step)
{
    cudaStream_t st = (cudaStream_t)m->stream;
    size_t len = m->shard_len * sizeof(float), chunk = zl_unit_len(&m->units[m->cfg.layers]);
    if (m->shard_len) {
        /* Default: the state may be pinned host memory (off_shard) */
        CUDA_CHECK(cudaMemcpyAsync(m->master, w + m->shard_off, len, cudaMemcpyDefault, st));
        if (mom1 && mom2 && m->bf16_states) {   /* through gacc (free between steps), rounded to bf16 */
            CUDA_CHECK(cudaMemcpyAsync(m->gacc, mom1 + m->shard_off, len, cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->m, m->gacc, m->shard_len, st);
            CUDA_CHECK(cudaMemcpyAsync(m->gacc, mom2 + m->shard_off, len, cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->v, m->gacc, m->shard_len, st);
        } else if (mom1 && mom2) {
            CUDA_CHECK(cudaMemcpyAsync(m->m, mom1 + m->shard_off, len, cudaMemcpyDefault, st));
            CUDA_CHECK(cudaMemcpyAsync(m->v, mom2 + m->shard_off, len, cudaMemcpyDefault, st));
        }
        if (m->zero == 3) k_f32_to_bf16(m->wsh, m->master, m->shard_len, st);
    }
    if (m->zero == 2)
        for (size_t o = 0; o < m->n_total; o += chunk) {
            size_t n = m->n_total - o < chunk ? m->n_total - o : chunk;
            CUDA_CHECK(cudaMemcpyAsync(m->gtail, w + o, n * sizeof(float), cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->w + o, m->gtail, n, st);
        }
    if (mom1 && mom2) m->step = step;
    gathers_forget(m);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
}

/* ZeRO-2/3: a shard array (master weights or a moment) whole into host (may be
 * NULL: this rank only takes part), a last-unit bucket at a time. Collective. */
static void zero_get_host(CudaModel *m, const float *shard, float *host)
{
    cudaStream_t st = (cudaStream_t)m->stream;
    size_t chunk = zl_unit_len(&m->units[m->cfg.layers]);
    for (size_t o = 0; o < m->n_total; o += chunk) {
        size_t n = m->n_total - o < chunk ? m->n_total - o : chunk;
        zero_allgather(m, shard, sizeof(float), o, n, m->gtail, st);
        if (host) CUDA_CHECK(cudaMemcpyAsync(host + o, m->gtail, n * sizeof(float), cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
}

void cuda_model_set_flat(CudaModel *m, const float *w, const float *mom1, const float *mom2, int step)
{
    m->f8_stale = 1;
    if (m->offload) { log_error("set_flat under offload"); abort(); }
    if (m->zero) { zero_set_flat(m, w, mom1, mom2, step); return; }
    size_t bytes = m->n_total * sizeof(float);
    if (!m->grad) {   /* LoRA: bf16 weights only, converted through a small bounce buffer */
        size_t chunk = (size_t)16 << 20;
        float *tmp;
        CUDA_CHECK(cudaMalloc((void **)&tmp, chunk * sizeof(float)));
        for (size_t o = 0; o < m->n_total; o += chunk) {
            size_t n = m->n_total - o < chunk ? m->n_total - o : chunk;
            CUDA_CHECK(cudaMemcpyAsync(tmp, w + o, n * sizeof(float), cudaMemcpyHostToDevice, (cudaStream_t)m->stream));
            k_f32_to_bf16(m->w + o, tmp, n, (cudaStream_t)m->stream);
            CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
        }
        CUDA_CHECK(cudaFree(tmp));
        if (mom1 && mom2) m->step = step;
        return;
    }
    /* Every copy on the model's stream: a plain cudaMemcpy from pageable memory may
     * return before its DMA lands, and the non-blocking stream would not wait. */
    cudaStream_t st = (cudaStream_t)m->stream;
    float *tmp = m->grad;   /* scratch between steps */
    CUDA_CHECK(cudaMemcpyAsync(tmp, w, bytes, cudaMemcpyHostToDevice, st));
    adopt_weights(m, tmp);
    if (mom1 && mom2) {   /* bf16 moments: through the gradient buffer, rounded to bf16 */
        const float *src[2] = {mom1, mom2};
        void *dst[2] = {m->m, m->v};
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < m->n_spans; i++) {
                size_t so = span_state_off(m, i), off = m->span[i].off, len = m->span[i].len * sizeof(float);
                void *to = m->bf16_states ? (void *)(m->grad + so) : mom_at(m, dst[k], so);
                CUDA_CHECK(cudaMemcpyAsync(to, src[k] + off, len, cudaMemcpyHostToDevice, st));
            }
            if (m->bf16_states) k_f32_to_bf16(dst[k], m->grad, m->n_state, st);
        }
        m->step = step;
    }
    CUDA_CHECK(cudaMemsetAsync(m->grad, 0, bytes, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

/* One fp32 shard array -> a full host array (all-gather through the gradient buffer). */
static void gather_to_host(CudaModel *m, const float *shard, float *host)
{
    cudaStream_t st = m->stream;
    if (m->par.world > 1 && m->par.zero1) {
        cuda_coll_allgather_f32(m->par.comm, shard, m->grad, m->shard_len, st);
        CUDA_CHECK(cudaStreamSynchronize(st));
        if (host) CUDA_CHECK(cudaMemcpy(host, m->grad, m->n_total * sizeof(float), cudaMemcpyDeviceToHost));
    } else if (host) {
        CUDA_CHECK(cudaStreamSynchronize(st));
        CUDA_CHECK(cudaMemcpy(host, shard, m->n_total * sizeof(float), cudaMemcpyDeviceToHost));
    }
}

/* The spans of a fine-tuning run's state into full flat host arrays (the
 * rest of host is left as it is). */
static void spans_to_host(CudaModel *m, const float *state, float *host)
{
    if (!host) return;
    for (int i = 0; i < m->n_spans; i++)
        CUDA_CHECK(cudaMemcpy(host + m->span[i].off, state + span_state_off(m, i), m->span[i].len * sizeof(float),
                              cudaMemcpyDeviceToHost));
}

/* The fp32 master weights of what trains, in the state layout (the spans back to
 * back): m->master, or the split pairs joined into the gradient buffer (scratch
 * between steps), at the shard's own offset so that a ZeRO-1 all-gather from it
 * is in place. Enqueued on the model's stream. */
static const float *master_f32(CudaModel *m)
{
    if (!m->master_lo) return m->master;
    float *out = m->grad + m->shard_off;
    for (int i = 0; i < m->n_spans; i++) {
        size_t so = span_state_off(m, i);
        k_master_join(out + so, m->w + m->span[i].off, m->master_lo + so, m->span[i].len, (cudaStream_t)m->stream);
    }
    return out;
}

/* A moment array as fp32 in the state layout (n elements): itself, or the bf16
 * moments widened into scratch; ready for a plain cudaMemcpy when it returns. */
static const float *mom_f32(CudaModel *m, void *mom, size_t n, float *scratch)
{
    if (!m->bf16_states) return mom;
    k_bf16_to_f32(scratch, mom, n, (cudaStream_t)m->stream);
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
    return scratch;
}

void cuda_model_get_flat(CudaModel *m, float *w, float *mom1, float *mom2)
{
    if (m->offload) { offload_sync(m); return; }   /* the host state is the state */
    if (m->zero) {
        void *arr[3] = {m->master, m->m, m->v};
        float *host[3] = {w, mom1, mom2};
        for (int k = 0; k < 3; k++) {
            const float *src = k ? mom_f32(m, arr[k], m->shard_len, m->gacc) : arr[k];
            if (m->off_shard && m->shard_len) {   /* collectives take device memory: through gacc (free now) */
                CUDA_CHECK(cudaMemcpyAsync(m->gacc, src, m->shard_len * sizeof(float), cudaMemcpyDefault,
                                           (cudaStream_t)m->stream));
                src = m->gacc;
            }
            zero_get_host(m, src, host[k]);
        }
        return;
    }
    if (m->finetune != METHOD_FULL) {   /* one rank; LoRA: the base never changes (no span) */
        const float *master = master_f32(m);
        CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
        spans_to_host(m, master, w);
        if (mom1) spans_to_host(m, mom_f32(m, m->m, m->n_state, m->grad), mom1);
        if (mom2) spans_to_host(m, mom_f32(m, m->v, m->n_state, m->grad), mom2);
        if ((m->master_lo || m->bf16_states) && m->grad)   /* the scratch back to the zeros a step starts from */
            CUDA_CHECK(cudaMemsetAsync(m->grad, 0, m->n_total * sizeof(float), (cudaStream_t)m->stream));
        CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
        return;
    }
    gather_to_host(m, master_f32(m), w);
    gather_to_host(m, mom_f32(m, m->m, m->n_state, m->grad + m->shard_off), mom1);
    gather_to_host(m, mom_f32(m, m->v, m->n_state, m->grad + m->shard_off), mom2);
    CUDA_CHECK(cudaMemsetAsync(m->grad, 0, m->n_total * sizeof(float), (cudaStream_t)m->stream));
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
}

void cuda_model_get_shard(CudaModel *m, float *w, float *mom1, float *mom2)
{
    if (!m->zero || !m->shard_len) return;
    cudaStream_t st = (cudaStream_t)m->stream;
    void *arr[3] = {m->master, m->m, m->v};
    float *host[3] = {w, mom1, mom2};
    for (int k = 0; k < 3; k++) {   /* one at a time: gacc holds one moment in fp32 */
        const float *src = k ? mom_f32(m, arr[k], m->shard_len, m->gacc) : arr[k];
        CUDA_CHECK(cudaMemcpyAsync(host[k] + m->shard_off, src, m->shard_len * sizeof(float), cudaMemcpyDefault, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
}

double cuda_model_flops_per_token(const CudaModel *m, int T)
{
    const ModelConfig *c = &m->cfg;
    double C = c->hidden, HD = (double)c->heads * c->head_dim, KVD = (double)c->kv_heads * c->head_dim;
    double per_layer = C * (HD + 2 * KVD) + HD * C + 3.0 * C * c->ffn, head = (double)c->vocab * C;
    double n_mm = c->layers * per_layer + head, attn = 2.0 * HD * T;   /* attn: one layer's QK^T + PV per token */
    if (m->finetune == METHOD_FULL) return 6.0 * n_mm + 6.0 * c->layers * attn;
    /* forward everywhere; the backward's input gradients from the top down to
     * train_lo (LoRA: 0), weight gradients only for what trains */
    int below = m->finetune == METHOD_FREEZE ? m->train_lo : 0;
    double f = 2.0 * n_mm + 2.0 * head + 2.0 * c->layers * attn;
    f += (c->layers - below) * (2.0 * per_layer + 4.0 * attn);
    f += (m->train_hi - m->train_lo) * 2.0 * per_layer;
    if (m->lora) {   /* each adapter: forward, input gradient and weight gradient */
        double n_ad = 0;
        for (int i = 0; i < m->lora->n_params; i++) n_ad += (double)m->lora->params[i].numel;
        f += 6.0 * n_ad;
    }
    return f;
}
