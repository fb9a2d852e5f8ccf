/* fmt.c — canonical formatting of a parsed .llm file (fmt.h).
 *
 * Comments are not in the tree; they are kept in source order beside it and
 * placed by position: a comment on the line where an entry (or a block header,
 * or a closing brace) ends stays at the end of that line; any other comment goes
 * on its own line before the next thing that follows it in the source.
 */
#include "fmt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The formatter's output buffer and where it is in the source: comments are placed by comparing their
 * positions with the entries', and ci walks them once, in order. */
typedef struct {
    char *buf;
    size_t len, cap;
    const SourceFile *sf;
    int ci;              /* next comment to place */
    int last_line;       /* source line of the last thing written */
    size_t *line_off;    /* byte offset of each source line */
    int nlines;
} Fmt;

/* The byte offset of P (columns count bytes), clamped to the end of the text. */
static size_t offset_of(const Fmt *f, SrcPos p)
{
    if (p.line < 1 || p.line > f->nlines) return f->sf->len;
    size_t o = f->line_off[p.line - 1] + (size_t)(p.col > 0 ? p.col - 1 : 0);
    return o < f->sf->len ? o : f->sf->len;
}

/* Only blanks (and, when allowed, one '{') between a and b in the source?
 * ALLOW_BRACE: after a block header the '{' may stand between the name and its trailing comment. */
static bool blank_between(const Fmt *f, SrcPos a, SrcPos b, bool allow_brace)
{
    size_t i = offset_of(f, a), j = offset_of(f, b);
    for (; i < j; i++) {
        char ch = f->sf->text[i];
        if (ch == '{' && allow_brace) { allow_brace = false; continue; }
        if (ch != ' ' && ch != '\t' && ch != '\r') return false;
    }
    return true;
}

/* Append N bytes, keeping the buffer NUL-terminated; it grows by doubling from 4 KiB. */
static void put(Fmt *f, const char *s, size_t n)
{
    if (f->len + n + 1 > f->cap) {
        while (f->len + n + 1 > f->cap) f->cap = f->cap ? f->cap * 2 : 4096;
        f->buf = xrealloc(f->buf, f->cap);
    }
    memcpy(f->buf + f->len, s, n);
    f->len += n;
    f->buf[f->len] = 0;
}

static void puts_(Fmt *f, const char *s) { put(f, s, strlen(s)); }

/* Two spaces per level (fmt.h). */
static void indent(Fmt *f, int depth)
{
    for (int i = 0; i < depth; i++) put(f, "  ", 2);
}

/* A strictly before B in the same file. */
static bool before(SrcPos a, SrcPos b)
{
    return a.line < b.line || (a.line == b.line && a.col < b.col);
}

/* The next comment not yet written, or NULL. */
static const Comment *peek(Fmt *f)
{
    return f->ci < f->sf->ncomments ? f->sf->comments[f->ci] : NULL;
}

/* Blank line when the source had one between the last thing and `line`.
 * Several blank lines in the source give one; FIRST (the first thing in a block) never gets one. */
static void gap(Fmt *f, int line, bool first)
{
    if (!first && line > f->last_line + 1) put(f, "\n", 1);
}

/* Own-line comments that come before position p. */
static void comments_before(Fmt *f, SrcPos p, int depth, bool *first)
{
    const Comment *c;
    while ((c = peek(f)) && before(c->at.start, p)) {
        if (c->at.start.line >= f->last_line || *first) gap(f, c->at.start.line, *first);
        indent(f, depth);
        puts_(f, c->text);
        put(f, "\n", 1);
        if (c->at.start.line > f->last_line) f->last_line = c->at.start.line;
        *first = false;
        f->ci++;
    }
}

/* A comment right after `end` on its line (only blanks, or the block's '{'
 * when `brace`, between) ends the line just written.
 * Always ends the line; last_line moves to END's line so the next gap() compares with it. */
static void trailing(Fmt *f, SrcPos end, bool brace)
{
    const Comment *c = peek(f);
    if (c && c->at.start.line == end.line && blank_between(f, end, c->at.start, brace)) {
        put(f, "  ", 2);
        puts_(f, c->text);
        f->ci++;
    }
    put(f, "\n", 1);
    if (end.line > f->last_line) f->last_line = end.line;
}

static void put_value(Fmt *f, const Value *v);

/* A term as the user spelled it (t->text keeps quotes, escapes and number spelling); a list is rebuilt with
 * ", " between its elements. */
static void put_term(Fmt *f, const Term *t)
{
    if (t->kind != TERM_LIST) {
        puts_(f, t->text);
        return;
    }
    put(f, "[", 1);
    for (int i = 0; i < t->nitems; i++) {
        if (i) put(f, ", ", 2);
        put_value(f, t->items[i]);
    }
    put(f, "]", 1);
}

/* Terms separated by one space, except "%" which sticks to its number ("3%"). */
static void put_value(Fmt *f, const Value *v)
{
    for (int i = 0; i < v->nterms; i++) {
        if (i && v->terms[i]->kind != TERM_PERCENT) put(f, " ", 1);
        put_term(f, v->terms[i]);
    }
}

/* Does a comment of its own sit between entries a and b? (breaks alignment)
 * A trailing comment of A (on A's last line) does not count: it stays at the end of A's line. */
static bool comment_between(const Fmt *f, const Entry *a, const Entry *b)
{
    for (int i = f->ci; i < f->sf->ncomments; i++) {
        const Comment *c = f->sf->comments[i];
        if (!before(c->at.start, b->at.start)) break;
        if (before(c->at.start, a->at.start)) continue;
        if (c->at.start.line == a->at.end.line && blank_between(f, a->at.end, c->at.start, false)) continue;   /* trailing */
        return true;
    }
    return false;
}

static void put_entries(Fmt *f, Entry **es, int n, int depth, SrcRange close);

/* One entry at DEPTH: "key = value" with the key padded to WIDTH (the run's longest key), or a sub-block
 * "key {" ... "}" with its entries one level deeper. */
static void put_entry(Fmt *f, const Entry *e, int depth, int width)
{
    indent(f, depth);
    puts_(f, e->key);
    if (e->value) {
        int pad = width - (int)strlen(e->key);
        for (int i = 0; i < pad; i++) put(f, " ", 1);
        put(f, " = ", 3);
        put_value(f, e->value);
        /* Comments inside a multi-line value move after the entry. */
        int inner = f->ci;
        while (inner < f->sf->ncomments && before(f->sf->comments[inner]->at.start, e->at.end)) inner++;
        int first_inner = f->ci;
        f->ci = inner;
        trailing(f, e->at.end, false);
        for (int i = first_inner; i < inner; i++) {
            indent(f, depth);
            puts_(f, f->sf->comments[i]->text);
            put(f, "\n", 1);
        }
    } else {
        put(f, " {", 2);
        trailing(f, e->key_at.end, true);
        put_entries(f, e->sub, e->nsub, depth + 1, e->close_at);
        indent(f, depth);
        put(f, "}", 1);
        trailing(f, e->close_at.end, false);
    }
}

/* The entries of a block or sub-block, then the own-line comments left before its closing brace CLOSE. */
static void put_entries(Fmt *f, Entry **es, int n, int depth, SrcRange close)
{
    bool first = true;
    int i = 0;
    while (i < n) {
        /* A run: consecutive simple entries with no blank line or comment between. */
        /* es[i..j] is the run: each next entry starts at most one line after the previous one ends */
        int j = i, width = 0;
        if (es[i]->value) {
            width = (int)strlen(es[i]->key);
            while (j + 1 < n && es[j + 1]->value && es[j]->value &&
                   es[j + 1]->at.start.line <= es[j]->at.end.line + 1 && !comment_between(f, es[j], es[j + 1])) {
                j++;
                if ((int)strlen(es[j]->key) > width) width = (int)strlen(es[j]->key);
            }
        }
        for (int k = i; k <= j; k++) {
            comments_before(f, es[k]->at.start, depth, &first);
            gap(f, es[k]->at.start.line, first);
            first = false;
            put_entry(f, es[k], depth, width);
        }
        i = j + 1;
    }
    comments_before(f, close.start, depth, &first);
}

/* Walks the items in order, writing each with the comments that come before it; see fmt.h for the result. */
char *fmt_source(const SourceFile *sf, size_t *len)
{
    Fmt f = {.sf = sf};
    /* a text of len bytes has at most len + 1 lines */
    f.line_off = xmalloc(sizeof(size_t) * (sf->len + 2));
    f.line_off[f.nlines++] = 0;
    for (size_t i = 0; i < sf->len; i++)
        if (sf->text[i] == '\n') f.line_off[f.nlines++] = i + 1;
    bool first = true;
    /* the item written last: a blank line is forced only next to a block, so `use` lines in a row keep the
     * source's spacing */
    const Item *prev = NULL;
    for (int i = 0; i < sf->nitems; i++) {
        const Item *it = sf->items[i];
        /* Blocks are always set apart by one blank line. */
        const Comment *c = peek(&f);
        /* START: where the item begins in the source, its leading comment included, so the blank line
         * goes above the comment */
        int start = c && before(c->at.start, it->at.start) ? c->at.start.line : it->at.start.line;
        if (prev && (prev->kind == ITEM_BLOCK || it->kind == ITEM_BLOCK) && start <= f.last_line + 1)
            /* makes gap() see a skipped line, so exactly one blank line is written */
            f.last_line = start - 2;
        comments_before(&f, it->at.start, 0, &first);
        gap(&f, it->at.start.line, first);
        first = false;
        if (it->kind == ITEM_USE) {
            puts_(&f, it->kind_name);
            put(&f, " ", 1);
            puts_(&f, it->use_text);
            trailing(&f, it->at.end, false);
        } else {
            puts_(&f, it->kind_name);
            if (it->name) {
                put(&f, " ", 1);
                puts_(&f, it->name);
            }
            put(&f, " {", 2);
            trailing(&f, it->name ? it->name_at.end : it->kind_at.end, true);
            put_entries(&f, it->entries, it->nentries, 1, it->close_at);
            put(&f, "}", 1);
            trailing(&f, it->close_at.end, false);
        }
        prev = it;
    }
    /* a position past every line: the comments after the last item */
    SrcPos end = {sf->path, 1 << 30, 0};
    comments_before(&f, end, 0, &first);
    /* an empty file formats to "", never NULL */
    if (!f.buf) put(&f, "", 0);
    free(f.line_off);
    *len = f.len;
    return f.buf;
}
