/* emit_llamafactory.c — for `backend = llamafactory`: LLaMA-Factory's training
 * YAML (libyaml's emitter) and the DeepSpeed JSON of the ZeRO stage (cJSON).
 *
 * LLaMA-Factory hands the YAML to HfArgumentParser.parse_dict, which rejects
 * unknown keys and does not convert types; so only keys of its hparams
 * dataclasses (model_args, data_args, finetuning_args, training_args and
 * transformers' Seq2SeqTrainingArguments) are written, each as the type the
 * dataclass declares. Floats always carry a '.' and a signed exponent
 * ("1.0e-05"): YAML 1.1 loaders (PyYAML) read "1e-05" as a string. Strings
 * are double-quoted so "true" or "123" in a path stays a string. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <yaml.h>
#include "emit_internal.h"
#include "emit_yaml.h"

const char *lf_yaml_name(void) { return "llamafactory_train.yaml"; }

const char *lf_deepspeed_name(const JobLayout *L)
{
    /* the names of LLaMA-Factory's examples/deepspeed/ files */
    bool off = L->train->offload != OFFLOAD_NONE;
    switch (zero_stage(L->train->shard)) {
    case 1: return "ds_z1_config.json";
    case 2: return off ? "ds_z2_offload_config.json" : "ds_z2_config.json";
    case 3: return off ? (L->train->offload == OFFLOAD_ALL ? "ds_z3_offload_config.json" : "ds_z3_offload_optimizer_config.json")
                       : "ds_z3_config.json";
    default: return "ds_z0_config.json";
    }
}

/* ---- YAML writing ---- */

static const char *lf_scheduler(const PlanTrain *t)
{
    switch (t->schedule) {
    case SCHED_LINEAR: return "linear";
    case SCHED_CONSTANT:
        return (t->warmup_steps > 0 || t->warmup_ratio > 0) ? "constant_with_warmup" : "constant";
    case SCHED_COSINE: break;
    case SCHED_WSD: return "warmup_stable_decay";
    }
    return t->min_lr > 0 ? "cosine_with_min_lr" : "cosine";
}

/* finetuning_type and its arguments (finetuning_args.py FreezeArguments,
 * LoraArguments; model_args.py QuantizationArguments; RLHFArguments). */
static void lf_method(Yaml *y, const JobLayout *L, const PlanTrain *t)
{
    /* the method's words are LLaMA-Factory's finetuning_type; qlora is lora on a quantised base */
    yw_str(y, "finetuning_type", method_json_names[t->method == METHOD_QLORA ? METHOD_LORA : t->method]);
    if (t->method == METHOD_FREEZE) yw_int(y, "freeze_trainable_layers", t->freeze_layers);
    if (t->method == METHOD_LORA || t->method == METHOD_QLORA) {
        yw_int(y, "lora_rank", t->lora_rank);
        yw_int(y, "lora_alpha", t->lora_alpha);
        yw_float(y, "lora_dropout", t->lora_dropout);
        Buf tg;
        buf_init(&tg);
        for (int i = 0; i < t->nlora_target; i++) {
            if (i) buf_put(&tg, ",", 1);
            buf_puts(&tg, t->lora_target[i]);
        }
        yw_str(y, "lora_target", t->nlora_target > 0 && tg.data ? tg.data : "all");
        buf_free(&tg);
        yw_bool(y, "use_dora", t->use_dora);
        yw_bool(y, "use_rslora", t->use_rslora);
        /* after a LoRA job: its adapter is merged into the base and a new one
         * trained (model/adapter.py), so a DPO/KTO reference (the model with
         * the adapter off) is the model after that job. Not possible on a
         * quantised base or under ZeRO-3 (parser.py refuses it with
         * quantization_bit; ZeRO-3 never merges): the adapter is trained on. */
        if (L->start_adapter)
            yw_bool(y, "create_new_adapter", t->method == METHOD_LORA && t->shard != SHARD_ZERO3);
    }
    if (t->method == METHOD_QLORA) {
        yw_int(y, "quantization_bit", t->quant_bits);
        yw_str(y, "quantization_method", quant_method_json_names[t->quant_method]);   /* contract/plan_vocab.h */
    }
    if (t->stage == STAGE_DPO || t->stage == STAGE_KTO) {
        yw_float(y, "pref_beta", t->pref_beta);
        yw_float(y, "pref_ftx", t->pref_ftx);
        if (t->stage == STAGE_DPO) yw_str(y, "pref_loss", pref_loss_json_names[t->pref_loss]);
        if (t->ref_model && t->ref_model->path) {
            char *rp = artifact_path(L, t->ref_model->path);
            yw_str(y, "ref_model", rp);
            free(rp);
        }
    }
}

/* save_steps: checkpoint_every in steps as written; a duration over the
 * estimated step time, and never more than LF_SEGMENT_LOSS of a time-limit
 * segment (the limit less the stop signal's lead). LLaMA-Factory cannot save
 * on a signal: at the signal the job script waits for the next save and
 * requeues, so when that save does not come in time, at most this much of a
 * segment is trained again (docs/artifacts.md, "LLaMA-Factory"). */
#define LF_SEGMENT_LOSS 0.10
long long lf_save_steps(const JobLayout *L, const Estimate *e)
{
    const PlanTrain *t = L->train;
    if (t->checkpoint_every_steps > 0) return t->checkpoint_every_steps;
    double step = e && e->step_seconds > 0 ? e->step_seconds : 0;
    if (!(step > 0)) return 500;   /* no step time: the Trainer's own default */
    double secs = t->checkpoint_every_seconds > 0 ? t->checkpoint_every_seconds : 1800;
    long long n = (long long)ceil(secs / step);
    double segment = L->job->time_seconds - job_stop_signal_seconds(L, e);
    if (segment > 0) {
        long long cap = (long long)floor(LF_SEGMENT_LOSS * segment / step);
        if (cap < n) n = cap;
    }
    return n < 1 ? 1 : n;
}

/* Evaluation: a held-out part of the data (val_size) or named datasets
 * (eval_dataset), every eval_every steps. */
static void lf_eval(Yaml *y, const PlanTrain *t)
{
    if (t->val_size > 0) yw_float(y, "val_size", t->val_size);   /* a fraction < 1, else a count */
    if (t->val_size <= 0 && t->neval_data == 0) return;
    yw_int(y, "per_device_eval_batch_size", t->eval_batch > 0 ? t->eval_batch : t->micro_batch);
    if (t->eval_every_steps > 0) {
        yw_str(y, "eval_strategy", "steps");
        yw_float(y, "eval_steps", (double)t->eval_every_steps);
    } else {
        yw_str(y, "eval_strategy", "epoch");
    }
}

static void lf_body(Yaml *y, const JobLayout *L, const Estimate *e)
{
    const PlanTrain *t = L->train;
    const PlanModel *m = t->model;

    /* model: after another job, the model it trained; after a LoRA job, the
     * same base with that adapter (model_args.py adapter_name_or_path) */
    char *path = artifact_path(L, L->start_path && !L->start_adapter ? L->start_path : m ? m->path : "");
    yw_str(y, "model_name_or_path", path);
    free(path);
    if (L->start_path && L->start_adapter) {
        path = artifact_path(L, L->start_path);
        yw_str(y, "adapter_name_or_path", path);
        free(path);
    }
    /* method */
    yw_str(y, "stage", name_stage(t->stage));
    yw_bool(y, "do_train", true);
    lf_method(y, L, t);
    yw_str(y, "deepspeed", lf_deepspeed_name(L));
    /* gradient checkpointing is on in LLaMA-Factory unless disabled; it has
     * no selective mode, so selective means on */
    yw_bool(y, "disable_gradient_checkpointing", t->recompute == RECOMPUTE_NONE);
    yw_str(y, "flash_attn", t->attention == ATTN_FLASH ? "fa2" : "disabled");

    /* dataset */
    Buf names;
    buf_init(&names);
    for (int i = 0; i < t->ndata; i++) {
        if (!t->data[i]) continue;
        if (names.len) buf_put(&names, ",", 1);
        buf_puts(&names, t->data[i]->name);
    }
    yw_str(y, "dataset", names.data ? names.data : "");
    buf_free(&names);
    /* mixtures (data_args.py): the strategy, the probabilities as its
     * comma-separated string, in the order of `dataset`; max_samples per dataset */
    if (t->mix != MIX_CONCAT) yw_str(y, "mix_strategy", mix_json_names[t->mix]);
    if (t->ninterleave_probs > 0) {
        Buf pr;
        buf_init(&pr);
        for (int i = 0; i < t->ninterleave_probs; i++) {
            char num[32];
            snprintf(num, sizeof num, "%s%.10g", i ? "," : "", t->interleave_probs[i]);
            buf_puts(&pr, num);
        }
        yw_str(y, "interleave_probs", pr.data ? pr.data : "");
        buf_free(&pr);
    }
    if (t->max_samples > 0) yw_int(y, "max_samples", t->max_samples);
    if (t->neval_data > 0) {
        buf_init(&names);
        for (int i = 0; i < t->neval_data; i++) {
            if (names.len) buf_put(&names, ",", 1);
            buf_puts(&names, t->eval_data[i]->name);
        }
        yw_str(y, "eval_dataset", names.data ? names.data : "");
        buf_free(&names);
    }
    yw_str(y, "dataset_dir", ".");   /* the job script runs in the compiled directory */
    yw_str(y, "template", name_template(t->template_) ? name_template(t->template_) : name_template(TEMPLATE_EMPTY));
    yw_int(y, "cutoff_len", t->context);
    yw_bool(y, "packing", t->packing);
    if (t->neat_packing) yw_bool(y, "neat_packing", true);   /* data_args.py */
    /* loss masking: LLaMA-Factory's defaults (false) are left unwritten */
    if (t->train_on_prompt) yw_bool(y, "train_on_prompt", true);
    if (t->mask_history) yw_bool(y, "mask_history", true);
    /* tokenised data is reused from tokenized_path (on requeue too); a stale
     * cache is the user's to delete, never silently rebuilt per start */
    yw_bool(y, "overwrite_cache", false);
    if (t->tokenized_path) {
        char *tp = artifact_path(L, t->tokenized_path);
        yw_str(y, "tokenized_path", tp);
        free(tp);
    }
    yw_int(y, "preprocessing_num_workers", llamafactory_workers((double)L->cpus_per_task * L->tasks_per_node));
    yw_bool(y, "data_shared_file_system", t->data_shared_fs);
    if (t->streaming) yw_bool(y, "streaming", true);
    lf_eval(y, t);

    /* output: overwrite_output_dir false, so a requeued job resumes from the
     * last checkpoint in output_dir (LLaMA-Factory's hparams/parser.py) */
    path = artifact_output_dir(L);
    yw_str(y, "output_dir", path);
    free(path);
    yw_int(y, "logging_steps", t->log_every > 0 ? t->log_every : 1);
    if (t->checkpoint_epoch) yw_str(y, "save_strategy", "epoch");   /* transformers' SaveStrategy */
    else yw_int(y, "save_steps", lf_save_steps(L, e));
    yw_int(y, "save_total_limit", t->checkpoint_keep > 0 ? t->checkpoint_keep : 2);
    yw_bool(y, "save_only_model", false);
    yw_bool(y, "plot_loss", true);
    yw_bool(y, "overwrite_output_dir", false);
    yw_str(y, "report_to", report_to_json_names[t->report_to]);
    yw_str(y, "run_name", t->run_name ? t->run_name : t->name);

    /* train */
    yw_int(y, "per_device_train_batch_size", t->micro_batch);
    yw_int(y, "gradient_accumulation_steps", t->grad_accum > 0 ? t->grad_accum : 1);
    yw_float(y, "learning_rate", t->lr);
    yw_float(y, "num_train_epochs", t->epochs);
    if (t->max_steps > 0) yw_int(y, "max_steps", t->max_steps);
    const char *sched = lf_scheduler(t);
    yw_str(y, "lr_scheduler_type", sched);
    if (strcmp(sched, "cosine_with_min_lr") == 0) {
        yw_key(y, "lr_scheduler_kwargs");
        yw_map_begin(y);
        yw_float(y, "min_lr", t->min_lr);
        yw_map_end(y);
    }
    int64_t sched_steps = t->max_steps > 0 ? t->max_steps : (e && e->steps_total > 0 ? e->steps_total : 0);
    if (t->schedule == SCHED_WSD) {
        /* transformers' get_wsd_schedule: num_decay_steps is required (the
         * stable phase is what warmup and decay leave); the floor as a ratio */
        yw_key(y, "lr_scheduler_kwargs");
        yw_map_begin(y);
        yw_int(y, "num_decay_steps", sched_steps > 0 ? (long long)ceil(t->wsd_decay * (double)sched_steps) : 1);
        yw_float(y, "min_lr_ratio", t->lr > 0 ? t->min_lr / t->lr : 0);
        yw_map_end(y);
    }
    if (t->optim_at.start.file) yw_str(y, "optim", optim_json_names[t->optim]);   /* transformers' OptimizerNames */
    /* transformers 5 dropped warmup_ratio (warmup_steps < 1 is a ratio there);
     * 4.x has no such reading. Whole steps mean the same to both, so a ratio
     * is turned into steps with the estimated step count; only when that is
     * unknown is warmup_ratio written (right on 4.x, refused loudly by 5.x). */
    int64_t steps = t->max_steps > 0 ? t->max_steps : (e && e->steps_total > 0 ? e->steps_total : 0);
    if (t->warmup_steps > 0) yw_int(y, "warmup_steps", t->warmup_steps);
    else if (!(t->warmup_ratio > 0)) yw_int(y, "warmup_steps", 0);
    else if (steps > 0) yw_int(y, "warmup_steps", (long long)ceil(t->warmup_ratio * (double)steps));
    else yw_float(y, "warmup_ratio", t->warmup_ratio);
    yw_float(y, "weight_decay", t->weight_decay);
    yw_float(y, "adam_beta1", t->beta1);
    yw_float(y, "adam_beta2", t->beta2);
    yw_float(y, "adam_epsilon", t->adam_eps);
    yw_float(y, "max_grad_norm", t->grad_clip);
    yw_int(y, "seed", (long long)t->seed);   /* emit_check: fits 32 bits */
    /* deterministic = true: HF's full_determinism (deterministic torch algorithms
     * and cuBLAS workspace); only written when set (its default is false) */
    if (t->deterministic) yw_bool(y, "full_determinism", true);
    /* fp8 (Fp8Arguments): Accelerate's FP8 linears inside bf16 mixed
     * precision, as LLaMA-Factory's examples/extras/fp8 write it */
    bool bf16 = t->precision == PREC_BF16 || t->precision == PREC_FP8;
    yw_bool(y, "bf16", bf16);
    yw_bool(y, "fp16", t->precision == PREC_FP16);
    if (t->precision == PREC_FP8) {
        yw_bool(y, "fp8", true);
        yw_str(y, "fp8_backend", fp8_backend_json_names[t->fp8_backend]);
    }
    if (t->liger_kernel) yw_bool(y, "enable_liger_kernel", true);   /* model_args.py */
    /* pure_bf16 (FinetuningArguments): bf16 weights, gradients and AdamW
     * moments, no autocast; bf16 and fp16 stay false, as LLaMA-Factory's web
     * UI writes it. Only written when set (its default is false). */
    if (t->precision == PREC_PURE_BF16) yw_bool(y, "pure_bf16", true);
    /* finite: a rank stuck in a collective (a dead peer, a hung NIC) must end
     * the job instead of holding the allocation for its whole time limit */
    double barrier = e && e->ddp_timeout_seconds > 0 ? e->ddp_timeout_seconds
                   : t->ddp_timeout_seconds > 0 ? t->ddp_timeout_seconds : 1800;
    /* raised by the estimate to cover the tokenisation the other ranks wait for */
    yw_int(y, "ddp_timeout", (long long)ceil(barrier));
}

typedef struct { const JobLayout *L; const Estimate *e; } LfCtx;

static void lf_document(Yaml *y, const void *ctx)
{
    const LfCtx *c = ctx;
    lf_body(y, c->L, c->e);
}

char *emit_lf_yaml(const JobLayout *L, const Estimate *e, char *err, size_t errlen)
{
    LfCtx c = {L, e};
    return yw_document("", false, lf_document, &c, err, errlen);
}

/* ---- a merge job: llamafactory-cli export ---- */

const char *lf_merge_yaml_name(void) { return LLMC_MERGE_YAML; }

/* export_model (train/tuner.py) after get_infer_args (hparams/parser.py),
 * whose parser is ModelArguments, DataArguments, FinetuningArguments and
 * GeneratingArguments only: no training argument may appear. The base in
 * model_name_or_path (never quantised: LLaMA-Factory cannot merge into a
 * quantised model, so a QLoRA adapter is merged into the 16-bit base), the
 * adapter (the LoRA run's output), the run's template (export fixes the
 * tokenizer with it and saves it beside the weights) and stage (rm: its value
 * head is copied too); export_* as the merge block says. */
static void lf_merge_body(Yaml *y, const JobLayout *L)
{
    const PlanMerge *m = L->merge;
    const PlanTrain *t = m->adapter;
    char *path = artifact_path(L, m->model->path);
    yw_str(y, "model_name_or_path", path);
    free(path);
    path = artifact_path(L, L->start_path ? L->start_path : t->output_dir);
    yw_str(y, "adapter_name_or_path", path);
    free(path);
    yw_str(y, "template", name_template(t->template_) ? name_template(t->template_) : name_template(TEMPLATE_EMPTY));
    yw_str(y, "finetuning_type", method_json_names[METHOD_LORA]);
    yw_str(y, "stage", name_stage(t->stage));
    yw_str(y, "infer_dtype", plan_vocab_name(merge_dtype_json_names, MERGE_DTYPE_COUNT, m->dtype));
    path = artifact_path(L, m->output_dir);
    yw_str(y, "export_dir", path);
    free(path);
    yw_int(y, "export_size", m->shard_gb);
    yw_str(y, "export_device", merge_device_json_names[m->device]);   /* contract/plan_vocab.h */
    yw_bool(y, "export_legacy_format", m->legacy_format);
}

static void lf_merge_document(Yaml *y, const void *ctx) { lf_merge_body(y, ctx); }

char *emit_lf_merge_yaml(const JobLayout *L, char *err, size_t errlen)
{
    return yw_document("", false, lf_merge_document, L, err, errlen);
}

/* DeepSpeed config as LLaMA-Factory's examples/deepspeed/ds_z{0,2,3}_config.json
 * and ds_z{2,3}_offload_config.json ("auto" values are filled by the HF
 * Trainer from the YAML); ZeRO-1 is the ZeRO-2 file with stage 1; ZeRO-3 with
 * offload = optimizer is ds_z3_offload_config.json without offload_param.
 *
 * overlap_comm is false in every file, deliberately: with it DeepSpeed keeps
 * extra gradient buckets alive to overlap the reduce-scatter with backward
 * (for ZeRO-2 about 4.5 x reduce_bucket_size, several GiB at the 5e8 bucket
 * here), memory the estimate does not count and which turns a plan that fits
 * into an OOM at the first step; LLaMA-Factory's own files ship it off for the
 * same reason. With CPU offload the step is bound by the PCIe copies and the
 * CPU optimizer, not by the overlapped collectives, so little time is lost.
 * Offloaded states live in pinned host memory (pin_memory: the copies run at
 * full PCIe speed, at the cost of page-locked host RAM the job's --mem covers). */
char *emit_lf_deepspeed(const JobLayout *L, char *err, size_t errlen)
{
    int stage = zero_stage(L->train->shard);
    OffloadKind off = stage >= 2 ? L->train->offload : OFFLOAD_NONE;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "train_batch_size", "auto");
    cJSON_AddStringToObject(o, "train_micro_batch_size_per_gpu", "auto");
    cJSON_AddStringToObject(o, "gradient_accumulation_steps", "auto");
    cJSON_AddStringToObject(o, "gradient_clipping", "auto");
    cJSON_AddTrueToObject(o, "zero_allow_untested_optimizer");
    cJSON *fp16 = cJSON_AddObjectToObject(o, "fp16");
    cJSON_AddStringToObject(fp16, "enabled", "auto");
    cJSON_AddNumberToObject(fp16, "loss_scale", 0);
    cJSON_AddNumberToObject(fp16, "loss_scale_window", 1000);
    cJSON_AddNumberToObject(fp16, "initial_scale_power", 16);
    cJSON_AddNumberToObject(fp16, "hysteresis", 2);
    cJSON_AddNumberToObject(fp16, "min_loss_scale", 1);
    cJSON *bf16 = cJSON_AddObjectToObject(o, "bf16");
    cJSON_AddStringToObject(bf16, "enabled", "auto");
    cJSON *z = cJSON_AddObjectToObject(o, "zero_optimization");
    cJSON_AddNumberToObject(z, "stage", stage);
    if (off != OFFLOAD_NONE) {
        cJSON *oo = cJSON_AddObjectToObject(z, "offload_optimizer");
        cJSON_AddStringToObject(oo, "device", "cpu");
        cJSON_AddTrueToObject(oo, "pin_memory");
    }
    if (off == OFFLOAD_ALL && stage == 3) {
        cJSON *op = cJSON_AddObjectToObject(z, "offload_param");
        cJSON_AddStringToObject(op, "device", "cpu");
        cJSON_AddTrueToObject(op, "pin_memory");
    }
    if (stage < 3) {
        cJSON_AddTrueToObject(z, "allgather_partitions");
        cJSON_AddNumberToObject(z, "allgather_bucket_size", 5e8);
        cJSON_AddFalseToObject(z, "overlap_comm");
        cJSON_AddTrueToObject(z, "reduce_scatter");
        cJSON_AddNumberToObject(z, "reduce_bucket_size", 5e8);
        cJSON_AddTrueToObject(z, "contiguous_gradients");
        cJSON_AddTrueToObject(z, "round_robin_gradients");
    } else {
        cJSON_AddFalseToObject(z, "overlap_comm");
        cJSON_AddTrueToObject(z, "contiguous_gradients");
        cJSON_AddNumberToObject(z, "sub_group_size", 1e9);
        cJSON_AddStringToObject(z, "reduce_bucket_size", "auto");
        cJSON_AddStringToObject(z, "stage3_prefetch_bucket_size", "auto");
        cJSON_AddStringToObject(z, "stage3_param_persistence_threshold", "auto");
        cJSON_AddNumberToObject(z, "stage3_max_live_parameters", 1e9);
        cJSON_AddNumberToObject(z, "stage3_max_reuse_distance", 1e9);
        cJSON_AddTrueToObject(z, "stage3_gather_16bit_weights_on_model_save");
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) { snprintf(err, errlen, "out of memory writing the DeepSpeed config"); return NULL; }
    size_t n = strlen(text);
    char *res = realloc(text, n + 2);
    if (!res) { free(text); snprintf(err, errlen, "out of memory writing the DeepSpeed config"); return NULL; }
    res[n] = '\n';
    res[n + 1] = '\0';
    return res;
}
