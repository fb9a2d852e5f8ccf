/* shard_io.h — write and read packed token shards (format: shard.h, docs/shards.md).
 *
 * Reading (the trainer): open a prepared directory through its index.json, then
 * read any run of rows by global row number; rows are numbered across the
 * shards in index order. Reads use pread, so one ShardSet may be shared by
 * threads. Every shard's header and size is checked at open against index.json:
 * a short, foreign or mismatching file is an error, never garbage tokens.
 *
 *     ShardSet set;
 *     char err[256];
 *     if (shard_set_open(&set, "out/shards", err, sizeof err)) { fprintf(stderr, "%s\n", err); ... }
 *     uint32_t *ids = malloc(set.context * 4), *pos = ..., uint8_t *mask = ...;
 *     for (uint64_t r = 0; r < set.n_rows; r++)
 *         shard_set_read_rows(&set, r, 1, ids, pos, mask, err, sizeof err);
 *     shard_set_close(&set);
 *
 * Any of ids/pos/mask may be NULL to skip that array.
 *
 * Writing (prepare): shard_write() writes one complete shard as NAME.tmp,
 * fsyncs it and renames it into place; shard_index_write() writes index.json
 * the same way, last. */
#ifndef LLMC_SHARD_IO_H
#define LLMC_SHARD_IO_H

#include <stddef.h>
#include <stdint.h>
#include "shard.h"

#define SHARD_INDEX_VERSION 1

/* One shard file as listed in index.json. */
typedef struct {
    char *file;              /* file name inside the directory, e.g. "shard-00000.bin" */
    char *path;              /* dir + "/" + file */
    uint64_t n_rows;
    uint64_t n_docs;
    uint64_t n_label_tokens;
    uint64_t first_row;      /* global number of this shard's first row */
    int fd;                  /* open for reading; -1 when not open */
} ShardEntry;

/* A prepared directory. All figures come from index.json and are checked
 * against every shard header. */
typedef struct {
    char *dir;
    uint32_t context;
    uint32_t vocab_size;
    uint32_t pad_id;
    int packing;             /* 1: several documents per row; 0: one document per row */
    uint64_t n_rows;
    uint64_t n_docs;
    uint64_t n_tokens;       /* tokens that are not padding */
    uint64_t n_label_tokens;
    char *data_hash;         /* hex digest of the plan's data inputs (prepare's idempotence key) */
    ShardEntry *shards;
    size_t n_shards;
} ShardSet;

/* Open DIR/index.json and every shard it lists. 0 ok; -1 with a message in err. */
int shard_set_open(ShardSet *set, const char *dir, char *err, size_t errlen);

/* Read n rows starting at global row `row` (row + n <= n_rows) into
 * ids/pos (n*context uint32 each) and mask (n*context bytes). 0 ok; -1 with err. */
int shard_set_read_rows(const ShardSet *set, uint64_t row, uint64_t n,
                        uint32_t *ids, uint32_t *pos, uint8_t *mask, char *err, size_t errlen);

void shard_set_close(ShardSet *set);

/* Read only index.json's data_hash (NULL if the directory has no readable
 * index). The caller frees it. Used by prepare to skip work already done. */
char *shard_index_data_hash(const char *dir);

/* The file names DIR/index.json lists (the live set), as a NULL-terminated
 * array the caller frees with shard_names_free; NULL when there is no readable
 * index. prepare keeps these files until a new index replaces them. */
char **shard_index_files(const char *dir);
void shard_names_free(char **names);

/* Write one shard: header + arrays, as PATH.tmp, fsync, rename to PATH.
 * h->magic/version/reserved are filled in here. 0 ok; -1 with err. */
int shard_write(const char *path, const ShardHeader *h, const uint32_t *ids,
                const uint32_t *pos, const uint8_t *mask, char *err, size_t errlen);

/* Description of the whole directory for index.json. */
typedef struct {
    uint32_t context, vocab_size, pad_id;
    int packing;
    uint64_t n_tokens;
    const char *data_hash;
    const char *summary_json;  /* optional raw JSON object text stored as "summary" (records kept/skipped) */
} ShardIndexInfo;

/* Write DIR/index.json listing shards[0..n) (file, n_rows, n_docs, n_label_tokens
 * taken from the entries), atomically. 0 ok; -1 with err. */
int shard_index_write(const char *dir, const ShardIndexInfo *info, const ShardEntry *shards,
                      size_t n, char *err, size_t errlen);

/* The whole of a regular file (a FIFO or device is refused, never waited on),
 * NUL-terminated, if at most max bytes; NULL with err otherwise. malloc'd. */
char *shard_read_small_file(const char *path, size_t max, char *err, size_t errlen);

/* Write `len` bytes to PATH atomically (PATH.tmp, fsync, rename, fsync dir). */
int shard_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);

#endif
