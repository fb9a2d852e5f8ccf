/* checkpoint.h — training checkpoints, the HF export, and sha256 manifests.
 *
 * Training checkpoint: CKPT_DIR/step-NNNNNNNN/ holding
 *   model.safetensors      fp32 weights (HF names)
 *   optimizer.safetensors  AdamW moments: exp_avg.NAME, exp_avg_sq.NAME (fp32)
 *   state.json             step, AdamW step count, RNG state, data position, tokens seen
 *   MANIFEST.sha256        sha256sum format over the files above
 * written into CKPT_DIR/.tmp-step-NNNNNNNN (every file fsync'd), renamed into
 * place, then CKPT_DIR/latest (one line: the directory name) replaced
 * atomically, last. Then rotation removes the step-* directories beyond `keep`,
 * oldest by write order (state.json "write_seq"), never by step number.
 *
 * HF export: DIR with model.safetensors, config.json (the source model's with the
 * dtype changed, or generated for a model trained from scratch), the tokenizer files of
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

/* What determines a checkpoint (model shape, data shards, tokenizer, the training
 * settings that change the math), as key/value text pairs; stored in state.json
 * ("fingerprint") and compared on resume. Keys are plan.json key paths. Built by
 * run_fingerprint (runtime/train/run_init.c) so both trainers record the same. */
#define CKPT_FP_MAX 48
typedef struct {
    int n;
    struct { char key[40]; char val[80]; } f[CKPT_FP_MAX];
} CkptFingerprint;
/* Append key = formatted value (ignored beyond CKPT_FP_MAX). */
void ckpt_fp_add(CkptFingerprint *fp, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* What a resume needs to range-check state.json against. */
typedef struct {
    int64_t total_steps;      /* the plan's step count */
    int64_t global_batch;     /* rows per optimizer step */
    int64_t context;          /* tokens per row */
} CkptLimits;

/* Write checkpoint for st->step, fingerprint fp (may be NULL: none recorded).
 * Its write sequence (state.json "write_seq") is one more than the highest in
 * ckpt_dir. Then rotation: the `keep` newest by write order stay, and never the
 * one `latest` names or one written after it. 0 ok; -1 with err. */
/* The plan a checkpoint was trained with, recorded in its state.json ("plan")
 * so that `llmc-train export CHECKPOINT OUT` needs no --plan: plan.json's
 * absolute path and the SHA-256 of its bytes when the run started (the plan's
 * relative paths resolve against its own directory, so the file is named, not
 * copied). */
typedef struct {
    char path[4096];
    char sha256[65];
} CkptPlanRef;

/* plan_ref may be NULL (nothing recorded). */
int ckpt_save(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st,
              const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep, char *err, size_t errlen);

/* The same checkpoint, the same bytes, written by all ranks together when
 * none holds the whole state (ZeRO-3): rank 0 calls ckpt_shard_begin (the
 * step's temporary directory, model.safetensors and optimizer.safetensors at
 * full size with their headers); then every rank ckpt_shard_write with the
 * part it holds (m->w, opt->m, opt->v valid inside part; model.h ModelPart);
 * then rank 0 ckpt_shard_finish (the files hashed as written, state.json,
 * manifest, rename, `latest`, rotation, as ckpt_save). The caller puts a
 * barrier between the three and stops all ranks when one fails. The
 * temporary directory must be on a file system every rank writes to (the
 * checkpoint directory of a multi-node job always is: every rank resumes
 * from it). 0, or -1 with err. */
int ckpt_shard_begin(const char *ckpt_dir, const Model *m, const AdamW *opt, int64_t step, char *err, size_t errlen);
int ckpt_shard_write(const char *ckpt_dir, const Model *m, const AdamW *opt, int64_t step, const ModelPart *part,
                     char *err, size_t errlen);
int ckpt_shard_finish(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st,
                      const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep, char *err, size_t errlen);

/* The plan a checkpoint records (CHECKPOINT: a step directory, or a checkpoint
 * directory for the step its `latest` names; the manifest verified first).
 * 0 with *ref and *step set; 1 when the checkpoint records no plan (written
 * before plans were recorded); -1 on error (err names the file and field). */
int ckpt_plan_ref(const char *dir, CkptPlanRef *ref, int64_t *step, char *err, size_t errlen);

/* Resume from ckpt_dir into m/opt/st. Returns 1 when loaded, 0 when there is
 * nothing to resume (no checkpoint, or `fresh`), -1 on error (message in err).
 *   - no `latest` but step-* directories: refused (err names the directory and
 *     --fresh) unless fresh;
 *   - `latest` is verified (manifest, state.json ranges, tensors); if it fails,
 *     the newest checkpoint by write order that passes is used and warn says so,
 *     naming both; when none passes, err names the failing file;
 *   - a checkpoint whose fingerprint differs from fp is refused, naming the fields.
 * warn (may be empty on return) gets a message the caller should log. */
/* part: the part of m's weights and moments this rank reads (NULL: all;
 * model.h ModelPart); the rest of m->w, opt->m and opt->v is left as it is. */
int ckpt_resume(const char *ckpt_dir, const CkptFingerprint *fp, const CkptLimits *lim, int fresh, Model *m,
                AdamW *opt, TrainState *st, const ModelPart *part, char *warn, size_t warnlen, char *err,
                size_t errlen);

/* The weights of one verified checkpoint, for an export (llmc-train export):
 * dir is a step directory (CKPT_DIR/step-NNNNNNNN) or a checkpoint directory
 * whose `latest` names one (its path into step_dir). Its sha256 manifest is
 * checked first, then state.json (want: fingerprint fields that must agree,
 * NULL for none), then model.safetensors is read into m, which must be the
 * run's trainable view (model_trainable: the whole model, the trainable
 * layers, or the LoRA adapters). The step into *step. 0, or -1 with err naming
 * the file. */
int ckpt_load_weights(const char *dir, const CkptFingerprint *want, Model *m, int64_t *step, char *step_dir,
                      size_t step_dir_len, char *err, size_t errlen);

/* Range-check and parse a checkpoint's state.json text (path for messages;
 * dir_step: the step its directory name says, -1 unknown). Fills opt->t, st,
 * *write_seq (0 when the file has none) and fp_out (may be NULL). 0, or -1 with
 * a message naming path and field. */
int ckpt_parse_state(const char *path, const char *text, int64_t dir_step, const CkptLimits *lim, AdamW *opt,
                     TrainState *st, int64_t *write_seq, CkptFingerprint *fp_out, char *err, size_t errlen);

/* Load weights from a HF directory (or file) into m; every tensor of m must be
 * present with the right shape (a tied model ignores lm_head.weight). */
int load_hf_weights(const char *path, Model *m, char *err, size_t errlen);
/* The same for part of m only (NULL: all; model.h ModelPart): every tensor's
 * name and shape is still checked, only the part's bytes are read, and the
 * rest of m->w is not written. The floats read into *n_read (may be NULL). */
int load_hf_weights_part(const char *path, Model *m, const ModelPart *part, size_t *n_read, char *err,
                         size_t errlen);

/* Export m as a HF model directory (see above). tokenizer_dir may be NULL.
 * source_model: the HF directory the run started from, whose config.json the
 * export's is derived from (hf_config_derive: every key kept, the dtype set);
 * NULL for a model trained from scratch, whose config.json is generated
 * (hf_config_write). */
int hf_export(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir, const char *source_model,
              char *err, size_t errlen);
/* The same export written by every rank of a run none of whose ranks holds
 * the whole model (ZeRO-3), byte for byte what hf_export writes: rank 0
 * hf_export_shard_begin (DIR.tmp with the weights file laid out at full size,
 * config.json, the tokenizer's files), then every rank hf_export_shard_write
 * with its part of m->w (model.h ModelPart), then rank 0
 * hf_export_shard_finish (the file hashed as written, the manifest, the
 * rename); each phase finished on every rank before the next starts. */
int hf_export_shard_begin(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir,
                          const char *source_model, char *err, size_t errlen);
int hf_export_shard_write(const char *dir, const Model *m, const ModelPart *part, char *err, size_t errlen);
int hf_export_shard_finish(const char *dir, char *err, size_t errlen);

/* Export LoRA adapters as a PEFT adapter directory DIR: adapter_model.safetensors
 * (fp32, PEFT's tensor names: base_model.model.model.layers.N.self_attn.q_proj.
 * lora_A.weight ...), adapter_config.json (peft_type LORA, r, lora_alpha,
 * target_modules, use_rslora, base_model_name_or_path: base_model or null) and
 * MANIFEST.sha256; written as DIR.tmp and renamed. */
int peft_export(const char *dir, const Lora *l, int alpha, int rslora, const char *base_model, char *err,
                size_t errlen);
/* The reverse, for a directory peft_export or peft's save_pretrained wrote:
 * adapters on base's layers (shapes from base->cfg) with r, lora_alpha,
 * target_modules and use_rslora from adapter_config.json (*alpha, *rslora as it
 * says) and every tensor of adapter_model.safetensors read by its PEFT name.
 * NULL with a message in err (an unknown module, a missing or misshapen tensor). */
Lora *peft_load(const char *dir, const Model *base, int *alpha, int *rslora, char *err, size_t errlen);

/* Write DIR/MANIFEST.sha256 over every regular file in DIR (sorted by name). */
int manifest_write(const char *dir, char *err, size_t errlen);
/* A file's digest known from writing it (st_write_sha256), so it is not read again. */
typedef struct {
    const char *name;   /* file name inside DIR */
    char hex[65];
} ManifestHash;
/* The same; the files named in known take their digest from there, the others are read. */
int manifest_write_known(const char *dir, const ManifestHash *known, int nknown, char *err, size_t errlen);
/* Check DIR/MANIFEST.sha256 (lines in either sha256sum format: "HASH  FILE" or
 * "HASH *FILE"); prints "FILE: OK|FAILED ..." lines to out when not NULL. Only
 * regular files are read (a FIFO or device listed there is a failure, never
 * opened for reading). Returns 0 when every listed file matches, 1 on a mismatch
 * or missing file (the first such file's name in err), -1 when the manifest
 * cannot be read (message in err). */
int manifest_check(const char *dir, FILE *out, char *err, size_t errlen);
/* llmc-train verify DIR (a subcommand: the arguments after "verify", the exit
 * status back): manifest_check, its lines on standard output. */
int cmd_verify(int argc, char **argv);

/* fsync a directory (after renames inside it). */
int fsync_dir(const char *dir);

/* mkdir -p: create path and its missing parents (mode 0755). 0, or -1 with errno. */
int mkdir_parents(const char *path);

/* One run at a time per checkpoint directory: run_lock_take creates DIR
 * (and its parents) and takes an exclusive flock on DIR/.run.lock, which the kernel releases when the process ends, however it
 * ends. The holder writes "pid P on HOST since TIME" into the file. A second
 * run of the same plan (a duplicate submission, a requeue racing a manual run)
 * does not wait (it would only train the same steps again) but fails at once
 * with a message naming the holder, before it reads or writes any checkpoint.
 * Returns the open fd (kept open for the run), or -1 with the reason in err.
 * A file system without locks is a warning in warn (warn[0] otherwise 0), and
 * the run goes on unlocked. */
int run_lock_take(const char *dir, char *warn, size_t warn_cap, char *err, size_t err_cap);

#endif
