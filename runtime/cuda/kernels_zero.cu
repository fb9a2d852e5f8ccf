/* kernels_zero.cu — what ZeRO-2/3 adds (runtime/cuda/model_cuda.c): a reduced
 * gradient bucket added onto the shard's accumulator, and the gradient norm's
 * sums of squares per fixed block of the flat layout, so that the norm is the
 * same bits whatever the number of ranks (each block lies in one shard). */
#include "kernels_common.cuh"

__global__ void add_f32_k(float *acc, const float *x, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc[i] += x[i];
}

/* One thread block per data block: a fixed reduction tree, so the partial of a
 * block depends on its values only. */
__global__ void sumsq_blocks_k(float *out, const float *x, size_t n, int block)
{
    __shared__ float part[32];
    size_t lo = (size_t)blockIdx.x * block, hi = lo + block < n ? lo + block : n;
    float s = 0.f;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += x[i] * x[i];
    s = warp_sum(s);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)blockDim.x / WARP; w++) t += part[w];
        out[blockIdx.x] = t;
    }
}

extern "C" void k_add_f32(float *acc, const float *x, size_t n, kstream_t s)
{
    if (!n) return;
    unsigned b = blocks_for(n, 256);
    add_f32_k<<<b > 132 * 32 ? 132 * 32 : b, 256, 0, s>>>(acc, x, n);
}

extern "C" void k_sumsq_blocks(float *out, const float *x, size_t n, int block, kstream_t s)
{
    if (!n) return;
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    sumsq_blocks_k<<<(unsigned)nb, 256, 0, s>>>(out, x, n, block);
}
