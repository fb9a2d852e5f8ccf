/* cuda_dist.c — ranks from the environment, NCCL communicator through a TCP rendezvous. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "cuda_check.h"
#include "cuda_dist.h"
#include "log.h"

/* Ranks of one job start seconds apart; two minutes also covers a slow
 * node's CUDA initialisation, and a peer that never comes ends the job with
 * a message rather than a hang. */
#define RDV_TIMEOUT_S 120

/* The first of three variables that is set: Open MPI's (mpirun), Slurm's
 * (srun), torchrun's; dflt when none is (a single process). */
static int env_int(const char *a, const char *b, const char *c, int dflt)
{
    const char *names[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        const char *v = names[i] ? getenv(names[i]) : NULL;
        if (v && *v) return atoi(v);
    }
    return dflt;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* All n bytes or -1, within RDV_TIMEOUT_S: a peer that connects and then
 * hangs cannot hold the rendezvous forever. */
static int full_io(int fd, void *buf, size_t n, int writing)
{
    char *p = buf;
    double deadline = now_s() + RDV_TIMEOUT_S;
    while (n) {
        struct pollfd pf = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        int left = (int)((deadline - now_s()) * 1000);
        if (left <= 0 || poll(&pf, 1, left) <= 0) return -1;
        ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Rank 0 sends the id to world-1 peers; the others fetch it. NCCL needs the
 * same ncclUniqueId (128 bytes from ncclGetUniqueId) on every rank before
 * ncclCommInitRank; a plain TCP exchange at MASTER_ADDR:MASTER_PORT (which
 * the emitted job script sets) avoids depending on MPI for it. */
static int rendezvous(ncclUniqueId *id, int rank, int world)
{
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (!addr || !port) {
        log_error("%d ranks need MASTER_ADDR and MASTER_PORT for the NCCL rendezvous", world);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (rank == 0) hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(rank == 0 ? NULL : addr, port, &hints, &res);
    if (gai) {
        log_error("rendezvous %s:%s: %s", addr, port, gai_strerror(gai));
        return -1;
    }
    int rc = -1;
    if (rank == 0) {
        int ls = socket(res->ai_family, SOCK_STREAM, 0), one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ls < 0 || bind(ls, res->ai_addr, res->ai_addrlen) || listen(ls, world)) {
            log_error("rendezvous: cannot listen on port %s: %s", port, strerror(errno));
            if (ls >= 0) close(ls);
            freeaddrinfo(res);
            return -1;
        }
        double deadline = now_s() + RDV_TIMEOUT_S;
        int served = 0;
        while (served < world - 1) {
            struct pollfd pf = {.fd = ls, .events = POLLIN};
            int left = (int)((deadline - now_s()) * 1000);
            if (left <= 0 || poll(&pf, 1, left) <= 0) break;
            int fd = accept(ls, NULL, NULL);
            if (fd < 0) continue;
            if (full_io(fd, id, sizeof *id, 1) == 0) served++;
            close(fd);
        }
        close(ls);
        if (served == world - 1) rc = 0;
        else log_error("rendezvous: only %d of %d ranks arrived within %d s",
                       served + 1, world, RDV_TIMEOUT_S);
    } else {
        double deadline = now_s() + RDV_TIMEOUT_S;
        while (now_s() < deadline) {
            int fd = socket(res->ai_family, SOCK_STREAM, 0);
            if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
                rc = full_io(fd, id, sizeof *id, 0);
                close(fd);
                break;
            }
            if (fd >= 0) close(fd);
            usleep(200000);   /* rank 0 may not listen yet: retry every 0.2 s */
        }
        if (rc) log_error("rendezvous: no id from %s:%s within %d s", addr, port, RDV_TIMEOUT_S);
    }
    freeaddrinfo(res);
    return rc;
}

int cuda_dist_init(CudaDist *d)
{
    memset(d, 0, sizeof *d);
    d->rank = env_int("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK", 0);
    d->world = env_int("OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE", 1);
    d->local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK", 0);
    if (d->world < 1 || d->rank < 0 || d->rank >= d->world || d->local_rank < 0) {
        log_error("bad rank %d of %d (local %d)", d->rank, d->world, d->local_rank);
        return -1;
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        log_error("no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    if (d->local_rank >= ndev) {
        log_error("local rank %d but only %d GPUs", d->local_rank, ndev);
        return -1;
    }
    CUDA_CHECK(cudaSetDevice(d->local_rank));   /* one GPU per rank, by its index on the node */
    if (d->world == 1) return 0;
    /* NVLink multicast (NVLS) stays off: on nodes whose GPUs other jobs share
     * it can take them out of service. A value already in the environment is
     * kept (setenv's 0). */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    ncclUniqueId id;
    if (d->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    if (rendezvous(&id, d->rank, d->world) != 0) return -1;
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitRank(&comm, d->world, id, d->rank));
    d->comm = comm;
    /* gradient reductions run here, overlapping the backward pass; non-blocking
     * so it does not wait on the default stream */
    cudaStream_t cs;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    d->comm_stream = cs;
    return 0;
}

void cuda_dist_finalize(CudaDist *d)
{
    if (d->comm) ncclCommDestroy((ncclComm_t)d->comm);
    d->comm = NULL;
}

double cuda_dist_sum(CudaDist *d, double v)
{
    if (d->world == 1) return v;
    /* Nothing else of this communicator in flight (gradient buckets on the
     * communication stream): collectives on several streams could interleave
     * differently on different ranks. */
    CUDA_CHECK(cudaDeviceSynchronize());
    double *buf;
    CUDA_CHECK(cudaMalloc((void **)&buf, sizeof *buf));
    CUDA_CHECK(cudaMemcpy(buf, &v, sizeof v, cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllReduce(buf, buf, 1, ncclDouble, ncclSum, (ncclComm_t)d->comm, 0));
    CUDA_CHECK(cudaMemcpy(&v, buf, sizeof v, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(buf));
    return v;
}
