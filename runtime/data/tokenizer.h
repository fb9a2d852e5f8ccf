/* tokenizer.h — byte-level BPE from a Hugging Face tokenizer.json (Qwen2/2.5/3,
 * Llama 3 and tokenizers of the same shape, such as examples/tiny/tokenizer).
 *
 * Encoding, as Hugging Face tokenizers does with add_special_tokens=False:
 *   1. added tokens (specials such as <|im_end|>) are cut out of the raw text
 *      first, leftmost-longest;
 *   2. each piece between them: invalid UTF-8 replaced by U+FFFD, then the
 *      normalizer (NFC or none), then the Split pre-tokenizer (pretok.re), then
 *      ByteLevel (bytes), then BPE merges by rank.
 * The post-processor is not applied (LLaMA-Factory encodes without it, and the
 * chat templates add their own special tokens). docs/tokenizer.md has details.
 *
 * A Tokenizer is read-only after loading and may be shared by threads; each
 * thread encodes through its own TokEncoder (pre-token cache, scratch space). */
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "unicode.h"

typedef struct Tokenizer Tokenizer;
typedef struct TokEncoder TokEncoder;

/* Growable array of token ids. */
typedef struct {
    uint32_t *ids;
    size_t len, cap;
} TokIds;

int tokids_push(TokIds *t, uint32_t id);   /* 0 ok, -1 out of memory */
void tokids_free(TokIds *t);

/* Load DIR/tokenizer.json (and DIR/tokenizer_config.json when present), or a
 * tokenizer.json file given directly. NULL with a message in err on failure. */
Tokenizer *tok_load(const char *path, char *err, size_t errlen);
void tok_free(Tokenizer *tok);

/* Number of ids: highest id + 1 over vocab and added tokens. */
uint32_t tok_vocab_size(const Tokenizer *tok);

/* The id of an added token or vocabulary entry given as its text (for a
 * vocabulary entry: the text it decodes to), or -1. */
int64_t tok_token_id(const Tokenizer *tok, const char *text);

/* Ids named by tokenizer_config.json (eos_token, pad_token, bos_token), or -1. */
int64_t tok_eos_id(const Tokenizer *tok);
int64_t tok_pad_id(const Tokenizer *tok);
int64_t tok_bos_id(const Tokenizer *tok);
/* tokenizer_config.json's add_bos_token (LLaMA-Factory adds bos to pre-training text when set). */
int tok_add_bos(const Tokenizer *tok);

TokEncoder *tok_encoder_new(const Tokenizer *tok);
void tok_encoder_free(TokEncoder *enc);

/* Append the ids of text[0..len) to out. 0 ok, -1 out of memory. */
int tok_encode(TokEncoder *enc, const char *text, size_t len, TokIds *out);

/* The bytes one token decodes to (ByteLevel reversed; an added token's content).
 * NULL for an id that names nothing. */
const uint8_t *tok_token_bytes(const Tokenizer *tok, uint32_t id, size_t *len);

/* 1 if id is an added token marked "special" in tokenizer.json. */
int tok_is_special(const Tokenizer *tok, uint32_t id);

/* Append the bytes of ids[0..n) to out: raw bytes, not lossily decoded, so a
 * sequence cut inside a character round-trips. -1 on an unknown id. */
int tok_decode(const Tokenizer *tok, const uint32_t *ids, size_t n, UniBuf *out);

/* The token text as Hugging Face shows it (ByteLevel characters, e.g. "Ġthe"). */
int tok_token_display(const Tokenizer *tok, uint32_t id, UniBuf *out);

/* ---- pre-tokenizer (runtime/data/pretok.re) ---- */
typedef enum { PRETOK_DIGIT1, PRETOK_DIGITS3 } PretokKind;   /* \p{N} vs \p{N}{1,3} */
#define PRETOK_PAD 8
/* Byte length (>= 1) of the pre-token at s; s[0..n) valid UTF-8, n >= 1,
 * followed by PRETOK_PAD bytes of 0xFF. */
size_t pretok_next(PretokKind kind, const uint8_t *s, size_t n);

#endif
