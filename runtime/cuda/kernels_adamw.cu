/* kernels_adamw.cu — the gradient norm (deterministic two-stage sum of squares) and AdamW with
 * clipping (torch.optim.AdamW semantics, decoupled decay). */
#include "kernels_common.cuh"

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
