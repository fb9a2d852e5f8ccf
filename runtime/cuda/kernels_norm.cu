/* kernels_norm.cu — RMSNorm forward (one warp per row) and backward (a block per group of rows), Qwen3's
 * per-head q/k RMSNorm, and the fixed-order column sums their weight gradients
 * (and the qkv bias's) finish with. */
#include "kernels_common.cuh"

/* ---- RMSNorm: one warp per row ---- */

/* amax (precision = fp8; NULL otherwise): the output's absolute maximum as stored,
 * maxed into *amax for the quantiser of the GEMM that reads it (k_fp8_amax's result
 * over out, bit for bit). A warp past the last row still joins the block's commit. */
__global__ void rmsnorm_fwd_k(bf16 *out, float *rstd, const bf16 *x, const bf16 *w, int N, int C, float eps,
                              float *amax)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    float mx = 0.f;
    if (row < N) {
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
            if (amax) mx = fmaxf(mx, max_abs8_stored(f));
        }
    }
    if (amax) block_amax_commit(amax, mx);   /* amax is the same for the whole grid */
}


/* RMSNorm backward for rows up to RMS_COLS_MAX wide, a block per row at a time:
 * thread t owns columns 8t..8t+7 of every row (C/8 threads, rounded up to a warp),
 * reads x and dy once, and keeps its columns' dw sums in registers over all the
 * block's rows. The row's dot product is a block reduction: each warp's sum, then
 * the warps' sums added in warp order by every thread (red is double-buffered: one
 * barrier a row). The block writes one partial dw row; colsum_finish_k adds the
 * partials in block order: deterministic, no atomics. 64 registers, no spills, so
 * 2048 threads an SM. (One warp per row held C/256 x 8 floats of dw per lane: at
 * C = 2048 its registers allowed 8 warps an SM, and wider rows kept their partials
 * in global memory: 12.0 ms of a 297 ms 7B micro-batch, 7x the traffic bound,
 * 2026-12-04. Two or four rows a barrier need 92-124 registers.) */
#define RMS_COLS_MAX 8192
__global__ void __launch_bounds__(1024) rmsnorm_bwd_k(bf16 *dx, float *part, const bf16 *dy, const bf16 *x,
                                                      const bf16 *w, const float *rstd, const bf16 *dres,
                                                      int N, int C, float *amax)
{
    __shared__ float red[2][WARP];
    int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    int c = threadIdx.x * 8, on = c < C, buf = 0;
    float g[8], acc[8], mx = 0.f;
    for (int k = 0; k < 8; k++) { g[k] = 0.f; acc[k] = 0.f; }
    if (on) load8(g, w + c);
    for (int row = blockIdx.x; row < N; row += gridDim.x, buf ^= 1) {
        float a[8], b[8], d = 0.f;
        for (int k = 0; k < 8; k++) a[k] = b[k] = 0.f;
        if (on) { load8(a, x + (size_t)row * C + c); load8(b, dy + (size_t)row * C + c); }
        for (int k = 0; k < 8; k++) d += b[k] * g[k] * a[k];   /* sum_c (dy*w) * x */
        d = warp_sum(d);
        if (lane == 0) red[buf][wid] = d;
        __syncthreads();
        if (!on) continue;
        float dot = 0.f, rr = rstd[row], o[8];
        for (int k = 0; k < nw; k++) dot += red[buf][k];
        dot = dot * rr / C;
        if (dres) load8(o, dres + (size_t)row * C + c);
        else for (int k = 0; k < 8; k++) o[k] = 0.f;
        for (int k = 0; k < 8; k++) {
            float xh = a[k] * rr;
            o[k] += rr * (b[k] * g[k] - xh * dot);
            acc[k] += b[k] * xh;
        }
        store8(dx + (size_t)row * C + c, o);
        if (amax) mx = fmaxf(mx, max_abs8_stored(o));
    }
    if (on)
        for (int k = 0; k < 8; k++) part[(size_t)blockIdx.x * C + c + k] = acc[k];
    if (amax) block_amax_commit(amax, mx);
}

/* Rows wider than RMS_COLS_MAX: the row is read twice (the second time from cache). Each
 * warp sums its rows' dw into its own partial row of part (rows in a fixed order,
 * each lane its own columns), and colsum_finish adds the warps' partials in order:
 * the same bits every run (a shared-memory atomicAdd per row left the order of the
 * warps' additions to the scheduler). part holds gridDim.x * warps rows of C. */
__global__ void rmsnorm_bwd_wide_k(bf16 *dx, float *part, const bf16 *dy, const bf16 *x, const bf16 *w,
                                   const float *rstd, const bf16 *dres, int N, int C, float *amax)
{
    float mx = 0.f;
    int warps = blockDim.x / WARP, lane = threadIdx.x % WARP;
    float *dw = part + ((size_t)blockIdx.x * warps + threadIdx.x / WARP) * C;
    for (int i = lane * 8; i < C; i += WARP * 8)
        for (int k = 0; k < 8; k++) dw[i + k] = 0.f;
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
                dw[i + k] += b[k] * xh;
            }
            store8(dx + (size_t)row * C + i, o);
            if (amax) mx = fmaxf(mx, max_abs8_stored(o));
        }
    }
    if (amax) block_amax_commit(amax, mx);
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

void colsum_finish(float *dst, const float *part, int P, int M, cudaStream_t s)
{
    colsum_finish_k<<<(M + 31) / 32, dim3(32, 32), 0, s>>>(dst, part, P, M);
}


int sm_count(void)
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
    size_t a = (size_t)LLMC_CUDA_RMS_BWD_MAX_BLOCKS * C, b = (size_t)LLMC_CUDA_BIAS_GRAD_SPLITS * M;
    return a > b ? a : b;
}

extern "C" void k_rmsnorm_fwd(bf16_t *out, float *rstd, const bf16_t *x, const bf16_t *w,
                              int N, int C, float eps, float *amax, kstream_t s)
{
    rmsnorm_fwd_k<<<blocks_for(N, 8), 256, 0, s>>>((bf16 *)out, rstd, (const bf16 *)x, (const bf16 *)w, N, C, eps,
                                                   amax);
}
extern "C" void k_rmsnorm_bwd(bf16_t *dx, float *dw, const bf16_t *dy, const bf16_t *x, const bf16_t *w,
                              const float *rstd, const bf16_t *dres, int N, int C, float *scratch, float *amax,
                              kstream_t s)
{
    bf16 *o = (bf16 *)dx;
    const bf16 *g = (const bf16 *)dy, *xx = (const bf16 *)x, *ww = (const bf16 *)w, *r = (const bf16 *)dres;
    int blocks;
    if (C <= RMS_COLS_MAX) {
        int threads = (C / 8 + WARP - 1) / WARP * WARP;
        int cap = sm_count() * (2048 / threads);
        blocks = N < cap ? N : cap;
        if (blocks > LLMC_CUDA_RMS_BWD_MAX_BLOCKS) blocks = LLMC_CUDA_RMS_BWD_MAX_BLOCKS;
        rmsnorm_bwd_k<<<blocks, threads, 0, s>>>(o, scratch, g, xx, ww, rstd, r, N, C, amax);
    } else {   /* one partial row per warp: 8 per block, within the scratch's MAX_BLOCKS rows */
        blocks = (N + 7) / 8;
        if (blocks > LLMC_CUDA_RMS_BWD_MAX_BLOCKS / 8) blocks = LLMC_CUDA_RMS_BWD_MAX_BLOCKS / 8;
        rmsnorm_bwd_wide_k<<<blocks, 256, 0, s>>>(o, scratch, g, xx, ww, rstd, r, N, C, amax);
        blocks *= 8;
    }
    colsum_finish(dw, scratch, blocks, C, s);
}


/* ---- per-head RMSNorm (Qwen3 q_norm / k_norm) ---- */

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
    for (int k = 0; k < per; k++)
        y[lane + k * WARP] = __float2bfloat16(v[k] * r * __bfloat162float(ww[lane + k * WARP]));
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
    head_norm_bwd_k<<<LLMC_CUDA_HEAD_NORM_BLOCKS, 256, 0, s>>>((bf16 *)dqkv, scratch, (const bf16 *)raw,
                                                               (const bf16 *)w, N, H, KV, D, eps);
    colsum_finish(dw, scratch, LLMC_CUDA_HEAD_NORM_BLOCKS, 2 * D, s);
}

extern "C" size_t k_head_norm_scratch(int D) { return (size_t)LLMC_CUDA_HEAD_NORM_BLOCKS * 2 * D; }
