/* fp8_check.c — the FP8 building blocks of precision = fp8 on a GPU (issue 31):
 * kernels_fp8.cu's maximum and quantisation, and gemm.c's FP8 products, on random
 * data at the projection shapes of the tiny and 0.5B models.
 *
 * 1. k_fp8_amax equals the host's max |x| exactly.
 * 2. k_fp8_quant: the scale is the power of two 2^e with amax * 2^e in
 *    (fmax/2, fmax]; every element is the representable value nearest to x * scale
 *    (E4M3: 448 max, E5M2: 57344; saturating), and the transposed copy holds the same
 *    bytes transposed (both kernels: 16-multiple shapes in 128 x 64 tiles, 8-multiple ones
 *    in 64 x 64; shapes that cut the tiles at the edges too).
 * 3. The FP8 GEMMs (forward E4M3 x E4M3, input gradient E5M2 x E4M3, weight gradient
 *    E5M2 x E4M3 into fp32 with beta = 1) against an fp64 product of the dequantised
 *    operands: relative L2 error below 1e-3 for exact accumulation (fp32
 *    accumulation over K <= 32768 terms: K * 2^-24 relative at worst, ~sqrt(K) * 2^-24
 *    typically) and below 2e-2 for the forward's fast accumulation (Hopper's FP8 fast
 *    mode accumulates with fewer mantissa bits between promotions), against bf16 D
 *    rounding (2^-9) on top.
 * 4. The same products against the unquantised fp64 product: relative L2 error within
 *    FP8's rounding: per element |error| <= 2^-4 (E4M3) or 2^-3 (E5M2) of the value,
 *    uniform, so RMS 2^-4/sqrt(3) = 3.6% and 7.2%; a product of two independently
 *    rounded operands has relative L2 error about the root sum of squares: 5.1%
 *    (E4M3 x E4M3) and 8.1% (E5M2 x E4M3). Bound checked: 1.5x those (7.7%, 12.2%).
 * 5. The maxima fused into the kernels that produce a GEMM's FP8 operand (RMSNorm
 *    forward and backward, SwiGLU forward and backward, the cross-entropy's gradient
 *    for the FP8 LM head) equal k_fp8_amax over what they stored, bit for bit, at the
 *    0.5B and 7B widths (RMSNorm's backward has a kernel per width class) and at a row
 *    count that leaves part of a block idle.
 * 6. RMSNorm's backward (which carries the fused maximum of 5) against fp64 at widths
 *    from 64 to 9216 (both kernels), with and without the residual gradient added:
 *    dx within bf16's rounding of the result (relative L2 <= 2^-9 plus fp32 sums of
 *    C terms: bound 2.5e-3), every dw (fp32, a sum over the rows of products rounded
 *    twice) within (rows + 2) * 2^-24 * sum |terms| of the fp64 sum, and a second
 *    launch giving the same bits.
 * 7. The softmax cross-entropy (k_cross_entropy) against fp64, at Qwen's, Llama 3's,
 *    a narrow and a wide vocabulary; masked rows, targets at the row's ends and dominant
 *    targets (p ~ 1). The loss within 2e-4: the fp32 sum S carries (terms a thread +
 *    rescales + reduction levels, <= 330) * 2^-24 ~ 2e-5 relative, and __expf
 *    (2 + 1.17 |x|) ulp (~1.1e-5 at |x| = 80), so log S is off by <= 4e-5, and
 *    logS + M - x_t rounds thrice at |values| <= 128 (<= 3 * 2^-17). Each gradient
 *    element g = (p - onehot) * scale within 2^-8 |g| (bf16's unit roundoff: 8
 *    significant bits) + 2^-22 |g| + 1e-4 p * scale (p's fp32 error: the same 4e-5 and
 *    the products' rounding; as p, not g, for the target, where p - 1 cancels) +
 *    2^-125 * scale (__expf flushes results below 2^-126 to 0) + 2^-133 (a bf16
 *    subnormal's spacing: tiny p * scale falls below the normal range). Masked rows:
 *    loss 0 and a row of zeros; with grad_scale 0 the logits untouched and the same
 *    losses; a second launch the same bits.
 * Usage: fp8_check [SECTION...], sections quant (1-2, at the GEMM shapes and the edge
 * tiles), gemm (3-4), fused (5), norm (6), loss (7); none named: all. The kernels' own
 * sections run in seconds, so compute-sanitizer can go over them without the
 * cuBLASLt products (device.sh's fp8-san step).
 * Closes with "N passed, N failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "gemm.h"
#include "kernels.h"
#include "host_bf16.h"

#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "fp8_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static int n_pass, n_fail;

static void check(int ok, const char *name, const char *fmt, double v, double tol)
{
    printf("%s %s: ", ok ? "PASS" : "FAIL", name);
    printf(fmt, v, tol);
    printf("\n");
    if (ok) n_pass++; else n_fail++;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static double urand(void) { return splitmix_unit(&rng); }
static double nrand(void) { return sqrt(-2.0 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

/* The value of an FP8 byte (OCP formats: E4M3 without infinities, 0x7f/0xff NaN;
 * E5M2 IEEE-like). */
static double fp8_value(uint8_t b, int e5m2)
{
    int s = b >> 7, mbits = e5m2 ? 2 : 3, ebits = e5m2 ? 5 : 4, bias = e5m2 ? 15 : 7;
    int e = (b >> mbits) & ((1 << ebits) - 1), m = b & ((1 << mbits) - 1);
    double v;
    if (e5m2 && e == 31) return NAN;
    if (!e5m2 && e == 15 && m == 7) return NAN;
    if (e == 0) v = ldexp((double)m, 1 - bias - mbits);
    else v = ldexp(1.0 + (double)m / (1 << mbits), e - bias);
    return s ? -v : v;
}

/* Is q the representable value nearest x (saturated to +-fmax)? Ties either way. */
static int nearest(uint8_t q, double x, int e5m2)
{
    double fmax = e5m2 ? 57344.0 : 448.0;
    if (x > fmax) x = fmax;
    if (x < -fmax) x = -fmax;
    double v = fp8_value(q, e5m2), d = fabs(v - x);
    if (isnan(v)) return 0;
    for (int b = 0; b < 256; b++) {
        double w = fp8_value((uint8_t)b, e5m2);
        if (!isnan(w) && fabs(w - x) < d * (1 - 1e-12)) return 0;
    }
    return 1;
}

static double rel_l2(const double *a, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num += (a[i] - ref[i]) * (a[i] - ref[i]); den += ref[i] * ref[i]; }
    return sqrt(num / (den > 0 ? den : 1e-300));
}

typedef struct {
    int rows, cols, e5m2;
    uint16_t *h;                /* bf16 host values */
    void *d;                    /* device bf16 */
    uint8_t *q, *qt;            /* device FP8 and transpose */
    uint8_t *hq, *hqt;          /* host copies */
    float *amax, *sinv;         /* device scalars */
    float h_amax, h_sinv;
} Tensor;

/* Random bf16 values of spread sd, quantised on the GPU; checks 1 and 2. */
static void make_tensor(Tensor *t, int rows, int cols, int e5m2, double sd, const char *name, cudaStream_t st)
{
    size_t n = (size_t)rows * cols;
    t->rows = rows; t->cols = cols; t->e5m2 = e5m2;
    t->h = malloc(n * 2); t->hq = malloc(n); t->hqt = malloc(n);
    double amax = 0;
    for (size_t i = 0; i < n; i++) {
        double v = sd * nrand();
        if (i % 9973 == 5) v *= 30;   /* outliers, as activations have */
        t->h[i] = f2bf((float)v);
        if (fabs(bf2f(t->h[i])) > amax) amax = fabs(bf2f(t->h[i]));
    }
    CK(cudaMalloc(&t->d, n * 2)); CK(cudaMalloc((void **)&t->q, n)); CK(cudaMalloc((void **)&t->qt, n));
    CK(cudaMalloc((void **)&t->amax, 4)); CK(cudaMalloc((void **)&t->sinv, 4));
    CK(cudaMemcpyAsync(t->d, t->h, n * 2, cudaMemcpyHostToDevice, st));
    CK(cudaMemsetAsync(t->amax, 0, 4, st));
    k_fp8_amax(t->amax, t->d, n, st);
    k_fp8_quant(t->q, t->qt, t->sinv, t->d, rows, cols, t->amax, e5m2, st);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(&t->h_amax, t->amax, 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(&t->h_sinv, t->sinv, 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(t->hq, t->q, n, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(t->hqt, t->qt, n, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    char label[160];
    snprintf(label, sizeof label, "%s amax %dx%d", name, rows, cols);
    check(t->h_amax == (float)amax, label, "|gpu - host| %.3g (want %g)", fabs(t->h_amax - amax), 0.0);
    double fmax = e5m2 ? 57344.0 : 448.0, scale = 1.0 / t->h_sinv, top = amax * scale;
    int pow2 = frexp(scale, &(int){0}) == 0.5;
    snprintf(label, sizeof label, "%s scale is 2^e with amax*scale in (fmax/2, fmax]", name);
    check(pow2 && top > fmax / 2 && top <= fmax, label, "amax*scale/fmax = %.4f (want (0.5, %g])", top / fmax, 1.0);
    size_t bad = 0, badt = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            if (!nearest(t->hq[i], (double)bf2f(t->h[i]) * scale, e5m2)) bad++;
            if (t->hqt[(size_t)c * rows + r] != t->hq[i]) badt++;
        }
    snprintf(label, sizeof label, "%s every element nearest to x*scale", name);
    check(bad == 0, label, "%.0f elements not (want %g)", (double)bad, 0.0);
    snprintf(label, sizeof label, "%s transposed copy", name);
    check(badt == 0, label, "%.0f elements differ (want %g)", (double)badt, 0.0);
}

static double deq(const Tensor *t, size_t i) { return fp8_value(t->hq[i], t->e5m2) * t->h_sinv; }

/* D[M,N] = A[M,K] . B[N,K]^T with A, B FP8 tensors ([M,K] and [N,K] row-major). */
static void gemm_case(Gemm *g, const char *name, const Tensor *A, const Tensor *B, int fast, int d_f32, int acc,
                      double tol_exact, double tol_fp8, cudaStream_t st)
{
    int M = A->rows, K = A->cols, N = B->rows;
    size_t nd = (size_t)M * N;
    void *D;
    CK(cudaMalloc(&D, nd * 4));
    float *init = NULL;
    uint16_t *init16 = NULL;
    if (acc) {   /* accumulate onto known values (beta = 1), as the weight gradient and the residual do */
        init = malloc(nd * 4);
        init16 = malloc(nd * 2);
        for (size_t i = 0; i < nd; i++) {
            init16[i] = f2bf((float)(0.01 * nrand()));
            init[i] = bf2f(init16[i]);
        }
        CK(cudaMemcpyAsync(D, d_f32 ? (void *)init : (void *)init16, nd * (d_f32 ? 4 : 2), cudaMemcpyHostToDevice, st));
    }
    GemmArgs a = {.transB = 1, .M = M, .N = N, .K = K, .A = A->q, .lda = K, .B = B->q, .ldb = K, .D = D, .ldd = N,
                  .d_f32 = d_f32, .alpha = 1.f, .beta = acc ? 1.f : 0.f, .batch = 1,
                  .a_type = A->e5m2 ? GEMM_E5M2 : GEMM_E4M3, .b_type = B->e5m2 ? GEMM_E5M2 : GEMM_E4M3,
                  .a_scale = A->sinv, .b_scale = B->sinv, .fast_accum = fast};
    gemm_run(g, &a);
    CK(cudaGetLastError());
    void *hd = malloc(nd * 4);
    CK(cudaMemcpyAsync(hd, D, nd * (d_f32 ? 4 : 2), cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    double *got = malloc(nd * 8), *ref_q = malloc(nd * 8), *ref = malloc(nd * 8);
    double *da = malloc((size_t)K * 8), *ua = malloc((size_t)K * 8);
    for (int i = 0; i < M; i++) {
        for (int k = 0; k < K; k++) {
            da[k] = deq(A, (size_t)i * K + k);
            ua[k] = bf2f(A->h[(size_t)i * K + k]);
        }
        for (int j = 0; j < N; j++) {
            double sq = 0, su = 0;
            for (int k = 0; k < K; k++) {
                sq += da[k] * deq(B, (size_t)j * K + k);
                su += ua[k] * bf2f(B->h[(size_t)j * K + k]);
            }
            size_t o = (size_t)i * N + j;
            double base = acc ? init[o] : 0.0;
            ref_q[o] = sq + base;
            ref[o] = su + base;
            got[o] = d_f32 ? ((float *)hd)[o] : bf2f(((uint16_t *)hd)[o]);
        }
    }
    if (acc)   /* the error is the product's: measure it without the accumulated base */
        for (size_t o = 0; o < nd; o++) { got[o] -= init[o]; ref_q[o] -= init[o]; ref[o] -= init[o]; }
    char label[200];
    snprintf(label, sizeof label, "%s %dx%dx%d vs fp64 of the FP8 operands", name, M, N, K);
    double e = rel_l2(got, ref_q, nd);
    check(e <= tol_exact, label, "rel L2 %.3e (tolerance %.0e)", e, tol_exact);
    snprintf(label, sizeof label, "%s %dx%dx%d vs fp64 of the bf16 operands", name, M, N, K);
    e = rel_l2(got, ref, nd);
    check(e <= tol_fp8, label, "rel L2 %.3e (tolerance %.3f)", e, tol_fp8);
    free(got); free(ref_q); free(ref); free(da); free(ua); free(hd); free(init); free(init16);
    CK(cudaFree(D));
}

static void free_tensor(Tensor *t)
{
    free(t->h); free(t->hq); free(t->hqt);
    cudaFree(t->d); cudaFree(t->q); cudaFree(t->qt); cudaFree(t->amax); cudaFree(t->sinv);
}

/* n random bf16 values on the device (sd, with outliers as activations have). */
static uint16_t *dev_random(size_t n, double sd, cudaStream_t st)
{
    uint16_t *h = malloc(n * 2), *d = NULL;
    for (size_t i = 0; i < n; i++) h[i] = f2bf((float)(sd * nrand() * (i % 4099 == 7 ? 40 : 1)));
    CK(cudaMalloc((void **)&d, n * 2));
    CK(cudaMemcpyAsync(d, h, n * 2, cudaMemcpyHostToDevice, st));
    CK(cudaStreamSynchronize(st));
    free(h);
    return d;
}

/* Check 5 for one kernel: the fused maximum *fused against k_fp8_amax over out (n). */
static void fused_amax_case(const char *name, int rows, int cols, const float *fused, const uint16_t *out, size_t n,
                            cudaStream_t st)
{
    float *ref, h[2];
    CK(cudaMalloc((void **)&ref, 4));
    CK(cudaMemsetAsync(ref, 0, 4, st));
    k_fp8_amax(ref, out, n, st);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(&h[0], fused, 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(&h[1], ref, 4, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    CK(cudaFree(ref));
    char label[160];
    snprintf(label, sizeof label, "%s maximum fused %dx%d (%g) equals k_fp8_amax's", name, rows, cols, h[1]);
    check(h[0] == h[1] && h[1] > 0, label, "|fused - pass| %.3g (want %g)", fabs((double)h[0] - h[1]), 0.0);
}

static void fused_amax_checks(cudaStream_t st)
{
    static const int widths[][2] = {{896, 4864}, {3584, 18944}};   /* hidden, ffn: 0.5B, 7B */
    enum { rows = 300 };                                              /* 8 rows a block: the last half idle */
    float *amax, *rstd, *dw, *scratch;
    CK(cudaMalloc((void **)&amax, 4 * sizeof(float)));
    CK(cudaMalloc((void **)&rstd, rows * sizeof(float)));
    for (int s = 0; s < 2; s++) {
        int C = widths[s][0], F = widths[s][1];
        uint16_t *x = dev_random((size_t)rows * C, 1.0, st), *w = dev_random(C, 0.3, st);
        uint16_t *dy = dev_random((size_t)rows * C, 1e-3, st), *dres = dev_random((size_t)rows * C, 1e-3, st);
        uint16_t *gu = dev_random((size_t)rows * 2 * F, 1.0, st), *dh = dev_random((size_t)rows * F, 1e-3, st);
        uint16_t *out, *h, *dgu;
        CK(cudaMalloc((void **)&out, (size_t)rows * C * 2));
        CK(cudaMalloc((void **)&h, (size_t)rows * F * 2));
        CK(cudaMalloc((void **)&dgu, (size_t)rows * 2 * F * 2));
        CK(cudaMalloc((void **)&dw, C * sizeof(float)));
        CK(cudaMalloc((void **)&scratch, k_colsum_scratch(C, C) * sizeof(float)));
        CK(cudaMemsetAsync(amax, 0, 4 * sizeof(float), st));
        CK(cudaMemsetAsync(dw, 0, C * sizeof(float), st));
        k_rmsnorm_fwd(out, rstd, x, w, rows, C, 1e-6f, amax, st);
        fused_amax_case("RMSNorm forward", rows, C, amax, out, (size_t)rows * C, st);
        k_rmsnorm_bwd(out, dw, dy, x, w, rstd, dres, rows, C, scratch, amax + 1, st);
        fused_amax_case("RMSNorm backward", rows, C, amax + 1, out, (size_t)rows * C, st);
        k_swiglu_fwd(h, gu, rows, F, amax + 2, st);
        fused_amax_case("SwiGLU forward", rows, F, amax + 2, h, (size_t)rows * F, st);
        k_swiglu_bwd(dgu, dh, gu, rows, F, amax + 3, st);
        fused_amax_case("SwiGLU backward", rows, 2 * F, amax + 3, dgu, (size_t)rows * 2 * F, st);
        CK(cudaFree(x)); CK(cudaFree(w)); CK(cudaFree(dy)); CK(cudaFree(dres)); CK(cudaFree(gu)); CK(cudaFree(dh));
        CK(cudaFree(out)); CK(cudaFree(h)); CK(cudaFree(dgu)); CK(cudaFree(dw)); CK(cudaFree(scratch));
    }
    /* the cross-entropy's gradient (the FP8 LM head's E5M2 operand), Qwen2.5's vocabulary,
     * one row in 7 masked (target -1: a row of zeros) */
    const int V = 151936;
    int *tg, htg[rows];
    float *loss;
    for (int r = 0; r < rows; r++) htg[r] = r % 7 == 3 ? -1 : (int)(urand() * V) % V;
    uint16_t *logits = dev_random((size_t)rows * V, 2.0, st);
    CK(cudaMalloc((void **)&tg, sizeof htg));
    CK(cudaMalloc((void **)&loss, rows * sizeof(float)));
    CK(cudaMemcpyAsync(tg, htg, sizeof htg, cudaMemcpyHostToDevice, st));
    CK(cudaMemsetAsync(amax, 0, sizeof(float), st));
    k_cross_entropy(logits, loss, tg, rows, V, 1.f / 4096, amax, st);
    fused_amax_case("cross-entropy gradient", rows, V, amax, logits, (size_t)rows * V, st);
    CK(cudaFree(logits)); CK(cudaFree(tg)); CK(cudaFree(loss));
    CK(cudaFree(amax)); CK(cudaFree(rstd));
}

/* Check 6 at one width: x, w, dy, dres random; rstd from k_rmsnorm_fwd (the backward's
 * own input), the reference in fp64 from the same bf16 inputs and rstd. */
static void rmsnorm_bwd_case(int rows, int C, int with_dres, cudaStream_t st)
{
    size_t n = (size_t)rows * C;
    uint16_t *hx = malloc(n * 2), *hdy = malloc(n * 2), *hres = malloc(n * 2), *hw = malloc((size_t)C * 2);
    uint16_t *hdx = malloc(n * 2), *hdx2 = malloc(n * 2);
    float *hr = malloc((size_t)rows * 4), *hdw = malloc((size_t)C * 4), *hdw2 = malloc((size_t)C * 4);
    for (size_t i = 0; i < n; i++) {
        hx[i] = f2bf((float)nrand());
        hdy[i] = f2bf((float)(1e-3 * nrand()));
        hres[i] = f2bf((float)(1e-3 * nrand()));
    }
    for (int c = 0; c < C; c++) hw[c] = f2bf((float)(1.0 + 0.3 * nrand()));
    uint16_t *x, *dy, *dres, *w, *out, *dx;
    float *rstd, *dw, *scratch, *amax;
    CK(cudaMalloc((void **)&x, n * 2)); CK(cudaMalloc((void **)&dy, n * 2)); CK(cudaMalloc((void **)&dres, n * 2));
    CK(cudaMalloc((void **)&out, n * 2)); CK(cudaMalloc((void **)&dx, n * 2)); CK(cudaMalloc((void **)&w, (size_t)C * 2));
    CK(cudaMalloc((void **)&rstd, (size_t)rows * 4)); CK(cudaMalloc((void **)&dw, (size_t)C * 4));
    CK(cudaMalloc((void **)&scratch, k_colsum_scratch(C, C) * sizeof(float))); CK(cudaMalloc((void **)&amax, 8));
    CK(cudaMemcpyAsync(x, hx, n * 2, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dy, hdy, n * 2, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dres, hres, n * 2, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(w, hw, (size_t)C * 2, cudaMemcpyHostToDevice, st));
    k_rmsnorm_fwd(out, rstd, x, w, rows, C, 1e-6f, NULL, st);
    for (int pass = 0; pass < 2; pass++) {
        CK(cudaMemsetAsync(dw, 0, (size_t)C * 4, st));
        CK(cudaMemsetAsync(amax, 0, 8, st));
        k_rmsnorm_bwd(dx, dw, dy, x, w, rstd, with_dres ? dres : NULL, rows, C, scratch, amax, st);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(pass ? hdx2 : hdx, dx, n * 2, cudaMemcpyDeviceToHost, st));
        CK(cudaMemcpyAsync(pass ? hdw2 : hdw, dw, (size_t)C * 4, cudaMemcpyDeviceToHost, st));
    }
    CK(cudaMemcpyAsync(hr, rstd, (size_t)rows * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    double *got = malloc(n * 8), *ref = malloc(n * 8), *rw = calloc((size_t)C, 8), *aw = calloc((size_t)C, 8);
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * C;
        double rr = hr[r], dot = 0;
        for (int c = 0; c < C; c++) dot += (double)bf2f(hdy[o + c]) * bf2f(hw[c]) * bf2f(hx[o + c]) * rr;
        dot /= C;
        for (int c = 0; c < C; c++) {
            double xh = bf2f(hx[o + c]) * rr, g = bf2f(hdy[o + c]);
            ref[o + c] = (with_dres ? bf2f(hres[o + c]) : 0.0) + rr * (g * bf2f(hw[c]) - xh * dot);
            got[o + c] = bf2f(hdx[o + c]);
            rw[c] += g * xh;
            aw[c] += fabs(g * xh);
        }
    }
    double worst = 0;   /* the largest error as a share of its bound */
    for (int c = 0; c < C; c++) {
        double bound = (rows + 2) * ldexp(1.0, -24) * aw[c];
        double share = fabs(hdw[c] - rw[c]) / (bound > 0 ? bound : 1e-300);
        if (!(share <= worst)) worst = share;
    }
    char label[160];
    snprintf(label, sizeof label, "RMSNorm backward %dx%d%s: dx vs fp64", rows, C, with_dres ? " + residual" : "");
    double e = rel_l2(got, ref, n);
    check(e <= 2.5e-3, label, "rel L2 %.3e (tolerance %.1e)", e, 2.5e-3);
    snprintf(label, sizeof label, "RMSNorm backward %dx%d%s: dw vs fp64", rows, C, with_dres ? " + residual" : "");
    check(worst <= 1.0, label, "worst error %.3f of its bound (want <= %g)", worst, 1.0);
    snprintf(label, sizeof label, "RMSNorm backward %dx%d%s: the same bits twice", rows, C, with_dres ? " + residual" : "");
    int same = !memcmp(hdx, hdx2, n * 2) && !memcmp(hdw, hdw2, (size_t)C * 4);
    check(same, label, "%.0f (want %g)", (double)!same, 0.0);
    free(hx); free(hdy); free(hres); free(hw); free(hdx); free(hdx2); free(hr); free(hdw); free(hdw2);
    free(got); free(ref); free(rw); free(aw);
    CK(cudaFree(x)); CK(cudaFree(dy)); CK(cudaFree(dres)); CK(cudaFree(out)); CK(cudaFree(dx)); CK(cudaFree(w));
    CK(cudaFree(rstd)); CK(cudaFree(dw)); CK(cudaFree(scratch)); CK(cudaFree(amax));
}

/* Check 7 on hx [rows, V] with targets ht (device copies x0, tg): the losses and
 * gradients against the fp64 reference, then the repeat and eval launches. */
static void loss_check(int rows, int V, const uint16_t *hx, const int *ht, const uint16_t *x0, const int *tg,
                       cudaStream_t st)
{
    const float scale = 1.f / 4096;
    size_t n = (size_t)rows * V;
    uint16_t *x, *hg = malloc(n * 2), *hg2 = malloc(n * 2), *he = malloc(n * 2);
    float *loss, *hl = malloc((size_t)rows * 4), *hl2 = malloc((size_t)rows * 4), *hle = malloc((size_t)rows * 4);
    CK(cudaMalloc((void **)&x, n * 2));
    CK(cudaMalloc((void **)&loss, (size_t)rows * 4));
    for (int pass = 0; pass < 3; pass++) {   /* gradient, gradient again, eval (grad_scale 0) */
        CK(cudaMemcpyAsync(x, x0, n * 2, cudaMemcpyDeviceToDevice, st));
        k_cross_entropy(x, loss, tg, rows, V, pass < 2 ? scale : 0.f, NULL, st);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(pass == 0 ? hg : pass == 1 ? hg2 : he, x, n * 2, cudaMemcpyDeviceToHost, st));
        CK(cudaMemcpyAsync(pass == 0 ? hl : pass == 1 ? hl2 : hle, loss, (size_t)rows * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
    }
    double worst_l = 0, worst_g = 0;   /* error / tolerance, worst */
    int masked_ok = 1;
    for (int r = 0; r < rows; r++) {
        const uint16_t *xr = hx + (size_t)r * V, *gr = hg + (size_t)r * V;
        if (ht[r] < 0) {
            masked_ok &= hl[r] == 0.f;
            for (int j = 0; j < V; j++) masked_ok &= gr[j] == 0;
            continue;
        }
        double M = -INFINITY, S = 0;
        for (int j = 0; j < V; j++) M = fmax(M, bf2f(xr[j]));
        for (int j = 0; j < V; j++) S += exp(bf2f(xr[j]) - M);
        double ref = log(S) + M - bf2f(xr[ht[r]]);
        worst_l = fmax(worst_l, fabs(hl[r] - ref) / 2e-4);
        for (int j = 0; j < V; j++) {
            double p = exp(bf2f(xr[j]) - M) / S, gref = (p - (j == ht[r])) * scale;
            double tol = (0x1p-8 + 0x1p-22) * fabs(gref) + 1e-4 * p * scale + 0x1p-125 * scale + 0x1p-133;
            worst_g = fmax(worst_g, fabs(bf2f(gr[j]) - gref) / tol);
        }
    }
    char label[160];
    snprintf(label, sizeof label, "cross-entropy %dx%d: loss against fp64", rows, V);
    check(worst_l <= 1, label, "worst |error| / tolerance %.3g (want <= %g)", worst_l, 1.0);
    snprintf(label, sizeof label, "cross-entropy %dx%d: gradient against fp64", rows, V);
    check(worst_g <= 1, label, "worst |error| / tolerance %.3g (want <= %g)", worst_g, 1.0);
    snprintf(label, sizeof label, "cross-entropy %dx%d: masked rows zero", rows, V);
    check(masked_ok, label, "rows wrong %g (want %g)", (double)!masked_ok, 0.0);
    int same = !memcmp(hg, hg2, n * 2) && !memcmp(hl, hl2, (size_t)rows * 4);
    int eval = !memcmp(he, hx, n * 2) && !memcmp(hle, hl, (size_t)rows * 4);
    snprintf(label, sizeof label, "cross-entropy %dx%d: a second launch the same bits", rows, V);
    check(same, label, "differs %g (want %g)", (double)!same, 0.0);
    snprintf(label, sizeof label, "cross-entropy %dx%d: grad_scale 0 leaves the logits, same losses", rows, V);
    check(eval, label, "differs %g (want %g)", (double)!eval, 0.0);
    CK(cudaFree(x)); CK(cudaFree(loss));
    free(hg); free(hg2); free(he); free(hl); free(hl2); free(hle);
}

/* Check 7 at one vocabulary width. */
static void loss_case(int rows, int V, cudaStream_t st)
{
    size_t n = (size_t)rows * V;
    uint16_t *hx = malloc(n * 2), *x0;
    int *ht = malloc((size_t)rows * sizeof *ht), *tg;
    for (int r = 0; r < rows; r++) {
        int kind = r % 7;   /* 3: masked; 1 and 2: the row's last and first column; 4: dominant */
        ht[r] = kind == 3 ? -1 : kind == 1 ? V - 1 : kind == 2 ? 0 : (int)(urand() * V) % V;
        for (int j = 0; j < V; j++)   /* sd 2, with outliers as logits have */
            hx[(size_t)r * V + j] = f2bf((float)(2.0 * nrand() * (j % 4099 == 7 ? 10 : 1)));
        if (kind == 4) hx[(size_t)r * V + ht[r]] = f2bf(60.f);
    }
    CK(cudaMalloc((void **)&x0, n * 2));
    CK(cudaMalloc((void **)&tg, (size_t)rows * sizeof *tg));
    CK(cudaMemcpyAsync(x0, hx, n * 2, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(tg, ht, (size_t)rows * sizeof *tg, cudaMemcpyHostToDevice, st));
    loss_check(rows, V, hx, ht, x0, tg, st);
    CK(cudaFree(x0)); CK(cudaFree(tg));
    free(hx); free(ht);
}

static const char *const sections[] = {"quant", "gemm", "fused", "norm", "loss"};
#define N_SECTIONS 5
static int wanted[N_SECTIONS];

/* Marks the sections named on the command line (all when none is); 0 on a bad name. */
static int parse_sections(int argc, char **argv)
{
    for (int i = 0; i < N_SECTIONS; i++) wanted[i] = argc < 2;
    for (int a = 1; a < argc; a++) {
        int i = 0;
        while (i < N_SECTIONS && strcmp(argv[a], sections[i])) i++;
        if (i == N_SECTIONS) {
            fprintf(stderr, "fp8_check: unknown section '%s' (want quant, gemm, fused, norm or loss)\n", argv[a]);
            return 0;
        }
        wanted[i] = 1;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (!parse_sections(argc, argv)) return 2;
    int quant = wanted[0], gemm = wanted[1], fused = wanted[2], norm = wanted[3], loss = wanted[4];
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    Gemm *g = gemm_create(st, 32u << 20);
    if (!g) return 1;
    /* tokens x in, out x in: the check model's QKV (128 -> 256) and o (128 -> 128), a 0.5B-like down
     * projection (896 <- 1216, trimmed in K to keep the fp64 reference quick) */
    static const int shapes[][3] = {{256, 128, 256}, {512, 128, 128}, {512, 1216, 896}};
    const double E4 = 1.5 * 0.0510, E5 = 1.5 * 0.0808;
    for (int s = 0; s < 3 && (quant || gemm); s++) {
        int Ntok = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        Tensor X, W, dY, Wt, dYt, Xt;
        make_tensor(&X, Ntok, in, 0, 1.0, "input E4M3", st);
        make_tensor(&W, out, in, 0, 0.02, "weight E4M3", st);
        make_tensor(&dY, Ntok, out, 1, 1e-4, "gradient E5M2", st);
        if (!gemm) {
            free_tensor(&X); free_tensor(&W); free_tensor(&dY);
            continue;
        }
        gemm_case(g, "forward (fast accumulation)", &X, &W, 1, 0, 0, 2e-2, E4, st);
        /* the residual added in place (bf16 D = C, beta 1): the product is ~10x the
         * base here, so D's bf16 rounding of the sum stays within the same bounds */
        gemm_case(g, "forward + residual in place", &X, &W, 1, 0, 1, 2e-2, E4, st);
        /* the input gradient: dY [Ntok,out] against W's transpose [in,out] */
        Wt = W;
        Wt.rows = in; Wt.cols = out; Wt.q = W.qt; Wt.hq = W.hqt;
        {   /* host bf16 values of W^T for the unquantised reference */
            uint16_t *ht = malloc((size_t)in * out * 2);
            for (int r = 0; r < out; r++)
                for (int c = 0; c < in; c++) ht[(size_t)c * out + r] = W.h[(size_t)r * in + c];
            Wt.h = ht;
        }
        gemm_case(g, "input gradient", &dY, &Wt, 0, 0, 0, 1e-3 + 4e-3, E5, st);   /* + bf16 D rounding */
        /* the weight gradient: dY^T [out,Ntok] against X^T [in,Ntok], fp32 D, beta 1 */
        dYt = dY; dYt.rows = out; dYt.cols = Ntok; dYt.q = dY.qt; dYt.hq = dY.hqt;
        Xt = X; Xt.rows = in; Xt.cols = Ntok; Xt.q = X.qt; Xt.hq = X.hqt;
        uint16_t *hdt = malloc((size_t)out * Ntok * 2), *hxt = malloc((size_t)in * Ntok * 2);
        for (int r = 0; r < Ntok; r++) {
            for (int c = 0; c < out; c++) hdt[(size_t)c * Ntok + r] = dY.h[(size_t)r * out + c];
            for (int c = 0; c < in; c++) hxt[(size_t)c * Ntok + r] = X.h[(size_t)r * in + c];
        }
        dYt.h = hdt; Xt.h = hxt;
        gemm_case(g, "weight gradient (fp32, beta 1)", &dYt, &Xt, 0, 1, 1, 1e-3, E5, st);
        free(Wt.h); free(hdt); free(hxt);
        free_tensor(&X); free_tensor(&W); free_tensor(&dY);
    }
    /* the quantiser's tiles cut by the edges: the 16-multiple kernel (128 x 64 tiles)
     * and the 8-multiple one (64 x 64) */
    static const int edge[][3] = {{272, 336, 0}, {272, 336, 1}, {200, 88, 0}, {200, 88, 1}};
    for (int i = 0; i < 4 && quant; i++) {
        Tensor t;
        make_tensor(&t, edge[i][0], edge[i][1], edge[i][2], 1.0, edge[i][2] ? "edge tiles E5M2" : "edge tiles E4M3", st);
        free_tensor(&t);
    }
    if (fused) fused_amax_checks(st);
    static const int norm_widths[] = {64, 896, 2048, 3584, 8192, 9216};   /* 9216: the wide kernel */
    for (int i = 0; i < 6 && norm; i++) rmsnorm_bwd_case(300, norm_widths[i], i != 1, st);
    if (norm) rmsnorm_bwd_case(2100, 3584, 1, st);   /* more rows than blocks: each block takes several */
    static const int vocab[][2] = {{33, 151936}, {9, 128256}, {20, 200}, {5, 262144}};   /* rows, V */
    for (int i = 0; i < 4 && loss; i++) loss_case(vocab[i][0], vocab[i][1], st);
    gemm_destroy(g);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
