/* attn_cudnn.c — causal GQA attention through cuDNN's fused flash attention
 * (attn_cudnn.h), through the C backend API only.
 *
 * cuDNN runs its fused attention kernels for an operation graph of the shape its
 * own C++ frontend emits for an SDPA node (cudnn-frontend's composite SDPA nodes):
 * matmul, pointwise and reduction operations that the engine recognises as one
 * pattern. This file builds those graphs by hand:
 *
 *   forward   S = (Q K^T) * scale; causal mask (row >= col, else -inf);
 *             M = max S; E = exp(S - M); Z = sum E; stats = M + log Z;
 *             O = (E / Z) V
 *   backward  Dsum = sum(dO * O); P = exp(S - stats) under the same mask;
 *             dV = P^T dO; dS = (dO V^T - Dsum) * P * scale; dK = dS^T Q; dQ = dS K
 *             (GQA: dV and dK summed over each group of H/KV query heads by a
 *             reduction of the full-head products)
 *
 * The backend takes K and V of the score matmuls transposed, [B,KV,D,T]: the same
 * memory with the last two strides swapped. Dsum (and, on the non-deterministic
 * path, the fp32 dQ accumulator) are tensors the graph writes to memory: they live
 * at the start of the caller's workspace, cuDNN's own workspace after them.
 *
 * Determinism: on Hopper cuDNN computes dQ without atomics when dQ is the direct
 * output of the dS K matmul (the frontend's "dP workspace" form, which it selects
 * for is_deterministic_algorithm); with an fp32 dQ accumulator it accumulates with
 * atomics and run-to-run bits differ. The deterministic form is the default here;
 * LLMC_CUDNN_DETERMINISTIC=0 selects the accumulator form (attn_cudnn_deterministic
 * reports which one a shape got).
 *
 * Plans are built once per shape (heuristics mode A, then the fallback list; the
 * first engine configuration that finalises wins) and cached for the process. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attn_cudnn.h"

int attn_cudnn_supported(int H, int KV, int T, int D, int docs)
{
    return !docs && H > 0 && KV > 0 && H % KV == 0 && (D == 64 || D == 128) && T >= 64 && T % 64 == 0;
}

int attn_cudnn_plain_rows(const int *pos, int B, int T)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            if (pos[(size_t)b * T + t] != t) return 0;
    return 1;
}

#ifndef LLMC_HAVE_CUDNN

int attn_cudnn_built(void) { return 0; }

AttnCudnn *attn_cudnn_create(char *err, size_t errlen)
{
    snprintf(err, errlen, "built without cuDNN (no cudnn.h under CUDA_HOME/include at build time)");
    return NULL;
}

void attn_cudnn_destroy(AttnCudnn *a) { (void)a; }

size_t attn_cudnn_prepare(AttnCudnn *a, int B, int H, int KV, int T, int D, char *err, size_t errlen)
{
    (void)a; (void)B; (void)H; (void)KV; (void)T; (void)D;
    snprintf(err, errlen, "built without cuDNN");
    return 0;
}

/* Unreachable without a context (attn_cudnn_create answered NULL). */
void attn_cudnn_fwd(AttnCudnn *a, bf16_t *O, float *stats, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                    int B, int H, int KV, int T, int D, void *workspace, kstream_t s)
{
    (void)a; (void)O; (void)stats; (void)Q; (void)K; (void)V; (void)B; (void)H; (void)KV; (void)T; (void)D;
    (void)workspace; (void)s;
    fprintf(stderr, "llmc-train-cuda: attn_cudnn_fwd called in a build without cuDNN\n");
    exit(1);
}

void attn_cudnn_bwd(AttnCudnn *a, bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K,
                    const bf16_t *V, const bf16_t *O, const bf16_t *dO, const float *stats,
                    int B, int H, int KV, int T, int D, void *workspace, kstream_t s)
{
    (void)a; (void)dq; (void)dk; (void)dv; (void)Q; (void)K; (void)V; (void)O; (void)dO; (void)stats;
    (void)B; (void)H; (void)KV; (void)T; (void)D; (void)workspace; (void)s;
    fprintf(stderr, "llmc-train-cuda: attn_cudnn_bwd called in a build without cuDNN\n");
    exit(1);
}

int attn_cudnn_deterministic(const AttnCudnn *a, int B, int H, int KV, int T, int D)
{
    (void)a; (void)B; (void)H; (void)KV; (void)T; (void)D;
    return 0;
}

#else /* LLMC_HAVE_CUDNN */

#include <cudnn.h>

int attn_cudnn_built(void) { return 1; }

/* Unique ids of the tensors the caller binds (the variant pack); virtual tensors
 * are numbered from UID_VIRTUAL up. */
enum {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV,
    UID_SCALE, UID_NEG_INF, UID_ONE, UID_DSUM, UID_DQ_ACC,
    UID_VIRTUAL = 100
};

#define MAX_DESC 96
#define MAX_OPS 48
#define MAX_BIND 16
#define WS_ALIGN 256

/* One operation graph while it is built, then its execution plan. Every backend
 * descriptor it creates is kept (and destroyed with it): the plan refers to them. */
typedef struct {
    cudnnBackendDescriptor_t desc[MAX_DESC];
    int n_desc;
    cudnnBackendDescriptor_t ops[MAX_OPS];
    int n_ops;
    int64_t next_uid;
    cudnnStatus_t status;       /* first failure, CUDNN_STATUS_SUCCESS while none */
    const char *failed_at;
    cudnnBackendDescriptor_t plan;
    int64_t workspace;          /* cuDNN's own workspace bytes */
} Graph;

/* Host values of the by-value scalars, bound by address at execution. */
typedef struct {
    float scale, neg_inf, one;
} Scalars;

typedef struct {
    int B, H, KV, T, D;
    int deterministic;          /* backward without the fp32 dQ accumulator */
    Graph fwd, bwd;
    size_t dsum_off, dqacc_off, cudnn_off;   /* bwd workspace layout */
    size_t ws_bytes;            /* caller's workspace: max over fwd and bwd */
    Scalars sc;
} Plan;

#define MAX_PLANS 16

struct AttnCudnn {
    cudnnHandle_t handle;
    Plan *plans[MAX_PLANS];
    int n_plans;
};

/* ---- graph building: each helper is a no-op once something failed ---- */

static cudnnBackendDescriptor_t g_new(Graph *g, cudnnBackendDescriptorType_t type, const char *what)
{
    if (g->status != CUDNN_STATUS_SUCCESS) return NULL;
    if (g->n_desc == MAX_DESC) { g->status = CUDNN_STATUS_INTERNAL_ERROR; g->failed_at = "descriptor table full"; return NULL; }
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) { g->status = st; g->failed_at = what; return NULL; }
    g->desc[g->n_desc++] = d;
    return d;
}

static void g_set(Graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                  cudnnBackendAttributeType_t type, int64_t count, const void *value, const char *what)
{
    if (g->status != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t st = cudnnBackendSetAttribute(d, name, type, count, value);
    if (st != CUDNN_STATUS_SUCCESS) { g->status = st; g->failed_at = what; }
}

static void g_finalize(Graph *g, cudnnBackendDescriptor_t d, const char *what)
{
    if (g->status != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t st = cudnnBackendFinalize(d);
    if (st != CUDNN_STATUS_SUCCESS) { g->status = st; g->failed_at = what; }
}

static void g_op(Graph *g, cudnnBackendDescriptor_t op, const char *what)
{
    g_finalize(g, op, what);
    if (g->status != CUDNN_STATUS_SUCCESS) return;
    if (g->n_ops == MAX_OPS) { g->status = CUDNN_STATUS_INTERNAL_ERROR; g->failed_at = "operation table full"; return; }
    g->ops[g->n_ops++] = op;
}

/* A 4-d tensor. uid 0: a virtual tensor (an intermediate the engine never stores). */
static cudnnBackendDescriptor_t g_tensor(Graph *g, int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                                         const int64_t stride[4], int by_value)
{
    cudnnBackendDescriptor_t t = g_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
    bool virt = uid == 0, byval = by_value != 0;
    int64_t align = 16;
    if (virt) uid = g->next_uid++;
    g_set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
    g_set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, "tensor dims");
    g_set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, "tensor strides");
    g_set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    g_set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    g_set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual");
    if (byval) g_set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval, "tensor by value");
    g_finalize(g, t, "tensor");
    return t;
}

static cudnnBackendDescriptor_t g_scalar(Graph *g, int64_t uid)
{
    static const int64_t one[4] = {1, 1, 1, 1};
    return g_tensor(g, uid, CUDNN_DATA_FLOAT, one, one, 1);
}

/* y = mode(x [, b [, t]]); compute type ct; axis >= 0 for GEN_INDEX. */
static void g_pointwise(Graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t ct, int64_t axis,
                        cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                        cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t pw = g_new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
    g_set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    g_set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &ct, "pointwise precision");
    if (axis >= 0) g_set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
    g_finalize(g, pw, "pointwise");
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op");
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, "pw desc");
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "pw x");
    if (b) g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "pw b");
    if (t) g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, "pw t");
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pw y");
    g_op(g, op, "pointwise op");
}

static void g_matmul(Graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c)
{
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t mm = g_new(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    g_set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct, "matmul precision");
    g_finalize(g, mm, "matmul");
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op");
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, "matmul a");
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "matmul b");
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, "matmul c");
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, "matmul desc");
    g_op(g, op, "matmul op");
}

static void g_reduce(Graph *g, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    bool det = false;
    cudnnBackendDescriptor_t rd = g_new(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    g_set(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct, "reduction precision");
    g_set(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, "reduction mode");
    g_set(g, rd, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &det, "reduction determinism");
    g_finalize(g, rd, "reduction");
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op");
    g_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, "reduction desc");
    g_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "reduction x");
    g_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "reduction y");
    g_op(g, op, "reduction op");
}

static void g_reshape(Graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape op");
    g_set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "reshape x");
    g_set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "reshape y");
    g_op(g, op, "reshape op");
}

/* ---- the attention graphs ---- */

/* Tensor shapes of one problem (dims and strides in elements). */
typedef struct {
    int64_t q_dim[4], q_str[4];         /* Q, dQ: [B,H,T,D] */
    int64_t kt_dim[4], kt_str[4];       /* K^T, V^T of the score matmuls: [B,KV,D,T] */
    int64_t k_dim[4], k_str[4];         /* K, V, dK, dV: [B,KV,T,D] */
    int64_t o_dim[4], o_str[4];         /* O, dO: [B,H,T,D] dims over [B,T,H,D] memory */
    int64_t s_dim[4], s_str[4];         /* scores [B,H,T,T] */
    int64_t st_dim[4], st_str[4];       /* scores transposed [B,H,T(kv),T(q)] over the same memory */
    int64_t r_dim[4], r_str[4];         /* row statistics [B,H,T,1] */
    int64_t full_dim[4], full_str[4];   /* full-head dK/dV before the GQA sum [B,H,T,D] */
} Shapes;

static void set4(int64_t *d, int64_t a, int64_t b, int64_t c, int64_t e) { d[0] = a; d[1] = b; d[2] = c; d[3] = e; }

static Shapes shapes(int B, int H, int KV, int T, int D)
{
    Shapes s;
    int64_t b = B, h = H, kv = KV, t = T, d = D;
    set4(s.q_dim, b, h, t, d);      set4(s.q_str, h * t * d, t * d, d, 1);
    set4(s.kt_dim, b, kv, d, t);    set4(s.kt_str, kv * t * d, t * d, 1, d);
    set4(s.k_dim, b, kv, t, d);     set4(s.k_str, kv * t * d, t * d, d, 1);
    set4(s.o_dim, b, h, t, d);      set4(s.o_str, t * h * d, d, h * d, 1);
    set4(s.s_dim, b, h, t, t);      set4(s.s_str, h * t * t, t * t, t, 1);
    set4(s.st_dim, b, h, t, t);     set4(s.st_str, h * t * t, t * t, 1, t);
    set4(s.r_dim, b, h, t, 1);      set4(s.r_str, h * t, t, 1, 1);
    set4(s.full_dim, b, h, t, d);   set4(s.full_str, h * t * d, t * d, d, 1);
    return s;
}

#define V_F32(g, dim, str) g_tensor((g), 0, CUDNN_DATA_FLOAT, (dim), (str), 0)

/* x masked to row >= col (keys after the query get -inf). */
static cudnnBackendDescriptor_t causal_mask(Graph *g, const Shapes *s, cudnnBackendDescriptor_t x,
                                            cudnnBackendDescriptor_t neg_inf)
{
    cudnnBackendDescriptor_t row = g_tensor(g, 0, CUDNN_DATA_INT32, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t col = g_tensor(g, 0, CUDNN_DATA_INT32, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t keep = g_tensor(g, 0, CUDNN_DATA_BOOLEAN, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t y = V_F32(g, s->s_dim, s->s_str);
    g_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 2, x, NULL, NULL, row);
    g_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 3, x, NULL, NULL, col);
    g_pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, keep);
    g_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, neg_inf, keep, y);
    return y;
}

static void build_fwd(Graph *g, const Shapes *s)
{
    cudnnBackendDescriptor_t q = g_tensor(g, UID_Q, CUDNN_DATA_BFLOAT16, s->q_dim, s->q_str, 0);
    cudnnBackendDescriptor_t kt = g_tensor(g, UID_K, CUDNN_DATA_BFLOAT16, s->kt_dim, s->kt_str, 0);
    cudnnBackendDescriptor_t v = g_tensor(g, UID_V, CUDNN_DATA_BFLOAT16, s->k_dim, s->k_str, 0);
    cudnnBackendDescriptor_t o = g_tensor(g, UID_O, CUDNN_DATA_BFLOAT16, s->o_dim, s->o_str, 0);
    cudnnBackendDescriptor_t stats = g_tensor(g, UID_STATS, CUDNN_DATA_FLOAT, s->r_dim, s->r_str, 0);
    cudnnBackendDescriptor_t scale = g_scalar(g, UID_SCALE), neg_inf = g_scalar(g, UID_NEG_INF);

    cudnnBackendDescriptor_t s0 = V_F32(g, s->s_dim, s->s_str), s1 = V_F32(g, s->s_dim, s->s_str);
    g_matmul(g, q, kt, s0);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, s0, scale, NULL, s1);
    cudnnBackendDescriptor_t s2 = causal_mask(g, s, s1, neg_inf);
    /* softmax with its statistics */
    cudnnBackendDescriptor_t mx = V_F32(g, s->r_dim, s->r_str), sub = V_F32(g, s->s_dim, s->s_str);
    cudnnBackendDescriptor_t ex = V_F32(g, s->s_dim, s->s_str), sum = V_F32(g, s->r_dim, s->r_str);
    cudnnBackendDescriptor_t lg = V_F32(g, s->r_dim, s->r_str);
    cudnnBackendDescriptor_t p = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s->s_dim, s->s_str, 0);
    g_reduce(g, CUDNN_REDUCE_TENSOR_MAX, s2, mx);
    g_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, s2, mx, NULL, sub);
    g_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, sub, NULL, NULL, ex);
    g_reduce(g, CUDNN_REDUCE_TENSOR_ADD, ex, sum);
    g_pointwise(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, -1, sum, NULL, NULL, lg);
    g_pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, -1, mx, lg, NULL, stats);
    g_pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, -1, ex, sum, NULL, p);
    g_matmul(g, p, v, o);
}

/* dK or dV: the full-head product x^T y [B,H,T,D], summed over each query-head
 * group into out [B,KV,T,D] (directly into out when H == KV). */
static void grad_kv(Graph *g, const Shapes *s, int grouped, cudnnBackendDescriptor_t xt, cudnnBackendDescriptor_t y,
                    cudnnBackendDescriptor_t out)
{
    if (!grouped) { g_matmul(g, xt, y, out); return; }
    cudnnBackendDescriptor_t full = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s->full_dim, s->full_str, 0);
    g_matmul(g, xt, y, full);
    g_reduce(g, CUDNN_REDUCE_TENSOR_ADD, full, out);
}

static void build_bwd(Graph *g, const Shapes *s, int grouped, int deterministic)
{
    cudnnBackendDescriptor_t q = g_tensor(g, UID_Q, CUDNN_DATA_BFLOAT16, s->q_dim, s->q_str, 0);
    cudnnBackendDescriptor_t kt = g_tensor(g, UID_K, CUDNN_DATA_BFLOAT16, s->kt_dim, s->kt_str, 0);
    cudnnBackendDescriptor_t vt = g_tensor(g, UID_V, CUDNN_DATA_BFLOAT16, s->kt_dim, s->kt_str, 0);
    cudnnBackendDescriptor_t o = g_tensor(g, UID_O, CUDNN_DATA_BFLOAT16, s->o_dim, s->o_str, 0);
    cudnnBackendDescriptor_t dO = g_tensor(g, UID_DO, CUDNN_DATA_BFLOAT16, s->o_dim, s->o_str, 0);
    cudnnBackendDescriptor_t stats = g_tensor(g, UID_STATS, CUDNN_DATA_FLOAT, s->r_dim, s->r_str, 0);
    cudnnBackendDescriptor_t dq = g_tensor(g, UID_DQ, CUDNN_DATA_BFLOAT16, s->q_dim, s->q_str, 0);
    cudnnBackendDescriptor_t dk = g_tensor(g, UID_DK, CUDNN_DATA_BFLOAT16, s->k_dim, s->k_str, 0);
    cudnnBackendDescriptor_t dv = g_tensor(g, UID_DV, CUDNN_DATA_BFLOAT16, s->k_dim, s->k_str, 0);
    cudnnBackendDescriptor_t scale = g_scalar(g, UID_SCALE), neg_inf = g_scalar(g, UID_NEG_INF);
    cudnnBackendDescriptor_t one = g_scalar(g, UID_ONE);

    /* Dsum = rowsum(dO * O), stored (the workspace) */
    int64_t od_str[4];
    set4(od_str, s->q_str[0], s->q_str[1], s->o_str[2], 1);
    cudnnBackendDescriptor_t doo = V_F32(g, s->o_dim, od_str), dsum0 = V_F32(g, s->r_dim, s->r_str);
    cudnnBackendDescriptor_t dsum = g_tensor(g, UID_DSUM, CUDNN_DATA_FLOAT, s->r_dim, s->r_str, 0);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dO, o, NULL, doo);
    g_reduce(g, CUDNN_REDUCE_TENSOR_ADD, doo, dsum0);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dsum0, one, NULL, dsum);

    /* P = exp(scale Q K^T - stats), causal */
    cudnnBackendDescriptor_t s0 = V_F32(g, s->s_dim, s->s_str), s1 = V_F32(g, s->s_dim, s->s_str);
    cudnnBackendDescriptor_t s2 = V_F32(g, s->s_dim, s->s_str), p = V_F32(g, s->s_dim, s->s_str);
    g_matmul(g, q, kt, s0);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, s0, scale, NULL, s1);
    g_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, s1, stats, NULL, s2);
    cudnnBackendDescriptor_t s3 = causal_mask(g, s, s2, neg_inf);
    g_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, s3, NULL, NULL, p);

    /* dV = P^T dO */
    cudnnBackendDescriptor_t pt = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s->st_dim, s->st_str, 0);
    g_reshape(g, p, pt);
    grad_kv(g, s, grouped, pt, dO, dv);

    /* dS = (dO V^T - Dsum) * P * scale */
    cudnnBackendDescriptor_t dp = V_F32(g, s->s_dim, s->s_str), dp1 = V_F32(g, s->s_dim, s->s_str);
    cudnnBackendDescriptor_t dp2 = V_F32(g, s->s_dim, s->s_str), ds = V_F32(g, s->s_dim, s->s_str);
    g_matmul(g, dO, vt, dp);
    g_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, dp, dsum, NULL, dp1);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dp1, p, NULL, dp2);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dp2, scale, NULL, ds);

    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dst = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s->st_dim, s->st_str, 0);
    g_reshape(g, ds, dst);
    grad_kv(g, s, grouped, dst, q, dk);

    /* dQ = dS K (K itself: K^T reshaped back) */
    cudnnBackendDescriptor_t k = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s->k_dim, s->k_str, 0);
    g_reshape(g, kt, k);
    if (deterministic) {
        g_matmul(g, ds, k, dq);
    } else {
        cudnnBackendDescriptor_t acc = g_tensor(g, UID_DQ_ACC, CUDNN_DATA_FLOAT, s->q_dim, s->full_str, 0);
        g_matmul(g, ds, k, acc);
        g_pointwise(g, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, -1, acc, NULL, NULL, dq);
    }
}

/* The operation graph of g's operations, then the first engine configuration of
 * heuristics mode A (else the fallback list) that gives an execution plan. */
static void make_plan(Graph *g, cudnnHandle_t h)
{
    cudnnBackendDescriptor_t og = g_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    g_set(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, "graph ops");
    g_set(g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
    g_finalize(g, og, "operation graph (cuDNN does not take this attention pattern)");
    static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int mi = 0; mi < 2 && g->status == CUDNN_STATUS_SUCCESS && !g->plan; mi++) {
        cudnnBackendDescriptor_t heur = g_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
        g_set(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og, "heur graph");
        g_set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi], "heur mode");
        g_finalize(g, heur, "heuristics");
        if (g->status != CUDNN_STATUS_SUCCESS) {   /* no heuristics for this mode: try the next */
            if (mi == 0) { g->status = CUDNN_STATUS_SUCCESS; continue; }
            return;
        }
        int64_t n = 0;
        if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n,
                                     NULL) != CUDNN_STATUS_SUCCESS || n <= 0)
            continue;
        if (n > 16) n = 16;
        cudnnBackendDescriptor_t cfg[16];
        int ok = 1;
        for (int64_t i = 0; i < n; i++) {
            cfg[i] = g_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
            if (!cfg[i]) { ok = 0; break; }
        }
        int64_t got = 0;
        if (!ok || cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n,
                                            &got, cfg) != CUDNN_STATUS_SUCCESS)
            continue;
        for (int64_t i = 0; i < got && !g->plan; i++) {
            cudnnBackendDescriptor_t plan = NULL;
            if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
                continue;
            int64_t ws = 0, nws = 0;
            if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ==
                    CUDNN_STATUS_SUCCESS &&
                cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]) == CUDNN_STATUS_SUCCESS &&
                cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS &&
                cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &nws,
                                         &ws) == CUDNN_STATUS_SUCCESS) {
                g->plan = plan;
                g->workspace = ws;
            } else {
                cudnnBackendDestroyDescriptor(plan);
            }
        }
    }
    if (g->status == CUDNN_STATUS_SUCCESS && !g->plan) {
        g->status = CUDNN_STATUS_NOT_SUPPORTED;
        g->failed_at = "no engine configuration finalises an execution plan";
    }
}

static void graph_free(Graph *g)
{
    if (g->plan) cudnnBackendDestroyDescriptor(g->plan);
    for (int i = g->n_desc - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(g->desc[i]);
    memset(g, 0, sizeof *g);
}

static size_t align_up(size_t x) { return (x + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

static int want_deterministic(void)
{
    const char *e = getenv("LLMC_CUDNN_DETERMINISTIC");
    return !(e && !strcmp(e, "0"));
}

static Plan *find_plan(const AttnCudnn *a, int B, int H, int KV, int T, int D)
{
    for (int i = 0; i < a->n_plans; i++) {
        Plan *p = a->plans[i];
        if (p->B == B && p->H == H && p->KV == KV && p->T == T && p->D == D) return p;
    }
    return NULL;
}

/* Which stage failed and cuDNN's own last message. */
static void graph_error(const Graph *g, const char *which, char *err, size_t errlen)
{
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last);
    snprintf(err, errlen, "cuDNN attention %s graph: %s: %s%s%s", which, g->failed_at ? g->failed_at : "?",
             cudnnGetErrorString(g->status), last[0] ? " — " : "", last);
}

AttnCudnn *attn_cudnn_create(char *err, size_t errlen)
{
    AttnCudnn *a = calloc(1, sizeof *a);
    if (!a) { snprintf(err, errlen, "out of memory"); return NULL; }
    cudnnStatus_t st = cudnnCreate(&a->handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(err, errlen, "cudnnCreate: %s (cuDNN %zu)", cudnnGetErrorString(st), cudnnGetVersion());
        free(a);
        return NULL;
    }
    return a;
}

void attn_cudnn_destroy(AttnCudnn *a)
{
    if (!a) return;
    for (int i = 0; i < a->n_plans; i++) {
        graph_free(&a->plans[i]->fwd);
        graph_free(&a->plans[i]->bwd);
        free(a->plans[i]);
    }
    cudnnDestroy(a->handle);
    free(a);
}

size_t attn_cudnn_prepare(AttnCudnn *a, int B, int H, int KV, int T, int D, char *err, size_t errlen)
{
    Plan *p = find_plan(a, B, H, KV, T, D);
    if (p) return p->ws_bytes;
    if (!attn_cudnn_supported(H, KV, T, D, 0) || B < 1) {
        snprintf(err, errlen, "cuDNN attention: shape B %d H %d KV %d T %d D %d not supported "
                 "(need H %% KV == 0, D 64 or 128, T a multiple of 64)", B, H, KV, T, D);
        return 0;
    }
    if (a->n_plans == MAX_PLANS) { snprintf(err, errlen, "cuDNN attention: plan cache full"); return 0; }
    p = calloc(1, sizeof *p);
    if (!p) { snprintf(err, errlen, "out of memory"); return 0; }
    *p = (Plan){.B = B, .H = H, .KV = KV, .T = T, .D = D, .deterministic = want_deterministic(),
                .sc = {.scale = 1.f / sqrtf((float)D), .neg_inf = -INFINITY, .one = 1.f}};
    p->fwd.next_uid = p->bwd.next_uid = UID_VIRTUAL;
    Shapes s = shapes(B, H, KV, T, D);
    build_fwd(&p->fwd, &s);
    make_plan(&p->fwd, a->handle);
    if (p->fwd.status != CUDNN_STATUS_SUCCESS) {
        graph_error(&p->fwd, "forward", err, errlen);
        graph_free(&p->fwd);
        free(p);
        return 0;
    }
    build_bwd(&p->bwd, &s, H != KV, p->deterministic);
    make_plan(&p->bwd, a->handle);
    if (p->bwd.status != CUDNN_STATUS_SUCCESS) {
        graph_error(&p->bwd, "backward", err, errlen);
        graph_free(&p->fwd);
        graph_free(&p->bwd);
        free(p);
        return 0;
    }
    size_t rows = (size_t)B * H * T;
    p->dsum_off = 0;
    p->dqacc_off = align_up(rows * sizeof(float));
    p->cudnn_off = p->dqacc_off + (p->deterministic ? 0 : align_up(rows * D * sizeof(float)));
    size_t bwd_bytes = p->cudnn_off + (size_t)p->bwd.workspace;
    size_t fwd_bytes = (size_t)p->fwd.workspace;
    p->ws_bytes = align_up(bwd_bytes > fwd_bytes ? bwd_bytes : fwd_bytes);
    if (p->ws_bytes == 0) p->ws_bytes = WS_ALIGN;
    a->plans[a->n_plans++] = p;
    return p->ws_bytes;
}

int attn_cudnn_deterministic(const AttnCudnn *a, int B, int H, int KV, int T, int D)
{
    const Plan *p = find_plan(a, B, H, KV, T, D);
    return p ? p->deterministic : 0;
}

static Plan *need_plan(AttnCudnn *a, int B, int H, int KV, int T, int D)
{
    Plan *p = find_plan(a, B, H, KV, T, D);
    if (!p) {
        fprintf(stderr, "llmc-train-cuda: cuDNN attention shape B %d H %d KV %d T %d D %d used before "
                "attn_cudnn_prepare\n", B, H, KV, T, D);
        exit(1);
    }
    return p;
}

static void execute(AttnCudnn *a, const Graph *g, const int64_t *uids, void **ptrs, int n, void *ws, kstream_t s,
                    const char *which)
{
    cudnnStatus_t st = cudnnSetStream(a->handle, (cudaStream_t)s);
    cudnnBackendDescriptor_t vp = NULL;
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(a->handle, g->plan, vp);
    if (vp) cudnnBackendDestroyDescriptor(vp);
    if (st != CUDNN_STATUS_SUCCESS) {
        char last[256] = "";
        cudnnGetLastErrorString(last, sizeof last);
        fprintf(stderr, "llmc-train-cuda: cuDNN attention %s: %s %s\n", which, cudnnGetErrorString(st), last);
        exit(1);
    }
}

void attn_cudnn_fwd(AttnCudnn *a, bf16_t *O, float *stats, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                    int B, int H, int KV, int T, int D, void *workspace, kstream_t s)
{
    Plan *p = need_plan(a, B, H, KV, T, D);
    int64_t uids[MAX_BIND] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF};
    void *ptrs[MAX_BIND] = {(void *)Q, (void *)K, (void *)V, O, stats, &p->sc.scale, &p->sc.neg_inf};
    execute(a, &p->fwd, uids, ptrs, 7, workspace, s, "forward");
}

void attn_cudnn_bwd(AttnCudnn *a, bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K,
                    const bf16_t *V, const bf16_t *O, const bf16_t *dO, const float *stats,
                    int B, int H, int KV, int T, int D, void *workspace, kstream_t s)
{
    Plan *p = need_plan(a, B, H, KV, T, D);
    char *ws = workspace;
    int64_t uids[MAX_BIND] = {UID_Q, UID_K, UID_V, UID_O, UID_DO, UID_STATS, UID_DQ, UID_DK, UID_DV,
                              UID_SCALE, UID_NEG_INF, UID_ONE, UID_DSUM, UID_DQ_ACC};
    void *ptrs[MAX_BIND] = {(void *)Q, (void *)K, (void *)V, (void *)O, (void *)dO, (void *)stats, dq, dk, dv,
                            &p->sc.scale, &p->sc.neg_inf, &p->sc.one, ws + p->dsum_off, ws + p->dqacc_off};
    int n = p->deterministic ? 13 : 14;
    execute(a, &p->bwd, uids, ptrs, n, ws + p->cudnn_off, s, "backward");
}

#endif /* LLMC_HAVE_CUDNN */
