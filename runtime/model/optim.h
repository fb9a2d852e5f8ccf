/* optim.h — AdamW (torch.optim.AdamW semantics), global-norm gradient clipping
 * (torch.nn.utils.clip_grad_norm_) and learning-rate schedules (HF get_scheduler:
 * constant_with_warmup, linear, cosine with min_lr). */
#ifndef LLMC_OPTIM_H
#define LLMC_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct {
    LrScheduleKind kind;          /* contract/plan_vocab.h (via model.h) */
    double lr, min_lr;            /* min_lr: floor of the cosine schedule */
    int64_t warmup_steps, total_steps;
} LrSchedule;

/* Learning rate for optimizer step `step` (0-based), as HF's LambdaLR gives it:
 * warmup step/warmup, then constant, linear decay to 0, or cosine to min_lr. */
double lr_at(const LrSchedule *s, int64_t step);
/* HF: warmup steps = ceil(total * ratio). */
int64_t warmup_from_ratio(int64_t total_steps, double ratio);

/* L2 norm of all gradients (accumulated in double). */
double grad_global_norm(const float *g, size_t n);
/* The global norm in a form that does not depend on how the vector is split
 * across ranks: sums of squares (double) of fixed blocks of GRAD_NORM_BLOCK
 * floats of the flat gradient, block b covering [b*B, (b+1)*B), then the
 * blocks' sums added in block order. grad_block_sumsq writes the sums of the
 * blocks that [lo, hi) covers (g[0] is flat element lo; lo a multiple of B) to
 * sums[lo/B ...]; grad_norm_of_blocks adds n_blocks of them. */
#include "cuda_layout.h"
#define GRAD_NORM_BLOCK LLMC_GRAD_NORM_BLOCK   /* contract/cuda_layout.h */
static inline size_t grad_norm_blocks(size_t n) { return (n + GRAD_NORM_BLOCK - 1) / GRAD_NORM_BLOCK; }
void grad_block_sumsq(const float *g, size_t lo, size_t hi, double *sums);
double grad_norm_of_blocks(const double *sums, size_t n_blocks);
/* Scale g by max_norm / (norm + 1e-6) when that is below 1 (torch's rule). */
void grad_clip(float *g, size_t n, double norm, double max_norm);

typedef struct {
    double beta1, beta2, eps, weight_decay;
    int64_t t;                    /* steps taken (bias correction) */
    size_t n;
    float *m, *v;                 /* first and second moments, n floats each */
    /* train.optimizer_states = bf16: each step updates m and v in fp32 from
     * their values and stores them rounded stochastically to bf16
     * (contract/bf16_round.h, keyed by seed, step t, flat index, moment), as
     * the CUDA kernel does; the arrays stay fp32, every value a bf16 one, so
     * checkpoints and ZeRO shards are unchanged */
    OptimStates states;
    uint32_t seed;
} AdamW;

/* Moments fp32 (states OSTATES_FP32, the default) or bf16; m and v start at zero. */
int adamw_init(AdamW *o, size_t n, double beta1, double beta2, double eps, double weight_decay);
/* The moments' format and the plan's seed (train.seed, its low 32 bits) for
 * the rounding's random bits. */
void adamw_set_states(AdamW *o, OptimStates states, uint64_t seed);
void adamw_free(AdamW *o);
/* One step on w (decoupled decay only on tensors with ParamInfo.decay). */
void adamw_step(AdamW *o, const ParamInfo *params, int n_params, float *w, const float *g, double lr);
/* The same step on the flat range [lo, lo + o->n) only (a ZeRO shard): w, g
 * and o's moments hold that range (element 0 = flat offset lo). Every element
 * gets the bits adamw_step gives it. */
void adamw_step_range(AdamW *o, const ParamInfo *params, int n_params, size_t lo, float *w, const float *g,
                      double lr);

#endif
