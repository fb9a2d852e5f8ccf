/* cpu_backend.c — `llmc-train run PLAN.json`: the one training loop
 * (runtime/train_loop.c) on the CPU backend: fp32 weights, gradients and AdamW
 * state in host memory (the loop's host model and optimizer, trained in place),
 * OpenBLAS matmuls (runtime/ops_cpu.c), ranks and collectives from
 * runtime/dist.c (MPI or TCP; rank-ordered sums, so 2 ranks give 1 rank's bits). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "cpu_backend.h"
#include "dist.h"
#include "log.h"
#include "ops_cpu.h"

static int cpu_dist_init(void *self, int *rank, int *world)
{
    (void)self;
    DistInfo di;
    if (dist_init(&di)) return -1;
    *rank = di.rank;
    *world = di.world;
    openblas_set_num_threads(ops_threads());
    return 0;
}

static void cpu_dist_finalize(void *self) { (void)self; dist_finalize(); }
static int cpu_sum_f64(void *self, double *v, int n) { (void)self; return dist_allreduce_sum_f64(v, (size_t)n); }
static int cpu_any(void *self, int flag) { (void)self; return dist_any(flag); }
static int cpu_barrier(void *self) { (void)self; return dist_barrier(); }

/* Weights, gradients, accumulator, two AdamW moments, activations: refuse up
 * front what cannot fit, rather than be killed by the OOM killer mid-run. */
static int cpu_preflight(void *self, const RunPlan *plan)
{
    (void)self;
    double need = 5.0 * 4.0 * (double)model_param_count(&plan->model) +
                  model_acts_bytes(&plan->model, plan->micro_batch, plan->context);
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have) {
        log_error("the CPU backend needs %.1f GiB for this model at micro_batch %d x context %d "
                  "(fp32 weights, gradients, AdamW state, activations); this machine has %.1f GiB",
                  need / 1073741824.0, plan->micro_batch, plan->context, have / 1073741824.0);
        return -1;
    }
    return 0;
}

static int cpu_create(void *self, const RunPlan *plan, Model *hm, AdamW *opt, size_t *n_params, char *where,
                      size_t where_len, char *setup, size_t setup_len)
{
    CpuBackend *c = self;
    (void)where; (void)where_len; (void)setup; (void)setup_len;
    c->m = hm;
    c->opt = opt;
    if (!(c->acts = model_acts_new(&hm->cfg, plan->micro_batch, plan->context)) ||
        !(c->acc = malloc(hm->n_floats * sizeof *c->acc))) {
        log_error("out of memory");
        model_acts_free(c->acts);
        c->acts = NULL;
        return -1;
    }
    *n_params = hm->n_floats;
    return 0;
}

static void cpu_destroy(void *self)
{
    CpuBackend *c = self;
    free(c->acc);
    model_acts_free(c->acts);
    model_acts_free(c->eval_acts);
    c->acc = NULL;
    c->acts = c->eval_acts = NULL;
}

/* Forward, backward (m->g), then m->g into the accumulator: copied by the first
 * micro-batch of a step, added by the others, in micro-batch order. */
static int cpu_micro_step(void *self, const Batch *b, int index, int count, int64_t *labels)
{
    CpuBackend *c = self;
    Model *m = c->m;
    (void)count;
    if (index == 0) c->loss_sum = 0;
    c->loss_sum += model_forward(m, c->acts, b, labels);
    model_backward(m, c->acts, b, 1.0f);
    if (index == 0) memcpy(c->acc, m->g, m->n_floats * sizeof *c->acc);
    else for (size_t k = 0; k < m->n_floats; k++) c->acc[k] += m->g[k];
    return 0;
}

static int cpu_optimizer_step(void *self, float grad_mult, double lr, double clip, double *grad_norm,
                              double *loss_sum)
{
    CpuBackend *c = self;
    Model *m = c->m;
    if (dist_allreduce_sum_f32(c->acc, m->n_floats)) return -1;
    for (size_t k = 0; k < m->n_floats; k++) c->acc[k] *= grad_mult;
    double gn = grad_global_norm(c->acc, m->n_floats);
    grad_clip(c->acc, m->n_floats, gn, clip);
    adamw_step(c->opt, m->params, m->n_params, m->w, c->acc, lr);
    *grad_norm = gn;
    *loss_sum = c->loss_sum;
    return 0;
}

/* The loss over the first n_rows rows: a full micro-batch's forward when all
 * rows count, else a forward of just those rows (the argmax comes from the full
 * one either way: a row's logits do not depend on the other rows). */
static int cpu_eval_forward(void *self, const Batch *b, int n_rows, double *loss_sum, int64_t *labels,
                            uint32_t *argmax)
{
    CpuBackend *c = self;
    Model *m = c->m;
    int V = m->cfg.vocab;
    if (c->eval_T != b->T) {   /* the held-out rows' context may differ from training's */
        model_acts_free(c->eval_acts);
        c->eval_T = 0;
        if (!(c->eval_acts = model_acts_new(&m->cfg, b->B, b->T))) { log_error("out of memory"); return -1; }
        c->eval_T = b->T;
    }
    double loss = model_forward(m, c->eval_acts, b, labels);
    const float *lg = model_logits(c->eval_acts);
    logits_argmax(lg, (size_t)n_rows * b->T, V, argmax);
    if (n_rows < b->B) {
        Batch part = {b->ids, b->pos, b->mask, n_rows, b->T};
        ModelActs *pa = model_acts_new(&m->cfg, n_rows, b->T);
        if (!pa) { log_error("out of memory"); return -1; }
        loss = model_forward(m, pa, &part, labels);
        model_acts_free(pa);
    }
    *loss_sum = loss;
    return 0;
}

void cpu_backend_init(TrainBackend *be, CpuBackend *c)
{
    memset(c, 0, sizeof *c);
    *be = (TrainBackend){
        .prog = "llmc-train", .self = c,
        /* ranks: runtime/dist.c */
        .dist_init = cpu_dist_init, .dist_finalize = cpu_dist_finalize,
        .sum_f64 = cpu_sum_f64, .any = cpu_any, .barrier = cpu_barrier,
        /* the state is the loop's host model and optimizer: no set/get_state */
        .preflight = cpu_preflight, .create = cpu_create, .destroy = cpu_destroy,
        .micro_step = cpu_micro_step, .optimizer_step = cpu_optimizer_step, .eval_forward = cpu_eval_forward,
    };
}

int cmd_run(int argc, char **argv)
{
    TrainBackend be;
    CpuBackend c;
    cpu_backend_init(&be, &c);
    return train_loop_run(&be, argc, argv);
}
