/* flash_attn.h — fused causal attention with grouped-query heads and document masks
 * (runtime/cuda/flash_attn.cu). Q [B,H,T,D], K and V [B,KV,T,D], O [B,T,H,D];
 * key i is visible to query t iff t - pos[b,t] <= i <= t. */
#ifndef LLMC_CUDA_FLASH_ATTN_H
#define LLMC_CUDA_FLASH_ATTN_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Head sizes 32, 64, 128 and T a multiple of 64. */
int k_flash_supported(int D, int T);
/* O = softmax(Q K^T / sqrt(D)) V; LSE [B,H,T] keeps the log2-sum-exp of each row. */
void k_flash_fwd(bf16_t *O, float *LSE, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                 const int *pos, int B, int H, int KV, int T, int D, kstream_t s);
/* Gradients dq [B,H,T,D], dk, dv [B,KV,T,D] from dO [B,T,H,D]; scratch holds
 * k_flash_bwd_scratch_floats() floats. deterministic: dQ without atomics (the same
 * bits every run, a second pass over the key blocks); otherwise fp32 atomics. */
void k_flash_bwd(bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                 const bf16_t *O, const bf16_t *dO, const float *LSE, const int *pos, float *scratch,
                 int B, int H, int KV, int T, int D, int deterministic, kstream_t s);
size_t k_flash_bwd_scratch_floats(int B, int H, int T, int D, int deterministic);

#ifdef __cplusplus
}
#endif
#endif
