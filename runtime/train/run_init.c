/* run_init.c — shards and initial weights of a training run (see run_init.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "hf_config.h"
#include "log.h"
#include "metrics.h"
#include "run_init.h"
#include "sha256.h"

/* The prepared shards, checked against the plan before any weight is
 * loaded: a wrong context or a larger vocabulary would otherwise show up as
 * an out-of-range embedding read in the first step. */
int run_open_shards(ShardSet *set, const RunPlan *plan, const ModelConfig *mc)
{
    char err[1024];
    if (shard_set_open(set, plan->shards_dir, err, sizeof err)) {
        log_error("%s (run `llmc-train prepare %s` first)", err, plan->path);
        return -1;
    }
    if ((int)set->context != plan->context || set->n_rows == 0) {
        log_error("%s: shards have context %u and %" PRIu64 " rows; the plan wants context %d", plan->shards_dir,
                  set->context, set->n_rows, plan->context);
        shard_set_close(set);
        return -1;
    }
    if (set->vocab_size > (uint32_t)mc->vocab) {
        log_error("%s: tokenizer vocabulary %u is larger than the model's %d", plan->shards_dir, set->vocab_size,
                  mc->vocab);
        shard_set_close(set);
        return -1;
    }
    return 0;
}

int run_init_weights(Model *m, const RunPlan *plan, const ModelConfig *mc)
{
    if (plan->init == INIT_SCRATCH) {
        model_init_random(m, plan->seed, 0.02);   /* HF's initializer_range */
        return 0;
    }
    /* the model's config.json must describe the plan's model: a value the
     * weights do not show (rope_theta, rms_eps) would otherwise train a
     * different model without an error */
    char err[1024], diff[128];
    ModelConfig hc;
    if (hf_config_read(plan->model_path, &hc, err, sizeof err)) {
        log_error("%s", err);
        return -1;
    }
    if (hf_config_diff(mc, &hc, diff, sizeof diff)) {
        log_error("%s/config.json disagrees with the plan's model: %s (plan vs config)", plan->model_path, diff);
        return -1;
    }
    if (load_hf_weights(plan->model_path, m, err, sizeof err)) {
        log_error("%s", err);
        return -1;
    }
    return 0;
}

/* freeze and LoRA: which tensors take no gradient (m->frozen, one flag a
 * parameter tensor), and LoRA's adapters. LoRA freezes every base tensor. */
int run_finetune_attach(Model *m, const RunPlan *plan)
{
    const RunFinetune *ft = &plan->ft;
    if (ft->method == METHOD_FULL) return 0;
    unsigned char *frozen = malloc((size_t)m->n_params);
    if (!frozen) { log_error("out of memory"); return -1; }
    int L = m->cfg.layers, n = ft->freeze_layers;
    for (int i = 0; i < m->n_params; i++) {
        int l = m->params[i].layer;   /* freeze: LLaMA-Factory's last n (n > 0) or first -n layers train */
        frozen[i] = ft->method == METHOD_LORA || !(l >= 0 && (n > 0 ? l >= L - n : l < -n));
    }
    m->frozen = frozen;
    if (ft->method == METHOD_LORA &&
        !(m->lora = lora_new(m, ft->lora_targets, ft->lora_rank, ft->lora_alpha, ft->rslora, plan->seed))) {
        log_error("out of memory (LoRA adapters)");
        return -1;
    }
    return 0;
}

void run_finetune_detach(Model *m)
{
    lora_free(m->lora);
    free((void *)m->frozen);
    m->lora = NULL;
    m->frozen = NULL;
}

/* LoRA: the merged model into OUT/final, the adapter into OUT/adapter. */
static int write_lora_final(const RunPlan *plan, const Model *m, StDtype dt, const char *source, const char *final_dir)
{
    char err[1024], dir[4200];
    Model merged;
    if (model_init(&merged, &m->cfg)) { log_error("out of memory (merged export)"); return -1; }
    memcpy(merged.w, m->w, m->n_floats * sizeof *m->w);
    lora_merge(m->lora, &merged);
    int rc = hf_export(final_dir, &merged, dt, plan->tokenizer_path, source, err, sizeof err);
    model_free(&merged);
    if (rc) { log_error("export: %s", err); return -1; }
    snprintf(dir, sizeof dir, "%s/adapter", plan->out_dir);
    if (peft_export(dir, m->lora, plan->ft.lora_alpha, plan->ft.rslora, plan->model_path, err, sizeof err)) {
        log_error("adapter export: %s", err);
        return -1;
    }
    return 0;
}

/* OUT/final as a Hugging Face model directory (the plan's precision: bf16
 * or fp32 safetensors), then the loss curve beside metrics.jsonl. A curve
 * that cannot be written is reported but does not fail the run. */
int run_write_final(const RunPlan *plan, const Model *m, double baseline, char *final_dir, size_t final_len)
{
    char err[1024], svg[4200];
    snprintf(final_dir, final_len, "%s/final", plan->out_dir);
    StDtype dt = plan->precision == PREC_BF16 ? ST_BF16 : ST_F32;
    /* a pretrained model's config.json is carried over (every key kept), not regenerated */
    const char *source = plan->init != INIT_SCRATCH ? plan->model_path : NULL;
    if (m->lora) {
        if (write_lora_final(plan, m, dt, source, final_dir)) return -1;
    } else if (hf_export(final_dir, m, dt, plan->tokenizer_path, source, err, sizeof err)) {
        log_error("export: %s", err);
        return -1;
    }
    const char *slash = strrchr(plan->metrics_path, '/');
    snprintf(svg, sizeof svg, "%.*s/loss_curve.svg", slash ? (int)(slash - plan->metrics_path) : 1,
             slash ? plan->metrics_path : ".");
    if (metrics_svg(plan->metrics_path, svg, baseline)) log_error("%s: cannot write the loss curve", svg);
    return 0;
}

/* A double as the shortest of %.15g / %.17g that reads back exactly. */
static void fmt_num(char *out, size_t n, double v)
{
    snprintf(out, n, "%.15g", v);
    if (strtod(out, NULL) != v) snprintf(out, n, "%.17g", v);
}

/* sha256 of a regular file (first 16 hex digits are plenty to tell files apart), or "none". */
static void file_id(char *out, size_t n, const char *path)
{
    struct stat sb;
    char hex[65];
    if (!path || stat(path, &sb) || !S_ISREG(sb.st_mode) || sha256_file_hex(path, hex)) snprintf(out, n, "none");
    else snprintf(out, n, "sha256:%.16s", hex);
}

/* What a checkpoint must agree with to be resumed: the model's shape, the
 * tokenizer and the shards (by content hash, not by path), the schedule and
 * the optimizer. A checkpoint whose fingerprint differs is refused with the
 * keys that differ, instead of resuming a different run's state. */
void run_fingerprint(const RunPlan *p, const ShardSet *set, int64_t total, int64_t warmup, CkptFingerprint *fp)
{
    const ModelConfig *mc = &p->model;
    char v[80], path[4200];
    memset(fp, 0, sizeof *fp);
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(p->json, "model");
    const char *arch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mo, "arch"));
    ckpt_fp_add(fp, "model.arch", "%s", arch ? arch : "?");
    ckpt_fp_add(fp, "model.layers", "%d", mc->layers);
    ckpt_fp_add(fp, "model.hidden", "%d", mc->hidden);
    ckpt_fp_add(fp, "model.heads", "%d", mc->heads);
    ckpt_fp_add(fp, "model.kv_heads", "%d", mc->kv_heads);
    ckpt_fp_add(fp, "model.head_dim", "%d", mc->head_dim);
    ckpt_fp_add(fp, "model.ffn", "%d", mc->ffn);
    ckpt_fp_add(fp, "model.vocab", "%d", mc->vocab);
    ckpt_fp_add(fp, "model.max_context", "%d", mc->max_context);
    fmt_num(v, sizeof v, mc->rope_theta);
    ckpt_fp_add(fp, "model.rope_theta", "%s", v);
    fmt_num(v, sizeof v, mc->rms_eps);
    ckpt_fp_add(fp, "model.rms_eps", "%s", v);
    ckpt_fp_add(fp, "model.tie_embeddings", "%s", mc->tie_embeddings ? "true" : "false");
    ckpt_fp_add(fp, "model.qkv_bias", "%s", mc->qkv_bias ? "true" : "false");
    ckpt_fp_add(fp, "model.qk_norm", "%s", mc->qk_norm ? "true" : "false");
    ckpt_fp_add(fp, "model.init", "%s", init_json_names[p->init]);
    if (p->tokenizer_path) {
        struct stat sb;
        if (!stat(p->tokenizer_path, &sb) && S_ISDIR(sb.st_mode))
            snprintf(path, sizeof path, "%s/tokenizer.json", p->tokenizer_path);
        else snprintf(path, sizeof path, "%s", p->tokenizer_path);
        file_id(v, sizeof v, path);
    } else snprintf(v, sizeof v, "none");
    ckpt_fp_add(fp, "tokenizer", "%s", v);
    ckpt_fp_add(fp, "data.context", "%d", p->context);
    snprintf(path, sizeof path, "%s/index.json", set->dir);
    file_id(v, sizeof v, path);
    ckpt_fp_add(fp, "data.shards", "%s", v);
    ckpt_fp_add(fp, "data.rows", "%" PRIu64, set->n_rows);
    ckpt_fp_add(fp, "train.stage", "%s", stage_json_names[p->stage]);
    ckpt_fp_add(fp, "train.steps", "%" PRId64, total);
    /* not grad_accum: with the global batch and the micro-batch it only says how
     * the step's slots are split over ranks, and a checkpoint resumes on
     * another number of ranks (grad_accum x data_parallel constant) */
    ckpt_fp_add(fp, "train.micro_batch", "%d", p->micro_batch);
    ckpt_fp_add(fp, "train.global_batch", "%d", p->global_batch);
    fmt_num(v, sizeof v, p->lr);
    ckpt_fp_add(fp, "train.lr", "%s", v);
    fmt_num(v, sizeof v, p->min_lr);
    ckpt_fp_add(fp, "train.min_lr", "%s", v);
    ckpt_fp_add(fp, "train.schedule", "%s", schedule_json_names[p->schedule]);
    ckpt_fp_add(fp, "train.warmup_steps", "%" PRId64, warmup);
    fmt_num(v, sizeof v, p->weight_decay);
    ckpt_fp_add(fp, "train.weight_decay", "%s", v);
    fmt_num(v, sizeof v, p->beta1);
    ckpt_fp_add(fp, "train.beta1", "%s", v);
    fmt_num(v, sizeof v, p->beta2);
    ckpt_fp_add(fp, "train.beta2", "%s", v);
    fmt_num(v, sizeof v, p->eps);
    ckpt_fp_add(fp, "train.eps", "%s", v);
    fmt_num(v, sizeof v, p->grad_clip);
    ckpt_fp_add(fp, "train.grad_clip", "%s", v);
    ckpt_fp_add(fp, "train.seed", "%" PRIu64, p->seed);
    ckpt_fp_add(fp, "train.precision", "%s", precision_json_names[p->precision]);
    /* what trains: recorded only when not everything does (a full run's
     * fingerprint stays what it was) */
    const RunFinetune *ft = &p->ft;
    if (ft->method == METHOD_FREEZE) {
        ckpt_fp_add(fp, "finetune.method", "%s", method_json_names[ft->method]);
        ckpt_fp_add(fp, "finetune.freeze_layers", "%d", ft->freeze_layers);
    } else if (ft->method == METHOD_LORA) {
        ckpt_fp_add(fp, "finetune.method", "%s", method_json_names[ft->method]);
        ckpt_fp_add(fp, "finetune.lora_rank", "%d", ft->lora_rank);
        ckpt_fp_add(fp, "finetune.lora_alpha", "%d", ft->lora_alpha);
        ckpt_fp_add(fp, "finetune.lora_target", "0x%02x", ft->lora_targets);
        ckpt_fp_add(fp, "finetune.rslora", "%s", ft->rslora ? "true" : "false");
    }
}

int run_resume(const RunPlan *plan, const CkptFingerprint *fp, int64_t total, int fresh, Model *m, AdamW *opt,
               TrainState *st, int is0)
{
    if (!plan->resume) return 0;   /* checkpoint.resume = false: the plan says start over */
    char err[2048], warn[2048];
    CkptLimits lim = {total, plan->global_batch, plan->context};
    int got = ckpt_resume(plan->ckpt_dir, fp, &lim, fresh, m, opt, st, warn, sizeof warn, err, sizeof err);
    if (is0 && warn[0]) log_warn("%s", warn);
    if (got < 0) { log_error("%s", err); return -1; }
    if (got && is0) log_info("resumed from %s at step %" PRId64, plan->ckpt_dir, st->step);
    return got;
}
