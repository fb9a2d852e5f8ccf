/* kernels_convert.cu — parameter initialisation (HF's normal init, constant fill), fp32 <-> bf16
 * conversion, and fp32 <-> split master weights (master_split.h). */
#include "kernels_common.cuh"
#include "master_split.h"

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

__global__ void master_split_k(bf16 *param, uint16_t *lo, const float *in, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t bits = __float_as_uint(in[i]);
        uint16_t hi = ms_hi(bits);
        param[i] = __ushort_as_bfloat16(hi);
        if (lo) lo[i] = ms_lo(bits, hi);
    }
}
__global__ void master_join_k(float *out, const bf16 *param, const uint16_t *lo, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __uint_as_float(ms_join(__bfloat16_as_ushort(param[i]), lo[i]));
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
extern "C" void k_master_split(bf16_t *param, uint16_t *lo, const float *in, size_t n, kstream_t s)
{
    master_split_k<<<grid_for(n), 256, 0, s>>>((bf16 *)param, lo, in, n);
}
extern "C" void k_master_join(float *out, const bf16_t *param, const uint16_t *lo, size_t n, kstream_t s)
{
    master_join_k<<<grid_for(n), 256, 0, s>>>(out, (const bf16 *)param, lo, n);
}
