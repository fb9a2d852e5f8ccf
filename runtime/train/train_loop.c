/* train_loop.c — the one training loop of `llmc-train run` and `llmc-train-cuda
 * run` over a backend (train_loop.h). It reads as the run does:
 *   parse the command line, load the plan, check it against the backend;
 *   start the ranks; open the shards; initialise the host model;
 *   build the backend's training state; resolve steps, schedule, fingerprint;
 *   resume; open metrics; train step by step; final checkpoint, export,
 *   held-out evaluation, result.json.
 *
 * Data order: every epoch is a permutation of the prepared rows (Fisher-Yates,
 * seeded by train.seed and the epoch number); epochs are concatenated into one
 * stream and optimizer step s uses stream rows [s*G, (s+1)*G), G = global_batch.
 * Inside a global batch, S = world * grad_accum "slots" each take micro_batch
 * rows: slot s takes positions s, s+S, s+2S, ...; rank r runs slots
 * a*world + r for a = 0..grad_accum-1. So a 2-rank run computes exactly the
 * micro-batches of a 1-rank run with twice the accumulation, and sums them in
 * the same order (accumulate, then the rank-ordered all-reduce): same bits.
 *
 * Loss: HF's num_items_in_batch behaviour — the sum of token cross-entropies
 * over the whole global batch (all micro-batches, all ranks) divided by its
 * number of label tokens. Gradients are summed unscaled, then multiplied once
 * by 1 / that count inside the backend's optimizer step.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "checkpoint.h"
#include "log.h"
#include "metrics.h"
#include "prom.h"
#include "rng.h"
#include "row_stream.h"
#include "run_formats.h"   /* contract/: result.json, the metrics and Prometheus files */
#include "sha256.h"
#include "run_init.h"
#include "shard_io.h"
#include "plan_limits.h"   /* contract/: plan_epoch_steps, as llmc counts them */
#include "stopsig.h"
#include "train_loop.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    uint32_t *ids, *pos;
    uint8_t *mask;
    Batch b;
} BatchBuf;

static int batch_alloc(BatchBuf *bb, int B, int T)
{
    size_t n = (size_t)B * T;
    bb->ids = malloc(n * 4);
    bb->pos = malloc(n * 4);
    bb->mask = malloc(n);
    bb->b = (Batch){bb->ids, bb->pos, bb->mask, B, T};
    return bb->ids && bb->pos && bb->mask ? 0 : -1;
}

static void batch_free(BatchBuf *bb) { free(bb->ids); free(bb->pos); free(bb->mask); }

/* Read rows into bb; ids must be inside the model's vocabulary and positions
 * no later than their place in the row. Adds the non-padding tokens to *tokens. */
static int batch_read(const ShardSet *set, const uint64_t *rows, int B, int vocab, BatchBuf *bb,
                      int64_t *tokens, char *err, size_t errlen)
{
    size_t T = set->context;
    for (int r = 0; r < B; r++) {
        if (shard_set_read_rows(set, rows[r], 1, bb->ids + r * T, bb->pos + r * T, bb->mask + r * T, err, errlen))
            return -1;
        for (size_t t = 0; t < T; t++) {
            uint32_t id = bb->ids[r * T + t], pos = bb->pos[r * T + t];
            if (id >= (uint32_t)vocab) {
                snprintf(err, errlen, "%s: row %" PRIu64 " has token id %u, outside the model's vocabulary of %d",
                         set->dir, rows[r], id, vocab);
                return -1;
            }
            if (pos > t) {
                snprintf(err, errlen, "%s: row %" PRIu64 " position %zu has pos %u (before the row's start)",
                         set->dir, rows[r], t, pos);
                return -1;
            }
            /* padding: pad_id with pos 0 and no label; everything else is a token */
            if (!(id == set->pad_id && pos == 0 && !bb->mask[r * T + t])) (*tokens)++;
        }
    }
    return 0;
}

/* Entropy (nats) of the label tokens' unigram distribution over the training rows:
 * the loss of the best predictor that ignores context. */
static double unigram_baseline(const ShardSet *set, int vocab)
{
    uint64_t *count = calloc((size_t)vocab, sizeof *count);
    uint32_t *ids = malloc(set->context * 4), *pos = malloc(set->context * 4);
    uint8_t *mask = malloc(set->context);
    char err[256];
    uint64_t total = 0;
    for (uint64_t r = 0; count && ids && pos && mask && r < set->n_rows; r++) {
        if (shard_set_read_rows(set, r, 1, ids, pos, mask, err, sizeof err)) break;
        for (uint32_t t = 1; t < set->context; t++)
            if (mask[t] && pos[t] > 0 && ids[t] < (uint32_t)vocab) { count[ids[t]]++; total++; }
    }
    double h = 0;
    for (int v = 0; count && v < vocab; v++)
        if (count[v]) { double p = (double)count[v] / total; h -= p * log(p); }
    free(count); free(ids); free(pos); free(mask);
    return total ? h : NAN;
}

void logits_argmax(const float *logits, size_t rows, int V, uint32_t *argmax)
{
    for (size_t n = 0; n < rows; n++) {
        const float *row = logits + n * V;
        int best = -1;   /* none yet: NaN is never the greatest */
        for (int v = 0; v < V; v++)
            if (!isnan(row[v]) && (best < 0 || row[v] > row[best])) best = v;
        argmax[n] = best < 0 ? 0 : (uint32_t)best;
    }
}

/* Held-out evaluation: mean loss, and exact-match accuracy of greedy decoding.
 * Greedy decoding reproduces a document's labelled answer exactly iff the argmax
 * at every label position equals the label, so teacher-forced argmax checks it
 * exactly. Documents are the pos==0-started segments of each row. The backend
 * runs micro-batches of B rows; the last one is filled up with row r0, whose
 * copies count for nothing. */
typedef struct { int64_t docs, correct, labels; double loss; } EvalResult;

static int evaluate(const TrainBackend *be, const char *dir, int B, int vocab, EvalResult *res, char *err,
                    size_t errlen)
{
    ShardSet set;
    memset(res, 0, sizeof *res);
    if (shard_set_open(&set, dir, err, errlen)) return -1;
    int T = (int)set.context;
    BatchBuf bb;
    uint64_t *rows = malloc((size_t)B * sizeof *rows);
    uint32_t *argmax = malloc((size_t)B * T * sizeof *argmax);
    int rc = rows && argmax && !batch_alloc(&bb, B, T) ? 0 : -1;
    if (rc) snprintf(err, errlen, "out of memory");
    for (uint64_t r0 = 0; !rc && r0 < set.n_rows; r0 += (uint64_t)B) {
        int nb = (int)(set.n_rows - r0 < (uint64_t)B ? set.n_rows - r0 : (uint64_t)B);
        int64_t tok = 0, n_lab;
        double loss;
        for (int i = 0; i < B; i++) rows[i] = r0 + (uint64_t)(i < nb ? i : 0);
        if (batch_read(&set, rows, B, vocab, &bb, &tok, err, errlen)) { rc = -1; break; }
        if (be->eval_forward(be->self, &bb.b, nb, &loss, &n_lab, argmax)) {
            snprintf(err, errlen, "%s: the forward pass failed", dir);
            rc = -1;
            break;
        }
        res->loss += loss;
        res->labels += n_lab;
        for (int r = 0; r < nb; r++) {
            int doc_has_label = 0, doc_ok = 1;
            for (int t = 0; t < T; t++) {
                size_t n = (size_t)r * T + t;
                if (bb.pos[n] == 0 && t > 0) {   /* a document ends before t */
                    if (doc_has_label) { res->docs++; res->correct += doc_ok; }
                    doc_has_label = 0; doc_ok = 1;
                }
                if (t + 1 < T && bb.mask[n + 1] && bb.pos[n + 1] > 0) {
                    doc_has_label = 1;
                    if (argmax[n] != bb.ids[n + 1]) doc_ok = 0;
                }
            }
            if (doc_has_label) { res->docs++; res->correct += doc_ok; }
        }
    }
    if (res->labels) res->loss /= (double)res->labels;
    free(rows);
    free(argmax);
    if (bb.ids || bb.pos || bb.mask) batch_free(&bb);
    shard_set_close(&set);
    return rc;
}

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s run [--eval-shards DIR] [--stop-after N] [--fresh] PLAN.json\n"
            "  --eval-shards DIR  after training, report loss and greedy exact-match accuracy on\n"
            "                     prepared held-out shards (written to OUTPUT_DIR/result.json)\n"
            "  --stop-after N     behave as if a stop signal arrived after step N (checkpoint, exit %d)\n"
            "  --fresh            start at step 0 even though the checkpoint directory holds checkpoints\n"
            "                     (they are kept; rotation removes them oldest first)\n"
            "progress goes to stdout, warnings and errors to stderr; see llmc-train(1)\n"
            "exit status: 0 done, 1 failed, 2 usage or plan error, %d stopped by a signal (requeue)\n",
            prog, STOP_EXIT_REQUEUE, STOP_EXIT_REQUEUE);
}

typedef struct {
    const char *plan_path, *eval_dir;
    int64_t stop_after;
    int fresh;
} RunArgs;

/* 0 parsed; otherwise the exit code (0 after --help). */
static int parse_args(const char *prog, int argc, char **argv, RunArgs *a, int *exit_code)
{
    static const struct option longopts[] = {
        {"eval-shards", required_argument, NULL, 'e'},
        {"stop-after", required_argument, NULL, 's'},
        {"fresh", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char cmd[64];
    snprintf(cmd, sizeof cmd, "%s run", prog);
    memset(a, 0, sizeof *a);
    a->stop_after = -1;
    optind = 1;
    opterr = 0;
    int c;
    long long v;
    *exit_code = 2;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'e': a->eval_dir = optarg; break;
        case 'f': a->fresh = 1; break;
        case 's':
            if (args_int(cmd, "--stop-after", optarg, 0, INT64_MAX, &v)) return -1;
            a->stop_after = v;
            break;
        case 'h': usage(stdout, prog); *exit_code = 0; return -1;
        default: args_getopt_error(cmd, c, argv); return -1;
        }
    }
    if (optind == argc) { usage(stderr, prog); return -1; }
    if (argc - optind > 1) {
        args_usage_error(cmd, "one PLAN.json, not '%s' too", argv[optind + 1]);
        return -1;
    }
    a->plan_path = argv[optind];
    return 0;
}

/* Write OUTPUT_DIR/result.json (atomic). */
static void write_result(const char *out_dir, int64_t steps, double final_loss, double baseline,
                         const EvalResult *ev)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/" RUN_RESULT_FILE, out_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    const char *const *k = result_keys;   /* contract/run_formats.h */
    fprintf(f, "{\n  \"%s\": %" PRId64 ",\n  \"%s\": %.6f,\n  \"%s\": %.6f", k[RK_STEPS], steps, k[RK_FINAL_LOSS],
            final_loss, k[RK_UNIGRAM_BASELINE], baseline);
    if (ev)
        fprintf(f, ",\n  \"%s\": %.6f,\n  \"%s\": %" PRId64 ",\n  \"%s\": %" PRId64 ",\n  \"%s\": %.6f",
                k[RK_EVAL_LOSS], ev->loss, k[RK_EVAL_DOCUMENTS], ev->docs, k[RK_EVAL_CORRECT], ev->correct,
                k[RK_EVAL_ACCURACY], ev->docs ? (double)ev->correct / ev->docs : 0.0);
    fprintf(f, "\n}\n");
    int bad = fflush(f) || fsync(fileno(f));
    if (fclose(f) || bad || rename(tmp, path)) unlink(tmp);
}

/* The final loss: the mean of the last 10% of steps (at least 1) in the metrics
 * file, or `last` when it cannot be read. */
static double final_loss(const char *metrics_path, int64_t total, double last)
{
    double fl = last;
    FILE *f = fopen(metrics_path, "r");
    if (!f) return fl;
    double *ls = malloc((size_t)total * sizeof *ls);
    int64_t n = 0;
    char line[512], key[32];
    int kl = snprintf(key, sizeof key, "\"%s\":", metrics_keys[MK_LOSS]);
    while (ls && n < total && fgets(line, sizeof line, f)) {
        char *p = strstr(line, key);
        if (p) ls[n++] = strtod(p + kl, NULL);
    }
    fclose(f);
    int64_t k = n / 10 > 0 ? n / 10 : 1;
    if (ls && n >= k) { fl = 0; for (int64_t i = n - k; i < n; i++) fl += ls[i]; fl /= (double)k; }
    free(ls);
    return fl;
}

/* Everything one run holds; train_loop_run frees it on every path. */
typedef struct {
    const TrainBackend *be;
    RunArgs args;
    RunPlan plan;
    int rank, world, is0;
    ShardSet set;
    int have_plan, have_dist, have_set, have_be;
    Model hm;
    Model tv;           /* what trains (model_trainable): AdamW, checkpoints and resume cover it */
    int have_tv;
    ModelPart part;     /* what this rank's state is made from (backend state_part; n < 0: all) */
    AdamW opt;
    CkptPlanRef plan_ref;   /* recorded in each checkpoint: export needs no --plan */
    BatchBuf bb;
    RowStream rs;
    uint64_t *rows;
    MetricsFile mf;
    int lock_fd;        /* the checkpoint directory's .run.lock (rank 0), -1 when not held */
    int64_t total;
    LrSchedule sch;
    CkptFingerprint fp;
    TrainState st;
    double baseline, last_loss;
    char prom_path[4200];
    PromMetrics prom;   /* the last step's, written again after each checkpoint (its step is in the file) */
    int have_prom;
} Run;

/* The time left for `left` more steps at the mean of the `n` steps timed so far
 * ("1h02m", "3m20s", "12s"; "?" before a step was timed, "0s" when done). */
static void eta_text(char *out, size_t cap, int64_t n, double sum_s, int64_t left)
{
    if (left <= 0) { snprintf(out, cap, "0s"); return; }
    if (n <= 0 || !(sum_s > 0)) { snprintf(out, cap, "?"); return; }
    double s = sum_s / (double)n * (double)left;
    if (s >= 1e9) { snprintf(out, cap, ">30y"); return; }
    long t = (long)(s + 0.5);
    if (t == 0) snprintf(out, cap, "<1s");
    else if (t >= 86400) snprintf(out, cap, "%ldd%02ldh", t / 86400, t % 86400 / 3600);
    else if (t >= 3600) snprintf(out, cap, "%ldh%02ldm", t / 3600, t % 3600 / 60);
    else if (t >= 60) snprintf(out, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, cap, "%lds", t);
}

/* A checkpoint no rank holds whole (ZeRO-3): rank 0 lays the files out, every
 * rank writes its part, rank 0 seals it. Each phase ends in a collective that
 * tells every rank whether one failed, so all stop together. */
static int save_checkpoint_sharded(Run *R)
{
    const TrainBackend *be = R->be;
    const RunPlan *plan = &R->plan;
    char err[1024] = "";
    int bad = R->is0 && ckpt_shard_begin(plan->ckpt_dir, &R->tv, &R->opt, R->st.step, err, sizeof err);
    if (bad) log_error("checkpoint: %s", err);
    if (be->any(be->self, bad)) return -1;
    bad = be->get_state_part(be->self, &R->hm, &R->opt) ||
          ckpt_shard_write(plan->ckpt_dir, &R->tv, &R->opt, R->st.step, &R->part, err, sizeof err);
    if (bad && err[0]) log_error("checkpoint: %s", err);
    if (be->any(be->self, bad)) return -1;
    bad = R->is0 && ckpt_shard_finish(plan->ckpt_dir, &R->tv, &R->opt, &R->st, &R->fp, &R->plan_ref,
                                      plan->ckpt_keep, err, sizeof err);
    if (bad) log_error("checkpoint: %s", err);
    if (be->any(be->self, bad)) return -1;
    if (R->is0 && R->have_prom) prom_write(R->prom_path, &R->prom);
    return 0;
}

/* The backend's state into hm/opt, then (rank 0) a checkpoint of st. */
static int save_checkpoint(Run *R)
{
    const TrainBackend *be = R->be;
    char err[1024];
    if (R->part.n >= 0 && be->get_state_part) return save_checkpoint_sharded(R);
    if (be->get_state && be->get_state(be->self, &R->hm, &R->opt, R->is0)) return -1;
    if (R->is0 && ckpt_save(R->plan.ckpt_dir, &R->tv, &R->opt, &R->st, &R->fp, &R->plan_ref, R->plan.ckpt_keep, err, sizeof err)) {
        log_error("checkpoint: %s", err);
        return -1;
    }
    if (R->is0 && R->have_prom) prom_write(R->prom_path, &R->prom);
    return 0;
}

/* Shards, host model, backend state, schedule, fingerprint, buffers, resume,
 * metrics file: everything before the first step. 0 or -1 (logged). */
static int run_setup(Run *R)
{
    const TrainBackend *be = R->be;
    RunPlan *plan = &R->plan;
    if (R->world != plan->data_parallel) {
        log_error("the plan is for %d data-parallel ranks, this run has %d", plan->data_parallel, R->world);
        return -1;
    }
    if (be->preflight && be->preflight(be->self, plan)) return -1;
    if (R->is0) {   /* before any checkpoint is read: a second run of this plan stops here */
        char warn[512], err[1024];
        if ((R->lock_fd = run_lock_take(plan->ckpt_dir, warn, sizeof warn, err, sizeof err)) < 0) {
            log_error("%s", err);
            return -1;
        }
        if (warn[0]) log_warn("%s", warn);
    }
    if (run_open_shards(&R->set, plan, &plan->model)) return -1;
    R->have_set = 1;
    if (model_init(&R->hm, &plan->model)) { log_error("cannot allocate the model"); return -1; }
    if (run_finetune_attach(&R->hm, plan)) return -1;   /* the layout only: the weights come after create */
    if (model_trainable(&R->hm, &R->tv)) { log_error("the trainable tensors are not one contiguous range"); return -1; }
    R->have_tv = 1;
    if (R->is0 && run_check_space(plan, R->hm.n_floats, R->tv.n_floats)) return -1;
    if (adamw_init(&R->opt, R->tv.n_floats, plan->beta1, plan->beta2, plan->eps, plan->weight_decay)) {
        log_error("out of memory");
        return -1;
    }
    adamw_set_states(&R->opt, plan->optimizer_states, plan->seed);
    size_t n_params = 0;
    char where[128] = "", setup[512] = "";
    R->have_be = 1;   /* destroy() from here on, also after a failed create() */
    if (be->create(be->self, plan, &R->hm, &R->opt, &n_params, where, sizeof where, setup, sizeof setup)) return -1;
    /* what this rank's state is made from (ZeRO-3: its shard): all it reads of the
     * initial weights and of a resumed checkpoint */
    R->part = (ModelPart){-1, NULL};
    if (be->state_part && be->state_part(be->self, &R->hm, &R->part)) return -1;
    if (R->tv.w != R->hm.w || R->tv.n_floats != R->hm.n_floats) R->part.n = -1;   /* resume reads the view: all */
    if (run_init_weights(&R->hm, plan, &plan->model, &R->part)) return -1;

    const int MB = plan->micro_batch, G = plan->global_batch;
    double epoch_steps = plan_epoch_steps(plan->epochs, (double)R->set.n_rows, G);
    if (plan->max_steps <= 0 && epoch_steps < 1) {   /* llmc check refuses the same plan */
        log_error("train.epochs = %.3g over %" PRIu64 " rows at a global batch of %d is %.3g of one optimizer step; "
                  "epochs = %g gives one", plan->epochs, (uint64_t)R->set.n_rows, G, epoch_steps,
                  ceil(plan->epochs / epoch_steps * 1e6) / 1e6);
        return -1;
    }
    int64_t total = plan->max_steps > 0 ? plan->max_steps : (int64_t)ceil(epoch_steps);
    R->total = total < 1 ? 1 : total;
    R->sch = (LrSchedule){plan->schedule,
                          plan->lr, plan->min_lr, plan->warmup_steps >= 0 ? plan->warmup_steps
                                                                          : warmup_from_ratio(R->total, plan->warmup_ratio),
                          R->total};
    run_fingerprint(plan, &R->set, R->total, R->sch.warmup_steps, &R->fp);
    if (batch_alloc(&R->bb, MB, plan->context) || !(R->rows = malloc((size_t)MB * sizeof *R->rows)) ||
        row_stream_init(&R->rs, R->set.n_rows, plan->seed)) {
        log_error("out of memory");
        return -1;
    }

    rng_seed(&R->st.rng, plan->seed);
    int got = run_resume(plan, &R->fp, R->total, R->args.fresh, &R->tv, &R->opt, &R->st, &R->part, R->is0);
    if (got < 0) return -1;
    if (be->set_state && be->set_state(be->self, &R->hm, &R->opt, got)) return -1;
    R->baseline = R->is0 ? unigram_baseline(&R->set, plan->model.vocab) : 0;
    if (R->is0) {
        if (mkdir_parents(plan->out_dir)) { log_error("%s: %s", plan->out_dir, strerror(errno)); return -1; }
        if (metrics_open(&R->mf, plan->metrics_path, R->st.step)) {
            log_error("%s: %s", plan->metrics_path, strerror(errno));
            return -1;
        }
    }
    if (be->begin && be->begin(be->self, plan, R->st.step, R->is0)) return -1;
    if (R->is0)
        log_info("training %" PRId64 " steps%s: %zu parameters, %" PRIu64 " rows of %d tokens, global batch %d "
                 "(micro %d x accum %d x ranks %d)%s, unigram baseline %.4f",
                 R->total, where, n_params, R->set.n_rows, plan->context, G, MB, plan->grad_accum, R->world, setup,
                 R->baseline);
    snprintf(R->prom_path, sizeof R->prom_path, "%s/" RUN_PROM_FILE, plan->out_dir);
    return 0;
}

/* Steps until the plan's last one or a stop: 0 done, STOP_EXIT_REQUEUE stopped
 * with a checkpoint, -1 failed (logged). */
static int run_steps(Run *R)
{
    const TrainBackend *be = R->be;
    const RunPlan *plan = &R->plan;
    TrainState *st = &R->st;
    const int MB = plan->micro_batch, GA = plan->grad_accum, S = R->world * GA;
    char err[1024];
    /* progress goes to stdout: one line updated in place on a terminal. Both
     * streams: mpirun gives its ranks a pty for stdout only, and its log wants lines. */
    int tty = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
    double last_ckpt = now_s();
    double timed_s = 0;   /* wall time of the steps after this process's first (warm-up), for the ETA */
    int64_t timed = 0, first = st->step + 1;
    StepDrift drift; step_drift_init(&drift, plan->json);   /* step time vs the plan's estimate */

    while (st->step < R->total) {
        double t0 = now_s();
        double sums[2] = {0, 0};   /* label count, tokens */
        for (int a = 0; a < GA; a++) {
            int slot = a * R->world + R->rank;
            for (int i = 0; i < MB; i++)
                R->rows[i] = row_stream_row(&R->rs, st->rows_consumed + slot + (int64_t)i * S);
            int64_t tok = 0, n_lab;
            if (batch_read(&R->set, R->rows, MB, plan->model.vocab, &R->bb, &tok, err, sizeof err)) {
                log_error("%s", err);
                return -1;
            }
            if (be->micro_step(be->self, &R->bb.b, a, GA, &n_lab)) return -1;
            sums[0] += (double)n_lab;
            sums[1] += (double)tok;
        }
        if (be->sum_f64(be->self, sums, 2)) return -1;
        float inv = sums[0] > 0 ? (float)(1.0 / sums[0]) : 0.0f;
        double lr = lr_at(&R->sch, st->step), gn, loss_sum;
        if (be->optimizer_step(be->self, inv, lr, plan->grad_clip, &gn, &loss_sum)) return -1;
        if (be->sum_f64(be->self, &loss_sum, 1)) return -1;
        st->step++;
        st->rows_consumed += plan->global_batch;
        st->tokens_seen += (int64_t)sums[1];
        double dt = now_s() - t0, loss = sums[0] > 0 ? loss_sum / sums[0] : 0.0;
        R->last_loss = loss;
        char extra[128] = "";
        if (be->step_stats && be->step_stats(be->self, st->step, dt, R->is0, extra, sizeof extra)) return -1;
        if (!isfinite(loss)) {
            log_error("step %" PRId64 ": loss is %g; stopping (no checkpoint of a diverged model)", st->step, loss);
            return -1;
        }
        if (R->is0) {
            StepMetrics sm = {st->step, loss, lr, gn, (int64_t)sums[1], sums[1] / dt, dt, peak_rss_bytes()};
            if (metrics_write(&R->mf, &sm)) { log_error("%s: write failed: %s", plan->metrics_path, strerror(errno)); return -1; }
            R->prom = (PromMetrics){plan->job, (long)st->step, (long)R->total, loss, lr, sums[1] / dt, dt,
                                    (double)st->tokens_seen, gn, R->world, drift.estimate_s,
                                    drift.memory_estimate_bytes, plan->ckpt_dir};
            R->have_prom = 1;
            step_drift_feed(&drift, st->step, dt);
            prom_write(R->prom_path, &R->prom);
            if (st->step > first) { timed_s += dt; timed++; }
            if (st->step % plan->log_every == 0 || st->step == R->total) {
                char eta[32];
                eta_text(eta, sizeof eta, timed, timed_s, R->total - st->step);
                if (tty) {
                    printf("\r%sstep %" PRId64 "/%" PRId64 "  loss %.4f  lr %.3g  |g| %.3f  %.0f tok/s  eta %s%s   ",
                           log_prefix(), st->step, R->total, loss, lr, gn, sums[1] / dt, eta, extra);
                    fflush(stdout);
                } else
                    log_info("step %" PRId64 "/%" PRId64 " loss %.4f lr %.3g grad_norm %.3f %.0f tok/s %.3fs eta %s%s",
                             st->step, R->total, loss, lr, gn, sums[1] / dt, dt, eta, extra);
            }
        }
        int stop = be->any(be->self, stopsig_requested() || st->step == R->args.stop_after);
        int due = (plan->ckpt_every_steps > 0 && st->step % plan->ckpt_every_steps == 0) ||
                  (R->is0 && plan->ckpt_every_seconds > 0 && now_s() - last_ckpt >= plan->ckpt_every_seconds);
        due = be->any(be->self, due);   /* rank 0's clock decides for everyone */
        if (stop < 0 || due < 0) return -1;
        if ((stop || due) && st->step < R->total) {
            if (R->is0 && tty) fputc('\n', stdout);   /* end the progress line: the save logs its own */
            if (save_checkpoint(R)) return -1;
            last_ckpt = now_s();
            if (R->is0) log_info("checkpoint step %" PRId64 " -> %s", st->step, plan->ckpt_dir);
        }
        if (stop && st->step < R->total) {   /* at the last step: finish (export) instead */
            be->barrier(be->self);
            const char *sig = stopsig_name();
            if (R->is0) log_info("stopping at step %" PRId64 " (%s); exit %d to be requeued", st->step,
                                 sig ? sig : "--stop-after", STOP_EXIT_REQUEUE);
            return STOP_EXIT_REQUEUE;
        }
    }
    if (R->is0 && tty) fputc('\n', stdout);
    return 0;
}

/* Rank 0 after the last step: final checkpoint (a requeued job then has nothing
 * left to do), the HF export and loss curve, held-out eval, result.json. */
/* The final HF export written by every rank, each its part of the weights
 * (ZeRO-3: no rank holds them whole), phases ended by a collective as in
 * save_checkpoint_sharded. The host model holds this rank's part: the
 * sharded checkpoint just before took it from the backend. */
static int export_sharded(Run *R, const char *final_dir)
{
    const TrainBackend *be = R->be;
    const RunPlan *plan = &R->plan;
    char err[1024] = "";
    if (R->is0) log_info("export %s: each rank writes its part of the weights", final_dir);
    int bad = R->is0 && hf_export_shard_begin(final_dir, &R->hm, run_export_dtype(plan), plan->tokenizer_path,
                                              run_export_source(plan), err, sizeof err);
    if (bad) log_error("export: %s", err);
    if (be->any(be->self, bad)) return -1;
    bad = hf_export_shard_write(final_dir, &R->hm, &R->part, err, sizeof err);
    if (bad) log_error("export: %s", err);
    if (be->any(be->self, bad)) return -1;
    bad = R->is0 && hf_export_shard_finish(final_dir, err, sizeof err);
    if (bad) log_error("export: %s", err);
    return be->any(be->self, bad) ? -1 : 0;
}

static int run_finish(Run *R)
{
    const TrainBackend *be = R->be;
    const RunPlan *plan = &R->plan;
    char err[1024], final_dir[4200];
    if (save_checkpoint(R)) return -1;
    run_final_dir(plan, final_dir, sizeof final_dir);
    /* a sharded run exports sharded; LoRA's part is of the adapters, whose
     * merged export needs the base weights whole */
    int sharded = R->part.n >= 0 && be->get_state_part, by_parts = sharded && !R->hm.lora;
    if (by_parts && export_sharded(R, final_dir)) return -1;
    /* evaluation runs on rank 0 alone: after a sharded run, the whole weights
     * are gathered there for it (held-out checks of small runs, not 72B) */
    if (sharded && (!by_parts || R->args.eval_dir) && be->get_state &&
        be->get_state(be->self, &R->hm, &R->opt, R->is0))
        return -1;
    if (!R->is0) return 0;
    metrics_close(&R->mf);
    if (by_parts) run_write_curve(plan, R->baseline);
    else if (run_write_final(plan, &R->hm, R->baseline, final_dir, sizeof final_dir)) return -1;
    double fl = final_loss(plan->metrics_path, R->total, R->last_loss);
    EvalResult ev;
    int have_eval = 0;
    if (R->args.eval_dir) {
        if (evaluate(be, R->args.eval_dir, plan->micro_batch, plan->model.vocab, &ev, err, sizeof err)) {
            log_error("eval: %s", err);
            return -1;
        }
        have_eval = 1;
    }
    write_result(plan->out_dir, R->st.step, fl, R->baseline, have_eval ? &ev : NULL);
    char extra[128] = "";
    if (be->final_stats) be->final_stats(be->self, extra, sizeof extra);
    log_info("done: %" PRId64 " steps, final loss %.4f (mean of the last steps) vs unigram baseline %.4f%s; "
             "model in %s", R->st.step, fl, R->baseline, extra, final_dir);
    if (have_eval)
        log_info("held-out: loss %.4f, greedy exact match %" PRId64 "/%" PRId64 " (%.1f%%)", ev.loss, ev.correct,
                 ev.docs, ev.docs ? 100.0 * ev.correct / ev.docs : 0.0);
    return 0;
}

int train_loop_run(const TrainBackend *be, int argc, char **argv)
{
    Run *R = calloc(1, sizeof *R);
    if (!R) { log_error("out of memory"); return 1; }
    R->be = be;
    R->last_loss = NAN;
    R->lock_fd = -1;
    R->mf.fd = -1;   /* not 0 (stdin): metrics_close at the end closes only what was opened */
    int rc = 2;
    char err[1024];
    /* First thing: a USR2/TERM that arrives while the plan loads or ranks
     * connect (a requeued job gets its warning early) is a stop request like
     * any other, not the default action (death, no message). */
    stopsig_install();
    if (parse_args(be->prog, argc, argv, &R->args, &rc)) goto out;
    if (run_plan_load(&R->plan, R->args.plan_path, err, sizeof err)) {
        log_error("%s", err);
        goto out;
    }
    R->have_plan = 1;
    /* the plan as it is now, by absolute path and content, for the checkpoints */
    char abs_plan[PATH_MAX];
    if (!realpath(R->plan.path, abs_plan)) {
        log_error("%s: %s", R->plan.path, strerror(errno));
        goto out;
    }
    if (strlen(abs_plan) >= sizeof R->plan_ref.path || sha256_file_hex(abs_plan, R->plan_ref.sha256)) {
        log_error("%s: cannot read it again to record it in the checkpoints", abs_plan);
        goto out;
    }
    memcpy(R->plan_ref.path, abs_plan, strlen(abs_plan) + 1);
    if (be->check_plan && be->check_plan(be->self, &R->plan, err, sizeof err)) {
        log_error("%s: %s", R->plan.path, err);
        goto out;
    }
    /* what the end of the run needs, before anything is written: the
     * tokenizer files the export copies (found missing only after the whole
     * run, final.tmp left, before) */
    if (run_plan_tokenizer_check(&R->plan, 1, err, sizeof err)) {
        log_error("%s: tokenizer.path: %s", R->plan.path, err);
        goto out;
    }
    rc = 1;
    if (be->dist_init(be->self, &R->rank, &R->world)) {
        if (stopsig_requested()) {   /* stopped while the ranks gathered: the latest checkpoint stands */
            log_info("stop signal %s before training began: exit %d to be requeued",
                     stopsig_name() ? stopsig_name() : "?", STOP_EXIT_REQUEUE);
            rc = STOP_EXIT_REQUEUE;
        }
        goto out;
    }
    R->have_dist = 1;
    R->is0 = R->rank == 0;
    if (run_setup(R)) goto out;
    int r = run_steps(R);
    if (r) { rc = r < 0 ? 1 : r; goto out; }
    if (run_finish(R)) goto out;
    be->barrier(be->self);
    rc = 0;
out:
    metrics_close(&R->mf);
    row_stream_free(&R->rs);
    free(R->rows);
    if (R->bb.ids || R->bb.pos || R->bb.mask) batch_free(&R->bb);
    if (R->have_be) be->destroy(be->self);
    adamw_free(&R->opt);
    if (R->have_tv) model_trainable_free(&R->hm, &R->tv);
    run_finetune_detach(&R->hm);
    model_free(&R->hm);
    if (R->have_set) shard_set_close(&R->set);
    if (R->have_plan) run_plan_free(&R->plan);
    if (R->have_dist) be->dist_finalize(be->self);
    if (R->lock_fd >= 0) close(R->lock_fd);
    free(R);
    return rc;
}
