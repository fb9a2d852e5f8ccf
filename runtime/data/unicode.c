/* unicode.c — UTF-8 with replacement, and NFC (decompose, order, compose). */
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

int unibuf_reserve(UniBuf *b, size_t extra)
{
    if (b->cap - b->len >= extra) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int unibuf_append(UniBuf *b, const void *data, size_t n)
{
    if (unibuf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

void unibuf_free(UniBuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t need;
    uint32_t v;
    uint8_t lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) { need = 1; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;        /* no overlongs */
        else if (c == 0xED) hi = 0x9F;   /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;   /* <= U+10FFFF */
    } else { *cp = 0xFFFD; return 1; }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n) { *cp = 0xFFFD; return i; }
        uint8_t t = s[i];
        if (i == 1 ? (t < lo || t > hi) : (t < 0x80 || t > 0xBF)) { *cp = 0xFFFD; return i; }
        v = (v << 6) | (t & 0x3F);
    }
    *cp = v;
    return i;
}

size_t utf8_encode(uint32_t c, uint8_t out[4])
{
    if (c < 0x80) { out[0] = (uint8_t)c; return 1; }
    if (c < 0x800) { out[0] = (uint8_t)(0xC0 | c >> 6); out[1] = (uint8_t)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        out[0] = (uint8_t)(0xE0 | c >> 12); out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | c >> 18); out[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F)); out[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

int utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        size_t k = utf8_decode(s + i, n - i, &cp);
        if (cp == 0xFFFD && !(k == 3 && s[i] == 0xEF && s[i + 1] == 0xBF && s[i + 2] == 0xBD)) return 0;
        i += k;
    }
    return 1;
}

int utf8_sanitize(const uint8_t *s, size_t n, UniBuf *out)
{
    if (n == 0) return 0;
    if (unibuf_reserve(out, n)) return -1;
    size_t i = 0, run = 0;   /* s[run..i) is valid and not yet copied */
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        size_t k = utf8_decode(s + i, n - i, &cp);
        int real = !(cp == 0xFFFD && !(k == 3 && s[i] == 0xEF && s[i + 1] == 0xBF && s[i + 2] == 0xBD));
        if (real) { i += k; continue; }
        if (unibuf_append(out, s + run, i - run) || unibuf_append(out, "\xEF\xBF\xBD", 3)) return -1;
        i += k;
        run = i;
    }
    return unibuf_append(out, s + run, n - run);
}

/* ---- NFC ---- */

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
       LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

/* The full canonical decomposition of c, or NULL (then *len = 0). */
static const uint32_t *decomposition(uint32_t c, uint32_t *len)
{
    int lo = 0, hi = unicode_n_decomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint32_t k = unicode_decomp_index[mid * 3];
        if (k == c) {
            *len = unicode_decomp_index[mid * 3 + 2];
            return unicode_decomp_pool + unicode_decomp_index[mid * 3 + 1];
        }
        if (k < c) lo = mid + 1; else hi = mid - 1;
    }
    *len = 0;
    return NULL;
}

/* The primary composite of a + b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = unicode_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint32_t x = unicode_comp[mid * 3], y = unicode_comp[mid * 3 + 1];
        if (x == a && y == b) return unicode_comp[mid * 3 + 2];
        if (x < a || (x == a && y < b)) lo = mid + 1; else hi = mid - 1;
    }
    return 0;
}

/* Stable sort of n non-starters by canonical combining class. */
static int counting_sort(uint32_t *v, size_t n)
{
    uint32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return -1;
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++) start[unicode_ccc(v[i]) + 1]++;
    for (int c = 0; c < 256; c++) start[c + 1] += start[c];
    for (size_t i = 0; i < n; i++) tmp[start[unicode_ccc(v[i])]++] = v[i];
    memcpy(v, tmp, n * sizeof *tmp);
    free(tmp);
    return 0;
}

/* Full NFC of a valid UTF-8 segment. */
static int nfc_segment(const uint8_t *s, size_t n, UniBuf *out)
{
    /* at most 4 code points per byte after decomposition (Hangul: 3 per 3 bytes,
     * the longest canonical decomposition is 4 code points from >= 2 bytes) */
    uint32_t local[256];
    uint32_t *cps = n * 2 + 8 <= 256 ? local : malloc((n * 2 + 8) * sizeof *cps);
    if (!cps) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c, len;
        i += utf8_decode(s + i, n - i, &c);
        if (c >= SBASE && c < SBASE + SCOUNT) {
            uint32_t si = c - SBASE;
            cps[m++] = LBASE + si / NCOUNT;
            cps[m++] = VBASE + (si % NCOUNT) / TCOUNT;
            if (si % TCOUNT) cps[m++] = TBASE + si % TCOUNT;
            continue;
        }
        const uint32_t *d = decomposition(c, &len);
        if (d) { memcpy(cps + m, d, len * sizeof *d); m += len; }
        else cps[m++] = c;
    }
    /* canonical ordering: a stable sort of each run of non-starters by ccc
     * (insertion sort for short runs, counting sort for long ones, so a flood
     * of combining marks stays linear) */
    for (size_t a = 0; a < m;) {
        if (!unicode_ccc(cps[a])) { a++; continue; }
        size_t b = a;
        while (b < m && unicode_ccc(cps[b])) b++;
        if (b - a <= 32) {
            for (size_t i = a + 1; i < b; i++) {
                uint32_t c = cps[i];
                unsigned cc = unicode_ccc(c);
                size_t j = i;
                while (j > a && unicode_ccc(cps[j - 1]) > cc) { cps[j] = cps[j - 1]; j--; }
                cps[j] = c;
            }
        } else if (counting_sort(cps + a, b - a)) {
            if (cps != local) free(cps);
            return -1;
        }
        a = b;
    }
    /* canonical composition */
    size_t w = 0;
    long starter = -1;
    unsigned prev_cc = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t c = cps[i];
        unsigned cc = unicode_ccc(c);
        if (starter >= 0) {
            int adjacent = (long)w - 1 == starter;
            if (adjacent || (prev_cc != 0 && prev_cc < cc)) {
                uint32_t x = compose(cps[starter], c);
                if (x) { cps[starter] = x; continue; }
            }
        }
        if (cc == 0) starter = (long)w;
        prev_cc = cc;
        cps[w++] = c;
    }
    int rc = unibuf_reserve(out, w * 4);
    for (size_t i = 0; !rc && i < w; i++) out->len += utf8_encode(cps[i], out->p + out->len);
    if (cps != local) free(cps);
    return rc;
}

int unicode_nfc(const uint8_t *s, size_t n, UniBuf *out)
{
    if (n == 0) return 0;
    if (unibuf_reserve(out, n)) return -1;
    size_t copied = 0, safe = 0, i = 0;   /* safe: last boundary (ccc 0, quick-check Yes) */
    unsigned last_cc = 0;
    while (i < n) {
        if (s[i] < 0x80) { safe = i++; last_cc = 0; continue; }
        uint32_t c;
        size_t k = utf8_decode(s + i, n - i, &c);
        unsigned f = unicode_flags(c), cc = unicode_ccc(c);
        if ((f & UNI_NFC_CHECK) || (cc && cc < last_cc)) {
            size_t j = i + k;
            while (j < n) {
                uint32_t d;
                size_t kd = utf8_decode(s + j, n - j, &d);
                if (unicode_ccc(d) == 0 && !(unicode_flags(d) & UNI_NFC_CHECK)) break;
                j += kd;
            }
            if (unibuf_append(out, s + copied, safe - copied) || nfc_segment(s + safe, j - safe, out))
                return -1;
            copied = safe = i = j;
            last_cc = 0;
            continue;
        }
        if (cc == 0) safe = i;
        last_cc = cc;
        i += k;
    }
    return unibuf_append(out, s + copied, n - copied);
}
