/* host_model.h — the CPU runtime's model description (runtime/model/model.h: ModelConfig,
 * the HF-ordered fp32 parameter buffer) next to the GPU model's flat layout
 * (runtime/cuda/host_model.c). Weights enter and leave the GPU through these, so
 * loading, initialisation, checkpoints and the HF export are the CPU runtime's. */
#ifndef LLMC_CUDA_HOST_MODEL_H
#define LLMC_CUDA_HOST_MODEL_H

#include <stddef.h>
#include "model.h"
#include "model_cuda.h"

/* For each host parameter, its offset in the GPU flat layout (cuda_off[n_params]). */
int cuda_host_map(const Model *hm, const CudaModel *cm, size_t *cuda_off, char *err, size_t errlen);
/* Host buffer in Model order (src, hm->n_floats) <-> flat layout (flat, cm->n_total; padding zero). */
void cuda_host_to_flat(const Model *hm, const size_t *cuda_off, const float *src, float *flat, size_t n_total);
void cuda_flat_to_host(const Model *hm, const size_t *cuda_off, const float *flat, float *dst);
/* ZeRO-3's share of the above: win holds the flat layout's elements [lo, hi)
 * only (win[0] is element lo: a shard's window of a staging buffer, or the
 * offloaded shard itself), all written (padding zeroed). */
void cuda_host_to_flat_range(const Model *hm, const size_t *cuda_off, const float *src, float *win, size_t lo,
                             size_t hi);
/* And back: the parameters' elements of the window win ([lo, hi), as above)
 * into dst (host layout); nothing else of dst is written. */
void cuda_flat_to_host_range(const Model *hm, const size_t *cuda_off, const float *win, float *dst, size_t lo,
                             size_t hi);
/* The host-layout ranges that flat[lo, hi) is made from, one per parameter it
 * meets, in host order, into r (room for hm->n_params); their count. */
int cuda_flat_range_to_host_part(const Model *hm, const size_t *cuda_off, size_t lo, size_t hi, size_t (*r)[2]);

/* Load HF weights (a directory or .safetensors file; F32/BF16/F16; sharded or not)
 * with the CPU runtime's loader and put them on the GPU. 0, or -1 with err. */
int cuda_model_load_hf(CudaModel *cm, const ModelConfig *mc, const char *path, char *err, size_t errlen);

#endif
