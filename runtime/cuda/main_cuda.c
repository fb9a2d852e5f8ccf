/* llmc-train-cuda — the CUDA trainer's command line.
 *
 *   run     PLAN.json [--stop-after N]              train as the plan says (backend_cuda.c + train_loop.c)
 *   params  --model NAME | --config config.json     parameter table (no GPU needed)
 *   bench   --model NAME [--batch B] [--seq T] ...  training-step benchmark, random init/data
 *   check   --config F --weights F --tokens F --out DIR [--lr ...]
 *                                                   logits, gradients and a loss curve for
 *                                                   the comparisons in tests/cuda/
 *
 * Messages go through log.h (docs/runtime.md, "Errors"). bench's answer is the
 * JSON line on stdout, so its per-step lines (and check's) are log_note lines
 * on stderr; a failing CUDA call is CUDA_CHECK's (print the call, exit 1).
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "cuda_check.h"
#include "cuda_coll.h"
#include "cuda_dist.h"
#include "args.h"
#include "checkpoint.h"
#include "checkpoint.h"
#include "data_commands.h"
#include "hf_config.h"
#include "log.h"
#include "plan.h"
#include "host_model.h"
#include "lora_cuda.h"
#include "model_cuda.h"
#include "phase_timer.h"
#include "backend_cuda.h"

#define H200_BF16_PEAK 989.4e12   /* dense bf16 FLOP/s, H200 SXM datasheet */

static void usage(FILE *out)
{
    fputs("usage: llmc-train-cuda COMMAND [ARGS]\n"
          "\n"
          "  run PLAN.json [--stop-after N]\n"
          "        train as the plan says on the GPU(s) (resumes from the latest checkpoint)\n"
          "  prepare PLAN.json | tokenize --tokenizer DIR | verify DIR\n"
          "        as in llmc-train (the same code), so a GPU node needs only this binary\n"
          "  params --model NAME | --config config.json\n"
          "        print the parameter table and count (no GPU needed)\n"
          "  bench --model NAME [--batch B] [--accum N] [--seq T] [--steps N] [--warmup N] [--recompute]\n"
          "        [--selective-recompute] [--zero1 | --zero 1|2|3] [--offload] [--eager-attention] [--seed S] [--lora-rank R]\n"
          "        [--nondeterministic] [--fp8] [--fp8-lm-head true|false] [--master-weights fp32|split]\n"
          "        [--optimizer-states fp32|bf16]\n"
          "        time training steps on random weights and tokens; one JSON line per rank 0\n"
          "        (LLMC_PHASE_TIMES=1: as many steps again with per-phase GPU times on stderr)\n"
          "  check --config config.json --weights model.safetensors --tokens FILE --out DIR\n"
          "        [--lr X] [--wd X] [--clip X] [--beta1 X] [--beta2 X] [--eps X] [--recompute]\n"
          "        [--selective-recompute] [--offload] [--eager-attention] [--lora DIR] [--nondeterministic]\n"
          "        [--fp8] [--fp8-lm-head true|false] [--master-weights fp32|split] [--optimizer-states fp32|bf16]\n"
          "        write step-0 logits and gradients and the loss of every step (tests/cuda/);\n"
          "        --lora DIR: train the PEFT adapter in DIR on the frozen base (gradients of the\n"
          "        adapters, and the trained adapter written to OUT/adapter)\n"
          "  --nondeterministic: fused attention's backward with float atomics (cuDNN's, or the\n"
          "        flash kernels' dQ): faster, different bits every run (the plan key\n"
          "        train.deterministic = false)\n"
          "  --fp8, --fp8-lm-head, --master-weights, --optimizer-states: the plan keys\n"
          "        train.precision = fp8, train.fp8_lm_head (default: true with --fp8),\n"
          "        train.master_weights and train.optimizer_states\n"
          "\n"
          "  --help, --version   (every command takes --help; --opt=VALUE or --opt VALUE)\n"
          "\n"
          "models: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b, qwen2.5-14b, qwen2.5-72b,\n"
          "        qwen3-1.7b, tiny\n", out);
}

typedef struct {
    const char *model, *config, *weights, *tokens, *out, *lora;
    int batch, seq, steps, warmup, recompute, zero1, zero, eager, offload, accum, lora_rank, nondet;
    int fp8, fp8_head, master_split, bf16_states;
    unsigned long long seed;
    float lr, wd, clip, b1, b2, eps;
} Opts;

static CudaNumerics numerics(const Opts *o)
{
    return (CudaNumerics){.fp8 = o->fp8, .fp8_head = o->fp8_head, .master_split = o->master_split, .bf16_states = o->bf16_states,
                          .seed = (uint32_t)o->seed};
}

static int attn_mode(const Opts *o)
{
    return o->eager ? CUDA_ATTN_EAGER : o->nondet ? CUDA_ATTN_FUSED : CUDA_ATTN_FUSED_DETERMINISTIC;
}

/* The options of params, bench and check (cmd e.g. "llmc-train-cuda bench"):
 * -1 parsed, else the exit code (0 after --help, 2 after a message naming the
 * option and the bad value). */
static int parse_opts(const char *cmd, int argc, char **argv, Opts *o)
{
    enum { O_MODEL = 0x100, O_CONFIG, O_WEIGHTS, O_TOKENS, O_OUT, O_BATCH, O_SEQ, O_STEPS, O_WARMUP, O_ACCUM, O_LR,
           O_WD, O_CLIP, O_B1, O_B2, O_EPS, O_SEED, O_RECOMPUTE, O_SELECTIVE, O_OFFLOAD, O_ZERO1, O_ZERO, O_EAGER, O_LORA,
           O_LORA_RANK, O_NONDET, O_FP8, O_FP8_HEAD, O_MASTER, O_STATES };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL}, {"config", required_argument, NULL, O_CONFIG},
        {"weights", required_argument, NULL, O_WEIGHTS}, {"tokens", required_argument, NULL, O_TOKENS},
        {"out", required_argument, NULL, O_OUT}, {"batch", required_argument, NULL, O_BATCH},
        {"seq", required_argument, NULL, O_SEQ}, {"steps", required_argument, NULL, O_STEPS},
        {"warmup", required_argument, NULL, O_WARMUP}, {"accum", required_argument, NULL, O_ACCUM},
        {"lr", required_argument, NULL, O_LR},
        {"wd", required_argument, NULL, O_WD}, {"clip", required_argument, NULL, O_CLIP},
        {"beta1", required_argument, NULL, O_B1}, {"beta2", required_argument, NULL, O_B2},
        {"eps", required_argument, NULL, O_EPS}, {"seed", required_argument, NULL, O_SEED},
        {"recompute", no_argument, NULL, O_RECOMPUTE}, {"selective-recompute", no_argument, NULL, O_SELECTIVE},
        {"offload", no_argument, NULL, O_OFFLOAD}, {"zero1", no_argument, NULL, O_ZERO1},
        {"zero", required_argument, NULL, O_ZERO},
        {"eager-attention", no_argument, NULL, O_EAGER}, {"lora", required_argument, NULL, O_LORA},
        {"lora-rank", required_argument, NULL, O_LORA_RANK}, {"nondeterministic", no_argument, NULL, O_NONDET},
        {"fp8", no_argument, NULL, O_FP8}, {"fp8-lm-head", required_argument, NULL, O_FP8_HEAD},
        {"master-weights", required_argument, NULL, O_MASTER},
        {"optimizer-states", required_argument, NULL, O_STATES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->batch = 8; o->accum = 1; o->seq = 2048; o->steps = 10; o->warmup = 3; o->seed = 1234;
    o->fp8_head = 1;
    o->lr = 1e-4f; o->wd = 0.1f; o->clip = 1.0f; o->b1 = 0.9f; o->b2 = 0.95f; o->eps = 1e-8f;
    optind = 1;
    opterr = 0;
    int c, idx = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        char opt[40];
        long long iv;
        double dv;
        int *ints[] = {&o->batch, &o->seq, &o->steps, &o->warmup, &o->accum};
        float *flts[] = {&o->lr, &o->wd, &o->clip, &o->b1, &o->b2, &o->eps};
        const char **strs[] = {&o->model, &o->config, &o->weights, &o->tokens, &o->out};
        for (idx = 0; longopts[idx].name && longopts[idx].val != c; idx++) {}
        snprintf(opt, sizeof opt, "--%s", longopts[idx].name ? longopts[idx].name : "?");
        if (c == 'h') { usage(stdout); return 0; }
        else if (c >= O_MODEL && c <= O_OUT) *strs[c - O_MODEL] = optarg;
        else if (c >= O_BATCH && c <= O_ACCUM) {
            if (args_int(cmd, opt, optarg, 0, 1000000000, &iv)) return 2;
            *ints[c - O_BATCH] = (int)iv;
        } else if (c >= O_LR && c <= O_EPS) {
            if (args_double(cmd, opt, optarg, -1e30, 1e30, &dv)) return 2;
            *flts[c - O_LR] = (float)dv;
        } else if (c == O_SEED) {
            if (args_int(cmd, opt, optarg, 0, INT64_MAX, &iv)) return 2;
            o->seed = (unsigned long long)iv;
        } else if (c == O_RECOMPUTE) o->recompute = RECOMPUTE_FULL;
        else if (c == O_SELECTIVE) o->recompute = RECOMPUTE_SELECTIVE;
        else if (c == O_OFFLOAD) o->offload = 1;
        else if (c == O_ZERO1) o->zero1 = 1;
        else if (c == O_ZERO) {   /* the plan's parallel.zero_stage: 2 and 3 shard gradients (and weights) */
            if (args_int(cmd, opt, optarg, 0, 3, &iv)) return 2;
            o->zero = (int)iv;
            o->zero1 = iv >= 1;
        }
        else if (c == O_EAGER) o->eager = 1;
        else if (c == O_NONDET) o->nondet = 1;
        else if (c == O_LORA) o->lora = optarg;
        else if (c == O_FP8) o->fp8 = 1;
        else if (c == O_FP8_HEAD) {
            if (strcmp(optarg, "true") && strcmp(optarg, "false"))
                return args_usage_error(cmd, "%s: '%s' is not true or false", opt, optarg);
            o->fp8_head = !strcmp(optarg, "true");
        }
        else if (c == O_MASTER || c == O_STATES) {   /* the plan keys' own words (plan_vocab.h) */
            const char *const *words = c == O_MASTER ? master_weights_json_names : optimizer_states_json_names;
            int v = plan_vocab_find(words, optarg);
            if (v < 0) return args_usage_error(cmd, "%s: '%s' is not %s or %s", opt, optarg, words[0], words[1]);
            if (c == O_MASTER) o->master_split = v == MASTER_SPLIT;
            else o->bf16_states = v == OSTATES_BF16;
        }
        else if (c == O_LORA_RANK) {
            if (args_int(cmd, opt, optarg, 1, 1024, &iv)) return 2;
            o->lora_rank = (int)iv;
        }
        else return args_getopt_error(cmd, c, argv);
    }
    if (optind < argc) return args_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* The model: --config, a HF config.json read by the CPU runtime's reader
 * (hf_config.h), or --model, a preset of runtime/model/model.h. Qwen3 (qk_norm) is
 * refused here; shapes the kernels cannot take when laid out. */
static int get_config(const Opts *o, ModelConfig *cfg)
{
    if (o->config) {
        char err[512];
        if (hf_config_read(o->config, cfg, err, sizeof err) ||
            (cfg->qk_norm && cuda_model_supports(cfg, err, sizeof err))) {
            log_error("%s", err);
            return -1;
        }
        return 0;
    }
    if (!o->model) { log_error("give --model NAME or --config FILE"); return -1; }
    if (model_preset(o->model, cfg) != 0) {
        log_error("unknown model '%s' (qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b, "
                  "qwen2.5-14b, qwen2.5-72b, qwen3-1.7b, tiny)", o->model);
        return -1;
    }
    return 0;
}

/* A PEFT adapter directory as adapters on cfg's layers (runtime/store/hf_export.c
 * peft_load); *alpha, *rslora as its config says. NULL after a message. */
static Lora *lora_from_peft(const char *dir, const ModelConfig *cfg, int *alpha, int *rslora)
{
    char err[1024];
    Model base;
    if (model_layout(&base, cfg)) { log_error("out of memory"); return NULL; }
    Lora *l = peft_load(dir, &base, alpha, rslora, err, sizeof err);
    model_free(&base);
    if (!l) log_error("%s", err);
    return l;
}

static int cmd_params(int argc, char **argv)
{
    Opts o;
    ModelConfig cfg;
    CudaModel m;
    memset(&m, 0, sizeof m);
    int rc = parse_opts("llmc-train-cuda params", argc, argv, &o);
    if (rc >= 0) return rc;
    if (get_config(&o, &cfg)) return 2;
    if (cuda_model_layout(&m, &cfg, 1) != 0) return 1;
    for (int i = 0; i < m.n_params; i++) {
        const CudaParam *p = &m.params[i];
        if (p->cols) printf("%-56s [%d, %d]\n", p->name, p->rows, p->cols);
        else printf("%-56s [%d]\n", p->name, p->rows);
    }
    CudaModel probe = m;
    printf("parameters %zu\n", m.n_real);
    printf("flops_per_token_at_2048 %.6e\n", cuda_model_flops_per_token(&probe, 2048));
    free(m.params);
    free(m.lo);
    return 0;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Host fp32 weights and zero AdamW moments in runtime/model/model.h's layout, for
 * --offload (the training loop's Model and AdamW play this part in `run`). */
static int host_state_alloc(const ModelConfig *cfg, CudaHostState *hs)
{
    Model hl;
    if (model_layout(&hl, cfg)) { log_error("out of memory"); return -1; }
    hs->n = hl.n_floats;
    model_free(&hl);
    hs->w = calloc(hs->n, sizeof(float));
    hs->m = calloc(hs->n, sizeof(float));
    hs->v = calloc(hs->n, sizeof(float));
    if (!hs->w || !hs->m || !hs->v) {
        log_error("out of host memory (%.1f GiB for the offloaded state)",
                3.0 * hs->n * sizeof(float) / 1073741824.0);
        return -1;
    }
    return 0;
}


/* The bench line's "recompute": 0 none, 1 full, 2 selective, the code the
 * recorded measurements (tests/estimator's reference rows) are written in;
 * not Recompute's own order. */
static int bench_recompute_code(int rc)
{
    return rc == RECOMPUTE_FULL ? 1 : rc == RECOMPUTE_SELECTIVE ? 2 : 0;
}
static int cmd_bench(int argc, char **argv)
{
    Opts o;
    ModelConfig cfg;
    int rc = parse_opts("llmc-train-cuda bench", argc, argv, &o);
    if (rc >= 0) return rc;
    if (get_config(&o, &cfg)) return 2;
    if (o.steps < 1) return args_usage_error("llmc-train-cuda bench", "--steps must be >= 1");
    if (o.accum < 1) return args_usage_error("llmc-train-cuda bench", "--accum must be >= 1");
    log_info_to_stderr();   /* stdout is the JSON line alone, also on several ranks */
    CudaDist d;
    if (cuda_dist_init(&d, true) != 0) return 1;
    CudaParallel par = {.rank = d.rank, .world = d.world, .zero1 = o.zero1, .zero = o.zero, .comm = d.comm,
                        .comm_stream = d.comm_stream};
    CudaModel m;
    size_t base_used = cuda_device_used();
    CudaHostState hs = {0}, *off = NULL;
    /* offload on several ranks: each its shard, pinned by the model (as `run` does) */
    par.offload_shard = o.offload && d.world > 1;
    if (o.offload && !par.offload_shard && host_state_alloc(&cfg, &hs)) return 1;
    if (o.offload && !par.offload_shard) off = &hs;
    double t_setup = wall();
    /* --lora-rank: adapters on every linear layer, alpha 2r, on the frozen random base */
    Lora *lora = NULL;
    CudaFinetune ft = {.method = METHOD_LORA};
    if (o.lora_rank) {
        Model base;
        if (model_layout(&base, &cfg)) return 1;
        ft.lora = lora = lora_new(&base, (1u << LORA_TARGETS) - 1, o.lora_rank, 2 * o.lora_rank, 0, o.seed);
        model_free(&base);
        if (!lora) { log_error("out of memory"); return 1; }
    }
    CudaNumerics num = numerics(&o);
    if (cuda_model_create_ft(&m, &cfg, o.batch, o.seq, o.recompute, attn_mode(&o), &par, off, lora ? &ft : NULL,
                             &num) != 0)
        return 1;
    cuda_model_init_random(&m, o.seed, 0.02f);
    if (lora) cuda_lora_set(&m, lora->p.w, NULL, NULL);
    if (d.rank == 0 && o.offload) log_note("offload: set up in %.1f s", wall() - t_setup);
    int N = o.batch * o.seq;
    int *ids = malloc(N * sizeof(int)), *pos = malloc(N * sizeof(int)), *tg = malloc(N * sizeof(int));
    if (!ids || !pos || !tg) { log_error("out of memory"); return 1; }
    uint64_t r = o.seed * 7919u + (uint64_t)d.rank * 104729u + 1;
    size_t peak = 0;
    double t_sum = 0, t_min = 1e30;
    float loss = 0, norm = 0;
    double labels = cuda_dist_sum(&d, (double)o.batch * (o.seq - 1) * o.accum);
    /* warm-up, timed steps, then (LLMC_PHASE_TIMES=1) as many steps again with events */
    int phased = m.timer ? o.steps : 0;
    for (int s = 0; s < o.warmup + o.steps + phased; s++) {
        int timed = s >= o.warmup && s < o.warmup + o.steps, in_phase = s >= o.warmup + o.steps;
        for (int i = 0; i < N; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int)((r >> 33) % (uint64_t)cfg.vocab);
            pos[i] = i % o.seq;
        }
        for (int i = 0; i < N; i++) tg[i] = (i % o.seq == o.seq - 1) ? -1 : ids[i + 1];
        CUDA_CHECK(cudaDeviceSynchronize());
        double t0 = wall();
        if (in_phase) phase_step_begin(m.timer);
        cuda_model_zero_grad(&m);
        CUDA_CHECK(cudaMemsetAsync(m.loss_acc, 0, sizeof(float), m.stream));
        for (int a = 0; a < o.accum; a++)   /* the same tokens again: the step's shape is what counts */
            cuda_model_micro(&m, ids, pos, tg, (float)(1.0 / labels), NULL, NULL, a == o.accum - 1);
        norm = cuda_model_step(&m, 1.f, o.lr, o.b1, o.b2, o.eps, o.wd, o.clip);
        if (in_phase) phase_step_end(m.timer);
        CUDA_CHECK(cudaMemcpy(&loss, m.loss_acc, sizeof loss, cudaMemcpyDeviceToHost));
        double dt = wall() - t0;
        size_t used = cuda_device_used();
        if (used > peak) peak = used;
        loss = (float)(cuda_dist_sum(&d, loss) / labels);
        if (timed) { t_sum += dt; if (dt < t_min) t_min = dt; }
        if (d.rank == 0)
            log_note("step %d loss %.4f grad_norm %.4f time %.1f ms%s", s, loss, norm, dt * 1e3,
                     in_phase ? " (phase events)" : "");
    }
    if (d.rank == 0) phase_report(m.timer, stderr);
    double step = t_sum / o.steps;
    double tok_s = (double)N * o.accum * d.world / step;
    double mfu = tok_s * cuda_model_flops_per_token(&m, o.seq) / (H200_BF16_PEAK * d.world);
    if (d.rank == 0)
        printf("{\"impl\":\"llmc-cuda\",\"model\":\"%s\",\"batch\":%d,\"accum\":%d,\"seq\":%d,\"world\":%d,\"transport\":\"%s\",\"zero1\":%d,\"zero\":%d,"
               "\"recompute\":%d,\"offload\":%d,\"lora_rank\":%d,\"attention\":\"%s\",\"deterministic\":%d,\"master\":\"%s\",\"states\":\"%s\",\"precision\":\"%s\",\"fp8_lm_head\":%d,\"params\":%zu,\"step_ms\":%.2f,\"step_ms_min\":%.2f,\"tokens_per_s\":%.0f,"
               "\"mfu\":%.4f,\"peak_mem_gib\":%.2f,\"allocated_gib\":%.2f,\"loss\":%.4f}\n",
               o.model ? o.model : o.config, o.batch, o.accum, o.seq, d.world, d.comm ? cuda_coll_name(d.comm) : "none", o.zero1, o.zero ? o.zero : o.zero1,
               bench_recompute_code(o.recompute), o.offload,
               o.lora_rank, m.cudnn ? "cudnn" : m.flash ? "flash" : "eager", m.deterministic, master_weights_json_names[m.master_lo ? MASTER_SPLIT : MASTER_FP32],
               optimizer_states_json_names[m.bf16_states ? OSTATES_BF16 : OSTATES_FP32],
               precision_json_names[m.fp8 ? PREC_FP8 : PREC_BF16], m.f8_head, m.n_real,
               step * 1e3, t_min * 1e3, tok_s, mfu, cuda_used_above(peak, base_used) / 1073741824.0,
               m.bytes_allocated / 1073741824.0, loss);
    free(ids); free(pos); free(tg);
    cuda_model_destroy(&m);
    lora_free(lora);
    free(hs.w); free(hs.m); free(hs.v);
    cuda_dist_finalize(&d);
    return 0;
}

/* Token file for `check`: int32 little-endian B, T, S, then S batches of
 * ids[B*T], pos[B*T], targets[B*T]. */
static int *read_tokens(const char *path, int *B, int *T, int *S)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) { log_error("%s: cannot open", path); return NULL; }
    int h[3];
    int *buf = NULL;
    if (fread(h, 4, 3, fp) != 3 || h[0] < 1 || h[1] < 8 || h[2] < 1 || (long long)h[0] * h[1] * h[2] > 100000000LL) {
        log_error("%s: bad header", path);
        fclose(fp);
        return NULL;
    }
    size_t n = (size_t)h[0] * h[1] * h[2] * 3;
    buf = malloc(n * 4);
    if (!buf || fread(buf, 4, n, fp) != n) {
        log_error("%s: short file", path);
        free(buf);
        fclose(fp);
        return NULL;
    }
    fclose(fp);
    *B = h[0]; *T = h[1]; *S = h[2];
    return buf;
}

static int write_file(const char *dir, const char *name, const void *data, size_t bytes)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *fp = fopen(tmp, "wb");
    if (!fp || fwrite(data, 1, bytes, fp) != bytes || fclose(fp) != 0) {
        log_error("%s: cannot write", tmp);
        return -1;
    }
    return rename(tmp, path) ? -1 : 0;
}

static int cmd_check(int argc, char **argv)
{
    Opts o;
    ModelConfig cfg;
    int rc = parse_opts("llmc-train-cuda check", argc, argv, &o);
    if (rc >= 0) return rc;
    if (!o.config || !o.weights || !o.tokens || !o.out)
        return args_usage_error("llmc-train-cuda check", "check needs --config, --weights, --tokens and --out");
    if (get_config(&o, &cfg)) return 2;
    int B, T, S;
    int *tok = read_tokens(o.tokens, &B, &T, &S);
    if (!tok) return 2;
    CudaDist d;
    if (cuda_dist_init(&d, false) != 0) return 1;
    CudaParallel par = {.rank = 0, .world = 1};
    CudaModel m;
    CudaHostState hs = {0}, *off = NULL;
    char err[1024];
    if (o.offload) {   /* the host state holds the HF weights; the GPU adopts them */
        Model hm = {0};
        if (host_state_alloc(&cfg, &hs) || model_layout(&hm, &cfg)) return 1;
        hm.w = hs.w;
        int bad = load_hf_weights(o.weights, &hm, err, sizeof err);
        hm.w = NULL;
        model_free(&hm);
        if (bad) { log_error("%s", err); return 1; }
        off = &hs;
    }
    Lora *lora = NULL;
    CudaFinetune ft = {.method = METHOD_LORA};
    int alpha = 0, rslora = 0;
    if (o.lora && !(ft.lora = lora = lora_from_peft(o.lora, &cfg, &alpha, &rslora))) return 2;
    CudaNumerics num = numerics(&o);
    if (cuda_model_create_ft(&m, &cfg, B, T, o.recompute, attn_mode(&o), &par, off, lora ? &ft : NULL, &num) != 0)
        return 1;
    if (o.offload) cuda_model_offload_adopt(&m, 0);
    else if (cuda_model_load_hf(&m, &cfg, o.weights, err, sizeof err)) {
        log_error("%s", err);
        return 1;
    }
    if (lora) cuda_lora_set(&m, lora->p.w, NULL, NULL);
    /* what the gradients are reported for: the model's tensors, or the adapters */
    const CudaParam *gp = lora ? m.lora->params : m.params;
    int n_gp = lora ? m.lora->n_params : m.n_params;
    const float *gbuf = lora ? m.lora->grad : m.grad;
    size_t n_grads = lora ? lora->p.n_floats : m.n_real;
    size_t N = (size_t)B * T, V = cfg.vocab;
    float *logits = malloc(N * V * sizeof(float)), *grads = malloc(n_grads * sizeof(float));
    float *losses = malloc(S * sizeof(float));
    if (!logits || !grads || !losses) { log_error("out of memory"); return 1; }
    for (int s = 0; s < S; s++) {
        const int *ids = tok + (size_t)s * 3 * N, *pos = ids + N, *tg = pos + N;
        size_t labels = 0;
        for (size_t i = 0; i < N; i++) labels += tg[i] >= 0;
        if (!labels) { log_error("%s: batch %d has no label tokens", o.tokens, s); return 2; }
        cuda_model_zero_grad(&m);
        CUDA_CHECK(cudaMemsetAsync(m.loss_acc, 0, sizeof(float), m.stream));
        cuda_model_micro(&m, ids, pos, tg, 1.0f / labels, s == 0 ? logits : NULL, NULL, 1);
        float loss;
        CUDA_CHECK(cudaMemcpyAsync(&loss, m.loss_acc, sizeof loss, cudaMemcpyDeviceToHost, m.stream));
        CUDA_CHECK(cudaStreamSynchronize(m.stream));
        losses[s] = loss / labels;
        if (s == 0) {
            size_t k = 0;   /* in PEFT's / HF's order */
            for (int i = 0; i < n_gp; i++) {
                CUDA_CHECK(cudaMemcpy(grads + k, gbuf + gp[i].off, gp[i].numel * sizeof(float), cudaMemcpyDeviceToHost));
                k += gp[i].numel;
            }
        }
        float norm = cuda_model_step(&m, 1.f, o.lr, o.b1, o.b2, o.eps, o.wd, o.clip);
        log_note("step %d loss %.6f grad_norm %.6f", s, losses[s], norm);
    }
    char text[64];
    FILE *lf;
    char path[4096];
    snprintf(path, sizeof path, "%s/losses.txt", o.out);
    if (!(lf = fopen(path, "w"))) { log_error("%s: cannot write", path); return 1; }
    for (int s = 0; s < S; s++) { snprintf(text, sizeof text, "%.7f\n", losses[s]); fputs(text, lf); }
    fclose(lf);
    snprintf(path, sizeof path, "%s/params.txt", o.out);
    if (!(lf = fopen(path, "w"))) { log_error("%s: cannot write", path); return 1; }
    for (int i = 0; i < n_gp; i++) fprintf(lf, "%s %zu\n", gp[i].name, gp[i].numel);
    fclose(lf);
    if (write_file(o.out, "logits.f32", logits, N * V * sizeof(float)) ||
        write_file(o.out, "grads.f32", grads, n_grads * sizeof(float)))
        return 1;
    if (lora) {   /* the trained adapter as a PEFT directory (runtime/store/hf_export.c) */
        cuda_lora_get(&m, lora->p.w, NULL, NULL);
        snprintf(path, sizeof path, "%s/adapter", o.out);
        if (peft_export(path, lora, alpha, rslora, NULL, err, sizeof err)) {
            log_error("%s", err);
            return 1;
        }
    }
    free(logits); free(grads); free(losses); free(tok);
    cuda_model_destroy(&m);
    lora_free(lora);
    free(hs.w); free(hs.m); free(hs.v);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) { usage(stdout); return 0; }
    if (!strcmp(c, "--version")) { printf("llmc-train-cuda %s\n", LLMC_TRAIN_VERSION); return 0; }
    if (!strcmp(c, "run")) return cmd_run_cuda(argc - 1, argv + 1);
    if (!strcmp(c, "prepare")) return cmd_prepare(argc - 1, argv + 1);
    if (!strcmp(c, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(c, "verify")) return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(c, "params")) return cmd_params(argc - 1, argv + 1);
    if (!strcmp(c, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(c, "check")) return cmd_check(argc - 1, argv + 1);
    return args_usage_error("llmc-train-cuda", "unknown command '%s'", c);
}
