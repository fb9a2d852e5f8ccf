/* attn_cudnn.c — causal GQA attention through cuDNN's fused flash attention
 * (attn_cudnn.h), through the C backend API only.
 *
 * cuDNN runs its fused attention kernels for an operation graph of the shape its
 * own C++ frontend emits for an SDPA node (cudnn-frontend's composite SDPA nodes):
 * matmul, pointwise and reduction operations that the engine recognises as one
 * pattern. This file builds those graphs by hand:
 *
 *   forward   S = (Q K^T) * scale; [padding mask]; causal mask (row >= col, else
 *             -inf); M = max S; E = exp(S - M); Z = sum E; stats = M + log Z;
 *             O = (E / Z) V
 *   backward  Dsum = sum(dO * O); P = exp(S - stats) under the same masks;
 *             dV = P^T dO; dS = (dO V^T - Dsum) * P * scale; dK = dS^T Q; dQ = dS K
 *             (GQA: dV and dK summed over each group of H/KV query heads by a
 *             reduction of the full-head products)
 *
 * The backend takes K and V of the score matmuls transposed, [.,KV,D,T]: the same
 * memory with the last two strides swapped. Dsum (and, on the non-deterministic
 * path, the fp32 dQ accumulator) are tensors the graph writes to memory: they live
 * in the caller's workspace beside cuDNN's own.
 *
 * Two layouts:
 *  - rows of one sequence each (pos[b,t] - pos[b,0] == t): the batch is B, Q/K/V
 *    are read where they lie ([B,H,T,D], [B,KV,T,D]), O is written [B,T,H,D].
 *  - rows packed with documents (pos resets to 0): every document is one sequence
 *    of cuDNN's ragged ("THD") layout — its length is the per-sequence override of
 *    the matmul sizes and the padding mask, its start the ragged offset. That layout
 *    packs tokens as [token, head, D], so Q, K, V are transposed into the workspace
 *    first and dQ, dK, dV back after (O and dO are [B,T,H,D] already); statistics
 *    are [token, head], the same B*H*T floats. The batch is the number of documents
 *    rounded up to a power of two (a plan per bucket, built on first use), the
 *    unused entries of length 0; the longest sequence is T.
 *
 * Determinism: on Hopper cuDNN computes dQ without atomics when dQ is the direct
 * output of the dS K matmul (the frontend's "dP workspace" form, which it selects
 * for is_deterministic_algorithm); with an fp32 dQ accumulator it accumulates with
 * atomics and run-to-run bits differ. model_cuda.c uses the deterministic form
 * unless LLMC_CUDNN_DETERMINISTIC=0 (the accumulator form's workspace is far
 * smaller); the deterministic form is attn_cudnn_create(1, ...) (attn_cudnn_deterministic
 * reports which one a context uses). LLMC_CUDNN_DOCUMENTS=0 sends micro-batches
 * with documents to the flash kernels.
 *
 * Plans are built once per shape (heuristics mode A, then the fallback list; the
 * first engine configuration that finalises wins) and cached for the process. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "attn_cudnn.h"
#include "cuda_layout.h"

int attn_cudnn_supported(int H, int KV, int T, int D)
{
    return llmc_cudnn_shape_ok(H, KV, D, T);   /* contract/cuda_layout.h: llmc's estimator routes by it too */
}

int attn_cudnn_documents(const int *pos, int B, int T, int *start, int *len, int max)
{
    int n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int *p = pos + (size_t)b * T;
            if (t == 0 || p[t] == 0) {
                if (n == max) return -1;
                if (start) start[n] = b * T + t;
                if (len) len[n] = 0;
                n++;
            } else if (p[t] != p[t - 1] + 1) {
                return -1;   /* a window that neither continues nor restarts: not a document */
            }
            if (len) len[n - 1]++;
        }
    return n;
}

#ifndef LLMC_HAVE_CUDNN

int attn_cudnn_built(void) { return 0; }

AttnCudnn *attn_cudnn_create(int deterministic, char *err, size_t errlen)
{
    (void)deterministic;
    snprintf(err, errlen, "built without cuDNN (no cudnn.h found at build time)");
    return NULL;
}

void attn_cudnn_destroy(AttnCudnn *a) { (void)a; }

/* Unreachable without a context (attn_cudnn_create answered NULL). */
static void no_cudnn(const char *fn)
{
    log_error("%s called in a build without cuDNN", fn);
    exit(1);
}

size_t attn_cudnn_prepare(AttnCudnn *a, int B, int H, int KV, int T, int D, char *err, size_t errlen)
{
    (void)a; (void)B; (void)H; (void)KV; (void)T; (void)D;
    snprintf(err, errlen, "built without cuDNN");
    return 0;
}

int attn_cudnn_set_rows(AttnCudnn *a, const int *pos, size_t ws_bytes, kstream_t s)
{
    (void)a; (void)pos; (void)ws_bytes; (void)s;
    no_cudnn("attn_cudnn_set_rows");
    return 0;
}

void attn_cudnn_fwd(AttnCudnn *a, bf16_t *O, float *stats, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                    void *workspace, kstream_t s)
{
    (void)a; (void)O; (void)stats; (void)Q; (void)K; (void)V; (void)workspace; (void)s;
    no_cudnn("attn_cudnn_fwd");
}

void attn_cudnn_bwd(AttnCudnn *a, bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K,
                    const bf16_t *V, const bf16_t *O, const bf16_t *dO, const float *stats, void *workspace,
                    kstream_t s)
{
    (void)a; (void)dq; (void)dk; (void)dv; (void)Q; (void)K; (void)V; (void)O; (void)dO; (void)stats;
    (void)workspace; (void)s;
    no_cudnn("attn_cudnn_bwd");
}

int attn_cudnn_deterministic(const AttnCudnn *a) { (void)a; return 0; }
int attn_cudnn_rows_documents(const AttnCudnn *a) { (void)a; return 0; }

#else /* LLMC_HAVE_CUDNN */

#include <cudnn.h>
#include <cuda_runtime_api.h>

int attn_cudnn_built(void) { return 1; }

/* Unique ids of the tensors the caller binds (the variant pack); virtual tensors
 * are numbered from UID_VIRTUAL up. */
enum {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV,
    UID_SCALE, UID_NEG_INF, UID_ONE, UID_DSUM, UID_DQ_ACC,
    UID_SEQ_LEN, UID_RAG_Q, UID_RAG_K, UID_RAG_S,
    UID_VIRTUAL = 100
};

#define MAX_DESC 320
#define MAX_OPS 64
#define MAX_BIND 20
#define WS_ALIGN LLMC_CUDNN_WS_ALIGN
#define MAX_DOCS LLMC_CUDNN_MAX_DOCS   /* documents per micro-batch the ragged layout takes */
#define N_BUCKETS 11            /* ragged batch sizes 1, 2, 4, ..., MAX_DOCS */

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

/* The forward and backward plans of one layout and batch. */
typedef struct {
    int built;                  /* 1: both plans exist; -1: cuDNN refused them */
    Graph fwd, bwd;
    size_t ws_bytes;            /* caller's workspace this pair needs */
} PlanPair;

/* Workspace layout (byte offsets). Ragged: Q, K, V transposed to [token, head, D]
 * and dQ, dK, dV before they are transposed back. Both: Dsum, the dQ accumulator
 * (non-deterministic form only), then cuDNN's own. */
typedef struct {
    size_t qt, kt, vt, dqt, dkt, dvt, dsum, dqacc, cudnn;
} WsLayout;

struct AttnCudnn {
    cudnnHandle_t handle;
    int deterministic;          /* backward without the fp32 dQ accumulator */
    int documents;              /* take rows with documents (LLMC_CUDNN_DOCUMENTS != 0) */
    int B, H, KV, T, D;         /* the prepared shape (B == 0: none yet) */
    float scale, neg_inf, one;  /* by-value scalars, bound by address */
    PlanPair plain;             /* rows of one sequence */
    PlanPair ragged[N_BUCKETS]; /* documents, batch 2^i */
    WsLayout ws_plain, ws_ragged;
    /* the current micro-batch (attn_cudnn_set_rows) */
    int docs;                   /* 0: plain rows; else the ragged bucket's batch */
    int bucket;
    int32_t *d_seq_len;         /* device: [MAX_DOCS] lengths; [MAX_DOCS + 1] offsets */
    int64_t *d_rag_q, *d_rag_k, *d_rag_s;
    int32_t h_seq_len[MAX_DOCS];
    int64_t h_rag[3][MAX_DOCS + 1];
    int h_start[MAX_DOCS], h_len[MAX_DOCS];
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

/* A 4-d tensor. uid 0: a virtual tensor (an intermediate the engine never stores).
 * rag: the ragged-offset tensor that places each batch entry (NULL: the batch stride). */
static cudnnBackendDescriptor_t g_tensor_r(Graph *g, int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                                           const int64_t stride[4], int by_value, cudnnBackendDescriptor_t rag)
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
    if (rag) g_set(g, t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rag, "ragged offset");
    g_finalize(g, t, "tensor");
    return t;
}

static cudnnBackendDescriptor_t g_tensor(Graph *g, int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                                         const int64_t stride[4], int by_value)
{
    return g_tensor_r(g, uid, dt, dim, stride, by_value, NULL);
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

/* c = a b; m, n, k: per-batch-entry overrides of the matmul sizes (the sequence
 * lengths of documents), or NULL. */
static void g_matmul(Graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                     cudnnBackendDescriptor_t m, cudnnBackendDescriptor_t n, cudnnBackendDescriptor_t k)
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
    if (m) g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m, "m");
    if (n) g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, "n");
    if (k) g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k, "k");
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

/* Tensor shapes of one layout (dims and strides in elements) and, for documents,
 * the length and ragged-offset tensors. */
typedef struct {
    int64_t q_dim[4], q_str[4];         /* Q, dQ: [b,H,s,D] */
    int64_t kt_dim[4], kt_str[4];       /* K^T, V^T of the score matmuls: [b,KV,D,s] */
    int64_t k_dim[4], k_str[4];         /* K, V, dK, dV: [b,KV,s,D] */
    int64_t o_dim[4], o_str[4];         /* O, dO: [b,H,s,D] dims over [token,H,D] memory */
    int64_t s_dim[4], s_str[4];         /* scores [b,H,s,s] */
    int64_t st_dim[4], st_str[4];       /* scores transposed [b,H,s(kv),s(q)] over the same memory */
    int64_t r_dim[4], r_str[4];         /* row statistics [b,H,s,1] */
    int64_t full_dim[4], full_str[4];   /* full-head dK/dV before the GQA sum [b,H,s,D] */
    int ragged;
    cudnnBackendDescriptor_t seq_len, rag_q, rag_k, rag_s;   /* NULL unless ragged */
} Layout;

static void set4(int64_t *d, int64_t a, int64_t b, int64_t c, int64_t e) { d[0] = a; d[1] = b; d[2] = c; d[3] = e; }

/* b: batch entries (rows, or document slots); ragged: [token, head, D] packing. */
static Layout layout(Graph *g, int b_, int H, int KV, int T, int D, int ragged)
{
    Layout s;
    memset(&s, 0, sizeof s);
    int64_t b = b_, h = H, kv = KV, t = T, d = D;
    if (ragged) {
        set4(s.q_dim, b, h, t, d);      set4(s.q_str, t * h * d, d, h * d, 1);
        set4(s.kt_dim, b, kv, d, t);    set4(s.kt_str, t * kv * d, d, 1, kv * d);
        set4(s.k_dim, b, kv, t, d);     set4(s.k_str, t * kv * d, d, kv * d, 1);
        set4(s.r_dim, b, h, t, 1);      set4(s.r_str, t * h, 1, h, 1);
    } else {
        set4(s.q_dim, b, h, t, d);      set4(s.q_str, h * t * d, t * d, d, 1);
        set4(s.kt_dim, b, kv, d, t);    set4(s.kt_str, kv * t * d, t * d, 1, d);
        set4(s.k_dim, b, kv, t, d);     set4(s.k_str, kv * t * d, t * d, d, 1);
        set4(s.r_dim, b, h, t, 1);      set4(s.r_str, h * t, t, 1, 1);
    }
    set4(s.o_dim, b, h, t, d);      set4(s.o_str, t * h * d, d, h * d, 1);
    set4(s.s_dim, b, h, t, t);      set4(s.s_str, h * t * t, t * t, t, 1);
    set4(s.st_dim, b, h, t, t);     set4(s.st_str, h * t * t, t * t, 1, t);
    set4(s.full_dim, b, h, t, d);   set4(s.full_str, h * t * d, t * d, d, 1);
    s.ragged = ragged;
    if (ragged) {
        int64_t ld[4] = {b, 1, 1, 1}, od[4] = {b + 1, 1, 1, 1}, one[4] = {1, 1, 1, 1};
        s.seq_len = g_tensor(g, UID_SEQ_LEN, CUDNN_DATA_INT32, ld, one, 0);
        s.rag_q = g_tensor(g, UID_RAG_Q, CUDNN_DATA_INT64, od, one, 0);
        s.rag_k = g_tensor(g, UID_RAG_K, CUDNN_DATA_INT64, od, one, 0);
        s.rag_s = g_tensor(g, UID_RAG_S, CUDNN_DATA_INT64, od, one, 0);
    }
    return s;
}

#define V_F32(g, dim, str) g_tensor((g), 0, CUDNN_DATA_FLOAT, (dim), (str), 0)

/* Tensors the caller binds, placed by the layout. */
static cudnnBackendDescriptor_t t_q(Graph *g, const Layout *s, int64_t uid, cudnnDataType_t dt)
{
    return g_tensor_r(g, uid, dt, s->q_dim, s->q_str, 0, s->rag_q);
}
static cudnnBackendDescriptor_t t_kt(Graph *g, const Layout *s, int64_t uid)
{
    return g_tensor_r(g, uid, CUDNN_DATA_BFLOAT16, s->kt_dim, s->kt_str, 0, s->rag_k);
}
static cudnnBackendDescriptor_t t_k(Graph *g, const Layout *s, int64_t uid)
{
    return g_tensor_r(g, uid, CUDNN_DATA_BFLOAT16, s->k_dim, s->k_str, 0, s->rag_k);
}
static cudnnBackendDescriptor_t t_o(Graph *g, const Layout *s, int64_t uid)
{
    return g_tensor_r(g, uid, CUDNN_DATA_BFLOAT16, s->o_dim, s->o_str, 0, s->rag_q);
}
static cudnnBackendDescriptor_t t_rows(Graph *g, const Layout *s, int64_t uid)
{
    return g_tensor_r(g, uid, CUDNN_DATA_FLOAT, s->r_dim, s->r_str, 0, s->rag_s);
}

/* x with scores outside each sequence's length set to -inf (documents only). */
static cudnnBackendDescriptor_t padding_mask(Graph *g, const Layout *s, cudnnBackendDescriptor_t x,
                                             cudnnBackendDescriptor_t neg_inf)
{
    if (!s->ragged) return x;
    cudnnBackendDescriptor_t row = g_tensor(g, 0, CUDNN_DATA_INT32, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t col = g_tensor(g, 0, CUDNN_DATA_INT32, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t rin = g_tensor(g, 0, CUDNN_DATA_BOOLEAN, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t cin = g_tensor(g, 0, CUDNN_DATA_BOOLEAN, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t keep = g_tensor(g, 0, CUDNN_DATA_BOOLEAN, s->s_dim, s->s_str, 0);
    cudnnBackendDescriptor_t y = V_F32(g, s->s_dim, s->s_str);
    g_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 2, x, NULL, NULL, row);
    g_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 3, x, NULL, NULL, col);
    g_pointwise(g, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, -1, row, s->seq_len, NULL, rin);
    g_pointwise(g, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, -1, col, s->seq_len, NULL, cin);
    g_pointwise(g, CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, -1, rin, cin, NULL, keep);
    g_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, neg_inf, keep, y);
    return y;
}

/* x masked to row >= col (keys after the query get -inf). */
static cudnnBackendDescriptor_t causal_mask(Graph *g, const Layout *s, cudnnBackendDescriptor_t x,
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

static void build_fwd(Graph *g, int b, int H, int KV, int T, int D, int ragged)
{
    Layout s = layout(g, b, H, KV, T, D, ragged);
    cudnnBackendDescriptor_t sl = s.seq_len;   /* NULL: full length */
    cudnnBackendDescriptor_t q = t_q(g, &s, UID_Q, CUDNN_DATA_BFLOAT16), kt = t_kt(g, &s, UID_K);
    cudnnBackendDescriptor_t v = t_k(g, &s, UID_V), o = t_o(g, &s, UID_O), stats = t_rows(g, &s, UID_STATS);
    cudnnBackendDescriptor_t scale = g_scalar(g, UID_SCALE), neg_inf = g_scalar(g, UID_NEG_INF);

    cudnnBackendDescriptor_t s0 = V_F32(g, s.s_dim, s.s_str), s1 = V_F32(g, s.s_dim, s.s_str);
    g_matmul(g, q, kt, s0, sl, sl, NULL);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, s0, scale, NULL, s1);
    cudnnBackendDescriptor_t s2 = causal_mask(g, &s, padding_mask(g, &s, s1, neg_inf), neg_inf);
    /* softmax with its statistics */
    cudnnBackendDescriptor_t mx = V_F32(g, s.r_dim, s.r_str), sub = V_F32(g, s.s_dim, s.s_str);
    cudnnBackendDescriptor_t ex = V_F32(g, s.s_dim, s.s_str), sum = V_F32(g, s.r_dim, s.r_str);
    cudnnBackendDescriptor_t lg = V_F32(g, s.r_dim, s.r_str);
    cudnnBackendDescriptor_t p = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s.s_dim, s.s_str, 0);
    g_reduce(g, CUDNN_REDUCE_TENSOR_MAX, s2, mx);
    g_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, s2, mx, NULL, sub);
    g_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, sub, NULL, NULL, ex);
    g_reduce(g, CUDNN_REDUCE_TENSOR_ADD, ex, sum);
    g_pointwise(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, -1, sum, NULL, NULL, lg);
    g_pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, -1, mx, lg, NULL, stats);
    g_pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, -1, ex, sum, NULL, p);
    g_matmul(g, p, v, o, sl, NULL, sl);
}

/* dK or dV: the full-head product x^T y [b,H,s,D], summed over each query-head
 * group into out [b,KV,s,D] (directly into out when H == KV). */
static void grad_kv(Graph *g, const Layout *s, int grouped, cudnnBackendDescriptor_t xt, cudnnBackendDescriptor_t y,
                    cudnnBackendDescriptor_t out)
{
    cudnnBackendDescriptor_t sl = s->seq_len;
    if (!grouped) { g_matmul(g, xt, y, out, sl, NULL, sl); return; }
    cudnnBackendDescriptor_t full = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s->full_dim, s->full_str, 0);
    g_matmul(g, xt, y, full, sl, NULL, sl);
    g_reduce(g, CUDNN_REDUCE_TENSOR_ADD, full, out);
}

static void build_bwd(Graph *g, int b, int H, int KV, int T, int D, int ragged, int deterministic)
{
    Layout s = layout(g, b, H, KV, T, D, ragged);
    cudnnBackendDescriptor_t sl = s.seq_len;
    cudnnBackendDescriptor_t q = t_q(g, &s, UID_Q, CUDNN_DATA_BFLOAT16), kt = t_kt(g, &s, UID_K);
    cudnnBackendDescriptor_t vt = t_kt(g, &s, UID_V), o = t_o(g, &s, UID_O), dO = t_o(g, &s, UID_DO);
    cudnnBackendDescriptor_t stats = t_rows(g, &s, UID_STATS);
    cudnnBackendDescriptor_t dq = t_q(g, &s, UID_DQ, CUDNN_DATA_BFLOAT16), dk = t_k(g, &s, UID_DK);
    cudnnBackendDescriptor_t dv = t_k(g, &s, UID_DV);
    cudnnBackendDescriptor_t scale = g_scalar(g, UID_SCALE), neg_inf = g_scalar(g, UID_NEG_INF);
    cudnnBackendDescriptor_t one = g_scalar(g, UID_ONE);

    /* Dsum = rowsum(dO * O), stored (in the workspace) */
    int64_t od_str[4];
    set4(od_str, (int64_t)H * T * D, (int64_t)T * D, (int64_t)H * D, 1);
    cudnnBackendDescriptor_t doo = V_F32(g, s.o_dim, od_str), dsum0 = V_F32(g, s.r_dim, s.r_str);
    cudnnBackendDescriptor_t dsum = t_rows(g, &s, UID_DSUM);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dO, o, NULL, doo);
    g_reduce(g, CUDNN_REDUCE_TENSOR_ADD, doo, dsum0);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dsum0, one, NULL, dsum);

    /* P = exp(scale Q K^T - stats), masked */
    cudnnBackendDescriptor_t s0 = V_F32(g, s.s_dim, s.s_str), s1 = V_F32(g, s.s_dim, s.s_str);
    cudnnBackendDescriptor_t s2 = V_F32(g, s.s_dim, s.s_str), p = V_F32(g, s.s_dim, s.s_str);
    g_matmul(g, q, kt, s0, sl, sl, NULL);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, s0, scale, NULL, s1);
    g_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, padding_mask(g, &s, s1, neg_inf), stats, NULL, s2);
    cudnnBackendDescriptor_t s3 = causal_mask(g, &s, s2, neg_inf);
    g_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, s3, NULL, NULL, p);

    /* dV = P^T dO */
    cudnnBackendDescriptor_t pt = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s.st_dim, s.st_str, 0);
    g_reshape(g, p, pt);
    grad_kv(g, &s, H != KV, pt, dO, dv);

    /* dS = (dO V^T - Dsum) * P * scale */
    cudnnBackendDescriptor_t dp = V_F32(g, s.s_dim, s.s_str), dp1 = V_F32(g, s.s_dim, s.s_str);
    cudnnBackendDescriptor_t dp2 = V_F32(g, s.s_dim, s.s_str), ds = V_F32(g, s.s_dim, s.s_str);
    g_matmul(g, dO, vt, dp, sl, sl, NULL);
    g_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, dp, dsum, NULL, dp1);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dp1, p, NULL, dp2);
    g_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dp2, scale, NULL, ds);

    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dst = g_tensor(g, 0, CUDNN_DATA_BFLOAT16, s.st_dim, s.st_str, 0);
    g_reshape(g, ds, dst);
    grad_kv(g, &s, H != KV, dst, q, dk);

    /* dQ = dS K (K itself: K^T reshaped back) */
    cudnnBackendDescriptor_t k = g_tensor_r(g, 0, CUDNN_DATA_BFLOAT16, s.k_dim, s.k_str, 0, s.rag_k);
    g_reshape(g, kt, k);
    if (deterministic) {
        g_matmul(g, ds, k, dq, sl, NULL, sl);
    } else {
        cudnnBackendDescriptor_t acc = ragged ? t_q(g, &s, UID_DQ_ACC, CUDNN_DATA_FLOAT)
                                              : g_tensor(g, UID_DQ_ACC, CUDNN_DATA_FLOAT, s.q_dim, s.full_str, 0);
        g_matmul(g, ds, k, acc, sl, NULL, sl);
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

/* Byte offsets of the workspace regions of one layout. */
static WsLayout ws_layout(const AttnCudnn *a, int ragged)
{
    WsLayout w;
    memset(&w, 0, sizeof w);
    size_t N = (size_t)a->B * a->T, q = N * a->H * a->D * 2, k = N * a->KV * a->D * 2, cur = 0;
    if (ragged) {
        w.qt = cur; cur += align_up(q);
        w.kt = cur; cur += align_up(k);
        w.vt = cur; cur += align_up(k);
        w.dqt = cur; cur += align_up(q);
        w.dkt = cur; cur += align_up(k);
        w.dvt = cur; cur += align_up(k);
    }
    w.dsum = cur; cur += align_up(N * a->H * sizeof(float));
    w.dqacc = cur; cur += a->deterministic ? 0 : align_up(N * a->H * a->D * sizeof(float));
    w.cudnn = cur;
    return w;
}

/* Build a layout's forward and backward plans for batch b; 0, or -1 with a message. */
static int build_pair(AttnCudnn *a, PlanPair *pp, int b, int ragged, char *err, size_t errlen)
{
    if (pp->built) return pp->built > 0 ? 0 : -1;
    pp->fwd.next_uid = pp->bwd.next_uid = UID_VIRTUAL;
    build_fwd(&pp->fwd, b, a->H, a->KV, a->T, a->D, ragged);
    make_plan(&pp->fwd, a->handle);
    if (pp->fwd.status == CUDNN_STATUS_SUCCESS) {
        build_bwd(&pp->bwd, b, a->H, a->KV, a->T, a->D, ragged, a->deterministic);
        make_plan(&pp->bwd, a->handle);
    }
    const Graph *bad = pp->fwd.status != CUDNN_STATUS_SUCCESS ? &pp->fwd
                     : pp->bwd.status != CUDNN_STATUS_SUCCESS ? &pp->bwd : NULL;
    if (bad) {
        char last[256] = "";
        cudnnGetLastErrorString(last, sizeof last);
        snprintf(err, errlen, "cuDNN attention %s %s graph (batch %d): %s: %s%s%s", ragged ? "documents" : "causal",
                 bad == &pp->fwd ? "forward" : "backward", b, bad->failed_at ? bad->failed_at : "?",
                 cudnnGetErrorString(bad->status), last[0] ? " — " : "", last);
        graph_free(&pp->fwd);
        graph_free(&pp->bwd);
        pp->built = -1;
        return -1;
    }
    const WsLayout *w = ragged ? &a->ws_ragged : &a->ws_plain;
    int64_t own = pp->fwd.workspace > pp->bwd.workspace ? pp->fwd.workspace : pp->bwd.workspace;
    pp->ws_bytes = align_up(w->cudnn + (size_t)own);
    pp->built = 1;
    return 0;
}

static int bucket_of(int n) { int i = 0; while ((1 << i) < n) i++; return i; }

AttnCudnn *attn_cudnn_create(int deterministic, char *err, size_t errlen)
{
    AttnCudnn *a = calloc(1, sizeof *a);
    if (!a) { snprintf(err, errlen, "out of memory"); return NULL; }
    cudnnStatus_t st = cudnnCreate(&a->handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(err, errlen, "cudnnCreate: %s (cuDNN library %zu)", cudnnGetErrorString(st), cudnnGetVersion());
        free(a);
        return NULL;
    }
    a->deterministic = deterministic;
    const char *docs = getenv("LLMC_CUDNN_DOCUMENTS");
    a->documents = !(docs && !strcmp(docs, "0"));
    a->scale = 1.f;
    a->neg_inf = -INFINITY;
    a->one = 1.f;
    if (cudaMalloc((void **)&a->d_seq_len, MAX_DOCS * sizeof(int32_t)) != cudaSuccess ||
        cudaMalloc((void **)&a->d_rag_q, 3 * (MAX_DOCS + 1) * sizeof(int64_t)) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "cuDNN attention: out of GPU memory for the document tables");
        if (a->d_seq_len) cudaFree(a->d_seq_len);
        cudnnDestroy(a->handle);
        free(a);
        return NULL;
    }
    a->d_rag_k = a->d_rag_q + MAX_DOCS + 1;
    a->d_rag_s = a->d_rag_k + MAX_DOCS + 1;
    return a;
}

void attn_cudnn_destroy(AttnCudnn *a)
{
    if (!a) return;
    graph_free(&a->plain.fwd);
    graph_free(&a->plain.bwd);
    for (int i = 0; i < N_BUCKETS; i++) { graph_free(&a->ragged[i].fwd); graph_free(&a->ragged[i].bwd); }
    cudaFree(a->d_seq_len);
    cudaFree(a->d_rag_q);
    cudnnDestroy(a->handle);
    free(a);
}

/* The smallest ragged batch used: room for eight documents a row. */
static int first_bucket(const AttnCudnn *a)
{
    int b = bucket_of(LLMC_CUDNN_DOCS_PER_ROW * a->B);
    return b < N_BUCKETS ? b : N_BUCKETS - 1;
}

size_t attn_cudnn_prepare(AttnCudnn *a, int B, int H, int KV, int T, int D, char *err, size_t errlen)
{
    if (a->B) {
        if (a->B == B && a->H == H && a->KV == KV && a->T == T && a->D == D) {
            size_t r = a->ragged[first_bucket(a)].built > 0 ? a->ragged[first_bucket(a)].ws_bytes : 0;
            return a->plain.ws_bytes > r ? a->plain.ws_bytes : r;
        }
        snprintf(err, errlen, "cuDNN attention: context prepared for another shape");
        return 0;
    }
    if (!attn_cudnn_supported(H, KV, T, D) || B < 1) {
        snprintf(err, errlen, "cuDNN attention: shape B %d H %d KV %d T %d D %d not supported "
                 "(need H %% KV == 0, D 64 or 128, T a multiple of 64)", B, H, KV, T, D);
        return 0;
    }
    a->B = B; a->H = H; a->KV = KV; a->T = T; a->D = D;
    a->scale = 1.f / sqrtf((float)D);
    a->ws_plain = ws_layout(a, 0);
    a->ws_ragged = ws_layout(a, 1);
    if (build_pair(a, &a->plain, B, 0, err, errlen)) { a->B = 0; return 0; }
    /* The document layout is optional: without it such micro-batches use the flash kernels. */
    char derr[512];
    PlanPair *r = &a->ragged[first_bucket(a)];
    if (a->documents && build_pair(a, r, 1 << first_bucket(a), 1, derr, sizeof derr))
        log_warn("%s; micro-batches with documents use the flash kernels", derr);
    size_t need = a->plain.ws_bytes;
    if (r->built > 0 && r->ws_bytes > need) need = r->ws_bytes;
    return need;
}

int attn_cudnn_set_rows(AttnCudnn *a, const int *pos, size_t ws_bytes, kstream_t s)
{
    int n = attn_cudnn_documents(pos, a->B, a->T, a->h_start, a->h_len, MAX_DOCS);
    if (n < 0) return 0;                         /* not a document mask: flash */
    if (n == a->B) { a->docs = 0; return 1; }    /* one sequence a row */
    if (!a->documents) return 0;
    int bi = bucket_of(n);
    if (bi < first_bucket(a)) bi = first_bucket(a);
    PlanPair *pp = &a->ragged[bi];
    if (!pp->built) {
        char err[512];
        if (build_pair(a, pp, 1 << bi, 1, err, sizeof err))
            log_warn("%s; such micro-batches use the flash kernels", err);
    }
    if (pp->built > 0 && pp->ws_bytes > ws_bytes) {
        log_warn("cuDNN attention with %d documents needs %.1f MiB of workspace, "
                "%.1f MiB were set aside; such micro-batches use the flash kernels", n,
                pp->ws_bytes / 1048576.0, ws_bytes / 1048576.0);
        pp->built = -1;   /* said once */
    }
    if (pp->built < 0) return 0;
    int nb = 1 << bi;
    size_t N = (size_t)a->B * a->T;
    for (int i = 0; i < nb; i++) {
        int64_t start = i < n ? a->h_start[i] : (int64_t)N;
        a->h_seq_len[i] = i < n ? a->h_len[i] : 0;
        a->h_rag[0][i] = start * a->H * a->D;
        a->h_rag[1][i] = start * a->KV * a->D;
        a->h_rag[2][i] = start * a->H;
    }
    a->h_rag[0][nb] = (int64_t)N * a->H * a->D;
    a->h_rag[1][nb] = (int64_t)N * a->KV * a->D;
    a->h_rag[2][nb] = (int64_t)N * a->H;
    cudaStream_t st = (cudaStream_t)s;
    if (cudaMemcpyAsync(a->d_seq_len, a->h_seq_len, nb * sizeof(int32_t), cudaMemcpyHostToDevice, st) != cudaSuccess ||
        cudaMemcpyAsync(a->d_rag_q, a->h_rag[0], (nb + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, st) != cudaSuccess ||
        cudaMemcpyAsync(a->d_rag_k, a->h_rag[1], (nb + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, st) != cudaSuccess ||
        cudaMemcpyAsync(a->d_rag_s, a->h_rag[2], (nb + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, st) != cudaSuccess) {
        log_error("cuDNN attention: copying the document tables: %s",
                cudaGetErrorString(cudaGetLastError()));
        exit(1);
    }
    /* Pageable host memory: each copy has left the host buffer when it returns. */
    a->docs = nb;
    a->bucket = bi;
    return 1;
}

int attn_cudnn_deterministic(const AttnCudnn *a) { return a->deterministic; }
int attn_cudnn_rows_documents(const AttnCudnn *a) { return a->docs; }

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
        log_error("cuDNN attention %s: %s %s", which, cudnnGetErrorString(st), last);
        exit(1);
    }
}

/* The bindings every graph of the current layout shares: scalars and, for
 * documents, the length and offset tables. Returns how many were written. */
static int common_binds(AttnCudnn *a, int64_t *uids, void **ptrs)
{
    int n = 0;
    uids[n] = UID_SCALE; ptrs[n++] = &a->scale;
    uids[n] = UID_NEG_INF; ptrs[n++] = &a->neg_inf;
    if (a->docs) {
        uids[n] = UID_SEQ_LEN; ptrs[n++] = a->d_seq_len;
        uids[n] = UID_RAG_Q; ptrs[n++] = a->d_rag_q;
        uids[n] = UID_RAG_K; ptrs[n++] = a->d_rag_k;
        uids[n] = UID_RAG_S; ptrs[n++] = a->d_rag_s;
    }
    return n;
}

static void bind(int64_t *uids, void **ptrs, int *n, int64_t uid, const void *p)
{
    uids[*n] = uid;
    ptrs[(*n)++] = (void *)p;
}

void attn_cudnn_fwd(AttnCudnn *a, bf16_t *O, float *stats, const bf16_t *Q, const bf16_t *K, const bf16_t *V,
                    void *workspace, kstream_t s)
{
    char *ws = workspace;
    const WsLayout *w = a->docs ? &a->ws_ragged : &a->ws_plain;
    const PlanPair *pp = a->docs ? &a->ragged[a->bucket] : &a->plain;
    if (a->docs) {   /* [B,H,T,D] -> [B,T,H,D]: tokens of a document adjacent */
        k_swap12((bf16_t *)(ws + w->qt), Q, a->B, a->H, a->T, a->D, s);
        k_swap12((bf16_t *)(ws + w->kt), K, a->B, a->KV, a->T, a->D, s);
        k_swap12((bf16_t *)(ws + w->vt), V, a->B, a->KV, a->T, a->D, s);
        Q = (const bf16_t *)(ws + w->qt); K = (const bf16_t *)(ws + w->kt); V = (const bf16_t *)(ws + w->vt);
    }
    int64_t uids[MAX_BIND];
    void *ptrs[MAX_BIND];
    int n = common_binds(a, uids, ptrs);
    bind(uids, ptrs, &n, UID_Q, Q);
    bind(uids, ptrs, &n, UID_K, K);
    bind(uids, ptrs, &n, UID_V, V);
    bind(uids, ptrs, &n, UID_O, O);
    bind(uids, ptrs, &n, UID_STATS, stats);
    execute(a, &pp->fwd, uids, ptrs, n, ws + w->cudnn, s, "forward");
}

void attn_cudnn_bwd(AttnCudnn *a, bf16_t *dq, bf16_t *dk, bf16_t *dv, const bf16_t *Q, const bf16_t *K,
                    const bf16_t *V, const bf16_t *O, const bf16_t *dO, const float *stats, void *workspace,
                    kstream_t s)
{
    char *ws = workspace;
    const WsLayout *w = a->docs ? &a->ws_ragged : &a->ws_plain;
    const PlanPair *pp = a->docs ? &a->ragged[a->bucket] : &a->plain;
    bf16_t *gq = dq, *gk = dk, *gv = dv;
    if (a->docs) {
        k_swap12((bf16_t *)(ws + w->qt), Q, a->B, a->H, a->T, a->D, s);
        k_swap12((bf16_t *)(ws + w->kt), K, a->B, a->KV, a->T, a->D, s);
        k_swap12((bf16_t *)(ws + w->vt), V, a->B, a->KV, a->T, a->D, s);
        Q = (const bf16_t *)(ws + w->qt); K = (const bf16_t *)(ws + w->kt); V = (const bf16_t *)(ws + w->vt);
        gq = (bf16_t *)(ws + w->dqt); gk = (bf16_t *)(ws + w->dkt); gv = (bf16_t *)(ws + w->dvt);
    }
    int64_t uids[MAX_BIND];
    void *ptrs[MAX_BIND];
    int n = common_binds(a, uids, ptrs);
    bind(uids, ptrs, &n, UID_ONE, &a->one);
    bind(uids, ptrs, &n, UID_Q, Q);
    bind(uids, ptrs, &n, UID_K, K);
    bind(uids, ptrs, &n, UID_V, V);
    bind(uids, ptrs, &n, UID_O, O);
    bind(uids, ptrs, &n, UID_DO, dO);
    bind(uids, ptrs, &n, UID_STATS, stats);
    bind(uids, ptrs, &n, UID_DQ, gq);
    bind(uids, ptrs, &n, UID_DK, gk);
    bind(uids, ptrs, &n, UID_DV, gv);
    bind(uids, ptrs, &n, UID_DSUM, ws + w->dsum);
    if (!a->deterministic) bind(uids, ptrs, &n, UID_DQ_ACC, ws + w->dqacc);
    execute(a, &pp->bwd, uids, ptrs, n, ws + w->cudnn, s, "backward");
    if (a->docs) {   /* back to [B,H,T,D] and [B,KV,T,D] */
        k_swap12(dq, gq, a->B, a->T, a->H, a->D, s);
        k_swap12(dk, gk, a->B, a->T, a->KV, a->D, s);
        k_swap12(dv, gv, a->B, a->T, a->KV, a->D, s);
    }
}

#endif /* LLMC_HAVE_CUDNN */
