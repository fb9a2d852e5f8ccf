/* gemm_choices_test.c — runtime/cuda/gemm_choices.h on the CPU: a file written and
 * read back gives the same choices; a missing file is an empty set; every kind of
 * malformed file (a header for another GPU or library, a short or long line, a
 * value out of range, a bad hex word, a shape twice, not a regular file) is refused
 * with its path and line and leaves nothing behind. Usage: gemm_choices_test TMPDIR.
 * Closes with "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "gemm_choices.h"

static int pass, fail;
static const char *want = "cublasLt=130100 gpu=NVIDIA_H200 sm=90";

static void check(int ok, const char *what)
{
    if (ok) { pass++; return; }
    fail++;
    printf("FAIL %s\n", what);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) { printf("cannot write %s\n", path); exit(1); }
}

/* the file holding text is refused with a message holding phrase */
static void refused(const char *dir, const char *name, const char *text, const char *phrase)
{
    char path[4096], err[2048], what[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    put(path, text);
    GemmChoices c;
    int rc = gemm_choices_read(&c, path, want, err, sizeof err);
    snprintf(what, sizeof what, "%s refused, saying '%s'", name, phrase);
    check(rc == -1 && strstr(err, path) && strstr(err, phrase) && c.n == 0 && !c.v, what);
    if (rc != -1 || !strstr(err, phrase)) printf("  (rc %d, err '%s')\n", rc, rc ? err : "");
}

static void key_of(long long *k, int i)
{
    for (int j = 0; j < GEMM_KEY_LEN; j++) k[j] = (long long)(i * 1000 + j) * (j == 8 ? 12345678 : 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: gemm_choices_test TMPDIR\n"); return 2; }
    const char *dir = argv[1];
    char path[4096], err[2048];
    snprintf(path, sizeof path, "%s/choices.txt", dir);
    remove(path);

    GemmChoices c;
    check(gemm_choices_read(&c, path, want, err, sizeof err) == 0 && c.n == 0, "a missing file is an empty set");
    long long k[GEMM_KEY_LEN];
    uint64_t a[GEMM_ALGO_WORDS];
    for (int i = 0; i < 40; i++) {
        key_of(k, i);
        for (int j = 0; j < GEMM_ALGO_WORDS; j++) a[j] = 0x9e3779b97f4a7c15ull * (uint64_t)(i * 8 + j + 1);
        check(gemm_choices_set(&c, k, a) == 0, "set a new shape");
    }
    check(c.n == 40 && c.dirty, "40 shapes, to be written");
    key_of(k, 3);
    a[0] = 7;
    check(gemm_choices_set(&c, k, a) == 0 && c.n == 40, "setting a known shape replaces its choice");
    k[4] = -1;
    check(gemm_choices_set(&c, k, a) == -1, "a negative shape value is refused");
    k[4] = GEMM_KEY_MAX;
    check(gemm_choices_set(&c, k, a) == -1, "a shape value at GEMM_KEY_MAX is refused");
    check(gemm_choices_write(&c, path, want, err, sizeof err) == 0, "write");

    GemmChoices d;
    check(gemm_choices_read(&d, path, want, err, sizeof err) == 0, "read back");
    int same = d.n == c.n && !d.dirty;
    for (int i = 0; same && i < c.n; i++) {
        GemmChoice *e = gemm_choices_find(&d, c.v[i].key);
        same = e && !memcmp(e->algo, c.v[i].algo, sizeof e->algo);
    }
    check(same, "every shape's algorithm read back as written");
    key_of(k, 3);
    GemmChoice *e = gemm_choices_find(&d, k);
    check(e && e->algo[0] == 7, "the replaced choice is the one kept");
    key_of(k, 99);
    check(!gemm_choices_find(&d, k), "an unknown shape is not found");
    gemm_choices_free(&d);

    /* the first shape's line, as written, for the malformed variants */
    FILE *f = fopen(path, "r");
    char head[512], line[2048];
    check(f && fgets(head, sizeof head, f) && fgets(line, sizeof line, f), "the file has a header and lines");
    if (f) fclose(f);
    line[strcspn(line, "\n")] = 0;
    char text[8192];
    snprintf(text, sizeof text, "%s# a comment\n\n%s\n", head, line);
    snprintf(path, sizeof path, "%s/comment.txt", dir);
    put(path, text);
    check(gemm_choices_read(&d, path, want, err, sizeof err) == 0 && d.n == 1, "comments and blank lines are skipped");
    gemm_choices_free(&d);

    refused(dir, "other-gpu.txt", "llmc-gemm-choices 1 cublasLt=130100 gpu=NVIDIA_H100 sm=90\n",
            "made for cublasLt=130100 gpu=NVIDIA_H100 sm=90; this run is");
    refused(dir, "no-header.txt", "0 0 1 1 1\n", ":1: not a GEMM choices file");
    refused(dir, "empty.txt", "", "empty file");
    snprintf(text, sizeof text, "%s%s\n%s\n", head, line, line);
    refused(dir, "twice.txt", text, ":3: a shape listed twice");
    char *cut = strrchr(line, ' ');
    snprintf(text, sizeof text, "%s%.*s\n", head, (int)(cut - line), line);
    refused(dir, "short.txt", text, ":2: an algorithm word is not 16");
    snprintf(text, sizeof text, "%s%s 0\n", head, line);
    refused(dir, "long.txt", text, ":2: text after the eighth");
    snprintf(text, sizeof text, "%s%s\n", head, line);
    char *hex = strrchr(text, ' ') + 1;
    hex[3] = 'G';
    refused(dir, "badhex.txt", text, ":2: an algorithm word is not 16");
    snprintf(text, sizeof text, "%s1099511627776%s\n", head, strchr(line, ' '));
    refused(dir, "range.txt", text, ":2: a shape value out of range");
    snprintf(text, sizeof text, "%s-1%s\n", head, strchr(line, ' '));
    refused(dir, "negative.txt", text, ":2: expected a non-negative integer");
    snprintf(text, sizeof text, "%s99999999999999999999999%s\n", head, strchr(line, ' '));
    refused(dir, "overflow.txt", text, ":2: a shape value out of range");
    char longline[4000];
    memset(longline, '1', sizeof longline - 1);
    longline[sizeof longline - 1] = 0;
    snprintf(text, sizeof text, "%s%s\n", head, longline);
    refused(dir, "toolong.txt", text, ":2: line too long");

    char sub[4096];
    snprintf(sub, sizeof sub, "%s/a-directory", dir);
    mkdir(sub, 0700);
    check(gemm_choices_read(&d, sub, want, err, sizeof err) == -1 && strstr(err, "not a regular file"),
          "a directory is refused");
    snprintf(path, sizeof path, "%s/no-such-dir/choices.txt", dir);
    check(gemm_choices_write(&c, path, want, err, sizeof err) == -1 && strstr(err, "cannot create"),
          "writing into a missing directory fails with a message");
    gemm_choices_free(&c);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
