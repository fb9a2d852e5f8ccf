/* kernels_common.cuh — what the kernel files share (runtime/cuda/kernels_*.cu):
 * warp reductions, 16-byte bf16 loads and stores, launch sizes, and the
 * fixed-order column sums of the norm-weight and bias gradients. */
#ifndef LLMC_KERNELS_COMMON_CUH
#define LLMC_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "cuda_layout.h"
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

/* The largest |v| of 8 values as store8 writes them (rounded to bf16): what a
 * later pass reading the stored tensor would find. */
static __device__ __forceinline__ float max_abs8_stored(const float f[8])
{
    float mx = 0.f;
    for (int i = 0; i < 8; i++) mx = fmaxf(mx, fabsf(__bfloat162float(__float2bfloat16_rn(f[i]))));
    return mx;
}

/* amax[0] = max(amax[0], the block's mx): every thread of the block calls it
 * (it synchronises), each with its own mx (>= 0). Non-negative floats order as
 * their bits, so the atomic max of the bits is the max, whatever the order the
 * blocks arrive in (NaN bits exceed inf's and win). */
static __device__ __forceinline__ void block_amax_commit(float *amax, float mx)
{
    __shared__ float part[32];
    mx = warp_max(mx);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x < 32) {
        mx = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
        mx = warp_max(mx);
        if (threadIdx.x == 0) atomicMax((unsigned *)amax, __float_as_uint(mx));
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

static inline unsigned blocks_for(size_t n, int threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b ? b : 1);
}

/* dst[c] += sum over p < P of part[p*M + c], in the order p = 0, 1, ...
 * (kernels_norm.cu): the last step of every deterministic column sum. */
void colsum_finish(float *dst, const float *part, int P, int M, cudaStream_t s);
/* The device's multiprocessor count (132 when it cannot be read). */
int sm_count(void);

#endif
