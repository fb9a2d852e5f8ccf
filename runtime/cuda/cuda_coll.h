/* cuda_coll.h — the collectives of the CUDA trainer's ranks, over one of two
 * transports (runtime/cuda/cuda_coll.c):
 *
 *   nccl  NCCL on the GPUs, asynchronous on the given stream (the real one).
 *   host  for testing: the device buffer is copied to pinned host memory on
 *         the stream, reduced or gathered by the ranks' host transport
 *         (runtime/base/dist.c: MPI or TCP, sums in rank order, so the same
 *         bits on every rank and on every run), and copied back. It blocks the
 *         calling thread until the result is on the device, and is what lets
 *         several ranks share one GPU (NCCL refuses two ranks on one device).
 *   solo  for measuring one rank's memory (bench only): the rank of an N-rank
 *         job runs alone, as if its peers' contributions were zero; every
 *         collective is a copy of its own part. Its allocations are the real
 *         rank's (the same code, sizes from the same layout), so one GPU
 *         measures a rank of a job too large to share it (7B and up); its
 *         numbers are not a training.
 *
 * cuda_dist_init (cuda_dist.c) chooses the transport and makes the object.
 * Every call is made by every rank in the same order; an error ends the job
 * with a message (cuda_check.h; dist.c for a lost peer). */
#ifndef LLMC_CUDA_COLL_H
#define LLMC_CUDA_COLL_H

#include <stddef.h>
#include <cuda_runtime_api.h>

typedef struct CudaColl CudaColl;

/* NCCL over an initialised communicator (an ncclComm_t, which the object then
 * owns); host over dist.c, which dist_init must have set up. NULL when out of
 * memory (with a message). */
CudaColl *cuda_coll_nccl(void *nccl_comm, int rank, int world);
CudaColl *cuda_coll_host(int rank, int world);
CudaColl *cuda_coll_solo(int rank, int world);
/* Frees the object (NCCL: destroys the communicator). NULL is a no-op. */
void cuda_coll_destroy(CudaColl *c);
/* "nccl", "host" or "solo" */
const char *cuda_coll_name(const CudaColl *c);

/* In-place sum of count floats over all ranks. */
void cuda_coll_allreduce_f32(CudaColl *c, float *buf, size_t count, cudaStream_t st);
/* buf holds world * shard floats; rank r receives the sum over ranks of block r
 * (buf + r * shard) in out. out may be buf + rank * shard (in place). */
void cuda_coll_reduce_scatter_f32(CudaColl *c, const float *buf, float *out, size_t shard, cudaStream_t st);
/* out (world * shard elements) receives every rank's shard, rank r's at block r.
 * shard may be out + rank * shard (in place). */
void cuda_coll_allgather_f32(CudaColl *c, const float *shard, float *out, size_t shard_len, cudaStream_t st);
void cuda_coll_allgather_bf16(CudaColl *c, const void *shard, void *out, size_t shard_len, cudaStream_t st);
/* Windows of a flat buffer cut into uneven shards (ZeRO-2/3, zero_layout.h):
 * rank q owns [starts[q], starts[q+1]); the window is [base, base+n).
 * reduce_range: buf holds this rank's values of the window; this rank's part of
 * the window, summed over ranks, goes to acc (its shard, indexed from
 * starts[rank]): add = 0 writes it, add = 1 adds it. The host transport sums in
 * rank order onto acc, ((acc + b_0) + b_1) + ..., so micro-batches reduced one by
 * one add in the order one rank adds them; NCCL reduces into buf (which it
 * overwrites) and then adds. allgather_range: out (the window, indexed from base,
 * elements of elem bytes) gets every owner's part from its shard (indexed from
 * starts[owner]); shard may point into out, or be NULL: this rank's part is
 * in out already (in place). acc and shard may be pinned host memory (an
 * offloaded shard); buf and out are device memory. */
void cuda_coll_reduce_range_f32(CudaColl *c, float *buf, size_t base, size_t n, const size_t *starts, float *acc,
                                int add, cudaStream_t st);
void cuda_coll_allgather_range(CudaColl *c, const void *shard, const size_t *starts, size_t base, size_t n,
                               size_t elem, void *out, cudaStream_t st);
/* Sum of one host double over all ranks (label counts, losses, flags). */
double cuda_coll_sum_f64(CudaColl *c, double v);

#endif
