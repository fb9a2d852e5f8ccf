/* explain.c — `llmc explain PLAN`: the estimate of every job, figure by figure,
 * with the assumptions behind each, as an aligned table or as JSON.
 *
 *   llmc explain PLAN [--format=human|json] [--color=auto|always|never]
 *
 * Human: diagnostics on stderr, tables on stdout. JSON: one object on stdout,
 * {"jobs": [{"job", "estimate", "assumptions"}], "diagnostics": [...]}, with the
 * estimate's keys as in plan.json (docs/estimator.md).
 * Exit: 0 clean, 1 plan errors (tables are still printed when the front end
 * succeeded), 2 usage or I/O.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "cli.h"
#include "estimate.h"
#include "frontend.h"

/* GIB: memory is shown in binary units (what nvidia-smi and the allocators report); bandwidths and file sizes
 * in decimal GB (gb(), fmt_rate_gbs), as they are quoted. */
#define GIB (1024.0 * 1024.0 * 1024.0)

enum { EXPLAIN_CLEAN = 0, EXPLAIN_PLAN = 1, EXPLAIN_USAGE = 2 };


/* A bandwidth in GB/s for a message (one static buffer per call site in turn:
 * at most four alive at once). */
static const char *fmt_rate_gbs(double bytes_per_s)
{
    static char bufs[4][32];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%.3g GB/s", bytes_per_s / 1e9);
    return b;
}
static const char explain_usage[] =
    "usage: llmc explain [--set BLOCK.KEY=VALUE]... [--shards DIR] [--format human|json] [--color auto|always|never] PLAN\n"
    "  memory per GPU and time to train for every job in PLAN, with the assumptions\n"
    "  --set BLOCK.KEY=VALUE  a value instead of the plan's (repeatable; checked like the file)\n"
    "  --shards DIR          the steps from the rows `llmc-train prepare` wrote there (DIR/index.json)\n"
    "exit status: 0 clean, 1 errors in the plan, 2 usage or I/O error\n";

/* ---- names and number formatting ---- */

/* The .llm spellings (contract/plan_vocab.h): explain speaks the plan's language, not plan.json's. */
static const char *shard_name(ShardStage s)
{
    return plan_vocab_name(shard_llm_names, SHARD_COUNT, s);
}

static const char *recompute_name(Recompute r)
{
    return plan_vocab_name(recompute_llm_names, RECOMPUTE_COUNT, r);
}

/* The dtype of weights, gradients and activations under a precision
 * (pure_bf16's are bf16, as with bf16 mixed precision). */
static const char *value_dtype_name(Precision p)
{
    return precision_llm_names[p == PREC_FP32 || p == PREC_FP16 ? p : PREC_BF16];
}

/* What the optimizer states are: mixed precision keeps fp32 master weights
 * beside the fp32 moments; pure_bf16 has no master and bf16 moments. */
static const char *optimizer_states_name(Precision p)
{
    return p == PREC_FP32 ? "Adam m + v, fp32" : p == PREC_PURE_BF16 ? "Adam m + v, bf16" : "fp32 master + Adam m + v";
}

/* The llmc CUDA trainer's states (train.master_weights, train.optimizer_states;
 * estimate_internal.h llmc_state_bytes). */
static const char *llmc_states_text(const PlanTrain *t)
{
    static const char *const text[2][2] = {
        {"fp32 master + Adam m + v, fp32", "fp32 master + Adam m + v, bf16"},
        {"split master (the 16 bits bf16 drops) + Adam m + v, fp32",
         "split master (the 16 bits bf16 drops) + Adam m + v, bf16"}};
    return text[t->master_weights == MASTER_SPLIT][t->optimizer_states == OSTATES_BF16];
}

/* The states of LLaMA-Factory's `optim` (estimate_internal.h: optim_state_bytes). */
static const char *optim_states_text(OptimKind o, Precision p)
{
    bool master = p != PREC_FP32 && p != PREC_PURE_BF16;
    switch (o) {
    case OPTIM_ADAMW_8BIT: case OPTIM_PAGED_ADAMW_8BIT:
        return master ? "fp32 master + 8-bit m + v" : "8-bit m + v";
    case OPTIM_PAGED_ADAMW_32BIT: return master ? "fp32 master + fp32 m + v (paged)" : "fp32 m + v (paged)";
    case OPTIM_ADAFACTOR: return master ? "fp32 master, factored second moment" : "factored second moment";
    case OPTIM_ADAMW_TORCH: case OPTIM_ADAMW_TORCH_FUSED: break;
    }
    return optimizer_states_name(p);
}

static const char *arch_name(ModelArch a)
{
    return plan_vocab_name(arch_llm_names, ARCH_COUNT, a);
}

/* 1234567 -> "1,234,567" */
static void fmt_int(char *buf, size_t n, double v)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v < 0 ? -v : v);
    size_t len = strlen(digits), o = 0;
    if (v < 0 && o + 1 < n) buf[o++] = '-';
    for (size_t i = 0; i < len && o + 1 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 1 < n) buf[o++] = ',';
        if (o + 1 < n) buf[o++] = digits[i];
    }
    buf[o] = 0;
}

/* ---- the table ---- */

typedef struct {
    FILE *out;
    bool colour;
} Table;

/* A section's title on its own line, bold when colour is on. */
static void section(Table *t, const char *title)
{
    fprintf(t->out, "\n%s%s%s\n", t->colour ? "\033[1m" : "", title, t->colour ? "\033[0m" : "");
}

/* One row: label (indented by depth), a right-aligned value, a detail. */
static void row(Table *t, int depth, const char *label, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void row(Table *t, int depth, const char *label, const char *value, const char *fmt, ...)
{
    char detail[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    int indent = 2 + 2 * depth;
    /* labels padded to column 34, so the values of every section line up */
    int width = 34 - indent;
    fprintf(t->out, "%*s%-*s %12s", indent, "", width, label, value);
    if (detail[0]) fprintf(t->out, "   %s", detail);
    fputc('\n', t->out);
}

/* A row whose value is BYTES: MiB below 1 GiB, else GiB with two decimals. */
static void gib_row(Table *t, int depth, const char *label, double bytes, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void gib_row(Table *t, int depth, const char *label, double bytes, const char *fmt, ...)
{
    char value[32], detail[512] = "";
    if (bytes < GIB) snprintf(value, sizeof value, "%.1f MiB", bytes / (1024.0 * 1024.0));
    else snprintf(value, sizeof value, "%.2f GiB", bytes / GIB);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    row(t, depth, label, value, detail[0] ? "%s" : NULL, detail);
}

/* The shares of the links' bandwidth the estimate's collectives reach (the
 * defaults table, estimate_defaults.c). */
static double link_eff(void)
{
    /* -1, NULL, -1: the row for any GPU and backend */
    const EstimateDefault *r = estimate_default(DEF_LINK_EFFICIENCY, -1, NULL, -1);
    return r ? r->value : 0;
}

/* The same share for the inter-node network. */
static double net_eff(void)
{
    const EstimateDefault *r = estimate_default(DEF_NET_EFFICIENCY, -1, NULL, -1);
    return r ? r->value : 0;
}

/* Any other default of the estimator's table, for the assumption lines that quote it (0 when the row is absent). */
static double default_of(DefaultKind k)
{
    const EstimateDefault *r = estimate_default(k, -1, NULL, -1);
    return r ? r->value : 0;
}

/* ---- assumptions: everything that cannot be known at compile time ---- */

typedef struct {
    /* room for 32 sentences; assume() drops any past that rather than grow */
    char line[32][400];
    int n;
} Assumptions;

static void assume(Assumptions *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void assume(Assumptions *a, const char *fmt, ...)
{
    if (a->n >= 32) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->line[a->n++], sizeof a->line[0], fmt, ap);
    va_end(ap);
}

/* Whether the job's environment sets OMP_NUM_THREADS (the CPU Adam threads). */
static bool job_sets_omp(const PlanJob *job)
{
    for (int i = 0; i < job->site.nenv; i++)
        if (job->site.env[i].name && strcmp(job->site.env[i].name, "OMP_NUM_THREADS") == 0) return true;
    return false;
}

/* Every stated default the estimate used in place of a measured or declared value, one sentence each: the
 * "assumptions" section of the table and the JSON's "assumptions" array say the same. */
static void collect_assumptions(const PlanJob *job, const Estimate *e, Assumptions *a)
{
    const PlanTrain *t = job->run;
    memset(a, 0, sizeof *a);
    if (job->merge) {
        assume(a, "merge: LLaMA-Factory starts in 60 s, the base and the fp32 adapter load at 0.5 GB/s, each "
                  "adapted matrix gets B x A (2 x adapter parameters x the wider of hidden and ffn FLOPs, an upper "
                  "bound) at %.0f%% of the peak of %s, the merged weights write at 1 GB/s: stated defaults, not "
                  "measured", e->mfu * 100, job->merge->device == MERGE_DEVICE_AUTO ? "one GPU" : "the node's CPUs");
        return;
    }
    /* one sentence per default the estimate used; the conditions mirror the estimator's own choices */
    assume(a, "memory is the worst case: every micro batch padded to the full context (%d)", t->context);
    if (e->cpu_only)
        assume(a, "CPU backend: fp32 weights, gradients, Adam m and v, activations; "
                  "peak %.0f GFLOP/s per core (AVX2 FMA at 2 GHz)", 64.0);
    else if (e->activations_transformers)
        assume(a, "llamafactory backend: activations as transformers' layers keep them "
                  "(measured with autograd's saved-tensor hooks)");
    else if (e->llmc_cuda_allocation)
        assume(a, "llmc backend: what the CUDA trainer allocates (runtime/cuda/model_cuda.c): "
                  "fp32 gradients, loss over 8192 rows at a time, selective recompute of attention and "
                  "SwiGLU; ZeRO-2/3 shard the gradients (and ZeRO-3 the weights, a layer gathered at a time)");
    else
        assume(a, "llmc backend: each op keeps its %s input once (Korthikanti et al. 2022 accounting)",
               value_dtype_name(t->precision));
    if (!e->cpu_only && t->precision == PREC_PURE_BF16)
        assume(a, "precision = pure_bf16 (LLaMA-Factory's): bf16 weights, gradients and Adam m + v (torch's "
                  "AdamW keeps its moments in the parameter dtype), no fp32 master copy: 2 + 2 + 4 bytes per "
                  "trainable parameter");
    if (!e->cpu_only && t->precision == PREC_FP8) {
        /* fp8_lm_head: the llmc trainer's LM head GEMMs in FP8 too */
        bool head = t->backend == BACKEND_LLMC && t->fp8_lm_head;
        assume(a, "precision = fp8: the projection GEMMs%s (qkv, o, gate_up, down of every layer%s: forward, "
                  "input and weight gradients; %.0f%% of the FLOPs) run in FP8 at %.0f TFLOP/s (%s's dense FP8 "
                  "peak), %s in bf16 at %.0f; norms, loss and the optimizer in bf16/fp32; the bf16 "
                  "efficiency (mfu) for both, not yet calibrated for FP8",
               head ? " and the LM head's" : "", head ? " and the logits, fp8_lm_head = true" : "",
               100 * e->fp8_flops_share,
               job->cluster->gpu->fp8_tflops, job->cluster->gpu->name,
               head ? "attention" : "the LM head and attention", job->cluster->gpu->bf16_tflops);
    }
    if (!e->cpu_only && e->activations_transformers && t->shard == SHARD_ZERO3)
        assume(a, "ZeRO-3 buckets as the HF Trainer fills \"auto\": reduce hidden^2, "
                  "prefetch 0.9 hidden^2 elements");
    else if (e->llmc_cuda_allocation)
        assume(a, "collectives in place on the trainer's flat buffers; NCCL's own buffers "
                  "are in the context allowance");
    else if (!e->cpu_only)
        assume(a, "communication buffers at DeepSpeed's defaults (reduce bucket 5e8, "
                  "allgather bucket 5e8, stage-3 prefetch 5e7 elements)");
    if (e->llmc_cuda_allocation && t->attention == ATTN_FLASH && !estimate_llmc_cuda_flash(t->model, t->context))
        assume(a, "attention = flash: the trainer's fused kernel needs head_dim 32, 64 or 128 and a "
                  "context that is a multiple of 64, so it materialises the scores (counted)");
    if (e->attn_cudnn && e->attn_cudnn_deterministic)
        assume(a, "attention = flash, deterministic = true: the trainer runs cuDNN's fused attention "
                  "(head_dim 64 or 128, context a multiple of 64) with its deterministic backward, whose "
                  "workspace is counted (%.2f GiB; where it does not fit the flash kernels' deterministic "
                  "pass runs, with none; deterministic = false needs %.2f GiB)",
               e->attn_workspace_bytes / GIB,
               estimate_llmc_cudnn_workspace(t->model, t->micro_batch, t->context, false) / GIB);
    else if (e->attn_cudnn)
        assume(a, "attention = flash, deterministic = false: the trainer runs cuDNN's fused attention "
                  "(head_dim 64 or 128, context a multiple of 64); its workspace is counted for the backward "
                  "with fp32 atomics (%.2f GiB)", e->attn_workspace_bytes / GIB);
    else if (e->llmc_cuda_allocation && t->deterministic && t->attention == ATTN_FLASH &&
             estimate_llmc_cuda_cudnn(t->model, t->context))
        assume(a, "attention = flash, deterministic = true: cuDNN's deterministic workspace (%.2f GiB) does "
                  "not fit beside 2 GiB free; the flash kernels' deterministic pass runs (no workspace, a "
                  "slower backward: docs/cuda.md)",
               estimate_llmc_cudnn_workspace(t->model, t->micro_batch, t->context, true) / GIB);
    if (!e->llmc_cuda_allocation) assume(a, "allocator fragmentation: 5%% of all tensor bytes");
    if (e->sequences_from_shards)
        assume(a, "sequences per epoch: the rows `llmc-train prepare` packed into the shards (their index.json), "
                  "so the steps are the trainer's");
    switch (e->tokens_source) {
    case TOKENS_STATED:
        assume(a, "tokens per epoch as stated (or measured by prep) for every dataset");
        break;
    case TOKENS_FROM_STATS:
        assume(a, "tokens per epoch as `llmc-train prepare` counted them (FILE.stats.json beside the data)");
        break;
    case TOKENS_FROM_SIZE:
        assume(a, "tokens per epoch from %s at %.1f bytes/token (not measured; "
                  "llmc-train prepare measures it)",
               e->size_read_from_file ? "the file's size, read now" : "the stated file size",
               t->bytes_per_token > 0 ? t->bytes_per_token : 4.0);
        break;
    case TOKENS_FROM_SAMPLES:
        assume(a, "tokens per epoch = samples x context: an upper bound (no size or token count "
                  "stated); time is overestimated");
        break;
    case TOKENS_UNKNOWN:
        assume(a, "tokens per epoch unknown: a dataset states no tokens, size or samples");
        break;
    }
    if (t->recompute == RECOMPUTE_SELECTIVE && t->attention == ATTN_FLASH)
        assume(a, "recompute = selective with flash attention keeps what none keeps: "
                  "flash never stores the attention scores selective would drop");
    if (!t->packing && e->samples_unknown && e->tokens_source != TOKENS_UNKNOWN)
        assume(a, "sample count not stated: samples taken as context-long, so steps are a lower bound");
    if (!t->packing && e->padding_from_stats)
        assume(a, "batches pad to their longest sample: %.0f tokens per sequence computed at batch %d "
                  "(mean %.0f), from the stats file's length histogram", e->padded_seq_tokens, t->micro_batch,
               e->seq_tokens);
    else if (e->padding_full_rows)
        assume(a, "packing = false: `llmc-train prepare` pads every record to a row of %d tokens and the trainer "
                  "computes whole rows (mean sample %.0f tokens); packing = true computes what the samples hold",
               t->context, e->seq_tokens);
    else if (e->padding_assumed)
        assume(a, "batches pad to their longest sample: %.0f tokens per sequence computed at batch %d, from the "
                  "mean sample length (%.0f) with lengths assumed exponentially spread (standard deviation = mean) "
                  "and cut at the context; no length histogram (llmc-train prepare writes FILE.stats.json)",
               e->padded_seq_tokens, t->micro_batch, e->seq_tokens);
    else if (!t->packing && t->stage == STAGE_SFT)
        assume(a, "compute counts real tokens: padding to the longest sample of a batch is not counted "
                  "(no length histogram and no sample count; docs/estimator.md)");
    if (!e->cpu_only && e->data_parallel > 1 && e->fabric_known)
        assume(a, "collectives as rings over all %d GPUs: NCCL at %.0f%% of the GPU link and %.0f%% of the "
                  "network, %.0f/%.0f us per NVLink/network hop; fabric %s",
               e->world_size, 100 * link_eff(), 100 * net_eff(), 1.0, job->cluster->network_roce ? 5.0 : 3.0,
               job->cluster->link_default && job->cluster->network_default ? "from the GPU catalogue"
                                                                           : "as the cluster states it");
    else if (!e->cpu_only && e->data_parallel > 1)
        assume(a, "communication not estimated: the cluster states no gpu_link/network and the GPU has no "
                  "catalogue default; the time is compute only");
    if (t->backend == BACKEND_LLAMAFACTORY && t->method != METHOD_FULL && e->params_total > 0) {
        char tr[32];
        cli_fmt_count(tr, sizeof tr, e->trainable_params);
        assume(a, "method = %s: %s trainable parameters (%.2f%% of the model) with gradients and Adam states; the "
                  "rest frozen at %.2f bytes each, no weight gradients for frozen matrices (4N instead of 6N)",
               method_llm_names[t->method], tr,
               100 * e->trainable_params / (double)e->params_total, e->frozen_bytes_per_param);
    }
    if (e->offload_time_known && t->backend == BACKEND_LLMC)
        assume(a, "offload: fp32 master weights and Adam moments over each GPU's host link at %.0f%% of its one-way "
                  "figure (%s), both directions at once; AdamW on the GPU", 100 * default_of(DEF_HOST_LINK_EFFICIENCY),
               job->cluster->host_link_default ? "catalogue" : "as the cluster states it");
    else if (e->offload_time_known)
        assume(a, "offload: 16-bit copies over each GPU's host link at %.0f%% of its one-way figure (%s); DeepSpeed's "
                  "CPU Adam at %.2f G parameters/s per OpenMP thread, at most %.1f G/s per node; %d thread%s per "
                  "rank (%s)", 100 * default_of(DEF_HOST_LINK_EFFICIENCY),
               job->cluster->host_link_default ? "catalogue" : "as the cluster states it",
               default_of(DEF_CPU_ADAM_THREAD_RATE) / 1e9, default_of(DEF_CPU_ADAM_NODE_RATE) / 1e9,
               e->cpu_optimizer_threads, e->cpu_optimizer_threads == 1 ? "" : "s",
               job_sets_omp(job) ? "OMP_NUM_THREADS as the job's env sets it"
               : job->cluster->gpus_per_node > 1 ? "torchrun sets OMP_NUM_THREADS=1 when the env does not; "
                                                   "env { OMP_NUM_THREADS = N } raises it"
                                                 : "the rank's cores");
    else if (!e->cpu_only && t->offload != OFFLOAD_NONE && t->backend == BACKEND_LLAMAFACTORY)
        assume(a, "offload time not estimated: the cluster states no host_link and the GPU has no catalogue default");
    const PlanProfile *pf = job->profile;
    if (pf) {
        char runs[512] = "";
        size_t k = 0;
        for (int i = 0; i < pf->nfrom && k < sizeof runs; i++)
            k += (size_t)snprintf(runs + k, sizeof runs - k, "%s%s", i ? ", " : "", pf->from[i]);
        assume(a, "site profile '%s' (%s:%d), fitted from %s%s", pf->name, pf->at.start.file, pf->at.start.line,
               pf->nfrom ? "runs " : "no runs named", runs);
        if (e->profile_intra || e->profile_inter)
            assume(a, "collective bandwidth as profile '%s' measured:%s%s%s%s", pf->name,
                   e->profile_intra ? " inside a node " : "", e->profile_intra ? fmt_rate_gbs(pf->intra_bytes_per_s) : "",
                   e->profile_inter ? " between nodes " : "", e->profile_inter ? fmt_rate_gbs(pf->inter_bytes_per_s) : "");
        if (e->step_overhead_seconds > 0)
            assume(a, "%.3g ms per optimizer step beyond compute and communication, as profile '%s' measured "
                      "(optimizer step, data, logging)", e->step_overhead_seconds * 1e3, pf->name);
    }
    if (e->mix_scaled)
        assume(a, "mix_strategy = %s: samples per epoch as datasets' interleave_datasets draws them (with the "
                  "interleave_probs, or equal shares), stopping when %s dataset runs out",
               mix_llm_names[t->mix], t->mix == MIX_INTERLEAVE_UNDER ? "the first" : "the last");
    if (t->backend == BACKEND_LLAMAFACTORY && t->max_samples > 0)
        assume(a, "max_samples = %lld: each dataset cut to its first %lld samples", (long long)t->max_samples,
               (long long)t->max_samples);
    if (e->seqs_per_sample > 1)
        assume(a, "stage = %s: LLaMA-Factory's pairwise collator puts each pair's chosen and rejected sequence in one "
                  "micro batch: activations and logits at 2 x batch, two sequences per sample",
               stage_llm_names[t->stage]);
    if (t->stage == STAGE_KTO)
        assume(a, "stage = kto: one KL sequence per sample, run forward without gradient by the policy; the reference "
                  "runs forward over the target and KL sequences");
    if (e->reference == REF_COPY)
        assume(a, "reference model: a frozen 16-bit copy (create_ref_model), whole on every GPU unless shard = zero3 "
                  "(trl's prepare_deepspeed runs it with ZeRO off below stage 3); its ZeRO-3 gathers are not counted");
    else if (e->reference == REF_ADAPTERS_OFF)
        assume(a, "reference model: the policy with its LoRA adapters disabled (no ref_model): no second copy, one "
                  "more forward");
    else if (t->stage == STAGE_DPO)
        assume(a, "pref_loss = %s: no reference model (use_ref_model is false)",
               pref_loss_llm_names[t->pref_loss]);
    if (t->mfu > 0)
        assume(a, "mfu %.2f as the plan states%s", t->mfu, pf && pf->mfu > 0 ? " (over the profile's)" : "");
    else if (e->profile_mfu)
        assume(a, "mfu %.3f as profile '%s' measured", e->mfu, pf->name);
    else if (e->cpu_only)
        assume(a, "mfu %.2f: the CPU default; set `mfu` after measuring", e->mfu);
    else {
        const EstimateDefault *mr, *fr;
        estimate_default_mfu(job, &mr, &fr);
        char why[256];
        if (mr) snprintf(why, sizeof why, "%s default for %s (%s)", backend_llm_names[t->backend],
                         job->cluster->gpu->name, mr->label);
        else snprintf(why, sizeof why, "the catalogue default for %s", job->cluster->gpu->name);
        assume(a, "mfu %.2f: %s%s%s%s; docs/estimator.md \"Defaults from published measurements\"; set `mfu` or "
                  "fit a profile (llmc calibrate) after measuring", e->mfu, why, fr ? ", x " : "",
               fr ? method_llm_names[t->method] : "", fr ? "'s factor" : "");
    }
    if (!e->cpu_only && e->steps_total > 0)
        assume(a, "start-up: LLaMA-Factory tokenises at %s tokens/s per worker%s, models load at 0.5 GB/s per node, "
                  "checkpoints write at 1 GB/s and read back at 1 GB/s per node: stated defaults, not measured",
               t->tokenize_rate > 0 ? "the plan's" : "100K", t->tokenize_rate > 0 ? "" : " (tokenize_rate)");
    assume(a, "not counted: evaluation, queueing%s", !e->cpu_only && e->steps_total > 0 ? "" : ", model loading, checkpoint writes and restarts");
}

/* ---- human output ---- */

/* Decimal TB / GB / MB, for traffic and files. */
static void gb(char *buf, size_t n, double bytes)
{
    if (bytes >= 1e12) snprintf(buf, n, "%.2f TB", bytes / 1e12);
    else if (bytes >= 1e9) snprintf(buf, n, "%.1f GB", bytes / 1e9);
    else snprintf(buf, n, "%.1f MB", bytes / 1e6);
}

/* DeepSpeed offload's part of the step: the host-link copies and the CPU
 * Adam step (docs/estimator.md, "Offload time"). */
static void print_offload(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    char a[64], b[64], d[64];
    if (t->offload == OFFLOAD_NONE || e->cpu_only) return;
    /* host_link is quoted for both directions together (plan.h): "/ 2e9" below is one way, in GB/s */
    if (!e->offload_time_known) {
        row(tb, 0, "offload", "unknown", "the cluster states no host_link and %s has no default", c->gpu->name);
        return;
    }
    /* three layouts, three sets of copies: the llmc trainer's pinned ZeRO shard updated in place, its whole
     * update streamed through the GPU, and DeepSpeed's CPU Adam */
    if (t->backend == BACKEND_LLMC && estimate_llmc_offload_shard(t, e)) {   /* the pinned shard, in place */
        cli_fmt_duration(a, sizeof a, e->offload_pcie_seconds);
        gb(b, sizeof b, e->offload_h2d_bytes);
        gb(d, sizeof d, e->offload_d2h_bytes);
        row(tb, 0, "offload copies (host link)", a, "%s up, %s down per GPU per step (its shard: the summed gradient, "
            "master, m, v) at %.0f%% of %.0f GB/s one way%s", b, d, 100 * default_of(DEF_HOST_LINK_EFFICIENCY),
            c->host_link_bytes_per_s / 2e9, c->host_link_default ? " (catalogue)" : "");
        cli_fmt_duration(a, sizeof a, e->offload_exposed_seconds);
        row(tb, 1, "exposed", a, "the norm and AdamW reading the pinned shard in place; each micro-step's gradient "
            "goes down behind backward");
        return;
    }
    if (t->backend == BACKEND_LLMC) {   /* llmc-train-cuda: the update streamed through the GPU */
        cli_fmt_duration(a, sizeof a, e->offload_pcie_seconds);
        gb(b, sizeof b, e->offload_h2d_bytes);
        row(tb, 0, "offload copies (host link)", a, "%s of fp32 master + Adam m, v up and the same back per step at "
            "%.0f%% of %.0f GB/s one way%s", b, 100 * default_of(DEF_HOST_LINK_EFFICIENCY), c->host_link_bytes_per_s / 2e9,
            c->host_link_default ? " (catalogue)" : "");
        cli_fmt_duration(a, sizeof a, e->offload_exposed_seconds);
        row(tb, 1, "exposed", a, "the uploads and the AdamW update on the GPU; the downloads overlap them and "
            "the next forward pass");
        return;
    }
    cli_fmt_duration(a, sizeof a, e->offload_pcie_seconds);
    gb(b, sizeof b, e->offload_d2h_bytes);
    gb(d, sizeof d, e->offload_h2d_bytes);
    row(tb, 0, "offload copies (host link)", a, "%s gradients down, %s weights up per GPU at %.0f%% of %.0f GB/s one "
        "way%s", b, d, 100 * default_of(DEF_HOST_LINK_EFFICIENCY), c->host_link_bytes_per_s / 2e9, c->host_link_default ? " (catalogue)" : "");
    cli_fmt_duration(a, sizeof a, e->offload_pcie_exposed_seconds);
    row(tb, 1, "exposed", a, "%s", t->offload == OFFLOAD_ALL ? "weight fetches prefetched with the gathers (hidden "
                                                              "under compute as far as it lasts); gradients wait"
                                                            : "gradients wait with the reduce-scatter, weights "
                                                              "after the CPU step");
    cli_fmt_duration(a, sizeof a, e->cpu_optimizer_seconds);
    cli_fmt_count(b, sizeof b, e->cpu_optimizer_params);
    cli_fmt_count(d, sizeof d, e->cpu_optimizer_params_per_s);
    row(tb, 0, "CPU optimizer (DeepSpeed Adam)", a, "%s parameters per rank at %s/s (%d thread%s per rank)", b, d,
        e->cpu_optimizer_threads, e->cpu_optimizer_threads == 1 ? "" : "s");
    cli_fmt_duration(a, sizeof a, e->offload_exposed_seconds);
    row(tb, 0, "exposed offload", a, "the GPU waits for the CPU step and the copies around it");
}

/* The step is bound by offload: its exposed part exceeds compute and the collectives. */
static void print_offload_bound(Table *tb, const PlanJob *job, const Estimate *e)
{
    /* The advice follows the binding term: the CPU step (threads, unless the
     * node's share caps the rate already) or the host-link copies. */
    double ratio = e->compute_seconds > 0 ? e->offload_exposed_seconds / e->compute_seconds : 0;
    bool cpu = e->cpu_optimizer_seconds >= e->offload_pcie_exposed_seconds;
    int per_node = job->cluster->gpus_per_node > 0 ? job->cluster->gpus_per_node : 1;
    bool capped = e->cpu_optimizer_threads > 0 &&
                  estimate_cpu_adam_rate(e->cpu_optimizer_threads + 1, per_node) <= e->cpu_optimizer_params_per_s;
    if (!cpu)
        row(tb, 0, "bound by", "offload", "offload %.1fx compute, mostly the host-link copies: a larger batch per GPU "
            "amortises them (they do not grow with it)", ratio);
    else if (capped)
        row(tb, 0, "bound by", "offload", "offload %.1fx compute, mostly the CPU Adam step, at the node's cap (more "
            "OpenMP threads do not help): a larger batch per GPU amortises it, more nodes shrink each rank's part",
            ratio);
    else
        row(tb, 0, "bound by", "offload", "offload %.1fx compute, mostly the CPU Adam step: more OpenMP threads "
            "(env { OMP_NUM_THREADS = N }) or a larger batch per GPU amortise it", ratio);
}

/* A communication-bound step: each remedy estimated with the plan's other
 * settings (estimate_comm_remedies; llmc check prints the same as help). */
static void print_comm_remedies(Table *tb, const PlanJob *job, const Estimate *e)
{
    CommRemedy r[3];
    int n = estimate_comm_remedies(job, e, r);
    for (int i = 0; i < n; i++) {
        char label[64], a[64], b[64];
        if (r[i].kind == REMEDY_BATCH && r[i].grad_accum != (job->run->grad_accum > 0 ? job->run->grad_accum : 1))
            snprintf(label, sizeof label, "with batch %d x accumulation %d", r[i].micro_batch, r[i].grad_accum);
        else if (r[i].kind == REMEDY_BATCH)
            snprintf(label, sizeof label, "with batch = %d per gpu", r[i].micro_batch);
        else if (r[i].kind == REMEDY_ZERO2)
            snprintf(label, sizeof label, "with shard = zero2");
        else
            snprintf(label, sizeof label, "with zero_hpz_partition_size %d", r[i].hpz_group);
        if (!r[i].fits) {
            row(tb, 0, label, "", "does not fit: %.1f GiB of %.1f GiB usable per GPU", r[i].total_bytes / GIB,
                e->usable_bytes / GIB);
            continue;
        }
        cli_fmt_duration(a, sizeof a, r[i].step_seconds);
        cli_fmt_count(b, sizeof b, r[i].tokens_per_second_per_gpu);
        row(tb, 0, label, a, "step time; %s tokens/s per GPU (%.2fx this plan's)%s", b, r[i].speedup,
            r[i].kind == REMEDY_HPZ ? "; DeepSpeed JSON key, not emitted yet" : "");
    }
}

/* One optimizer step: compute beside each kind of communication, what
 * overlaps, and what bounds the step (docs/estimator.md, "Communication");
 * then offload's copies and CPU step. Nothing for a CPU job or one the
 * estimate could not time. */
static void print_step(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    char a[64], b[64], d[64], x[64];
    if (e->cpu_only || e->step_seconds <= 0) return;
    section(tb, "one optimizer step");
    cli_fmt_duration(a, sizeof a, e->compute_seconds);
    /* tokens computed per step: padded ones count, and a preference pair is two sequences */
    cli_fmt_count(b, sizeof b, (double)e->global_batch * (e->seqs_per_sample > 1 ? e->seqs_per_sample : 1) * e->padded_seq_tokens);
    row(tb, 0, "compute", a, "%s tokens%s x %.3g FLOPs / (%d x %.0f TFLOP/s x mfu %.2f)", b,
        e->padded_seq_tokens > e->seq_tokens ? " (padded)" : "", e->flops_per_token, e->world_size,
        e->peak_flops_per_device / 1e12, e->mfu);
    /* no collectives to break down: one GPU, or no bandwidth known to time them */
    if (e->data_parallel <= 1 || !e->fabric_known) {
        if (e->data_parallel <= 1) row(tb, 0, "communication", "none", "one GPU");
        else row(tb, 0, "communication", "unknown", "the cluster states no gpu_link / network and %s has no default",
                 c->gpu->name);
        print_offload(tb, job, e);
        if (e->offload_bound) print_offload_bound(tb, job, e);
        return;
    }
    cli_fmt_duration(a, sizeof a, e->comm_seconds);
    char kinds[192] = "";
    size_t k = 0;
    /* only the collectives this sharding runs (gathers of weights, reduce-scatters or all-reduces of
     * gradients), each with its bytes */
    if (e->comm_allgather_bytes > 0) { gb(b, sizeof b, e->comm_allgather_bytes); k += (size_t)snprintf(kinds + k, sizeof kinds - k, "all-gather %s, ", b); }
    if (e->comm_reduce_scatter_bytes > 0 && k < sizeof kinds) { gb(d, sizeof d, e->comm_reduce_scatter_bytes); k += (size_t)snprintf(kinds + k, sizeof kinds - k, "reduce-scatter %s, ", d); }
    if (e->comm_allreduce_bytes > 0 && k < sizeof kinds) { gb(x, sizeof x, e->comm_allreduce_bytes); k += (size_t)snprintf(kinds + k, sizeof kinds - k, "all-reduce %s, ", x); }
    row(tb, 0, "communication", a, "%s%.0f collectives", kinds, e->comm_collectives);
    gb(b, sizeof b, e->comm_sent_bytes);
    cli_fmt_duration(a, sizeof a, e->comm_intra_seconds);
    if (e->profile_intra)
        row(tb, 1, "intra-node (GPU link)", a, "%s sent per GPU at %s one way (profile '%s')", b,
            fmt_rate_gbs(job->profile->intra_bytes_per_s), job->profile->name);
    else
        row(tb, 1, "intra-node (GPU link)", a, "%s sent per GPU at %.0f%% of %.0f GB/s one way%s", b,
            100 * link_eff(), c->link_bytes_per_s / 2e9, c->link_default ? " (catalogue)" : "");
    cli_fmt_duration(a, sizeof a, e->comm_inter_seconds);
    if (job->nodes > 1 && e->profile_inter)
        row(tb, 1, "inter-node (network)", a, "%s per node at %s (profile '%s')", b,
            fmt_rate_gbs(job->profile->inter_bytes_per_s), job->profile->name);
    else if (job->nodes > 1)
        row(tb, 1, "inter-node (network)", a, "%s per node at %.0f%% of %d x %.0f Gb/s%s%s", b, 100 * net_eff(), c->nics,
            c->nic_bits_per_s / 1e9, c->network_roce ? " RoCE" : "", c->network_default ? " (catalogue)" : "");
    else
        row(tb, 1, "inter-node (network)", a, "one node");
    cli_fmt_duration(a, sizeof a, e->comm_latency_seconds);
    row(tb, 1, "latency", a, "%.0f collectives x ring of %d hops + launch", e->comm_collectives, e->world_size);
    cli_fmt_duration(a, sizeof a, e->comm_overlap_seconds);
    const char *how = t->backend == BACKEND_LLMC
                          ? (t->shard == SHARD_ZERO3 ? "per-layer reduce on the comm stream during backward; "
                                                       "the next layer gathered while this one computes"
                             : t->shard == SHARD_ZERO2 ? "per-layer reduce on the comm stream during backward; "
                                                         "the all-gather after AdamW exposed"
                             : t->shard >= SHARD_ZERO1 ? "none: reduce-scatter and all-gather around AdamW"
                                                       : "per-layer all-reduce on the comm stream during backward")
                          : t->shard == SHARD_ZERO3 ? "ZeRO-3 prefetch under forward and backward; overlap_comm off"
                                                    : "none: overlap_comm off as emitted";
    row(tb, 0, "overlapped with compute", a, "%s", how);
    cli_fmt_duration(a, sizeof a, e->comm_exposed_seconds);
    row(tb, 0, "exposed communication", a, NULL);
    print_offload(tb, job, e);
    const char *term = e->comm_latency_seconds > fmax(e->comm_intra_seconds, e->comm_inter_seconds) ? "latency"
                       : e->comm_inter_seconds > e->comm_intra_seconds ? "network bandwidth" : "GPU-link bandwidth";
    cli_fmt_duration(a, sizeof a, e->step_seconds);
    /* The same plan at other batches per GPU: ZeRO-3's collectives do not
     * shrink with the batch, so a small batch is communication-bound. */
    if (e->max_micro_batch_that_fits > 0) {
        char sweep[256] = "";
        size_t used = 0;
        PlanTrain tr = *t;
        PlanJob jb = *job;
        jb.run = &tr;
        for (int mb = 1; mb <= e->max_micro_batch_that_fits && mb <= 64 && used + 40 < sizeof sweep; mb *= 2) {
            Estimate at;
            Diags *dd = diags_new();
            tr.micro_batch = mb;
            estimate_job(&jb, &at, dd);
            diags_free(dd);
            cli_fmt_count(b, sizeof b, at.tokens_per_second / (at.world_size > 0 ? at.world_size : 1));
            used += (size_t)snprintf(sweep + used, sizeof sweep - used, "%s%d: %s%s", used ? ", " : "", mb, b,
                                     at.offload_bound ? " (offload)" : at.comm_bound ? " (comm)" : "");
        }
        row(tb, 0, "tokens/s per GPU by batch", "", "%s", sweep);
    }
    if (e->offload_bound)
        print_offload_bound(tb, job, e);
    else if (e->comm_bound) {
        row(tb, 0, "bound by", "comm", "communication (%s) %.1fx compute; a larger batch per GPU amortises it",
            term, e->compute_seconds > 0 ? e->comm_seconds / e->compute_seconds : 0);
        print_comm_remedies(tb, job, e);
    } else
        row(tb, 0, "bound by", "compute", "communication is %.0f%% of compute (mostly %s)",
            e->compute_seconds > 0 ? 100 * e->comm_seconds / e->compute_seconds : 0, term);
}

/* The job's first lines: run, cluster, ranks, and the model's parameters. */
static void print_job_header(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanModel *m = t->model;
    const PlanCluster *c = job->cluster;
    char a[64], b[64], d[64];
    fprintf(tb->out, "%sjob %s%s: run %s on cluster %s\n", tb->colour ? "\033[1m" : "", job->name,
            tb->colour ? "\033[0m" : "", t->name, c->name);
    if (e->cpu_only)
        fprintf(tb->out, "  %d node%s, CPU only, %d rank%s\n", job->nodes, job->nodes == 1 ? "" : "s",
                e->world_size, e->world_size == 1 ? "" : "s");
    else
        fprintf(tb->out, "  %d node%s x %d %s = %d GPUs, data parallel %d, shard %s\n", job->nodes,
                job->nodes == 1 ? "" : "s", c->gpus_per_node, c->gpu->name, e->world_size,
                e->data_parallel, shard_name(t->shard));
    fmt_int(a, sizeof a, (double)e->params_total);
    fmt_int(b, sizeof b, (double)e->params_per_layer);
    fmt_int(d, sizeof d, (double)e->params_embedding);
    fprintf(tb->out, "  model %s (%s): %s parameters; %d layers of %s, embedding%s %s\n", m->name,
            arch_name(m->arch), a, m->layers, b, m->tie_embeddings ? " (tied)" : " + lm_head", d);
}

/* "largest batch that fits", then the total at powers of two up to the
 * first batch that does not fit. */
static void print_batch_sweep(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    char a[64];
    if (e->max_micro_batch_that_fits >= 0) {
        snprintf(a, sizeof a, "%d", e->max_micro_batch_that_fits);
        row(tb, 0, "largest batch that fits", a, "per %s, same settings", e->cpu_only ? "rank" : "gpu");
        /* The total at powers of two up to the first that does not fit. */
        char sweep[256] = "";
        size_t used = 0;
        /* doubling until the first batch that does not fit (or the line is full): each point a fresh estimate */
        for (int mb = 1; mb <= (1 << 20) && used + 32 < sizeof sweep; mb *= 2) {
            Estimate at;
            memset(&at, 0, sizeof at);
            estimate_memory(job, mb, t->recompute, t->shard, &at);
            used += (size_t)snprintf(sweep + used, sizeof sweep - used, "%s%d: %.1f", used ? ", " : "",
                                     mb, at.total_bytes / GIB);
            if (!at.fits) break;
        }
        row(tb, 1, "by batch", "GiB", "%s", sweep);
    }
}

/* Memory per GPU (per node on CPUs): every term of the estimate with what
 * it counts, the total against what is usable, and the batch sweep. */
static void print_device_memory(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanModel *m = t->model;
    const char *dev = e->cpu_only ? "node" : "GPU";
    char a[64];
    char title[128];
    if (e->usable_bytes > 0)
        snprintf(title, sizeof title, "memory per %s (%.1f GiB usable)", dev, e->usable_bytes / GIB);
    else
        snprintf(title, sizeof title, "memory per %s (no memory stated to compare with)", dev);
    section(tb, title);
    /* the CPU backend trains in fp32 whatever the plan's precision */
    Precision prec = e->cpu_only ? PREC_FP32 : t->precision;
    const char *pn = value_dtype_name(prec);
    char over[64] = "";
    if (e->data_parallel > 1) snprintf(over, sizeof over, ", sharded over %d", e->data_parallel);
    /* The llmc CUDA trainer: ZeRO-2/3 for full training (its fine-tuning
     * replicates the small trained state), plus its unit buffers. */
    bool llmc = e->llmc_cuda_allocation;
    /* the detail of each row says what is sharded: ZeRO splits weights (3), gradients (2+) and states (1+) */
    bool llmc_zero = llmc && t->method == METHOD_FULL;
    const char *units = llmc_zero && e->data_parallel > 1 ? " + gathered layers" : "";
    gib_row(tb, 0, "weights", e->weights_bytes, "%s%s%s", pn, t->shard >= SHARD_ZERO3 && (!llmc || llmc_zero) ? over : "",
            t->shard >= SHARD_ZERO3 && llmc_zero ? units : "");
    bool shard_on_host = llmc_zero && t->offload == OFFLOAD_OPTIMIZER && e->data_parallel > 1;
    gib_row(tb, 0, "gradients", e->grads_bytes, "%s%s%s", llmc ? "fp32" : pn,
            t->shard >= SHARD_ZERO2 && (!llmc || llmc_zero) && !shard_on_host ? over : "",
            shard_on_host ? " layer buckets (the shard's sum in host memory)"
            : t->shard >= SHARD_ZERO2 && llmc_zero && e->data_parallel > 1 ? " + layer buckets" : "");
    if (llmc && t->offload == OFFLOAD_OPTIMIZER && llmc_zero && e->data_parallel > 1)
        gib_row(tb, 0, "optimizer states", e->optimizer_bytes, "none: the shard's states and summed gradient are in "
                "pinned host memory, updated in place over the host link");
    else if (llmc && t->offload == OFFLOAD_OPTIMIZER)
        gib_row(tb, 0, "optimizer states", e->optimizer_bytes, "staging of the offloaded update (3 sets of master, "
                "m, v chunks); the states are in host memory");
    else
        gib_row(tb, 0, "optimizer states", e->optimizer_bytes, "%s%s%s%s",
                t->backend == BACKEND_LLAMAFACTORY && t->optim_at.start.file ? optim_llm_names[t->optim] : "",
                t->backend == BACKEND_LLAMAFACTORY && t->optim_at.start.file ? ": " : "",
                t->backend == BACKEND_LLAMAFACTORY && t->optim_at.start.file ? optim_states_text(t->optim, prec)
                : llmc ? llmc_states_text(t) : optimizer_states_name(prec),
                t->shard >= SHARD_ZERO1 ? over : "");
    if (e->seqs_per_sample > 1)
        gib_row(tb, 0, "activations", e->activations_bytes,
                "batch %d x 2 sequences (chosen + rejected) x context %d, recompute=%s, attention=%s",
                t->micro_batch, t->context, recompute_name(t->recompute), estimate_attention_name(t, e));
    else
        gib_row(tb, 0, "activations", e->activations_bytes, "batch %d x context %d, recompute=%s, attention=%s",
                t->micro_batch, t->context, recompute_name(t->recompute), estimate_attention_name(t, e));
    snprintf(a, sizeof a, "kept for %d layers", m->layers);
    gib_row(tb, 1, a, e->activations_layers_bytes, "%s",
            t->recompute == RECOMPUTE_FULL ? "each layer's input only" : "everything backward needs");
    if (e->llmc_cuda_allocation)
        gib_row(tb, 1, "scratch", e->activations_working_bytes, "%s",
                t->recompute == RECOMPUTE_FULL ? "one layer's set, reused + forward/backward scratch"
                                               : "forward/backward scratch");
    else
        gib_row(tb, 1, "layer in backward", e->activations_working_bytes, "%s",
                t->recompute == RECOMPUTE_FULL ? "one layer recomputed + its gradient buffers"
                                               : "gradient buffers of the layer in flight");
    /* the rest of the activations, in neither the layers nor the scratch: the last norm's and lm_head's input */
    double head_in = e->activations_bytes - e->activations_layers_bytes - e->activations_working_bytes;
    if (head_in > 0) gib_row(tb, 1, "final norm and lm_head input", head_in, NULL);
    if (e->fp8_weights_bytes > 0) {
        gib_row(tb, 0, "FP8 weight copies", e->fp8_weights_bytes, "E4M3 projection%s weights and their "
                "transposes, 1 + 1 bytes per parameter", t->backend == BACKEND_LLMC && t->fp8_lm_head
                                                             ? " and LM head" : "");
        gib_row(tb, 0, "FP8 scratch and scales", e->fp8_scratch_bytes, "the widest E4M3 input, and the widest E5M2 "
                "output gradient and its transpose, for batch %d x context %d; %sfp32 per-tensor scales", t->micro_batch,
                t->context, estimate_llmc_fp8_keeps_transposes(t, t->recompute)
                                 ? "each trained layer's inputs transposed in E4M3 for its weight gradients; " : "");
    }
    if (e->attn_cudnn)
        gib_row(tb, 0, "attention workspace", e->attn_workspace_bytes,
                e->attn_cudnn_deterministic ? "cuDNN fused attention, deterministic backward"
                                            : "cuDNN fused attention, backward with fp32 atomics");
    /* the llmc trainer computes the loss a chunk of rows at a time, so only that chunk's logits exist */
    if (e->logits_chunked)
        gib_row(tb, 0, "logits and their gradient", e->logits_bytes,
                "%.0f bytes x %.0f rows at a time x vocab %d, gradient in place",
                e->logits_bytes_per_value, e->logits_chunk_rows, m->vocab);
    else
        gib_row(tb, 0, "logits and their gradient", e->logits_bytes,
                "%.0f bytes x batch%s x context x vocab %d, not chunked", e->logits_bytes_per_value,
                e->seqs_per_sample > 1 ? " x 2 sequences" : "", m->vocab);
    if (e->reference == REF_COPY) {
        char n[32];
        cli_fmt_count(n, sizeof n, e->reference_params);
        gib_row(tb, 0, "reference model", e->reference_bytes, "%s frozen %s copy of %s%s", n, pn,
                t->ref_model ? t->ref_model->name : m->name,
                t->shard == SHARD_ZERO3 && e->data_parallel > 1 ? ", sharded (ZeRO-3)" : ", whole on every GPU (ZeRO off for it)");
    } else if (e->reference == REF_ADAPTERS_OFF) {
        gib_row(tb, 0, "reference model", 0, "none: the base with the LoRA adapters disabled");
    }
    if (e->reference_logits_bytes > 0)
        gib_row(tb, 0, "no-gradient forward logits", e->reference_logits_bytes, "%.0f bytes x %d sequences x context x "
                "vocab %d (%s)", 4 + (prec == PREC_FP32 ? 4.0 : 2.0), 2 * t->micro_batch, m->vocab,
                t->stage == STAGE_KTO ? "reference target logits kept while the KL forward runs"
                                      : "the reference forward over chosen + rejected");
    if (!e->cpu_only)
        gib_row(tb, 0, "communication buffers", e->comm_bytes, "%s",
                llmc ? "collectives in place on the flat buffers"
                : t->shard == SHARD_ZERO3 ? "largest matrix gathered + its gradient, prefetch, reduce bucket"
                : t->shard == SHARD_NONE || e->data_parallel <= 1 ? "all-reduce in place"
                                                                  : "reduce and allgather buckets");
    if (e->cpu_only)
        gib_row(tb, 0, "process overhead", e->reserve_context_bytes,
                "binary, libraries, stacks + OpenBLAS's buffer per thread");
    else
        gib_row(tb, 0, "CUDA context, workspaces", e->reserve_context_bytes, NULL);
    if (e->llmc_cuda_allocation)
        gib_row(tb, 0, "allocator fragmentation", 0, "none: allocated once, up front");
    else
        gib_row(tb, 0, "allocator fragmentation", e->reserve_fragmentation_bytes, "5%% of tensors");
    if (e->usable_bytes > 0)
        gib_row(tb, 0, "total", e->total_bytes, "%.0f%% of %.1f GiB usable: %s",
                100.0 * e->total_bytes / e->usable_bytes, e->usable_bytes / GIB,
                e->fits ? "fits" : "DOES NOT FIT");
    else
        gib_row(tb, 0, "total", e->total_bytes, NULL);
    print_batch_sweep(tb, job, e);
}

/* Host memory per node (GPU clusters): the trainer processes, model
 * loading, data workers, pinned buffers and offloaded states. */
static void print_host_memory(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    char title[128];
    if (e->host_usable_bytes > 0)
        snprintf(title, sizeof title, "host memory per node (%.1f GiB %s)", e->host_usable_bytes / GIB,
                 job->mem_bytes ? "the job's mem" : "the node has");
    else
        snprintf(title, sizeof title, "host memory per node (no memory stated to compare with)");
    section(tb, title);
    /* the two trainers hold different things on the host: each line says which for this plan's */
    bool lf = t->backend == BACKEND_LLAMAFACTORY;
    gib_row(tb, 0, "trainer processes", e->host_process_bytes, "%d x %s", c->gpus_per_node,
            lf ? "PyTorch + CUDA + NCCL host side" : "llmc-train-cuda host side");
    /* how the weights reach the GPUs decides this term: whole on each rank, a part per rank, or the offload */
    gib_row(tb, 0, "model loading", e->host_model_bytes, "%s",
            lf ? (t->shard == SHARD_ZERO3 ? "one checkpoint file per rank at a time (zero.Init)"
                                          : "every rank builds the 16-bit model on the host")
               : estimate_llmc_sharded(t, e) && t->offload == OFFLOAD_OPTIMIZER ? (t->model->from_scratch
                   ? "each rank its part of weights, m, v (no staging: the pinned shard); the random init whole"
                   : "each rank its part of weights, m, v (no staging: the pinned shard; ZeRO-3: no gather)")
               : estimate_llmc_sharded(t, e) ? (t->model->from_scratch
                   ? "each rank its part of weights, m, v and their GPU-layout staging; the random init whole"
                   : "each rank its part of weights, m, v and their GPU-layout staging (ZeRO-3: no gather)")
               : t->offload == OFFLOAD_OPTIMIZER && e->data_parallel <= 1
                   ? "none beyond the offloaded states (they are the host model)"
               : "fp32 weights and their GPU-layout copy per rank + rank 0's checkpoint gather (master, m, v)");
    gib_row(tb, 0, "data and workers", e->host_data_bytes, "%s",
            lf ? "tokenizing workers (the tokenized set is memory-mapped)" : "shards memory-mapped (page cache)");
    gib_row(tb, 0, "pinned buffers", e->host_pinned_bytes, NULL);
    if (t->offload == OFFLOAD_NONE)
        gib_row(tb, 0, "offloaded states", e->host_offload_bytes, "no offload in this plan");
    else if (!lf && e->data_parallel > 1)
        gib_row(tb, 0, "offloaded states", e->host_offload_bytes, "%d x this rank's shard of fp32 master + Adam m + v "
                "+ the summed fp32 gradient, pinned", c->gpus_per_node);
    else if (!lf)
        gib_row(tb, 0, "offloaded states", e->host_offload_bytes, "fp32 master + Adam m + v, pinned (the "
                "training loop's own model and optimizer)");
    else
        gib_row(tb, 0, "offloaded states", e->host_offload_bytes, "%d x %s, pinned", c->gpus_per_node,
                t->offload == OFFLOAD_ALL ? "fp32 master + Adam m + v + fp32 gradients + 16-bit weights per rank"
                                          : "fp32 master + Adam m + v + fp32 gradients per rank");
    if (e->host_usable_bytes > 0)
        gib_row(tb, 0, "total", e->host_bytes, "%.0f%% of %.1f GiB: %s", 100.0 * e->host_bytes / e->host_usable_bytes,
                e->host_usable_bytes / GIB, e->host_fits ? "fits" : "DOES NOT FIT");
    else
        gib_row(tb, 0, "total", e->host_bytes, NULL);
}

/* Time: tokens, sequences and steps, FLOPs, throughput, step time, the
 * total and the time-limit segments. */
static void print_time(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    char a[64], b[64];
    section(tb, "time");
    cli_fmt_count(a, sizeof a, e->tokens_per_epoch);
    row(tb, 0, "tokens per epoch", e->tokens_source == TOKENS_UNKNOWN ? "unknown" : a, "%s",
        estimate_token_source_name(e->tokens_source));
    fmt_int(a, sizeof a, e->sequences_per_epoch);
    row(tb, 0, "sequences per epoch", a, "%s",
        e->sequences_from_shards ? "rows of the prepared shards (index.json)"
        : t->packing             ? "packed to the context"
        : e->seqs_per_sample > 1 ? "two per sample (chosen + rejected)"
                                 : "one per sample");
    snprintf(a, sizeof a, "%.1f", e->seq_tokens);
    row(tb, 0, "tokens per sequence", a, "mean");
    fmt_int(a, sizeof a, (double)e->global_batch);
    row(tb, 0, "global batch", a, "%d per %s x %d accumulation x %d%s", t->micro_batch,
        e->cpu_only ? "rank" : "gpu", t->grad_accum > 0 ? t->grad_accum : 1, e->data_parallel,
        e->seqs_per_sample > 1 ? " (pairs)" : "");
    fmt_int(a, sizeof a, (double)e->steps_total);
    if (t->max_steps > 0) row(tb, 0, "steps", a, "max_steps");
    else row(tb, 0, "steps", a, "%g epochs", t->epochs);
    cli_fmt_count(a, sizeof a, e->tokens_total);
    row(tb, 0, "tokens to train", a, NULL);
    snprintf(a, sizeof a, "%.3g", e->flops_per_token);
    /* 6N: forward 2N, backward 4N (input and weight gradients); a frozen weight has no weight gradient: 4N */
    bool frozen = t->method == METHOD_LORA || t->method == METHOD_QLORA || t->method == METHOD_FREEZE;
    row(tb, 0, "FLOPs per token", a, "%s + attention%s%s",
        frozen ? "6N trained + 4N frozen" : "6N",
        t->recompute == RECOMPUTE_FULL ? " + forward again (recompute=full)"
        : t->recompute == RECOMPUTE_SELECTIVE && t->attention == ATTN_EAGER ? " + attention again" : "",
        t->stage == STAGE_KTO ? " + 3 forwards without gradient (KL, reference over target and KL)"
        : e->nograd_seqs_per_sample > 0 ? " + the reference forward" : "");
    cli_fmt_count(a, sizeof a, e->tokens_per_second);
    /* a GPU's peak in TFLOP/s, a CPU core's in GFLOP/s */
    if (e->peak_flops_per_device >= 1e12)
        row(tb, 0, "tokens per second", a, "%d x %.1f TFLOP/s peak x mfu %.2f%s", e->world_size,
            e->peak_flops_per_device / 1e12, e->mfu,
            e->offload_exposed_seconds > 0 ? ", with the exposed communication and offload"
            : e->comm_exposed_seconds > 0  ? ", with the exposed communication" : "");
    else
        row(tb, 0, "tokens per second", a, "%d x %.0f GFLOP/s peak x mfu %.2f", e->world_size,
            e->peak_flops_per_device / 1e9, e->mfu);
    cli_fmt_duration(a, sizeof a, e->step_seconds);
    row(tb, 0, "step time", a, "%s",
        e->offload_exposed_seconds > 0 ? "compute + exposed communication + exposed offload (below)"
        : e->comm_exposed_seconds > 0  ? "compute + exposed communication (below)"
                                       : "compute");
    cli_fmt_duration(a, sizeof a, e->total_seconds);
    row(tb, 0, "time to train", a, NULL);
    snprintf(a, sizeof a, "%.1f", e->gpu_hours);
    row(tb, 0, e->cpu_only ? "node-hours" : "GPU-hours", a, NULL);
    if (e->time_limit_seconds > 0) {
        cli_fmt_duration(a, sizeof a, e->time_limit_seconds);
        snprintf(b, sizeof b, "%d", e->requeue_segments);
        row(tb, 0, "time-limit segments", b, "of %s%s", a,
            e->requeue_segments <= 1 ? "" : job->requeue ? ", requeued from checkpoints"
                                                           : ": requeue is off");
    }
}

/* Start-up and checkpoints (docs/estimator.md, "Start-up and checkpoints"):
 * tokenisation against the barrier, model load, each save's size and write
 * time, what save_total_limit keeps, and the wall time over all segments. */
static void print_startup(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanTrain *t = job->run;
    char a[64], b[64], d[64];
    section(tb, "start-up and checkpoints");
    /* LLaMA-Factory tokenises at start-up (the llmc trainer reads prepared shards): the ranks wait at a
     * barrier meanwhile, which ddp_timeout must outlast */
    if (e->tokenize_seconds > 0) {
        cli_fmt_duration(a, sizeof a, e->tokenize_seconds);
        cli_fmt_count(b, sizeof b, e->tokenize_tokens);
        cli_fmt_count(d, sizeof d, e->tokenize_rate);
        row(tb, 0, "tokenisation", a, "%s tokens, %d workers x %s tokens/s%s", b, e->tokenize_workers, d,
            e->tokenize_every_start ? ", at every start (no tokenized_path)" : ", first start only (tokenized_path)");
        cli_fmt_duration(a, sizeof a, e->ddp_timeout_seconds);
        row(tb, 1, "ddp_timeout", a, "%s", e->ddp_timeout_raised ? "raised to 2 x tokenisation + 10 min"
                                          : "the ranks' barrier while one node tokenises");
    } else if (t->backend == BACKEND_LLAMAFACTORY) {
        row(tb, 0, "tokenisation", t->streaming ? "streamed" : "unknown", "%s",
            t->streaming ? "tokenised on the fly" : "no token count to estimate it from");
    } else {
        row(tb, 0, "tokenisation", "before", "llmc-train prepare writes the shards before the job");
    }
    cli_fmt_duration(a, sizeof a, e->load_seconds);
    gb(b, sizeof b, e->load_bytes);
    row(tb, 0, "model load", a, "%s of 16-bit weights%s at 0.5 GB/s per node", b,
        e->reference == REF_COPY ? " (with the reference model)"
        : estimate_llmc_sharded(t, e) && e->load_bytes > 0 ? " (this node's ranks' parts)" : "");
    gb(a, sizeof a, e->checkpoint_bytes);
    gb(b, sizeof b, e->checkpoint_export_bytes);
    row(tb, 0, "checkpoint size", a, "%s", t->backend != BACKEND_LLMC ? ""
        : estimate_llmc_sharded(t, e) ? "fp32 weights + Adam m, v (each rank its part, in place)"
        : "fp32 weights + Adam m, v (rank 0)");
    if (t->backend == BACKEND_LLAMAFACTORY)
        row(tb, 1, "of which weights", b, "%s", t->method == METHOD_LORA || t->method == METHOD_QLORA
                                                     ? "fp32 adapters, rank 0"
                                                     : "16-bit safetensors, rank 0; the rest: optimizer and "
                                                       "DeepSpeed states, each rank its part");
    cli_fmt_duration(a, sizeof a, e->checkpoint_write_seconds);
    row(tb, 0, "checkpoint write", a, "per save at 1 GB/s per writing node");
    gb(a, sizeof a, e->checkpoint_kept_bytes);
    row(tb, 0, "checkpoints kept", a, "x %d (%s)", t->checkpoint_keep > 0 ? t->checkpoint_keep : 2,
        t->backend == BACKEND_LLAMAFACTORY ? "save_total_limit" : "checkpoint_keep");
    fmt_int(a, sizeof a, (double)e->checkpoints_total);
    if (t->checkpoint_epoch) row(tb, 0, "saves", a, "every epoch (%lld steps)", (long long)e->checkpoint_every_steps);
    else row(tb, 0, "saves", a, "every %lld steps", (long long)e->checkpoint_every_steps);
    /* each requeued segment reads the last checkpoint back before it trains */
    if (e->requeue_segments > 1) {
        cli_fmt_duration(a, sizeof a, e->resume_seconds);
        row(tb, 0, "resume", a, "a requeued start reads the states back");
    }
    cli_fmt_duration(a, sizeof a, e->wall_seconds);
    row(tb, 0, "wall time", a, "training + start-up + saves%s", e->requeue_segments > 1 ? ", every segment" : "");
}

/* A merge job: what llamafactory-cli export reads, holds and writes, and
 * how long that takes against the job's time limit. */
static void print_merge(Table *tb, const PlanJob *job, const Estimate *e)
{
    const PlanMerge *m = job->merge;
    const PlanCluster *c = job->cluster;
    char a[64], b[64], d[64];
    fprintf(tb->out, "%sjob %s%s: merge %s on cluster %s\n", tb->colour ? "\033[1m" : "", job->name,
            tb->colour ? "\033[0m" : "", m->name, c->name);
    fmt_int(a, sizeof a, (double)e->params_total);
    fmt_int(b, sizeof b, e->merge_adapter_params);
    fprintf(tb->out, "  llamafactory-cli export: model %s (%s, %s parameters) + the LoRA adapter of run %s "
            "(%s parameters, rank %d) -> %s\n", m->model->name, arch_name(m->model->arch), a,
            m->adapter->name, b, m->adapter->lora_rank, m->output_dir);
    section(tb, m->device == MERGE_DEVICE_AUTO ? "memory (device = auto: spread over the node's GPUs)"
                                               : "memory (device = cpu: host memory)");
    /* device = auto spreads the model over the node's GPUs; device = cpu holds it all in host memory */
    if (m->device == MERGE_DEVICE_AUTO) {
        gib_row(tb, 0, "per GPU", e->total_bytes, "of %.1f GiB usable (%s)", e->usable_bytes / GIB, c->gpu->name);
        gib_row(tb, 1, "weights", e->weights_bytes, "%s / %d GPUs", e->merge_value_bytes == 4 ? "fp32" : "16-bit",
                c->gpus_per_node);
        gib_row(tb, 1, "matrix being merged", e->activations_bytes, "fp32, twice");
        gib_row(tb, 1, "CUDA context", e->reserve_bytes, NULL);
    }
    gib_row(tb, 0, "host", e->host_bytes, "%s", !(e->host_usable_bytes > 0) ? "" :
            e->host_fits ? "fits" : "DOES NOT FIT");
    gib_row(tb, 1, "process", e->host_process_bytes, "Python, torch, transformers");
    gib_row(tb, 1, m->device == MERGE_DEVICE_AUTO ? "shard being written" : "model, adapter, shard",
            e->host_model_bytes, "%s", m->device == MERGE_DEVICE_AUTO ? "" : "the base in its dtype, one matrix in "
            "fp32, one shard staged");
    section(tb, "time");
    cli_fmt_duration(a, sizeof a, e->startup_seconds);
    row(tb, 0, "start", a, "LLaMA-Factory, the tokenizer");
    cli_fmt_duration(a, sizeof a, e->load_seconds);
    gb(b, sizeof b, e->load_bytes);
    row(tb, 0, "load", a, "%s at 0.5 GB/s", b);
    cli_fmt_duration(a, sizeof a, e->merge_seconds);
    cli_fmt_count(b, sizeof b, e->merge_flops);
    row(tb, 0, "merge", a, "%s FLOPs (B x A into each adapted matrix)", b);
    cli_fmt_duration(a, sizeof a, e->merge_write_seconds);
    gb(b, sizeof b, e->merge_write_bytes);
    row(tb, 0, "write", a, "%s of %s safetensors in %d GB shards at 1 GB/s", b,
        e->merge_value_bytes == 4 ? "fp32" : "16-bit", m->shard_gb);
    cli_fmt_duration(a, sizeof a, e->wall_seconds);
    cli_fmt_duration(d, sizeof d, job->time_seconds);
    row(tb, 0, "wall time", a, "of the job's %s%s", d, e->wall_seconds > job->time_seconds ? ": DOES NOT FINISH" : "");
}

/* `llmc explain`'s report of one job: header, memory per device and per
 * host, time, the step's breakdown, and the assumptions behind it. */
static void print_job(Table *tb, const PlanJob *job, const Estimate *e)
{
    if (job->merge) {
        print_merge(tb, job, e);
        Assumptions as;
        collect_assumptions(job, e, &as);
        section(tb, "assumptions");
        for (int i = 0; i < as.n; i++) fprintf(tb->out, "  - %s\n", as.line[i]);
        return;
    }
    print_job_header(tb, job, e);
    print_device_memory(tb, job, e);
    /* a CPU job's memory section is already the node's (per node, not per GPU) */
    if (!e->cpu_only) print_host_memory(tb, job, e);
    print_time(tb, job, e);
    print_step(tb, job, e);
    /* start-up and checkpoints need the steps: without them there is no save count or wall time */
    if (!e->cpu_only && e->steps_total > 0) print_startup(tb, job, e);

    Assumptions as;
    collect_assumptions(job, e, &as);
    section(tb, "assumptions");
    for (int i = 0; i < as.n; i++) fprintf(tb->out, "  - %s\n", as.line[i]);
}

/* ---- JSON output ---- */

/* The job's site profile: its values and runs, and which of them the estimate used. */
static cJSON *profile_to_json(const PlanProfile *p, const Estimate *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name);
    cJSON_AddStringToObject(o, "file", p->at.start.file ? p->at.start.file : "");
    cJSON_AddNumberToObject(o, "line", p->at.start.line);
    /* only the values the profile states; the *_used flags say which the estimate took (a plan's own mfu wins) */
    if (p->mfu > 0) cJSON_AddNumberToObject(o, "mfu", p->mfu);
    if (p->step_overhead_s >= 0 && p->step_overhead_at.start.file) cJSON_AddNumberToObject(o, "step_overhead_seconds", p->step_overhead_s);
    if (p->intra_bytes_per_s > 0) cJSON_AddNumberToObject(o, "intra_node_bytes_per_s", p->intra_bytes_per_s);
    if (p->inter_bytes_per_s > 0) cJSON_AddNumberToObject(o, "inter_node_bytes_per_s", p->inter_bytes_per_s);
    cJSON *from = cJSON_AddArrayToObject(o, "from");
    for (int i = 0; i < p->nfrom; i++) cJSON_AddItemToArray(from, cJSON_CreateString(p->from[i]));
    cJSON_AddBoolToObject(o, "mfu_used", e->profile_mfu);
    cJSON_AddBoolToObject(o, "intra_used", e->profile_intra);
    cJSON_AddBoolToObject(o, "inter_used", e->profile_inter);
    cJSON_AddNumberToObject(o, "step_overhead_used_seconds", e->step_overhead_seconds);
    return o;
}

/* ---- entry ---- */

/* llmc explain PLAN: the front end (with --set), the estimate of every job, then the table or the JSON. The
 * diagnostics come first (stderr), so an error is seen before the figures it may have made wrong. */
int explain_main(int argc, char **argv)
{
    enum { OPT_SET = CLI_OPT_FIRST_FREE, OPT_SWEEP, OPT_SHARDS };
    static const struct option longopts[] = {CLI_COMMON_OPTIONS, {"set", required_argument, NULL, OPT_SET},
                                             {"sweep", required_argument, NULL, OPT_SWEEP},
                                             {"shards", required_argument, NULL, OPT_SHARDS}, {NULL, 0, NULL, 0}};
    const char *shards = NULL;
    const char *cmd = "llmc explain";
    CliOverrides sets = {0};
    bool json = false;
    int colour = -1, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') { fputs(explain_usage, stdout); return EXPLAIN_CLEAN; }
        if (c == CLI_OPT_VERSION) { cli_version(); return EXPLAIN_CLEAN; }
        if (c == CLI_OPT_FORMAT) { if (cli_format(cmd, optarg, &json)) return EXPLAIN_USAGE; continue; }
        if (c == CLI_OPT_COLOR) { if (cli_colour(cmd, optarg, &colour)) return EXPLAIN_USAGE; continue; }
        if (c == OPT_SHARDS) { shards = optarg; continue; }
        int rc = EXPLAIN_USAGE;
        if (c == OPT_SET && (rc = cli_add_override(cmd, &sets, "--set", optarg)) == 0) continue;
        /* --sweep is recognized only to point at the command that does it */
        if (c == OPT_SWEEP) cli_usage_error(cmd, "--sweep compiles one output per point: llmc PLAN -o DIR --sweep %s", optarg);
        else if (c != OPT_SET) rc = cli_getopt_error(cmd, c, argv);
        free(sets.items);
        return rc;
    }
    if (optind == argc || argc - optind > 1) {
        free(sets.items);
        if (optind == argc) return cli_usage_error(cmd, "explain needs a plan file");
        return cli_usage_error(cmd, "explain takes one plan, got '%s' and '%s'", argv[optind], argv[optind + 1]);
    }
    const char *path = argv[optind];

    Diags *d = diags_new();
    Plan *plan = frontend_load_overrides(path, sets.items, sets.n, d);
    free(sets.items);
    if (!plan) {
        diags_render(d, json ? stdout : stderr, json ? DIAG_FMT_JSON : DIAG_FMT_HUMAN, colour);
        diags_free(d);
        return EXPLAIN_USAGE;
    }
    bool front_errors = diags_error_count(d) > 0;
    Estimate *ests = calloc((size_t)plan->njobs + 1, sizeof *ests);
    if (!ests) {
        fputs("llmc: error: out of memory\n", stderr);
        plan_free(plan);
        diags_free(d);
        return EXPLAIN_USAGE;
    }
    /* A plan with front-end errors is incomplete: no later stage runs on it. */
    if (!front_errors)
        for (int i = 0; i < plan->njobs; i++) cli_estimate_job(plan->jobs[i], shards, &ests[i], d);
    int rc = diags_error_count(d) ? EXPLAIN_PLAN : EXPLAIN_CLEAN;

    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON *jobs = cJSON_AddArrayToObject(root, "jobs");
        for (int i = 0; !front_errors && i < plan->njobs; i++) {
            const PlanJob *job = plan->jobs[i];
            /* a job with nothing to estimate (no run or merge, or no cluster) has no entry */
            if (!(job->run || job->merge) || !job->cluster) continue;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "job", job->name);
            cJSON_AddItemToObject(o, "estimate", estimate_to_json(&ests[i]));
            if (job->profile) cJSON_AddItemToObject(o, "profile", profile_to_json(job->profile, &ests[i]));
            Assumptions as;
            collect_assumptions(job, &ests[i], &as);
            cJSON *arr = cJSON_AddArrayToObject(o, "assumptions");
            for (int k = 0; k < as.n; k++) cJSON_AddItemToArray(arr, cJSON_CreateString(as.line[k]));
            cJSON_AddItemToArray(jobs, o);
        }
        cJSON_AddItemToObject(root, "diagnostics", cli_diagnostics_json(d));
        char *text = cJSON_Print(root);
        if (text) {
            fputs(text, stdout);
            fputc('\n', stdout);
        }
        free(text);
        cJSON_Delete(root);
    } else {
        if (diags_error_count(d) + diags_warning_count(d) > 0)
            diags_render(d, stderr, DIAG_FMT_HUMAN, colour);
        fflush(stderr);
        Table tb = {stdout, diag_colour_wanted(colour, stdout)};
        int shown = 0;
        for (int i = 0; !front_errors && i < plan->njobs; i++) {
            const PlanJob *job = plan->jobs[i];
            if (!(job->merge || (job->run && job->run->model)) || !job->cluster) continue;
            if (shown++) fputc('\n', stdout);
            print_job(&tb, job, &ests[i]);
        }
        if (!front_errors && shown == 0) fputs("no job in the plan to explain\n", stdout);
    }
    fflush(stdout);
    free(ests);
    plan_free(plan);
    diags_free(d);
    return rc;
}
