/* attn_check.c — cuDNN attention (runtime/cuda/attn_cudnn.c) against our flash
 * kernels (flash_attn.cu) and an fp64 reference, on a GPU.
 *
 *   build/attn_check            correctness; closes with "N passed, N failed"
 *   build/attn_check --time     ms per forward / backward, flash vs cuDNN, at the
 *                               Qwen2.5-1.5B and 0.5B shapes
 *   build/attn_check --time-gqa cuDNN's deterministic form at llmq's T = 1024 micro-batches,
 *                               with the models' KV heads and with K, V widened to H
 *   build/attn_check --documents  the document parser alone (no GPU)
 *
 * Shapes: B=2, H=12, KV=2, T in {128, 2048}, D in {64, 128}, rows of one sequence
 * and rows packed with documents (pos resets: cuDNN's ragged layout). The fp64
 * reference runs at T=128; at T=2048 cuDNN is compared with the flash kernels.
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
#include "cuda_layout.h"

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

/* pos of B rows of T: one sequence each (docs 0), documents of T/8..T/3 tokens
 * (docs 1: at most 8 a row), or of 16..80 tokens (docs 2: many). */
static void make_pos(int *pos, int B, int T, int docs)
{
    int lo = docs == 2 ? 16 : T / 8, hi = docs == 2 ? 80 : T / 3;
    for (int b = 0; b < B; b++) {
        int p = 0, left = docs ? lo + (int)(urand() * (hi - lo)) : T;
        for (int t = 0; t < T; t++) {
            if (left-- == 0) { p = 0; left = lo + (int)(urand() * (hi - lo)) - 1; }
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
    size_t ws_bytes;
} Dev;

static void *dmalloc(size_t n) { void *p = NULL; CK(cudaMalloc(&p, n ? n : 16)); return p; }

static void dev_alloc(Dev *d, int B, int H, int KV, int T, int D, size_t ws)
{
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    d->q = dmalloc(nq * 2); d->k = dmalloc(nk * 2); d->v = dmalloc(nk * 2); d->o = dmalloc(nq * 2);
    d->dO = dmalloc(nq * 2); d->dq = dmalloc(nq * 2); d->dk = dmalloc(nk * 2); d->dv = dmalloc(nk * 2);
    d->lse = dmalloc((size_t)B * H * T * 4);
    d->scratch = dmalloc(k_flash_bwd_scratch_floats(B, H, T, D, 0) * 4);   /* the larger: both forms run */
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

/* cuDNN's statistics of document rows are [B,T,H]: to [B,H,T] in place. */
static void stats_to_bht(float *lse, int B, int H, int T)
{
    size_t n = (size_t)H * T;
    float *tmp = malloc(n * sizeof(float));
    for (int b = 0; b < B; b++) {
        float *x = lse + (size_t)b * n;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) tmp[(size_t)h * T + t] = x[(size_t)t * H + h];
        memcpy(x, tmp, n * sizeof(float));
    }
    free(tmp);
}

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

/* det: dQ by the atomic-free pass, else through fp32 atomics */
static void run_flash(Dev *d, int B, int H, int KV, int T, int D, int det)
{
    k_flash_fwd(d->o, d->lse, d->q, d->k, d->v, d->pos, B, H, KV, T, D, 0);
    k_flash_bwd(d->dq, d->dk, d->dv, d->q, d->k, d->v, d->o, d->dO, d->lse, d->pos, d->scratch, B, H, KV, T, D, det,
                0);
}

static void run_cudnn(AttnCudnn *a, Dev *d)
{
    attn_cudnn_fwd(a, d->o, d->lse, d->q, d->k, d->v, d->ws, 0);
    attn_cudnn_bwd(a, d->dq, d->dk, d->dv, d->q, d->k, d->v, d->o, d->dO, d->lse, d->ws, 0);
}

/* The document parser on hand-made rows (no GPU needed). */
static void check_documents(void)
{
    int plain[8] = {0, 1, 2, 3, 0, 1, 2, 3}, cont[8] = {5, 6, 7, 8, 0, 1, 2, 3};
    int docs[8] = {0, 1, 0, 1, 2, 0, 0, 1}, jump[8] = {0, 1, 3, 4, 0, 1, 2, 3};
    int st[8], ln[8];
    int n = attn_cudnn_documents(plain, 2, 4, st, ln, 8);
    check(n == 2 && st[1] == 4 && ln[0] == 4 && ln[1] == 4, "documents: one sequence a row", "");
    n = attn_cudnn_documents(cont, 2, 4, st, ln, 8);
    check(n == 2 && ln[0] == 4, "documents: a row continuing a document is one sequence", "");
    n = attn_cudnn_documents(docs, 2, 4, st, ln, 8);
    check(n == 5 && st[0] == 0 && ln[0] == 2 && st[1] == 2 && ln[1] == 2 && st[2] == 4 && ln[2] == 1 &&
          st[3] == 5 && ln[3] == 1 && st[4] == 6 && ln[4] == 2, "documents: resets split rows", "");
    check(attn_cudnn_documents(jump, 2, 4, st, ln, 8) == -1, "documents: a position jump is refused", "");
    check(attn_cudnn_documents(docs, 2, 4, st, ln, 4) == -1, "documents: more than max are refused", "");
}

static void one_case(int B, int H, int KV, int T, int D, int docs)
{
    char what[96];
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    bf16_t *Q = malloc(nq * 2), *K = malloc(nk * 2), *V = malloc(nk * 2), *dO = malloc(nq * 2);
    int *pos = malloc((size_t)B * T * sizeof(int));
    fill(Q, nq, 1.0); fill(K, nk, 1.0); fill(V, nk, 1.0); fill(dO, nq, 1.0);
    make_pos(pos, B, T, docs);
    snprintf(what, sizeof what, "B%d H%d KV%d T%d D%d %s", B, H, KV, T, D,
             docs == 2 ? "many documents" : docs ? "documents" : "one sequence");
    char err[512] = "", name[256], detail[600];
    const char *det = getenv("LLMC_CUDNN_DETERMINISTIC");   /* the form under test: deterministic unless 0 */
    AttnCudnn *a = attn_cudnn_built() ? attn_cudnn_create(!(det && !strcmp(det, "0")), err, sizeof err) : NULL;
    size_t ws = a ? attn_cudnn_prepare(a, B, H, KV, T, D, err, sizeof err) : 0;
    int use_cudnn = 0;
    if (attn_cudnn_built()) {
        snprintf(name, sizeof name, "%s: cuDNN plan", what);
        check(ws > 0, name, ws ? "" : err);
        if (ws) {
            use_cudnn = attn_cudnn_set_rows(a, pos, ws, 0);
            int n = attn_cudnn_documents(pos, B, T, NULL, NULL, 1 << 20);
            /* the deterministic form's workspace grows with the documents: it is set
             * aside for LLMC_CUDNN_DOCS_PER_ROW a row, and rows with more go to flash */
            int over = attn_cudnn_deterministic(a) && n > LLMC_CUDNN_DOCS_PER_ROW * B;
            snprintf(name, sizeof name, "%s: cuDNN %s the rows", what, over ? "declines" : "takes");
            snprintf(detail, sizeof detail, "%d documents, ragged batch %d", n, attn_cudnn_rows_documents(a));
            check(over ? !use_cudnn : use_cudnn && (attn_cudnn_rows_documents(a) > 0) == (docs > 0), name, detail);
        }
    }
    Dev d;
    dev_alloc(&d, B, H, KV, T, D, ws);
    CK(cudaMemcpy(d.q, Q, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.k, K, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.v, V, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dO, dO, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.pos, pos, (size_t)B * T * 4, cudaMemcpyHostToDevice));
    Out fl, cu, fa;
    run_flash(&d, B, H, KV, T, D, 0);   /* the atomics' form first: its dQ must not leak into the next */
    out_get(&fa, &d, B, H, KV, T, D);
    run_flash(&d, B, H, KV, T, D, 1);
    out_get(&fl, &d, B, H, KV, T, D);
    {   /* the deterministic backward gives the same bits again */
        Out again;
        run_flash(&d, B, H, KV, T, D, 1);
        out_get(&again, &d, B, H, KV, T, D);
        snprintf(name, sizeof name, "%s flash backward deterministic", what);
        check(!memcmp(again.dq, fl.dq, nq * 2) && !memcmp(again.dk, fl.dk, nk * 2) && !memcmp(again.dv, fl.dv, nk * 2),
              name, "");
        out_free(&again);
    }
    if (use_cudnn) {
        run_cudnn(a, &d);
        out_get(&cu, &d, B, H, KV, T, D);
        if (docs) stats_to_bht(cu.lse, B, H, T);
    }
    if (T <= 128) {
        Ref r;
        reference(&r, Q, K, V, dO, pos, B, H, KV, T, D);
        snprintf(name, sizeof name, "%s flash vs fp64", what);
        check_vs_ref(name, &fl, &r, B, H, KV, T, D, LN2);
        snprintf(name, sizeof name, "%s flash (dQ atomics) vs fp64", what);
        check_vs_ref(name, &fa, &r, B, H, KV, T, D, LN2);
        if (use_cudnn) {
            snprintf(name, sizeof name, "%s cuDNN vs fp64", what);
            check_vs_ref(name, &cu, &r, B, H, KV, T, D, 1.0);
        }
        ref_free(&r);
    }
    if (use_cudnn) {
        snprintf(name, sizeof name, "%s cuDNN vs flash", what);
        check_vs_out(name, &cu, &fl, B, H, KV, T, D, LN2);
        if (attn_cudnn_deterministic(a)) {
            /* the deterministic backward gives the same bits again */
            run_cudnn(a, &d);
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
    snprintf(name, sizeof name, "%s flash, dQ atomics vs deterministic", what);
    check_vs_out(name, &fa, &fl, B, H, KV, T, D, 1.0);
    out_free(&fa);
    out_free(&fl);
    dev_free(&d);
    attn_cudnn_destroy(a);
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

typedef struct { AttnCudnn *a; Dev *d; int B, H, KV, T, D, det; } TimeArg;

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
                t->B, t->H, t->KV, t->T, t->D, t->det, 0);
}
static void t_cudnn_fwd(void *p)
{
    TimeArg *t = p;
    attn_cudnn_fwd(t->a, t->d->o, t->d->lse, t->d->q, t->d->k, t->d->v, t->d->ws, 0);
}
static void t_cudnn_bwd(void *p)
{
    TimeArg *t = p;
    Dev *d = t->d;
    attn_cudnn_bwd(t->a, d->dq, d->dk, d->dv, d->q, d->k, d->v, d->o, d->dO, d->lse, d->ws, 0);
}

/* One timing line; docs: rows of four documents each. */
static void time_impl(const char *label, const char *kind, Dev *d, const int *pos, int B, int H, int KV, int T,
                      int D, int cudnn, int deterministic)
{
    TimeArg t = {NULL, d, B, H, KV, T, D, deterministic};
    char err[512] = "", ws_note[64] = "";
    double flops = 4.0 * B * H * (double)T * T * D / 2;   /* causal: half the square */
    CK(cudaMemcpy(d->pos, pos, (size_t)B * T * 4, cudaMemcpyHostToDevice));
    if (cudnn) {
        t.a = attn_cudnn_create(deterministic, err, sizeof err);
        size_t ws = t.a ? attn_cudnn_prepare(t.a, B, H, KV, T, D, err, sizeof err) : 0;
        if (ws > d->ws_bytes) { snprintf(err, sizeof err, "workspace %zu > %zu", ws, d->ws_bytes); ws = 0; }
        if (!ws || !attn_cudnn_set_rows(t.a, pos, ws, 0)) {
            printf("%s %s: cuDNN unavailable: %s\n", label, kind, err[0] ? err : "rows declined");
            attn_cudnn_destroy(t.a);
            return;
        }
        snprintf(ws_note, sizeof ws_note, "  workspace %.1f MiB", ws / 1048576.0);
    }
    float f = time_ms(cudnn ? t_cudnn_fwd : t_flash_fwd, &t, 20), b = time_ms(cudnn ? t_cudnn_bwd : t_flash_bwd, &t, 20);
    printf("%-14s %-34s fwd %7.3f ms (%4.0f TFLOP/s)  bwd %7.3f ms (%4.0f TFLOP/s)%s\n", label, kind, f,
           flops / f / 1e9, b, 2.5 * flops / b / 1e9, ws_note);
    attn_cudnn_destroy(t.a);
}

static void time_shape(const char *label, int B, int H, int KV, int T, int D)
{
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D, ws = 0;
    char err[512] = "";
    for (int det = 0; det < 2 && attn_cudnn_built(); det++) {   /* the larger workspace of both forms */
        AttnCudnn *a = attn_cudnn_create(det, err, sizeof err);
        size_t w = a ? attn_cudnn_prepare(a, B, H, KV, T, D, err, sizeof err) : 0;
        if (w > ws) ws = w;
        attn_cudnn_destroy(a);
    }
    Dev d;
    dev_alloc(&d, B, H, KV, T, D, ws);
    d.ws_bytes = ws;
    bf16_t *h = malloc(nq * 2);
    int *plain = malloc((size_t)B * T * 4), *docs = malloc((size_t)B * T * 4);
    fill(h, nq, 1.0);
    CK(cudaMemcpy(d.q, h, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dO, h, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.k, h, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.v, h + nk, nk * 2, cudaMemcpyHostToDevice));
    for (int i = 0; i < B * T; i++) { plain[i] = i % T; docs[i] = i % (T / 4); }
    printf("%s: B=%d H=%d KV=%d T=%d D=%d\n", label, B, H, KV, T, D);
    time_impl(label, "flash, causal, deterministic", &d, plain, B, H, KV, T, D, 0, 1);
    time_impl(label, "flash, causal, atomics", &d, plain, B, H, KV, T, D, 0, 0);
    time_impl(label, "cuDNN, causal, deterministic", &d, plain, B, H, KV, T, D, 1, 1);
    time_impl(label, "cuDNN, causal, atomics", &d, plain, B, H, KV, T, D, 1, 0);
    time_impl(label, "flash, 4 documents a row, determ.", &d, docs, B, H, KV, T, D, 0, 1);
    time_impl(label, "flash, 4 documents a row, atomics", &d, docs, B, H, KV, T, D, 0, 0);
    time_impl(label, "cuDNN, 4 documents a row, determ.", &d, docs, B, H, KV, T, D, 1, 1);
    dev_free(&d);
    free(h); free(plain); free(docs);
}

/* cuDNN's deterministic form at one of llmq's T = 1024 micro-batches, with the model's
 * KV heads and with K and V widened to H heads (MHA: no reduction of dK and dV over each
 * group in the graph). The widening's copies are not timed: its bytes are printed. */
static void time_gqa(const char *label, int B, int H, int KV, int T, int D)
{
    for (int pass = 0; pass < 2; pass++) {
        int kv = pass ? H : KV;
        size_t nq = (size_t)B * H * T * D, nk = (size_t)B * kv * T * D, ws = 0;
        char err[512] = "";
        AttnCudnn *a = attn_cudnn_create(1, err, sizeof err);
        ws = a ? attn_cudnn_prepare(a, B, H, kv, T, D, err, sizeof err) : 0;
        attn_cudnn_destroy(a);
        if (!ws) { printf("%s KV=%d: cuDNN unavailable: %s\n", label, kv, err); return; }
        Dev d;
        dev_alloc(&d, B, H, kv, T, D, ws);
        d.ws_bytes = ws;
        bf16_t *h = malloc((nq + nk) * 2);
        int *plain = malloc((size_t)B * T * 4);
        if (!h || !plain) { fprintf(stderr, "attn_check: out of memory\n"); exit(1); }
        fill(h, nq + nk, 1.0);
        CK(cudaMemcpy(d.q, h, nq * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d.dO, h + nk, nq * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d.k, h + nq, nk * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d.v, h, nk * 2, cudaMemcpyHostToDevice));
        for (int i = 0; i < B * T; i++) plain[i] = i % T;
        char what[64];
        snprintf(what, sizeof what, "cuDNN determ., KV=%d%s", kv, pass ? " (widened)" : "");
        time_impl(label, what, &d, plain, B, H, kv, T, D, 1, 1);
        if (pass)   /* K, V widened (read KV, write H heads) and dK, dV summed back (read H, write KV) */
            printf("%-14s widening and summing back would move %.1f MB a call\n", label,
                   2.0 * 2 * (double)B * T * D * 2 * (KV + H) / 1e6);
        dev_free(&d);
        free(h); free(plain);
    }
}

int main(int argc, char **argv)
{
    int timing = argc > 1 && !strcmp(argv[1], "--time"), parse_only = argc > 1 && !strcmp(argv[1], "--documents");
    int gqa = argc > 1 && !strcmp(argv[1], "--time-gqa");
    if (argc > 1 && !timing && !parse_only && !gqa) {
        fprintf(stderr, "usage: attn_check [--time | --time-gqa | --documents]\n");
        return 2;
    }
    if (parse_only) {   /* the document parser alone: no GPU needed */
        check_documents();
        printf("%d passed, %d failed\n", n_pass, n_fail);
        return n_fail != 0;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) { fprintf(stderr, "attn_check: no GPU\n"); return 1; }
    if (gqa) {   /* llmq's micro-batches at T = 1024 */
        time_gqa("qwen2.5-3b", 16, 16, 2, 1024, 128);
        time_gqa("qwen2.5-1.5b", 32, 12, 2, 1024, 128);
        time_gqa("qwen2.5-7b", 8, 28, 4, 1024, 128);
        time_gqa("qwen2.5-0.5b", 32, 14, 2, 1024, 64);
        return 0;
    }
    if (timing) {
        time_shape("qwen2.5-1.5b", 4, 12, 2, 2048, 128);
        time_shape("qwen2.5-0.5b", 8, 14, 2, 2048, 64);
        return 0;
    }
    printf("note: %s\n", attn_cudnn_built() ? "built with cuDNN" : "built without cuDNN: flash kernels checked alone");
    check_documents();
    static const int Ts[2] = {128, 2048}, Ds[2] = {64, 128};
    for (int ti = 0; ti < 2; ti++)
        for (int di = 0; di < 2; di++)
            for (int docs = 0; docs < 2; docs++) one_case(2, 12, 2, Ts[ti], Ds[di], docs);
    one_case(2, 12, 2, 2048, 128, 2);   /* a larger ragged bucket, its plan built on first use */
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail != 0;
}
