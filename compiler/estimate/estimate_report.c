/* estimate_report.c — the estimator's diagnostics: a plan that does not fit
 * (with the breakdown and what else would fit), runs past the time limit or
 * the barrier, host memory, a communication-bound step with its remedies.
 */
#include "estimate_internal.h"

/* ---- diagnostics ---------------------------------------------------------- */

static void fmt_duration(char *buf, size_t n, double sec)
{
    if (sec < 120) snprintf(buf, n, "%.0f s", sec);
    else if (sec < 2 * 3600) snprintf(buf, n, "%.1f min", sec / 60);
    else if (sec < 72 * 3600) snprintf(buf, n, "%.1f h", sec / 3600);
    else snprintf(buf, n, "%.1f d (%.0f h)", sec / 86400, sec / 3600);
}

static void fmt_count(char *buf, size_t n, double v)
{
    if (v < 1e3) snprintf(buf, n, "%.0f", v);
    else if (v < 1e6) snprintf(buf, n, "%.1fK", v / 1e3);
    else if (v < 1e9) snprintf(buf, n, "%.1fM", v / 1e6);
    else if (v < 1e12) snprintf(buf, n, "%.1fB", v / 1e9);
    else snprintf(buf, n, "%.1fT", v / 1e12);
}

static const char *recompute_name(Recompute r)
{
    return plan_vocab_name(recompute_llm_names, RECOMPUTE_COUNT, r);
}

const char *estimate_attention_name(const PlanTrain *t, const Estimate *e)
{
    if (t->attention != ATTN_FLASH) return attention_llm_names[ATTN_EAGER];
    if (e->llmc_cuda_allocation && !estimate_llmc_cuda_flash(t->model, t->context))
        return "eager (no fused kernel)";
    return attention_llm_names[ATTN_FLASH];
}

static const char *shard_name(ShardStage s)
{
    return plan_vocab_name(shard_llm_names, SHARD_COUNT, s);
}

static void note_breakdown(Diag *dg, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    diag_note(dg, "weights %.1f GiB, gradients %.1f GiB, optimizer states %.1f GiB "
              "(%.0f bytes/param, shard=%s over %d ranks)",
              e->weights_bytes / GIB, e->grads_bytes / GIB, e->optimizer_bytes / GIB,
              e->model_bytes_per_param, shard_name(t->shard), e->data_parallel);
    diag_note(dg, "activations %.1f GiB (batch %d x context %d, recompute=%s, attention=%s)",
              e->activations_bytes / GIB, t->micro_batch, t->context,
              recompute_name(t->recompute), estimate_attention_name(t, e));
    if (e->attn_cudnn)
        diag_note(dg, "cuDNN attention workspace %.1f GiB (%s)", e->attn_workspace_bytes / GIB,
                  e->attn_cudnn_deterministic ? "deterministic backward" : "backward with fp32 atomics");
    if (e->logits_chunked)
        diag_note(dg, "logits and their gradient %.1f GiB (%.0f rows at a time x vocab %d, bf16)",
                  e->logits_bytes / GIB, e->logits_chunk_rows, t->model->vocab);
    else
        diag_note(dg, "logits and their gradient %.1f GiB (batch x context x vocab %d, not chunked)",
                  e->logits_bytes / GIB, t->model->vocab);
    if (e->comm_bytes > 0)
        diag_note(dg, "communication buffers %.1f GiB (%s)", e->comm_bytes / GIB,
                  e->activations_transformers && job->run->shard == SHARD_ZERO3
                      ? "ZeRO-3 buckets as the HF Trainer sizes \"auto\""
                      : "DeepSpeed default bucket sizes");
    if (e->reserve_fragmentation_bytes > 0)
        diag_note(dg, "%s %.1f GiB + allocator fragmentation %.1f GiB",
                  e->cpu_only ? "process overhead" : "CUDA context and workspaces",
                  e->reserve_context_bytes / GIB, e->reserve_fragmentation_bytes / GIB);
    else
        diag_note(dg, "%s %.1f GiB", e->cpu_only ? "process overhead" : "CUDA context and workspaces",
                  e->reserve_context_bytes / GIB);
}

/* One "what else would fit" help line: the alternative at the plan's batch,
 * or the largest batch that fits under it. */
static void help_alternative(Diag *dg, const PlanJob *job, const char *what, Recompute rc,
                             ShardStage shard)
{
    const PlanTrain *t = job->run;
    Estimate alt;
    memset(&alt, 0, sizeof alt);
    estimate_memory(job, t->micro_batch, rc, shard, &alt);
    if (alt.fits) {
        diag_help(dg, "%s fits at this batch (%.1f GiB)", what, alt.total_bytes / GIB);
        return;
    }
    int b = max_fitting_batch(job, rc, shard);
    if (b <= 0) {
        diag_help(dg, "%s does not fit either (%.1f GiB)", what, alt.total_bytes / GIB);
        return;
    }
    estimate_memory(job, b, rc, shard, &alt);
    diag_help(dg, "%s fits at batch = %d per gpu (%.1f GiB)", what, b, alt.total_bytes / GIB);
}

/* backend = llamafactory: DeepSpeed's CPU offload at the plan's batch (GPU
 * memory only: the host memory and the step time of the alternative are
 * estimated once the plan takes it). Offload is DeepSpeed ZeRO, which
 * pure_bf16 does not run with: such a plan is offered it at bf16. */
static void help_offload(Diag *dg, const PlanJob *job)
{
    const PlanTrain *t = job->run;
    if (t->backend != BACKEND_LLAMAFACTORY || is_cpu_only(job->cluster) || t->offload == OFFLOAD_ALL)
        return;
    bool pure = t->precision == PREC_PURE_BF16;
    PlanTrain alt_t = *t;
    PlanJob alt_j = *job;
    alt_j.run = &alt_t;
    if (pure) alt_t.precision = PREC_BF16;
    Estimate alt;
    static const struct { OffloadKind off; ShardStage shard; const char *what; } tries[] = {
        {OFFLOAD_OPTIMIZER, SHARD_ZERO2, "offload = optimizer with shard = zero2"},
        {OFFLOAD_OPTIMIZER, SHARD_ZERO3, "offload = optimizer with shard = zero3"},
        {OFFLOAD_ALL, SHARD_ZERO3, "offload = all with shard = zero3"},
    };
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        if (tries[i].shard < t->shard || (tries[i].off == t->offload && tries[i].shard == t->shard)) continue;
        alt_t.offload = tries[i].off;
        alt_t.shard = tries[i].shard;
        memset(&alt, 0, sizeof alt);
        estimate_memory(&alt_j, t->micro_batch, t->recompute, alt_t.shard, &alt);
        if (alt.fits) {
            diag_help(dg, "%s%s fits at this batch (%.1f GiB per GPU; the offloaded states need host memory)",
                      pure ? "precision = bf16, " : "", tries[i].what, alt.total_bytes / GIB);
            return;
        }
    }
}

/* precision = pure_bf16 without ZeRO (the checker): the ZeRO alternative is
 * the same run in bf16 mixed precision, estimated as such. */
static void help_pure_bf16_zero(Diag *dg, const PlanJob *job, const char *what, Recompute rc, ShardStage shard)
{
    PlanTrain alt_t = *job->run;
    PlanJob alt_j = *job;
    alt_t.precision = PREC_BF16;
    alt_j.run = &alt_t;
    help_alternative(dg, &alt_j, what, rc, shard);
}

static void help_alternatives(Diag *dg, const PlanJob *job)
{
    help_offload(dg, job);
    const PlanTrain *t = job->run;
    bool multi = !is_cpu_only(job->cluster) && job->nodes * job->cluster->gpus_per_node > 1;
    /* The highest stage: every backend on GPUs runs ZeRO-3. */
    ShardStage most = SHARD_ZERO3;
    const char *shard_alt = "shard = zero3";
    const char *both_alt = "recompute = full with shard = zero3";
    if (t->recompute != RECOMPUTE_FULL)
        help_alternative(dg, job, "recompute = full", RECOMPUTE_FULL, t->shard);
    if (t->precision == PREC_PURE_BF16) {
        if (multi)
            help_pure_bf16_zero(dg, job, "precision = bf16 with shard = zero3", t->recompute, SHARD_ZERO3);
        if (multi && t->recompute != RECOMPUTE_FULL)
            help_pure_bf16_zero(dg, job, "precision = bf16, recompute = full with shard = zero3", RECOMPUTE_FULL,
                                SHARD_ZERO3);
        return;
    }
    if (multi && t->shard < most)
        help_alternative(dg, job, shard_alt, t->recompute, most);
    if (multi && t->recompute != RECOMPUTE_FULL && t->shard < most)
        help_alternative(dg, job, both_alt, RECOMPUTE_FULL, most);
    /* Sharded states shrink with more ranks: the fewest nodes of the cluster
     * that would hold this batch. */
    if (t->shard != SHARD_NONE && !is_cpu_only(job->cluster)) {
        PlanJob more = *job;
        int limit = job->cluster->nhosts > 0 ? job->cluster->nhosts : job->nodes;
        Estimate alt;
        for (more.nodes = job->nodes + 1; more.nodes <= limit; more.nodes++) {
            memset(&alt, 0, sizeof alt);
            estimate_memory(&more, t->micro_batch, t->recompute, t->shard, &alt);
            if (alt.fits) {
                diag_help(dg, "nodes = %d fits at this batch (%.1f GiB)", more.nodes, alt.total_bytes / GIB);
                break;
            }
        }
    }
}

int report_memory(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    if (e->usable_bytes <= 0) return 0;
    const char *unit = e->cpu_only ? "node" : "GPU";
    char what[160];
    if (e->cpu_only)
        snprintf(what, sizeof what, "%s has %.1f GiB", job->mem_bytes ? "the job's mem" : "the node",
                 e->usable_bytes / GIB);
    else
        snprintf(what, sizeof what, "%s has %.1f GiB usable", c->gpu->name, e->usable_bytes / GIB);

    if (!e->fits) {
        Diag *dg = diag_error(d, t->batch_at, "plan does not fit: %.1f GiB per %s needed, %s",
                              e->total_bytes / GIB, unit, what);
        note_breakdown(dg, job, e);
        if (e->max_micro_batch_that_fits > 0) {
            Estimate at;
            memset(&at, 0, sizeof at);
            estimate_memory(job, e->max_micro_batch_that_fits, t->recompute, t->shard, &at);
            diag_help(dg, "batch = %d per %s fits (%.1f GiB)", e->max_micro_batch_that_fits,
                      e->cpu_only ? "node" : "gpu", at.total_bytes / GIB);
        } else {
            diag_help(dg, "not even batch = 1 fits with these settings");
        }
        help_alternatives(dg, job);
        return 1;
    }
    if (!e->cpu_only && e->total_bytes < LOW_MEMORY_SHARE * e->usable_bytes) {
        Diag *dg = diag_warning(d, t->batch_at, "plan uses %.1f GiB of the %.1f GiB usable per GPU (%.0f%%)",
                                e->total_bytes / GIB, e->usable_bytes / GIB,
                                100.0 * e->total_bytes / e->usable_bytes);
        if (e->max_micro_batch_that_fits > t->micro_batch) {
            Estimate at;
            memset(&at, 0, sizeof at);
            estimate_memory(job, e->max_micro_batch_that_fits, t->recompute, t->shard, &at);
            diag_help(dg, "batch = %d per gpu still fits (%.1f GiB), or fewer GPUs would do",
                      e->max_micro_batch_that_fits, at.total_bytes / GIB);
        }
    }
    return 0;
}

/* A run in several segments stops each one at the signal: the lead must leave
 * time to train (an error when it takes the whole limit), and should leave most
 * of it (a warning past a quarter). */
static int report_segments(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanTrain *t = job->run;
    if (e->requeue_segments <= 1 || !job->requeue || t->backend != BACKEND_LLMC) return 0;
    int lead = estimate_stop_signal_seconds(job, e);
    char limit[64];
    fmt_duration(limit, sizeof limit, job->time_seconds);
    if (lead >= job->time_seconds) {
        Diag *dg = diag_error(d, job->time_at,
                              "time %s leaves no time to train: run '%s' needs %d segments, and each is told to "
                              "checkpoint and stop %d s before its limit",
                              limit, t->name, e->requeue_segments, lead);
        diag_note(dg, "the stop signal (--signal=USR2@%d) comes at least 60 s early: Slurm may deliver it up to 60 s "
                      "before the time given", lead);
        diag_help(dg, "time = 4 min or longer (a limit of T spends at most T/4 on stopping)");
        return 1;
    }
    if (lead > job->time_seconds / 4) {
        Diag *dg = diag_warning(d, job->time_at, "time %s spends %d s of each of the %d segments of run '%s' on stopping",
                                limit, lead, e->requeue_segments, t->name);
        diag_note(dg, "the trainer checkpoints and stops %d s before each limit (--signal=USR2@%d)", lead, lead);
    }
    return 0;
}

int report_time(const PlanJob *job, const Estimate *e, Diags *d, const PlanDataset *missing)
{
    const PlanTrain *t = job->run;
    if (missing && t->max_steps <= 0) {
        Diag *dg = diag_warning(d, missing->at,
                                "time to train not estimated: dataset '%s' states no token count, "
                                "file size or sample count", missing->name ? missing->name : "?");
        diag_help(dg, "state its tokens, size or samples so that steps and time can be computed");
        return 0;
    }
    char need[64], limit[64];
    bool upper_bound = e->tokens_source == TOKENS_FROM_SAMPLES && t->max_steps <= 0;
    if (e->total_seconds > PLAN_YEAR_SECONDS) {
        /* 1e9 segments and billions of days are a typo in a count, not a plan. */
        fmt_duration(need, sizeof need, e->total_seconds);
        Diag *dg = upper_bound
            ? diag_warning(d, job->time_at, "run '%s' may need up to %s of training, more than a year", t->name, need)
            : diag_error(d, job->time_at, "run '%s' needs %s of training, more than a year", t->name, need);
        diag_note(dg, "%lld steps x %.2f s per step (%s tokens)", (long long)e->steps_total, e->step_seconds,
                  estimate_token_source_name(e->tokens_source));
        if (upper_bound) diag_note(dg, "tokens are samples x context, an upper bound; state the datasets' size or tokens");
        diag_help(dg, "check the datasets' samples, size and tokens, epochs and max_steps");
        return upper_bound ? 0 : 1;
    }
    if (job->requeue) return report_segments(job, e, d);
    if (e->requeue_segments <= 1) return 0;

    fmt_duration(need, sizeof need, e->wall_seconds);
    fmt_duration(limit, sizeof limit, e->time_limit_seconds);
    /* samples x context is an upper bound on the tokens: then the run only
     * may not finish, and saying "cannot" would be a guess. */
    Diag *dg = upper_bound
        ? diag_warning(d, job->time_at,
                       "run may not finish inside the time limit: up to %s of training, time is %s, "
                       "and requeue is off", need, limit)
        : diag_error(d, job->time_at,
                     "run cannot finish inside the time limit: %s of training needed, time is %s, "
                     "and requeue is off", need, limit);
    if (upper_bound)
        diag_note(dg, "tokens are samples x context, an upper bound; state the datasets' size or tokens");
    char tokens[32], rate[32];
    fmt_count(tokens, sizeof tokens, e->tokens_total);
    fmt_count(rate, sizeof rate, e->tokens_per_second);
    diag_note(dg, "%lld steps x %.2f s per step: %s tokens at %s tokens/s (mfu %.2f, %s tokens)",
              (long long)e->steps_total, e->step_seconds, tokens, rate, e->mfu,
              estimate_token_source_name(e->tokens_source));
    if (e->wall_seconds > e->total_seconds) {
        char train[64], rest[64];
        fmt_duration(train, sizeof train, e->total_seconds);
        fmt_duration(rest, sizeof rest, e->wall_seconds - e->total_seconds);
        diag_note(dg, "%s of steps + %s of start-up (model load%s) and checkpoint writes", train, rest,
                  e->tokenize_seconds > 0 ? ", tokenisation" : "");
    }
    diag_help(dg, "requeue = true runs it in %d segments of %s, resuming from checkpoints",
              e->requeue_segments, limit);
    return upper_bound ? 0 : 1;
}

/* Start-up (docs/estimator.md, "Start-up and checkpoints"): the tokenisation
 * against LLaMA-Factory's barrier, and a time limit shorter than a start. */
int report_startup(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanTrain *t = job->run;
    int errors = 0;
    char tok[64], lim[64], rate[32];
    if (e->tokenize_seconds > 0) {
        fmt_duration(tok, sizeof tok, e->tokenize_seconds);
        fmt_count(rate, sizeof rate, e->tokenize_rate);
        double plan_limit = t->ddp_timeout_seconds > 0 ? t->ddp_timeout_seconds : 1800;
        bool explicit_ = t->ddp_timeout_at.start.file != NULL;
        double need = e->tokenize_seconds + TOKENIZE_BARRIER_SLACK_S;
        Diag *dg = NULL;
        char want[64] = "";
        if (need > DDP_TIMEOUT_MAX_S) {
            dg = diag_error(d, t->data_at, "tokenising the data of run '%s' takes about %s before the first step, "
                            "longer than any barrier LLaMA-Factory can wait at (ddp_timeout at most 1 d)", t->name, tok);
            errors++;
        } else if (explicit_ && need > plan_limit) {
            fmt_duration(lim, sizeof lim, plan_limit);
            dg = diag_error(d, t->ddp_timeout_at, "ddp_timeout %s is shorter than the tokenisation before the first "
                            "step (about %s): the waiting ranks would time out at the barrier", lim, tok);
            errors++;
            fmt_duration(want, sizeof want, fmin(DDP_TIMEOUT_MAX_S, ceil((TOKENIZE_BARRIER_FACTOR * e->tokenize_seconds +
                                                                        TOKENIZE_BARRIER_SLACK_S) / 60) * 60));
        } else if (e->ddp_timeout_raised) {
            fmt_duration(lim, sizeof lim, e->ddp_timeout_seconds);
            dg = diag_warning(d, t->data_at, "tokenising the data of run '%s' takes about %s before the first "
                              "step; ddp_timeout raised from 30 min to %s", t->name, tok, lim);
        }
        if (dg) {
            char toks[32];
            fmt_count(toks, sizeof toks, e->tokenize_tokens);
            diag_note(dg, "%s tokens, %d preprocessing workers at %s tokens/s each (%s); the other ranks wait at a "
                          "barrier of ddp_timeout", toks, e->tokenize_workers, rate,
                      t->tokenize_rate > 0 ? "tokenize_rate as the plan states" : "the default; set tokenize_rate after measuring");
            if (want[0]) diag_help(dg, "ddp_timeout = %s, or leave it out (llmc raises it to cover the tokenisation)", want);
            if (!t->tokenized_path)
                diag_help(dg, "tokenized_path = \"DIR\" keeps the tokenised set, so requeued starts load it instead%s",
                          t->stage == STAGE_PT && !t->streaming ? "; or streaming = true (with max_steps)" : "");
        }
    }
    if (e->requeue_segments >= 1000000000 && e->time_limit_seconds > 0 && job->requeue) {
        char start[64];
        fmt_duration(lim, sizeof lim, e->time_limit_seconds);
        fmt_duration(start, sizeof start, e->load_seconds + e->resume_seconds +
                                              (e->tokenize_every_start ? e->tokenize_seconds : 0));
        Diag *dg = diag_error(d, job->time_at, "time %s is shorter than one requeued start of run '%s' (%s: model "
                              "load, checkpoint read%s)", lim, t->name, start,
                              e->tokenize_every_start && e->tokenize_seconds > 0 ? ", tokenisation" : "");
        diag_help(dg, "a longer time limit");
        errors++;
    }
    return errors;
}

int report_host(const PlanJob *job, const Estimate *e, Diags *d)
{
    if (e->host_fits || e->cpu_only) return 0;
    const PlanCluster *c = job->cluster;
    SrcRange at = job->mem_bytes ? job->mem_at : c->memory_at;
    Diag *dg = diag_error(d, at, "host memory does not fit: %.1f GiB per node needed, %s %.1f GiB",
                          e->host_bytes / GIB, job->mem_bytes ? "the job's mem is" : "the node has",
                          e->host_usable_bytes / GIB);
    diag_note(dg, "trainer processes %.1f GiB, model loading %.1f GiB, data and workers %.1f GiB, "
                  "pinned buffers %.1f GiB, offloaded states %.1f GiB",
              e->host_process_bytes / GIB, e->host_model_bytes / GIB, e->host_data_bytes / GIB,
              e->host_pinned_bytes / GIB, e->host_offload_bytes / GIB);
    if (job->mem_bytes && c->memory_bytes >= e->host_bytes)
        diag_help(dg, "mem = %.0f GiB fits (the node has %.1f GiB)", ceil(e->host_bytes / GIB),
                  (double)c->memory_bytes / GIB);
    else if (job->run->backend == BACKEND_LLAMAFACTORY && job->run->shard != SHARD_ZERO3)
        diag_help(dg, "%sshard = zero3 loads one checkpoint file per rank at a time",
                  job->run->precision == PREC_PURE_BF16 ? "precision = bf16 with " : "");
    return 1;
}

static void remedy_fill(CommRemedy *r, const Estimate *base, const Estimate *at)
{
    r->fits = at->fits;
    r->total_bytes = at->total_bytes;
    r->step_seconds = at->step_seconds;
    r->tokens_per_second_per_gpu = at->tokens_per_second / (at->world_size > 0 ? at->world_size : 1);
    double base_rate = base->tokens_per_second / (base->world_size > 0 ? base->world_size : 1);
    r->speedup = base_rate > 0 ? r->tokens_per_second_per_gpu / base_rate : 0;
}

/* Set while remedies are estimated: their own estimates warn about nothing. */
static bool in_remedy;

int estimate_comm_remedies(const PlanJob *job, const Estimate *e, CommRemedy out[3])
{
    const PlanTrain *t = job->run;
    int n = 0;
    if (!e->comm_bound || e->cpu_only || in_remedy) return 0;
    in_remedy = true;
    PlanTrain tr = *t;
    PlanJob jb = *job;
    jb.run = &tr;
    Estimate at;
    Diags *d = diags_new();
    /* A larger micro batch amortises the per-micro-step collectives; fewer
     * accumulation steps keep the global batch where the plan has it. */
    int mb = t->micro_batch > 0 ? t->micro_batch : 1, ga = t->grad_accum > 0 ? t->grad_accum : 1;
    if (e->max_micro_batch_that_fits > mb) {
        int best = 0;
        for (int k = 2; k <= ga; k++)
            if (ga % k == 0 && (int64_t)mb * k <= e->max_micro_batch_that_fits) best = k;
        tr.micro_batch = best ? mb * best : e->max_micro_batch_that_fits;
        tr.grad_accum = best ? ga / best : ga;
        estimate_job_rows(&jb, 0, &at, d);
        out[n] = (CommRemedy){.kind = REMEDY_BATCH, .micro_batch = tr.micro_batch, .grad_accum = tr.grad_accum};
        remedy_fill(&out[n++], e, &at);
        tr = *t;
    }
    if (t->backend == BACKEND_LLAMAFACTORY && t->shard == SHARD_ZERO3) {
        tr.shard = SHARD_ZERO2;
        estimate_job_rows(&jb, 0, &at, d);
        out[n] = (CommRemedy){.kind = REMEDY_ZERO2};
        remedy_fill(&out[n++], e, &at);
        tr = *t;
        int g = job->cluster->gpus_per_node;
        if (job->nodes > 1 && g > 1) {
            estimate_job_hpz(&jb, g, &at);
            out[n] = (CommRemedy){.kind = REMEDY_HPZ, .hpz_group = g};
            remedy_fill(&out[n++], e, &at);
        }
    }
    diags_free(d);
    in_remedy = false;
    return n;
}

#define COMM_WARN_SHARE 0.25
#define COMM_WARN_MIN_S 0.05

/* A communication-bound step, a warning at the batch with each remedy's
 * estimate (llmc check prints it; explain prints the same rows). */
void report_comm(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanTrain *t = job->run;
    if (!e->comm_bound || !e->fabric_known || e->compute_seconds <= 0 || estimate_hpz_group || in_remedy) return;
    /* Worth a warning when it costs: the exposed part adds a quarter to
     * compute and at least COMM_WARN_MIN_S to every step. */
    if (e->comm_exposed_seconds < COMM_WARN_SHARE * e->compute_seconds || e->comm_exposed_seconds < COMM_WARN_MIN_S)
        return;
    const char *term = e->comm_latency_seconds > fmax(e->comm_intra_seconds, e->comm_inter_seconds)
                           ? "the latency of its many small collectives"
                       : e->comm_inter_seconds > e->comm_intra_seconds ? "the network" : "the GPU links";
    Diag *dg = diag_warning(d, t->batch_at,
                            "communication bounds the step: %.2f s of collectives against %.2f s of compute per "
                            "optimizer step at batch = %d per gpu on %d node%s (mostly %s)",
                            e->comm_seconds, e->compute_seconds, t->micro_batch, job->nodes,
                            job->nodes == 1 ? "" : "s", term);
    if (t->backend == BACKEND_LLAMAFACTORY && t->shard == SHARD_ZERO3)
        diag_note(dg, "ZeRO-3 gathers every weight %s per micro-step whatever the batch, so a small batch per GPU "
                      "waits on the fabric", t->recompute == RECOMPUTE_NONE ? "twice" : "three times (forward, "
                      "recomputed forward, backward)");
    CommRemedy r[3];
    int n = estimate_comm_remedies(job, e, r);
    for (int i = 0; i < n; i++) {
        char what[160];
        if (r[i].kind == REMEDY_BATCH && r[i].grad_accum != (t->grad_accum > 0 ? t->grad_accum : 1))
            snprintf(what, sizeof what, "batch = %d per gpu with grad_accum = %d (the same global batch)",
                     r[i].micro_batch, r[i].grad_accum);
        else if (r[i].kind == REMEDY_BATCH)
            snprintf(what, sizeof what, "batch = %d per gpu (a larger global batch)", r[i].micro_batch);
        else if (r[i].kind == REMEDY_ZERO2)
            snprintf(what, sizeof what, "shard = zero2");
        else
            snprintf(what, sizeof what, "DeepSpeed's zero_hpz_partition_size = %d (the GPUs of a node; LLaMA-Factory "
                     "passes it through the DeepSpeed JSON)", r[i].hpz_group);
        if (!r[i].fits)
            diag_help(dg, "%s does not fit: %.1f GiB per GPU of %.1f usable", what, r[i].total_bytes / GIB,
                      e->usable_bytes / GIB);
        else
            diag_help(dg, "%s: %.2f s per step, %.0f tokens/s per GPU (%.2fx)", what, r[i].step_seconds,
                      r[i].tokens_per_second_per_gpu, r[i].speedup);
    }
}
