/* prom.h — rank 0's training metrics as a Prometheus text file (runtime/train/prom.c),
 * for node_exporter's textfile collector (--collector.textfile.directory).
 *
 * The training loop (runtime/train/train_loop.c) calls prom_write after each step on rank 0:
 *
 *     PromMetrics m = { .job = plan_job, .step = step, .total_steps = steps,
 *                       .loss = loss, .lr = lr, .tokens_per_second = tps,
 *                       .step_seconds = dt, .tokens_total = tokens_seen,
 *                       .grad_norm = norm, .world_size = world };
 *     prom_write(path, &m);     // path e.g. OUTPUT_DIR/llmc_train.prom
 *
 * The file is replaced atomically (temp file in the same directory, fsync,
 * rename), so the collector never reads half a file. Metric names:
 *   llmc_train_step, llmc_train_total_steps, llmc_train_loss, llmc_train_lr,
 *   llmc_train_tokens_per_second, llmc_train_step_seconds, llmc_train_tokens_total,
 *   llmc_train_grad_norm, llmc_train_world_size, llmc_train_peak_rss_bytes
 * and, when the optional fields are set, llmc_train_step_seconds_estimate,
 *   llmc_train_memory_estimate_bytes, llmc_train_checkpoint_step,
 *   llmc_train_checkpoint_timestamp_seconds (mtime of CKPT_DIR/latest, Unix time)
 * all gauges but llmc_train_tokens_total (a counter), labelled {llmc_job="..."}
 * (not `job`: that one is Prometheus' own, the scrape job's). A NaN value (e.g.
 * grad_norm unknown) is written as Prometheus' NaN. The file passes
 * `promtool check metrics` (tests/e2e/prom_test.sh).
 */
#ifndef LLMC_PROM_H
#define LLMC_PROM_H

typedef struct {
    const char *job;            /* plan.json "job"; label value (escaped) */
    long step, total_steps;
    double loss, lr;
    double tokens_per_second, step_seconds;
    double tokens_total;        /* tokens trained on so far, all ranks */
    double grad_norm;
    int world_size;
    /* optional (0/NULL: the gauge is not written) */
    double step_seconds_estimate;   /* llmc_train_step_seconds_estimate: plan.json estimate.step_seconds */
    double memory_estimate_bytes;   /* llmc_train_memory_estimate_bytes: estimate.total_bytes (per GPU) */
    const char *checkpoint_dir;     /* llmc_train_checkpoint_step and _timestamp_seconds: CKPT_DIR/latest */
} PromMetrics;

/* Returns 0, or -1 with a message (log_error) and the file left as it was. */
int prom_write(const char *path, const PromMetrics *m);

#endif
