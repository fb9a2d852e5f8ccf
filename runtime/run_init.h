/* run_init.h — the start of a training run that the CPU and the CUDA trainers
 * share, so both refuse the same plans with the same messages and start from the
 * same weights: the plan's token shards opened and checked against the model,
 * and the host model's weights set (random init for `init = scratch`, else the
 * Hugging Face checkpoint at the plan's model path, checked against its config). */
#ifndef LLMC_RUN_INIT_H
#define LLMC_RUN_INIT_H

#include "model.h"
#include "plan.h"
#include "shard_io.h"

/* Open plan->shards_dir into *set; 0, or -1 after logging why (the set is then
 * closed). mc is the model the rows are for. */
int run_open_shards(ShardSet *set, const RunPlan *plan, const ModelConfig *mc);

/* Fill an initialised model's weights; 0, or -1 after logging why. */
int run_init_weights(Model *m, const RunPlan *plan, const ModelConfig *mc);

#endif
