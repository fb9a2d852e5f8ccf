/* bf16_round.h — fp32 to bf16 with stochastic rounding, for AdamW moments kept in
 * bf16 (train.optimizer_states = bf16): one definition for the CPU optimizer
 * (runtime/model/optim.c) and the CUDA kernels (runtime/cuda/kernels_adamw.cu),
 * so both round the same bits.
 *
 * Why stochastic: with beta2 = 0.999 one update moves v by 0.1%, below half a
 * bf16 ulp (0.39%), so round-to-nearest would freeze v; rounding up with
 * probability equal to the dropped fraction keeps v unbiased. The random bits are
 * a hash of (seed, step, element, moment), not a generator state: the result is
 * the same on any rank count, any kernel launch shape and after a resume. */
#ifndef LLMC_BF16_ROUND_H
#define LLMC_BF16_ROUND_H

#include <stdint.h>

#ifdef __CUDACC__
#define BR_FN static __host__ __device__ __forceinline__
#else
#define BR_FN static inline
#endif

/* 16 random bits for element idx of moment which (0: m, 1: v) at optimizer step
 * step: a 32-bit integer hash (the lowbias32 finaliser) of the four inputs. */
BR_FN uint32_t br_bits(uint32_t seed, uint32_t step, uint64_t idx, uint32_t which)
{
    uint32_t x = (uint32_t)idx * 0x9E3779B1u ^ (uint32_t)(idx >> 32) * 0x7FEB352Du;
    x ^= step * 0x85EBCA77u ^ which * 0xC2B2AE3Du ^ seed * 0x27D4EB2Fu;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x & 0xFFFFu;
}

/* The bf16 bits of fp32 bits x rounded up in magnitude with probability
 * (dropped 16 bits) / 65536. Inf and NaN keep their class; a finite value whose
 * rounding carries into the exponent becomes the next binade's value, as
 * round-to-nearest would (and at the top of the range, inf, as fp32 to bf16 does). */
BR_FN uint16_t br_round(uint32_t x, uint32_t rnd16)
{
    if ((x & 0x7f800000u) == 0x7f800000u) return (uint16_t)(x >> 16 | ((x & 0xffffu) ? 0x40u : 0u));
    return (uint16_t)((x + rnd16) >> 16);
}

#endif
