/* rng.h — deterministic pseudo-random numbers (xoshiro256**, seeded by
 * splitmix64). The state is plain data so checkpoints can save and restore it. */
#ifndef LLMC_RNG_H
#define LLMC_RNG_H

#include <stdint.h>

typedef struct { uint64_t s[4]; } Rng;

void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_next(Rng *r);
/* Uniform in [0, 1). */
double rng_uniform(Rng *r);
/* Standard normal (Box-Muller, one value per call). */
double rng_normal(Rng *r);
/* Uniform integer in [0, n). */
uint64_t rng_below(Rng *r, uint64_t n);

#endif
