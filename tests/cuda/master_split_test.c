/* master_split_test.c — runtime/cuda/master_split.h on the CPU: the split of an
 * fp32 master weight into its bf16 working weight and the 16 bits that drops.
 * For every bf16 pattern, with low halves at and around each rounding boundary
 * and pseudo-random ones: the pair gives the master back bit for bit, the
 * working weight is round-to-nearest-even except on exact ties (where it takes
 * the larger magnitude), and inf and NaN keep their class. Closes with
 * "N passed, N failed". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "master_split.h"

static int pass, fail;

static void check(int ok, const char *what, uint32_t x)
{
    if (ok) { pass++; return; }
    if (fail++ < 10) printf("FAIL %s: x = 0x%08x\n", what, x);
}

/* Round to nearest, ties to even: the bf16 that __float2bfloat16 gives a finite x. */
static uint16_t rne(uint32_t x)
{
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static int is_nan(uint32_t x) { return (x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu); }

static void one(uint32_t x)
{
    uint16_t hi = ms_hi(x), lo = ms_lo(x, hi);
    uint32_t back = ms_join(hi, lo);
    if (is_nan(x)) {
        check(is_nan((uint32_t)hi << 16), "NaN stays NaN in bf16", x);
        check(is_nan(back), "NaN stays NaN joined", x);
        return;
    }
    check(back == x, "join(hi, lo) == x", x);
    if ((x & 0xffffu) == 0x8000u)
        check(hi == (uint16_t)((x >> 16) + 1), "tie: the larger magnitude", x);
    else
        check(hi == rne(x), "round to nearest", x);
}

int main(void)
{
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0002, 0x3fff, 0x7ffe, 0x7fff, 0x8000,
                                    0x8001, 0x8002, 0xc000, 0xfffe, 0xffff};
    int groups = 0;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (uint32_t top = 0; top < 0x10000u; top++) {
        int before = fail;
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) one(top << 16 | lows[k]);
        for (int k = 0; k < 16; k++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            one(top << 16 | (uint32_t)(r & 0xffffu));
        }
        groups += fail == before;
    }
    /* the named values: zeros, the largest finite (its bf16 is inf, as under RNE), inf */
    static const uint32_t named[] = {0x00000000u, 0x80000000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                                     0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x3f800000u};
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) one(named[k]);
    check(ms_hi(0x7f7fffffu) == 0x7f80u, "largest finite rounds to inf", 0x7f7fffffu);
    printf("%d of 65536 bf16 patterns, 28 low halves each, exact\n", groups);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
