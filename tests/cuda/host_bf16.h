/* host_bf16.h — what the GPU test programs (fp8_check.c, initcheck_probe.c in tests/cuda)
 * share on the host: bf16 <-> float and a splitmix64 stream of uniform deviates. */
#ifndef LLMC_TESTS_HOST_BF16_H
#define LLMC_TESTS_HOST_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t f2bf(float f)   /* round to nearest even */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The next splitmix64 value of *state, as a uniform deviate in [0, 1). */
static inline double splitmix_unit(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (z >> 11) * 0x1.0p-53;
}

#endif
