/* metrics.h — the per-step metrics file (JSON lines) and the loss-curve SVG.
 *
 * One line per optimizer step, keys in this order:
 *   {"step":N,"loss":L,"lr":X,"grad_norm":G,"tokens":T,"tokens_per_s":R,
 *    "step_time_s":S,"peak_rss_bytes":B}
 * step is 1-based (the number of optimizer steps done); loss is the mean
 * cross-entropy over the label tokens of the global batch. On resume the file
 * is cut back to the checkpoint's step so it never holds a step twice. */
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

typedef struct { FILE *f; char *path; } MetricsFile;

/* Open for appending after keeping only lines with step <= keep_through. */
int metrics_open(MetricsFile *mf, const char *path, int64_t keep_through);
int metrics_write(MetricsFile *mf, const StepMetrics *m);
void metrics_close(MetricsFile *mf);

/* Peak resident set size of this process, bytes. */
uint64_t peak_rss_bytes(void);

/* Read the losses back from a metrics file and draw loss-vs-step as SVG
 * (atomic write). A horizontal reference line at `baseline` when > 0. */
int metrics_svg(const char *metrics_path, const char *svg_path, double baseline);

#endif
