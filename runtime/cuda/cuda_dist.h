/* cuda_dist.h — data-parallel ranks for the CUDA trainer (runtime/cuda/cuda_dist.c).
 *
 * Ranks come from the launcher as runtime/base/dist.h's dist_launcher reads it
 * (mpirun, srun or torchrun-style variables; none: rank 0 of 1). Each rank
 * takes GPU local_rank % (GPUs it sees). With more than one rank they meet at
 * MASTER_ADDR:MASTER_PORT (rank 0 listens; every wait is bounded, 120 s), where
 * rank 0 picks the collective transport (cuda_coll.h) for all: LLMC_TRANSPORT=
 * nccl or host, or when unset NCCL, or host when two ranks share a GPU (a
 * warning says it is for testing). NCCL's unique id travels in the same
 * exchange; the host transport's ranks come from dist_init (mpirun or TCP).
 * LLMC_TRANSPORT=solo (bench only): no rendezvous, the rank runs alone. */
#ifndef LLMC_CUDA_DIST_H
#define LLMC_CUDA_DIST_H

#include <stdbool.h>

struct CudaColl;

typedef struct {
    int rank, world, local_rank;
    struct CudaColl *comm;   /* the collective transport (cuda_coll.h), NULL when world == 1 */
    void *comm_stream;       /* cudaStream_t for gradient buckets */
} CudaDist;

/* 0, or -1 with a message on stderr. solo_ok: LLMC_TRANSPORT=solo is accepted
 * (cuda_coll.h: bench's measurement of one rank of an N-rank job, no peers). */
int cuda_dist_init(CudaDist *d, bool solo_ok);
void cuda_dist_finalize(CudaDist *d);
/* Sum of one double over all ranks (small host values: label counts, losses). */
double cuda_dist_sum(CudaDist *d, double v);

#endif
