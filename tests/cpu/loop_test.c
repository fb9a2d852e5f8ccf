/* loop_test.c — `loop_test run PLAN.json [...]`: the one training loop
 * (runtime/train/train_loop.c) over a second backend, the way the CUDA backend uses
 * it, on the CPU: the training state lives in the backend's own copy of the
 * weights and AdamW moments ("the device"), not in the loop's host model, so
 * the loop must hand the state over (set_state after init and resume) and take
 * it back (get_state before every checkpoint and the export) at the right
 * moments, and the backend adds its own side file and log phrases, as the CUDA
 * one does (gpu_metrics.jsonl, " gpu X GiB"). The arithmetic is the CPU
 * backend's, so tests/cpu/loop_test.sh can ask for llmc-train's bits: the same
 * metrics, checkpoints, export, Prometheus file, evaluation and result.json. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "log.h"
#include "train_loop.h"

typedef struct {
    TrainBackend cpu_be;   /* the CPU backend over dev/dev_opt */
    CpuBackend cpu;
    Model dev;             /* the backend's own state */
    AdamW dev_opt;
    int have_dev, sets, gets;
    FILE *side;            /* OUTPUT_DIR/mirror_metrics.jsonl */
} Mirror;

/* Ranks, collectives and the memory check: the CPU backend's. */
static int mi_dist_init(void *self, int *rank, int *world)
{
    Mirror *m = self;
    return m->cpu_be.dist_init(&m->cpu, rank, world);
}
static void mi_dist_finalize(void *self) { Mirror *m = self; m->cpu_be.dist_finalize(&m->cpu); }
static int mi_sum(void *self, double *v, int n) { Mirror *m = self; return m->cpu_be.sum_f64(&m->cpu, v, n); }
static int mi_any(void *self, int flag) { Mirror *m = self; return m->cpu_be.any(&m->cpu, flag); }
static int mi_barrier(void *self) { Mirror *m = self; return m->cpu_be.barrier(&m->cpu); }
static int mi_preflight(void *self, const RunPlan *plan)
{
    Mirror *m = self;
    return m->cpu_be.preflight(&m->cpu, plan);
}

static int mi_create(void *self, const RunPlan *plan, Model *hm, AdamW *opt, size_t *n_params, char *where,
                     size_t where_len, char *setup, size_t setup_len)
{
    Mirror *m = self;
    if (model_init(&m->dev, &hm->cfg) ||
        adamw_init(&m->dev_opt, hm->n_floats, opt->beta1, opt->beta2, opt->eps, opt->weight_decay)) {
        log_error("out of memory");
        return -1;
    }
    m->have_dev = 1;
    /* the device starts from garbage: only set_state may give it the weights */
    for (size_t k = 0; k < m->dev.n_floats; k++) m->dev.w[k] = 1e3f;
    if (m->cpu_be.create(&m->cpu, plan, &m->dev, &m->dev_opt, n_params, where, where_len, setup, setup_len))
        return -1;
    snprintf(where, where_len, " on 1 mirror(s)");
    snprintf(setup, setup_len, ", state mirrored");
    return 0;
}

static void mi_destroy(void *self)
{
    Mirror *m = self;
    m->cpu_be.destroy(&m->cpu);
    if (m->side) fclose(m->side);
    if (m->have_dev) { model_free(&m->dev); adamw_free(&m->dev_opt); }
}

static int mi_set_state(void *self, const Model *hm, const AdamW *opt, int moments)
{
    Mirror *m = self;
    memcpy(m->dev.w, hm->w, hm->n_floats * sizeof *hm->w);
    if (moments) {
        memcpy(m->dev_opt.m, opt->m, opt->n * sizeof *opt->m);
        memcpy(m->dev_opt.v, opt->v, opt->n * sizeof *opt->v);
        m->dev_opt.t = opt->t;
    }
    m->sets++;
    /* the CPU backend's own shards (ZeRO) come from the device copy */
    return m->cpu_be.set_state ? m->cpu_be.set_state(&m->cpu, &m->dev, &m->dev_opt, moments) : 0;
}

static int mi_get_state(void *self, Model *hm, AdamW *opt, int is0)
{
    Mirror *m = self;
    m->gets++;
    if (m->cpu_be.get_state && m->cpu_be.get_state(&m->cpu, &m->dev, &m->dev_opt, is0)) return -1;
    if (!is0) return 0;
    memcpy(hm->w, m->dev.w, hm->n_floats * sizeof *hm->w);
    memcpy(opt->m, m->dev_opt.m, opt->n * sizeof *opt->m);
    memcpy(opt->v, m->dev_opt.v, opt->n * sizeof *opt->v);
    opt->t = m->dev_opt.t;
    return 0;
}

static int mi_begin(void *self, const RunPlan *plan, int64_t start_step, int is0)
{
    Mirror *m = self;
    char path[4200];
    if (!is0) return 0;
    snprintf(path, sizeof path, "%s/mirror_metrics.jsonl", plan->out_dir);
    if (!(m->side = fopen(path, start_step ? "a" : "w"))) { log_error("%s: cannot open", path); return -1; }
    return 0;
}

static int mi_micro(void *self, const Batch *b, int index, int count, int64_t *labels)
{
    Mirror *m = self;
    return m->cpu_be.micro_step(&m->cpu, b, index, count, labels);
}

static int mi_step(void *self, float grad_mult, double lr, double clip, double *grad_norm, double *loss_sum)
{
    Mirror *m = self;
    return m->cpu_be.optimizer_step(&m->cpu, grad_mult, lr, clip, grad_norm, loss_sum);
}

static int mi_eval(void *self, const Batch *b, int n_rows, double *loss_sum, int64_t *labels, uint32_t *argmax)
{
    Mirror *m = self;
    return m->cpu_be.eval_forward(&m->cpu, b, n_rows, loss_sum, labels, argmax);
}

static int mi_step_stats(void *self, int64_t step, double step_s, int is0, char *extra, size_t len)
{
    Mirror *m = self;
    if (!is0) return 0;
    fprintf(m->side, "{\"step\":%lld,\"step_time_s\":%.6f}\n", (long long)step, step_s);
    fflush(m->side);
    snprintf(extra, len, " mirror %d/%d", m->sets, m->gets);
    return 0;
}

static void mi_final_stats(void *self, char *extra, size_t len)
{
    Mirror *m = self;
    snprintf(extra, len, ", state set %dx, gathered %dx", m->sets, m->gets);
}

/* `loop_test argmax`: logits_argmax's rule, which the CUDA backend's k_argmax_rows
 * keeps: the first index of the greatest value, NaN never the greatest, 0 for a row
 * of NaN. Prints "argmax: N passed, N failed". */
static int argmax_cases(void)
{
    static const struct { float row[4]; uint32_t want; const char *what; } c[] = {
        {{1, 3, 2, 0}, 1, "greatest"},
        {{5, 2, 5, 5}, 0, "ties: the first"},
        {{0, 2, 7, 7}, 2, "ties later: the first of them"},
        {{NAN, 1, 4, 2}, 2, "NaN first is skipped"},
        {{1, NAN, 0, NAN}, 0, "NaN later is skipped"},
        {{NAN, NAN, NAN, NAN}, 0, "a row of NaN: 0"},
        {{-INFINITY, -INFINITY, -1, -INFINITY}, 2, "-inf below any number"},
        {{-INFINITY, -INFINITY, -INFINITY, -INFINITY}, 0, "all -inf: the first"},
        {{2, INFINITY, INFINITY, NAN}, 1, "+inf: the first"},
    };
    int n = (int)(sizeof c / sizeof c[0]), pass = 0;
    float rows[sizeof c / sizeof c[0]][4];
    uint32_t got[sizeof c / sizeof c[0]];
    for (int i = 0; i < n; i++) memcpy(rows[i], c[i].row, sizeof rows[i]);
    logits_argmax(&rows[0][0], (size_t)n, 4, got);   /* all rows in one call, as eval_forward does */
    for (int i = 0; i < n; i++) {
        if (got[i] == c[i].want) pass++;
        else printf("FAIL argmax %s: %u, want %u\n", c[i].what, got[i], c[i].want);
    }
    printf("argmax: %d passed, %d failed\n", pass, n - pass);
    return pass != n;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "argmax")) return argmax_cases();
    if (argc < 2 || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: loop_test run PLAN.json [--eval-shards DIR] [--stop-after N] [--fresh] | argmax\n");
        return 2;
    }
    static Mirror m;
    cpu_backend_init(&m.cpu_be, &m.cpu);
    TrainBackend be = {
        .prog = "loop_test",
        .self = &m,
        .dist_init = mi_dist_init,
        .dist_finalize = mi_dist_finalize,
        .sum_f64 = mi_sum,
        .any = mi_any,
        .barrier = mi_barrier,
        .preflight = mi_preflight,
        .create = mi_create,
        .destroy = mi_destroy,
        .set_state = mi_set_state,
        .get_state = mi_get_state,
        .begin = mi_begin,
        .micro_step = mi_micro,
        .optimizer_step = mi_step,
        .eval_forward = mi_eval,
        .step_stats = mi_step_stats,
        .final_stats = mi_final_stats,
    };
    return train_loop_run(&be, argc - 1, argv + 1);
}
