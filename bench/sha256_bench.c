/* sha256_bench — checkpoint hashing cost (docs/PERFORMANCE.md, "Checkpoint hashing").
 *
 *   sha256_bench FILE MiB
 *
 * Writes MiB of fp32 tensors to FILE as safetensors twice and prints MB/s:
 *   hash-memory   sha256_update over the in-memory tensors (the hash alone)
 *   two-pass      st_write, then sha256_file_hex reading FILE back (before: every
 *                 checkpoint file was hashed by reading it again)
 *   one-pass      st_write_sha256: the digest comes out of the write itself
 * and checks that both passes give the same digest. MB = 10^6 bytes. */
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

    t0 = now();
    if (st_write(path, &t, 1, ST_F32, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    double t_write = now() - t0;
    if (sha256_file_hex(path, hex_two)) { perror(path); return 1; }
    double t_two = now() - t0;

    t0 = now();
    if (st_write_sha256(path, &t, 1, ST_F32, NULL, hex_one, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    double t_one = now() - t0;
    unlink(path);
    free(data);

    printf("file %.0f MB\n", mb);
    printf("hash-memory  %7.0f MB/s\n", mb / t_mem);
    printf("write-only   %7.0f MB/s  (%.2f s)\n", mb / t_write, t_write);
    printf("two-pass     %7.0f MB/s  (%.2f s: write, then read back and hash)\n", mb / t_two, t_two);
    printf("one-pass     %7.0f MB/s  (%.2f s: hashed while written)\n", mb / t_one, t_one);
    if (strcmp(hex_one, hex_two)) { printf("digests differ: %s vs %s\n", hex_one, hex_two); return 1; }
    printf("digest %s (both)\n", hex_one);
    return 0;
}
