/* attn_cudnn.h — causal grouped-query attention through cuDNN's fused
 * scaled-dot-product attention (runtime/cuda/attn_cudnn.c), called through the C
 * backend API. The contract is flash_attn.h's: Q [B,H,T,D], K and V [B,KV,T,D],
 * O and dO [B,T,H,D], dq [B,H,T,D], dk and dv [B,KV,T,D], bf16; scale 1/sqrt(D).
 *
 * Its statistics are cuDNN's: the natural-log sum-exp of each scaled score row,
 * [B,H,T] fp32 — not flash_attn.h's log2 form, so a forward pass through one path
 * is never followed by the other's backward pass.
 *
 * Document masks (pos resetting inside a row) are not taken: attn_cudnn_supported
 * says so, and the caller uses flash_attn.h for such micro-batches.
 *
 * Built without cuDNN (no cudnn.h when compiling, LLMC_HAVE_CUDNN undefined),
 * attn_cudnn_create answers NULL with a message and nothing else is called. */
#ifndef LLMC_CUDA_ATTN_CUDNN_H
#define LLMC_CUDA_ATTN_CUDNN_H

#include <stddef.h>
#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AttnCudnn AttnCudnn;

/* 1 when this binary was built against cuDNN. */
int attn_cudnn_built(void);
/* 1 when the cuDNN path can compute this shape: H a multiple of KV, D 64 or 128,
 * T a multiple of 64, and (docs == 0) every row one causal sequence, pos[b,t] == t.
 * With docs != 0 it answers 0: the caller falls back to flash_attn.h. */
int attn_cudnn_supported(int H, int KV, int T, int D, int docs);
/* 1 when every row of pos [B*T] is one sequence from position 0 (pos[b,t] == t):
 * exactly the case the cuDNN graph computes without a document mask. */
int attn_cudnn_plain_rows(const int *pos, int B, int T);

/* A cuDNN handle and the per-shape plan cache, on the current device; NULL with
 * a message in err when cuDNN is absent or fails to start. */
AttnCudnn *attn_cudnn_create(char *err, size_t errlen);
void attn_cudnn_destroy(AttnCudnn *a);

/* Build (once) and cache the forward and backward plans of a shape; the bytes of
 * device workspace the caller must pass to both calls, or 0 with a message in err
 * when cuDNN has no engine for it. */
size_t attn_cudnn_prepare(AttnCudnn *a, int B, int H, int KV, int T, int D, char *err, size_t errlen);

/* O, stats from Q, K, V; workspace of attn_cudnn_prepare's size. The shape must
 * have been prepared. A cuDNN execution error is fatal (message, exit 1). */
void attn_cudnn_fwd(AttnCudnn *a, bf16_t *O, float *stats, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                    int B, int H, int KV, int T, int D, void *workspace, kstream_t s);
/* dq, dk, dv from dO and the forward's O and stats. */
void attn_cudnn_bwd(AttnCudnn *a, bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K,
                    const bf16_t *V, const bf16_t *O, const bf16_t *dO, const float *stats,
                    int B, int H, int KV, int T, int D, void *workspace, kstream_t s);
/* 1 when the backward plan of this prepared shape is the deterministic one. */
int attn_cudnn_deterministic(const AttnCudnn *a, int B, int H, int KV, int T, int D);

#ifdef __cplusplus
}
#endif
#endif
