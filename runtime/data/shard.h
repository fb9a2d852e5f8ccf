/* shard.h — packed token shards: written by `llmc-train prepare`, read by the trainer.
 *
 * A shard holds n_rows rows of exactly `context` tokens. Per token:
 *   id    uint32  token id (pad_id in padding)
 *   pos   uint32  position inside its document (0 at every document start and at
 *                 every padding token); attention from token j to token i < j of
 *                 the same row is allowed iff i >= j - pos[j]. RoPE uses pos.
 *   mask  uint8   1 if this token is a training label (predicted from the token
 *                 before it), 0 for prompt/system/padding/first-of-document.
 * The loss at row position t predicts id[t+1] where mask[t+1] == 1 (and pos[t+1] > 0).
 *
 * File layout, little-endian:
 *   ShardHeader (64 bytes) | uint32 id[n_rows*context] | uint32 pos[n_rows*context]
 *   | uint8 mask[n_rows*context]
 * A shard is written as NAME.tmp, fsync'd and renamed; the directory's
 * index.json (written last, same way) lists the complete shards. A shard not
 * in index.json is never read.
 */
#ifndef LLMC_SHARD_H
#define LLMC_SHARD_H

#include <stdint.h>

#define SHARD_MAGIC "LLMCSHD\0"   /* 8 bytes */
#define SHARD_VERSION 1u

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t context;        /* row length in tokens */
    uint64_t n_rows;
    uint32_t vocab_size;
    uint32_t pad_id;
    uint64_t n_docs;         /* documents (records) whose tokens are in this shard */
    uint64_t n_label_tokens; /* tokens with mask == 1 */
    uint8_t reserved[16];    /* zero */
} ShardHeader;

_Static_assert(sizeof(ShardHeader) == 64, "ShardHeader is 64 bytes");

#endif
