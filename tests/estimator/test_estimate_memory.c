/* test_estimate_memory.c — the estimator's parameter counts (transformers'
 * own, hf_reference.json) and memory per GPU: the ZeRO paper's model states,
 * Korthikanti's activations, the llmc CUDA trainer's measured allocations,
 * logits, buffers and the fit boundary.
 */
#include "test_estimate.h"

/* ---- parameters ---- */

void test_params_issue(void)
{
    PlanModel q05 = model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true);
    PlanModel q15 = model(ARCH_QWEN2, 28, 1536, 12, 2, 0, 8960, 151936, true);
    PlanModel l8 = model(ARCH_LLAMA, 32, 4096, 32, 8, 0, 14336, 128256, false);
    int64_t emb, layer;
    CHECK(estimate_params(&q05, &emb, &layer) == 494032768LL, "Qwen2.5-0.5B");
    CHECK(emb == 151936LL * 896, "0.5B tied embedding counted once: %lld", (long long)emb);
    CHECK(estimate_params(&q15, NULL, NULL) == 1543714304LL, "Qwen2.5-1.5B");
    CHECK(estimate_params(&l8, &emb, &layer) == 8030261248LL, "Llama-3-8B");
    CHECK(emb == 2LL * 128256 * 4096, "8B untied: embedding + lm_head");
    CHECK(layer == 218112000LL, "Llama-3-8B layer: %lld", (long long)layer);
}

void test_params_transformers(const cJSON *ref)
{
    static const struct { const char *name; PlanModel m; } cases[] = {
        {"Qwen2.5-0.5B", {.arch = ARCH_QWEN2, .layers = 24, .hidden = 896, .heads = 14, .kv_heads = 2,
                          .ffn = 4864, .vocab = 151936, .tie_embeddings = true, .qkv_bias = true}},
        {"Qwen2.5-1.5B", {.arch = ARCH_QWEN2, .layers = 28, .hidden = 1536, .heads = 12, .kv_heads = 2,
                          .ffn = 8960, .vocab = 151936, .tie_embeddings = true, .qkv_bias = true}},
        {"Qwen2.5-32B", {.arch = ARCH_QWEN2, .layers = 64, .hidden = 5120, .heads = 40, .kv_heads = 8,
                         .ffn = 27648, .vocab = 152064, .qkv_bias = true}},
        {"Qwen2.5-72B", {.arch = ARCH_QWEN2, .layers = 80, .hidden = 8192, .heads = 64, .kv_heads = 8,
                         .ffn = 29568, .vocab = 152064, .qkv_bias = true}},
        {"Llama-3-8B", {.arch = ARCH_LLAMA, .layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8,
                        .ffn = 14336, .vocab = 128256}},
        {"Llama-3.2-1B", {.arch = ARCH_LLAMA, .layers = 16, .hidden = 2048, .heads = 32, .kv_heads = 8,
                          .head_dim = 64, .ffn = 8192, .vocab = 128256, .tie_embeddings = true}},
        {"Qwen3-0.6B", {.arch = ARCH_QWEN3, .layers = 28, .hidden = 1024, .heads = 16, .kv_heads = 8,
                        .head_dim = 128, .ffn = 3072, .vocab = 151936, .tie_embeddings = true,
                        .qk_norm = true}},
        {"Qwen3-8B", {.arch = ARCH_QWEN3, .layers = 36, .hidden = 4096, .heads = 32, .kv_heads = 8,
                      .head_dim = 128, .ffn = 12288, .vocab = 151936, .qk_norm = true}},
    };
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(ref, "params");
    CHECK(cJSON_GetArraySize(params) == (int)(sizeof cases / sizeof cases[0]),
          "every reference model is checked");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(params, cases[i].name);
        int64_t got = estimate_params(&cases[i].m, NULL, NULL);
        CHECK(cJSON_IsNumber(want) && (double)got == want->valuedouble,
              "%s: %lld, transformers counts %.0f", cases[i].name, (long long)got,
              cJSON_IsNumber(want) ? want->valuedouble : -1);
    }
}

/* ---- memory ---- */

void test_zero_paper(void)
{
    /* ZeRO paper, figure 1: a 7.5B model on 64 GPUs with K = 12 needs 120 GB of
     * model states per GPU without ZeRO, 31.4 GB with P_os, 16.6 GB with
     * P_os+g and 1.9 GB with P_os+g+p. */
    static const struct { ShardStage s; double gb; } want[] = {
        {SHARD_NONE, 120.0}, {SHARD_ZERO1, 31.4}, {SHARD_ZERO2, 16.6}, {SHARD_ZERO3, 1.9},
    };
    for (int i = 0; i < 4; i++) {
        double w, g, o;
        estimate_model_states(7.5e9, PREC_BF16, want[i].s, 64, &w, &g, &o);
        double gb = round((w + g + o) / 1e8) / 10;
        CHECK(gb == want[i].gb, "ZeRO stage %d: %.1f GB, paper says %.1f", i, gb, want[i].gb);
    }
    /* Table 1's 1T-parameter row: 1024 GPUs, P_os+g+p gives 15.6 GB per GPU. */
    double w, g, o;
    estimate_model_states(1e12, PREC_BF16, SHARD_ZERO3, 1024, &w, &g, &o);
    CHECK(round((w + g + o) / 1e8) / 10 == 15.6, "1T on 1024 GPUs: %.2f GB", (w + g + o) / 1e9);
    /* fp32 training: 4 + 4 + 8 bytes per parameter. */
    estimate_model_states(1e9, PREC_FP32, SHARD_NONE, 1, &w, &g, &o);
    CHECK(w == 4e9 && g == 4e9 && o == 8e9, "fp32 states");
}

void test_korthikanti(void)
{
    /* GPT-3 175B: a = 96, h = 12288, s = 2048. Section 4.1: 5as/h = 80, so
     * the attention term dominates 34, and selective recomputation (dropping it)
     * saves 70% of the activation memory. */
    double s = 2048, b = 1, h = 12288, a = 96;
    double full = estimate_korthikanti_layer(s, b, h, a, false);
    double flash = estimate_korthikanti_layer(s, b, h, a, true);
    CHECK(full == s * b * h * (34 + 80), "GPT-3 layer: sbh(34 + 80)");
    CHECK(flash == 34 * s * b * h, "flash keeps 34 sbh");
    CHECK(round(100 * (1 - flash / full)) == 70, "selective saves 70%%: %.1f%%", 100 * (1 - flash / full));
    /* MT-NLG 530B: a = 128, h = 20480: 5as/h = 64, selective saves 65%. */
    double mt = estimate_korthikanti_layer(2048, 1, 20480, 128, false);
    double mt_sel = estimate_korthikanti_layer(2048, 1, 20480, 128, true);
    CHECK(mt == 2048.0 * 20480 * (34 + 64), "MT-NLG layer: sbh(34 + 64)");
    CHECK(round(100 * (1 - mt_sel / mt)) == 65, "MT-NLG selective saves 65%%");
    /* 34 sbh at GPT-3 size, t = 1, b = 1: 34 x 2048 x 12288 = 855,638,016 bytes. */
    CHECK(flash == 855638016.0, "34 sbh at GPT-3 size: %.0f", flash);
}

void test_layer_vs_transformers(const cJSON *ref)
{
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(ref, "layer_activation_bytes");
    int n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
#define NUM(k) (cJSON_GetObjectItemCaseSensitive(row, k)->valuedouble)
        const char *arch = cJSON_GetObjectItemCaseSensitive(row, "arch")->valuestring;
        ModelArch a = !strcmp(arch, "qwen3") ? ARCH_QWEN3 : !strcmp(arch, "qwen2") ? ARCH_QWEN2 : ARCH_LLAMA;
        PlanModel m = model(a, 1, (int)NUM("hidden"), (int)NUM("heads"), (int)NUM("kv_heads"),
                            (int)NUM("head_dim"), (int)NUM("ffn"), 1000, false);
        bool flash = !strcmp(cJSON_GetObjectItemCaseSensitive(row, "attention")->valuestring, "sdpa");
        double want = NUM("bytes");
        double got = estimate_hf_layer(&m, NUM("s"), NUM("b"), flash, 2);
        /* Autograd also keeps a few scalars (16 bytes per layer here). */
        CHECK(fabs(got - want) <= 64, "%s %s layer: %.0f bytes, autograd saved %.0f",
              arch, flash ? "sdpa" : "eager", got, want);
        /* The lean accounting (llmc backend) never exceeds transformers'. */
        double lean = estimate_llama_layer(&m, NUM("s"), NUM("b"), flash, RECOMPUTE_NONE, 2);
        CHECK(lean < got, "%s lean %.0f < transformers %.0f", arch, lean, got);
        n++;
#undef NUM
    }
    CHECK(n >= 3, "reference layers present: %d", n);
}

void test_step_peak(const cJSON *ref)
{
    /* Whole forward + backward of a bf16 transformers model with Qwen2.5-0.5B's
     * shape at 4 x 2048, on an H200: gradients + activations + logits against
     * torch.cuda.max_memory_allocated above the weights. The estimate leaves
     * out a few temporaries (the tied embedding's second gradient, loss
     * scratch), so it is allowed to be up to 10% low, never high. */
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(ref, "step_peak_bytes");
    const cJSON *row;
    int n = 0;
    cJSON_ArrayForEach(row, rows) {
        bool ckpt = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "gradient_checkpointing"));
        double want = cJSON_GetObjectItemCaseSensitive(row, "bytes")->valuedouble;
        Fixture f;
        fixture(&f, model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true), 1, 2048, 4,
                SHARD_NONE, ckpt ? RECOMPUTE_FULL : RECOMPUTE_NONE, 1e6);
        f.c.gpus_per_node = 1;
        f.t.backend = BACKEND_LLAMAFACTORY;
        Estimate e;
        memset(&e, 0, sizeof e);
        estimate_memory(&f.j, 4, f.t.recompute, f.t.shard, &e);
        double got = e.grads_bytes + e.activations_bytes + e.logits_bytes;
        CHECK(got <= want && got >= 0.90 * want, "step peak%s: estimate %.3f GB, measured %.3f GB",
              ckpt ? " (checkpointing)" : "", got / 1e9, want / 1e9);
        n++;
    }
    CHECK(n == 2, "step peak references present: %d", n);
}

void test_llama_layer_formula(void)
{
    /* Llama-3-8B layer at s = 4096, b = 1, flash, bf16, by hand:
     * per token 4h + 2q + 2kv + 4f = 16384 + 8192 + 2048 + 57344 = 83968 values,
     * x 2 bytes x 4096 tokens = 687,865,856, + fp32 lse 4 * 32 * 4096 = 524,288. */
    PlanModel m = model(ARCH_LLAMA, 32, 4096, 32, 8, 0, 14336, 128256, false);
    CHECK(estimate_llama_layer(&m, 4096, 1, true, RECOMPUTE_NONE, 2) == 687865856.0 + 524288.0,
          "Llama-3-8B flash layer");
    /* Eager keeps the softmax: + a s^2 b x 2 bytes = 1,073,741,824. Selective drops it. */
    CHECK(estimate_llama_layer(&m, 4096, 1, false, RECOMPUTE_NONE, 2) == 687865856.0 + 1073741824.0,
          "Llama-3-8B eager layer");
    CHECK(estimate_llama_layer(&m, 4096, 1, false, RECOMPUTE_SELECTIVE, 2) == 687865856.0,
          "Llama-3-8B selective layer");
}

void test_fit_boundary(void)
{
    Fixture f;
    Estimate e;
    int errors;
    /* Llama-3-8B, 1 node of 8 H100, ZeRO-2, no recompute, context 2048 (at
     * 4096 the trainer's cuDNN workspace alone, 8.6 GiB, keeps batch 1 out). */
    fixture(&f, model(ARCH_LLAMA, 32, 4096, 32, 8, 0, 14336, 128256, false), 1, 2048, 1,
            SHARD_ZERO2, RECOMPUTE_NONE, 1e9);
    free(run_job(&f.j, &e, &errors));
    int max = e.max_micro_batch_that_fits;
    CHECK(max >= 1, "8B fits at batch 1 on H100 with zero2: %.1f GiB", e.total_bytes / GIB);
    Estimate at;
    estimate_memory(&f.j, max, f.t.recompute, f.t.shard, &at);
    CHECK(at.fits && at.total_bytes <= H100.usable_bytes, "batch %d fits", max);
    estimate_memory(&f.j, max + 1, f.t.recompute, f.t.shard, &at);
    CHECK(!at.fits && at.total_bytes > H100.usable_bytes, "batch %d does not", max + 1);

    f.t.micro_batch = max;
    char *text = run_job(&f.j, &e, &errors);
    CHECK(errors == 0 && !strstr(text, "does not fit"), "no error at the largest batch:\n%s", text);
    free(text);

    f.t.micro_batch = max + 1;
    text = run_job(&f.j, &e, &errors);
    char help[64];
    snprintf(help, sizeof help, "help: batch = %d per gpu fits", max);
    CHECK(errors == 1 && strstr(text, "t.llm:20:3: error: plan does not fit"),
          "error at the batch:\n%s", text);
    CHECK(strstr(text, help) != NULL, "help names batch %d:\n%s", max, text);
    CHECK(strstr(text, "recompute = full fits at this batch"), "help suggests recompute:\n%s", text);
    CHECK(strstr(text, "note: activations"), "breakdown notes:\n%s", text);
    free(text);

    /* The breakdown adds up. */
    double sum = e.weights_bytes + e.grads_bytes + e.optimizer_bytes + e.activations_bytes +
                 e.attn_workspace_bytes + e.logits_bytes + e.comm_bytes + e.reserve_bytes;
    CHECK(e.attn_cudnn && e.attn_workspace_bytes > 0, "cuDNN workspace counted");
    CHECK(near(e.total_bytes, sum, 1e-12), "total is the sum of the parts");
}

void test_examples(void)
{
    Fixture f;
    Estimate e;
    int errors;
    /* examples/qwen72b_sft.llm: qwen72b SFT on 32 x 8 H100, zero3 + recompute
     * full, batch 4 x 2560 must fit (llamafactory: DeepSpeed ZeRO-3, as there). */
    fixture(&f, model(ARCH_QWEN2, 80, 8192, 64, 8, 0, 29568, 152064, false), 32, 2560, 4,
            SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    f.t.backend = BACKEND_LLAMAFACTORY;
    free(run_job(&f.j, &e, &errors));
    CHECK(errors == 0 && e.fits, "72B zero3+full at 4 x 2560 fits: %.1f GiB", e.total_bytes / GIB);
    CHECK(e.params_total == 72706203648LL, "72B params");
    /* The issue: a 32B at context 4096 fits at batch 4 per GPU and not at 8.
     * That holds where the whole b x s x vocab logits exist (transformers, the
     * llamafactory backend). */
    fixture(&f, model(ARCH_QWEN2, 64, 5120, 40, 8, 0, 27648, 152064, false), 32, 4096, 4,
            SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    f.t.backend = BACKEND_LLAMAFACTORY;
    free(run_job(&f.j, &e, &errors));
    CHECK(errors == 0 && e.fits, "32B (transformers) at 4 x 4096 fits: %.1f GiB", e.total_bytes / GIB);
    f.t.micro_batch = 8;
    char *text = run_job(&f.j, &e, &errors);
    CHECK(errors == 1 && !e.fits, "32B (transformers) at 8 x 4096 does not fit: %.1f GiB",
          e.total_bytes / GIB);
    free(text);
    /* The llmc CUDA trainer at ZeRO-1 shards the optimizer states only: bf16
     * weights and fp32 gradients of 32.8B parameters alone are 183 GiB per GPU.
     * The help offers ZeRO-3, which that backend runs (issue 30). */
    f.t.backend = BACKEND_LLMC;
    f.t.shard = SHARD_ZERO1;
    text = run_job(&f.j, &e, &errors);
    /* (and its host memory: every rank stages the fp32 model twice, 8 x 8 x 32.8B) */
    CHECK(errors == 2 && !e.fits && !e.host_fits && e.logits_chunked && e.max_micro_batch_that_fits == 0 &&
          e.weights_bytes + e.grads_bytes > 183 * GIB,
          "32B (llmc trainer, zero1) does not fit: %.1f GiB, largest %d", e.total_bytes / GIB,
          e.max_micro_batch_that_fits);
    CHECK(strstr(text, "shard = zero3") && strstr(text, "not even batch = 1"), "zero3 help for llmc:\n%s", text);
    free(text);
    f.t.shard = SHARD_NONE;
    text = run_job(&f.j, &e, &errors);
    CHECK(strstr(text, "shard = zero3") && !strstr(text, "shard = zero1"), "llmc help offers zero3:\n%s", text);
    free(text);
}

/* The presets of runtime/model/model.c (model_preset) the references name. */
static PlanModel preset(const char *name)
{
    return !strcmp(name, "qwen2.5-1.5b") ? model(ARCH_QWEN2, 28, 1536, 12, 2, 128, 8960, 151936, true)
         : !strcmp(name, "qwen2.5-3b")   ? model(ARCH_QWEN2, 36, 2048, 16, 2, 128, 11008, 151936, true)
         : !strcmp(name, "qwen2.5-7b")   ? model(ARCH_QWEN2, 28, 3584, 28, 4, 128, 18944, 152064, false)
         : !strcmp(name, "qwen2.5-72b")  ? model(ARCH_QWEN2, 80, 8192, 64, 8, 128, 29568, 152064, false)
         : !strcmp(name, "qwen3-1.7b")   ? model(ARCH_QWEN3, 28, 2048, 16, 8, 128, 6144, 151936, true)
                                         : model(ARCH_QWEN2, 24, 896, 14, 2, 64, 4864, 151936, true);
}

/* A reference row's number formats (bench's "precision", "master", "states";
 * "fp8_lm_head", absent: on with fp8, as plan.json's train.fp8_lm_head). */
typedef struct { Precision precision; MasterWeights master; OptimStates states; bool fp8_lm_head; } RowNumbers;

/* The GPU bytes the trainer allocates for a preset at b x s on one GPU: the
 * estimate's tensors, without the context allowance (cudnn: with the cuDNN
 * attention workspace, else the flash kernels alone). */
/* cudnn: the estimate's cuDNN workspace is added (that of the backward with
 * atomics, the trainer's default), or with deterministic that of the
 * deterministic form, which the rows measured before it was the default ran;
 * e->total_bytes then counts that form too. nums: the row's number formats
 * (NULL: bf16 GEMMs, fp32 master weights and moments). */
static double llmc_allocated_numbers(const char *name, int b, int s, Recompute rc, bool off, int lora, bool flash,
                                     bool cudnn, bool deterministic, const RowNumbers *nums, Estimate *e)
{
    Fixture f;
    fixture(&f, preset(name), 1, s, b, SHARD_NONE, rc, 1e6);
    f.c.gpus_per_node = 1;
    if (nums) {   /* rows measured on the H200, deterministic (the flash backward's scratch, cuDNN's fit) */
        f.c.gpu = gpu_catalog_find("H200_141GB");
        f.t.deterministic = deterministic;
        f.t.precision = nums->precision;
        f.t.master_weights = nums->master;
        f.t.optimizer_states = nums->states;
        f.t.fp8_lm_head = nums->fp8_lm_head;
    }
    f.t.attention = flash || cudnn ? ATTN_FLASH : ATTN_EAGER;
    if (off) f.t.offload = OFFLOAD_OPTIMIZER;
    if (lora) { f.t.method = METHOD_LORA; f.t.lora_rank = lora; f.t.nlora_target = 0; }
    memset(e, 0, sizeof *e);
    estimate_memory(&f.j, b, f.t.recompute, SHARD_NONE, e);
    if (cudnn && deterministic && e->attn_cudnn) {
        double det = estimate_llmc_cudnn_workspace(&f.m, b, s, true);
        e->total_bytes += det - e->attn_workspace_bytes;
        e->attn_workspace_bytes = det;
    }
    return e->weights_bytes + e->grads_bytes + e->optimizer_bytes + e->activations_bytes + e->logits_bytes +
           e->fp8_weights_bytes + e->fp8_scratch_bytes + (cudnn ? e->attn_workspace_bytes : 0);
}

static double llmc_allocated_form(const char *name, int b, int s, Recompute rc, bool off, int lora, bool flash,
                                  bool cudnn, bool deterministic, Estimate *e)
{
    return llmc_allocated_numbers(name, b, s, rc, off, lora, flash, cudnn, deterministic, NULL, e);
}

static double llmc_allocated(const char *name, int b, int s, Recompute rc, bool off, int lora, bool flash,
                             bool cudnn, Estimate *e)
{
    return llmc_allocated_form(name, b, s, rc, off, lora, flash, cudnn, false, e);
}

void test_llmc_cuda_measured(const cJSON *ref)
{
    /* llmc-train-cuda bench on an H200 (llmc_cuda_reference.sh): its cudaMalloc
     * high-water mark, printed to 0.01 GiB, against weights + gradients +
     * optimizer + activations + logits (the context is not in that count), and
     * the cuDNN attention workspace for rows that ran cuDNN's attention. These
     * rows were measured on 2026-12-01, before the trainer allocated the
     * deterministic embedding backward's plan (3 ints a token and one; 20fe828):
     * the estimate, which counts it, is compared without it. */
    int n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, ref) {
        const char *name = cJSON_GetObjectItemCaseSensitive(row, "model")->valuestring;
        int b = (int)cJSON_GetObjectItemCaseSensitive(row, "batch")->valuedouble;
        int s = (int)cJSON_GetObjectItemCaseSensitive(row, "seq")->valuedouble;
        int rcv = (int)cJSON_GetObjectItemCaseSensitive(row, "recompute")->valuedouble;   /* 0 none, 1 full, 2 selective */
        Recompute rcm = rcv == 1 ? RECOMPUTE_FULL : rcv == 2 ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
        bool rc = rcv != 0;
        const cJSON *ov = cJSON_GetObjectItemCaseSensitive(row, "offload");
        bool off = cJSON_IsNumber(ov) && ov->valuedouble != 0;
        const char *attn = cJSON_GetObjectItemCaseSensitive(row, "attention")->valuestring;
        bool flash = !strcmp(attn, "flash"), cudnn = !strcmp(attn, "cudnn");
        double want = cJSON_GetObjectItemCaseSensitive(row, "allocated_gib")->valuedouble;
        const cJSON *lr = cJSON_GetObjectItemCaseSensitive(row, "lora_rank");   /* bench --lora-rank: every target */
        int lora = cJSON_IsNumber(lr) ? (int)lr->valuedouble : 0;
        Estimate e;
        double emb_plan = (3.0 * b * s + 1) * 4;
        double got = (llmc_allocated(name, b, s, rcm, off, lora, flash, cudnn, &e) - emb_plan) / GIB;
        CHECK(e.params_total == (int64_t)cJSON_GetObjectItemCaseSensitive(row, "params")->valuedouble,
              "%s params", name);
        CHECK(!cudnn || e.attn_cudnn, "%s %d x %d: the estimate runs cuDNN's attention too", name, b, s);
        CHECK(fabs(got - want) <= 0.005 + 1e-9, "%s %d x %d%s%s%s %s: estimate %.4f GiB, allocated %.2f GiB",
              name, b, s, rcv == 2 ? " selective" : rc ? " recompute" : "", off ? " offload" : "",
              lora ? " lora" : "", attn, got, want);
        n++;
    }
    CHECK(n >= 11, "llmc CUDA references present: %d", n);
}

void test_llmc_zero_measured(const cJSON *ref)
{
    /* llmc_zero_reference.sh on an H200 (issue 30): rank 0's allocations (its
     * shard the largest) under ZeRO-1/2/3 and ZeRO-3 + optimizer offload, 2 and
     * 4 ranks sharing the GPU over the host transport, flash kernels, 2 x 1024.
     * Ranks sharing a device cannot tell their own CUDA context apart, so the
     * check is on what each allocates: explain's tensor lines; its total adds
     * the 1 GiB context allowance (checked against whole devices by "runs"). */
    int n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, ref) {
        const char *name = cJSON_GetObjectItemCaseSensitive(row, "model")->valuestring;
        int b = (int)num(row, "batch"), s = (int)num(row, "seq"), world = (int)num(row, "world");
        int zero = (int)num(row, "zero");
        bool off = num(row, "offload") != 0;
        int rcode = (int)num(row, "recompute");   /* the bench line's code: 0 none, 1 full, 2 selective */
        Recompute rc = rcode == 1 ? RECOMPUTE_FULL : rcode == 2 ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
        ShardStage shard = zero == 3 ? SHARD_ZERO3 : zero == 2 ? SHARD_ZERO2 : SHARD_ZERO1;
        /* a rank's parts depend on the rank count alone (solo rows: one rank of
         * a job of `world`, alone on the GPU; cuda_coll.h): nodes of 8 past 8 */
        int per_node = world > 8 ? 8 : world;
        Fixture f;
        fixture(&f, preset(name), world / per_node, s, b, shard, rc, 1e6);
        f.c.gpus_per_node = per_node;
        f.t.attention = ATTN_FLASH;
        f.t.deterministic = num(row, "deterministic") != 0;   /* the flash backward's scratch */
        if (off) f.t.offload = OFFLOAD_OPTIMIZER;
        Estimate e;
        memset(&e, 0, sizeof e);
        estimate_memory(&f.j, b, rc, shard, &e);
        double got = (e.weights_bytes + e.grads_bytes + e.optimizer_bytes + e.activations_bytes + e.logits_bytes) / GIB;
        double want = num(row, "allocated_gib");
        /* printed to 0.01 GiB: half of that. (Before the deterministic flash
         * backward's scratch was counted as its own, 2 fp32 values a query
         * element and not 3, every row was 2 to 16 MiB above, 72B's 320.) */
        CHECK(fabs(got - want) <= 0.005 + 1e-9,
              "%s w%d ZeRO-%d%s: estimate %.4f GiB, rank 0 allocated %.2f GiB (%+.2f%%)", name, world, zero,
              off ? " + offload" : "", got, want, 100 * (got / want - 1));
        n++;
    }
    CHECK(n >= 8, "llmc ZeRO references present: %d", n);
}

void test_llmc_cudnn_measured(const cJSON *ref)
{
    /* cuDNN's attention workspace (estimate_llmc_cudnn_workspace) against what
     * attn_cudnn_prepare asked for on the H200 (cudnn_workspace_reference.json).
     * The model has no fitted constant: its terms are the regions attn_cudnn.c
     * lays out plus cuDNN's engine workspace at 2 bytes per score (deterministic)
     * and 4 per query element of the plan's batch. The figures are recorded to
     * the MiB, so the tolerance is half of one; the model's largest residual on
     * these points is 0.375 MiB. */
    int n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(ref, "workspace")) {
        int b = (int)num(row, "batch"), h = (int)num(row, "heads"), kv = (int)num(row, "kv_heads");
        int s = (int)num(row, "seq"), d = (int)num(row, "head_dim");
        bool det = num(row, "deterministic") != 0;
        PlanModel m = model(ARCH_QWEN2, 1, h * d, h, kv, d, 4 * h * d, 1024, true);
        double got = estimate_llmc_cudnn_workspace(&m, b, s, det) / 1048576.0, want = num(row, "workspace_mib");
        CHECK(estimate_llmc_cuda_cudnn(&m, s), "B%d H%d KV%d T%d D%d is cuDNN's", b, h, kv, s, d);
        CHECK(fabs(got - want) <= 0.5, "cuDNN workspace B%d H%d KV%d T%d D%d %s: estimate %.3f MiB, measured %.0f MiB",
              b, h, kv, s, d, det ? "deterministic" : "atomics", got, want);
        n++;
    }
    CHECK(n == 4, "cuDNN workspace references present: %d", n);
    /* The same workspace as the difference of two whole-step peaks (bench's
     * peak_mem_gib, cuDNN and flash kernels): each printed to 0.01 GiB. */
    n = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(ref, "bench_pairs")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(row, "model")->valuestring;
        int b = (int)num(row, "batch"), s = (int)num(row, "seq");
        Estimate e;
        double flash = llmc_allocated(name, b, s, RECOMPUTE_NONE, false, 0, true, false, &e);
        double cudnn = llmc_allocated_form(name, b, s, RECOMPUTE_NONE, false, 0, false, true,
                                           num(row, "deterministic") != 0, &e);
        double want = num(row, "cudnn_gib") - num(row, "flash_gib");
        CHECK(fabs((cudnn - flash) / GIB - want) <= 0.01 + 1e-9, "%s %d x %d: cuDNN adds %.4f GiB, measured %.2f",
              name, b, s, (cudnn - flash) / GIB, want);
        n++;
    }
    CHECK(n >= 1, "bench pairs present: %d", n);
    /* Training runs (issue 16: peak GPU memory within 10% of `llmc explain`).
     * The run's figure is the trainer's allocations plus what the device gained
     * after the model was created (lazily loaded kernels; bench rows show 0.07
     * GiB above the allocations, 0.0625 of it cuBLASLt's workspace, which `run`
     * allocates before its baseline): the allocations are checked to 0.005
     * (printing) + 0.015 GiB below it, the whole estimate (1 GiB context
     * allowance included) to 10%. */
    n = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(ref, "runs")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(row, "model")->valuestring;
        int b = (int)num(row, "batch"), s = (int)num(row, "seq"), rcv = (int)num(row, "recompute");
        Recompute rc = rcv == 1 ? RECOMPUTE_FULL : rcv == 2 ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
        Estimate e;
        double got = llmc_allocated_form(name, b, s, rc, num(row, "offload") != 0, 0, false, true,
                                         num(row, "deterministic") != 0, &e) / GIB;
        double want = num(row, "gpu_gib");
        CHECK(want - got >= -0.005 - 1e-9 && want - got <= 0.02 + 1e-9,
              "%s %d x %d run: allocations %.4f GiB, measured %.2f GiB", name, b, s, got, want);
        CHECK(fabs(e.total_bytes / GIB / want - 1) <= 0.10, "%s run: explain's %.2f GiB within 10%% of %.2f",
              name, e.total_bytes / GIB, want);
        n++;
    }
    CHECK(n >= 1, "run references present: %d", n);
    /* Number formats (issue 31): bench at llmq's shapes with split master
     * weights, bf16 moments, bf16 and FP8 GEMMs, cuDNN's deterministic attention:
     * its allocations (printed to 0.01 GiB) against the estimate's tensors,
     * FP8 copies and scratch included, with the cuDNN workspace. */
    n = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(ref, "numbers")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(row, "model")->valuestring;
        int b = (int)num(row, "batch"), s = (int)num(row, "seq");
        const char *prec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "precision"));
        const char *master = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "master"));
        const char *states = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "states"));
        /* bench's spellings are plan.json's (contract/plan_vocab.h) */
        int pi = plan_vocab_find(precision_json_names, prec), mi = plan_vocab_find(master_weights_json_names, master),
            si = plan_vocab_find(optimizer_states_json_names, states);
        CHECK(pi >= 0 && mi >= 0 && si >= 0, "%s: number formats not plan.json spellings", name);
        if (pi < 0 || mi < 0 || si < 0) continue;
        const cJSON *head = cJSON_GetObjectItemCaseSensitive(row, "fp8_lm_head");
        RowNumbers nums = {(Precision)pi, (MasterWeights)mi, (OptimStates)si,
                           head ? cJSON_IsTrue(head) : pi == PREC_FP8};
        Estimate e;
        double got = llmc_allocated_numbers(name, b, s, RECOMPUTE_NONE, false, 0, false, true,
                                            num(row, "deterministic") != 0, &nums, &e) / GIB;
        double want = num(row, "allocated_gib");
        CHECK(fabs(got - want) <= 0.005 + 1e-9,
              "%s %d x %d %s%s, %s master, %s states: estimate %.4f GiB, allocated %.2f GiB", name, b, s, prec,
              nums.fp8_lm_head ? " (LM head too)" : "", master, states, got, want);
        n++;
    }
    CHECK(n >= 9, "number-format references present: %d", n);
}

void test_llmc_cudnn_workspace(void)
{
    /* attn_cudnn.c by hand, B1 H4 KV2 T128 D64 (n = 128 tokens): Q 128*4*64*2
     * = 65,536, K and V 128*2*64*2 = 32,768 each, all multiples of 256. The
     * document plan is built for 8 sequences of 128. Deterministic: transposes
     * 2*65,536 + 4*32,768 = 262,144; Dsum 128*4*4 = 2,048; cuDNN
     * 8*4*128*(2*128 + 4*64) = 2,097,152; total 2,361,344. Atomics: + the fp32
     * dQ accumulator 128*4*64*4 = 131,072, cuDNN 8*4*128*4*64 = 1,048,576;
     * total 1,443,840. The plain plan (batch 1: 2,048 + 262,144 = 264,192
     * deterministic, 133,120 + 131,072 atomics) is smaller in both forms. */
    PlanModel m = model(ARCH_QWEN2, 2, 256, 4, 2, 64, 512, 512, true);
    CHECK(estimate_llmc_cudnn_workspace(&m, 1, 128, true) == 2361344.0, "B1 deterministic: %.0f",
          estimate_llmc_cudnn_workspace(&m, 1, 128, true));
    CHECK(estimate_llmc_cudnn_workspace(&m, 1, 128, false) == 1443840.0, "B1 atomics: %.0f",
          estimate_llmc_cudnn_workspace(&m, 1, 128, false));
    /* B3: 24 documents take the plan of 32 (first_bucket: next power of two);
     * B200: 1600 would, but the plans stop at 1024 documents. Per entry of the
     * plan's batch the cuDNN term is 4*128*512 = 262,144 (deterministic). */
    double b3 = estimate_llmc_cudnn_workspace(&m, 3, 128, true);
    CHECK(b3 == 3 * (262144.0 + 2048.0) + 32 * 262144.0, "B3 takes the plan of 32: %.0f", b3);
    double b200 = estimate_llmc_cudnn_workspace(&m, 200, 128, true);
    CHECK(b200 == 200 * (262144.0 + 2048.0) + 1024 * 262144.0, "B200 takes the plan of 1024: %.0f", b200);
    /* Which shapes go to cuDNN: head_dim 64 or 128, context a multiple of 64. */
    CHECK(estimate_llmc_cuda_cudnn(&m, 128) && !estimate_llmc_cuda_cudnn(&m, 96) && !estimate_llmc_cuda_cudnn(&m, 0),
          "cuDNN contexts");
    PlanModel hd32 = model(ARCH_QWEN2, 2, 128, 4, 2, 32, 256, 512, true);
    CHECK(!estimate_llmc_cuda_cudnn(&hd32, 128) && estimate_llmc_cuda_flash(&hd32, 128), "head_dim 32: flash only");
    CHECK(estimate_llmc_cudnn_workspace(&m, 0, 128, true) == 0, "no batch, no workspace");
    /* In the estimate: counted for attention = flash on a cuDNN shape, in the
     * total; not for eager, nor for the CPU backend. */
    Fixture f;
    Estimate e;
    fixture(&f, m, 1, 128, 1, SHARD_NONE, RECOMPUTE_NONE, 1e6);
    f.c.gpus_per_node = 1;
    memset(&e, 0, sizeof e);
    estimate_memory(&f.j, 1, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.attn_cudnn && e.attn_workspace_bytes == 1443840.0, "counted (atomics, the default): %.0f",
          e.attn_workspace_bytes);
    double with = e.total_bytes;
    f.t.attention = ATTN_EAGER;
    estimate_memory(&f.j, 1, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(!e.attn_cudnn && e.attn_workspace_bytes == 0 && e.total_bytes < with, "eager: none");
}

/* The llmc CUDA trainer's "tiny" shape on one H100 (below), micro batch 2 x 64. */
static void llmc_tiny_fixture(Fixture *f, Estimate *e)
{
    fixture(f, model(ARCH_QWEN2, 2, 128, 4, 2, 32, 256, 512, true), 1, 64, 2, SHARD_NONE, RECOMPUTE_NONE, 1e6);
    f->c.gpus_per_node = 1;
    memset(e, 0, sizeof *e);
}

void test_llmc_cuda_allocation(void)
{
    /* The llmc CUDA trainer's allocations (runtime/cuda/model_cuda.c) for its
     * "tiny" shape: 2 layers, hidden 128, 4 heads of 32, 2 kv heads, ffn 256,
     * vocab 512, tied, qkv bias; micro batch 2 x 64 (n = 128 tokens), flash.
     * Parameters: layer = 128*128 + 2*128*64 + 128*128 + (128 + 128) bias
     * + 3*128*256 + 256 norms = 147,968; 2 layers + 512*128 + 128 = 361,600.
     * States: 361,600 x (2 + 4 + 12) = 6,508,800 bytes.
     * One layer's set: 128 x ((3*128 + 2*128 + 2*64 + 3*256) * 2 + 8) + 128*4*4
     *   = 128 x 3080 + 2048 = 396,288.
     * Residual stream: 3 x 128 x 128 x 2 = 98,304.
     * Forward scratch: 128 x (256*2 + 128*2 + 20 + 12) + 4 + (4 + 1024) * 4 = 106,516
 *   (20 + 12 a token: losses, 1/rms, ids, positions, targets, and the embedding backward's plan with its
 *   last entry (4); then loss accumulator, squared norm and its two span partials, the norm's 1024 partial sums).
     * Backward scratch: 128 x (2*128 + 3*256 + 3*128 + 4*64) * 2 + 128 x (3*128 + 4) * 4 (flash with atomics:
     *   dQ's fp32 accumulator beside dK and dV; deterministic drops it)
     *   = 425,984 + 198,656 = 624,640.
     * Logits: 128 rows x 512 x 2 = 131,072, but the buffer doubles as the
 *   column-sum scratch, 4 x max(512 blocks x 128, 64 splits x 256) = 262,144. */
    Fixture f;
    Estimate e;
    llmc_tiny_fixture(&f, &e);
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.llmc_cuda_allocation && e.params_total == 361600, "tiny: %lld params", (long long)e.params_total);
    CHECK(e.weights_bytes + e.grads_bytes + e.optimizer_bytes == 6508800.0, "tiny states");
    CHECK(e.activations_layers_bytes == 98304.0 + 2 * 396288.0, "tiny kept: %.0f", e.activations_layers_bytes);
    CHECK(e.activations_working_bytes == 106516.0 + 624640.0, "tiny scratch: %.0f", e.activations_working_bytes);
    CHECK(e.logits_bytes == 262144.0 && e.logits_chunk_rows == 128, "tiny logits: %.0f", e.logits_bytes);
    CHECK(e.reserve_fragmentation_bytes == 0 && e.comm_bytes == 0, "allocated once, in place");
    /* Recompute keeps one layer's set, used by every layer in turn. */
    estimate_memory(&f.j, 2, RECOMPUTE_FULL, SHARD_NONE, &e);
    CHECK(e.activations_layers_bytes == 98304.0 &&
          e.activations_working_bytes == 396288.0 + 106516.0 + 624640.0, "tiny recompute");
    /* Selective keeps every layer's set but its attention output (q = 128) and
     * silu(gate)*up (ffn 256), one buffer of each for both layers:
     * 128 x (128 + 256) x 2 = 98,304 once instead of twice. */
    estimate_memory(&f.j, 2, RECOMPUTE_SELECTIVE, SHARD_NONE, &e);
    CHECK(e.activations_layers_bytes == 98304.0 + 2 * (396288.0 - 98304.0) + 98304.0 &&
          e.activations_working_bytes == 106516.0 + 624640.0, "tiny selective: %.0f", e.activations_layers_bytes);
    /* Optimizer offload: no master/m/v on the GPU, three staging sets of
     * master, m, v chunks of the flat length rounded to 64 (361,600 is already
     * a multiple): 3 x 3 x 361,600 x 4 = 13,017,600. */
    f.t.offload = OFFLOAD_OPTIMIZER;
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.weights_bytes == 2 * 361600.0 && e.grads_bytes == 4 * 361600.0 && e.optimizer_bytes == 13017600.0,
          "tiny offload: %.0f", e.optimizer_bytes);
    f.t.offload = OFFLOAD_NONE;
    /* Qwen3 (qk_norm, no bias): q_norm and k_norm (32 each, adjacent: one
     * 64-element slice) replace the 256-element qkv bias slice in each layer's
     * vectors, so the flat buffer is 361,600 - 2 x (256 - 64) = 361,216 long; each
     * layer's set keeps the QKV GEMM output, 128 x 256 x 2 = 65,536 more. */
    PlanModel q3 = model(ARCH_QWEN3, 2, 128, 4, 2, 32, 256, 512, true);
    q3.qkv_bias = false;
    q3.qk_norm = true;
    Fixture h;
    fixture(&h, q3, 1, 64, 2, SHARD_NONE, RECOMPUTE_NONE, 1e6);
    h.c.gpus_per_node = 1;
    estimate_memory(&h.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.weights_bytes == 2 * 361216.0 && e.activations_layers_bytes == 98304.0 + 2 * (396288.0 + 65536.0),
          "tiny qwen3: %.0f %.0f", e.weights_bytes, e.activations_layers_bytes);

    /* ZeRO-1 over 2 x 8 ranks: the flat buffers round up to 64 x 16 elements,
     * 361,600 -> 362,496; bf16 weights and fp32 gradients over all of it, the
     * fp32 master, m and v over 362,496 / 16 = 22,656. */
    Fixture g;
    fixture(&g, model(ARCH_QWEN2, 2, 128, 4, 2, 32, 256, 512, true), 2, 64, 2,
            SHARD_ZERO1, RECOMPUTE_NONE, 1e6);
    memset(&e, 0, sizeof e);
    estimate_memory(&g.j, 2, RECOMPUTE_NONE, SHARD_ZERO1, &e);
    CHECK(e.weights_bytes == 724992.0 && e.grads_bytes == 1449984.0 && e.optimizer_bytes == 271872.0 &&
              e.comm_bytes == 0,
          "tiny ZeRO-1 over 16: %.0f %.0f %.0f", e.weights_bytes, e.grads_bytes, e.optimizer_bytes);
    /* ZeRO-2/3 over 16 (model_cuda.c zero_alloc): shards of whole 4,096-element
     * blocks, ceil(ceil(362,496 / 4,096) = 89 blocks / 16) = 6 blocks = 24,576;
     * a layer unit 147,456 matrices + 512 vectors + 2 x 128 alignment slack =
     * 148,224; the last unit 362,496 - 2 x 147,968 + 256 = 66,816. Gradients:
     * 4 x (24,576 + 2 x 148,224 + 66,816) + 4 x 89 block sums = 1,551,716;
     * master, m, v: 12 x 24,576 = 294,912. Weights: ZeRO-2 whole, 724,992;
     * ZeRO-3 the shard, two gathered layers and the last unit, 2 x 387,840. */
    memset(&e, 0, sizeof e);
    estimate_memory(&g.j, 2, RECOMPUTE_NONE, SHARD_ZERO2, &e);
    CHECK(e.weights_bytes == 724992.0 && e.grads_bytes == 1551716.0 && e.optimizer_bytes == 294912.0 &&
              e.comm_bytes == 0,
          "tiny ZeRO-2 over 16: %.0f %.0f %.0f", e.weights_bytes, e.grads_bytes, e.optimizer_bytes);
    memset(&e, 0, sizeof e);
    estimate_memory(&g.j, 2, RECOMPUTE_NONE, SHARD_ZERO3, &e);
    CHECK(e.weights_bytes == 775680.0 && e.grads_bytes == 1551716.0 && e.optimizer_bytes == 294912.0,
          "tiny ZeRO-3 over 16: %.0f %.0f %.0f", e.weights_bytes, e.grads_bytes, e.optimizer_bytes);

    /* Each tensor's slice rounds up to 64 elements: hidden 200 (norm weights
     * 200 -> 256), 4 heads of 32, 2 kv heads, ffn 328, vocab 1000, untied.
     * Matrices per layer 51,200 + 25,600 + 131,200 + 65,600 (multiples of 64),
     * vectors 256 + 256 (qkv bias) + 256; embedding and lm_head 200,000 each;
     * final norm 256: 2 x 274,368 + 400,000 + 256 = 948,992 (948,712 parameters). */
    fixture(&g, model(ARCH_QWEN2, 2, 200, 4, 2, 32, 328, 1000, false), 1, 64, 2,
            SHARD_NONE, RECOMPUTE_NONE, 1e6);
    g.c.gpus_per_node = 1;
    memset(&e, 0, sizeof e);
    estimate_memory(&g.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.params_total == 948712 && e.weights_bytes == 2 * 948992.0 &&
              e.grads_bytes == 4 * 948992.0 && e.optimizer_bytes == 12 * 948992.0,
          "padded flat buffers: %lld params, %.0f weight bytes", (long long)e.params_total, e.weights_bytes);

    /* Context 96 is not a multiple of 64: the trainer materialises the scores
     * although the plan asks for flash (n = 2 x 96 = 192 tokens).
     * One layer's set: 192 x 3080 + 2 x 4 x 96^2 x 2 (scores) = 738,816.
     * Residual stream: 3 x 192 x 128 x 2 = 147,456.
     * Forward scratch: 192 x (256*2 + 128*2 (o) + 128*2 + 20 + 12) + 4 + 4,112 = 206,868.
     * Backward scratch: 192 x 3328 + 192 x 128 x 2 (dO) + 147,456 (dP) = 835,584.
     * Logits: 192 x 512 x 2 = 196,608 < the column-sum scratch 262,144.
     * With the states: 9,438,484 bytes. */
    CHECK(!estimate_llmc_cuda_flash(&f.m, 96) && estimate_llmc_cuda_flash(&f.m, 64), "flash needs context %% 64");
    f.t.context = 96;
    memset(&e, 0, sizeof e);
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.activations_layers_bytes == 147456.0 + 2 * 738816.0 &&
              e.activations_working_bytes == 206868.0 + 835584.0 &&
              e.weights_bytes + e.grads_bytes + e.optimizer_bytes + e.activations_bytes + e.logits_bytes ==
                  9438484.0,
          "tiny at context 96 (eager): kept %.0f, scratch %.0f", e.activations_layers_bytes,
          e.activations_working_bytes);
    /* head_dim 48 has no fused kernel either. */
    PlanModel h48 = model(ARCH_QWEN2, 2, 192, 4, 2, 48, 256, 512, true);
    CHECK(!estimate_llmc_cuda_flash(&h48, 2048), "no fused kernel for head_dim 48");
}

/* train.master_weights, train.optimizer_states and precision = fp8 on the
 * llmc CUDA trainer, by hand on the tiny shape of test_llmc_cuda_allocation
 * (361,600 parameters; 2 layers, hidden 128, q = 4 x 32 = 128, kv = 2 x 32 =
 * 64, ffn 256; micro batch 2 x context 64 = 128 tokens). */
void test_llmc_states_fp8(void)
{
    Fixture f;
    Estimate e;
    llmc_tiny_fixture(&f, &e);
    /* bytes per parameter of weights + gradients + states: 2 + 4 + master
     * (4, split 2) + m and v (8, bf16 4) = 18 / 16 / 14 / 12 */
    static const struct { MasterWeights mw; OptimStates os; double per; } rows[] = {
        {MASTER_FP32, OSTATES_FP32, 18}, {MASTER_SPLIT, OSTATES_FP32, 16},
        {MASTER_FP32, OSTATES_BF16, 14}, {MASTER_SPLIT, OSTATES_BF16, 12}};
    for (int i = 0; i < 4; i++) {
        f.t.master_weights = rows[i].mw;
        f.t.optimizer_states = rows[i].os;
        estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
        CHECK(e.weights_bytes + e.grads_bytes + e.optimizer_bytes == rows[i].per * 361600 &&
              e.model_bytes_per_param == rows[i].per, "states %s/%s: %.0f bytes, %.0f per parameter",
              master_weights_llm_names[rows[i].mw], optimizer_states_llm_names[rows[i].os],
              e.weights_bytes + e.grads_bytes + e.optimizer_bytes, e.model_bytes_per_param);
    }
    /* ZeRO-2 on 2 ranks: the shard is whole GRAD_NORM_BLOCKs; its states at
     * 6 bytes (split + bf16) instead of 12 */
    f.c.gpus_per_node = 2;
    f.t.shard = SHARD_ZERO2;
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_ZERO2, &e);
    double split_bf16 = e.optimizer_bytes;
    f.t.master_weights = MASTER_FP32;
    f.t.optimizer_states = OSTATES_FP32;
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_ZERO2, &e);
    CHECK(split_bf16 > 0 && split_bf16 * 2 == e.optimizer_bytes, "zero2 shard states: %.0f vs %.0f", split_bf16,
          e.optimizer_bytes);
    f.c.gpus_per_node = 1;
    f.t.shard = SHARD_NONE;
    /* fp8: projection parameters per layer = 128 x (128 + 2 x 64) (qkv) +
     * 128 x 128 (o) + 2 x 128 x 256 (gate_up) + 256 x 128 (down) = 147,456;
     * 2 layers, 2 bytes each (E4M3 copy and its transpose) = 589,824. Scratch:
     * 128 tokens x (the widest input, of hidden 128, q 128, ffn 256, + twice the
     * widest output, of qkv 256, hidden 128, gate_up 512) = 128 x (256 + 1024)
     * = 163,840, + 3 scales x 4 projections x 4 bytes x 2 layers = 96, + each
     * layer's four inputs transposed for the weight gradients: 2 layers x 128
     * tokens x (2 x 128 + 2 x 64 + 256) = 163,840 (none under full recompute);
     * the bf16 ln1, ln2 and h then one buffer each for both layers: activations
     * (2 - 1) x 128 x (2 x 128 + 256) x 2 = 131,072 less. */
    double before;
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    before = e.total_bytes;
    CHECK(e.fp8_weights_bytes == 0 && e.fp8_scratch_bytes == 0, "bf16: no FP8 memory");
    f.t.precision = PREC_FP8;
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.llmc_cuda_allocation && e.fp8_weights_bytes == 589824.0 &&
          e.fp8_scratch_bytes == 163840.0 + 96 + 163840.0,
          "fp8 copies %.0f, scratch %.0f", e.fp8_weights_bytes, e.fp8_scratch_bytes);
    CHECK(e.total_bytes == before + 589824.0 + 163840.0 + 96 + 163840.0 - 131072.0, "fp8 total: bf16's + %.0f",
          e.total_bytes - before);
    /* fp8_lm_head: the LM head's weight (the tied embedding, 512 x 128) in
     * E4M3 and its transpose, 2 x 65,536 = 131,072 bytes more, nothing else
     * (its E4M3 input in the scratch above, the E5M2 logits' gradient in the
     * logits chunk's buffer) */
    f.t.fp8_lm_head = true;
    estimate_memory(&f.j, 2, RECOMPUTE_NONE, SHARD_NONE, &e);
    CHECK(e.fp8_weights_bytes == 589824.0 + 131072.0 && e.fp8_scratch_bytes == 163840.0 + 96 + 163840.0 &&
              e.total_bytes == before + 589824.0 + 131072.0 + 163840.0 + 96 + 163840.0 - 131072.0,
          "fp8_lm_head: copies %.0f, scratch %.0f, total bf16's + %.0f", e.fp8_weights_bytes, e.fp8_scratch_bytes,
          e.total_bytes - before);
    f.t.fp8_lm_head = false;
    f.t.recompute = RECOMPUTE_FULL;
    estimate_memory(&f.j, 2, RECOMPUTE_FULL, SHARD_NONE, &e);
    CHECK(e.fp8_scratch_bytes == 163840.0 + 96, "fp8 under full recompute: scratch %.0f", e.fp8_scratch_bytes);
    /* selective recompute shares h already: only ln1 and ln2 more, 128 x 256 x 2 */
    f.t.recompute = RECOMPUTE_SELECTIVE;
    estimate_memory(&f.j, 2, RECOMPUTE_SELECTIVE, SHARD_NONE, &e);
    double kept_fp8 = e.activations_layers_bytes;
    f.t.precision = PREC_BF16;
    estimate_memory(&f.j, 2, RECOMPUTE_SELECTIVE, SHARD_NONE, &e);
    CHECK(kept_fp8 == e.activations_layers_bytes - 65536.0, "fp8 under selective recompute: kept %.0f, bf16 %.0f",
          kept_fp8, e.activations_layers_bytes);
    f.t.precision = PREC_FP8;
    f.t.recompute = RECOMPUTE_NONE;
    /* Time: FLOPs per token 6N + attention; the projections' share runs at the
     * FP8 peak (1979), the rest at bf16's (989). On the estimate's own N and
     * FLOPs per token: share = 6 x 294,912 / flops_per_token, and the blended
     * peak p satisfies 1/p = (1 - share)/989e12 + share/1979e12. */
    int errors;
    free(run_job(&f.j, &e, &errors));
    double share = 6 * 294912.0 / e.flops_per_token;
    CHECK(near(e.fp8_flops_share, share, 1e-12), "fp8 FLOP share %.6f, by hand %.6f", e.fp8_flops_share, share);
    CHECK(near(e.peak_flops_per_device, 1 / ((1 - share) / 989e12 + share / 1979e12), 1e-12),
          "blended peak %.4g", e.peak_flops_per_device);
    /* fp8_lm_head: the LM head's 6 x 512 x 128 = 6 x 65,536 FLOPs per token
     * join the share; FLOPs per token unchanged */
    double fpt = e.flops_per_token;
    f.t.fp8_lm_head = true;
    free(run_job(&f.j, &e, &errors));
    share = 6 * (294912.0 + 65536.0) / e.flops_per_token;
    CHECK(e.flops_per_token == fpt && near(e.fp8_flops_share, share, 1e-12) &&
              near(e.peak_flops_per_device, 1 / ((1 - share) / 989e12 + share / 1979e12), 1e-12),
          "fp8_lm_head FLOP share %.6f, by hand %.6f", e.fp8_flops_share, share);
    f.t.fp8_lm_head = false;
    f.t.precision = PREC_BF16;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.peak_flops_per_device == 989e12 && e.fp8_flops_share == 0, "bf16 peak %.4g", e.peak_flops_per_device);
}

void test_comm_buffers(void)
{
    Fixture f;
    Estimate e;
    /* 72B at ZeRO-3 at DeepSpeed's default sizes (the accounting outside the
     * llmc CUDA trainer and transformers: here fp32, 4 bytes a value): the
     * embedding (152064 x 8192 = 1,245,708,288) is the largest matrix, gathered
     * and its gradient: 2 x 4 x 1,245,708,288; prefetch 5e7 x 4; reduce bucket 5e8 x 4. */
    fixture(&f, model(ARCH_QWEN2, 80, 8192, 64, 8, 0, 29568, 152064, false), 32, 2560, 4,
            SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    f.t.precision = PREC_FP32;
    memset(&e, 0, sizeof e);
    estimate_memory(&f.j, 4, RECOMPUTE_FULL, SHARD_ZERO3, &e);
    CHECK(!e.llmc_cuda_allocation && e.comm_bytes == 8.0 * 1245708288 + 2e8 + 2e9, "zero3 buffers %.0f",
          e.comm_bytes);
    f.t.precision = PREC_BF16;
    /* llamafactory: the HF Trainer's "auto" sizes, hidden^2 and 0.9 hidden^2. */
    f.t.backend = BACKEND_LLAMAFACTORY;
    estimate_memory(&f.j, 4, RECOMPUTE_FULL, SHARD_ZERO3, &e);
    CHECK(e.comm_bytes == 4.0 * 1245708288 + 2 * 0.9 * 8192 * 8192 + 2.0 * 8192 * 8192,
          "zero3 auto buffers %.0f", e.comm_bytes);
    /* ZeRO-2: reduce + allgather buckets, 5e8 elements each at 2 bytes. */
    estimate_memory(&f.j, 4, RECOMPUTE_FULL, SHARD_ZERO2, &e);
    CHECK(e.comm_bytes == 2e9, "zero2 buffers %.0f", e.comm_bytes);
    /* The llmc CUDA trainer reduces and gathers in place at every stage. */
    f.t.backend = BACKEND_LLMC;
    estimate_memory(&f.j, 4, RECOMPUTE_FULL, SHARD_ZERO2, &e);
    CHECK(e.llmc_cuda_allocation && e.comm_bytes == 0, "llmc zero2 buffers %.0f", e.comm_bytes);
    /* No sharding or a single rank: in place. */
    estimate_memory(&f.j, 4, RECOMPUTE_FULL, SHARD_NONE, &e);
    CHECK(e.comm_bytes == 0, "no buffers without ZeRO");
}

void test_low_use_warning(void)
{
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true), 1, 512, 1,
            SHARD_NONE, RECOMPUTE_NONE, 1e6);
    char *text = run_job(&f.j, &e, &errors);
    CHECK(errors == 0 && strstr(text, "t.llm:20:3: warning: plan uses"), "waste warning:\n%s", text);
    CHECK(e.max_micro_batch_that_fits > 1 && strstr(text, "still fits"), "suggests a batch:\n%s", text);
    free(text);
}
