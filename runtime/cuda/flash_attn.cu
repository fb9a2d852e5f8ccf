/* flash_attn.cu — fused causal attention (forward and backward) with grouped-query
 * heads and document masks, on bf16 tensor cores (mma.sync m16n8k16, ldmatrix).
 *
 * The FlashAttention-2 scheme: scores never reach device memory. Forward: a block
 * owns 16 queries per warp (4 or 8 warps) of one head, walks the 64-key blocks its
 * rows may see with an online softmax, and writes O ([B,T,H,D], the layout the output
 * projection reads) and the log2-sum-exp per row. Backward: a block owns 16 keys per
 * warp of one query head, walks the 32-query blocks that may see them, recomputes P from
 * the saved log-sum-exp, and accumulates dK, dV in registers (per query head,
 * summed over the group afterwards). dQ either through fp32 atomics from those key
 * blocks (fast, but the order of the additions, and so the bits, change from run to
 * run) or, deterministic, by a second kernel that owns query blocks, walks their key
 * blocks in order and recomputes P and dS (two more matmuls per tile, no atomics).
 *
 * Visibility: key i is visible to query t iff t - pos[t] <= i <= t (shard.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include "flash_attn.h"
#include "cuda_layout.h"

typedef __nv_bfloat16 bf16;

static __device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const bf16 *p)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

static __device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const bf16 *p)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* Lane addresses for ldmatrix.x4 (l = lane):
 *  A operand, smem row-major [m][k], tile (m0,k0):      row m0 + l%8 + ((l/8)%2)*8, col k0 + (l/16)*8
 *  B operand from Bt[n][k] row-major, n-tiles n0,n0+8: row n0 + l%8 + (l/16)*8,     col k0 + ((l/8)%2)*8
 *  B operand from B[k][n] row-major (.trans):          row k0 + l%8 + ((l/8)%2)*8, col n0 + (l/16)*8
 *  A operand from At[k][m] row-major (.trans):         row k0 + l%8 + (l/16)*8,     col m0 + ((l/8)%2)*8 */

static __device__ __forceinline__ void cp_async16(void *s, const void *g)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g));
}
static __device__ __forceinline__ void cp_async4(void *s, const void *g)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(s);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(a), "l"(g));
}
static __device__ __forceinline__ void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void cp_async_wait(void) { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* The same copy through the asynchronous copy engine (completes at cp_async_wait). */
template <int D, int LD>
static __device__ __forceinline__ void tile_async(bf16 *s, const bf16 *g, size_t gstride, int rows)
{
    for (int i = threadIdx.x; i < rows * D / 8; i += blockDim.x) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        cp_async16(&s[r * LD + c], &g[(size_t)r * gstride + c]);
    }
}

/* Dvec[b,h,t] = sum_d dO * O (both [B,T,H,D]); one warp per row. */
__global__ void flash_bwd_pre_k(float *Dvec, const bf16 *O, const bf16 *dO, int B, int T, int H, int D)
{
    long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= (long long)B * T * H) return;
    int h = (int)(row % H), t = (int)((row / H) % T), b = (int)(row / ((long long)H * T));
    float acc = 0.f;
    for (int i = lane * 2; i < D; i += 64) {
        float2 x = __bfloat1622float2(*(const __nv_bfloat162 *)&O[row * D + i]);
        float2 y = __bfloat1622float2(*(const __nv_bfloat162 *)&dO[row * D + i]);
        acc += x.x * y.x + x.y * y.y;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) Dvec[((size_t)b * H + h) * T + t] = acc;
}

/* Forward. The next K/V block is fetched with cp.async into a second shared-memory
 * stage while the current one is used. */
template <int D, int NW>
__global__ void __launch_bounds__(NW * 32) flash_fwd_k(bf16 *O, float *LSE, const bf16 *Q, const bf16 *K,
                                                   const bf16 *V, const int *pos, int H, int KV, int T, float sl2)
{
    constexpr int LD = D + 8, QB = 16 * NW;   /* NW warps x 16 query rows */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16 *Qs = (bf16 *)smem_raw, *Kb = Qs + QB * LD, *Vb = Kb + 2 * 64 * LD;   /* K, V: two stages */
    __shared__ int lo_min;
    int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q4 = lane % 4;
    int qb = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, kvh = h / (H / KV);
    int q0 = qb * QB, kb_last = (q0 + QB - 1) / 64;
    const bf16 *Kg = K + (size_t)(b * KV + kvh) * T * D, *Vg = V + (size_t)(b * KV + kvh) * T * D;
    if (tid == 0) lo_min = q0;
    __syncthreads();
    if (tid < QB) atomicMin(&lo_min, q0 + tid - pos[b * T + q0 + tid]);
    __syncthreads();
    int kb0 = lo_min / 64;
    tile_async<D, LD>(Qs, Q + ((size_t)bh * T + q0) * D, D, QB);
    tile_async<D, LD>(Kb, Kg + (size_t)kb0 * 64 * D, D, 64);
    tile_async<D, LD>(Vb, Vg + (size_t)kb0 * 64 * D, D, 64);
    cp_async_commit();
    uint32_t qf[D / 16][4];
    int t0 = q0 + warp * 16 + g, t1 = t0 + 8;
    int lo0 = t0 - pos[b * T + t0], lo1 = t1 - pos[b * T + t1];
    float o[D / 8][4];
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

    for (int kb = kb0; kb <= kb_last; kb++) {
        int c = (kb - kb0) & 1;
        const bf16 *Ks = Kb + c * 64 * LD, *Vs = Vb + c * 64 * LD;
        if (kb < kb_last) {   /* the next key block streams in while this one is used */
            tile_async<D, LD>(Kb + (c ^ 1) * 64 * LD, Kg + (size_t)(kb + 1) * 64 * D, D, 64);
            tile_async<D, LD>(Vb + (c ^ 1) * 64 * LD, Vg + (size_t)(kb + 1) * 64 * D, D, 64);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (kb == kb0)
            for (int kk = 0; kk < D / 16; kk++)
                ldsm_x4(qf[kk], &Qs[(warp * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + kk * 16 + (lane / 16) * 8]);
        float s[8][4];
        for (int j = 0; j < 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
        for (int kk = 0; kk < D / 16; kk++)
            for (int np = 0; np < 4; np++) {
                uint32_t r[4];
                ldsm_x4(r, &Ks[(np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 + ((lane / 8) % 2) * 8]);
                mma16816(s[2 * np], qf[kk], r[0], r[1]);
                mma16816(s[2 * np + 1], qf[kk], r[2], r[3]);
            }
        float mx0 = -INFINITY, mx1 = -INFINITY;
        for (int j = 0; j < 8; j++)
            for (int e = 0; e < 2; e++) {
                int key = kb * 64 + j * 8 + 2 * q4 + e;
                s[j][e] = (key <= t0 && key >= lo0) ? s[j][e] * sl2 : -INFINITY;
                s[j][2 + e] = (key <= t1 && key >= lo1) ? s[j][2 + e] * sl2 : -INFINITY;
                mx0 = fmaxf(mx0, s[j][e]);
                mx1 = fmaxf(mx1, s[j][2 + e]);
            }
        for (int o_ = 1; o_ <= 2; o_ <<= 1) {
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o_));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o_));
        }
        float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        float base0 = mn0 == -INFINITY ? 0.f : mn0, base1 = mn1 == -INFINITY ? 0.f : mn1;
        float a0 = exp2f(m0 - base0), a1 = exp2f(m1 - base1);
        m0 = mn0; m1 = mn1;
        l0 *= a0; l1 *= a1;
        for (int i = 0; i < D / 8; i++) { o[i][0] *= a0; o[i][1] *= a0; o[i][2] *= a1; o[i][3] *= a1; }
        for (int j = 0; j < 8; j++) {
            s[j][0] = exp2f(s[j][0] - base0); s[j][1] = exp2f(s[j][1] - base0);
            s[j][2] = exp2f(s[j][2] - base1); s[j][3] = exp2f(s[j][3] - base1);
            l0 += s[j][0] + s[j][1];
            l1 += s[j][2] + s[j][3];
        }
        for (int kk = 0; kk < 4; kk++) {
            uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t r[4];
                ldsm_x4_t(r, &Vs[(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + dp * 16 + (lane / 16) * 8]);
                mma16816(o[2 * dp], a, r[0], r[1]);
                mma16816(o[2 * dp + 1], a, r[2], r[3]);
            }
        }
        __syncthreads();   /* buffer c is refilled in the next iteration but one */
    }
    for (int o_ = 1; o_ <= 2; o_ <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, o_);
        l1 += __shfl_xor_sync(0xffffffffu, l1, o_);
    }
    float inv0 = 1.f / l0, inv1 = 1.f / l1;
    bf16 *O0 = O + ((size_t)(b * T + t0) * H + h) * D, *O1 = O + ((size_t)(b * T + t1) * H + h) * D;
    for (int i = 0; i < D / 8; i++) {
        *(__nv_bfloat162 *)&O0[i * 8 + 2 * q4] = __floats2bfloat162_rn(o[i][0] * inv0, o[i][1] * inv0);
        *(__nv_bfloat162 *)&O1[i * 8 + 2 * q4] = __floats2bfloat162_rn(o[i][2] * inv1, o[i][3] * inv1);
    }
    if (q4 == 0) {
        LSE[(size_t)bh * T + t0] = m0 + log2f(l0);
        LSE[(size_t)bh * T + t1] = m1 + log2f(l1);
    }
}

/* Backward, double-buffered the same way over the query blocks (Q, dO, LSE, Dvec, pos). */
template <int D, int NW, bool DQ>
__global__ void __launch_bounds__(NW * 32) flash_bwd_k(float *dKh, float *dVh, float *dQacc, const bf16 *Q,
                                                   const bf16 *K, const bf16 *V, const bf16 *dO, const float *LSE,
                                                   const float *Dvec, const int *pos, int H, int KV, int T,
                                                   float sl2, float scale)
{
    constexpr int LD = D + 8, LDS = 32 + 8, KB = 16 * NW;   /* NW warps x 16 keys */
    static_assert(2 * D / NW >= 16, "each warp takes at least 16 dQ columns");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16 *Ks = (bf16 *)smem_raw, *Vs = Ks + KB * LD, *Qb = Vs + KB * LD, *dOb = Qb + 2 * 32 * LD;
    bf16 *dSt = dOb + 2 * 32 * LD;
    __shared__ __align__(16) float lse_b[2][32], dvec_b[2][32];
    __shared__ __align__(16) int pos_b[2][32];
    int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q4 = lane % 4;
    int kb = blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, kvh = h / (H / KV);
    int k0 = kb * KB;
    tile_async<D, LD>(Ks, K + ((size_t)(b * KV + kvh) * T + k0) * D, D, KB);
    tile_async<D, LD>(Vs, V + ((size_t)(b * KV + kvh) * T + k0) * D, D, KB);
    /* stage 0: the first query block */
    tile_async<D, LD>(Qb, Q + ((size_t)bh * T + k0) * D, D, 32);
    tile_async<D, LD>(dOb, dO + ((size_t)(b * T + k0) * H + h) * D, (size_t)H * D, 32);
    if (tid < 32) {
        cp_async4(&lse_b[0][tid], &LSE[(size_t)bh * T + k0 + tid]);
        cp_async4(&dvec_b[0][tid], &Dvec[(size_t)bh * T + k0 + tid]);
        cp_async4(&pos_b[0][tid], &pos[b * T + k0 + tid]);
    }
    cp_async_commit();
    float dk[D / 8][4], dv[D / 8][4];
    for (int i = 0; i < D / 8; i++)
        for (int e = 0; e < 4; e++) dk[i][e] = dv[i][e] = 0.f;
    int key0 = k0 + warp * 16 + g, key1 = key0 + 8;

    for (int qs = k0, it = 0; qs < T; qs += 32, it++) {
        int c = it & 1;
        const bf16 *Qs = Qb + c * 32 * LD, *dOs = dOb + c * 32 * LD;
        const float *lse_s = lse_b[c], *dvec_s = dvec_b[c];
        const int *pos_s = pos_b[c];
        if (qs + 32 < T) {   /* the next query block streams in while this one is used */
            int qn = qs + 32;
            tile_async<D, LD>(Qb + (c ^ 1) * 32 * LD, Q + ((size_t)bh * T + qn) * D, D, 32);
            tile_async<D, LD>(dOb + (c ^ 1) * 32 * LD, dO + ((size_t)(b * T + qn) * H + h) * D, (size_t)H * D, 32);
            if (tid < 32) {
                cp_async4(&lse_b[c ^ 1][tid], &LSE[(size_t)bh * T + qn + tid]);
                cp_async4(&dvec_b[c ^ 1][tid], &Dvec[(size_t)bh * T + qn + tid]);
                cp_async4(&pos_b[c ^ 1][tid], &pos[b * T + qn + tid]);
            }
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        /* Skip query blocks whose documents all start after these keys. */
        if (!__syncthreads_or(tid < 32 && qs + tid - pos_s[tid] <= k0 + KB - 1)) { __syncthreads(); continue; }

        float st[4][4];
        for (int j = 0; j < 4; j++) st[j][0] = st[j][1] = st[j][2] = st[j][3] = 0.f;
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t a[4];
            ldsm_x4(a, &Ks[(warp * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + kk * 16 + (lane / 16) * 8]);
            for (int np = 0; np < 2; np++) {
                uint32_t r[4];
                ldsm_x4(r, &Qs[(np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 + ((lane / 8) % 2) * 8]);
                mma16816(st[2 * np], a, r[0], r[1]);
                mma16816(st[2 * np + 1], a, r[2], r[3]);
            }
        }
        for (int j = 0; j < 4; j++)
            for (int e = 0; e < 2; e++) {
                int qi = j * 8 + 2 * q4 + e, t = qs + qi, lo = t - pos_s[qi];
                float L = lse_s[qi];
                st[j][e] = (key0 <= t && key0 >= lo) ? exp2f(st[j][e] * sl2 - L) : 0.f;
                st[j][2 + e] = (key1 <= t && key1 >= lo) ? exp2f(st[j][2 + e] * sl2 - L) : 0.f;
            }
        /* dV += P^T dO */
        for (int kk = 0; kk < 2; kk++) {
            uint32_t a[4] = {pack_bf16(st[2 * kk][0], st[2 * kk][1]), pack_bf16(st[2 * kk][2], st[2 * kk][3]),
                             pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                             pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3])};
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t r[4];
                ldsm_x4_t(r, &dOs[(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + dp * 16 + (lane / 16) * 8]);
                mma16816(dv[2 * dp], a, r[0], r[1]);
                mma16816(dv[2 * dp + 1], a, r[2], r[3]);
            }
        }
        /* dP^T = V dO^T, then dS^T = P^T (dP^T - Dvec) */
        float dpt[4][4];
        for (int j = 0; j < 4; j++) dpt[j][0] = dpt[j][1] = dpt[j][2] = dpt[j][3] = 0.f;
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t a[4];
            ldsm_x4(a, &Vs[(warp * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + kk * 16 + (lane / 16) * 8]);
            for (int np = 0; np < 2; np++) {
                uint32_t r[4];
                ldsm_x4(r, &dOs[(np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 + ((lane / 8) % 2) * 8]);
                mma16816(dpt[2 * np], a, r[0], r[1]);
                mma16816(dpt[2 * np + 1], a, r[2], r[3]);
            }
        }
        for (int j = 0; j < 4; j++)
            for (int e = 0; e < 2; e++) {
                float dd = dvec_s[j * 8 + 2 * q4 + e];
                dpt[j][e] = st[j][e] * (dpt[j][e] - dd);
                dpt[j][2 + e] = st[j][2 + e] * (dpt[j][2 + e] - dd);
            }
        /* dK += dS^T Q */
        for (int kk = 0; kk < 2; kk++) {
            uint32_t a[4] = {pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]), pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]),
                             pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                             pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t r[4];
                ldsm_x4_t(r, &Qs[(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + dp * 16 + (lane / 16) * 8]);
                mma16816(dk[2 * dp], a, r[0], r[1]);
                mma16816(dk[2 * dp + 1], a, r[2], r[3]);
            }
        }
        if (!DQ) { __syncthreads(); continue; }   /* dQ by flash_bwd_dq_k */
        for (int j = 0; j < 4; j++) {
            *(uint32_t *)&dSt[(warp * 16 + g) * LDS + j * 8 + 2 * q4] = pack_bf16(dpt[j][0], dpt[j][1]);
            *(uint32_t *)&dSt[(warp * 16 + g + 8) * LDS + j * 8 + 2 * q4] = pack_bf16(dpt[j][2], dpt[j][3]);
        }
        __syncthreads();
        /* dQ[32 x D] += dS K: warp -> 16 query rows x 2D/NW columns */
        constexpr int DC = 2 * D / NW;
        int mq = (warp & 1) * 16, nd = (warp >> 1) * DC;
        float dq[DC / 8][4];
        for (int i = 0; i < DC / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
        for (int kk = 0; kk < NW; kk++) {
            uint32_t a[4];
            ldsm_x4_t(a, &dSt[(kk * 16 + lane % 8 + (lane / 16) * 8) * LDS + mq + ((lane / 8) % 2) * 8]);
            for (int dp = 0; dp < DC / 16; dp++) {
                uint32_t r[4];
                ldsm_x4_t(r, &Ks[(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + nd + dp * 16 + (lane / 16) * 8]);
                mma16816(dq[2 * dp], a, r[0], r[1]);
                mma16816(dq[2 * dp + 1], a, r[2], r[3]);
            }
        }
        float *dst = dQacc + ((size_t)bh * T + qs + mq + g) * D + nd + 2 * q4;
        for (int i = 0; i < DC / 8; i++) {
            atomicAdd(dst + i * 8, dq[i][0] * scale);
            atomicAdd(dst + i * 8 + 1, dq[i][1] * scale);
            atomicAdd(dst + 8 * D + i * 8, dq[i][2] * scale);
            atomicAdd(dst + 8 * D + i * 8 + 1, dq[i][3] * scale);
        }
        __syncthreads();   /* stage c is refilled in the next iteration but one */
    }
    float *dk0 = dKh + ((size_t)bh * T + key0) * D + 2 * q4, *dv0 = dVh + ((size_t)bh * T + key0) * D + 2 * q4;
    for (int i = 0; i < D / 8; i++) {
        *(float2 *)&dk0[i * 8] = make_float2(dk[i][0] * scale, dk[i][1] * scale);
        *(float2 *)&dk0[8 * D + i * 8] = make_float2(dk[i][2] * scale, dk[i][3] * scale);
        *(float2 *)&dv0[i * 8] = make_float2(dv[i][0], dv[i][1]);
        *(float2 *)&dv0[8 * D + i * 8] = make_float2(dv[i][2], dv[i][3]);
    }
}

/* Deterministic dQ: a block owns 16 queries per warp of one head (as the forward)
 * and walks the 64-key blocks they may see, in order, double-buffering K and V:
 * S = Q K^T and dP = dO V^T (16 x 64 per warp), P = exp2(S sl2 - L),
 * dS = P (dP - Dvec), dQ += dS K in registers; dq [B,H,T,D] written once, in bf16. */
template <int D, int NW>
__global__ void __launch_bounds__(NW * 32) flash_bwd_dq_k(bf16 *dq, const bf16 *Q, const bf16 *K, const bf16 *V,
                                                      const bf16 *dO, const float *LSE, const float *Dvec,
                                                      const int *pos, int H, int KV, int T, float sl2, float scale)
{
    constexpr int LD = D + 8, QB = 16 * NW;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16 *Qs = (bf16 *)smem_raw, *dOs = Qs + QB * LD, *Kb = dOs + QB * LD, *Vb = Kb + 2 * 64 * LD;
    __shared__ int lo_min;
    int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q4 = lane % 4;
    int qb = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, kvh = h / (H / KV);
    int q0 = qb * QB, kb_last = (q0 + QB - 1) / 64;
    const bf16 *Kg = K + (size_t)(b * KV + kvh) * T * D, *Vg = V + (size_t)(b * KV + kvh) * T * D;
    if (tid == 0) lo_min = q0;
    __syncthreads();
    if (tid < QB) atomicMin(&lo_min, q0 + tid - pos[b * T + q0 + tid]);   /* integer: order-free */
    __syncthreads();
    int kb0 = lo_min / 64;
    tile_async<D, LD>(Qs, Q + ((size_t)bh * T + q0) * D, D, QB);
    tile_async<D, LD>(dOs, dO + ((size_t)(b * T + q0) * H + h) * D, (size_t)H * D, QB);
    tile_async<D, LD>(Kb, Kg + (size_t)kb0 * 64 * D, D, 64);
    tile_async<D, LD>(Vb, Vg + (size_t)kb0 * 64 * D, D, 64);
    cp_async_commit();
    int t0 = q0 + warp * 16 + g, t1 = t0 + 8;
    int lo0 = t0 - pos[b * T + t0], lo1 = t1 - pos[b * T + t1];
    float L0 = LSE[(size_t)bh * T + t0], L1 = LSE[(size_t)bh * T + t1];
    float dd0 = Dvec[(size_t)bh * T + t0], dd1 = Dvec[(size_t)bh * T + t1];
    float acc[D / 8][4];
    for (int i = 0; i < D / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;

    for (int kb = kb0; kb <= kb_last; kb++) {
        int c = (kb - kb0) & 1;
        const bf16 *Ks = Kb + c * 64 * LD, *Vs = Vb + c * 64 * LD;
        if (kb < kb_last) {
            tile_async<D, LD>(Kb + (c ^ 1) * 64 * LD, Kg + (size_t)(kb + 1) * 64 * D, D, 64);
            tile_async<D, LD>(Vb + (c ^ 1) * 64 * LD, Vg + (size_t)(kb + 1) * 64 * D, D, 64);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        float s[8][4], dp[8][4];
        for (int j = 0; j < 8; j++)
            for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.f;
        for (int kk = 0; kk < D / 16; kk++) {   /* Q and dO fragments re-read from shared memory: fewer registers */
            uint32_t qf[4], of[4];
            ldsm_x4(qf, &Qs[(warp * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + kk * 16 + (lane / 16) * 8]);
            ldsm_x4(of, &dOs[(warp * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + kk * 16 + (lane / 16) * 8]);
            for (int np = 0; np < 4; np++) {
                uint32_t r[4], v[4];
                ldsm_x4(r, &Ks[(np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 + ((lane / 8) % 2) * 8]);
                mma16816(s[2 * np], qf, r[0], r[1]);
                mma16816(s[2 * np + 1], qf, r[2], r[3]);
                ldsm_x4(v, &Vs[(np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 + ((lane / 8) % 2) * 8]);
                mma16816(dp[2 * np], of, v[0], v[1]);
                mma16816(dp[2 * np + 1], of, v[2], v[3]);
            }
        }
        for (int j = 0; j < 8; j++)
            for (int e = 0; e < 2; e++) {
                int key = kb * 64 + j * 8 + 2 * q4 + e;
                float p0 = (key <= t0 && key >= lo0) ? exp2f(s[j][e] * sl2 - L0) : 0.f;
                float p1 = (key <= t1 && key >= lo1) ? exp2f(s[j][2 + e] * sl2 - L1) : 0.f;
                s[j][e] = p0 * (dp[j][e] - dd0);
                s[j][2 + e] = p1 * (dp[j][2 + e] - dd1);
            }
        for (int kk = 0; kk < 4; kk++) {   /* dQ += dS K: dS as the A operand, straight from registers */
            uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            for (int dp_ = 0; dp_ < D / 16; dp_++) {
                uint32_t r[4];
                ldsm_x4_t(r, &Ks[(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + dp_ * 16 + (lane / 16) * 8]);
                mma16816(acc[2 * dp_], a, r[0], r[1]);
                mma16816(acc[2 * dp_ + 1], a, r[2], r[3]);
            }
        }
        __syncthreads();   /* buffer c is refilled in the next iteration */
    }
    bf16 *d0 = dq + ((size_t)bh * T + t0) * D + 2 * q4, *d1 = d0 + 8 * D;
    for (int i = 0; i < D / 8; i++) {
        *(__nv_bfloat162 *)&d0[i * 8] = __floats2bfloat162_rn(acc[i][0] * scale, acc[i][1] * scale);
        *(__nv_bfloat162 *)&d1[i * 8] = __floats2bfloat162_rn(acc[i][2] * scale, acc[i][3] * scale);
    }
}

/* dq = dQacc (bf16); dk, dv = sum over the G query heads of each kv head. */
__global__ void flash_bwd_post_k(bf16 *dq, bf16 *dk, bf16 *dv, const float *dQacc, const float *dKh,
                                 const float *dVh, int B, int H, int KV, int T, int D)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * KV * T * D;
    if (dQacc && i < nq) dq[i] = __float2bfloat16(dQacc[i]);
    if (i < nk) {
        int G = H / KV;
        size_t td = (size_t)T * D;
        size_t bk = i / td, r = i % td;           /* bk = b*KV + kvh */
        size_t b = bk / KV, kvh = bk % KV;
        float sk = 0.f, sv = 0.f;
        for (int gi = 0; gi < G; gi++) {
            size_t j = ((b * H) + kvh * G + gi) * td + r;
            sk += dKh[j];
            sv += dVh[j];
        }
        dk[i] = __float2bfloat16(sk);
        dv[i] = __float2bfloat16(sv);
    }
}

template <int D>
static size_t fwd_smem(int nw) { return ((size_t)16 * nw + 4 * 64) * (D + 8) * sizeof(bf16); }
template <int D>
static size_t bwd_smem(int nw)
{
    size_t kb = 16 * (size_t)nw;
    return (2 * kb * (D + 8) + 4 * 32 * (D + 8) + kb * 40) * sizeof(bf16);
}

/* Wide blocks (8 warps: 128 queries forward, 128 keys backward) halve the K/V loads
 * per query and the dQ atomics per key; LLMC_FLASH_FWD_WARPS=4 / LLMC_FLASH_BWD_WARPS=4
 * select 64-row blocks (for comparison). */
static int use_wide(const char *env, int D, int T)
{
    const char *e = getenv(env);
    return D >= 64 && T % 128 == 0 && !(e && e[0] == '4');
}

template <int D>
static void launch_fwd(bf16_t *O, float *LSE, const bf16_t *Q, const bf16_t *K, const bf16_t *V, const int *pos,
                       int B, int H, int KV, int T, cudaStream_t s)
{
    constexpr int NWW = D >= 64 ? 8 : 4;
    static int configured;
    if (!configured) {
        cudaFuncSetAttribute(flash_fwd_k<D, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fwd_smem<D>(4));
        cudaFuncSetAttribute(flash_fwd_k<D, NWW>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fwd_smem<D>(NWW));
        configured = 1;
    }
    float sl2 = 1.4426950408889634f / sqrtf((float)D);
    if (use_wide("LLMC_FLASH_FWD_WARPS", D, T))
        flash_fwd_k<D, NWW><<<dim3(T / (16 * NWW), B * H), NWW * 32, fwd_smem<D>(NWW), s>>>(
            (bf16 *)O, LSE, (const bf16 *)Q, (const bf16 *)K, (const bf16 *)V, pos, H, KV, T, sl2);
    else
        flash_fwd_k<D, 4><<<dim3(T / 64, B * H), 128, fwd_smem<D>(4), s>>>(
            (bf16 *)O, LSE, (const bf16 *)Q, (const bf16 *)K, (const bf16 *)V, pos, H, KV, T, sl2);
}

template <int D>
static size_t dq_smem(int nw) { return ((size_t)2 * 16 * nw + 4 * 64) * (D + 8) * sizeof(bf16); }

/* det: dQ by flash_bwd_dq_k (same bits every run) instead of the atomics. */
template <int D>
static void launch_bwd(bf16_t *dq, float *dKh, float *dVh, float *dQacc, const bf16_t *Q, const bf16_t *K,
                       const bf16_t *V, const bf16_t *dO, const float *LSE, const float *Dvec, const int *pos, int B,
                       int H, int KV, int T, int det, cudaStream_t s)
{
    constexpr int NWW = D >= 64 ? 8 : 4;
    static int configured;
    if (!configured) {
        cudaFuncSetAttribute(flash_bwd_k<D, 4, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bwd_smem<D>(4));
        cudaFuncSetAttribute(flash_bwd_k<D, NWW, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)bwd_smem<D>(NWW));
        cudaFuncSetAttribute(flash_bwd_k<D, 4, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)bwd_smem<D>(4));
        cudaFuncSetAttribute(flash_bwd_k<D, NWW, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)bwd_smem<D>(NWW));
        cudaFuncSetAttribute(flash_bwd_dq_k<D, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_smem<D>(4));
        cudaFuncSetAttribute(flash_bwd_dq_k<D, NWW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)dq_smem<D>(NWW));
        configured = 1;
    }
    float scale = 1.f / sqrtf((float)D), sl2 = scale * 1.4426950408889634f;
    int wide = use_wide("LLMC_FLASH_BWD_WARPS", D, T), nw = wide ? NWW : 4;
    dim3 grid(T / (16 * nw), B * H);
    const bf16 *q = (const bf16 *)Q, *k = (const bf16 *)K, *v = (const bf16 *)V, *dout = (const bf16 *)dO;
    if (wide && det)
        flash_bwd_k<D, NWW, false><<<grid, nw * 32, bwd_smem<D>(nw), s>>>(dKh, dVh, dQacc, q, k, v, dout, LSE, Dvec,
                                                                          pos, H, KV, T, sl2, scale);
    else if (wide)
        flash_bwd_k<D, NWW, true><<<grid, nw * 32, bwd_smem<D>(nw), s>>>(dKh, dVh, dQacc, q, k, v, dout, LSE, Dvec,
                                                                         pos, H, KV, T, sl2, scale);
    else if (det)
        flash_bwd_k<D, 4, false><<<grid, nw * 32, bwd_smem<D>(nw), s>>>(dKh, dVh, dQacc, q, k, v, dout, LSE, Dvec,
                                                                        pos, H, KV, T, sl2, scale);
    else
        flash_bwd_k<D, 4, true><<<grid, nw * 32, bwd_smem<D>(nw), s>>>(dKh, dVh, dQacc, q, k, v, dout, LSE, Dvec,
                                                                       pos, H, KV, T, sl2, scale);
    if (!det) return;
    int fwide = use_wide("LLMC_FLASH_FWD_WARPS", D, T), fnw = fwide ? NWW : 4;
    dim3 fgrid(T / (16 * fnw), B * H);
    if (fwide)
        flash_bwd_dq_k<D, NWW><<<fgrid, fnw * 32, dq_smem<D>(fnw), s>>>((bf16 *)dq, q, k, v, dout, LSE, Dvec, pos, H,
                                                                       KV, T, sl2, scale);
    else
        flash_bwd_dq_k<D, 4><<<fgrid, fnw * 32, dq_smem<D>(fnw), s>>>((bf16 *)dq, q, k, v, dout, LSE, Dvec, pos, H,
                                                                     KV, T, sl2, scale);
}

extern "C" int k_flash_supported(int D, int T) { return llmc_flash_shape_ok(D, T); }   /* contract/cuda_layout.h */

extern "C" void k_flash_fwd(bf16_t *O, float *LSE, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                            const int *pos, int B, int H, int KV, int T, int D, kstream_t s)
{
    if (D == 32) launch_fwd<32>(O, LSE, Q, K, V, pos, B, H, KV, T, s);
    else if (D == 64) launch_fwd<64>(O, LSE, Q, K, V, pos, B, H, KV, T, s);
    else launch_fwd<128>(O, LSE, Q, K, V, pos, B, H, KV, T, s);
}

extern "C" void k_flash_bwd(bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                            const bf16_t *O, const bf16_t *dO, const float *LSE, const int *pos, float *scratch,
                            int B, int H, int KV, int T, int D, int deterministic, kstream_t s)
{
    size_t n = (size_t)B * H * T * D;
    float *dQacc = deterministic ? NULL : scratch, *dKh = deterministic ? scratch : scratch + n;
    float *dVh = dKh + n, *Dvec = dVh + n;
    if (!deterministic) cudaMemsetAsync(dQacc, 0, n * sizeof(float), s);
    long long rows = (long long)B * T * H;
    flash_bwd_pre_k<<<(unsigned)((rows + 7) / 8), 256, 0, s>>>(Dvec, (const bf16 *)O, (const bf16 *)dO, B, T, H, D);
    if (D == 32) launch_bwd<32>(dq, dKh, dVh, dQacc, Q, K, V, dO, LSE, Dvec, pos, B, H, KV, T, deterministic, s);
    else if (D == 64) launch_bwd<64>(dq, dKh, dVh, dQacc, Q, K, V, dO, LSE, Dvec, pos, B, H, KV, T, deterministic, s);
    else launch_bwd<128>(dq, dKh, dVh, dQacc, Q, K, V, dO, LSE, Dvec, pos, B, H, KV, T, deterministic, s);
    flash_bwd_post_k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((bf16 *)dq, (bf16 *)dk, (bf16 *)dv,
                                                                 dQacc, dKh, dVh, B, H, KV, T, D);
}

extern "C" size_t k_flash_bwd_scratch_floats(int B, int H, int T, int D, int deterministic)
{
    return (size_t)B * H * T * D * (deterministic ? 2 : 3) + (size_t)B * H * T;
}
