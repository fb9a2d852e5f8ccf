/* ops_cpu.h — fp32 CPU kernels for the model: GEMMs through OpenBLAS, the rest
 * as plain loops, row-parallel over a small pthread pool where it pays.
 * Every reduction runs in a fixed order, so results do not depend on the
 * number of threads. */
#ifndef LLMC_OPS_CPU_H
#define LLMC_OPS_CPU_H

#include <stddef.h>
#include <stdint.h>

/* Threads used by ops_parallel_for (default: cpus_available(): LLMC_THREADS, else the affinity mask). */
void ops_set_threads(int n);
int ops_threads(void);
/* Run fn(ctx, i) for i in [0, n), split in contiguous chunks over the threads. */
void ops_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx);

/* out[M,N] = a[M,K] @ w[N,K]^T (+ bias[N]); the torch Linear forward. */
void op_linear(float *out, const float *a, const float *w, const float *bias, int M, int K, int N);
/* out[M,N] += alpha * a[M,K] @ w[N,K]^T (a LoRA adapter's contribution). */
void op_linear_acc(float *out, const float *a, const float *w, int M, int K, int N, float alpha);
/* da[M,K] (+)= dout[M,N] @ w[N,K]   (accumulate when acc != 0) */
void op_linear_dx(float *da, const float *dout, const float *w, int M, int K, int N, int acc);
/* dw[N,K] += dout[M,N]^T @ a[M,K] */
void op_linear_dw(float *dw, const float *dout, const float *a, int M, int K, int N);
/* dbias[N] += column sums of dout[M,N] */
void op_bias_dw(float *db, const float *dout, int M, int N);

/* out[r] = x[r] * rstd[r] * w for each of M rows of length D; rstd saved. */
void op_rmsnorm(float *out, float *rstd, const float *x, const float *w, int M, int D, float eps);
/* dx[r] (+)= grad wrt x; dw += grad wrt w (dw may be NULL). */
void op_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *rstd,
                    const float *w, int M, int D, int acc);

/* In-place RoPE (HF rotate-half) on x[M, nheads*head_dim] with positions pos[M];
 * inverse != 0 applies the transpose (backward). */
void op_rope(float *x, const uint32_t *pos, int M, int nheads, int head_dim, double theta, int inverse);

/* act = silu(gate) * up */
void op_swiglu(float *act, const float *gate, const float *up, size_t n);
void op_swiglu_bwd(float *dgate, float *dup, const float *dact, const float *gate, const float *up, size_t n);

/* Attention with document-causal mask over B rows of T tokens.
 * q [B*T, H*hd], k/v [B*T, KV*hd]; probs [B, H, T, T] saved (zero outside mask); out [B*T, H*hd]. */
void op_attention(float *out, float *probs, const float *q, const float *k, const float *v,
                  const uint32_t *pos, int B, int T, int H, int KV, int hd);
/* dq, dk, dv overwritten. */
void op_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                      const float *q, const float *k, const float *v, const uint32_t *pos,
                      int B, int T, int H, int KV, int hd);

#endif
