/* model_cuda_pass.c — the decoder's forward and backward passes on the GPU, the
 * fused LM-head cross-entropy, bucketed gradient reduction and ZeRO-2/3's
 * gathers and reduce-scatters: one micro-step (cuda_model_micro).
 *
 * Attention is computed with materialised scores per (batch, kv-head) group:
 * S = Q K^T for the G query heads that share one K/V head is one strided-batched
 * GEMM of (G*T) x T, so grouped-query attention needs no K/V copies. The softmax
 * applies causality and document boundaries from pos (see shard.h). */
#include "model_cuda_internal.h"
#include "gemm_sm90.h"

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

/* LLMC_WGRAD_SMS: projection p's weight gradient on the side stream once the compute
 * stream has made its inputs; ev_wg[p] marks its end (wgrad_wait). */
static void wgrad_side(CudaModel *m, int p, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                       float *dW)
{
    cudaStream_t ws = (cudaStream_t)m->wstream;
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev_wg_in, (cudaStream_t)m->stream));
    CUDA_CHECK(cudaStreamWaitEvent(ws, (cudaEvent_t)m->ev_wg_in, 0));
    GemmArgs a = {.transA = 1, .M = M, .N = N, .K = K, .A = A, .lda = lda, .B = B, .ldb = ldb, .D = dW, .ldd = N,
                  .d_f32 = 1, .alpha = 1.f, .beta = m->grad_fresh ? 0.f : 1.f, .batch = 1};
    gemm_run(m->gemm_w, &a);
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev_wg[p], ws));
}

/* The compute stream waits for projection p's last side-stream weight gradient
 * before it overwrites that product's inputs (a no-op before the first). */
static void wgrad_wait(CudaModel *m, int p)
{
    if (m->gemm_w) CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)m->stream, (cudaEvent_t)m->ev_wg[p], 0));
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
    if (m->f8_head) {   /* the head (the embedding when tied): [V, C] */
        size_t k = F8_HEAD_SLOT(m, F8_WEIGHT);
        const bf16_t *w = wp(m, L, m->off_lm);
        CUDA_CHECK(cudaMemsetAsync(m->f8_amax + k, 0, sizeof(float), st));
        k_fp8_amax(m->f8_amax + k, w, (size_t)m->cfg.vocab * m->cfg.hidden, st);
        k_fp8_quant(m->f8_hw, m->f8_hwt, m->f8_sinv + k, w, m->cfg.vocab, m->cfg.hidden, m->f8_amax + k, 0, st);
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

/* FP8: where the kernel producing a GEMM's input (kind F8_INPUT) or output
 * gradient (F8_GRAD) maxes its |max| in, so that the GEMM's quantiser needs no
 * amax pass of its own (amax_ready below); NULL without FP8. */
static float *f8_amax_at(CudaModel *m, int l, int p, int kind)
{
    return m->fp8 ? m->f8_amax + F8_SLOT(m, l, p, kind) : NULL;
}

/* Layer l's projection p's input transposed in E4M3 [in, N] for its weight
 * gradient, kept from the forward pass; NULL where it is not kept (f8_xt). */
static uint8_t *f8_xt_at(CudaModel *m, int l, int p)
{
    if (!m->f8_xt || l < m->train_lo || l >= m->train_hi) return NULL;
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)m->B * m->T, C = c->hidden, HD = (size_t)c->heads * c->head_dim, F = c->ffn;
    size_t before[4] = {0, C, C + HD, 2 * C + HD};   /* qkv, o, gate-up, down: C, HD, C, F wide */
    return m->f8_xt + (size_t)(l - m->train_lo) * N * (2 * C + HD + F) + N * before[p];
}

/* Y[N, out] = X[N, in] . W[out, in]^T (+ R, the residual, when not NULL). fp8: X
 * in E4M3 with its own scale, Hopper's fast accumulation (as in Transformer
 * Engine's forward; the gradients' products accumulate exactly); amax_ready:
 * X's producer has put its maximum in the slot (f8_amax_at). */
static void proj_fwd(CudaModel *m, const LayerCtx *z, int l, int p, const bf16_t *X, int in, size_t woff, int out,
                     bf16_t *Y, const bf16_t *R, int amax_ready)
{
    if (!m->fp8) {
        mm(m, 0, 1, z->N, out, in, X, in, wp(m, l, woff), in, Y, out, 0, R, 1.f, R ? 1.f : 0.f);
        return;
    }
    size_t k = F8_SLOT(m, l, p, F8_INPUT), w = F8_SLOT(m, l, p, F8_WEIGHT);
    if (!amax_ready) k_fp8_amax(m->f8_amax + k, X, (size_t)z->N * in, z->st);
    /* the same quantised values transposed for the weight gradient, while X is read */
    k_fp8_quant(m->f8_a, m->f8_keep ? f8_xt_at(m, l, p) : NULL, m->f8_sinv + k, X, z->N, in, m->f8_amax + k, 0,
                z->st);
    /* the residual: cuBLASLt takes no separate bf16 C beside FP8 operands (status 15,
     * measured on the H200), so D starts as R and accumulates in place */
    if (R) CUDA_CHECK(cudaMemcpyAsync(Y, R, (size_t)z->N * out * sizeof(bf16_t), cudaMemcpyDeviceToDevice, z->st));
    mm_fp8(m, z->N, out, in, m->f8_a, GEMM_E4M3, m->f8_sinv + k, m->f8_w + m->f8_woff[l * 4 + p], m->f8_sinv + w, Y,
           0, NULL, R ? 1.f : 0.f, 1);
}

/* dX[N, in] = dY[N, out] . W[out, in]. fp8: dY in E5M2 against W's transposed
 * E4M3 copy; with_wgrad: dY's transposed copy for proj_wgrad in the same pass;
 * amax_ready: dY's producer has put its maximum in the slot. */
static void proj_dgrad(CudaModel *m, const LayerCtx *z, int l, int p, const bf16_t *dY, int out, size_t woff, int in,
                       bf16_t *dX, int with_wgrad, int amax_ready)
{
    if (!m->fp8) {
        mm(m, 0, 0, z->N, in, out, dY, out, wp(m, l, woff), in, dX, in, 0, NULL, 1.f, 0.f);
        return;
    }
    size_t k = F8_SLOT(m, l, p, F8_GRAD), w = F8_SLOT(m, l, p, F8_WEIGHT);
    if (!amax_ready) k_fp8_amax(m->f8_amax + k, dY, (size_t)z->N * out, z->st);
    k_fp8_quant(m->f8_dy, with_wgrad ? m->f8_dyt : NULL, m->f8_sinv + k, dY, z->N, out, m->f8_amax + k, 1, z->st);
    mm_fp8(m, z->N, in, out, m->f8_dy, GEMM_E5M2, m->f8_sinv + k, m->f8_wt + m->f8_woff[l * 4 + p], m->f8_sinv + w,
           dX, 0, NULL, 0.f, 0);
}

/* dW[out, in] (fp32; written by the step's first micro-batch, then accumulated)
 * = dY^T . X. fp8: from the transposed copies (dY's from proj_dgrad; X's kept
 * by proj_fwd, else made here with the forward pass's maximum: the same bytes). */
static void proj_wgrad(CudaModel *m, const LayerCtx *z, int l, int p, const bf16_t *dY, int out, const bf16_t *X,
                       int in, float *dW)
{
    if (!m->fp8) {
        if (m->gemm_w) wgrad_side(m, p, out, in, z->N, dY, out, X, in, dW);
        else wgrad(m, out, in, z->N, dY, out, X, in, dW);
        return;
    }
    size_t kx = F8_SLOT(m, l, p, F8_INPUT), kg = F8_SLOT(m, l, p, F8_GRAD);
    const uint8_t *xt = f8_xt_at(m, l, p);
    if (!xt) {
        k_fp8_quant(NULL, m->f8_a, NULL, X, z->N, in, m->f8_amax + kx, 0, z->st);
        xt = m->f8_a;
    }
    mm_fp8(m, out, in, z->N, m->f8_dyt, GEMM_E5M2, m->f8_sinv + kg, xt, m->f8_sinv + kx, dW, 1, NULL,
           m->grad_fresh ? 0.f : 1.f, 0);
}

/* swiglu_sm90: gu = ln2 . W_gu^T and h = silu(g) u in one kernel (gemm_sm90_swiglu_fwd). */
static void gu_swiglu_sm90(CudaModel *m, const LayerCtx *z, int l)
{
    GemmArgs a = {.transB = 1, .M = z->N, .N = 2 * z->F, .K = z->C, .A = z->a->ln2, .lda = z->C,
                  .B = wp(m, l, z->o->gu_w), .ldb = z->C, .D = z->a->gu, .ldd = 2 * z->F, .alpha = 1.f, .batch = 1};
    if (gemm_sm90_swiglu_fwd(&a, z->a->h, z->F, z->st)) {
        log_error("gemm_sm90_swiglu_fwd refused layer %d's gate/up projection (%d x %d x %d)", l, z->N, 2 * z->F, z->C);
        abort();
    }
}

/* swiglu_sm90: dgu from dh = dres . W_down (never stored) and gu in one kernel
 * (gemm_sm90_swiglu_bwd). */
static void down_dx_swiglu_sm90(CudaModel *m, const LayerCtx *z, int l)
{
    GemmArgs a = {.M = z->N, .N = z->F, .K = z->C, .A = m->dres, .lda = z->C, .B = wp(m, l, z->o->down_w),
                  .ldb = z->F, .D = m->dgu, .ldd = 2 * z->F, .alpha = 1.f, .batch = 1};
    if (gemm_sm90_swiglu_bwd(&a, z->a->gu, z->st)) {
        log_error("gemm_sm90_swiglu_bwd refused layer %d's down projection (%d x %d x %d)", l, z->N, z->F, z->C);
        abort();
    }
}

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

    k_rmsnorm_fwd(a->ln1, a->rstd1, x, wp(m, l, o->ln1), z.N, z.C, (float)c->rms_eps,
                  f8_amax_at(m, l, F8_QKV, F8_INPUT), z.st);
    PHASE(m, PH_NORM);
    /* Qwen3: the GEMM output is kept for the head norms' backward pass */
    bf16_t *qkv_out = c->qk_norm ? a->qkv_raw : m->qkv;
    proj_fwd(m, &z, l, F8_QKV, a->ln1, z.C, o->qkv_w, z.QKVD, qkv_out, NULL, 1);
    if (m->lora) cuda_lora_fwd(m, l, CL_QKV, a->ln1, qkv_out, z.QKVD);
    PHASE(m, PH_QKV_GEMM);
    if (c->qk_norm)
        k_head_norm_fwd(m->qkv, a->qkv_raw, wp(m, l, o->qk_norm), z.N, z.H, z.KV, z.D, (float)c->rms_eps, z.st);
    k_qkv_rope_fwd(a->q, a->k, a->v, m->qkv, c->qkv_bias ? wp(m, l, o->qkv_b) : NULL, m->pos, z.B, z.T, z.H, z.KV, z.D,
                   (float)c->rope_theta, z.st);
    PHASE(m, PH_ROPE);
    attn_fwd(m, &z, 1);
    PHASE(m, PH_ATTN);
    proj_fwd(m, &z, l, F8_O, a->att, z.HD, o->o_w, z.C, a->xmid, x, 0);
    if (m->lora) cuda_lora_fwd(m, l, CL_O, a->att, a->xmid, z.C);
    PHASE(m, PH_O_GEMM);
    k_rmsnorm_fwd(a->ln2, a->rstd2, a->xmid, wp(m, l, o->ln2), z.N, z.C, (float)c->rms_eps,
                  f8_amax_at(m, l, F8_GU, F8_INPUT), z.st);
    PHASE(m, PH_NORM);
    if (m->swiglu_sm90) gu_swiglu_sm90(m, &z, l);   /* h too */
    else proj_fwd(m, &z, l, F8_GU, a->ln2, z.C, o->gu_w, 2 * z.F, a->gu, NULL, 1);
    if (m->lora) cuda_lora_fwd(m, l, CL_GU, a->ln2, a->gu, 2 * z.F);
    PHASE(m, PH_GU_GEMM);
    if (!m->swiglu_sm90) {
        k_swiglu_fwd(a->h, a->gu, z.N, z.F, f8_amax_at(m, l, F8_DOWN, F8_INPUT), z.st);
        PHASE(m, PH_SWIGLU);
    }
    if (!stop_before_down) {
        proj_fwd(m, &z, l, F8_DOWN, a->h, z.F, o->down_w, z.C, m->xs[l + 1], a->xmid, 1);
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
        k_swiglu_fwd(a->h, a->gu, N, F, NULL, z.st);   /* the same h: its maximum is in the slot already */
        PHASE(m, PH_SWIGLU);
        attn_fwd(m, &z, 0);
        PHASE(m, PH_ATTN);
    }

    /* MLP */
    wgrad_wait(m, F8_GU);   /* dgu: the layer above's gate/up weight gradient read it */
    /* dres's maximum: from the RMSNorm backward above this layer (its ln1, or the final norm) */
    if (m->swiglu_sm90) down_dx_swiglu_sm90(m, &z, l);   /* dgu, from dh never stored */
    else proj_dgrad(m, &z, l, F8_DOWN, m->dres, C, o->down_w, F, m->dh, wt, 1);
    PHASE(m, PH_DOWN_DX);
    if (wt) proj_wgrad(m, &z, l, F8_DOWN, m->dres, C, a->h, F, gp(m, l, o->down_w));
    if (m->lora) cuda_lora_bwd(m, l, CL_DOWN, a->h, m->dres, C, m->dh);
    PHASE(m, PH_DOWN_DW);
    if (!m->swiglu_sm90) {
        k_swiglu_bwd(m->dgu, m->dh, a->gu, N, F, f8_amax_at(m, l, F8_GU, F8_GRAD), z.st);
        PHASE(m, PH_SWIGLU_BWD);
    }
    proj_dgrad(m, &z, l, F8_GU, m->dgu, 2 * F, o->gu_w, C, m->dln, wt, 1);
    PHASE(m, PH_GU_DX);
    if (wt) proj_wgrad(m, &z, l, F8_GU, m->dgu, 2 * F, a->ln2, C, gp(m, l, o->gu_w));
    if (m->lora) cuda_lora_bwd(m, l, CL_GU, a->ln2, m->dgu, 2 * F, m->dln);
    PHASE(m, PH_GU_DW);
    wgrad_wait(m, F8_DOWN);   /* dres, which the down weight gradient reads, is overwritten */
    k_rmsnorm_bwd(m->dres, wt ? gp(m, l, o->ln2) : gj, m->dln, a->xmid, wp(m, l, o->ln2), a->rstd2, m->dres, N, C,
                  (float *)m->logits, f8_amax_at(m, l, F8_O, F8_GRAD), z.st);
    PHASE(m, PH_NORM_BWD);
    /* attention output projection */
    proj_dgrad(m, &z, l, F8_O, m->dres, C, o->o_w, HD, m->datt, wt, 1);
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
    wgrad_wait(m, F8_QKV);   /* dqkv: the layer above's qkv weight gradient read it */
    k_qkv_rope_bwd(m->dqkv, m->dq, m->dk, m->dv, m->pos, z.B, z.T, z.H, z.KV, z.D, (float)c->rope_theta, z.st);
    if (c->qkv_bias && wt) k_bias_grad(gp(m, l, o->qkv_b), m->dqkv, N, QKVD, (float *)m->logits, z.st);
    if (c->qk_norm)   /* dqkv: from the normed q, k to the GEMM output; q_norm/k_norm gradients accumulated */
        k_head_norm_bwd(m->dqkv, wt ? gp(m, l, o->qk_norm) : gj, a->qkv_raw, wp(m, l, o->qk_norm), N, z.H, z.KV, z.D,
                        (float)c->rms_eps, (float *)m->logits, z.st);
    PHASE(m, PH_ROPE_BWD);
    proj_dgrad(m, &z, l, F8_QKV, m->dqkv, QKVD, o->qkv_w, C, m->dln, wt, 0);
    PHASE(m, PH_QKV_DX);
    if (wt) proj_wgrad(m, &z, l, F8_QKV, m->dqkv, QKVD, a->ln1, C, gp(m, l, o->qkv_w));
    if (m->lora) cuda_lora_bwd(m, l, CL_QKV, a->ln1, m->dqkv, QKVD, m->dln);
    PHASE(m, PH_QKV_DW);
    /* dres is the next layer down's down-projection gradient: its maximum goes there */
    wgrad_wait(m, F8_O);
    k_rmsnorm_bwd(m->dres, wt ? gp(m, l, o->ln1) : gj, m->dln, m->xs[l], wp(m, l, o->ln1), a->rstd1, m->dres, N, C,
                  (float *)m->logits, l > 0 ? f8_amax_at(m, l - 1, F8_DOWN, F8_GRAD) : NULL, z.st);
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

cudaStream_t comm_stream(const CudaModel *m)
{
    return m->par.world > 1 ? (cudaStream_t)m->par.comm_stream : (cudaStream_t)m->stream;
}

/* Stream b waits for what stream a has enqueued so far. */
void stream_after(CudaModel *m, cudaStream_t b, cudaStream_t a)
{
    if (a == b) return;
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev_ready, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, (cudaEvent_t)m->ev_ready, 0));
}

/* [base, base+n) of the flat vector whose shards (elem bytes each, this rank's
 * from starts[rank]) are shard, whole into out on stream s. */
void zero_allgather(CudaModel *m, const void *shard, size_t elem, size_t base, size_t n, void *out,
                           cudaStream_t s)
{
    if (m->par.world > 1)
        cuda_coll_allgather_range(m->par.comm, shard, m->starts, base, n, elem, out, s);
    else if (shard)
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
            CUDA_CHECK(cudaMemcpyAsync(m->gacc + base, src, n * sizeof(float), cudaMemcpyDefault, cs));
    }
    if (m->par.world > 1) CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev_free[b], cs));
    PHASE(m, PH_GRAD_REDUCE);
}

void cuda_model_zero3_local(CudaModel *m, const float *w)
{
    m->local_w = w;
    gathers_forget(m);
}

/* The FP8 head's chunk buffer (m->logits, 4 ce_chunk V bytes): the bf16 logits [ce_chunk, V],
 * then the E5M2 dlogits [rn, V], then their transpose [V, rn]. */
static uint8_t *head_dl8(CudaModel *m)
{
    return (uint8_t *)m->logits + (size_t)2 * m->ce_chunk * m->cfg.vocab;
}

static uint8_t *head_dl8t(CudaModel *m)
{
    return (uint8_t *)m->logits + (size_t)3 * m->ce_chunk * m->cfg.vocab;
}

/* logits[rn, V] (bf16) = hf[r0 : r0 + rn] . W^T in FP8: the rows quantised with the
 * whole hf's maximum (the final norm's), into f8_a, and transposed into f8_dy for the
 * head's weight gradient (with_wgrad); both scratches are free between the layers'
 * passes. Fast accumulation, as the projections' forward GEMMs. */
static void head_fp8_fwd(CudaModel *m, int r0, int rn, int with_wgrad)
{
    size_t k = F8_HEAD_SLOT(m, F8_INPUT), C = m->cfg.hidden;
    k_fp8_quant(m->f8_a, with_wgrad ? m->f8_dy : NULL, m->f8_sinv + k, m->hf + (size_t)r0 * C, rn, (int)C,
                m->f8_amax + k, 0, m->stream);
    mm_fp8(m, rn, m->cfg.vocab, (int)C, m->f8_a, GEMM_E4M3, m->f8_sinv + k, m->f8_hw,
           m->f8_sinv + F8_HEAD_SLOT(m, F8_WEIGHT), m->logits, 0, NULL, 0.f, 1);
}

void cuda_model_micro(CudaModel *m, const int *ids, const int *pos, const int *targets,
                      float grad_scale, float *logits_out, uint32_t *argmax_out, int last_micro)
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
        m->f8_keep = train;
        if (m->f8_stale) fp8_weights(m);
        CUDA_CHECK(cudaMemsetAsync(m->f8_amax + F8_SLOT(m, 0, 0, F8_INPUT), 0,
                                   8 * (size_t)L * F8_SLOT_FLOATS * sizeof(float), st));
        if (m->f8_head)
            CUDA_CHECK(cudaMemsetAsync(m->f8_amax + F8_HEAD_SLOT(m, F8_INPUT), 0, sizeof(float), st));
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
    k_rmsnorm_fwd(m->hf, m->rstdf, m->xs[L], wp(m, L, m->off_norm), N, C, (float)c->rms_eps,
                  m->f8_head ? m->f8_amax + F8_HEAD_SLOT(m, F8_INPUT) : NULL, st);
    PHASE(m, PH_NORM);
    for (int r0 = 0; r0 < N; r0 += m->ce_chunk) {
        int rn = N - r0 < m->ce_chunk ? N - r0 : m->ce_chunk;
        if (m->f8_head) head_fp8_fwd(m, r0, rn, train && full);
        else mm(m, 0, 1, rn, V, C, m->hf + (size_t)r0 * C, C, wp(m, L, m->off_lm), C, m->logits, V, 0, NULL, 1.f, 0.f);
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
        /* forward only: the embedding backward's plan is free and holds the argmax */
        if (argmax_out && !train) k_argmax_rows(m->logits, rn, V, (uint32_t *)m->emb_plan + r0, st);
        float *g8 = m->f8_head && train ? m->f8_amax + F8_HEAD_SLOT(m, F8_GRAD) : NULL;
        if (g8) CUDA_CHECK(cudaMemsetAsync(g8, 0, sizeof(float), st));
        k_cross_entropy(m->logits, m->losses + r0, m->targets + r0, rn, V, grad_scale, g8, st);
        if (g8)   /* E5M2 dlogits [rn, V] (and [V, rn] for dW) behind the bf16 chunk */
            k_fp8_quant(head_dl8(m), full ? head_dl8t(m) : NULL, m->f8_sinv + F8_HEAD_SLOT(m, F8_GRAD), m->logits,
                        rn, V, g8, 1, st);
        PHASE(m, PH_CE);
        if (!train) continue;
        if (m->f8_head)   /* dhf[rn, C] = dlogits . W: against W's transposed E4M3 copy */
            mm_fp8(m, rn, C, V, head_dl8(m), GEMM_E5M2, m->f8_sinv + F8_HEAD_SLOT(m, F8_GRAD), m->f8_hwt,
                   m->f8_sinv + F8_HEAD_SLOT(m, F8_WEIGHT), m->dln + (size_t)r0 * C, 0, NULL, 0.f, 0);
        else
            mm(m, 0, 0, rn, C, V, m->logits, V, wp(m, L, m->off_lm), C, m->dln + (size_t)r0 * C, C, 0, NULL, 1.f,
               0.f);
        PHASE(m, PH_LM_DX);
        float beta = m->grad_fresh && r0 == 0 ? 0.f : 1.f;
        if (full && m->f8_head)   /* dW[V, C] = dlogits^T . hf, both transposed copies K = rn wide */
            mm_fp8(m, V, C, rn, head_dl8t(m), GEMM_E5M2, m->f8_sinv + F8_HEAD_SLOT(m, F8_GRAD), m->f8_dy,
                   m->f8_sinv + F8_HEAD_SLOT(m, F8_INPUT), gp(m, L, m->off_lm), 1, NULL, beta, 0);
        else if (full)   /* fine-tuning keeps the head (and the embedding) frozen */
            mm(m, 1, 0, V, C, rn, m->logits, V, m->hf + (size_t)r0 * C, C, gp(m, L, m->off_lm), C, 1, NULL, 1.f,
               beta);
        PHASE(m, PH_LM_DW);
    }
    k_sum_add(m->loss_acc, m->losses, N, st);
    if (argmax_out && !train)
        CUDA_CHECK(cudaMemcpyAsync(argmax_out, m->emb_plan, (size_t)N * sizeof *argmax_out, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaGetLastError());
    if (!train) return;
    k_rmsnorm_bwd(m->dres, full ? gp(m, L, m->off_norm) : m->junk, m->dln, m->xs[L], wp(m, L, m->off_norm), m->rstdf,
                  NULL, N, C, (float *)m->logits, f8_amax_at(m, L - 1, F8_DOWN, F8_GRAD), st);
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
    /* the side stream's gradients (and its reads of this micro-batch's activations) done */
    for (int p = 0; p < 4; p++) wgrad_wait(m, p);
    PHASE(m, PH_EMBED_BWD);
    m->grad_fresh = 0;
    if (zero2) {
        zero_bucket_reduce(m, L);
        m->acc_fresh = 0;
    }
    if (bucketed) reduce_bucket(m, m->off_embed, m->n_total - m->off_embed, L);
    CUDA_CHECK(cudaGetLastError());
}
