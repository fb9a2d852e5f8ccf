/* train.c — `llmc-train run PLAN.json`: the training loop on the CPU backend.
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
 * number of label tokens. Gradients are summed unscaled, then divided once.
 */
#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "commands.h"
#include "dist.h"
#include "hf_config.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "ops_cpu.h"
#include "optim.h"
#include "plan.h"
#include "prom.h"
#include "rng.h"
#include "row_stream.h"
#include "run_init.h"
#include "shard_io.h"
#include "stopsig.h"

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

/* Read rows into bb; ids must be inside the model's vocabulary. */
static int batch_read(const ShardSet *set, const uint64_t *rows, int B, int vocab, BatchBuf *bb,
                      int64_t *tokens, char *err, size_t errlen)
{
    size_t T = set->context;
    for (int r = 0; r < B; r++) {
        if (shard_set_read_rows(set, rows[r], 1, bb->ids + r * T, bb->pos + r * T, bb->mask + r * T, err, errlen))
            return -1;
        for (size_t t = 0; t < T; t++) {
            uint32_t id = bb->ids[r * T + t];
            if (id >= (uint32_t)vocab) {
                snprintf(err, errlen, "%s: row %" PRIu64 " has token id %u, outside the model's vocabulary of %d",
                         set->dir, rows[r], id, vocab);
                return -1;
            }
            /* padding: pad_id with pos 0 and no label; everything else is a token */
            if (!(id == set->pad_id && bb->pos[r * T + t] == 0 && !bb->mask[r * T + t])) (*tokens)++;
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

/* Held-out evaluation: mean loss, and exact-match accuracy of greedy decoding.
 * Greedy decoding reproduces a document's labelled answer exactly iff the argmax
 * at every label position equals the label, so teacher-forced argmax checks it
 * exactly. Documents are the pos==0-started segments of each row. */
typedef struct { int64_t docs, correct, labels; double loss; } EvalResult;

static int evaluate(Model *m, const char *dir, int B, EvalResult *res, char *err, size_t errlen)
{
    ShardSet set;
    memset(res, 0, sizeof *res);
    if (shard_set_open(&set, dir, err, errlen)) return -1;
    int T = (int)set.context, V = m->cfg.vocab;
    ModelActs *acts = model_acts_new(&m->cfg, B, T);
    BatchBuf bb;
    uint64_t *rows = malloc((size_t)B * sizeof *rows);
    int rc = acts && rows && !batch_alloc(&bb, B, T) ? 0 : -1;
    if (rc) snprintf(err, errlen, "out of memory");
    for (uint64_t r0 = 0; !rc && r0 < set.n_rows; r0 += (uint64_t)B) {
        int nb = (int)(set.n_rows - r0 < (uint64_t)B ? set.n_rows - r0 : (uint64_t)B);
        int64_t tok = 0, n_lab;
        for (int i = 0; i < B; i++) rows[i] = r0 + (uint64_t)(i < nb ? i : 0);
        if (batch_read(&set, rows, B, V, &bb, &tok, err, errlen)) { rc = -1; break; }
        double loss = model_forward(m, acts, &bb.b, &n_lab);
        const float *lg = model_logits(acts);
        for (int r = 0; r < nb; r++) {
            int doc_has_label = 0, doc_ok = 1;
            for (int t = 0; t < T; t++) {
                size_t n = (size_t)r * T + t;
                if (bb.pos[n] == 0 && t > 0) {   /* a document ends before t */
                    if (doc_has_label) { res->docs++; res->correct += doc_ok; }
                    doc_has_label = 0; doc_ok = 1;
                }
                if (t + 1 < T && bb.mask[n + 1] && bb.pos[n + 1] > 0) {
                    const float *row = lg + n * V;
                    int best = 0;
                    for (int v = 1; v < V; v++) if (row[v] > row[best]) best = v;
                    doc_has_label = 1;
                    if ((uint32_t)best != bb.ids[n + 1]) doc_ok = 0;
                }
            }
            if (doc_has_label) { res->docs++; res->correct += doc_ok; }
        }
        /* rows past nb repeat row r0: drop their loss by recomputing only when needed */
        if (nb == B) { res->loss += loss; res->labels += n_lab; }
        else {
            Batch part = {bb.ids, bb.pos, bb.mask, nb, T};
            ModelActs *pa = model_acts_new(&m->cfg, nb, T);
            if (!pa) { rc = -1; snprintf(err, errlen, "out of memory"); break; }
            res->loss += model_forward(m, pa, &part, &n_lab);
            res->labels += n_lab;
            model_acts_free(pa);
        }
    }
    if (res->labels) res->loss /= (double)res->labels;
    free(rows);
    if (acts) batch_free(&bb);
    model_acts_free(acts);
    shard_set_close(&set);
    return rc;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: llmc-train run PLAN.json [--eval-shards DIR] [--stop-after N] [--fresh]\n"
            "  --eval-shards DIR  after training, report loss and greedy exact-match accuracy on\n"
            "                     prepared held-out shards (written to OUTPUT_DIR/result.json)\n"
            "  --stop-after N     behave as if a stop signal arrived after step N (checkpoint, exit %d)\n"
            "  --fresh            start at step 0 even though the checkpoint directory holds checkpoints\n"
            "                     (they are kept; rotation removes them oldest first)\n",
            STOP_EXIT_REQUEUE);
}

typedef struct {
    const char *plan_path, *eval_dir;
    int64_t stop_after;
    int fresh;
} RunArgs;

static int parse_args(int argc, char **argv, RunArgs *a)
{
    memset(a, 0, sizeof *a);
    a->stop_after = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--eval-shards") && i + 1 < argc) a->eval_dir = argv[++i];
        else if (!strcmp(argv[i], "--fresh")) a->fresh = 1;
        else if (!strcmp(argv[i], "--stop-after") && i + 1 < argc) {
            char *end;
            a->stop_after = strtoll(argv[++i], &end, 10);
            if (*end || a->stop_after < 0) { fprintf(stderr, "llmc-train run: --stop-after wants a step number\n"); return -1; }
        } else if (argv[i][0] == '-' || a->plan_path) {
            usage();
            return -1;
        } else a->plan_path = argv[i];
    }
    if (!a->plan_path) { usage(); return -1; }
    return 0;
}

/* Write OUTPUT_DIR/result.json (atomic). */
static void write_result(const char *out_dir, int64_t steps, double final_loss, double baseline,
                         const EvalResult *ev)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/result.json", out_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "{\n  \"steps\": %" PRId64 ",\n  \"final_loss\": %.6f,\n  \"unigram_baseline\": %.6f", steps,
            final_loss, baseline);
    if (ev)
        fprintf(f, ",\n  \"eval_loss\": %.6f,\n  \"eval_documents\": %" PRId64 ",\n  \"eval_correct\": %" PRId64
                   ",\n  \"eval_accuracy\": %.6f",
                ev->loss, ev->docs, ev->correct, ev->docs ? (double)ev->correct / ev->docs : 0.0);
    fprintf(f, "\n}\n");
    int bad = fflush(f) || fsync(fileno(f));
    if (fclose(f) || bad || rename(tmp, path)) unlink(tmp);
}

int cmd_run(int argc, char **argv)
{
    RunArgs args;
    if (parse_args(argc, argv, &args)) return 2;
    char err[1024];
    RunPlan plan;
    if (run_plan_load(&plan, args.plan_path, err, sizeof err)) {
        fprintf(stderr, "llmc-train run: %s\n", err);
        return 2;
    }
    /* Before the rendezvous: a USR2/TERM that arrives while ranks connect is a
     * stop request like any other, not the default action (death, no message). */
    stopsig_install();
    DistInfo di;
    if (dist_init(&di)) { run_plan_free(&plan); return 1; }
    int rc = 1;
    openblas_set_num_threads(ops_threads());

    ShardSet set;
    Model model = {0};
    AdamW opt = {0};
    ModelActs *acts = NULL;
    BatchBuf bb = {0};
    RowStream rs = {0};
    float *acc = NULL;
    uint64_t *rows = NULL;
    MetricsFile mf = {0};
    int have_set = 0;
    const int is0 = di.rank == 0;

    if (di.world != plan.data_parallel) {
        log_error("the plan is for %d data-parallel ranks, this run has %d", plan.data_parallel, di.world);
        goto out;
    }
    {
        /* weights, gradients, accumulator, two AdamW moments, activations: refuse up
         * front what cannot fit, rather than be killed by the OOM killer mid-run */
        double need = 5.0 * 4.0 * (double)model_param_count(&plan.model) +
                      model_acts_bytes(&plan.model, plan.micro_batch, plan.context);
        double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (have > 0 && need > have) {
            log_error("the CPU backend needs %.1f GiB for this model at micro_batch %d x context %d "
                      "(fp32 weights, gradients, AdamW state, activations); this machine has %.1f GiB",
                      need / 1073741824.0, plan.micro_batch, plan.context, have / 1073741824.0);
            goto out;
        }
    }
    if (run_open_shards(&set, &plan, &plan.model)) goto out;
    have_set = 1;
    if (model_init(&model, &plan.model)) { log_error("cannot allocate the model"); goto out; }
    if (run_init_weights(&model, &plan, &plan.model)) goto out;

    const int T = plan.context, MB = plan.micro_batch, GA = plan.grad_accum, G = plan.global_batch;
    int64_t total = plan.max_steps > 0 ? plan.max_steps
                                       : (int64_t)ceil(plan.epochs * (double)set.n_rows / (double)G);
    if (total < 1) total = 1;
    LrSchedule sch = {plan.schedule == SCHEDULE_LINEAR ? LR_LINEAR : plan.schedule == SCHEDULE_CONSTANT ? LR_CONSTANT : LR_COSINE,
                      plan.lr, plan.min_lr, plan.warmup_steps >= 0 ? plan.warmup_steps
                                                                   : warmup_from_ratio(total, plan.warmup_ratio),
                      total};
    CkptFingerprint fp;
    run_fingerprint(&plan, &set, total, sch.warmup_steps, &fp);
    if (adamw_init(&opt, model.n_floats, plan.beta1, plan.beta2, plan.eps, plan.weight_decay) ||
        !(acts = model_acts_new(&model.cfg, MB, T)) || batch_alloc(&bb, MB, T) ||
        !(acc = malloc(model.n_floats * sizeof *acc)) || !(rows = malloc((size_t)MB * sizeof *rows)) ||
        row_stream_init(&rs, set.n_rows, plan.seed)) {
        log_error("out of memory");
        goto out;
    }

    TrainState st = {0};
    rng_seed(&st.rng, plan.seed);
    if (run_resume(&plan, &fp, total, args.fresh, &model, &opt, &st, is0) < 0) goto out;
    double baseline = is0 ? unigram_baseline(&set, model.cfg.vocab) : 0;
    if (is0) {
        if (mkdir_parents(plan.out_dir)) { log_error("%s: %s", plan.out_dir, strerror(errno)); goto out; }
        if (metrics_open(&mf, plan.metrics_path, st.step)) {
            log_error("%s: %s", plan.metrics_path, strerror(errno));
            goto out;
        }
        log_info("training %" PRId64 " steps: %zu parameters, %" PRIu64 " rows of %d tokens, global batch %d "
                 "(micro %d x accum %d x ranks %d), unigram baseline %.4f",
                 total, model.n_floats, set.n_rows, T, G, MB, GA, di.world, baseline);
    }
    int tty = isatty(STDERR_FILENO);
    double last_ckpt = now_s(), last_loss = NAN;
    char prom_path[4200];
    snprintf(prom_path, sizeof prom_path, "%s/llmc_train.prom", plan.out_dir);
    int S = di.world * GA;
    StepDrift drift; step_drift_init(&drift, plan.json);   /* step time vs the plan's estimate */

    while (st.step < total) {
        double t0 = now_s();
        double sums[3] = {0, 0, 0};   /* loss sum, label count, tokens */
        for (int a = 0; a < GA; a++) {
            int slot = a * di.world + di.rank;
            for (int i = 0; i < MB; i++)
                rows[i] = row_stream_row(&rs, st.rows_consumed + slot + (int64_t)i * S);
            int64_t tok = 0, n_lab;
            if (batch_read(&set, rows, MB, model.cfg.vocab, &bb, &tok, err, sizeof err)) {
                log_error("%s", err);
                goto out;
            }
            sums[0] += model_forward(&model, acts, &bb.b, &n_lab);
            sums[1] += (double)n_lab;
            sums[2] += (double)tok;
            model_backward(&model, acts, &bb.b, 1.0f);
            if (a == 0) memcpy(acc, model.g, model.n_floats * sizeof *acc);
            else for (size_t k = 0; k < model.n_floats; k++) acc[k] += model.g[k];
        }
        if (dist_allreduce_sum_f32(acc, model.n_floats) || dist_allreduce_sum_f64(sums, 3)) goto out;
        float inv = sums[1] > 0 ? (float)(1.0 / sums[1]) : 0.0f;
        for (size_t k = 0; k < model.n_floats; k++) acc[k] *= inv;
        double gn = grad_global_norm(acc, model.n_floats);
        grad_clip(acc, model.n_floats, gn, plan.grad_clip);
        double lr = lr_at(&sch, st.step);
        adamw_step(&opt, model.params, model.n_params, model.w, acc, lr);
        st.step++;
        st.rows_consumed += G;
        st.tokens_seen += (int64_t)sums[2];
        double dt = now_s() - t0, loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
        last_loss = loss;
        if (!isfinite(loss)) {
            log_error("step %" PRId64 ": loss is %g; stopping (no checkpoint of a diverged model)", st.step, loss);
            goto out;
        }
        if (is0) {
            StepMetrics sm = {st.step, loss, lr, gn, (int64_t)sums[2], sums[2] / dt, dt, peak_rss_bytes()};
            if (metrics_write(&mf, &sm)) { log_error("%s: write failed", plan.metrics_path); goto out; }
            PromMetrics pm = {plan.job, (long)st.step, (long)total, loss, lr, sums[2] / dt, dt,
                              (double)st.tokens_seen, gn, di.world, drift.estimate_s, drift.memory_estimate_bytes, plan.ckpt_dir};
            step_drift_feed(&drift, st.step, dt);
            prom_write(prom_path, &pm);
            if (st.step % plan.log_every == 0 || st.step == total) {
                if (tty)
                    fprintf(stderr, "\r%sstep %" PRId64 "/%" PRId64 "  loss %.4f  lr %.3g  |g| %.3f  %.0f tok/s   ",
                            log_prefix(), st.step, total, loss, lr, gn, sums[2] / dt);
                else
                    log_info("step %" PRId64 "/%" PRId64 " loss %.4f lr %.3g grad_norm %.3f %.0f tok/s %.3fs",
                             st.step, total, loss, lr, gn, sums[2] / dt, dt);
            }
        }
        int stop = dist_any(stopsig_requested() || st.step == args.stop_after);
        int due = (plan.ckpt_every_steps > 0 && st.step % plan.ckpt_every_steps == 0) ||
                  (is0 && plan.ckpt_every_seconds > 0 && now_s() - last_ckpt >= plan.ckpt_every_seconds);
        due = dist_any(due);   /* rank 0's clock decides for everyone */
        if (stop < 0 || due < 0) goto out;
        if ((stop || due) && st.step < total) {
            if (is0 && ckpt_save(plan.ckpt_dir, &model, &opt, &st, &fp, plan.ckpt_keep, err, sizeof err)) {
                log_error("checkpoint: %s", err);
                goto out;
            }
            last_ckpt = now_s();
            if (is0 && tty) fputc('\n', stderr);
            if (is0) log_info("checkpoint step %" PRId64 " -> %s", st.step, plan.ckpt_dir);
        }
        if (stop && st.step < total) {   /* at the last step: finish (export) instead */
            dist_barrier();
            const char *sig = stopsig_name();
            if (is0) log_info("stopping at step %" PRId64 " (%s); exit %d to be requeued", st.step,
                              sig ? sig : "--stop-after", STOP_EXIT_REQUEUE);
            rc = STOP_EXIT_REQUEUE;
            goto out;
        }
    }
    if (is0 && tty) fputc('\n', stderr);

    if (is0) {
        /* final checkpoint (a requeued job then has nothing left to do) and the HF export */
        if (ckpt_save(plan.ckpt_dir, &model, &opt, &st, &fp, plan.ckpt_keep, err, sizeof err)) {
            log_error("checkpoint: %s", err);
            goto out;
        }
        char final_dir[4200];
        metrics_close(&mf);
        if (run_write_final(&plan, &model, baseline, final_dir, sizeof final_dir)) goto out;
        /* the final loss: mean of the last 10% of steps (at least 1) from the metrics file */
        double fl = last_loss;
        FILE *f = fopen(plan.metrics_path, "r");
        if (f) {
            double *ls = malloc((size_t)total * sizeof *ls);
            int64_t n = 0;
            char line[512];
            while (ls && n < total && fgets(line, sizeof line, f)) {
                char *p = strstr(line, "\"loss\":");
                if (p) ls[n++] = strtod(p + 7, NULL);
            }
            fclose(f);
            int64_t k = n / 10 > 0 ? n / 10 : 1;
            if (ls && n >= k) { fl = 0; for (int64_t i = n - k; i < n; i++) fl += ls[i]; fl /= (double)k; }
            free(ls);
        }
        EvalResult ev;
        int have_eval = 0;
        if (args.eval_dir) {
            if (evaluate(&model, args.eval_dir, MB, &ev, err, sizeof err)) { log_error("eval: %s", err); goto out; }
            have_eval = 1;
        }
        write_result(plan.out_dir, st.step, fl, baseline, have_eval ? &ev : NULL);
        log_info("done: %" PRId64 " steps, final loss %.4f (mean of the last steps) vs unigram baseline %.4f; "
                 "model in %s", st.step, fl, baseline, final_dir);
        if (have_eval)
            log_info("held-out: loss %.4f, greedy exact match %" PRId64 "/%" PRId64 " (%.1f%%)", ev.loss, ev.correct,
                     ev.docs, ev.docs ? 100.0 * ev.correct / ev.docs : 0.0);
    }
    dist_barrier();
    rc = 0;
out:
    metrics_close(&mf);
    row_stream_free(&rs);
    free(rows);
    free(acc);
    if (bb.ids || bb.pos || bb.mask) batch_free(&bb);
    model_acts_free(acts);
    adamw_free(&opt);
    model_free(&model);
    if (have_set) shard_set_close(&set);
    run_plan_free(&plan);
    dist_finalize();
    return rc;
}
