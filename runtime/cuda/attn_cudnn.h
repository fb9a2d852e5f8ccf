/* attn_cudnn.h — causal grouped-query attention through cuDNN's fused
 * scaled-dot-product attention (runtime/cuda/attn_cudnn.c), called through the C
 * backend API. The contract is flash_attn.h's: Q [B,H,T,D], K and V [B,KV,T,D],
 * O and dO [B,T,H,D], dq [B,H,T,D], dk and dv [B,KV,T,D], bf16; scale 1/sqrt(D);
 * key i visible to query t iff t - pos[b,t] <= i <= t.
 *
 * Its statistics are cuDNN's: the natural-log sum-exp of each scaled score row,
 * B*H*T fp32 laid out [B,H,T] for rows of one sequence and [B,T,H] for rows with
 * documents — not flash_attn.h's log2 form, so a forward pass through one path is
 * never followed by the other's backward pass.
 *
 * Use: attn_cudnn_create, attn_cudnn_prepare once for the shape (builds and caches
 * the plans, says the workspace size); per micro-batch attn_cudnn_set_rows with the
 * host pos, then — when it answered 1 — attn_cudnn_fwd / attn_cudnn_bwd for each
 * layer (they use the rows set last). When it answered 0 the micro-batch goes
 * through flash_attn.h.
 *
 * Built without cuDNN (LLMC_HAVE_CUDNN undefined), attn_cudnn_create answers NULL
 * with a message and nothing else is called. */
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
/* 1 when the shape is one cuDNN's graphs take: H a multiple of KV, D 64 or 128,
 * T a multiple of 64. */
int attn_cudnn_supported(int H, int KV, int T, int D);
/* The documents of pos [B*T] (host): a document starts at each row start and
 * wherever pos is 0, and continues while pos grows by 1 — the only masks the
 * ragged layout expresses exactly. Writes each one's first token (b*T + t) and
 * length to start/len (either may be NULL) and returns how many, or -1 when pos
 * does anything else or there are more than max. B documents: one a row. */
int attn_cudnn_documents(const int *pos, int B, int T, int *start, int *len, int max);

/* A cuDNN handle on the current device; deterministic: the backward form without
 * atomics (see attn_cudnn.c). NULL with a message in err when cuDNN is absent or
 * fails to start. */
AttnCudnn *attn_cudnn_create(int deterministic, char *err, size_t errlen);
void attn_cudnn_destroy(AttnCudnn *a);

/* Build and cache the plans of the context's one shape; the bytes of device
 * workspace the caller passes to the other calls, or 0 with a message in err when
 * cuDNN has no engine for it. (Document micro-batches need a plan per document-
 * count bucket, built on first use; one that needs more workspace than this, or
 * that cuDNN refuses, goes to the flash kernels.) */
size_t attn_cudnn_prepare(AttnCudnn *a, int B, int H, int KV, int T, int D, char *err, size_t errlen);

/* This micro-batch's rows (host pos [B*T]): uploads the document tables on stream
 * s when there are documents. 1: run it through cuDNN; 0: through flash_attn.h
 * (not a document mask, more than 1024 documents, no plan within ws_bytes, or
 * LLMC_CUDNN_DOCUMENTS=0 at attn_cudnn_create). */
int attn_cudnn_set_rows(AttnCudnn *a, const int *pos, size_t ws_bytes, kstream_t s);
/* 0 for rows of one sequence, else the ragged batch (document slots) in use. */
int attn_cudnn_rows_documents(const AttnCudnn *a);

/* O, stats from Q, K, V; workspace of attn_cudnn_prepare's size. A cuDNN execution
 * error is fatal (message, exit 1). */
void attn_cudnn_fwd(AttnCudnn *a, bf16_t *O, float *stats, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                    void *workspace, kstream_t s);
/* dq, dk, dv from dO and the forward's O and stats. */
void attn_cudnn_bwd(AttnCudnn *a, bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K,
                    const bf16_t *V, const bf16_t *O, const bf16_t *dO, const float *stats, void *workspace,
                    kstream_t s);
/* 1 when the context's backward is the deterministic form. */
int attn_cudnn_deterministic(const AttnCudnn *a);

#ifdef __cplusplus
}
#endif
#endif
