/* rng.c — xoshiro256** with splitmix64 seeding. */
#include "rng.h"

#include <math.h>

/* splitmix64 turns one 64-bit seed into the four state words: xoshiro must not start from an all-zero state,
 * and nearby seeds (1, 2, 3) must give unrelated streams. The constants are the generator's published ones. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rng_seed(Rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next(Rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* The top 53 bits, scaled by 2^-53: every double in [0, 1) on a uniform grid. */
double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

double rng_normal(Rng *r)
{
    /* Box-Muller: one normal from two uniforms (the second normal it could give is dropped) */
    double u1 = 1.0 - rng_uniform(r);   /* (0, 1]: log is finite */
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t rng_below(Rng *r, uint64_t n)
{
    /* Rejection sampling: no modulo bias. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_next(r); while (x >= limit);
    return x % n;
}
