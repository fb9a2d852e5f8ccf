/* initcheck_probe.c — is compute-sanitizer initcheck's report in qkv_rope_fwd_k
 * (issue 27: "Uninitialized __global__ memory read" of the fused QKV projection's
 * output) a real read of unwritten memory, or initcheck not seeing cuBLASLt's
 * stores? The tiny plan's shapes: the QKV product into a fresh (never written)
 * buffer through our gemm_run, then k_qkv_rope_fwd reads it, as the trainer does.
 * The host then checks every element of the product against an fp64 reference of
 * the same bf16 inputs: all written and right means the buffer was initialised,
 * whatever initcheck says about the read. Run it alone (a pass/fail test) and under
 * `compute-sanitizer --tool initcheck` (tests/cuda/trust.sh, section san).
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
            fprintf(stderr, "initcheck_probe: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,          \
                    cudaGetErrorString(e_));                                                        \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static int n_pass, n_fail;

static void check(int ok, const char *name, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, detail[0] ? ": " : "", detail);
    if (ok) n_pass++; else n_fail++;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void)   /* [-1, 1) */
{
    return (float)(splitmix_unit(&rng) * 2.0 - 1.0);
}

/* One shape: B x T tokens of width C; H query heads and KV kv heads of size D. */
static void probe(int B, int T, int C, int H, int KV, int D)
{
    int N = B * T, M = (H + 2 * KV) * D;
    size_t nx = (size_t)N * C, nw = (size_t)M * C, ny = (size_t)N * M;
    uint16_t *hx = malloc(nx * 2), *hw = malloc(nw * 2), *hy = malloc(ny * 2);
    int *hpos = malloc((size_t)N * sizeof(int));
    for (size_t i = 0; i < nx; i++) hx[i] = f2bf(urand());
    for (size_t i = 0; i < nw; i++) hw[i] = f2bf(urand() * 0.1f);
    for (int i = 0; i < N; i++) hpos[i] = i % T;
    void *dx, *dw, *dy, *dq, *dk, *dv;
    int *dpos;
    CK(cudaMalloc(&dx, nx * 2));
    CK(cudaMalloc(&dw, nw * 2));
    CK(cudaMalloc(&dy, ny * 2));   /* never written but by the product */
    CK(cudaMalloc(&dq, (size_t)N * H * D * 2));
    CK(cudaMalloc(&dk, (size_t)N * KV * D * 2));
    CK(cudaMalloc(&dv, (size_t)N * KV * D * 2));
    CK(cudaMalloc((void **)&dpos, (size_t)N * sizeof(int)));
    CK(cudaMemcpy(dx, hx, nx * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw, hw, nw * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpos, hpos, (size_t)N * sizeof(int), cudaMemcpyHostToDevice));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    Gemm *g = gemm_create(s, (size_t)32 << 20);
    /* y[N, M] = x[N, C] . w[M, C]^T, as model_cuda.c's QKV projection */
    GemmArgs a = {.transA = 0, .transB = 1, .M = N, .N = M, .K = C, .A = dx, .lda = C, .B = dw, .ldb = C,
                  .D = dy, .ldd = M, .alpha = 1.f, .beta = 0.f};
    gemm_run(g, &a);
    k_qkv_rope_fwd(dq, dk, dv, dy, NULL, dpos, B, T, H, KV, D, 1e6f, s);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(hy, dy, ny * 2, cudaMemcpyDeviceToHost));
    /* fp32 accumulation of bf16 products, then one bf16 rounding: within
     * 2^-8 relative of the fp64 value, plus C * 2^-24 * sum|x w| of accumulation */
    size_t bad = 0, first = 0;
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < M; j++) {
            double ref = 0, mag = 0;
            for (int c = 0; c < C; c++) {
                double p = (double)bf2f(hx[(size_t)n * C + c]) * bf2f(hw[(size_t)j * C + c]);
                ref += p;
                mag += fabs(p);
            }
            double got = bf2f(hy[(size_t)n * M + j]), lim = fabs(ref) * 0x1p-8 + mag * C * 0x1p-24 + 1e-30;
            double err = fabs(got - ref) / lim;
            if (!(err <= 1.0)) { if (!bad) first = (size_t)n * M + j; bad++; }
            if (err > worst) worst = err;
        }
    char name[128], detail[160];
    snprintf(name, sizeof name, "QKV product %d x %d x %d: every element written and right", N, M, C);
    snprintf(detail, sizeof detail, "%zu of %zu outside the bound (first at row %zu), worst %.2f of the bound", bad,
             ny, bad ? first / (size_t)M : 0, worst);
    check(bad == 0, name, detail);
    gemm_destroy(g);
    cudaStreamDestroy(s);
    cudaFree(dx); cudaFree(dw); cudaFree(dy); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dpos);
    free(hx); free(hw); free(hy); free(hpos);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) { fprintf(stderr, "initcheck_probe: no GPU\n"); return 1; }
    probe(8, 128, 64, 4, 2, 16);    /* the tiny plan */
    probe(8, 128, 128, 2, 1, 64);   /* trust.sh's "small" shape */
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
