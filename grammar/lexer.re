/* lexer.re — the .llm lexer (re2c). Produces the tokens of grammar/parser.y plus
 * TK_COMMENT; the parse driver (compiler/front/parse.c) decides what reaches Lemon. */
#include "ast.h"
#include "parser.h"

#include <stdlib.h>
#include <string.h>

void lexer_init(Lexer *lx, const char *file, const char *text, size_t len, Arena *a, Diags *d)
{
    memset(lx, 0, sizeof *lx);
    lx->file = file;
    lx->buf = lx->cur = lx->line_start = (const unsigned char *)text;
    lx->lim = lx->buf + len;   /* text[len] must be a NUL sentinel */
    lx->line = 1;
    lx->arena = a;
    lx->diags = d;
}

static SrcPos pos_at(const Lexer *lx, const unsigned char *p)
{
    return (SrcPos){lx->file, lx->line, (int)(p - lx->line_start) + 1};
}

static SrcRange range_of(const Lexer *lx, const unsigned char *a, const unsigned char *b)
{
    return (SrcRange){pos_at(lx, a), pos_at(lx, b)};
}

static int utf8_seq(const unsigned char *p, const unsigned char *lim)
{
    int len;
    unsigned cp;
    if (p[0] < 0x80) return 1;
    if ((p[0] & 0xE0) == 0xC0) { len = 2; cp = p[0] & 0x1F; }
    else if ((p[0] & 0xF0) == 0xE0) { len = 3; cp = p[0] & 0x0F; }
    else if ((p[0] & 0xF8) == 0xF0) { len = 4; cp = p[0] & 0x07; }
    else return 0;
    if (lim - p < len) return 0;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Scan a string body after the opening quote. Reports bad escapes, raw control
 * bytes and invalid UTF-8; returns false when the string is unterminated. */
static bool scan_string(Lexer *lx)
{
    const unsigned char *p = lx->cur;
    for (;;) {
        if (p >= lx->lim || *p == '\n') {
            lx->errors++;
            diag_error(lx->diags, range_of(lx, lx->tok, lx->tok + 1), "unterminated string");
            lx->cur = p;
            return false;
        }
        if (*p == '"') { lx->cur = p + 1; return true; }
        if (*p == '\\') {
            const unsigned char *e = p + 1;
            if (e < lx->lim && strchr("\\\"ntr", *e) && *e) { p = e + 1; continue; }
            if (e < lx->lim && *e == '0') {
                /* Strings reach C strings, shell scripts and JSON: none can carry a NUL. */
                lx->errors++;
                diag_note(diag_error(lx->diags, range_of(lx, p, e + 1), "\\0 cannot appear in a string"),
                          "plan strings become C strings, shell words and JSON text; none of them can hold a NUL byte");
                p = e + 1;
                continue;
            }
            if (e < lx->lim && *e == 'u' && e + 1 < lx->lim && e[1] == '{') {
                const unsigned char *q = e + 2;
                unsigned long cp = 0;
                int nd = 0;
                while (q < lx->lim && nd < 7 && strchr("0123456789abcdefABCDEF", *q) && *q) {
                    cp = cp * 16 + (unsigned long)(*q <= '9' ? *q - '0' : (*q | 0x20) - 'a' + 10);
                    q++, nd++;
                }
                if (nd >= 1 && nd <= 6 && q < lx->lim && *q == '}' && cp <= 0x10FFFF &&
                    !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0) {
                    p = q + 1;
                    continue;
                }
                lx->errors++;
                diag_help(diag_error(lx->diags, range_of(lx, p, q < lx->lim ? q + 1 : q),
                                     "invalid unicode escape in string"),
                          "write \\u{XXXX} with 1 to 6 hex digits naming a code point other than 0");
                p = q;
                continue;
            }
            lx->errors++;
            Diag *g = diag_error(lx->diags, range_of(lx, p, e < lx->lim ? e + 1 : e),
                                 "unknown escape sequence in string");
            diag_note(g, "valid escapes: \\\\ \\\" \\n \\t \\r \\u{XXXX}");
            p = e < lx->lim && *e != '\n' ? e + 1 : e;
            continue;
        }
        if (*p < 0x20 && *p != '\t') {
            lx->errors++;
            diag_error(lx->diags, range_of(lx, p, p + 1), "control byte 0x%02x in string", *p);
            p++;
            continue;
        }
        int l = utf8_seq(p, lx->lim);
        if (l == 0) {
            lx->errors++;
            diag_error(lx->diags, range_of(lx, p, p + 1), "invalid UTF-8 byte 0x%02x in string", *p);
            p++;
            continue;
        }
        p += l;
    }
}

/* Comments are text too: no control bytes, valid UTF-8. */
static void check_comment(Lexer *lx)
{
    for (const unsigned char *p = lx->tok; p < lx->cur;) {
        if ((*p < 0x20 && *p != '\t' && *p != '\r') || *p == 0x7f) {
            lx->errors++;
            diag_error(lx->diags, range_of(lx, p, p + 1), "control byte 0x%02x in comment", *p);
            return;
        }
        int l = utf8_seq(p, lx->cur);
        if (l == 0) {
            lx->errors++;
            diag_error(lx->diags, range_of(lx, p, p + 1), "invalid UTF-8 byte 0x%02x in comment", *p);
            return;
        }
        p += l;
    }
}

const char *lexer_decode_string(Arena *a, const Token *t)
{
    char *out = arena_alloc(a, (size_t)t->len + 1);
    size_t n = 0;
    const char *p = t->text + 1, *end = t->text + t->len;
    while (p < end) {
        if (*p == '"') break;   /* the closing quote (absent when unterminated) */
        if (*p != '\\') { out[n++] = *p++; continue; }
        p++;
        switch (*p) {
        case 'n': out[n++] = '\n'; p++; break;
        case 't': out[n++] = '\t'; p++; break;
        case 'r': out[n++] = '\r'; p++; break;
        case '0': p++; break;      /* reported by scan_string: a string cannot hold a NUL */
        case 'u': {
            unsigned long cp = strtoul(p + 2, NULL, 16);
            const char *q = strchr(p, '}');
            p = q ? q + 1 : end;
            if (cp < 0x80) out[n++] = (char)cp;
            else if (cp < 0x800) { out[n++] = (char)(0xC0 | (cp >> 6)); out[n++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                out[n++] = (char)(0xE0 | (cp >> 12)); out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[n++] = (char)(0xF0 | (cp >> 18)); out[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: if (p < end) out[n++] = *p++; break;   /* \\ and \" */
        }
    }
    out[n] = 0;
    return out;
}

int lexer_next(Lexer *lx, Token *t)
{
    int kind;
    for (;;) {
        lx->tok = lx->cur;
/*!re2c
        re2c:define:YYCTYPE = "unsigned char";
        re2c:define:YYCURSOR = "lx->cur";
        re2c:define:YYMARKER = "lx->mar";
        re2c:define:YYLIMIT = "lx->lim";
        re2c:yyfill:enable = 0;
        re2c:eof = 0;

        digits   = [0-9]+;
        exp      = [eE] [+-]? digits;
        ident    = [A-Za-z_] [A-Za-z0-9_]*;
        hostch   = [A-Za-z0-9_.-];
        range    = digits ("-" digits)?;
        brackets = "[" range ("," range)* "]";
        hostname = [A-Za-z] hostch* (brackets hostch*)*;
        hostbr   = [A-Za-z] hostch* (brackets hostch*)+;
        hostdot  = [A-Za-z] [A-Za-z0-9_]* [.-] hostch*;

        $                     { t->kind = 0; lx->cur = lx->lim; goto done; }
        [ \t\r\v\f]+          { continue; }
        "\n"                  { lx->line++; lx->line_start = lx->cur; continue; }
        "#" [^\n]*            { check_comment(lx); kind = TK_COMMENT; goto token; }
        "="                   { kind = TK_EQ; goto token; }
        "{"                   { kind = TK_LBRACE; goto token; }
        "}"                   { kind = TK_RBRACE; goto token; }
        "["                   { kind = TK_LBRACKET; goto token; }
        "]"                   { kind = TK_RBRACKET; goto token; }
        ","                   { kind = TK_COMMA; goto token; }
        "%"                   { kind = TK_PERCENT; goto token; }
        "-"? digits           { kind = TK_INT; goto token; }
        "-"? (digits "." digits exp? | digits exp) { kind = TK_FLOAT; goto token; }
        ident                 { kind = TK_IDENT; goto token; }
        hostbr | hostdot | hostname ("," hostname)+ { goto hostlist; }
        "\""                  { scan_string(lx); kind = TK_STRING; goto token; }
        [\x80-\xff]           {
            int l = utf8_seq(lx->tok, lx->lim);
            lx->errors++;
            if (l > 1) {
                lx->cur = lx->tok + l;
                diag_error(lx->diags, range_of(lx, lx->tok, lx->cur),
                           "non-ASCII character outside a string");
            } else {
                diag_error(lx->diags, range_of(lx, lx->tok, lx->cur),
                           "invalid UTF-8 byte 0x%02x", *lx->tok);
            }
            continue;
        }
        *                     {
            int c = *lx->tok;
            lx->errors++;
            if (c >= 0x21 && c < 0x7f)
                diag_error(lx->diags, range_of(lx, lx->tok, lx->cur), "unexpected character '%c'", c);
            else
                diag_error(lx->diags, range_of(lx, lx->tok, lx->cur), "unexpected byte 0x%02x", c);
            continue;
        }
*/
    }
hostlist:
    /* Inside a list, "[a,b]" means two names: stop the host name at a comma
     * that is not inside brackets. */
    kind = TK_HOSTLIST;
    if (lx->in_list) {
        int depth = 0;
        for (const unsigned char *p = lx->tok; p < lx->cur; p++) {
            if (*p == '[') depth++;
            else if (*p == ']') depth--;
            else if (*p == ',' && depth == 0) { lx->cur = p; break; }
        }
        bool plain = true;
        for (const unsigned char *p = lx->tok; p < lx->cur; p++)
            if (!(*p == '_' || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z')))
                plain = false;
        if (plain) kind = TK_IDENT;
    }
token:
    t->kind = kind;
done:
    t->text = (const char *)lx->tok;
    t->len = (int)(lx->cur - lx->tok);
    t->offset = (size_t)(lx->tok - lx->buf);
    t->at = range_of(lx, lx->tok, lx->cur);
    return t->kind;
}
