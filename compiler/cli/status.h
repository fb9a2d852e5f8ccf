/* status.h — `llmc status`: one view of a submitted run (docs/status.md).
 *
 * Joins Slurm's view of the job (scontrol, sacct when accounting is there), the
 * trainer's files (metrics.jsonl or LLaMA-Factory's trainer_log.jsonl, the
 * checkpoints, result.json, the nvidia-smi samples) and the plan's estimate. */
#ifndef LLMC_STATUS_H
#define LLMC_STATUS_H

#include <stddef.h>

/* argv[0] is "status". Exit 0 (completed, running or waiting), 1 (a job ended
 * otherwise), or 2 for usage and I/O errors. A chain's directory (DIR/submit.sh,
 * a plan.json per job) gets one line per job and the chain's state. */
int status_main(int argc, char **argv);

/* The trainer's log of the run whose plan.json is in dir (or is dir): llmc's
 * metrics.jsonl, or LLaMA-Factory's trainer_log.jsonl; NULL with err set. */
char *status_trainer_log(const char *dir, char *err, size_t errlen);

/* One point of the loss curve. */
typedef struct {
    double step, loss;
} StatusPoint;

/* Write the loss curve (and held-out losses, if any) to path: SVG when path
 * ends in .svg, PNG when it ends in .png. Returns 0, or -1 with err set. */
int status_plot(const char *path, const char *title, const StatusPoint *train, size_t ntrain,
                const StatusPoint *eval, size_t neval, char *err, size_t errlen);

#endif
