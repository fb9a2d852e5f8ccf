/* model_files.h — what `llmc check` reads of the files a plan names, when they
 * are readable on the compiling machine (docs/language.md, "Files checked"):
 * the model's config.json, its tokenizer's added tokens (against the chat
 * template) and the first records of each dataset. */
#ifndef LLMC_MODEL_FILES_H
#define LLMC_MODEL_FILES_H

#include <stdbool.h>

/* The shape config.json gives, as runtime/store/hf_config.c reads it. */
typedef struct {
    int arch;                /* ModelArch */
    int layers, hidden, heads, kv_heads, head_dim, ffn, vocab, max_context;
    double rope_theta, rms_eps;
    bool tie_embeddings;
    int experts, experts_per_token;   /* mixtral: num_local_experts, num_experts_per_tok; 0 dense */
    char rope_scaling[256];  /* a rope_type other than "default" (llama3, yarn, ...), its first 40
                                bytes with control characters escaped (init-model prints it), or "" */
    char file[4096];         /* the config.json read */
} ModelFileConfig;

/* Read DIR/config.json. 0: read; 1: not readable here (no such file,
 * permission; why says which), nothing checked; -1: read but not a config
 * llmc can train (why says what). */
int model_config_read(const char *dir, ModelFileConfig *out, char *why, int whylen);

/* Which of tokens (a chat template's special tokens) the tokenizer at PATH (a
 * directory with tokenizer.json, or that file) lacks among its "added_tokens",
 * the list llmc-train and transformers match as whole tokens (a token only in
 * the BPE vocabulary is split into pieces). missing[i] set for each; file gets
 * the file read. 0: read; 1: not readable here (why); -1: not a tokenizer.json
 * (why). */
int tokenizer_missing_tokens(const char *path, const char *const *tokens, int n, bool *missing, char *file,
                             int filelen, char *why, int whylen);

#endif

#include "plan.h"
/* The plan's columns and tags with LLaMA-Factory's defaults for the format
 * filled in (also declared in emit_internal.h). */
void dataset_effective(const PlanDataset *, DatasetColumns *cols, DatasetTags *tags);
/* The first records (at most 100, from the first 8 MiB) of a dataset file
 * that is readable here, against its format, columns and tags: one error per
 * distinct problem, naming the missing key and the keys the record has, with
 * how many of the records read have it. Unreadable (or .parquet): a note that
 * says what was not checked. */
void dataset_check_records(const void *plan_dataset, Diags *d);
