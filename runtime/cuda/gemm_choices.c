/* gemm_choices.c — read, look up and write the GEMM choices file (gemm_choices.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gemm_choices.h"

#define MAGIC "llmc-gemm-choices 1 "
#define LINE_MAX_CHARS 2048     /* a shape's line is under 600 characters */
#define CHOICES_MAX 4096        /* far above the shapes of one run (gemm.c caches 512) */

static int key_ok(const long long *key)
{
    for (int i = 0; i < GEMM_KEY_LEN; i++)
        if (key[i] < 0 || key[i] >= GEMM_KEY_MAX) return 0;
    return 1;
}

GemmChoice *gemm_choices_find(GemmChoices *c, const long long *key)
{
    for (int i = 0; i < c->n; i++)
        if (!memcmp(c->v[i].key, key, sizeof c->v[i].key)) return &c->v[i];
    return NULL;
}

int gemm_choices_set(GemmChoices *c, const long long *key, const uint64_t *algo)
{
    if (!key_ok(key)) return -1;
    GemmChoice *e = gemm_choices_find(c, key);
    if (!e) {
        if (c->n == CHOICES_MAX) return -1;
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 64;
            GemmChoice *v = realloc(c->v, (size_t)cap * sizeof *v);
            if (!v) return -1;
            c->v = v;
            c->cap = cap;
        }
        e = &c->v[c->n++];
        memcpy(e->key, key, sizeof e->key);
    } else if (!memcmp(e->algo, algo, sizeof e->algo)) {
        return 0;
    }
    memcpy(e->algo, algo, sizeof e->algo);
    c->dirty = 1;
    return 0;
}

void gemm_choices_free(GemmChoices *c)
{
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* One shape's line: GEMM_KEY_LEN decimals then GEMM_ALGO_WORDS hex words, nothing after. */
static int parse_line(const char *s, GemmChoice *e, const char **what)
{
    char *end;
    for (int i = 0; i < GEMM_KEY_LEN; i++) {
        while (*s == ' ' || *s == '\t') s++;
        if (*s < '0' || *s > '9') { *what = "expected a non-negative integer"; return -1; }
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || v >= GEMM_KEY_MAX || (*end != ' ' && *end != '\t')) {
            *what = "a shape value out of range or malformed";
            return -1;
        }
        e->key[i] = v;
        s = end;
    }
    for (int i = 0; i < GEMM_ALGO_WORDS; i++) {
        while (*s == ' ' || *s == '\t') s++;
        const char *w = s;
        while ((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')) s++;
        if (s - w != 16) { *what = "an algorithm word is not 16 lower-case hex digits"; return -1; }
        e->algo[i] = strtoull(w, NULL, 16);
    }
    while (*s == ' ' || *s == '\t') s++;
    if (*s) { *what = "text after the eighth algorithm word"; return -1; }
    return 0;
}

int gemm_choices_read(GemmChoices *c, const char *path, const char *want, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        fclose(f);
        return -1;
    }
    char line[LINE_MAX_CHARS + 2];
    int lineno = 0, rc = 0;
    const char *what = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        else if (!feof(f)) { what = "line too long"; break; }
        if (lineno == 1) {
            if (strncmp(line, MAGIC, strlen(MAGIC))) { what = "not a GEMM choices file (no 'llmc-gemm-choices 1' header)"; break; }
            if (strcmp(line + strlen(MAGIC), want)) {
                snprintf(err, errlen, "%s:1: made for %s; this run is %s: its algorithms do not carry over "
                         "(delete the file or name another to choose again)", path, line + strlen(MAGIC), want);
                rc = -1;
                break;
            }
            continue;
        }
        if (line[0] == '#' || !line[0]) continue;
        GemmChoice e;
        if (parse_line(line, &e, &what)) break;
        if (gemm_choices_find(c, e.key)) { what = "a shape listed twice"; break; }
        if (gemm_choices_set(c, e.key, e.algo)) { what = "too many shapes, or out of memory"; break; }
    }
    if (!rc && !what && ferror(f)) what = "read error";
    if (!rc && !what && lineno == 0) what = "empty file (no header)";
    if (what) {
        snprintf(err, errlen, "%s:%d: %s", path, lineno, what);
        rc = -1;
    }
    fclose(f);
    if (rc) gemm_choices_free(c);
    c->dirty = 0;
    return rc;
}

int gemm_choices_write(const GemmChoices *c, const char *path, const char *want, char *err, size_t errlen)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, MAGIC "%s\n", want);
    for (int i = 0; i < c->n; i++) {
        for (int k = 0; k < GEMM_KEY_LEN; k++) fprintf(f, "%lld ", c->v[i].key[k]);
        for (int k = 0; k < GEMM_ALGO_WORDS; k++)
            fprintf(f, "%016" PRIx64 "%s", c->v[i].algo[k], k + 1 < GEMM_ALGO_WORDS ? " " : "\n");
    }
    /* whole or not at all: a run killed here leaves the old file (ranks of one
     * node write the same choices; the last rename wins) */
    int bad = fflush(f) || fsync(fileno(f)) || ferror(f);
    if (fclose(f)) bad = 1;
    if (bad || rename(tmp, path)) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
