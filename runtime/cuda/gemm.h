/* gemm.h — row-major matrix products through cuBLASLt (runtime/cuda/gemm.c).
 *
 *   D[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C
 *
 * A, B are bf16, or FP8 (E4M3 or E5M2, with a per-tensor dequantisation scale
 * each, read on the device: a_scale, b_scale); D (and C) are bf16 or fp32
 * (d_f32), fp32 accumulation always. FP8 products must be D = A . B^T (transA 0,
 * transB 1: the only layout Hopper's FP8 tensor cores take), K a multiple of 16.
 * op(X) = X, or X^T when trans is set (X then stored [K,M] resp. [N,K]).
 * C == NULL means C = D (accumulate in place when beta != 0). `batch` > 1 runs
 * strided batches (strides in elements). The chosen algorithm is cached per shape
 * (cuBLASLt's first choice, or with LLMC_GEMM_TUNE=1 the fastest of its first 8);
 * with LLMC_GEMM_CHOICES=FILE a shape's choice is read from the file, or made and
 * added to it (gemm_choices.h: a tuned choice made once, the same bits after). */
#ifndef LLMC_CUDA_GEMM_H
#define LLMC_CUDA_GEMM_H

#include <stddef.h>

typedef struct Gemm Gemm;

/* An operand's element type. */
enum { GEMM_BF16, GEMM_E4M3, GEMM_E5M2 };

Gemm *gemm_create(void *stream, size_t workspace_bytes);
/* A second handle for products on another stream, concurrent with the first's: its
 * own workspace, no tuning or choices file (LLMC_GEMM_TUNE and LLMC_GEMM_CHOICES
 * belong to the first), and cuBLASLt told to plan for sm_target SMs (its
 * CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; 0: the whole GPU). */
Gemm *gemm_create_side(void *stream, size_t workspace_bytes, int sm_target);
void gemm_destroy(Gemm *g);

typedef struct {
    int transA, transB;
    int M, N, K;
    const void *A; int lda; long long strideA;
    const void *B; int ldb; long long strideB;
    void *D; int ldd; long long strideD;
    const void *C;              /* NULL: C = D */
    int d_f32;                  /* D and C are fp32 (else bf16) */
    float alpha, beta;
    int batch;                  /* 0 or 1: one product */
    int a_type, b_type;         /* GEMM_*: 0 (bf16) unless set */
    const float *a_scale, *b_scale;   /* FP8 operands: device scalars, x = scale * stored */
    int fast_accum;             /* FP8: Hopper's faster, less often promoted accumulation */
} GemmArgs;

/* Runs the product; on a cuBLASLt failure prints the shape and exits(1). */
void gemm_run(Gemm *g, const GemmArgs *a);

#endif
