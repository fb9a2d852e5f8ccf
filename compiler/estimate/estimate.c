/* estimate.c — memory per GPU and time to train, from the typed plan alone.
 *
 * Every formula and constant here is documented, with its source, in
 * docs/estimator.md; the names of the constants below match that document.
 * The inputs are the PlanJob and what hangs off it (section "Inputs").
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "estimate.h"
#include <stdlib.h>
#include <cjson/cJSON.h>
#include "cuda_layout.h"   /* contract/: the llmc CUDA trainer's allocation constants */
#include "plan_limits.h"   /* contract/: PLAN_YEAR_SECONDS */

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* DeepSpeed's defaults (deepspeed/runtime/zero/config.py), in elements. */
#define DS_REDUCE_BUCKET_ELEMS      5e8   /* reduce_bucket_size */
#define DS_ALLGATHER_BUCKET_ELEMS   5e8   /* allgather_bucket_size (stages 1, 2) */
#define DS_PREFETCH_BUCKET_ELEMS    5e7   /* stage3_prefetch_bucket_size */
/* The HF Trainer's "auto" (transformers' DeepSpeed integration): reduce bucket
 * hidden^2, stage-3 prefetch 0.9 hidden^2 elements. */
#define HF_AUTO_PREFETCH_SHARE      0.9

/* The llmc CUDA trainer's allocation constants, from the header the trainer
 * itself is built with (contract/cuda_layout.h), as doubles: the loss rows of
 * logits at a time; the 64-element slices of the flat buffers; the gradient
 * norm's partials; the column-sum partials the logits chunk doubles as the
 * scratch of (k_colsum_scratch: up to 512 row blocks of a norm-weight
 * gradient, 64 splits of the qkv bias's, 256 blocks of qk_norm's); the
 * offload staging sets; cuDNN's workspace alignment and document plan. */
#define LLMC_CE_CHUNK_ROWS      ((double)LLMC_CUDA_CE_CHUNK_ROWS)
#define LLMC_ALIGN_ELEMS        ((double)LLMC_CUDA_ALIGN_ELEMS)
#define LLMC_ZERO_ALIGN_ELEMS   ((double)LLMC_CUDA_ZERO_ALIGN_ELEMS)
#define LLMC_GRAD_NORM_BLOCK_N  ((double)LLMC_GRAD_NORM_BLOCK)
#define LLMC_SUMSQ_BLOCKS       ((double)LLMC_CUDA_SUMSQ_BLOCKS)
#define LLMC_SUMSQ_SLOTS        ((double)LLMC_CUDA_SUMSQ_SLOTS)
#define LLMC_RMS_BWD_MAX_BLOCKS ((double)LLMC_CUDA_RMS_BWD_MAX_BLOCKS)
#define LLMC_BIAS_GRAD_SPLITS   ((double)LLMC_CUDA_BIAS_GRAD_SPLITS)
#define LLMC_HEAD_NORM_BLOCKS   ((double)LLMC_CUDA_HEAD_NORM_BLOCKS)
#define LLMC_OFFLOAD_SETS       ((double)LLMC_CUDA_OFFLOAD_SETS)
#define LLMC_OFFLOAD_CHUNK      ((double)LLMC_CUDA_OFFLOAD_CHUNK)
#define LLMC_CUDNN_WS_ALIGN_B   ((double)LLMC_CUDNN_WS_ALIGN)
/* cuDNN's own engine workspace per entry of a plan's batch, per query head,
 * measured on the H200 (cuDNN 9; docs/estimator.md, "cuDNN attention
 * workspace"): bf16 per score (T x T) in the deterministic backward, fp32 per
 * query element (T x head_dim) in both forms. */
#define LLMC_CUDNN_SCORE_BYTES  2.0
#define LLMC_CUDNN_QUERY_BYTES  4.0

/* Fixed per-process allowances and the allocator's fragmentation share. */
#define GPU_CONTEXT_BYTES   (1.0 * GIB)   /* CUDA context, cuBLAS/cuBLASLt workspaces, NCCL buffers */
#define CPU_PROCESS_BYTES   (16.0 * MIB)  /* trainer binary, libraries, stacks */
#define CPU_BLAS_THREAD_BYTES (32.0 * MIB) /* OpenBLAS's GEMM buffer per thread (x86-64) */
#define FRAGMENTATION_SHARE 0.05          /* of all tensor bytes */

/* CPU plans: fp32 peak of one core (AVX2: 2 FMA units x 8 lanes x 2 flop x 2 GHz)
 * and the utilisation assumed when the plan states no mfu. */
#define CPU_CORE_PEAK_FLOPS 64e9
#define CPU_DEFAULT_MFU     0.2

/* The warning threshold for a plan that leaves most of the GPU idle. */
#define LOW_MEMORY_SHARE    0.30

#define MAX_BATCH_SEARCH    (1 << 20)

/* Communication (docs/estimator.md, "Communication"). The share of a link's
 * one-way bandwidth NCCL's rings reach, and the cost of launching one
 * collective, are rows of the defaults table (estimate_defaults.c). */
static double default_value(DefaultKind k, int backend)
{
    const EstimateDefault *r = estimate_default(k, backend, NULL, -1);
    return r ? r->value : 0;
}
#define LINK_EFFICIENCY      default_value(DEF_LINK_EFFICIENCY, -1)
#define NET_EFFICIENCY       default_value(DEF_NET_EFFICIENCY, -1)
/* Latency of one ring hop: over NVLink / PCIe inside a node, over the network
 * (InfiniBand; RoCE adds switch and congestion-control latency). */
#define HOP_LATENCY_LINK_S   1.0e-6
#define HOP_LATENCY_IB_S     3.0e-6
#define HOP_LATENCY_ROCE_S   5.0e-6
/* Per collective launched: NCCL's kernel launch (llmc trainer, C); DeepSpeed
 * adds its Python-side bookkeeping (hooks, partitioned-parameter state) per
 * gathered module or reduced bucket. */
#define COLL_LAUNCH_NCCL_S   default_value(DEF_COLL_LAUNCH_S, BACKEND_LLMC)
#define COLL_LAUNCH_DS_S     default_value(DEF_COLL_LAUNCH_S, BACKEND_LLAMAFACTORY)
/* ZeRO-3 all-gathers one module at a time: per decoder layer the q, k, v, o,
 * gate, up and down projections (the norms stay whole: below the
 * persistence threshold, 10 x hidden under "auto"). */
#define ZERO3_MODULES_PER_LAYER 7

/* DeepSpeed offload (docs/estimator.md, "Offload time"): the pinned copies'
 * share of the host link and DeepSpeed's CPU Adam rates, rows of the
 * defaults table (estimate_defaults.c, with their sources). */
#define HOST_LINK_EFFICIENCY     default_value(DEF_HOST_LINK_EFFICIENCY, -1)
#define CPU_ADAM_THREAD_PARAMS_S default_value(DEF_CPU_ADAM_THREAD_RATE, -1)
#define CPU_ADAM_NODE_PARAMS_S   default_value(DEF_CPU_ADAM_NODE_RATE, -1)

/* Host memory per node (docs/estimator.md, "Host memory"). */
#define HOST_TORCH_PROCESS_BYTES (3.0 * GIB)   /* PyTorch + CUDA + NCCL host side, per rank */
#define HOST_LLMC_PROCESS_BYTES  (0.5 * GIB)   /* llmc-train-cuda: CUDA runtime host side, per rank */
#define HOST_HF_SHARD_BYTES      5e9           /* transformers' default max_shard_size: one file at a time */
#define HOST_WORKER_BYTES        (0.5 * GIB)   /* one tokenizing worker (Python + datasets + tokenizer) */
#define HOST_PINNED_BYTES        (0.25 * GIB)  /* pinned staging per rank (NCCL, copies) */

/* Start-up and checkpoints (docs/estimator.md, "Start-up and checkpoints").
 * LLaMA-Factory's tokenisation per preprocessing worker (datasets.map over
 * the template and the tokenizer, written to Arrow): a conservative default
 * that `tokenize_rate` replaces once measured. The barrier it must fit under
 * is raised to twice the estimate plus ten minutes, in whole minutes. */
#define LF_TOKENIZE_TOKENS_PER_S   1.0e5
#define TOKENIZE_BARRIER_FACTOR    2.0
#define TOKENIZE_BARRIER_SLACK_S   600.0
#define DDP_TIMEOUT_MAX_S          86400.0   /* the checker's upper bound on ddp_timeout */
/* Reading the 16-bit model at a start (safetensors from shared storage,
 * converted and placed or partitioned), per node; reading checkpoint states
 * back and writing them, per node (every node's ranks write their own
 * partitions in parallel; rank 0 alone writes whole files). */
#define MODEL_LOAD_BYTES_PER_S     0.5e9
#define CKPT_READ_BYTES_PER_S      1.0e9
#define CKPT_WRITE_BYTES_PER_S     1.0e9

/* ---- parameters ---------------------------------------------------------- */

/* Products of plan integers saturate instead of overflowing: a hostile plan
 * gets an absurd estimate and a "does not fit", never undefined behaviour. */
static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return INT64_MAX;
    return r;
}

static int64_t add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return INT64_MAX;
    return r;
}

static int64_t head_dim_of(const PlanModel *m)
{
    if (m->head_dim > 0) return m->head_dim;
    return m->heads > 0 ? m->hidden / m->heads : 0;
}

int64_t estimate_params(const PlanModel *m, int64_t *embedding, int64_t *per_layer)
{
    int64_t h = m->hidden > 0 ? m->hidden : 0;
    int64_t hd = head_dim_of(m);
    int64_t q = mul_sat(m->heads > 0 ? m->heads : 0, hd);
    int64_t kv = mul_sat(m->kv_heads > 0 ? m->kv_heads : 0, hd);
    int64_t f = m->ffn > 0 ? m->ffn : 0;
    int64_t v = m->vocab > 0 ? m->vocab : 0;
    int64_t layers = m->layers > 0 ? m->layers : 0;

    /* q, k, v, o projections; biases on q, k, v only (qwen2); per-head RMSNorm
     * weights on q and k (qwen3) are shared across heads: head_dim each. */
    int64_t attn = add_sat(add_sat(mul_sat(h, q), mul_sat(2 * h, kv)), mul_sat(q, h));
    if (m->qkv_bias) attn = add_sat(attn, add_sat(q, 2 * kv));
    if (m->qk_norm) attn = add_sat(attn, 2 * hd);
    int64_t mlp = mul_sat(3 * h, f);                 /* gate, up, down (gemma2: GeGLU, the same three) */
    /* mixtral: every expert's three matrices and the router (hidden x experts) */
    if (m->experts > 0) mlp = add_sat(mul_sat(mlp, m->experts), mul_sat(h, m->experts));
    int64_t norms = m->norms_per_layer > 0 ? m->norms_per_layer : 2;   /* gemma2: 4 */
    int64_t layer = add_sat(add_sat(attn, mlp), mul_sat(norms, h)); /* RMSNorm weights */
    int64_t emb = mul_sat(v, h);
    if (!m->tie_embeddings) emb = mul_sat(emb, 2); /* separate lm_head */

    if (embedding) *embedding = emb;
    if (per_layer) *per_layer = layer;
    return add_sat(add_sat(mul_sat(layers, layer), emb), h); /* + final norm */
}

/* ---- memory ---------------------------------------------------------------- */

/* Bytes of a weight, gradient or activation value: 4 in fp32, else 2 (bf16,
 * fp16 and pure_bf16 alike). */
static double value_bytes(Precision prec)
{
    return prec == PREC_FP32 ? 4 : 2;
}

/* Optimizer state bytes per trainable parameter (K in the ZeRO paper): fp32
 * Adam m + v = 8; mixed precision adds the fp32 master weights, 12;
 * pure_bf16 has no master copy and torch's AdamW keeps m and v in the
 * parameter's dtype (zeros_like), 2 + 2 = 4. */
static double optimizer_bytes(Precision prec)
{
    return prec == PREC_FP32 ? 8 : prec == PREC_PURE_BF16 ? 4 : 12;
}

/* The same for LLaMA-Factory's `optim` (transformers' OptimizerNames): the
 * master copy (mixed precision, 4 bytes) plus the moments — AdamW two of the
 * parameter's width (fp32 4, pure_bf16 2), bitsandbytes' 8-bit AdamW two of 1
 * byte (its per-block scales, 2 x 4 bytes per 2048, left out), paged 32-bit
 * two of 4 (paged to host under pressure, counted on the GPU), Adafactor no
 * first moment and a factored second (rows + columns: left out). */
static double optim_state_bytes(Precision prec, OptimKind o)
{
    double master = prec == PREC_FP32 || prec == PREC_PURE_BF16 ? 0 : 4;
    double moment = prec == PREC_PURE_BF16 ? 2 : 4;
    switch (o) {
    case OPTIM_ADAMW_8BIT: case OPTIM_PAGED_ADAMW_8BIT: return master + 2 * 1;
    case OPTIM_PAGED_ADAMW_32BIT: return master + 2 * 4;
    case OPTIM_ADAFACTOR: return master;
    case OPTIM_ADAMW_TORCH: case OPTIM_ADAMW_TORCH_FUSED: break;
    }
    return master + 2 * moment;
}

/* The llmc CUDA trainer's optimizer state per trained parameter: the fp32
 * master (4 bytes, or split: the 2 bytes the bf16 weight drops) and AdamW's
 * m and v (fp32 8, or bf16 4): 12, 10, 8 or 6 (+ bf16 weight 2 and fp32
 * gradient 4: 18 / 16 / 14 / 12 bytes a parameter). */
static double llmc_state_bytes(const PlanTrain *t)
{
    return (t->master_weights == MASTER_SPLIT ? 2 : 4) + (t->optimizer_states == OSTATES_BF16 ? 4 : 8);
}

/* The projection GEMMs of one layer precision = fp8 runs in FP8 (qkv, o,
 * gate_up, down): their weights' parameters and the widest input or output
 * (mixture of experts: the experts a token runs through, as one MLP). */
static double projection_params(const PlanModel *m, double *widest)
{
    double h = m->hidden, hd = (double)head_dim_of(m), q = m->heads * hd, kv = m->kv_heads * hd;
    double f = m->experts > 0 && m->experts_per_token > 0 ? (double)m->ffn * m->experts_per_token : m->ffn;
    if (widest) *widest = fmax(fmax(h, q + 2 * kv), fmax(q, 2 * f));
    return h * (q + 2 * kv) + q * h + 2 * h * f + f * h;
}

/* precision = fp8 on the llmc CUDA trainer: an E4M3 copy of each projection
 * weight and of its transpose (refreshed after each optimizer step), 2 bytes
 * a projection parameter; the widest projection's quantised scratch, N tokens
 * x max(in, out) x 3 bytes (the E4M3 input and its transpose, the E5M2
 * gradient and its transpose share it); one fp32 scale per weight, input and
 * output gradient of each projection. */
static void llmc_cuda_fp8(const PlanModel *m, double tokens, Estimate *e)
{
    double widest, layers = m->layers > 0 ? m->layers : 0;
    e->fp8_weights_bytes = 2 * layers * projection_params(m, &widest);
    e->fp8_scratch_bytes = tokens * widest * 3 + 4 * 3 * 4 * layers;
}

void estimate_model_states(double params, Precision prec, ShardStage shard, int dp,
                           double *weights, double *grads, double *optimizer)
{
    /* Mixed precision: 16-bit weights and gradients, fp32 master weights +
     * Adam m + v = K = 12 bytes (ZeRO paper, 2 + 2 + K). fp32: 4 + 4 + 8;
     * pure_bf16: 2 + 2 + 4. */
    double wb = value_bytes(prec);
    double gb = wb;
    double ob = optimizer_bytes(prec);
    double n = dp > 0 ? dp : 1;
    double w = wb * params, g = gb * params, o = ob * params;
    if (shard >= SHARD_ZERO1) o /= n;
    if (shard >= SHARD_ZERO2) g /= n;
    if (shard >= SHARD_ZERO3) w /= n;
    *weights = w;
    *grads = g;
    *optimizer = o;
}

void estimate_train_states(const TrainStates *ts, Precision prec, ShardStage shard, int dp,
                           double *weights, double *grads, double *optimizer, double *host)
{
    double wb = value_bytes(prec);
    double ob = optimizer_bytes(prec);
    double n = dp > 0 ? dp : 1;
    double tr = ts->trainable_params > 0 ? ts->trainable_params : 0;
    double fr = ts->frozen_params > 0 ? ts->frozen_params : 0;
    double fb = ts->frozen_bytes_per_param > 0 ? ts->frozen_bytes_per_param : wb;
    double w = wb * tr + fb * fr, g = wb * tr, o = ob * tr, h = 0;
    if (shard >= SHARD_ZERO1) o /= n;
    if (shard >= SHARD_ZERO2) g /= n;
    if (shard >= SHARD_ZERO3) w /= n;
    if (ts->offload_optimizer && shard >= SHARD_ZERO1) {
        /* DeepSpeed's CPU Adam: fp32 master, m, v and the fp32 gradient
         * partition in host memory; the GPU keeps the 16-bit gradients. */
        h += o + 4 * tr / n;
        o = 0;
    }
    if (ts->offload_params && shard >= SHARD_ZERO3) {
        h += w;
        w = 0;
    }
    *weights = w;
    *grads = g;
    *optimizer = o;
    if (host) *host = h;
}

double estimate_flops_per_token(double matmul_params, double trainable_share, double attn_fwd,
                                Recompute rc, AttentionKind attn)
{
    double share = trainable_share >= 0 && trainable_share <= 1 ? trainable_share : 1;
    double n = matmul_params;
    /* forward 2N; backward: input gradients 2N, weight gradients 2N x share */
    double fpt = 2 * n + 2 * n + 2 * n * share + 3.0 * attn_fwd;
    if (rc == RECOMPUTE_FULL) fpt += 2.0 * n + attn_fwd;
    else if (rc == RECOMPUTE_SELECTIVE && attn == ATTN_EAGER) fpt += attn_fwd;
    return fpt;
}

/* ---- the site profile (docs/estimator.md, "Site profiles") ---------------- */

double estimate_job_mfu(const PlanJob *job, double dflt, Estimate *e)
{
    if (e) e->profile_mfu = false;
    if (job->run && job->run->mfu > 0) return job->run->mfu;
    if (job->profile && job->profile->mfu > 0) {
        if (e) e->profile_mfu = true;
        return job->profile->mfu;
    }
    return dflt;
}

static bool is_cpu_only(const PlanCluster *c);

double estimate_default_mfu(const PlanJob *job, const EstimateDefault **mfu_row,
                            const EstimateDefault **method_row)
{
    const PlanTrain *t = job->run;
    bool cpu = is_cpu_only(job->cluster);
    const char *gpu = cpu ? NULL : job->cluster->gpu->name;
    const EstimateDefault *r = cpu ? NULL : estimate_default(DEF_MFU, (int)t->backend, gpu, (int)t->method);
    const EstimateDefault *f = estimate_default(DEF_METHOD_FACTOR, (int)t->backend, gpu, (int)t->method);
    if (mfu_row) *mfu_row = r;
    if (method_row) *method_row = f && f->value != 1.0 ? f : NULL;
    double mfu = r ? r->value : cpu ? CPU_DEFAULT_MFU : job->cluster->gpu->default_mfu;
    return mfu * (f ? f->value : 1.0);
}

void estimate_profile_fabric(const PlanJob *job, Fabric *f, Estimate *e)
{
    const PlanProfile *p = job->profile;
    f->intra_eff_bytes_per_s = p && p->intra_bytes_per_s > 0 ? p->intra_bytes_per_s : 0;
    f->inter_eff_bytes_per_s = p && p->inter_bytes_per_s > 0 ? p->inter_bytes_per_s : 0;
    if (e) {
        e->profile_intra = f->intra_eff_bytes_per_s > 0;
        e->profile_inter = f->inter_eff_bytes_per_s > 0;
    }
}

/* ---- communication ------------------------------------------------------- */

void estimate_collective(const Fabric *f, CollKind k, double bytes, double *sent, double *intra_s,
                         double *inter_s, double *latency_s)
{
    int nodes = f->nodes > 0 ? f->nodes : 1, g = f->gpus_per_node > 0 ? f->gpus_per_node : 1;
    double d = (double)nodes * g;
    double passes = k == COLL_ALL_REDUCE ? 2 : 1;   /* reduce-scatter + all-gather */
    double out = d > 1 ? passes * (d - 1) / d * bytes : 0;
    /* A ring over every rank; with G rings (one per GPU of a node) each node
     * sends the same bytes as one rank over its NICs together, and each GPU
     * sends them over its own link (one direction: half NVIDIA's figure). */
    double link = f->intra_eff_bytes_per_s > 0 ? f->intra_eff_bytes_per_s : f->link_bytes_per_s / 2 * LINK_EFFICIENCY;
    double net = f->inter_eff_bytes_per_s > 0 ? f->inter_eff_bytes_per_s
                                              : f->nics * f->nic_bits_per_s / 8 * NET_EFFICIENCY;
    *sent = out;
    *intra_s = g > 1 && link > 0 ? out / link : 0;
    *inter_s = nodes > 1 && net > 0 ? out / net : 0;
    /* Latency: a chunk goes once (twice for all-reduce) round the ring of D
     * hops, of which one per node crosses the network. */
    double hop_net = f->roce ? HOP_LATENCY_ROCE_S : HOP_LATENCY_IB_S;
    double ring = nodes > 1 ? (d - nodes) * HOP_LATENCY_LINK_S + nodes * hop_net : (d - 1) * HOP_LATENCY_LINK_S;
    *latency_s = d > 1 ? passes * ring : 0;
}

/* ZeRO-3 gathers of every weight per micro-step: forward and backward; with
 * HF gradient checkpointing (LLaMA-Factory turns it on for any recompute) a
 * third for the recomputed forward, whose post-forward hook releases the
 * weights again before backward gathers them (transformers #47254). */
static double zero3_gather_passes(Recompute rc)
{
    return rc == RECOMPUTE_NONE ? 2 : 3;
}

void estimate_comm_volume(const PlanModel *m, const TrainStates *ts, ShardStage shard, bool llmc_trainer,
                          Precision prec, Recompute rc, int grad_accum, int dp, CommVolume *v)
{
    memset(v, 0, sizeof *v);
    if (dp <= 1) return;
    double ga = grad_accum > 0 ? grad_accum : 1;
    double vb = value_bytes(prec);
    double tr = ts->trainable_params > 0 ? ts->trainable_params : 0;
    double all = tr + (ts->frozen_params > 0 ? ts->frozen_params : 0);
    double layers = m->layers > 0 ? m->layers : 0;
    if (llmc_trainer) {
        /* runtime/cuda/model_cuda.c: fp32 gradients. Without ZeRO-1, one
         * all-reduce per layer (and one for the embedding and the rest) on the
         * last micro-step, on the communication stream during backward; with
         * ZeRO-1 one reduce-scatter before and one bf16 all-gather after AdamW
         * (+ the 4-byte norm all-reduce). */
        if (shard >= SHARD_ZERO2 && ts->trainable_params > 0 && ts->frozen_params <= 0) {
            /* ZeRO-2/3 (model_cuda.c zero_step, cuda_model_micro): each
             * micro-step's gradients reduced unit by unit (layers + 1 units)
             * onto the owners' shards as backward finishes them; ZeRO-2 then
             * gathers the updated bf16 weights once, ZeRO-3 gathers each unit's
             * bf16 weights before its forward and again before its backward
             * (recompute works on the weights the backward gathered). */
            double units = layers + 1;
            v->reduce_scatter_bytes = 4 * tr * ga;
            v->allgather_bytes = shard == SHARD_ZERO3 ? 2 * 2 * all * ga : 2 * tr;
            v->allreduce_bytes = 4;
            v->collectives = units * ga + (shard == SHARD_ZERO3 ? 2 * units * ga : 1) + 1;
        } else if (shard >= SHARD_ZERO1) {
            v->reduce_scatter_bytes = 4 * tr;
            v->allgather_bytes = 2 * tr;
            v->allreduce_bytes = 4;
            v->collectives = 3;
        } else {
            v->allreduce_bytes = 4 * tr;
            v->collectives = layers + 1;
        }
        return;
    }
    /* DeepSpeed as emitted (emit_llamafactory.c): 16-bit communication,
     * overlap_comm false, reduce_scatter true, buckets of 5e8 elements (stages
     * 0-2); stage 3 "auto": reduce bucket hidden^2 elements. */
    double bucket = 5e8;
    if (shard == SHARD_NONE) {
        v->allreduce_bytes = vb * tr;
        v->collectives = ceil(tr / bucket);
    } else if (shard == SHARD_ZERO1) {
        v->reduce_scatter_bytes = vb * tr;          /* at the accumulation boundary */
        v->allgather_bytes = vb * tr;               /* updated weights after the step */
        v->collectives = 2 * ceil(tr / bucket);
    } else if (shard == SHARD_ZERO2) {
        v->reduce_scatter_per_micro = vb * tr;      /* gradients partitioned: every micro-step */
        v->reduce_scatter_bytes = ga * vb * tr;
        v->allgather_bytes = vb * tr;
        v->collectives = ga * ceil(tr / bucket) + ceil(tr / bucket);
    } else {
        /* Every micro-step: gather every weight in forward, again in backward
         * and, with recompute, once more for the recomputed forward (released
         * after each use), reduce-scatter every gradient. */
        double h = m->hidden > 0 ? m->hidden : 1;
        double modules = layers * ZERO3_MODULES_PER_LAYER + (m->tie_embeddings ? 1 : 2);
        double passes = zero3_gather_passes(rc);
        v->allgather_per_micro = passes * vb * all;
        v->reduce_scatter_per_micro = vb * tr;
        v->allgather_bytes = ga * v->allgather_per_micro;
        v->reduce_scatter_bytes = ga * v->reduce_scatter_per_micro;
        v->collectives = ga * (passes * modules + ceil(tr / (h * h)));
    }
}

void estimate_offload_volume(const TrainStates *ts, ShardStage shard, Precision prec, Recompute rc, int grad_accum,
                             int dp, double *d2h, double *h2d_step, double *h2d_fetch)
{
    *d2h = *h2d_step = *h2d_fetch = 0;
    if (!ts->offload_optimizer || shard < SHARD_ZERO1) return;
    double ga = grad_accum > 0 ? grad_accum : 1, n = dp > 0 ? dp : 1;
    double vb = value_bytes(prec);
    double tr = ts->trainable_params > 0 ? ts->trainable_params : 0;
    double all = tr + (ts->frozen_params > 0 ? ts->frozen_params : 0);
    *d2h = ga * vb * tr / n;
    bool params = ts->offload_params && shard >= SHARD_ZERO3;
    if (params) *h2d_fetch = ga * zero3_gather_passes(rc) * vb * all / n;   /* before each gather */
    else *h2d_step = vb * tr / n;
}

double estimate_cpu_adam_rate(int threads, int ranks_per_node)
{
    double t = threads > 0 ? threads : 1, r = ranks_per_node > 0 ? ranks_per_node : 1;
    return fmin(t * CPU_ADAM_THREAD_PARAMS_S, CPU_ADAM_NODE_PARAMS_S / r);
}

double estimate_korthikanti_layer(double s, double b, double h, double a, bool flash)
{
    double bytes = 34.0 * s * b * h;
    if (!flash) bytes += 5.0 * a * s * s * b;
    return bytes;
}

double estimate_llama_layer(const PlanModel *m, double s, double b, bool flash,
                            Recompute rc, double bytes_per_value)
{
    double h = m->hidden, hd = (double)head_dim_of(m);
    double q = m->heads * hd, kv = m->kv_heads * hd, f = m->ffn;
    /* Values kept per token, following Korthikanti's accounting without
     * dropout: RMSNorm inputs (2h), q/k/v projection input (h), q, k, v after
     * RoPE, the o_proj input (q), the MLP input (h), and SwiGLU's gate, silu
     * output, up and product (4 ffn). qk_norm adds the pre-norm q and k. */
    double per_token = 4 * h + 2 * q + 2 * kv + 4 * f;
    if (m->qk_norm) per_token += q + kv;
    double bytes = s * b * per_token * bytes_per_value;
    if (flash) {
        bytes += 4.0 * m->heads * s * b;                /* fp32 log-sum-exp per row */
    } else if (rc == RECOMPUTE_NONE) {
        bytes += m->heads * s * s * b * bytes_per_value; /* softmax output */
    }
    /* RECOMPUTE_SELECTIVE (eager): the attention core is recomputed, so the
     * s^2 scores are not kept (Korthikanti's selective recomputation). */
    return bytes;
}

double estimate_hf_layer(const PlanModel *m, double s, double b, bool flash, double bytes_per_value)
{
    double h = m->hidden, hd = (double)head_dim_of(m);
    double q = m->heads * hd, kv = m->kv_heads * hd, f = m->ffn, bpv = bytes_per_value;
    /* transformers' RMSNorm upcasts its input to fp32 (kept for pow and mul),
     * keeps the normalised value in the input dtype and 1/rms in fp32. */
    double norm = 4 * h + bpv * h + 4;
    double per_token = 2 * norm + 2 * bpv * h;       /* two norms, their outputs */
    if (m->qk_norm)
        per_token += (4 + bpv) * q + 4 * m->heads + (4 + bpv) * kv + 4 * m->kv_heads;
    per_token += bpv * q * 2 + bpv * 4 * f;           /* q, o_proj input; SwiGLU's four */
    double bytes;
    if (flash) {
        /* SDPA keeps k and v un-repeated (enable_gqa) and a fp32 log-sum-exp. */
        per_token += bpv * kv * 2 + 4 * m->heads;
        bytes = s * b * per_token;
    } else {
        /* Eager repeats k and v to every head, keeps the fp32 softmax and its
         * cast back to the input dtype (one tensor when that is fp32). */
        per_token += bpv * q * 2;
        bytes = s * b * per_token + m->heads * s * s * b * (4 + (bpv < 4 ? bpv : 0));
    }
    return bytes;
}

static bool is_cpu_only(const PlanCluster *c)
{
    return c->gpu == NULL || c->gpus_per_node <= 0;
}

/* The largest single weight matrix: what ZeRO-3 must gather in one piece. */
static double largest_matrix(const PlanModel *m)
{
    double h = m->hidden, hd = (double)head_dim_of(m);
    double big = (double)m->vocab * h;
    double mlp = h * m->ffn, attn = h * m->heads * hd;
    if (mlp > big) big = mlp;
    if (attn > big) big = attn;
    return big;
}

static double comm_buffers(const PlanModel *m, double params, ShardStage shard, int dp,
                           double value_bytes, bool hf_auto)
{
    if (dp <= 1 || shard == SHARD_NONE) return 0; /* all-reduce in place on the gradients */
    double reduce = fmin(DS_REDUCE_BUCKET_ELEMS, params) * value_bytes;
    if (shard == SHARD_ZERO1 || shard == SHARD_ZERO2)
        return reduce + fmin(DS_ALLGATHER_BUCKET_ELEMS, params) * value_bytes;
    /* ZeRO-3: the gathered largest matrix and the prefetched next bucket, the
     * full gradient of that matrix before its reduce-scatter, and the bucket.
     * The llamafactory backend's DeepSpeed JSON says "auto" for the stage-3
     * sizes, which the HF Trainer fills from the hidden size. */
    double h = m->hidden;
    double big = largest_matrix(m);
    double prefetch = fmin(hf_auto ? HF_AUTO_PREFETCH_SHARE * h * h : DS_PREFETCH_BUCKET_ELEMS, params);
    if (hf_auto) reduce = fmin(h * h, params) * value_bytes;
    return (big + prefetch) * value_bytes + big * value_bytes + reduce;
}

/* Length of the llmc CUDA trainer's flat parameter buffers (cuda_model_layout):
 * per layer the qkv, o, gate+up and down matrices, then the embedding (and an
 * untied lm_head), then per layer the two norm weights and the qkv bias, and the
 * final norm; each slice rounded up to 64 elements, the whole to 64 x ranks so
 * that ZeRO-1 shards are equal. Qwen3's two head_dim weights (q_norm, k_norm)
 * follow each layer's qkv bias. */
#define LLMC_SLICE(n) (ceil((n) / LLMC_ALIGN_ELEMS) * LLMC_ALIGN_ELEMS)

/* One decoder layer's slices of that buffer: its matrices, and its norm weights
 * and biases (each group contiguous across layers: what freeze trains). */
static void llmc_cuda_layer_slices(const PlanModel *m, double *matrices, double *vectors)
{
    double c = m->hidden > 0 ? m->hidden : 0, hd = (double)head_dim_of(m);
    double q = (m->heads > 0 ? m->heads : 0) * hd, kv = (m->kv_heads > 0 ? m->kv_heads : 0) * hd;
    double f = m->ffn > 0 ? m->ffn : 0;
    *matrices = LLMC_SLICE((q + 2 * kv) * c) + LLMC_SLICE(c * q) + LLMC_SLICE(2 * f * c) + LLMC_SLICE(c * f);
    *vectors = 2 * LLMC_SLICE(c) + (m->qkv_bias ? LLMC_SLICE(q + 2 * kv) : 0) + (m->qk_norm ? LLMC_SLICE(2 * hd) : 0);
}

static double llmc_cuda_flat_params(const PlanModel *m, int world)
{
    double c = m->hidden > 0 ? m->hidden : 0, v = m->vocab > 0 ? m->vocab : 0;
    double layers = m->layers > 0 ? m->layers : 0, matrices, vectors;
    llmc_cuda_layer_slices(m, &matrices, &vectors);
    double flat = layers * (matrices + vectors) + LLMC_SLICE(v * c) * (m->tie_embeddings ? 1 : 2) + LLMC_SLICE(c);
    double unit = LLMC_ALIGN_ELEMS * (world > 0 ? world : 1);
    return ceil(flat / unit) * unit;
}

/* Whether the llmc CUDA trainer runs ZeRO-2/3 for this plan (model_cuda.c:
 * full training at shard zero2/zero3; optimizer offload on one rank keeps its
 * own layout instead). */
static bool llmc_cuda_zero(const PlanTrain *t, ShardStage shard, double world)
{
    return shard >= SHARD_ZERO2 && t->method == METHOD_FULL && !(t->offload == OFFLOAD_OPTIMIZER && world <= 1);
}

/* Whether LoRA targets linear layer k of a decoder layer, in the order
 * q, k, v, o, gate, up, down (lora_target empty: all seven). */
static bool lora_targets(const PlanTrain *t, int k)
{
    bool on = t->nlora_target == 0;
    for (int i = 0; i < t->nlora_target; i++) on |= strcmp(t->lora_target[i], lora_module_llm_names[k]) == 0;
    return on;
}

/* The llmc CUDA trainer's fine-tuning allocations (runtime/cuda/model_cuda.c,
 * lora_cuda.c) in place of full training's. freeze: the whole bf16 weights and
 * fp32 gradient buffer as before, fp32 master weights and moments for the
 * trained layers' slices only. lora: the base in bf16 only; the adapters in a
 * flat buffer of their own (per layer and group -- q/k/v, o, gate/up, down -- the
 * group's stacked A [k r, in], then each target's B [out, r], 64-element slices)
 * with bf16 weights, fp32 gradients, master and moments; per layer u = x A^T of
 * each group (bf16, rank x targets per token; one layer's under full recompute)
 * and the backward's du (the widest group). Both: one fp32 row for the frozen
 * norm and bias gradients (the widest of hidden, q+2kv and 2 head_dim). */
static void llmc_cuda_finetune(const PlanTrain *t, const PlanModel *m, double n, Recompute rc, Estimate *e)
{
    double c = m->hidden, hd = (double)head_dim_of(m), f = m->ffn, layers = m->layers > 0 ? m->layers : 0;
    double q = m->heads * hd, kv = m->kv_heads * hd;
    e->activations_working_bytes += 4 * fmax(fmax(c, q + 2 * kv), 2 * hd);
    if (t->method == METHOD_FREEZE) {
        double matrices, vectors;
        llmc_cuda_layer_slices(m, &matrices, &vectors);
        double trained = fmin(fabs((double)t->freeze_layers), layers);
        e->optimizer_bytes = llmc_state_bytes(t) * trained * (matrices + vectors);
        return;
    }
    static const int group[7] = {0, 0, 0, 1, 2, 2, 3};
    double out[7] = {q, kv, kv, c, f, f, c}, in[4] = {c, q, c, f}, width[4] = {0, 0, 0, 0}, b_slices = 0;
    double r = t->lora_rank;
    for (int k = 0; k < 7; k++) {
        if (!lora_targets(t, k)) continue;
        width[group[k]] += r;
        b_slices += LLMC_SLICE(out[k] * r);
    }
    double per_layer = b_slices, widest = 0, u = 0;
    for (int g = 0; g < 4; g++) {
        if (width[g] > 0) per_layer += LLMC_SLICE(width[g] * in[g]);
        widest = fmax(widest, width[g]);
        u += width[g];
    }
    double adapters = layers * per_layer;
    e->weights_bytes = 2 * llmc_cuda_flat_params(m, 1) + 2 * adapters;
    e->grads_bytes = 4 * adapters;
    e->optimizer_bytes = llmc_state_bytes(t) * adapters;
    e->model_bytes_per_param = 2;
    e->activations_layers_bytes += (rc == RECOMPUTE_FULL ? 1 : layers) * n * u * 2;
    e->activations_working_bytes += n * widest * 2;
}

/* The fused attention kernels take the shapes of contract/cuda_layout.h's
 * predicates (the trainer routes by the same two): otherwise the trainer
 * materialises the scores ("eager") whatever the plan asks. cuDNN's (every GPU
 * build has it) takes attention unless LLMC_ATTN=flash. */
bool estimate_llmc_cuda_flash(const PlanModel *m, int context)
{
    return llmc_flash_shape_ok(head_dim_of(m), context);
}

bool estimate_llmc_cuda_cudnn(const PlanModel *m, int context)
{
    return llmc_cudnn_shape_ok(m->heads, m->kv_heads, head_dim_of(m), context);
}

static double cudnn_align(double x) { return ceil(x / LLMC_CUDNN_WS_ALIGN_B) * LLMC_CUDNN_WS_ALIGN_B; }

/* cuDNN's own workspace for a plan of `batch` sequences of s (the larger of its
 * forward and backward plans: the backward's). */
static double cudnn_engine(double batch, double heads, double s, double hd, bool deterministic)
{
    return batch * heads * s * ((deterministic ? LLMC_CUDNN_SCORE_BYTES * s : 0) + LLMC_CUDNN_QUERY_BYTES * hd);
}

/* The workspace attn_cudnn_prepare asks for at micro batch b x context s: the
 * larger of the plain plan's (batch b) and the document plan's (batch of
 * first_bucket), each our own regions (ws_layout) followed by cuDNN's engine
 * workspace for that batch (build_pair), rounded up. */
double estimate_llmc_cudnn_workspace(const PlanModel *m, double b, double s, bool deterministic)
{
    if (b <= 0 || s <= 0) return 0;
    double hd = (double)head_dim_of(m), heads = m->heads > 0 ? m->heads : 0;
    double kvh = m->kv_heads > 0 ? m->kv_heads : 0, n = b * s;
    double q = n * heads * hd * 2, kv = n * kvh * hd * 2;
    /* Dsum (fp32 per query row) and, in the atomics form, the fp32 dQ accumulator */
    double shared = cudnn_align(n * heads * 4) + (deterministic ? 0 : cudnn_align(n * heads * hd * 4));
    /* the document layout's transposed Q, K, V and dQ, dK, dV */
    double transposes = 2 * cudnn_align(q) + 4 * cudnn_align(kv);
    double docs = LLMC_CUDNN_DOCS_PER_ROW * b, batch = 1;
    while (batch < docs && batch < LLMC_CUDNN_MAX_DOCS) batch *= 2;
    double plain = cudnn_align(shared + cudnn_engine(b, heads, s, hd, deterministic));
    double ragged = cudnn_align(transposes + shared + cudnn_engine(batch, heads, s, hd, deterministic));
    return fmax(plain, ragged);
}

/* Activation and scratch bytes of the llmc CUDA trainer, which allocates all
 * of it once, up front (runtime/cuda/model_cuda.c, cuda_model_create), for a
 * micro batch of n = b x s tokens. layers: what is kept across the forward
 * (the residual stream at every layer input, and every layer's set unless
 * recomputed); working: one layer's set under recompute plus the forward and
 * backward scratch. */
static void llmc_cuda_activations(const PlanModel *m, double s, double b, bool flash, Recompute rc,
                                  double *layers_bytes, double *working_bytes)
{
    bool recompute = rc == RECOMPUTE_FULL;
    double c = m->hidden, hd = (double)head_dim_of(m), heads = m->heads, f = m->ffn;
    double q = heads * hd, kv = m->kv_heads * hd, qkv = q + 2 * kv;
    double layers = m->layers > 0 ? m->layers : 0;
    double n = s * b;
    /* One layer's set: ln1, ln2, xmid (c), q and attention output (q), k, v,
     * gate+up (2 ffn) and silu(gate)*up (ffn) in bf16, two fp32 1/rms per
     * token, and the fp32 log-sum-exp (flash) or the bf16 scores (eager). */
    double layer = n * ((3 * c + 2 * q + 2 * kv + 3 * f) * 2 + 8) +
                   (flash ? n * 4 * heads : b * heads * s * s * 2) +
                   (m->qk_norm ? n * qkv * 2 : 0);   /* Qwen3: the QKV GEMM output before the head norms */
    /* Selective: the attention output and silu(gate)*up are recomputed in the
     * backward pass into one buffer each, shared by all layers. */
    double shared = rc == RECOMPUTE_SELECTIVE ? n * (q + f) * 2 : 0;
    double residual = (layers + 1) * n * c * 2;
    /* Forward scratch: fused qkv, o (eager), final norm output, its 1/rms,
     * losses, token ids / positions / targets; the loss accumulator, the
     * squared gradient norm with one partial per trained span, and the norm's
     * partial sums (fp32). */
    double fwd = n * (qkv * 2 + (flash ? 0 : q * 2) + c * 2 + 4 + 4 + 12) + (1 + LLMC_SUMSQ_SLOTS + LLMC_SUMSQ_BLOCKS) * 4;
    /* Backward scratch: d residual, d norm, d gate+up, d h, d attention,
     * dq, dk, dv, d qkv; flash's fp32 accumulators or eager's dO and dP. */
    double bwd = n * (2 * c + 3 * f + 3 * q + 4 * kv) * 2 +
                 (flash ? n * (3 * q + heads) * 4 : n * q * 2 + b * heads * s * s * 2);
    *layers_bytes = residual + (recompute ? 0 : layers * (layer - shared) + (layers > 0 ? shared : 0));
    *working_bytes = (recompute ? layer : 0) + fwd + bwd;
}

/* Ranks on one node: one per GPU; on CPU nodes the job's tasks (default 1). */
static int ranks_per_node(const PlanJob *job)
{
    if (!is_cpu_only(job->cluster)) return job->cluster->gpus_per_node;
    return job->tasks_per_node > 0 ? job->tasks_per_node : 1;
}

/* Cores (and BLAS threads) of one CPU rank. */
static int cpu_cores(const PlanJob *job)
{
    const PlanCluster *c = job->cluster;
    int cores = job->cpus_per_task > 0 ? job->cpus_per_task
                                       : (c->cpus > 0 ? c->cpus / ranks_per_node(job) : 1);
    return cores < 1 ? 1 : cores;
}

/* LoRA adapter parameters: rank x (d_in + d_out) for each targeted linear
 * layer of each decoder layer (lora_target empty: all seven). */
static double lora_params(const PlanTrain *t, const PlanModel *m)
{
    double hd = (double)head_dim_of(m), h = m->hidden, f = m->ffn;
    double q = m->heads * hd, kv = m->kv_heads * hd;
    double io[7] = {h + q, h + kv, h + kv, q + h, h + f, h + f, f + h};
    double per_layer = 0, experts = m->experts > 0 ? m->experts : 1;
    for (int k = 0; k < 7; k++)
        if (lora_targets(t, k)) per_layer += t->lora_rank * io[k] * (k >= 4 ? experts : 1);
    /* mixtral's router is a linear layer too ("all" targets it) */
    if (m->experts > 0 && t->nlora_target == 0) per_layer += t->lora_rank * (h + m->experts);
    return per_layer * (m->layers > 0 ? m->layers : 0);
}

/* What the plan trains and where its states live (TrainStates, estimate.h):
 * the one place the train block's method, quantisation and offload keys become
 * estimator inputs, for memory, FLOPs, communication and host memory alike. */
static TrainStates plan_train_states(const PlanTrain *t, const Estimate *e)
{
    double total = (double)e->params_total;
    TrainStates ts = {total, 0, 0, false, false};
    bool lora = t->method == METHOD_LORA || t->method == METHOD_QLORA;
    if (lora) { ts.trainable_params = lora_params(t, t->model); ts.frozen_params = total; }
    else if (t->method == METHOD_FREEZE) {
        ts.trainable_params = fmin(total, fabs((double)t->freeze_layers) * (double)e->params_per_layer);
        ts.frozen_params = total - ts.trainable_params;
    }
    /* llmc (no qlora): its offload is counted where its allocations are (estimate_memory, estimate_host) */
    if (t->backend != BACKEND_LLAMAFACTORY) return ts;
    if (t->method == METHOD_QLORA && t->quant_bits > 0 && ts.frozen_params > 0) {
        /* the decoder's linear layers at quant_bits plus one fp16 scale per block
         * of 64 (bitsandbytes); embeddings and norms stay 16-bit */
        double linear = fmax(0, total - (double)e->params_embedding);
        double fb = value_bytes(t->precision);
        ts.frozen_bytes_per_param = (fb * (ts.frozen_params - linear) + (t->quant_bits / 8.0 + 2.0 / 64) * linear) /
                                    ts.frozen_params;
    }
    ts.offload_optimizer = t->offload != OFFLOAD_NONE;
    ts.offload_params = t->offload == OFFLOAD_ALL;
    return ts;
}

/* GPU model states of a parameter-efficient or offloaded plan (LoRA, freeze,
 * qlora, DeepSpeed offload); full fine-tuning keeps estimate_model_states'. */
static void estimate_method_states(const PlanTrain *t, Precision prec, ShardStage shard, Estimate *e)
{
    if (t->backend != BACKEND_LLAMAFACTORY || (t->method == METHOD_FULL && t->offload == OFFLOAD_NONE)) return;
    TrainStates ts = plan_train_states(t, e);
    estimate_train_states(&ts, prec, shard, e->data_parallel, &e->weights_bytes, &e->grads_bytes,
                          &e->optimizer_bytes, NULL);
    double fb = value_bytes(prec), total = (double)e->params_total;
    double frozen_b = ts.frozen_bytes_per_param > 0 ? ts.frozen_bytes_per_param : fb;
    double unsharded = frozen_b * ts.frozen_params + (fb + fb + optimizer_bytes(prec)) * ts.trainable_params;
    e->model_bytes_per_param = total > 0 ? unsharded / total : 0;
}

/* What LLaMA-Factory's preference trainers run per sample (docs/estimator.md,
 * "Preference stages"): PairwiseDataCollatorWithPadding puts the chosen and
 * the rejected sequence of each pair in one micro batch (rm, dpo); the DPO
 * trainer runs the reference model forward over both, without gradient,
 * unless pref_loss is orpo or simpo (use_ref_model false); the KTO collator
 * adds one KL sequence per sample, which the policy runs forward without
 * gradient, and the reference runs forward over target and KL sequences.
 * create_ref_model: ref_model given, a copy of it; else with lora (qlora is
 * LF's lora on a quantised base) none, the policy with its adapters disabled;
 * else a frozen copy of the model. */
static void preference_shape(const PlanTrain *t, Estimate *e)
{
    bool dpo_ref = t->stage == STAGE_DPO && t->pref_loss != PREF_ORPO && t->pref_loss != PREF_SIMPO;
    e->seqs_per_sample = t->stage == STAGE_RM || t->stage == STAGE_DPO ? 2 : 1;
    e->nograd_seqs_per_sample = dpo_ref ? 2 : t->stage == STAGE_KTO ? 3 : 0;
    e->reference = REF_NONE;
    e->reference_params = 0;
    if (!dpo_ref && t->stage != STAGE_KTO) return;
    bool lora = t->method == METHOD_LORA || t->method == METHOD_QLORA;
    if (!t->ref_model && lora) { e->reference = REF_ADAPTERS_OFF; return; }
    e->reference = REF_COPY;
    e->reference_params = t->ref_model ? (double)estimate_params(t->ref_model, NULL, NULL) : (double)e->params_total;
}

void estimate_memory(const PlanJob *job, int micro_batch, Recompute rc, ShardStage shard,
                     Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanModel *m = t->model;
    const PlanCluster *c = job->cluster;
    bool cpu = is_cpu_only(c);
    int nodes = job->nodes > 0 ? job->nodes : 1;
    int per_node = ranks_per_node(job);

    e->cpu_only = cpu;
    e->world_size = nodes * per_node;
    e->data_parallel = e->world_size;
    e->params_total = estimate_params(m, &e->params_embedding, &e->params_per_layer);

    /* The CPU backend computes in fp32 whatever the plan's precision says. */
    Precision prec = cpu ? PREC_FP32 : t->precision;
    double bpv = value_bytes(prec);
    /* 2 + 2 + 12 mixed, 4 + 4 + 8 fp32, 2 + 2 + 4 pure_bf16 */
    e->model_bytes_per_param = 2 * bpv + optimizer_bytes(prec);
    e->activation_bytes_per_value = bpv;
    estimate_model_states((double)e->params_total, prec, shard, e->data_parallel,
                          &e->weights_bytes, &e->grads_bytes, &e->optimizer_bytes);
    estimate_method_states(t, prec, shard, e);
    preference_shape(t, e);
    /* optim (llamafactory): the optimizer's own states instead of AdamW's */
    if (t->backend == BACKEND_LLAMAFACTORY && !cpu && optimizer_bytes(prec) > 0) {
        double ob = optimizer_bytes(prec), os_ = optim_state_bytes(prec, t->optim);
        e->optimizer_bytes *= os_ / ob;
        TrainStates ts = plan_train_states(t, e);
        if (e->params_total > 0)
            e->model_bytes_per_param -= (ob - os_) * ts.trainable_params / (double)e->params_total;
    }

    /* Activations at the worst case: a micro batch padded to the full context.
     * The llamafactory backend runs transformers' layers, which keep more;
     * the llmc backend on GPUs is our CUDA trainer, whose allocations are known. */
    bool hf = t->backend == BACKEND_LLAMAFACTORY && !cpu;
    bool llmc_cuda = !hf && !cpu && prec != PREC_FP32;
    e->activations_transformers = hf;
    e->llmc_cuda_allocation = llmc_cuda;
    e->fp8_weights_bytes = e->fp8_scratch_bytes = 0;
    if (llmc_cuda) {
        /* bf16 weights and fp32 gradients over the whole (padded) flat buffer,
         * fp32 master weights and Adam m, v over this rank's shard: 2 + 4 + 12
         * bytes per parameter (ZeRO-0/1). */
        double flat = llmc_cuda_flat_params(m, e->world_size);
        double world = e->world_size > 1 ? e->world_size : 1;
        double shard_len = shard >= SHARD_ZERO1 && world > 1 ? flat / world : flat;
        double k = llmc_state_bytes(t);
        e->weights_bytes = 2 * flat;
        e->grads_bytes = 4 * flat;
        e->optimizer_bytes = k * shard_len;
        e->model_bytes_per_param = 6 + k;
        if (llmc_cuda_zero(t, shard, world)) {
            /* ZeRO-2/3 (model_cuda.c zero_alloc): the shard's fp32 gradient,
             * two layer buckets and the last unit's (embedding, head, final
             * norm) in fp32; ZeRO-3 keeps the shard's bf16 weights and gathers
             * a layer into one of two layer buffers (the next one prefetched)
             * and the last unit into its own; master and moments over the
             * shard, in pinned host memory under offload. Shards are whole
             * GRAD_NORM_BLOCKs; a unit's two ranges keep their alignment (one
             * LLMC_ALIGN_ELEMS of slack each). */
            double matrices, vectors, layers_n = m->layers > 0 ? m->layers : 0;
            llmc_cuda_layer_slices(m, &matrices, &vectors);
            double unit = matrices + vectors + 2 * LLMC_ZERO_ALIGN_ELEMS;
            double tail = flat - layers_n * (matrices + vectors) + 2 * LLMC_ZERO_ALIGN_ELEMS;
            double blocks = ceil(flat / LLMC_GRAD_NORM_BLOCK_N);
            double zshard = ceil(blocks / world) * LLMC_GRAD_NORM_BLOCK_N;
            e->weights_bytes = shard == SHARD_ZERO3 ? 2 * (zshard + 2 * unit + tail) : 2 * flat;
            /* + the norm's fp32 sum per block */
            e->grads_bytes = 4 * (zshard + 2 * unit + tail) + 4 * blocks;
            e->optimizer_bytes = t->offload == OFFLOAD_OPTIMIZER ? 0 : k * zshard;
            e->model_bytes_per_param = (shard == SHARD_ZERO3 ? 2 : 2 * world) / world + 4 / world +
                                       (t->offload == OFFLOAD_OPTIMIZER ? 0 : k / world);
        } else if (t->offload == OFFLOAD_OPTIMIZER && t->method == METHOD_FULL) {   /* master and moments in host memory */
            double chunk = fmin(LLMC_OFFLOAD_CHUNK, ceil(flat / 64) * 64);
            e->optimizer_bytes = LLMC_OFFLOAD_SETS * 3 * chunk * 4;
            e->model_bytes_per_param = 6;
        }
    }
    double s = t->context > 0 ? t->context : 0;
    /* Pairs: the micro batch carries chosen and rejected sequences. */
    double b = micro_batch > 0 ? (double)micro_batch * e->seqs_per_sample : 0;
    double h = m->hidden, layers = m->layers > 0 ? m->layers : 0;
    bool flash = t->attention == ATTN_FLASH && (!llmc_cuda || estimate_llmc_cuda_flash(m, t->context));
    /* mixtral: each token's activations go through experts_per_token experts,
     * counted as one MLP that wide */
    PlanModel act = *m;
    if (m->experts > 0 && m->experts_per_token > 0) act.ffn = m->ffn * m->experts_per_token;
    double layer_all = hf ? estimate_hf_layer(&act, s, b, flash, bpv)
                          : estimate_llama_layer(&act, s, b, flash, RECOMPUTE_NONE, bpv);
    /* Backward of the layer in flight holds the gradients of SwiGLU's product,
     * silu output and up projection at once (3 ffn values per token). */
    double grad_buffers = 3.0 * s * b * act.ffn * bpv;
    double head_in = 2 * s * b * h * bpv;   /* final RMSNorm input, lm_head input */
    if (llmc_cuda) {
        llmc_cuda_activations(m, s, b, flash, rc,
                              &e->activations_layers_bytes, &e->activations_working_bytes);
        if (t->method == METHOD_LORA || t->method == METHOD_FREEZE) llmc_cuda_finetune(t, m, s * b, rc, e);
        if (t->precision == PREC_FP8) llmc_cuda_fp8(m, s * b, e);
        head_in = 0;                          /* in the residual stream and scratch */
    } else if (rc == RECOMPUTE_FULL) {
        e->activations_layers_bytes = layers * s * b * h * bpv;  /* each layer's input */
        e->activations_working_bytes = layer_all + grad_buffers;
    } else {
        /* transformers has no selective recomputation: it keeps everything. */
        double kept = rc == RECOMPUTE_SELECTIVE && !hf
                          ? estimate_llama_layer(&act, s, b, flash, rc, bpv) : layer_all;
        e->activations_layers_bytes = layers * kept;
        e->activations_working_bytes = grad_buffers;
    }
    e->activations_bytes = e->activations_layers_bytes + e->activations_working_bytes + head_in;
    /* The trainer's attention for such shapes is cuDNN's: its backward with
     * fp32 atomics, or under deterministic (the default) its deterministic form
     * when that workspace fits (checked below, as the trainer checks it);
     * the workspace comes on top of the flash kernels' buffers, which stay
     * allocated for the micro batches cuDNN declines. */
    e->attn_cudnn = llmc_cuda && flash && estimate_llmc_cuda_cudnn(m, t->context);
    e->attn_cudnn_deterministic = e->attn_cudnn && t->deterministic;
    e->attn_workspace_bytes = e->attn_cudnn ? estimate_llmc_cudnn_workspace(m, b, s, t->deterministic) : 0;

    if (llmc_cuda) {
        /* bf16 logits of at most LLMC_CE_CHUNK_ROWS rows at a time, turned
         * into their gradient in place; the buffer is at least the column-sum
         * scratch it doubles as (which only tiny shapes reach). */
        double hd = (double)head_dim_of(m), qkv = (m->heads + 2.0 * m->kv_heads) * hd;
        double colsum = 4 * fmax(LLMC_RMS_BWD_MAX_BLOCKS * h, LLMC_BIAS_GRAD_SPLITS * qkv);
        if (m->qk_norm) colsum = fmax(colsum, 4 * LLMC_HEAD_NORM_BLOCKS * 2 * hd);
        e->logits_chunked = true;
        e->logits_chunk_rows = fmin(s * b, LLMC_CE_CHUNK_ROWS);
        e->logits_bytes_per_value = 2;
        e->logits_bytes = fmax(2 * e->logits_chunk_rows * m->vocab, colsum);
    } else if (hf && t->liger_kernel) {
        /* enable_liger_kernel: Liger's fused linear cross-entropy never holds
         * the whole b x s x V logits: chunks of 2^ceil(log2(b x s / ceil(V / h)))
         * rows, 16-bit then fp32 (gradient in place), and the 16-bit gradient
         * of the lm_head input */
        double rows = s * b, ratio = ceil((double)m->vocab / (h > 0 ? h : 1));
        double chunk = rows > 0 ? pow(2, ceil(log2(fmax(1, ceil(rows / ratio))))) : 0;
        e->logits_chunked = true;
        e->logits_chunk_rows = fmin(rows, chunk);
        e->logits_bytes_per_value = bpv + 4;
        e->logits_bytes = e->logits_bytes_per_value * e->logits_chunk_rows * m->vocab + rows * h * bpv;
    } else {
        /* Logits and their gradient in fp32, not chunked; transformers also
         * keeps the 16-bit logits the lm_head wrote, while it upcasts them. */
        e->logits_chunked = false;
        e->logits_chunk_rows = s * b;
        e->logits_bytes_per_value = hf && bpv < 4 ? 8 + bpv : 8;
        e->logits_bytes = e->logits_bytes_per_value * s * b * m->vocab;
    }

    /* The reference model: a separate frozen copy keeps its 16-bit weights
     * on every GPU (trl's prepare_deepspeed shards it only under ZeRO-3; at
     * other stages it runs with ZeRO disabled); its forward (and kto's KL
     * forward) runs without gradient while the policy's activations are kept,
     * and its logits (16-bit, then upcast to fp32) are alive at the peak:
     * dpo over the 2 x b pair sequences, kto over b target sequences kept
     * while the b KL sequences run. */
    e->reference_bytes = 0;
    e->reference_logits_bytes = 0;
    if (e->reference == REF_COPY) {
        double rb = e->reference_params * bpv;
        e->reference_bytes = shard == SHARD_ZERO3 && e->data_parallel > 1 ? rb / e->data_parallel : rb;
    }
    if (e->nograd_seqs_per_sample > 0) {
        double seqs = micro_batch > 0 ? 2.0 * micro_batch : 0;
        e->reference_logits_bytes = (bpv + 4) * seqs * s * m->vocab;
    }

    /* The llmc CUDA trainer all-reduces, reduce-scatters and all-gathers in
     * place on its flat buffers (NCCL's own buffers are in the context). */
    if (cpu || llmc_cuda) e->comm_bytes = 0;
    else e->comm_bytes = comm_buffers(m, (double)e->params_total, shard, e->data_parallel, bpv, hf);

    double tensors = e->weights_bytes + e->grads_bytes + e->optimizer_bytes +
                     e->activations_bytes + e->attn_workspace_bytes + e->logits_bytes + e->comm_bytes +
                     e->reference_bytes + e->reference_logits_bytes + e->fp8_weights_bytes + e->fp8_scratch_bytes;
    e->reserve_context_bytes = cpu ? CPU_PROCESS_BYTES + cpu_cores(job) * CPU_BLAS_THREAD_BYTES
                                   : GPU_CONTEXT_BYTES;
    /* A caching allocator fragments; the llmc trainer allocates once, up front. */
    e->reserve_fragmentation_bytes = llmc_cuda ? 0 : FRAGMENTATION_SHARE * tensors;
    e->reserve_bytes = e->reserve_context_bytes + e->reserve_fragmentation_bytes;
    e->total_bytes = tensors + e->reserve_bytes;

    if (cpu) {
        /* The node's memory (or the job's --mem), shared by its ranks. */
        uint64_t mem = job->mem_bytes ? job->mem_bytes : c->memory_bytes;
        e->usable_bytes = (double)mem / per_node;
    } else {
        e->usable_bytes = c->gpu->usable_bytes;
    }
    /* The trainer takes cuDNN's deterministic workspace only when it fits
     * beside LLMC_CUDNN_RESERVE_GIB (2) free; else the flash kernels'
     * deterministic pass, with no workspace (runtime/cuda/model_cuda.c). */
    if (e->attn_cudnn_deterministic && e->usable_bytes > 0 &&
        e->total_bytes + 2 * GIB > e->usable_bytes) {
        e->total_bytes -= e->attn_workspace_bytes;
        e->attn_workspace_bytes = 0;
        e->attn_cudnn = e->attn_cudnn_deterministic = false;
    }
    e->fits = e->usable_bytes <= 0 || e->total_bytes <= e->usable_bytes;
}

/* Memory only grows with the batch, so search by doubling, then bisect. */
static int max_fitting_batch(const PlanJob *job, Recompute rc, ShardStage shard)
{
    Estimate probe;
    memset(&probe, 0, sizeof probe);
    estimate_memory(job, 1, rc, shard, &probe);
    if (probe.usable_bytes <= 0) return -1;
    if (!probe.fits) return 0;
    int lo = 1, hi = 2;
    for (;;) {
        estimate_memory(job, hi, rc, shard, &probe);
        if (!probe.fits) break;
        lo = hi;
        if (hi >= MAX_BATCH_SEARCH) return hi;
        hi *= 2;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        estimate_memory(job, mid, rc, shard, &probe);
        if (probe.fits) lo = mid; else hi = mid;
    }
    return lo;
}

/* ---- data and time ------------------------------------------------------ */

const char *estimate_token_source_name(TokenSource s)
{
    switch (s) {
    case TOKENS_STATED: return "stated";
    case TOKENS_FROM_STATS: return "prepare stats";
    case TOKENS_FROM_SIZE: return "file size";
    case TOKENS_FROM_SAMPLES: return "samples x context";
    case TOKENS_UNKNOWN: return "unknown";
    }
    return "unknown";
}

/* Size of a regular file, or 0 when it cannot be read from here. */
static double file_size(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    return (double)st.st_size;
}

/* The stats file `llmc-train prepare` is to leave beside a dataset:
 * FILE.stats.json = {"format": "llmc-data-stats", "version": 1, "records": N,
 * "tokens": T, "length_histogram": {"bin_tokens": W, "counts": [c0, c1, ...]}}
 * (docs/estimator.md, "The stats file"); bin i holds records of i*W to
 * (i+1)*W - 1 tokens. Read when reachable from here; false otherwise. */
bool estimate_read_stats(const char *data_file, DataStats *st)
{
    memset(st, 0, sizeof *st);
    if (!data_file) return false;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s.stats.json", data_file) >= sizeof path) return false;
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, fp) : 0;
    fclose(fp);
    if (!buf) return false;
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(o, "version");
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(o, "records");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    bool ok = cJSON_IsString(fmt) && strcmp(fmt->valuestring, "llmc-data-stats") == 0 && cJSON_IsNumber(ver) &&
              ver->valuedouble == 1 && cJSON_IsNumber(rec) && rec->valuedouble >= 1 && rec->valuedouble < 1e15 &&
              cJSON_IsNumber(tok) && tok->valuedouble >= 0 && tok->valuedouble < 1e18;
    if (ok) {
        st->records = floor(rec->valuedouble);
        st->tokens = floor(tok->valuedouble);
        const cJSON *hist = cJSON_GetObjectItemCaseSensitive(o, "length_histogram");
        const cJSON *bin = cJSON_GetObjectItemCaseSensitive(hist, "bin_tokens");
        const cJSON *counts = cJSON_GetObjectItemCaseSensitive(hist, "counts");
        if (cJSON_IsNumber(bin) && bin->valuedouble >= 1 && bin->valuedouble <= 1e7 && cJSON_IsArray(counts) &&
            cJSON_GetArraySize(counts) >= 1 && cJSON_GetArraySize(counts) <= STATS_MAX_BINS) {
            double sum = 0;
            const cJSON *c;
            st->bin = floor(bin->valuedouble);
            cJSON_ArrayForEach(c, counts) {
                if (!cJSON_IsNumber(c) || !(c->valuedouble >= 0) || c->valuedouble > 1e15) { st->nbins = 0; sum = -1; break; }
                st->counts[st->nbins++] = c->valuedouble;
                sum += c->valuedouble;
            }
            if (!(sum > 0)) st->nbins = 0;
        }
    }
    cJSON_Delete(o);
    return ok;
}

/* Expected length of the longest of b records drawn from the histogram (each
 * bin at its upper end, capped at the context): a micro batch padded to its
 * longest record. E[max] = sum_i x_i (F_i^b - F_{i-1}^b). */
double estimate_padded_length(const double *counts, int nbins, double bin, int b, double context)
{
    double total = 0;
    for (int i = 0; i < nbins; i++) total += counts[i];
    if (!(total > 0) || b < 1) return 0;
    double cum = 0, prev = 0, e = 0;
    for (int i = 0; i < nbins; i++) {
        cum += counts[i];
        double f = pow(cum / total, b);
        double x = fmin((i + 1) * bin - 1, context);
        e += x * (f - prev);
        prev = f;
    }
    return e;
}

/* E[min(X, c)] for X exponential with mean theta. */
static double exp_cut_mean(double theta, double c)
{
    return theta * -expm1(-c / theta);
}

double estimate_padded_length_mean(double mean, int b, double context)
{
    if (!(mean > 0) || b < 1) return 0;
    if (!(context > 0) || mean >= 0.999 * context) return context > 0 ? fmin(mean, context) : mean;
    /* theta such that the cut mean is the stated one (the cut mean grows with theta) */
    double lo = mean, hi = mean;
    while (exp_cut_mean(hi, context) < mean && hi < 1e12 * mean) hi *= 2;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (exp_cut_mean(mid, context) < mean) lo = mid; else hi = mid;
    }
    double theta = 0.5 * (lo + hi);
    /* E[max of b] = integral over [0, c] of 1 - F(x)^b (Simpson's rule);
     * past 60 theta the integrand is below b e^-60 */
    int n = 8192;
    double h = fmin(context, 60 * theta) / n, sum = 0;
    for (int i = 0; i <= n; i++) {
        double f = 1 - pow(-expm1(-i * h / theta), b);
        sum += (i == 0 || i == n ? 1 : i % 2 ? 4 : 2) * f;
    }
    return sum * h / 3;
}

/* Tokens and sequences per epoch, summed over the datasets. Returns the first
 * dataset with nothing to count from, or NULL. */
static const PlanDataset *count_tokens(const PlanTrain *t, Estimate *e)
{
    const PlanDataset *missing = NULL;
    double ctx = t->context > 0 ? t->context : 1;
    double bpt = t->bytes_per_token > 0 ? t->bytes_per_token : 4.0;
    bool packed = t->packing;
    TokenSource worst = TOKENS_STATED;
    double tokens = 0, sequences = 0, samples = 0;
    static double hist[STATS_MAX_BINS];
    memset(hist, 0, sizeof hist);
    double hist_bin = 0;
    int hist_n = 0;
    bool hist_mixed = false;

    /* Pairs (rm, dpo): every sample is two sequences, each cut at the context. */
    double seqs = e->seqs_per_sample > 1 ? e->seqs_per_sample : 1;
    /* each dataset's share, for an interleaved mixture (below) */
    struct { double tokens, samples, sequences; } *mix =
        t->backend == BACKEND_LLAMAFACTORY && t->mix != MIX_CONCAT && t->ndata > 1 ? calloc((size_t)t->ndata, sizeof *mix) : NULL;
    for (int i = 0; i < t->ndata; i++) {
        const PlanDataset *ds = t->data[i];
        double cap = ds->samples > 0 ? (double)ds->samples * ctx * seqs : INFINITY;
        double tk, on_disk;
        TokenSource src;
        DataStats *st = calloc(1, sizeof *st);
        bool have_stats = st && ds->tokens < 0 && estimate_read_stats(ds->file, st);
        if (ds->tokens >= 0) {
            tk = (double)ds->tokens; src = TOKENS_STATED;
        } else if (have_stats) {
            /* Measured by prepare: its tokens and records. */
            tk = st->tokens; src = TOKENS_FROM_STATS;
            if (ds->samples <= 0) cap = st->records * ctx * seqs;
            if (st->nbins > 0 && !packed) {
                if (hist_bin == 0 || hist_bin == st->bin) {
                    hist_bin = st->bin;
                    for (int k = 0; k < st->nbins; k++) hist[k] += st->counts[k];
                    if (st->nbins > hist_n) hist_n = st->nbins;
                } else {
                    hist_mixed = true;
                }
            } else if (!packed) {
                hist_mixed = true;
            }
        } else if (ds->size_bytes > 0) {
            tk = (double)ds->size_bytes / bpt; src = TOKENS_FROM_SIZE;
        } else if ((on_disk = file_size(ds->file)) > 0) {
            /* Reachable at compile time (a local plan): its size, not a guess. */
            tk = on_disk / bpt; src = TOKENS_FROM_SIZE;
            e->size_read_from_file = true;
        } else if (ds->samples > 0) {
            tk = cap; src = TOKENS_FROM_SAMPLES;
        } else {
            if (!missing) missing = ds;
            worst = TOKENS_UNKNOWN;
            free(st);
            continue;
        }
        /* A sample longer than the context is truncated to it. */
        if (tk > cap) tk = cap;
        if (src > worst) worst = src;
        if (!have_stats) hist_mixed = true;
        double nsamples = ds->samples > 0 ? (double)ds->samples : have_stats ? st->records : -1;
        if (nsamples <= 0) e->samples_unknown = true;
        double n_i = nsamples > 0 ? nsamples : ceil(tk / ctx);
        /* max_samples (llamafactory): each dataset cut to its first N samples */
        if (t->backend == BACKEND_LLAMAFACTORY && t->max_samples > 0 && n_i > (double)t->max_samples) {
            double keep = (double)t->max_samples / n_i;
            tk *= keep;
            n_i = (double)t->max_samples;
            if (nsamples > 0) nsamples = n_i;
        }
        /* Packed: sequences are full contexts. Unpacked: one sequence per sample;
         * with no sample count, samples are taken as full-context long. */
        double seq_i = packed || nsamples <= 0 ? ceil(tk / ctx) : nsamples * seqs;
        if (mix) { mix[i].tokens = tk; mix[i].samples = n_i; mix[i].sequences = seq_i; }
        tokens += tk;
        samples += n_i;
        sequences += seq_i;
        free(st);
    }
    /* Interleaved mixtures (LLaMA-Factory's merge_dataset, datasets'
     * interleave_datasets): each sample drawn from dataset i with probability
     * p_i (equal without interleave_probs), stopping when the first dataset is
     * exhausted (under: S = min n_i / p_i samples), when all are, repeating the
     * others (over: max n_i / p_i), or when all are without repeating (once:
     * every sample once, as concat). Dataset i gives p_i x S of its samples. */
    if (mix && !missing && (t->mix == MIX_INTERLEAVE_UNDER || t->mix == MIX_INTERLEAVE_OVER) && t->ndata > 1) {
        double S = t->mix == MIX_INTERLEAVE_UNDER ? INFINITY : 0;
        for (int i = 0; i < t->ndata; i++) {
            double p = t->ninterleave_probs == t->ndata ? t->interleave_probs[i] : 1.0 / t->ndata;
            double r = mix[i].samples > 0 ? mix[i].samples / p : 0;
            S = t->mix == MIX_INTERLEAVE_UNDER ? fmin(S, r) : fmax(S, r);
        }
        tokens = samples = sequences = 0;
        for (int i = 0; i < t->ndata && isfinite(S); i++) {
            double p = t->ninterleave_probs == t->ndata ? t->interleave_probs[i] : 1.0 / t->ndata;
            double f = mix[i].samples > 0 ? p * S / mix[i].samples : 0;
            tokens += f * mix[i].tokens;
            samples += f * mix[i].samples;
            sequences += ceil(f * mix[i].sequences);
        }
        e->mix_scaled = true;
    }
    free(mix);
    e->tokens_source = worst;
    e->tokens_measured = worst <= TOKENS_FROM_STATS;
    /* Unpacked: every dataset's histogram known (one bin width) decides the
     * padding; else none is counted (stated as an assumption). */
    e->padding_from_stats = e->padding_assumed = e->padding_full_rows = false;
    int rows = (t->micro_batch > 0 ? t->micro_batch : 1) * (int)seqs;
    if (!packed && t->backend == BACKEND_LLMC) {
        /* prepare pads every unpacked record to a row of the context, and the
         * trainer computes whole rows */
        e->padded_seq_tokens = ctx;
        e->padding_full_rows = true;
    } else if (!packed && !hist_mixed && hist_n > 0 && t->ndata > 0) {
        double p = estimate_padded_length(hist, hist_n, hist_bin, rows, ctx);
        if (p > 0) { e->padded_seq_tokens = p; e->padding_from_stats = true; }
    } else if (!packed && !missing && !e->samples_unknown && sequences > 0 && rows > 1) {
        /* no histogram: the mean sample length and a stated distribution */
        double p = estimate_padded_length_mean(tokens / sequences, rows, ctx);
        if (p > 0) { e->padded_seq_tokens = p; e->padding_assumed = true; }
    }
    e->tokens_per_epoch = tokens;
    e->samples_per_epoch = samples;
    e->sequences_per_epoch = sequences;
    e->seq_tokens = sequences > 0 ? tokens / sequences : 0;
    if (!(e->padded_seq_tokens >= e->seq_tokens)) e->padded_seq_tokens = e->seq_tokens;
    return missing;
}

static double matmul_params(const PlanModel *m, const Estimate *e)
{
    /* The input embedding is a lookup, not a matmul; a tied matrix still
     * multiplies as the lm_head. */
    double n = (double)e->params_total;
    if (!m->tie_embeddings) n -= (double)m->vocab * m->hidden;
    /* mixtral: a token runs through experts_per_token of the experts */
    if (m->experts > 0 && m->experts_per_token > 0 && m->layers > 0)
        n -= (double)m->layers * (m->experts - m->experts_per_token) * 3.0 * m->hidden * m->ffn;
    return n;
}


/* Time of `count` collectives moving `bytes` of tensor in all; adds the terms
 * to the estimate's sums and returns max(intra, inter) + latency. */
static double coll_time(const Fabric *f, CollKind k, double bytes, double count, double launch, Estimate *e)
{
    if (bytes <= 0 || count <= 0) return 0;
    double sent, intra, inter, lat;
    estimate_collective(f, k, bytes, &sent, &intra, &inter, &lat);
    double latency = count * (lat + launch);
    e->comm_sent_bytes += sent;
    e->comm_intra_seconds += intra;
    e->comm_inter_seconds += inter;
    e->comm_latency_seconds += latency;
    return fmax(intra, inter) + latency;
}

/* The collectives of one optimizer step and what of them hides under compute
 * (docs/estimator.md, "Communication"). fwd_share: the first forward's share
 * of a micro-step's FLOPs. */
/* DeepSpeed's hierarchical partitioning (ZeRO++ hpZ, zero_hpz_partition_size)
 * for the estimate in progress: 0 off, else the GPUs of the secondary group.
 * Only the remedy estimate (estimate_job_hpz) sets it; the emitter writes no
 * such key yet. */
static int hpz_group;

static void estimate_step_comm(const PlanJob *job, Estimate *e, const TrainStates *ts, double fwd_share,
                               double *gather_pass_s)
{
    *gather_pass_s = 0;
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    int nodes = job->nodes > 0 ? job->nodes : 1;
    Fabric f = {nodes, c->gpus_per_node, c->link_bytes_per_s, c->nics, c->nic_bits_per_s, c->network_roce, 0, 0};
    estimate_profile_fabric(job, &f, e);
    e->fabric_known = !e->cpu_only && (c->gpus_per_node <= 1 || f.link_bytes_per_s > 0 || f.intra_eff_bytes_per_s > 0) &&
                      (nodes <= 1 || (f.nics > 0 && f.nic_bits_per_s > 0) || f.inter_eff_bytes_per_s > 0);
    if (e->cpu_only || e->data_parallel <= 1 || !e->fabric_known) return;
    bool llmc = t->backend == BACKEND_LLMC;
    ShardStage shard = t->shard;
    int ga = t->grad_accum > 0 ? t->grad_accum : 1;
    CommVolume v;
    estimate_comm_volume(t->model, ts, shard, llmc, t->precision, t->recompute, ga, e->data_parallel, &v);
    e->comm_allgather_bytes = v.allgather_bytes;
    e->comm_reduce_scatter_bytes = v.reduce_scatter_bytes;
    e->comm_allreduce_bytes = v.allreduce_bytes;
    e->comm_collectives = v.collectives;

    double micro = e->compute_seconds / ga;
    double fwd = micro * fwd_share, bwd = micro - fwd;
    double layers = t->model->layers > 0 ? t->model->layers : 0;
    double total = 0, exposed = 0;
    if (llmc) {
        if (shard >= SHARD_ZERO2) {
            /* ZeRO-2/3 (model_cuda.c): each unit's gradients reduced on the
             * communication stream as backward finishes it (hidden under the
             * rest of backward); ZeRO-3 gathers the next layer while this one
             * computes (hidden under forward and backward, but the first);
             * ZeRO-2 gathers the updated weights after AdamW (exposed). */
            double steps_c = ga * (fwd + bwd);
            double rs = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_bytes, (layers + 1) * ga,
                                  COLL_LAUNCH_NCCL_S, e);
            double ag = coll_time(&f, COLL_ALL_GATHER, v.allgather_bytes,
                                  shard == SHARD_ZERO3 ? 2 * (layers + 1) * ga : 1, COLL_LAUNCH_NCCL_S, e);
            double ar = coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, 1, COLL_LAUNCH_NCCL_S, e);
            total = rs + ag + ar;
            exposed = fmax(0, rs - ga * bwd) + rs / ((layers + 1) * ga) + ar +
                      (shard == SHARD_ZERO3 ? fmax(0, ag - steps_c) + ag / (2 * (layers + 1) * ga) : ag);
            if (exposed > total) exposed = total;
        } else if (shard >= SHARD_ZERO1) {
            /* On the compute stream, after backward and around AdamW. */
            total = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_bytes, 1, COLL_LAUNCH_NCCL_S, e) +
                    coll_time(&f, COLL_ALL_GATHER, v.allgather_bytes, 1, COLL_LAUNCH_NCCL_S, e) +
                    coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, 1, COLL_LAUNCH_NCCL_S, e);
            exposed = total;
        } else {
            /* Per-layer buckets on the communication stream while backward goes
             * on (last micro-step only); the last bucket waits for the end. */
            total = coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, layers + 1, COLL_LAUNCH_NCCL_S, e);
            exposed = fmax(0, total - bwd) + total / (layers + 1);
            if (exposed > total) exposed = total;
        }
    } else if (shard == SHARD_ZERO3) {
        /* Prefetch hides the gathers under forward and backward compute (the
         * recomputed forward's with backward's: it runs inside backward), all
         * but the first module's; overlap_comm is off as emitted, so the
         * reduce-scatter of each bucket waits for nothing else. */
        const PlanModel *m = t->model;
        double modules = layers * ZERO3_MODULES_PER_LAYER + (m->tie_embeddings ? 1 : 2);
        double h = m->hidden > 0 ? m->hidden : 1;
        double buckets = ceil(ts->trainable_params / (h * h));
        double passes = zero3_gather_passes(t->recompute);
        double ag = coll_time(&f, COLL_ALL_GATHER, v.allgather_per_micro / passes, modules, COLL_LAUNCH_DS_S, e);
        /* hpZ: the gathers after the forward's come from the secondary copy
         * partitioned inside the group (a node): its GPU links only. */
        Fabric fb = f;
        if (hpz_group > 1) { fb.nodes = 1; fb.gpus_per_node = hpz_group; }
        double ag2 = coll_time(&fb, COLL_ALL_GATHER, v.allgather_per_micro * (passes - 1) / passes,
                               (passes - 1) * modules, COLL_LAUNCH_DS_S, e);
        double rs = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_per_micro, buckets, COLL_LAUNCH_DS_S, e);
        *gather_pass_s = ag;
        double first = modules > 0 ? ag / modules : 0;
        double ex = fmin(ag, fmax(0, ag - fwd) + first) + fmin(ag2, fmax(0, ag2 - bwd) + first) + rs;
        /* ga micro-steps alike: scale the sums of one by ga. */
        e->comm_sent_bytes *= ga; e->comm_intra_seconds *= ga; e->comm_inter_seconds *= ga;
        e->comm_latency_seconds *= ga;
        total = ga * (ag + ag2 + rs);
        exposed = ga * ex;
    } else {
        /* DeepSpeed stages 0-2 with overlap_comm off: nothing overlaps. */
        double bucket = 5e8, tr = ts->trainable_params;
        double n = ceil(tr / bucket);
        if (shard == SHARD_NONE)
            total = coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, n, COLL_LAUNCH_DS_S, e);
        else
            total = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_bytes, shard == SHARD_ZERO2 ? ga * n : n,
                              COLL_LAUNCH_DS_S, e) +
                    coll_time(&f, COLL_ALL_GATHER, v.allgather_bytes, n, COLL_LAUNCH_DS_S, e);
        exposed = total;
    }
    e->comm_seconds = total;
    e->comm_exposed_seconds = exposed;
    e->comm_overlap_seconds = total - exposed;
    e->comm_bound = total > e->compute_seconds;
}

/* OpenMP threads of each rank's CPU Adam: OMP_NUM_THREADS when the job's
 * environment sets it; else torchrun's default of 1 when a node runs several
 * ranks (LLaMA-Factory launches torchrun, which sets it unless it is set);
 * else the rank's cores. Never more than the rank's cores. */
static int cpu_adam_threads(const PlanJob *job)
{
    int cores = job->cluster->cpus > 0 ? cpu_cores(job) : 0;
    int threads = ranks_per_node(job) > 1 ? 1 : (cores > 0 ? cores : 1);
    for (int i = 0; i < job->site.nenv; i++) {
        const PlanEnvVar *v = &job->site.env[i];
        if (!v->name || !v->value || strcmp(v->name, "OMP_NUM_THREADS") != 0) continue;
        char *end;
        long n = strtol(v->value, &end, 10);
        if (end != v->value && *end == 0 && n >= 1 && n <= 1 << 16) threads = (int)n;
    }
    if (cores > 0 && threads > cores) threads = cores;
    return threads;
}

/* The offload part of one optimizer step (docs/estimator.md, "Offload
 * time"): PCIe copies and DeepSpeed's CPU Adam. The gradient copies go with
 * the reduce-scatter and wait like it (overlap_comm false as emitted); with
 * offload = all each gather first fetches the rank's partition from the host,
 * which prefetch hides as it hides the gather (gather_pass_s: one gather of
 * every weight, 0 when not estimated); the CPU step and the upload after it wait. */
static void estimate_step_offload(const PlanJob *job, Estimate *e, const TrainStates *ts, double fwd_share,
                                  double gather_pass_s)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    if (!e->cpu_only && t->backend == BACKEND_LLMC && t->offload == OFFLOAD_OPTIMIZER && c->host_link_bytes_per_s > 0) {
        /* llmc-train-cuda (model_cuda.c, offload_adamw): fp32 master, m and v
         * up and back each optimizer step, 12 bytes per parameter each way,
         * both directions at once; AdamW runs on the GPU. The step waits for
         * the uploads (and the update, negligible beside them); the downloads
         * finish behind the next forward pass. */
        double n = (double)e->params_total, link = c->host_link_bytes_per_s / 2 * HOST_LINK_EFFICIENCY;
        e->offload_time_known = true;
        e->offload_d2h_bytes = e->offload_h2d_bytes = 12 * n;
        e->offload_pcie_seconds = 24 * n / link;
        e->offload_pcie_exposed_seconds = 12 * n / link;
        e->offload_exposed_seconds = e->offload_pcie_exposed_seconds;
        e->offload_bound = e->offload_exposed_seconds > fmax(e->compute_seconds, e->comm_seconds);
        return;
    }
    if (e->cpu_only || t->backend != BACKEND_LLAMAFACTORY || !ts->offload_optimizer || t->shard < SHARD_ZERO1 ||
        c->host_link_bytes_per_s <= 0)
        return;
    int ga = t->grad_accum > 0 ? t->grad_accum : 1;
    int dp = e->data_parallel > 0 ? e->data_parallel : 1;
    double d2h, h2d_step, h2d_fetch;
    estimate_offload_volume(ts, t->shard, t->precision, t->recompute, ga, dp, &d2h, &h2d_step, &h2d_fetch);
    double link = c->host_link_bytes_per_s / 2 * HOST_LINK_EFFICIENCY;
    e->offload_time_known = true;
    e->offload_d2h_bytes = d2h;
    e->offload_h2d_bytes = h2d_step + h2d_fetch;
    e->offload_pcie_seconds = (d2h + h2d_step + h2d_fetch) / link;
    double exposed = (d2h + h2d_step) / link;
    if (h2d_fetch > 0) {
        /* Per pass of a micro-step (forward: one gather; backward: the rest,
         * the recomputed forward's with it): fetch + gather against that
         * pass's compute, as the gathers alone are (estimate_step_comm); the
         * difference is the fetch's share. */
        const PlanModel *m = t->model;
        double layers = m->layers > 0 ? m->layers : 0;
        double modules = layers * ZERO3_MODULES_PER_LAYER + (m->tie_embeddings ? 1 : 2);
        double micro = e->compute_seconds / ga, fwd = micro * fwd_share, bwd = micro - fwd;
        double passes = zero3_gather_passes(t->recompute);
        double fetch = h2d_fetch / ga / passes / link, ag = gather_pass_s;
        double with = 0, without = 0;
        double pass[2] = {fwd, bwd}, gathers[2] = {1, passes - 1};
        for (int i = 0; i < 2; i++) {
            double both = gathers[i] * (ag + fetch), alone = gathers[i] * ag;
            with += fmin(both, fmax(0, both - pass[i]) + (ag + fetch) / modules);
            without += fmin(alone, fmax(0, alone - pass[i]) + ag / modules);
        }
        exposed += ga * (with - without);
    }
    e->offload_pcie_exposed_seconds = exposed;
    e->cpu_optimizer_params = (ts->trainable_params > 0 ? ts->trainable_params : 0) / dp;
    e->cpu_optimizer_threads = cpu_adam_threads(job);
    e->cpu_optimizer_params_per_s = estimate_cpu_adam_rate(e->cpu_optimizer_threads, ranks_per_node(job));
    e->cpu_optimizer_seconds = e->cpu_optimizer_params / e->cpu_optimizer_params_per_s;
    e->offload_exposed_seconds = exposed + e->cpu_optimizer_seconds;
    e->offload_bound = e->offload_exposed_seconds > fmax(e->compute_seconds, e->comm_seconds);
}

static void estimate_time(const PlanJob *job, Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanModel *m = t->model;
    const PlanCluster *c = job->cluster;

    int mb = t->micro_batch > 0 ? t->micro_batch : 1;
    int ga = t->grad_accum > 0 ? t->grad_accum : 1;
    e->global_batch = (int64_t)mb * ga * (e->data_parallel > 0 ? e->data_parallel : 1);

    /* FLOPs per token: 6N for the matmuls (forward 2N, backward 4N), plus
     * attention scores and values: forward 4 * layers * s * q_dim, halved for
     * causal masking, times 3 with backward. Recompute repeats forward work. */
    double n = matmul_params(m, e);
    /* With no data to count (max_steps and unknown datasets), sequences are
     * taken as full contexts. */
    if (e->seq_tokens <= 0) e->seq_tokens = t->context > 0 ? t->context : 0;
    /* Batches are computed at their padded length (packed: the mean). */
    if (!(e->padded_seq_tokens >= e->seq_tokens)) e->padded_seq_tokens = e->seq_tokens;
    double s = e->padded_seq_tokens;
    double attn_fwd = 2.0 * (m->layers > 0 ? m->layers : 0) * s * (m->heads * (double)head_dim_of(m));
    TrainStates ts = plan_train_states(t, e);
    e->trainable_params = ts.trainable_params;
    e->frozen_bytes_per_param = ts.frozen_params > 0
                                    ? (ts.frozen_bytes_per_param > 0 ? ts.frozen_bytes_per_param
                                                                     : value_bytes(t->precision))
                                    : 0;
    double share = ts.trainable_params + ts.frozen_params > 0
                       ? ts.trainable_params / (ts.trainable_params + ts.frozen_params) : 1;
    double fpt = estimate_flops_per_token(n, share, attn_fwd, t->recompute, t->attention);
    /* Preference stages: the forwards without gradient (reference, KL), per
     * trained sequence, at a forward's 2N + attention. */
    double seqs = e->seqs_per_sample > 1 ? e->seqs_per_sample : 1;
    fpt += e->nograd_seqs_per_sample / seqs * (2 * n + attn_fwd);
    e->flops_per_token = fpt;
    double fwd_share = fpt > 0 ? (2 * n + attn_fwd) / fpt : 0;

    if (e->cpu_only) {
        e->peak_flops_per_device = cpu_cores(job) * CPU_CORE_PEAK_FLOPS;
        e->mfu = estimate_job_mfu(job, estimate_default_mfu(job, NULL, NULL), e);
    } else {
        /* fp32 on tensor cores runs as TF32 at half the bf16 rate. */
        double peak = c->gpu->bf16_tflops * 1e12;
        if (t->precision == PREC_FP32) peak /= 2;
        e->fp8_flops_share = 0;
        if (t->precision == PREC_FP8 && c->gpu->fp8_tflops > 0 && fpt > 0) {
            /* the projections' forward, input- and weight-gradient GEMMs at
             * the FP8 peak, the rest (LM head, attention) at bf16's: one
             * peak, blended so that FLOPs / peak is the sum of both times */
            double proj = (m->layers > 0 ? m->layers : 0) * projection_params(m, NULL);
            e->fp8_flops_share = estimate_flops_per_token(proj, share, 0, t->recompute, t->attention) / fpt;
            peak = 1 / ((1 - e->fp8_flops_share) / peak + e->fp8_flops_share / (c->gpu->fp8_tflops * 1e12));
        }
        e->peak_flops_per_device = peak;
        e->mfu = estimate_job_mfu(job, estimate_default_mfu(job, NULL, NULL), e);
    }

    if (t->max_steps > 0) {
        e->steps_total = t->max_steps;
    } else if (e->tokens_source == TOKENS_UNKNOWN) {
        e->steps_total = 0;
    } else {
        double epochs = t->epochs > 0 && isfinite(t->epochs) ? t->epochs : 0;
        double steps = ceil(epochs * e->sequences_per_epoch / seqs / (double)e->global_batch);
        e->steps_total = !(steps >= 0) ? 0 : steps > 9e18 ? INT64_MAX : (int64_t)steps;
    }
    double step_tokens = (double)e->global_batch * seqs * e->seq_tokens;
    e->tokens_total = (double)e->steps_total * step_tokens;
    if (t->max_steps <= 0 && e->tokens_source != TOKENS_UNKNOWN) {
        /* The last step of an epoch is partial: count the data, not the slots. */
        double data_tokens = (t->epochs > 0 && isfinite(t->epochs) ? t->epochs : 0) * e->tokens_per_epoch;
        if (data_tokens < e->tokens_total) e->tokens_total = data_tokens;
    }

    double rate = e->world_size * e->peak_flops_per_device * e->mfu;
    double computed = (double)e->global_batch * seqs * e->padded_seq_tokens;   /* padding included */
    e->compute_seconds = rate > 0 ? computed * fpt / rate : 0;
    double gather_pass_s;
    estimate_step_comm(job, e, &ts, fwd_share, &gather_pass_s);
    estimate_step_offload(job, e, &ts, fwd_share, gather_pass_s);
    e->step_overhead_seconds = job->profile && job->profile->step_overhead_s > 0 ? job->profile->step_overhead_s : 0;
    e->step_seconds = e->compute_seconds + e->comm_exposed_seconds + e->offload_exposed_seconds +
                      e->step_overhead_seconds;
    /* The last step of an epoch is partial: the time follows the tokens. */
    e->total_seconds = step_tokens > 0 ? e->tokens_total / step_tokens * e->step_seconds : 0;
    e->tokens_per_second = e->step_seconds > 0 ? step_tokens / e->step_seconds : 0;
    e->gpu_hours = e->total_seconds * e->world_size / 3600.0;

    /* requeue_segments: estimate_startup, with the starts and saves */
    e->time_limit_seconds = job->time_seconds > 0 ? job->time_seconds : 0;
    e->requeue_segments = 1;
}

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

static int report_memory(const PlanJob *job, const Estimate *e, Diags *d)
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

static int report_time(const PlanJob *job, const Estimate *e, Diags *d, const PlanDataset *missing)
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
static int report_startup(const PlanJob *job, const Estimate *e, Diags *d)
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

/* Host memory per node (docs/estimator.md, "Host memory"), GPU plans. */
static void estimate_host(const PlanJob *job, Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    uint64_t mem = job->mem_bytes ? job->mem_bytes : c->memory_bytes;
    e->host_usable_bytes = (double)mem;
    e->host_fits = true;
    if (e->cpu_only) return;   /* the per-rank memory check is the host's */
    double g = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    TrainStates ts = plan_train_states(t, e);
    double w, gr, o, offload = 0;
    estimate_train_states(&ts, t->precision, t->shard, e->data_parallel, &w, &gr, &o, &offload);
    double n = (double)e->params_total;
    if (t->backend == BACKEND_LLAMAFACTORY) {
        e->host_process_bytes = g * HOST_TORCH_PROCESS_BYTES;
        /* ZeRO-3 (zero.Init): every rank reads one checkpoint file at a time;
         * otherwise every rank builds the whole 16-bit model on the host first. */
        e->host_model_bytes = g * (t->shard == SHARD_ZERO3 ? fmin(HOST_HF_SHARD_BYTES, 2 * n) : 2 * n);
        /* The tokenizing workers LLaMA-Factory starts (preprocessing_num_workers
         * as emitted). The tokenized set is an Arrow cache on disk,
         * memory-mapped: page cache, not counted. */
        double cpus = job->cpus_per_task > 0 ? (double)job->cpus_per_task * g : c->cpus;
        double workers = llamafactory_workers(cpus);
        e->host_data_bytes = workers * HOST_WORKER_BYTES;
        e->host_pinned_bytes = g * HOST_PINNED_BYTES;
    } else {
        /* llmc-train-cuda: every rank builds the fp32 weights on the host and
         * uploads them through a staging copy in the GPU layout (2 x 4 x P); a
         * checkpoint gathers master, m and v to rank 0's host, into the loop's
         * AdamW moments and the staging copies of both (4 x 4 x P more,
         * gather_to_host). Under offload the loop's fp32 model and moments are
         * the training state itself (12 x P, pinned) and nothing is staged.
         * Shards are memory-mapped: page cache, reclaimable, not counted. */
        e->host_process_bytes = g * HOST_LLMC_PROCESS_BYTES;
        bool llmc_offload = t->offload == OFFLOAD_OPTIMIZER;
        e->host_model_bytes = llmc_offload ? 0 : g * 8 * n + 16 * n;
        /* LoRA (one GPU): the fp32 base and its upload staging, and the adapters,
         * their gradients, moments and staging (5 x 4 bytes each); nothing of the
         * base is gathered back. Freeze: the same 8 x P, a host-layout array for
         * the moments' window (4 x P), at a checkpoint the staging of both
         * moments (8 x P) and the loop's moments of the trained part. */
        if (t->method == METHOD_LORA) e->host_model_bytes = 8 * n + 20 * lora_params(t, t->model);
        else if (t->method == METHOD_FREEZE)
            e->host_model_bytes = 20 * n + 8 * fmin(n, fabs((double)t->freeze_layers) * (double)e->params_per_layer);
        /* one rank: the whole state; ZeRO-2/3 on several ranks: each its shard */
        if (llmc_offload) offload = 12 * n / (e->data_parallel > 1 ? e->data_parallel : 1);
        e->host_data_bytes = 0;
        e->host_pinned_bytes = g * HOST_PINNED_BYTES;
    }
    e->host_offload_bytes = g * offload;
    e->host_bytes = e->host_process_bytes + e->host_model_bytes + e->host_data_bytes + e->host_pinned_bytes +
                    e->host_offload_bytes;
    e->host_fits = mem == 0 || e->host_bytes <= e->host_usable_bytes;
}

static int report_host(const PlanJob *job, const Estimate *e, Diags *d)
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

/* Start-up, checkpoints and the wall time over all segments (docs/estimator.md,
 * "Start-up and checkpoints"). */
static void estimate_startup(const PlanJob *job, Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    bool lf = t->backend == BACKEND_LLAMAFACTORY;
    double nodes = job->nodes > 0 ? job->nodes : 1;
    double n = (double)e->params_total, tr = e->trainable_params > 0 ? e->trainable_params : n;
    bool adapters = t->method == METHOD_LORA || t->method == METHOD_QLORA;
    Precision prec = e->cpu_only ? PREC_FP32 : t->precision;

    /* Tokenisation: LLaMA-Factory tokenises the training data before the
     * first step, on one node (data_shared_file_system) or on every node's
     * first rank, with preprocessing_num_workers processes, while the other
     * ranks wait at a barrier of ddp_timeout. Streaming tokenises on the fly.
     * The llmc trainer reads shards `llmc-train prepare` wrote beforehand. */
    e->ddp_timeout_seconds = lf ? (t->ddp_timeout_seconds > 0 ? t->ddp_timeout_seconds : 1800) : 0;
    if (lf && !t->streaming && e->tokens_source != TOKENS_UNKNOWN && e->tokens_per_epoch > 0) {
        double g = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
        double cpus = job->cpus_per_task > 0 ? (double)job->cpus_per_task * g : c->cpus;
        e->tokenize_workers = llamafactory_workers(cpus);
        e->tokenize_rate = t->tokenize_rate > 0 ? t->tokenize_rate : LF_TOKENIZE_TOKENS_PER_S;
        e->tokenize_tokens = e->tokens_per_epoch;
        e->tokenize_seconds = e->tokenize_tokens / (e->tokenize_workers * e->tokenize_rate);
        e->tokenize_every_start = !t->tokenized_path;
        double need = fmin(DDP_TIMEOUT_MAX_S,
                           ceil((TOKENIZE_BARRIER_FACTOR * e->tokenize_seconds + TOKENIZE_BARRIER_SLACK_S) / 60) * 60);
        if (need > e->ddp_timeout_seconds && !t->ddp_timeout_at.start.file &&
            e->tokenize_seconds + TOKENIZE_BARRIER_SLACK_S <= DDP_TIMEOUT_MAX_S) {
            e->ddp_timeout_seconds = need;
            e->ddp_timeout_raised = true;
        }
    }

    /* Loading: the 16-bit weights (QLoRA: as quantised on the GPU, read at
     * 16 bits all the same) read by every node at each start; a scratch
     * model of the llmc trainer reads nothing. */
    bool scratch = t->model->from_scratch;
    e->load_bytes = scratch ? 0 : 2 * n;
    if (e->reference == REF_COPY) e->load_bytes += 2 * e->reference_params;
    e->load_seconds = e->load_bytes / MODEL_LOAD_BYTES_PER_S;

    /* One save. llmc: fp32 weights, Adam m and v, gathered to rank 0
     * (docs/runtime.md, "Checkpoints"). LLaMA-Factory: the optimizer states of
     * the trained parameters (every rank its partition), DeepSpeed's 16-bit
     * module states (frozen weights excluded: the HF Trainer passes
     * exclude_frozen_parameters for PEFT models; none without DeepSpeed) and
     * the model's weights as safetensors (adapters: fp32 adapter weights),
     * which rank 0 writes. */
    double parallel, rank0;
    if (!lf) {
        parallel = 0;
        rank0 = 12 * (t->method == METHOD_FULL ? n : tr);
        e->checkpoint_export_bytes = 0;
    } else {
        double opt = optim_state_bytes(prec, t->optim) * tr;
        double module = t->shard != SHARD_NONE ? value_bytes(prec) * (adapters || t->method == METHOD_FREEZE ? tr : n) : 0;
        double export_ = adapters ? 4 * tr : value_bytes(prec) * n;
        parallel = opt + (t->shard == SHARD_ZERO3 ? module : 0);
        rank0 = export_ + (t->shard == SHARD_ZERO3 ? 0 : module);
        e->checkpoint_export_bytes = export_;
    }
    e->checkpoint_bytes = parallel + rank0;
    e->checkpoint_write_seconds = parallel / (nodes * CKPT_WRITE_BYTES_PER_S) + rank0 / CKPT_WRITE_BYTES_PER_S;
    int keep = t->checkpoint_keep > 0 ? t->checkpoint_keep : 2;
    e->checkpoint_kept_bytes = keep * e->checkpoint_bytes;
    if (t->checkpoint_epoch) {   /* save_strategy: epoch */
        double epochs = t->epochs > 0 && isfinite(t->epochs) ? t->epochs : 1;
        double every = ceil((double)e->steps_total / epochs);
        e->checkpoint_every_steps = every < 1 ? 1 : every > 9e18 ? INT64_MAX : (int64_t)every;
    } else if (t->checkpoint_every_steps > 0) {
        e->checkpoint_every_steps = t->checkpoint_every_steps;
    } else if (e->step_seconds > 0) {
        double every = ceil((t->checkpoint_every_seconds > 0 ? t->checkpoint_every_seconds : 1800) / e->step_seconds);
        e->checkpoint_every_steps = every < 1 ? 1 : every > 9e18 ? INT64_MAX : (int64_t)every;
    }
    e->checkpoints_total = e->checkpoint_every_steps > 0 ? e->steps_total / e->checkpoint_every_steps : 0;
    if (t->checkpoint_epoch && e->steps_total > 0)   /* one save at the end of every epoch */
        e->checkpoints_total = (int64_t)ceil(t->epochs > 0 && isfinite(t->epochs) && t->epochs < 1e6 ? t->epochs : 1);
    /* A requeued start reads the last checkpoint back (its states, not the export). */
    double states = e->checkpoint_bytes - e->checkpoint_export_bytes;
    e->resume_seconds = lf ? states / (nodes * CKPT_READ_BYTES_PER_S) : states / CKPT_READ_BYTES_PER_S;

    /* The wall time: the first start, training, every save, and for every
     * further segment a start that loads, resumes and (without
     * tokenized_path) tokenises again. */
    e->startup_seconds = e->tokenize_seconds + e->load_seconds;
    double again = e->load_seconds + e->resume_seconds + (e->tokenize_every_start ? e->tokenize_seconds : 0);
    double work = e->total_seconds + e->checkpoints_total * e->checkpoint_write_seconds;
    e->wall_seconds = work + e->startup_seconds;
    double limit = e->time_limit_seconds;
    e->requeue_segments = 1;
    if (limit > 0 && e->wall_seconds > limit) {
        /* n segments hold work + first + (n - 1) x again <= n x limit. */
        double seg = limit > again ? ceil((work + e->startup_seconds - again) / (limit - again)) : 1e9;
        if (!(seg >= 2)) seg = 2;
        e->requeue_segments = seg > 1e9 ? 1000000000 : (int)seg;
        e->wall_seconds += (e->requeue_segments - 1) * again;
    }
}

int estimate_job_hpz(const PlanJob *job, int group, Estimate *out)
{
    Diags *d = diags_new();
    hpz_group = group;
    estimate_job_rows(job, 0, out, d);
    hpz_group = 0;
    diags_free(d);
    /* the secondary copy: every weight's 16-bit partition over the group */
    if (group > 1 && out->usable_bytes > 0) {
        double extra = 2.0 * (double)out->params_total / group;
        out->comm_bytes += extra;
        out->total_bytes += extra;
        out->fits = out->total_bytes <= out->usable_bytes;
    }
    return 0;
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
static void report_comm(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanTrain *t = job->run;
    if (!e->comm_bound || !e->fabric_known || e->compute_seconds <= 0 || hpz_group || in_remedy) return;
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

/* ---- a merge job: llamafactory-cli export (docs/language.md, "merge NAME") ----
 * The base read in the export dtype (device = cpu: into host memory; auto:
 * spread over the node's GPUs by device_map "auto", run one GPU at a time),
 * the fp32 adapter read and each adapted matrix's B x A added into it (peft's
 * merge_and_unload; on CPUs in fp32), the merged weights written as
 * safetensors shards of shard_size. Rates: the model load's and the
 * checkpoint write's above; LLaMA-Factory's own start (Python, torch,
 * transformers, the tokenizer) is MERGE_START_S. */
#define MERGE_START_S 60.0

static void estimate_merge(const PlanJob *job, Estimate *e)
{
    const PlanMerge *m = job->merge;
    const PlanModel *b = m->model;
    const PlanCluster *c = job->cluster;
    int64_t emb, per_layer;
    double n = (double)estimate_params(b, &emb, &per_layer);
    double vb = m->dtype == MERGE_DTYPE_FP32 ? 4 : 2;   /* auto: the base's 16-bit torch_dtype (fp32 saved as bf16) */
    double a = lora_params(m->adapter, b);
    bool gpu = m->device == MERGE_DEVICE_AUTO && c->gpu && c->gpus_per_node > 0;
    e->merge = true;
    e->params_total = (int64_t)n;
    e->params_embedding = emb;
    e->params_per_layer = per_layer;
    e->merge_adapter_params = a;
    e->merge_value_bytes = vb;
    e->world_size = e->data_parallel = 1;
    e->startup_seconds = MERGE_START_S;
    e->load_bytes = 2 * n + 4 * a;
    e->load_seconds = e->load_bytes / MODEL_LOAD_BYTES_PER_S;
    /* B (d_out x r) x A (r x d_in) for every adapted matrix: 2 r d_in d_out
     * FLOPs, about 2 x rank x the adapted weights, which a / (d_in + d_out)
     * per rank bounds; taken as 2 x a x the larger side, the model's hidden
     * or ffn width */
    double wide = b->ffn > b->hidden ? b->ffn : b->hidden;
    e->merge_flops = 2 * a * wide;
    double cores = job->cpus_per_task > 0 ? (double)job->cpus_per_task * (c->gpus_per_node > 0 ? c->gpus_per_node : 1)
                                          : (c->cpus > 0 ? c->cpus : 1);
    e->peak_flops_per_device = gpu ? c->gpu->bf16_tflops * 1e12 : cores * CPU_CORE_PEAK_FLOPS;
    e->mfu = gpu ? c->gpu->default_mfu : CPU_DEFAULT_MFU;
    e->merge_seconds = e->merge_flops / (e->peak_flops_per_device * e->mfu);
    e->merge_write_bytes = vb * n;
    e->merge_write_seconds = e->merge_write_bytes / CKPT_WRITE_BYTES_PER_S;
    e->wall_seconds = e->startup_seconds + e->load_seconds + e->merge_seconds + e->merge_write_seconds;
    e->total_seconds = e->wall_seconds;
    e->time_limit_seconds = job->time_seconds;
    e->requeue_segments = 1;
    /* memory: one process; the largest matrix twice in fp32 while it is merged,
     * one shard staged while it is written */
    double matrix = 4 * 2 * wide * (double)b->hidden;
    double shard = m->shard_gb * 1e9;
    e->host_process_bytes = HOST_TORCH_PROCESS_BYTES;
    e->host_model_bytes = gpu ? shard : vb * n + 4 * a + matrix + shard;
    e->host_bytes = e->host_process_bytes + e->host_model_bytes;
    e->host_usable_bytes = job->mem_bytes ? (double)job->mem_bytes : (double)c->memory_bytes;
    e->host_fits = !(e->host_usable_bytes > 0) || e->host_bytes <= e->host_usable_bytes;
    if (gpu) {
        double g = c->gpus_per_node;
        e->weights_bytes = vb * n / g + 4 * a / g;
        e->activations_bytes = matrix;
        e->reserve_context_bytes = GPU_CONTEXT_BYTES;
        e->reserve_bytes = GPU_CONTEXT_BYTES;
        e->total_bytes = e->weights_bytes + e->activations_bytes + e->reserve_bytes;
        e->usable_bytes = c->gpu->usable_bytes;
        e->fits = e->total_bytes <= e->usable_bytes;
    } else {
        e->fits = true;
    }
}

/* A merge that does not fit in memory or in the job's time limit. */
static int report_merge(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanMerge *m = job->merge;
    const PlanCluster *c = job->cluster;
    int errors = 0;
    if (!e->host_fits) {
        SrcRange at = job->mem_bytes ? job->mem_at : c->memory_at;
        Diag *dg = diag_error(d, at, "merge '%s' does not fit in host memory: %.1f GiB needed, %s %.1f GiB", m->name,
                              e->host_bytes / GIB, job->mem_bytes ? "the job's mem is" : "the node has",
                              e->host_usable_bytes / GIB);
        diag_note(dg, "the base in %s (%.1f GiB), the adapter, one matrix merged in fp32 and one %d GB shard "
                  "written, and the process (%.1f GiB)", e->merge_value_bytes == 4 ? "fp32" : "16 bits",
                  e->merge_value_bytes * (double)e->params_total / GIB, m->shard_gb, e->host_process_bytes / GIB);
        if (job->mem_bytes && c->memory_bytes >= e->host_bytes)
            diag_help(dg, "mem = %.0f GiB fits (the node has %.1f GiB)", ceil(e->host_bytes / GIB),
                      (double)c->memory_bytes / GIB);
        else if (m->device == MERGE_DEVICE_CPU && c->gpu)
            diag_help(dg, "device = auto in merge '%s': the model spread over the node's %d GPUs", m->name,
                      c->gpus_per_node);
        errors++;
    }
    if (!e->fits) {
        Diag *dg = diag_error(d, m->device_at.start.file ? m->device_at : job->run_at, "merge '%s' does not fit on "
                              "the GPUs: %.1f GiB per GPU needed, %s has %.1f GiB usable", m->name, e->total_bytes / GIB,
                              c->gpu->name, e->usable_bytes / GIB);
        diag_help(dg, "device = cpu (the merge in host memory)");
        errors++;
    }
    if (job->time_seconds > 0 && e->wall_seconds > job->time_seconds) {
        char need[64];
        snprintf(need, sizeof need, "%.0f min", ceil(1.5 * e->wall_seconds / 60));
        Diag *dg = diag_error(d, job->time_at, "merge '%s' does not finish in the job's time limit: about %.0f min "
                              "estimated", m->name, ceil(e->wall_seconds / 60));
        diag_note(dg, "start %.0f s, read %.1f GB at 0.5 GB/s, merge %.0f s, write %.1f GB at 1 GB/s",
                  e->startup_seconds, e->load_bytes / 1e9, e->merge_seconds, e->merge_write_bytes / 1e9);
        diag_help(dg, "time = %s", need);
        errors++;
    }
    return errors;
}

int estimate_job(const PlanJob *job, Estimate *out, Diags *d)
{
    return estimate_job_rows(job, 0, out, d);
}

int estimate_job_rows(const PlanJob *job, double shard_rows, Estimate *out, Diags *d)
{
    memset(out, 0, sizeof *out);
    if (job && job->merge && job->merge->model && job->merge->adapter && job->cluster) {
        estimate_merge(job, out);
        return report_merge(job, out, d);
    }
    if (!job || !job->run || !job->run->model || !job->cluster) return 0;
    const PlanTrain *t = job->run;
    if (!is_cpu_only(job->cluster) && job->cluster->gpu->usable_bytes <= 0) return 0;

    estimate_memory(job, t->micro_batch, t->recompute, t->shard, out);
    out->max_micro_batch_that_fits = max_fitting_batch(job, t->recompute, t->shard);
    const PlanDataset *missing = count_tokens(t, out);
    if (shard_rows >= 1 && !missing) {
        /* the rows prepare wrote: packing leaves room in rows, so more than tokens / context */
        out->sequences_per_epoch = shard_rows;
        out->sequences_from_shards = true;
        out->seq_tokens = out->tokens_per_epoch / shard_rows;
        /* a packed row is computed at its full context, its unused end included */
        if (t->packing && t->context > 0) out->padded_seq_tokens = t->context;
        else if (!(out->padded_seq_tokens >= out->seq_tokens)) out->padded_seq_tokens = out->seq_tokens;
    }
    estimate_time(job, out);
    estimate_startup(job, out);
    estimate_host(job, out);

    int errors = report_memory(job, out, d);
    if (out->fits) report_comm(job, out, d);
    errors += report_host(job, out, d);
    errors += report_time(job, out, d, missing);
    errors += report_startup(job, out, d);
    return errors;
}
