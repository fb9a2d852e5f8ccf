/* run_init.c — shards and initial weights of a training run (see run_init.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "hf_config.h"
#include "log.h"
#include "metrics.h"
#include "run_init.h"

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
    if (!strcmp(plan->init, "scratch")) {
        model_init_random(m, plan->seed, 0.02);   /* HF's initializer_range */
        return 0;
    }
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

int run_write_final(const RunPlan *plan, const Model *m, double baseline, char *final_dir, size_t final_len)
{
    char err[1024], svg[4200];
    snprintf(final_dir, final_len, "%s/final", plan->out_dir);
    StDtype dt = !strcmp(plan->precision, "bf16") ? ST_BF16 : ST_F32;
    if (hf_export(final_dir, m, dt, plan->tokenizer_path, err, sizeof err)) {
        log_error("export: %s", err);
        return -1;
    }
    const char *slash = strrchr(plan->metrics_path, '/');
    snprintf(svg, sizeof svg, "%.*s/loss_curve.svg", slash ? (int)(slash - plan->metrics_path) : 1,
             slash ? plan->metrics_path : ".");
    if (metrics_svg(plan->metrics_path, svg, baseline)) log_error("%s: cannot write the loss curve", svg);
    return 0;
}
