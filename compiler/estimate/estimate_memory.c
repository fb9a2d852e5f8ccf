/* estimate_memory.c — parameters and the bytes per GPU (docs/estimator.md,
 * "Memory per GPU"): model states by precision, method and ZeRO stage, activations
 * (Korthikanti's accounting, transformers' layers, the llmc CUDA trainer's own
 * allocations), logits, communication buffers, the reference model and the
 * reserve; and the largest micro batch that fits.
 */
#include "estimate_internal.h"

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

/* The projection GEMMs of one layer precision = fp8 runs in FP8 (qkv, o,
 * gate_up, down): their weights' parameters and the widest input or output
 * (mixture of experts: the experts a token runs through, as one MLP). */
double projection_params(const PlanModel *m, double *widest_in, double *widest_out)
{
    double h = m->hidden, hd = (double)head_dim_of(m), q = m->heads * hd, kv = m->kv_heads * hd;
    double f = m->experts > 0 && m->experts_per_token > 0 ? (double)m->ffn * m->experts_per_token : m->ffn;
    if (widest_in) *widest_in = fmax(fmax(h, q), f);              /* qkv and gate_up read h, o q, down f */
    if (widest_out) *widest_out = fmax(fmax(q + 2 * kv, h), 2 * f);
    return h * (q + 2 * kv) + q * h + 2 * h * f + f * h;
}

/* precision = fp8 on the llmc CUDA trainer: an E4M3 copy of each projection
 * weight and of its transpose (refreshed after each optimizer step), 2 bytes
 * a projection parameter; the quantised scratch (model_cuda.c's fp8_alloc), N
 * tokens x (the widest input + twice the widest output) bytes: the E4M3 input,
 * the E5M2 output gradient and its transpose; one fp32 scale per weight, input and
 * output gradient of each projection; each trained layer's four inputs
 * transposed in E4M3 for the weight gradients, N x (2 hidden + heads x head_dim
 * + ffn) bytes (kept from the forward pass: not under LoRA, which trains no
 * projection, nor under full recompute, which quantises them again). With them
 * kept, the bf16 ln1, ln2 and h are read by the forward pass only: one buffer
 * each for all layers (h already under selective recompute). With
 * fp8_lm_head the LM head's weight (the tied embedding's) has its E4M3 copy
 * and transpose too, 2 bytes x vocab x hidden; its FP8 operands need no more
 * (the final norm's E4M3 output in the scratch above, the logits' E5M2
 * gradient in the logits chunk's buffer). */
bool estimate_llmc_fp8_keeps_transposes(const PlanTrain *t, Recompute rc)
{
    return rc != RECOMPUTE_FULL && t->method != METHOD_LORA;
}

static void llmc_cuda_fp8(const PlanTrain *t, const PlanModel *m, double tokens, Recompute rc, Estimate *e)
{
    double in, out, layers = m->layers > 0 ? m->layers : 0;
    e->fp8_weights_bytes = 2 * layers * projection_params(m, &in, &out);
    if (t->fp8_lm_head) e->fp8_weights_bytes += 2.0 * m->vocab * m->hidden;
    e->fp8_scratch_bytes = tokens * (in + 2 * out) + 4 * 3 * 4 * layers;
    if (!estimate_llmc_fp8_keeps_transposes(t, rc) || layers < 1) return;
    double trained = t->method == METHOD_FREEZE ? fmin(fabs((double)t->freeze_layers), layers) : layers;
    e->fp8_scratch_bytes += trained * tokens * (2.0 * m->hidden + m->heads * (double)head_dim_of(m) + m->ffn);
    e->activations_layers_bytes -=
        (layers - 1) * tokens * (2.0 * m->hidden + (rc == RECOMPUTE_SELECTIVE ? 0 : m->ffn)) * 2;
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
static void llmc_cuda_activations(const PlanModel *m, double s, double b, bool flash, bool deterministic,
                                  Recompute rc, double *layers_bytes, double *working_bytes)
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
     * losses, token ids / positions / targets, the embedding backward's plan
     * (3 ints a token and one); the loss accumulator, the squared gradient norm
     * with one partial per trained span, and the norm's partial sums (fp32). */
    double fwd = n * (qkv * 2 + (flash ? 0 : q * 2) + c * 2 + 4 + 4 + 12 + 12) + 4 +
                 (1 + LLMC_SUMSQ_SLOTS + LLMC_SUMSQ_BLOCKS) * 4;
    /* Backward scratch: d residual, d norm, d gate+up, d h, d attention,
     * dq, dk, dv, d qkv; flash's fp32 dK and dV per query head (and dQ's
     * accumulator when not deterministic; k_flash_bwd_scratch_floats) and
     * its row sums, or eager's dO and dP. */
    double bwd = n * (2 * c + 3 * f + 3 * q + 4 * kv) * 2 +
                 (flash ? n * ((deterministic ? 2 : 3) * q + heads) * 4 : n * q * 2 + b * heads * s * s * 2);
    *layers_bytes = residual + (recompute ? 0 : layers * (layer - shared) + (layers > 0 ? shared : 0));
    *working_bytes = (recompute ? layer : 0) + fwd + bwd;
}

/* LoRA adapter parameters: rank x (d_in + d_out) for each targeted linear
 * layer of each decoder layer (lora_target empty: all seven). */
double lora_params(const PlanTrain *t, const PlanModel *m)
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
TrainStates plan_train_states(const PlanTrain *t, const Estimate *e)
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
             * shard, in pinned host memory under offload, and there the shard's
             * gradient too (offload_shard_alloc). Shards are whole
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
            bool off = t->offload == OFFLOAD_OPTIMIZER;
            e->grads_bytes = 4 * ((off ? 0 : zshard) + 2 * unit + tail) + 4 * blocks;
            e->optimizer_bytes = off ? 0 : k * zshard;
            e->model_bytes_per_param = (shard == SHARD_ZERO3 ? 2 : 2 * world) / world + (off ? 0 : (4 + k) / world);
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
        llmc_cuda_activations(m, s, b, flash, t->deterministic, rc,
                              &e->activations_layers_bytes, &e->activations_working_bytes);
        if (t->method == METHOD_LORA || t->method == METHOD_FREEZE) llmc_cuda_finetune(t, m, s * b, rc, e);
        if (t->precision == PREC_FP8) llmc_cuda_fp8(t, m, s * b, rc, e);
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
int max_fitting_batch(const PlanJob *job, Recompute rc, ShardStage shard)
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
