/* run_init.h — the start and the end of a training run that the CPU and the
 * CUDA trainers share, so both refuse the same plans with the same messages,
 * start from the same weights and leave the same files: the plan's token shards
 * opened and checked against the model, the host model's weights set (random
 * init for `init = scratch`, else the Hugging Face checkpoint at the plan's model
 * path, checked against its config), and at the end the HF export and the loss
 * curve. */
#ifndef LLMC_RUN_INIT_H
#define LLMC_RUN_INIT_H

#include "checkpoint.h"
#include "model.h"
#include "plan.h"
#include "shard_io.h"

/* Open plan->shards_dir into *set; 0, or -1 after logging why (the set is then
 * closed). mc is the model the rows are for. */
int run_open_shards(ShardSet *set, const RunPlan *plan, const ModelConfig *mc);

/* Fill an initialised model's weights; 0, or -1 after logging why. part: the
 * part of m's buffer this rank reads from the plan's HF model (NULL: all;
 * model.h ModelPart); a random init always fills all of it (one RNG stream,
 * so any rank count gives the same weights). */
int run_init_weights(Model *m, const RunPlan *plan, const ModelConfig *mc, const ModelPart *part);

/* What the run trains (plan->ft, docs/runtime.md "Fine-tuning"), attached to a
 * host model (its layout: the weights need not be set yet): freeze marks every tensor outside the
 * trainable layers frozen; lora freezes the whole base and adds adapters on the
 * targeted linear layers (A from train.seed, B zero); full attaches nothing.
 * 0, or -1 after logging why. run_finetune_detach frees what attach made. */
int run_finetune_attach(Model *m, const RunPlan *plan);
void run_finetune_detach(Model *m);

/* The HF export of m into dir (the plan's precision; config.json carried over
 * from the plan's model, or generated for `init = scratch`; the tokenizer
 * files). With LoRA adapters on m: dir holds the merged model (W + scale B A)
 * and adapter_dir the PEFT adapter (peft_export). The end of a run and
 * `llmc-train export` both write through it. 0, or -1 after logging why. */
int run_export(const RunPlan *plan, const Model *m, const char *dir, const char *adapter_dir);
/* run_export's choices, for an export the ranks write together
 * (checkpoint.h hf_export_shard_*): the dtype (the plan's precision) and the
 * HF directory whose config.json is carried over (NULL: generated). */
StDtype run_export_dtype(const RunPlan *plan);
const char *run_export_source(const RunPlan *plan);
/* OUT/final, the final export's directory. */
void run_final_dir(const RunPlan *plan, char *final_dir, size_t final_len);
/* The loss curve beside the metrics file (closed by the caller); baseline: the
 * unigram loss drawn on it, 0 for none. Reported, not fatal, if it fails. */
void run_write_curve(const RunPlan *plan, double baseline);

/* Rank 0 at the end: the HF export into OUT/final (its path into final_dir) and
 * the loss curve (run_write_curve). With LoRA adapters on m:
 * OUT/final is the merged model (W + scale B A), and OUT/adapter the PEFT
 * adapter (peft_export). 0, or -1 after logging why. */
int run_write_final(const RunPlan *plan, const Model *m, double baseline, char *final_dir, size_t final_len);

/* What determines a checkpoint of this run (see CkptFingerprint): the model's
 * shape, the shards (their index.json's sha256 and row count), the tokenizer
 * (its tokenizer.json's sha256), and the training settings that change the
 * math: context, steps, batch and accumulation, the learning-rate schedule,
 * AdamW settings, clipping, seed, precision. total/warmup: the resolved step
 * and warmup counts. */
void run_fingerprint(const RunPlan *plan, const ShardSet *set, int64_t total, int64_t warmup, CkptFingerprint *fp);

/* Resume from plan->ckpt_dir per checkpoint.resume and --fresh (ckpt_resume):
 * 1 resumed into m/opt/st (only part of m's weights and moments when part is
 * set), 0 start at step 0, -1 after logging why. Only rank 0 (is0) logs the
 * warnings and the "resumed" line. */
int run_resume(const RunPlan *plan, const CkptFingerprint *fp, int64_t total, int fresh, Model *m, AdamW *opt,
               TrainState *st, const ModelPart *part, int is0);

/* Free space, before the first step: the checkpoint directory's file system
 * must hold one more checkpoint and the output directory's the export (the
 * sum when they share one). 0, or -1 with the figures logged. */
int run_check_space(const RunPlan *plan, size_t model_floats, size_t trainable_floats);

#endif
