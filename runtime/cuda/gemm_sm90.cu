/* gemm_sm90.cu — bf16 matrix products of our own on Hopper's tensor cores (issue 31's
 * bf16 lever: cuBLASLt runs the projections' narrow shapes and the fp32-accumulating
 * weight gradients at 585-670 TFLOP/s where its wide ones reach 740; docs/PERFORMANCE.md,
 * "The bf16 step at 3B, GEMM by GEMM"). The trainer takes it only under LLMC_SWIGLU_SM90=1,
 * for the two products with SwiGLU in their epilogues (gemm_sm90_swiglu_fwd/bwd), which
 * measure slower in the step than cuBLASLt and the separate kernels (docs/PERFORMANCE.md);
 * the plain products would be taken only where tests/cuda/gemm_sm90_check.c measures
 * them faster than cuBLASLt at the same shape.
 *
 *   D[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C     (gemm.h's row-major form)
 *
 * Persistent clusters of two CTAs walk pairs of 128 x 256 output tiles, one above the
 * other (the pairs grouped by 4 pair rows, so that the clusters running together share
 * their operands in L2). The two tiles of a pair take the same 64 x 256 of B a stage:
 * each CTA loads half of it and multicasts it to both, so that a stage moves 32 KiB
 * from L2 into each SM instead of 48 (at 128 x 256 x 64 a stage, 48 KiB needs ~9 TB/s
 * of L2 bandwidth at 780 TFLOP/s; the unclustered kernel ran at ~620). Warpgroup 0 is
 * the producer: one thread loads 128 x 64 of A and half of B per stage with the Tensor
 * Memory Accelerator (128-byte swizzle) into STAGES shared buffers, signalling each
 * stage's mbarrier by its bytes; a stage is refilled once the consumers of both CTAs
 * have released it. Warpgroups 1 and 2 are the consumers: each multiplies
 * its 64 rows of A by all of B with wgmma (m64n256k16, fp32 accumulators in 128
 * registers a thread), releases a stage once the wgmma after it has been issued and
 * the one reading it has finished, and hands its 64 x 256 tile to the TMA unit through
 * shared memory (sm90_store_tma) before it starts the next.
 * Operand layouts (wgmma takes both from shared memory, K-major or MN-major):
 *   A: transA 0, stored [M,K]: K-major, one 64 x 128 box a stage;
 *      transA 1, stored [K,M]: MN-major, two 64 (M) x 64 (K) boxes;
 *   B: transB 1, stored [N,K]: K-major, two 64 x 128 boxes (one from each CTA);
 *      transB 0, stored [K,N]: MN-major, four 64 (N) x 64 (K) boxes (two from each).
 * The boxes past the matrices' edges are zero-filled by the TMA unit, so M, N and K
 * need not be multiples of the tile; the leading dimensions must be multiples of 8
 * (16-byte rows for the TMA unit), the pointers 16-byte aligned. fp32 accumulation;
 * D bf16 or fp32 (d_f32), C == D or NULL (in place when beta != 0). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <type_traits>
extern "C" {
#include "gemm_sm90.h"
}

#define SM90_BM 128
#define SM90_BN 256
#define SM90_BK 64
#define SM90_STAGES 4
#define SM90_GROUP_M 4              /* pair rows walked together (L2 reuse of B) */
#define SM90_THREADS 384            /* producer warpgroup + two consumer warpgroups */
#define SM90_CONSUMER_WARPS 8       /* a CTA's consumer warps; both CTAs' free a stage */
#define SM90_STAGE_BYTES ((SM90_BM + SM90_BN) * SM90_BK * 2)

/* The dynamic shared memory, 1024-aligned (the 128-byte swizzle's period): ST stages
 * of A and B, and each consumer's EB bytes of epilogue staging. */
template <int ST, int EB>
struct Sm90SmemT {
    __nv_bfloat16 a[ST][SM90_BM * SM90_BK];   /* 16 KiB a stage */
    __nv_bfloat16 b[ST][SM90_BN * SM90_BK];   /* 32 KiB a stage */
    uint8_t out[2][EB];             /* a consumer's D on its way out */
    uint64_t full[ST];              /* the stage's bytes have landed (producer's expect_tx) */
    uint64_t empty[ST];             /* the consumers are done reading it */
    uint64_t gu_full[2][2];         /* EPI_SWIGLU_BWD: consumer c's buffer k holds its g and u */
};
/* The store epilogues (and EPI_SWIGLU_FWD's, as two 8 KiB halves): four stages, 16 KiB
 * of D a consumer. EPI_SWIGLU_BWD: three stages, and two 16 KiB buffers a consumer, each
 * 64 x 64 of g and of u (8 KiB each), filled by the TMA unit while the mainloop runs and
 * overwritten in place by dg and du. */
#define SM90_SW_STAGES 3
typedef Sm90SmemT<SM90_STAGES, 64 * 256> Sm90Smem;
typedef Sm90SmemT<SM90_SW_STAGES, 2 * 16384> Sm90SmemSwiglu;

struct Sm90Params {
    int M, N, K, ldd, d_f32;
    void *D;
    const void *C;
    float alpha, beta;
};

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n"
                 ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_u32(bar)) : "memory");
}

/* Arrives on the barrier at the same shared offset in the cluster's CTA `cta`. */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t cta)
{
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
                 ::"r"(smem_u32(bar)), "r"(cta) : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* Every thread of both CTAs: release what it wrote, acquire what the other wrote. */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

/* Spins until the barrier's phase of this parity has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    } while (!done);
}

/* One box of a 2-D tensor map into shared memory; c0 is the contiguous coordinate. */
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
                 ::"r"(smem_u32(dst)), "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(c0), "r"(c1) : "memory");
}

/* The same box into the same shared offset of every CTA in `mask`, each CTA's barrier
 * at `bar`'s offset counting its bytes. */
__device__ __forceinline__ void tma_load_multicast(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1,
                                                   uint16_t mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4}], [%2], %5;"
                 ::"r"(smem_u32(dst)), "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(mask) : "memory");
}

/* A shared-memory matrix descriptor for wgmma, 128-byte swizzle: lbo is the byte
 * distance between 64-element groups along MN (MN-major operands), sbo between groups
 * of 8 rows (K-major: rows of M/N; MN-major: rows of K). */
__device__ __forceinline__ uint64_t sm90_desc(const void *p, uint32_t lbo, uint32_t sbo)
{
    uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

/* Keeps the compiler from moving accumulator accesses across the asynchronous wgmma. */
__device__ __forceinline__ void fence_acc(float (&d)[128])
{
#pragma unroll
    for (int i = 0; i < 128; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* D[64 x 256] (+)= A[64 x 16] . B[16 x 256]: bf16 from shared memory through the two
 * descriptors, fp32 in registers (d[128], the m64nNk16 accumulator layout); scale_d 0 overwrites
 * d, 1 accumulates; TA/TB 1: the operand is MN-major in shared memory. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},"
        " %128, %129, p, 1, 1, %131, %132;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

/* The tile t's block row and column, grouped SM90_GROUP_M block rows at a time. */
__device__ __forceinline__ void sm90_tile(int t, int num_m, int num_n, int *mb, int *nb)
{
    int per_group = SM90_GROUP_M * num_n, group = t / per_group, first = group * SM90_GROUP_M;
    int size = min(num_m - first, SM90_GROUP_M), r = t % per_group;
    *mb = first + r % size;
    *nb = r / size;
}

/* D's 64 x 256 part of this consumer warpgroup (rows m0.., columns n0..) from the
 * accumulators: d[4j + 2i + c] is row 16 w + lane/4 + 8 i, column 8 j + 2 (lane%4) + c. */
__device__ __forceinline__ void sm90_store(const Sm90Params &p, float (&d)[128], int m0, int n0)
{
    int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
    int r0 = m0 + 16 * w + lane / 4, c0 = n0 + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int r = r0 + 8 * i;
        if (r >= p.M) continue;
        size_t row = (size_t)r * p.ldd;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            int c = c0 + 8 * j;
            if (c >= p.N) continue;
            float v0 = p.alpha * d[4 * j + 2 * i], v1 = p.alpha * d[4 * j + 2 * i + 1];
            if (p.d_f32) {
                float2 *dst = (float2 *)((float *)p.D + row + c);
                if (p.beta != 0.f) {
                    float2 o = *(const float2 *)((const float *)p.C + row + c);
                    v0 += p.beta * o.x; v1 += p.beta * o.y;
                }
                *dst = make_float2(v0, v1);
            } else {
                __nv_bfloat162 *dst = (__nv_bfloat162 *)((__nv_bfloat16 *)p.D + row + c);
                if (p.beta != 0.f) {
                    float2 o = __bfloat1622float2(*(const __nv_bfloat162 *)((const __nv_bfloat16 *)p.C + row + c));
                    v0 += p.beta * o.x; v1 += p.beta * o.y;
                }
                *dst = __floats2bfloat162_rn(v0, v1);
            }
        }
    }
}

/* The epilogues: D from the registers with plain stores (a beta other than 0 and 1, or
 * D not laid out for the TMA unit), or through shared memory and the TMA unit, which
 * writes (beta 0) or adds into (beta 1: a reduction in L2, so D is never read into the
 * SM) whole boxes of 64 rows x 128 bytes asynchronously while the warpgroup goes on to
 * its next tile. The reduction rounds once more for bf16 D (the product is rounded to
 * bf16 before the add, as cuBLASLt's beta = 1 does); for fp32 D it is the plain stores'
 * single rounding of the fp32 sum. */
enum { EPI_DIRECT, EPI_STORE, EPI_ADD, EPI_SWIGLU_BWD, EPI_SWIGLU_FWD };

/* Byte offset of byte b of row r in a 128-byte-swizzled box (rows of 128 bytes, the box
 * 1024-aligned): 16-byte chunk b/16 of row r sits at chunk (b/16) ^ (r%8). */
__device__ __forceinline__ uint32_t swz128(int r, int b) { return r * 128 + ((((b / 16) ^ (r % 8)) * 16) | (b % 16)); }

/* Named barrier `id` over the 128 threads of one warpgroup. */
__device__ __forceinline__ void wg_barrier(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

/* This warpgroup's 64 x 256 of D through its 16 KiB staging buffer, 16 KiB of D at a
 * time (bf16: 128 columns, two 64 x 64 boxes; fp32: 64 columns, two 64 x 32 boxes),
 * 128-byte swizzled (conflict-free writes from the accumulator layout); one thread
 * issues the bulk copies. */
template <int EPI, int F32>
__device__ __forceinline__ void sm90_store_tma(const Sm90Params &p, const CUtensorMap *map_d, uint8_t *out,
                                               float (&d)[128], int m0, int n0, int wg_id)
{
    const int ES = F32 ? 4 : 2, BOXC = 128 / ES, PART = 2 * BOXC, PARTS = 256 / PART;
    int t = threadIdx.x % 128, lane = threadIdx.x % 32, w = t / 32;
    bool leader = t == 0;
#pragma unroll
    for (int h = 0; h < PARTS; h++) {
        /* the buffer is free once the previous copies have read it */
        if (leader) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        wg_barrier(wg_id);
#pragma unroll
        for (int jj = 0; jj < PART / 8; jj++) {
            int j = PART / 8 * h + jj, lc = 8 * jj + 2 * (lane % 4), box = lc / BOXC, cb = lc % BOXC;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                int r = 16 * w + lane / 4 + 8 * i;
                float v0 = p.alpha * d[4 * j + 2 * i], v1 = p.alpha * d[4 * j + 2 * i + 1];
                uint8_t *at = out + box * 64 * 128 + swz128(r, cb * ES);
                if (F32) *(float2 *)at = make_float2(v0, v1);
                else *(__nv_bfloat162 *)at = __floats2bfloat162_rn(v0, v1);
            }
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        wg_barrier(wg_id);
        if (leader) {
            for (int box = 0; box < 2; box++) {
                uint32_t src = smem_u32(out + box * 64 * 128);
                int c0 = n0 + PART * h + BOXC * box;
                if (EPI == EPI_ADD)
                    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];"
                                 ::"l"((uint64_t)map_d), "r"(src), "r"(c0), "r"(m0) : "memory");
                else
                    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                                 ::"l"((uint64_t)map_d), "r"(src), "r"(c0), "r"(m0) : "memory");
            }
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
    }
}

/* EPI_SWIGLU_BWD's quarter q (64 columns) of a consumer's 64 x 256: g and u into its
 * buffer buf, counted on the buffer's barrier. Columns past N are zero-filled by the
 * TMA unit (the maps are N wide), rows past M too. */
__device__ __forceinline__ void sm90_gu_load(uint8_t *buf, uint64_t *bar, const CUtensorMap *map_g,
                                             const CUtensorMap *map_u, int m0, int n0, int q)
{
    mbar_arrive_expect_tx(bar, 2 * 8192);
    tma_load(buf, map_g, bar, n0 + 64 * q, m0);
    tma_load(buf + 8192, map_u, bar, n0 + 64 * q, m0);
}

/* SwiGLU's backward on quarter q of the accumulators (j = 8 q .. 8 q + 7), the product
 * being dh: with g and u from buf (64 x 64 each, 128-byte swizzled rows) and
 * s = sigmoid(g), dg = dh u s (1 + g (1 - s)) and du = dh g s written over them
 * (kernels_swiglu.cu's formulas, on dh unrounded). */
__device__ __forceinline__ void sm90_swiglu_quarter(float alpha, float (&d)[128], uint8_t *buf, int q)
{
    int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
#pragma unroll
    for (int jj = 0; jj < 8; jj++) {
        int j = 8 * q + jj, lc = 8 * jj + 2 * (lane % 4);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int r = 16 * w + lane / 4 + 8 * i;
            uint32_t off = swz128(r, lc * 2);
            __nv_bfloat162 *gp = (__nv_bfloat162 *)(buf + off), *up = (__nv_bfloat162 *)(buf + 8192 + off);
            float2 g = __bfloat1622float2(*gp), u = __bfloat1622float2(*up);
            float h0 = alpha * d[4 * j + 2 * i], h1 = alpha * d[4 * j + 2 * i + 1];
            float s0 = 1.f / (1.f + __expf(-g.x)), s1 = 1.f / (1.f + __expf(-g.y));
            *gp = __floats2bfloat162_rn(h0 * u.x * s0 * (1.f + g.x * (1.f - s0)),
                                        h1 * u.y * s1 * (1.f + g.y * (1.f - s1)));
            *up = __floats2bfloat162_rn(h0 * g.x * s0, h1 * g.y * s1);
        }
    }
}

/* EPI_SWIGLU_FWD's epilogue: the tile's columns 0..127 are g and 128..255 u, both for
 * features n0..n0+127 (the producer loads B's gate and up rows side by side). Each
 * 64-feature piece goes out as three 64 x 64 boxes: g and u rounded to bf16 (gu's two
 * F-wide views), and h = silu(g) u from the rounded values by k_swiglu_fwd's formula,
 * so h is to the bit what that kernel makes of this gu. The boxes are staged
 * alternately in the two 8 KiB halves of the consumer's buffer. */
__device__ __forceinline__ void sm90_swiglu_fwd_store(float alpha, const CUtensorMap *map_g, const CUtensorMap *map_u,
                                                      const CUtensorMap *map_h, uint8_t *out, float (&d)[128], int m0,
                                                      int n0, int F, int wg_id)
{
    int t = threadIdx.x % 128, lane = t % 32, w = t / 32;
    bool leader = t == 0;
#pragma unroll
    for (int pc = 0; pc < 2; pc++) {
        if (n0 + 64 * pc >= F) break;
#pragma unroll
        for (int kind = 0; kind < 3; kind++) {   /* g, u, h */
            uint8_t *buf = out + ((3 * pc + kind) & 1) * 8192;
            /* the half is free once the copy before last has read it (the tile's first:
               once the last tile's have, however many it made) */
            if (leader) {
                if (pc + kind == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                else asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            }
            wg_barrier(wg_id);
#pragma unroll
            for (int jj = 0; jj < 8; jj++) {
                int jg = 8 * pc + jj, ju = 16 + jg, lc = 8 * jj + 2 * (lane % 4);
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    int r = 16 * w + lane / 4 + 8 * i;
                    __nv_bfloat162 g = __floats2bfloat162_rn(alpha * d[4 * jg + 2 * i], alpha * d[4 * jg + 2 * i + 1]);
                    __nv_bfloat162 u = __floats2bfloat162_rn(alpha * d[4 * ju + 2 * i], alpha * d[4 * ju + 2 * i + 1]);
                    __nv_bfloat162 v = g;
                    if (kind == 1) v = u;
                    if (kind == 2) {
                        float2 gf = __bfloat1622float2(g), uf = __bfloat1622float2(u);
                        v = __floats2bfloat162_rn(gf.x / (1.f + __expf(-gf.x)) * uf.x, gf.y / (1.f + __expf(-gf.y)) * uf.y);
                    }
                    *(__nv_bfloat162 *)(buf + swz128(r, lc * 2)) = v;
                }
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            wg_barrier(wg_id);
            if (leader) {
                const CUtensorMap *map = kind == 0 ? map_g : kind == 1 ? map_u : map_h;
                asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                             ::"l"((uint64_t)map), "r"(smem_u32(buf)), "r"(n0 + 64 * pc), "r"(m0) : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            }
        }
    }
}

/* map_b2: EPI_SWIGLU_FWD's up rows of B (map_b then holds the gate rows, each F wide).
 * map_d: D (EPI_SWIGLU_BWD: its first N columns, dg; EPI_SWIGLU_FWD: gu's g columns);
 * map_d2: EPI_SWIGLU_BWD's du columns of D, EPI_SWIGLU_FWD's u columns of gu;
 * map_g, map_u: EPI_SWIGLU_BWD's g and u columns of its input gu; map_h: EPI_SWIGLU_FWD's
 * h. Each N (or F) wide, so that the TMA unit stops at that column; unused ones are
 * copies of map_a. */
template <int TA, int TB, int EPI, int F32>
__global__ void __launch_bounds__(SM90_THREADS, 1)
k_gemm_sm90(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
            const __grid_constant__ CUtensorMap map_b2, const __grid_constant__ CUtensorMap map_d,
            const __grid_constant__ CUtensorMap map_d2, const __grid_constant__ CUtensorMap map_g,
            const __grid_constant__ CUtensorMap map_u, const __grid_constant__ CUtensorMap map_h, Sm90Params p)
{
    const int CL = 2;
    constexpr bool SW = EPI == EPI_SWIGLU_BWD, SF = EPI == EPI_SWIGLU_FWD;
    constexpr int TN = SF ? SM90_BN / 2 : SM90_BN;   /* output columns a tile: SF's are features */
    constexpr int ST = SW ? SM90_SW_STAGES : SM90_STAGES;
    typedef typename std::conditional<SW, Sm90SmemSwiglu, Sm90Smem>::type Smem;
    extern __shared__ uint8_t smem_raw[];
    Smem &s = *(Smem *)(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));
    int wg = threadIdx.x / 128;
    uint32_t rank = cluster_rank();
    if (threadIdx.x == 0) {
        for (int i = 0; i < ST; i++) {
            mbar_init(&s.full[i], 1);
            mbar_init(&s.empty[i], CL * SM90_CONSUMER_WARPS);
        }
        for (int i = 0; i < 4; i++) mbar_init(&s.gu_full[i / 2][i % 2], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync();   /* both CTAs' barriers exist before either loads into or arrives on them */
    int num_m = (p.M + SM90_BM - 1) / SM90_BM, num_n = (p.N + TN - 1) / TN;
    int num_mp = (num_m + CL - 1) / CL, pairs = num_mp * num_n, nk = (p.K + SM90_BK - 1) / SM90_BK;
    int cluster = blockIdx.x / CL, clusters = gridDim.x / CL;
    /* (a CTA whose tile of the pair lies below M computes zeros from the zero-filled
     * boxes and stores nothing: it still loads its half of B for the other) */
    if (wg == 0) {
        /* the producer: one thread issues every load */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            uint32_t it = 0;
            for (int t = cluster; t < pairs; t += clusters) {
                int mp, nb;
                sm90_tile(t, num_mp, num_n, &mp, &nb);
                int m0 = (CL * mp + (int)rank) * SM90_BM, n0 = nb * TN;
                for (int kb = 0; kb < nk; kb++, it++) {
                    int st = it % ST, k0 = kb * SM90_BK;
                    mbar_wait(&s.empty[st], ((it / ST) & 1) ^ 1);
                    mbar_arrive_expect_tx(&s.full[st], SM90_STAGE_BYTES);
                    if (TA) {
                        tma_load(s.a[st], &map_a, &s.full[st], m0, k0);
                        tma_load(s.a[st] + 64 * SM90_BK, &map_a, &s.full[st], m0 + 64, k0);
                    } else {
                        tma_load(s.a[st], &map_a, &s.full[st], k0, m0);
                    }
                    /* this CTA's half of B: columns n0 + 128 rank .. + 127, to both CTAs
                     * (SF: rank 0 the gate rows n0.., rank 1 the up rows n0..) */
                    const CUtensorMap *mbh = SF && rank ? &map_b2 : &map_b;
                    int nh = SF ? n0 : n0 + 128 * (int)rank;
                    if (TB) {
                        for (int g = 0; g < 2; g++)
                            tma_load_multicast(s.b[st] + (2 * rank + g) * 64 * SM90_BK, mbh, &s.full[st], nh + 64 * g, k0, 3);
                    } else {
                        tma_load_multicast(s.b[st] + rank * 128 * SM90_BK, mbh, &s.full[st], k0, nh, 3);
                    }
                }
            }
        }
    } else {
        /* the consumers: warpgroup c takes rows 64 c .. 64 c + 63 of each tile */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        int c = wg - 1;
        bool signals = threadIdx.x % 32 == 0;
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; i++) d[i] = 0.f;
        uint32_t it = 0, gu_phase = 0;   /* bit k: the parity buffer k's barrier completes next */
        bool leader = threadIdx.x % 128 == 0;
        for (int t = cluster; t < pairs; t += clusters) {
            int mp, nb;
            sm90_tile(t, num_mp, num_n, &mp, &nb);
            int m0 = (CL * mp + (int)rank) * SM90_BM + 64 * c, n0 = nb * TN;
            if (SW && leader) {
                /* quarters 0 and 1 come in while the mainloop runs, once the last tile's
                   stores have read the buffers */
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                for (int q = 0; q < 2; q++)
                    if (n0 + 64 * q < p.N)
                        sm90_gu_load(s.out[c] + q * 16384, &s.gu_full[c][q], &map_g, &map_u, m0, n0, q);
            }
            int prev = -1;
            for (int kb = 0; kb < nk; kb++, it++) {
                int st = it % ST;
                mbar_wait(&s.full[st], (it / ST) & 1);
                const __nv_bfloat16 *a = s.a[st] + c * 64 * SM90_BK, *b = s.b[st];
                fence_acc(d);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < SM90_BK / 16; kk++) {
                    /* K-major: the next 16 columns are 32 bytes on in each 128-byte row;
                     * MN-major: 16 rows of 128 bytes on */
                    uint64_t da = TA ? sm90_desc(a + kk * 16 * 64, 0, 1024) : sm90_desc(a + kk * 16, 16, 1024);
                    uint64_t db = TB ? sm90_desc(b + kk * 16 * 64, 64 * SM90_BK * 2, 1024) : sm90_desc(b + kk * 16, 16, 1024);
                    wgmma_m64n256k16<TA, TB>(d, da, db, kb > 0 || kk > 0);
                }
                wgmma_commit();
                wgmma_wait<1>();
                fence_acc(d);
                if (prev >= 0 && signals)
                    {
                    mbar_arrive(&s.empty[prev]);
                    mbar_arrive_cluster(&s.empty[prev], rank ^ 1);
                }
                prev = st;
            }
            wgmma_wait<0>();
            fence_acc(d);
            if (prev >= 0 && signals)
                {
                    mbar_arrive(&s.empty[prev]);
                    mbar_arrive_cluster(&s.empty[prev], rank ^ 1);
                }
            if (EPI == EPI_DIRECT) sm90_store(p, d, m0, n0);
            else if (SW) {
#pragma unroll
                for (int q = 0; q < 4; q++) {   /* unrolled: d's indices must be constants */
                    if (n0 + 64 * q >= p.N) break;
                    int k = q % 2;
                    uint8_t *buf = s.out[c] + k * 16384;
                    mbar_wait(&s.gu_full[c][k], (gu_phase >> k) & 1);
                    gu_phase ^= 1u << k;
                    sm90_swiglu_quarter(p.alpha, d, buf, q);
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    wg_barrier(1 + c);
                    if (leader) {
                        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                                     ::"l"((uint64_t)&map_d), "r"(smem_u32(buf)), "r"(n0 + 64 * q), "r"(m0) : "memory");
                        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                                     ::"l"((uint64_t)&map_d2), "r"(smem_u32(buf + 8192)), "r"(n0 + 64 * q), "r"(m0)
                                     : "memory");
                        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                        if (q + 2 < 4 && n0 + 64 * (q + 2) < p.N) {
                            /* the buffer is free once its stores have read it */
                            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                            sm90_gu_load(buf, &s.gu_full[c][k], &map_g, &map_u, m0, n0, q + 2);
                        }
                    }
                }
            } else if (SF) sm90_swiglu_fwd_store(p.alpha, &map_d, &map_d2, &map_h, s.out[c], d, m0, n0, p.N, 1 + c);
            else sm90_store_tma<EPI, F32>(p, &map_d, s.out[c], d, m0, n0, 1 + c);
        }
        /* the last copies out of shared memory done before the CTA leaves */
        if (EPI != EPI_DIRECT && leader) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    cluster_sync();   /* neither CTA leaves while the other may still arrive on its barriers */
}

/* ---- host side */

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn;
    if (!fn) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
    }
    return fn;
}

/* A matrix of rows x cols (cols contiguous, rows ld elements apart; bf16, or fp32 when
 * f32) as boxes of box_rows x 128 bytes with the 128-byte swizzle. */
static int make_map(CUtensorMap *map, const void *ptr, int rows, int cols, int ld, int box_rows, int f32)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = encode_tiled();
    if (!enc) return -1;
    int es = f32 ? 4 : 2;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * es};
    cuuint32_t box[2] = {(cuuint32_t)(128 / es), (cuuint32_t)box_rows}, estr[2] = {1, 1};
    CUresult r = enc(map, f32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)ptr,
                     dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : -1;
}

extern "C" int gemm_sm90_supported(const GemmArgs *a)
{
    if (a->a_type != GEMM_BF16 || a->b_type != GEMM_BF16 || (a->batch > 1)) return 0;
    if (a->M <= 0 || a->N <= 0 || a->K <= 0 || a->N % 2) return 0;
    if (a->lda % 8 || a->ldb % 8 || a->ldd % 2 || a->ldd < a->N) return 0;
    if ((uintptr_t)a->A % 16 || (uintptr_t)a->B % 16 || (uintptr_t)a->D % 8) return 0;
    if (a->C && a->C != a->D) return 0;
    return 1;
}

static int clusters_cap;         /* gemm_sm90_limit_clusters */
static int clusters_last;        /* the last launch's clusters */

extern "C" void gemm_sm90_limit_clusters(int n) { clusters_cap = n > 0 ? n : 0; }
extern "C" int gemm_sm90_last_clusters(void) { return clusters_last; }

/* fused: 0, EPI_SWIGLU_BWD (gu its input) or EPI_SWIGLU_FWD (h, ldh its second output;
 * the product is gu [M, N = 2F]). */
static int sm90_launch(const GemmArgs *a, int fused, const void *gu, void *h, int ldh, void *stream)
{
    static int sms;
    if (!sms && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) return -1;
    if (!gemm_sm90_supported(a)) return -1;
    int sf = fused == EPI_SWIGLU_FWD, F = a->N / 2;
    int nb = sf ? F : a->N;   /* B's rows (transB 1) or columns a map; SF: gate, then up */
    const __nv_bfloat16 *B2 = (const __nv_bfloat16 *)a->B + (a->transB ? (size_t)F * a->ldb : (size_t)F);
    CUtensorMap ma, mb, mb2;
    /* A: [M,K] (transA 0, boxes of 128 rows) or [K,M] (transA 1, 64 x 64 boxes) */
    int ea = a->transA ? make_map(&ma, a->A, a->K, a->M, a->lda, 64, 0) : make_map(&ma, a->A, a->M, a->K, a->lda, SM90_BM, 0);
    /* B: [N,K] (transB 1, boxes of 128 rows: half a tile) or [K,N] (transB 0, 64 x 64 boxes) */
    int eb = a->transB ? make_map(&mb, a->B, nb, a->K, a->ldb, SM90_BN / 2, 0) : make_map(&mb, a->B, a->K, nb, a->ldb, 64, 0);
    if (ea || eb) return -1;
    mb2 = mb;
    if (sf && (a->transB ? make_map(&mb2, B2, F, a->K, a->ldb, SM90_BN / 2, 0) : make_map(&mb2, B2, a->K, F, a->ldb, 64, 0)))
        return -1;
    Sm90Params p = {a->M, sf ? F : a->N, a->K, a->ldd, a->d_f32, a->D, a->C ? a->C : a->D, a->alpha, a->beta};
    int pairs = ((a->M + 2 * SM90_BM - 1) / (2 * SM90_BM)) * (sf ? (F + SM90_BN / 2 - 1) / (SM90_BN / 2) : (a->N + SM90_BN - 1) / SM90_BN);
    /* beta 0 or 1, D's rows 16-byte multiples and D 16-byte aligned: the TMA epilogue
     * (D as 64-row boxes of 128 bytes); else plain stores */
    int f32 = a->d_f32;
    int epi = fused ? fused
              : (a->beta != 0.f && a->beta != 1.f) || (a->ldd * (f32 ? 4 : 2)) % 16 || (uintptr_t)a->D % 16
                  ? EPI_DIRECT : a->beta != 0.f ? EPI_ADD : EPI_STORE;
    CUtensorMap md = ma, md2 = ma, mg = ma, mu = ma, mh = ma;
    if ((epi == EPI_STORE || epi == EPI_ADD) && make_map(&md, a->D, a->M, a->N, a->ldd, 64, f32)) return -1;
    /* EPI_SWIGLU_BWD: dg, du, g and u as four N-wide views of D and gu ([M, 2N], ldd apart);
       EPI_SWIGLU_FWD: g, u (F-wide views of D = gu) and h; all in 64 x 64 boxes, so that
       the TMA unit stops each at the view's last column */
    int w = sf ? F : a->N;
    if (fused && (make_map(&md, a->D, a->M, w, a->ldd, 64, 0) ||
                  make_map(&md2, (const __nv_bfloat16 *)a->D + w, a->M, w, a->ldd, 64, 0)))
        return -1;
    if (epi == EPI_SWIGLU_BWD &&
        (make_map(&mg, gu, a->M, a->N, a->ldd, 64, 0) || make_map(&mu, (const __nv_bfloat16 *)gu + a->N, a->M, a->N, a->ldd, 64, 0)))
        return -1;
    if (sf && make_map(&mh, h, a->M, F, ldh, 64, 0)) return -1;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(SM90_THREADS);
    cfg.dynamicSmemBytes = (epi == EPI_SWIGLU_BWD ? sizeof(Sm90SmemSwiglu) : sizeof(Sm90Smem)) + 1024;
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    /* TA = transA (MN-major A), TB = !transB (MN-major B). The grid: as many clusters
     * as can be resident at once (not every GPC holds an even number of SMs), since a
     * persistent cluster that waits for a free pair of SMs would double the time. */
#define SM90_LAUNCH(TA, TB, EPI, F32)                                                                        \
    do {                                                                                                     \
        static int resident;                                                                                 \
        if (!resident) {                                                                                     \
            cfg.gridDim = dim3(2 * sms);                                                                     \
            if (cudaFuncSetAttribute(k_gemm_sm90<TA, TB, EPI, F32>, cudaFuncAttributeMaxDynamicSharedMemorySize,  \
                                     (int)cfg.dynamicSmemBytes) != cudaSuccess ||                            \
                cudaOccupancyMaxActiveClusters(&resident, k_gemm_sm90<TA, TB, EPI, F32>, &cfg) != cudaSuccess ||  \
                resident < 1) { resident = 0; return -1; }                                                   \
        }                                                                                                    \
        int n_ = pairs < resident ? pairs : resident;                                                       \
        if (clusters_cap && n_ > clusters_cap) n_ = clusters_cap;                                            \
        clusters_last = n_;                                                                                  \
        cfg.gridDim = dim3(2 * n_);                                                                          \
        if (cudaLaunchKernelEx(&cfg, k_gemm_sm90<TA, TB, EPI, F32>, ma, mb, mb2, md, md2, mg, mu, mh, p) != cudaSuccess) \
            return -1;                                                                                       \
    } while (0)
#define SM90_LAUNCH_EPI(TA, TB)                                                                              \
    do {                                                                                                     \
        if (epi == EPI_DIRECT) SM90_LAUNCH(TA, TB, EPI_DIRECT, 0);                                           \
        else if (epi == EPI_SWIGLU_BWD) SM90_LAUNCH(TA, TB, EPI_SWIGLU_BWD, 0);                              \
        else if (epi == EPI_SWIGLU_FWD) SM90_LAUNCH(TA, TB, EPI_SWIGLU_FWD, 0);                              \
        else if (epi == EPI_STORE && f32) SM90_LAUNCH(TA, TB, EPI_STORE, 1);                                 \
        else if (epi == EPI_STORE) SM90_LAUNCH(TA, TB, EPI_STORE, 0);                                        \
        else if (f32) SM90_LAUNCH(TA, TB, EPI_ADD, 1);                                                       \
        else SM90_LAUNCH(TA, TB, EPI_ADD, 0);                                                                \
    } while (0)
    if (a->transA) {
        if (a->transB) SM90_LAUNCH_EPI(1, 0); else SM90_LAUNCH_EPI(1, 1);
    } else {
        if (a->transB) SM90_LAUNCH_EPI(0, 0); else SM90_LAUNCH_EPI(0, 1);
    }
#undef SM90_LAUNCH_EPI
#undef SM90_LAUNCH
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int gemm_sm90_run(const GemmArgs *a, void *stream) { return sm90_launch(a, 0, NULL, NULL, 0, stream); }

extern "C" int gemm_sm90_swiglu_bwd(const GemmArgs *a, const void *gu, void *stream)
{
    /* D and gu [M, 2N] bf16, ldd apart; their u halves start 16-byte aligned too (TMA) */
    if (!gu || a->d_f32 || a->beta != 0.f || a->C || a->ldd < 2 * a->N || a->ldd % 8 || a->N % 8 ||
        (uintptr_t)gu % 16 || (uintptr_t)a->D % 16)
        return -1;
    return sm90_launch(a, EPI_SWIGLU_BWD, gu, NULL, 0, stream);
}

extern "C" int gemm_sm90_swiglu_fwd(const GemmArgs *a, void *h, int ldh, void *stream)
{
    /* gu = D [M, N = 2F] and h [M, F] bf16; the u halves of gu and of B start 16-byte
     * aligned too (TMA) */
    if (!h || a->d_f32 || a->beta != 0.f || a->C || a->N % 16 || a->ldd % 8 || ldh % 8 || ldh < a->N / 2 ||
        (uintptr_t)h % 16 || (uintptr_t)a->D % 16)
        return -1;
    return sm90_launch(a, EPI_SWIGLU_FWD, NULL, h, ldh, stream);
}
