/* row_stream.c — the shuffled row stream shared by the CPU and CUDA trainers. */
#include "row_stream.h"

#include <stdlib.h>

#include "rng.h"

int row_stream_init(RowStream *rs, uint64_t n_rows, uint64_t seed)
{
    rs->n_rows = n_rows;
    rs->seed = seed;
    rs->epoch = -1;   /* no permutation yet: the first row_stream_row builds one */
    rs->perm = malloc((n_rows ? n_rows : 1) * sizeof *rs->perm);
    return rs->perm ? 0 : -1;
}

void row_stream_free(RowStream *rs)
{
    free(rs->perm);
    rs->perm = NULL;
}

/* The permutation of an epoch depends only on (seed, epoch), never on what
 * was read before: a run resumed at step s (or moved to the other backend)
 * reads the same rows from stream index s * global batch on. One permutation
 * is kept; a step reads its rows in order, so an epoch's is built once. */
uint64_t row_stream_row(RowStream *rs, int64_t i)
{
    int64_t epoch = i / (int64_t)rs->n_rows;
    if (epoch != rs->epoch) {
        Rng r;
        /* a different stream per epoch: the seed mixed with (epoch + 1) times
         * the 64-bit golden ratio (as splitmix64 steps), so epoch 0 is not the
         * bare seed and neighbouring epochs are far apart */
        rng_seed(&r, rs->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(epoch + 1)));
        for (uint64_t k = 0; k < rs->n_rows; k++) rs->perm[k] = k;
        /* Fisher-Yates from the end: every order equally likely (rng_below is unbiased) */
        for (uint64_t k = rs->n_rows - 1; k > 0; k--) {
            uint64_t j = rng_below(&r, k + 1), t = rs->perm[k];
            rs->perm[k] = rs->perm[j];
            rs->perm[j] = t;
        }
        rs->epoch = epoch;
    }
    return rs->perm[i % (int64_t)rs->n_rows];
}
