/* gemm.c — row-major GEMMs on cuBLASLt (column-major) with a per-shape plan cache.
 *
 * A row-major X[r,c] is the column-major X^T[c,r] with the same leading
 * dimension, so D = op(A).op(B) is computed as D^T = op(B)^T . op(A)^T:
 * cuBLASLt's first operand is our B, its second our A. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include "gemm.h"
#include "gemm_choices.h"
#include "log.h"

#define GEMM_CACHE 512
/* LLMC_GEMM_TUNE=1 times this many of cuBLASLt's candidates per shape: at llmq's
 * shapes the fastest was past the 8th for some FP8 products (2026-12-04) */
#define GEMM_TUNE_ALGOS 24
#define GEMM_FP8_SPARES 8       /* untuned FP8: the candidates asked for, as fallbacks */

typedef struct {
    GemmArgs key;               /* pointers, alpha and beta zeroed; c_is_d set */
    int c_is_d;
    int align[4];               /* bytes: A, B, C, D's pointer alignment (up to 256) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    cublasLtMatmulAlgo_t spare[GEMM_TUNE_ALGOS];   /* FP8: cuBLASLt's further candidates, in its order */
    int n_spare;
    long long choice_key[GEMM_KEY_LEN];   /* its line in the choices file */
} GemmPlan;

struct Gemm {
    cublasLtHandle_t lt;
    cudaStream_t stream;
    void *ws;
    size_t ws_bytes;
    int tune;                   /* LLMC_GEMM_TUNE=1: time the heuristic's candidates */
    int sm_target;              /* gemm_create_side: the SMs cuBLASLt plans for (0: all) */
    const char *choices_path;   /* LLMC_GEMM_CHOICES: the choices file (gemm_choices.h), or NULL */
    char choices_for[352];      /* its header: the cuBLASLt version and the GPU (name up to 256) */
    GemmChoices choices;
    GemmPlan plans[GEMM_CACHE];
    int n_plans;
};

static void lt_check(cublasStatus_t st, const char *what, const GemmArgs *a)
{
    if (st == CUBLAS_STATUS_SUCCESS) return;
    log_error("cuBLASLt %s failed (status %d) for M=%d N=%d K=%d transA=%d transB=%d "
              "batch=%d d_f32=%d types=%d,%d beta=%g c_is_d=%d", what, (int)st, a ? a->M : 0, a ? a->N : 0,
              a ? a->K : 0, a ? a->transA : 0, a ? a->transB : 0, a ? a->batch : 0, a ? a->d_f32 : 0,
              a ? a->a_type : 0, a ? a->b_type : 0, a ? (double)a->beta : 0.0, a ? !a->C || a->C == a->D : 0);
    exit(1);   /* a failing library call, as CUDA_CHECK: the device state is unknown */
}

static int choices_open(Gemm *g, const char *path);

static Gemm *gemm_new(void *stream, size_t workspace_bytes)
{
    Gemm *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->stream = (cudaStream_t)stream;
    g->ws_bytes = workspace_bytes;
    lt_check(cublasLtCreate(&g->lt), "create", NULL);
    if (cudaMalloc(&g->ws, workspace_bytes) != cudaSuccess) {
        log_error("cannot allocate %zu bytes of GEMM workspace", workspace_bytes);
        cublasLtDestroy(g->lt);
        free(g);
        return NULL;
    }
    return g;
}

Gemm *gemm_create_side(void *stream, size_t workspace_bytes, int sm_target)
{
    Gemm *g = gemm_new(stream, workspace_bytes);
    if (g) g->sm_target = sm_target > 0 ? sm_target : 0;
    return g;
}

Gemm *gemm_create(void *stream, size_t workspace_bytes)
{
    Gemm *g = gemm_new(stream, workspace_bytes);
    if (!g) return NULL;
    const char *tune = getenv("LLMC_GEMM_TUNE");
    g->tune = tune && !strcmp(tune, "1");
    const char *path = getenv("LLMC_GEMM_CHOICES");
    if (path && *path && choices_open(g, path)) {
        gemm_destroy(g);
        return NULL;
    }
    return g;
}

/* The choices file's header for this process: what its algorithms are valid for. */
static int choices_open(Gemm *g, const char *path)
{
    int dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        log_error("LLMC_GEMM_CHOICES: cannot query the GPU");
        return -1;
    }
    for (char *c = prop.name; *c; c++)
        if (*c == ' ' || *c == '\t') *c = '_';
    snprintf(g->choices_for, sizeof g->choices_for, "cublasLt=%zu gpu=%s sm=%d%d", cublasLtGetVersion(), prop.name,
             prop.major, prop.minor);
    char err[1024];
    if (gemm_choices_read(&g->choices, path, g->choices_for, err, sizeof err)) {
        log_error("LLMC_GEMM_CHOICES: %s", err);
        return -1;
    }
    g->choices_path = path;
    log_info("GEMM choices: %d shape(s) from %s%s", g->choices.n, path,
             g->tune ? "; new shapes timed (LLMC_GEMM_TUNE=1) and added" : "; new shapes take cuBLASLt's first choice and are added");
    return 0;
}

void gemm_destroy(Gemm *g)
{
    if (!g) return;
    if (g->choices_path && g->choices.dirty) {
        char err[1024];
        if (gemm_choices_write(&g->choices, g->choices_path, g->choices_for, err, sizeof err))
            log_warn("LLMC_GEMM_CHOICES: %s (this run's choices are not kept)", err);
        else
            log_info("GEMM choices: %d shape(s) written to %s", g->choices.n, g->choices_path);
    }
    gemm_choices_free(&g->choices);
    for (int i = 0; i < g->n_plans; i++) {
        GemmPlan *p = &g->plans[i];
        cublasLtMatmulDescDestroy(p->desc);
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->lc);
    }
    cudaFree(g->ws);
    cublasLtDestroy(g->lt);
    free(g);
}

static void set_batch(cublasLtMatrixLayout_t l, int batch, long long stride, const GemmArgs *a)
{
    if (batch <= 1) return;
    int32_t b = batch;
    int64_t s = stride;
    lt_check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b), "batch", a);
    lt_check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s),
             "stride", a);
}

/* Field by field: the structs' padding bytes are not comparable. */
static int same_shape(const GemmArgs *x, const GemmArgs *y)
{
    return x->transA == y->transA && x->transB == y->transB && x->M == y->M && x->N == y->N &&
           x->K == y->K && x->lda == y->lda && x->ldb == y->ldb && x->ldd == y->ldd &&
           x->strideA == y->strideA && x->strideB == y->strideB && x->strideD == y->strideD &&
           x->d_f32 == y->d_f32 && x->batch == y->batch && x->a_type == y->a_type && x->b_type == y->b_type &&
           x->fast_accum == y->fast_accum;
}

/* LLMC_GEMM_TUNE=1: of cuBLASLt's first GEMM_TUNE_ALGOS candidates for a new shape,
 * keep the fastest over a few runs on this call's operands. The runs write a zeroed
 * scratch output with the call's own beta (an accumulating product reads its C: the
 * fp32 weight gradients' cost is in the timing, and a candidate that refuses beta is
 * not chosen), so the call's own result is untouched. The choice follows timings, so
 * two runs may pick different algorithms (last-bit differences): off by default; a
 * choices file (LLMC_GEMM_CHOICES) keeps it. Returns the index of the choice in res
 * (0, cuBLASLt's first, on any failure). */
static int fastest(Gemm *g, GemmPlan *p, const GemmArgs *a, const cublasLtMatmulHeuristicResult_t *res, int found)
{
    size_t elems = (size_t)a->M * a->ldd;
    if (a->batch > 1) elems += (size_t)a->strideD * (a->batch - 1);
    size_t bytes = elems * (a->d_f32 ? 4 : 2);
    void *scratch = NULL;
    cudaEvent_t e0, e1;
    if (cudaMalloc(&scratch, bytes) != cudaSuccess) { cudaGetLastError(); return 0; }
    cudaMemsetAsync(scratch, 0, bytes, g->stream);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const float one = 1.f, beta = a->beta;
    int best = 0;
    float best_ms = -1.f;
    for (int k = 0; k < found; k++) {
        if (res[k].state != CUBLAS_STATUS_SUCCESS) continue;
        cublasStatus_t st = cublasLtMatmul(g->lt, p->desc, &one, a->B, p->la, a->A, p->lb, &beta, scratch, p->lc,
                                           scratch, p->lc, &res[k].algo, g->ws, g->ws_bytes, g->stream);
        cudaEventRecord(e0, g->stream);
        for (int r = 0; r < 3 && st == CUBLAS_STATUS_SUCCESS; r++)
            st = cublasLtMatmul(g->lt, p->desc, &one, a->B, p->la, a->A, p->lb, &beta, scratch, p->lc, scratch,
                                p->lc, &res[k].algo, g->ws, g->ws_bytes, g->stream);
        cudaEventRecord(e1, g->stream);
        float ms = 0.f;
        if (st != CUBLAS_STATUS_SUCCESS || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            continue;
        if (best_ms < 0.f || ms < best_ms) { best = k; best_ms = ms; }
    }
    cudaStreamSynchronize(g->stream);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(scratch);
    cudaGetLastError();
    return best;
}

/* The largest power of two up to 256 that divides p: cuBLASLt's heuristic
 * assumes 256-byte operands unless told less, and sub-matrices (a LoRA target's
 * columns of the QKV output, one target's slice of u) start inside a buffer. */
static int align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && a % (uintptr_t)al) al >>= 1;
    return al;
}

static cudaDataType_t elem_type(int t)
{
    return t == GEMM_E4M3 ? CUDA_R_8F_E4M3 : t == GEMM_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_16BF;
}

/* The plan's shape as the choices file's key (gemm_choices.h's order). */
static void choice_key_of(GemmPlan *p)
{
    const GemmArgs *k = &p->key;
    long long v[GEMM_KEY_LEN] = {k->transA, k->transB, k->M, k->N, k->K, k->lda, k->ldb, k->ldd, k->strideA,
                                 k->strideB, k->strideD, k->d_f32, k->batch, k->a_type, k->b_type,
                                 k->fast_accum != 0, p->c_is_d, p->align[0], p->align[1], p->align[2], p->align[3]};
    memcpy(p->choice_key, v, sizeof v);
}

/* The plan's algorithm into the choices file (written at gemm_destroy). */
static void choice_record(Gemm *g, GemmPlan *p)
{
    if (!g->choices_path) return;
    uint64_t words[GEMM_ALGO_WORDS];
    _Static_assert(sizeof words == sizeof p->algo, "cublasLtMatmulAlgo_t is 8 words");
    memcpy(words, &p->algo, sizeof words);
    if (gemm_choices_set(&g->choices, p->choice_key, words)) {
        log_error("LLMC_GEMM_CHOICES: cannot record the choice for M=%d N=%d K=%d (out of memory, or a "
                  "shape value out of range)", p->key.M, p->key.N, p->key.K);
        exit(1);
    }
}

static GemmPlan *plan_for(Gemm *g, const GemmArgs *a, int c_is_d)
{
    const void *C = a->C ? a->C : a->D;
    int align[4] = {align_of(a->A), align_of(a->B), align_of(C), align_of(a->D)};
    GemmArgs key = *a;
    key.A = key.B = key.C = NULL;
    key.D = NULL;
    key.a_scale = key.b_scale = NULL;
    key.alpha = key.beta = 0.f;
    if (key.batch < 1) key.batch = 1;
    for (int i = 0; i < g->n_plans; i++)
        if (g->plans[i].c_is_d == c_is_d && same_shape(&g->plans[i].key, &key) &&
            !memcmp(g->plans[i].align, align, sizeof align))
            return &g->plans[i];
    if (g->n_plans == GEMM_CACHE) {
        log_error("more than %d GEMM shapes", GEMM_CACHE);
        exit(1);
    }
    GemmPlan *p = &g->plans[g->n_plans];
    memset(p, 0, sizeof *p);
    p->key = key;
    p->c_is_d = c_is_d;
    memcpy(p->align, align, sizeof align);

    /* Column-major view: m = N, n = M; first operand = our B, second = our A. */
    cublasOperation_t opa = key.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = key.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc", a);
    lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "transa", a);
    lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "transb", a);
    if (g->sm_target) {
        int32_t sms = g->sm_target;
        lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms),
                 "SM count target", a);
    }
    uint64_t a_rows = key.transB ? key.K : key.N, a_cols = key.transB ? key.N : key.K;
    uint64_t b_rows = key.transA ? key.M : key.K, b_cols = key.transA ? key.K : key.M;
    cudaDataType_t dt = key.d_f32 ? CUDA_R_32F : CUDA_R_16BF;
    if (key.a_type || key.b_type) {
        if (key.transA || !key.transB || key.batch > 1 || key.K % 16) lt_check(CUBLAS_STATUS_NOT_SUPPORTED, "fp8 layout", a);
        int8_t fast = (int8_t)(key.fast_accum != 0);
        lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast),
                 "fast accumulation", a);
    }
    lt_check(cublasLtMatrixLayoutCreate(&p->la, elem_type(key.b_type), a_rows, a_cols, key.ldb), "layout", a);
    lt_check(cublasLtMatrixLayoutCreate(&p->lb, elem_type(key.a_type), b_rows, b_cols, key.lda), "layout", a);
    lt_check(cublasLtMatrixLayoutCreate(&p->lc, dt, key.N, key.M, key.ldd), "layout", a);
    set_batch(p->la, key.batch, key.strideB, a);
    set_batch(p->lb, key.batch, key.strideA, a);
    set_batch(p->lc, key.batch, key.strideD, a);

    cublasLtMatmulPreference_t pref;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "preference", a);
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &g->ws_bytes, sizeof g->ws_bytes), "preference", a);
    /* cuBLASLt's A is our B (see the top of the file) */
    static const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int k = 0; k < 4; k++) {
        uint32_t v = (uint32_t)align[k];
        lt_check(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[k], &v, sizeof v), "alignment", a);
    }
    cublasLtMatmulHeuristicResult_t res[GEMM_TUNE_ALGOS];
    int found = 0;
    int fp8 = key.a_type || key.b_type;
    lt_check(cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref,
                                            g->tune ? GEMM_TUNE_ALGOS : fp8 ? GEMM_FP8_SPARES : 1, res, &found), "heuristic", a);
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found) lt_check(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic (no algorithm)", a);
    GemmChoice *chosen = NULL;
    if (g->choices_path) {   /* the choices file's algorithm for this shape, if it has one */
        choice_key_of(p);
        chosen = gemm_choices_find(&g->choices, p->choice_key);
    }
    if (chosen) {
        cublasLtMatmulHeuristicResult_t check;
        memcpy(&p->algo, chosen->algo, sizeof p->algo);
        if (cublasLtMatmulAlgoCheck(g->lt, p->desc, p->la, p->lb, p->lc, p->lc, &p->algo, &check) !=
                CUBLAS_STATUS_SUCCESS || check.workspaceSize > g->ws_bytes) {
            log_error("LLMC_GEMM_CHOICES %s: its algorithm for M=%d N=%d K=%d does not run this product "
                      "(delete the file to choose again)", g->choices_path, a->M, a->N, a->K);
            exit(1);
        }
    } else {
        p->algo = res[found > 1 && g->tune ? fastest(g, p, a, res, found) : 0].algo;
    }
    /* FP8: the heuristic does not see beta, and some of its FP8 kernels refuse a
     * product accumulated onto D (NOT_SUPPORTED at the call): gemm_run falls back
     * to the next candidate, in the heuristic's fixed order (the same choice every
     * run; the choices file then keeps the one that ran) */
    for (int k = 0; fp8 && (!g->tune || chosen) && k < found; k++)
        if (memcmp(&res[k].algo, &p->algo, sizeof p->algo)) p->spare[p->n_spare++] = res[k].algo;
    g->n_plans++;
    choice_record(g, p);
    return p;
}

void gemm_run(Gemm *g, const GemmArgs *a)
{
    const void *C = a->C ? a->C : a->D;
    GemmPlan *p = plan_for(g, a, C == a->D);
    if (a->a_type || a->b_type) {   /* cuBLASLt's A is our B; the scales are read when the product runs */
        lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a->b_scale,
                                                sizeof a->b_scale), "scale", a);
        lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a->a_scale,
                                                sizeof a->a_scale), "scale", a);
    }
    cublasStatus_t st;
    while ((st = cublasLtMatmul(g->lt, p->desc, &a->alpha, a->B, p->la, a->A, p->lb, &a->beta, C, p->lc, a->D, p->lc,
                                &p->algo, g->ws, g->ws_bytes, g->stream)) == CUBLAS_STATUS_NOT_SUPPORTED &&
           p->n_spare > 0) {
        p->algo = p->spare[0];
        memmove(p->spare, p->spare + 1, --p->n_spare * sizeof p->spare[0]);
        choice_record(g, p);   /* the file keeps the algorithm that ran */
    }
    lt_check(st, "matmul", a);
}
