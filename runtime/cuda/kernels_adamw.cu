/* kernels_adamw.cu — the gradient norm (deterministic two-stage sum of squares), AdamW with
 * clipping (torch.optim.AdamW semantics, decoupled decay), on fp32 or split master weights, with
 * fp32 or bf16 moments (bf16: updated in fp32, stored with bf16_round.h's stochastic rounding). */
#include "kernels_common.cuh"
#include "master_split.h"
#include "bf16_round.h"

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

extern "C" int k_sumsq_scratch(void) { return LLMC_CUDA_SUMSQ_BLOCKS; }

extern "C" void k_sumsq(float *out, float *scratch, const float *x, size_t n, kstream_t s)
{
    sumsq_part_k<<<LLMC_CUDA_SUMSQ_BLOCKS, 256, 0, s>>>(scratch, x, n);
    cudaMemsetAsync(out, 0, sizeof(float), s);
    k_sum_add(out, scratch, LLMC_CUDA_SUMSQ_BLOCKS, s);   /* kernels_loss.cu: partials in order */
}

/* ---- AdamW (torch.optim.AdamW semantics, decoupled decay) ---- */

typedef struct {
    float lr, b1, b2, eps, wd, bc1, bc2, scale;
    size_t goff, decay_end;
    uint32_t seed, step;        /* bf16 moments: the rounding's random bits */
} AdamArgs;

/* Moments: fp32 arrays (float), or bf16 bits (uint16_t) rounded stochastically
 * by element index, so the result is the same for any launch shape or shard. */
static __device__ __forceinline__ float mom_load(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float mom_load(const uint16_t *p, size_t i) { return __uint_as_float((uint32_t)p[i] << 16); }
static __device__ __forceinline__ void mom_store(float *p, size_t i, float x, size_t, uint32_t, const AdamArgs &)
{
    p[i] = x;
}
static __device__ __forceinline__ void mom_store(uint16_t *p, size_t i, float x, size_t gi, uint32_t which,
                                                 const AdamArgs &a)
{
    p[i] = br_round(__float_as_uint(x), br_bits(a.seed, a.step, gi, which));
}
static __device__ __forceinline__ float4 mom_load4(const float *p, size_t i) { return ((const float4 *)p)[i]; }
static __device__ __forceinline__ float4 mom_load4(const uint16_t *p, size_t i)
{
    uint2 u = ((const uint2 *)p)[i];
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
}
static __device__ __forceinline__ void mom_store4(float *p, size_t i, float4 x, size_t, uint32_t, const AdamArgs &)
{
    ((float4 *)p)[i] = x;
}
static __device__ __forceinline__ void mom_store4(uint16_t *p, size_t i, float4 x, size_t gi, uint32_t which,
                                                  const AdamArgs &a)
{
    uint32_t r0 = br_round(__float_as_uint(x.x), br_bits(a.seed, a.step, gi, which));
    uint32_t r1 = br_round(__float_as_uint(x.y), br_bits(a.seed, a.step, gi + 1, which));
    uint32_t r2 = br_round(__float_as_uint(x.z), br_bits(a.seed, a.step, gi + 2, which));
    uint32_t r3 = br_round(__float_as_uint(x.w), br_bits(a.seed, a.step, gi + 3, which));
    ((uint2 *)p)[i] = make_uint2(r0 | r1 << 16, r2 | r3 << 16);
}

static __device__ __forceinline__ float adam_one(float *p, float g, float *m, float *v, size_t gi, const AdamArgs &a)
{   /* m, v: in and out, fp32 (the caller loads and stores them) */
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

/* Where the fp32 master weight lives: an array of its own, with the bf16 working
 * weight written beside it (SPLIT false), or the bf16 weight itself plus the 16
 * bits it drops (SPLIT true, master_split.h: 4 bytes a parameter instead of 6). */
template <bool SPLIT>
static __device__ __forceinline__ float master_load(const float *master, const uint16_t *lo, const bf16 *param,
                                                    size_t i)
{
    if (!SPLIT) return master[i];
    uint32_t bits = ms_join(__bfloat16_as_ushort(param[i]), lo[i]);
    return __uint_as_float(bits);
}
template <bool SPLIT>
static __device__ __forceinline__ void master_store(float *master, uint16_t *lo, bf16 *param, size_t i, float x)
{
    if (!SPLIT) {
        master[i] = x;
        param[i] = __float2bfloat16(x);
        return;
    }
    uint32_t bits = __float_as_uint(x);
    uint16_t hi = ms_hi(bits);
    param[i] = __ushort_as_bfloat16(hi);
    lo[i] = ms_lo(bits, hi);
}

/* The step is memory-bound (fp32 master, gradient and moments: 16 bytes read and
 * 14 written per parameter; split: 16 and 12): groups of 4 elements through
 * 16-byte accesses (8-byte for the bf16 and 16-bit halves) when every array is
 * aligned for it, element-wise otherwise and for the tail. */
template <bool SPLIT, typename Mom>
__global__ void adamw_k(float *master, uint16_t *lo, bf16 *param, const float *grad, Mom *m, Mom *v, size_t n,
                        AdamArgs a, const float *sumsq, float grad_mult, float clip)
{
    a.scale = grad_mult;
    if (clip > 0.f) {
        float norm = sqrtf(*sumsq) * grad_mult;
        a.scale *= fminf(1.f, clip / (norm + 1e-6f));
    }
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    int aligned = ((uintptr_t)grad | (SPLIT ? 0 : (uintptr_t)master)) % 16 == 0 &&
                  ((uintptr_t)m | (uintptr_t)v) % (4 * sizeof(Mom)) == 0 &&
                  ((uintptr_t)param | (SPLIT ? (uintptr_t)lo : 0)) % 8 == 0;
    size_t n4 = aligned ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 p4, g4 = ((const float4 *)grad)[i];
        float4 m4 = mom_load4(m, i), v4 = mom_load4(v, i);
        if (SPLIT) {   /* the bf16 weights are read only here: they are the master's upper halves */
            uint2 w4 = ((const uint2 *)param)[i], l4 = ((const uint2 *)lo)[i];
            p4 = make_float4(__uint_as_float(ms_join(w4.x & 0xffffu, l4.x & 0xffffu)),
                             __uint_as_float(ms_join(w4.x >> 16, l4.x >> 16)),
                             __uint_as_float(ms_join(w4.y & 0xffffu, l4.y & 0xffffu)),
                             __uint_as_float(ms_join(w4.y >> 16, l4.y >> 16)));
        } else {
            p4 = ((const float4 *)master)[i];
        }
        size_t gi = a.goff + 4 * i;
        float y0 = adam_one(&p4.x, g4.x, &m4.x, &v4.x, gi, a);
        float y1 = adam_one(&p4.y, g4.y, &m4.y, &v4.y, gi + 1, a);
        float y2 = adam_one(&p4.z, g4.z, &m4.z, &v4.z, gi + 2, a);
        float y3 = adam_one(&p4.w, g4.w, &m4.w, &v4.w, gi + 3, a);
        mom_store4(m, i, m4, gi, 0, a);
        mom_store4(v, i, v4, gi, 1, a);
        if (SPLIT) {
            uint32_t b0 = __float_as_uint(y0), b1 = __float_as_uint(y1), b2 = __float_as_uint(y2),
                     b3 = __float_as_uint(y3);
            uint16_t h0 = ms_hi(b0), h1 = ms_hi(b1), h2 = ms_hi(b2), h3 = ms_hi(b3);
            ((uint2 *)param)[i] = make_uint2(h0 | (uint32_t)h1 << 16, h2 | (uint32_t)h3 << 16);
            ((uint2 *)lo)[i] = make_uint2(ms_lo(b0, h0) | (uint32_t)ms_lo(b1, h1) << 16,
                                          ms_lo(b2, h2) | (uint32_t)ms_lo(b3, h3) << 16);
        } else {
            ((float4 *)master)[i] = p4;
            __nv_bfloat162 l2 = __floats2bfloat162_rn(y0, y1), h2 = __floats2bfloat162_rn(y2, y3);
            ((uint2 *)param)[i] = make_uint2(*(uint32_t *)&l2, *(uint32_t *)&h2);
        }
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride) {
        float x = master_load<SPLIT>(master, lo, param, i), mi = mom_load(m, i), vi = mom_load(v, i);
        adam_one(&x, grad[i], &mi, &vi, a.goff + i, a);
        mom_store(m, i, mi, a.goff + i, 0, a);
        mom_store(v, i, vi, a.goff + i, 1, a);
        master_store<SPLIT>(master, lo, param, i, x);
    }
}

extern "C" void k_adamw(float *master, uint16_t *master_lo, bf16_t *param, const float *grad, float *m, float *v,
                        size_t n, size_t goff, size_t decay_end, float lr, float b1, float b2, float eps, float wd,
                        float bc1, float bc2, const float *sumsq, float grad_mult, float clip, kstream_t s)
{
    unsigned blocks = blocks_for(n / 4 + 1, 256);
    if (blocks > 132 * 8) blocks = 132 * 8;
    AdamArgs a = {lr, b1, b2, eps, wd, bc1, bc2, 1.f, goff, decay_end, 0, 0};
    if (master_lo)
        adamw_k<true><<<blocks, 256, 0, s>>>(NULL, master_lo, (bf16 *)param, grad, m, v, n, a, sumsq, grad_mult, clip);
    else
        adamw_k<false><<<blocks, 256, 0, s>>>(master, NULL, (bf16 *)param, grad, m, v, n, a, sumsq, grad_mult, clip);
}

extern "C" void k_adamw_bf16(float *master, uint16_t *master_lo, bf16_t *param, const float *grad, uint16_t *m,
                             uint16_t *v, size_t n, size_t goff, size_t decay_end, float lr, float b1, float b2,
                             float eps, float wd, float bc1, float bc2, const float *sumsq, float grad_mult,
                             float clip, uint32_t seed, uint32_t step, kstream_t s)
{
    unsigned blocks = blocks_for(n / 4 + 1, 256);
    if (blocks > 132 * 8) blocks = 132 * 8;
    AdamArgs a = {lr, b1, b2, eps, wd, bc1, bc2, 1.f, goff, decay_end, seed, step};
    if (master_lo)
        adamw_k<true><<<blocks, 256, 0, s>>>(NULL, master_lo, (bf16 *)param, grad, m, v, n, a, sumsq, grad_mult, clip);
    else
        adamw_k<false><<<blocks, 256, 0, s>>>(master, NULL, (bf16 *)param, grad, m, v, n, a, sumsq, grad_mult, clip);
}
