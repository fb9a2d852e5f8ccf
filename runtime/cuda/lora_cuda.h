/* lora_cuda.h — LoRA adapters on the GPU (runtime/cuda/lora_cuda.c; the layout
 * is CudaLora in model_cuda.h). Called by model_cuda.c around the base GEMMs of
 * each layer, and by the backend to move the adapters' state in and out. */
#ifndef LLMC_CUDA_LORA_H
#define LLMC_CUDA_LORA_H

#include "model_cuda.h"

/* cudaMalloc with model_cuda.c's accounting (bytes_allocated; a message and *fail
 * set on failure, NULL after an earlier failure). */
void *cuda_model_alloc(CudaModel *m, size_t bytes, int *fail);

/* 0, or -1 with a message in err when the GPU cannot train these adapters. */
int cuda_lora_supported(int rank, char *err, size_t errlen);
/* Lay out and allocate m->lora from the host adapters hl (shapes, names, scale,
 * targets) for micro-batches of N tokens, and each layer's u (m->acts[l].lu;
 * shared by all layers under full recompute). Sets *fail on an allocation failure. */
int cuda_lora_create(CudaModel *m, const Lora *hl, int *fail);
void cuda_lora_destroy(CudaModel *m);

/* Forward of group g (CL_*) in layer l: u = x A^T into acts[l].lu[g], then
 * y[:, target's columns] += scale * u_t B_t^T for each target of the group.
 * x: the base GEMM's input [N, in]; y: its output, leading dimension ldy (NULL:
 * u only, for a recomputed layer whose output is not needed). */
void cuda_lora_fwd(CudaModel *m, int l, int g, const bf16_t *x, bf16_t *y, int ldy);
/* Backward of group g: dy is the gradient of the base GEMM's output (leading
 * dimension lddy), x its input; dB, dA into the adapters' gradients (written by
 * the first micro-batch of a step, m->grad_fresh, then accumulated) and
 * du A added to dx [N, in]. */
void cuda_lora_bwd(CudaModel *m, int l, int g, const bf16_t *x, const bf16_t *dy, int lddy, bf16_t *dx);

/* Host adapters in Lora.p's layout (runtime/model/model.h, n = Lora.p.n_floats) <-> the GPU.
 * set: weights (master and bf16 copy) and, when mom1/mom2 are not NULL, the AdamW
 * moments (else zero); gradients zeroed. get: master weights and moments. */
void cuda_lora_set(CudaModel *m, const float *w, const float *mom1, const float *mom2);
void cuda_lora_get(CudaModel *m, float *w, float *mom1, float *mom2);

#endif
