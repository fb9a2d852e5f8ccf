/* cuda_layout.h — the llmc CUDA trainer's allocation constants, which llmc's
 * estimator counts (compiler/estimate/estimate_memory.c) and the trainer allocates by
 * (runtime/cuda/): defined once, so the estimate cannot drift from the code.
 * Plain integers for both C and CUDA C (and two shape predicates at the end);
 * element counts unless a name says bytes. */
#ifndef LLMC_CUDA_LAYOUT_H
#define LLMC_CUDA_LAYOUT_H

/* Every tensor's slice of the flat parameter buffers (model_cuda.c) and of the
 * LoRA adapters' buffer (lora_cuda.c) is rounded up to this many elements (128
 * bytes in bf16: whole vectors for every kernel and GEMM operand). */
#define LLMC_CUDA_ALIGN_ELEMS 64
/* The LM head and the loss run over at most this many rows of logits at a time. */
#define LLMC_CUDA_CE_CHUNK_ROWS 8192
/* The gradient norm: fp32 partial sums of this many blocks (k_sumsq), and the
 * device scalars of the norm, then one partial per trained span (freeze: two). */
#define LLMC_CUDA_SUMSQ_BLOCKS 1024
#define LLMC_CUDA_SUMSQ_SLOTS 3
/* Column sums in a fixed order (norm-weight and bias gradients): at most this
 * many row blocks of RMSNorm's backward, splits of the qkv bias gradient, and
 * blocks of Qwen3's head-norm backward leave fp32 partial rows. */
#define LLMC_CUDA_RMS_BWD_MAX_BLOCKS 512
#define LLMC_CUDA_BIAS_GRAD_SPLITS 64
#define LLMC_CUDA_HEAD_NORM_BLOCKS 256
/* The gradient norm's fixed blocks (runtime/model/optim.h GRAD_NORM_BLOCK), which
 * are also the unit of ZeRO's shards: a rank owns whole blocks. */
#define LLMC_GRAD_NORM_BLOCK 4096
/* ZeRO-2/3 unit buffers (runtime/cuda/zero_layout.h): each range placed at its
 * flat offset modulo this many elements (256 bytes of bf16). */
#define LLMC_CUDA_ZERO_ALIGN_ELEMS 128
/* Optimizer offload: staging sets of master, m and v chunks of this many floats. */
#define LLMC_CUDA_OFFLOAD_SETS 3
#define LLMC_CUDA_OFFLOAD_CHUNK (32 << 20)
/* cuDNN attention (attn_cudnn.c): workspace regions rounded to this many bytes;
 * the document (ragged) plan is built for the next power of two of DOCS_PER_ROW
 * x the micro batch sequences, at most MAX_DOCS. */
#define LLMC_CUDNN_WS_ALIGN 256
#define LLMC_CUDNN_DOCS_PER_ROW 8
#define LLMC_CUDNN_MAX_DOCS 1024

/* The attention shapes the fused kernels take, which the trainer routes by
 * (runtime/cuda/flash_attn.cu k_flash_supported, attn_cudnn.c
 * attn_cudnn_supported) and llmc's estimator predicts by (estimate_llmc_cuda_*):
 * the flash kernels take head sizes 32, 64 and 128 and a context that is a
 * positive multiple of their 64-key blocks; cuDNN's fused SDPA takes head sizes
 * 64 and 128, whole query groups and a context of whole 64-token tiles.
 * Otherwise the scores are materialised ("eager"). */
static inline int llmc_flash_shape_ok(long long head_dim, long long context)
{
    return (head_dim == 32 || head_dim == 64 || head_dim == 128) && context > 0 && context % 64 == 0;
}
static inline int llmc_cudnn_shape_ok(long long heads, long long kv_heads, long long head_dim, long long context)
{
    return heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && (head_dim == 64 || head_dim == 128) &&
           context >= 64 && context % 64 == 0;
}

#endif
