/* metrics.h — the per-step metrics file (JSON lines) and the loss-curve SVG.
 *
 * One line per optimizer step, keys in this order:
 *   {"step":N,"time":"2026-12-01T13:10:20.123Z","loss":L,"lr":X,"grad_norm":G,
 *    "tokens":T,"tokens_per_s":R,"step_time_s":S,"peak_rss_bytes":B}
 * step is 1-based (the number of optimizer steps done); time is when the line
 * was written (ISO 8601, UTC); loss is the mean cross-entropy over the label
 * tokens of the global batch. A value that is not finite (an infinite gradient
 * norm) is written as null, and the line ends with "nonfinite":{"grad_norm":"inf"}
 * naming each such field and its value ("inf", "-inf" or "nan"): every line
 * stays JSON. On resume the file is cut back to the checkpoint's step so it
 * never holds a step twice; a line that is not kept is logged (the count of
 * later steps on stdout, a broken line on stderr), and an older writer's bare
 * inf/nan values are rewritten as above. */
#ifndef LLMC_METRICS_H
#define LLMC_METRICS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    int64_t step;
    double loss, lr, grad_norm;
    int64_t tokens;
    double tokens_per_s, step_time_s;
    uint64_t peak_rss_bytes;
} StepMetrics;

/* fd: O_APPEND, one write() per line; -1 when closed */
typedef struct { int fd; char *path; } MetricsFile;

/* Open for appending after keeping only lines with step <= keep_through. */
int metrics_open(MetricsFile *mf, const char *path, int64_t keep_through);
int metrics_write(MetricsFile *mf, const StepMetrics *m);
void metrics_close(MetricsFile *mf);

/* Peak resident set size of this process, bytes. */
uint64_t peak_rss_bytes(void);

/* Read the losses back from a metrics file and draw loss-vs-step as SVG
 * (atomic write). A horizontal reference line at `baseline` when > 0. */
int metrics_svg(const char *metrics_path, const char *svg_path, double baseline);

/* Step time against the plan's estimate (estimate.step_seconds in plan.json).
 * step_drift_init reads the estimate (and estimate.total_bytes, for the
 * Prometheus file); margin and N come from LLMC_DRIFT_MARGIN (a fraction,
 * default 0.5: measured > 1.5x or < 1/1.5 of the estimate) and LLMC_DRIFT_STEPS
 * (default 20, at most STEP_DRIFT_MAX). step_drift_feed takes each step's
 * measured wall time; the first step of a process (warm-up) is not counted.
 * When N consecutive steps are off by more than the margin in the same
 * direction it logs one warning (log_info) with the median of those N steps,
 * the estimate and which way the plan was wrong, and returns 1; never again in
 * this process. Without an estimate it does nothing. */
#define STEP_DRIFT_MAX 256
struct cJSON;
typedef struct {
    double estimate_s, memory_estimate_bytes, margin;
    int need, run, dir, warned;
    int64_t fed;
    double win[STEP_DRIFT_MAX];
} StepDrift;
void step_drift_init(StepDrift *d, const struct cJSON *plan_json);
int step_drift_feed(StepDrift *d, int64_t step, double measured_s);

#endif
