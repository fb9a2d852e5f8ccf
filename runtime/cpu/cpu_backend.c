/* cpu_backend.c — `llmc-train run PLAN.json`: the one training loop
 * (runtime/train/train_loop.c) on the CPU backend: fp32 weights, gradients and AdamW
 * state in host memory (the loop's host model and optimizer, trained in place),
 * OpenBLAS matmuls (runtime/model/ops_cpu.c), ranks and collectives from
 * runtime/base/dist.c (MPI or TCP; rank-ordered sums, so 2 ranks give 1 rank's bits).
 *
 * ZeRO (parallel.zero_stage), FSDP-style: the flat parameter buffer (the host
 * model's HF-ordered layout) is cut into one contiguous shard per rank, whole
 * blocks of GRAD_NORM_BLOCK floats each (runtime/model/optim.h), rank r owning
 * [starts[r], starts[r+1]).
 *   0  every rank holds everything; the step's gradients are all-reduced.
 *   1  AdamW moments per shard: the step's summed gradients are
 *      reduce-scattered, each rank updates its shard, the weights all-gathered.
 *   2  and gradients per shard: as backward finishes a unit (a layer, the
 *      embedding, the head; model.h) its gradient is reduce-scattered into the
 *      shard's accumulator, micro-batch after micro-batch; after the update the
 *      weights are all-gathered.
 *   3  and weights per shard: forward and backward gather a unit's weights
 *      just before they use it and free them after (model.h ModelHooks); the
 *      updated shard stays where it is until the next gather.
 * Bits: rank r runs slots a*world + r of a step (train_loop.c). From stage 2 on
 * every micro-batch index a is reduced on its own, in rank order, onto the
 * accumulator: ((acc + g[a,0]) + g[a,1]) + ..., which is the order in which
 * one rank adds slots 0, 1, 2, ... So N ranks give one rank's bits with any
 * accumulation (stages 0-1 sum each rank's micro-batches first: the same
 * bits only when grad_accum is 1). The gradient norm adds fixed blocks' sums
 * of squares in block order (optim.h) whatever the shards, and AdamW is
 * elementwise, so the update is the same bits too.
 * Checkpoints and the export are whole (get_state gathers the shards), so a
 * run resumes on another number of ranks or another stage. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend.h"
#include "backend_caps.h"   /* contract/: what this backend runs, as llmc checks it */
#include "dist.h"
#include "log.h"
#include "ops_cpu.h"

static int cpu_dist_init(void *self, int *rank, int *world)
{
    CpuBackend *c = self;
    DistInfo di;
    if (dist_init(&di)) return -1;
    *rank = c->rank = di.rank;
    *world = c->world = di.world;
    openblas_set_num_threads(ops_threads());
    return 0;
}

static void cpu_dist_finalize(void *self) { (void)self; dist_finalize(); }
static int cpu_sum_f64(void *self, double *v, int n) { (void)self; return dist_allreduce_sum_f64(v, (size_t)n); }
static int cpu_any(void *self, int flag) { (void)self; return dist_any(flag); }
static int cpu_barrier(void *self) { (void)self; return dist_barrier(); }

/* Weights, gradients, accumulator, two AdamW moments, activations (the loop's
 * host model and optimizer are whole on every rank; the shards come on top):
 * refuse up front what cannot fit, rather than be killed by the OOM killer. */
static int cpu_preflight(void *self, const RunPlan *plan)
{
    (void)self;
    double P = (double)model_param_count(&plan->model), W = plan->data_parallel;
    double shards = plan->zero_stage >= 1 ? 4.0 * 4.0 * P / W : 0;   /* gradient, weights, moments */
    double need = (plan->zero_stage >= 2 ? 4.0 : 5.0) * 4.0 * P + shards +
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

/* ---- ZeRO-3 weight hooks, ZeRO-2 gradient hook (model.h ModelHooks) ---- */

static const float *zero3_acquire(void *ctx, int unit)
{
    CpuBackend *c = ctx;
    size_t base, len;
    model_unit_range(c->m, unit, &base, &len);
    for (int s = 0; s < CPU_GATHER_SLOTS; s++) {
        if (c->gathered[s]) continue;
        if (!(c->gathered[s] = malloc(len * sizeof(float)))) dist_abort("out of memory gathering a layer's weights");
        c->gathered_unit[s] = unit;
        dist_allgather_f32(c->wsh, c->starts, base, len, c->gathered[s]);
        return c->gathered[s];
    }
    dist_abort("internal error: more units gathered at once than ZeRO-3 keeps");
}

static void zero3_release(void *ctx, int unit)
{
    CpuBackend *c = ctx;
    for (int s = CPU_GATHER_SLOTS - 1; s >= 0; s--)   /* the latest of that unit */
        if (c->gathered[s] && c->gathered_unit[s] == unit) { free(c->gathered[s]); c->gathered[s] = NULL; return; }
}

/* ZeRO-2: the weights are whole in m->w */
static const float *zero2_acquire(void *ctx, int unit)
{
    CpuBackend *c = ctx;
    size_t base, len;
    model_unit_range(c->m, unit, &base, &len);
    return c->m->w + base;
}

static void zero2_release(void *ctx, int unit) { (void)ctx; (void)unit; }

/* A unit's gradient of this micro-batch, summed over ranks in rank order onto
 * the shard's accumulator (the first micro-batch of a step starts it). */
static void zero_grad_ready(void *ctx, int unit)
{
    CpuBackend *c = ctx;
    size_t base, len;
    model_unit_range(c->m, unit, &base, &len);
    dist_reduce_scatter_f32(c->m->g + base, base, len, c->starts, c->gsh, c->micro > 0);
}

/* Shards of whole GRAD_NORM_BLOCKs, as even as that allows (trailing ones may be empty). */
static int zero_setup(CpuBackend *c, const Model *hm)
{
    size_t blocks = grad_norm_blocks(hm->n_floats), per = (blocks + (size_t)c->world - 1) / (size_t)c->world;
    if (!(c->starts = malloc(((size_t)c->world + 1) * sizeof *c->starts))) return -1;
    for (int r = 0; r <= c->world; r++) {
        size_t s = (size_t)r * per * GRAD_NORM_BLOCK;
        c->starts[r] = s < hm->n_floats ? s : hm->n_floats;
    }
    c->lo = c->starts[c->rank];
    c->hi = c->starts[c->rank + 1];
    size_t n = c->hi - c->lo;
    if (adamw_init(&c->osh, n, c->opt->beta1, c->opt->beta2, c->opt->eps, c->opt->weight_decay) ||
        !(c->gsh = malloc((n ? n : 1) * sizeof *c->gsh)))
        return -1;
    adamw_set_states(&c->osh, c->opt->states, c->opt->seed);
    if (c->zero == 3) {
        if (!(c->wsh = malloc((n ? n : 1) * sizeof *c->wsh))) return -1;
    } else c->wsh = hm->w + c->lo;
    c->work.hooks = NULL;
    if (c->zero >= 2) {
        c->hooks = (ModelHooks){c, c->zero == 3 ? zero3_acquire : zero2_acquire,
                                c->zero == 3 ? zero3_release : zero2_release, zero_grad_ready};
        c->work.hooks = &c->hooks;
    }
    if (c->zero == 3) c->work.w = NULL;   /* whole weights exist only in gathers */
    return 0;
}

/* What the CPU backend does not do: FP8 (it computes in fp32: no FP8 GEMMs;
 * contract/backend_caps.h), ZeRO with freeze or LoRA (the trainable part is
 * small or a window; sharding it would save nothing worth the code), LoRA
 * dropout (the adapters' input is not dropped; 0 is exact), QLoRA.
 * master_weights = split it runs as fp32: its fp32 weights are their own
 * master, so the split (exact) is the same run. */
static int cpu_check_plan(void *self, const RunPlan *plan, char *err, size_t errlen)
{
    (void)self;
    const RunFinetune *ft = &plan->ft;
    if (plan->precision == PREC_FP8 && !llmc_fp8_ok(LLMC_BACKEND_CPU, plan->zero_stage, plan->offload))
        snprintf(err, errlen, "train.precision = fp8: the CPU backend computes in fp32 and has no FP8 GEMMs "
                 "(llmc-train-cuda runs it on GPUs with FP8 tensor cores; or precision = fp32)");
    else if (ft->method == METHOD_QLORA)
        snprintf(err, errlen, "finetune.method = qlora: the CPU backend has no quantised base (use lora)");
    else if (ft->method != METHOD_FULL && plan->zero_stage > 0)
        snprintf(err, errlen, "finetune.method = %s with parallel.zero_stage = %d: the CPU backend shards full "
                 "training only (use shard = none)", method_json_names[ft->method], plan->zero_stage);
    else if (ft->method == METHOD_LORA && ft->lora_dropout > 0)
        snprintf(err, errlen, "finetune.lora_dropout = %g: the CPU backend trains LoRA without dropout (set 0)",
                 ft->lora_dropout);
    else return 0;
    return -1;
}

static int cpu_create(void *self, const RunPlan *plan, Model *hm, AdamW *opt, size_t *n_params, char *where,
                      size_t where_len, char *setup, size_t setup_len)
{
    CpuBackend *c = self;
    (void)where; (void)where_len;
    c->m = hm;
    c->opt = opt;
    c->work = *hm;
    c->zero = plan->zero_stage;
    if (model_trainable(hm, &c->tv)) { log_error("the trainable tensors are not one contiguous range"); return -1; }
    c->have_tv = 1;
    int fail = !(c->acts = model_acts_new(&hm->cfg, plan->micro_batch, plan->context));
    if (!fail && c->zero < 2) fail = !(c->acc = malloc((c->tv.n_floats ? c->tv.n_floats : 1) * sizeof *c->acc));
    if (!fail && c->zero >= 1) fail = zero_setup(c, hm) != 0;
    if (fail) { log_error("out of memory"); return -1; }
    if (c->zero >= 1)
        snprintf(setup, setup_len, ", ZeRO-%d: %zu of %zu parameters on this rank", c->zero, c->hi - c->lo,
                 hm->n_floats);
    else if (plan->ft.method != METHOD_FULL)
        snprintf(setup, setup_len, ", %s: %zu of %zu parameters trainable", method_json_names[plan->ft.method],
                 c->tv.n_floats, hm->n_floats + (hm->lora ? c->tv.n_floats : 0));
    *n_params = hm->n_floats;
    return 0;
}

static void cpu_destroy(void *self)
{
    CpuBackend *c = self;
    free(c->acc);
    if (c->have_tv) model_trainable_free(c->m, &c->tv);
    c->have_tv = 0;
    model_acts_free(c->acts);
    model_acts_free(c->eval_acts);
    c->acc = NULL;
    c->acts = c->eval_acts = NULL;
    for (int s = 0; s < CPU_GATHER_SLOTS; s++) { free(c->gathered[s]); c->gathered[s] = NULL; }
    if (c->zero >= 1) {
        free(c->gsh);
        if (c->zero == 3) free(c->wsh);
        adamw_free(&c->osh);
        free(c->starts);
    }
    c->gsh = c->wsh = NULL;
    c->starts = NULL;
}

/* ZeRO-3 makes its state from its shard alone: the loop reads only [lo, hi)
 * of the initial weights and of a resumed checkpoint on this rank. Below
 * stage 3 every rank computes with the whole weights (hm->w itself). */
static int cpu_state_part(void *self, const Model *hm, ModelPart *part)
{
    CpuBackend *c = self;
    (void)hm;
    if (c->zero < 3) return 0;
    c->part_r[0][0] = c->lo;
    c->part_r[0][1] = c->hi;
    *part = (ModelPart){1, c->part_r};
    return 0;
}

/* The loop's host state -> the shards (ZeRO >= 1; ZeRO 0 trains it in place). */
static int cpu_set_state(void *self, const Model *hm, const AdamW *opt, int moments)
{
    CpuBackend *c = self;
    if (c->zero < 1) return 0;
    size_t n = c->hi - c->lo;
    if (c->zero == 3) memcpy(c->wsh, hm->w + c->lo, n * sizeof *c->wsh);
    if (moments) {
        memcpy(c->osh.m, opt->m + c->lo, n * sizeof *c->osh.m);
        memcpy(c->osh.v, opt->v + c->lo, n * sizeof *c->osh.v);
        c->osh.t = opt->t;
    } else {
        memset(c->osh.m, 0, n * sizeof *c->osh.m);
        memset(c->osh.v, 0, n * sizeof *c->osh.v);
        c->osh.t = 0;
    }
    return 0;
}

/* ZeRO-3, for a checkpoint every rank writes its piece of: this rank's shard
 * into the loop's host state at [lo, hi) (cpu_state_part). */
static int cpu_get_state_part(void *self, Model *hm, AdamW *opt)
{
    CpuBackend *c = self;
    size_t n = c->hi - c->lo;
    memcpy(hm->w + c->lo, c->wsh, n * sizeof *c->wsh);
    memcpy(opt->m + c->lo, c->osh.m, n * sizeof *c->osh.m);
    memcpy(opt->v + c->lo, c->osh.v, n * sizeof *c->osh.v);
    opt->t = c->osh.t;
    return 0;
}

/* The shards -> the loop's host state: moments (and under ZeRO-3 the weights)
 * gathered on every rank (all of them hold the host state). */
static int cpu_get_state(void *self, Model *hm, AdamW *opt, int is0)
{
    CpuBackend *c = self;
    (void)is0;
    if (c->zero < 1) return 0;
    dist_allgather_f32(c->osh.m, c->starts, 0, hm->n_floats, opt->m);
    dist_allgather_f32(c->osh.v, c->starts, 0, hm->n_floats, opt->v);
    opt->t = c->osh.t;
    if (c->zero == 3) dist_allgather_f32(c->wsh, c->starts, 0, hm->n_floats, hm->w);
    return 0;
}

/* Forward, backward (m->g). ZeRO 0-1: m->g into the accumulator, copied by the
 * first micro-batch of a step, added by the others, in micro-batch order.
 * ZeRO 2-3: backward reduce-scatters each unit as it finishes (zero_grad_ready). */
static int cpu_micro_step(void *self, const Batch *b, int index, int count, int64_t *labels)
{
    CpuBackend *c = self;
    Model *m = &c->work;
    (void)count;
    if (index == 0) c->loss_sum = 0;
    c->micro = index;
    c->loss_sum += model_forward(m, c->acts, b, labels);
    model_backward(m, c->acts, b, 1.0f);
    if (c->zero >= 2) return 0;
    const Model *t = &c->tv;   /* the trainable part's gradients */
    if (index == 0) memcpy(c->acc, t->g, t->n_floats * sizeof *c->acc);
    else for (size_t k = 0; k < t->n_floats; k++) c->acc[k] += t->g[k];
    return 0;
}

/* The global norm of g, this rank's [lo, hi) of it (sharded: each rank has its
 * own part; else every rank has all of it): block sums in place in a zeroed
 * vector, sharded ones summed over ranks (each block has one non-zero term, so
 * the sum is exact), then added in block order (optim.h). */
static int global_norm(const float *g, size_t lo, size_t hi, size_t n, int sharded, double *norm)
{
    size_t nb = grad_norm_blocks(n);
    double *sums = calloc(nb ? nb : 1, sizeof *sums);
    if (!sums) { log_error("out of memory"); return -1; }
    grad_block_sumsq(g, lo, hi, sums);
    if (sharded && dist_allreduce_sum_f64(sums, nb)) { free(sums); return -1; }
    *norm = grad_norm_of_blocks(sums, nb);
    free(sums);
    return 0;
}

static int cpu_optimizer_step(void *self, float grad_mult, double lr, double clip, double *grad_norm,
                              double *loss_sum)
{
    CpuBackend *c = self;
    Model *m = c->m;
    double gn;
    if (c->zero == 0) {
        const Model *t = &c->tv;
        size_t n = t->n_floats;
        if (dist_allreduce_sum_f32(c->acc, n)) return -1;
        for (size_t k = 0; k < n; k++) c->acc[k] *= grad_mult;
        if (global_norm(c->acc, 0, n, n, 0, &gn)) return -1;
        grad_clip(c->acc, n, gn, clip);
        adamw_step(c->opt, t->params, t->n_params, t->w, c->acc, lr);
    } else {
        size_t n = c->hi - c->lo;
        if (c->zero == 1 && dist_reduce_scatter_f32(c->acc, 0, m->n_floats, c->starts, c->gsh, 0)) return -1;
        for (size_t k = 0; k < n; k++) c->gsh[k] *= grad_mult;
        if (global_norm(c->gsh, c->lo, c->hi, m->n_floats, 1, &gn)) return -1;
        grad_clip(c->gsh, n, gn, clip);
        adamw_step_range(&c->osh, m->params, m->n_params, c->lo, c->wsh, c->gsh, lr);
        if (c->zero < 3 && dist_allgather_f32(c->wsh, c->starts, 0, m->n_floats, m->w)) return -1;
    }
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
        .prog = "llmc-train", .self = c, .check_plan = cpu_check_plan,
        /* ranks: runtime/base/dist.c */
        .dist_init = cpu_dist_init, .dist_finalize = cpu_dist_finalize,
        .sum_f64 = cpu_sum_f64, .any = cpu_any, .barrier = cpu_barrier,
        /* ZeRO 0 trains the loop's host model and optimizer in place; the
         * shards of ZeRO >= 1 come and go through set/get_state */
        .preflight = cpu_preflight, .create = cpu_create, .state_part = cpu_state_part, .destroy = cpu_destroy,
        .set_state = cpu_set_state, .get_state = cpu_get_state, .get_state_part = cpu_get_state_part,
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
