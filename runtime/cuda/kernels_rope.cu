/* kernels_rope.cu — the fused QKV output split into q, k, v with the bias and RoPE, its backward,
 * and the qkv bias gradient. */
#include "kernels_common.cuh"

/* ---- QKV split + bias + RoPE ---- */

/* HF's rotate-half RoPE: pairs (i, i + D/2) turn by pos * theta^(-2i/D). */
static __device__ __forceinline__ void rope_angle(float *c, float *sn, int pos, int i, int D, float theta)
{
    float inv = 1.0f / powf(theta, (float)(2 * i) / (float)D);
    sincosf((float)pos * inv, sn, c);
}

/* Row of head hh for token n in q [B,H,T,D] / k, v [B,KV,T,D]. */
static __device__ __forceinline__ bf16 *head_row(bf16 *q, bf16 *k, bf16 *v, int n, int hh, int T, int H, int KV,
                                                 int D)
{
    int b = n / T, t = n % T;
    if (hh < H) return q + (((size_t)b * H + hh) * T + t) * D;
    if (hh < H + KV) return k + (((size_t)b * KV + (hh - H)) * T + t) * D;
    return v + (((size_t)b * KV + (hh - H - KV)) * T + t) * D;
}

/* One thread per (token, 8 consecutive rotation pairs i0..i0+7, half of the heads):
 * the 8 angles are computed once and applied to that slice of each of its q and k
 * heads (v heads are only moved); a head costs two 16-byte loads (x[i0..],
 * x[i0+D/2..]) and two 16-byte stores. */
__global__ void __launch_bounds__(256) qkv_rope_fwd_k(bf16 *__restrict__ q, bf16 *__restrict__ k,
                                                      bf16 *__restrict__ v, const bf16 *__restrict__ qkv,
                                                      const bf16 *__restrict__ bias, const int *__restrict__ pos,
                                                      int B, int T, int H, int KV, int D, float theta)
{
    int half = D / 2, per = half / 8, heads = H + 2 * KV;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * T * per) return;
    int n = (int)(idx / per), i0 = (int)(idx % per) * 8;
    float c[8], sn[8];
#pragma unroll
    for (int k8 = 0; k8 < 8; k8++) rope_angle(&c[k8], &sn[k8], pos[n], i0 + k8, D, theta);
    const bf16 *src = qkv + (size_t)n * heads * D;
    int h0 = (int)((long)heads * blockIdx.y / gridDim.y), h1 = (int)((long)heads * (blockIdx.y + 1) / gridDim.y);
#pragma unroll 2
    for (int hh = h0; hh < h1; hh++) {
        float x1[8], x2[8];
        load8(x1, src + hh * D + i0);
        load8(x2, src + hh * D + half + i0);
        if (bias) {
            float b1[8], b2[8];
            load8(b1, bias + hh * D + i0);
            load8(b2, bias + hh * D + half + i0);
            for (int e = 0; e < 8; e++) { x1[e] += b1[e]; x2[e] += b2[e]; }
        }
        if (hh < H + KV)
            for (int e = 0; e < 8; e++) {
                float y1 = x1[e] * c[e] - x2[e] * sn[e], y2 = x2[e] * c[e] + x1[e] * sn[e];
                x1[e] = y1; x2[e] = y2;
            }
        bf16 *dst = head_row(q, k, v, n, hh, T, H, KV, D);
        store8(dst + i0, x1);
        store8(dst + half + i0, x2);
    }
}

__global__ void __launch_bounds__(256) qkv_rope_bwd_k(bf16 *__restrict__ dqkv, const bf16 *__restrict__ dq,
                                                      const bf16 *__restrict__ dk, const bf16 *__restrict__ dv,
                                                      const int *__restrict__ pos, int B, int T, int H, int KV,
                                                      int D, float theta)
{
    int half = D / 2, per = half / 8, heads = H + 2 * KV;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * T * per) return;
    int n = (int)(idx / per), i0 = (int)(idx % per) * 8;
    float c[8], sn[8];
#pragma unroll
    for (int k8 = 0; k8 < 8; k8++) rope_angle(&c[k8], &sn[k8], pos[n], i0 + k8, D, theta);
    bf16 *dst = dqkv + (size_t)n * heads * D;
    int h0 = (int)((long)heads * blockIdx.y / gridDim.y), h1 = (int)((long)heads * (blockIdx.y + 1) / gridDim.y);
#pragma unroll 2
    for (int hh = h0; hh < h1; hh++) {
        const bf16 *src = head_row((bf16 *)dq, (bf16 *)dk, (bf16 *)dv, n, hh, T, H, KV, D);
        float g1[8], g2[8];
        load8(g1, src + i0);
        load8(g2, src + half + i0);
        if (hh < H + KV)
            for (int e = 0; e < 8; e++) {
                float x1 = g1[e] * c[e] + g2[e] * sn[e], x2 = g2[e] * c[e] - g1[e] * sn[e];
                g1[e] = x1; g2[e] = x2;
            }
        store8(dst + hh * D + i0, g1);
        store8(dst + hh * D + half + i0, g2);
    }
}

/* Column sums of dy [N, M] (M % 8 == 0), partial per row split: a block is 32 lanes
 * of 8 columns x 8 row lanes; blockIdx.y takes one of gridDim.y row ranges. The
 * row lanes' sums are added in lane order; colsum_finish_k adds the splits in order. */
__global__ void bias_grad_part_k(float *part, const bf16 *dy, int N, int M)
{
    __shared__ float red[8][WARP * 8 + 4];
    int col = (blockIdx.x * WARP + threadIdx.x) * 8;
    int per = (N + gridDim.y - 1) / gridDim.y;
    int r0 = blockIdx.y * per, r1 = min(N, r0 + per);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (col < M)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            float f[8];
            load8(f, dy + (size_t)r * M + col);
            for (int e = 0; e < 8; e++) acc[e] += f[e];
        }
    for (int e = 0; e < 8; e++) red[threadIdx.y][threadIdx.x * 8 + e] = acc[e];
    __syncthreads();
    int t = threadIdx.y * WARP + threadIdx.x, c = blockIdx.x * WARP * 8 + t;
    if (c < M) {
        float s = 0.f;
        for (int y = 0; y < 8; y++) s += red[y][t];
        part[(size_t)blockIdx.y * M + c] = s;
    }
}


#define ROPE_HEAD_SPLIT 2   /* more threads in flight; the angles are computed per split */

extern "C" void k_qkv_rope_fwd(bf16_t *q, bf16_t *k, bf16_t *v, const bf16_t *qkv, const bf16_t *bias,
                               const int *pos, int B, int T, int H, int KV, int D, float theta, kstream_t s)
{
    size_t n = (size_t)B * T * (D / 16);
    dim3 grid(blocks_for(n, 256), ROPE_HEAD_SPLIT);
    qkv_rope_fwd_k<<<grid, 256, 0, s>>>((bf16 *)q, (bf16 *)k, (bf16 *)v, (const bf16 *)qkv, (const bf16 *)bias, pos,
                                        B, T, H, KV, D, theta);
}
extern "C" void k_qkv_rope_bwd(bf16_t *dqkv, const bf16_t *dq, const bf16_t *dk, const bf16_t *dv,
                               const int *pos, int B, int T, int H, int KV, int D, float theta, kstream_t s)
{
    size_t n = (size_t)B * T * (D / 16);
    dim3 grid(blocks_for(n, 256), ROPE_HEAD_SPLIT);
    qkv_rope_bwd_k<<<grid, 256, 0, s>>>((bf16 *)dqkv, (const bf16 *)dq, (const bf16 *)dk, (const bf16 *)dv, pos,
                                        B, T, H, KV, D, theta);
}
extern "C" void k_bias_grad(float *dbias, const bf16_t *dy, int N, int M, float *scratch, kstream_t s)
{
    int splits = LLMC_CUDA_BIAS_GRAD_SPLITS < N ? LLMC_CUDA_BIAS_GRAD_SPLITS : N;
    dim3 grid((M / 8 + WARP - 1) / WARP, splits), block(WARP, 8);
    bias_grad_part_k<<<grid, block, 0, s>>>(scratch, (const bf16 *)dy, N, M);
    colsum_finish(dbias, scratch, splits, M, s);
}
