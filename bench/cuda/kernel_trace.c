/* kernel_trace: every kernel, memcpy and memset a CUDA program runs, with the
 * GPU's start and end times, through CUPTI's activity API, preloaded:
 *
 *   KERNEL_TRACE=out.tsv LD_PRELOAD=build/libkernel_trace.so llmc-train-cuda bench ...
 *   python3 bench/cuda/gpu_gaps.py out.tsv --last-ms MS
 *
 * One line a record: start_ns, end_ns, kind, name (tab-separated). For the GPU's idle
 * time inside a training step (launch gaps, host waits), where nsys is not installed
 * (the GPU machine's nsys cannot import its own capture). CUPTI's buffers are flushed
 * at exit; records are written from CUPTI's callback thread only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cupti.h>

#define TRACE_BUF (8u << 20)

static FILE *trace_out;

static void trace_fail(const char *what, CUptiResult r)
{
    const char *s = NULL;
    cuptiGetResultString(r, &s);
    fprintf(stderr, "kernel_trace: %s: %s\n", what, s ? s : "unknown CUPTI error");
    exit(1);
}

static void CUPTIAPI trace_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, TRACE_BUF);
    *size = *buf ? TRACE_BUF : 0;
    *max_records = 0;
}

static void CUPTIAPI trace_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            fprintf(trace_out, "%llu\t%llu\tkernel\t%s\n", (unsigned long long)k->start, (unsigned long long)k->end,
                    k->name ? k->name : "?");
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            fprintf(trace_out, "%llu\t%llu\tmemcpy\t%llu bytes\n", (unsigned long long)m->start,
                    (unsigned long long)m->end, (unsigned long long)m->bytes);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            fprintf(trace_out, "%llu\t%llu\tmemset\t%llu bytes\n", (unsigned long long)m->start,
                    (unsigned long long)m->end, (unsigned long long)m->bytes);
        }
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    if (dropped) fprintf(stderr, "kernel_trace: %zu records dropped\n", dropped);
    free(buf);
}

static void trace_stop(void)
{
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (trace_out && fclose(trace_out) != 0) fprintf(stderr, "kernel_trace: writing the trace failed\n");
    trace_out = NULL;
}

__attribute__((constructor)) static void trace_start(void)
{
    const char *path = getenv("KERNEL_TRACE");
    if (!path || !*path) return;
    trace_out = fopen(path, "w");
    if (!trace_out) { perror(path); exit(1); }
    CUptiResult r = cuptiActivityRegisterCallbacks(trace_buffer_requested, trace_buffer_completed);
    if (r != CUPTI_SUCCESS) trace_fail("registering buffers", r);
    static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if ((r = cuptiActivityEnable(kinds[i])) != CUPTI_SUCCESS) trace_fail("enabling an activity kind", r);
    atexit(trace_stop);
}
