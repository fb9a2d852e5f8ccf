/* master_split.h — an fp32 master weight kept as its bf16 working weight plus the
 * 16 bits that copy drops (train.master_weights = split, runtime/cuda/model_cuda.c).
 *
 * The bf16 weight the GEMMs read is the master's upper half, rounded; lo is the
 * signed distance from it, in units of the master's last bit, so
 *     master bits = (hi << 16) + (int16_t)lo        (exactly, for every finite value)
 * and the pair costs 4 bytes per parameter where a separate fp32 master and bf16
 * copy cost 6. Rounding is half away from zero in magnitude: it differs from
 * round-to-nearest-even only on exact ties (the dropped half is 0x8000), where
 * it picks the larger magnitude; that keeps lo in [-32768, 32767]. Inf stays
 * inf and NaN NaN (rounding up would make a NaN inf). Integer operations only:
 * the kernels and the CPU test
 * (tests/cuda/master_split_test.c) use this one definition. */
#ifndef LLMC_CUDA_MASTER_SPLIT_H
#define LLMC_CUDA_MASTER_SPLIT_H

#include <stdint.h>

#ifdef __CUDACC__
#define MS_FN static __host__ __device__ __forceinline__
#else
#define MS_FN static inline
#endif

/* The bf16 working weight of master bits x. */
MS_FN uint16_t ms_hi(uint32_t x)
{
    if ((x & 0x7f800000u) == 0x7f800000u) return (uint16_t)(x >> 16 | ((x & 0xffffu) ? 0x40u : 0u));  /* inf, NaN */
    return (uint16_t)((x + 0x8000u) >> 16);
}

/* What hi drops of x: x - (hi << 16), in [-32768, 32767], as 16 bits. */
MS_FN uint16_t ms_lo(uint32_t x, uint16_t hi)
{
    return (uint16_t)(x - ((uint32_t)hi << 16));
}

/* The master bits back from the pair. */
MS_FN uint32_t ms_join(uint16_t hi, uint16_t lo)
{
    return ((uint32_t)hi << 16) + (uint32_t)(int32_t)(int16_t)lo;
}

#endif
