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
    TOKENS_FROM_SIZE,       /* file size / bytes_per_token (capped by samples x context for sft) */
    TOKENS_FROM_SAMPLES,    /* only a sample count: samples x context, an upper bound */
    TOKENS_UNKNOWN          /* a dataset states none of tokens, size, samples: no time estimate */
} TokenSource;

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
    double model_bytes_per_param;           /* 16: 2 + 2 + 12 mixed, 4 + 4 + 8 fp32; 18 for the llmc
                                               CUDA trainer (fp32 gradients), all before sharding */
    double activation_bytes_per_value;      /* 2 (bf16/fp16) or 4 (fp32, and every CPU plan) */
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
    double peak_flops_per_device;           /* FLOP/s: GPU bf16 (fp32 for fp32 plans) peak, or CPU node */
    double tokens_per_second;               /* whole job, real tokens */
    double time_limit_seconds;              /* the job's time limit (0 = none stated) */
} Estimate;

/* Fill *out for the job; report errors (does not fit, cannot finish) and
 * warnings with positions into d. Returns the number of errors added. */
int estimate_job(const PlanJob *job, Estimate *out, Diags *d);

/* ---- the formulas, exposed for explain and for the check vectors in tests ---- */

/* Exact parameter count of a Llama/Qwen2/Qwen3 decoder. embedding: the input
 * embedding plus the output head when untied; per_layer: one decoder layer. */
int64_t estimate_params(const PlanModel *m, int64_t *embedding, int64_t *per_layer);

/* Model states per device (ZeRO paper, Rajbhandari et al. 2020, section 3/5):
 * weights, gradients and optimizer states for `params` parameters sharded over
 * `dp` ranks by `shard`. Mixed precision: 2 + 2 + 12 bytes/param; fp32: 4 + 4 + 8. */
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

/* The estimate as a JSON object, keys as the field names (docs/estimator.md,
 * "plan.json estimate fields"); `llmc explain --format=json` prints it. */
struct cJSON;
struct cJSON *estimate_to_json(const Estimate *e);

/* Whether the llmc CUDA trainer runs its fused attention kernel for this model
 * at this context (head_dim 32, 64 or 128, context a multiple of 64); when not,
 * it materialises the scores whatever `attention` says, and so does the estimate. */
bool estimate_llmc_cuda_flash(const PlanModel *m, int context);

/* Names for printing. The attention the estimate counts: the plan's, or
 * "eager (no fused kernel)" where the llmc CUDA trainer cannot run flash. */
const char *estimate_token_source_name(TokenSource s);
const char *estimate_attention_name(const PlanTrain *t, const Estimate *e);

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
