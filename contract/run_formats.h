/* run_formats.h — the files a run leaves behind: THE SINGLE SOURCE of their
 * names and keys.
 *
 * llmc-train writes them (runtime/train/metrics.c: metrics.jsonl; prom.c: the
 * Prometheus textfile; train_loop.c: result.json; runtime/data/shard_io.c:
 * the shards' index.json; runtime/store/checkpoint.c: the checkpoint
 * directories) and llmc reads them back (compiler/cli/status.c, `llmc
 * status`). Neither program may include the other's headers, so what both
 * must spell alike is here: a key renamed in a row is renamed for the writer
 * and the reader at once. What the files mean: docs/runtime.md, docs/shards.md,
 * docs/status.md.
 *
 * Each list of keys is X-macro rows, X(ID, KEY, MEANING), in the order the
 * writer writes them; it makes an enum <PREFIX>_<ID> (with <PREFIX>_COUNT
 * beside it) and a NULL-terminated <name>_keys[] indexed by it.
 * LLaMA-Factory's files (backend = llamafactory), which llmc reads but does
 * not write, are at the end: their names are transformers'.
 *
 * This folder is shared by both programs and includes nothing of either.
 */
#ifndef LLMC_CONTRACT_RUN_FORMATS_H
#define LLMC_CONTRACT_RUN_FORMATS_H

#include <stddef.h>

#define RUN_FORMAT_ID(prefix, id, key, meaning) prefix##_##id,
#define RUN_FORMAT_KEY(prefix, id, key, meaning) key,

/* ---- the output directory (plan.json output.dir) ---- */

/* The metrics file when plan.json's output.metrics names none. */
#define RUN_METRICS_FILE "metrics.jsonl"
/* The Prometheus textfile (node_exporter's textfile collector reads it). */
#define RUN_PROM_FILE "llmc_train.prom"
/* Written once, when the run has finished: its existence says "done". */
#define RUN_RESULT_FILE "result.json"

/* metrics.jsonl: one JSON object a line, one line an optimizer step. A number
 * that is not finite is written null and named in "nonfinite". */
#define RUN_METRICS_KEYS(X) \
    X(MK, STEP,           "step",           "optimizer steps completed (the line's step)") \
    X(MK, TIME,           "time",           "UTC time the step ended, ISO 8601 with milliseconds") \
    X(MK, LOSS,           "loss",           "mean cross-entropy per label token") \
    X(MK, LR,             "lr",             "learning rate of the step") \
    X(MK, GRAD_NORM,      "grad_norm",      "gradient norm before clipping") \
    X(MK, TOKENS,         "tokens",         "tokens trained on so far, all ranks") \
    X(MK, TOKENS_PER_S,   "tokens_per_s",   "throughput of the step, all ranks (tokens/s)") \
    X(MK, STEP_TIME_S,    "step_time_s",    "wall time of the step (s)") \
    X(MK, PEAK_RSS_BYTES, "peak_rss_bytes", "peak resident memory of rank 0 (bytes)") \
    X(MK, NONFINITE,      "nonfinite",      "{KEY: \"nan\" | \"inf\" | \"-inf\"} for each number written null")
typedef enum { RUN_METRICS_KEYS(RUN_FORMAT_ID) MK_COUNT } MetricsKey;
static const char *const metrics_keys[] = {RUN_METRICS_KEYS(RUN_FORMAT_KEY) NULL};

/* result.json: one object; the eval_ keys only after a held-out evaluation
 * (run --eval-shards). */
#define RUN_RESULT_KEYS(X) \
    X(RK, STEPS,            "steps",            "optimizer steps of the whole run") \
    X(RK, FINAL_LOSS,       "final_loss",       "mean loss of the last 10% of steps") \
    X(RK, UNIGRAM_BASELINE, "unigram_baseline", "loss of predicting the shards' token frequencies") \
    X(RK, EVAL_LOSS,        "eval_loss",        "mean loss per label token on the held-out shards") \
    X(RK, EVAL_DOCUMENTS,   "eval_documents",   "held-out documents evaluated") \
    X(RK, EVAL_CORRECT,     "eval_correct",     "held-out documents whose every label token was the arg max") \
    X(RK, EVAL_ACCURACY,    "eval_accuracy",    "eval_correct / eval_documents")
typedef enum { RUN_RESULT_KEYS(RUN_FORMAT_ID) RK_COUNT } ResultKey;
static const char *const result_keys[] = {RUN_RESULT_KEYS(RUN_FORMAT_KEY) NULL};

/* The Prometheus textfile: one sample a metric, labelled RUN_PROM_JOB_LABEL
 * (Prometheus' own `job` label is the scrape job's). Rows X(PM, ID, NAME, HELP);
 * the type is a gauge unless the name ends in _total (a counter: it only grows).
 * The _estimate rows are written when the plan has the estimate, the checkpoint
 * rows when a checkpoint is complete. */
#define RUN_PROM_JOB_LABEL "llmc_job"
#define RUN_PROM_METRICS(X) \
    X(PM, STEP,                "llmc_train_step",                "Optimizer steps completed.") \
    X(PM, TOTAL_STEPS,         "llmc_train_total_steps",         "Optimizer steps in the whole run.") \
    X(PM, LOSS,                "llmc_train_loss",                "Training loss of the last step.") \
    X(PM, LR,                  "llmc_train_lr",                  "Learning rate of the last step.") \
    X(PM, TOKENS_PER_SECOND,   "llmc_train_tokens_per_second",   "Training throughput, all ranks.") \
    X(PM, STEP_SECONDS,        "llmc_train_step_seconds",        "Wall time of the last step.") \
    X(PM, TOKENS_TOTAL,        "llmc_train_tokens_total",        "Tokens trained on so far, all ranks.") \
    X(PM, GRAD_NORM,           "llmc_train_grad_norm",           "Gradient norm before clipping, last step.") \
    X(PM, WORLD_SIZE,          "llmc_train_world_size",          "Ranks in the job.") \
    X(PM, PEAK_RSS_BYTES,      "llmc_train_peak_rss_bytes",      "Peak resident memory of rank 0.") \
    X(PM, STEP_SECONDS_ESTIMATE, "llmc_train_step_seconds_estimate", "The plan's estimated wall time of one step.") \
    X(PM, MEMORY_ESTIMATE_BYTES, "llmc_train_memory_estimate_bytes", "The plan's estimated memory per GPU.") \
    X(PM, CHECKPOINT_STEP,     "llmc_train_checkpoint_step",     "Step of the latest complete checkpoint.") \
    X(PM, CHECKPOINT_TIMESTAMP_SECONDS, "llmc_train_checkpoint_timestamp_seconds", \
      "When the latest checkpoint was completed (Unix time).")
typedef enum { RUN_PROM_METRICS(RUN_FORMAT_ID) PM_COUNT } PromMetric;
static const char *const prom_metric_names[] = {RUN_PROM_METRICS(RUN_FORMAT_KEY) NULL};
#define RUN_FORMAT_HELP(prefix, id, key, meaning) meaning,
static const char *const prom_metric_help[] = {RUN_PROM_METRICS(RUN_FORMAT_HELP) NULL};

/* ---- the prepared shards (plan.json data.shards_dir; docs/shards.md) ---- */

/* Written last by prepare: replacing it is what makes a new set of shards live. */
#define SHARD_INDEX_FILE "index.json"
#define SHARD_INDEX_KEYS(X) \
    X(IX, VERSION,        "version",        "SHARD_INDEX_VERSION (shard_io.h) of the writer") \
    X(IX, CONTEXT,        "context",        "tokens per row") \
    X(IX, VOCAB_SIZE,     "vocab_size",     "the tokenizer's vocabulary") \
    X(IX, PAD_ID,         "pad_id",         "the token id of padding") \
    X(IX, PACKING,        "packing",        "true: several documents per row") \
    X(IX, DATA_HASH,      "data_hash",      "hex digest of the plan's data inputs (prepare's idempotence key)") \
    X(IX, N_ROWS,         "n_rows",         "rows of all shards") \
    X(IX, N_DOCS,         "n_docs",         "documents of all shards") \
    X(IX, N_TOKENS,       "n_tokens",       "tokens that are not padding") \
    X(IX, N_LABEL_TOKENS, "n_label_tokens", "tokens the loss is taken on") \
    X(IX, SUMMARY,        "summary",        "records kept and skipped, by reason (an object)") \
    X(IX, SHARDS,         "shards",         "the shard files, in row order (SHARD_ENTRY_KEYS each)")
typedef enum { SHARD_INDEX_KEYS(RUN_FORMAT_ID) IX_COUNT } ShardIndexKey;
static const char *const shard_index_keys[] = {SHARD_INDEX_KEYS(RUN_FORMAT_KEY) NULL};

/* One element of index.json's "shards". */
#define SHARD_ENTRY_KEYS(X) \
    X(SE, FILE,           "file",           "the shard's file name inside the directory") \
    X(SE, N_ROWS,         "n_rows",         "rows of the shard") \
    X(SE, N_DOCS,         "n_docs",         "documents of the shard") \
    X(SE, N_LABEL_TOKENS, "n_label_tokens", "label tokens of the shard")
typedef enum { SHARD_ENTRY_KEYS(RUN_FORMAT_ID) SE_COUNT } ShardEntryKey;
static const char *const shard_entry_keys[] = {SHARD_ENTRY_KEYS(RUN_FORMAT_KEY) NULL};

/* ---- checkpoints (plan.json checkpoint.dir; runtime/store/checkpoint.h) ---- */

/* The files of the checkpoint directory and of each checkpoint in it. */
#define RUN_CKPT_FILES(X) \
    X(CF, LATEST,   "latest",          "one line: the directory name of the newest complete checkpoint") \
    X(CF, MANIFEST, "MANIFEST.sha256", "sha256sum lines over the checkpoint's other files; written last") \
    X(CF, STATE,    "state.json",      "the loop's state: step, data order, RNG, fingerprint")
typedef enum { RUN_CKPT_FILES(RUN_FORMAT_ID) CF_COUNT } CkptFile;
static const char *const ckpt_files[] = {RUN_CKPT_FILES(RUN_FORMAT_KEY) NULL};
/* A checkpoint's directory: CKPT_STEP_PREFIX and the step, 8 digits or more. */
#define CKPT_STEP_PREFIX "step-"
/* state.json's key of the step the checkpoint was taken after. */
#define CKPT_STATE_STEP_KEY "step"

/* ---- LLaMA-Factory's files (read only; the names are transformers') ---- */

/* OUTPUT_DIR/LF_TRAINER_LOG_FILE: one JSON object a logged step. */
#define LF_TRAINER_LOG_FILE "trainer_log.jsonl"
#define LF_TRAINER_LOG_KEYS(X) \
    X(LK, CURRENT_STEPS, "current_steps", "optimizer steps completed (the line's step)") \
    X(LK, TOTAL_STEPS,   "total_steps",   "optimizer steps of the whole run") \
    X(LK, LOSS,          "loss",          "training loss (absent on evaluation lines)") \
    X(LK, EVAL_LOSS,     "eval_loss",     "evaluation loss (evaluation lines)") \
    X(LK, ELAPSED_TIME,  "elapsed_time",  "wall time since the start, Python's str(timedelta)")
typedef enum { LF_TRAINER_LOG_KEYS(RUN_FORMAT_ID) LK_COUNT } LfLogKey;
static const char *const lf_log_keys[] = {LF_TRAINER_LOG_KEYS(RUN_FORMAT_KEY) NULL};
/* A checkpoint: OUTPUT_DIR/LF_CKPT_PREFIX<step>, complete when it holds LF_CKPT_STATE_FILE. */
#define LF_CKPT_PREFIX "checkpoint-"
#define LF_CKPT_STATE_FILE "trainer_state.json"

#endif
