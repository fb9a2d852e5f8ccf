/* json_stream.c — a streaming JSON reader with positions (see json_stream.h). */
#include "json_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* BUF_SIZE: the file is read 64 KiB at a time. MAX_DEPTH: read_value recurses once per nesting level, so a
 * file of "[[[[..." must stop at a bound well inside the C stack. ARENA_BLOCK: the usual record's values fit in
 * one 64 KiB block, kept from record to record (arena_reset); a larger value gets a block of its own size. */
#define BUF_SIZE (1u << 16)
#define MAX_DEPTH 512
#define ARENA_BLOCK (1u << 16)

/* Every JsonValue and string of the current record is carved from these blocks, so js_next frees a whole
 * record at once and a caller never frees a value. */
typedef struct ArenaBlock ArenaBlock;
struct ArenaBlock {
    ArenaBlock *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

struct JsonStream {
    FILE *f;
    char *name;
    unsigned char buf[BUF_SIZE];
    size_t pos, end;
    int eof, read_error;
    uint32_t line, col;
    uint64_t offset;
    int array;               /* 1: one top-level array; 0: JSON Lines */
    int state;               /* array mode: 0 before '[', 1 expecting first value or ']', 2 after a value, 3 done */
    uint64_t record;
    int failed;              /* a syntax error was recorded for the current record */
    int in_line_record;      /* reading a JSON Lines record */
    char err[512];
    ArenaBlock *arena;       /* blocks of the current record */
    char *scratch;           /* string being decoded */
    size_t scratch_len, scratch_cap;
    size_t max_record;       /* limit on rec_bytes */
    size_t rec_bytes;        /* arena bytes taken by the current record */
    int too_large;           /* the current record passed max_record */
    int in_str;              /* inside a string (where too_large stopped reading) */
    uint32_t depth;          /* containers open in the current record */
    uint32_t rec_line, rec_col;
    uint64_t rec_offset;
};

/* ---- arena ---- */

/* N bytes, 16-aligned, for the current record. NULL either when the record would pass max_record (too_large
 * set: the caller skips the record) or when malloc fails (too_large clear: the caller reports out of memory). */
static void *arena_alloc(JsonStream *s, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > s->max_record || s->rec_bytes > s->max_record - n) { s->too_large = 1; return NULL; }
    s->rec_bytes += n;
    ArenaBlock *b = s->arena;
    if (!b || b->size - b->used < n) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        ArenaBlock *nb = malloc(sizeof *nb + size);
        if (!nb) return NULL;
        nb->size = size;
        nb->used = 0;
        nb->next = b;   /* blocks of one record form a list, freed at reset */
        s->arena = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_reset(JsonStream *s)
{
    /* keep one standard block for the next record, free the rest */
    ArenaBlock *keep = NULL, *b = s->arena;
    while (b) {
        ArenaBlock *next = b->next;
        if (!keep && b->size == ARENA_BLOCK) { keep = b; keep->used = 0; keep->next = NULL; }
        else free(b);
        b = next;
    }
    s->arena = keep;
}

/* ---- input ---- */

/* Load the next BUF_SIZE bytes. 0 at end of file or on a read error (read_error holds errno, reported by
 * read_failed); the two are told apart only there, so every reader just sees the end of input. */
static int refill(JsonStream *s)
{
    if (s->eof) return 0;
    size_t n = fread(s->buf, 1, BUF_SIZE, s->f);
    if (n == 0) {
        if (ferror(s->f)) s->read_error = errno ? errno : EIO;
        s->eof = 1;
        return 0;
    }
    s->pos = 0;
    s->end = n;
    return 1;
}

/* The next byte (0-255) without consuming it, or -1 at the end of input. */
static inline int peek(JsonStream *s)
{
    if (s->pos == s->end && !refill(s)) return -1;
    return s->buf[s->pos];
}

/* Consume one byte and keep the position: columns count characters, so UTF-8 continuation bytes (10xxxxxx)
 * do not move the column. */
static inline void advance(JsonStream *s)
{
    unsigned char c = s->buf[s->pos++];
    s->offset++;
    if (c == '\n') { s->line++; s->col = 1; }
    else if ((c & 0xC0) != 0x80) s->col++;
}

/* Record "file:line:col: [record N: ]message" in s->err. Only the first error of a record is kept (the one at
 * its cause), and none after too_large: the caller reports that one in too_large(). */
static void syntax(JsonStream *s, const char *fmt, ...)
{
    if (s->failed || s->too_large) return;
    s->failed = 1;
    int n = snprintf(s->err, sizeof s->err, "%s:%u:%u: ", s->name, s->line, s->col);
    if (s->record && n > 0 && (size_t)n < sizeof s->err)
        n += snprintf(s->err + n, sizeof s->err - (size_t)n, "record %llu: ", (unsigned long long)s->record);
    if (n > 0 && (size_t)n < sizeof s->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err + n, sizeof s->err - (size_t)n, fmt, ap);
        va_end(ap);
    }
}

/* The found-character half of a message: "'x'", "byte 0xNN", "end of file" or "the end of the line"; TMP is the
 * caller's 16-byte buffer for the first two. */
static const char *describe(int c, char *tmp)
{
    if (c < 0) return "end of file";
    if (c == '\n') return "the end of the line";
    if (c >= 0x20 && c < 0x7F) { snprintf(tmp, 16, "'%c'", c); return tmp; }
    snprintf(tmp, 16, "byte 0x%02X", c);
    return tmp;
}

/* Inside a JSON Lines record a line break ends the record, so it is not skipped. */
static void skip_ws(JsonStream *s)
{
    for (;;) {
        int c = peek(s);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        if (c == '\n' && s->in_line_record) return;
        advance(s);
    }
}

/* ---- values ---- */

/* Append N bytes to the string being decoded (s->scratch, grown by doubling, kept between records). -1 when
 * the record would pass its limit (too_large set) or realloc fails. */
static int scratch_put(JsonStream *s, const void *p, size_t n)
{
    /* the string being read counts against the record's limit (it is copied to the arena next) */
    if (s->scratch_len + n + 1 > s->max_record - (s->rec_bytes < s->max_record ? s->rec_bytes : s->max_record)) {
        s->too_large = 1;
        return -1;
    }
    if (s->scratch_cap - s->scratch_len < n + 1) {
        size_t cap = s->scratch_cap ? s->scratch_cap : 256;
        while (cap - s->scratch_len < n + 1) cap *= 2;
        char *np = realloc(s->scratch, cap);
        if (!np) return -1;
        s->scratch = np;
        s->scratch_cap = cap;
    }
    memcpy(s->scratch + s->scratch_len, p, n);
    s->scratch_len += n;
    return 0;
}

/* The four hex digits of a \u escape, the "\u" already consumed. */
static int hex4(JsonStream *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = peek(s);
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) { char t[16]; syntax(s, "bad \\u escape: expected a hex digit, found %s", describe(c, t)); return -1; }
        v = v * 16 + (uint32_t)d;
        advance(s);
    }
    *out = v;
    return 0;
}

/* Append code point C (at most 0x10FFFF: read_string only passes decoded \u values) as UTF-8. */
static int put_cp(JsonStream *s, uint32_t c)
{
    unsigned char u[4];
    size_t n;
    if (c < 0x80) { u[0] = (unsigned char)c; n = 1; }
    else if (c < 0x800) { u[0] = (unsigned char)(0xC0 | c >> 6); u[1] = (unsigned char)(0x80 | (c & 0x3F)); n = 2; }
    else if (c < 0x10000) {
        u[0] = (unsigned char)(0xE0 | c >> 12); u[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (c & 0x3F)); n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | c >> 18); u[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        u[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)); u[3] = (unsigned char)(0x80 | (c & 0x3F)); n = 4;
    }
    return scratch_put(s, u, n);
}

/* A string after its opening quote has been consumed; result in scratch. */
/* 0 on success: s->scratch holds the decoded bytes, NUL-terminated, s->scratch_len their count without it.
 * -1 on a syntax error, out of memory or too large (s->in_str stays 1 then, so skip_rest knows it stopped
 * inside a string). Bytes >= 0x20 are copied as they are: UTF-8 is not validated here. */
static int read_string(JsonStream *s)
{
    s->scratch_len = 0;
    s->in_str = 1;
    for (;;) {
        /* copy a run of plain bytes straight from the buffer */
        if (s->pos == s->end && !refill(s)) { syntax(s, "unterminated string"); return -1; }
        size_t i = s->pos;
        while (i < s->end && s->buf[i] != '"' && s->buf[i] != '\\' && s->buf[i] >= 0x20) i++;
        if (i > s->pos) {
            if (scratch_put(s, s->buf + s->pos, i - s->pos)) { syntax(s, "out of memory"); return -1; }
            while (s->pos < i) advance(s);
            continue;
        }
        int c = peek(s);
        if (c == '"') { advance(s); break; }
        if (c < 0x20) {
            syntax(s, c == '\n' ? "unterminated string (raw line break in a string)"
                                : "control character 0x%02X in a string (must be escaped)", c);
            return -1;
        }
        advance(s);   /* backslash */
        c = peek(s);
        char t[16];
        uint32_t cp;
        switch (c) {
        case '"': case '\\': case '/': { char ch = (char)c; advance(s); if (scratch_put(s, &ch, 1)) return -1; break; }
        case 'b': advance(s); if (scratch_put(s, "\b", 1)) return -1; break;
        case 'f': advance(s); if (scratch_put(s, "\f", 1)) return -1; break;
        case 'n': advance(s); if (scratch_put(s, "\n", 1)) return -1; break;
        case 'r': advance(s); if (scratch_put(s, "\r", 1)) return -1; break;
        case 't': advance(s); if (scratch_put(s, "\t", 1)) return -1; break;
        case 'u':
            advance(s);
            if (hex4(s, &cp)) return -1;
            /* a high surrogate takes the next \u as its low half; unpaired halves become U+FFFD (json_stream.h) */
            if (cp >= 0xD800 && cp <= 0xDBFF && peek(s) == '\\') {
                advance(s);
                if (peek(s) != 'u') { syntax(s, "bad escape after a high surrogate"); return -1; }
                advance(s);
                uint32_t lo;
                if (hex4(s, &lo)) return -1;
                if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else {
                    if (put_cp(s, 0xFFFD)) return -1;   /* lone high surrogate */
                    cp = lo >= 0xD800 && lo <= 0xDFFF ? 0xFFFD : lo;
                }
            } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                cp = 0xFFFD;   /* lone surrogate */
            }
            if (put_cp(s, cp)) return -1;
            break;
        default:
            syntax(s, "bad escape \\%s in a string", c >= 0x20 && c < 0x7F ? (t[0] = (char)c, t[1] = 0, t) : "?");
            return -1;
        }
    }
    s->in_str = 0;
    if (scratch_put(s, "", 1)) { syntax(s, "out of memory"); return -1; }
    s->scratch_len--;
    return 0;
}

/* The decoded string in scratch, copied into the record's arena (scratch is reused by the next string). */
static char *arena_string(JsonStream *s)
{
    char *p = arena_alloc(s, s->scratch_len + 1);
    if (p) memcpy(p, s->scratch, s->scratch_len + 1);
    return p;
}

/* true, false or null: the whole WORD must follow. */
static int read_literal(JsonStream *s, const char *word)
{
    for (const char *w = word; *w; w++) {
        if (peek(s) != *w) { syntax(s, "invalid literal (expected '%s')", word); return -1; }
        advance(s);
    }
    return 0;
}

/* A number by JSON's grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?, so "01", "1." and ".5" are
 * errors. v->num is its value, v->str its source text, kept in the arena. A number of 512 characters or more is
 * refused (it does not fit TEXT). */
static int read_number(JsonStream *s, JsonValue *v)
{
    char text[512];
    size_t n = 0;
    int c = peek(s);
#define TAKE() do { if (n + 1 >= sizeof text) { syntax(s, "number too long"); return -1; } \
                    text[n++] = (char)c; advance(s); c = peek(s); } while (0)
    if (c == '-') TAKE();
    if (c == '0') TAKE();
    else if (c >= '1' && c <= '9') { while (c >= '0' && c <= '9') TAKE(); }
    else { syntax(s, "invalid number"); return -1; }
    if (c == '.') {
        TAKE();
        if (!(c >= '0' && c <= '9')) { syntax(s, "invalid number: digit expected after '.'"); return -1; }
        while (c >= '0' && c <= '9') TAKE();
    }
    if (c == 'e' || c == 'E') {
        TAKE();
        if (c == '+' || c == '-') TAKE();
        if (!(c >= '0' && c <= '9')) { syntax(s, "invalid number: digit expected in exponent"); return -1; }
        while (c >= '0' && c <= '9') TAKE();
    }
#undef TAKE
    text[n] = '\0';
    v->num = strtod(text, NULL);
    char *p = arena_alloc(s, n + 1);
    if (!p) { syntax(s, "out of memory"); return -1; }
    memcpy(p, text, n + 1);
    v->str = p;
    v->len = n;
    return 0;
}

/* One value and everything inside it, allocated in the record's arena; NULL on any error (message in s->err,
 * or too_large set). DEPTH is this value's nesting level (the record is 1); s->depth counts the containers open
 * now, for skip_rest. Members and elements are linked in file order through ->child and ->next. */
static JsonValue *read_value(JsonStream *s, int depth)
{
    if (depth > MAX_DEPTH) { syntax(s, "nesting deeper than %d", MAX_DEPTH); return NULL; }
    skip_ws(s);
    JsonValue *v = arena_alloc(s, sizeof *v);
    if (!v) { syntax(s, "out of memory"); return NULL; }
    memset(v, 0, sizeof *v);
    v->line = s->line;
    v->col = s->col;
    int c = peek(s);
    char t[16];
    switch (c) {
    case '{': {
        advance(s);
        s->depth++;
        v->type = JV_OBJECT;
        JsonValue **tail = &v->child;
        skip_ws(s);
        if (peek(s) == '}') { advance(s); s->depth--; return v; }
        for (;;) {
            skip_ws(s);
            if (peek(s) != '"') { syntax(s, "expected a member name (a string), found %s", describe(peek(s), t)); return NULL; }
            advance(s);
            if (read_string(s)) return NULL;
            char *key = arena_string(s);
            size_t key_len = s->scratch_len;
            if (!key) { syntax(s, "out of memory"); return NULL; }
            skip_ws(s);
            if (peek(s) != ':') { syntax(s, "expected ':' after member name, found %s", describe(peek(s), t)); return NULL; }
            advance(s);
            JsonValue *m = read_value(s, depth + 1);
            if (!m) return NULL;
            m->key = key;
            m->key_len = key_len;
            *tail = m;
            tail = &m->next;
            v->n_children++;
            skip_ws(s);
            c = peek(s);
            if (c == ',') { advance(s); continue; }
            if (c == '}') { advance(s); s->depth--; return v; }
            syntax(s, "expected ',' or '}' in an object, found %s", describe(c, t));
            return NULL;
        }
    }
    case '[': {
        advance(s);
        s->depth++;
        v->type = JV_ARRAY;
        JsonValue **tail = &v->child;
        skip_ws(s);
        if (peek(s) == ']') { advance(s); s->depth--; return v; }
        for (;;) {
            JsonValue *e = read_value(s, depth + 1);
            if (!e) return NULL;
            *tail = e;
            tail = &e->next;
            v->n_children++;
            skip_ws(s);
            c = peek(s);
            if (c == ',') { advance(s); continue; }
            if (c == ']') { advance(s); s->depth--; return v; }
            syntax(s, "expected ',' or ']' in an array, found %s", describe(c, t));
            return NULL;
        }
    }
    case '"':
        advance(s);
        v->type = JV_STRING;
        if (read_string(s)) return NULL;
        v->str = arena_string(s);
        v->len = s->scratch_len;
        if (!v->str) { syntax(s, "out of memory"); return NULL; }
        return v;
    case 't': v->type = JV_TRUE; return read_literal(s, "true") ? NULL : v;
    case 'f': v->type = JV_FALSE; return read_literal(s, "false") ? NULL : v;
    case 'n': v->type = JV_NULL; return read_literal(s, "null") ? NULL : v;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            v->type = JV_NUMBER;
            return read_number(s, v) ? NULL : v;
        }
        syntax(s, "expected a JSON value, found %s", describe(c, t));
        return NULL;
    }
}

/* ---- records ---- */

/* A stream over F (now owned by the stream, closed by js_close); NAME is copied for messages. Reads the first
 * buffer at once to decide array or JSON Lines. NULL when out of memory (F is then still the caller's). */
static JsonStream *open_file(FILE *f, const char *name)
{
    JsonStream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->f = f;
    s->name = strdup(name);
    s->line = s->col = 1;
    s->max_record = JS_MAX_RECORD_DEFAULT;
    if (!s->name) { free(s); return NULL; }
    /* a UTF-8 byte order mark is skipped */
    if (peek(s) == 0xEF && s->end - s->pos >= 3 && s->buf[s->pos + 1] == 0xBB && s->buf[s->pos + 2] == 0xBF) {
        s->pos += 3;
        s->offset += 3;
    }
    skip_ws(s);
    s->array = peek(s) == '[';
    return s;
}

/* What a path that is not a regular file is, for open_regular_file's message. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISCHR(m) ? "a character device" :
           S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

FILE *open_regular_file(const char *path, const char *what, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO without a writer must not wait; fstat decides */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: the %s is %s; it must be a regular file", path, what, file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    /* the FIFO check is done: blocking reads again for stdio */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); close(fd); }
    return f;
}

void js_set_max_record(JsonStream *s, size_t bytes) { s->max_record = bytes < 1024 ? 1024 : bytes; }

JsonStream *js_open(const char *path, char *err, size_t errlen)
{
    FILE *f = open_regular_file(path, "dataset", err, errlen);
    if (!f) return NULL;
    JsonStream *s = open_file(f, path);
    if (!s) { fclose(f); snprintf(err, errlen, "out of memory"); }
    return s;
}

void js_close(JsonStream *s)
{
    if (!s) return;
    if (s->f) fclose(s->f);
    arena_reset(s);
    free(s->arena);
    free(s->scratch);
    free(s->name);
    free(s);
}

const char *js_error(const JsonStream *s) { return s->err; }
uint64_t js_record_number(const JsonStream *s) { return s->record; }
uint64_t js_offset(const JsonStream *s) { return s->offset; }
int js_is_array(const JsonStream *s) { return s->array; }

/* 1 (with the message in s->err, replacing any syntax message) when the end of input was a read error. */
static int read_failed(JsonStream *s)
{
    if (s->read_error) {
        snprintf(s->err, sizeof s->err, "%s: read error: %s", s->name, strerror(s->read_error));
        return 1;
    }
    return 0;
}

/* Skip the rest of a record that passed the limit, without keeping it: in an
 * array, to the end of the container (strings and nesting followed); in JSON
 * Lines, to the end of the line. -1 at end of file. */
static int skip_rest(JsonStream *s)
{
    int in_str = s->in_str, c;
    uint32_t depth = s->depth;
    if (!s->array) {
        while ((c = peek(s)) >= 0 && c != '\n') advance(s);
        return 0;
    }
    for (;;) {
        if (in_str) {
            /* one byte at a time; a backslash takes the byte after it along, so \" does not end the string */
            if (s->pos == s->end && !refill(s)) return -1;
            c = s->buf[s->pos];
            advance(s);
            if (c == '\\') { if (peek(s) < 0) return -1; advance(s); }
            else if (c == '"') { in_str = 0; if (depth == 0) return 0; }
            continue;
        }
        if (depth == 0) return 0;
        c = peek(s);
        if (c < 0) return -1;
        advance(s);
        if (c == '"') in_str = 1;
        else if (c == '[' || c == '{') depth++;
        else if ((c == ']' || c == '}') && --depth == 0) return 0;
    }
}

/* After read_value stopped on the size limit: skip the record, write the message and leave the stream where
 * the next record starts. JS_TOO_LARGE, or JS_ERROR when the skip reached the end of the file inside the
 * top-level array (the file is cut short) or a read error. */
static int too_large(JsonStream *s)
{
    int eof = skip_rest(s) != 0;
    if (read_failed(s)) return JS_ERROR;
    snprintf(s->err, sizeof s->err, "%s:%u:%u: record %llu: too large: it takes more than %zu bytes once read "
             "(%llu bytes in the file%s)", s->name, s->rec_line, s->rec_col, (unsigned long long)s->record,
             s->max_record, (unsigned long long)(s->offset - s->rec_offset), eof ? ", to the end of the file" : "");
    s->too_large = 0;
    if (eof) {
        if (s->array) { s->state = 3; return JS_ERROR; }   /* the array is not closed */
        return JS_TOO_LARGE;
    }
    if (s->array) s->state = 2;
    else if (peek(s) == '\n') advance(s);
    return JS_TOO_LARGE;
}

/* Per-record counters, reset before each record; rec_line/rec_col/rec_offset are where it begins, which the
 * too-large message names because its end was never parsed. */
static void record_start(JsonStream *s)
{
    s->record++;
    s->rec_bytes = 0;
    s->too_large = s->in_str = 0;
    s->depth = 0;
    s->rec_line = s->line;
    s->rec_col = s->col;
    s->rec_offset = s->offset;
}

int js_next(JsonStream *s, JsonValue **out)
{
    arena_reset(s);
    s->failed = 0;
    s->err[0] = '\0';
    if (s->scratch_cap > (4u << 20)) {   /* do not keep a big record's buffer */
        free(s->scratch);
        s->scratch = NULL;
        s->scratch_cap = s->scratch_len = 0;
    }
    char t[16];
    if (s->array) {
        if (s->state == 3) return JS_END;
        /* the first call: step over the '[' that open_file saw */
        if (s->state == 0) {
            skip_ws(s);
            advance(s);   /* '[' (checked at open) */
            s->state = 1;
        }
        skip_ws(s);
        int c = peek(s);
        if (s->state == 2) {
            if (c == ',') { advance(s); skip_ws(s); c = peek(s); if (c == ']') { syntax(s, "trailing ',' before ']'"); return JS_ERROR; } }
            else if (c != ']') {
                if (read_failed(s)) return JS_ERROR;
                syntax(s, "expected ',' or ']' after record %llu, found %s", (unsigned long long)s->record,
                       describe(c, t));
                return JS_ERROR;
            }
        }
        if (c == ']') {
            advance(s);
            skip_ws(s);
            s->state = 3;
            if (peek(s) >= 0) { syntax(s, "unexpected %s after the top-level array", describe(peek(s), t)); return JS_ERROR; }
            return read_failed(s) ? JS_ERROR : JS_END;
        }
        if (c < 0) {
            if (read_failed(s)) return JS_ERROR;
            syntax(s, "unexpected end of file inside the top-level array");
            return JS_ERROR;
        }
        record_start(s);
        JsonValue *v = read_value(s, 1);
        if (!v && s->too_large) return too_large(s);
        if (!v) { read_failed(s); return JS_ERROR; }
        s->state = 2;
        *out = v;
        return JS_RECORD;
    }
    /* JSON Lines */
    skip_ws(s);
    if (peek(s) < 0) return read_failed(s) ? JS_ERROR : JS_END;
    record_start(s);
    s->in_line_record = 1;
    JsonValue *v = read_value(s, 1);
    s->in_line_record = 0;
    if (!v && s->too_large) return too_large(s);
    if (v) {
        /* the rest of the line must be blank */
        int c;
        while ((c = peek(s)) == ' ' || c == '\t' || c == '\r') advance(s);
        if (c == '\n' || c < 0) { *out = v; return JS_RECORD; }
        syntax(s, "unexpected %s after the record (JSON Lines: one value per line)", describe(c, t));
    }
    if (read_failed(s)) return JS_ERROR;
    /* (a bad JSON Lines record costs one line; a bad record in an array ends the file, as there is no safe place
     * to resume) */
    /* resynchronize at the next line */
    int c;
    while ((c = peek(s)) >= 0 && c != '\n') advance(s);
    if (c == '\n') advance(s);
    return JS_BAD_RECORD;
}

const JsonValue *jv_get(const JsonValue *obj, const char *key)
{
    if (!obj || obj->type != JV_OBJECT) return NULL;
    size_t n = strlen(key);
    const JsonValue *found = NULL;   /* the last duplicate wins, as in Python's json */
    for (const JsonValue *m = obj->child; m; m = m->next)
        if (m->key_len == n && !memcmp(m->key, key, n)) found = m;
    return found;
}

JsonStream *js_open_memory(const char *data, size_t len, const char *name)
{
    /* fmemopen refuses an empty buffer; an empty stream reads from /dev/null */
    FILE *f = len ? fmemopen((void *)data, len, "rb") : fopen("/dev/null", "rb");
    if (!f) return NULL;
    JsonStream *s = open_file(f, name);
    if (!s) fclose(f);
    return s;
}

long js_parse_buffer(const char *data, size_t len, char *err, size_t errlen)
{
    JsonStream *s = js_open_memory(data, len, "<buffer>");
    if (!s) { snprintf(err, errlen, "cannot open a memory stream"); return -1; }
    long n = 0;
    JsonValue *v;
    int rc;
    while ((rc = js_next(s, &v)) != JS_END) {
        if (rc == JS_ERROR) { snprintf(err, errlen, "%s", s->err); n = -1; break; }
        if (rc == JS_RECORD) n++;
    }
    js_close(s);
    return n;
}
