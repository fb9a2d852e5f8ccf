/* dist_test — drives runtime/base/dist.c under a real launcher (tests/e2e/dist.sh).
 *
 *   dist_test check   run every collective on known inputs; each rank prints
 *                     "rank R/W ok HASH" where HASH covers the reduced bits, so
 *                     the script can check that all ranks hold the same bits.
 *   dist_test loop    allreduce forever (a training loop without a model); on
 *                     SIGUSR2/SIGTERM the ranks agree to stop (dist_any) and exit 3.
 *                     Writes "ready" once the first collective is done.
 *   dist_test leave0  rank 0 fails and leaves at once while the others wait for it
 *                     in a collective: the job must still end, with a message.
 *   dist_test logstream  a progress line on stdout, then log_info_to_stderr and one
 *                     on stderr (a command whose stdout is its answer, as bench's).
 *   dist_test bw      rank 0 prints the ZeRO reduce-scatter's and all-gather's
 *                     GB/s over 64 MiB of floats (LLMC_DIST_SHM=0 against the
 *                     default: the figure behind dist.c's shared-memory rings).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "dist.h"
#include "log.h"
#include "stopsig.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h;
}

/* A value whose sum depends on the order of addition in float. */
static float term(int rank, size_t i)
{
    return (float)(1.0 / (1.0 + (double)i)) * (rank % 2 ? 1e-7f : 1e7f) + (float)rank * 0.3f;
}

static int check(const DistInfo *di)
{
    int bad = 0;
    /* f32 across several reduction chunks (dist.c reduces 2^18 elements a round). */
    size_t n = (1u << 18) * 2 + 12345;
    float *v = malloc(n * sizeof *v);
    double *d = malloc(n * sizeof *d);
    if (!v || !d) return 1;
    for (size_t i = 0; i < n; i++) { v[i] = term(di->rank, i); d[i] = (double)term(di->rank, i); }
    dist_allreduce_sum_f32(v, n);
    dist_allreduce_sum_f64(d, n);
    for (size_t i = 0; i < n; i++) {
        float want = 0.0f;            /* rank order, left to right */
        double wantd = 0.0;
        for (int r = 0; r < di->world; r++) { want += term(r, i); wantd += (double)term(r, i); }
        if (memcmp(&want, &v[i], sizeof want) || memcmp(&wantd, &d[i], sizeof wantd)) {
            log_error("element %zu: got %.9g/%.17g, rank-order sum is %.9g/%.17g",
                      i, v[i], d[i], want, wantd);
            bad = 1;
            break;
        }
    }
    uint64_t h = fnv(1469598103934665603ull, v, n * sizeof *v);
    h = fnv(h, d, n * sizeof *d);

    /* ZeRO's sharded collectives as the CUDA host transport uses them: equal
     * shards (starts q * shard) over several chunks; then uneven shards of
     * 2-byte elements (bf16), gathered in place. */
    size_t shard = (1u << 18) + 777, full = shard * (size_t)di->world;
    float *rs = malloc(full * sizeof *rs), *rs_out = malloc(shard * sizeof *rs_out);
    size_t *starts = malloc(sizeof(size_t) * ((size_t)di->world + 1));
    if (!rs || !rs_out || !starts) return 1;
    for (int q = 0; q <= di->world; q++) starts[q] = (size_t)q * shard;
    for (size_t i = 0; i < full; i++) rs[i] = term(di->rank, i);
    dist_reduce_scatter_f32(rs, 0, full, starts, rs_out, 0);
    for (size_t j = 0; j < shard; j++) {
        size_t i = (size_t)di->rank * shard + j;
        float want = term(0, i);
        for (int r = 1; r < di->world; r++) want += term(r, i);
        if (memcmp(&want, &rs_out[j], sizeof want)) {
            log_error("reduce-scatter element %zu: got %.9g, rank-order sum is %.9g", i, rs_out[j], want);
            bad = 1;
            break;
        }
    }
    /* all-gather of f32: each rank's shard is its reduced part (rs_out); the
     * hash covers the gathered whole, which every rank must hold alike */
    dist_allgather_f32(rs_out, starts, 0, full, rs);
    for (size_t i = 0; i < full && !bad; i++) {
        float want = term(0, i);
        for (int r = 1; r < di->world; r++) want += term(r, i);
        if (memcmp(&want, &rs[i], sizeof want)) {
            log_error("all-gather f32 element %zu: got %.9g, want %.9g", i, rs[i], want);
            bad = 1;
        }
    }
    h = fnv(h, rs, full * sizeof *rs);
    /* bytes: rank q owns q * 3 + 1 more elements than rank 0, values from its rank */
    starts[0] = 0;
    for (int q = 0; q < di->world; q++) starts[q + 1] = starts[q] + shard + (size_t)q * 3 + 1;
    size_t nb = starts[di->world];
    uint16_t *g = calloc(nb, sizeof *g);
    if (!g) return 1;
    for (size_t i = starts[di->rank]; i < starts[di->rank + 1]; i++) g[i] = (uint16_t)(di->rank * 7919 + i);
    dist_allgather_bytes(g + starts[di->rank], starts, 0, nb, sizeof *g, g);
    for (int q = 0; q < di->world && !bad; q++)
        for (size_t i = starts[q]; i < starts[q + 1]; i++)
            if (g[i] != (uint16_t)(q * 7919 + i)) {
                log_error("all-gather bytes element %zu (rank %d's): got %u", i, q, g[i]);
                bad = 1;
                break;
            }
    h = fnv(h, g, nb * sizeof *g);
    free(rs); free(rs_out); free(starts); free(g);

    char msg[64] = {0};
    if (di->rank == 0) snprintf(msg, sizeof msg, "hello from rank 0 of %d", di->world);
    dist_broadcast(msg, sizeof msg);
    char want[64] = {0};
    snprintf(want, sizeof want, "hello from rank 0 of %d", di->world);
    if (memcmp(msg, want, sizeof want)) { log_error("broadcast got '%s'", msg); bad = 1; }

    if (dist_any(0) != 0) { log_error("dist_any(0 everywhere) != 0"); bad = 1; }
    if (dist_any(di->rank == di->world - 1) != 1) { log_error("dist_any(last rank) != 1"); bad = 1; }
    dist_barrier();
    h = fnv(h, msg, sizeof msg);
    printf("rank %d/%d ok %016llx\n", di->rank, di->world, (unsigned long long)h);
    fflush(stdout);
    free(v); free(d);
    return bad;
}

static int loop(const DistInfo *di)
{
    float g[1024];
    for (long step = 0;; step++) {
        for (int i = 0; i < 1024; i++) g[i] = (float)(di->rank + i);
        dist_allreduce_sum_f32(g, 1024);
        if (step == 0) log_info("ready pid %ld", (long)getpid());
        if (dist_any(stopsig_requested())) {
            log_info("stop requested (%s), step %ld finished; exiting %d",
                     stopsig_name() ? stopsig_name() : "by another rank", step, STOP_EXIT_REQUEUE);
            return STOP_EXIT_REQUEUE;
        }
        usleep(20 * 1000);
    }
}

/* GB/s of one collective: each rank's buffer of n floats over the seconds of `rounds` calls */
static int bw(const DistInfo *di)
{
    const size_t n = (size_t)16 << 20;   /* 64 MiB of f32 */
    const int rounds = 8;
    float *buf = malloc(n * sizeof *buf), *out = malloc(n * sizeof *out);
    size_t *starts = malloc(((size_t)di->world + 1) * sizeof *starts);
    if (!buf || !out || !starts) { log_error("out of memory"); return 1; }
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i % 1000);
    for (int q = 0; q <= di->world; q++) starts[q] = n / (size_t)di->world * (size_t)q;
    starts[di->world] = n;
    for (int op = 0; op < 2; op++) {
        dist_barrier();
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int r = 0; r < rounds; r++) {
            if (op == 0) dist_reduce_scatter_f32(buf, 0, n, starts, out, 0);
            else dist_allgather_f32(out, starts, 0, n, buf);
        }
        dist_barrier();
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
        if (di->rank == 0)
            printf("%s %d ranks: %.2f GB/s of each rank's buffer (%.0f ms a call)\n",
                   op == 0 ? "reduce-scatter" : "all-gather", di->world,
                   (double)rounds * (double)n * sizeof(float) / s * 1e-9, s / rounds * 1e3);
    }
    free(buf); free(out); free(starts);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "check") && strcmp(argv[1], "loop") && strcmp(argv[1], "leave0") &&
                      strcmp(argv[1], "bw") && strcmp(argv[1], "logstream"))) {
        fprintf(stderr, "usage: dist_test check|loop|leave0|bw|logstream\n");
        return 2;
    }
    if (!strcmp(argv[1], "logstream")) {
        log_info("progress on stdout");
        log_info_to_stderr();
        log_info("progress on stderr");
        return 0;
    }
    stopsig_install();
    DistInfo di;
    if (dist_init(&di) != 0) return 1;
    if (!strcmp(argv[1], "leave0")) {
        if (di.rank == 0) {
            log_error("failing on purpose");
            dist_finalize();
            return 1;
        }
        dist_any(0);
        dist_finalize();
        return 0;
    }
    int rc = !strcmp(argv[1], "check") ? check(&di) : !strcmp(argv[1], "bw") ? bw(&di) : loop(&di);
    dist_finalize();
    return rc;
}
