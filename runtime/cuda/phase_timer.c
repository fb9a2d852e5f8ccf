/* phase_timer.c — CUDA-event phase times for one stream (see phase_timer.h). */
#include "phase_timer.h"

#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "cuda_check.h"

/* Marks per step: one per operation, some 25 a layer with recompute, so an
 * 80-layer model (72B) needs about 2000; more are counted as dropped. */
#define MAX_MARKS 8192

/* Report names; those starting "gemm" are also summed as "all GEMMs". */
static const char *const phase_name[PH_COUNT] = {
    [PH_ZERO_GRAD] = "zero grad",          [PH_EMBED] = "inputs + embedding",
    [PH_NORM] = "rmsnorm fwd",             [PH_QKV_GEMM] = "gemm qkv",
    [PH_ROPE] = "qkv split + rope",        [PH_ATTN] = "attention fwd",
    [PH_O_GEMM] = "gemm o (+residual)",    [PH_GU_GEMM] = "gemm gate/up",
    [PH_SWIGLU] = "swiglu fwd",            [PH_DOWN_GEMM] = "gemm down (+residual)",
    [PH_LM_GEMM] = "gemm lm head",         [PH_CE] = "cross-entropy",
    [PH_LM_DX] = "gemm lm head dx",        [PH_LM_DW] = "gemm lm head dW",
    [PH_NORM_BWD] = "rmsnorm bwd",         [PH_DOWN_DX] = "gemm down dx",
    [PH_DOWN_DW] = "gemm down dW",         [PH_SWIGLU_BWD] = "swiglu bwd",
    [PH_GU_DX] = "gemm gate/up dx",        [PH_GU_DW] = "gemm gate/up dW",
    [PH_O_DX] = "gemm o dx",               [PH_O_DW] = "gemm o dW",
    [PH_ATTN_BWD] = "attention bwd",       [PH_ROPE_BWD] = "rope bwd + bias grad",
    [PH_QKV_DX] = "gemm qkv dx",           [PH_QKV_DW] = "gemm qkv dW",
    [PH_EMBED_BWD] = "embedding bwd",      [PH_GRAD_REDUCE] = "gradient reduction",
    [PH_GRAD_NORM] = "grad norm",          [PH_ADAMW] = "adamw",
    [PH_GATHER] = "ZeRO-3 weight gather",
};

struct PhaseTimer {
    cudaStream_t stream;
    cudaEvent_t ev[MAX_MARKS + 1];
    Phase phase[MAX_MARKS + 1];   /* phase[i]: the interval ev[i-1] -> ev[i] */
    int n;                        /* events recorded in this step; 0 outside a step */
    int dropped, steps;
    double ms[PH_COUNT];
};

PhaseTimer *phase_timer_new(void *stream)
{
    /* off unless asked for: recording events between kernels costs a little
     * and the synchronisation at the step's end costs more */
    const char *e = getenv("LLMC_PHASE_TIMES");
    if (!e || strcmp(e, "1")) return NULL;
    PhaseTimer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->stream = (cudaStream_t)stream;
    /* all events created once, up front: creating them per step would put
     * driver calls inside what is being timed */
    for (int i = 0; i <= MAX_MARKS; i++) CUDA_CHECK(cudaEventCreate(&t->ev[i]));
    return t;
}

void phase_timer_free(PhaseTimer *t)
{
    if (!t) return;
    for (int i = 0; i <= MAX_MARKS; i++) cudaEventDestroy(t->ev[i]);
    free(t);
}

void phase_step_begin(PhaseTimer *t)
{
    if (!t) return;
    CUDA_CHECK(cudaEventRecord(t->ev[0], t->stream));
    t->n = 1;
}

void phase_mark(PhaseTimer *t, Phase p)
{
    if (!t || !t->n) return;
    if (t->n > MAX_MARKS) { t->dropped++; return; }
    CUDA_CHECK(cudaEventRecord(t->ev[t->n], t->stream));
    t->phase[t->n++] = p;
}

void phase_step_end(PhaseTimer *t)
{
    if (!t || !t->n) return;
    /* the last event done means every earlier one is (one stream, in order) */
    CUDA_CHECK(cudaEventSynchronize(t->ev[t->n - 1]));
    for (int i = 1; i < t->n; i++) {
        float ms = 0.f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, t->ev[i - 1], t->ev[i]));
        t->ms[t->phase[i]] += ms;
    }
    t->steps++;
    t->n = 0;
}

void phase_report(const PhaseTimer *t, FILE *out)
{
    if (!t || !t->steps) return;
    /* the total is the sum of the phases (the time between the first and the
     * last mark), not the step's wall time: host gaps are not in it */
    double total = 0, gemm = 0;
    for (int p = 0; p < PH_COUNT; p++) {
        total += t->ms[p];
        if (!strncmp(phase_name[p], "gemm", 4)) gemm += t->ms[p];
    }
    fprintf(out, "phase times, ms per step over %d steps (CUDA events between operations):\n", t->steps);
    for (int p = 0; p < PH_COUNT; p++)
        if (t->ms[p] > 0)
            fprintf(out, "  %-24s %9.3f  %5.1f%%\n", phase_name[p], t->ms[p] / t->steps, 100.0 * t->ms[p] / total);
    fprintf(out, "  %-24s %9.3f  %5.1f%%\n", "all GEMMs", gemm / t->steps, 100.0 * gemm / total);
    fprintf(out, "  %-24s %9.3f\n", "total", total / t->steps);
    if (t->dropped) fprintf(out, "  (%d marks dropped: more than %d per step)\n", t->dropped, MAX_MARKS);
}
