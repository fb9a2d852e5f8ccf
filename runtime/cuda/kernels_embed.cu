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

/* dwte[id] += sum of dx over the rows holding token id, in row order: one thread per
 * (distinct id, 8 channels). The rows come grouped by id (emb_bwd_plan on the host),
 * so each thread owns its 8 gradients and sums in a fixed order: no atomics, the
 * same bits every run (an atomicAdd per row made the order, and the bits, the
 * scheduler's). plan = [order[N] | seg_start[U+1] | seg_id[U]]. */
__global__ void embed_bwd_k(float *dwte, const int *plan, int N, int U, const bf16 *dx, int C)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, per = (size_t)C / 8;
    if (t >= (size_t)U * per) return;
    int s = (int)(t / per), c = (int)(t % per) * 8;
    const int *order = plan, *start = plan + N, *seg_id = plan + N + U + 1;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int r = start[s]; r < start[s + 1]; r++) {
        float f[8];
        load8(f, dx + (size_t)order[r] * C + c);
        for (int k = 0; k < 8; k++) acc[k] += f[k];
    }
    float *dst = dwte + (size_t)seg_id[s] * C + c;
    for (int k = 0; k < 8; k++) dst[k] += acc[k];
}

extern "C" void k_embed_fwd(bf16_t *out, const int *ids, const bf16_t *wte, int N, int C, kstream_t s)
{
    embed_fwd_k<<<blocks_for((size_t)N * C / 8, 256), 256, 0, s>>>((bf16 *)out, ids, (const bf16 *)wte, N, C);
}
extern "C" void k_embed_bwd(float *dwte, const int *plan, int N, int U, const bf16_t *dx, int C, kstream_t s)
{
    embed_bwd_k<<<blocks_for((size_t)U * (C / 8), 256), 256, 0, s>>>(dwte, plan, N, U, (const bf16 *)dx, C);
}
