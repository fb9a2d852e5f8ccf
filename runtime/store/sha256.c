/* sha256.c — SHA-256 through libcrypto's EVP interface; see sha256.h. */
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

/* Through libcrypto, not a hand-written SHA-256: checkpoints hash every byte
 * they write, and OpenSSL's assembly (SHA-NI where the CPU has it) keeps
 * that from costing a second pass's time. An error is
 * remembered (failed) and reported once, by sha256_final, so callers can
 * hash a stream without checking each piece. */
void sha256_init(Sha256 *s)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    s->ctx = c;
    s->failed = !c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1;
}

void sha256_update(Sha256 *s, const void *data, size_t n)
{
    /* a zero-length piece is skipped: DATA may then be NULL */
    if (s->failed || !n) return;
    if (EVP_DigestUpdate(s->ctx, data, n) != 1) s->failed = 1;
}

int sha256_final(Sha256 *s, uint8_t out[32])
{
    unsigned len = 0;
    int ok = !s->failed && EVP_DigestFinal_ex(s->ctx, out, &len) == 1 && len == 32;
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
    if (!ok) memset(out, 0, 32);   /* never a digest of half the data */
    return ok ? 0 : -1;
}

/* As sha256_final, in 64 lowercase hex digits and a NUL; all zeros when hashing failed. */
int sha256_final_hex(Sha256 *s, char hex[65])
{
    uint8_t d[32];
    int rc = sha256_final(s, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return rc;
}

/* 0 with the file's digest in HEX; -1 with errno set (the open's or the read's, EIO when libcrypto failed). */
int sha256_file_hex(const char *path, char hex[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    /* tell the kernel the file is read once, front to back: larger read-ahead */
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    Sha256 s;
    sha256_init(&s);
    /* 1 MiB: large enough that the read calls cost nothing next to hashing;
     * static to keep it off the stack, per thread so that two threads may
     * hash files at once */
    static __thread unsigned char buf[1 << 20];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            sha256_final_hex(&s, hex);
            errno = e;
            return -1;
        }
        if (n == 0) break;
        sha256_update(&s, buf, (size_t)n);
    }
    close(fd);
    if (sha256_final_hex(&s, hex)) { errno = EIO; return -1; }
    return 0;
}
