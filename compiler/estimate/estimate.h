/* estimate.h — compile-time estimates of memory per GPU and time to train.
 *
 * One module with a small, documented set of inputs (docs/estimator.md), so the
 * trainer's measured peak memory and step time can be compared with it and the
 * catalogue's MFU calibrated. The estimator helper owns this header; fields
 * may be added, never renamed (the emitters write them into plan.json).
 */
#ifndef LLMC_ESTIMATE_H
#define LLMC_ESTIMATE_H

#include <math.h>
#include "plan.h"

/* Where tokens_per_epoch came from (the weakest source over all datasets). */
typedef enum {
    TOKENS_STATED,          /* every dataset states (or prep measured) its token count */
    TOKENS_FROM_STATS,      /* read from the stats file `llmc-train prepare` leaves beside the data */
    TOKENS_FROM_SIZE,       /* file size / bytes_per_token (capped by samples x context for sft) */
    TOKENS_FROM_SAMPLES,    /* only a sample count: samples x context, an upper bound */
    TOKENS_UNKNOWN          /* a dataset states none of tokens, size, samples: no time estimate */
} TokenSource;

/* The reference model of a preference stage (LLaMA-Factory's create_ref_model):
 * none (rm, orpo, simpo, sft, pt); the trained model with its LoRA adapters
 * disabled (lora/qlora without ref_model: no second copy); a separate frozen
 * copy (full/freeze, or any method with ref_model set). */
typedef enum { REF_NONE, REF_ADAPTERS_OFF, REF_COPY } RefKind;

typedef struct {
    /* parameters (exact, from the architecture) */
    int64_t params_total, params_embedding, params_per_layer;
    /* per-GPU peak memory breakdown, bytes */
    double weights_bytes, grads_bytes, optimizer_bytes, activations_bytes,
           logits_bytes, comm_bytes, reserve_bytes, total_bytes, usable_bytes;
    int max_micro_batch_that_fits;          /* 0 if even batch 1 does not fit */
    /* data and time */
    double tokens_per_epoch; bool tokens_measured; /* false: from file size at bytes_per_token */
    double samples_per_epoch;
    double tokens_total, flops_per_token, mfu, step_seconds, total_seconds, gpu_hours;
    int64_t steps_total, global_batch;      /* global batch in sequences */
    int requeue_segments;                   /* job time-limit segments needed (1 = fits) */

    /* ---- added by the estimator (documented in docs/estimator.md) ---- */
    bool cpu_only;                          /* no GPU in the cluster: host memory, CPU throughput */
    int world_size, data_parallel;          /* ranks; ZeRO shards over data_parallel */
    double model_bytes_per_param;           /* 16: 2 + 2 + 12 mixed, 4 + 4 + 8 fp32; 8: 2 + 2 + 4 pure_bf16;
                                               18 for the llmc CUDA trainer (fp32 gradients), all before
                                               sharding */
    double activation_bytes_per_value;      /* 2 (bf16/fp16/pure_bf16) or 4 (fp32, and every CPU plan) */
    double activations_layers_bytes;        /* part of activations_bytes kept for the layers */
    double activations_working_bytes;       /* one layer's recomputed working set (recompute=full) */
    double reserve_context_bytes;           /* CUDA context + library workspaces (or process overhead) */
    double reserve_fragmentation_bytes;     /* allocator fragmentation allowance */
    bool logits_chunked;                    /* false: full b x s x vocab fp32 logits + gradient */
    double logits_bytes_per_value;          /* per b x s x vocab: 8 (fp32 + grad), 10 transformers */
    bool activations_transformers;          /* llamafactory backend: transformers' layers (measured) */
    bool llmc_cuda_allocation;              /* llmc backend on GPUs: the CUDA trainer's own allocations */
    double logits_chunk_rows;               /* rows of logits alive at once (b x s when not chunked) */
    bool fits;                              /* total_bytes <= usable_bytes (true when usable unknown) */
    double seq_tokens;                      /* tokens a sequence carries on average (compute length) */
    double sequences_per_epoch;             /* sequences the trainer sees per epoch */
    TokenSource tokens_source;
    bool size_read_from_file;               /* a dataset's size was read from its file (reachable here) */
    bool samples_unknown;                   /* a dataset has no sample count: samples = tokens / context */
    double peak_flops_per_device;           /* FLOP/s: GPU bf16 (fp32 for fp32 plans) peak, or CPU node;
                                               fp8: the bf16 and FP8 peaks blended by FLOP share */
    double tokens_per_second;               /* whole job, real tokens */
    double time_limit_seconds;              /* the job's time limit (0 = none stated) */

    /* ---- communication per optimizer step (docs/estimator.md, "Communication") ---- */
    bool fabric_known;                      /* the cluster has a GPU link and (multi-node) a network */
    double compute_seconds;                 /* per optimizer step: FLOPs / (world x peak x mfu) */
    double comm_allgather_bytes;            /* tensor bytes all-gathered per optimizer step */
    double comm_reduce_scatter_bytes;       /* tensor bytes reduce-scattered per optimizer step */
    double comm_allreduce_bytes;            /* tensor bytes all-reduced per optimizer step */
    double comm_sent_bytes;                 /* bytes each GPU sends per optimizer step (ring) */
    double comm_collectives;                /* collectives launched per optimizer step */
    double comm_intra_seconds;              /* NVLink (inside a node) bandwidth term, per step */
    double comm_inter_seconds;              /* network bandwidth term, per step (0 on one node) */
    double comm_latency_seconds;            /* latency term: collectives x ring hops, per step */
    double comm_seconds;                    /* all collectives: max(intra, inter) + latency, per step */
    double comm_overlap_seconds;            /* hidden under compute, per step */
    double comm_exposed_seconds;            /* not hidden: adds to the step */
    bool comm_bound;                        /* communication, not compute, bounds the step */
    /* ---- what is trained (docs/estimator.md, "Inputs for PEFT and offload") ---- */
    double trainable_params;                /* with gradients and optimizer states (LoRA: the adapters) */
    double frozen_bytes_per_param;          /* frozen weights' width (0: none frozen) */
    /* ---- DeepSpeed offload per optimizer step (docs/estimator.md, "Offload time") ---- */
    bool offload_time_known;                /* an offload plan on a GPU with a known host link */
    double offload_d2h_bytes;               /* per GPU: gradient partitions to the host */
    double offload_h2d_bytes;               /* per GPU: updated weights back; offload = all: the
                                               weight partitions fetched for every gather */
    double offload_pcie_seconds;            /* both directions at the host link's rate */
    double offload_pcie_exposed_seconds;    /* of that, not hidden under compute */
    double cpu_optimizer_params;            /* parameters each rank's CPU Adam updates */
    int cpu_optimizer_threads;              /* OpenMP threads of each rank's CPU Adam */
    double cpu_optimizer_params_per_s;      /* per rank */
    double cpu_optimizer_seconds;           /* the CPU Adam step: the GPU waits for it */
    double offload_exposed_seconds;         /* exposed PCIe + CPU Adam: adds to the step */
    bool offload_bound;                     /* the exposed offload exceeds compute and the collectives */
    /* ---- host memory per node (docs/estimator.md, "Host memory") ---- */
    double host_process_bytes;              /* trainer processes: runtime, libraries, CUDA host side */
    double host_model_bytes;                /* model loading: weights staged on the host */
    double host_data_bytes;                 /* tokenized data and dataloader workers */
    double host_pinned_bytes;               /* pinned staging buffers */
    double host_offload_bytes;              /* offloaded optimizer states / parameters */
    double host_bytes;                      /* sum: per node */
    double host_usable_bytes;               /* the job's mem, else the node's memory; 0 = unknown */
    bool host_fits;
    /* ---- tokens: padding (docs/estimator.md, "Tokens per epoch") ---- */
    double padded_seq_tokens;               /* tokens a sequence is computed at (padded to the
                                               longest of its micro batch); = seq_tokens packed */
    bool padding_from_stats;                /* the length histogram of a stats file decided it */
    bool padding_assumed;                   /* no histogram: from the mean sample length, lengths taken
                                               as exponentially distributed (estimate_padded_length_mean) */
    bool padding_full_rows;                 /* llmc trainer, unpacked: every row computed at the context */
    /* ---- llmc CUDA trainer: cuDNN attention (docs/estimator.md, "cuDNN attention workspace") ---- */
    bool attn_cudnn;                        /* attention runs through cuDNN's fused SDPA */
    bool attn_cudnn_deterministic;          /* ... in its deterministic form (train.deterministic) */
    double attn_workspace_bytes;            /* its workspace (deterministic backward), in total_bytes */
    /* ---- precision = fp8 (docs/estimator.md, "FP8") ---- */
    double fp8_weights_bytes;               /* llmc CUDA: E4M3 copies of the projection weights (and with
                                               fp8_lm_head the LM head's) and their transposes, 2 bytes a
                                               parameter, in total_bytes */
    double fp8_scratch_bytes;               /* llmc CUDA: quantised input/gradient scratch of the widest
                                               projection and the per-tensor scales, in total_bytes */
    double fp8_flops_share;                 /* the projection GEMMs' (and with fp8_lm_head the LM head's)
                                               share of flops_per_token, run at the GPU's FP8 peak
                                               (peak_flops_per_device blends the two) */
    /* ---- a prepared shard directory (docs/estimator.md, "Rows from the shards") ---- */
    bool sequences_from_shards;             /* sequences_per_epoch = the rows `llmc-train prepare` wrote */
    /* ---- the job's site profile (docs/estimator.md, "Site profiles") ---- */
    bool profile_mfu;                       /* mfu came from the profile (the plan states none) */
    bool profile_intra, profile_inter;      /* the profile's effective bandwidths replaced the fabric's */
    double step_overhead_seconds;           /* the profile's fixed time per optimizer step (0: none) */
    /* ---- preference stages (docs/estimator.md, "Preference stages") ---- */
    int seqs_per_sample;                    /* sequences a sample becomes in the trained forward and
                                               backward: 2 for pairs (rm, dpo incl. orpo/simpo), else 1 */
    double nograd_seqs_per_sample;          /* sequences run forward without gradient per sample: dpo's
                                               reference (2: chosen + rejected), kto's KL forward (1) and
                                               reference over target and KL (2); 0 else */
    RefKind reference;                      /* where the reference model's forward runs */
    double reference_params;                /* parameters of a separate reference copy (0: none) */
    double reference_bytes;                 /* per GPU: its 16-bit weights (sharded only under ZeRO-3) */
    double reference_logits_bytes;          /* per GPU: logits of the no-gradient forwards, alive with
                                               the policy's activations (16-bit + the fp32 upcast) */
    /* ---- start-up and checkpoints (docs/estimator.md, "Start-up and checkpoints") ---- */
    double tokenize_tokens;                 /* tokens LLaMA-Factory tokenises before training (0: none) */
    int tokenize_workers;                   /* preprocessing_num_workers as emitted */
    double tokenize_rate;                   /* tokens/s per worker: the plan's tokenize_rate or the default */
    double tokenize_seconds;                /* one tokenising start, the other ranks waiting at a barrier */
    bool tokenize_every_start;              /* no tokenized_path: a requeued start tokenises again */
    double ddp_timeout_seconds;             /* the barrier the LLaMA-Factory YAML gets (0: not llamafactory) */
    bool ddp_timeout_raised;                /* raised over the default to cover the tokenisation */
    double load_bytes, load_seconds;        /* model weights read at every start */
    double checkpoint_bytes;                /* one save, every rank's files together */
    double checkpoint_export_bytes;         /* of that, the 16-bit weights (or adapters) written by rank 0 */
    double checkpoint_write_seconds;        /* one save */
    double checkpoint_kept_bytes;           /* x checkpoint_keep (save_total_limit), on the output's storage */
    int64_t checkpoint_every_steps;         /* the interval the estimate counts saves at */
    int64_t checkpoints_total;              /* saves in the whole run */
    double resume_seconds;                  /* a requeued start reading the states back */
    double startup_seconds;                 /* the first start: tokenisation + model load */
    double wall_seconds;                    /* training + every start + every save, all segments */
    bool mix_scaled;                        /* an interleaved mixture decided the samples per epoch */
    /* ---- a merge job: llamafactory-cli export (docs/language.md, "merge NAME"). It fills
       params_total, load_bytes/seconds, startup_seconds, host_*, total_bytes/usable_bytes/fits
       (device = auto: per GPU), time_limit_seconds and wall_seconds too ---- */
    bool merge;                             /* the job merges an adapter; nothing is trained */
    double merge_adapter_params;            /* the LoRA adapter's parameters (read in fp32) */
    double merge_value_bytes;               /* bytes per weight of the merged model (its dtype) */
    double merge_flops;                     /* B x A of every adapted matrix, added into it */
    double merge_seconds;                   /* those FLOPs on the node's CPUs or one GPU */
    double merge_write_bytes;               /* the merged weights, written as safetensors shards */
    double merge_write_seconds;
} Estimate;

/* What is trained and where the states live: the inputs of the estimate that
 * parameter-efficient fine-tuning (LoRA, QLoRA, freeze) and DeepSpeed offload
 * set. Full fine-tuning without offload is {N, 0, 2, false, false}. */
typedef struct {
    double trainable_params;        /* with gradients and optimizer states (LoRA: the adapters) */
    double frozen_params;           /* weights only: no gradient, no optimizer state */
    double frozen_bytes_per_param;  /* 2 (bf16), 4 (fp32), 0.5 + block scales for 4-bit (QLoRA) */
    bool offload_optimizer;         /* DeepSpeed offload_optimizer: fp32 master, m, v (+ fp32 grads) on the host */
    bool offload_params;            /* DeepSpeed offload_param (ZeRO-3 only): 16-bit weights on the host */
} TrainStates;

/* Model states per GPU and on the host (per rank) for TrainStates: trainable
 * weights (2 or 4 bytes), frozen weights (frozen_bytes_per_param), gradients
 * and optimizer states of the trainable part only, sharded by stage over dp;
 * offloaded states go to *host (DeepSpeed also keeps the fp32 gradient
 * partition on the host when the optimizer is offloaded). */
void estimate_train_states(const TrainStates *ts, Precision prec, ShardStage shard, int dp,
                           double *weights, double *grads, double *optimizer, double *host);

/* FLOPs per token: forward 2N + attention, backward 2N (input gradients) +
 * 2 x trainable share x N (weight gradients; none for frozen matrices) + 2 x
 * attention; recompute = full repeats the forward. trainable_share in [0, 1]. */
double estimate_flops_per_token(double matmul_params, double trainable_share, double attn_fwd_flops,
                                Recompute rc, AttentionKind attn);

/* ---- the stats file of a dataset (FILE.stats.json, docs/estimator.md) ---- */
#define STATS_MAX_BINS 4096
typedef struct {
    double records, tokens, bin;            /* bin: tokens per histogram bin (0: no histogram) */
    double counts[STATS_MAX_BINS];
    int nbins;
} DataStats;
/* Read DATA_FILE.stats.json; false when absent or malformed. */
bool estimate_read_stats(const char *data_file, DataStats *st);
/* Expected length of the longest of b records drawn from the histogram (bins
 * at their upper end, capped at the context): what a micro batch pads to. */
double estimate_padded_length(const double *counts, int nbins, double bin, int b, double context);

/* The same without a histogram, from the mean sample length alone: lengths
 * taken as exponentially distributed (as long as they are spread: standard
 * deviation = mean), cut at the context, with that mean after the cut. */
double estimate_padded_length_mean(double mean, int b, double context);

/* ---- communication ---- */
typedef struct {
    int nodes, gpus_per_node;
    double link_bytes_per_s;        /* per GPU, both directions together (NVLink as quoted) */
    int nics; double nic_bits_per_s;/* per node */
    bool roce;
    /* a site profile's measured figures; > 0 replaces link/2 x LINK_EFFICIENCY and
       nics x speed/8 x NET_EFFICIENCY (docs/estimator.md, "Site profiles") */
    double intra_eff_bytes_per_s;   /* per GPU, one direction */
    double inter_eff_bytes_per_s;   /* per node */
} Fabric;

typedef enum { COLL_ALL_REDUCE, COLL_ALL_GATHER, COLL_REDUCE_SCATTER } CollKind;

/* One ring collective over a tensor of `bytes` (the whole tensor, not a rank's
 * part) among nodes x gpus_per_node ranks: bytes each rank sends ((D-1)/D x
 * bytes; twice that for all-reduce), its time over the GPU link and over the
 * network (per node: NICs x speed), and the latency of the ring's hops. */
void estimate_collective(const Fabric *f, CollKind k, double bytes, double *sent, double *intra_s,
                         double *inter_s, double *latency_s);

/* Collective volumes per optimizer step for a shard stage and backend (tensor
 * bytes per kind, summed; counts of collectives), from trainable and total
 * parameters. llmc_trainer: the CUDA trainer (fp32 gradients, ZeRO-1 at most);
 * else DeepSpeed as the llamafactory backend emits it; rc: the plan's
 * recompute (ZeRO-3 gathers once more for the recomputed forward). */
typedef struct {
    double allgather_bytes, reduce_scatter_bytes, allreduce_bytes;
    double allgather_per_micro, reduce_scatter_per_micro;   /* of those, repeated every micro-step */
    double collectives;                                     /* launched per optimizer step */
} CommVolume;
void estimate_comm_volume(const PlanModel *m, const TrainStates *ts, ShardStage shard, bool llmc_trainer,
                          Precision prec, Recompute rc, int grad_accum, int dp, CommVolume *out);

/* ---- DeepSpeed offload ---- */
/* Bytes each GPU moves over its host link per optimizer step (DeepSpeed as
 * emitted, 16-bit transfers; 4 bytes for fp32): the rank's gradient partition
 * down on every micro-step (b x T / dp each), the updated weight partition up
 * after the CPU step (b x T / dp; none with offload_params, whose CPU step
 * writes the host copy), and with offload_params the rank's weight partition
 * up before each gather of every micro-step (2 x b x N / dp; 3 x with rc
 * other than none: the recomputed forward gathers too). */
void estimate_offload_volume(const TrainStates *ts, ShardStage shard, Precision prec, Recompute rc, int grad_accum,
                             int dp, double *d2h, double *h2d_step, double *h2d_fetch);
/* DeepSpeed CPU Adam's parameters per second for one rank: threads x the
 * per-thread rate, capped by the node's share (docs/estimator.md). */
double estimate_cpu_adam_rate(int threads, int ranks_per_node);

/* The site profile's part (docs/estimator.md, "Site profiles"): the mfu a
 * job runs at (train.mfu, else the profile's, else dflt), and the profile's
 * effective bandwidths put into *f. */
double estimate_job_mfu(const PlanJob *job, double dflt, Estimate *e);
void estimate_profile_fabric(const PlanJob *job, Fabric *f, Estimate *e);

/* ---- defaults from published measurements (estimate_defaults.c) ---- */
typedef enum {
    DEF_MFU,                /* compute efficiency of all FLOPs executed (recompute included) */
    DEF_METHOD_FACTOR,      /* factor on it for a fine-tuning method (LoRA, QLoRA) */
    DEF_LINK_EFFICIENCY,    /* share of the GPU link's one-way bandwidth a ring collective reaches */
    DEF_NET_EFFICIENCY,     /* share of the network's */
    DEF_COLL_LAUNCH_S,      /* seconds per collective launched, beyond the ring's hops */
    DEF_HOST_LINK_EFFICIENCY, /* share of the host link's one-way figure pinned copies reach (offload) */
    DEF_CPU_ADAM_THREAD_RATE, /* DeepSpeed CPU Adam: parameters per second per OpenMP thread */
    DEF_CPU_ADAM_NODE_RATE    /* ... and at most per node, however many threads */
} DefaultKind;
typedef struct {
    DefaultKind kind;
    int backend;            /* PlanBackend, -1: any */
    const char *gpu_prefix; /* catalogue names starting with it; NULL: any (and CPU) */
    int method;             /* FinetuneMethod, -1: any */
    double value;
    const char *label;      /* a few words for explain's assumptions */
    const char *source;     /* the published or measured figure it rests on */
} EstimateDefault;
/* The first row of the table for this kind, backend, GPU name (NULL on CPU)
 * and method; NULL when none applies (the caller's own default stands). */
const EstimateDefault *estimate_default(DefaultKind kind, int backend, const char *gpu, int method);
/* The whole table, in order (docs/estimator.md prints it). */
int estimate_defaults(const EstimateDefault **rows);
/* The compute efficiency a job starts from before the plan's mfu and its
 * profile: the table's row for its backend and GPU (else the catalogue's
 * default_mfu; CPU 0.20) times its method's factor; *src the rows used. */
double estimate_default_mfu(const PlanJob *job, const EstimateDefault **mfu_row,
                            const EstimateDefault **method_row);

/* Fill *out for the job; report errors (does not fit, cannot finish) and
 * warnings with positions into d. Returns the number of errors added. */
int estimate_job(const PlanJob *job, Estimate *out, Diags *d);
/* The same with the rows per epoch of the job's prepared shards (index.json
 * n_rows, for the plan's context and packing; 0: none known): they replace the
 * sequences counted from the tokens (packing never fills every row), so the
 * steps are the trainer's, ceil(epochs x rows / global batch). */
int estimate_job_rows(const PlanJob *job, double shard_rows, Estimate *out, Diags *d);

/* The job with DeepSpeed's hierarchical partitioning (ZeRO++ hpZ,
 * zero_hpz_partition_size = group): ZeRO-3's forward gathers over all ranks,
 * the backward's and the recomputed forward's from a secondary 16-bit copy
 * partitioned inside the group (2 x N / group bytes more per GPU, in
 * comm_bytes). Diagnostics are dropped: a what-if for remedies. */
int estimate_job_hpz(const PlanJob *job, int group, Estimate *out);

/* Remedies for a communication-bound step (docs/estimator.md,
 * "Communication-bound steps"), each estimated with the plan's other settings. */
typedef enum { REMEDY_BATCH, REMEDY_ZERO2, REMEDY_HPZ } RemedyKind;
typedef struct {
    RemedyKind kind;
    int micro_batch, grad_accum;    /* REMEDY_BATCH: the larger micro batch, the fewer accumulation steps */
    int hpz_group;                  /* REMEDY_HPZ: zero_hpz_partition_size */
    bool fits;
    double total_bytes, step_seconds, tokens_per_second_per_gpu, speedup;
} CommRemedy;
/* Up to 3 remedies for job's estimate e when comm_bound (llamafactory ZeRO-3
 * for zero2 and hpZ; any plan for the batch); returns the count. */
int estimate_comm_remedies(const PlanJob *job, const Estimate *e, CommRemedy out[3]);

/* ---- the formulas, exposed for explain and for the check vectors in tests ---- */

/* Exact parameter count of a Llama/Qwen2/Qwen3 decoder. embedding: the input
 * embedding plus the output head when untied; per_layer: one decoder layer. */
int64_t estimate_params(const PlanModel *m, int64_t *embedding, int64_t *per_layer);

/* Model states per device (ZeRO paper, Rajbhandari et al. 2020, section 3/5):
 * weights, gradients and optimizer states for `params` parameters sharded over
 * `dp` ranks by `shard`. Mixed precision: 2 + 2 + 12 bytes/param; fp32: 4 + 4 + 8;
 * pure_bf16 (bf16 AdamW moments, no fp32 master): 2 + 2 + 4. */
void estimate_model_states(double params, Precision prec, ShardStage shard, int dp,
                           double *weights, double *grads, double *optimizer);

/* Korthikanti et al. 2022, eq. (1) with t = 1: activation bytes of one GPT
 * layer, s*b*h*(34 + 5*a*s/h); flash drops the 5*a*s^2*b attention-score term. */
double estimate_korthikanti_layer(double s, double b, double h, double a, bool flash);

/* The same accounting applied to a Llama/Qwen layer (GQA, SwiGLU, RMSNorm, no
 * dropout): bytes of activations one layer keeps for backward, at
 * bytes_per_value per activation value. Used for CPU plans; the llmc backend on
 * GPUs is estimated from the CUDA trainer's own allocations instead. */
double estimate_llama_layer(const PlanModel *m, double s, double b, bool flash,
                            Recompute rc, double bytes_per_value);

/* The same for transformers' own Llama/Qwen2/Qwen3 layers (the llamafactory
 * backend), as measured with autograd's saved-tensor hooks (tests/estimator/
 * hf_reference.py): fp32 RMSNorm inputs, eager softmax kept in fp32 and again
 * in the input dtype, k/v repeated to every head in eager. No recompute. */
double estimate_hf_layer(const PlanModel *m, double s, double b, bool flash,
                         double bytes_per_value);

/* Per-device peak memory of the job at a given micro batch, recompute mode and
 * ZeRO stage (memory fields, world/data_parallel, fits). Used for the plan's own
 * settings and for the "what would fit" help lines. Three accountings: the llmc
 * CUDA trainer's allocations (llmc backend, GPU), transformers' (llamafactory),
 * the lean per-op one in fp32 (CPU). */
void estimate_memory(const PlanJob *job, int micro_batch, Recompute rc, ShardStage shard,
                     Estimate *out);

/* The fields of an Estimate the JSON forms print, one row each
 * (compiler/estimate/estimate_fields.c, ESTIMATE_FIELDS): its key (the field's
 * name, docs/estimator.md "plan.json estimate fields"), its kind, its position
 * in plan.json's "estimate" (-1: `llmc explain --format=json` alone prints it)
 * and its value. estimate_fields fills out[] in explain's order and returns the
 * count; compiler/emit/emit_plan_json.c and compiler/cli/explain.c print them. */
typedef enum { EST_NUM, EST_INT, EST_BOOL, EST_TOKEN_SOURCE, EST_REFERENCE } EstimateFieldKind;
typedef struct {
    const char *key;
    EstimateFieldKind kind;
    int plan_pos;
    double num;                 /* EST_NUM */
    int64_t i;                  /* EST_INT */
    bool b;                     /* EST_BOOL */
    const char *str;            /* EST_TOKEN_SOURCE: estimate_token_source_name; EST_REFERENCE: its name */
} EstimateField;
#define ESTIMATE_FIELD_MAX 128
int estimate_fields(const Estimate *e, EstimateField out[ESTIMATE_FIELD_MAX]);
/* The estimate as a JSON object (a new cJSON tree): every row of
 * ESTIMATE_FIELDS, keys as the field names, numbers as cJSON prints them
 * (`llmc explain --format=json`, `llmc --format=json`). */
struct cJSON *estimate_to_json(const Estimate *e);

/* Whether the llmc trainer runs t with every rank holding only its part of the
 * model on the host: it reads its ranges of the HF weights and writes its part of
 * each checkpoint and of the export (ZeRO-3, full training, several ranks). */
bool estimate_llmc_sharded(const PlanTrain *t, const Estimate *e);
bool estimate_llmc_offload_shard(const PlanTrain *t, const Estimate *e);
/* Whether the llmc CUDA trainer runs its fused attention kernel for this model
 * at this context (head_dim 32, 64 or 128, context a multiple of 64); when not,
 * it materialises the scores whatever `attention` says, and so does the estimate. */
bool estimate_llmc_cuda_flash(const PlanModel *m, int context);
/* precision = fp8 on the llmc CUDA trainer keeps each trained layer's E4M3
 * input transposes from the forward pass (not under LoRA or full recompute). */
bool estimate_llmc_fp8_keeps_transposes(const PlanTrain *t, Recompute rc);

/* Whether the llmc CUDA trainer sends this model's attention at this context
 * through cuDNN's fused SDPA (head_dim 64 or 128, context a multiple of 64,
 * whole query groups) when the plan says flash; and the workspace it then
 * allocates at micro batch b x context s, in bytes, for the deterministic
 * backward (the default) or the atomics form (LLMC_CUDNN_DETERMINISTIC=0). */
bool estimate_llmc_cuda_cudnn(const PlanModel *m, int context);
double estimate_llmc_cudnn_workspace(const PlanModel *m, double b, double s, bool deterministic);

/* Names for printing. The attention the estimate counts: the plan's, or
 * "eager (no fused kernel)" where the llmc CUDA trainer cannot run flash. */
const char *estimate_token_source_name(TokenSource s);
const char *estimate_attention_name(const PlanTrain *t, const Estimate *e);

/* LLaMA-Factory's preprocessing_num_workers as the emitter writes it and the
 * host-memory estimate counts it: the first rank of a node tokenizes while the
 * others wait, so it may use the CPUs of the node's tasks, capped at 64
 * (datasets' map() gains little beyond; more processes mostly cost memory). */
static inline int llamafactory_workers(double node_cpus)
{
    return node_cpus < 64 ? (node_cpus >= 1 ? (int)node_cpus : 1) : 64;
}

/* Seconds before the time limit at which a multi-segment llmc run is told to
 * checkpoint and stop (--signal=USR2@T): two steps plus five minutes, at most a
 * quarter of the limit and an hour, never below 60 (Slurm may signal up to 60 s
 * early). report_time refuses a limit that this lead would swallow. */
static inline int estimate_stop_signal_seconds(const PlanJob *job, const Estimate *e)
{
    double step = e && e->step_seconds > 0 ? e->step_seconds : 0;
    double lead = 300 + ceil(2 * step);
    double cap = job->time_seconds / 4;
    if (cap > 3600) cap = 3600;
    if (lead > cap) lead = cap;
    if (lead < 60) lead = 60;
    return (int)lead;
}

#endif
