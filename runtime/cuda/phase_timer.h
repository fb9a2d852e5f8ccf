/* phase_timer.h — where a training step's GPU time goes, without a profiler
 * (runtime/cuda/phase_timer.c).
 *
 * With LLMC_PHASE_TIMES=1 in the environment, the model records a CUDA event on its
 * stream after each operation of a step (phase_mark); the time between two events
 * is charged to the phase named by the later one. Phases sum over layers. Without
 * the variable phase_timer_new returns NULL and nothing is recorded. Only steps
 * between phase_step_begin and phase_step_end are captured (the bench's). */
#ifndef LLMC_CUDA_PHASE_TIMER_H
#define LLMC_CUDA_PHASE_TIMER_H

#include <stdio.h>

typedef enum {
    PH_ZERO_GRAD, PH_EMBED, PH_NORM, PH_QKV_GEMM, PH_ROPE, PH_ATTN, PH_O_GEMM, PH_GU_GEMM, PH_SWIGLU,
    PH_DOWN_GEMM, PH_LM_GEMM, PH_CE, PH_LM_DX, PH_LM_DW, PH_NORM_BWD, PH_DOWN_DX, PH_DOWN_DW,
    PH_SWIGLU_BWD, PH_GU_DX, PH_GU_DW, PH_O_DX, PH_O_DW, PH_ATTN_BWD, PH_ROPE_BWD, PH_QKV_DX, PH_QKV_DW,
    PH_EMBED_BWD, PH_GRAD_REDUCE, PH_GRAD_NORM, PH_ADAMW, PH_GATHER, PH_COUNT
} Phase;

typedef struct PhaseTimer PhaseTimer;

/* NULL unless LLMC_PHASE_TIMES=1 (or on failure, with a message). stream: cudaStream_t. */
PhaseTimer *phase_timer_new(void *stream);
void phase_timer_free(PhaseTimer *t);

void phase_step_begin(PhaseTimer *t);
/* Charge the time since the previous mark to phase p (ignored outside a step). */
void phase_mark(PhaseTimer *t, Phase p);
/* Wait for the step's events and add their intervals to the totals. */
void phase_step_end(PhaseTimer *t);
/* Per-step milliseconds and shares of each phase over the captured steps; GEMM
 * phases summed separately. */
void phase_report(const PhaseTimer *t, FILE *out);

#endif
