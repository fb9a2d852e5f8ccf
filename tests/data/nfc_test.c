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

    /* a long run of combining marks (the counting-sort path) is ordered like a
     * stable sort by combining class */
    {
        static const uint32_t marks[] = {0x0301, 0x0316, 0x0300, 0x0323, 0x0344, 0x05B0, 0x0F71};
        size_t n = 1000;
        uint32_t *cps = malloc((n + 1) * sizeof *cps);
        uint8_t *in = malloc(4 * (n + 1)), *want = malloc(8 * (n + 1));
        size_t il = 0, wl = 0;
        cps[0] = 'a';
        for (size_t i = 1; i <= n; i++) cps[i] = marks[(i * 7 + i / 3) % 7];
        for (size_t i = 0; i <= n; i++) il += utf8_encode(cps[i], in + il);
        /* expected: decompose U+0344 (-> 0308 0301) and insertion-sort by class here */
        uint32_t *d = malloc(2 * (n + 1) * sizeof *d);
        size_t m = 0;
        for (size_t i = 0; i <= n; i++) {
            if (cps[i] == 0x0344) { d[m++] = 0x0308; d[m++] = 0x0301; } else d[m++] = cps[i];
        }
        for (size_t i = 2; i < m; i++) {
            uint32_t c = d[i];
            size_t j = i;
            while (j > 1 && unicode_ccc(d[j - 1]) > unicode_ccc(c)) { d[j] = d[j - 1]; j--; }
            d[j] = c;
        }
        for (size_t i = 0; i < m; i++) wl += utf8_encode(d[i], want + wl);
        UniBuf a = {0}, b = {0};
        unicode_nfc(in, il, &a);
        unicode_nfc(want, wl, &b);   /* already in order: the sort is the identity, only composition remains */
        if (a.len == b.len && !memcmp(a.p, b.p, a.len)) passed++;
        else { failed++; fprintf(stderr, "FAIL NFC of a long mark run\n"); }
        unibuf_free(&a); unibuf_free(&b);
        free(cps); free(in); free(want); free(d);
    }

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
