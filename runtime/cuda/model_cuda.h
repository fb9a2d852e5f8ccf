/* model_cuda.h — the Llama/Qwen2 decoder on the GPU: bf16 weights and activations,
 * fp32 master weights, gradients and AdamW states (runtime/cuda/model_cuda.c:
 * memory; model_cuda_pass.c: the passes; model_cuda_step.c: the optimizer step).
 *
 * All parameters live in one flat buffer (fp32 master, bf16 working copy, fp32
 * gradient): the per-layer matrices first (layer by layer, so a layer's gradients
 * are one contiguous bucket for the all-reduce), then the embedding and LM head,
 * then everything that takes no weight decay (norm weights, biases). Every Hugging
 * Face tensor (model.layers.3.self_attn.k_proj.weight ...) is one contiguous slice;
 * q/k/v and gate/up are adjacent so each pair/triple is one GEMM. */
#ifndef LLMC_CUDA_MODEL_H
#define LLMC_CUDA_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "model.h"
#include "cuda_layout.h"
#include "gemm.h"
#include "kernels.h"

typedef struct {
    char name[96];
    size_t off, numel;          /* off: in the flat buffer */
    size_t host_off;            /* in runtime/model/model.h's buffer (Model.w) */
    int rows, cols;             /* cols == 0 for vectors */
} CudaParam;

typedef struct {
    size_t qkv_w, o_w, gu_w, down_w;   /* matrices */
    size_t ln1, qkv_b, qk_norm, ln2;   /* no decay; qk_norm: q_norm [D] then k_norm [D] (Qwen3) */
} CudaLayerOffsets;

/* LoRA's groups: the base GEMM each targeted linear rides on (q/k/v on the QKV
 * GEMM, gate/up on the gate-up GEMM). */
enum { CL_QKV, CL_O, CL_GU, CL_DOWN, CL_GROUPS };

typedef struct {
    bf16_t *ln1, *ln2, *q, *k, *v, *P, *att, *xmid, *gu, *h;
    bf16_t *lu[CL_GROUPS];              /* LoRA only: u = x A^T of each group, [N, CudaLora.width[g]] */
    bf16_t *qkv_raw;                    /* qk_norm only: the QKV GEMM output before the head norms */
    float *rstd1, *rstd2, *lse;         /* P: eager attention only; lse: flash only */
} CudaLayerActs;

/* Activation recompute in the backward pass. FULL keeps only each layer's input
 * and runs its forward again; SELECTIVE keeps the GEMM outputs and recomputes the
 * cheap elementwise and attention results from them (the SwiGLU product h and the
 * attention output att: one buffer each for all layers). The modes are
 * contract/plan_vocab.h's Recompute (RECOMPUTE_NONE, _FULL, _SELECTIVE), the
 * plan's own enum. */

/* Optimizer offload: the fp32 master weights and AdamW moments stay in host memory,
 * in runtime/model/model.h's layout (the training loop's Model.w and AdamW m/v, n floats
 * each). cuda_model_create pins them; every step streams them through the GPU in
 * chunks (host -> device, AdamW, device -> host on three streams). One rank only. */
typedef struct {
    float *w, *m, *v;
    size_t n;
} CudaHostState;

#define CUDA_OFFLOAD_BUFS LLMC_CUDA_OFFLOAD_SETS   /* staging sets in flight: upload, update, download */
typedef struct {
    float *host_w, *host_m, *host_v;
    float *stage[CUDA_OFFLOAD_BUFS];    /* device: master, m, v of one chunk, back to back */
    size_t chunk;                       /* floats per array in one staging set */
    void *up, *down;                    /* cudaStream_t for host -> device and back */
    void *ev_in[CUDA_OFFLOAD_BUFS], *ev_done[CUDA_OFFLOAD_BUFS], *ev_free[CUDA_OFFLOAD_BUFS];
} CudaOffload;

/* LoRA on the GPU (runtime/cuda/lora_cuda.c): runtime/model/model.h's adapters (A [r, in],
 * B [out, r] per targeted linear, y += scale * (x A^T) B^T) in a flat buffer of their
 * own. Per layer and group, the A of the group's targets are stacked ([k*r, in]), so
 * u = x A^T for all of them is one GEMM; then each target adds scale * u_t B_t^T
 * into its columns of the base GEMM's output. The base model keeps only its bf16
 * weights (no fp32 master, gradient or moments); the adapters have all four. */
typedef struct {
    int rank;
    float scale;
    unsigned targets;                   /* bit LORA_* (runtime/model/model.h) */
    CudaParam *params; int n_params;    /* the adapters, PEFT names; host_off: in Lora.p's buffer */
    size_t *a_off;                      /* [layer * CL_GROUPS + g]: the group's stacked A */
    size_t *b_off;                      /* [layer * LORA_TARGETS + t]: B of target t */
    int width[CL_GROUPS];               /* k * rank: the group's columns of u (0: no target) */
    size_t n_total;                     /* flat length */
    bf16_t *w;                          /* bf16 working copy [n_total] */
    float *grad, *master, *m, *v;       /* fp32 [n_total] */
    bf16_t *du;                         /* backward scratch [N, max width] */
} CudaLora;

/* What trains: the spans of the flat buffer that take gradients and AdamW (full
 * training: the rank's shard; freeze: the trained layers' matrices and their
 * norms/biases). master/m/v hold the spans back to back. */
typedef struct {
    size_t off, len;
} CudaSpan;

struct CudaColl;

typedef struct {
    int rank, world, zero1;             /* data parallelism (cuda_dist.h) */
    int zero;                           /* the plan's ZeRO stage: 2 and 3 engage ZeRO-2/3 (full training;
                                           on one rank too, so that one rank runs the same sums) */
    int offload_shard;                  /* ZeRO-2/3 with optimizer offload: the shard's master weights,
                                           moments and summed gradient in pinned host memory (several ranks) */
    struct CudaColl *comm;              /* collective transport (cuda_coll.h) or NULL */
    void *comm_stream;                  /* cudaStream_t for overlapped reductions */
} CudaParallel;

typedef struct {
    ModelConfig cfg;                    /* the one description (runtime/model/model.h) */
    int B, T, recompute;                /* micro-batch shape; recompute: a Recompute */
    int flash;                          /* fused attention (flash_attn.cu), else materialised scores */
    int deterministic;                  /* the same bits every run: no order-dependent float atomics */
    int swiglu_sm90;                    /* LLMC_SWIGLU_SM90=1 (an experiment): SwiGLU in gemm_sm90's epilogues */
    /* parameters */
    CudaParam *params; int n_params;    /* the HF tensors */
    CudaLayerOffsets *lo;
    size_t off_embed, off_lm, off_norm;
    size_t n_total;                     /* flat length, padded to a multiple of 64*world */
    size_t decay_end;                   /* flat indices below this take weight decay */
    size_t n_real;                      /* parameters counted (no padding) */
    bf16_t *w;                          /* bf16 working weights [n_total] */
    float *grad;                        /* fp32 gradients [n_total] */
    float *master;                      /* fp32 [n_state]: the spans back to back; NULL under offload */
    void *m, *v;                        /* AdamW moments [n_state]: fp32, or bf16 bits (bf16_states) */
    uint16_t *master_lo;                /* master_weights = split: the master weights are w's spans plus
                                           these [n_state] low halves (master_split.h), master NULL */
    int bf16_states;                    /* optimizer_states = bf16: m and v hold bf16 bits (2 bytes an
                                           element, contract/bf16_round.h), not floats */
    uint32_t seed;                      /* the plan's seed: the stochastic rounding's random bits */
    CudaSpan span[2]; int n_spans;      /* what AdamW steps (full: one span, the shard) */
    size_t n_state;                     /* the spans' total length */
    /* Fine-tuning. freeze: only layers [train_lo, train_hi) take weight gradients
     * (full: all layers and the embedding, head and final norm); lora: none of the
     * base does (grad is NULL) and lora's adapters train. junk: where the frozen norm
     * weights' and biases' gradients go, which their kernels always write. */
    int finetune, train_lo, train_hi;   /* finetune: METHOD_FULL, _FREEZE or _LORA */
    CudaLora *lora;
    float *junk;
    int offload;                        /* master and moments in host memory (off) */
    CudaOffload off;
    size_t shard_off, shard_len;
    /* ZeRO-2/3 (zero >= 2; zero_layout.h): grad is NULL; each micro-batch's
     * gradients go unit by unit into a bucket (two for the layers, alternating,
     * one for the last unit), which is reduced onto this rank's shard gacc as
     * soon as backward finishes the unit (on the communication stream). ZeRO-3:
     * w is NULL; this rank's bf16 weights are wsh, and a unit's whole weights are
     * gathered into wlayer (or wtail) for forward and again for backward, the
     * next layer's while this one computes. */
    int zero;                           /* 0 (ZeRO-0/1 as above), 2 or 3 */
    size_t *starts;                     /* [world+1] shard boundaries (whole GRAD_NORM_BLOCKs) */
    struct ZeroUnit *units;             /* [layers+1] */
    size_t unit_max;                    /* the longest layer unit */
    float *gbuf[2], *gtail, *gacc;      /* buckets [unit_max], [the last unit]; gacc [shard_len] */
    int gsel;                           /* the layer bucket backward writes now */
    int acc_fresh;                      /* nothing reduced onto gacc since cuda_model_zero_grad */
    bf16_t *wsh, *wlayer[2], *wtail;    /* ZeRO-3: [shard_len], layer l in wlayer[l & 1] [unit_max] (the
                                           next layer is gathered while this one computes), [the last unit] */
    int wlayer_unit[2], wtail_ok;       /* what the gathered buffers hold (-1, 0: nothing) */
    const float *local_w;               /* not NULL: gathers read these host fp32 flat weights instead
                                           (cuda_model_zero3_local) */
    float *norm_parts;                  /* [blocks of n_total] the gradient's sums of squares */
    int off_shard;                      /* master, m, v and gacc are pinned host memory (offload_shard): AdamW
                                           reads and writes them over the bus, in place */
    void *ev_ready, *ev_free[3];        /* cudaEvent_t: compute -> comm; buckets 0, 1, tail reusable */
    void *ev_gathered[3];               /* cudaEvent_t: wlayer[0], wlayer[1], wtail gathered */
    /* precision = fp8 (kernels_fp8.cu): each layer's four projections (qkv, o, gate-up,
     * down; F8_* below) run their GEMMs on E4M3 weights and inputs and E5M2 output
     * gradients. f8_w/f8_wt: every projection weight and its transpose in E4M3, made
     * again whenever w changed (f8_stale); f8_amax/f8_sinv: per-tensor maxima and
     * dequantisation scales [12 L]: weights, inputs, output gradients; f8_a: the
     * input's copy (forward) or its transpose (weight gradient); f8_dy, f8_dyt: the
     * output gradient and its transpose. f8_xt: each trained layer's four inputs
     * transposed in E4M3 [train_hi - train_lo][N x (C + HD + C + F)], written by the
     * forward pass's quantiser beside its row-major copy and read by the weight
     * gradients, which otherwise quantise the bf16 input a second time, so every
     * layer's bf16 ln1, ln2 and h share one buffer each (NULL: LoRA trains no
     * projection and reads them, full recompute runs the forward again anyway);
     * f8_keep: this micro-batch trains (a forward-only pass writes no transposes).
     * f8_head (train.fp8_lm_head): the LM head's three GEMMs in FP8 too, on f8_hw/f8_hwt,
     * its weight [V, C] and transpose in E4M3; the final norm's output and the logits'
     * gradient are quantised per chunk into the free scratch (model_cuda_pass.c). */
    int fp8, f8_stale, f8_keep, f8_head;
    uint8_t *f8_w, *f8_wt, *f8_a, *f8_dy, *f8_dyt, *f8_xt, *f8_hw, *f8_hwt;
    size_t *f8_woff;                    /* [4 L]: offsets in f8_w / f8_wt */
    float *f8_amax, *f8_sinv;
    /* activations */
    bf16_t **xs;                        /* residual stream at each layer input, [L+1][N*C] */
    CudaLayerActs *acts;                /* per layer (or all the same buffers under recompute) */
    bf16_t *qkv, *o, *hf, *logits;
    float *rstdf, *losses, *loss_acc, *sumsq, *sumsq_scratch;
    int *ids, *pos, *targets;
    /* the embedding gradient's row grouping (k_embed_bwd): built on the host per micro-batch */
    int *emb_plan, *h_emb_plan, *h_emb_next;   /* device [3N+1], host [3N+1], host [V+1] */
    int ce_chunk;
    /* backward scratch */
    bf16_t *dres, *dln, *dgu, *dh, *datt, *dO, *dP, *dq, *dk, *dv, *dqkv;
    float *fa_scratch;
    /* cuDNN attention (attn_cudnn.h), when built with it and LLMC_ATTN is not "flash" */
    struct AttnCudnn *cudnn;            /* NULL: the flash kernels only */
    void *cudnn_ws;                     /* its workspace, cudnn_ws_bytes long */
    size_t cudnn_ws_bytes;
    int attn_cudnn_now;                 /* this micro-batch through cuDNN (attn_cudnn_set_rows);
                                           acts.lse then holds cuDNN's natural-log statistics */
    /* runtime */
    void *stream;                       /* cudaStream_t */
    Gemm *gemm;
    /* LLMC_WGRAD_SMS (an experiment of issue 31, off by default): the layers' weight
     * gradients on a side stream, concurrent with the compute stream's kernels */
    Gemm *gemm_w;                       /* its products (cuBLASLt told of an SM target), or NULL */
    void *wstream;                      /* cudaStream_t */
    void *ev_wg_in, *ev_wg[4];          /* cudaEvent_t: their inputs ready; projection p's done */
    CudaParallel par;
    void *layer_done[512];              /* cudaEvent_t per layer, for bucket overlap */
    size_t bytes_allocated;             /* our cudaMalloc high-water mark */
    int step;                           /* optimizer steps taken (Adam bias correction) */
    int grad_fresh;                     /* since cuda_model_zero_grad no micro-batch has written
                                           the matrix gradients: the next one overwrites them */
    struct PhaseTimer *timer;           /* per-phase GPU times (LLMC_PHASE_TIMES=1), else NULL */
} CudaModel;

/* 0, or -1 with a message in err when the GPU kernels cannot run this model
 * (Qwen3's qk_norm; shapes the vector accesses cannot take). */
int cuda_model_supports(const ModelConfig *cfg, char *err, size_t errlen);

/* Lay out the parameter table only (no GPU): every tensor of runtime/model/model.h's
 * layout, in its order and with its HF name, placed in the flat buffer. */
int cuda_model_layout(CudaModel *m, const ModelConfig *cfg, int world);
/* Attention: materialised scores ("eager"), fused (cuDNN when built, else the flash
 * kernels; the backward sums dQ with float atomics) or fused and deterministic (the
 * flash kernels' atomic-free dQ pass, or cuDNN's deterministic form when
 * LLMC_ATTN=cudnn asks for it). Eager is deterministic too. */
enum { CUDA_ATTN_EAGER, CUDA_ATTN_FUSED, CUDA_ATTN_FUSED_DETERMINISTIC };
/* Allocate everything on the current device for micro-batch B x T. recompute:
 * a Recompute. attn: CUDA_ATTN_*; fused needs a head size and T the kernels
 * take (else materialised scores). offload: NULL, or the host state that holds the
 * master weights and moments (one rank). 0 or -1 with a message. */
int cuda_model_create(CudaModel *m, const ModelConfig *cfg, int B, int T, int recompute, int attn,
                      const CudaParallel *par, const CudaHostState *offload);
/* The same with only part of the model training (ft NULL: everything). Under freeze
 * the fp32 master and moments cover the trained layers only; under lora the base
 * has bf16 weights only and the adapters come from ft->lora's shapes (their values
 * from cuda_lora_set). Optimizer offload is for full training. */
/* The number formats the plan chooses (train.precision, master_weights,
 * optimizer_states); NULL: bf16 GEMMs, fp32 master weights and moments. */
typedef struct {
    int fp8;                            /* the projections' GEMMs in FP8 (ZeRO-0..2, no offload) */
    int fp8_head;                       /* with fp8: the LM head's GEMMs in FP8 too (train.fp8_lm_head) */
    int master_split;                   /* master weights as bf16 + low halves (not with offload or ZeRO-2/3) */
    int bf16_states;                    /* AdamW moments in bf16, rounded stochastically (not with offload) */
    uint32_t seed;                      /* the plan's seed, for that rounding */
} CudaNumerics;
typedef struct {
    int method;                         /* METHOD_FULL, _FREEZE or _LORA (contract/plan_vocab.h) */
    int train_lo, train_hi;             /* freeze: the trained layers [train_lo, train_hi) */
    const Lora *lora;                   /* lora: the host adapters (shapes, names, scale, targets) */
} CudaFinetune;
int cuda_model_create_ft(CudaModel *m, const ModelConfig *cfg, int B, int T, int recompute, int attn,
                         const CudaParallel *par, const CudaHostState *offload, const CudaFinetune *ft,
                         const CudaNumerics *num);
/* Under offload: the bf16 working weights from the host master weights, and the
 * AdamW step count (moments are already the host's). */
void cuda_model_offload_adopt(CudaModel *m, int step);
void cuda_model_destroy(CudaModel *m);

/* HF init: normal(0, std) for matrices and embeddings, 0 for biases, 1 for norms. */
void cuda_model_init_random(CudaModel *m, uint64_t seed, float std);

/* One micro-batch: ids, pos [B*T] and targets [B*T] (-1 where no loss) from the host.
 * Forward + loss; with grad_scale != 0 also the backward pass, gradients accumulated
 * into m->grad (dlogits scaled by grad_scale, i.e. 1/label tokens of the whole step).
 * The summed loss is added to the device scalar m->loss_acc. logits_out (host,
 * [B*T*V] fp32) receives the logits when not NULL (tests); argmax_out (host, [B*T]),
 * forward only, each row's argmax (k_argmax_rows), on the model's stream: sync it
 * before reading. last_micro: start the bucketed gradient reduction as each layer
 * finishes. */
void cuda_model_micro(CudaModel *m, const int *ids, const int *pos, const int *targets,
                      float grad_scale, float *logits_out, uint32_t *argmax_out, int last_micro);
/* ZeRO-3 forward passes on one rank without the others (rank 0's held-out
 * evaluation after training): w (host, flat layout, n_total floats: the
 * gathered master weights) feeds the gathers instead of the ranks' shards;
 * NULL goes back to the shards. Forward only. */
void cuda_model_zero3_local(CudaModel *m, const float *w);
/* Start a step's gradients from zero (the first micro-batch after it overwrites). */
void cuda_model_zero_grad(CudaModel *m);
/* Finish gradient reduction, clip, AdamW on grad * grad_mult (1 when the loss
 * gradient was already scaled in cuda_model_micro). Returns the global norm of
 * grad * grad_mult before clipping. */
float cuda_model_step(CudaModel *m, float grad_mult, float lr, float b1, float b2, float eps, float wd,
                      float clip);

/* Host fp32 views in the flat layout (n_total floats, cuda_model_layout offsets).
 * set: weights (and, when mom1/mom2 are not NULL, AdamW moments with `step` steps
 * taken) from full host buffers on every rank. get: gather the full master weights
 * and moments to host buffers (collective under ZeRO-1; buffers may be NULL on
 * ranks other than 0). The gradient buffer is used as scratch: call between steps.
 * Freeze: only the trained spans are read and written (get leaves the rest of the
 * host arrays as they are); LoRA: set takes the base weights only, get does
 * nothing (the adapters move with cuda_lora_set/get). */
void cuda_model_set_flat(CudaModel *m, const float *w, const float *mom1, const float *mom2, int step);
void cuda_model_get_flat(CudaModel *m, float *w, float *mom1, float *mom2);
/* ZeRO-2/3: this rank's shard of the fp32 master weights and AdamW moments
 * into w, mom1, mom2 (full flat-layout arrays) at [shard_off, shard_off +
 * shard_len); nothing else is written. No collective: each rank writes its
 * piece of a checkpoint itself (runtime/store/checkpoint.h ckpt_shard_*). */
void cuda_model_get_shard(CudaModel *m, float *w, float *mom1, float *mom2);
/* Offloaded ZeRO-2/3 (off_shard): the shard's fp32 master weights (k = 0), m (1)
 * or v (2) themselves, [shard_len] in pinned host memory, once the GPU is done
 * with them; the backend reads and writes them in place, with no staging copy
 * (72B on one node: 12 bytes a parameter of host memory saved). NULL otherwise.
 * After writing them (ZeRO-3): host_shard_adopt makes the shard's bf16 weights
 * from the master weights and takes the step count (moments: they were written
 * too). */
float *cuda_model_host_shard(CudaModel *m, int k);
void cuda_model_host_shard_adopt(CudaModel *m, int step, int moments);

/* FLOPs of one token's forward+backward: 6*N + 12*L*C*T (N: parameters in matmuls,
 * the LM head counted once even when tied to the embedding). Freeze and LoRA: the
 * products that run (no weight gradients for the frozen, no input gradients below
 * the lowest trained layer; the adapters' own). */
double cuda_model_flops_per_token(const CudaModel *m, int T);
/* Device memory in use (cudaMemGetInfo: every process on the GPU), and how far
 * a high-water mark rose above a baseline: 0 when ranks sharing the GPU freed
 * more than this one took since (their figure is not ours; each rank's own is
 * bytes_allocated). For bench's and run's GPU memory figures. */
size_t cuda_device_used(void);
static inline size_t cuda_used_above(size_t peak, size_t base) { return peak > base ? peak - base : 0; }

#endif
