/* dist.c — ranks and collectives (the CPU backend, the CUDA host transport); see dist.h.
 *
 * Four ways to run, chosen from the environment at dist_init:
 *   - mpirun (OMPI_COMM_WORLD_SIZE set): Open MPI point-to-point messages.
 *     Needs a build with MPI (runtime/build.mk adds it when mpicc exists); a
 *     binary built without MPI refuses to start under mpirun instead of running
 *     N copies that each think they are alone.
 *   - srun (SLURM_STEP_NUM_TASKS > 1, SLURM_PROCID): a TCP rendezvous. Rank 0
 *     listens on MASTER_PORT; the others connect to MASTER_ADDR:MASTER_PORT.
 *   - torchrun-style variables (no SLURM_STEP_NUM_TASKS, WORLD_SIZE > 1, RANK,
 *     LOCAL_RANK), as a hand-started job or torchrun sets them: the same TCP
 *     rendezvous (runtime/cuda/cuda_dist.c reads the same three launchers).
 *   - none of them: rank 0 of 1, every collective is the identity.
 *
 * Every collective is a star through rank 0 built on two primitives (send to a
 * rank, receive from a rank): rank 0 receives the buffers in rank order, sums
 * them in rank order, and sends the result back. So the sum is the same bits on
 * every rank and does not depend on arrival order or on the backend.
 *
 * Ranks of a TCP job that all run on one machine (the same host name and boot
 * id; tests, and several ranks sharing one GPU) move their messages through
 * shared memory instead: one ring per direction between rank 0 and each rank,
 * the same star and the same bytes in the same order, so the same sums; the
 * sockets stay open to tell a dead peer (LLMC_DIST_SHM=0 keeps TCP).
 *
 * A dead peer never hangs the others: on TCP a closed connection is seen at
 * once (the kernel closes a killed process's sockets) and every wait is bounded
 * by LLMC_DIST_TIMEOUT seconds (default 600) plus TCP keepalive for a vanished
 * host; under mpirun, Open MPI ends the job when one process dies.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef LLMC_WITH_MPI
#include <mpi.h>
#endif
#include "dist.h"
#include "log.h"
#include "stopsig.h"

enum { BACKEND_SINGLE, BACKEND_MPI, BACKEND_TCP };

/* A peer's first message to rank 0 is three uint32 in host order: {HELLO_MAGIC, rank, world}. The magic turns
 * away a stranger that happens to connect to MASTER_PORT; a rank twice or another world size fails the start. */
#define HELLO_MAGIC 0x6c6c6d63u          /* "llmc" */
/* Collectives move at most CHUNK_ELEMS elements per message so the receive buffer (D.scratch) has a fixed size
 * whatever the tensor: 2^18 doubles = 2 MiB, allocated once at dist_init when world > 1. */
#define CHUNK_ELEMS (1u << 18)           /* elements per reduction round */

static struct {
    int backend;
    DistInfo info;
    char host[256];
    int timeout_ms;
    int *fd;            /* TCP: rank 0 holds fd[r] for r >= 1; others fd[0] (to rank 0) */
    void *scratch;      /* one chunk received from a peer (every rank when world > 1) */
    struct ShmRing *shm;        /* TCP on one machine: 2 (world - 1) rings (shm_setup), else NULL */
    size_t shm_bytes;
} D = { .backend = BACKEND_SINGLE, .info = { 0, 1, 0, "localhost" } };

/* An environment variable as a non-negative int: FALLBACK when unset or empty, -2 when it is set but not a
 * decimal from 0 to 2^24 (which the cast to int keeps whole). The caller names the variable in its message. */
static int env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    if (!s || !*s) return fallback;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1 << 24) return -2;   /* caller reports */
    return (int)v;
}

_Noreturn void dist_abort(const char *why)
{
    log_error("%s; stopping all ranks", why);
#ifdef LLMC_WITH_MPI
    if (D.backend == BACKEND_MPI) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    /* Closing our sockets is what tells the other ranks to stop. */
    if (D.backend == BACKEND_TCP) {
        int n = D.info.rank == 0 ? D.info.world : 1;
        for (int i = 0; i < n; i++) if (D.fd[i] >= 0) close(D.fd[i]);
    }
    exit(1);
}

/* A peer is gone or the transport broke while talking to it: WHAT is the verb phrase ("lost the connection to")
 * the message completes with the peer's rank. Ends this process like dist_abort. */
static _Noreturn void peer_failed(int peer, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s rank %d (it exited, was killed, or its node failed)", what, peer);
    dist_abort(msg);
}

/* ---- TCP primitives ---------------------------------------------------- */

/* Seconds on the monotonic clock: deadlines do not move when NTP or an administrator sets the wall clock. */
static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The socket a message to or from PEER goes through. TCP is a star: rank 0 holds one socket per peer and every
 * other rank holds only its socket to rank 0 (fd[0]), whichever peer the message is meant for. */
static int tcp_fd_of(int peer)
{
    return D.info.rank == 0 ? D.fd[peer] : D.fd[0];
}

/* Block until FD is ready for EVENTS (POLLIN or POLLOUT). Never returns on failure: no progress within
 * LLMC_DIST_TIMEOUT, or a poll error other than a signal, ends the job (dist_abort), so a hung peer cannot
 * hang this rank. EINTR (a stop signal arriving) polls again with a fresh timeout. */
static void wait_fd(int fd, short events, int peer)
{
    struct pollfd p = { .fd = fd, .events = events };
    for (;;) {
        int r = poll(&p, 1, D.timeout_ms);
        if (r > 0) return;
        if (r == 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "no progress from rank %d for %d s (LLMC_DIST_TIMEOUT)",
                     peer, D.timeout_ms / 1000);
            dist_abort(msg);
        }
        if (errno != EINTR) peer_failed(peer, "poll failed on the connection to");
    }
}

/* Send all BYTES to PEER or end the job. MSG_NOSIGNAL: writing to a socket the peer closed would otherwise raise
 * SIGPIPE and kill this rank with no message; MSG_DONTWAIT with wait_fd first: a full socket buffer waits in
 * poll, where the timeout applies, never inside send. */
static void tcp_send(int peer, const void *buf, size_t bytes)
{
    int fd = tcp_fd_of(peer);
    const char *p = buf;
    while (bytes) {
        wait_fd(fd, POLLOUT, peer);
        ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0) peer_failed(peer, "lost the connection to");
        p += n; bytes -= (size_t)n;
    }
}

/* Receive exactly BYTES from PEER or end the job; recv returning 0 is the peer closing its end (it exited or
 * called dist_abort). */
static void tcp_recv(int peer, void *buf, size_t bytes)
{
    int fd = tcp_fd_of(peer);
    char *p = buf;
    while (bytes) {
        wait_fd(fd, POLLIN, peer);
        ssize_t n = recv(fd, p, bytes, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0) peer_failed(peer, "lost the connection to");
        p += n; bytes -= (size_t)n;
    }
}

/* ---- shared-memory rings (ranks of a TCP job on one machine) ------------
 * A single-producer single-consumer byte ring per direction and peer: the
 * sender copies in and publishes head, the receiver copies out and publishes
 * tail (release/acquire, lock-free 64-bit atomics in the shared mapping). A
 * full or empty ring waits: a short spin, then 20 us sleeps, looking at the
 * peer's socket every 500 of them (no data travels there any more, so readable means
 * closed: the peer exited or was killed) and ending the job after
 * LLMC_DIST_TIMEOUT without progress, as a TCP wait does. Measured reason
 * (2026-12-03): the CUDA trainer's host transport ran ZeRO-3 on 2 ranks of the
 * 0.5B shape at 2.4 s a step over TCP loopback (one H200; 0.03 s on one rank);
 * `dist_test bw` on a 2-core machine, 64 MiB of f32 a rank, TCP sockets then
 * these rings: reduce-scatter 1.93 -> 2.29 GB/s (2 ranks), 0.65 -> 0.86 (4);
 * all-gather 2.31 -> 4.95 and 0.86 -> 1.97. In that trainer run the rings gave
 * 2.3 s a step (2026-12-03, fourth session): its step is not bound by these
 * copies, so what bounds it is still to be found. */
#define SHM_RING_BYTES (8u << 20)   /* 8 chunks of f32 in flight per direction */

typedef struct ShmRing {
    _Atomic uint64_t head;           /* bytes written, ever (the sender's) */
    char pad0[64 - sizeof(uint64_t)];
    _Atomic uint64_t tail;           /* bytes read, ever (the receiver's) */
    char pad1[64 - sizeof(uint64_t)];
    unsigned char data[SHM_RING_BYTES];
} ShmRing;

/* The ring carrying messages from rank `from` to rank `to` (one of them is 0). */
static ShmRing *shm_ring(int from, int to)
{
    int peer = from == 0 ? to : from;
    return &D.shm[2 * (peer - 1) + (from == 0 ? 0 : 1)];
}

/* Wait round `spins` of a full or empty ring: spin, then sleep; every 500 sleeps the
 * peer's socket says whether it is still there (1: gone; the caller looks at
 * the ring once more, since a peer may write its last message and exit); no
 * progress for LLMC_DIST_TIMEOUT ends the job. `since`: when the ring last moved. */
static int shm_wait(int peer, unsigned spins, double since)
{
    if (spins < 2000) return 0;
    struct timespec nap = {0, 20000};
    nanosleep(&nap, NULL);
    if (spins % 500) return 0;
    struct pollfd p = { .fd = tcp_fd_of(peer), .events = POLLIN };
    char c;
    if (poll(&p, 1, 0) > 0 && recv(p.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return 1;
    if ((now_s() - since) * 1000 > D.timeout_ms) {
        char msg[256];
        snprintf(msg, sizeof msg, "no progress from rank %d for %d s (LLMC_DIST_TIMEOUT)", peer, D.timeout_ms / 1000);
        dist_abort(msg);
    }
    return 0;
}

static void shm_send(int peer, const void *buf, size_t bytes)
{
    ShmRing *r = shm_ring(D.info.rank, peer);
    const unsigned char *p = buf;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    unsigned spins = 0;
    int gone = 0;
    double since = now_s();
    while (bytes) {
        uint64_t room = SHM_RING_BYTES - (head - atomic_load_explicit(&r->tail, memory_order_acquire));
        if (!room && gone) peer_failed(peer, "lost the connection to");
        if (!room) { gone = shm_wait(peer, ++spins, since); continue; }
        size_t at = (size_t)(head % SHM_RING_BYTES), n = bytes < room ? bytes : (size_t)room;
        if (n > SHM_RING_BYTES - at) n = SHM_RING_BYTES - at;   /* up to the end; the rest next round */
        memcpy(r->data + at, p, n);
        head += n;
        atomic_store_explicit(&r->head, head, memory_order_release);
        p += n; bytes -= n;
        spins = 0;
        since = now_s();
    }
}

static void shm_recv(int peer, void *buf, size_t bytes)
{
    ShmRing *r = shm_ring(peer, D.info.rank);
    unsigned char *p = buf;
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    unsigned spins = 0;
    int gone = 0;
    double since = now_s();
    while (bytes) {
        uint64_t avail = atomic_load_explicit(&r->head, memory_order_acquire) - tail;
        if (!avail && gone) peer_failed(peer, "lost the connection to");
        if (!avail) { gone = shm_wait(peer, ++spins, since); continue; }
        size_t at = (size_t)(tail % SHM_RING_BYTES), n = bytes < avail ? bytes : (size_t)avail;
        if (n > SHM_RING_BYTES - at) n = SHM_RING_BYTES - at;
        memcpy(p, r->data + at, n);
        tail += n;
        atomic_store_explicit(&r->tail, tail, memory_order_release);
        p += n; bytes -= n;
        spins = 0;
        since = now_s();
    }
}

/* ---- point-to-point, whichever backend --------------------------------- */

/* Blocking point-to-point send of BYTES to rank PEER over the chosen backend; ends the job on failure. Every
 * collective below is written with this and recv_from only. */
static void send_to(int peer, const void *buf, size_t bytes)
{
#ifdef LLMC_WITH_MPI
    if (D.backend == BACKEND_MPI) {
        const char *p = buf;
        while (bytes) {      /* MPI counts are int */
            int n = bytes > (1u << 30) ? 1 << 30 : (int)bytes;
            if (MPI_Send(p, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
                peer_failed(peer, "MPI_Send failed to");
            p += n; bytes -= (size_t)n;
        }
        return;
    }
#endif
    if (D.shm) shm_send(peer, buf, bytes);
    else tcp_send(peer, buf, bytes);
}

/* The matching blocking receive of exactly BYTES from rank PEER; ends the job on failure. */
static void recv_from(int peer, void *buf, size_t bytes)
{
#ifdef LLMC_WITH_MPI
    if (D.backend == BACKEND_MPI) {
        char *p = buf;
        while (bytes) {
            int n = bytes > (1u << 30) ? 1 << 30 : (int)bytes;
            if (MPI_Recv(p, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                peer_failed(peer, "MPI_Recv failed from");
            p += n; bytes -= (size_t)n;
        }
        return;
    }
#endif
    if (D.shm) shm_recv(peer, buf, bytes);
    else tcp_recv(peer, buf, bytes);
}

/* ---- TCP rendezvous ------------------------------------------------------ */

/* A peer's host that vanishes (power loss, network cut) closes nothing, so without keepalive a rank would wait
 * the whole LLMC_DIST_TIMEOUT. First probe after 10 s idle, then every 5 s, dropped after 3 misses: a dead host
 * is seen in about 25 s. TCP_NODELAY: the collectives' small messages (dist_any's 4 bytes) are not held back by
 * Nagle's algorithm waiting for an acknowledgement. */
static void set_keepalive(int fd)
{
    int on = 1, idle = 10, intvl = 5, cnt = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

/* Rank 0: accept world-1 connections; each peer says who it is. 0 when every rank 1..world-1 has connected
 * (D.fd[r] set); -1 (logged, unless a stop signal ended the wait) on a listen error, the LLMC_DIST_TIMEOUT
 * deadline, or a peer that claims another world size or a rank already joined. */
static int tcp_accept_all(int port)
{
    /* IPv4 and IPv6 on one socket where the host has IPv6, else IPv4 only. */
    int ls = socket(AF_INET6, SOCK_STREAM, 0), v6only = 0, on = 1, bound;
    if (ls >= 0) {
        struct sockaddr_in6 a;
        memset(&a, 0, sizeof a);
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons((uint16_t)port);
        setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        bound = bind(ls, (struct sockaddr *)&a, sizeof a) == 0;
    } else {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons((uint16_t)port);
        ls = socket(AF_INET, SOCK_STREAM, 0);
        if (ls < 0) { log_error("socket: %s", strerror(errno)); return -1; }
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        bound = bind(ls, (struct sockaddr *)&a, sizeof a) == 0;
    }
    if (!bound || listen(ls, 128) != 0) {
        log_error("cannot listen on MASTER_PORT %d: %s", port, strerror(errno));
        close(ls);
        return -1;
    }
    double deadline = now_s() + D.timeout_ms / 1000.0;
    for (int joined = 1; joined < D.info.world;) {
        /* a stop signal while ranks gather (a requeued segment can get Slurm's
         * time-limit USR2 at once, and a rank may die of it before its handler
         * is set): stop waiting, the caller exits as a stop */
        if (stopsig_requested()) { close(ls); return -1; }
        int left_ms = (int)((deadline - now_s()) * 1000);
        struct pollfd p = { .fd = ls, .events = POLLIN };
        /* poll in slices of at most 250 ms: a stop signal is seen within a quarter second */
        int r = left_ms > 0 ? poll(&p, 1, left_ms < 250 ? left_ms : 250) : 0;
        if ((r < 0 && errno == EINTR) || (r == 0 && left_ms > 250)) continue;
        if (r <= 0) {
            log_error("only %d of %d ranks connected to port %d within %d s",
                      joined, D.info.world, port, D.timeout_ms / 1000);
            close(ls);
            return -1;
        }
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) continue;
        uint32_t hello[3];
        struct pollfd q = { .fd = fd, .events = POLLIN };
        /* A stranger on the port gets 10 s to say hello, then is dropped. */
        if (poll(&q, 1, 10000) != 1 || recv(fd, hello, sizeof hello, MSG_WAITALL) != sizeof hello ||
            hello[0] != HELLO_MAGIC) {
            close(fd);
            continue;
        }
        int peer = (int)hello[1];
        if ((int)hello[2] != D.info.world || peer <= 0 || peer >= D.info.world || D.fd[peer] >= 0) {
            log_error("rank %d joined with world size %u (expected %d, or a rank twice)",
                      peer, hello[2], D.info.world);
            close(fd); close(ls);
            return -1;
        }
        set_keepalive(fd);
        D.fd[peer] = fd;
        joined++;
    }
    close(ls);
    return 0;
}

/* Rank > 0: connect to rank 0, retrying while it is not listening yet. Ranks start in any order, so a refused
 * connection is normal at first: every address MASTER_ADDR resolves to is tried every 100 ms until
 * LLMC_DIST_TIMEOUT. 0 when connected and the hello is sent; -1 otherwise. */
static int tcp_connect_root(const char *addr, int port)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
    int rc = getaddrinfo(addr, service, &hints, &res);
    if (rc != 0) {
        log_error("cannot resolve MASTER_ADDR '%s': %s", addr, gai_strerror(rc));
        return -1;
    }
    double deadline = now_s() + D.timeout_ms / 1000.0;
    int fd = -1;
    while (fd < 0 && now_s() < deadline && !stopsig_requested()) {
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
            fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) { close(fd); fd = -1; }
        }
        if (fd < 0) usleep(100 * 1000);
    }
    freeaddrinfo(res);
    if (fd < 0 && stopsig_requested()) return -1;   /* the caller exits as a stop */
    if (fd < 0) {
        log_error("could not connect to rank 0 at %s:%d within %d s", addr, port, D.timeout_ms / 1000);
        return -1;
    }
    set_keepalive(fd);
    D.fd[0] = fd;
    uint32_t hello[3] = { HELLO_MAGIC, (uint32_t)D.info.rank, (uint32_t)D.info.world };
    tcp_send(0, hello, sizeof hello);
    return 0;
}

/* ---- init --------------------------------------------------------------- */

/* D.host (the name log lines and the start line show): Slurm's node name, else the host name. */
static void set_host(void)
{
    /* Slurm's node name tells ranks apart even when nodes share a host. */
    const char *node = getenv("SLURMD_NODENAME");
    if (node && *node) snprintf(D.host, sizeof D.host, "%s", node);
    else if (gethostname(D.host, sizeof D.host) != 0) strcpy(D.host, "?");
    D.host[sizeof D.host - 1] = '\0';
    D.info.host = D.host;
}

/* ---- the launcher ----------------------------------------------------------
 * The first launcher whose world size is set (and not 0) started this process. */
static const struct {
    const char *name, *world, *rank, *local;
} launchers[] = {
    {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID"},
    {"a torchrun-style launch (WORLD_SIZE)", "WORLD_SIZE", "RANK", "LOCAL_RANK"},
};
enum { LAUNCH_MPIRUN, LAUNCH_SRUN, LAUNCH_TORCHRUN, N_LAUNCHERS };

/* *which: the launcher's index, or -1 for none (rank 0 of 1). */
/* The rank, world and local rank the launcher's variables give, in OUT. Returns 1 (logged) when a variable is
 * set but not a number or a rank is outside 0..world-1; a world of 1 needs no rank variable. */
static int launcher_of(DistInfo *out, int *which)
{
    out->rank = 0;
    out->world = 1;
    out->local_rank = 0;
    *which = -1;
    int w[N_LAUNCHERS];
    for (int i = 0; i < N_LAUNCHERS; i++) {
        w[i] = env_int(launchers[i].world, 0);
        if (w[i] < 0) {
            log_error("%s='%s' is not a number of ranks", launchers[i].world, getenv(launchers[i].world));
            return 1;
        }
    }
    for (int i = 0; i < N_LAUNCHERS; i++) {
        if (w[i] == 0) continue;
        *which = i;
        out->world = w[i];
        if (w[i] > 1) {
            int r = env_int(launchers[i].rank, -1);
            if (r < 0 || r >= w[i]) {
                log_error("%s is missing or not in 0..%d", launchers[i].rank, w[i] - 1);
                return 1;
            }
            out->rank = r;
        }
        int l = env_int(launchers[i].local, 0);
        if (l < 0) {
            log_error("%s='%s' is not a local rank", launchers[i].local, getenv(launchers[i].local));
            return 1;
        }
        out->local_rank = l;
        return 0;
    }
    return 0;
}

int dist_launcher(DistInfo *out, const char **name)
{
    int which;
    int rc = launcher_of(out, &which);
    if (name) *name = which < 0 ? NULL : launchers[which].name;
    return rc;
}

/* This machine as ranks compare it: its host name and boot id (equal on every
 * rank of one machine and boot; containers on one host share the boot id, and
 * then a segment another cannot open falls back to TCP). "" when unknown. */
static void machine_id(char id[128])
{
    char host[64] = "", boot[40] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    memset(id, 0, 128);
    if (gethostname(host, sizeof host - 1) != 0 || strlen(boot) < 16) return;
    snprintf(id, 128, "%s/%s", host, boot);
}

/* TCP ranks all on this machine: the rings of the shared-memory path (above).
 * Rank 0 compares every rank's machine_id with its own, makes the segment and
 * names it; each rank maps it and says whether it could; only when all could
 * does any use it (rank 0 then unlinks the name: the mappings stay, and
 * nothing is left in /dev/shm whatever happens later). Any failure keeps TCP. */
#define SHM_MAX_WORLD 64   /* 16 MiB a peer: 1 GiB of /dev/shm at most */

static void shm_setup(int port)
{
    int want = env_int("LLMC_DIST_SHM", 1);
    if (want == 0 || D.info.world > SHM_MAX_WORLD) return;
    if (want != 1) log_warn("LLMC_DIST_SHM must be 0 or 1; using shared memory where ranks share a machine");
    char id[128], other[128], name[64] = "";
    machine_id(id);
    size_t bytes = (size_t)2 * (size_t)(D.info.world - 1) * sizeof(ShmRing);
    uint32_t use = id[0] != 0, ok = 0;
    void *map = MAP_FAILED;
    if (D.info.rank == 0) {
        for (int r = 1; r < D.info.world; r++) {
            tcp_recv(r, other, sizeof other);
            if (memcmp(id, other, sizeof other)) use = 0;
        }
        snprintf(name, sizeof name, "/llmc-dist-%ld-%d", (long)getpid(), port);
        int fd = use ? shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600) : -1;
        if (fd >= 0) {
            /* reserved now: a full /dev/shm (a container's 64 MiB) is TCP here, not a SIGBUS mid-run */
            if (ftruncate(fd, (off_t)bytes) == 0 && posix_fallocate(fd, 0, (off_t)bytes) == 0)
                map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
        }
        use = map != MAP_FAILED;
        if (fd >= 0 && !use) shm_unlink(name);
        ok = use;
        for (int r = 1; r < D.info.world; r++) {
            tcp_send(r, &use, sizeof use);
            tcp_send(r, name, sizeof name);
        }
        for (int r = 1; r < D.info.world; r++) {
            uint32_t theirs;
            tcp_recv(r, &theirs, sizeof theirs);
            ok &= theirs;
        }
        if (use) shm_unlink(name);
        for (int r = 1; r < D.info.world; r++) tcp_send(r, &ok, sizeof ok);
    } else {
        tcp_send(0, id, sizeof id);
        tcp_recv(0, &use, sizeof use);
        tcp_recv(0, name, sizeof name);
        name[sizeof name - 1] = '\0';
        int fd = use ? shm_open(name, O_RDWR, 0) : -1;
        if (fd >= 0) {
            map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
        }
        uint32_t mine = map != MAP_FAILED;
        tcp_send(0, &mine, sizeof mine);
        tcp_recv(0, &ok, sizeof ok);
    }
    if (ok) {
        D.shm = map;
        D.shm_bytes = bytes;
    } else if (map != MAP_FAILED) {
        munmap(map, bytes);
    }
}

/* Ranks over TCP (srun's or torchrun-style variables): the rendezvous at
 * MASTER_ADDR:MASTER_PORT. WHO names the launcher in messages; ENV holds the rank and world it set. 0 when
 * every rank is connected. */
static int tcp_init(const char *who, const DistInfo *env)
{
    const char *addr = getenv("MASTER_ADDR");
    int port = env_int("MASTER_PORT", -1);
    if (!addr || !*addr || port <= 0 || port > 65535) {
        log_error("%s started %d ranks; set MASTER_ADDR and MASTER_PORT "
                  "(1-65535) for their rendezvous (the emitted train script does)", who, env->world);
        return 1;
    }
    D.info.rank = env->rank;
    D.info.world = env->world;
    D.info.local_rank = env->local_rank;
    D.backend = BACKEND_TCP;
    D.fd = malloc(sizeof(int) * (size_t)env->world);
    if (!D.fd) { log_error("out of memory"); return 1; }
    for (int i = 0; i < env->world; i++) D.fd[i] = -1;
    log_set_rank(D.info.rank, D.info.world, D.host);
    if ((env->rank == 0 ? tcp_accept_all(port) : tcp_connect_root(addr, port)) != 0) return 1;
    shm_setup(port);
    return 0;
}

int dist_init(DistInfo *out)
{
    set_host();
    int t = env_int("LLMC_DIST_TIMEOUT", 600);
    if (t <= 0 || t > 2000000) {   /* kept in int milliseconds */
        log_error("LLMC_DIST_TIMEOUT must be a number of seconds from 1 to 2000000");
        return 1;
    }
    D.timeout_ms = t * 1000;
    D.info.rank = 0; D.info.world = 1; D.info.local_rank = 0;

    DistInfo env;
    int which;
    if (launcher_of(&env, &which) != 0) return 1;
    if (which == LAUNCH_MPIRUN) {
#ifdef LLMC_WITH_MPI
        int provided;
        /* FUNNELED: the process may have threads, but only this main thread calls MPI */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            log_error("MPI_Init failed");
            return 1;
        }
        /* Errors return to us and end the job with our message. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &D.info.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &D.info.world);
        D.info.local_rank = env.local_rank;
        D.backend = BACKEND_MPI;
#else
        if (env.world > 1) {
            log_error("started by mpirun with %d ranks, but this binary was built "
                      "without MPI (no mpicc at build time); rebuild with Open MPI installed, "
                      "or launch with srun and MASTER_ADDR/MASTER_PORT", env.world);
            return 1;
        }
#endif
    } else if (which >= 0 && env.world > 1) {   /* srun or torchrun-style: TCP */
        if (tcp_init(launchers[which].name, &env) != 0) return 1;
    }
    log_set_rank(D.info.rank, D.info.world, D.host);
    if (D.info.world > 1) {
        /* sized for the widest element a collective moves (f64); the f32 ones use part of it */
        D.scratch = malloc(CHUNK_ELEMS * sizeof(double));
        if (!D.scratch) { log_error("out of memory"); return 1; }
    }
    /* One line per rank at the start, so a job's log shows where every rank ran. */
    if (D.info.world > 1)
        log_info("rank %d of %d started on %s (local rank %d, %s)", D.info.rank, D.info.world, D.host,
                 D.info.local_rank, D.backend == BACKEND_MPI ? "Open MPI"
                 : D.shm ? "TCP rendezvous, shared memory" : "TCP rendezvous");
    if (out) *out = D.info;
    return 0;
}

/* MPI_Finalize waits for every rank, so a rank that leaves early (after an
 * error) would hang there while the others wait in a collective for it. Meet
 * first in a barrier with a deadline (30 s, or LLMC_DIST_TIMEOUT if shorter);
 * when the others do not come, end the job. */
#define FINALIZE_WAIT_S 30

void dist_finalize(void)
{
#ifdef LLMC_WITH_MPI
    if (D.backend == BACKEND_MPI) {
        MPI_Request req;
        int done = 0;
        int wait_s = D.timeout_ms / 1000 < FINALIZE_WAIT_S ? D.timeout_ms / 1000 : FINALIZE_WAIT_S;
        double deadline = now_s() + wait_s;
        if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) dist_abort("MPI_Ibarrier failed at the end of the run");
        while (!done) {
            if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) dist_abort("MPI_Test failed at the end of the run");
            if (done) break;
            if (now_s() > deadline) {
                char msg[160];
                snprintf(msg, sizeof msg, "the other ranks did not reach the end of the run within %d s "
                         "(one of them failed or is stuck)", wait_s);
                dist_abort(msg);
            }
            usleep(1000);
        }
        MPI_Finalize();
    }
#endif
    if (D.backend == BACKEND_TCP) {
        int n = D.info.rank == 0 ? D.info.world : 1;
        for (int i = 0; i < n; i++) if (D.fd[i] >= 0) close(D.fd[i]);
        free(D.fd);
        D.fd = NULL;
    }
    free(D.scratch);
    D.scratch = NULL;
    if (D.shm) munmap(D.shm, D.shm_bytes);
    D.shm = NULL;
    D.backend = BACKEND_SINGLE;
}

/* ---- collectives --------------------------------------------------------- */

/* Sum over ranks in rank order, chunk by chunk, result back to every rank. */
#define DEFINE_ALLREDUCE(NAME, T)                                                  \
    int NAME(T *buf, size_t n)                                                     \
    {                                                                              \
        if (D.info.world == 1) return 0;                                           \
        for (size_t off = 0; off < n; off += CHUNK_ELEMS) {                        \
            size_t m = n - off < CHUNK_ELEMS ? n - off : CHUNK_ELEMS;              \
            T *part = buf + off;                                                   \
            if (D.info.rank == 0) {                                                \
                T *in = D.scratch;                                                 \
                for (int r = 1; r < D.info.world; r++) {                           \
                    recv_from(r, in, m * sizeof(T));                               \
                    for (size_t i = 0; i < m; i++) part[i] += in[i];               \
                }                                                                  \
                /* every rank gets rank 0's sum: the same bits everywhere */ \
                for (int r = 1; r < D.info.world; r++) send_to(r, part, m * sizeof(T)); \
            } else {                                                               \
                send_to(0, part, m * sizeof(T));                                   \
                recv_from(0, part, m * sizeof(T));                                 \
            }                                                                      \
        }                                                                          \
        return 0;                                                                  \
    }

DEFINE_ALLREDUCE(dist_allreduce_sum_f32, float)
DEFINE_ALLREDUCE(dist_allreduce_sum_f64, double)

int dist_broadcast(void *buf, size_t bytes)
{
    if (D.info.world == 1) return 0;
    if (D.info.rank == 0)
        for (int r = 1; r < D.info.world; r++) send_to(r, buf, bytes);
    else
        recv_from(0, buf, bytes);
    return 0;
}

/* Also the barrier: no rank returns before rank 0 has heard from every rank. */
int dist_any(int flag)
{
    if (D.info.world == 1) return flag != 0;
    int32_t v = flag != 0;
    if (D.info.rank == 0) {
        for (int r = 1; r < D.info.world; r++) {
            int32_t in;
            recv_from(r, &in, sizeof in);
            v |= in != 0;
        }
        for (int r = 1; r < D.info.world; r++) send_to(r, &v, sizeof v);
    } else {
        send_to(0, &v, sizeof v);
        recv_from(0, &v, sizeof v);
    }
    return v;
}

int dist_barrier(void)
{
    dist_any(0);
    return 0;
}

/* ---- sharded collectives (ZeRO) -------------------------------------------
 * A flat buffer split into contiguous shards, rank q owning [starts[q],
 * starts[q+1]). Both collectives move one chunk of one owner's part at a time
 * through the same star as above: a peer's chunk reaches a rank other than 0
 * relayed by rank 0 (TCP connects only rank 0 to the others). Every rank walks
 * the same sequence of (owner, chunk) transfers, each a blocking send matched by
 * a blocking receive, so the earliest unfinished one always has both ends
 * waiting on it: no deadlock, whatever the launcher. */

/* The part of [base, base+n) that rank q owns: [*a, *b) (empty when *a >= *b). */
static void owned(const size_t *starts, int q, size_t base, size_t n, size_t *a, size_t *b)
{
    *a = starts[q] > base ? starts[q] : base;
    *b = starts[q + 1] < base + n ? starts[q + 1] : base + n;
}

int dist_reduce_scatter_f32(const float *buf, size_t base, size_t n, const size_t *starts, float *out, int add)
{
    const int me = D.info.rank, W = D.info.world;
    float *in = D.scratch;
    for (int q = 0; q < W; q++) {
        size_t a, b;
        owned(starts, q, base, n, &a, &b);
        for (size_t off = a; off < b; off += CHUNK_ELEMS) {
            size_t m = b - off < CHUNK_ELEMS ? b - off : CHUNK_ELEMS;
            const float *mine = buf + (off - base);
            if (me == q) {
                float *acc = out + (off - starts[q]);
                for (int r = 0; r < W; r++) {   /* rank order: ((acc + b_0) + b_1) + ... */
                    const float *src = mine;
                    if (r != q) { recv_from(q == 0 ? r : 0, in, m * sizeof(float)); src = in; }
                    if (r == 0 && !add) memcpy(acc, src, m * sizeof(float));
                    else for (size_t i = 0; i < m; i++) acc[i] += src[i];
                }
            } else if (me == 0) {               /* relay every other rank's chunk to q */
                for (int r = 0; r < W; r++) {
                    if (r == q) continue;
                    if (r == 0) { send_to(q, mine, m * sizeof(float)); continue; }
                    recv_from(r, in, m * sizeof(float));
                    send_to(q, in, m * sizeof(float));
                }
            } else {
                send_to(0, mine, m * sizeof(float));
            }
        }
    }
    return 0;
}

int dist_allgather_bytes(const void *shard, const size_t *starts, size_t base, size_t n, size_t elem, void *out)
{
    const int me = D.info.rank, W = D.info.world;
    for (int q = 0; q < W; q++) {
        size_t a, b;
        owned(starts, q, base, n, &a, &b);
        for (size_t off = a; off < b; off += CHUNK_ELEMS) {
            size_t m = b - off < CHUNK_ELEMS ? b - off : CHUNK_ELEMS;
            char *dst = (char *)out + (off - base) * elem;
            if (me == q) {
                const char *src = (const char *)shard + (off - starts[q]) * elem;
                if (dst != src) memmove(dst, src, m * elem);
                if (q != 0) send_to(0, dst, m * elem);
                else for (int r = 1; r < W; r++) send_to(r, dst, m * elem);
            } else if (me == 0) {               /* from q, on to everyone else */
                recv_from(q, dst, m * elem);
                for (int r = 1; r < W; r++) if (r != q) send_to(r, dst, m * elem);
            } else {
                recv_from(0, dst, m * elem);
            }
        }
    }
    return 0;
}

int dist_allgather_f32(const float *shard, const size_t *starts, size_t base, size_t n, float *out)
{
    return dist_allgather_bytes(shard, starts, base, n, sizeof(float), out);
}
