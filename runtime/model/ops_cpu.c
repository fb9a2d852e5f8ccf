/* ops_cpu.c — fp32 CPU kernels (see ops_cpu.h). */
#include "ops_cpu.h"
#include "cpus.h"
#include "log.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 64   /* bounds the per-call arrays of ops_parallel_for (on the stack) */

static int g_threads = 0;

void ops_set_threads(int n)
{
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    g_threads = n;
}

int ops_threads(void)
{
    if (g_threads == 0) {   /* default: the CPUs this process may run on (Slurm's --cpus-per-task) */
        ops_set_threads(cpus_available());
    }
    return g_threads;
}

typedef struct {
    void (*fn)(void *, int);
    void *ctx;
    int begin, end;
} Chunk;

static void *run_chunk(void *arg)
{
    Chunk *c = arg;
    for (int i = c->begin; i < c->end; i++) c->fn(c->ctx, i);
    return NULL;
}

/* Tasks [0, n) in nt contiguous chunks, one thread each. Threads are made
 * per call, not pooled: a call covers a whole layer's heads (milliseconds),
 * next to which starting a thread is noise. Tasks write disjoint outputs, so
 * the result does not depend on the number of threads. */
void ops_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx)
{
    int nt = ops_threads();
    if (nt > n) nt = n;
    if (nt <= 1) {
        for (int i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    Chunk chunks[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 0; t < nt; t++) {
        chunks[t] = (Chunk){fn, ctx, (int)((long)n * t / nt), (int)((long)n * (t + 1) / nt)};
        /* Thread 0's chunk runs on the calling thread; a failed spawn runs inline. */
        if (t > 0 && pthread_create(&tids[t], NULL, run_chunk, &chunks[t]) == 0) started[t] = 1;
    }
    run_chunk(&chunks[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else run_chunk(&chunks[t]);
    }
}

/* out[M, N] = a[M, K] w[N, K]^T (+ bias[N]): w in HF's [out_features,
 * in_features] layout, read transposed by the GEMM; a bias is copied into out
 * first and the GEMM adds onto it (beta 1). */
void op_linear(float *out, const float *a, const float *w, const float *bias, int M, int K, int N)
{
    if (bias) {
        for (int r = 0; r < M; r++) memcpy(out + (size_t)r * N, bias, (size_t)N * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, w, K,
                bias ? 1.0f : 0.0f, out, N);
}

/* out += alpha a w^T (LoRA: scale x A^T B^T onto the frozen layer's output) */
void op_linear_acc(float *out, const float *a, const float *w, int M, int K, int N, float alpha)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, alpha, a, K, w, K, 1.0f, out, N);
}

/* da[M, K] (=, or += with acc) dout[M, N] w[N, K] */
void op_linear_dx(float *da, const float *dout, const float *w, int M, int K, int N, int acc)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dout, N, w, K,
                acc ? 1.0f : 0.0f, da, K);
}

/* dw[N, K] += dout^T a: always accumulated, micro-batch after micro-batch */
void op_linear_dw(float *dw, const float *dout, const float *a, int M, int K, int N)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dout, N, a, K, 1.0f, dw, K);
}

void op_bias_dw(float *db, const float *dout, int M, int N)
{
    for (int r = 0; r < M; r++) {
        const float *d = dout + (size_t)r * N;
        for (int c = 0; c < N; c++) db[c] += d[c];
    }
}

/* HF's LlamaRMSNorm in fp32: x / sqrt(mean(x^2) + eps) * w per row of D;
 * rstd[M] (the 1/sqrt) is kept for the backward pass. */
void op_rmsnorm(float *out, float *rstd, const float *x, const float *w, int M, int D, float eps)
{
    for (int r = 0; r < M; r++) {
        const float *xr = x + (size_t)r * D;
        float *o = out + (size_t)r * D;
        float ss = 0.0f;
        for (int i = 0; i < D; i++) ss += xr[i] * xr[i];
        float s = 1.0f / sqrtf(ss / (float)D + eps);
        rstd[r] = s;
        for (int i = 0; i < D; i++) o[i] = xr[i] * s * w[i];
    }
}

void op_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *rstd,
                    const float *w, int M, int D, int acc)
{
    for (int r = 0; r < M; r++) {
        const float *xr = x + (size_t)r * D, *dr = dout + (size_t)r * D;
        float *dxr = dx + (size_t)r * D;
        float s = rstd[r];
        /* y = x*s*w; dx = s*(dy*w) - x * s^3 * mean(dy*w*x) */
        float dot = 0.0f;
        for (int i = 0; i < D; i++) dot += dr[i] * w[i] * xr[i];
        float c = dot * s * s * s / (float)D;
        for (int i = 0; i < D; i++) {
            float g = dr[i] * w[i] * s - xr[i] * c;
            dxr[i] = acc ? dxr[i] + g : g;
        }
        if (dw)
            for (int i = 0; i < D; i++) dw[i] += dr[i] * xr[i] * s;
    }
}

void op_rope(float *x, const uint32_t *pos, int M, int nheads, int head_dim, double theta, int inverse)
{
    /* HF's rotate_half layout: element i pairs with i + hd/2 (not interleaved
     * pairs), angle pos * theta^(-2i/hd); inverse (sin negated) is the
     * transpose of the rotation, which is its backward pass. head_dim is at
     * most 1024 (plan_limits.h), so half fits inv_freq. */
    int half = head_dim / 2;
    float inv_freq[512];
    for (int i = 0; i < half && i < 512; i++)
        inv_freq[i] = 1.0f / powf((float)theta, (float)(2 * i) / (float)head_dim);
    for (int r = 0; r < M; r++) {
        float p = (float)pos[r];
        for (int i = 0; i < half; i++) {
            float ang = p * inv_freq[i];
            float c = cosf(ang), s = sinf(ang);
            if (inverse) s = -s;
            for (int h = 0; h < nheads; h++) {
                float *v = x + (size_t)r * nheads * head_dim + (size_t)h * head_dim;
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

/* The Llama/Qwen MLP: down(silu(gate) * up). */
static float silu(float x) { return x / (1.0f + expf(-x)); }

void op_swiglu(float *act, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) act[i] = silu(gate[i]) * up[i];
}

void op_swiglu_bwd(float *dgate, float *dup, const float *dact, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* d silu(g)/dg = sig(g) (1 + g (1 - sig(g))) */
        float g = gate[i], sig = 1.0f / (1.0f + expf(-g));
        float sg = g * sig;
        dup[i] = dact[i] * sg;
        dgate[i] = dact[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
    }
}

/* ---- attention ---- */

typedef struct {
    float *out, *probs, *dq, *dk, *dv;
    const float *dout, *saved_probs, *q, *k, *v;
    const uint32_t *pos;
    int B, T, H, KV, hd;
} AttnArgs;

/* The first key token j attends to: its document's start, since pos counts
 * from each document's start (shard.h); packed documents never see each
 * other, and causality bounds the range at j. */
static int attn_lo(const uint32_t *pos, int j)
{
    long lo = (long)j - (long)pos[j];
    return lo < 0 ? 0 : (int)lo;
}

/* A worker's scratch, or exit: an allocation that fails in the middle of a
 * step has no caller to report to (ops_parallel_for's tasks return nothing),
 * and a half-computed step is worth nothing (docs/runtime.md, "Errors"). */
static void *scratch_or_exit(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        log_error("out of memory (%zu bytes of attention scratch)", bytes);
        exit(1);
    }
    return p;
}

/* Copy kv head kvh of row b of x [B*T, KV*hd] into xt [hd, T] (transposed), so the
 * dot products over d become loops over i that the compiler can vectorise while
 * each score still sums d in ascending order. */
static void transpose_head(float *restrict xt, const float *restrict x, int b, int kvh, const AttnArgs *a)
{
    int T = a->T, hd = a->hd, ks = a->KV * hd;
    for (int i = 0; i < T; i++) {
        const float *xi = x + ((size_t)b * T + i) * ks + (size_t)kvh * hd;
        for (int d = 0; d < hd; d++) xt[(size_t)d * T + i] = xi[d];
    }
}

/* One (row b, query head h): scores of query j against keys lo..j, scaled
 * by 1/sqrt(hd), a softmax with the maximum subtracted (no overflow), then
 * the weighted sum of values. The probabilities are kept in probs [B, H, T,
 * T] for the backward pass. Grouped-query: head h reads kv head h / (H/KV). */
static void attn_fwd_one(void *ctx, int idx)
{
    AttnArgs *a = ctx;
    int b = idx / a->H, h = idx % a->H, kvh = h / (a->H / a->KV), hd = a->hd, T = a->T;
    int qs = a->H * hd, ks = a->KV * hd;
    float scale = 1.0f / sqrtf((float)hd);
    const uint32_t *pos = a->pos + (size_t)b * T;
    float *P = a->probs + ((size_t)b * a->H + h) * T * T;
    float *kt = scratch_or_exit((size_t)T * hd * sizeof(float));
    transpose_head(kt, a->k, b, kvh, a);
    for (int j = 0; j < T; j++) {
        const float *qj = a->q + ((size_t)b * T + j) * qs + (size_t)h * hd;
        float *restrict pj = P + (size_t)j * T;
        int lo = attn_lo(pos, j);
        memset(pj, 0, (size_t)T * sizeof(float));
        for (int d = 0; d < hd; d++) {
            const float *restrict kd = kt + (size_t)d * T;
            float qd = qj[d];
            for (int i = lo; i <= j; i++) pj[i] += qd * kd[i];
        }
        float mx = -INFINITY;
        for (int i = lo; i <= j; i++) {
            pj[i] *= scale;
            if (pj[i] > mx) mx = pj[i];
        }
        float sum = 0.0f;
        for (int i = lo; i <= j; i++) { pj[i] = expf(pj[i] - mx); sum += pj[i]; }
        float inv = 1.0f / sum;
        float *restrict oj = a->out + ((size_t)b * T + j) * qs + (size_t)h * hd;
        memset(oj, 0, (size_t)hd * sizeof(float));
        for (int i = lo; i <= j; i++) {
            pj[i] *= inv;
            const float *restrict vi = a->v + ((size_t)b * T + i) * ks + (size_t)kvh * hd;
            float p = pj[i];
            for (int d = 0; d < hd; d++) oj[d] += p * vi[d];
        }
    }
    free(kt);
}

void op_attention(float *out, float *probs, const float *q, const float *k, const float *v,
                  const uint32_t *pos, int B, int T, int H, int KV, int hd)
{
    AttnArgs a = {.out = out, .probs = probs, .q = q, .k = k, .v = v, .pos = pos,
                  .B = B, .T = T, .H = H, .KV = KV, .hd = hd};
    ops_parallel_for(B * H, attn_fwd_one, &a);
}

/* One (row, kv head): the query heads of its group in order, so dk/dv sums are fixed-order. */
static void attn_bwd_one(void *ctx, int idx)
{
    AttnArgs *a = ctx;
    int b = idx / a->KV, kvh = idx % a->KV, hd = a->hd, T = a->T, group = a->H / a->KV;
    int qs = a->H * hd, ks = a->KV * hd;
    float scale = 1.0f / sqrtf((float)hd);
    const uint32_t *pos = a->pos + (size_t)b * T;
    float *dp = scratch_or_exit((size_t)T * sizeof(float)), *vt = scratch_or_exit((size_t)T * hd * sizeof(float));
    transpose_head(vt, a->v, b, kvh, a);
    for (int i = 0; i < T; i++) {
        memset(a->dk + ((size_t)b * T + i) * ks + (size_t)kvh * hd, 0, (size_t)hd * sizeof(float));
        memset(a->dv + ((size_t)b * T + i) * ks + (size_t)kvh * hd, 0, (size_t)hd * sizeof(float));
    }
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        const float *P = a->saved_probs + ((size_t)b * a->H + h) * T * T;
        for (int j = 0; j < T; j++) {
            const float *restrict pj = P + (size_t)j * T;
            const float *restrict doj = a->dout + ((size_t)b * T + j) * qs + (size_t)h * hd;
            const float *restrict qj = a->q + ((size_t)b * T + j) * qs + (size_t)h * hd;
            float *restrict dqj = a->dq + ((size_t)b * T + j) * qs + (size_t)h * hd;
            int lo = attn_lo(pos, j);
            /* dP[i] = dout_j . v_i (d ascending, vectorised over i) */
            for (int i = lo; i <= j; i++) dp[i] = 0.0f;
            for (int d = 0; d < hd; d++) {
                const float *restrict vd = vt + (size_t)d * T;
                float g = doj[d];
                for (int i = lo; i <= j; i++) dp[i] += g * vd[i];
            }
            /* softmax backward: dS = P (dP - sum(P dP)); dv += P^T dout */
            float dot = 0.0f;
            for (int i = lo; i <= j; i++) {
                float *restrict dvi = a->dv + ((size_t)b * T + i) * ks + (size_t)kvh * hd;
                float p = pj[i];
                for (int d = 0; d < hd; d++) dvi[d] += p * doj[d];
                dot += p * dp[i];
            }
            memset(dqj, 0, (size_t)hd * sizeof(float));
            for (int i = lo; i <= j; i++) {
                float ds = pj[i] * (dp[i] - dot) * scale;
                const float *restrict ki = a->k + ((size_t)b * T + i) * ks + (size_t)kvh * hd;
                float *restrict dki = a->dk + ((size_t)b * T + i) * ks + (size_t)kvh * hd;
                for (int d = 0; d < hd; d++) { dqj[d] += ds * ki[d]; dki[d] += ds * qj[d]; }
            }
        }
    }
    free(vt);
    free(dp);
}

void op_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                      const float *q, const float *k, const float *v, const uint32_t *pos,
                      int B, int T, int H, int KV, int hd)
{
    AttnArgs a = {.dq = dq, .dk = dk, .dv = dv, .dout = dout, .saved_probs = probs, .q = q, .k = k,
                  .v = v, .pos = pos, .B = B, .T = T, .H = H, .KV = KV, .hd = hd};
    ops_parallel_for(B * KV, attn_bwd_one, &a);
}
