/* kernels_loss.cu — the fused softmax cross-entropy over a chunk of logits (loss and, in place, its
 * gradient), and the summed loss. */
#include "kernels_common.cuh"

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
