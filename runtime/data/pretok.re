/* pretok.re — the Split pre-tokenizer of Qwen2/2.5/3 and Llama 3 (re2c).
 *
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}NUM
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * with NUM = "" (Qwen) or "{1,3}" (Llama 3). A regex engine takes the FIRST
 * alternative that matches, not the longest, so each alternative is its own
 * re2c matcher, tried in order. Inside each alternative the backtracking
 * result equals re2c's longest match (no alternative has a later part that
 * could make an earlier greedy part give back). `\s+(?!\S)` needs lookahead
 * and is done by hand on the whitespace run.
 *
 * Input contract: valid UTF-8 (the tokenizer replaces invalid bytes first) and
 * at least PRETOK_PAD bytes of 0xFF after the end. 0xFF never occurs in UTF-8,
 * so no matcher can run past the end, and none needs a bounds check. */
#include <stddef.h>
#include <stdint.h>
#include "tokenizer.h"

/*!include:re2c "pretok_unicode.inc" */

/*!re2c
    re2c:define:YYCTYPE = uint8_t;
    re2c:yyfill:enable = 0;
    re2c:encoding:utf8 = 1;
    re2c:indent:top = 1;
    re2c:sentinel = 255;
*/

#define LEN ((size_t)(YYCURSOR - s))

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) — U+017F (long s) folds to s, as in Oniguruma */
static size_t m_contraction(const uint8_t *s)
{
    const uint8_t *YYCURSOR = s, *YYMARKER;
    /*!re2c
        "'" ([sStTmMdD] | "\u017f" | [rR][eE] | [vV][eE] | [lL][lL]) { return LEN; }
        * { return 0; }
    */
}

/* [^\r\n\p{L}\p{N}]?\p{L}+ */
static size_t m_word(const uint8_t *s)
{
    const uint8_t *YYCURSOR = s, *YYMARKER;
    /*!re2c
        uNotCrLfLN? uL+ { return LEN; }
        * { return 0; }
    */
}

/* \p{N} */
static size_t m_digit(const uint8_t *s)
{
    const uint8_t *YYCURSOR = s, *YYMARKER;
    /*!re2c
        uN { return LEN; }
        * { return 0; }
    */
}

/* \p{N}{1,3} */
static size_t m_digits3(const uint8_t *s)
{
    const uint8_t *YYCURSOR = s, *YYMARKER;
    /*!re2c
        uN{1,3} { return LEN; }
        * { return 0; }
    */
}

/* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
static size_t m_symbols(const uint8_t *s)
{
    const uint8_t *YYCURSOR = s, *YYMARKER;
    /*!re2c
        " "? uNotWsLN+ [\r\n]* { return LEN; }
        * { return 0; }
    */
}

/* \s*[\r\n]+ (longest: up to the last line break of the whitespace run) */
static size_t m_newlines(const uint8_t *s)
{
    const uint8_t *YYCURSOR = s, *YYMARKER;
    /*!re2c
        uWS* [\r\n]+ { return LEN; }
        * { return 0; }
    */
}

/* \s+ */
static size_t m_spaces(const uint8_t *s)
{
    const uint8_t *YYCURSOR = s, *YYMARKER;
    /*!re2c
        uWS+ { return LEN; }
        * { return 0; }
    */
}

size_t pretok_next(PretokKind kind, const uint8_t *s, size_t n)
{
    size_t k;
    if ((k = m_contraction(s))) return k;
    if ((k = m_word(s))) return k;
    if ((k = kind == PRETOK_DIGITS3 ? m_digits3(s) : m_digit(s))) return k;
    if ((k = m_symbols(s))) return k;
    if ((k = m_newlines(s))) return k;
    if ((k = m_spaces(s))) {
        /* \s+(?!\S): the run, less its last character when a non-space follows;
         * a single space before a non-space is then taken whole by \s+ */
        if (k == n) return k;
        size_t last = k - 1;
        while (last > 0 && (s[last] & 0xC0) == 0x80) last--;
        return last > 0 ? last : k;
    }
    /* every code point is a letter, number, space or other; not reached on valid UTF-8 */
    k = 1;
    while (k < n && (s[k] & 0xC0) == 0x80) k++;
    return k;
}
