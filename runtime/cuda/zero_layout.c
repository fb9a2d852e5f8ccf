/* zero_layout.c — shards and units of ZeRO-2/3 (zero_layout.h). */
#include "zero_layout.h"

void zl_starts(size_t n_total, int world, size_t block, size_t *starts)
{
    size_t blocks = (n_total + block - 1) / block, per = (blocks + (size_t)world - 1) / (size_t)world;
    for (int q = 0; q <= world; q++) {
        size_t s = (size_t)q * per * block;
        starts[q] = s < n_total ? s : n_total;
    }
}

void zl_owned(const size_t *starts, int q, size_t base, size_t n, size_t *a, size_t *b)
{
    *a = starts[q] > base ? starts[q] : base;
    *b = starts[q + 1] < base + n ? starts[q + 1] : base + n;
}

void zl_clamp_starts(const size_t *starts, int world, size_t base, size_t n, size_t *out)
{
    for (int q = 0; q <= world; q++)
        out[q] = starts[q] < base ? base : starts[q] > base + n ? base + n : starts[q];
}

int zl_units(int layers, const size_t *mat, size_t decay_end, const size_t *nd, size_t n_total, ZeroUnit *u)
{
    if (mat[0] != 0 || nd[0] != decay_end || mat[layers] > decay_end || nd[layers] > n_total) return -1;
    for (int l = 0; l < layers; l++) {
        if (mat[l + 1] < mat[l] || nd[l + 1] < nd[l]) return -1;
        u[l] = (ZeroUnit){{mat[l], nd[l]}, {mat[l + 1] - mat[l], nd[l + 1] - nd[l]}};
    }
    u[layers] = (ZeroUnit){{mat[layers], nd[layers]}, {decay_end - mat[layers], n_total - nd[layers]}};
    return 0;
}

size_t zl_unit_len(const ZeroUnit *u) { return u->len[0] + u->len[1]; }

size_t zl_unit_pos(const ZeroUnit *u, size_t off)
{
    if (off >= u->off[0] && off - u->off[0] < u->len[0]) return off - u->off[0];
    if (off >= u->off[1] && off - u->off[1] < u->len[1]) return u->len[0] + (off - u->off[1]);
    return (size_t)-1;
}
