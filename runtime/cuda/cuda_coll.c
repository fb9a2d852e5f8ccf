/* cuda_coll.c — the collectives of cuda_coll.h over NCCL or staged through host
 * memory and runtime/base/dist.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "cuda_check.h"
#include "cuda_coll.h"
#include "dist.h"
#include "kernels.h"
#include "log.h"
#include "zero_layout.h"

enum { COLL_NCCL, COLL_HOST, COLL_SOLO };

struct CudaColl {
    int kind, rank, world;
    ncclComm_t comm;     /* nccl */
    void *host;          /* host: pinned staging buffer of cap bytes, grown on demand */
    size_t cap;
    size_t *starts;      /* host: world + 1 shard offsets, filled per call */
};

static CudaColl *coll_new(int kind, int rank, int world)
{
    CudaColl *c = calloc(1, sizeof *c);
    if (!c) { log_error("out of memory"); return NULL; }
    c->kind = kind;
    c->rank = rank;
    c->world = world;
    return c;
}

CudaColl *cuda_coll_nccl(void *nccl_comm, int rank, int world)
{
    CudaColl *c = coll_new(COLL_NCCL, rank, world);
    if (c) c->comm = (ncclComm_t)nccl_comm;
    return c;
}

CudaColl *cuda_coll_host(int rank, int world)
{
    CudaColl *c = coll_new(COLL_HOST, rank, world);
    if (!c) return NULL;
    c->starts = malloc(sizeof(size_t) * ((size_t)world + 1));
    if (!c->starts) { log_error("out of memory"); free(c); return NULL; }
    return c;
}

CudaColl *cuda_coll_solo(int rank, int world)
{
    return coll_new(COLL_SOLO, rank, world);
}

void cuda_coll_destroy(CudaColl *c)
{
    if (!c) return;
    if (c->comm) ncclCommDestroy(c->comm);
    if (c->host) CUDA_CHECK(cudaFreeHost(c->host));
    free(c->starts);
    free(c);
}

const char *cuda_coll_name(const CudaColl *c)
{
    return c->kind == COLL_NCCL ? "nccl" : c->kind == COLL_HOST ? "host" : "solo";
}

/* ---- host staging ---------------------------------------------------------
 * Every host collective is: device -> pinned host on the stream, wait for it,
 * the dist.c collective, host -> device on the stream, wait for it. The last
 * wait keeps the staging buffer free for the next call whatever its stream. */

/* world * shard * elem bytes, or the job ends: sizes come from the model's
 * layout, so an overflow is a bug, never bad input. */
static size_t full_bytes(const CudaColl *c, size_t shard, size_t elem)
{
    if (shard && (size_t)c->world > SIZE_MAX / elem / 2 / shard) {
        log_error("host transport: %d shards of %zu elements overflow a size", c->world, shard);
        exit(1);
    }
    return (size_t)c->world * shard * elem;
}

/* The pinned staging buffer with at least bytes (the stream is idle: see above). */
static char *stage(CudaColl *c, size_t bytes)
{
    if (bytes > c->cap) {
        if (c->host) CUDA_CHECK(cudaFreeHost(c->host));
        c->host = NULL;
        c->cap = 0;
        CUDA_CHECK(cudaMallocHost(&c->host, bytes));
        c->cap = bytes;
    }
    return c->host;
}

static void fill_starts(CudaColl *c, size_t shard)
{
    for (int q = 0; q <= c->world; q++) c->starts[q] = (size_t)q * shard;
}

/* Default: d may be pinned host memory too (an offloaded shard) */
static void to_host(void *h, const void *d, size_t bytes, cudaStream_t st)
{
    CUDA_CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDefault, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

static void to_device(void *d, const void *h, size_t bytes, cudaStream_t st)
{
    CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyDefault, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

static void host_allgather(CudaColl *c, const void *shard, void *out, size_t shard_len, size_t elem,
                           cudaStream_t st)
{
    size_t bytes = full_bytes(c, shard_len, elem);
    char *h = stage(c, bytes), *mine = h + (size_t)c->rank * shard_len * elem;
    to_host(mine, shard, shard_len * elem, st);
    fill_starts(c, shard_len);
    dist_allgather_bytes(mine, c->starts, 0, (size_t)c->world * shard_len, elem, h);
    to_device(out, h, bytes, st);
}

/* ---- solo: this rank's own part, as if every peer sent zeros ----------------- */

static void solo_copy(void *dst, const void *src, size_t bytes, cudaStream_t st)
{
    if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st));
}

/* ---- the collectives -------------------------------------------------------- */

void cuda_coll_allreduce_f32(CudaColl *c, float *buf, size_t count, cudaStream_t st)
{
    if (c->kind == COLL_NCCL) {
        NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, c->comm, st));
        return;
    }
    if (c->kind == COLL_SOLO) return;
    size_t bytes = count * sizeof(float);
    float *h = (float *)stage(c, bytes);
    to_host(h, buf, bytes, st);
    dist_allreduce_sum_f32(h, count);
    to_device(buf, h, bytes, st);
}

void cuda_coll_reduce_scatter_f32(CudaColl *c, const float *buf, float *out, size_t shard, cudaStream_t st)
{
    if (c->kind == COLL_NCCL) {
        NCCL_CHECK(ncclReduceScatter(buf, out, shard, ncclFloat, ncclSum, c->comm, st));
        return;
    }
    if (c->kind == COLL_SOLO) {
        solo_copy(out, buf + (size_t)c->rank * shard, shard * sizeof(float), st);
        return;
    }
    /* the whole buffer, then this rank's sum after it (dist_reduce_scatter_f32
     * reads the buffer while it writes out: they must not overlap) */
    size_t bytes = full_bytes(c, shard, sizeof(float)), n = (size_t)c->world * shard;
    float *h = (float *)stage(c, bytes + shard * sizeof(float));
    to_host(h, buf, bytes, st);
    fill_starts(c, shard);
    dist_reduce_scatter_f32(h, 0, n, c->starts, h + n, 0);
    to_device(out, h + n, shard * sizeof(float), st);
}

void cuda_coll_allgather_f32(CudaColl *c, const float *shard, float *out, size_t shard_len, cudaStream_t st)
{
    if (c->kind == COLL_NCCL) {
        NCCL_CHECK(ncclAllGather(shard, out, shard_len, ncclFloat, c->comm, st));
        return;
    }
    if (c->kind == COLL_SOLO) {
        solo_copy(out + (size_t)c->rank * shard_len, shard, shard_len * sizeof(float), st);
        return;
    }
    host_allgather(c, shard, out, shard_len, sizeof(float), st);
}

void cuda_coll_allgather_bf16(CudaColl *c, const void *shard, void *out, size_t shard_len, cudaStream_t st)
{
    if (c->kind == COLL_NCCL) {
        NCCL_CHECK(ncclAllGather(shard, out, shard_len, ncclBfloat16, c->comm, st));
        return;
    }
    if (c->kind == COLL_SOLO) {
        solo_copy((char *)out + (size_t)c->rank * shard_len * 2, shard, shard_len * 2, st);
        return;
    }
    host_allgather(c, shard, out, shard_len, 2, st);
}

/* ---- windows of uneven shards (ZeRO-2/3) -----------------------------------
 * NCCL: one reduce or broadcast per owner with a part of the window, grouped
 * into one launch. Host: dist.c's window collectives take the same starts;
 * clamped to the window they name the same owners, and this rank's part of the
 * window then starts at its own clamped start, where the staging keeps it. */

void cuda_coll_reduce_range_f32(CudaColl *c, float *buf, size_t base, size_t n, const size_t *starts, float *acc,
                                int add, cudaStream_t st)
{
    size_t a, b;
    zl_owned(starts, c->rank, base, n, &a, &b);
    float *mine = a < b ? acc + (a - starts[c->rank]) : NULL;
    if (c->kind == COLL_NCCL || c->kind == COLL_SOLO) {
        if (c->kind == COLL_NCCL) {   /* solo: no peers, this rank's sum is its own part */
            NCCL_CHECK(ncclGroupStart());
            for (int q = 0; q < c->world; q++) {
                size_t qa, qb;
                zl_owned(starts, q, base, n, &qa, &qb);
                if (qa < qb)
                    NCCL_CHECK(ncclReduce(buf + (qa - base), buf + (qa - base), qb - qa, ncclFloat, ncclSum, q, c->comm, st));
            }
            NCCL_CHECK(ncclGroupEnd());
        }
        if (!mine) return;
        if (add) k_add_f32(mine, buf + (a - base), b - a, st);   /* acc may be pinned host memory (offload) */
        else CUDA_CHECK(cudaMemcpyAsync(mine, buf + (a - base), (b - a) * sizeof(float), cudaMemcpyDefault, st));
        return;
    }
    size_t seg = a < b ? b - a : 0;
    float *h = (float *)stage(c, (n + seg) * sizeof(float));   /* the window, then this rank's sum */
    float *hseg = h + n;
    to_host(h, buf, n * sizeof(float), st);
    if (add && seg) to_host(hseg, mine, seg * sizeof(float), st);
    zl_clamp_starts(starts, c->world, base, n, c->starts);
    dist_reduce_scatter_f32(h, base, n, c->starts, hseg, add);
    if (seg) to_device(mine, hseg, seg * sizeof(float), st);
}

void cuda_coll_allgather_range(CudaColl *c, const void *shard, const size_t *starts, size_t base, size_t n,
                               size_t elem, void *out, cudaStream_t st)
{
    size_t a, b;
    zl_owned(starts, c->rank, base, n, &a, &b);
    if (c->kind == COLL_NCCL) {
        NCCL_CHECK(ncclGroupStart());
        for (int q = 0; q < c->world; q++) {
            size_t qa, qb;
            zl_owned(starts, q, base, n, &qa, &qb);
            if (qa >= qb) continue;
            char *dst = (char *)out + (qa - base) * elem;
            const void *src = q == c->rank && shard ? (const char *)shard + (qa - starts[q]) * elem : dst;
            NCCL_CHECK(ncclBroadcast(src, dst, (qb - qa) * elem, ncclChar, q, c->comm, st));
        }
        NCCL_CHECK(ncclGroupEnd());
        return;
    }
    if (c->kind == COLL_SOLO) {
        if (a < b && shard)
            solo_copy((char *)out + (a - base) * elem, (const char *)shard + (a - starts[c->rank]) * elem,
                      (b - a) * elem, st);
        return;
    }
    char *h = stage(c, n * elem), *hmine = h + (a < b ? (a - base) * elem : 0);
    if (a < b)
        to_host(hmine, shard ? (const char *)shard + (a - starts[c->rank]) * elem : (const char *)out + (a - base) * elem,
                (b - a) * elem, st);
    zl_clamp_starts(starts, c->world, base, n, c->starts);
    dist_allgather_bytes(hmine, c->starts, base, n, elem, h);
    to_device(out, h, n * elem, st);
}

double cuda_coll_sum_f64(CudaColl *c, double v)
{
    if (c->kind == COLL_SOLO) return v;
    if (c->kind == COLL_HOST) {
        dist_allreduce_sum_f64(&v, 1);
        return v;
    }
    /* Nothing else of this communicator in flight (gradient buckets on the
     * communication stream): collectives on several streams could interleave
     * differently on different ranks. */
    CUDA_CHECK(cudaDeviceSynchronize());
    double *buf;
    CUDA_CHECK(cudaMalloc((void **)&buf, sizeof *buf));
    CUDA_CHECK(cudaMemcpy(buf, &v, sizeof v, cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllReduce(buf, buf, 1, ncclDouble, ncclSum, c->comm, 0));
    CUDA_CHECK(cudaMemcpy(&v, buf, sizeof v, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(buf));
    return v;
}
