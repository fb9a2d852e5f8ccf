/* cuda_dist.c — ranks from the environment; the collective transport (cuda_coll.h,
 * NCCL or host-staged) chosen through a TCP rendezvous. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "cuda_check.h"
#include "cuda_coll.h"
#include "cuda_dist.h"
#include "dist.h"
#include "log.h"

/* Ranks of one job start seconds apart; two minutes also covers a slow
 * node's CUDA initialisation, and a peer that never comes ends the job with
 * a message rather than a hang. */
#define RDV_TIMEOUT_S 120

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
        ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}


/* ---- the rendezvous ----------------------------------------------------------
 * Every rank other than 0 connects to rank 0 at MASTER_ADDR:MASTER_PORT (the
 * emitted job script sets both) and says who it is, which transport its
 * LLMC_TRANSPORT asks for and which GPU it took (the device's UUID: the same
 * bytes on two ranks are one GPU, whatever each process's device index).
 * Rank 0 decides for all and answers each with the verdict and, for NCCL, the
 * ncclUniqueId (128 bytes) that ncclCommInitRank needs on every rank. A plain
 * TCP exchange avoids depending on MPI; every wait is bounded (RDV_TIMEOUT_S). */

#define RDV_MAGIC 0x6c6c6375u   /* "llcu" */

enum { MODE_AUTO, MODE_NCCL, MODE_HOST };
static const char *const mode_names[] = {"auto", "nccl", "host"};
enum { VERDICT_NCCL, VERDICT_HOST, VERDICT_REFUSED };

typedef struct {
    uint32_t magic, rank, world, mode;
    unsigned char uuid[16];
} Hello;

typedef struct {
    uint32_t magic, verdict;
    ncclUniqueId id;
} Verdict;

/* Rank 0's decision from every rank's hello (hello[r] for rank r); the
 * reason for a shared GPU or a refusal is logged here. */
static uint32_t decide(const Hello *hello, int world, ncclUniqueId *id)
{
    for (int r = 1; r < world; r++)
        if (hello[r].mode != hello[0].mode) {
            log_error("rank %d has LLMC_TRANSPORT %s but rank 0 has %s: every rank needs the same",
                      r, mode_names[hello[r].mode], mode_names[hello[0].mode]);
            return VERDICT_REFUSED;
        }
    int a = -1, b = -1;   /* the first two ranks on one GPU */
    for (int i = 0; i < world && a < 0; i++)
        for (int j = i + 1; j < world; j++)
            if (!memcmp(hello[i].uuid, hello[j].uuid, sizeof hello[i].uuid)) { a = i; b = j; break; }
    uint32_t mode = hello[0].mode;
    if (mode == MODE_HOST || (mode == MODE_AUTO && a >= 0)) {
        if (mode == MODE_AUTO)
            log_warn("ranks %d and %d share one GPU, which NCCL refuses: collectives go through host "
                     "memory (LLMC_TRANSPORT=host, for testing: slow)", a, b);
        else
            log_warn("LLMC_TRANSPORT=host: collectives go through host memory (for testing: slow)");
        return VERDICT_HOST;
    }
    if (a >= 0) {
        log_error("ranks %d and %d share one GPU and LLMC_TRANSPORT=nccl, but NCCL cannot run two ranks "
                  "on one device: give each rank its own GPU, or set LLMC_TRANSPORT=host (for testing)", a, b);
        return VERDICT_REFUSED;
    }
    ncclResult_t nr = ncclGetUniqueId(id);
    if (nr != ncclSuccess) {
        log_error("ncclGetUniqueId: %s", ncclGetErrorString(nr));
        return VERDICT_REFUSED;
    }
    return VERDICT_NCCL;
}

/* Rank 0: gather world-1 hellos, decide, answer. The verdict, or -1. */
static int rendezvous_root(struct addrinfo *res, const char *port, const Hello *mine, int world,
                           ncclUniqueId *id)
{
    Hello *hello = calloc((size_t)world, sizeof *hello);
    int *fd = malloc(sizeof(int) * (size_t)world);
    if (!hello || !fd) {
        log_error("out of memory");
        free(hello); free(fd);
        return -1;
    }
    for (int r = 0; r < world; r++) fd[r] = -1;
    hello[0] = *mine;
    int ls = socket(res->ai_family, SOCK_STREAM, 0), one = 1, rc = -1, joined = 1;
    if (ls >= 0) setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, res->ai_addr, res->ai_addrlen) || listen(ls, world)) {
        log_error("rendezvous: cannot listen on port %s: %s", port, strerror(errno));
        goto out;
    }
    double deadline = now_s() + RDV_TIMEOUT_S;
    while (joined < world) {
        struct pollfd pf = {.fd = ls, .events = POLLIN};
        int left = (int)((deadline - now_s()) * 1000);
        if (left <= 0 || poll(&pf, 1, left) <= 0) break;
        int c = accept(ls, NULL, NULL);
        if (c < 0) continue;
        Hello h;
        if (full_io(c, &h, sizeof h, 0) != 0 || h.magic != RDV_MAGIC) {   /* not one of ours */
            close(c);
            continue;
        }
        if (h.world != (uint32_t)world || h.rank == 0 || h.rank >= (uint32_t)world || fd[h.rank] >= 0 ||
            h.mode > MODE_HOST) {
            log_error("rendezvous: a rank %u of %u arrived (this job has %d ranks, or a rank came twice)",
                      h.rank, h.world, world);
            close(c);
            goto out;
        }
        fd[h.rank] = c;
        hello[h.rank] = h;
        joined++;
    }
    if (joined < world) {
        log_error("rendezvous: only %d of %d ranks arrived within %d s", joined, world, RDV_TIMEOUT_S);
        goto out;
    }
    /* closed before anyone hears the verdict: the host transport's own
     * rendezvous (dist.c) listens on this port next */
    close(ls);
    ls = -1;
    Verdict v = {.magic = RDV_MAGIC, .verdict = decide(hello, world, id)};
    if (v.verdict == VERDICT_NCCL) v.id = *id;
    rc = (int)v.verdict;
    for (int r = 1; r < world; r++)
        if (full_io(fd[r], &v, sizeof v, 1) != 0) {
            log_error("rendezvous: rank %d left before it heard the transport", r);
            rc = -1;
        }
out:
    if (ls >= 0) close(ls);
    for (int r = 1; r < world; r++) if (fd[r] >= 0) close(fd[r]);
    free(hello);
    free(fd);
    return rc == VERDICT_REFUSED ? -1 : rc;
}

/* Any other rank: say hello, hear the verdict. The verdict, or -1. */
static int rendezvous_peer(struct addrinfo *res, const char *addr, const char *port, const Hello *mine,
                           ncclUniqueId *id)
{
    double deadline = now_s() + RDV_TIMEOUT_S;
    int rc = -1, fd = -1;
    while (now_s() < deadline) {
        fd = socket(res->ai_family, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) break;
        if (fd >= 0) close(fd);
        fd = -1;
        usleep(200000);   /* rank 0 may not listen yet: retry every 0.2 s */
    }
    if (fd < 0) {
        log_error("rendezvous: rank 0 not reachable at %s:%s within %d s", addr, port, RDV_TIMEOUT_S);
        return -1;
    }
    Verdict v;
    if (full_io(fd, (void *)mine, sizeof *mine, 1) != 0 || full_io(fd, &v, sizeof v, 0) != 0 ||
        v.magic != RDV_MAGIC || v.verdict > VERDICT_REFUSED)
        log_error("rendezvous: no answer from rank 0 at %s:%s within %d s", addr, port, RDV_TIMEOUT_S);
    else if (v.verdict == VERDICT_REFUSED)
        log_error("rendezvous: rank 0 refused the transport (its log says why)");
    else {
        rc = (int)v.verdict;
        if (rc == VERDICT_NCCL) *id = v.id;
        else log_warn("collectives go through host memory (for testing: slow)");
    }
    close(fd);
    return rc;
}

static int rendezvous(const Hello *mine, int rank, int world, ncclUniqueId *id)
{
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (!addr || !*addr || !port || !*port) {
        log_error("%d ranks need MASTER_ADDR and MASTER_PORT for their rendezvous", world);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (rank == 0) hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(rank == 0 ? NULL : addr, port, &hints, &res);
    if (gai) {
        log_error("rendezvous %s:%s: %s", addr, port, gai_strerror(gai));
        return -1;
    }
    int rc = rank == 0 ? rendezvous_root(res, port, mine, world, id) : rendezvous_peer(res, addr, port, mine, id);
    freeaddrinfo(res);
    return rc;
}

/* ---- init ---------------------------------------------------------------------- */

/* Gradient reductions run on this stream, overlapping the backward pass;
 * non-blocking so it does not wait on the default stream. */
static int comm_stream_new(CudaDist *d)
{
    cudaStream_t cs;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    d->comm_stream = cs;
    return 0;
}

int cuda_dist_init(CudaDist *d, bool solo_ok)
{
    memset(d, 0, sizeof *d);
    const char *t = getenv("LLMC_TRANSPORT");
    bool solo = t && !strcmp(t, "solo");
    int mode = !t || !*t ? MODE_AUTO : !strcmp(t, "nccl") ? MODE_NCCL : !strcmp(t, "host") ? MODE_HOST : -1;
    if (solo && !solo_ok) {
        log_error("LLMC_TRANSPORT=solo measures one rank's memory (llmc-train-cuda bench), it does not train: "
                  "use nccl or host");
        return -1;
    }
    if (mode < 0 && !solo) {
        log_error("LLMC_TRANSPORT='%s': use nccl or host (unset: NCCL, or host when ranks share a GPU)", t);
        return -1;
    }
    /* the launcher's variables as dist.c reads them (the host transport's ranks) */
    DistInfo env;
    if (dist_launcher(&env, NULL) != 0) return -1;
    d->rank = env.rank;
    d->world = env.world;
    d->local_rank = env.local_rank;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        log_error("no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    /* One GPU per rank by its index on the node; more ranks than GPUs share
     * them round-robin (the rendezvous then picks the host transport). */
    int dev = d->local_rank % ndev;
    CUDA_CHECK(cudaSetDevice(dev));
    if (d->world == 1) return 0;
    if (solo) {
        d->comm = cuda_coll_solo(d->rank, d->world);
        if (!d->comm) return -1;
        log_warn("LLMC_TRANSPORT=solo: rank %d of %d runs alone, its peers' parts taken as zero "
                 "(its memory is the real rank's; its numbers are not a training)", d->rank, d->world);
        return comm_stream_new(d);
    }
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    Hello mine = {.magic = RDV_MAGIC, .rank = (uint32_t)d->rank, .world = (uint32_t)d->world,
                  .mode = (uint32_t)mode};
    memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
    /* NVLink multicast (NVLS) stays off: on nodes whose GPUs other jobs share
     * it can take them out of service. A value already in the environment is
     * kept (setenv's 0). */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int verdict = rendezvous(&mine, d->rank, d->world, &id);
    if (verdict < 0) return -1;
    if (verdict == VERDICT_NCCL) {
        ncclComm_t comm;
        NCCL_CHECK(ncclCommInitRank(&comm, d->world, id, d->rank));
        d->comm = cuda_coll_nccl(comm, d->rank, d->world);
        if (!d->comm) {
            ncclCommDestroy(comm);
            return -1;
        }
    } else {
        /* dist.c reads the same launcher variables (dist_launcher): its ranks must be ours */
        DistInfo di;
        if (dist_init(&di) != 0) return -1;
        if (di.rank != d->rank || di.world != d->world) {
            log_error("the host transport found rank %d of %d, the environment says %d of %d",
                      di.rank, di.world, d->rank, d->world);
            dist_finalize();
            return -1;
        }
        d->comm = cuda_coll_host(d->rank, d->world);
        if (!d->comm) {
            dist_finalize();
            return -1;
        }
    }
    log_info("rank %d of %d on GPU %d of %d, %s transport", d->rank, d->world, dev, ndev,
             cuda_coll_name(d->comm));
    return comm_stream_new(d);
}

void cuda_dist_finalize(CudaDist *d)
{
    if (d->comm) {
        int host = !strcmp(cuda_coll_name(d->comm), "host");
        cuda_coll_destroy(d->comm);
        d->comm = NULL;
        if (host) dist_finalize();
    }
}

double cuda_dist_sum(CudaDist *d, double v)
{
    if (d->world == 1) return v;
    return cuda_coll_sum_f64(d->comm, v);
}
