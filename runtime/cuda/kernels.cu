/* kernels.cu — the CUDA backend's fused elementwise, normalisation, attention-softmax,
 * cross-entropy and optimizer kernels. GEMMs are not here: they go through cuBLASLt
 * (gemm.c). Memory-bound kernels move 16 bytes (8 bf16) per thread access. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "kernels.h"

typedef __nv_bfloat16 bf16;

#define WARP 32

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* 8 bf16 <-> 8 floats through one 16-byte access. */
static __device__ __forceinline__ void load8(float f[8], const bf16 *p)
{
    uint4 u = *(const uint4 *)p;
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(h[i]);
        f[2 * i] = t.x; f[2 * i + 1] = t.y;
    }
}
static __device__ __forceinline__ void store8(bf16 *p, const float f[8])
{
    uint4 u;
    __nv_bfloat162 *h = (__nv_bfloat162 *)&u;
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    *(uint4 *)p = u;
}

static unsigned blocks_for(size_t n, int threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b ? b : 1);
}

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

/* ---- RMSNorm: one warp per row ---- */

__global__ void rmsnorm_fwd_k(bf16 *out, float *rstd, const bf16 *x, const bf16 *w, int N, int C, float eps)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    const bf16 *xr = x + (size_t)row * C;
    float ss = 0.f;
    for (int i = lane * 8; i < C; i += WARP * 8) {
        float f[8];
        load8(f, xr + i);
        for (int k = 0; k < 8; k++) ss += f[k] * f[k];
    }
    float r = rsqrtf(warp_sum(ss) / C + eps);
    if (lane == 0) rstd[row] = r;
    bf16 *o = out + (size_t)row * C;
    for (int i = lane * 8; i < C; i += WARP * 8) {
        float f[8], g[8];
        load8(f, xr + i);
        load8(g, w + i);
        for (int k = 0; k < 8; k++) f[k] = f[k] * r * g[k];
        store8(o + i, f);
    }
}

static __device__ __forceinline__ void unpack8(float f[8], uint4 u)
{
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(h[i]);
        f[2 * i] = t.x; f[2 * i + 1] = t.y;
    }
}

/* RMSNorm backward, one warp per row with the row in registers: lane owns the
 * 8-column slices lane*8 + j*256 (j < VPL), reads x and dy once from memory, and
 * sums its columns' dw over the rows it visits in registers. The block then adds
 * its warps' sums in warp order in shared memory and writes one partial row per
 * block; colsum_finish_k adds the partials in block order: deterministic, no atomics. */
template <int VPL>
__global__ void __launch_bounds__(256) rmsnorm_bwd_k(bf16 *dx, float *part, const bf16 *dy, const bf16 *x,
                                                     const bf16 *w, const float *rstd, const bf16 *dres,
                                                     int N, int C)
{
    __shared__ float red[VPL * WARP * 8];
    int warps = blockDim.x / WARP, wid = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    float acc[VPL][8];
#pragma unroll
    for (int j = 0; j < VPL; j++)
#pragma unroll
        for (int k = 0; k < 8; k++) acc[j][k] = 0.f;
    for (int row = blockIdx.x * warps + wid; row < N; row += gridDim.x * warps) {
        const bf16 *xr = x + (size_t)row * C, *dyr = dy + (size_t)row * C;
        uint4 xv[VPL], dv[VPL];
#pragma unroll
        for (int j = 0; j < VPL; j++) {
            int i = (j * WARP + lane) * 8;
            if (i < C) { xv[j] = *(const uint4 *)(xr + i); dv[j] = *(const uint4 *)(dyr + i); }
        }
        float r = rstd[row], dot = 0.f;   /* sum_c (dy*w) * x, times r below */
#pragma unroll
        for (int j = 0; j < VPL; j++) {
            int i = (j * WARP + lane) * 8;
            if (i < C) {
                float a[8], b[8], g[8];
                unpack8(a, xv[j]); unpack8(b, dv[j]); load8(g, w + i);
                for (int k = 0; k < 8; k++) dot += b[k] * g[k] * a[k];
            }
        }
        dot = warp_sum(dot) * r / C;
#pragma unroll
        for (int j = 0; j < VPL; j++) {
            int i = (j * WARP + lane) * 8;
            if (i < C) {
                float a[8], b[8], g[8], o[8];
                unpack8(a, xv[j]); unpack8(b, dv[j]); load8(g, w + i);
                if (dres) load8(o, dres + (size_t)row * C + i);
                else for (int k = 0; k < 8; k++) o[k] = 0.f;
                for (int k = 0; k < 8; k++) {
                    float xh = a[k] * r;
                    o[k] += r * (b[k] * g[k] - xh * dot);
                    acc[j][k] += b[k] * xh;
                }
                store8(dx + (size_t)row * C + i, o);
            }
        }
    }
    for (int wv = 0; wv < warps; wv++) {
        if (wid == wv) {
#pragma unroll
            for (int j = 0; j < VPL; j++) {
                int i = (j * WARP + lane) * 8;
                if (i < C)
                    for (int k = 0; k < 8; k++) red[i + k] = (wv ? red[i + k] : 0.f) + acc[j][k];
            }
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < C; i += blockDim.x) part[(size_t)blockIdx.x * C + i] = red[i];
}

/* Rows wider than 2048: the row is read twice (the second time from cache) and each
 * block sums dw in shared memory with atomics (order not fixed), then writes its partial. */
__global__ void rmsnorm_bwd_wide_k(bf16 *dx, float *part, const bf16 *dy, const bf16 *x, const bf16 *w,
                                   const float *rstd, const bf16 *dres, int N, int C)
{
    extern __shared__ float dw_s[];
    for (int i = threadIdx.x; i < C; i += blockDim.x) dw_s[i] = 0.f;
    __syncthreads();
    int warps = blockDim.x / WARP, lane = threadIdx.x % WARP;
    for (int row = blockIdx.x * warps + threadIdx.x / WARP; row < N; row += gridDim.x * warps) {
        const bf16 *xr = x + (size_t)row * C, *dyr = dy + (size_t)row * C;
        float r = rstd[row];
        float dot = 0.f;   /* sum_c (dy*w) * xhat */
        for (int i = lane * 8; i < C; i += WARP * 8) {
            float a[8], b[8], g[8];
            load8(a, xr + i); load8(b, dyr + i); load8(g, w + i);
            for (int k = 0; k < 8; k++) dot += b[k] * g[k] * a[k] * r;
        }
        dot = warp_sum(dot) / C;
        for (int i = lane * 8; i < C; i += WARP * 8) {
            float a[8], b[8], g[8], o[8];
            load8(a, xr + i); load8(b, dyr + i); load8(g, w + i);
            if (dres) load8(o, dres + (size_t)row * C + i);
            else for (int k = 0; k < 8; k++) o[k] = 0.f;
            for (int k = 0; k < 8; k++) {
                float xh = a[k] * r;
                o[k] += r * (b[k] * g[k] - xh * dot);
                atomicAdd(&dw_s[i + k], b[k] * xh);
            }
            store8(dx + (size_t)row * C + i, o);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < C; i += blockDim.x) part[(size_t)blockIdx.x * C + i] = dw_s[i];
}

/* dst[c] += sum over p < P of part[p*M + c], in the order p = 0, 1, ...: 32 columns per
 * block, 32 lanes each summing every 32nd partial, then lane sums added in lane order. */
__global__ void colsum_finish_k(float *dst, const float *part, int P, int M)
{
    __shared__ float red[32][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.f;
    if (col < M)
        for (int p = threadIdx.y; p < P; p += 32) s += part[(size_t)p * M + col];
    red[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < M) {
        float t = 0.f;
        for (int k = 0; k < 32; k++) t += red[k][threadIdx.x];
        dst[col] += t;
    }
}

static void colsum_finish(float *dst, const float *part, int P, int M, cudaStream_t s)
{
    colsum_finish_k<<<(M + 31) / 32, dim3(32, 32), 0, s>>>(dst, part, P, M);
}

#define RMS_BWD_MAX_BLOCKS 512
#define BIAS_GRAD_SPLITS 64

static int sm_count(void)
{
    static int n = 0;
    if (!n) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) !=
            cudaSuccess || n < 1)
            n = 132;
    }
    return n;
}

extern "C" size_t k_colsum_scratch(int C, int M)
{
    size_t a = (size_t)RMS_BWD_MAX_BLOCKS * C, b = (size_t)BIAS_GRAD_SPLITS * M;
    return a > b ? a : b;
}

extern "C" void k_rmsnorm_fwd(bf16_t *out, float *rstd, const bf16_t *x, const bf16_t *w,
                              int N, int C, float eps, kstream_t s)
{
    rmsnorm_fwd_k<<<blocks_for(N, 8), 256, 0, s>>>((bf16 *)out, rstd, (const bf16 *)x, (const bf16 *)w, N, C, eps);
}
extern "C" void k_rmsnorm_bwd(bf16_t *dx, float *dw, const bf16_t *dy, const bf16_t *x, const bf16_t *w,
                              const float *rstd, const bf16_t *dres, int N, int C, float *scratch, kstream_t s)
{
    int blocks = (N + 7) / 8, cap = 2 * sm_count();
    if (cap > RMS_BWD_MAX_BLOCKS) cap = RMS_BWD_MAX_BLOCKS;
    if (blocks > cap) blocks = cap;
    bf16 *o = (bf16 *)dx;
    const bf16 *g = (const bf16 *)dy, *xx = (const bf16 *)x, *ww = (const bf16 *)w, *r = (const bf16 *)dres;
    int vpl = (C + WARP * 8 - 1) / (WARP * 8);
    if (vpl <= 1) rmsnorm_bwd_k<1><<<blocks, 256, 0, s>>>(o, scratch, g, xx, ww, rstd, r, N, C);
    else if (vpl <= 2) rmsnorm_bwd_k<2><<<blocks, 256, 0, s>>>(o, scratch, g, xx, ww, rstd, r, N, C);
    else if (vpl <= 4) rmsnorm_bwd_k<4><<<blocks, 256, 0, s>>>(o, scratch, g, xx, ww, rstd, r, N, C);
    else if (vpl <= 6) rmsnorm_bwd_k<6><<<blocks, 256, 0, s>>>(o, scratch, g, xx, ww, rstd, r, N, C);
    else if (vpl <= 8) rmsnorm_bwd_k<8><<<blocks, 256, 0, s>>>(o, scratch, g, xx, ww, rstd, r, N, C);
    else rmsnorm_bwd_wide_k<<<blocks, 256, C * sizeof(float), s>>>(o, scratch, g, xx, ww, rstd, r, N, C);
    colsum_finish(dw, scratch, blocks, C, s);
}

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

/* ---- per-head RMSNorm (Qwen3 q_norm / k_norm) ---- */

#define HEAD_NORM_BLOCKS 256   /* fixed: the dw partials are summed in block order */
#define HEAD_NORM_MAXV 8       /* D / 32 values per lane: D <= 256 */

/* One warp per (token, head) row; lane j holds elements j, j+32, ... of the head. */
__global__ void __launch_bounds__(256) head_norm_fwd_k(bf16 *__restrict__ out, const bf16 *__restrict__ raw,
                                                        const bf16 *__restrict__ w, int N, int H, int KV, int D,
                                                        float eps)
{
    int heads = H + 2 * KV, lane = threadIdx.x % WARP, per = D / WARP;
    size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    if (row >= (size_t)N * heads) return;
    int hh = (int)(row % heads);
    const bf16 *x = raw + row * D;
    bf16 *y = out + row * D;
    float v[HEAD_NORM_MAXV], ss = 0.f;
    for (int k = 0; k < per; k++) { v[k] = __bfloat162float(x[lane + k * WARP]); ss += v[k] * v[k]; }
    if (hh >= H + KV) {   /* v head: moved only */
        for (int k = 0; k < per; k++) y[lane + k * WARP] = x[lane + k * WARP];
        return;
    }
    for (int o = WARP / 2; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float r = rsqrtf(ss / (float)D + eps);
    const bf16 *ww = w + (hh < H ? 0 : D);
    for (int k = 0; k < per; k++) y[lane + k * WARP] = __float2bfloat16(v[k] * r * __bfloat162float(ww[lane + k * WARP]));
}

/* dx = r * (g*w - xhat * mean(g*w*xhat)), xhat = x*r; dw += g*xhat. Block b takes
 * rows b, b + gridDim.x, ... (warp by warp); its per-lane dw sums go to
 * part[b][0..2D) (q heads, then k heads) in warp order. */
__global__ void __launch_bounds__(256) head_norm_bwd_k(bf16 *__restrict__ dqkv, float *__restrict__ part,
                                                        const bf16 *__restrict__ raw, const bf16 *__restrict__ w,
                                                        int N, int H, int KV, int D, float eps)
{
    __shared__ float red[256 / WARP][2 * 256];
    int heads = H + 2 * KV, lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    int per = D / WARP;
    float dwq[HEAD_NORM_MAXV], dwk[HEAD_NORM_MAXV];
    for (int k = 0; k < HEAD_NORM_MAXV; k++) dwq[k] = dwk[k] = 0.f;
    size_t rows = (size_t)N * (H + KV);   /* the q and k heads of every token */
    for (size_t q = (size_t)blockIdx.x * nw + wid; q < rows; q += (size_t)gridDim.x * nw) {
        size_t n = q / (H + KV);
        int hh = (int)(q % (H + KV));
        size_t row = n * heads + hh;
        const bf16 *x = raw + row * D;
        bf16 *g = dqkv + row * D;
        const bf16 *ww = w + (hh < H ? 0 : D);
        float xv[HEAD_NORM_MAXV], gw[HEAD_NORM_MAXV], gv[HEAD_NORM_MAXV], ss = 0.f, dot = 0.f;
        for (int k = 0; k < per; k++) {
            int i = lane + k * WARP;
            xv[k] = __bfloat162float(x[i]);
            gv[k] = __bfloat162float(g[i]);
            gw[k] = gv[k] * __bfloat162float(ww[i]);
            ss += xv[k] * xv[k];
        }
        for (int o = WARP / 2; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        float r = rsqrtf(ss / (float)D + eps);
        for (int k = 0; k < per; k++) dot += gw[k] * xv[k] * r;
        for (int o = WARP / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        dot /= (float)D;
        for (int k = 0; k < per; k++) {
            float xh = xv[k] * r;
            g[lane + k * WARP] = __float2bfloat16(r * (gw[k] - xh * dot));
            if (hh < H) dwq[k] += gv[k] * xh;
            else dwk[k] += gv[k] * xh;
        }
    }
    for (int k = 0; k < per; k++) {
        red[wid][lane + k * WARP] = dwq[k];
        red[wid][D + lane + k * WARP] = dwk[k];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * D; i += blockDim.x) {
        float s = 0.f;
        for (int k = 0; k < nw; k++) s += red[k][i];
        part[(size_t)blockIdx.x * 2 * D + i] = s;
    }
}

extern "C" void k_head_norm_fwd(bf16_t *out, const bf16_t *raw, const bf16_t *w, int N, int H, int KV, int D,
                                float eps, kstream_t s)
{
    size_t threads = (size_t)N * (H + 2 * KV) * WARP;
    head_norm_fwd_k<<<blocks_for(threads, 256), 256, 0, s>>>((bf16 *)out, (const bf16 *)raw, (const bf16 *)w, N, H,
                                                              KV, D, eps);
}

extern "C" void k_head_norm_bwd(bf16_t *dqkv, float *dw, const bf16_t *raw, const bf16_t *w, int N, int H, int KV,
                                int D, float eps, float *scratch, kstream_t s)
{
    head_norm_bwd_k<<<HEAD_NORM_BLOCKS, 256, 0, s>>>((bf16 *)dqkv, scratch, (const bf16 *)raw, (const bf16 *)w, N, H,
                                                      KV, D, eps);
    colsum_finish(dw, scratch, HEAD_NORM_BLOCKS, 2 * D, s);
}

extern "C" size_t k_head_norm_scratch(int D) { return (size_t)HEAD_NORM_BLOCKS * 2 * D; }

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
    int splits = BIAS_GRAD_SPLITS < N ? BIAS_GRAD_SPLITS : N;
    dim3 grid((M / 8 + WARP - 1) / WARP, splits), block(WARP, 8);
    bias_grad_part_k<<<grid, block, 0, s>>>(scratch, (const bf16 *)dy, N, M);
    colsum_finish(dbias, scratch, splits, M, s);
}

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

/* ---- SwiGLU ---- */

__global__ void swiglu_fwd_k(bf16 *h, const bf16 *gu, int N, int F)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)N * F) return;
    size_t n = i / F, c = i % F;
    float g[8], u[8], o[8];
    load8(g, gu + n * 2 * F + c);
    load8(u, gu + n * 2 * F + F + c);
    for (int k = 0; k < 8; k++) o[k] = g[k] / (1.f + __expf(-g[k])) * u[k];
    store8(h + i, o);
}

__global__ void swiglu_bwd_k(bf16 *dgu, const bf16 *dh, const bf16 *gu, int N, int F)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)N * F) return;
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
}

extern "C" void k_swiglu_fwd(bf16_t *h, const bf16_t *gu, int N, int F, kstream_t s)
{
    swiglu_fwd_k<<<blocks_for((size_t)N * F / 8, 256), 256, 0, s>>>((bf16 *)h, (const bf16 *)gu, N, F);
}
extern "C" void k_swiglu_bwd(bf16_t *dgu, const bf16_t *dh, const bf16_t *gu, int N, int F, kstream_t s)
{
    swiglu_bwd_k<<<blocks_for((size_t)N * F / 8, 256), 256, 0, s>>>((bf16 *)dgu, (const bf16 *)dh,
                                                                      (const bf16 *)gu, N, F);
}

/* ---- fused softmax cross-entropy: one block per row ---- */

#define CE_THREADS 512

__global__ void cross_entropy_k(bf16 *logits, float *loss, const int *targets, int V, float grad_scale)
{
    __shared__ float red_m[CE_THREADS / WARP], red_s[CE_THREADS / WARP];
    int row = blockIdx.x, tid = threadIdx.x, lane = tid % WARP, wid = tid / WARP;
    bf16 *x = logits + (size_t)row * V;
    int tgt = targets[row];
    if (tgt < 0) {
        if (tid == 0) loss[row] = 0.f;
        if (grad_scale != 0.f) {
            float z[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int j = tid * 8; j < V; j += CE_THREADS * 8) store8(x + j, z);
        }
        return;
    }
    float m = -INFINITY, sum = 0.f;
    for (int j = tid * 8; j < V; j += CE_THREADS * 8) {
        float f[8];
        load8(f, x + j);
        float lm = f[0];
        for (int k = 1; k < 8; k++) lm = fmaxf(lm, f[k]);
        if (lm > m) { sum *= __expf(m - lm); m = lm; }
        for (int k = 0; k < 8; k++) sum += __expf(f[k] - m);
    }
    float mw = warp_max(m);
    sum = (m == -INFINITY) ? 0.f : sum * __expf(m - mw);
    sum = warp_sum(sum);
    if (lane == 0) { red_m[wid] = mw; red_s[wid] = sum; }
    __syncthreads();
    float M = red_m[0];
    for (int w = 1; w < CE_THREADS / WARP; w++) M = fmaxf(M, red_m[w]);
    float S = 0.f;
    for (int w = 0; w < CE_THREADS / WARP; w++) S += red_s[w] * __expf(red_m[w] - M);
    float xt = __bfloat162float(x[tgt]);
    __syncthreads();   /* everyone has read x[tgt] before it is overwritten */
    if (tid == 0) loss[row] = logf(S) + M - xt;
    if (grad_scale == 0.f) return;
    float inv = 1.f / S;
    for (int j = tid * 8; j < V; j += CE_THREADS * 8) {
        float f[8];
        load8(f, x + j);
        for (int k = 0; k < 8; k++) {
            float p = __expf(f[k] - M) * inv;
            f[k] = (p - (j + k == tgt ? 1.f : 0.f)) * grad_scale;
        }
        store8(x + j, f);
    }
}

extern "C" void k_cross_entropy(bf16_t *logits, float *loss, const int *targets, int rows, int V,
                                float grad_scale, kstream_t s)
{
    cross_entropy_k<<<rows, CE_THREADS, 0, s>>>((bf16 *)logits, loss, targets, V, grad_scale);
}

/* ---- reductions ---- */

__global__ void sum_add_k(float *acc, const float *x, int n)
{
    __shared__ float part[32];
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    s = warp_sum(s);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)blockDim.x / WARP; w++) t += part[w];
        *acc += t;
    }
}

extern "C" void k_sum_add(float *acc, const float *x, int n, kstream_t s)
{
    sum_add_k<<<1, 1024, 0, s>>>(acc, x, n);
}

#define SUMSQ_BLOCKS 1024

/* 16-byte loads when x is 16-byte aligned (the tail, or an unaligned x, element-wise). */
__global__ void sumsq_part_k(float *part, const float *x, size_t n)
{
    __shared__ float red[32];
    float s = 0.f;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = ((uintptr_t)x % 16 == 0) ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 v = ((const float4 *)x)[i];
        s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride) s += x[i] * x[i];
    s = warp_sum(s);
    if (threadIdx.x % WARP == 0) red[threadIdx.x / WARP] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)blockDim.x / WARP; w++) t += red[w];
        part[blockIdx.x] = t;
    }
}

extern "C" int k_sumsq_scratch(void) { return SUMSQ_BLOCKS; }

extern "C" void k_sumsq(float *out, float *scratch, const float *x, size_t n, kstream_t s)
{
    sumsq_part_k<<<SUMSQ_BLOCKS, 256, 0, s>>>(scratch, x, n);
    cudaMemsetAsync(out, 0, sizeof(float), s);
    sum_add_k<<<1, 1024, 0, s>>>(out, scratch, SUMSQ_BLOCKS);
}

/* ---- AdamW (torch.optim.AdamW semantics, decoupled decay) ---- */

typedef struct {
    float lr, b1, b2, eps, wd, bc1, bc2, scale;
    size_t goff, decay_end;
} AdamArgs;

static __device__ __forceinline__ float adam_one(float *p, float g, float *m, float *v, size_t gi, const AdamArgs &a)
{
    g *= a.scale;
    float mi = a.b1 * *m + (1.f - a.b1) * g;
    float vi = a.b2 * *v + (1.f - a.b2) * g * g;
    *m = mi; *v = vi;
    float x = *p;
    if (gi < a.decay_end) x *= 1.f - a.lr * a.wd;
    x -= (a.lr / a.bc1) * mi / (sqrtf(vi) / sqrtf(a.bc2) + a.eps);
    *p = x;
    return x;
}

/* The step is memory-bound (fp32 master, gradient and moments: 16 bytes read and
 * 14 written per parameter): groups of 4 elements through 16-byte accesses when
 * every array is aligned for it, element-wise otherwise and for the tail. */
__global__ void adamw_k(float *master, bf16 *param, const float *grad, float *m, float *v, size_t n, AdamArgs a,
                        const float *sumsq, float grad_mult, float clip)
{
    a.scale = grad_mult;
    if (clip > 0.f) {
        float norm = sqrtf(*sumsq) * grad_mult;
        a.scale *= fminf(1.f, clip / (norm + 1e-6f));
    }
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    int aligned = ((uintptr_t)master | (uintptr_t)grad | (uintptr_t)m | (uintptr_t)v) % 16 == 0 &&
                  (uintptr_t)param % 8 == 0;
    size_t n4 = aligned ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 p4 = ((float4 *)master)[i], g4 = ((const float4 *)grad)[i];
        float4 m4 = ((float4 *)m)[i], v4 = ((float4 *)v)[i];
        size_t gi = a.goff + 4 * i;
        float y0 = adam_one(&p4.x, g4.x, &m4.x, &v4.x, gi, a);
        float y1 = adam_one(&p4.y, g4.y, &m4.y, &v4.y, gi + 1, a);
        float y2 = adam_one(&p4.z, g4.z, &m4.z, &v4.z, gi + 2, a);
        float y3 = adam_one(&p4.w, g4.w, &m4.w, &v4.w, gi + 3, a);
        ((float4 *)master)[i] = p4;
        ((float4 *)m)[i] = m4;
        ((float4 *)v)[i] = v4;
        __nv_bfloat162 lo = __floats2bfloat162_rn(y0, y1), hi = __floats2bfloat162_rn(y2, y3);
        uint2 packed = make_uint2(*(uint32_t *)&lo, *(uint32_t *)&hi);
        ((uint2 *)param)[i] = packed;
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        param[i] = __float2bfloat16(adam_one(&master[i], grad[i], &m[i], &v[i], a.goff + i, a));
}

extern "C" void k_adamw(float *master, bf16_t *param, const float *grad, float *m, float *v, size_t n,
                        size_t goff, size_t decay_end, float lr, float b1, float b2, float eps, float wd,
                        float bc1, float bc2, const float *sumsq, float grad_mult, float clip, kstream_t s)
{
    unsigned blocks = blocks_for(n / 4 + 1, 256);
    if (blocks > 132 * 8) blocks = 132 * 8;
    AdamArgs a = {lr, b1, b2, eps, wd, bc1, bc2, 1.f, goff, decay_end};
    adamw_k<<<blocks, 256, 0, s>>>(master, (bf16 *)param, grad, m, v, n, a, sumsq, grad_mult, clip);
}

/* ---- init and conversion ---- */

static __device__ __forceinline__ uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A normal deviate from the element index alone (Box-Muller): the same seed gives the
 * same weights on every rank and every run. */
__global__ void init_normal_k(float *x, size_t n, uint64_t seed, float std)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = splitmix64(seed ^ splitmix64(i));
        float u1 = ((r >> 40) + 1) * (1.0f / 16777217.0f);
        float u2 = ((r >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        x[i] = std * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    }
}
__global__ void fill_k(float *x, size_t n, float value)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = value;
}
__global__ void f32_to_bf16_k(bf16 *out, const float *in, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(in[i]);
}
__global__ void bf16_to_f32_k(float *out, const bf16 *in, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __bfloat162float(in[i]);
}

static unsigned grid_for(size_t n)
{
    unsigned b = blocks_for(n, 256);
    return b > 132 * 32 ? 132 * 32 : b;
}
extern "C" void k_init_normal(float *x, size_t n, uint64_t seed, float std, kstream_t s)
{
    init_normal_k<<<grid_for(n), 256, 0, s>>>(x, n, seed, std);
}
extern "C" void k_fill(float *x, size_t n, float value, kstream_t s)
{
    fill_k<<<grid_for(n), 256, 0, s>>>(x, n, value);
}
extern "C" void k_f32_to_bf16(bf16_t *out, const float *in, size_t n, kstream_t s)
{
    f32_to_bf16_k<<<grid_for(n), 256, 0, s>>>((bf16 *)out, in, n);
}
extern "C" void k_bf16_to_f32(float *out, const bf16_t *in, size_t n, kstream_t s)
{
    bf16_to_f32_k<<<grid_for(n), 256, 0, s>>>(out, (const bf16 *)in, n);
}
