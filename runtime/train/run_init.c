/* run_init.c — shards and initial weights of a training run (see run_init.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

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

int run_init_weights(Model *m, const RunPlan *plan, const ModelConfig *mc, const ModelPart *part)
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
    size_t n_read = 0;
    if (load_hf_weights_part(plan->model_path, m, part, &n_read, err, sizeof err)) {
        log_error("%s", err);
        return -1;
    }
    if (part && part->n >= 0)   /* every rank says it: the figure is per rank */
        log_info("initial weights: read %zu of %zu parameters (%.1f of %.1f MiB in fp32): this rank's part",
                 n_read, m->n_floats, n_read * 4.0 / 1048576.0, m->n_floats * 4.0 / 1048576.0);
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

/* LoRA: the merged model into dir, the adapter into adapter_dir. */
static int write_lora_export(const RunPlan *plan, const Model *m, StDtype dt, const char *source, const char *dir,
                             const char *adapter_dir)
{
    char err[1024];
    Model merged;
    if (model_init(&merged, &m->cfg)) { log_error("out of memory (merged export)"); return -1; }
    memcpy(merged.w, m->w, m->n_floats * sizeof *m->w);
    lora_merge(m->lora, &merged);
    int rc = hf_export(dir, &merged, dt, plan->tokenizer_path, source, err, sizeof err);
    model_free(&merged);
    if (rc) { log_error("export: %s", err); return -1; }
    if (peft_export(adapter_dir, m->lora, plan->ft.lora_alpha, plan->ft.rslora, plan->model_path, err, sizeof err)) {
        log_error("adapter export: %s", err);
        return -1;
    }
    return 0;
}

StDtype run_export_dtype(const RunPlan *plan)
{
    return plan->precision == PREC_BF16 ? ST_BF16 : ST_F32;
}

const char *run_export_source(const RunPlan *plan)
{
    /* a pretrained model's config.json is carried over (every key kept), not regenerated */
    return plan->init != INIT_SCRATCH ? plan->model_path : NULL;
}

int run_export(const RunPlan *plan, const Model *m, const char *dir, const char *adapter_dir)
{
    char err[1024];
    StDtype dt = run_export_dtype(plan);
    const char *source = run_export_source(plan);
    if (m->lora) return write_lora_export(plan, m, dt, source, dir, adapter_dir);
    if (hf_export(dir, m, dt, plan->tokenizer_path, source, err, sizeof err)) {
        log_error("export: %s", err);
        return -1;
    }
    return 0;
}

void run_final_dir(const RunPlan *plan, char *final_dir, size_t final_len)
{
    snprintf(final_dir, final_len, "%s/final", plan->out_dir);
}

/* A curve that cannot be written is reported but does not fail the run. */
void run_write_curve(const RunPlan *plan, double baseline)
{
    char svg[4200];
    const char *slash = strrchr(plan->metrics_path, '/');
    snprintf(svg, sizeof svg, "%.*s/loss_curve.svg", slash ? (int)(slash - plan->metrics_path) : 1,
             slash ? plan->metrics_path : ".");
    if (metrics_svg(plan->metrics_path, svg, baseline)) log_error("%s: cannot write the loss curve", svg);
}

/* OUT/final as a Hugging Face model directory (the plan's precision: bf16
 * or fp32 safetensors), then the loss curve beside metrics.jsonl. */
int run_write_final(const RunPlan *plan, const Model *m, double baseline, char *final_dir, size_t final_len)
{
    char adapter[4200];
    run_final_dir(plan, final_dir, final_len);
    snprintf(adapter, sizeof adapter, "%s/adapter", plan->out_dir);
    if (run_export(plan, m, final_dir, adapter)) return -1;
    run_write_curve(plan, baseline);
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
    /* by content: a tokenizer restored from a copy, or shards prepared again from
     * the same bytes, are the same (checkpoints of older writers recorded
     * "tokenizer" and "data.shards" by the file's hash: keys no longer compared) */
    if (p->tokenizer_path) {
        struct stat sb;
        if (!stat(p->tokenizer_path, &sb) && S_ISDIR(sb.st_mode))
            snprintf(path, sizeof path, "%s/tokenizer.json", p->tokenizer_path);
        else snprintf(path, sizeof path, "%s", p->tokenizer_path);
        file_id(v, sizeof v, path);
    } else snprintf(v, sizeof v, "none");
    ckpt_fp_add(fp, "tokenizer.content", "%s", v);
    ckpt_fp_add(fp, "data.context", "%d", p->context);
    ckpt_fp_add(fp, "data.content", "%s", set->data_hash && set->data_hash[0] ? set->data_hash : "none");
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
    /* bf16 moments are another run's (a checkpoint written before the field
     * lacks it and resumes as before); master_weights = split is exact, the
     * same run either way */
    ckpt_fp_add(fp, "train.optimizer_states", "%s", optimizer_states_json_names[p->optimizer_states]);
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
               TrainState *st, const ModelPart *part, int is0)
{
    if (!plan->resume) return 0;   /* checkpoint.resume = false: the plan says start over */
    char err[2048], warn[2048];
    CkptLimits lim = {total, plan->global_batch, plan->context};
    int got = ckpt_resume(plan->ckpt_dir, fp, &lim, fresh, m, opt, st, part, warn, sizeof warn, err, sizeof err);
    if (is0 && warn[0]) log_warn("%s", warn);
    if (got < 0) { log_error("%s", err); return -1; }
    if (got && is0) log_info("resumed from %s at step %" PRId64, plan->ckpt_dir, st->step);
    return got;
}

/* statvfs of path's longest existing prefix (the directory may not exist yet):
 * bytes available to this user and the file system's id, or -1. */
static int space_of(const char *path, uint64_t *avail, uint64_t *fsid)
{
    char p[4200];
    snprintf(p, sizeof p, "%s", path);
    for (;;) {
        struct statvfs v;
        if (statvfs(p, &v) == 0) {
            *avail = (uint64_t)v.f_bavail * v.f_frsize;
            *fsid = (uint64_t)v.f_fsid;
            return 0;
        }
        char *slash = strrchr(p, '/');
        if (!slash) { if (!strcmp(p, ".")) return -1; snprintf(p, sizeof p, "."); continue; }
        if (slash == p) { if (!p[1]) return -1; p[1] = 0; continue; }
        *slash = 0;
    }
}

int run_check_space(const RunPlan *plan, size_t model_floats, size_t trainable_floats)
{
    /* a checkpoint: the weights and the two AdamW moments of what trains, fp32;
     * the export: the weights at the plan's precision. Rotation removes an old
     * checkpoint only after the new one is complete: one more must fit. */
    uint64_t ckpt = (uint64_t)model_floats * 4 + (uint64_t)trainable_floats * 8;
    uint64_t exp = (uint64_t)model_floats * (plan->precision == PREC_BF16 ? 2 : 4);
    uint64_t a_ck, a_out, fs_ck, fs_out;
    if (space_of(plan->ckpt_dir, &a_ck, &fs_ck) || space_of(plan->out_dir, &a_out, &fs_out)) return 0;   /* cannot tell */
    const double MB = 1e6;
    if (fs_ck == fs_out && a_ck < ckpt + exp) {
        log_error("%s and %s: %.1f MB free on their file system; one checkpoint (%.1f MB) and the export (%.1f MB) need "
                  "%.1f MB: free space or point checkpoint.dir and output.dir elsewhere", plan->ckpt_dir, plan->out_dir,
                  (double)a_ck / MB, (double)ckpt / MB, (double)exp / MB, (double)(ckpt + exp) / MB);
        return -1;
    }
    if (fs_ck != fs_out && (a_ck < ckpt || a_out < exp)) {
        int ck = a_ck < ckpt;
        log_error("%s: %.1f MB free on its file system; %s needs %.1f MB: free space or point %s elsewhere",
                  ck ? plan->ckpt_dir : plan->out_dir, (double)(ck ? a_ck : a_out) / MB,
                  ck ? "one checkpoint" : "the export", (double)(ck ? ckpt : exp) / MB, ck ? "checkpoint.dir" : "output.dir");
        return -1;
    }
    return 0;
}
