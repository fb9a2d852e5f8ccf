/* prepare_internal.h — what the files of `llmc-train prepare` share; nothing
 * outside runtime/data/prepare*.c includes it (the command's entry is
 * cmd_prepare, data_commands.h).
 *
 * prepare.c is the command: its steps, the tokenizing threads and the messages;
 * prepare_plan.c reads the plan's data section and computes the data hash (the
 * shards' fingerprint), and owns the output directory (its lock, the sweep of
 * leftovers, the shard names); prepare_pack.c packs documents into rows and
 * shards, keeps the journal an interrupted prepare resumes from, and writes the
 * stats files.
 */
#ifndef LLMC_PREPARE_INTERNAL_H
#define LLMC_PREPARE_INTERNAL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "args.h"
#include "chat_template.h"
#include "data_commands.h"
#include "cpus.h"
#include "json_stream.h"
#include "log.h"
#include "plan.h"
#include "records.h"
#include "shard_io.h"
#include "stopsig.h"
#include "tokenizer.h"

/* ---- the plan's data section ---- */

/* plan.json as runtime/plan/plan.c reads it for preparing (run_plan_load_data),
 * with what prepare derives from it. */
typedef struct {
    RunPlan rp;
    int pretrain;               /* stage "pt" */
    const char *tokenizer_path;
    const ChatTemplate *tpl;
    const DatasetSpec *ds;
    size_t n_ds;
    uint32_t context;
    int packing;
    int skip_bad;               /* on_bad_record "skip" */
    const char *shards_dir;
    int64_t model_vocab;        /* -1 when absent */
    char hash[33];              /* data_hash: 32 hex digits of a SHA-256 */
    cJSON *cache;               /* content-cache.json as it is to be written */
    int cache_reread;           /* a file's digest was not in the cache */
} DataPlan;

/* ---- messages and paths (prepare.c) ---- */

/* An error; returns -1, so that `return say_error(...)` reports and fails. */
__attribute__((format(printf, 1, 2))) int say_error(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void say_warn(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void say_info(const char *fmt, ...);
/* path relative to the plan's directory (docs/plan.md) unless absolute (malloc'd) */
char *resolve(const char *dir, const char *path);
/* Seconds on the monotonic clock. */
double now_s(void);

/* ---- the plan, its hash and the output directory (prepare_plan.c) ---- */

/* Read the plan through runtime/plan/plan.c (the one plan.json reader) and derive
 * the template and the data hash (reread: without content-cache.json). */
int load_plan(const char *path, DataPlan *p, int reread);
void free_plan(DataPlan *p);
/* A --max-record-bytes other than the default, made part of the data hash. */
void data_hash_max_record(DataPlan *p, long long max_record);
/* SHARDS/content-cache.json rewritten when a file was read for its digest. */
void save_content_cache(DataPlan *p);
/* Remove prepare's own files from dir except the shards named in keep. */
int sweep_dir(const char *dir, char *const *keep);
/* 8 hex digits of the data hash that the live set's shard names do not use. */
void choose_prefix(char out[16], const char *hash, char *const *live);
/* Take DIR/.prepare.lock, waiting for another prepare; the fd, or -1 after a message. */
int lock_dir(const char *dir);
/* Release the lock; the holder note goes with it. */
void unlock_dir(int fd);
/* mkdir -p; -1 with errno set. */
int mkdirs(const char *path);

/* ---- packing rows into shards ---- */

/* The stats file's length histogram (docs/estimator.md "The stats file"): bin i
 * holds documents of i*STATS_BIN .. (i+1)*STATS_BIN-1 tokens, the last bin all
 * longer ones; 4096 bins is what llmc reads. */
#define STATS_BIN 16
#define STATS_BINS 4096

/* Per dataset, for index.json and the stats file: the estimator can use real
 * token counts. cut: documents the context cut tokens off (LLaMA-Factory's
 * cutoff_len does the same, silently); cut_untrained: those of them left with
 * no token to train (a prompt that fills the context). */
typedef struct {
    uint64_t kept, skipped, tokens, labels, cut, cut_untrained;
    uint64_t hist[STATS_BINS];  /* documents by length as packed */
} DatasetCounts;

/* The packer: the shard being filled, the shards and counts so far, and the
 * point an interrupted prepare resumes from. */
typedef struct {
    const char *dir;
    char prefix[16];            /* shard-PREFIX-NNNNN.bin: differs from the live set's */
    uint32_t context, pad_id, vocab_size;
    int packing, pretrain;
    int dry;                    /* --check: count rows, write nothing */
    uint64_t rows_per_shard;
    /* the shard being filled: rows_in_shard complete rows + the open row */
    uint32_t *ids, *pos;
    uint8_t *mask;
    uint64_t rows_in_shard;
    uint32_t fill;              /* tokens in the open row */
    uint64_t shard_docs, shard_labels;
    ShardEntry *entries;
    size_t n_entries;
    uint64_t n_tokens, n_labels, n_rows, n_docs;
    /* resuming (docs/shards.md "Resuming"): documents are numbered in stream order
     * (doc_seq); a shard written inside document `resume_doc` leaves its first
     * `resume_at` tokens in the shards so far. After every shard the journal
     * (progress.json) records that point, the shards and the counts. */
    uint64_t doc_seq, resume_doc, resume_at;
    DatasetCounts *per_ds;      /* the documents done so far, by dataset */
    size_t n_ds;
    const char *data_hash;
    int journal;                /* write progress.json after each shard */
    int stopped;                /* that shard is written: stop now */
    uint64_t journal_doc;       /* resume_doc as the journal last recorded it */
} Packer;

/* The journal, in the shards directory (docs/shards.md "Resuming"). */
#define JOURNAL "progress.json"

/* ---- packing, the journal and the stats files (prepare_pack.c) ---- */

/* Pack document number k->doc_seq (its tokens from `start` on). */
int pack_doc(Packer *k, const uint32_t *ids, const uint8_t *mask, size_t n, size_t start, int cut,
             DatasetCounts *c);
/* Close the open row (pad it) and start a new one; write the shard when full. */
int close_row(Packer *k);
/* Write the shard being filled (if it holds a row), record it and journal it. */
int write_shard(Packer *k);
/* Take up the journal of an interrupted prepare of the same data: 1 resumed, 0 not. */
int journal_take(Packer *k);
void journal_remove(const char *dir);
/* FILE.stats.json beside each dataset (a warning when it cannot be written). */
void write_stats(const DataPlan *plan, const DatasetCounts *per_ds);

#endif
