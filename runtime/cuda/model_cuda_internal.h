/* model_cuda_internal.h — what the files of the GPU decoder share; nothing
 * outside runtime/cuda/model_cuda*.c includes it (the model's interface is
 * model_cuda.h).
 *
 * model_cuda.c lays the flat buffers out, allocates and frees everything and
 * sets the weights; model_cuda_pass.c runs a micro-step (forward, the fused
 * LM-head cross-entropy, backward, the gradient reduction and ZeRO's gathers);
 * model_cuda_step.c is the optimizer step (AdamW, ZeRO's, offload's) and the
 * states' way to and from the host.
 */
#ifndef LLMC_CUDA_MODEL_INTERNAL_H
#define LLMC_CUDA_MODEL_INTERNAL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "log.h"
#include "model_cuda.h"
#include "cuda_check.h"
#include "cuda_coll.h"
#include "flash_attn.h"
#include "attn_cudnn.h"
#include "phase_timer.h"
#include "lora_cuda.h"
#include "cuda_layout.h"
#include "optim.h"
#include "zero_layout.h"

/* ---- FP8 projections (precision = fp8; kernels_fp8.cu) ----
 * Projection p of layer l (F8_QKV, F8_O, F8_GU, F8_DOWN): Y[N, out] = X[N, in] . W^T.
 * Its tensors' maxima and scales sit at F8_SLOT: the weight, the input X, the
 * output gradient dY. */
enum { F8_QKV, F8_O, F8_GU, F8_DOWN };
enum { F8_WEIGHT, F8_INPUT, F8_GRAD };
/* Each scalar 16 bytes apart: cuBLASLt refuses (NOT_SUPPORTED) an FP8 product whose
 * scale pointer is only 4-byte aligned (measured on the H200: the products whose
 * scales sat at 16-byte offsets ran, the others were refused). */
#define F8_SLOT_FLOATS 4
#define F8_SLOT(m, l, p, kind) \
    (((size_t)(kind) * 4 * (m)->cfg.layers + (size_t)(l) * 4 + (size_t)(p)) * F8_SLOT_FLOATS)
/* The LM head's (f8_head): its weight, the final norm's output, the logits' gradient,
 * after the 12 L projection slots. */
#define F8_HEAD_SLOT(m, kind) ((12 * (size_t)(m)->cfg.layers + (size_t)(kind)) * F8_SLOT_FLOATS)
#define F8_SLOTS(m) (12 * (size_t)(m)->cfg.layers + 3)

/* A phase boundary for the step's timer (phase_timer.h), when one is attached. */
#define PHASE(m, p) do { if ((m)->timer) phase_mark((m)->timer, (p)); } while (0)

/* ---- model_cuda.c ---- */

/* Bytes of one AdamW moment element. */
size_t state_bytes(const CudaModel *m);
/* ZeRO-3: the gathered buffers hold nothing (the weights changed). */
void gathers_forget(CudaModel *m);
/* Where span i starts in master/m/v. */
size_t span_state_off(const CudaModel *m, int i);
/* A full fp32 copy of the weights (tmp, on the device) becomes the bf16 weights
 * and the master weights of what trains. */
void adopt_weights(CudaModel *m, float *tmp);

/* ---- model_cuda_pass.c: ZeRO's streams and gathers ---- */

/* The stream collectives run on: the communication stream, or on one rank the compute stream. */
cudaStream_t comm_stream(const CudaModel *m);
/* Stream b waits for what stream a has enqueued so far. */
void stream_after(CudaModel *m, cudaStream_t b, cudaStream_t a);
/* [base, base+n) of the flat vector whose shards are shard, whole into out on stream s. */
void zero_allgather(CudaModel *m, const void *shard, size_t elem, size_t base, size_t n, void *out,
                    cudaStream_t s);

#endif
