/* kernels_attn_eager.cu — the materialised-score attention path (train.attention = eager, and shapes the
 * fused kernels do not take): softmax with causal and document masks over the scores,
 * its backward, and the [B, A1, A2, D] <-> [B, A2, A1, D] swap around the batched GEMMs. */
#include "kernels_common.cuh"

/* ---- attention softmax over materialised scores: one warp per query row ---- */

__global__ void attn_softmax_fwd_k(bf16 *SP, const int *pos, int B, int H, int T, float scale)
{
    long long row = (long long)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    int lane = threadIdx.x % WARP;
    if (row >= (long long)B * H * T) return;
    int t = (int)(row % T), b = (int)(row / ((long long)H * T));
    int lo = t - pos[b * T + t];
    if (lo < 0) lo = 0;
    bf16 *r = SP + row * T;
    float m = -INFINITY, sum = 0.f;
    for (int j0 = lane * 8; j0 < T; j0 += WARP * 8) {
        if (j0 > t || j0 + 8 <= lo) continue;
        float f[8];
        load8(f, r + j0);
        for (int k = 0; k < 8; k++) {
            int j = j0 + k;
            if (j < lo || j > t) continue;
            float x = f[k] * scale;
            if (x > m) { sum *= __expf(m - x); m = x; }
            sum += __expf(x - m);
        }
    }
    float mw = warp_max(m);
    sum = (m == -INFINITY) ? 0.f : sum * __expf(m - mw);
    sum = warp_sum(sum);
    float inv = 1.f / sum;
    for (int j0 = lane * 8; j0 < T; j0 += WARP * 8) {
        float f[8];
        if (j0 > t || j0 + 8 <= lo) {
            for (int k = 0; k < 8; k++) f[k] = 0.f;
        } else {
            load8(f, r + j0);
            for (int k = 0; k < 8; k++) {
                int j = j0 + k;
                f[k] = (j < lo || j > t) ? 0.f : __expf(f[k] * scale - mw) * inv;
            }
        }
        store8(r + j0, f);
    }
}

__global__ void attn_softmax_bwd_k(bf16 *dPS, const bf16 *P, long long rows, int T)
{
    long long row = (long long)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    int lane = threadIdx.x % WARP;
    if (row >= rows) return;
    const bf16 *p = P + row * T;
    bf16 *d = dPS + row * T;
    float dot = 0.f;
    for (int j0 = lane * 8; j0 < T; j0 += WARP * 8) {
        float a[8], g[8];
        load8(a, p + j0); load8(g, d + j0);
        for (int k = 0; k < 8; k++) dot += a[k] * g[k];
    }
    dot = warp_sum(dot);
    for (int j0 = lane * 8; j0 < T; j0 += WARP * 8) {
        float a[8], g[8];
        load8(a, p + j0); load8(g, d + j0);
        for (int k = 0; k < 8; k++) g[k] = a[k] * (g[k] - dot);
        store8(d + j0, g);
    }
}

extern "C" void k_attn_softmax_fwd(bf16_t *SP, const int *pos, int B, int H, int T, float scale, kstream_t s)
{
    long long rows = (long long)B * H * T;
    attn_softmax_fwd_k<<<blocks_for((size_t)rows, 8), 256, 0, s>>>((bf16 *)SP, pos, B, H, T, scale);
}
extern "C" void k_attn_softmax_bwd(bf16_t *dPS, const bf16_t *P, long long rows, int T, kstream_t s)
{
    attn_softmax_bwd_k<<<blocks_for((size_t)rows, 8), 256, 0, s>>>((bf16 *)dPS, (const bf16 *)P, rows, T);
}

/* ---- layout swap ---- */

__global__ void swap12_k(bf16 *out, const bf16 *in, int B, int A1, int A2, int D)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int D8 = D / 8;
    if (idx >= (size_t)B * A1 * A2 * D8) return;
    int d = (int)(idx % D8);
    size_t r = idx / D8;
    int a2 = (int)(r % A2);
    int a1 = (int)((r / A2) % A1);
    int b = (int)(r / ((size_t)A2 * A1));
    const uint4 *src = (const uint4 *)(in + (((size_t)b * A1 + a1) * A2 + a2) * D) + d;
    uint4 *dst = (uint4 *)(out + (((size_t)b * A2 + a2) * A1 + a1) * D) + d;
    *dst = *src;
}

extern "C" void k_swap12(bf16_t *out, const bf16_t *in, int B, int A1, int A2, int D, kstream_t s)
{
    size_t n = (size_t)B * A1 * A2 * (D / 8);
    swap12_k<<<blocks_for(n, 256), 256, 0, s>>>((bf16 *)out, (const bf16 *)in, B, A1, A2, D);
}
