/* kernels.h — the CUDA backend's device kernels, callable from C (runtime/cuda/kernels_*.cu, one
 * file per role: embed, norm, rope, attn_eager, swiglu, loss, adamw, convert).
 *
 * Tensors are row-major. bf16 values travel as uint16_t on the host side.
 * Activations use N = B*T rows (one per token); attention tensors use
 * [B, heads, T, D]. Every launcher enqueues on `stream` and returns at once;
 * launch errors are checked by the caller with cuda_check_last(). */
#ifndef LLMC_CUDA_KERNELS_H
#define LLMC_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t bf16_t;
typedef struct CUstream_st *kstream_t;

/* out[n,:] = wte[ids[n],:] */
void k_embed_fwd(bf16_t *out, const int *ids, const bf16_t *wte, int N, int C, kstream_t s);
/* dwte[ids[n],:] += dx[n,:] (fp32 accumulate) */
/* plan: the rows grouped by token id, [order[N] | seg_start[U+1] | seg_id[U]] (U distinct ids) */
void k_embed_bwd(float *dwte, const int *plan, int N, int U, const bf16_t *dx, int C, kstream_t s);

/* out = x * rsqrt(mean(x^2) + eps) * w; rstd[n] saved for the backward pass;
 * amax (FP8, else NULL): max |out| as stored, maxed in (as k_fp8_amax over out). */
void k_rmsnorm_fwd(bf16_t *out, float *rstd, const bf16_t *x, const bf16_t *w,
                   int N, int C, float eps, float *amax, kstream_t s);
/* dx = (dres ? dres : 0) + d(rmsnorm)/dx . dy ; dw += sum_n dy * xhat. dx may alias dres.
 * dw is summed in a fixed order (per-block partials in scratch, then a second kernel).
 * amax (FP8, else NULL): max |dx| as stored, maxed in (as k_fp8_amax over dx). */
void k_rmsnorm_bwd(bf16_t *dx, float *dw, const bf16_t *dy, const bf16_t *x, const bf16_t *w,
                   const float *rstd, const bf16_t *dres, int N, int C, float *scratch, float *amax, kstream_t s);
/* Floats of scratch that k_rmsnorm_bwd (rows of C) and k_bias_grad (rows of M) need. */
size_t k_colsum_scratch(int C, int M);

/* qkv [N, (H+2KV)*D] (+ bias) -> q [B,H,T,D], k,v [B,KV,T,D], RoPE (rotate-half) on q,k at pos. */
void k_qkv_rope_fwd(bf16_t *q, bf16_t *k, bf16_t *v, const bf16_t *qkv, const bf16_t *bias,
                    const int *pos, int B, int T, int H, int KV, int D, float theta, kstream_t s);
/* The transpose: dq,dk,dv -> dqkv [N, (H+2KV)*D] with the inverse rotation. */
void k_qkv_rope_bwd(bf16_t *dqkv, const bf16_t *dq, const bf16_t *dk, const bf16_t *dv,
                    const int *pos, int B, int T, int H, int KV, int D, float theta, kstream_t s);
/* dbias[j] += sum_n dy[n, j] (M % 8 == 0), summed in a fixed order through scratch. */
/* Qwen3's per-head RMSNorm before RoPE, on qkv rows [N, (H+2KV)*D]: out = raw with
 * each q head x -> x * rsqrt(mean(x^2) + eps) * w[0..D) and each k head with
 * w[D..2D) (v heads copied). D a multiple of 32, at most 256. */
void k_head_norm_fwd(bf16_t *out, const bf16_t *raw, const bf16_t *w, int N, int H, int KV, int D, float eps,
                     kstream_t s);
/* Its backward in place on dqkv (gradient of out -> gradient of raw, v heads
 * untouched); dw[0..2D) += the q_norm and k_norm gradients, summed in a fixed order
 * through scratch of k_head_norm_scratch(D) floats. */
void k_head_norm_bwd(bf16_t *dqkv, float *dw, const bf16_t *raw, const bf16_t *w, int N, int H, int KV, int D,
                     float eps, float *scratch, kstream_t s);
size_t k_head_norm_scratch(int D);
void k_bias_grad(float *dbias, const bf16_t *dy, int N, int M, float *scratch, kstream_t s);

/* In place over S [B*H*T, T]: P = softmax(scale*S) over the keys a query may see
 * (key i for query t iff t - pos[b,t] <= i <= t), zero elsewhere. */
void k_attn_softmax_fwd(bf16_t *SP, const int *pos, int B, int H, int T, float scale, kstream_t s);
/* In place over dP: dS = P * (dP - sum_i P*dP) (row-wise). */
void k_attn_softmax_bwd(bf16_t *dPS, const bf16_t *P, long long rows, int T, kstream_t s);

/* in [B, A1, A2, D] -> out [B, A2, A1, D] (D % 8 == 0) */
void k_swap12(bf16_t *out, const bf16_t *in, int B, int A1, int A2, int D, kstream_t s);

/* gu [N, 2F] = [gate | up] -> h [N, F] = silu(gate) * up */
/* amax: NULL, or where the output's absolute maximum is atomically maxed in (FP8) */
void k_swiglu_fwd(bf16_t *h, const bf16_t *gu, int N, int F, float *amax, kstream_t s);
void k_swiglu_bwd(bf16_t *dgu, const bf16_t *dh, const bf16_t *gu, int N, int F, float *amax, kstream_t s);

/* Fused softmax cross-entropy over a logits chunk [rows, V] (bf16), in place:
 * loss[r] = logsumexp - logit[target] (0 where target < 0), and when grad_scale != 0
 * the row becomes dlogits = (softmax - onehot) * grad_scale (0 where target < 0).
 * amax (the FP8 LM head, else NULL): max |dlogits| as stored, maxed in. */
void k_cross_entropy(bf16_t *logits, float *loss, const int *targets, int rows, int V,
                     float grad_scale, float *amax, kstream_t s);

/* out[r] = the first index of row r's greatest logit [rows, V] (bf16), NaN skipped
 * (0 for a row of NaN): logits_argmax's rule (runtime/train/train_loop.c). */
void k_argmax_rows(const bf16_t *logits, int rows, int V, uint32_t *out, kstream_t s);

/* *acc += sum(x[0..n)) — one block, deterministic. */
void k_sum_add(float *acc, const float *x, int n, kstream_t s);
/* out[0] = sum(x^2), deterministic (partials in scratch of k_sumsq_scratch() floats). */
int k_sumsq_scratch(void);
void k_sumsq(float *out, float *scratch, const float *x, size_t n, kstream_t s);

/* AdamW on a shard: elements [0, n) of master/m/v/grad/param; elements whose global
 * index (goff + i) is below decay_end take weight decay. The gradient used is
 * grad * grad_mult, scaled by min(1, clip / (norm + 1e-6)) when clip > 0, where
 * norm = sqrt(*sumsq) * grad_mult (torch's clip_grad_norm_ on the scaled gradient).
 * master_lo NULL: master holds the fp32 master weights and param receives their
 * bf16 copy; else the master weights are split (master_split.h: param and
 * master_lo together, master unused). */
void k_adamw(float *master, uint16_t *master_lo, bf16_t *param, const float *grad, float *m, float *v, size_t n,
             size_t goff, size_t decay_end, float lr, float b1, float b2, float eps, float wd,
             float bc1, float bc2, const float *sumsq, float grad_mult, float clip, kstream_t s);

/* The same with bf16 moments (optimizer_states = bf16): m and v hold bf16 bits,
 * updated in fp32 and stored with contract/bf16_round.h's stochastic rounding
 * keyed by (seed, step, goff + i, 0 for m / 1 for v). */
void k_adamw_bf16(float *master, uint16_t *master_lo, bf16_t *param, const float *grad, uint16_t *m, uint16_t *v,
                  size_t n, size_t goff, size_t decay_end, float lr, float b1, float b2, float eps, float wd,
                  float bc1, float bc2, const float *sumsq, float grad_mult, float clip, uint32_t seed,
                  uint32_t step, kstream_t s);

/* ZeRO-2/3 (kernels_zero.cu): acc[i] += x[i]; and out[k] = sum of x^2 over block k
 * ([k*block, (k+1)*block) of x, the last one short), one fixed tree per block. */
void k_add_f32(float *acc, const float *x, size_t n, kstream_t s);
void k_sumsq_blocks(float *out, const float *x, size_t n, int block, kstream_t s);

/* FP8 (kernels_fp8.cu), precision = fp8: amax[0] = max(amax[0], max |x|) (amax
 * zeroed by the caller; n a multiple of 8); and the FP8 copy of x [rows, cols]
 * scaled by the power of two that puts *amax in the format's top binade
 * (E4M3, or E5M2 for gradients): out [rows, cols] and/or outT [cols, rows] (NULL:
 * not written), *scale_inv = 1 / scale (NULL: not written). rows, cols: multiples
 * of 8. */
void k_fp8_amax(float *amax, const bf16_t *x, size_t n, kstream_t s);
void k_fp8_quant(uint8_t *out, uint8_t *outT, float *scale_inv, const bf16_t *x, int rows, int cols,
                 const float *amax, int e5m2, kstream_t s);

/* Initialisation and conversion. */
void k_init_normal(float *x, size_t n, uint64_t seed, float std, kstream_t s);
void k_fill(float *x, size_t n, float value, kstream_t s);
void k_f32_to_bf16(bf16_t *out, const float *in, size_t n, kstream_t s);
void k_bf16_to_f32(float *out, const bf16_t *in, size_t n, kstream_t s);
/* fp32 master weights in -> the split pair (param, lo; lo NULL: param only, rounded
 * as the pair's upper half); and back (master_split.h). */
void k_master_split(bf16_t *param, uint16_t *lo, const float *in, size_t n, kstream_t s);
void k_master_join(float *out, const bf16_t *param, const uint16_t *lo, size_t n, kstream_t s);

#ifdef __cplusplus
}
#endif
#endif
