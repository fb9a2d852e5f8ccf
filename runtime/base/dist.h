/* dist.h — ranks and collectives (runtime/base/dist.c): the CPU backend's, and the
 * CUDA backend's host-staged transport (runtime/cuda/cuda_coll.c).
 *
 * One process per rank. Ranks come from the launcher: Open MPI's mpirun
 * (OMPI_COMM_WORLD_*), srun (SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID), or
 * torchrun-style RANK/WORLD_SIZE/LOCAL_RANK; a plain run is rank 0 of 1 and
 * needs no launcher. Every collective either
 * completes or fails the whole job with a clear message within a bounded time
 * (a dead peer never hangs the others).
 */
#ifndef LLMC_DIST_H
#define LLMC_DIST_H

#include <stddef.h>

typedef struct {
    int rank, world, local_rank;
    const char *host;           /* this process's host name */
} DistInfo;

/* The launcher's ranks from the environment alone, without joining them (what
 * dist_init and runtime/cuda/cuda_dist.c both read): the first launcher whose
 * world size is set and not 0 -- mpirun (OMPI_COMM_WORLD_SIZE/RANK/LOCAL_RANK),
 * srun (SLURM_STEP_NUM_TASKS/SLURM_PROCID/SLURM_LOCALID), torchrun-style
 * (WORLD_SIZE/RANK/LOCAL_RANK) -- else rank 0 of 1. Sets out's rank, world and
 * local_rank (not host) and *name (the launcher, NULL for none); returns 0, or
 * non-zero with a message naming the bad variable. */
int dist_launcher(DistInfo *out, const char **name);
/* Initialise from the environment; returns 0, or non-zero with a message on stderr. */
int dist_init(DistInfo *out);
void dist_finalize(void);

/* In-place sum over all ranks (deterministic: the same result bits on every rank,
 * independent of arrival order). */
int dist_allreduce_sum_f32(float *buf, size_t n);
int dist_allreduce_sum_f64(double *buf, size_t n);
/* ZeRO's collectives over a flat buffer split into contiguous shards: rank q
 * owns [starts[q], starts[q+1]) (starts: world+1 offsets, starts[0] = 0).
 * Both work on the window [base, base+n) of the flat buffer (a layer's bucket):
 *
 * dist_reduce_scatter_f32: buf holds this rank's values of the window; each rank
 * gets, for the part of the window it owns, the sum over ranks in rank order
 * into out (its shard, indexed from starts[rank]): add = 0 writes
 * b_0 + b_1 + ..., add = 1 accumulates ((out + b_0) + b_1) + ... So a step's
 * micro-batches reduced one by one sum in the order a single rank adds them.
 *
 * dist_allgather_f32: every rank's out (the window, indexed from base) gets
 * every owner's part of the window from its shard (indexed from starts[owner]).
 * shard may point into out (in place). */
int dist_reduce_scatter_f32(const float *buf, size_t base, size_t n, const size_t *starts, float *out, int add);
int dist_allgather_f32(const float *shard, const size_t *starts, size_t base, size_t n, float *out);
/* The same for elements of elem bytes each (bf16 weights: elem = 2); starts,
 * base and n count elements. */
int dist_allgather_bytes(const void *shard, const size_t *starts, size_t base, size_t n, size_t elem, void *out);
/* Broadcast from rank 0. */
int dist_broadcast(void *buf, size_t bytes);
int dist_barrier(void);
/* Logical OR of a flag over all ranks (used to agree on stopping after a signal). */
int dist_any(int flag);
/* Stop every rank with a message: never returns. */
_Noreturn void dist_abort(const char *why);

#endif
