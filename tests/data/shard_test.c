/* shard_test.c — shard_io round trip and the reader's refusals (suite data). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shard_io.h"

static int passed, failed;
#define CHECK(cond, ...) do { if (cond) passed++; else { failed++; \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Write two shards of rows whose every value encodes (row, column). */
static void write_set(const char *dir, uint32_t ctx, const uint64_t *rows, size_t n_shards)
{
    char err[256], path[512];
    ShardEntry e[8];
    uint64_t global = 0;
    for (size_t s = 0; s < n_shards; s++) {
        size_t n = rows[s] * ctx;
        uint32_t *ids = malloc(n * 4 + 4), *pos = malloc(n * 4 + 4);
        uint8_t *mask = malloc(n + 1);
        uint64_t labels = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = global + i / ctx;
            ids[i] = (uint32_t)(r * 1000 + i % ctx) % 500;
            pos[i] = (uint32_t)(i % ctx);
            mask[i] = (uint8_t)((r + i % ctx) & 1);
            labels += mask[i];
        }
        global += rows[s];
        ShardHeader h = {.context = ctx, .n_rows = rows[s], .vocab_size = 500, .pad_id = 3,
                         .n_docs = rows[s], .n_label_tokens = labels};
        snprintf(path, sizeof path, "%s/shard-%05zu.bin", dir, s);
        CHECK(shard_write(path, &h, ids, pos, mask, err, sizeof err) == 0, "write: %s", err);
        e[s].file = strrchr(path, '/') + 1;
        e[s].file = strdup(e[s].file);
        e[s].n_rows = rows[s];
        e[s].n_docs = rows[s];
        e[s].n_label_tokens = labels;
        free(ids); free(pos); free(mask);
    }
    ShardIndexInfo info = {.context = ctx, .vocab_size = 500, .pad_id = 3, .packing = 1,
                           .n_tokens = 7, .data_hash = "abc", .summary_json = "{\"kept\": 1}"};
    CHECK(shard_index_write(dir, &info, e, n_shards, err, sizeof err) == 0, "index: %s", err);
    for (size_t s = 0; s < n_shards; s++) free(e[s].file);
}

/* --check DIR: the invariants of prepared shards (shard.h), and a summary line. */
static int check_dir(const char *dir)
{
    ShardSet set;
    char err[512];
    if (shard_set_open(&set, dir, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    uint32_t ctx = set.context;
    uint32_t *ids = malloc(ctx * 4), *pos = malloc(ctx * 4);
    uint8_t *mask = malloc(ctx);
    uint64_t tokens = 0, labels = 0, docs = 0, bad = 0;
    for (uint64_t r = 0; r < set.n_rows && !bad; r++) {
        if (shard_set_read_rows(&set, r, 1, ids, pos, mask, err, sizeof err)) { fprintf(stderr, "%s\n", err); bad++; break; }
        int in_pad = 0;
        for (uint32_t t = 0; t < ctx; t++) {
            int is_pad = ids[t] == set.pad_id && pos[t] == 0 && mask[t] == 0 &&
                         (in_pad || t == ctx - 1 || (ids[t + 1] == set.pad_id && pos[t + 1] == 0));
            if (ids[t] >= set.vocab_size) { fprintf(stderr, "row %llu: id %u >= vocab\n", (unsigned long long)r, ids[t]); bad++; }
            if (t == 0 && pos[t] != 0) { fprintf(stderr, "row %llu starts at pos %u\n", (unsigned long long)r, pos[t]); bad++; }
            if (t > 0 && pos[t] != 0 && pos[t] != pos[t - 1] + 1) { fprintf(stderr, "row %llu: pos jumps at %u\n", (unsigned long long)r, t); bad++; }
            if (pos[t] == 0 && mask[t]) { fprintf(stderr, "row %llu: a document start is a label at %u\n", (unsigned long long)r, t); bad++; }
            if (mask[t] > 1) bad++;
            if (in_pad && !is_pad) { fprintf(stderr, "row %llu: token after padding at %u\n", (unsigned long long)r, t); bad++; }
            if (is_pad && pos[t] == 0 && t > 0 && !in_pad) in_pad = 1;
            if (!in_pad && !is_pad) { tokens++; labels += mask[t]; if (pos[t] == 0) docs++; }
            if (bad) break;
        }
    }
    printf("rows %llu docs %llu segments %llu tokens %llu labels %llu\n", (unsigned long long)set.n_rows,
           (unsigned long long)set.n_docs, (unsigned long long)docs, (unsigned long long)tokens, (unsigned long long)labels);
    int ok = !bad && labels == set.n_label_tokens;
    if (labels != set.n_label_tokens) fprintf(stderr, "labels %llu, index says %llu\n", (unsigned long long)labels,
                                              (unsigned long long)set.n_label_tokens);
    free(ids); free(pos); free(mask);
    shard_set_close(&set);
    return ok ? 0 : 1;
}

/* --row DIR N: the ids of row N up to its padding, then the mask, one line each. */
static int print_row(const char *dir, unsigned long long row)
{
    ShardSet set;
    char err[512];
    if (shard_set_open(&set, dir, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    uint32_t *ids = malloc(set.context * 4), *pos = malloc(set.context * 4);
    uint8_t *mask = malloc(set.context);
    int rc = shard_set_read_rows(&set, row, 1, ids, pos, mask, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    uint32_t n = set.context;
    while (!rc && n > 0 && ids[n - 1] == set.pad_id && pos[n - 1] == 0) n--;
    for (uint32_t t = 0; !rc && t < n; t++) printf(t ? " %u" : "%u", ids[t]);
    if (!rc) putchar('\n');
    for (uint32_t t = 0; !rc && t < n; t++) printf(t ? " %u" : "%u", mask[t]);
    if (!rc) putchar('\n');
    free(ids); free(pos); free(mask);
    shard_set_close(&set);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--check")) return check_dir(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "--row")) return print_row(argv[2], strtoull(argv[3], NULL, 10));
    if (argc != 2) { fprintf(stderr, "usage: shard_test SCRATCHDIR | --check DIR | --row DIR N\n"); return 2; }
    const char *dir = argv[1];
    char err[256], path[512];
    uint32_t ctx = 16;
    uint64_t rows[3] = {5, 0, 7};
    write_set(dir, ctx, rows, 3);

    ShardSet set;
    CHECK(shard_set_open(&set, dir, err, sizeof err) == 0, "open: %s", err);
    CHECK(set.n_rows == 12 && set.n_shards == 3 && set.context == ctx && set.packing == 1 &&
          set.n_tokens == 7 && !strcmp(set.data_hash, "abc"), "index figures");
    /* read across the shard boundary, including the empty shard */
    uint32_t ids[12 * 16], pos[12 * 16];
    uint8_t mask[12 * 16];
    CHECK(shard_set_read_rows(&set, 3, 6, ids, pos, mask, err, sizeof err) == 0, "read: %s", err);
    int ok = 1;
    for (size_t i = 0; i < 6 * ctx; i++) {
        uint64_t r = 3 + i / ctx;
        if (ids[i] != (uint32_t)(r * 1000 + i % ctx) % 500 || pos[i] != i % ctx || mask[i] != ((r + i % ctx) & 1))
            ok = 0;
    }
    CHECK(ok, "row contents across shards");
    CHECK(shard_set_read_rows(&set, 0, 12, ids, NULL, NULL, err, sizeof err) == 0, "read all ids: %s", err);
    CHECK(shard_set_read_rows(&set, 10, 3, ids, pos, mask, err, sizeof err) != 0, "read past the end refused");
    shard_set_close(&set);
    char *h = shard_index_data_hash(dir);
    CHECK(h && !strcmp(h, "abc"), "data hash");
    free(h);

    /* a truncated shard is refused at open */
    snprintf(path, sizeof path, "%s/shard-00002.bin", dir);
    CHECK(truncate(path, 64 + 16 * 4) == 0, "truncate");
    CHECK(shard_set_open(&set, dir, err, sizeof err) != 0 && strstr(err, "truncated"), "truncated refused: %s", err);
    /* a missing index means nothing is read */
    snprintf(path, sizeof path, "%s/index.json", dir);
    unlink(path);
    CHECK(shard_set_open(&set, dir, err, sizeof err) != 0, "no index refused");
    CHECK(shard_index_data_hash(dir) == NULL, "no index, no hash");

    printf("shard_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
