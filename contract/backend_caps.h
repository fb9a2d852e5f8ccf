/* backend_caps.h — what each backend of the llmc trainer runs: THE SINGLE SOURCE.
 *
 * One row per llmc-train backend (CPU, CUDA). llmc's checker
 * (compiler/check/check_job.c, check_job_llmc_caps) refuses a plan that asks a
 * backend for more than its row, with the key's position; the backend itself
 * (runtime/cuda/backend_cuda.c cu_unsupported, lora_cuda.c
 * cuda_lora_supported) refuses the same plan.json through the same row and
 * predicates. So a plan `llmc check` accepts is one the trainer runs, instead
 * of one refused after the queue wait. Change a row when a backend gains a
 * feature; tests/limits/walk.py reads this file and walks each row's edges.
 *
 * Columns of LLMC_BACKENDS(X):
 *   ID              LLMC_BACKEND_<ID> names the row in C
 *   WHERE           "CPUs" | "GPUs", for messages
 *   MAX_SHARD       highest ZeRO stage (plan.json parallel.zero_stage) with method = full
 *   FINETUNE        1: method = freeze and lora run
 *   MAX_SHARD_FT    highest ZeRO stage with freeze or lora
 *   FT_OFFLOAD      1: freeze and lora may offload (else offload is full training's)
 *   LORA_RANK_STEP  lora_rank a multiple of this (CUDA: u_t starts at column
 *                   t*r and B_t's rows are r long, whole 16-byte bf16 vectors)
 *   LORA_RANK_MAX   largest lora_rank; 0: no bound beyond the plan's own row
 *                   PL_FINETUNE_LORA_RANK (plan_limits.h), which both programs apply
 *   MAX_OFFLOAD     most it offloads to host memory (plan_vocab.h's OffloadKind
 *                   order: none < optimizer < all)
 *   OFFLOAD_MULTI_SHARD on several data-parallel ranks, offload needs at least this
 *                   ZeRO stage (each rank offloads its shard); 4: one rank only
 *   FP8             1: precision = fp8 runs (FP8 projection GEMMs; the CPU
 *                   backend computes in fp32 and has none)
 *   FP8_MAX_SHARD   highest ZeRO stage with precision = fp8, on any number of
 *                   ranks (the FP8 weight copies are not yet gathered by ZeRO-3)
 *   FP8_OFFLOAD     most it offloads with precision = fp8 (OffloadKind order)
 *   SPLIT_OFFLOAD   1: master_weights = split with offload (the split master
 *                   lives beside the bf16 weight on the GPU; offload keeps an
 *                   fp32 master on the host instead)
 *   SPLIT_MAX_SHARD highest ZeRO stage with master_weights = split in full training
 *                   (CUDA: ZeRO-2/3 keep an fp32 master per shard beside bf16
 *                   weights that are whole or gathered, not its upper half)
 *   STATES_OFFLOAD  1: optimizer_states = bf16 with offload (CUDA's offload streams
 *                   fp32 moments from host memory)
 *   SHARD_NOTE      what it shards, for the refusal
 */
#ifndef LLMC_CONTRACT_BACKEND_CAPS_H
#define LLMC_CONTRACT_BACKEND_CAPS_H

#include "plan_vocab.h"

#include <stdbool.h>

#define LLMC_BACKENDS(X) \
    X(CPU, "CPUs", 3, 1, 0, 0, 1, 0, OFFLOAD_NONE, 4, 0, 0, OFFLOAD_NONE, 0, 3, 1, \
      "the llmc CPU backend shards optimizer states, gradients and weights (zero1-zero3)") \
    X(CUDA, "GPUs", 3, 1, 0, 0, 8, 1024, OFFLOAD_OPTIMIZER, 2, 1, 2, OFFLOAD_NONE, 0, 1, 0, \
      "the llmc CUDA backend shards optimizer states, gradients and weights (zero1-zero3)")

typedef enum {
#define X(id, where, max_shard, ft, max_shard_ft, ft_off, step, rmax, offload, off_shard, fp8, fp8_shard, fp8_off, \
          split_off, split_shard, states_off, note) LLMC_BACKEND_##id,
    LLMC_BACKENDS(X)
#undef X
    LLMC_BACKEND_COUNT
} LlmcBackendId;

typedef struct {
    const char *where;
    int max_shard;
    bool finetune;
    int max_shard_finetune;
    bool finetune_offload;
    int lora_rank_step;
    int lora_rank_max;
    OffloadKind max_offload;
    int offload_multi_shard;
    bool fp8;
    int fp8_max_shard;
    OffloadKind fp8_max_offload;
    bool split_offload;
    int split_max_shard;
    bool states_offload;
    const char *shard_note;
} LlmcBackendCaps;

static const LlmcBackendCaps llmc_backend_caps[LLMC_BACKEND_COUNT] = {
#define X(id, where, max_shard, ft, max_shard_ft, ft_off, step, rmax, offload, off_shard, fp8, fp8_shard, fp8_off, \
          split_off, split_shard, states_off, note) \
    {where, max_shard, ft, max_shard_ft, ft_off, step, rmax, offload, off_shard, fp8, fp8_shard, fp8_off, split_off, \
     split_shard, states_off, note},
    LLMC_BACKENDS(X)
#undef X
};

/* ZeRO stage `zero` on `ranks` data-parallel ranks runs on backend b, for
 * full training or (finetune) freeze and lora. One rank shards nothing, so
 * full training there runs whatever the stage. */
static inline bool llmc_shard_ok(LlmcBackendId b, bool finetune, int zero, int ranks)
{
    const LlmcBackendCaps *c = &llmc_backend_caps[b];
    return finetune ? zero <= c->max_shard_finetune : zero <= c->max_shard || ranks <= 1;
}

/* Offload o at ZeRO stage `zero` on `ranks` data-parallel ranks runs on backend b. */
static inline bool llmc_offload_ok(LlmcBackendId b, OffloadKind o, int zero, int ranks)
{
    const LlmcBackendCaps *c = &llmc_backend_caps[b];
    return o == OFFLOAD_NONE || (o <= c->max_offload && (ranks <= 1 || zero >= c->offload_multi_shard));
}

/* Freeze or lora with offload o runs on backend b (on any number of ranks:
 * the trained state is replicated and its gradients all-reduced). */
static inline bool llmc_finetune_ok(LlmcBackendId b, OffloadKind o)
{
    const LlmcBackendCaps *c = &llmc_backend_caps[b];
    return c->finetune && (o == OFFLOAD_NONE || c->finetune_offload);
}

/* precision = fp8 at ZeRO stage `zero` with offload o runs on backend b. */
static inline bool llmc_fp8_ok(LlmcBackendId b, int zero, OffloadKind o)
{
    const LlmcBackendCaps *c = &llmc_backend_caps[b];
    return c->fp8 && zero <= c->fp8_max_shard && o <= c->fp8_max_offload;
}

/* master_weights = m with offload o at ZeRO stage `zero` runs on backend b
 * (finetune: freeze or lora, whose trained state is never sharded). */
static inline bool llmc_master_ok(LlmcBackendId b, MasterWeights m, OffloadKind o, int zero, bool finetune)
{
    const LlmcBackendCaps *c = &llmc_backend_caps[b];
    return m == MASTER_FP32 || ((o == OFFLOAD_NONE || c->split_offload) && (finetune || zero <= c->split_max_shard));
}

/* optimizer_states = s with offload o runs on backend b. */
static inline bool llmc_states_ok(LlmcBackendId b, OptimStates s, OffloadKind o)
{
    return s == OSTATES_FP32 || o == OFFLOAD_NONE || llmc_backend_caps[b].states_offload;
}

/* lora_rank runs on backend b: a positive multiple of its step up to its max
 * (a rank inside PL_FINETUNE_LORA_RANK, which the plan readers check first). */
static inline bool llmc_lora_rank_ok(LlmcBackendId b, int rank)
{
    const LlmcBackendCaps *c = &llmc_backend_caps[b];
    return rank >= c->lora_rank_step && rank % c->lora_rank_step == 0 &&
           (c->lora_rank_max == 0 || rank <= c->lora_rank_max);
}

/* The nearest rank backend b runs, for a checker's help line. */
static inline int llmc_lora_rank_nearest(LlmcBackendId b, int rank)
{
    const LlmcBackendCaps *c = &llmc_backend_caps[b];
    if (c->lora_rank_max && rank > c->lora_rank_max) return c->lora_rank_max;
    if (rank < c->lora_rank_step) return c->lora_rank_step;
    return (rank / c->lora_rank_step + (rank % c->lora_rank_step != 0)) * c->lora_rank_step;
}

/* precision = fp8's GEMMs (cuBLASLt on Hopper) take operands whose every
 * dimension is a multiple of LLMC_FP8_DIM_STEP elements (16 bytes of E4M3):
 * the tokens of a micro-batch (micro_batch x context) and the model's widths,
 * and with fp8_lm_head the vocabulary. The checker (check_precision.c) and the
 * CUDA backend (model_cuda.c) refuse a plan by this one function. */
#define LLMC_FP8_DIM_STEP 16

typedef enum { LLMC_FP8_DIM_TOKENS, LLMC_FP8_DIM_MODEL, LLMC_FP8_DIM_VOCAB } LlmcFp8DimKind;

typedef struct {
    const char *what;   /* NULL: every dimension fits */
    long long value;
    LlmcFp8DimKind kind;   /* the key that sets it: the batch and context, the model's shape, the vocabulary */
} LlmcFp8Dim;

/* The first dimension of an FP8 run that is not a multiple of the step. */
static inline LlmcFp8Dim llmc_fp8_dim_fault(long long tokens, int hidden, int heads, int kv_heads, int head_dim,
                                            int ffn, int vocab, bool lm_head)
{
    long long hd = (long long)heads * head_dim;
    const LlmcFp8Dim dims[] = {
        {"the tokens of a micro-batch (micro_batch x context)", tokens, LLMC_FP8_DIM_TOKENS},
        {"hidden", hidden, LLMC_FP8_DIM_MODEL},
        {"heads x head_dim", hd, LLMC_FP8_DIM_MODEL},
        {"the q/k/v width ((heads + 2 kv_heads) x head_dim)", hd + 2LL * kv_heads * head_dim, LLMC_FP8_DIM_MODEL},
        {"ffn", ffn, LLMC_FP8_DIM_MODEL},
        {"vocab", lm_head ? vocab : 0, LLMC_FP8_DIM_VOCAB},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].value % LLMC_FP8_DIM_STEP) return dims[i];
    return (LlmcFp8Dim){NULL, 0, LLMC_FP8_DIM_TOKENS};
}

#endif
