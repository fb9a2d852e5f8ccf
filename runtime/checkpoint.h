/* checkpoint.h — training checkpoints, the HF export, and sha256 manifests.
 *
 * Training checkpoint: CKPT_DIR/step-NNNNNNNN/ holding
 *   model.safetensors      fp32 weights (HF names)
 *   optimizer.safetensors  AdamW moments: exp_avg.NAME, exp_avg_sq.NAME (fp32)
 *   state.json             step, AdamW step count, RNG state, data position, tokens seen
 *   MANIFEST.sha256        sha256sum format over the files above
 * written into CKPT_DIR/.tmp-step-NNNNNNNN (every file fsync'd), renamed into
 * place, then CKPT_DIR/latest (one line: the directory name) replaced
 * atomically, last. Older step-* directories beyond `keep` are removed after.
 *
 * HF export: DIR with model.safetensors, config.json, the tokenizer files of
 * the plan's tokenizer directory, and MANIFEST.sha256; written as DIR.tmp and
 * renamed, so DIR is complete or absent. */
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "optim.h"
#include "rng.h"
#include "safetensors.h"

typedef struct {
    int64_t step;           /* optimizer steps completed */
    int64_t rows_consumed;  /* global rows of the shuffled data stream used so far */
    int64_t tokens_seen;    /* non-padding tokens trained on, all ranks */
    Rng rng;                /* the trainer's RNG after `step` steps */
} TrainState;

/* Write checkpoint for st->step; keep the newest `keep`. 0 ok; -1 with err. */
int ckpt_save(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st, int keep,
              char *err, size_t errlen);
/* Load CKPT_DIR/latest into m/opt/st (manifest checked first). Returns 1 when
 * loaded, 0 when there is no checkpoint, -1 on error (message in err). */
int ckpt_load_latest(const char *ckpt_dir, Model *m, AdamW *opt, TrainState *st, char *err, size_t errlen);

/* Load weights from a HF directory (or file) into m; every tensor of m must be
 * present with the right shape (a tied model ignores lm_head.weight). */
int load_hf_weights(const char *path, Model *m, char *err, size_t errlen);

/* Export m as a HF model directory (see above). tokenizer_dir may be NULL. */
int hf_export(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir,
              char *err, size_t errlen);

/* Write DIR/MANIFEST.sha256 over every regular file in DIR (sorted by name). */
int manifest_write(const char *dir, char *err, size_t errlen);
/* Check DIR/MANIFEST.sha256; prints "FILE: OK|FAILED" lines to out when not NULL.
 * Returns 0 when every listed file matches, 1 on a mismatch or missing file,
 * -1 when the manifest cannot be read (message in err). */
int manifest_check(const char *dir, FILE *out, char *err, size_t errlen);

/* fsync a directory (after renames inside it). */
int fsync_dir(const char *dir);

/* mkdir -p: create path and its missing parents (mode 0755). 0, or -1 with errno. */
int mkdir_parents(const char *path);

#endif
