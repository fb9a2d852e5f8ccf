/* check_precision.c — the rules that join a run's number formats to other
 * keys and blocks: precision = fp8 (a GPU with FP8 tensor cores, the llmc
 * backend's FP8 row of contract/backend_caps.h, LLaMA-Factory's fp8_backend
 * and its refusal of FP8 with quantisation), and the llmc trainer's own
 * master_weights, optimizer_states and fp8_lm_head (contract/plan_keys.h
 * BACKENDS PK_LLMC; master_weights = split against offload; fp8_lm_head only
 * with fp8, its default; the dimensions of the CUDA backend's FP8 GEMMs).
 * The keys' words are read by their rows
 * (check_row_keys); here only what relates several.
 */
#include "check_internal.h"

/* Set in the plan (its position was recorded by check_row_keys). */
static bool written(SrcRange at) { return at.start.file != NULL; }

/* The catalogue's GPUs with FP8 tensor cores, for a message: "H100_80GB, ...". */
static const char *fp8_gpus(Checker *c)
{
    const char *list = "";
    for (int i = 0; i < gpu_catalog_count(); i++) {
        const GpuSpec *g = gpu_catalog_at(i);
        if (g->fp8_tflops > 0) list = arena_printf(c->a, "%s%s%s", list, list[0] ? ", " : "", g->name);
    }
    return list;
}

/* A train key of the llmc trainer's alone (PK_LLMC) on backend = llamafactory:
 * LLaMA-Factory keeps fp32 masters and moments under bf16 mixed precision and
 * bf16 everything under pure_bf16, nothing between; its FP8 has no switch
 * for the LM head (fp8_lm_head). */
static void check_llmc_only_keys(Checker *c, Scope *s, const PlanTrain *t)
{
    const PlanKeyList *rows = &plan_key_lists[PKB_TRAIN];
    for (int k = 0; k < rows->n; k++) {
        Entry *e;
        if (rows->keys[k].backends != PK_LLMC || !(e = find(s, rows->keys[k].key))) continue;
        Diag *g = diag_error(c->d, e->key_at, "'%s' is a setting of the llmc trainer; LLaMA-Factory has none",
                             e->key);
        if (k == PLAN_KEY_INDEX(TRAIN, fp8_lm_head)) {
            diag_note(g, "run '%s' uses backend = llamafactory, whose FP8 (fp8: true) has no switch for the LM head",
                      t->name);
            diag_help(g, "remove '%s', or backend = llmc", e->key);
            continue;
        }
        diag_note(g, "run '%s' uses backend = llamafactory, which keeps fp32 master weights and Adam m + v under "
                  "precision = bf16, and bf16 weights, gradients and Adam m + v (no fp32 copy) under precision = "
                  "pure_bf16", t->name);
        diag_help(g, "remove '%s' and set precision = pure_bf16 (LLaMA-Factory's nearest), or backend = llmc",
                  e->key);
    }
}

/* LLaMA-Factory's FP8 (Fp8Arguments): fp8_backend (a word of its concept,
 * read here: plan.json does not carry it) only with fp8, and not with a
 * quantised base (hparams/parser.py refuses fp8 with quantization_bit). */
static void check_lf_fp8(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e = find(s, PLAN_KEY(TRAIN, fp8_backend));
    int v;
    if (e) {
        t->fp8_backend_at = e->at;
        if (get_enum(c, e, fp8_backend_llm_names, FP8B_COUNT, &v)) t->fp8_backend = (Fp8Backend)v;
    }
    if (t->precision != PREC_FP8 && e) {
        Diag *g = diag_error(c->d, t->fp8_backend_at, "'fp8_backend' is only used with precision = fp8");
        diag_help(g, "precision = fp8, or remove 'fp8_backend'");
    }
    if (t->precision == PREC_FP8 && t->method == METHOD_QLORA) {
        Diag *g = diag_error(c->d, t->precision_at, "precision = fp8 does not go with method = qlora");
        diag_note(g, "LLaMA-Factory refuses FP8 training of a quantised model before training starts");
        diag_help(g, "method = lora with precision = fp8, or precision = bf16 with method = qlora");
    }
}

/* fp8_lm_head (read by its row, default derived here): on the llmc trainer
 * the LM head's three GEMMs (logits, their input and weight gradients) in
 * FP8 beside the projections', so only with precision = fp8; unless written,
 * on with fp8. LLaMA-Factory has no such switch (its row's BACKENDS refuses
 * the key there): off. */
static void check_llmc_fp8_head(Checker *c, PlanTrain *t, bool set)
{
    if (t->backend != BACKEND_LLMC) { t->fp8_lm_head = false; return; }
    if (!set) { t->fp8_lm_head = t->precision == PREC_FP8; return; }
    if (!t->fp8_lm_head || t->precision == PREC_FP8) return;
    Diag *g = diag_error(c->d, t->fp8_lm_head_at, "fp8_lm_head = true needs precision = fp8");
    diag_note(g, "run '%s' trains in precision = %s%s; the LM head's GEMMs run in FP8 only beside the "
              "projections'", t->name, precision_llm_names[t->precision],
              written(t->precision_at) ? "" : " (the default)");
    diag_help(g, "precision = fp8, or remove 'fp8_lm_head' in run '%s'", t->name);
    t->fp8_lm_head = false;
}

void check_train_formats(Checker *c, Scope *s, PlanTrain *t, const bool *ok)
{
    if (t->backend == BACKEND_LLAMAFACTORY) {
        check_llmc_only_keys(c, s, t);
        check_lf_fp8(c, s, t);
    }
    check_llmc_fp8_head(c, t, ok[PLAN_KEY_INDEX(TRAIN, fp8_lm_head)]);
}

/* precision = fp8 on the job's cluster: a GPU with FP8 tensor cores (either
 * backend), and on the llmc backend what its row runs with FP8; false when
 * refused (or not known: a cluster without a GPU or hosts). */
static bool check_job_fp8(Checker *c, const PlanJob *j, const PlanCluster *cl, const PlanTrain *t,
                          LlmcBackendId backend)
{
    SrcRange at = written(t->precision_at) ? t->precision_at : j->run_at;
    if (!cl->gpu) {
        if (!cl->hostlist && !cl->minimal) return false;
        Diag *g = diag_error(c->d, at, "cluster '%s' has no GPUs, so run '%s' cannot use precision = fp8", cl->name,
                             t->name);
        diag_note(g, "FP8 needs GPU tensor cores; the llmc CPU backend trains in fp32");
        diag_help(g, "precision = fp32 on this cluster, or a cluster of GPUs with FP8 (%s)", fp8_gpus(c));
        return false;
    }
    if (!(cl->gpu->fp8_tflops > 0)) {
        Diag *g = diag_error(c->d, at, "precision = fp8 needs a GPU with FP8 tensor cores; %s (cluster '%s') has none",
                             cl->gpu->name, cl->name);
        diag_note(g, "FP8 tensor cores: %s; a gpu block states its own with fp8 = N TFLOPS", fp8_gpus(c));
        diag_help(g, "precision = bf16 in run '%s'", t->name);
        return false;
    }
    if (t->backend != BACKEND_LLMC || llmc_fp8_ok(backend, (int)t->shard, t->offload)) return true;
    const LlmcBackendCaps *caps = &llmc_backend_caps[backend];
    bool shard = (int)t->shard > caps->fp8_max_shard;
    const char *what = shard ? arena_printf(c->a, "shard = %s", shard_llm_names[t->shard])
                             : arena_printf(c->a, "offload = %s", offload_llm_names[t->offload]);
    Diag *g = diag_error(c->d, shard ? t->shard_at : t->offload_at,
                         "precision = fp8 with %s is not yet in llmc-train", what);
    diag_note(g, "the llmc trainer on %s runs FP8 GEMMs up to shard = %s and with offload = %s", caps->where,
              shard_llm_names[caps->fp8_max_shard], offload_llm_names[caps->fp8_max_offload]);
    diag_help(g, "%s, or precision = bf16 in run '%s'",
              shard ? arena_printf(c->a, "shard = %s", shard_llm_names[caps->fp8_max_shard])
                    : arena_printf(c->a, "offload = %s", offload_llm_names[caps->fp8_max_offload]),
              t->name);
    return false;
}

/* master_weights = split keeps the master's low half beside the bf16 weight
 * on the GPU; offload keeps a whole fp32 master in host memory instead. */
static void check_job_master(Checker *c, const PlanTrain *t, LlmcBackendId backend)
{
    bool ft = t->method != METHOD_FULL;
    if (t->backend != BACKEND_LLMC || llmc_master_ok(backend, t->master_weights, t->offload, (int)t->shard, ft))
        return;
    const LlmcBackendCaps *caps = &llmc_backend_caps[backend];
    if (t->offload != OFFLOAD_NONE && !caps->split_offload) {
        Diag *g = diag_error(c->d, t->master_weights_at, "master_weights = split does not go with offload = %s",
                             offload_llm_names[t->offload]);
        diag_note(g, "optimizer offload keeps the fp32 master weights in host memory, where splitting them saves "
                  "no GPU memory");
        diag_help(g, "master_weights = fp32, or offload = none in run '%s'", t->name);
        return;
    }
    Diag *g = diag_error(c->d, t->master_weights_at, "master_weights = split does not go with shard = %s in full "
                         "training on %s", shard_llm_names[t->shard], caps->where);
    diag_note(g, "ZeRO-2/3 keep each shard's fp32 master beside bf16 weights that are whole or gathered, "
              "not its upper half");
    diag_help(g, "master_weights = fp32, or shard = %s in run '%s'", shard_llm_names[caps->split_max_shard], t->name);
}

/* optimizer_states = bf16: the CUDA backend's offload streams fp32 moments. */
static void check_job_states(Checker *c, const PlanTrain *t, LlmcBackendId backend)
{
    if (t->backend != BACKEND_LLMC || llmc_states_ok(backend, t->optimizer_states, t->offload)) return;
    Diag *g = diag_error(c->d, t->optimizer_states_at, "optimizer_states = bf16 does not go with offload = %s on %s",
                         offload_llm_names[t->offload], llmc_backend_caps[backend].where);
    diag_note(g, "optimizer offload streams fp32 moments between host memory and the GPU");
    diag_help(g, "optimizer_states = fp32, or offload = none in run '%s'", t->name);
}

/* precision = fp8 on the CUDA backend: each dimension of its FP8 GEMMs a
 * multiple of LLMC_FP8_DIM_STEP (contract/backend_caps.h, as the trainer
 * refuses it), said at the key that sets it: the batch or the context, the
 * model's shape, the vocabulary under fp8_lm_head. */
static void check_job_fp8_dims(Checker *c, const PlanTrain *t)
{
    const PlanModel *m = t->model;
    long long tokens = (long long)t->micro_batch * t->context;
    LlmcFp8Dim bad = llmc_fp8_dim_fault(tokens, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab,
                                        t->fp8_lm_head);
    if (!bad.what) return;
    int step = LLMC_FP8_DIM_STEP;
    if (bad.kind == LLMC_FP8_DIM_TOKENS) {
        Diag *g = diag_error(c->d, t->batch_at, "precision = fp8 needs %s to be a multiple of %d, found %d x %d = %lld",
                             bad.what, step, t->micro_batch, t->context, tokens);
        diag_note(g, "the llmc trainer's FP8 GEMMs (cuBLASLt on Hopper) take operands in whole 16-byte rows");
        diag_help(g, "a micro batch or a context that makes a multiple of %d, or precision = bf16 in run '%s'", step,
                  t->name);
        return;
    }
    bool vocab = bad.kind == LLMC_FP8_DIM_VOCAB;
    SrcRange at = vocab && written(t->fp8_lm_head_at) ? t->fp8_lm_head_at
                : written(t->precision_at)            ? t->precision_at
                                                      : t->model_at;
    Diag *g = diag_error(c->d, at, "precision = fp8 needs model '%s' to have %s a multiple of %d, found %lld",
                         m->name, bad.what, step, bad.value);
    diag_note(g, "the llmc trainer's FP8 GEMMs (cuBLASLt on Hopper) take operands in whole 16-byte rows");
    if (vocab) {
        diag_note(g, "fp8_lm_head is true%s: the LM head's three GEMMs run in FP8 beside the projections'",
                  written(t->fp8_lm_head_at) ? "" : " (its default under precision = fp8)");
        diag_help(g, "fp8_lm_head = false (the LM head in bf16), or a vocabulary padded to a multiple of %d", step);
    } else {
        diag_help(g, "precision = bf16 in run '%s'", t->name);
    }
}

void check_job_formats(Checker *c, const PlanJob *j, const PlanCluster *cl, const PlanTrain *t)
{
    LlmcBackendId backend = cl->gpu ? LLMC_BACKEND_CUDA : LLMC_BACKEND_CPU;
    if (t->precision == PREC_FP8) {
        if (check_job_fp8(c, j, cl, t, backend) && t->backend == BACKEND_LLMC && t->model) check_job_fp8_dims(c, t);
    }
    check_job_master(c, t, backend);
    check_job_states(c, t, backend);
}
