/* estimate.h — compile-time estimates of memory per GPU and time to train.
 *
 * One module with a small, documented set of inputs (docs/estimator.md), so the
 * trainer's measured peak memory and step time can be compared with it and the
 * catalogue's MFU calibrated. The estimator helper owns this header; fields
 * may be added, never renamed (the emitters write them into plan.json).
 */
#ifndef LLMC_ESTIMATE_H
#define LLMC_ESTIMATE_H

#include "plan.h"

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
} Estimate;

/* Fill *out for the job; report errors (does not fit, cannot finish) and
 * warnings with positions into d. Returns the number of errors added. */
int estimate_job(const PlanJob *job, Estimate *out, Diags *d);

#endif
