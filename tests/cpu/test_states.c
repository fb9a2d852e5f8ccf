/* tests/cpu/test_states.c — AdamW with bf16 moments (train.optimizer_states =
 * bf16, runtime/model/optim.c over contract/bf16_round.h) against fp32 moments:
 *   - every stored moment is a bf16 value (its low 16 bits zero);
 *   - the same inputs give the same bits twice, and the step over two shards
 *     (adamw_step_range, as ZeRO runs it) the bits of the whole step;
 *   - the weights stay within a bound of the fp32-moment trajectory over N steps
 *     on a noisy quadratic, and reach the same loss;
 *   - stochastic rounding keeps v moving: with a constant gradient and
 *     beta2 = 0.999, each update is 0.1% of v, below half a bf16 ulp, so
 *     round-to-nearest would freeze v; here v follows (1 - beta2^t) g^2.
 * Prints "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_round.h"
#include "optim.h"

static int passed, failed;
static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (ok) passed++; else failed++;
}

#define N 4099          /* odd: tensors and shards end off any vector width */
#define STEPS 300
#define SEED 42

static const ParamInfo params[2] = {
    {.name = "a", .offset = 0, .numel = 2048, .decay = 1},
    {.name = "b", .offset = 2048, .numel = N - 2048, .decay = 0},
};

/* A noisy quadratic: loss = 0.5 sum c_i (w_i - t_i)^2, gradient plus a
 * deterministic noise (an LCG), so the moments see real variation. */
typedef struct { float c[N], t[N]; } Problem;

static void problem_init(Problem *p)
{
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        p->c[i] = 0.1f + (float)(s >> 8) / (float)(1u << 24);
        s = s * 1664525u + 1013904223u;
        p->t[i] = (float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
}

static double grad(const Problem *p, const float *w, float *g, int step)
{
    uint32_t s = 777u + (uint32_t)step * 2654435761u;
    double loss = 0;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        float noise = ((float)(s >> 8) / (float)(1u << 24) - 0.5f) * 0.2f;
        float d = w[i] - p->t[i];
        g[i] = p->c[i] * d + noise;
        loss += 0.5 * p->c[i] * d * d;
    }
    return loss;
}

static double train(const Problem *p, OptimStates st, float *w, AdamW *o, int shards)
{
    float g[N];
    memset(w, 0, sizeof(float) * N);
    AdamW sh[2];
    size_t cut = 1501;   /* a shard boundary inside tensor a */
    if (shards == 1) {
        adamw_init(o, N, 0.9, 0.999, 1e-8, 0.1);
        adamw_set_states(o, st, SEED);
    } else {
        adamw_init(&sh[0], cut, 0.9, 0.999, 1e-8, 0.1);
        adamw_init(&sh[1], N - cut, 0.9, 0.999, 1e-8, 0.1);
        for (int k = 0; k < 2; k++) adamw_set_states(&sh[k], st, SEED);
    }
    double loss = 0;
    for (int s = 0; s < STEPS; s++) {
        loss = grad(p, w, g, s);
        if (shards == 1) adamw_step(o, params, 2, w, g, 0.01);
        else {
            adamw_step_range(&sh[0], params, 2, 0, w, g, 0.01);
            adamw_step_range(&sh[1], params, 2, cut, w + cut, g + cut, 0.01);
        }
    }
    if (shards == 2) {   /* the whole moments, for comparison, in o */
        adamw_init(o, N, 0.9, 0.999, 1e-8, 0.1);
        memcpy(o->m, sh[0].m, cut * sizeof(float));
        memcpy(o->v, sh[0].v, cut * sizeof(float));
        memcpy(o->m + cut, sh[1].m, (N - cut) * sizeof(float));
        memcpy(o->v + cut, sh[1].v, (N - cut) * sizeof(float));
        o->t = sh[0].t;
        adamw_free(&sh[0]);
        adamw_free(&sh[1]);
    }
    return loss;
}

static int all_bf16(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        if (u & 0xffffu) return 0;
    }
    return 1;
}

/* v under a constant gradient g: rounding to nearest would stop it where
 * beta2's 0.1% step falls below half an ulp; stochastic rounding follows the
 * exact (1 - beta2^t) g^2 on average. */
static void test_v_does_not_freeze(void)
{
    enum { M = 4096, T = 3000 };
    static float w[M], g[M];
    ParamInfo one = {.name = "w", .offset = 0, .numel = M, .decay = 0};
    AdamW o;
    adamw_init(&o, M, 0.9, 0.999, 1e-8, 0.0);
    adamw_set_states(&o, OSTATES_BF16, SEED);
    for (int i = 0; i < M; i++) g[i] = 1.0f;
    for (int s = 0; s < T; s++) adamw_step(&o, &one, 1, w, g, 0.0);
    double mean = 0;
    for (int i = 0; i < M; i++) mean += o.v[i];
    mean /= M;
    double want = 1.0 - pow(0.999, T);   /* 0.9503 */
    /* the same recurrence stored with round-to-nearest (br_round with half
     * the dropped range added), which this test must tell apart */
    float rtn = 0;
    for (int s = 0; s < T; s++) {
        float x = 0.999f * rtn + 0.001f;
        uint32_t u;
        memcpy(&u, &x, sizeof u);
        u = (uint32_t)br_round(u, 0x8000u) << 16;
        memcpy(&rtn, &u, sizeof rtn);
    }
    char what[200];
    snprintf(what, sizeof what, "bf16 v under a constant gradient after %d steps: mean %.4f, exact %.4f (within 1%%; "
             "round-to-nearest stalls at %.4f)", T, mean, want, rtn);
    check(fabs(mean - want) < 0.01 * want && rtn < 0.9 * want, what);
    adamw_free(&o);
}

int main(void)
{
    static Problem p;
    static float w32[N], w16[N], w16b[N], w16s[N];
    problem_init(&p);
    AdamW o32, o16, o16b, o16s;
    double l32 = train(&p, OSTATES_FP32, w32, &o32, 1);
    double l16 = train(&p, OSTATES_BF16, w16, &o16, 1);
    train(&p, OSTATES_BF16, w16b, &o16b, 1);
    train(&p, OSTATES_BF16, w16s, &o16s, 2);

    check(all_bf16(o16.m, N) && all_bf16(o16.v, N), "bf16 states: every stored m and v is a bf16 value");
    check(!all_bf16(o32.m, N), "fp32 states: m keeps its low bits (the two paths differ)");
    check(memcmp(w16, w16b, sizeof w16) == 0 && memcmp(o16.m, o16b.m, sizeof(float) * N) == 0 &&
          memcmp(o16.v, o16b.v, sizeof(float) * N) == 0, "bf16 states: the same bits twice (weights, m, v)");
    check(memcmp(w16, w16s, sizeof w16) == 0 && memcmp(o16.m, o16s.m, sizeof(float) * N) == 0 &&
          memcmp(o16.v, o16s.v, sizeof(float) * N) == 0,
          "bf16 states: two shards (adamw_step_range, cut inside a tensor) give the whole step's bits");
    double maxd = 0, maxw = 0;
    int differ = 0;
    for (int i = 0; i < N; i++) {
        double d = fabs((double)w16[i] - w32[i]);
        if (d > maxd) maxd = d;
        if (fabs(w32[i]) > maxw) maxw = fabs(w32[i]);
        differ |= w16[i] != w32[i];
    }
    char what[200];
    /* the bound: a step moves w by at most ~lr; bf16 moments differ from fp32
     * ones by a relative 2^-8 per rounding, unbiased, so the trajectories stay
     * within a few steps' worth of lr of each other */
    snprintf(what, sizeof what, "bf16 vs fp32 states after %d steps: weights differ (max %.2g, |w| up to %.2g) by "
             "less than 3 x lr", STEPS, maxd, maxw);
    check(differ && maxd < 0.03, what);
    snprintf(what, sizeof what, "bf16 vs fp32 states: final loss %.6g vs %.6g, within 1%%", l16, l32);
    check(fabs(l16 - l32) < 0.01 * l32, what);
    test_v_does_not_freeze();
    adamw_free(&o32); adamw_free(&o16); adamw_free(&o16b); adamw_free(&o16s);
    printf("states: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
