/* ce_variants.cu — issue 31's cross-entropy experiment: the softmax cross-entropy over
 * 8192 rows of Qwen's vocabulary (one training chunk), by the runtime's kernel
 * (kernels_loss.cu: a block a row, read twice: the statistics, then the gradient), by a
 * cluster of 8 blocks a row that holds the row in registers and reads it once (their
 * (M, S) meeting through distributed shared memory), and by persistent row kernels that
 * read it twice but keep few enough rows in flight (blocks x 304 KB) for the second read
 * to find them in L2, with and without L2 eviction hints (evict_last on the first read,
 * evict_first on the second). Prints each variant's time and its largest difference from
 * the runtime kernel's output. On an H100 (2026-12-07) none was more than 4% faster:
 * docs/PERFORMANCE.md, "The one-read cross-entropy".
 * Build: make ce-variants (tests/cuda/test.mk); run build/ce_variants on the GPU machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cooperative_groups.h>
#include "kernels_common.cuh"

namespace cg = cooperative_groups;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

static __device__ __forceinline__ uint4 ld_policy(const bf16 *p, uint64_t pol)
{
    uint4 r;
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(pol));
    return r;
}

/* ---- what the variants share ---- */

/* Each thread's online-softmax pair (m: its largest logit, sum: of exp(x - m)) folded
 * into the block's (M, S) (T threads), the warps in a fixed order: every thread gets the same. */
template <int T>
static __device__ void block_softmax_stats(float m, float sum, float *M_out, float *S_out)
{
    __shared__ float red_m[T / WARP], red_s[T / WARP];
    int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP;
    float mw = warp_max(m);
    sum = (m == -INFINITY) ? 0.f : sum * __expf(m - mw);
    sum = warp_sum(sum);
    if (lane == 0) { red_m[wid] = mw; red_s[wid] = sum; }
    __syncthreads();
    float M = red_m[0];
    for (int w = 1; w < T / WARP; w++) M = fmaxf(M, red_m[w]);
    float S = 0.f;
    for (int w = 0; w < T / WARP; w++) S += red_s[w] * __expf(red_m[w] - M);
    *M_out = M;
    *S_out = S;
}

/* (m, sum) += 8 logits, rescaling sum when the maximum grows. */
static __device__ __forceinline__ void online_softmax8(float *m, float *sum, const float f[8])
{
    float lm = f[0];
    for (int k = 1; k < 8; k++) lm = fmaxf(lm, f[k]);
    if (lm > *m) { *sum *= __expf(*m - lm); *m = lm; }
    for (int k = 0; k < 8; k++) *sum += __expf(f[k] - *m);
}

/* 8 logits starting at column j become (softmax - onehot(tgt)) * grad_scale. */
static __device__ __forceinline__ void softmax_grad8(float f[8], int j, int tgt, float M, float inv, float grad_scale)
{
    for (int k = 0; k < 8; k++) {
        float p = __expf(f[k] - M) * inv;
        f[k] = (p - (j + k == tgt ? 1.f : 0.f)) * grad_scale;
    }
}

/* Persistent: gridDim.x blocks of T threads walk the rows, each row read twice. */
template <int T, bool HINT>
__global__ void __launch_bounds__(T) ce_persist_k(bf16 *logits, float *loss, const int *targets, int rows, int V,
                                                  float grad_scale)
{
    int tid = threadIdx.x;
    uint64_t keep = 0, drop = 0;
    if (HINT) {
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(drop));
    }
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        bf16 *x = logits + (size_t)row * V;
        int tgt = targets[row];
        float m = -INFINITY, sum = 0.f, M, S;
#pragma unroll 4
        for (int j = tid * 8; j < V; j += T * 8) {
            float f[8];
            unpack8(f, HINT ? ld_policy(x + j, keep) : *(const uint4 *)(x + j));
            online_softmax8(&m, &sum, f);
        }
        block_softmax_stats<T>(m, sum, &M, &S);
        float xt = __bfloat162float(x[tgt]);
        __syncthreads();   /* x[tgt] read, and the statistics' shared arrays free for the next row */
        if (tid == 0) loss[row] = logf(S) + M - xt;
        float inv = 1.f / S;
#pragma unroll 4
        for (int j = tid * 8; j < V; j += T * 8) {
            float f[8];
            unpack8(f, HINT ? ld_policy(x + j, drop) : *(const uint4 *)(x + j));
            softmax_grad8(f, j, tgt, M, inv, grad_scale);
            store8(x + j, f);
        }
    }
}

/* ---- the one-read cluster kernel (tried 2026-12-07, not adopted: no faster) ---- */

#define CE_THREADS 512
/* The cluster kernel: a row over a cluster of CE_RANKS blocks, each holding its span of
 * `span` logits in registers (CE_VECS 16-byte vectors a thread), so the row is read from
 * memory once instead of twice: 2 bytes a logit less traffic, a third of the pass. The
 * blocks' (M, S) meet through distributed shared memory, folded in rank order (the same
 * bits every run). Spans of up to CE_RANKS * CE_THREADS * CE_VECS * 8 = 163,840 logits:
 * Qwen's 151,936 and Llama 3's 128,256. */
#define CE_RANKS 8
#define CE_VECS 5

__global__ void __cluster_dims__(CE_RANKS, 1, 1) __launch_bounds__(CE_THREADS, 2)
cross_entropy_cluster_k(bf16 *logits, float *loss, const int *targets, int V, int span, float grad_scale,
                        float *amax)
{
    __shared__ float stat[2], tot[2];   /* this block's (M, S), read by the whole cluster; the row's */
    cg::cluster_group cl = cg::this_cluster();
    int rank = (int)cl.block_rank(), row = blockIdx.x / CE_RANKS, tid = threadIdx.x;
    int j0 = rank * span, n = min(span, V - j0);   /* n <= 0: a rank past a narrow row's end */
    bf16 *xr = logits + (size_t)row * V, *x = xr + j0;
    int tgt = targets[row];
    if (tgt < 0) {   /* the whole cluster leaves here: no block waits on one that left */
        if (rank == 0 && tid == 0) loss[row] = 0.f;
        if (grad_scale != 0.f) {
            float z[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int j = tid * 8; j < n; j += CE_THREADS * 8) store8(x + j, z);
        }
        return;
    }
    uint4 v[CE_VECS];   /* every load in flight at once; streamed (read once), past the span zeros */
#pragma unroll
    for (int k = 0; k < CE_VECS; k++) {
        int j = (tid + k * CE_THREADS) * 8;
        v[k] = j < n ? __ldcs((const uint4 *)(x + j)) : make_uint4(0, 0, 0, 0);
    }
    float m = -INFINITY, sum = 0.f, M, S;
#pragma unroll
    for (int k = 0; k < CE_VECS; k++) {
        int j = (tid + k * CE_THREADS) * 8;
        if (j < n) {
            float f[8];
            unpack8(f, v[k]);
            online_softmax8(&m, &sum, f);
        }
    }
    block_softmax_stats<CE_THREADS>(m, sum, &M, &S);
    float xt = rank == 0 && tid == 0 ? __bfloat162float(xr[tgt]) : 0.f;   /* before any block writes */
    if (tid == 0) { stat[0] = M; stat[1] = S; }
    cl.sync();   /* every block's (M, S) is in its shared memory, and the row is read */
    if (tid < WARP) {   /* lane r folds in rank r's pair: the same order every run */
        float mr = -INFINITY, sr = 0.f;
        if (tid < CE_RANKS) {
            const float *p = cl.map_shared_rank(stat, tid);
            mr = p[0];
            sr = p[1];
        }
        float Mc = warp_max(mr);
        float Sc = warp_sum(sr * __expf(mr - Mc));   /* a rank past the end adds 0 */
        if (tid == 0) { tot[0] = Mc; tot[1] = Sc; }
    }
    cl.sync();   /* tot is the block's; no block leaves while another may still read its stat */
    M = tot[0];
    S = tot[1];
    if (rank == 0 && tid == 0) loss[row] = logf(S) + M - xt;
    if (grad_scale == 0.f) return;
    float inv = 1.f / S, mx = 0.f;
#pragma unroll
    for (int k = 0; k < CE_VECS; k++) {
        int j = (tid + k * CE_THREADS) * 8;
        if (j < n) {
            float f[8];
            unpack8(f, v[k]);
            softmax_grad8(f, j, tgt - j0, M, inv, grad_scale);
            mx = fmaxf(mx, max_abs8_stored(f));
            store8(x + j, f);
        }
    }
    if (amax) block_amax_commit(amax, mx);
}

/* The cluster kernel's span for V (a multiple of 8), or 0 where V is too wide for it. */
static int ce_cluster_span(int V)
{
    int vecs = (V / 8 + CE_RANKS - 1) / CE_RANKS;
    return vecs <= CE_THREADS * CE_VECS ? vecs * 8 : 0;
}

typedef void (*Launch)(bf16 *, float *, const int *, int, int, cudaStream_t);
template <int T, bool HINT, int PER_SM>
static void launch_persist(bf16 *x, float *loss, const int *tg, int rows, int V, cudaStream_t s)
{
    ce_persist_k<T, HINT><<<PER_SM * sm_count(), T, 0, s>>>(x, loss, tg, rows, V, 1.f);
}
static void launch_rows(bf16 *x, float *loss, const int *tg, int rows, int V, cudaStream_t s)
{
    k_cross_entropy((bf16_t *)x, loss, tg, rows, V, 1.f, NULL, s);   /* the runtime's */
}
static void launch_cluster(bf16 *x, float *loss, const int *tg, int rows, int V, cudaStream_t s)
{
    cross_entropy_cluster_k<<<rows * CE_RANKS, CE_THREADS, 0, s>>>(x, loss, tg, V, ce_cluster_span(V), 1.f, NULL);
}

int main(void)
{
    const int rows = 8192, V = 151936, reps = 20;
    size_t n = (size_t)rows * V;
    uint16_t *h = (uint16_t *)malloc(n * 2), *ref = (uint16_t *)malloc(n * 2), *out = (uint16_t *)malloc(n * 2);
    int *ht = (int *)malloc(rows * sizeof(int));
    uint64_t z = 1;
    for (size_t i = 0; i < n; i++) {   /* logits in about [-4, 4) */
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        float f = ((z >> 40) / 16777216.f - 0.5f) * 8.f;
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    for (int r = 0; r < rows; r++) ht[r] = (int)(((uint64_t)r * 2654435761u) % V);
    bf16 *x0, *x;
    int *tg;
    float *loss;
    CK(cudaMalloc(&x0, n * 2)); CK(cudaMalloc(&x, n * 2));
    CK(cudaMalloc(&tg, rows * sizeof(int))); CK(cudaMalloc(&loss, rows * sizeof(float)));
    CK(cudaMemcpy(x0, h, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(tg, ht, rows * sizeof(int), cudaMemcpyHostToDevice));
    struct { const char *name; Launch fn; } v[] = {
        {"rows (two reads, 512 threads, a block a row)", launch_rows},
        {"cluster (one read, 8 x 512 threads a row)", launch_cluster},
        {"persistent 1024 threads x 1 a SM", launch_persist<1024, false, 1>},
        {"persistent 1024 threads x 1 a SM, L2 hints", launch_persist<1024, true, 1>},
        {"persistent 512 threads x 2 a SM", launch_persist<512, false, 2>},
        {"persistent 512 threads x 2 a SM, L2 hints", launch_persist<512, true, 2>},
        {"persistent 512 threads x 1 a SM, L2 hints", launch_persist<512, true, 1>},
        {"persistent 256 threads x 4 a SM, L2 hints", launch_persist<256, true, 4>},
        {"persistent 1024 threads x 2 a SM, L2 hints", launch_persist<1024, true, 2>},
    };
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        CK(cudaMemcpyAsync(x, x0, n * 2, cudaMemcpyDeviceToDevice, s));
        v[i].fn(x, loss, tg, rows, V, s);
        CK(cudaGetLastError());
        size_t nc = (size_t)256 * V;   /* the first 256 rows compared */
        CK(cudaMemcpyAsync(out, x, nc * 2, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        if (i == 0) memcpy(ref, out, nc * 2);
        double worst = 0;
        for (size_t k = 0; k < nc; k++) {
            uint32_t a = (uint32_t)out[k] << 16, b = (uint32_t)ref[k] << 16;
            float fa, fb;
            memcpy(&fa, &a, 4); memcpy(&fb, &b, 4);
            double d = fabs((double)fa - fb) / (fabs((double)fb) + 1e-30);
            if (d > worst) worst = d;
        }
        float ms = 0, best = 1e30f;
        for (int r = 0; r < reps; r++) {   /* from the same input each time: the copy untimed */
            CK(cudaMemcpyAsync(x, x0, n * 2, cudaMemcpyDeviceToDevice, s));
            CK(cudaEventRecord(e0, s));
            v[i].fn(x, loss, tg, rows, V, s);
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (ms < best) best = ms;
        }
        printf("%-48s %.3f ms (best of %d)  %5.0f GB/s at 3 passes  max rel diff from rows (256 rows) %.2g\n", v[i].name, best,
               reps, 3.0 * n * 2 / (best / 1e3) / 1e9, worst);
    }
    return 0;
}
