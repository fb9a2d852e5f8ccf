/* estimate_internal.h — what the estimator's files share; nothing outside
 * compiler/estimate/ includes it (the estimator's interface is estimate.h).
 *
 * The estimator is split by role: estimate_memory.c counts parameters and the
 * bytes per GPU; estimate_data.c the tokens and sequences of the datasets;
 * estimate_time.c FLOPs, collectives, offload and the step; estimate_startup.c
 * start-up, checkpoints, the wall time and host memory; estimate_merge.c a
 * merge job; estimate_report.c the diagnostics and their alternatives;
 * estimate.c runs them in order for one job. Every named constant of the
 * model is defined here, once (docs/estimator.md names them).
 */
#ifndef LLMC_ESTIMATE_INTERNAL_H
#define LLMC_ESTIMATE_INTERNAL_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "estimate.h"
#include "cuda_layout.h"   /* contract/: the llmc CUDA trainer's allocation constants */
#include "plan_limits.h"   /* contract/: PLAN_YEAR_SECONDS */

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* DeepSpeed's defaults (deepspeed/runtime/zero/config.py), in elements. */
#define DS_REDUCE_BUCKET_ELEMS      5e8   /* reduce_bucket_size */
#define DS_ALLGATHER_BUCKET_ELEMS   5e8   /* allgather_bucket_size (stages 1, 2) */
#define DS_PREFETCH_BUCKET_ELEMS    5e7   /* stage3_prefetch_bucket_size */
/* The HF Trainer's "auto" (transformers' DeepSpeed integration): reduce bucket
 * hidden^2, stage-3 prefetch 0.9 hidden^2 elements. */
#define HF_AUTO_PREFETCH_SHARE      0.9

/* The llmc CUDA trainer's allocation constants, from the header the trainer
 * itself is built with (contract/cuda_layout.h), as doubles: the loss rows of
 * logits at a time; the 64-element slices of the flat buffers; the gradient
 * norm's partials; the column-sum partials the logits chunk doubles as the
 * scratch of (k_colsum_scratch: up to 512 row blocks of a norm-weight
 * gradient, 64 splits of the qkv bias's, 256 blocks of qk_norm's); the
 * offload staging sets; cuDNN's workspace alignment and document plan. */
#define LLMC_CE_CHUNK_ROWS      ((double)LLMC_CUDA_CE_CHUNK_ROWS)
#define LLMC_ALIGN_ELEMS        ((double)LLMC_CUDA_ALIGN_ELEMS)
#define LLMC_ZERO_ALIGN_ELEMS   ((double)LLMC_CUDA_ZERO_ALIGN_ELEMS)
#define LLMC_GRAD_NORM_BLOCK_N  ((double)LLMC_GRAD_NORM_BLOCK)
#define LLMC_SUMSQ_BLOCKS       ((double)LLMC_CUDA_SUMSQ_BLOCKS)
#define LLMC_SUMSQ_SLOTS        ((double)LLMC_CUDA_SUMSQ_SLOTS)
#define LLMC_RMS_BWD_MAX_BLOCKS ((double)LLMC_CUDA_RMS_BWD_MAX_BLOCKS)
#define LLMC_BIAS_GRAD_SPLITS   ((double)LLMC_CUDA_BIAS_GRAD_SPLITS)
#define LLMC_HEAD_NORM_BLOCKS   ((double)LLMC_CUDA_HEAD_NORM_BLOCKS)
#define LLMC_OFFLOAD_SETS       ((double)LLMC_CUDA_OFFLOAD_SETS)
#define LLMC_OFFLOAD_CHUNK      ((double)LLMC_CUDA_OFFLOAD_CHUNK)
#define LLMC_CUDNN_WS_ALIGN_B   ((double)LLMC_CUDNN_WS_ALIGN)
/* cuDNN's own engine workspace per entry of a plan's batch, per query head,
 * measured on the H200 (cuDNN 9; docs/estimator.md, "cuDNN attention
 * workspace"): bf16 per score (T x T) in the deterministic backward, fp32 per
 * query element (T x head_dim) in both forms. */
#define LLMC_CUDNN_SCORE_BYTES  2.0
#define LLMC_CUDNN_QUERY_BYTES  4.0

/* Fixed per-process allowances and the allocator's fragmentation share. */
#define GPU_CONTEXT_BYTES   (1.0 * GIB)   /* CUDA context, cuBLAS/cuBLASLt workspaces, NCCL buffers */
#define CPU_PROCESS_BYTES   (16.0 * MIB)  /* trainer binary, libraries, stacks */
#define CPU_BLAS_THREAD_BYTES (32.0 * MIB) /* OpenBLAS's GEMM buffer per thread (x86-64) */
#define FRAGMENTATION_SHARE 0.05          /* of all tensor bytes */

/* CPU plans: fp32 peak of one core (AVX2: 2 FMA units x 8 lanes x 2 flop x 2 GHz)
 * and the utilisation assumed when the plan states no mfu. */
#define CPU_CORE_PEAK_FLOPS 64e9
#define CPU_DEFAULT_MFU     0.2

/* The warning threshold for a plan that leaves most of the GPU idle. */
#define LOW_MEMORY_SHARE    0.30

#define MAX_BATCH_SEARCH    (1 << 20)

/* Communication (docs/estimator.md, "Communication"). The share of a link's
 * one-way bandwidth NCCL's rings reach, and the cost of launching one
 * collective, are rows of the defaults table (estimate_defaults.c). */
static inline double default_value(DefaultKind k, int backend)
{
    const EstimateDefault *r = estimate_default(k, backend, NULL, -1);
    return r ? r->value : 0;
}
#define LINK_EFFICIENCY      default_value(DEF_LINK_EFFICIENCY, -1)
#define NET_EFFICIENCY       default_value(DEF_NET_EFFICIENCY, -1)
/* Latency of one ring hop: over NVLink / PCIe inside a node, over the network
 * (InfiniBand; RoCE adds switch and congestion-control latency). */
#define HOP_LATENCY_LINK_S   1.0e-6
#define HOP_LATENCY_IB_S     3.0e-6
#define HOP_LATENCY_ROCE_S   5.0e-6
/* Per collective launched: NCCL's kernel launch (llmc trainer, C); DeepSpeed
 * adds its Python-side bookkeeping (hooks, partitioned-parameter state) per
 * gathered module or reduced bucket. */
#define COLL_LAUNCH_NCCL_S   default_value(DEF_COLL_LAUNCH_S, BACKEND_LLMC)
#define COLL_LAUNCH_DS_S     default_value(DEF_COLL_LAUNCH_S, BACKEND_LLAMAFACTORY)
/* ZeRO-3 all-gathers one module at a time: per decoder layer the q, k, v, o,
 * gate, up and down projections (the norms stay whole: below the
 * persistence threshold, 10 x hidden under "auto"). */
#define ZERO3_MODULES_PER_LAYER 7

/* DeepSpeed offload (docs/estimator.md, "Offload time"): the pinned copies'
 * share of the host link and DeepSpeed's CPU Adam rates, rows of the
 * defaults table (estimate_defaults.c, with their sources). */
#define HOST_LINK_EFFICIENCY     default_value(DEF_HOST_LINK_EFFICIENCY, -1)
#define CPU_ADAM_THREAD_PARAMS_S default_value(DEF_CPU_ADAM_THREAD_RATE, -1)
#define CPU_ADAM_NODE_PARAMS_S   default_value(DEF_CPU_ADAM_NODE_RATE, -1)

/* Host memory per node (docs/estimator.md, "Host memory"). */
#define HOST_TORCH_PROCESS_BYTES (3.0 * GIB)   /* PyTorch + CUDA + NCCL host side, per rank */
#define HOST_LLMC_PROCESS_BYTES  (0.5 * GIB)   /* llmc-train-cuda: CUDA runtime host side, per rank */
#define HOST_HF_SHARD_BYTES      5e9           /* transformers' default max_shard_size: one file at a time */
#define HOST_WORKER_BYTES        (0.5 * GIB)   /* one tokenizing worker (Python + datasets + tokenizer) */
#define HOST_PINNED_BYTES        (0.25 * GIB)  /* pinned staging per rank (NCCL, copies) */

/* Start-up and checkpoints (docs/estimator.md, "Start-up and checkpoints").
 * LLaMA-Factory's tokenisation per preprocessing worker (datasets.map over
 * the template and the tokenizer, written to Arrow): a conservative default
 * that `tokenize_rate` replaces once measured. The barrier it must fit under
 * is raised to twice the estimate plus ten minutes, in whole minutes. */
#define LF_TOKENIZE_TOKENS_PER_S   1.0e5
#define TOKENIZE_BARRIER_FACTOR    2.0
#define TOKENIZE_BARRIER_SLACK_S   600.0
#define DDP_TIMEOUT_MAX_S          86400.0   /* the checker's upper bound on ddp_timeout */
/* Reading the 16-bit model at a start (safetensors from shared storage,
 * converted and placed or partitioned), per node; reading checkpoint states
 * back and writing them, per node (every node's ranks write their own
 * partitions in parallel; rank 0 alone writes whole files). */
#define MODEL_LOAD_BYTES_PER_S     0.5e9
#define CKPT_READ_BYTES_PER_S      1.0e9
#define CKPT_WRITE_BYTES_PER_S     1.0e9

/* ---- small helpers every part uses ---------------------------------------- */

/* The model's head_dim, or hidden / heads when it states none. */
static inline int64_t head_dim_of(const PlanModel *m)
{
    if (m->head_dim > 0) return m->head_dim;
    return m->heads > 0 ? m->hidden / m->heads : 0;
}

/* Bytes of a weight, gradient or activation value: 4 in fp32, else 2 (bf16,
 * fp16 and pure_bf16 alike). */
static inline double value_bytes(Precision prec)
{
    return prec == PREC_FP32 ? 4 : 2;
}

/* Optimizer state bytes per trainable parameter (K in the ZeRO paper): fp32
 * Adam m + v = 8; mixed precision adds the fp32 master weights, 12;
 * pure_bf16 has no master copy and torch's AdamW keeps m and v in the
 * parameter's dtype (zeros_like), 2 + 2 = 4. */
static inline double optimizer_bytes(Precision prec)
{
    return prec == PREC_FP32 ? 8 : prec == PREC_PURE_BF16 ? 4 : 12;
}

/* The same for LLaMA-Factory's `optim` (transformers' OptimizerNames): the
 * master copy (mixed precision, 4 bytes) plus the moments — AdamW two of the
 * parameter's width (fp32 4, pure_bf16 2), bitsandbytes' 8-bit AdamW two of 1
 * byte (its per-block scales, 2 x 4 bytes per 2048, left out), paged 32-bit
 * two of 4 (paged to host under pressure, counted on the GPU), Adafactor no
 * first moment and a factored second (rows + columns: left out). */
static inline double optim_state_bytes(Precision prec, OptimKind o)
{
    double master = prec == PREC_FP32 || prec == PREC_PURE_BF16 ? 0 : 4;
    double moment = prec == PREC_PURE_BF16 ? 2 : 4;
    switch (o) {
    case OPTIM_ADAMW_8BIT: case OPTIM_PAGED_ADAMW_8BIT: return master + 2 * 1;
    case OPTIM_PAGED_ADAMW_32BIT: return master + 2 * 4;
    case OPTIM_ADAFACTOR: return master;
    case OPTIM_ADAMW_TORCH: case OPTIM_ADAMW_TORCH_FUSED: break;
    }
    return master + 2 * moment;
}

/* The llmc CUDA trainer's optimizer state per trained parameter: the fp32
 * master (4 bytes, or split: the 2 bytes the bf16 weight drops) and AdamW's
 * m and v (fp32 8, or bf16 4): 12, 10, 8 or 6 (+ bf16 weight 2 and fp32
 * gradient 4: 18 / 16 / 14 / 12 bytes a parameter). */
static inline double llmc_state_bytes(const PlanTrain *t)
{
    return (t->master_weights == MASTER_SPLIT ? 2 : 4) + (t->optimizer_states == OSTATES_BF16 ? 4 : 8);
}

/* No GPU in the cluster: a CPU plan (host memory, CPU throughput). */
static inline bool is_cpu_only(const PlanCluster *c)
{
    return c->gpu == NULL || c->gpus_per_node <= 0;
}

/* Ranks on one node: one per GPU; on CPU nodes the job's tasks (default 1). */
static inline int ranks_per_node(const PlanJob *job)
{
    if (!is_cpu_only(job->cluster)) return job->cluster->gpus_per_node;
    return job->tasks_per_node > 0 ? job->tasks_per_node : 1;
}

/* Cores (and BLAS threads) of one CPU rank. */
static inline int cpu_cores(const PlanJob *job)
{
    const PlanCluster *c = job->cluster;
    int cores = job->cpus_per_task > 0 ? job->cpus_per_task
                                       : (c->cpus > 0 ? c->cpus / ranks_per_node(job) : 1);
    return cores < 1 ? 1 : cores;
}

/* ZeRO-3 gathers of every weight per micro-step: forward and backward; with
 * HF gradient checkpointing (LLaMA-Factory turns it on for any recompute) a
 * third for the recomputed forward, whose post-forward hook releases the
 * weights again before backward gathers them (transformers #47254). */
static inline double zero3_gather_passes(Recompute rc)
{
    return rc == RECOMPUTE_NONE ? 2 : 3;
}

/* ---- between the parts ---------------------------------------------------- */

/* estimate_memory.c */
/* The projection GEMMs' parameters of one layer, their widest input and widest output. */
double projection_params(const PlanModel *m, double *widest_in, double *widest_out);
/* LoRA adapter parameters of the plan's targets over every decoder layer. */
double lora_params(const PlanTrain *t, const PlanModel *m);
/* What the plan trains and where its states live (TrainStates, estimate.h). */
TrainStates plan_train_states(const PlanTrain *t, const Estimate *e);
/* The largest micro batch that fits (0: not even 1; -1: no usable memory known). */
int max_fitting_batch(const PlanJob *job, Recompute rc, ShardStage shard);

/* estimate_data.c */
/* Tokens and sequences per epoch; the first dataset with nothing to count, or NULL. */
const PlanDataset *count_tokens(const PlanTrain *t, Estimate *e);

/* estimate_time.c */
/* DeepSpeed's hpZ group for the estimate in progress (0: off); set by estimate_job_hpz. */
extern int estimate_hpz_group;
/* FLOPs, compute, communication, offload and the step; steps and tokens in all. */
void estimate_time(const PlanJob *job, Estimate *e);

/* estimate_startup.c */
/* Start-up, checkpoints, the wall time and the requeue segments. */
void estimate_startup(const PlanJob *job, Estimate *e);
/* Host memory per node, GPU plans. */
void estimate_host(const PlanJob *job, Estimate *e);

/* estimate_merge.c */
/* A merge job's memory and time; what of it does not fit, as errors (their count). */
void estimate_merge(const PlanJob *job, Estimate *e);
int report_merge(const PlanJob *job, const Estimate *e, Diags *d);

/* estimate_report.c: each writes its diagnostics into d and returns its errors
 * (report_comm warns only). */
int report_memory(const PlanJob *job, const Estimate *e, Diags *d);
void report_comm(const PlanJob *job, const Estimate *e, Diags *d);
int report_host(const PlanJob *job, const Estimate *e, Diags *d);
int report_time(const PlanJob *job, const Estimate *e, Diags *d, const PlanDataset *missing);
int report_startup(const PlanJob *job, const Estimate *e, Diags *d);

#endif
