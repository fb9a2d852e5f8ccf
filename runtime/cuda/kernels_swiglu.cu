/* kernels_swiglu.cu — SwiGLU: silu(gate) * up from the fused gate/up GEMM output, and its backward.
 * amax (precision = fp8; NULL otherwise): the output's absolute maximum as
 * written, atomically maxed into *amax, so the FP8 quantiser of the GEMM that
 * reads the output needs no pass of its own for it (k_fp8_amax's result, bit
 * for bit: the max of the same stored values). */
#include "kernels_common.cuh"

/* ---- SwiGLU ---- */

__global__ void swiglu_fwd_k(bf16 *h, const bf16 *gu, int N, int F, float *amax)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    float mx = 0.f;
    if (i < (size_t)N * F) {
        size_t n = i / F, c = i % F;
        float g[8], u[8], o[8];
        load8(g, gu + n * 2 * F + c);
        load8(u, gu + n * 2 * F + F + c);
        for (int k = 0; k < 8; k++) o[k] = g[k] / (1.f + __expf(-g[k])) * u[k];
        store8(h + i, o);
        if (amax) mx = max_abs8_stored(o);
    }
    if (amax) block_amax_commit(amax, mx);   /* amax is the same for the whole grid */
}

__global__ void swiglu_bwd_k(bf16 *dgu, const bf16 *dh, const bf16 *gu, int N, int F, float *amax)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    float mx = 0.f;
    if (i < (size_t)N * F) {
        size_t n = i / F, c = i % F;
        float g[8], u[8], d[8], dg[8], du[8];
        load8(g, gu + n * 2 * F + c);
        load8(u, gu + n * 2 * F + F + c);
        load8(d, dh + i);
        for (int k = 0; k < 8; k++) {
            float sg = 1.f / (1.f + __expf(-g[k]));
            du[k] = d[k] * g[k] * sg;
            dg[k] = d[k] * u[k] * sg * (1.f + g[k] * (1.f - sg));
        }
        store8(dgu + n * 2 * F + c, dg);
        store8(dgu + n * 2 * F + F + c, du);
        if (amax) mx = fmaxf(max_abs8_stored(dg), max_abs8_stored(du));
    }
    if (amax) block_amax_commit(amax, mx);
}

extern "C" void k_swiglu_fwd(bf16_t *h, const bf16_t *gu, int N, int F, float *amax, kstream_t s)
{
    swiglu_fwd_k<<<blocks_for((size_t)N * F / 8, 256), 256, 0, s>>>((bf16 *)h, (const bf16 *)gu, N, F, amax);
}
extern "C" void k_swiglu_bwd(bf16_t *dgu, const bf16_t *dh, const bf16_t *gu, int N, int F, float *amax,
                             kstream_t s)
{
    swiglu_bwd_k<<<blocks_for((size_t)N * F / 8, 256), 256, 0, s>>>((bf16 *)dgu, (const bf16 *)dh,
                                                                      (const bf16 *)gu, N, F, amax);
}
