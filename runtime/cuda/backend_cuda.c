/* backend_cuda.c — `llmc-train-cuda run PLAN.json`: the one training loop
 * (runtime/train/train_loop.c) on the GPU model (model_cuda.c). The loop gives both
 * trainers the same plan loader, shards, data order, loss normalisation,
 * learning-rate schedule, metrics, Prometheus file, checkpoints, held-out
 * evaluation, result.json and HF export, so a run can move between the backends
 * (checkpoints are fp32 either way).
 *
 * The weights live on the GPU: fp32 master weights and AdamW moments (sharded
 * across ranks under ZeRO-1), bf16 working weights, fp32 gradients, in the flat
 * layout of model_cuda.h. The loop's host model and optimizer are the mirror
 * that checkpoints and the export read: set_state copies them onto the GPU after
 * init/resume, get_state gathers them back (host_model.c maps the two layouts).
 * With `parallel.offload` = "optimizer" the loop's host model and optimizer ARE
 * the master weights and moments (pinned; the GPU keeps bf16 weights and fp32
 * gradients and streams the update through, model_cuda.c), so no mirror exists.
 *
 * GPU extras: OUTPUT_DIR/gpu_metrics.jsonl, one line per step with the step time
 * and the device memory high-water mark (cudaMemGetInfo) next to metrics.jsonl,
 * and the GPU memory on each step line and the "done" line. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "log.h"
#include "train_loop.h"
#include "backend_cuda.h"
#include "backend_caps.h"   /* contract/: this backend's row, which llmc check also refuses by */
#include "cuda_check.h"
#include "cuda_dist.h"
#include "host_model.h"
#include "lora_cuda.h"
#include "model_cuda.h"

typedef struct {
    CudaDist d;
    int offload;                        /* parallel.offload = "optimizer" */
    CudaModel cm;
    int have_cm;
    Model *hm;                          /* the loop's host mirror */
    size_t *cuda_off;                   /* host parameter i at flat offset cuda_off[i] */
    size_t (*part_r)[2];                /* ZeRO-3: the host ranges of this rank's shard (state_part) */
    int shard_only;                     /* ZeRO-3 full training: state made from the shard alone */
    float *flat, *flat_m, *flat_v;      /* host staging in the flat layout; moments on first use */
    int method;                         /* METHOD_FULL, _FREEZE or _LORA: what trains */
    size_t view_lo;                     /* freeze: where the trained window starts in hm->w */
    float *host_tmp;                    /* freeze: one host-layout array, for the moments' window */
    int *ids_i, *pos_i, *tg;            /* one micro-batch for cuda_model_micro */
    size_t base_used, peak;             /* device memory before our model; high-water mark */
    float b1, b2, eps, wd;              /* AdamW settings of the plan */
    FILE *gpu_mf;                       /* OUTPUT_DIR/gpu_metrics.jsonl (rank 0) */
    char gpu_path[4200];
} CudaBackend;

/* What the plan asks for that this backend does not do (its row
 * llmc_backend_caps[LLMC_BACKEND_CUDA], contract/backend_caps.h, by which the
 * llmc checker refuses the same): 0, or -1 with the plan.json key and what to
 * do in err. */
/* The number formats the plan chooses, through backend_caps.h's CUDA row (as
 * llmc's check_precision.c refuses them). */
static int cu_formats_unsupported(const RunPlan *plan, char *err, size_t errlen)
{
    const LlmcBackendCaps *caps = &llmc_backend_caps[LLMC_BACKEND_CUDA];
    if (plan->precision == PREC_FP8 && !llmc_fp8_ok(LLMC_BACKEND_CUDA, plan->zero_stage, plan->offload)) {
        snprintf(err, errlen, "train.precision = fp8 with ZeRO-%d and offload \"%s\": the CUDA backend runs FP8 up to "
                 "ZeRO-%d, with offload \"%s\"", plan->zero_stage, offload_json_names[plan->offload],
                 caps->fp8_max_shard, offload_json_names[caps->fp8_max_offload]);
        return -1;
    }
    bool ft = plan->ft.method != METHOD_FULL;
    if (!llmc_master_ok(LLMC_BACKEND_CUDA, plan->master_weights, plan->offload, plan->zero_stage, ft)) {
        snprintf(err, errlen, "train.master_weights = split with ZeRO-%d and offload \"%s\": the CUDA backend splits "
                 "the master weights up to ZeRO-%d in full training, without offload", plan->zero_stage,
                 offload_json_names[plan->offload], caps->split_max_shard);
        return -1;
    }
    if (!llmc_states_ok(LLMC_BACKEND_CUDA, plan->optimizer_states, plan->offload)) {
        snprintf(err, errlen, "train.optimizer_states = bf16 with offload \"%s\": the CUDA backend offloads fp32 "
                 "moments", offload_json_names[plan->offload]);
        return -1;
    }
    return 0;
}

static int cu_unsupported(const RunPlan *plan, char *err, size_t errlen)
{
    if (!llmc_shard_ok(LLMC_BACKEND_CUDA, false, plan->zero_stage, plan->data_parallel)) {
        snprintf(err, errlen, "parallel.zero_stage = %d: the CUDA backend runs ZeRO-0 to ZeRO-3", plan->zero_stage);
        return -1;
    }
    if (!llmc_offload_ok(LLMC_BACKEND_CUDA, plan->offload, 0, 1)) {
        snprintf(err, errlen, "parallel.offload = \"all\": the CUDA backend offloads the optimizer (\"optimizer\") "
                 "and not the parameters");
        return -1;
    }
    if (!llmc_offload_ok(LLMC_BACKEND_CUDA, plan->offload, plan->zero_stage, plan->data_parallel)) {
        snprintf(err, errlen, "parallel.offload = \"optimizer\" on %d data-parallel ranks: the CUDA backend offloads "
                 "each rank's optimizer shard, which needs parallel.zero_stage 2 or 3 (this plan has %d)",
                 plan->data_parallel, plan->zero_stage);
        return -1;
    }
    const RunFinetune *ft = &plan->ft;
    if (ft->method == METHOD_QLORA) {
        snprintf(err, errlen, "finetune.method = qlora: the CUDA backend has no quantised base (use lora)");
        return -1;
    }
    if (ft->method != METHOD_FULL && !llmc_finetune_ok(LLMC_BACKEND_CUDA, plan->offload)) {
        snprintf(err, errlen, "finetune.method = %s with parallel.offload: the CUDA backend offloads the optimizer "
                 "of full training only", method_json_names[ft->method]);
        return -1;
    }
    if (ft->method == METHOD_LORA && ft->lora_dropout > 0) {
        snprintf(err, errlen, "finetune.lora_dropout = %g: the CUDA backend trains LoRA without dropout (set 0)",
                 ft->lora_dropout);
        return -1;
    }
    if (ft->method == METHOD_LORA) {
        char why[256];
        if (cuda_lora_supported(ft->lora_rank, why, sizeof why)) {
            snprintf(err, errlen, "finetune.%s", why);
            return -1;
        }
    }
    return cu_formats_unsupported(plan, err, errlen);
}

/* The model must be one the GPU kernels take (shapes of
 * whole 16-byte vectors), and the plan's features ones this backend has:
 * refused before any rank starts. */
static int cu_check_plan(void *self, const RunPlan *plan, char *err, size_t errlen)
{
    CudaBackend *c = self;
    char why[512];
    if (cuda_model_supports(&plan->model, why, sizeof why)) {
        snprintf(err, errlen, "model: %s", why);
        return -1;
    }
    c->offload = plan->offload == OFFLOAD_OPTIMIZER;
    return cu_unsupported(plan, err, errlen);
}

/* Bytes of host memory this process can still take: MemAvailable, or less where
 * a cgroup (v2) limit is lower; 0 when neither can be read. */
static double host_available_bytes(void)
{
    double avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = kb * 1024.0;
        fclose(f);
    }
    unsigned long long mx = 0, cur = 0;
    FILE *a = fopen("/sys/fs/cgroup/memory.max", "r"), *b = fopen("/sys/fs/cgroup/memory.current", "r");
    if (a && b && fscanf(a, "%llu", &mx) == 1 && fscanf(b, "%llu", &cur) == 1 && mx > cur &&
        (avail == 0 || (double)(mx - cur) < avail))
        avail = (double)(mx - cur);
    if (a) fclose(a);
    if (b) fclose(b);
    return avail;
}

/* Host memory, before anything is allocated (llmc's estimate_host counts the
 * same): full training, the loop's fp32 model and AdamW moments (12 bytes per
 * parameter: under offload that is all there is; else the flat staging copies of
 * weights and moments double it at each checkpoint); LoRA, the fp32 base and its
 * staging copy (8 bytes; the adapters are small); freeze, those 8, the moments'
 * host-layout window (4) and their staging at a checkpoint (8). */
static int cu_preflight(void *self, const RunPlan *plan)
{
    CudaBackend *c = self;
    Model hl;
    if (model_layout(&hl, &plan->model)) { log_error("out of memory"); return -1; }
    double n = (double)hl.n_floats;
    model_free(&hl);
    int method = plan->ft.method;
    /* offload on several ranks: as without it, plus the rank's pinned shard */
    double per = c->offload && plan->data_parallel > 1 ? 24 + 12.0 / plan->data_parallel
               : c->offload ? 12 : method == METHOD_LORA ? 8 : method == METHOD_FREEZE ? 20 : 24;
    double need = n * per, avail = host_available_bytes();
    if (avail > 0 && need > avail) {
        log_error("host memory: %.1f GiB needed for %.2fB parameters (%s, %.0f bytes each), %.1f GiB available on "
                  "this node", need / 1073741824.0, n / 1e9,
                  c->offload ? "fp32 master weights and AdamW moments"
                  : method == METHOD_LORA ? "the fp32 base model and its GPU staging copy"
                  : method == METHOD_FREEZE ? "the fp32 host model, its staging copy and the moments' staging"
                  : "fp32 host model and AdamW moments plus their GPU staging copies",
                  per, avail / 1073741824.0);
        return -1;
    }
    return 0;
}

static int cu_dist_init(void *self, int *rank, int *world)
{
    CudaBackend *c = self;
    if (cuda_dist_init(&c->d, false) != 0) return -1;
    log_set_rank(c->d.rank, c->d.world, NULL);
    *rank = c->d.rank;
    *world = c->d.world;
    return 0;
}

static void cu_dist_finalize(void *self) { cuda_dist_finalize(&((CudaBackend *)self)->d); }

static int cu_sum_f64(void *self, double *v, int n)
{
    CudaBackend *c = self;
    for (int i = 0; i < n; i++) v[i] = cuda_dist_sum(&c->d, v[i]);
    return 0;
}

static int cu_any(void *self, int flag) { return cuda_dist_sum(&((CudaBackend *)self)->d, flag ? 1 : 0) > 0; }
static int cu_barrier(void *self) { cuda_dist_sum(&((CudaBackend *)self)->d, 0); return 0; }

/* What trains, from the loop's host model (run_finetune_attach marked it): freeze
 * trains whole layers [lo, hi) and nothing else; lora trains hm->lora. */
static int cu_finetune(CudaBackend *c, const Model *hm, CudaFinetune *ft)
{
    memset(ft, 0, sizeof *ft);
    ft->method = hm->lora ? METHOD_LORA : hm->frozen ? METHOD_FREEZE : METHOD_FULL;
    c->method = ft->method;
    ft->lora = hm->lora;
    if (ft->method != METHOD_FREEZE) return 0;
    int lo = hm->cfg.layers, hi = -1;
    for (int i = 0; i < hm->n_params; i++) {
        const ParamInfo *p = &hm->params[i];
        if (hm->frozen[i]) continue;
        if (p->layer < 0) { log_error("freeze: %s trains; the CUDA backend trains whole layers only", p->name); return -1; }
        lo = p->layer < lo ? p->layer : lo;
        hi = p->layer + 1 > hi ? p->layer + 1 : hi;
    }
    for (int i = 0; i < hm->n_params; i++)
        if (hm->frozen[i] && hm->params[i].layer >= lo && hm->params[i].layer < hi) {
            log_error("freeze: %s is frozen inside the trained layers %d-%d", hm->params[i].name, lo, hi - 1);
            return -1;
        }
    Model view;
    if (hi < 0 || model_trainable(hm, &view)) { log_error("freeze: no contiguous trained layers"); return -1; }
    c->view_lo = (size_t)(view.w - hm->w);
    model_trainable_free(hm, &view);
    ft->train_lo = lo;
    ft->train_hi = hi;
    if (!(c->host_tmp = calloc(hm->n_floats, sizeof *c->host_tmp))) { log_error("out of memory"); return -1; }
    return 0;
}

static int cu_create(void *self, const RunPlan *plan, Model *hm, AdamW *opt, size_t *n_params, char *where,
                     size_t where_len, char *setup, size_t setup_len)
{
    CudaBackend *c = self;
    const int is0 = c->d.rank == 0, T = plan->context, MB = plan->micro_batch;
    int zero_stage = plan->zero_stage;
    CudaParallel par = {.rank = c->d.rank, .world = c->d.world, .zero1 = zero_stage >= 1, .zero = zero_stage,
                        .comm = c->d.comm, .comm_stream = c->d.comm_stream};
    int rc_mode = plan->recompute;
    int attn = plan->attention != ATTN_FLASH ? CUDA_ATTN_EAGER
             : plan->deterministic ? CUDA_ATTN_FUSED_DETERMINISTIC : CUDA_ATTN_FUSED;
    /* Offload on several ranks: each rank's shard in its own pinned memory
     * (model_cuda.c), the loop's host model a mirror as without offload. */
    if (c->offload && c->d.world > 1) {
        c->offload = 0;
        par.offload_shard = 1;
    }
    CudaHostState host = {.w = hm->w, .m = opt->m, .v = opt->v, .n = hm->n_floats};
    if (c->offload && is0)
        log_info("offload: pinning %.1f GiB of host memory for the master weights and AdamW moments",
                 3.0 * hm->n_floats * sizeof(float) / 1073741824.0);
    CudaFinetune ft;
    if (cu_finetune(c, hm, &ft)) return -1;
    CudaNumerics num = {.fp8 = plan->precision == PREC_FP8, .fp8_head = plan->fp8_lm_head, .master_split = plan->master_weights == MASTER_SPLIT,
                        .bf16_states = plan->optimizer_states == OSTATES_BF16, .seed = (uint32_t)plan->seed};
    if (cuda_model_create_ft(&c->cm, &plan->model, MB, T, rc_mode, attn, &par, c->offload ? &host : NULL,
                             &ft, &num) != 0)
        return -1;
    c->have_cm = 1;
    c->base_used = cuda_device_used();
    c->hm = hm;
    c->b1 = (float)plan->beta1;
    c->b2 = (float)plan->beta2;
    c->eps = (float)plan->eps;
    c->wd = (float)plan->weight_decay;

    size_t N = (size_t)MB * T;
    char err[1024];
    c->cuda_off = malloc((size_t)hm->n_params * sizeof *c->cuda_off);
    c->flat = c->offload ? NULL : malloc(c->cm.n_total * sizeof *c->flat);   /* staging: not under offload */
    c->ids_i = malloc(N * sizeof(int));
    c->pos_i = malloc(N * sizeof(int));
    c->tg = malloc(N * sizeof(int));
    if (!c->cuda_off || (!c->offload && !c->flat) || !c->ids_i || !c->pos_i || !c->tg) { log_error("out of memory"); return -1; }
    if (cuda_host_map(hm, &c->cm, c->cuda_off, err, sizeof err)) { log_error("%s", err); return -1; }
    *n_params = c->cm.n_real;
    snprintf(where, where_len, " on %d GPU(s)", c->d.world);
    char ft_text[160] = "";
    if (ft.method != METHOD_FULL) {
        size_t trained = ft.method == METHOD_LORA ? hm->lora->p.n_floats : c->cm.n_state;
        snprintf(ft_text, sizeof ft_text, ", %s: %zu of %zu parameters trainable", method_json_names[plan->ft.method],
                 trained, c->cm.n_real + (ft.method == METHOD_LORA ? trained : 0));
    }
    int stage = c->cm.zero ? c->cm.zero : c->cm.par.zero1 && c->d.world > 1 ? 1 : 0;
    char zero_text[96] = "";
    if (c->cm.zero)
        snprintf(zero_text, sizeof zero_text, " (%zu of %zu parameters on this rank)", c->cm.shard_len, c->cm.n_total);
    else if (ft.method != METHOD_FULL && c->d.world > 1)
        snprintf(zero_text, sizeof zero_text, " (fine-tuning: trained state replicated on every rank)");
    snprintf(setup, setup_len, ", attention %s, recompute %s, ZeRO-%d%s%s%s%s%s%s",
             !c->cm.flash ? "materialised" : c->cm.deterministic ? "fused (deterministic)" : "fused",
             plan_vocab_name(recompute_json_names, RECOMPUTE_COUNT, c->cm.recompute), stage, zero_text,
             c->offload || c->cm.off_shard ? ", optimizer offloaded to host memory" : "", ft_text,
             c->cm.f8_head ? ", FP8 projection and LM-head GEMMs" : c->cm.fp8 ? ", FP8 projection GEMMs" : "", c->cm.master_lo ? ", split master weights" : "",
             c->cm.bf16_states ? ", bf16 AdamW moments" : "");
    return 0;
}

/* ZeRO-3 in full training makes this rank's state from its shard of the flat
 * layout alone (model_cuda_step.c zero_set_flat reads only [shard_off, +shard_len)):
 * the loop reads only the host ranges behind it, so a rank of a 72B run never
 * holds the whole model in host memory. The shard under offload is the same
 * (each rank's in its own pinned memory). ZeRO-2 converts every weight to bf16
 * on every rank, LoRA and freeze upload the whole base: those read all. */
static int cu_state_part(void *self, const Model *hm, ModelPart *part)
{
    CudaBackend *c = self;
    c->shard_only = c->cm.zero == 3 && c->method == METHOD_FULL && !c->offload;
    if (!c->shard_only) return 0;
    if (!(c->part_r = malloc(((size_t)hm->n_params + 1) * sizeof *c->part_r))) { log_error("out of memory"); return -1; }
    part->n = cuda_flat_range_to_host_part(hm, c->cuda_off, c->cm.shard_off, c->cm.shard_off + c->cm.shard_len,
                                           c->part_r);
    part->r = c->part_r;
    return 0;
}

static void cu_destroy(void *self)
{
    CudaBackend *c = self;
    /* per rank (ranks sharing a GPU make the device's own counters useless) */
    if (c->have_cm)
        log_info("rank %d: %.4f GiB of GPU memory allocated for the model (ZeRO-%d, %zu of %zu parameters in its "
                 "shard)", c->d.rank, c->cm.bytes_allocated / 1073741824.0, c->cm.zero ? c->cm.zero
                 : c->cm.par.zero1 && c->d.world > 1, c->cm.shard_len, c->cm.n_total);
    if (c->gpu_mf) fclose(c->gpu_mf);
    free(c->ids_i); free(c->pos_i); free(c->tg);
    free(c->flat); free(c->flat_m); free(c->flat_v); free(c->cuda_off); free(c->host_tmp); free(c->part_r);
    c->host_tmp = NULL;
    c->part_r = NULL;
    if (c->have_cm) cuda_model_destroy(&c->cm);
    c->have_cm = 0;
}

/* Moment staging buffers, allocated when a resume or a checkpoint first needs them. */
static int moments_alloc(CudaBackend *c)
{
    if (!c->flat_m) c->flat_m = malloc(c->cm.n_total * sizeof *c->flat_m);
    if (!c->flat_v) c->flat_v = malloc(c->cm.n_total * sizeof *c->flat_v);
    if (!c->flat_m || !c->flat_v) { log_error("out of memory"); return -1; }
    return 0;
}

/* The optimizer's moments as a whole host-layout array: under freeze the loop's
 * AdamW covers only the trained window (model_trainable), placed at its offset
 * in host_tmp (zero elsewhere); else the loop's own array. */
static const float *moments_full(CudaBackend *c, const Model *hm, const float *mom)
{
    if (c->method != METHOD_FREEZE) return mom;
    Model view;
    if (model_trainable(hm, &view)) return mom;   /* checked in cu_finetune */
    memset(c->host_tmp, 0, hm->n_floats * sizeof *c->host_tmp);
    memcpy(c->host_tmp + c->view_lo, mom, view.n_floats * sizeof *mom);
    model_trainable_free(hm, &view);
    return c->host_tmp;
}

/* The reverse: the window of a host-layout array into the loop's moments. */
static void moments_window(CudaBackend *c, const Model *hm, const float *full, float *mom)
{
    Model view;
    if (model_trainable(hm, &view)) return;
    memcpy(mom, full + c->view_lo, view.n_floats * sizeof *mom);
    model_trainable_free(hm, &view);
}

static int cu_set_state(void *self, const Model *hm, const AdamW *opt, int moments)
{
    CudaBackend *c = self;
    if (c->offload) {   /* hm and opt are the pinned state itself */
        cuda_model_offload_adopt(&c->cm, moments ? (int)opt->t : 0);
        return 0;
    }
    if (c->method == METHOD_LORA) {   /* the frozen base, then the adapters and their moments */
        cuda_host_to_flat(hm, c->cuda_off, hm->w, c->flat, c->cm.n_total);
        cuda_model_set_flat(&c->cm, c->flat, NULL, NULL, 0);
        const Model *p = &hm->lora->p;
        cuda_lora_set(&c->cm, p->w, moments ? opt->m : NULL, moments ? opt->v : NULL);
        c->cm.step = moments ? (int)opt->t : 0;
        return 0;
    }
    if (c->shard_only) {   /* only the shard's window of the staging buffers is written or read */
        size_t lo = c->cm.shard_off, hi = lo + c->cm.shard_len;
        if (cuda_model_host_shard(&c->cm, 0)) {   /* offloaded: into the pinned shard itself, no staging */
            cuda_host_to_flat_range(hm, c->cuda_off, hm->w, cuda_model_host_shard(&c->cm, 0), lo, hi);
            if (moments) {
                cuda_host_to_flat_range(hm, c->cuda_off, opt->m, cuda_model_host_shard(&c->cm, 1), lo, hi);
                cuda_host_to_flat_range(hm, c->cuda_off, opt->v, cuda_model_host_shard(&c->cm, 2), lo, hi);
            }
            cuda_model_host_shard_adopt(&c->cm, (int)opt->t, moments);
            return 0;
        }
        if (moments) {
            if (moments_alloc(c)) return -1;
            cuda_host_to_flat_range(hm, c->cuda_off, opt->m, c->flat_m + lo, lo, hi);
            cuda_host_to_flat_range(hm, c->cuda_off, opt->v, c->flat_v + lo, lo, hi);
        }
        cuda_host_to_flat_range(hm, c->cuda_off, hm->w, c->flat + lo, lo, hi);
        cuda_model_set_flat(&c->cm, c->flat, moments ? c->flat_m : NULL, moments ? c->flat_v : NULL, (int)opt->t);
        return 0;
    }
    if (moments) {
        if (moments_alloc(c)) return -1;
        cuda_host_to_flat(hm, c->cuda_off, moments_full(c, hm, opt->m), c->flat_m, c->cm.n_total);
        cuda_host_to_flat(hm, c->cuda_off, moments_full(c, hm, opt->v), c->flat_v, c->cm.n_total);
    }
    cuda_host_to_flat(hm, c->cuda_off, hm->w, c->flat, c->cm.n_total);
    cuda_model_set_flat(&c->cm, c->flat, moments ? c->flat_m : NULL, moments ? c->flat_v : NULL, (int)opt->t);
    return 0;
}

/* Gather the GPU's master weights and AdamW moments into the host model and
 * optimizer (collective under ZeRO-1). */
static int cu_get_state(void *self, Model *hm, AdamW *opt, int is0)
{
    CudaBackend *c = self;
    if (c->offload) {   /* the downloads of the last step finished: hm and opt are current */
        cuda_model_get_flat(&c->cm, NULL, NULL, NULL);
        opt->t = c->cm.step;
        return 0;
    }
    if (c->method == METHOD_LORA) {   /* one rank: the adapters; the base is unchanged */
        Model *p = &hm->lora->p;
        cuda_lora_get(&c->cm, p->w, opt->m, opt->v);
        opt->t = c->cm.step;
        return 0;
    }
    if (moments_alloc(c)) return -1;
    if (c->method == METHOD_FREEZE) {   /* only the spans come back: the rest is the host's */
        cuda_host_to_flat(hm, c->cuda_off, hm->w, c->flat, c->cm.n_total);
        memset(c->flat_m, 0, c->cm.n_total * sizeof *c->flat_m);
        memset(c->flat_v, 0, c->cm.n_total * sizeof *c->flat_v);
    }
    cuda_model_get_flat(&c->cm, is0 ? c->flat : NULL, is0 ? c->flat_m : NULL, is0 ? c->flat_v : NULL);
    if (!is0) return 0;
    cuda_flat_to_host(hm, c->cuda_off, c->flat, hm->w);
    if (c->method == METHOD_FREEZE) {
        cuda_flat_to_host(hm, c->cuda_off, c->flat_m, c->host_tmp);
        moments_window(c, hm, c->host_tmp, opt->m);
        cuda_flat_to_host(hm, c->cuda_off, c->flat_v, c->host_tmp);
        moments_window(c, hm, c->host_tmp, opt->v);
    } else {
        cuda_flat_to_host(hm, c->cuda_off, c->flat_m, opt->m);
        cuda_flat_to_host(hm, c->cuda_off, c->flat_v, opt->v);
    }
    opt->t = c->cm.step;
    return 0;
}

/* ZeRO-3 in full training: this rank's shard into the loop's host state
 * (the host ranges of cu_state_part) for a checkpoint each rank writes its
 * piece of; through the staging buffers' shard window only. */
static int cu_get_state_part(void *self, Model *hm, AdamW *opt)
{
    CudaBackend *c = self;
    if (!c->shard_only) { log_error("get_state_part without a shard"); return -1; }
    size_t lo = c->cm.shard_off, hi = lo + c->cm.shard_len;
    opt->t = c->cm.step;
    if (cuda_model_host_shard(&c->cm, 0)) {   /* offloaded: straight from the pinned shard */
        cuda_flat_to_host_range(hm, c->cuda_off, cuda_model_host_shard(&c->cm, 0), hm->w, lo, hi);
        cuda_flat_to_host_range(hm, c->cuda_off, cuda_model_host_shard(&c->cm, 1), opt->m, lo, hi);
        cuda_flat_to_host_range(hm, c->cuda_off, cuda_model_host_shard(&c->cm, 2), opt->v, lo, hi);
        return 0;
    }
    if (moments_alloc(c)) return -1;
    cuda_model_get_shard(&c->cm, c->flat, c->flat_m, c->flat_v);
    cuda_flat_to_host_range(hm, c->cuda_off, c->flat + lo, hm->w, lo, hi);
    cuda_flat_to_host_range(hm, c->cuda_off, c->flat_m + lo, opt->m, lo, hi);
    cuda_flat_to_host_range(hm, c->cuda_off, c->flat_v + lo, opt->v, lo, hi);
    return 0;
}

static int cu_begin(void *self, const RunPlan *plan, int64_t start_step, int is0)
{
    CudaBackend *c = self;
    if (!is0) return 0;
    snprintf(c->gpu_path, sizeof c->gpu_path, "%s/gpu_metrics.jsonl", plan->out_dir);
    if (!(c->gpu_mf = fopen(c->gpu_path, start_step ? "a" : "w"))) {
        log_error("%s: %s", c->gpu_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ids/pos as ints and the next-token targets (-1: no loss) of rows [0, n_rows)
 * of b; rows past n_rows get no targets. Returns the label count. */
static int64_t make_targets(CudaBackend *c, const Batch *b, int n_rows)
{
    const int T = b->T;
    int64_t labels = 0;
    for (size_t k = 0; k < (size_t)b->B * T; k++) {
        int t = (int)(k % T);
        c->ids_i[k] = (int)b->ids[k];
        c->pos_i[k] = (int)b->pos[k];
        int lab = (int)(k / T) < n_rows && t + 1 < T && b->mask[k + 1] && b->pos[k + 1] > 0;
        c->tg[k] = lab ? (int)b->ids[k + 1] : -1;
        labels += lab;
    }
    return labels;
}

static int cu_micro_step(void *self, const Batch *b, int index, int count, int64_t *labels)
{
    CudaBackend *c = self;
    if (index == 0) {
        cuda_model_zero_grad(&c->cm);
        CUDA_CHECK(cudaMemsetAsync(c->cm.loss_acc, 0, sizeof(float), (cudaStream_t)c->cm.stream));
    }
    *labels = make_targets(c, b, b->B);
    /* Unscaled loss gradient; multiplied by 1 / the global label count in the step. */
    cuda_model_micro(&c->cm, c->ids_i, c->pos_i, c->tg, 1.0f, NULL, NULL, index == count - 1);
    return 0;
}

static int cu_optimizer_step(void *self, float grad_mult, double lr, double clip, double *grad_norm,
                             double *loss_sum)
{
    CudaBackend *c = self;
    double gn = cuda_model_step(&c->cm, grad_mult, (float)lr, c->b1, c->b2, c->eps, c->wd, (float)clip);
    float ls = 0;
    CUDA_CHECK(cudaMemcpy(&ls, c->cm.loss_acc, sizeof ls, cudaMemcpyDeviceToHost));
    *grad_norm = gn;
    *loss_sum = ls;
    return 0;
}

/* Forward only (grad_scale 0), each row's argmax taken on the GPU (k_argmax_rows):
 * B*T indices cross to the host, not the B*T*V logits (10 GB a batch of 16 x 1024
 * at Qwen's vocabulary, which made a held-out pass of 300 rows take minutes). Rows
 * past n_rows have no targets, so their loss is 0. */
static int cu_eval_forward(void *self, const Batch *b, int n_rows, double *loss_sum, int64_t *labels,
                           uint32_t *argmax)
{
    CudaBackend *c = self;
    if (b->B != c->cm.B || b->T != c->cm.T) {
        log_error("held-out rows of %d tokens: the CUDA backend evaluates at the training context (%d tokens)",
                  b->T, c->cm.T);
        return -1;
    }
    *labels = make_targets(c, b, n_rows);
    /* rank 0 evaluates alone after the final checkpoint (train_loop.c), whose
     * get_state left the whole master weights in c->flat: ZeRO-3 gathers from them */
    if (c->cm.zero == 3 && c->d.world > 1) {
        if (!c->flat) { log_error("ZeRO-3 evaluation before the weights were gathered"); return -1; }
        cuda_model_zero3_local(&c->cm, c->flat);
    }
    CUDA_CHECK(cudaMemsetAsync(c->cm.loss_acc, 0, sizeof(float), (cudaStream_t)c->cm.stream));
    cuda_model_micro(&c->cm, c->ids_i, c->pos_i, c->tg, 0.0f, NULL, argmax, 0);
    float ls = 0;   /* on the model's stream: the loss kernels may still be running */
    CUDA_CHECK(cudaMemcpyAsync(&ls, c->cm.loss_acc, sizeof ls, cudaMemcpyDeviceToHost, (cudaStream_t)c->cm.stream));
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)c->cm.stream));
    *loss_sum = ls;
    return 0;
}

/* GPU memory: our allocations plus what the device gained beyond them. */
static double gpu_gib(const CudaBackend *c)
{
    return (cuda_used_above(c->peak, c->base_used) + c->cm.bytes_allocated) / 1073741824.0;
}

static int cu_step_stats(void *self, int64_t step, double step_s, int is0, char *extra, size_t len)
{
    CudaBackend *c = self;
    size_t used = cuda_device_used();
    if (used > c->peak) c->peak = used;
    if (!is0) return 0;
    fprintf(c->gpu_mf, "{\"step\":%" PRId64 ",\"step_time_s\":%.6f,\"gpu_peak_bytes\":%zu,"
            "\"gpu_allocated_bytes\":%zu}\n", step, step_s, cuda_used_above(c->peak, c->base_used) + c->cm.bytes_allocated,
            c->cm.bytes_allocated);
    if (fflush(c->gpu_mf)) { log_error("%s: write failed", c->gpu_path); return -1; }
    snprintf(extra, len, " gpu %.2f GiB", gpu_gib(c));
    return 0;
}

static void cu_final_stats(void *self, char *extra, size_t len)
{
    snprintf(extra, len, ", peak GPU memory %.2f GiB", gpu_gib(self));
}

int cmd_run_cuda(int argc, char **argv)
{
    CudaBackend *c = calloc(1, sizeof *c);
    if (!c) { log_error("out of memory"); return 1; }
    TrainBackend be = {
        .prog = "llmc-train-cuda", .self = c, .check_plan = cu_check_plan,
        /* ranks: cuda_dist.c (NCCL, or the host transport: cuda_coll.h) */
        .preflight = cu_preflight,
        .dist_init = cu_dist_init, .dist_finalize = cu_dist_finalize,
        .sum_f64 = cu_sum_f64, .any = cu_any, .barrier = cu_barrier,
        /* the state lives on the GPU; the loop's host model is its mirror */
        .create = cu_create, .state_part = cu_state_part, .destroy = cu_destroy, .set_state = cu_set_state,
        .get_state = cu_get_state, .get_state_part = cu_get_state_part,
        .begin = cu_begin, .micro_step = cu_micro_step, .optimizer_step = cu_optimizer_step,
        .eval_forward = cu_eval_forward, .step_stats = cu_step_stats, .final_stats = cu_final_stats,
    };
    int rc = train_loop_run(&be, argc, argv);
    free(c);
    return rc;
}
