/* cuda_dist.h — data-parallel ranks for the CUDA trainer (runtime/cuda/cuda_dist.c).
 *
 * Ranks come from the launcher: Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK),
 * Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) or torchrun-style RANK/WORLD_SIZE/
 * LOCAL_RANK; none of them means rank 0 of 1. Each rank takes GPU local_rank. With
 * more than one rank the NCCL unique id travels over a TCP rendezvous at
 * MASTER_ADDR:MASTER_PORT (rank 0 listens); every wait is bounded (120 s). */
#ifndef LLMC_CUDA_DIST_H
#define LLMC_CUDA_DIST_H

typedef struct {
    int rank, world, local_rank;
    void *comm;          /* ncclComm_t, NULL when world == 1 */
    void *comm_stream;   /* cudaStream_t for gradient buckets */
} CudaDist;

/* 0, or -1 with a message on stderr. */
int cuda_dist_init(CudaDist *d);
void cuda_dist_finalize(CudaDist *d);
/* Sum of one double over all ranks (small host values: label counts, losses). */
double cuda_dist_sum(CudaDist *d, double v);

#endif
