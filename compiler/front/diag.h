/* diag.h — diagnostics: positioned errors, warnings, notes and help lines.
 *
 * Every stage (parser, checker, estimator, emitters) reports through this API.
 * Diagnostics are collected, sorted into source order (stable), and rendered
 * either clang-style for humans (source line + caret/underline, "= note:",
 * "= help:", colour only on a TTY) or as JSON objects
 * {severity, summary, detail, range {file, start {line, column}, end {line, column}}}.
 */
#ifndef LLMC_DIAG_H
#define LLMC_DIAG_H

#include <stdio.h>
#include <stdarg.h>
#include <stdbool.h>

/* 1-based line and column; column counts bytes. file is the path as given. */
typedef struct {
    const char *file;
    int line, col;
} SrcPos;

/* [start, end) — end is one past the last character of the span. */
typedef struct {
    SrcPos start, end;
} SrcRange;

/* A note stands alone (a remark that changes no exit status), unlike diag_note(),
 * which attaches a line to another diagnostic. */
typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagSeverity;

/* At most this many diagnostics of each severity are kept and shown; the rest
 * are counted ("N more errors not shown"), without being formatted or stored. */
#define DIAG_MAX_SHOWN 100

typedef struct Diag Diag;   /* one diagnostic with its notes and help lines */
typedef struct Diags Diags; /* the collection for one run */

Diags *diags_new(void);
void diags_free(Diags *);

/* Register a source text so that rendering can show its lines. The text is
 * copied: the caller's buffer may be freed before rendering. Files not
 * registered render without the source excerpt. */
void diags_add_source(Diags *, const char *file, const char *text, size_t len);

Diag *diag_error(Diags *, SrcRange at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Diag *diag_warning(Diags *, SrcRange at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Diag *diag_note_at(Diags *, SrcRange at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Errors without a source position (I/O, usage); rendered as "llmc: error: ...". */
Diag *diag_error_nopos(Diags *, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The diag_* constructors return NULL past the cap; diag_note()/diag_help()
 * accept NULL and do nothing. */
/* Attach "= note: ..." / "= help: ..." lines (in the JSON form they join "detail"). */
void diag_note(Diag *, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_help(Diag *, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int diags_error_count(const Diags *);
/* The position of the first error stored with one (in insertion order): true
 * and *pos set, or false when there is none. */
bool diags_first_error_pos(const Diags *, SrcPos *pos);
int diags_warning_count(const Diags *);
int diags_note_count(const Diags *);
/* True once DIAG_MAX_SHOWN errors are stored: later ones are only counted, so a
 * stage may skip the work of describing them. */
bool diags_full(const Diags *);

/* text with every control character escaped for display: C0 controls, DEL and
 * bytes that are not UTF-8 as \xNN, C1 controls as \u{NN} (tabs kept). The one
 * place where messages that echo input are made safe for a terminal; both
 * renderers use it. Returns a malloc'd string. */
char *diag_escape(const char *text);

typedef enum { DIAG_FMT_HUMAN, DIAG_FMT_JSON } DiagFormat;
/* Forget the stored standalone notes (llmc -q); errors and warnings keep theirs. */
void diags_drop_notes(Diags *);
/* Sort into source order and print all. colour: -1 auto (isatty), 0 off, 1 on. */
void diags_render(Diags *, FILE *out, DiagFormat, int colour);
/* Whether to colour what goes to out: colour 1 always, 0 never, -1 auto: only
 * on a terminal, and never when NO_COLOR is set to a non-empty value
 * (https://no-color.org). */
bool diag_colour_wanted(int colour, FILE *out);

#endif
