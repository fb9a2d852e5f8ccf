/* gemm_sm90.h — bf16 products of our own on Hopper (runtime/cuda/gemm_sm90.cu), in
 * gemm.h's row-major form and arguments: bf16 A and B (either transposition), D bf16 or
 * fp32, C == D or NULL, one product (no batch). */
#ifndef LLMC_CUDA_GEMM_SM90_H
#define LLMC_CUDA_GEMM_SM90_H

#include "gemm.h"

/* 1 when the arguments are a product gemm_sm90_run takes: bf16 operands, batch 1, N
 * even, lda and ldb multiples of 8, A and B 16-byte aligned, C NULL or D. */
int gemm_sm90_supported(const GemmArgs *a);

/* Launches the product on the stream (sm_90 only); -1 when unsupported or a CUDA call
 * failed (nothing launched), else 0. */
int gemm_sm90_run(const GemmArgs *a, void *stream);

/* The down projection's input gradient and SwiGLU's backward in one kernel: with the
 * product dh = op(A) . op(B) [M, N] (N = the FFN width; never stored) and gu [M, 2N]
 * the gate/up output (g then u a row, ldd apart), D [M, 2N] (ldd apart) gets dgu, as
 * k_swiglu_bwd(D, dh, gu) would from dh unrounded. bf16 D, beta 0, no C; -1 when
 * unsupported or a CUDA call failed, else 0. */
int gemm_sm90_swiglu_bwd(const GemmArgs *a, const void *gu, void *stream);

/* The gate/up projection's forward and SwiGLU in one kernel: the product gu = op(A) .
 * op(B) [M, N = 2F] (B's first F rows, or columns for transB 0, the gate's, the next F
 * the up's) into D (ldd apart), and h = silu(g) u [M, F] (ldh apart), as k_swiglu_fwd
 * makes it from that gu, to the bit. bf16 D, beta 0, no C, N a multiple of 16; -1 when
 * unsupported or a CUDA call failed, else 0. */
int gemm_sm90_swiglu_fwd(const GemmArgs *a, void *h, int ldh, void *stream);

/* At most n clusters of two CTAs a launch (0: as many as can be resident); and the
 * clusters the last launch ran (gemm_sm90_check's --clusters and its report). */
void gemm_sm90_limit_clusters(int n);
int gemm_sm90_last_clusters(void);

#endif
