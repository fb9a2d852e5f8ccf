/* attn_check.c — cuDNN attention (runtime/cuda/attn_cudnn.c) against our flash
 * kernels (flash_attn.cu) and an fp64 reference, on a GPU.
 *
 *   build/attn_check            correctness; closes with "N passed, N failed"
 *   build/attn_check --time     ms per forward / backward, flash vs cuDNN, at the
 *                               Qwen2.5-1.5B and 0.5B shapes
 *
 * Shapes: B=2, H=12, KV=2, T in {128, 2048}, D in {64, 128}, rows of one sequence
 * and rows packed with documents (pos resets). cuDNN takes only the first kind:
 * for documents the check is that it declines (attn_cudnn_supported,
 * attn_cudnn_plain_rows), and the flash kernels are checked alone.
 *
 * Tolerances, from bf16 rounding (unit roundoff u = 2^-8): inputs are bf16 values,
 * exact in the fp64 reference. Each kernel rounds P (forward) and P, dS (backward)
 * to bf16 before a matmul, and its outputs to bf16; every rounding is a relative
 * error <= u per term, and over a sum of many terms of mixed sign the errors add in
 * quadrature like the terms, so each rounding stage adds at most ~u to the relative
 * RMS error. The backward has three stages (O, hence Dsum = rowsum(dO*O); P and
 * dS; the output), so: relative RMS error <= 4u against the reference, and the
 * largest elementwise error <= 16u of the largest reference element (tails of a
 * few thousand elements). Between two kernels, each that far from the truth, twice
 * those bounds. Statistics (fp32 log-sum-exp, cuDNN natural log, flash log2) agree
 * to 1e-3 absolute: both are sums of fp32 exponentials of the same fp32 scores. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "flash_attn.h"
#include "attn_cudnn.h"

static int n_pass, n_fail;

/* One result line; detail (may be "") says the numbers. */
static void check(int ok, const char *name, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, detail[0] ? ": " : "", detail);
    if (ok) n_pass++; else n_fail++;
}

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        fprintf(stderr, "attn_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
        exit(1); } } while (0)

static float bf2f(bf16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static bf16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);   /* round to nearest even */
    return (bf16_t)(u >> 16);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2.0 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static void fill(bf16_t *x, size_t n, double sd) { for (size_t i = 0; i < n; i++) x[i] = f2bf((float)(sd * nrand())); }

/* pos of B rows of T: one sequence each, or documents of random lengths. */
static void make_pos(int *pos, int B, int T, int docs)
{
    for (int b = 0; b < B; b++) {
        int p = 0, left = docs ? 1 + (int)(urand() * T / 3) : T + 1;
        for (int t = 0; t < T; t++) {
            if (left-- == 0) { p = 0; left = 1 + (int)(urand() * T / 3) - 1; }
            pos[b * T + t] = p++;
        }
    }
}

/* fp64 reference forward and backward, with the document mask (t - pos <= i <= t). */
typedef struct { double *o, *lse, *dq, *dk, *dv; } Ref;

static void reference(Ref *r, const bf16_t *Q, const bf16_t *K, const bf16_t *V, const bf16_t *dO, const int *pos,
                      int B, int H, int KV, int T, int D)
{
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    r->o = calloc(nq, 8); r->lse = calloc((size_t)B * H * T, 8);
    r->dq = calloc(nq, 8); r->dk = calloc(nk, 8); r->dv = calloc(nk, 8);
    double *p = malloc((size_t)T * 8), *dp = malloc((size_t)T * 8), scale = 1.0 / sqrt((double)D);
    int G = H / KV;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const bf16_t *q = Q + ((size_t)(b * H + h) * T) * D;
            const bf16_t *k = K + ((size_t)(b * KV + h / G) * T) * D, *v = V + ((size_t)(b * KV + h / G) * T) * D;
            double *dk = r->dk + ((size_t)(b * KV + h / G) * T) * D, *dv = r->dv + ((size_t)(b * KV + h / G) * T) * D;
            for (int t = 0; t < T; t++) {
                int lo = t - pos[b * T + t];
                if (lo < 0) lo = 0;
                double mx = -INFINITY, z = 0;
                for (int i = lo; i <= t; i++) {
                    double s = 0;
                    for (int d = 0; d < D; d++) s += (double)bf2f(q[t * D + d]) * bf2f(k[i * D + d]);
                    p[i] = s * scale;
                    if (p[i] > mx) mx = p[i];
                }
                for (int i = lo; i <= t; i++) { p[i] = exp(p[i] - mx); z += p[i]; }
                r->lse[(size_t)(b * H + h) * T + t] = mx + log(z);
                /* O [B,T,H,D] */
                double *o = r->o + (((size_t)b * T + t) * H + h) * D;
                const bf16_t *go = dO + (((size_t)b * T + t) * H + h) * D;
                for (int i = lo; i <= t; i++) p[i] /= z;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int i = lo; i <= t; i++) acc += p[i] * bf2f(v[i * D + d]);
                    o[d] = acc;
                }
                double dsum = 0;
                for (int d = 0; d < D; d++) dsum += (double)bf2f(go[d]) * o[d];
                for (int i = lo; i <= t; i++) {
                    double s = 0;
                    for (int d = 0; d < D; d++) s += (double)bf2f(go[d]) * bf2f(v[i * D + d]);
                    dp[i] = p[i] * (s - dsum) * scale;   /* dS */
                }
                double *dq = r->dq + ((size_t)(b * H + h) * T + t) * D;
                for (int i = lo; i <= t; i++)
                    for (int d = 0; d < D; d++) {
                        dq[d] += dp[i] * bf2f(k[i * D + d]);
                        dk[i * D + d] += dp[i] * bf2f(q[t * D + d]);
                        dv[i * D + d] += p[i] * bf2f(go[d]);
                    }
            }
        }
    free(p); free(dp);
}

static void ref_free(Ref *r) { free(r->o); free(r->lse); free(r->dq); free(r->dk); free(r->dv); }

/* Relative RMS and largest error of x against y (relative to y's largest element). */
typedef struct { double rms, max; } Err;
static Err err_bf(const bf16_t *x, const double *y, size_t n)
{
    double se = 0, sy = 0, me = 0, my = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(bf2f(x[i]) - y[i]);
        se += e * e; sy += y[i] * y[i];
        if (e > me) me = e;
        if (fabs(y[i]) > my) my = fabs(y[i]);
    }
    Err r = {sqrt(se / (sy > 0 ? sy : 1)), me / (my > 0 ? my : 1)};
    return r;
}

static double *widen(const bf16_t *x, size_t n)
{
    double *y = malloc(n * 8);
    for (size_t i = 0; i < n; i++) y[i] = bf2f(x[i]);
    return y;
}

#define U (1.0 / 256)

static void check_err(const char *what, const char *tensor, Err e, double k)
{
    char name[320], detail[96];
    snprintf(name, sizeof name, "%s %s", what, tensor);
    snprintf(detail, sizeof detail, "rel rms %.2e (limit %.2e), max %.2e (limit %.2e)", e.rms, 4 * U * k, e.max,
             16 * U * k);
    check(e.rms <= 4 * U * k && e.max <= 16 * U * k, name, detail);
}

/* Device buffers of one problem. */
typedef struct {
    bf16_t *q, *k, *v, *o, *dO, *dq, *dk, *dv;
    float *lse, *scratch;
    int *pos;
    void *ws;
} Dev;

static void *dmalloc(size_t n) { void *p = NULL; CK(cudaMalloc(&p, n ? n : 16)); return p; }

static void dev_alloc(Dev *d, int B, int H, int KV, int T, int D, size_t ws)
{
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    d->q = dmalloc(nq * 2); d->k = dmalloc(nk * 2); d->v = dmalloc(nk * 2); d->o = dmalloc(nq * 2);
    d->dO = dmalloc(nq * 2); d->dq = dmalloc(nq * 2); d->dk = dmalloc(nk * 2); d->dv = dmalloc(nk * 2);
    d->lse = dmalloc((size_t)B * H * T * 4);
    d->scratch = dmalloc(k_flash_bwd_scratch_floats(B, H, T, D) * 4);
    d->pos = dmalloc((size_t)B * T * 4);
    d->ws = dmalloc(ws);
}

static void dev_free(Dev *d)
{
    void *p[] = {d->q, d->k, d->v, d->o, d->dO, d->dq, d->dk, d->dv, d->lse, d->scratch, d->pos, d->ws};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
}

/* Host copies of one implementation's results. */
typedef struct { bf16_t *o, *dq, *dk, *dv; float *lse; } Out;

static void out_get(Out *r, const Dev *d, int B, int H, int KV, int T, int D)
{
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    r->o = malloc(nq * 2); r->dq = malloc(nq * 2); r->dk = malloc(nk * 2); r->dv = malloc(nk * 2);
    r->lse = malloc((size_t)B * H * T * 4);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(r->o, d->o, nq * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r->dq, d->dq, nq * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r->dk, d->dk, nk * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r->dv, d->dv, nk * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r->lse, d->lse, (size_t)B * H * T * 4, cudaMemcpyDeviceToHost));
}

static void out_free(Out *r) { free(r->o); free(r->dq); free(r->dk); free(r->dv); free(r->lse); }

static void check_vs_ref(const char *what, const Out *x, const Ref *r, int B, int H, int KV, int T, int D,
                         double lse_to_ln)
{
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D, nr = (size_t)B * H * T;
    check_err(what, "O", err_bf(x->o, r->o, nq), 1);
    check_err(what, "dQ", err_bf(x->dq, r->dq, nq), 1);
    check_err(what, "dK", err_bf(x->dk, r->dk, nk), 1);
    check_err(what, "dV", err_bf(x->dv, r->dv, nk), 1);
    double me = 0;
    for (size_t i = 0; i < nr; i++) me = fmax(me, fabs(x->lse[i] * lse_to_ln - r->lse[i]));
    char name[320], detail[64];
    snprintf(name, sizeof name, "%s stats", what);
    snprintf(detail, sizeof detail, "max abs error %.2e (limit 1e-3)", me);
    check(me <= 1e-3, name, detail);
}

static void check_vs_out(const char *what, const Out *x, const Out *y, int B, int H, int KV, int T, int D,
                         double y_lse_to_ln)
{
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D, nr = (size_t)B * H * T;
    bf16_t *xs[4] = {x->o, x->dq, x->dk, x->dv}, *ys[4] = {y->o, y->dq, y->dk, y->dv};
    size_t ns[4] = {nq, nq, nk, nk};
    const char *names[4] = {"O", "dQ", "dK", "dV"};
    for (int i = 0; i < 4; i++) {
        double *w = widen(ys[i], ns[i]);
        check_err(what, names[i], err_bf(xs[i], w, ns[i]), 2);
        free(w);
    }
    double me = 0;
    for (size_t i = 0; i < nr; i++) me = fmax(me, fabs(x->lse[i] - y->lse[i] * y_lse_to_ln));
    char name[320], detail[64];
    snprintf(name, sizeof name, "%s stats", what);
    snprintf(detail, sizeof detail, "max abs difference %.2e (limit 1e-3)", me);
    check(me <= 1e-3, name, detail);
}

static const double LN2 = 0.6931471805599453;

static void run_flash(Dev *d, int B, int H, int KV, int T, int D)
{
    k_flash_fwd(d->o, d->lse, d->q, d->k, d->v, d->pos, B, H, KV, T, D, 0);
    k_flash_bwd(d->dq, d->dk, d->dv, d->q, d->k, d->v, d->o, d->dO, d->lse, d->pos, d->scratch, B, H, KV, T, D, 0);
}

static void run_cudnn(AttnCudnn *a, Dev *d, int B, int H, int KV, int T, int D)
{
    attn_cudnn_fwd(a, d->o, d->lse, d->q, d->k, d->v, B, H, KV, T, D, d->ws, 0);
    attn_cudnn_bwd(a, d->dq, d->dk, d->dv, d->q, d->k, d->v, d->o, d->dO, d->lse, B, H, KV, T, D, d->ws, 0);
}

static void one_case(AttnCudnn *a, int B, int H, int KV, int T, int D, int docs)
{
    char what[96];
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    bf16_t *Q = malloc(nq * 2), *K = malloc(nk * 2), *V = malloc(nk * 2), *dO = malloc(nq * 2);
    int *pos = malloc((size_t)B * T * sizeof(int));
    fill(Q, nq, 1.0); fill(K, nk, 1.0); fill(V, nk, 1.0); fill(dO, nq, 1.0);
    make_pos(pos, B, T, docs);
    char err[512] = "";
    int use_cudnn = a && attn_cudnn_supported(H, KV, T, D, docs);
    size_t ws = use_cudnn ? attn_cudnn_prepare(a, B, H, KV, T, D, err, sizeof err) : 0;
    snprintf(what, sizeof what, "B%d H%d KV%d T%d D%d %s", B, H, KV, T, D, docs ? "documents" : "one sequence");
    if (docs) {
        char name[256];
        snprintf(name, sizeof name, "%s: cuDNN declines documents", what);
        check(!attn_cudnn_supported(H, KV, T, D, 1) && !attn_cudnn_plain_rows(pos, B, T), name, "");
    } else if (a) {
        char name[256];
        snprintf(name, sizeof name, "%s: cuDNN plan", what);
        check(ws > 0 && attn_cudnn_plain_rows(pos, B, T), name, ws ? "" : err);
        if (!ws) use_cudnn = 0;
    }
    Dev d;
    dev_alloc(&d, B, H, KV, T, D, ws);
    CK(cudaMemcpy(d.q, Q, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.k, K, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.v, V, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dO, dO, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.pos, pos, (size_t)B * T * 4, cudaMemcpyHostToDevice));
    Out fl, cu;
    run_flash(&d, B, H, KV, T, D);
    out_get(&fl, &d, B, H, KV, T, D);
    if (use_cudnn) {
        run_cudnn(a, &d, B, H, KV, T, D);
        out_get(&cu, &d, B, H, KV, T, D);
    }
    char name[256];
    if (T <= 128) {
        Ref r;
        reference(&r, Q, K, V, dO, pos, B, H, KV, T, D);
        snprintf(name, sizeof name, "%s flash vs fp64", what);
        check_vs_ref(name, &fl, &r, B, H, KV, T, D, LN2);
        if (use_cudnn) {
            snprintf(name, sizeof name, "%s cuDNN vs fp64", what);
            check_vs_ref(name, &cu, &r, B, H, KV, T, D, 1.0);
        }
        ref_free(&r);
    }
    if (use_cudnn) {
        snprintf(name, sizeof name, "%s cuDNN vs flash", what);
        check_vs_out(name, &cu, &fl, B, H, KV, T, D, LN2);
        if (attn_cudnn_deterministic(a, B, H, KV, T, D)) {
            /* the deterministic backward gives the same bits again */
            run_cudnn(a, &d, B, H, KV, T, D);
            Out again;
            out_get(&again, &d, B, H, KV, T, D);
            int same = !memcmp(again.dq, cu.dq, nq * 2) && !memcmp(again.dk, cu.dk, nk * 2) &&
                       !memcmp(again.dv, cu.dv, nk * 2);
            snprintf(name, sizeof name, "%s cuDNN backward deterministic", what);
            check(same, name, "");
            out_free(&again);
        }
        out_free(&cu);
    }
    out_free(&fl);
    dev_free(&d);
    free(Q); free(K); free(V); free(dO); free(pos);
}

/* ---- timing ---- */

static float time_ms(void (*fn)(void *), void *arg, int iters)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) fn(arg);
    CK(cudaEventRecord(e0, 0));
    for (int i = 0; i < iters; i++) fn(arg);
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    return ms / iters;
}

typedef struct { AttnCudnn *a; Dev *d; int B, H, KV, T, D; } TimeArg;

static void t_flash_fwd(void *p)
{
    TimeArg *t = p;
    k_flash_fwd(t->d->o, t->d->lse, t->d->q, t->d->k, t->d->v, t->d->pos, t->B, t->H, t->KV, t->T, t->D, 0);
}
static void t_flash_bwd(void *p)
{
    TimeArg *t = p;
    Dev *d = t->d;
    k_flash_bwd(d->dq, d->dk, d->dv, d->q, d->k, d->v, d->o, d->dO, d->lse, d->pos, d->scratch,
                t->B, t->H, t->KV, t->T, t->D, 0);
}
static void t_cudnn_fwd(void *p)
{
    TimeArg *t = p;
    attn_cudnn_fwd(t->a, t->d->o, t->d->lse, t->d->q, t->d->k, t->d->v, t->B, t->H, t->KV, t->T, t->D, t->d->ws, 0);
}
static void t_cudnn_bwd(void *p)
{
    TimeArg *t = p;
    Dev *d = t->d;
    attn_cudnn_bwd(t->a, d->dq, d->dk, d->dv, d->q, d->k, d->v, d->o, d->dO, d->lse, t->B, t->H, t->KV, t->T, t->D,
                   d->ws, 0);
}

static void time_shape(const char *label, int B, int H, int KV, int T, int D)
{
    char err[512] = "";
    AttnCudnn *det = NULL, *nondet = NULL;
    size_t ws_det = 0, ws_nd = 0;
    if (attn_cudnn_built()) {
        setenv("LLMC_CUDNN_DETERMINISTIC", "1", 1);
        det = attn_cudnn_create(err, sizeof err);
        ws_det = det ? attn_cudnn_prepare(det, B, H, KV, T, D, err, sizeof err) : 0;
        if (!ws_det) printf("%s: cuDNN (deterministic): %s\n", label, err);
        setenv("LLMC_CUDNN_DETERMINISTIC", "0", 1);
        nondet = attn_cudnn_create(err, sizeof err);
        ws_nd = nondet ? attn_cudnn_prepare(nondet, B, H, KV, T, D, err, sizeof err) : 0;
        if (!ws_nd) printf("%s: cuDNN (accumulating): %s\n", label, err);
        unsetenv("LLMC_CUDNN_DETERMINISTIC");
    }
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    Dev d;
    dev_alloc(&d, B, H, KV, T, D, ws_det > ws_nd ? ws_det : ws_nd);
    bf16_t *h = malloc(nq * 2);
    int *pos = malloc((size_t)B * T * 4);
    fill(h, nq, 1.0);
    CK(cudaMemcpy(d.q, h, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dO, h, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.k, h, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.v, h + nk, nk * 2, cudaMemcpyHostToDevice));
    make_pos(pos, B, T, 0);
    CK(cudaMemcpy(d.pos, pos, (size_t)B * T * 4, cudaMemcpyHostToDevice));
    TimeArg t = {NULL, &d, B, H, KV, T, D};
    int it = 20;
    float ff = time_ms(t_flash_fwd, &t, it), fb = time_ms(t_flash_bwd, &t, it);
    printf("%s (B=%d H=%d KV=%d T=%d D=%d): flash fwd %.3f ms bwd %.3f ms\n", label, B, H, KV, T, D, ff, fb);
    double flops = 4.0 * B * H * (double)T * T * D / 2;   /* causal: half the square */
    if (ws_det) {
        t.a = det;
        float cf = time_ms(t_cudnn_fwd, &t, it), cb = time_ms(t_cudnn_bwd, &t, it);
        printf("%s: cuDNN fwd %.3f ms bwd %.3f ms (deterministic)  [fwd %.0f TFLOP/s, bwd %.0f]\n", label, cf, cb,
               flops / cf / 1e9, 2.5 * flops / cb / 1e9);
    }
    if (ws_nd) {
        t.a = nondet;
        float cf = time_ms(t_cudnn_fwd, &t, it), cb = time_ms(t_cudnn_bwd, &t, it);
        printf("%s: cuDNN fwd %.3f ms bwd %.3f ms (dQ accumulated with atomics)\n", label, cf, cb);
    }
    printf("%s: flash [fwd %.0f TFLOP/s, bwd %.0f]\n", label, flops / ff / 1e9, 2.5 * flops / fb / 1e9);
    attn_cudnn_destroy(det);
    attn_cudnn_destroy(nondet);
    dev_free(&d);
    free(h); free(pos);
}

int main(int argc, char **argv)
{
    int timing = argc > 1 && !strcmp(argv[1], "--time");
    if (argc > 1 && !timing) { fprintf(stderr, "usage: attn_check [--time]\n"); return 2; }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) { fprintf(stderr, "attn_check: no GPU\n"); return 1; }
    if (timing) {
        time_shape("qwen2.5-1.5b", 4, 12, 2, 2048, 128);
        time_shape("qwen2.5-0.5b", 8, 14, 2, 2048, 64);
        return 0;
    }
    char err[512] = "";
    AttnCudnn *a = attn_cudnn_create(err, sizeof err);
    check(a != NULL || !attn_cudnn_built(), "cuDNN context", attn_cudnn_built() ? "built with cuDNN" : "built without cuDNN");
    if (!a) printf("note: %s (flash kernels checked alone)\n", err);
    static const int Ts[2] = {128, 2048}, Ds[2] = {64, 128};
    for (int ti = 0; ti < 2; ti++)
        for (int di = 0; di < 2; di++)
            for (int docs = 0; docs < 2; docs++) one_case(a, 2, 12, 2, Ts[ti], Ds[di], docs);
    attn_cudnn_destroy(a);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail != 0;
}
