/* emit_plan_json.c — plan.json, the runtime plan (docs/plan.md, version 1),
 * and the spellings of the plan's enums shared with the other artifacts.
 * Written with cJSON: keys in a fixed order, integers printed exactly as
 * integers (raw number text, so 64-bit values keep every digit), unset values
 * as null. Same plan, same bytes. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "emit_internal.h"
#include "chat_templates.h"

/* The plan.json spellings: contract/plan_vocab.h's JSON column, the words
 * llmc-train's reader looks up in the same rows. */
const char *name_arch(ModelArch a) { return plan_vocab_name(arch_json_names, ARCH_COUNT, a); }
const char *name_format(DataFormat f) { return plan_vocab_name(format_json_names, FORMAT_COUNT, f); }
const char *name_stage(TrainStage s) { return plan_vocab_name(stage_json_names, STAGE_COUNT, s); }
const char *name_template(ChatTemplate t)
{
    return t == TEMPLATE_NONE ? NULL : chat_template_info(t)->name;
}
/* pure_bf16 is backend = llamafactory's only (the checker): llmc-train refuses it */
const char *name_precision(Precision p) { return plan_vocab_name(precision_json_names, PREC_COUNT, p); }
const char *name_recompute(Recompute r) { return plan_vocab_name(recompute_json_names, RECOMPUTE_COUNT, r); }
const char *name_attention(AttentionKind a) { return plan_vocab_name(attention_json_names, ATTN_COUNT, a); }
const char *name_schedule(LrScheduleKind s) { return plan_vocab_name(schedule_json_names, SCHED_COUNT, s); }
const char *name_offload(OffloadKind o) { return plan_vocab_name(offload_json_names, OFFLOAD_COUNT, o); }
const char *name_backend(PlanBackend b) { return plan_vocab_name(backend_json_names, BACKEND_COUNT, b); }
/* parallel.zero_stage: ShardStage's value is the ZeRO stage (contract/plan_vocab.h) */
int zero_stage(ShardStage s) { return s >= SHARD_NONE && s < SHARD_COUNT ? (int)s : 0; }

/* ---- small builders ---- */

static void add_int(cJSON *o, const char *key, int64_t v)
{
    char text[32];
    snprintf(text, sizeof text, "%" PRId64, v);
    cJSON_AddItemToObject(o, key, cJSON_CreateRaw(text));
}

static void add_uint(cJSON *o, const char *key, uint64_t v)
{
    char text[32];
    snprintf(text, sizeof text, "%" PRIu64, v);
    cJSON_AddItemToObject(o, key, cJSON_CreateRaw(text));
}

/* As cJSON prints (%.15g, else %.17g), but falling back to 17 digits whenever
 * 15 do not read back as exactly v: cJSON stops at 15 when they are "close
 * enough", which turns beta2 = 0.9999999999999999 into 1, a value the trainer
 * (rightly) refuses. */
static void add_num(cJSON *o, const char *key, double v)
{
    if (!isfinite(v)) { cJSON_AddNullToObject(o, key); return; }
    char text[40];
    snprintf(text, sizeof text, "%1.15g", v);
    if (strtod(text, NULL) != v) snprintf(text, sizeof text, "%1.17g", v);
    cJSON_AddItemToObject(o, key, cJSON_CreateRaw(text));
}
static void add_null(cJSON *o, const char *key) { cJSON_AddNullToObject(o, key); }
static void add_str(cJSON *o, const char *key, const char *s)
{
    if (s) cJSON_AddStringToObject(o, key, s);
    else cJSON_AddNullToObject(o, key);
}
static void add_bool(cJSON *o, const char *key, bool b) { cJSON_AddBoolToObject(o, key, b); }

/* int64 "unset" conventions of plan.h: -1 (counts) or 0 (steps) mean null */
static void add_int_or_null(cJSON *o, const char *key, int64_t v, int64_t unset)
{
    if (v == unset) add_null(o, key);
    else add_int(o, key, v);
}

/* a plan path, spelled for plan.json's directory */
static void add_path(cJSON *o, const char *key, const JobLayout *L, const char *path)
{
    char *p = artifact_path(L, path);
    add_str(o, key, p);
    free(p);
}

static cJSON *model_json(const JobLayout *L, const PlanModel *m)
{
    cJSON *o = cJSON_CreateObject();
    add_str(o, "name", m->name);
    add_str(o, "arch", name_arch(m->arch));
    /* after another job: its exported model, whatever this model block's init */
    add_path(o, "path", L, L->start_path ? L->start_path : m->path);
    add_str(o, "init", init_json_names[m->from_scratch && !L->start_path ? INIT_SCRATCH : INIT_PRETRAINED]);
    add_int(o, "layers", m->layers);
    add_int(o, "hidden", m->hidden);
    add_int(o, "heads", m->heads);
    add_int(o, "kv_heads", m->kv_heads);
    add_int(o, "head_dim", m->head_dim > 0 ? m->head_dim : (m->heads > 0 ? m->hidden / m->heads : 0));
    add_int(o, "ffn", m->ffn);
    add_int(o, "vocab", m->vocab);
    add_int(o, "max_context", m->max_context);
    add_num(o, "rope_theta", m->rope_theta);
    add_num(o, "rms_eps", m->rms_eps);
    add_bool(o, "tie_embeddings", m->tie_embeddings);
    add_bool(o, "qkv_bias", m->qkv_bias);
    add_bool(o, "qk_norm", m->qk_norm);
    return o;
}

static cJSON *dataset_json(const JobLayout *L, const PlanDataset *ds)
{
    DatasetColumns c;
    DatasetTags t;
    dataset_effective(ds, &c, &t);
    cJSON *o = cJSON_CreateObject();
    add_str(o, "name", ds->name);
    add_path(o, "file", L, ds->file);
    add_str(o, "format", name_format(ds->format));
    cJSON *cols = cJSON_AddObjectToObject(o, "columns");
    add_str(cols, "messages", c.messages);
    add_str(cols, "system", c.system);
    add_str(cols, "tools", c.tools);
    add_str(cols, "prompt", c.prompt);
    add_str(cols, "query", c.query);
    add_str(cols, "response", c.response);
    add_str(cols, "history", c.history);
    add_str(cols, "text", c.text);
    cJSON *tags = cJSON_AddObjectToObject(o, "tags");
    add_str(tags, "role", t.role);
    add_str(tags, "content", t.content);
    add_str(tags, "user", t.user);
    add_str(tags, "assistant", t.assistant);
    add_str(tags, "observation", t.observation);
    add_str(tags, "function", t.function);
    add_str(tags, "system", t.system);
    add_int_or_null(o, "samples", ds->samples, -1);
    if (ds->size_bytes) add_uint(o, "size_bytes", ds->size_bytes);
    else add_null(o, "size_bytes");
    add_int_or_null(o, "tokens", ds->tokens, -1);
    return o;
}

/* plan.json's "estimate": the rows of ESTIMATE_FIELDS
 * (compiler/estimate/estimate_fields.c) with a plan.json position, in that
 * order; integers exactly, numbers as add_num prints them. */
static cJSON *estimate_json(const Estimate *e)
{
    cJSON *o = cJSON_CreateObject();
    EstimateField f[ESTIMATE_FIELD_MAX];
    const EstimateField *at[ESTIMATE_FIELD_MAX] = {0};
    int n = estimate_fields(e, f), npos = 0;
    for (int i = 0; i < n; i++)
        if (f[i].plan_pos >= 0 && f[i].plan_pos < ESTIMATE_FIELD_MAX) {
            at[f[i].plan_pos] = &f[i];
            npos = f[i].plan_pos + 1 > npos ? f[i].plan_pos + 1 : npos;
        }
    for (int p = 0; p < npos; p++) {
        const EstimateField *x = at[p];
        if (!x) continue;
        switch (x->kind) {
        case EST_NUM: add_num(o, x->key, x->num); break;
        case EST_INT: add_int(o, x->key, x->i); break;
        case EST_BOOL: add_bool(o, x->key, x->b); break;
        case EST_TOKEN_SOURCE:
        case EST_REFERENCE: add_str(o, x->key, x->str); break;
        }
    }
    return o;
}

/* "tokenizer" (path, template), "datasets" and "data" (context, packing,
 * sft's loss masking: train_on_prompt and mask_history, bad-record policy,
 * the shards directory relative to the plan). */
static void plan_json_data(cJSON *root, const JobLayout *L, const PlanTrain *t, const PlanModel *m)
{
    cJSON *tok = cJSON_AddObjectToObject(root, "tokenizer");
    add_path(tok, "path", L, m ? (m->tokenizer ? m->tokenizer : m->path) : NULL);
    add_str(tok, "template", name_template(t->template_));

    cJSON *dsets = cJSON_AddArrayToObject(root, "datasets");
    for (int i = 0; i < t->ndata; i++)
        if (t->data[i]) cJSON_AddItemToArray(dsets, dataset_json(L, t->data[i]));

    cJSON *data = cJSON_AddObjectToObject(root, "data");
    add_int(data, "context", t->context);
    add_bool(data, "packing", t->packing);
    add_bool(data, "train_on_prompt", t->train_on_prompt);
    add_bool(data, "mask_history", t->mask_history);
    add_str(data, "on_bad_record", plan_vocab_name(bad_records_json_names, BADREC_COUNT, t->bad_records));
    add_str(data, "shards_dir", "shards");
}

/* "train": length, batch (global = micro x accumulation x data parallel),
 * the schedule (warmup as a ratio or as steps, the other null) and AdamW. */
static void plan_json_train(cJSON *root, const PlanTrain *t, int data_parallel)
{
    cJSON *tr = cJSON_AddObjectToObject(root, "train");
    add_num(tr, "epochs", t->epochs);
    add_int_or_null(tr, "max_steps", t->max_steps, 0);
    add_int(tr, "micro_batch", t->micro_batch);
    add_int(tr, "grad_accum", t->grad_accum > 0 ? t->grad_accum : 1);
    add_int(tr, "global_batch", (int64_t)t->micro_batch * (t->grad_accum > 0 ? t->grad_accum : 1) * data_parallel);
    add_num(tr, "lr", t->lr);
    add_num(tr, "min_lr", t->min_lr);
    add_str(tr, "schedule", name_schedule(t->schedule));
    if (t->warmup_steps > 0) {
        add_null(tr, "warmup_ratio");
        add_int(tr, "warmup_steps", t->warmup_steps);
    } else {
        add_num(tr, "warmup_ratio", t->warmup_ratio);
        add_null(tr, "warmup_steps");
    }
    add_num(tr, "weight_decay", t->weight_decay);
    add_num(tr, "beta1", t->beta1);
    add_num(tr, "beta2", t->beta2);
    add_num(tr, "eps", t->adam_eps);
    add_num(tr, "grad_clip", t->grad_clip);
    add_uint(tr, "seed", t->seed);
    add_str(tr, "precision", name_precision(t->precision));
    add_str(tr, "master_weights", plan_vocab_name(master_weights_json_names, MASTER_COUNT, t->master_weights));
    add_str(tr, "optimizer_states", plan_vocab_name(optimizer_states_json_names, OSTATES_COUNT, t->optimizer_states));
    if (t->backend == BACKEND_LLMC) add_bool(tr, "fp8_lm_head", t->fp8_lm_head);   /* the llmc trainer's alone */
    add_str(tr, "recompute", name_recompute(t->recompute));
    add_str(tr, "attention", name_attention(t->attention));
    add_bool(tr, "deterministic", t->deterministic);
}

/* "finetune": what is trained: everything, the last/first layers, or LoRA
 * adapters (docs/plan.md); lora_target written out (the plan's "all" is
 * every module). */
static void plan_json_finetune(cJSON *root, const PlanTrain *t)
{
    cJSON *ft = cJSON_AddObjectToObject(root, "finetune");
    add_str(ft, "method", plan_vocab_name(method_json_names, METHOD_COUNT, t->method));
    add_int(ft, "lora_rank", t->lora_rank);
    add_int(ft, "lora_alpha", t->lora_alpha);
    add_num(ft, "lora_dropout", t->lora_dropout);
    cJSON *targets = cJSON_AddArrayToObject(ft, "lora_target");
    for (int i = 0; i < (t->nlora_target ? t->nlora_target : LORA_TARGETS); i++) {
        int m = t->nlora_target ? plan_vocab_find(lora_module_llm_names, t->lora_target[i]) : i;
        cJSON_AddItemToArray(targets, cJSON_CreateString(plan_vocab_name(lora_module_json_names, LORA_TARGETS, m)));
    }
    add_bool(ft, "rslora", t->use_rslora);
    add_int(ft, "freeze_layers", t->freeze_layers);
}

/* "parallel": the ranks (no tensor or pipeline parallelism: all data
 * parallel), the ZeRO stage and offload. */
static void plan_json_parallel(cJSON *root, const JobLayout *L, const PlanTrain *t, int data_parallel)
{
    const PlanJob *job = L->job;
    cJSON *par = cJSON_AddObjectToObject(root, "parallel");
    add_int(par, "nodes", job->nodes);
    add_int(par, "gpus_per_node", L->gpus_per_node);
    add_int(par, "tasks_per_node", L->tasks_per_node);
    add_int(par, "world_size", L->world_size);
    add_int(par, "data_parallel", data_parallel);
    add_int(par, "zero_stage", zero_stage(t->shard));
    add_str(par, "offload", name_offload(t->offload));
}

/* "checkpoint" (OUTPUT/checkpoints, cadence, keep, resume on USR2) and
 * "output". */
static void plan_json_checkpoint(cJSON *root, const PlanTrain *t, const char *out_dir)
{
    cJSON *ck = cJSON_AddObjectToObject(root, "checkpoint");
    size_t dl = strlen(out_dir) + sizeof "/checkpoints";
    char *ckdir = malloc(dl);
    if (ckdir) snprintf(ckdir, dl, "%s%scheckpoints", out_dir,
                        out_dir[0] && out_dir[strlen(out_dir) - 1] == '/' ? "" : "/");
    add_str(ck, "dir", ckdir);
    free(ckdir);
    add_int_or_null(ck, "every_steps", t->checkpoint_every_steps, 0);
    if (t->checkpoint_every_seconds > 0) add_num(ck, "every_seconds", t->checkpoint_every_seconds);
    else add_null(ck, "every_seconds");
    add_int(ck, "keep", t->checkpoint_keep);
    add_bool(ck, "resume", true);
    add_str(ck, "signal", "USR2");

    cJSON *out = cJSON_AddObjectToObject(root, "output");
    add_str(out, "dir", out_dir);
    add_str(out, "metrics", "metrics.jsonl");
    add_int(out, "log_every", t->log_every > 0 ? t->log_every : 1);
}

/* "slurm": partition, time limit, CPUs, requeue, and the stop signal's lead
 * time and exit status (3: stopped for a requeue, as llmc-train exits). */
static void plan_json_slurm(cJSON *root, const JobLayout *L, const Estimate *e)
{
    const PlanJob *job = L->job;
    cJSON *sl = cJSON_AddObjectToObject(root, "slurm");
    add_str(sl, "cluster", L->cluster->name);
    add_str(sl, "partition", L->cluster->partition);
    add_int(sl, "time_limit_seconds", L->time_minutes * 60);
    add_int(sl, "cpus_per_task", L->cpus_per_task);
    add_bool(sl, "requeue", job->requeue);
    int lead = job_stop_signal_seconds(L, e);
    if (lead > 0) add_int(sl, "stop_signal_seconds", lead);
    else add_null(sl, "stop_signal_seconds");
    add_int(sl, "stop_exit_status", 3);
}

/* plan.json, the trainer's contract (docs/plan.md), section by section in
 * the order it documents; NULL with err on out of memory. */
char *emit_plan_json(const JobLayout *L, const Estimate *e, char *err, size_t errlen)
{
    const PlanJob *job = L->job;
    const PlanTrain *t = L->train;
    const PlanModel *m = t->model;
    char *out_dir = artifact_output_dir(L);
    if (!out_dir) { snprintf(err, errlen, "out of memory writing plan.json"); return NULL; }
    int data_parallel = L->world_size;   /* no tensor/pipeline parallelism */

    cJSON *root = cJSON_CreateObject();
    add_int(root, "llmc_plan_version", 1);
    add_str(root, "job", job->name);
    add_str(root, "stage", name_stage(t->stage));
    add_str(root, "backend", name_backend(t->backend));
    if (m) cJSON_AddItemToObject(root, "model", model_json(L, m));
    else add_null(root, "model");
    plan_json_data(root, L, t, m);
    plan_json_train(root, t, data_parallel);
    plan_json_finetune(root, t);
    plan_json_parallel(root, L, t, data_parallel);
    plan_json_checkpoint(root, t, out_dir);
    plan_json_slurm(root, L, e);

    if (e) cJSON_AddItemToObject(root, "estimate", estimate_json(e));
    else add_null(root, "estimate");

    free(out_dir);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) { snprintf(err, errlen, "out of memory writing plan.json"); return NULL; }
    size_t n = strlen(text);
    char *res = realloc(text, n + 2);
    if (!res) { free(text); snprintf(err, errlen, "out of memory writing plan.json"); return NULL; }
    res[n] = '\n';
    res[n + 1] = '\0';
    return res;
}
