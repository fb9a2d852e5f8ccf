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

/* The ranges' places in the buffer: each at the first position past the one
 * before that is congruent to its offset modulo align. */
static ZeroUnit unit(size_t off0, size_t len0, size_t off1, size_t len1, size_t align)
{
    ZeroUnit u = {{off0, off1}, {len0, len1}, {off0 % align, 0}, 0};
    size_t end0 = u.pos[0] + len0;
    u.pos[1] = end0 + (off1 % align + align - end0 % align) % align;
    u.size = u.pos[1] + len1;
    return u;
}

int zl_units(int layers, const size_t *mat, size_t decay_end, const size_t *nd, size_t n_total, size_t align,
             ZeroUnit *u)
{
    if (mat[0] != 0 || nd[0] != decay_end || mat[layers] > decay_end || nd[layers] > n_total || !align) return -1;
    for (int l = 0; l < layers; l++) {
        if (mat[l + 1] < mat[l] || nd[l + 1] < nd[l]) return -1;
        u[l] = unit(mat[l], mat[l + 1] - mat[l], nd[l], nd[l + 1] - nd[l], align);
    }
    u[layers] = unit(mat[layers], decay_end - mat[layers], nd[layers], n_total - nd[layers], align);
    return 0;
}

size_t zl_unit_len(const ZeroUnit *u) { return u->size; }

size_t zl_unit_pos(const ZeroUnit *u, size_t off)
{
    for (int k = 0; k < 2; k++)
        if (off >= u->off[k] && off - u->off[k] < u->len[k]) return u->pos[k] + (off - u->off[k]);
    return (size_t)-1;
}
