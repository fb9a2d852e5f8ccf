/* sha256.h — SHA-256 (FIPS 180-4) for checkpoint manifests. */
#ifndef LLMC_SHA256_H
#define LLMC_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    size_t fill;
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, uint8_t out[32]);
/* Hex digest of a file into hex[65]; 0 ok, -1 on I/O error (errno set). */
int sha256_file_hex(const char *path, char hex[65]);

#endif
