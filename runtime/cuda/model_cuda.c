/* model_cuda.c — the decoder's memory on the GPU: the flat buffers' layout
 * (model_cuda.h), every allocation made once up front (weights, gradients,
 * AdamW states, activations, ZeRO's shards and gathered buffers, offload's
 * staging, FP8's copies, LoRA's adapters, cuDNN's workspace), and the weights
 * set from random or from the host. The passes are model_cuda_pass.c's, the
 * optimizer step model_cuda_step.c's.
 */
#include "model_cuda_internal.h"

#include "backend_caps.h"   /* contract/: the FP8 GEMMs' dimensions, as llmc check refuses them */

#define ALIGN_ELEMS LLMC_CUDA_ALIGN_ELEMS

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

/* LLMC_SWIGLU_SM90=1 (an experiment of issue 31, off by default): the gate/up forward
 * and the down projection's input gradient through gemm_sm90 with SwiGLU and its
 * backward in their epilogues (gemm_sm90_swiglu_fwd/bwd: dh never stored, gu read
 * once less). bf16 GEMMs, no LoRA, a Hopper GPU; else an error. */
static int swiglu_sm90_setup(CudaModel *m)
{
    const char *env = getenv("LLMC_SWIGLU_SM90");
    if (!env || !strcmp(env, "0")) return 0;
    if (strcmp(env, "1")) {
        log_error("LLMC_SWIGLU_SM90=%s: want 0 or 1", env);
        return -1;
    }
    int dev = 0, major = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major != 9 || m->fp8 || m->finetune == METHOD_LORA) {
        log_error("LLMC_SWIGLU_SM90=1 needs a Hopper GPU (compute capability 9.x, this one %d.x), bf16 GEMMs "
                  "(not precision = fp8) and no LoRA", major);
        return -1;
    }
    /* the kernels' TMA rows: 16-byte multiples (gemm_sm90_swiglu_fwd/bwd refuse others) */
    if (m->cfg.ffn % 8 || m->cfg.hidden % 8) {
        log_error("LLMC_SWIGLU_SM90=1 needs the FFN width and hidden size to be multiples of 8 (here %d and %d)",
                  m->cfg.ffn, m->cfg.hidden);
        return -1;
    }
    m->swiglu_sm90 = 1;
    return 0;
}

/* LLMC_WGRAD_SMS=n (an experiment of issue 31, off by default): the four projections'
 * weight gradients of every layer on a side stream (their own cuBLASLt handle, planned
 * for n SMs; 0: the whole GPU), beside the compute stream's input gradients and
 * memory-bound kernels, which then overlap them. Each gradient's products in the same
 * order as on one stream: the same bits every run (cuBLASLt's choice for an SM target may
 * differ from its default's, and so may the last bits). bf16 GEMMs, full or freeze training on one rank without
 * ZeRO-2/3 or recompute (the buffers the products read stay put); else an error. */
static int wgrad_side_setup(CudaModel *m)
{
    const char *env = getenv("LLMC_WGRAD_SMS");
    if (!env || !*env) return 0;
    char *end;
    long n = strtol(env, &end, 10);
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (*end || n < 0 || n > sms) {
        log_error("LLMC_WGRAD_SMS=%s: want an SM count from 0 (the whole GPU) to %d", env, sms);
        return -1;
    }
    if (m->fp8 || m->finetune == METHOD_LORA || m->par.world > 1 || m->zero || m->recompute != RECOMPUTE_NONE) {
        log_error("LLMC_WGRAD_SMS needs bf16 GEMMs, full or freeze training, one rank, no ZeRO-2/3 and no "
                  "recompute");
        return -1;
    }
    cudaStream_t ws;
    CUDA_CHECK(cudaStreamCreateWithFlags(&ws, cudaStreamNonBlocking));
    m->wstream = ws;
    m->gemm_w = gemm_create_side(ws, 64u << 20, (int)n);
    if (!m->gemm_w) return -1;
    cudaEvent_t e[5];
    for (int k = 0; k < 5; k++) CUDA_CHECK(cudaEventCreateWithFlags(&e[k], cudaEventDisableTiming));
    m->ev_wg_in = e[0];
    for (int k = 0; k < 4; k++) m->ev_wg[k] = e[k + 1];
    log_info("LLMC_WGRAD_SMS=%ld: weight gradients on a side stream (cuBLASLt planned for %d SMs of %d)", n,
             n ? (int)n : sms, sms);
    return 0;
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
size_t state_bytes(const CudaModel *m)
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
void gathers_forget(CudaModel *m)
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

/* Offload under ZeRO-2/3: the shard's master weights, moments and summed
 * gradient in pinned host memory, zeroed (the moments start there; the weights
 * come from set), as DeepSpeed's offloaded optimizer keeps its fp32 gradient
 * partition on the host: 72B on one node of 8 x 80 GB fits only so (the shard's
 * fp32 gradient alone is 34 GiB a GPU there). The buckets stay on the device;
 * their reduced windows are added onto gacc over the host link. */
static int offload_shard_alloc(CudaModel *m)
{
    size_t bytes = (m->n_state ? m->n_state : 1) * sizeof(float);
    void **arr[4] = {(void **)&m->master, &m->m, &m->v, (void **)&m->gacc};
    for (int k = 0; k < 4; k++) {
        /* mapped: AdamW's kernel reads and writes it in place (one pointer for both sides, UVA) */
        if (cudaHostAlloc((void **)arr[k], bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError();
            log_error("offload: cannot pin %.2f GiB of host memory for this rank's optimizer shard",
                      4.0 * bytes / 1073741824.0);
            return -1;
        }
        memset(*arr[k], 0, bytes);
    }
    return 0;
}

/* ZeRO-2: whole bf16 weights; ZeRO-3: this rank's and one gathered layer and
 * the gathered last unit. Both: two layer buckets, the last unit's bucket, the
 * shard's gradient (in host memory under offload: offload_shard_alloc), the
 * norm's block sums. */
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
    if (!m->off_shard) m->gacc = dalloc(m, m->shard_len * FF, fail);
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
    LlmcFp8Dim bad = llmc_fp8_dim_fault((long long)m->B * m->T, c->hidden, c->heads, c->kv_heads, c->head_dim,
                                        c->ffn, c->vocab, num->fp8_head);
    if (num->fp8 && bad.what) {
        log_error("precision = fp8: the FP8 GEMMs need %s to be a multiple of %d, found %lld%s", bad.what,
                  LLMC_FP8_DIM_STEP, bad.value,
                  bad.kind == LLMC_FP8_DIM_VOCAB ? " (train.fp8_lm_head = false keeps the LM head in bf16)" : "");
        return -1;
    }
    m->fp8 = num->fp8;
    m->f8_head = num->fp8 && num->fp8_head;
    m->bf16_states = num->bf16_states;
    m->seed = num->seed;
    return num->master_split;
}

/* FP8's buffers: every projection weight and its transpose, the maxima and
 * scales, the activation scratch (the largest input and output gradient), the
 * trained layers' transposed inputs. */
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
    if (m->finetune != METHOD_LORA && m->recompute != RECOMPUTE_FULL)
        m->f8_xt = dalloc(m, (size_t)(m->train_hi - m->train_lo) * N * (2 * C + HD + F), fail);
    if (m->f8_head) {   /* the head's E4M3 weight [V, C] and its transpose */
        m->f8_hw = dalloc(m, (size_t)c->vocab * C, fail);
        m->f8_hwt = dalloc(m, (size_t)c->vocab * C, fail);
    }
    m->f8_amax = dalloc(m, F8_SLOTS(m) * F8_SLOT_FLOATS * sizeof(float), fail);
    m->f8_sinv = dalloc(m, F8_SLOTS(m) * F8_SLOT_FLOATS * sizeof(float), fail);
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
        /* FP8 with the inputs' transposes kept (f8_xt): the bf16 ln1, ln2 and h are read
         * only by the forward pass's GEMMs, so one buffer each serves every layer */
        int f8_shared = m->f8_xt && l > 0;
        a->ln1 = f8_shared ? m->acts[0].ln1 : dalloc(m, N * C * BB, &fail);
        a->ln2 = f8_shared ? m->acts[0].ln2 : dalloc(m, N * C * BB, &fail);
        a->q = dalloc(m, N * HD * BB, &fail);
        a->k = dalloc(m, N * KVD * BB, &fail);
        a->v = dalloc(m, N * KVD * BB, &fail);
        if (m->flash) a->lse = dalloc(m, (size_t)B * H * T * FF, &fail);
        else a->P = dalloc(m, PP * BB, &fail);
        a->att = shared ? m->acts[0].att : dalloc(m, N * HD * BB, &fail);
        a->xmid = dalloc(m, N * C * BB, &fail);
        a->gu = dalloc(m, N * 2 * F * BB, &fail);
        a->h = shared || f8_shared ? m->acts[0].h : dalloc(m, N * F * BB, &fail);
        if (c->qk_norm) a->qkv_raw = dalloc(m, N * QKVD * BB, &fail);
        a->rstd1 = dalloc(m, N * FF, &fail);
        a->rstd2 = dalloc(m, N * FF, &fail);
    }
    m->ce_chunk = (int)(N < LLMC_CUDA_CE_CHUNK_ROWS ? N : LLMC_CUDA_CE_CHUNK_ROWS);
    /* The FP8 head's chunk holds its bf16 logits and the E5M2 gradient in both layouts
     * (2 + 1 + 1 bytes an element) in the same bytes: half the rows, multiples of 16. */
    if (m->f8_head) m->ce_chunk = m->ce_chunk >= 32 ? m->ce_chunk / 2 / 16 * 16 : 16;
    m->qkv = dalloc(m, N * QKVD * BB, &fail);
    if (!m->flash) m->o = dalloc(m, N * HD * BB, &fail);
    m->hf = dalloc(m, N * C * BB, &fail);
    /* The logits chunk doubles as the scratch of the column sums (norm-weight and
     * bias gradients), which run outside the LM-head phase. */
    size_t logit_bytes = (size_t)m->ce_chunk * V * (m->f8_head ? 4 : BB), colsum_bytes = k_colsum_scratch((int)C, (int)QKVD) * FF;
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
    if (swiglu_sm90_setup(m)) return -1;
    if (wgrad_side_setup(m)) return -1;
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
    if (m->gemm_w) gemm_destroy(m->gemm_w);
    if (m->wstream) {
        cudaEventDestroy((cudaEvent_t)m->ev_wg_in);
        for (int k = 0; k < 4; k++) cudaEventDestroy((cudaEvent_t)m->ev_wg[k]);
        cudaStreamDestroy((cudaStream_t)m->wstream);
    }
    attn_cudnn_destroy(m->cudnn);
    cuda_lora_destroy(m);
    phase_timer_free(m->timer);
    free(m->params); free(m->lo); free(m->xs); free(m->acts);
    free(m->h_emb_plan); free(m->h_emb_next);
    free(m->starts); free(m->units); free(m->f8_woff);
    if (m->off_shard) {
        cudaDeviceSynchronize();
        cudaFreeHost(m->master); cudaFreeHost(m->m); cudaFreeHost(m->v); cudaFreeHost(m->gacc);
    }
    memset(m, 0, sizeof *m);
}

/* Where span i starts in master/m/v. */
size_t span_state_off(const CudaModel *m, int i)
{
    size_t o = 0;
    for (int k = 0; k < i; k++) o += m->span[k].len;
    return o;
}

/* A full fp32 copy of the weights (tmp, on the device) becomes the bf16 weights
 * and the master weights of what trains (this rank's shard, or the spans). */
void adopt_weights(CudaModel *m, float *tmp)
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

/* One parameter's initial values into tmp[0, numel): normal for matrices, 1 for
 * the norms' weights, 0 for biases (the same sequence whatever tmp is). */
static void init_param(const CudaParam *p, int i, float *tmp, uint64_t seed, float std, cudaStream_t st)
{
    if (p->cols) k_init_normal(tmp, p->numel, seed * 1000003ull + (uint64_t)i, std, st);
    else if (strstr(p->name, "norm")) k_fill(tmp, p->numel, 1.f, st);
    else CUDA_CHECK(cudaMemsetAsync(tmp, 0, p->numel * sizeof(float), st));
}

/* ZeRO-2/3: parameter by parameter through a scratch of the largest one, so
 * that no whole fp32 copy of the model is ever on a rank's device (7B: 30 GB,
 * more than two ranks sharing one GPU can spare); the same values as the whole
 * copy of cuda_model_init_random, rounded and sharded as adopt_weights does.
 * The layout's padding stays as allocated: zero. */
static void init_random_zero(CudaModel *m, uint64_t seed, float std)
{
    cudaStream_t st = m->stream;
    size_t big = 1;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].numel > big) big = m->params[i].numel;
    float *tmp;
    CUDA_CHECK(cudaMalloc((void **)&tmp, big * sizeof(float)));
    size_t lo = m->shard_off, hi = m->shard_off + m->shard_len;
    for (int i = 0; i < m->n_params; i++) {
        const CudaParam *p = &m->params[i];
        init_param(p, i, tmp, seed, std, st);
        if (m->zero == 2) k_f32_to_bf16(m->w + p->off, tmp, p->numel, st);
        size_t a = p->off > lo ? p->off : lo, b = p->off + p->numel < hi ? p->off + p->numel : hi;
        if (a >= b) continue;
        if (m->zero == 3) k_f32_to_bf16(m->wsh + (a - lo), tmp + (a - p->off), b - a, st);
        /* Default: master may be pinned host memory (off_shard) */
        CUDA_CHECK(cudaMemcpyAsync(m->master + (a - lo), tmp + (a - p->off), (b - a) * sizeof(float),
                                   cudaMemcpyDefault, st));
    }
    m->f8_stale = 1;
    gathers_forget(m);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaFree(tmp));
}

void cuda_model_init_random(CudaModel *m, uint64_t seed, float std)
{
    if (m->zero) { init_random_zero(m, seed, std); return; }
    float *tmp = m->grad;   /* whole gradient buffer: scratch before training (7B: 30 GB not allocated twice) */
    cudaStream_t st = m->stream;
    if (!tmp) CUDA_CHECK(cudaMalloc((void **)&tmp, m->n_total * sizeof(float)));
    CUDA_CHECK(cudaMemsetAsync(tmp, 0, m->n_total * sizeof(float), st));
    for (int i = 0; i < m->n_params; i++) init_param(&m->params[i], i, tmp + m->params[i].off, seed, std, st);
    adopt_weights(m, tmp);
    if (tmp == m->grad) CUDA_CHECK(cudaMemsetAsync(m->grad, 0, m->n_total * sizeof(float), st));
    else CUDA_CHECK(cudaFree(tmp));
    CUDA_CHECK(cudaStreamSynchronize(st));
}
