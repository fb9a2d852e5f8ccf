/* train_loop.h — the one training loop of both trainers (runtime/train/train_loop.c).
 *
 * `llmc-train run` (CPU, runtime/cpu/cpu_backend.c) and `llmc-train-cuda run` (CUDA,
 * runtime/cuda/backend_cuda.c) are the same program over two backends: the loop
 * owns the command line (--eval-shards, --stop-after, --fresh), the plan, the
 * shards and the data order (row_stream), the learning-rate schedule, gradient
 * accumulation and loss normalisation, stop signals, checkpoint cadence, resume
 * and the checkpoint fingerprint, metrics.jsonl, the Prometheus file, the
 * step-time drift warning, held-out evaluation, result.json and the HF export.
 * A backend owns only what differs: its ranks and collectives, where the weights
 * and AdamW moments live while training, and the arithmetic of one micro-batch
 * and one optimizer step. A feature is therefore on both backends, or refused by
 * one of them with a message (check_plan).
 *
 * The host model (runtime/model/model.h: HF-ordered fp32 parameters) and the host AdamW
 * state are the loop's: it initialises them (random init or the HF checkpoint),
 * resumes into them and saves and exports from them. A backend that trains them
 * in place (CPU without ZeRO) has nothing to do in set_state/get_state; one
 * that keeps its own copy (CUDA: device memory; the CPU backend's ZeRO shards)
 * moves the state across in them.
 *
 * What trains (plan.json "finetune", run_finetune_attach): with freeze or LoRA
 * the host model carries frozen flags and adapters (hm->frozen, hm->lora), and
 * the host AdamW state covers model_trainable(hm) only (the trainable layers'
 * window of the buffer, or the adapters): the backend accumulates that view's
 * gradients and steps that view. A backend without fine-tuning refuses
 * method != full in check_plan (RunPlan.ft). Checkpoints hold the view (the
 * frozen base comes from the plan's init again on resume).
 *
 * Every function returns 0, or -1 after logging why (log_error), unless said
 * otherwise. `self` is the backend's own context (TrainBackend.self). */
#ifndef LLMC_TRAIN_LOOP_H
#define LLMC_TRAIN_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "optim.h"
#include "plan.h"

typedef struct TrainBackend {
    const char *prog;   /* "llmc-train", "llmc-train-cuda": usage lines and messages */
    void *self;

    /* Before any rank starts: 0, or -1 with a message in err (exit 2: a plan this
     * backend cannot run). May be NULL. */
    int (*check_plan)(void *self, const RunPlan *plan, char *err, size_t errlen);
    /* Ranks and collectives. dist_init fills rank/world (and sets the log prefix);
     * non-zero after a message. sum_f64: in-place sum over ranks, the same bits
     * on every rank. any: 1 when flag is set on some rank, 0 when on none, -1 on
     * failure. */
    int (*dist_init)(void *self, int *rank, int *world);
    void (*dist_finalize)(void *self);
    int (*sum_f64)(void *self, double *v, int n);
    int (*any)(void *self, int flag);
    int (*barrier)(void *self);

    /* After the rank check, before the shards are opened (may be NULL): refuse
     * up front what cannot run here (memory). */
    int (*preflight)(void *self, const RunPlan *plan);
    /* Build the training state for micro-batches of micro_batch x context around
     * the loop's host model hm (weights set) and host optimizer opt (moments
     * zero). Fills n_params (parameters reported) and the two phrases of the
     * "training N steps" line: where (" on 2 GPU(s)", or "") and setup (", attention
     * fused, ...", or ""). */
    int (*create)(void *self, const RunPlan *plan, Model *hm, AdamW *opt, size_t *n_params, char *where,
                  size_t where_len, char *setup, size_t setup_len);
    /* After create, before any weight is read: the part of the host model this
     * rank's training state is made from (ZeRO-3: its shard), which is all the
     * loop reads on this rank of the initial HF weights and of a resumed
     * checkpoint (model.h ModelPart; part->r stays the backend's until destroy).
     * set_state then reads nothing of hm and opt outside it. May be NULL: all. */
    int (*state_part)(void *self, const Model *hm, ModelPart *part);
    /* Free what create made; called after a failed create too. */
    void (*destroy)(void *self);
    /* Take the host weights (and, when moments is set, the AdamW moments and
     * step count: a resumed run) as the training state. Every rank. May be NULL. */
    int (*set_state)(void *self, const Model *hm, const AdamW *opt, int moments);
    /* Bring the training state back into hm/opt on rank 0 (is0) for a checkpoint
     * or the export; collective (every rank calls it). May be NULL. */
    int (*get_state)(void *self, Model *hm, AdamW *opt, int is0);
    /* With a state_part (part->n >= 0): this rank's part of the training state
     * into hm/opt (weights and moments inside the part, and opt->t), for a
     * checkpoint every rank writes its piece of (checkpoint.h ckpt_shard_*).
     * No collective. NULL: checkpoints go through get_state. */
    int (*get_state_part)(void *self, Model *hm, AdamW *opt);
    /* Side files that follow the run (called once after resume, every rank;
     * start_step: the step training starts from). May be NULL. */
    int (*begin)(void *self, const RunPlan *plan, int64_t start_step, int is0);

    /* One micro-batch of the current optimizer step: forward and backward of the
     * unscaled summed token loss, gradients accumulated (index 0 starts the step
     * from zero; index == count-1 is the last of the step). *labels: its label
     * tokens. */
    int (*micro_step)(void *self, const Batch *b, int index, int count, int64_t *labels);
    /* Finish the step: gradients summed over ranks and multiplied by grad_mult
     * (1 / the step's label tokens on all ranks), their global norm before
     * clipping into *grad_norm, clipped to clip, AdamW at lr. *loss_sum: this
     * rank's summed token loss over the step's micro-batches. */
    int (*optimizer_step)(void *self, float grad_mult, double lr, double clip, double *grad_norm, double *loss_sum);
    /* Rank 0, after training and after a get_state (the final checkpoint):
     * forward only over b's first n_rows rows (the rest
     * repeat row 0 to fill the micro-batch and count for nothing). *loss_sum and
     * *labels over those rows; argmax[r*T+t] (r < n_rows): the arg max of the
     * logits at position t, the lowest index among ties. */
    int (*eval_forward)(void *self, const Batch *b, int n_rows, double *loss_sum, int64_t *labels,
                        uint32_t *argmax);

    /* Memory figures (may be NULL). After each step, every rank: extra text for
     * the step's log line (" gpu 1.23 GiB" or ""), and any per-step side file on
     * rank 0. At the end, rank 0: extra text for the "done" line. */
    int (*step_stats)(void *self, int64_t step, double step_s, int is0, char *extra, size_t len);
    void (*final_stats)(void *self, char *extra, size_t len);
} TrainBackend;

/* argmax[n] = the index of the largest of logits[n*V .. n*V+V-1], the lowest
 * among ties, NaN skipped (0 for a row of NaN), for n < rows: eval_forward's
 * argmax from host logits (the CUDA backend's k_argmax_rows keeps the same rule). */
void logits_argmax(const float *logits, size_t rows, int V, uint32_t *argmax);

/* `PROG run PLAN.json [--eval-shards DIR] [--stop-after N] [--fresh]`: argv[0] is
 * "run". Returns the exit status: 0, 1 (failure), 2 (usage/plan) or
 * STOP_EXIT_REQUEUE (stopped with a checkpoint; runtime/base/stopsig.h). */
int train_loop_run(const TrainBackend *be, int argc, char **argv);

#endif
