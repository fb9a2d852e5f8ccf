/* unicode.h — what the tokenizer needs from Unicode: UTF-8 decoding with
 * replacement of invalid bytes, the letter/number/space classes of the
 * pre-tokenizer, and NFC. Tables: build/gen/rt_unicode_tables.c, generated at
 * build time from the Unicode Character Database 15.0 by runtime/data/gen_unicode.py. */
#ifndef LLMC_UNICODE_H
#define LLMC_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#define UNI_LETTER    1u   /* General_Category L* (\p{L}) */
#define UNI_NUMBER    2u   /* General_Category N* (\p{N}) */
#define UNI_SPACE     4u   /* White_Space (\s) */
#define UNI_NFC_CHECK 8u   /* NFC_Quick_Check is No or Maybe */

extern const uint8_t unicode_flag_stage1[0x1100], unicode_flag_blocks[];
extern const uint8_t unicode_ccc_stage1[0x1100], unicode_ccc_blocks[];
extern const uint32_t unicode_decomp_index[], unicode_decomp_pool[], unicode_comp[];
extern const int unicode_n_decomp, unicode_n_comp;

static inline unsigned unicode_flags(uint32_t c)
{
    return c < 0x110000 ? unicode_flag_blocks[unicode_flag_stage1[c >> 8] * 256u + (c & 255u)] : 0;
}

static inline unsigned unicode_ccc(uint32_t c)
{
    return c < 0x110000 ? unicode_ccc_blocks[unicode_ccc_stage1[c >> 8] * 256u + (c & 255u)] : 0;
}

/* A growable byte buffer. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} UniBuf;

int unibuf_reserve(UniBuf *b, size_t extra);   /* 0 ok, -1 out of memory */
int unibuf_append(UniBuf *b, const void *data, size_t n);
void unibuf_free(UniBuf *b);

/* Decode one code point from s[0..n) (n > 0). Returns the bytes consumed (>= 1).
 * An invalid or truncated sequence yields U+FFFD and consumes its maximal
 * valid prefix (at least one byte), as Unicode's "maximal subpart" practice,
 * Python's errors="replace" and the WHATWG TextDecoder do. */
size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Encode c (<= 0x10FFFF) into out; returns 1..4. */
size_t utf8_encode(uint32_t c, uint8_t out[4]);

/* 1 if s[0..n) is valid UTF-8 (no surrogates, no overlongs). */
int utf8_valid(const uint8_t *s, size_t n);

/* Append s[0..n) to out with every invalid sequence replaced by U+FFFD. */
int utf8_sanitize(const uint8_t *s, size_t n, UniBuf *out);

/* Append the NFC form of valid UTF-8 s[0..n) to out. 0 ok, -1 out of memory. */
int unicode_nfc(const uint8_t *s, size_t n, UniBuf *out);

#endif
