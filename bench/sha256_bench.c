/* sha256_bench — checkpoint hashing cost (docs/PERFORMANCE.md, "Checkpoint hashing").
 *
 *   sha256_bench FILE MiB
 *
 * Writes MiB of fp32 tensors to FILE as safetensors twice and prints MB/s:
 *   hash-memory   sha256_update over the in-memory tensors (the hash alone)
 *   two-pass      st_write, then sha256_file_hex reading FILE back (before: every
 *                 checkpoint file was hashed by reading it again)
 *   two-pass-cold the same, with FILE's pages dropped from the cache before the read
 *   one-pass      st_write_sha256: the digest comes out of the write itself
 * and checks that both passes give the same digest. MB = 10^6 bytes.
 *
 * Built with -DSHA_BENCH_HASH_ONLY against another sha256.c (the C loop of
 * commit a10ff6a, docs/PERFORMANCE.md) it measures only what that one can do:
 * the hash in memory, and FILE (raw bytes, fsync'd) read back and hashed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "safetensors.h"
#include "sha256.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atol(argv[2]) < 1) { fprintf(stderr, "usage: sha256_bench FILE MiB\n"); return 2; }
    const char *path = argv[1];
    size_t bytes = (size_t)atol(argv[2]) << 20, numel = bytes / 4;
    float *data = malloc(bytes);
    if (!data) { fprintf(stderr, "sha256_bench: out of memory for %zu bytes\n", bytes); return 1; }
    for (size_t i = 0; i < numel; i++) data[i] = (float)(i % 9973) * 1e-3f;   /* touch every page */
    StWriteTensor t = {"w", 1, {(int64_t)numel}, data};
    char err[512], hex_two[65], hex_one[65];
    double mb = (double)bytes / 1e6;

    Sha256 s;
    uint8_t d[32];
    double t0 = now();
    sha256_init(&s);
    sha256_update(&s, data, bytes);
    sha256_final(&s, d);
    double t_mem = now() - t0;

#ifdef SHA_BENCH_HASH_ONLY
    (void)t;
    (void)err;
    (void)hex_one;
    FILE *f = fopen(path, "wb");
    t0 = now();
    int bad = !f || fwrite(data, 1, bytes, f) != bytes || fflush(f) || fsync(fileno(f));
    if (f && fclose(f)) bad = 1;
    if (bad) { perror(path); return 1; }
    double t_write = now() - t0;
    if (sha256_file_hex(path, hex_two)) { perror(path); return 1; }
    double t_two = now() - t0;
    unlink(path);
    free(data);
    printf("file %.0f MB\nhash-memory  %7.0f MB/s\nwrite-only   %7.0f MB/s  (%.2f s)\n", mb, mb / t_mem, mb / t_write, t_write);
    printf("two-pass     %7.0f MB/s  (%.2f s: write, then read back and hash)\n", mb / t_two, t_two);
    return 0;
#else
    /* best of 3 of each, alternating, so that neither gets the quieter moments */
    double t_write = 1e30, t_two = 1e30, t_one = 1e30, t_cold = 1e30;
    for (int r = 0; r < 3; r++) {
        t0 = now();
        if (st_write(path, &t, 1, ST_F32, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        double w = now() - t0;
        if (sha256_file_hex(path, hex_two)) { perror(path); return 1; }
        double two = now() - t0;
        if (w < t_write) t_write = w;
        if (two < t_two) t_two = two;
        /* the read-back from the disk, as from shared storage where the pages are not cached */
        int fd = open(path, O_RDONLY);
        if (fd >= 0) { posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); close(fd); }
        double c0 = now();
        if (sha256_file_hex(path, hex_two)) { perror(path); return 1; }
        if (w + now() - c0 < t_cold) t_cold = w + now() - c0;
        unlink(path);
        t0 = now();
        if (st_write_sha256(path, &t, 1, ST_F32, NULL, hex_one, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        double one = now() - t0;
        if (one < t_one) t_one = one;
        unlink(path);
    }
    free(data);

    printf("file %.0f MB (best of 3 each)\n", mb);
    printf("hash-memory  %7.0f MB/s\n", mb / t_mem);
    printf("write-only   %7.0f MB/s  (%.2f s)\n", mb / t_write, t_write);
    printf("two-pass     %7.0f MB/s  (%.2f s: write, then read back and hash)\n", mb / t_two, t_two);
    printf("two-pass-cold %6.0f MB/s  (%.2f s: the same, read back from the disk, not the page cache)\n", mb / t_cold, t_cold);
    printf("one-pass     %7.0f MB/s  (%.2f s: hashed while written)\n", mb / t_one, t_one);
    if (strcmp(hex_one, hex_two)) { printf("digests differ: %s vs %s\n", hex_one, hex_two); return 1; }
    printf("digest %s (both)\n", hex_one);
    return 0;
#endif
}
