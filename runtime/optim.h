/* optim.h — AdamW (torch.optim.AdamW semantics), global-norm gradient clipping
 * (torch.nn.utils.clip_grad_norm_) and learning-rate schedules (HF get_scheduler:
 * constant_with_warmup, linear, cosine with min_lr). */
#ifndef LLMC_OPTIM_H
#define LLMC_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef enum { LR_CONSTANT, LR_LINEAR, LR_COSINE } LrKind;

typedef struct {
    LrKind kind;
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
/* Scale g by max_norm / (norm + 1e-6) when that is below 1 (torch's rule). */
void grad_clip(float *g, size_t n, double norm, double max_norm);

typedef struct {
    double beta1, beta2, eps, weight_decay;
    int64_t t;                    /* steps taken (bias correction) */
    size_t n;
    float *m, *v;                 /* first and second moments, n floats each */
} AdamW;

int adamw_init(AdamW *o, size_t n, double beta1, double beta2, double eps, double weight_decay);
void adamw_free(AdamW *o);
/* One step on w (decoupled decay only on tensors with ParamInfo.decay). */
void adamw_step(AdamW *o, const ParamInfo *params, int n_params, float *w, const float *g, double lr);

#endif
