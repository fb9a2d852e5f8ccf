/* zero_layout.h — how ZeRO-2/3 cut the CUDA backend's flat parameter buffer
 * (model_cuda.h) across ranks and into units (runtime/cuda/zero_layout.c; plain
 * C, checked on the CPU by tests/cuda/zero_layout_test.c).
 *
 * Shards: like the CPU backend (cpu_backend.c), each rank owns one contiguous
 * range of whole GRAD_NORM_BLOCKs (runtime/model/optim.h), as even as that
 * allows; trailing ranks may own nothing. A block never straddles two ranks, so
 * the gradient norm summed block by block is the same bits on any rank count.
 *
 * Units: what backward finishes and ZeRO-3 gathers at once. The flat layout keeps
 * a layer's matrices together (weight-decay part) and its norm weights and biases
 * together (no-decay part), so a layer is two ranges; the last unit (index
 * layers) is the embedding and LM head plus the final norm and the padding. The
 * units cover [0, n_total) exactly once. A unit's buffer (a gradient bucket, a
 * gathered layer) holds its first range and then its second, each placed so that
 * an element keeps its flat offset modulo align: a tensor in the buffer then has
 * the pointer alignment it has in a whole flat buffer, and cuBLASLt, whose
 * heuristic takes the alignment (gemm.c, up to 256 bytes), picks the same kernel,
 * so ZeRO-3's gathered weights give the bits of whole ones. */
#ifndef LLMC_CUDA_ZERO_LAYOUT_H
#define LLMC_CUDA_ZERO_LAYOUT_H

#include <stddef.h>
#include "cuda_layout.h"

typedef struct ZeroUnit {
    size_t off[2], len[2];      /* the two ranges of the flat buffer */
    size_t pos[2], size;        /* where they lie in the unit's buffer; its length */
} ZeroUnit;

/* elements of align: 256 bytes of bf16 (and a multiple of 256 bytes of fp32) */
#define ZL_ALIGN_ELEMS LLMC_CUDA_ZERO_ALIGN_ELEMS   /* contract/cuda_layout.h */

/* starts[0..world]: rank q owns [starts[q], starts[q+1]) of n_total elements,
 * cut at multiples of block. */
void zl_starts(size_t n_total, int world, size_t block, size_t *starts);
/* The part of [base, base+n) that rank q owns: [*a, *b), empty when *a >= *b. */
void zl_owned(const size_t *starts, int q, size_t base, size_t n, size_t *a, size_t *b);
/* starts clamped to the window [base, base+n) into out[0..world]: the same
 * owners for every part of the window (zl_owned gives the same ranges), and
 * the owner's part starts at its clamped start (runtime/base/dist.c's window
 * collectives index a shard from there). */
void zl_clamp_starts(const size_t *starts, int world, size_t base, size_t n, size_t *out);
/* The layers + 1 units from the layout's boundaries: mat[l] where layer l's
 * matrices start (mat[layers]: the embedding), nd[l] where its no-decay tensors
 * start (nd[layers]: the final norm); decay_end ends the weight-decay part;
 * align (elements) as above. 0, or -1 when the boundaries do not tile
 * [0, n_total). */
int zl_units(int layers, const size_t *mat, size_t decay_end, const size_t *nd, size_t n_total, size_t align,
             ZeroUnit *u);
/* Elements of a unit's buffer (its size). */
size_t zl_unit_len(const ZeroUnit *u);
/* Where flat index off lies in the unit's buffer; (size_t)-1 when outside it. */
size_t zl_unit_pos(const ZeroUnit *u, size_t off);

#endif
