/* gemm_sm90_check.c — runtime/cuda/gemm_sm90.cu's products against cuBLASLt (gemm.c)
 * and against fp64, then their speeds side by side at the projections' shapes.
 *
 * Correctness, for the three layouts of a linear layer (row-major, x [T,in], W [out,in]):
 *   forward  y [T,out]  = x . W^T   (transA 0, transB 1: both operands K-major)
 *   dx       dx [T,in]  = dy . W    (transA 0, transB 0: B MN-major)
 *   dW       dW [out,in] = dy^T . x (transA 1, transB 0: both MN-major; fp32, beta 1)
 * and the fourth combination (transA 1, transB 1), at shapes that cut the 128 x 256 x 64
 * tiles at every edge and at the 3B model's shapes. Each product's D is checked at 512
 * sampled elements against an fp64 sum of the same bf16 operands: |D - ref| <= 2^-8 |ref|
 * (bf16 D's rounding: 8 significant bits, unit roundoff 2^-8) + K 2^-24 sum|a b| (fp32
 * accumulation of K terms, the worst case) + 2^-8 |beta C| (slack for C's term), or for
 * fp32 D 2^-22 |ref| and 2^-24 |beta C| in place of the 2^-8s; bf16 D with beta != 0 adds
 * 2^-8 |ref - beta C|: the TMA epilogue's reduction (like cuBLASLt) rounds the product to
 * bf16 before the add rounds the sum (without that term both measured up to 1.47 of the
 * bound on an H100, 2026-12-06). And the whole of ours against the whole of cuBLASLt's:
 * relative L2 within 2^-8 (both round the same fp32 sums, to within accumulation order).
 * cuBLASLt's own sampled error is printed beside ours, not checked.
 * Operands repeat a pool of P random values (P prime, so no row or tile sees the same
 * values at the same place): element i is pool[(i + offset) % P].
 *
 * The fused down-projection input gradient and SwiGLU backward (gemm_sm90_swiglu_bwd):
 * dgu [T, 2F] from dh = dy . W_down (never stored) and gu [T, 2F] (g within [-4, 4)), at
 * sampled elements against fp64: |dgu - ref| <= 2^-8 |ref| (bf16 rounding) + (K 2^-24
 * sum|a b| + 2^-16 |dh|) |f| where f is dgu's factor on dh (u s (1 + g (1 - s)) or g s):
 * the product's accumulation error as above, carried through f, plus __expf's and fp32's
 * few ulps (2^-16 is ~100 times theirs); and the whole of it against cuBLASLt's dh
 * rounded to bf16 then k_swiglu_bwd: relative L2 within 2^-7 (that path rounds dh once
 * more); each twice, the same bits.
 * The fused gate/up forward and SwiGLU (gemm_sm90_swiglu_fwd): gu [T, 2F] sampled against
 * fp64 and against cuBLASLt's product as above, and h [T, F] equal to the bit to what
 * k_swiglu_fwd makes of that gu (the epilogue computes h from the rounded g and u by the
 * same formula); each twice, the same bits.
 * --time: each model's 12 products (forward, dx, dW of qkv, o, gate/up, down at its
 * llmq1k micro batch) timed both ways, TFLOP/s (3 warm-up runs, then 10 timed).
 * --sustain S: the 12 back to back for S seconds each way, the first and the last
 * second's rate (at the power limit, as in a training step); cuBLASLt also with the
 * weight gradients accumulated into bf16.
 * Usage: gemm_sm90_check [--time] [--sustain S] [--models 0.5b,1.5b,3b,7b] (default 3b) [--clusters N]
 * (at most N clusters of two CTAs a launch; the report says how many ran).
 * Closes with "N passed, N failed". Needs an sm_90 GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "gemm.h"
#include "gemm_sm90.h"
#include "host_bf16.h"
#include "kernels.h"

#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "gemm_sm90_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

#define POOL 4000037            /* prime */
#define SAMPLES 512

static int n_pass, n_fail;
static uint16_t *pool;          /* bf16 values in [-1, 1) */
static uint64_t rng = 0x13198a2e03707344ull;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    if (ok) n_pass++; else n_fail++;
}

static float pool_at(size_t i, size_t off) { return bf2f(pool[(i + off) % POOL]); }

/* A device buffer of n bf16 values pool[(i + off) % POOL]. */
static void *pool_buffer(size_t n, size_t off)
{
    void *d;
    CK(cudaMalloc(&d, n * 2));
    size_t done = 0, start = off % POOL;
    while (done < n) {
        size_t take = POOL - start < n - done ? POOL - start : n - done;
        CK(cudaMemcpy((char *)d + done * 2, pool + start, take * 2, cudaMemcpyHostToDevice));
        done += take;
        start = 0;
    }
    return d;
}

typedef struct {
    const char *name;
    int M, N, K, transA, transB, d_f32;
    float beta;
} Case;

/* Operand values as the product reads them: A(r,k), B(k,c) (gemm.h's layouts). */
static double a_at(const Case *c, int r, int k)
{
    return c->transA ? pool_at((size_t)k * c->M + r, 11) : pool_at((size_t)r * c->K + k, 11);
}
static double b_at(const Case *c, int k, int col)
{
    return c->transB ? pool_at((size_t)col * c->K + k, 777) : pool_at((size_t)k * c->N + col, 777);
}

/* D's initial contents (C for beta != 0): bf16 pool values, widened for fp32 D. */
static void *d_buffer(const Case *c)
{
    size_t n = (size_t)c->M * c->N;
    void *bf = pool_buffer(n, 4242);
    if (!c->d_f32) return bf;
    float *h = malloc(n * sizeof *h);
    uint16_t *hb = malloc(n * 2);
    if (!h || !hb) { fprintf(stderr, "gemm_sm90_check: out of memory\n"); exit(1); }
    CK(cudaMemcpy(hb, bf, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) h[i] = bf2f(hb[i]);
    void *d;
    CK(cudaMalloc(&d, n * 4));
    CK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    CK(cudaFree(bf));
    free(h); free(hb);
    return d;
}

static GemmArgs args_of(const Case *c, const void *A, const void *B, void *D)
{
    GemmArgs a = {0};
    a.transA = c->transA; a.transB = c->transB;
    a.M = c->M; a.N = c->N; a.K = c->K;
    a.A = A; a.lda = c->transA ? c->M : c->K;
    a.B = B; a.ldb = c->transB ? c->K : c->N;
    a.D = D; a.ldd = c->N;
    a.d_f32 = c->d_f32;
    a.alpha = 1.f; a.beta = c->beta;
    a.batch = 1;
    return a;
}

static double d_value(const Case *c, const void *h, size_t i)
{
    return c->d_f32 ? ((const float *)h)[i] : bf2f(((const uint16_t *)h)[i]);
}

/* ||x - y|| / ||y|| over n elements of D's type. */
static double rel_l2(const Case *c, const void *x, const void *y, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double a = d_value(c, x, i), b = d_value(c, y, i);
        num += (a - b) * (a - b); den += b * b;
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}

/* Sampled elements of D against fp64; returns the worst |error| / bound. */
static double sample_error(const Case *c, const void *h)
{
    double worst = 0;
    for (int s = 0; s < SAMPLES; s++) {
        int r = s == 0 ? c->M - 1 : (int)(splitmix_unit(&rng) * c->M);
        int col = s == 0 ? c->N - 1 : (int)(splitmix_unit(&rng) * c->N);
        double ref = 0, mag = 0;
        for (int k = 0; k < c->K; k++) {
            double t = a_at(c, r, k) * b_at(c, k, col);
            ref += t; mag += fabs(t);
        }
        double c0 = c->beta != 0.f ? c->beta * (double)pool_at((size_t)r * c->N + col, 4242) : 0;
        ref += c0;
        double bound = (c->d_f32 ? 0x1p-22 : 0x1p-8) * fabs(ref) + c->K * 0x1p-24 * mag +
                       (c->d_f32 ? 0x1p-24 : 0x1p-8) * fabs(c0) +
                       (!c->d_f32 && c->beta != 0.f ? 0x1p-8 * fabs(ref - c0) : 0) + 1e-30;
        double e = fabs(d_value(c, h, (size_t)r * c->N + col) - ref) / bound;
        if (e > worst) worst = e;
    }
    return worst;
}

static void correctness(const Case *c, Gemm *g, cudaStream_t st)
{
    size_t na = (size_t)c->M * c->K, nb = (size_t)c->K * c->N, nd = (size_t)c->M * c->N;
    void *A = pool_buffer(na, 11), *B = pool_buffer(nb, 777);
    void *D1 = d_buffer(c), *D2 = d_buffer(c);
    GemmArgs a1 = args_of(c, A, B, D1), a2 = args_of(c, A, B, D2);
    char what[256];
    snprintf(what, sizeof what, "%s M=%d N=%d K=%d transA=%d transB=%d %s beta=%g", c->name, c->M, c->N, c->K,
             c->transA, c->transB, c->d_f32 ? "fp32" : "bf16", c->beta);
    if (!gemm_sm90_supported(&a2)) {
        check(0, what);
        printf("  not supported by gemm_sm90\n");
        goto out;
    }
    gemm_run(g, &a1);
    int rc = gemm_sm90_run(&a2, st);
    CK(cudaStreamSynchronize(st));
    if (rc) { check(0, what); printf("  gemm_sm90_run failed\n"); goto out; }
    size_t es = c->d_f32 ? 4 : 2;
    void *h1 = malloc(nd * es), *h2 = malloc(nd * es);
    if (!h1 || !h2) { fprintf(stderr, "gemm_sm90_check: out of memory\n"); exit(1); }
    CK(cudaMemcpy(h1, D1, nd * es, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2, D2, nd * es, cudaMemcpyDeviceToHost));
    double e_ours = sample_error(c, h2), e_lt = sample_error(c, h1), l2 = rel_l2(c, h2, h1, nd);
    int ok = e_ours <= 1 && l2 <= 0x1p-8;
    check(ok, what);
    if (!ok || getenv("GEMM_SM90_VERBOSE"))
        printf("  worst sampled error / bound: ours %.3g, cuBLASLt %.3g; ours against cuBLASLt rel L2 %.3g (bound %.3g)\n",
               e_ours, e_lt, l2, 0x1p-8);
    /* The same product into a fresh copy of C must give the same bits: no order
       of accumulation may depend on scheduling (the trainer's same-bits-twice rule). */
    void *D3 = d_buffer(c);
    GemmArgs a3 = args_of(c, A, B, D3);
    rc = gemm_sm90_run(&a3, st);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(h1, D3, nd * es, cudaMemcpyDeviceToHost));
    CK(cudaFree(D3));
    snprintf(what + strlen(what), sizeof what - strlen(what), ", same bits twice");
    check(rc == 0 && memcmp(h1, h2, nd * es) == 0, what);
    free(h1); free(h2);
out:
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D1)); CK(cudaFree(D2));
}

/* gu [T, 2F]: 4 x the pool's values (exact in bf16), so that g spans [-4, 4). */
static void *gu_buffer(int T, int F)
{
    size_t n = (size_t)T * 2 * F;
    uint16_t *h = malloc(n * 2);
    if (!h) { fprintf(stderr, "gemm_sm90_check: out of memory\n"); exit(1); }
    for (size_t i = 0; i < n; i++) h[i] = f2bf(4.f * pool_at(i, 999));
    void *d;
    CK(cudaMalloc(&d, n * 2));
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* The down projection's dx = dy [T, K] . W [K, F] (transA 0, transB 0) with SwiGLU's
 * backward: ours fused, cuBLASLt's dh then k_swiglu_bwd. D and gu [T, 2F]. */
static Case swiglu_case(int T, int F, int K)
{
    Case c = {"swiglu", T, F, K, 0, 0, 0, 0.f};
    return c;
}

static GemmArgs swiglu_args(int T, int F, int K, const void *A, const void *B, void *D)
{
    Case c = swiglu_case(T, F, K);
    GemmArgs a = args_of(&c, A, B, D);
    a.ldd = 2 * F;
    return a;
}

static void swiglu_reference(Gemm *g, int T, int F, int K, const void *A, const void *B, void *dh, const void *gu,
                             void *dgu, cudaStream_t st)
{
    GemmArgs a = swiglu_args(T, F, K, A, B, dh);
    a.ldd = F;
    gemm_run(g, &a);
    k_swiglu_bwd(dgu, dh, gu, T, F, NULL, (kstream_t)st);
}

static void correctness_swiglu(const char *name, int T, int F, int K, Gemm *g, cudaStream_t st)
{
    size_t nd = (size_t)T * 2 * F;
    void *A = pool_buffer((size_t)T * K, 11), *B = pool_buffer((size_t)K * F, 777), *gu = gu_buffer(T, F);
    void *D1, *D2, *D3, *dh;
    CK(cudaMalloc(&D1, nd * 2)); CK(cudaMalloc(&D2, nd * 2)); CK(cudaMalloc(&D3, nd * 2));
    CK(cudaMalloc(&dh, (size_t)T * F * 2));
    /* cuBLASLt writes dh, and ours D, through the TMA unit, whose stores
     * compute-sanitizer's initcheck does not see: without this, k_swiglu_bwd's reads of
     * dh and the copies of D are reported uninitialised */
    CK(cudaMemset(dh, 0, (size_t)T * F * 2));
    CK(cudaMemset(D1, 0, nd * 2)); CK(cudaMemset(D3, 0, nd * 2));
    char what[256];
    snprintf(what, sizeof what, "%s: down dx + SwiGLU backward fused, T=%d F=%d K=%d", name, T, F, K);
    GemmArgs a = swiglu_args(T, F, K, A, B, D1), a3 = swiglu_args(T, F, K, A, B, D3);
    int rc = gemm_sm90_swiglu_bwd(&a, gu, st);
    swiglu_reference(g, T, F, K, A, B, dh, gu, D2, st);
    int rc3 = gemm_sm90_swiglu_bwd(&a3, gu, st);
    CK(cudaStreamSynchronize(st));
    uint16_t *h1 = malloc(nd * 2), *h2 = malloc(nd * 2), *h3 = malloc(nd * 2), *hg = malloc(nd * 2);
    if (!h1 || !h2 || !h3 || !hg) { fprintf(stderr, "gemm_sm90_check: out of memory\n"); exit(1); }
    CK(cudaMemcpy(h1, D1, nd * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2, D2, nd * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h3, D3, nd * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hg, gu, nd * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    Case c = swiglu_case(T, F, K);
    for (int s = 0; rc == 0 && s < SAMPLES; s++) {
        int r = s == 0 ? T - 1 : (int)(splitmix_unit(&rng) * T), col = s == 0 ? F - 1 : (int)(splitmix_unit(&rng) * F);
        double dh_ref = 0, mag = 0;
        for (int k = 0; k < K; k++) {
            double t = a_at(&c, r, k) * b_at(&c, k, col);
            dh_ref += t; mag += fabs(t);
        }
        size_t i = (size_t)r * 2 * F + col;
        double gv = bf2f(hg[i]), uv = bf2f(hg[i + F]), sg = 1 / (1 + exp(-gv));
        double f[2] = {uv * sg * (1 + gv * (1 - sg)), gv * sg};
        for (int h = 0; h < 2; h++) {
            double ref = dh_ref * f[h];
            double bound = 0x1p-8 * fabs(ref) + (K * 0x1p-24 * mag + 0x1p-16 * fabs(dh_ref)) * fabs(f[h]) + 1e-30;
            double e = fabs(bf2f(h1[i + (size_t)h * F]) - ref) / bound;
            if (e > worst) worst = e;
        }
    }
    double l2 = rel_l2(&c, h1, h2, nd);
    int ok = rc == 0 && worst <= 1 && l2 <= 0x1p-7;
    check(ok, what);
    if (!ok || getenv("GEMM_SM90_VERBOSE"))
        printf("  %s; worst sampled error / bound %.3g; against cuBLASLt + k_swiglu_bwd rel L2 %.3g (bound %.3g)\n",
               rc ? "gemm_sm90_swiglu_bwd failed" : "ran", worst, l2, 0x1p-7);
    snprintf(what + strlen(what), sizeof what - strlen(what), ", same bits twice");
    check(rc3 == 0 && memcmp(h1, h3, nd * 2) == 0, what);
    free(h1); free(h2); free(h3); free(hg);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(gu)); CK(cudaFree(D1)); CK(cudaFree(D2)); CK(cudaFree(D3));
    CK(cudaFree(dh));
}

/* The gate/up projection's forward with SwiGLU (gemm_sm90_swiglu_fwd): gu = x [T, K] .
 * W^T (W [2F, K], transB 1; or W^T stored, [K, 2F], transB 0) and h [T, F]. */
static Case swiglu_fwd_case(int T, int F, int K, int transB)
{
    Case c = {"swiglu fwd", T, 2 * F, K, 0, transB, 0, 0.f};
    return c;
}

/* gu sampled against fp64 (sample_error's bound) and against cuBLASLt's product (rel L2
 * within 2^-8, as correctness()); h to the bit what k_swiglu_fwd makes of our gu; both
 * twice, the same bits. */
static void correctness_swiglu_fwd(const char *name, int T, int F, int K, int transB, Gemm *g, cudaStream_t st)
{
    Case c = swiglu_fwd_case(T, F, K, transB);
    size_t nd = (size_t)T * 2 * F, nh = (size_t)T * F;
    void *A = pool_buffer((size_t)T * K, 11), *B = pool_buffer((size_t)2 * F * K, 777);
    void *D1, *D2, *D3, *H1, *H2, *H3;
    CK(cudaMalloc(&D1, nd * 2)); CK(cudaMalloc(&D2, nd * 2)); CK(cudaMalloc(&D3, nd * 2));
    CK(cudaMalloc(&H1, nh * 2)); CK(cudaMalloc(&H2, nh * 2)); CK(cudaMalloc(&H3, nh * 2));
    /* every output is written by TMA stores, which initcheck does not see */
    CK(cudaMemset(D1, 0, nd * 2)); CK(cudaMemset(D2, 0, nd * 2)); CK(cudaMemset(D3, 0, nd * 2));
    CK(cudaMemset(H1, 0, nh * 2)); CK(cudaMemset(H3, 0, nh * 2));
    GemmArgs a1 = args_of(&c, A, B, D1), a2 = args_of(&c, A, B, D2), a3 = args_of(&c, A, B, D3);
    int rc = gemm_sm90_swiglu_fwd(&a1, H1, F, st);
    gemm_run(g, &a2);
    k_swiglu_fwd(H2, D1, T, F, NULL, (kstream_t)st);   /* the unfused kernel on our gu */
    int rc3 = gemm_sm90_swiglu_fwd(&a3, H3, F, st);
    CK(cudaStreamSynchronize(st));
    uint16_t *d1 = malloc(nd * 2), *d2 = malloc(nd * 2), *d3 = malloc(nd * 2);
    uint16_t *h1 = malloc(nh * 2), *h2 = malloc(nh * 2), *h3 = malloc(nh * 2);
    if (!d1 || !d2 || !d3 || !h1 || !h2 || !h3) { fprintf(stderr, "gemm_sm90_check: out of memory\n"); exit(1); }
    CK(cudaMemcpy(d1, D1, nd * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(d2, D2, nd * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(d3, D3, nd * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(h1, H1, nh * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2, H2, nh * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(h3, H3, nh * 2, cudaMemcpyDeviceToHost));
    double worst = rc == 0 ? sample_error(&c, d1) : 1e30, l2 = rel_l2(&c, d1, d2, nd);
    char what[256];
    snprintf(what, sizeof what, "%s: gate/up forward + SwiGLU fused, T=%d F=%d K=%d transB=%d: gu", name, T, F, K,
             transB);
    int ok = rc == 0 && worst <= 1 && l2 <= 0x1p-8;
    check(ok, what);
    if (!ok || getenv("GEMM_SM90_VERBOSE"))
        printf("  %s; worst sampled error / bound %.3g; against cuBLASLt rel L2 %.3g (bound %.3g)\n",
               rc ? "gemm_sm90_swiglu_fwd failed" : "ran", worst, l2, 0x1p-8);
    size_t bad = 0;
    for (size_t i = 0; i < nh; i++) bad += h1[i] != h2[i];
    snprintf(what + strlen(what) - 4, sizeof what - strlen(what) + 4, ": h equal to k_swiglu_fwd's on that gu");
    check(rc == 0 && bad == 0, what);
    if (bad) printf("  %zu of %zu elements differ\n", bad, nh);
    snprintf(what + strlen(what), sizeof what - strlen(what), "; gu and h the same bits twice");
    check(rc3 == 0 && !memcmp(d1, d3, nd * 2) && !memcmp(h1, h3, nh * 2), what);
    free(d1); free(d2); free(d3); free(h1); free(h2); free(h3);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D1)); CK(cudaFree(D2)); CK(cudaFree(D3));
    CK(cudaFree(H1)); CK(cudaFree(H2)); CK(cudaFree(H3));
}

/* ms per run of run(ctx), after 3 warm-up runs: 10 timed runs between events; -1 when
 * a run fails. */
static double time_runs(int (*run)(void *ctx), void *ctx, cudaStream_t st)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int i = 0; i < 13; i++) {
        if (i == 3) CK(cudaEventRecord(e0, st));
        if (run(ctx)) return -1;
    }
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
    return ms / 10;
}

typedef struct { Gemm *g; const GemmArgs *a; cudaStream_t st; const void *gu; void *dh; int T, F, K; } Run;

static int run_lt(void *ctx) { Run *r = ctx; gemm_run(r->g, r->a); return 0; }
static int run_ours(void *ctx) { Run *r = ctx; return gemm_sm90_run(r->a, r->st); }

static double time_one(Gemm *g, const GemmArgs *a, int ours, cudaStream_t st)
{
    Run r = {g, a, st, NULL, NULL, 0, 0, 0};
    return time_runs(ours ? run_ours : run_lt, &r, st);
}

typedef struct { const char *name; int T, hidden, qkv, ffn; } Model;

static const Model models[] = {
    {"0.5b", 32768, 896, 1152, 4864},
    {"1.5b", 32768, 1536, 2048, 8960},
    {"3b", 16384, 2048, 2560, 11008},
    {"7b", 8192, 3584, 4608, 18944},
};

static const char *const proj_names[4] = {"qkv", "o", "gate/up", "down"};

/* A model's 12 products: forward (+ residual for o and down), dx and dW (fp32, beta 1)
 * of each projection in proj_names' order. */
static void model_cases(const Model *m, Case cs[12])
{
    int in[4] = {m->hidden, m->hidden, m->hidden, m->ffn}, out[4] = {m->qkv, m->hidden, 2 * m->ffn, m->hidden};
    for (int p = 0; p < 4; p++) {
        Case c3[3] = {
            {"fwd", m->T, out[p], in[p], 0, 1, 0, (float)(p == 1 || p == 3)},
            {"dx", m->T, in[p], out[p], 0, 0, 0, 0.f},
            {"dW", out[p], in[p], m->T, 1, 0, 1, 1.f},
        };
        for (int k = 0; k < 3; k++) cs[3 * p + k] = c3[k];
    }
}

static int run_swiglu_reference(void *ctx)
{
    Run *r = ctx;
    swiglu_reference(r->g, r->T, r->F, r->K, r->a->A, r->a->B, r->dh, r->gu, r->a->D, r->st);
    return 0;
}
static int run_swiglu_ours(void *ctx) { Run *r = ctx; return gemm_sm90_swiglu_bwd(r->a, r->gu, r->st); }
static int run_swiglu_fwd_reference(void *ctx)
{
    Run *r = ctx;
    gemm_run(r->g, r->a);
    k_swiglu_fwd(r->dh, r->a->D, r->T, r->F, NULL, (kstream_t)r->st);
    return 0;
}
static int run_swiglu_fwd_ours(void *ctx) { Run *r = ctx; return gemm_sm90_swiglu_fwd(r->a, r->dh, r->F, r->st); }

/* The down projection's dx and SwiGLU's backward: cuBLASLt's product then k_swiglu_bwd,
 * against ours fused; ms a run (time_runs), each way. */
static void time_swiglu(const Model *m, Gemm *g, cudaStream_t st)
{
    int T = m->T, F = m->ffn, K = m->hidden;
    void *A = pool_buffer((size_t)T * K, 11), *B = pool_buffer((size_t)K * F, 777), *gu = gu_buffer(T, F);
    void *D, *dh;
    CK(cudaMalloc(&D, (size_t)T * 2 * F * 2));
    CK(cudaMalloc(&dh, (size_t)T * F * 2));
    GemmArgs a = swiglu_args(T, F, K, A, B, D);
    Run r = {g, &a, st, gu, dh, T, F, K};
    double ms_lt = time_runs(run_swiglu_reference, &r, st), ms_ours = time_runs(run_swiglu_ours, &r, st);
    if (ms_ours < 0) { printf("  gemm_sm90_swiglu_bwd failed\n"); exit(1); }
    printf("  down dx + SwiGLU backward: cuBLASLt + k_swiglu_bwd %.3f ms, ours fused %.3f ms (%+.1f%%)\n", ms_lt,
           ms_ours, 100.0 * (ms_lt / ms_ours - 1));
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(gu)); CK(cudaFree(D)); CK(cudaFree(dh));
    /* the forward: gu = x . W^T, then h (r.dh holds h) */
    Case c = swiglu_fwd_case(T, F, K, 1);
    A = pool_buffer((size_t)T * K, 11); B = pool_buffer((size_t)2 * F * K, 777);
    CK(cudaMalloc(&D, (size_t)T * 2 * F * 2));
    CK(cudaMalloc(&dh, (size_t)T * F * 2));
    GemmArgs af = args_of(&c, A, B, D);
    Run rf = {g, &af, st, NULL, dh, T, F, K};
    ms_lt = time_runs(run_swiglu_fwd_reference, &rf, st); ms_ours = time_runs(run_swiglu_fwd_ours, &rf, st);
    if (ms_ours < 0) { printf("  gemm_sm90_swiglu_fwd failed\n"); exit(1); }
    printf("  gate/up forward + SwiGLU: cuBLASLt + k_swiglu_fwd %.3f ms, ours fused %.3f ms (%+.1f%%)\n", ms_lt,
           ms_ours, 100.0 * (ms_lt / ms_ours - 1));
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D)); CK(cudaFree(dh));
}

static void time_model(const Model *m, Gemm *g, cudaStream_t st)
{
    Case cs[12];
    model_cases(m, cs);
    double t_lt = 0, t_ours = 0, flops_all = 0;
    printf("%s (T = %d): TFLOP/s, cuBLASLt / ours\n", m->name, m->T);
    for (int i = 0; i < 12; i++) {
        const Case *c = &cs[i];
        void *A = pool_buffer((size_t)c->M * c->K, 11), *B = pool_buffer((size_t)c->K * c->N, 777);
        void *D = d_buffer(c);
        GemmArgs a = args_of(c, A, B, D);
        double flops = 2.0 * c->M * c->N * c->K;
        double ms_lt = time_one(g, &a, 0, st), ms_ours = time_one(g, &a, 1, st);
        printf("  %-8s %-4s M=%-6d N=%-6d K=%-6d %7.1f / %7.1f  (%+.1f%%, %d clusters)\n", proj_names[i / 3], c->name,
               c->M, c->N, c->K, flops / ms_lt * 1e-9, ms_ours > 0 ? flops / ms_ours * 1e-9 : 0.0,
               ms_ours > 0 ? 100.0 * (ms_lt / ms_ours - 1) : 0.0, gemm_sm90_last_clusters());
        t_lt += ms_lt; t_ours += ms_ours; flops_all += flops;
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D));
    }
    printf("  all 12: cuBLASLt %.2f ms (%.1f TFLOP/s), ours %.2f ms (%.1f TFLOP/s)\n", t_lt, flops_all / t_lt * 1e-9,
           t_ours, flops_all / t_ours * 1e-9);
    time_swiglu(m, g, st);
}

/* The 12 products back to back, again and again, for `seconds` (the GPU reaches its
 * power limit within a second or two; time_one's 10 runs mostly do not): TFLOP/s over
 * the first and the last full second, cuBLASLt's, then cuBLASLt's with the weight
 * gradients accumulated into bf16 instead of fp32 (as llmq keeps them: does the fp32
 * read-modify-write cost at the limit?), then ours. */
static void sustain_model(const Model *m, Gemm *g, cudaStream_t st, int seconds)
{
    Case cs[12], cs16[12];
    void *bufs[36], *bufs16[12];
    GemmArgs args[12], args16[12];
    double flops = 0;
    model_cases(m, cs);
    for (int i = 0; i < 12; i++) {
        const Case *c = &cs[i];
        bufs[3 * i] = pool_buffer((size_t)c->M * c->K, 11);
        bufs[3 * i + 1] = pool_buffer((size_t)c->K * c->N, 777);
        bufs[3 * i + 2] = d_buffer(c);
        args[i] = args_of(c, bufs[3 * i], bufs[3 * i + 1], bufs[3 * i + 2]);
        cs16[i] = *c;
        cs16[i].d_f32 = 0;
        bufs16[i] = c->d_f32 ? d_buffer(&cs16[i]) : NULL;
        args16[i] = c->d_f32 ? args_of(&cs16[i], bufs[3 * i], bufs[3 * i + 1], bufs16[i]) : args[i];
        flops += 2.0 * c->M * c->N * c->K;
    }
    static const char *const way[3] = {"cuBLASLt", "cuBLASLt, dW into bf16", "ours"};
    for (int pass = 0; pass < 3; pass++) {
        int ours = pass == 2;
        const GemmArgs *run_args = pass == 1 ? args16 : args;
        double first = 0, last = 0, elapsed = 0;
        int rounds = 0;
        while (elapsed < seconds * 1e3) {
            /* one second's worth of rounds (estimated from the last), timed by events */
            int n = rounds ? (int)(1e3 / (last > 0 ? last : 1)) + 1 : 1;
            cudaEvent_t e0, e1;
            CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
            CK(cudaEventRecord(e0, st));
            for (int r = 0; r < n; r++)
                for (int i = 0; i < 12; i++)
                    if (ours) { if (gemm_sm90_run(&args[i], st)) { printf("  gemm_sm90_run failed\n"); exit(1); } }
                    else gemm_run(g, &run_args[i]);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
            elapsed += ms;
            last = ms / n;
            if (rounds == 1) first = last;
            rounds++;
        }
        printf("  sustained %d s, %s: first second %.1f TFLOP/s, last second %.1f TFLOP/s\n", seconds,
               way[pass], flops / first * 1e-9, flops / last * 1e-9);
    }
    for (int i = 0; i < 36; i++) CK(cudaFree(bufs[i]));
    for (int i = 0; i < 12; i++) if (bufs16[i]) CK(cudaFree(bufs16[i]));
}

static int usage(void)
{
    fprintf(stderr, "usage: gemm_sm90_check [--time] [--sustain SECONDS] [--models 0.5b,1.5b,3b,7b] [--clusters N]\n");
    return 2;
}

/* A whole positive number of at most 100000, or -1. */
static int count_arg(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v > 0 && v <= 100000 ? (int)v : -1;
}

int main(int argc, char **argv)
{
    int timing = 0, sustain = 0, picked[8], n_picked = 0;
    char list[64] = "3b";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--time")) {
            timing = 1;
        } else if (!strcmp(argv[i], "--models") && i + 1 < argc) {
            if (strlen(argv[++i]) >= sizeof list) return usage();
            strcpy(list, argv[i]);
        } else if (!strcmp(argv[i], "--sustain") && i + 1 < argc) {
            sustain = count_arg(argv[++i]);
            if (sustain < 0 || sustain > 600) {
                fprintf(stderr, "gemm_sm90_check: --sustain takes 1 to 600 seconds, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--clusters") && i + 1 < argc) {
            int v = count_arg(argv[++i]);
            if (v < 0) {
                fprintf(stderr, "gemm_sm90_check: --clusters takes a positive number, not '%s'\n", argv[i]);
                return 2;
            }
            gemm_sm90_limit_clusters(v);
        } else {
            return usage();
        }
    }
    /* the models, checked before any CUDA call */
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        size_t i = 0;
        while (i < sizeof models / sizeof *models && strcmp(tok, models[i].name)) i++;
        if (i == sizeof models / sizeof *models) {
            fprintf(stderr, "gemm_sm90_check: no model '%s' (0.5b, 1.5b, 3b, 7b)\n", tok);
            return 2;
        }
        if (n_picked == 8) return usage();
        picked[n_picked++] = (int)i;
    }
    pool = malloc(POOL * 2);
    if (!pool) return 1;
    for (size_t i = 0; i < POOL; i++) pool[i] = f2bf((float)(2 * splitmix_unit(&rng) - 1));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    Gemm *g = gemm_create(st, 64u << 20);
    if (!g) return 1;
    static const Case cases[] = {
        /* every layout, tiles cut at every edge (M, N, K not multiples of 128, 256, 64) */
        {"edge fwd", 200, 88, 72, 0, 1, 0, 0.f},
        {"edge dx", 200, 88, 72, 0, 0, 0, 0.f},
        {"edge dW", 200, 88, 72, 1, 0, 1, 1.f},
        {"edge tt", 200, 88, 72, 1, 1, 0, 0.f},
        {"edge fwd+C", 300, 520, 200, 0, 1, 0, 1.f},
        {"edge dx fp32", 300, 520, 200, 0, 0, 1, 0.f},
        {"edge dW", 520, 296, 1000, 1, 0, 1, 1.f},
        {"short K", 136, 264, 8, 0, 1, 0, 0.f},
        /* rows of D not 16-byte multiples: the plain-store epilogue */
        {"plain fwd+C", 200, 90, 72, 0, 1, 0, 1.f},
        {"plain fp32+C", 200, 90, 72, 0, 1, 1, 1.f},
        /* the 3B model's shapes at a micro batch of 4096 tokens */
        {"3b qkv fwd", 4096, 2560, 2048, 0, 1, 0, 0.f},
        {"3b o fwd+residual", 4096, 2048, 2048, 0, 1, 0, 1.f},
        {"3b down dx", 4096, 11008, 2048, 0, 0, 0, 0.f},
        {"3b gate/up dW", 22016, 2048, 4096, 1, 0, 1, 1.f},
        {"3b down dW", 2048, 11008, 4096, 1, 0, 1, 1.f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) correctness(&cases[i], g, st);
    correctness_swiglu("edge", 200, 136, 72, g, st);   /* tiles cut at every edge */
    correctness_swiglu("3b", 4096, 11008, 2048, g, st);
    correctness_swiglu_fwd("edge", 200, 136, 72, 1, g, st);   /* the last tile's features cut at 8 */
    correctness_swiglu_fwd("edge", 200, 136, 72, 0, g, st);
    correctness_swiglu_fwd("3b", 4096, 11008, 2048, 1, g, st);
    if (timing)
        for (int i = 0; i < n_picked; i++) time_model(&models[picked[i]], g, st);
    for (int i = 0; sustain && i < n_picked; i++) {
        printf("%s (T = %d), the 12 products in a loop:\n", models[picked[i]].name, models[picked[i]].T);
        sustain_model(&models[picked[i]], g, st, sustain);
    }
    gemm_destroy(g);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
