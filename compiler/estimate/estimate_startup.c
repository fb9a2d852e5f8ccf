/* estimate_startup.c — what a run costs besides its steps (docs/estimator.md,
 * "Start-up and checkpoints", "Host memory"): tokenisation, loading, saves,
 * resumes, the wall time over its segments, and host memory per node.
 */
#include "estimate_internal.h"

/* The llmc trainer keeps no whole copy of the model on any rank's host:
 * ZeRO-3 in full training on several ranks (the CUDA backend's cu_state_part;
 * the CPU backend shards the same way). */
bool estimate_llmc_sharded(const PlanTrain *t, const Estimate *e)
{
    return t->backend != BACKEND_LLAMAFACTORY && t->shard == SHARD_ZERO3 && t->method == METHOD_FULL &&
           e->data_parallel > 1;
}

/* Optimizer offload of the llmc trainer on several ranks: ZeRO-2/3 in full
 * training, each rank's shard of the states and of the summed gradient pinned
 * in host memory and updated in place (runtime/cuda offload_shard_alloc). */
bool estimate_llmc_offload_shard(const PlanTrain *t, const Estimate *e)
{
    return t->backend != BACKEND_LLAMAFACTORY && t->offload == OFFLOAD_OPTIMIZER && t->shard >= SHARD_ZERO2 &&
           t->method == METHOD_FULL && e->data_parallel > 1;
}

/* Host memory per node (docs/estimator.md, "Host memory"), GPU plans. */
void estimate_host(const PlanJob *job, Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    uint64_t mem = job->mem_bytes ? job->mem_bytes : c->memory_bytes;
    e->host_usable_bytes = (double)mem;
    e->host_fits = true;
    if (e->cpu_only) return;   /* the per-rank memory check is the host's */
    double g = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    TrainStates ts = plan_train_states(t, e);
    double w, gr, o, offload = 0;
    estimate_train_states(&ts, t->precision, t->shard, e->data_parallel, &w, &gr, &o, &offload);
    double n = (double)e->params_total;
    if (t->backend == BACKEND_LLAMAFACTORY) {
        e->host_process_bytes = g * HOST_TORCH_PROCESS_BYTES;
        /* ZeRO-3 (zero.Init): every rank reads one checkpoint file at a time;
         * otherwise every rank builds the whole 16-bit model on the host first. */
        e->host_model_bytes = g * (t->shard == SHARD_ZERO3 ? fmin(HOST_HF_SHARD_BYTES, 2 * n) : 2 * n);
        /* The tokenizing workers LLaMA-Factory starts (preprocessing_num_workers
         * as emitted). The tokenized set is an Arrow cache on disk,
         * memory-mapped: page cache, not counted. */
        double cpus = job->cpus_per_task > 0 ? (double)job->cpus_per_task * g : c->cpus;
        double workers = llamafactory_workers(cpus);
        e->host_data_bytes = workers * HOST_WORKER_BYTES;
        e->host_pinned_bytes = g * HOST_PINNED_BYTES;
    } else {
        /* llmc-train-cuda: every rank builds the fp32 weights on the host and
         * uploads them through a staging copy in the GPU layout (2 x 4 x P); a
         * checkpoint gathers master, m and v to rank 0's host, into the loop's
         * AdamW moments and the staging copies of both (4 x 4 x P more,
         * gather_to_host). Under offload the loop's fp32 model and moments are
         * the training state itself (12 x P, pinned) and nothing is staged.
         * Shards are memory-mapped: page cache, reclaimable, not counted. */
        e->host_process_bytes = g * HOST_LLMC_PROCESS_BYTES;
        bool llmc_offload = t->offload == OFFLOAD_OPTIMIZER, ranks = e->data_parallel > 1;
        /* one rank offloading: its loop state is the pinned state; offload on
         * several ranks (ZeRO-2/3) pins each shard beside the loop's model */
        e->host_model_bytes = llmc_offload && !ranks ? 0 : g * 8 * n + 16 * n;
        /* LoRA (one GPU): the fp32 base and its upload staging, and the adapters,
         * their gradients, moments and staging (5 x 4 bytes each); nothing of the
         * base is gathered back. Freeze: the same 8 x P, a host-layout array for
         * the moments' window (4 x P), at a checkpoint the staging of both
         * moments (8 x P) and the loop's moments of the trained part. */
        if (t->method == METHOD_LORA) e->host_model_bytes = 8 * n + 20 * lora_params(t, t->model);
        else if (t->method == METHOD_FREEZE)
            e->host_model_bytes = 20 * n + 8 * fmin(n, fabs((double)t->freeze_layers) * (double)e->params_per_layer);
        /* ZeRO-3 in full training on several ranks, offloaded or not: each rank
         * holds only its part (backend_cuda.c cu_state_part): it reads its
         * ranges of the HF weights into the loop's fp32 model, keeps its ranges
         * of the moments for the checkpoints and of the GPU-layout staging of
         * all three (6 x 4 x P / N touched; the arrays are sized for the whole
         * model but the rest of their pages is never written), and writes its
         * part of every checkpoint and of the export: nothing is gathered to
         * rank 0. Offloaded, the pinned shard is the GPU layout itself and
         * nothing is staged (3 x 4 x P / N). A model built from scratch is
         * initialised whole on every rank (one random sequence over the whole
         * model): 4 x P more. */
        if (estimate_llmc_sharded(t, e))
            e->host_model_bytes = g * ((llmc_offload ? 12 : 24) * n / e->data_parallel +
                                       (t->model->from_scratch ? 4 * n : 0));
        /* one rank: the whole state (12 x P); ZeRO-2/3 on several ranks: each
         * its shard of master, m, v and the summed fp32 gradient (16 x P / N) */
        if (llmc_offload) offload = ranks ? 16 * n / e->data_parallel : 12 * n;
        e->host_data_bytes = 0;
        e->host_pinned_bytes = g * HOST_PINNED_BYTES;
    }
    e->host_offload_bytes = g * offload;
    e->host_bytes = e->host_process_bytes + e->host_model_bytes + e->host_data_bytes + e->host_pinned_bytes +
                    e->host_offload_bytes;
    e->host_fits = mem == 0 || e->host_bytes <= e->host_usable_bytes;
}

/* Start-up, checkpoints and the wall time over all segments (docs/estimator.md,
 * "Start-up and checkpoints"). */
void estimate_startup(const PlanJob *job, Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    bool lf = t->backend == BACKEND_LLAMAFACTORY;
    double nodes = job->nodes > 0 ? job->nodes : 1;
    double n = (double)e->params_total, tr = e->trainable_params > 0 ? e->trainable_params : n;
    bool adapters = t->method == METHOD_LORA || t->method == METHOD_QLORA;
    Precision prec = e->cpu_only ? PREC_FP32 : t->precision;

    /* Tokenisation: LLaMA-Factory tokenises the training data before the
     * first step, on one node (data_shared_file_system) or on every node's
     * first rank, with preprocessing_num_workers processes, while the other
     * ranks wait at a barrier of ddp_timeout. Streaming tokenises on the fly.
     * The llmc trainer reads shards `llmc-train prepare` wrote beforehand. */
    e->ddp_timeout_seconds = lf ? (t->ddp_timeout_seconds > 0 ? t->ddp_timeout_seconds : 1800) : 0;
    if (lf && !t->streaming && e->tokens_source != TOKENS_UNKNOWN && e->tokens_per_epoch > 0) {
        double g = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
        double cpus = job->cpus_per_task > 0 ? (double)job->cpus_per_task * g : c->cpus;
        e->tokenize_workers = llamafactory_workers(cpus);
        e->tokenize_rate = t->tokenize_rate > 0 ? t->tokenize_rate : LF_TOKENIZE_TOKENS_PER_S;
        e->tokenize_tokens = e->tokens_per_epoch;
        e->tokenize_seconds = e->tokenize_tokens / (e->tokenize_workers * e->tokenize_rate);
        e->tokenize_every_start = !t->tokenized_path;
        double need = fmin(DDP_TIMEOUT_MAX_S,
                           ceil((TOKENIZE_BARRIER_FACTOR * e->tokenize_seconds + TOKENIZE_BARRIER_SLACK_S) / 60) * 60);
        if (need > e->ddp_timeout_seconds && !t->ddp_timeout_at.start.file &&
            e->tokenize_seconds + TOKENIZE_BARRIER_SLACK_S <= DDP_TIMEOUT_MAX_S) {
            e->ddp_timeout_seconds = need;
            e->ddp_timeout_raised = true;
        }
    }

    /* Loading: the 16-bit weights (QLoRA: as quantised on the GPU, read at
     * 16 bits all the same) read by every node at each start; a scratch
     * model of the llmc trainer reads nothing. */
    bool scratch = t->model->from_scratch;
    e->load_bytes = scratch ? 0 : 2 * n;
    /* the llmc trainer's ZeRO-3 ranks read their own ranges: a node its ranks' */
    if (!lf && estimate_llmc_sharded(t, e)) e->load_bytes /= nodes;
    if (e->reference == REF_COPY) e->load_bytes += 2 * e->reference_params;
    e->load_seconds = e->load_bytes / MODEL_LOAD_BYTES_PER_S;

    /* One save. llmc: fp32 weights, Adam m and v, gathered to rank 0, or
     * under ZeRO-3 on several ranks written by every rank, its part
     * (docs/runtime.md, "Checkpoints"). LLaMA-Factory: the optimizer states of
     * the trained parameters (every rank its partition), DeepSpeed's 16-bit
     * module states (frozen weights excluded: the HF Trainer passes
     * exclude_frozen_parameters for PEFT models; none without DeepSpeed) and
     * the model's weights as safetensors (adapters: fp32 adapter weights),
     * which rank 0 writes. */
    double parallel, rank0;
    if (!lf) {   /* ZeRO-3 on several ranks: each writes its part, in place */
        bool sharded = estimate_llmc_sharded(t, e);
        parallel = sharded ? 12 * n : 0;
        rank0 = sharded ? 0 : 12 * (t->method == METHOD_FULL ? n : tr);
        e->checkpoint_export_bytes = 0;
    } else {
        double opt = optim_state_bytes(prec, t->optim) * tr;
        double module = t->shard != SHARD_NONE ? value_bytes(prec) * (adapters || t->method == METHOD_FREEZE ? tr : n) : 0;
        double export_ = adapters ? 4 * tr : value_bytes(prec) * n;
        parallel = opt + (t->shard == SHARD_ZERO3 ? module : 0);
        rank0 = export_ + (t->shard == SHARD_ZERO3 ? 0 : module);
        e->checkpoint_export_bytes = export_;
    }
    e->checkpoint_bytes = parallel + rank0;
    e->checkpoint_write_seconds = parallel / (nodes * CKPT_WRITE_BYTES_PER_S) + rank0 / CKPT_WRITE_BYTES_PER_S;
    int keep = t->checkpoint_keep > 0 ? t->checkpoint_keep : 2;
    e->checkpoint_kept_bytes = keep * e->checkpoint_bytes;
    if (t->checkpoint_epoch) {   /* save_strategy: epoch */
        double epochs = t->epochs > 0 && isfinite(t->epochs) ? t->epochs : 1;
        double every = ceil((double)e->steps_total / epochs);
        e->checkpoint_every_steps = every < 1 ? 1 : every > 9e18 ? INT64_MAX : (int64_t)every;
    } else if (t->checkpoint_every_steps > 0) {
        e->checkpoint_every_steps = t->checkpoint_every_steps;
    } else if (e->step_seconds > 0) {
        double every = ceil((t->checkpoint_every_seconds > 0 ? t->checkpoint_every_seconds : 1800) / e->step_seconds);
        e->checkpoint_every_steps = every < 1 ? 1 : every > 9e18 ? INT64_MAX : (int64_t)every;
    }
    e->checkpoints_total = e->checkpoint_every_steps > 0 ? e->steps_total / e->checkpoint_every_steps : 0;
    if (t->checkpoint_epoch && e->steps_total > 0)   /* one save at the end of every epoch */
        e->checkpoints_total = (int64_t)ceil(t->epochs > 0 && isfinite(t->epochs) && t->epochs < 1e6 ? t->epochs : 1);
    /* A requeued start reads the last checkpoint back (its states, not the export). */
    double states = e->checkpoint_bytes - e->checkpoint_export_bytes;
    /* every node its ranks' part (llamafactory; llmc under ZeRO-3), else rank 0's node all */
    bool by_parts = lf || estimate_llmc_sharded(t, e);
    e->resume_seconds = states / ((by_parts ? nodes : 1) * CKPT_READ_BYTES_PER_S);

    /* The wall time: the first start, training, every save, and for every
     * further segment a start that loads, resumes and (without
     * tokenized_path) tokenises again. */
    e->startup_seconds = e->tokenize_seconds + e->load_seconds;
    double again = e->load_seconds + e->resume_seconds + (e->tokenize_every_start ? e->tokenize_seconds : 0);
    double work = e->total_seconds + e->checkpoints_total * e->checkpoint_write_seconds;
    e->wall_seconds = work + e->startup_seconds;
    double limit = e->time_limit_seconds;
    e->requeue_segments = 1;
    if (limit > 0 && e->wall_seconds > limit) {
        /* n segments hold work + first + (n - 1) x again <= n x limit. */
        double seg = limit > again ? ceil((work + e->startup_seconds - again) / (limit - again)) : 1e9;
        if (!(seg >= 2)) seg = 2;
        e->requeue_segments = seg > 1e9 ? 1000000000 : (int)seg;
        e->wall_seconds += (e->requeue_segments - 1) * again;
    }
}
