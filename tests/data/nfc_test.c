/* nfc_test.c — NFC against Unicode's own conformance file (NormalizationTest.txt,
 * Debian unicode-data): for every line c1;c2;c3;c4;c5, NFC(c1) = NFC(c2) = NFC(c3) = c2
 * and NFC(c4) = NFC(c5) = c4. Also checks UTF-8 replacement of invalid bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "unicode.h"

static int passed, failed;

static size_t parse_field(const char *f, uint8_t *out)
{
    size_t n = 0;
    while (*f && *f != ';') {
        char *end;
        unsigned long c = strtoul(f, &end, 16);
        if (end == f) break;
        n += utf8_encode((uint32_t)c, out + n);
        f = end;
        while (*f == ' ') f++;
    }
    return n;
}

static int nfc_equals(const uint8_t *s, size_t n, const uint8_t *want, size_t wn)
{
    UniBuf b = {0};
    unicode_nfc(s, n, &b);
    int ok = b.len == wn && !memcmp(b.p, want, wn);
    unibuf_free(&b);
    return ok;
}

static void check_sanitize(const char *in, size_t n, const char *want, size_t wn)
{
    UniBuf b = {0};
    utf8_sanitize((const uint8_t *)in, n, &b);
    if (b.len == wn && !memcmp(b.p, want, b.len)) passed++;
    else { failed++; fprintf(stderr, "FAIL sanitize of %zu bytes: got '%.*s'\n", n, (int)b.len, b.p); }
    unibuf_free(&b);
}

#define CHECK_SAN(in, n, want) check_sanitize(in, n, want, sizeof(want) - 1)

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: nfc_test NormalizationTest.txt\n"); return 2; }
    FILE *f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 2; }
    char line[4096];
    uint8_t col[5][512];
    size_t len[5];
    long lines = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '@' || line[0] == '\n') continue;
        const char *p = line;
        for (int k = 0; k < 5; k++) {
            len[k] = parse_field(p, col[k]);
            p = strchr(p, ';');
            if (!p) break;
            p++;
        }
        lines++;
        int ok = nfc_equals(col[0], len[0], col[1], len[1]) && nfc_equals(col[1], len[1], col[1], len[1]) &&
                 nfc_equals(col[2], len[2], col[1], len[1]) && nfc_equals(col[3], len[3], col[3], len[3]) &&
                 nfc_equals(col[4], len[4], col[3], len[3]);
        if (!ok && bad++ < 5) fprintf(stderr, "FAIL NFC: %s", line);
    }
    fclose(f);
    if (lines > 10000 && bad == 0) passed++;
    else { failed++; fprintf(stderr, "FAIL NFC: %ld of %ld lines wrong\n", bad, lines); }

    /* invalid UTF-8: each maximal invalid subpart becomes one U+FFFD */
    CHECK_SAN("a\x80" "b", 3, "a\xEF\xBF\xBD" "b");
    CHECK_SAN("\xE2\x82", 2, "\xEF\xBF\xBD");                      /* truncated 3-byte */
    CHECK_SAN("\xF0\x9F\x98" "x", 4, "\xEF\xBF\xBD" "x");           /* truncated emoji */
    CHECK_SAN("\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* surrogate */
    CHECK_SAN("\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD");           /* overlong */
    CHECK_SAN("\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK_SAN("ok \xEF\xBF\xBD", 6, "ok \xEF\xBF\xBD");             /* a real U+FFFD stays */
    CHECK_SAN("\0z", 2, "\0z");
    printf("nfc_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
