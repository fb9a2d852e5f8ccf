/* sha256.h — SHA-256 for checkpoint manifests, through OpenSSL's libcrypto
 * (EVP API: its assembly uses the CPU's SHA extensions or AVX2 where present,
 * ~6x a portable C loop). */
#ifndef LLMC_SHA256_H
#define LLMC_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* A running hash; ctx is libcrypto's EVP_MD_CTX (opaque here, so that only
 * sha256.c includes OpenSSL's headers). */
typedef struct {
    void *ctx;
    int failed;   /* allocation or libcrypto failure: final reports it */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
/* Digest into out and free the context. 0, or -1 when libcrypto failed
 * somewhere since init (out is then zero). */
int sha256_final(Sha256 *s, uint8_t out[32]);
/* Digest as lowercase hex into hex[65]; 0, or -1 (see sha256_final). */
int sha256_final_hex(Sha256 *s, char hex[65]);
/* Hex digest of a file into hex[65]; 0 ok, -1 on I/O error (errno set). */
int sha256_file_hex(const char *path, char hex[65]);

#endif
