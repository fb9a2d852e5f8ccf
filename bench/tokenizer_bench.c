/* tokenizer_bench.c — encoding throughput of llmc's tokenizer on a text file.
 *
 *   tokenizer_bench TOKENIZER_DIR CORPUS [--threads N] [--dump IDS_FILE]
 *
 * The corpus is cut into documents at blank lines (at most 64 KiB each) and
 * encoded once on one thread and once on N threads (each with its own
 * encoder, documents dealt round-robin). Prints one line per run:
 *   threads=T bytes=B docs=D tokens=K seconds=S MB/s=X tokens/s=Y
 * --dump writes, per document, uint32 count then the ids (little-endian), for
 * comparing with another tokenizer (bench/tokenizer_hf.py). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tokenizer.h"

typedef struct { size_t off, len; } Doc;

static const Tokenizer *tok;
static const char *text;
static Doc *docs;
static size_t n_docs;
static TokIds *results;   /* per document, for --dump */

typedef struct { int index, stride; size_t tokens; } Job;

static void *run(void *arg)
{
    Job *j = arg;
    TokEncoder *enc = tok_encoder_new(tok);
    TokIds ids = {0};
    for (size_t d = (size_t)j->index; d < n_docs; d += (size_t)j->stride) {
        ids.len = 0;
        if (tok_encode(enc, text + docs[d].off, docs[d].len, &ids)) { fprintf(stderr, "out of memory\n"); exit(1); }
        j->tokens += ids.len;
        if (results) {
            TokIds *r = &results[d];
            r->len = 0;
            for (size_t k = 0; k < ids.len; k++) tokids_push(r, ids.ids[k]);
        }
    }
    tokids_free(&ids);
    tok_encoder_free(enc);
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(int threads, size_t bytes)
{
    pthread_t th[256];
    Job jobs[256];
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        jobs[i] = (Job){i, threads, 0};
        pthread_create(&th[i], NULL, run, &jobs[i]);
    }
    size_t tokens = 0;
    for (int i = 0; i < threads; i++) { pthread_join(th[i], NULL); tokens += jobs[i].tokens; }
    double s = now() - t0;
    printf("threads=%d bytes=%zu docs=%zu tokens=%zu seconds=%.3f MB/s=%.2f tokens/s=%.0f\n", threads, bytes, n_docs,
           tokens, s, bytes / s / 1e6, tokens / s);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: tokenizer_bench TOKENIZER_DIR CORPUS [--threads N] [--dump FILE]\n"); return 2; }
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *dump = NULL;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
        else { fprintf(stderr, "tokenizer_bench: unknown argument %s\n", argv[i]); return 2; }
    }
    if (threads < 1) threads = 1;
    if (threads > 256) threads = 256;
    char err[512];
    Tokenizer *t = tok_load(argv[1], err, sizeof err);
    if (!t) { fprintf(stderr, "tokenizer_bench: %s\n", err); return 2; }
    tok = t;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 2; }
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n + 1);
    if (!buf || fread(buf, 1, n, f) != n) { perror(argv[2]); return 2; }
    fclose(f);
    text = buf;
    /* documents: split after "\n\n" or at 64 KiB */
    size_t cap = 1024, start = 0;
    docs = malloc(cap * sizeof *docs);
    for (size_t i = 0; i < n; i++) {
        int cut = (i + 1 < n && buf[i] == '\n' && buf[i + 1] == '\n') || i + 1 - start >= 65536 || i + 1 == n;
        if (!cut) continue;
        size_t end = buf[i] == '\n' && i + 1 < n ? i + 2 : i + 1;
        if (n_docs == cap) docs = realloc(docs, (cap *= 2) * sizeof *docs);
        docs[n_docs++] = (Doc){start, end - start};
        start = end;
        i = end - 1;
    }
    if (dump) results = calloc(n_docs, sizeof *results);
    bench(1, n);
    if (threads > 1) bench(threads, n);
    if (dump) {
        FILE *o = fopen(dump, "wb");
        for (size_t d = 0; d < n_docs && o; d++) {
            uint32_t len = (uint32_t)results[d].len;
            fwrite(&len, 4, 1, o);
            fwrite(results[d].ids, 4, results[d].len, o);
        }
        if (!o || fclose(o)) { perror(dump); return 2; }
        /* document boundaries, so the reference cuts the corpus the same way */
        char idx[4096];
        snprintf(idx, sizeof idx, "%s.docs", dump);
        o = fopen(idx, "wb");
        for (size_t d = 0; d < n_docs && o; d++) {
            uint64_t v[2] = {docs[d].off, docs[d].len};
            fwrite(v, 8, 2, o);
        }
        if (!o || fclose(o)) { perror(idx); return 2; }
    }
    tok_free(t);
    free(buf);
    free(docs);
    return 0;
}
