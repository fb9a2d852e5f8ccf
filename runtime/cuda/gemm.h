/* gemm.h — row-major matrix products through cuBLASLt (runtime/cuda/gemm.c).
 *
 *   D[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C
 *
 * A, B are bf16; D (and C) are bf16 or fp32 (d_f32), fp32 accumulation always.
 * op(X) = X, or X^T when trans is set (X then stored [K,M] resp. [N,K]).
 * C == NULL means C = D (accumulate in place when beta != 0). `batch` > 1 runs
 * strided batches (strides in elements). The chosen algorithm is cached per shape
 * (cuBLASLt's first choice, or with LLMC_GEMM_TUNE=1 the fastest of its first 8). */
#ifndef LLMC_CUDA_GEMM_H
#define LLMC_CUDA_GEMM_H

#include <stddef.h>

typedef struct Gemm Gemm;

Gemm *gemm_create(void *stream, size_t workspace_bytes);
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
} GemmArgs;

/* Runs the product; on a cuBLASLt failure prints the shape and exits(1). */
void gemm_run(Gemm *g, const GemmArgs *a);

#endif
