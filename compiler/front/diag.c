/* diag.c — collects diagnostics and renders them clang-style or as JSON (diag.h). */
#include "diag.h"
#include "arena.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file registered with diags_add_source: its own copy of the text, for the excerpt under a diagnostic. */
typedef struct {
    char *file;
    char *text;
    size_t len;
    size_t *line_start;   /* byte offset of each line, built on first use */
    int nlines;
} Source;

struct Diag {
    DiagSeverity severity;
    SrcRange at;
    bool has_pos;
    char *message;
    char **extra;         /* "note: ..." / "help: ..." lines */
    int nextra;
    int seq;              /* insertion order, for a stable sort */
};

struct Diags {
    Diag **items;
    int n, cap;
    Source *sources;
    int nsources;
    char **names;         /* interned file names not registered as sources */
    int nnames;
    int errors, warnings, notes;
    int shown[3];         /* stored diagnostics of each severity (at most DIAG_MAX_SHOWN) */
    long long dropped[3]; /* counted but not stored, past the cap */
};

Diags *diags_new(void)
{
    return xcalloc(1, sizeof(Diags));
}

void diags_free(Diags *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        Diag *g = d->items[i];
        free(g->message);
        for (int j = 0; j < g->nextra; j++) free(g->extra[j]);
        free(g->extra);
        free(g);
    }
    free(d->items);
    for (int i = 0; i < d->nsources; i++) {
        free(d->sources[i].file);
        free(d->sources[i].text);
        free(d->sources[i].line_start);
    }
    free(d->sources);
    for (int i = 0; i < d->nnames; i++) free(d->names[i]);
    free(d->names);
    free(d);
}

void diags_add_source(Diags *d, const char *file, const char *text, size_t len)
{
    /* a file registered twice keeps its first text */
    for (int i = 0; i < d->nsources; i++)
        if (strcmp(d->sources[i].file, file) == 0) return;
    d->sources = xrealloc(d->sources, sizeof(Source) * (size_t)(d->nsources + 1));
    Source *s = &d->sources[d->nsources++];
    s->file = xstrdup(file);
    /* A private copy: the caller's buffer may be freed before rendering. */
    s->text = xmalloc(len + 1);
    memcpy(s->text, text, len);
    s->text[len] = 0;
    s->len = len;
    s->line_start = NULL;
    s->nlines = 0;
}

/* File names are copied so that a diagnostic outlives the plan it points into. */
static const char *intern_file(Diags *d, const char *file)
{
    if (!file) return NULL;
    for (int i = 0; i < d->nsources; i++)
        if (strcmp(d->sources[i].file, file) == 0) return d->sources[i].file;
    for (int i = 0; i < d->nnames; i++)
        if (strcmp(d->names[i], file) == 0) return d->names[i];
    d->names = xrealloc(d->names, sizeof(char *) * (size_t)(d->nnames + 1));
    d->names[d->nnames] = xstrdup(file);
    return d->names[d->nnames++];
}

/* FMT with AP into a malloc'd string (measured first, so no length limit). AP is used twice, hence the copy. */
static char *vformat(const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *p = xmalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

/* The totals count every diagnostic, shown or dropped: diags_error_count and the others report them all. */
static void count(Diags *d, DiagSeverity sev)
{
    if (sev == DIAG_ERROR) d->errors++;
    else if (sev == DIAG_WARNING) d->warnings++;
    else d->notes++;
}

/* Store one diagnostic; NULL past the cap, which diag_note/diag_help accept (add_extra ignores a NULL), so a
 * caller never tests the result. AT NULL, or with no file: a diagnostic about no position ("llmc: error:"). */
static Diag *add(Diags *d, DiagSeverity sev, const SrcRange *at, const char *fmt, va_list ap)
{
    /* Past the cap a diagnostic is only counted: no formatting, no memory, so
     * that a file of millions of bad bytes costs time linear in its size. */
    if (d->shown[sev] >= DIAG_MAX_SHOWN) {
        count(d, sev);
        d->dropped[sev]++;
        return NULL;
    }
    Diag *g = xcalloc(1, sizeof(Diag));
    g->severity = sev;
    if (at && at->start.file) {
        g->has_pos = true;
        g->at = *at;
        g->at.start.file = intern_file(d, at->start.file);
        g->at.end.file = g->at.start.file;
        if (g->at.end.line < g->at.start.line ||
            (g->at.end.line == g->at.start.line && g->at.end.col < g->at.start.col))
            /* an inverted range would underline nothing: shown as its start */
            g->at.end = g->at.start;
    }
    g->message = vformat(fmt, ap);
    g->seq = d->n;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->items = xrealloc(d->items, sizeof(Diag *) * (size_t)d->cap);
    }
    d->items[d->n++] = g;
    d->shown[sev]++;
    count(d, sev);
    return g;
}

bool diags_full(const Diags *d)
{
    return d->shown[DIAG_ERROR] >= DIAG_MAX_SHOWN;
}

Diag *diag_note_at(Diags *d, SrcRange at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Diag *g = add(d, DIAG_NOTE, &at, fmt, ap);
    va_end(ap);
    return g;
}

Diag *diag_error(Diags *d, SrcRange at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Diag *g = add(d, DIAG_ERROR, &at, fmt, ap);
    va_end(ap);
    return g;
}

Diag *diag_warning(Diags *d, SrcRange at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Diag *g = add(d, DIAG_WARNING, &at, fmt, ap);
    va_end(ap);
    return g;
}

Diag *diag_error_nopos(Diags *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Diag *g = add(d, DIAG_ERROR, NULL, fmt, ap);
    va_end(ap);
    return g;
}

/* A "note: ..." or "help: ..." line under G, rendered after its excerpt; G NULL (a dropped diagnostic): nothing. */
static void add_extra(Diag *g, const char *label, const char *fmt, va_list ap)
{
    if (!g) return;
    char *body = vformat(fmt, ap);
    size_t n = strlen(label) + strlen(body) + 3;
    char *line = xmalloc(n);
    snprintf(line, n, "%s: %s", label, body);
    free(body);
    g->extra = xrealloc(g->extra, sizeof(char *) * (size_t)(g->nextra + 1));
    g->extra[g->nextra++] = line;
}

void diag_note(Diag *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_extra(g, "note", fmt, ap);
    va_end(ap);
}

void diag_help(Diag *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_extra(g, "help", fmt, ap);
    va_end(ap);
}

int diags_error_count(const Diags *d) { return d->errors; }
int diags_warning_count(const Diags *d) { return d->warnings; }

bool diags_first_error_pos(const Diags *d, SrcPos *pos)
{
    for (int i = 0; i < d->n; i++)
        if (d->items[i]->severity == DIAG_ERROR && d->items[i]->has_pos) {
            *pos = d->items[i]->at.start;
            return true;
        }
    return false;
}
int diags_note_count(const Diags *d) { return d->notes; }

/* ---- ordering ---- */

/* Files sort in the order diags_add_source registered them, then the names only interned. Pointers are
 * compared, not strings: add() interned every file name. */
static int file_rank(const Diags *d, const char *file)
{
    for (int i = 0; i < d->nsources; i++)
        if (d->sources[i].file == file) return i;
    for (int i = 0; i < d->nnames; i++)
        if (d->names[i] == file) return d->nsources + i;
    return d->nsources + d->nnames;
}

/* cmp_diag's access to the Diags: qsort passes no context (qsort_r is not C11). */
static const Diags *sort_ctx;

/* Position-less diagnostics first, then by file, line, column; ties by insertion order (seq), which makes
 * qsort, not itself stable, give the stable order diag.h promises. */
static int cmp_diag(const void *pa, const void *pb)
{
    const Diag *a = *(Diag *const *)pa, *b = *(Diag *const *)pb;
    if (a->has_pos != b->has_pos) return a->has_pos ? 1 : -1;   /* position-less first */
    if (a->has_pos) {
        int fa = file_rank(sort_ctx, a->at.start.file), fb = file_rank(sort_ctx, b->at.start.file);
        if (fa != fb) return fa < fb ? -1 : 1;
        if (a->at.start.line != b->at.start.line) return a->at.start.line < b->at.start.line ? -1 : 1;
        if (a->at.start.col != b->at.start.col) return a->at.start.col < b->at.start.col ? -1 : 1;
    }
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void sort_diags(Diags *d)
{
    sort_ctx = d;
    if (d->n > 1) qsort(d->items, (size_t)d->n, sizeof(Diag *), cmp_diag);
    sort_ctx = NULL;
}

/* ---- human rendering ---- */

#define C_RESET  "\033[0m"
#define C_BOLD   "\033[1m"
#define C_RED    "\033[1;31m"
#define C_MAG    "\033[1;35m"
#define C_GREEN  "\033[1;32m"
#define C_CYAN   "\033[1;36m"

/* The registered text of FILE (an interned pointer), or NULL: then no excerpt is shown. */
static Source *find_source(Diags *d, const char *file)
{
    for (int i = 0; i < d->nsources; i++)
        if (d->sources[i].file == file) return &d->sources[i];
    return NULL;
}

/* line_start[i]: byte offset where line i+1 begins; built once, on the first excerpt of the file. */
static void index_lines(Source *s)
{
    if (s->line_start) return;
    int cap = 64;
    s->line_start = xmalloc(sizeof(size_t) * (size_t)cap);
    s->line_start[s->nlines++] = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->text[i] != '\n') continue;
        if (s->nlines == cap) {
            cap *= 2;
            s->line_start = xrealloc(s->line_start, sizeof(size_t) * (size_t)cap);
        }
        s->line_start[s->nlines++] = i + 1;
    }
}

/* Length of a valid UTF-8 sequence at p (max n bytes), 0 if invalid. */
/* Overlong forms, surrogates and code points past U+10FFFF are invalid: shown as \xNN, never passed to the
 * terminal. */
static int utf8_len(const unsigned char *p, size_t n)
{
    int len;
    unsigned cp;
    if (p[0] < 0x80) return 1;
    if ((p[0] & 0xE0) == 0xC0) { len = 2; cp = p[0] & 0x1F; }
    else if ((p[0] & 0xF0) == 0xE0) { len = 3; cp = p[0] & 0x0F; }
    else if ((p[0] & 0xF8) == 0xF0) { len = 4; cp = p[0] & 0x07; }
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* The display form of one character of input at p (n bytes left): printable
 * ASCII and valid non-control UTF-8 as they are; C0 controls, DEL and bytes
 * that are not UTF-8 as \xNN; C1 controls (U+0080..U+009F) as \u{NN}. Writes
 * at most 8 bytes to out, returns their number; *used is the input consumed. */
static size_t display_char(const unsigned char *p, size_t n, bool keep_tab, char *out, size_t *used)
{
    /* KEEP_TAB: a message keeps its tabs; render_excerpt handles tabs itself and passes false */
    int l = utf8_len(p, n);
    if (l == 1 && ((p[0] >= 0x20 && p[0] != 0x7f) || (keep_tab && p[0] == '\t'))) {
        out[0] = (char)p[0];
        *used = 1;
        return 1;
    }
    if (l == 2 && p[0] == 0xC2 && p[1] < 0xA0) {   /* U+0080..U+009F */
        *used = 2;
        return (size_t)snprintf(out, 9, "\\u{%02x}", p[1]);
    }
    if (l > 1) {
        memcpy(out, p, (size_t)l);
        *used = (size_t)l;
        return (size_t)l;
    }
    *used = 1;
    return (size_t)snprintf(out, 9, "\\x%02x", p[0]);
}

char *diag_escape(const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t n = strlen(text), o = 0;
    /* display_char writes at most 8 bytes and consumes at least one */
    char *out = xmalloc(n * 8 + 1);
    for (size_t i = 0; i < n;) {
        size_t used;
        o += display_char(p + i, n - i, true, out + o, &used);
        i += used;
    }
    out[o] = 0;
    return out;
}

/* Print text that may echo input: every control character escaped. */
static void put_clean(FILE *out, const char *text)
{
    char *e = diag_escape(text);
    fputs(e, out);
    free(e);
}

/* The source line of G's start and, under it, '^' at the start and '~' under the rest of the range (to the end
 * of the line when the range goes on past it). Columns are bytes (diag.h), mapped here to display columns: a
 * multi-byte character takes one, an escape as many as its text. WIDTH is the line-number gutter's width. */
static void render_excerpt(FILE *out, Source *s, const Diag *g, int width, bool colour)
{
    index_lines(s);
    int line = g->at.start.line;
    if (line < 1 || line > s->nlines) return;
    const unsigned char *base = (const unsigned char *)s->text + s->line_start[line - 1];
    size_t end = line < s->nlines ? s->line_start[line] - 1 : s->len;
    size_t linelen = end - s->line_start[line - 1];
    /* a CRLF file: the '\r' is not part of the line shown */
    if (linelen && base[linelen - 1] == '\r') linelen--;

    size_t col0 = g->at.start.col > 0 ? (size_t)g->at.start.col - 1 : 0;
    size_t col1 = g->at.end.line == line && g->at.end.col > g->at.start.col
                      ? (size_t)g->at.end.col - 1 : (g->at.end.line > line ? linelen : col0 + 1);
    if (col0 > linelen) col0 = linelen;
    if (col1 > linelen) col1 = linelen;
    if (col1 <= col0) col1 = col0 + 1;

    /* Very long lines: show a window around the position. A start past byte 120 keeps 60 bytes before it
     * (moved forward to a character's first byte); at most 240 bytes are shown, more only to reach the
     * range's end. */
    size_t from = 0, to = linelen;
    if (col0 > 120) {
        from = col0 - 60;
        while (from < col0 && (base[from] & 0xC0) == 0x80) from++;
    }
    if (to - from > 240) to = from + 240 > col1 ? from + 240 : col1;
    if (to > linelen) to = linelen;

    /* Build the display line and the marker line side by side. */
    /* up to 8 display bytes per source byte, plus "..." and the end-of-line '^' */
    size_t cap = (to - from) * 8 + 16;
    char *text = xmalloc(cap), *mark = xmalloc(cap);
    size_t nt = 0, nm = 0;
    if (from > 0) { memcpy(text, "...", 3); memcpy(mark, "   ", 3); nt = nm = 3; }
    for (size_t i = from; i < to;) {
        char m = i >= col0 && i < col1 ? (i == col0 ? '^' : '~') : ' ';
        size_t used;
        /* a tab is copied into both lines, so the marker stays under its column whatever the tab width */
        if (base[i] == '\t') { text[nt++] = '\t'; mark[nm++] = m == ' ' ? '\t' : m; i++; continue; }
        size_t w = display_char(base + i, to - i, false, text + nt, &used);
        nt += w;
        /* a multi-byte character is one column; an escape is as wide as its text */
        size_t cols = used > 1 && w == used ? 1 : w;
        for (size_t k = 0; k < cols; k++) mark[nm++] = k == 0 ? m : (m == ' ' ? ' ' : '~');
        i += used;
    }
    if (col0 >= to) mark[nm++] = '^';   /* end of line / end of file */
    /* no trailing blanks after the marker */
    while (nm && mark[nm - 1] == ' ') nm--;
    fprintf(out, "%*d | %.*s\n", width, line, (int)nt, text);
    fprintf(out, "%*s | %s%.*s%s\n", width, "", colour ? C_GREEN : "", (int)nm, mark, colour ? C_RESET : "");
    free(text);
    free(mark);
}

/* "7339002 more errors and 3 more warnings not shown", or NULL when nothing was dropped. */
static char *dropped_summary(const Diags *d)
{
    static const char *const name[3][2] = {{"error", "errors"}, {"warning", "warnings"}, {"note", "notes"}};
    /* three counts of at most 19 digits with their words fit */
    char buf[256] = "";
    size_t o = 0;
    int parts = 0;
    for (int s = 0; s < 3; s++) {
        if (!d->dropped[s]) continue;
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%lld more %s", parts ? " and " : "", d->dropped[s],
                              name[s][d->dropped[s] != 1]);
        parts++;
    }
    if (!parts) return NULL;
    snprintf(buf + o, sizeof buf - o, " not shown (only the first %d of each kind are listed)", DIAG_MAX_SHOWN);
    return xstrdup(buf);
}

/* clang's layout: "file:line:col: error: message", the excerpt, then "= note: ..." lines aligned on the gutter. */
static void render_human(Diags *d, FILE *out, bool colour)
{
    for (int i = 0; i < d->n; i++) {
        const Diag *g = d->items[i];
        const char *sev = g->severity == DIAG_ERROR ? "error" : g->severity == DIAG_WARNING ? "warning" : "note";
        const char *sevc = g->severity == DIAG_ERROR ? C_RED : g->severity == DIAG_WARNING ? C_MAG : C_CYAN;
        if (colour) fputs(C_BOLD, out);
        if (g->has_pos) {
            /* a file name is input too: it may hold control characters */
            put_clean(out, g->at.start.file);
            fprintf(out, ":%d:%d: ", g->at.start.line, g->at.start.col);
        } else {
            fputs("llmc: ", out);
        }
        if (colour) fprintf(out, "%s%s:%s%s ", sevc, sev, C_RESET, C_BOLD);
        else fprintf(out, "%s: ", sev);
        put_clean(out, g->message);
        fputs(colour ? C_RESET "\n" : "\n", out);
        /* the gutter fits five-digit line numbers, wider for a longer file, so excerpts line up */
        int width = 5;
        if (g->has_pos) {
            char buf[16];
            int n = snprintf(buf, sizeof buf, "%d", g->at.start.line);
            if (n > width) width = n;
            Source *s = find_source(d, g->at.start.file);
            if (s) render_excerpt(out, s, g, width, colour);
        }
        for (int j = 0; j < g->nextra; j++) {
            const char *colon = strchr(g->extra[j], ':');
            int lab = (int)(colon - g->extra[j]);
            fprintf(out, "%*s = %s%.*s%s:", width, "", colour ? C_CYAN : "", lab, g->extra[j],
                    colour ? C_RESET : "");
            put_clean(out, colon + 1);
            fputc('\n', out);
        }
    }
    char *more = dropped_summary(d);
    if (more) {
        if (colour) fprintf(out, C_BOLD "llmc: " C_CYAN "note:" C_RESET C_BOLD " %s" C_RESET "\n", more);
        else fprintf(out, "llmc: note: %s\n", more);
        free(more);
    }
}

/* ---- JSON rendering ---- */

/* {"line", "column"}: the 1-based byte position of diag.h. */
static cJSON *pos_json(int line, int col)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "line", line);
    cJSON_AddNumberToObject(o, "column", col);
    return o;
}

/* One array of {severity, summary, detail, range} (diag.h); detail joins the note and help lines with '\n'. A
 * final note with "not_shown" counts what the cap dropped. */
static void render_json(Diags *d, FILE *out)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < d->n; i++) {
        const Diag *g = d->items[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "severity", g->severity == DIAG_ERROR ? "error"
                                               : g->severity == DIAG_WARNING ? "warning" : "note");
        /* escaped as in the text form: the JSON stays valid UTF-8 and a
         * consumer that prints it prints no control characters */
        char *summary = diag_escape(g->message);
        cJSON_AddStringToObject(o, "summary", summary);
        free(summary);
        size_t len = 1;
        char **extra = xcalloc((size_t)g->nextra + 1, sizeof(char *));
        for (int j = 0; j < g->nextra; j++) {
            extra[j] = diag_escape(g->extra[j]);
            len += strlen(extra[j]) + 1;
        }
        char *detail = xmalloc(len);
        detail[0] = 0;
        for (int j = 0; j < g->nextra; j++) {
            if (j) strcat(detail, "\n");
            strcat(detail, extra[j]);
            free(extra[j]);
        }
        free(extra);
        cJSON_AddStringToObject(o, "detail", detail);
        free(detail);
        if (g->has_pos) {
            cJSON *r = cJSON_CreateObject();
            char *file = diag_escape(g->at.start.file);
            cJSON_AddStringToObject(r, "file", file);
            free(file);
            cJSON_AddItemToObject(r, "start", pos_json(g->at.start.line, g->at.start.col));
            cJSON_AddItemToObject(r, "end", pos_json(g->at.end.line, g->at.end.col));
            cJSON_AddItemToObject(o, "range", r);
        } else {
            /* a position-less diagnostic: "range": null, the key always present */
            cJSON_AddNullToObject(o, "range");
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *more = dropped_summary(d);
    if (more) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "severity", "note");
        cJSON_AddStringToObject(o, "summary", more);
        cJSON_AddStringToObject(o, "detail", "");
        cJSON_AddNullToObject(o, "range");
        cJSON_AddNumberToObject(o, "not_shown", (double)(d->dropped[0] + d->dropped[1] + d->dropped[2]));
        cJSON_AddItemToArray(arr, o);
        free(more);
    }
    char *text = cJSON_Print(arr);
    if (text) {
        fputs(text, out);
        fputc('\n', out);
        free(text);
    }
    cJSON_Delete(arr);
}

bool diag_colour_wanted(int colour, FILE *out)
{
    if (colour >= 0) return colour > 0;
    const char *no = getenv("NO_COLOR");
    if (no && no[0]) return false;
    return isatty(fileno(out)) != 0;
}

void diags_drop_notes(Diags *d)
{
    int kept = 0;
    for (int i = 0; i < d->n; i++) {
        Diag *g = d->items[i];
        if (g->severity != DIAG_NOTE) { d->items[kept++] = g; continue; }
        free(g->message);
        for (int j = 0; j < g->nextra; j++) free(g->extra[j]);
        free(g->extra);
        free(g);
    }
    d->n = kept;
    d->notes = d->shown[DIAG_NOTE] = 0;
    d->dropped[DIAG_NOTE] = 0;
}

void diags_render(Diags *d, FILE *out, DiagFormat fmt, int colour)
{
    /* stored in the order the stages found them; shown in source order */
    sort_diags(d);
    if (fmt == DIAG_FMT_JSON) {
        render_json(d, out);
    } else {
        render_human(d, out, diag_colour_wanted(colour, out));
    }
    fflush(out);
}
