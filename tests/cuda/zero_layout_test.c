/* zero_layout_test.c — runtime/cuda/zero_layout.h on the CPU: for flat layouts
 * shaped like model_cuda.c's (per-layer matrices, embedding and head, per-layer
 * norms and biases, final norm, padding; each tensor rounded up to 64 elements)
 * at several sizes and 1-8 ranks: the units tile the buffer once and a unit's
 * buffer maps back one to one, each element at its flat offset's alignment; shards are whole blocks that tile the buffer;
 * clamped starts name the same owners; and a bucket reduced window by window in
 * rank order onto each rank's shard (what the host transport does) gives the
 * bits of one rank adding the same micro-batches in slot order, while the block
 * sums of squares of the shards equal one rank's. Closes with "N passed, N failed". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zero_layout.h"

static int pass, fail;

static void check(int ok, const char *what, int world, size_t at)
{
    if (ok) { pass++; return; }
    if (fail++ < 10) printf("FAIL %s (world %d, at %zu)\n", what, world, at);
}

static size_t take(size_t *cur, size_t n)
{
    size_t o = *cur;
    *cur += (n + 63) / 64 * 64;
    return o;
}

typedef struct {
    int L;
    size_t mat[9], nd[9], decay_end, n_total;
} Layout;

/* layers L (<= 8), hidden C, ffn F, vocab V, tied head or not, padding unit */
static void layout(Layout *y, int L, size_t C, size_t F, size_t V, int tied, size_t pad)
{
    size_t cur = 0;
    y->L = L;
    for (int l = 0; l < L; l++) {
        y->mat[l] = take(&cur, 3 * C * C);
        take(&cur, C * C);
        take(&cur, 2 * F * C);
        take(&cur, C * F);
    }
    y->mat[L] = take(&cur, V * C);
    if (!tied) take(&cur, V * C);
    y->decay_end = cur;
    for (int l = 0; l < L; l++) {
        y->nd[l] = take(&cur, C);
        take(&cur, 3 * C);   /* q/k/v biases */
        take(&cur, C);
    }
    y->nd[L] = take(&cur, C);
    y->n_total = (cur + pad - 1) / pad * pad;
}

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

/* units tile [0, n) once; unit buffers map back one to one */
static void check_units(const Layout *y, const ZeroUnit *u, int world)
{
    unsigned char *seen = calloc(y->n_total, 1);
    size_t bad = 0;
    for (int k = 0; k <= y->L; k++) {
        size_t len = zl_unit_len(&u[k]);
        for (int r = 0; r < 2; r++)
            for (size_t i = 0; i < u[k].len[r]; i++) {
                size_t off = u[k].off[r] + i, pos = zl_unit_pos(&u[k], off);
                seen[off]++;
                bad += !(pos < len && pos == u[k].pos[r] + i && pos % ZL_ALIGN_ELEMS == off % ZL_ALIGN_ELEMS);
            }
        bad += u[k].pos[0] >= ZL_ALIGN_ELEMS || u[k].pos[1] < u[k].pos[0] + u[k].len[0] ||
               u[k].pos[1] >= u[k].pos[0] + u[k].len[0] + ZL_ALIGN_ELEMS || len != u[k].pos[1] + u[k].len[1];
    }
    check(bad == 0, "unit buffers map back one to one, aligned as the flat buffer, packed", world, bad);
    bad = 0;
    for (size_t i = 0; i < y->n_total; i++) bad += seen[i] != 1;
    check(bad == 0, "units tile the buffer once", world, bad);
    check(zl_unit_pos(&u[0], y->n_total) == (size_t)-1, "outside a unit", world, y->n_total);
    free(seen);
}

/* shards: whole blocks, tiling; clamped starts name the same owners */
static void check_shards(const Layout *y, const ZeroUnit *u, const size_t *st, int world, size_t block)
{
    check(st[0] == 0 && st[world] == y->n_total, "shards cover the buffer", world, st[world]);
    for (int q = 0; q < world; q++) {
        check(st[q] <= st[q + 1], "shards in order", world, st[q]);
        check(st[q] % block == 0 || st[q] == y->n_total, "shards start on a block", world, st[q]);
    }
    size_t *cl = malloc(((size_t)world + 1) * sizeof *cl);
    for (int k = 0; k <= y->L; k++)
        for (int r = 0; r < 2; r++) {
            size_t base = u[k].off[r], n = u[k].len[r], total = 0;
            zl_clamp_starts(st, world, base, n, cl);
            for (int q = 0; q < world; q++) {
                size_t a, b, ca, cb;
                zl_owned(st, q, base, n, &a, &b);
                zl_owned(cl, q, base, n, &ca, &cb);
                if (a < b) {
                    total += b - a;
                    check(ca == a && cb == b && cl[q] == a, "clamped starts: same owner, part at its start", world, a);
                } else {
                    check(ca >= cb, "clamped starts: nothing owned", world, base);
                }
            }
            check(total == n, "owners' parts tile a window", world, base);
        }
    free(cl);
}

/* 2 micro-batches per rank: bucket by bucket in rank order onto the shards
 * against one rank adding slots 0, 1, 2, ... (slot a*world + r on rank r). */
static void check_sums(const Layout *y, const ZeroUnit *u, const size_t *st, int world, size_t block)
{
    const int A = 2, S = A * world;
    size_t n = y->n_total;
    float *g = malloc((size_t)S * n * sizeof *g), *one = malloc(n * sizeof *one), *acc = malloc(n * sizeof *acc);
    for (size_t i = 0; i < (size_t)S * n; i++) g[i] = frand();
    for (size_t i = 0; i < n; i++) {
        one[i] = g[i];
        for (int s = 1; s < S; s++) one[i] += g[(size_t)s * n + i];
    }
    for (int a = 0; a < A; a++)
        for (int k = 0; k <= y->L; k++)
            for (int r = 0; r < 2; r++)
                for (int q = 0; q < world; q++) {   /* owner q's part of the window, in rank order */
                    size_t lo, hi;
                    zl_owned(st, q, u[k].off[r], u[k].len[r], &lo, &hi);
                    for (size_t i = lo; i < hi; i++)
                        for (int p = 0; p < world; p++) {
                            float v = g[(size_t)(a * world + p) * n + i];
                            acc[i] = a == 0 && p == 0 ? v : acc[i] + v;
                        }
                }
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&acc[i], &one[i], sizeof(float)) != 0;
    check(diff == 0, "rank-ordered bucket sums are one rank's bits", world, diff);
    /* block sums of squares: the shards' blocks are one rank's blocks */
    size_t nb = (n + block - 1) / block, bad = 0;
    for (size_t b = 0; b < nb; b++) {
        int owners = 0;
        for (int q = 0; q < world; q++) owners += st[q] <= b * block && b * block < st[q + 1];
        bad += owners != 1;
    }
    check(bad == 0, "each norm block in one shard", world, bad);
    free(g); free(one); free(acc);
}

int main(void)
{
    const size_t block = 4096;
    struct { int L; size_t C, F, V; int tied; } shapes[] = {
        {2, 64, 176, 512, 1}, {3, 96, 256, 1000 / 8 * 8, 0}, {8, 32, 64, 64, 1}, {1, 256, 704, 2048, 0},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int world = 1; world <= 8; world++) {
            Layout y;
            ZeroUnit u[9];
            size_t st[9];
            layout(&y, shapes[k].L, shapes[k].C, shapes[k].F, shapes[k].V, shapes[k].tied, 64 * (size_t)world);
            int rc = zl_units(y.L, y.mat, y.decay_end, y.nd, y.n_total, ZL_ALIGN_ELEMS, u);
            check(rc == 0, "units from a valid layout", world, 0);
            if (rc) continue;
            zl_starts(y.n_total, world, block, st);
            check_units(&y, u, world);
            check_shards(&y, u, st, world, block);
            check_sums(&y, u, st, world, block);
        }
    Layout y;
    ZeroUnit u[9];
    layout(&y, 2, 64, 176, 512, 1, 64);
    y.nd[0] += 64;   /* a gap between the matrices and the norms */
    check(zl_units(y.L, y.mat, y.decay_end, y.nd, y.n_total, ZL_ALIGN_ELEMS, u) != 0,
          "a layout that does not tile is refused", 1, 0);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
