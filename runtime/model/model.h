/* model.h — the decoder-only transformer (Llama / Qwen2 / Qwen3) in one code path.
 *
 * The one description of the architecture: the CUDA backend takes ModelConfig
 * as its config and places the tensors of model_layout() (their order, HF names,
 * shapes and TensorKind) in its own flat buffer (runtime/cuda/model_cuda.c);
 * the math described below is what both backends compute.
 *
 * Parameters live in one contiguous fp32 buffer, tensor after tensor, in this
 * order (HF names; shapes are [out, in] like torch.nn.Linear, row-major):
 *
 *   model.embed_tokens.weight                     [vocab, hidden]
 *   for each layer N = 0 .. layers-1:
 *     model.layers.N.input_layernorm.weight       [hidden]
 *     model.layers.N.self_attn.q_proj.weight      [heads*head_dim, hidden]
 *     model.layers.N.self_attn.q_proj.bias        [heads*head_dim]      (qkv_bias)
 *     model.layers.N.self_attn.k_proj.weight      [kv_heads*head_dim, hidden]
 *     model.layers.N.self_attn.k_proj.bias        [kv_heads*head_dim]   (qkv_bias)
 *     model.layers.N.self_attn.v_proj.weight      [kv_heads*head_dim, hidden]
 *     model.layers.N.self_attn.v_proj.bias        [kv_heads*head_dim]   (qkv_bias)
 *     model.layers.N.self_attn.q_norm.weight      [head_dim]            (qk_norm)
 *     model.layers.N.self_attn.k_norm.weight      [head_dim]            (qk_norm)
 *     model.layers.N.self_attn.o_proj.weight      [hidden, heads*head_dim]
 *     model.layers.N.post_attention_layernorm.weight [hidden]
 *     model.layers.N.mlp.gate_proj.weight         [ffn, hidden]
 *     model.layers.N.mlp.up_proj.weight           [ffn, hidden]
 *     model.layers.N.mlp.down_proj.weight         [hidden, ffn]
 *   model.norm.weight                             [hidden]
 *   lm_head.weight                                [vocab, hidden]       (absent when tied)
 *
 * Math (fp32): x = embed[id]; per layer
 *   h = rmsnorm(x) * w_in; q,k,v = h W^T (+ b); [q,k per-head rmsnorm (qk_norm)];
 *   RoPE (HF rotate-half, inv_freq[i] = theta^(-2i/head_dim), angle = pos * inv_freq);
 *   causal attention inside a document: token j sees i iff j - pos[j] <= i <= j,
 *   scores scaled by 1/sqrt(head_dim), query head h uses kv head h / (heads/kv_heads);
 *   x += o_proj(attn); h = rmsnorm(x) * w_post; x += down(silu(gate(h)) * up(h)).
 * logits = rmsnorm(x) * w_norm @ lm_head^T (lm_head = embed when tied).
 * rmsnorm(x) = x / sqrt(mean(x^2) + rms_eps).
 *
 * Loss: at row position t the model predicts id[t+1]; a position counts when
 * mask[t+1] == 1 and pos[t+1] > 0 (runtime/data/shard.h). model_forward returns the
 * SUM of cross-entropies over counted positions; the trainer divides by the label
 * count of the whole global batch (HF's num_items_in_batch behaviour).
 */
#ifndef LLMC_MODEL_H
#define LLMC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "plan_vocab.h"   /* contract/: ModelArch, and the LoRA targets LORA_Q .. LORA_DOWN */

typedef struct {
    ModelArch arch;
    int layers, hidden, heads, kv_heads, head_dim, ffn, vocab, max_context;
    double rope_theta, rms_eps;
    int tie_embeddings;   /* lm_head shares model.embed_tokens.weight */
    int qkv_bias;         /* q/k/v projections have biases (Qwen2) */
    int qk_norm;          /* per-head RMSNorm on q and k before RoPE (Qwen3) */
} ModelConfig;

/* What a tensor is, so that a backend with another memory layout (the CUDA
 * one fuses q/k/v and gate/up) can place each tensor of this description
 * without a table of names of its own. */
typedef enum {
    TENSOR_EMBED, TENSOR_IN_NORM, TENSOR_Q, TENSOR_Q_BIAS, TENSOR_K, TENSOR_K_BIAS, TENSOR_V, TENSOR_V_BIAS,
    TENSOR_Q_NORM, TENSOR_K_NORM, TENSOR_O, TENSOR_POST_NORM, TENSOR_GATE, TENSOR_UP, TENSOR_DOWN,
    TENSOR_FINAL_NORM, TENSOR_LM_HEAD
} TensorKind;

/* One tensor of the parameter buffer. */
typedef struct {
    char name[96];
    TensorKind kind;
    int layer;            /* its layer, -1 for the embedding, final norm and LM head */
    int ndim;
    int64_t shape[2];
    size_t offset;        /* in floats from the start of the buffer */
    size_t numel;
    int decay;            /* AdamW weight decay applies (HF Trainer: not to biases
                             and norm weights) */
} ParamInfo;

/* Units: what forward and backward fetch and finish one at a time. Unit 0 is
 * the embedding, unit 1 + l layer l, unit layers + 1 the final norm and the
 * untied LM head; each is a contiguous range of the parameter buffer
 * (model_unit_range). A tied LM head is unit 0's tensor. */
static inline int model_units(const ModelConfig *c) { return c->layers + 2; }

/* Where forward/backward take weights from, and whom they tell that a unit's
 * gradient is complete (a sharded backend: ZeRO-3 gathers a unit's weights
 * just before use and frees them after; ZeRO-2 reduce-scatters each unit's
 * gradient as soon as backward has produced it). Without hooks the weights are
 * m->w and nothing is told. The hooks do not fail: a failed collective ends
 * the job (runtime/base/dist.h). */
typedef struct {
    void *ctx;
    /* Unit u's weights, unit-relative (element 0 = the unit's first float),
     * valid until release(u). */
    const float *(*acquire)(void *ctx, int unit);
    void (*release)(void *ctx, int unit);
    /* model_backward has finished unit u's gradient in m->g (units arrive in
     * the order layers+1, layers, ..., 1, 0). May be NULL. */
    void (*grad_ready)(void *ctx, int unit);
} ModelHooks;

/* LoRA adapters (PEFT's LoRA Linear without dropout): on a targeted linear
 * weight W [out, in] of a layer, A [rank, in] and B [out, rank]; the layer
 * computes y = x W^T (+ b) + scale * (x A^T) B^T, scale = alpha / rank, or
 * alpha / sqrt(rank) with rsLoRA. The targets are the seven linear weights of a
 * layer in TensorKind order (LORA_Q .. LORA_DOWN). The adapters' parameters are
 * a Model of their own (p: params, w, g; p.cfg is the base model's), with PEFT's
 * names (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight), layer
 * by layer, per target A then B. Made by lora_new (runtime/model/model.c).
 * The targets (LoraModule, LORA_TARGETS of them) are contract/plan_vocab.h's rows. */
typedef struct Model Model;
typedef struct Lora Lora;

struct Model {
    ModelConfig cfg;
    ParamInfo *params;    /* in the order documented above */
    int n_params;
    size_t n_floats;      /* total parameter count */
    float *w;             /* parameters (NULL when hooks provide them) */
    float *g;             /* gradients (written by model_backward) */
    const ModelHooks *hooks;   /* NULL: weights are w */
    /* Fine-tuning (NULL: everything trains): frozen[i] = 1 when params[i]
     * gets no gradient (model_backward leaves it 0 and skips its work, and the
     * pass stops below the lowest layer that needs one); lora: the adapters
     * forward and backward apply (their gradients into lora->p.g). */
    const unsigned char *frozen;
    Lora *lora;
};

struct Lora {
    int rank;
    float scale;
    unsigned targets;     /* bit LORA_* */
    Model p;              /* the adapters' parameters */
    int *a_index;         /* [layer * LORA_TARGETS + target]: index of A in p.params (B follows), -1 */
    float *tmp;           /* scratch: x A^T and its gradient, 2 x tmp_n floats */
    size_t tmp_n;
};

/* Adapters on base's layers for the targets (bit LORA_*), rank and alpha
 * (rslora: alpha / sqrt(rank)); A ~ U(-1/sqrt(in), 1/sqrt(in)) from seed (torch's
 * kaiming_uniform(a=sqrt(5)), PEFT's init), B = 0. NULL when out of memory. */
Lora *lora_new(const Model *base, unsigned targets, int rank, int alpha, int rslora, uint64_t seed);
void lora_free(Lora *l);
/* m's targeted weights += scale * B A (double sums): the merged model. */
void lora_merge(const Lora *l, Model *m);

/* The part of a model's flat parameter buffer (its w, in the layout above)
 * that one rank's training state is made from: n ranges [r[i][0], r[i][1]) of
 * float offsets, increasing and not overlapping. A ZeRO-3 rank needs only its
 * shard, so it reads only that much of the initial weights and of a resumed
 * checkpoint (runtime/store/checkpoint.h); the rest of its buffers is never
 * written, and a large calloc's untouched pages take no memory. n < 0: all. */
typedef struct {
    int n;
    size_t (*r)[2];
} ModelPart;

/* What of m trains, as a Model of its own: params, n_params, n_floats, w and g
 * are what gradients, AdamW and checkpoints cover (cfg is m's; no hooks,
 * frozen or lora). With m->lora: the adapters (lora->p); with m->frozen: the
 * window of m's buffer from the first to the last trainable tensor (offsets
 * from its start; -1 when the trainable tensors are not contiguous); else m
 * itself. Free with model_trainable_free(m, view). */
int model_trainable(const Model *m, Model *view);
void model_trainable_free(const Model *m, Model *view);

/* A micro-batch: B rows of T tokens (runtime/data/shard.h semantics). */
typedef struct {
    const uint32_t *ids, *pos;
    const uint8_t *mask;
    int B, T;
} Batch;

/* Saved activations of the last forward, sized for B*T tokens. */
typedef struct ModelActs ModelActs;

/* Check a config; on error writes a message into err and returns -1. */
int model_config_check(const ModelConfig *c, char *err, size_t errlen);
/* Number of parameters (floats) of the layout above, without allocating. */
size_t model_param_count(const ModelConfig *c);
/* Lay out parameters (names, shapes, offsets) and allocate w and g (zeroed). */
int model_init(Model *m, const ModelConfig *c);
/* The layout only (params, n_params, n_floats; w and g stay NULL): what a
 * backend with its own buffers needs. model_free releases it. */
int model_layout(Model *m, const ModelConfig *c);
/* Shapes of known checkpoints, for benchmarks and tests without a config.json:
 * "qwen2.5-0.5b", "qwen2.5-1.5b" (the published Qwen2.5 configs) and "tiny".
 * 0, or -1 for an unknown name. */
int model_preset(const char *name, ModelConfig *c);
void model_free(Model *m);
const ParamInfo *model_find(const Model *m, const char *name);
/* Unit u's range of the parameter buffer: [*start, *start + *len). */
void model_unit_range(const Model *m, int unit, size_t *start, size_t *len);
/* HF-style random init: linear/embedding weights ~ N(0, std), biases 0, norms 1. */
void model_init_random(Model *m, uint64_t seed, double std);

/* Bytes model_acts_new(c, B, T) allocates (for a memory check before training). */
double model_acts_bytes(const ModelConfig *c, int B, int T);
ModelActs *model_acts_new(const ModelConfig *c, int B, int T);
void model_acts_free(ModelActs *a);

/* Forward pass; keeps what backward needs in a. Returns the summed
 * cross-entropy over counted label positions and their count in *n_labels. */
double model_forward(Model *m, ModelActs *a, const Batch *b, int64_t *n_labels);
/* The logits of the last forward: [B*T, vocab]. */
const float *model_logits(const ModelActs *a);
/* Backward of (scale * summed loss) of the last forward: overwrites m->g. */
void model_backward(Model *m, ModelActs *a, const Batch *b, float scale);

#endif
