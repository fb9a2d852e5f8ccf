/* hostlist.c — expand Slurm hostlist expressions (hostlist.h). */
#include "hostlist.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Arena *a;
    PtrVec out;
    const char *err;
} Expander;

/* Expand one comma-free host pattern (brackets may hold commas) into ex->out.
 * The first [...] group is expanded here and the rest of the name recursively,
 * so "n[1-2]g[1-2]" gives n1g1, n1g2, n2g1, n2g2 (the first group varies
 * slowest). A range keeps the width of its low end ("[001-010]": 001 ... 010). */
static void expand_piece(Expander *ex, const char *p, size_t n, const char *prefix)
{
    const char *open = memchr(p, '[', n);
    if (!open) {
        ptrvec_push(ex->a, &ex->out, arena_printf(ex->a, "%s%.*s", prefix, (int)n, p));
        return;
    }
    const char *close = memchr(open, ']', n - (size_t)(open - p));
    if (!close) { ex->err = "unclosed '[' in hostlist"; return; }
    char *head = arena_printf(ex->a, "%s%.*s", prefix, (int)(open - p), p);
    const char *rest = close + 1;
    size_t nrest = n - (size_t)(rest - p);
    const char *q = open + 1;
    while (q < close && !ex->err) {
        const char *lo = q;
        while (q < close && *q >= '0' && *q <= '9') q++;
        size_t wlo = (size_t)(q - lo);
        const char *hi = lo;
        size_t whi = wlo;
        if (q < close && *q == '-') {
            hi = ++q;
            while (q < close && *q >= '0' && *q <= '9') q++;
            whi = (size_t)(q - hi);
        }
        if (wlo == 0 || whi == 0 || (q < close && *q != ',')) { ex->err = "malformed range in hostlist"; return; }
        /* 9 digits: every number fits a long, and the count check cannot overflow */
        if (wlo > 9 || whi > 9) { ex->err = "number in hostlist range has more than 9 digits"; return; }
        long a = strtol(lo, NULL, 10), b = strtol(hi, NULL, 10);
        if (a > b) { ex->err = arena_printf(ex->a, "hostlist range %ld-%ld runs backwards", a, b); return; }
        /* checked before expanding: "[0-999999999]" must not allocate a billion names */
        if (b - a + 1 + ex->out.n > HOSTLIST_MAX_HOSTS) {
            ex->err = "hostlist expands to more than 1000000 hosts";
            return;
        }
        for (long i = a; i <= b && !ex->err; i++) {
            char *pre = arena_printf(ex->a, "%s%0*ld", head, (int)wlo, i);
            expand_piece(ex, rest, nrest, pre);
        }
        if (q < close) q++;   /* ',' */
    }
}

/* FNV-1a, for the duplicate check. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int hostlist_expand(Arena *a, const char *expr, char ***hosts, const char **err)
{
    Expander ex = {.a = a};
    *err = NULL;
    if (!*expr) { *err = "empty hostlist"; return -1; }
    const char *p = expr;
    while (*p && !ex.err) {
        /* A piece ends at a comma outside brackets. */
        const char *q = p;
        int depth = 0;
        while (*q && !(*q == ',' && depth == 0)) {
            if (*q == '[') depth++;
            else if (*q == ']') depth--;
            if (depth < 0 || depth > 1) { *err = "unbalanced brackets in hostlist"; return -1; }
            /* host names as DNS and Slurm take them (letters, digits, '-', '.', '_'):
             * anything else is a typo, or shell text that must not reach a script */
            if (!(*q == '[' || *q == ']' || *q == ',' || *q == '-' || *q == '.' || *q == '_' ||
                  (*q >= '0' && *q <= '9') || ((*q | 0x20) >= 'a' && (*q | 0x20) <= 'z'))) {
                *err = arena_printf(a, "character '%c' is not allowed in a host name", *q);
                return -1;
            }
            q++;
        }
        if (q == p) { *err = "empty host name in hostlist"; return -1; }
        int groups = 0;
        for (const char *r = p; r < q; r++) groups += *r == '[';
        if (groups > 8) { *err = "more than 8 [...] groups in one host name"; return -1; }
        expand_piece(&ex, p, (size_t)(q - p), "");
        p = *q ? q + 1 : q;
        if (*q && !*p) { *err = "hostlist ends with ','"; return -1; }
    }
    if (ex.err) { *err = ex.err; return -1; }

    /* Duplicate names: open addressing over a power-of-two table at most half
     * full, so a million hosts are checked in linear time. A node named twice
     * would be counted twice in the cluster's size. */
    size_t cap = 16;
    while (cap < (size_t)ex.out.n * 2) cap *= 2;
    const char **table = xcalloc(cap, sizeof(char *));
    for (int i = 0; i < ex.out.n; i++) {
        const char *h = ex.out.items[i];
        size_t j = hash_str(h) & (cap - 1);
        while (table[j] && strcmp(table[j], h) != 0) j = (j + 1) & (cap - 1);
        if (table[j]) {
            *err = arena_printf(a, "host '%s' appears twice in the hostlist", h);
            free(table);
            return -1;
        }
        table[j] = h;
    }
    free(table);
    *hosts = (char **)ex.out.items;
    return ex.out.n;
}
