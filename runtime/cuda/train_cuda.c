/* train_cuda.c — `llmc-train-cuda run PLAN.json`: the training loop of runtime/train.c
 * on the GPU model. Same plan loader, shards, data order, loss normalisation,
 * learning-rate schedule, metrics, checkpoints and HF export as the CPU trainer,
 * so a run can move between the backends (checkpoints are fp32 either way).
 *
 * Data order (as train.c): each epoch is a Fisher-Yates permutation of the rows
 * seeded by train.seed and the epoch; optimizer step s uses stream rows
 * [s*G, (s+1)*G); of the S = world*grad_accum slots, rank r runs slots
 * a*world + r, and slot k takes positions k, k+S, k+2S, ...
 *
 * GPU extras: OUTPUT_DIR/gpu_metrics.jsonl, one line per step with the step time
 * and the device memory high-water mark (cudaMemGetInfo) next to metrics.jsonl. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>

#include "../checkpoint.h"
#include "../hf_config.h"
#include "../log.h"
#include "../metrics.h"
#include "../model.h"
#include "../optim.h"
#include "../plan.h"
#include "../rng.h"
#include "../row_stream.h"
#include "../run_init.h"
#include "../shard_io.h"
#include "../stopsig.h"
#include "cuda_check.h"
#include "cuda_dist.h"
#include "host_model.h"
#include "model_cuda.h"
#include "train_cuda.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *json_str(const cJSON *root, const char *obj, const char *key)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, obj);
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int json_int(const cJSON *root, const char *obj, const char *key, int dflt)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, obj);
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

static size_t device_used(void)
{
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return tot - fr;
}

/* Gather the GPU's master weights and AdamW moments into the host model and
 * optimizer (collective under ZeRO-1), and on rank 0 write a checkpoint. The
 * moment buffers are allocated on first use. 0, or -1 after logging. */
static int gather_and_save(CudaModel *cm, Model *hm, AdamW *opt, const size_t *cuda_off, float *flat,
                           float **flat_m, float **flat_v, const RunPlan *plan, const TrainState *st,
                           const CkptFingerprint *fp, int is0)
{
    if (!*flat_m) *flat_m = malloc(cm->n_total * sizeof **flat_m);
    if (!*flat_v) *flat_v = malloc(cm->n_total * sizeof **flat_v);
    if (!*flat_m || !*flat_v) { log_error("out of memory"); return -1; }
    cuda_model_get_flat(cm, is0 ? flat : NULL, is0 ? *flat_m : NULL, is0 ? *flat_v : NULL);
    if (!is0) return 0;
    cuda_flat_to_host(hm, cuda_off, flat, hm->w);
    cuda_flat_to_host(hm, cuda_off, *flat_m, opt->m);
    cuda_flat_to_host(hm, cuda_off, *flat_v, opt->v);
    opt->t = cm->step;
    char err[1024];
    if (ckpt_save(plan->ckpt_dir, hm, opt, st, fp, plan->ckpt_keep, err, sizeof err)) {
        log_error("checkpoint: %s", err);
        return -1;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: llmc-train-cuda run PLAN.json [--stop-after N] [--fresh]\n"
                    "  --stop-after N  behave as if a stop signal arrived after step N (checkpoint, exit %d)\n"
                    "  --fresh         start at step 0 even though the checkpoint directory holds checkpoints\n"
                    "                  (they are kept; rotation removes them oldest first)\n",
            STOP_EXIT_REQUEUE);
}

int cmd_run_cuda(int argc, char **argv)
{
    const char *plan_path = NULL;
    int64_t stop_after = -1;
    int fresh = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fresh")) fresh = 1;
        else if (!strcmp(argv[i], "--stop-after") && i + 1 < argc) {
            char *end;
            stop_after = strtoll(argv[++i], &end, 10);
            if (*end || stop_after < 0) { usage(); return 2; }
        } else if (argv[i][0] == '-' || plan_path) {
            usage();
            return 2;
        } else plan_path = argv[i];
    }
    if (!plan_path) { usage(); return 2; }

    char err[1024];
    RunPlan plan;
    if (run_plan_load(&plan, plan_path, err, sizeof err)) {
        fprintf(stderr, "llmc-train-cuda run: %s\n", err);
        return 2;
    }
    const ModelConfig *mc = &plan.model;
    CudaModelConfig cc;
    if (cuda_config_from_model(mc, &cc, err, sizeof err)) {
        fprintf(stderr, "llmc-train-cuda run: %s: model: %s\n", plan.path, err);
        run_plan_free(&plan);
        return 2;
    }
    const char *recompute = json_str(plan.json, "train", "recompute");
    const char *attention = json_str(plan.json, "train", "attention");
    int zero_stage = json_int(plan.json, "parallel", "zero_stage", 0);

    CudaDist d;
    if (cuda_dist_init(&d) != 0) { run_plan_free(&plan); return 1; }
    log_set_rank(d.rank, d.world, NULL);
    stopsig_install();
    const int is0 = d.rank == 0;
    int rc = 1, have_set = 0;
    ShardSet set;
    Model hm = {0};
    AdamW opt = {0};
    CudaModel cm;
    int have_cm = 0;
    RowStream rs = {0};
    MetricsFile mf = {0};
    FILE *gpu_mf = NULL;
    size_t *cuda_off = NULL;
    float *flat = NULL, *flat_m = NULL, *flat_v = NULL;
    uint32_t *ids = NULL, *pos = NULL;
    uint8_t *mask = NULL;
    int *ids_i = NULL, *pos_i = NULL, *tg = NULL;
    uint64_t *rows = NULL;

    if (d.world != plan.data_parallel) {
        log_error("the plan is for %d data-parallel ranks, this run has %d", plan.data_parallel, d.world);
        goto out;
    }
    if (run_open_shards(&set, &plan, mc)) goto out;
    have_set = 1;
    if (model_init(&hm, mc)) { log_error("cannot allocate the host copy of the model"); goto out; }
    /* the CPU trainer's init, bit for bit */
    if (run_init_weights(&hm, &plan, mc)) goto out;

    CudaParallel par = {.rank = d.rank, .world = d.world, .zero1 = zero_stage >= 1, .comm = d.comm,
                        .comm_stream = d.comm_stream};
    int want_recompute = recompute && !strcmp(recompute, "full");
    int want_flash = !(attention && !strcmp(attention, "eager"));
    if (is0 && zero_stage > 1)
        log_info("parallel.zero_stage = %d: the CUDA backend shards optimizer states only (ZeRO-1)", zero_stage);
    if (is0 && recompute && !strcmp(recompute, "selective"))
        log_info("train.recompute = selective: the CUDA backend keeps all activations (no recompute)");
    const int T = plan.context, MB = plan.micro_batch, GA = plan.grad_accum, G = plan.global_batch;
    if (cuda_model_create(&cm, &cc, MB, T, want_recompute, want_flash, &par) != 0) goto out;
    have_cm = 1;
    size_t base_used = device_used();

    cuda_off = malloc((size_t)hm.n_params * sizeof *cuda_off);
    flat = malloc(cm.n_total * sizeof *flat);
    if (!cuda_off || !flat) { log_error("out of memory"); goto out; }
    if (cuda_host_map(&hm, &cm, cuda_off, err, sizeof err)) { log_error("%s", err); goto out; }

    int64_t total = plan.max_steps > 0 ? plan.max_steps
                                       : (int64_t)ceil(plan.epochs * (double)set.n_rows / (double)G);
    if (total < 1) total = 1;
    LrSchedule sch = {plan.schedule == SCHEDULE_LINEAR ? LR_LINEAR : plan.schedule == SCHEDULE_CONSTANT ? LR_CONSTANT : LR_COSINE,
                      plan.lr, plan.min_lr, plan.warmup_steps >= 0 ? plan.warmup_steps
                                                                   : warmup_from_ratio(total, plan.warmup_ratio),
                      total};
    CkptFingerprint fp;
    run_fingerprint(&plan, &set, total, sch.warmup_steps, &fp);
    size_t N = (size_t)MB * T;
    if (adamw_init(&opt, hm.n_floats, plan.beta1, plan.beta2, plan.eps, plan.weight_decay) ||
        !(ids = malloc(N * 4)) || !(pos = malloc(N * 4)) || !(mask = malloc(N)) || !(ids_i = malloc(N * sizeof(int))) ||
        !(pos_i = malloc(N * sizeof(int))) || !(tg = malloc(N * sizeof(int))) ||
        !(rows = malloc((size_t)MB * sizeof *rows)) || row_stream_init(&rs, set.n_rows, plan.seed)) {
        log_error("out of memory");
        goto out;
    }

    TrainState st = {0};
    rng_seed(&st.rng, plan.seed);
    {
        int got = run_resume(&plan, &fp, total, fresh, &hm, &opt, &st, is0);
        if (got < 0) goto out;
        if (got) {
            flat_m = malloc(cm.n_total * sizeof *flat_m);
            flat_v = malloc(cm.n_total * sizeof *flat_v);
            if (!flat_m || !flat_v) { log_error("out of memory"); goto out; }
            cuda_host_to_flat(&hm, cuda_off, opt.m, flat_m, cm.n_total);
            cuda_host_to_flat(&hm, cuda_off, opt.v, flat_v, cm.n_total);
        }
    }
    cuda_host_to_flat(&hm, cuda_off, hm.w, flat, cm.n_total);
    cuda_model_set_flat(&cm, flat, flat_m, flat_v, (int)opt.t);

    char gpu_path[4200];
    if (is0) {
        if (mkdir_parents(plan.out_dir)) { log_error("%s: %s", plan.out_dir, strerror(errno)); goto out; }
        if (metrics_open(&mf, plan.metrics_path, st.step)) {
            log_error("%s: %s", plan.metrics_path, strerror(errno));
            goto out;
        }
        snprintf(gpu_path, sizeof gpu_path, "%s/gpu_metrics.jsonl", plan.out_dir);
        if (!(gpu_mf = fopen(gpu_path, st.step ? "a" : "w"))) { log_error("%s: %s", gpu_path, strerror(errno)); goto out; }
        log_info("training %" PRId64 " steps on %d GPU(s): %zu parameters, %" PRIu64 " rows of %d tokens, global "
                 "batch %d (micro %d x accum %d x ranks %d), attention %s, recompute %s, ZeRO-%d",
                 total, d.world, cm.n_real, set.n_rows, T, G, MB, GA, d.world, cm.flash ? "fused" : "materialised",
                 cm.recompute ? "full" : "none", par.zero1 && d.world > 1 ? 1 : 0);
    }
    double last_ckpt = now_s(), last_loss = NAN;
    size_t peak = 0;
    int S = d.world * GA;
    StepDrift drift; step_drift_init(&drift, plan.json);   /* step time vs the plan's estimate */

    while (st.step < total) {
        double t0 = now_s();
        double labels = 0, tokens = 0;
        cuda_model_zero_grad(&cm);
        CUDA_CHECK(cudaMemsetAsync(cm.loss_acc, 0, sizeof(float), (cudaStream_t)cm.stream));
        for (int a = 0; a < GA; a++) {
            int slot = a * d.world + d.rank;
            for (int i = 0; i < MB; i++) rows[i] = row_stream_row(&rs, st.rows_consumed + slot + (int64_t)i * S);
            for (int r = 0; r < MB; r++)
                if (shard_set_read_rows(&set, rows[r], 1, ids + (size_t)r * T, pos + (size_t)r * T,
                                        mask + (size_t)r * T, err, sizeof err)) {
                    log_error("%s", err);
                    goto out;
                }
            for (size_t k = 0; k < N; k++) {
                if (ids[k] >= (uint32_t)mc->vocab) {
                    log_error("%s: token id %u outside the model's vocabulary of %d", plan.shards_dir, ids[k], mc->vocab);
                    goto out;
                }
                int t = (int)(k % T);
                if (pos[k] > (uint32_t)t) {
                    log_error("%s: row %" PRIu64 " position %d has pos %u (before the row's start)", plan.shards_dir,
                              rows[k / T], t, pos[k]);
                    goto out;
                }
                ids_i[k] = (int)ids[k];
                pos_i[k] = (int)pos[k];
                int lab = t + 1 < T && mask[k + 1] && pos[k + 1] > 0;
                tg[k] = lab ? (int)ids[k + 1] : -1;
                labels += lab;
                if (!(ids[k] == set.pad_id && pos[k] == 0 && !mask[k])) tokens += 1;
            }
            /* Unscaled loss gradient; divided by the global label count in the step. */
            cuda_model_micro(&cm, ids_i, pos_i, tg, 1.0f, NULL, a == GA - 1);
        }
        labels = cuda_dist_sum(&d, labels);
        tokens = cuda_dist_sum(&d, tokens);
        float inv = labels > 0 ? (float)(1.0 / labels) : 0.f;
        double lr = lr_at(&sch, st.step);
        double gn = cuda_model_step(&cm, inv, (float)lr, (float)plan.beta1, (float)plan.beta2, (float)plan.eps,
                                    (float)plan.weight_decay, (float)plan.grad_clip);
        float loss_sum = 0;
        CUDA_CHECK(cudaMemcpy(&loss_sum, cm.loss_acc, sizeof loss_sum, cudaMemcpyDeviceToHost));
        double loss = labels > 0 ? cuda_dist_sum(&d, loss_sum) / labels : 0.0;
        st.step++;
        st.rows_consumed += G;
        st.tokens_seen += (int64_t)tokens;
        double dt = now_s() - t0;
        size_t used = device_used();
        if (used > peak) peak = used;
        last_loss = loss;
        if (!isfinite(loss)) {
            log_error("step %" PRId64 ": loss is %g; stopping (no checkpoint of a diverged model)", st.step, loss);
            goto out;
        }
        if (is0) {
            StepMetrics sm = {st.step, loss, lr, gn, (int64_t)tokens, tokens / dt, dt, peak_rss_bytes()};
            if (metrics_write(&mf, &sm)) { log_error("%s: write failed", plan.metrics_path); goto out; }
            step_drift_feed(&drift, st.step, dt);
            fprintf(gpu_mf, "{\"step\":%" PRId64 ",\"step_time_s\":%.6f,\"gpu_peak_bytes\":%zu,"
                    "\"gpu_allocated_bytes\":%zu}\n", st.step, dt, peak - base_used + cm.bytes_allocated,
                    cm.bytes_allocated);
            fflush(gpu_mf);
            if (st.step % plan.log_every == 0 || st.step == total)
                log_info("step %" PRId64 "/%" PRId64 " loss %.4f lr %.3g grad_norm %.3f %.0f tok/s %.3fs "
                         "gpu %.2f GiB", st.step, total, loss, lr, gn, tokens / dt, dt,
                         (peak - base_used + cm.bytes_allocated) / 1073741824.0);
        }
        int stop = (int)cuda_dist_sum(&d, stopsig_requested() || st.step == stop_after) > 0;
        int due = (plan.ckpt_every_steps > 0 && st.step % plan.ckpt_every_steps == 0) ||
                  (is0 && plan.ckpt_every_seconds > 0 && now_s() - last_ckpt >= plan.ckpt_every_seconds);
        due = (int)cuda_dist_sum(&d, due) > 0;
        if ((stop || due) && st.step < total) {
            if (gather_and_save(&cm, &hm, &opt, cuda_off, flat, &flat_m, &flat_v, &plan, &st, &fp, is0)) goto out;
            if (is0) log_info("checkpoint step %" PRId64 " -> %s", st.step, plan.ckpt_dir);
            last_ckpt = now_s();
        }
        if (stop) {
            const char *sig = stopsig_name();
            if (is0) log_info("stopping at step %" PRId64 " (%s); exit %d to be requeued", st.step,
                              sig ? sig : "--stop-after", STOP_EXIT_REQUEUE);
            rc = STOP_EXIT_REQUEUE;
            goto out;
        }
    }

    if (gather_and_save(&cm, &hm, &opt, cuda_off, flat, &flat_m, &flat_v, &plan, &st, &fp, is0)) goto out;
    if (is0) {
        char final_dir[4200];
        metrics_close(&mf);
        if (run_write_final(&plan, &hm, 0, final_dir, sizeof final_dir)) goto out;
        log_info("done: %" PRId64 " steps, last loss %.4f, peak GPU memory %.2f GiB; model in %s", st.step, last_loss,
                 (peak - base_used + cm.bytes_allocated) / 1073741824.0, final_dir);
    }
    rc = 0;
out:
    metrics_close(&mf);
    if (gpu_mf) fclose(gpu_mf);
    row_stream_free(&rs); free(rows); free(ids); free(pos); free(mask); free(ids_i); free(pos_i); free(tg);
    free(flat); free(flat_m); free(flat_v); free(cuda_off);
    if (have_cm) cuda_model_destroy(&cm);
    adamw_free(&opt);
    model_free(&hm);
    if (have_set) shard_set_close(&set);
    run_plan_free(&plan);
    cuda_dist_finalize(&d);
    return rc;
}
