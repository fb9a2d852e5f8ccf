/* kernels_embed.cu — token embedding lookup and its gradient. */
#include "kernels_common.cuh"

/* ---- embedding ---- */

__global__ void embed_fwd_k(bf16 *out, const int *ids, const bf16 *wte, int N, int C)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)N * C) return;
    int n = (int)(i / C), c = (int)(i % C);
    *(uint4 *)(out + i) = *(const uint4 *)(wte + (size_t)ids[n] * C + c);
}

__global__ void embed_bwd_k(float *dwte, const int *ids, const bf16 *dx, int N, int C)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)N * C) return;
    int n = (int)(i / C), c = (int)(i % C);
    float f[8];
    load8(f, dx + i);
    float *dst = dwte + (size_t)ids[n] * C + c;
    for (int k = 0; k < 8; k++) atomicAdd(dst + k, f[k]);
}

extern "C" void k_embed_fwd(bf16_t *out, const int *ids, const bf16_t *wte, int N, int C, kstream_t s)
{
    embed_fwd_k<<<blocks_for((size_t)N * C / 8, 256), 256, 0, s>>>((bf16 *)out, ids, (const bf16 *)wte, N, C);
}
extern "C" void k_embed_bwd(float *dwte, const int *ids, const bf16_t *dx, int N, int C, kstream_t s)
{
    embed_bwd_k<<<blocks_for((size_t)N * C / 8, 256), 256, 0, s>>>(dwte, ids, (const bf16 *)dx, N, C);
}
