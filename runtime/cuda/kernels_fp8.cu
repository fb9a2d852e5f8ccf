/* kernels_fp8.cu — per-tensor FP8 quantisation for the projection GEMMs
 * (precision = fp8, model_cuda.c): the absolute maximum of a bf16 tensor, and its
 * E4M3 or E5M2 copy, row-major and/or transposed, scaled so that the maximum lands
 * in the format's top binade.
 *
 * Current scaling (the scale comes from this tensor's own maximum, not from a
 * history of earlier steps): nothing to carry across steps or checkpoints, no
 * overflow when the activations jump, and the same bits on a resumed run. The
 * scale is a power of two, so scaling is exact and so is the dequantisation
 * scale cuBLASLt multiplies back. The maximum is an atomicMax of float bits:
 * max is order-free, so the result does not depend on the launch. */
#include <cuda_fp8.h>
#include "kernels_common.cuh"

#define FP8_E4M3_MAX 448.f
#define FP8_E5M2_MAX 57344.f

/* amax[0] = max(amax[0], max |x|) over n elements (n a multiple of 8, x 16-byte aligned). */
__global__ void fp8_amax_k(float *amax, const bf16 *x, size_t n8)
{
    float mx = 0.f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        float f[8];
        load8(f, x + i * 8);
        for (int k = 0; k < 8; k++) mx = fmaxf(mx, fabsf(f[k]));
    }
    block_amax_commit(amax, mx);
}

/* The power of two that puts amax in the format's top binade (1 for 0, inf, NaN). */
static __device__ __forceinline__ float fp8_scale(float amax, float fmax)
{
    if (!(amax > 0.f) || !isfinite(amax)) return 1.f;
    int e;
    frexpf(fmax / amax, &e);          /* fmax/amax = f * 2^e, f in [0.5, 1) */
    e -= 1;                           /* 2^e <= fmax/amax */
    e = e < -120 ? -120 : e > 120 ? 120 : e;
    return ldexpf(1.f, e);
}

static __device__ __forceinline__ uint8_t to_fp8(float v, int e5m2)
{
    return e5m2 ? (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2)
                : (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

/* One 64 x 64 tile per block (256 threads, 8 elements each per pass, two passes):
 * out[r, c] and outT[c, r] = fp8(x[r, c] * scale). Either output may be NULL.
 * rows, cols: multiples of 8 (the transposed stores write 8 rows at a time). */
#define QT 64
__global__ void __launch_bounds__(256) fp8_quant_k(uint8_t *out, uint8_t *outT, float *scale_inv, const bf16 *x,
                                                   int rows, int cols, const float *amax, int e5m2)
{
    __shared__ uint8_t tile[QT][QT + 8];
    float s = fp8_scale(*amax, e5m2 ? FP8_E5M2_MAX : FP8_E4M3_MAX);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && scale_inv) *scale_inv = 1.f / s;
    int r0 = blockIdx.y * QT, c0 = blockIdx.x * QT;
    int tc = (threadIdx.x & 7) * 8, tr = threadIdx.x >> 3;   /* 8 threads per row of 64, 32 rows a pass */
    for (int pass = 0; pass < 2; pass++) {
        int r = r0 + tr + pass * 32, c = c0 + tc;
        if (r >= rows || c >= cols) continue;
        float f[8];
        load8(f, x + (size_t)r * cols + c);
        uint8_t q[8];
        for (int k = 0; k < 8; k++) q[k] = to_fp8(f[k] * s, e5m2);
        if (out) *(uint2 *)(out + (size_t)r * cols + c) = *(const uint2 *)q;
        for (int k = 0; k < 8; k++) tile[tr + pass * 32][tc + k] = q[k];
    }
    if (!outT) return;
    __syncthreads();
    /* transposed: thread writes 8 consecutive rows (bytes) of one column */
    for (int pass = 0; pass < 2; pass++) {
        int c = c0 + tr + pass * 32, r = r0 + tc;
        if (c >= cols || r >= rows) continue;
        uint8_t q[8];
        for (int k = 0; k < 8; k++) q[k] = tile[tc + k][tr + pass * 32];
        *(uint2 *)(outT + (size_t)c * rows + r) = *(const uint2 *)q;
    }
}

/* The same for rows and cols multiples of 16, in 128 x 64 tiles, every global
 * access whole 32-byte sectors (ncu on the kernel it replaced, 2026-12-04: half of
 * each loaded sector unused, 21 of 32 bytes of each stored one, 8-way bank
 * conflicts on the tile; 2.67 TB/s at [16384, 11008] on the H200):
 *  - loads: 8 threads per row, 16 bytes each (a warp reads 4 whole 128-byte rows),
 *    4 rows a thread in flight;
 *  - row-major stores: the same threads, 8 bytes each (4 whole 64-byte rows a warp);
 *  - the tile keeps 8-byte units, unit u of row r at u ^ ((r / 16) % 8), so the
 *    transposed reads (lanes over 8 runs of 16 rows, 4 columns) hit 8 distinct
 *    banks and the 8-byte tile stores of two rows fill the 32 banks once;
 *  - transposed stores: 8 threads per column, 16 consecutive rows each (a warp
 *    writes 4 whole 128-byte column runs). */
#define QR 128
#define QC 64
__global__ void __launch_bounds__(256) fp8_quant16_k(uint8_t *out, uint8_t *outT, float *scale_inv, const bf16 *x,
                                                     int rows, int cols, const float *amax, int e5m2)
{
    __shared__ __align__(16) uint2 tile[QR][QC / 8];   /* [row][8-byte unit, swizzled] */
    float s = fp8_scale(*amax, e5m2 ? FP8_E5M2_MAX : FP8_E4M3_MAX);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && scale_inv) *scale_inv = 1.f / s;
    int r0 = blockIdx.y * QR, c0 = blockIdx.x * QC;
    int tr = threadIdx.x >> 3, u = threadIdx.x & 7, c = c0 + u * 8;   /* rows tr + 32 p, columns c .. c+7 */
    uint4 v[4];
#pragma unroll
    for (int p = 0; p < 4; p++) {
        int r = r0 + tr + 32 * p;
        v[p] = make_uint4(0, 0, 0, 0);
        if (r < rows && c < cols) v[p] = *(const uint4 *)(x + (size_t)r * cols + c);
    }
#pragma unroll
    for (int p = 0; p < 4; p++) {
        int rt = tr + 32 * p, r = r0 + rt;
        float f[8];
        unpack8(f, v[p]);
        uint2 q;
        uint8_t *qb = (uint8_t *)&q;
        for (int k = 0; k < 8; k++) qb[k] = to_fp8(f[k] * s, e5m2);
        if (out && r < rows && c < cols) *(uint2 *)(out + (size_t)r * cols + c) = q;
        tile[rt][u ^ ((rt >> 4) & 7)] = q;
    }
    if (!outT) return;
    __syncthreads();
    /* transposed: task = (column, run of 16 rows); lanes: 8 runs x 4 columns */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, run = lane & 7;
#pragma unroll
    for (int p = 0; p < 2; p++) {
        int tcol = (warp + 8 * p) * 4 + (lane >> 3), cc = c0 + tcol, r = r0 + run * 16;
        if (cc >= cols || r >= rows) continue;
        int unit = (tcol >> 3) ^ run, byte = tcol & 7;
        uint4 q;
        uint8_t *qb = (uint8_t *)&q;
        for (int k = 0; k < 16; k++) qb[k] = ((const uint8_t *)&tile[run * 16 + k][unit])[byte];
        *(uint4 *)(outT + (size_t)cc * rows + r) = q;
    }
}

extern "C" void k_fp8_amax(float *amax, const bf16_t *x, size_t n, kstream_t s)
{
    size_t n8 = n / 8;
    unsigned b = blocks_for(n8, 256);
    unsigned cap = (unsigned)sm_count() * 8;
    fp8_amax_k<<<b < cap ? b : cap, 256, 0, s>>>(amax, (const bf16 *)x, n8);
}

extern "C" void k_fp8_quant(uint8_t *out, uint8_t *outT, float *scale_inv, const bf16_t *x, int rows, int cols,
                            const float *amax, int e5m2, kstream_t s)
{
    if (rows % 16 == 0 && cols % 16 == 0) {
        dim3 grid((cols + QC - 1) / QC, (rows + QR - 1) / QR);
        fp8_quant16_k<<<grid, 256, 0, s>>>(out, outT, scale_inv, (const bf16 *)x, rows, cols, amax, e5m2);
        return;
    }
    dim3 grid((cols + QT - 1) / QT, (rows + QT - 1) / QT);
    fp8_quant_k<<<grid, 256, 0, s>>>(out, outT, scale_inv, (const bf16 *)x, rows, cols, amax, e5m2);
}
