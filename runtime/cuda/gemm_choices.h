/* gemm_choices.h — the GEMM algorithm choices a run reads and writes
 * (LLMC_GEMM_CHOICES=FILE, runtime/cuda/gemm_choices.c; plain C, checked on the
 * CPU by tests/cuda/gemm_choices_test.c).
 *
 * LLMC_GEMM_TUNE=1 times cuBLASLt's candidates for each new GEMM shape and keeps
 * the fastest: 1-4% at the FP8 shapes (docs/PERFORMANCE.md), but the choice
 * follows timings, so two runs may differ in the last bits. With a choices file
 * the choice is made once: a shape found in the file runs the recorded algorithm
 * (cuBLASLt documents cublasLtMatmulAlgo_t as serialisable for the same library
 * version), a new one is chosen (timed or cuBLASLt's first) and added, and the
 * file is rewritten at the end of the run. The same file gives the same bits.
 *
 * The file: a header line naming what the algorithms are valid for (the
 * cuBLASLt version and the GPU), then one line a shape:
 *   llmc-gemm-choices 1 cublasLt=VERSION gpu=NAME sm=CC
 *   KEY_0 ... KEY_{GEMM_KEY_LEN-1} ALGO_0 ... ALGO_7      (decimal, then 16 hex digits)
 * '#' lines are comments. */
#ifndef LLMC_CUDA_GEMM_CHOICES_H
#define LLMC_CUDA_GEMM_CHOICES_H

#include <stddef.h>
#include <stdint.h>

/* a shape: transA transB M N K lda ldb ldd strideA strideB strideD d_f32 batch
 * a_type b_type fast_accum c_is_d and the four operands' alignments (gemm.c) */
#define GEMM_KEY_LEN 21
#define GEMM_ALGO_WORDS 8       /* sizeof(cublasLtMatmulAlgo_t) / 8 */
#define GEMM_KEY_MAX (1LL << 40)   /* every key value lies in [0, GEMM_KEY_MAX) */

typedef struct {
    long long key[GEMM_KEY_LEN];
    uint64_t algo[GEMM_ALGO_WORDS];
} GemmChoice;

typedef struct {
    GemmChoice *v;
    int n, cap;
    int dirty;                  /* added or changed since read: rewrite at the end */
} GemmChoices;

/* Reads path into c (empty when the file does not exist). The header must be
 * "llmc-gemm-choices 1 " followed by want (what this run's algorithms are valid
 * for). Returns 0, or -1 with "path:line: what" in err. */
int gemm_choices_read(GemmChoices *c, const char *path, const char *want, char *err, size_t errlen);
/* The choice for key, or NULL. */
GemmChoice *gemm_choices_find(GemmChoices *c, const long long *key);
/* Sets key's choice (adds it when new); -1 when out of memory or a key value out of range. */
int gemm_choices_set(GemmChoices *c, const long long *key, const uint64_t *algo);
/* Writes the file whole (a temporary beside it, then renamed over it). 0, or -1 with err. */
int gemm_choices_write(const GemmChoices *c, const char *path, const char *want, char *err, size_t errlen);
void gemm_choices_free(GemmChoices *c);

#endif
