/* row_stream.h — the trainers' data order (runtime/train/train_loop.c).
 *
 * Every epoch is a permutation of the prepared rows (Fisher-Yates, seeded by
 * train.seed and the epoch number); epochs are concatenated into one stream of
 * row indices. Both backends read the same stream, so a run can move between them. */
#ifndef LLMC_ROW_STREAM_H
#define LLMC_ROW_STREAM_H

#include <stdint.h>

typedef struct {
    uint64_t n_rows, seed;
    int64_t epoch;        /* epoch whose permutation is in perm; -1 none */
    uint64_t *perm;       /* [n_rows] */
} RowStream;

/* 0, or -1 when out of memory. n_rows must be at least 1. */
int row_stream_init(RowStream *rs, uint64_t n_rows, uint64_t seed);
void row_stream_free(RowStream *rs);
/* The row at stream index i (i >= 0). */
uint64_t row_stream_row(RowStream *rs, int64_t i);

#endif
