/* calib_fit.h — a site profile fitted to what runs measured (docs/estimator.md,
 * "Site profiles"), for `llmc calibrate` (a profile from finished runs) and
 * `llmc status` (the refit of a running job's ETA): one reader of each
 * trainer's log, one reader of plan.json into a PlanJob, one fit.
 *
 * A run is a trainer log (the llmc trainer's metrics.jsonl or the CUDA
 * trainer's gpu_metrics.jsonl: step and step_time_s on every line;
 * LLaMA-Factory's trainer_log.jsonl: current_steps, total_steps, elapsed_time)
 * and the plan.json llmc compiled for it. The fit runs the estimator on each
 * plan with a candidate profile and takes the values for which the estimated
 * step times match the measured ones (least squares on log step times). */
#ifndef LLMC_CALIB_FIT_H
#define LLMC_CALIB_FIT_H

#include <limits.h>
#include <stdbool.h>

#include "arena.h"
#include "estimate.h"

/* How far a run's step time may sit from its plan's estimate before `llmc
 * status` says the run drifts, in percent of the measured time. 15: the
 * accuracy a calibrated estimate is held to (the prediction check of
 * tests/estimator: a profile fitted on two shapes predicts a third within
 * 15%; the calibrated models of the literature reach 3-15%). Beyond it the
 * difference is the run's, not the estimator's spread: another fabric or
 * contention than the profile saw, or an uncalibrated default. */
#define CALIB_DRIFT_PERCENT 15.0

enum { CALIB_OK = 0, CALIB_BAD_INPUT = 1, CALIB_IO = 2 };

typedef enum { CALIB_SRC_LLMC, CALIB_SRC_LLMC_GPU, CALIB_SRC_LF, CALIB_SRC_COUNT } CalibSource;
/* the log's file name for each source */
extern const char *const calib_src_names[CALIB_SRC_COUNT];

typedef struct {
    const char *arg;              /* the run as the user named it */
    char *data_path, *plan_path;  /* owned (malloc) */
    CalibSource src;
    /* the measurement */
    double step_s;                /* median after the warm-up (llmc), slope over the span (LF) */
    int steps_used;
    double first_step, last_step; /* the steps it was taken over */
    /* the plan, rebuilt from plan.json */
    Arena *arena;
    PlanJob job;
    double est_default_s;         /* the plan's own estimate, as compiled */
    double est_default_mfu;       /* the mfu it assumed (0: not recorded) */
    char shape[160];
    bool check_only;              /* calibrate --check: predicted, not fitted */
    char err[PATH_MAX + 256];     /* why a call failed: "FILE:LINE: what" */
} CalibRun;

/* Read the log (r->data_path, as r->src) and the plan (r->plan_path); the
 * plan's backend must be the log's trainer. CALIB_OK, else CALIB_BAD_INPUT
 * (the data or plan is unusable) or CALIB_IO, with r->err set. */
int calib_run_load(CalibRun *r);
void calib_run_free(CalibRun *r);

enum { CALIB_P_MFU, CALIB_P_INTER, CALIB_P_INTRA, CALIB_P_OVERHEAD, CALIB_P_COUNT };
extern const char *const calib_param_names[CALIB_P_COUNT];   /* the profile's keys */

typedef struct {
    double v[CALIB_P_COUNT];      /* mfu; bytes/s; bytes/s; seconds */
    bool on[CALIB_P_COUNT];       /* fitted */
    int shapes;                   /* distinct shapes among the fitted runs */
} CalibFit;

/* Fit the values the runs (those not check_only, at least one) can tell
 * apart: the mfu always; with runs on several nodes the network's
 * bandwidth, with several GPUs a node the GPU link's, and on runs without
 * communication a fixed time per step; never more values than shapes. */
void calib_fit(CalibRun *runs, int n, CalibFit *f);
/* The fitted values as a profile the estimator takes. */
void calib_fit_profile(const CalibFit *f, PlanProfile *pf);
/* The run's plan estimated with profile pf (NULL: the defaults); its step time. */
double calib_predict(CalibRun *r, const PlanProfile *pf, Estimate *e);

#endif
