/* optim.c — AdamW, clipping, schedules (optim.h). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_round.h"   /* contract/: the same rounding as the CUDA kernels */

double lr_at(const LrSchedule *s, int64_t step)
{
    double f;   /* the factor on lr, as HF's LambdaLR multiplies it */
    if (step < s->warmup_steps) {
        /* step / warmup: step 0 runs at lr 0, as HF's *_with_warmup schedules */
        f = (double)step / (double)(s->warmup_steps > 1 ? s->warmup_steps : 1);
    } else if (s->kind == SCHED_CONSTANT) {
        f = 1.0;
    } else {
        int64_t span = s->total_steps - s->warmup_steps;
        double progress = (double)(step - s->warmup_steps) / (double)(span > 1 ? span : 1);
        if (s->kind == SCHED_LINEAR) {
            /* (total - step) / (total - warmup): 0 at total_steps (get_linear_schedule_with_warmup) */
            f = (double)(s->total_steps - step) / (double)(span > 1 ? span : 1);
            if (f < 0) f = 0;
        } else {
            /* half a cosine from 1 down to min_lr / lr (HF's cosine_with_min_lr,
             * min_lr_rate); steps past total_steps stay at the floor */
            double rate = s->lr > 0 ? s->min_lr / s->lr : 0.0;
            f = 0.5 * (1.0 + cos(M_PI * progress));
            f = f * (1.0 - rate) + rate;
            if (f < 0) f = 0;
        }
    }
    return s->lr * f;
}

/* TrainingArguments.get_warmup_steps: math.ceil(num_training_steps * warmup_ratio) */
int64_t warmup_from_ratio(int64_t total_steps, double ratio)
{
    return (int64_t)ceil((double)total_steps * ratio);
}

/* Squares summed in double: with ~10^9 terms an fp32 sum would stop growing
 * long before the end (each term below its last bit). */
double grad_global_norm(const float *g, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    return sqrt(s);
}

void grad_block_sumsq(const float *g, size_t lo, size_t hi, double *sums)
{
    for (size_t b0 = lo; b0 < hi; b0 += GRAD_NORM_BLOCK) {
        size_t b1 = hi - b0 < GRAD_NORM_BLOCK ? hi : b0 + GRAD_NORM_BLOCK;   /* the last block may be short */
        double s = 0.0;
        for (size_t i = b0; i < b1; i++) s += (double)g[i - lo] * g[i - lo];
        sums[b0 / GRAD_NORM_BLOCK] = s;
    }
}

double grad_norm_of_blocks(const double *sums, size_t n_blocks)
{
    double s = 0.0;
    for (size_t b = 0; b < n_blocks; b++) s += sums[b];
    return sqrt(s);
}

void grad_clip(float *g, size_t n, double norm, double max_norm)
{
    if (!(max_norm > 0)) return;   /* grad_clip = 0 (or NaN) turns clipping off */
    /* torch's clip_grad_norm_: + 1e-6 keeps a zero norm finite; gradients
     * are only ever scaled down */
    double coef = max_norm / (norm + 1e-6);
    if (coef >= 1.0) return;
    float c = (float)coef;
    for (size_t i = 0; i < n; i++) g[i] *= c;
}

int adamw_init(AdamW *o, size_t n, double beta1, double beta2, double eps, double weight_decay)
{
    *o = (AdamW){.beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay, .n = n};
    /* moments start at zero (torch's zeros_like); calloc(0) may be NULL, which
     * would read as out of memory */
    o->m = calloc(n ? n : 1, sizeof(float));
    o->v = calloc(n ? n : 1, sizeof(float));
    if (!o->m || !o->v) { adamw_free(o); return -1; }
    return 0;
}

void adamw_set_states(AdamW *o, OptimStates states, uint64_t seed)
{
    o->states = states;
    o->seed = (uint32_t)seed;
}

/* x rounded to bf16 as bf16_round.h rounds moment `which` of flat element idx
 * at step t, widened back to fp32 (exactly). */
static inline float bf16_stored(float x, uint32_t seed, uint32_t t, uint64_t idx, uint32_t which)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (uint32_t)br_round(u, br_bits(seed, t, idx, which)) << 16;
    memcpy(&x, &u, sizeof x);
    return x;
}

void adamw_free(AdamW *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

void adamw_step(AdamW *o, const ParamInfo *params, int n_params, float *w, const float *g, double lr)
{
    adamw_step_range(o, params, n_params, 0, w, g, lr);
}

void adamw_step_range(AdamW *o, const ParamInfo *params, int n_params, size_t lo, float *w, const float *g,
                      double lr)
{
    /* torch.optim.AdamW, single-tensor path, in its order of operations:
     * w *= 1 - lr*wd (decoupled decay, before the moments); m, v updated;
     * w -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps). The step count goes up
     * first, as torch's state['step'], so the first step has t = 1.
     * bf16 states: the step uses the fp32 m and v it computed and stores them
     * rounded (runtime/cuda/kernels_adamw.cu's order). */
    o->t++;
    double bc1 = 1.0 - pow(o->beta1, (double)o->t), bc2 = 1.0 - pow(o->beta2, (double)o->t);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2), eps = (float)o->eps;
    float b1 = (float)o->beta1, b2 = (float)o->beta2;
    int bf16 = o->states == OSTATES_BF16;
    size_t hi = lo + o->n;
    for (int p = 0; p < n_params; p++) {
        size_t a = params[p].offset, b = a + params[p].numel;   /* the tensor, cut to [lo, hi) */
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        float decay = params[p].decay ? (float)(1.0 - lr * o->weight_decay) : 1.0f;
        float *wp = w + (a - lo), *m = o->m + (a - lo), *v = o->v + (a - lo);
        const float *gp = g + (a - lo);
        for (size_t i = 0; i < b - a; i++) {
            wp[i] *= decay;
            float mi = b1 * m[i] + (1.0f - b1) * gp[i];
            float vi = b2 * v[i] + (1.0f - b2) * gp[i] * gp[i];
            float denom = sqrtf(vi) / bc2_sqrt + eps;
            wp[i] -= step_size * mi / denom;
            if (bf16) {
                mi = bf16_stored(mi, o->seed, (uint32_t)o->t, a + i, 0);
                vi = bf16_stored(vi, o->seed, (uint32_t)o->t, a + i, 1);
            }
            m[i] = mi;
            v[i] = vi;
        }
    }
}
