/* make_shards.c — synthetic token shards for the trainer's tests, written with
 * the real shard writer (runtime/data/shard_io.h).
 *
 *   make_shards DIR ROWS CONTEXT VOCAB SEED
 *
 * Rows pack several documents. A document is a "prompt" of random tokens
 * (no labels) followed by an "answer" that continues the prompt's last token by
 * +1 mod (VOCAB-1) per step (labels): learnable, so loss must fall. Padding
 * (id 0, pos 0, mask 0) fills each row's tail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "shard_io.h"

int main(int argc, char **argv)
{
    if (argc != 6) { fprintf(stderr, "usage: make_shards DIR ROWS CONTEXT VOCAB SEED\n"); return 2; }
    const char *dir = argv[1];
    uint64_t rows = strtoull(argv[2], NULL, 10);
    uint32_t T = (uint32_t)atoi(argv[3]), V = (uint32_t)atoi(argv[4]);
    Rng r;
    rng_seed(&r, strtoull(argv[5], NULL, 10));
    size_t n = rows * T;
    uint32_t *ids = calloc(n, 4), *pos = calloc(n, 4);
    uint8_t *mask = calloc(n, 1);
    uint64_t docs = 0, labels = 0, tokens = 0;
    for (uint64_t row = 0; row < rows; row++) {
        uint32_t t = 0;
        while (t + 6 <= T - 2) {
            uint32_t len = 6 + (uint32_t)rng_below(&r, T / 2), prompt = 2 + (uint32_t)rng_below(&r, 3);
            if (t + len > T - (uint32_t)rng_below(&r, 3)) break;
            for (uint32_t j = 0; j < len; j++) {
                size_t k = row * T + t + j;
                ids[k] = j < prompt ? 1 + (uint32_t)rng_below(&r, V - 1) : 1 + (ids[k - 1] % (V - 1));
                pos[k] = j;
                mask[k] = j >= prompt;
                labels += mask[k];
            }
            tokens += len;
            t += len;
            docs++;
        }
    }
    char err[256], path[4096];
    snprintf(path, sizeof path, "%s/shard-00000.bin", dir);
    ShardHeader h = {.context = T, .n_rows = rows, .vocab_size = V, .pad_id = 0, .n_docs = docs, .n_label_tokens = labels};
    if (shard_write(path, &h, ids, pos, mask, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    ShardEntry e = {.file = "shard-00000.bin", .n_rows = rows, .n_docs = docs, .n_label_tokens = labels};
    /* the identity of the tokens (a resume's data.content): what decides them */
    char hash[128];
    snprintf(hash, sizeof hash, "synthetic-%s-%s-%s-%s", argv[2], argv[3], argv[4], argv[5]);
    ShardIndexInfo info = {.context = T, .vocab_size = V, .pad_id = 0, .packing = 1, .n_tokens = tokens,
                           .data_hash = hash};
    if (shard_index_write(dir, &info, &e, 1, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    free(ids); free(pos); free(mask);
    return 0;
}
