/* run_init.c — shards and initial weights of a training run (see run_init.h). */
#include <inttypes.h>
#include <string.h>

#include "checkpoint.h"
#include "hf_config.h"
#include "log.h"
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
