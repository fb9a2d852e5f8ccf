/* kernels_loss.cu — the fused softmax cross-entropy over a chunk of logits (loss and, in place, its
 * gradient), each row's argmax (held-out evaluation), and the summed loss. */
#include "kernels_common.cuh"

/* ---- fused softmax cross-entropy: one block per row ---- */

#define CE_THREADS 512

/* amax (FP8 LM head, else NULL): max |dlogits| as stored, maxed in (as k_fp8_amax
 * over the chunk would: a masked row's zeros add nothing). */
__global__ void cross_entropy_k(bf16 *logits, float *loss, const int *targets, int V, float grad_scale,
                                float *amax)
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
    float inv = 1.f / S, mx = 0.f;
    for (int j = tid * 8; j < V; j += CE_THREADS * 8) {
        float f[8];
        load8(f, x + j);
        for (int k = 0; k < 8; k++) {
            float p = __expf(f[k] - M) * inv;
            f[k] = (p - (j + k == tgt ? 1.f : 0.f)) * grad_scale;
        }
        mx = fmaxf(mx, max_abs8_stored(f));
        store8(x + j, f);
    }
    if (amax) block_amax_commit(amax, mx);
}

extern "C" void k_cross_entropy(bf16_t *logits, float *loss, const int *targets, int rows, int V,
                                float grad_scale, float *amax, kstream_t s)
{
    cross_entropy_k<<<rows, CE_THREADS, 0, s>>>((bf16 *)logits, loss, targets, V, grad_scale, amax);
}

/* ---- each row's argmax (held-out greedy decoding): one block per row ---- */

#define ARGMAX_THREADS 256

/* (x, i) beats (y, j): a value beats no value (i < 0: only NaN seen), a greater
 * value wins, equal values go to the lower index -- so the reduction's result is
 * the first index of the row's greatest non-NaN value, as logits_argmax's scan. */
static __device__ __forceinline__ bool argmax_beats(float x, int i, float y, int j)
{
    return i >= 0 && (j < 0 || x > y || (x == y && i < j));
}

__global__ void argmax_rows_k(const bf16 *logits, int V, uint32_t *out)
{
    __shared__ float red_v[ARGMAX_THREADS / WARP];
    __shared__ int red_i[ARGMAX_THREADS / WARP];
    const bf16 *x = logits + (size_t)blockIdx.x * V;
    int tid = threadIdx.x, lane = tid % WARP, wid = tid / WARP;
    float best = -INFINITY;
    int bi = -1;
    for (int v = tid; v < V; v += ARGMAX_THREADS) {   /* increasing v: strict > keeps the first */
        float f = __bfloat162float(x[v]);
        if (!isnan(f) && (bi < 0 || f > best)) { best = f; bi = v; }
    }
    for (int o = WARP / 2; o > 0; o /= 2) {
        float ov = __shfl_down_sync(0xffffffffu, best, o);
        int oi = __shfl_down_sync(0xffffffffu, bi, o);
        if (argmax_beats(ov, oi, best, bi)) { best = ov; bi = oi; }
    }
    if (lane == 0) { red_v[wid] = best; red_i[wid] = bi; }
    __syncthreads();
    if (tid == 0) {
        for (int w = 1; w < ARGMAX_THREADS / WARP; w++)
            if (argmax_beats(red_v[w], red_i[w], best, bi)) { best = red_v[w]; bi = red_i[w]; }
        out[blockIdx.x] = bi < 0 ? 0u : (uint32_t)bi;   /* a row of NaN: 0, as the scan */
    }
}

extern "C" void k_argmax_rows(const bf16_t *logits, int rows, int V, uint32_t *out, kstream_t s)
{
    argmax_rows_k<<<rows, ARGMAX_THREADS, 0, s>>>((const bf16 *)logits, V, out);
}

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
