/* ast.h — the syntax tree of one .llm file, as the parser builds it.
 *
 * A file is a list of items: `use "path"` and blocks `kind name { entries }`.
 * An entry is `key = value` or a sub-block `key { entries }`. A value is a
 * sequence of terms (`2 TiB`, `H100_80GB x 8`, `4 per gpu`, `3 %`); the checker,
 * not the grammar, gives the sequence its meaning, so that a wrong unit is a
 * type error with a position rather than a syntax error.
 */
#ifndef LLMC_AST_H
#define LLMC_AST_H

#include <stdbool.h>
#include <stdint.h>
#include "arena.h"
#include "diag.h"

typedef struct {
    int kind;            /* TK_* from the generated parser.h; 0 = end of input */
    SrcRange at;
    const char *text;    /* points into the source buffer */
    int len;
    size_t offset;       /* byte offset of text in the buffer */
} Token;

typedef enum { TERM_INT, TERM_FLOAT, TERM_STRING, TERM_IDENT, TERM_HOSTLIST, TERM_PERCENT, TERM_LIST } TermKind;

typedef struct Value Value;

typedef struct {
    TermKind kind;
    SrcRange at;
    const char *text;    /* source spelling (strings: with quotes and escapes) */
    const char *str;     /* decoded string / identifier / hostlist */
    int64_t ival;
    double fval;
    bool overflow;       /* integer literal out of int64 range */
    Value **items;       /* TERM_LIST */
    int nitems;
} Term;

struct Value {
    Term **terms;
    int nterms, cap;
    SrcRange at;
};

typedef struct Entry Entry;
struct Entry {
    const char *key;
    SrcRange key_at, at;
    Value *value;        /* NULL for a sub-block */
    Entry **sub;         /* sub-block entries */
    int nsub;
    SrcRange close_at;   /* the sub-block's '}' */
};

typedef enum { ITEM_USE, ITEM_BLOCK } ItemKind;

typedef struct {
    ItemKind kind;
    SrcRange at;         /* whole item */
    const char *use_path; SrcRange use_at;   /* ITEM_USE (decoded) */
    const char *use_text;                    /* ITEM_USE: the string as written */
    const char *kind_name; SrcRange kind_at; /* ITEM_BLOCK: "cluster", ... */
    const char *name; SrcRange name_at;      /* NULL when missing */
    Entry **entries; int nentries;
    SrcRange close_at;
    bool broken;         /* a syntax error inside: entries may be missing */
} Item;

typedef struct {
    SrcRange at;
    const char *text;    /* including '#', trailing blanks removed */
} Comment;

typedef struct {
    const char *path;    /* as given / as resolved relative to the using file */
    const char *text; size_t len;
    Item **items; int nitems;
    Comment **comments; int ncomments;
    int syntax_errors;
    SrcPos *error_pos; int nerror_pos;   /* where syntax errors were reported */
} SourceFile;

/* Lexer (grammar/lexer.re). */
typedef struct {
    const char *file;
    const unsigned char *buf, *cur, *lim, *mar, *tok;
    int line;
    const unsigned char *line_start;
    bool in_list;        /* inside [ ]: a comma ends a host name */
    Arena *arena;
    Diags *diags;
    int errors;
} Lexer;

void lexer_init(Lexer *, const char *file, const char *text, size_t len, Arena *, Diags *);
/* Next token (TK_COMMENT included); 0 at the end. Lexical errors are reported to
 * the Diags and the offending bytes skipped. */
int lexer_next(Lexer *, Token *);
/* Decode a string literal token (with quotes) into the arena. */
const char *lexer_decode_string(Arena *, const Token *);

/* Parser driver (compiler/front/parse.c): parse text into a SourceFile; syntax errors
 * are reported to d. Never returns NULL. */
SourceFile *parse_source(const char *path, const char *text, size_t len, Arena *, Diags *);

/* Helpers shared by the parser actions. */
SrcRange range_join(SrcRange a, SrcRange b);

#define MAX_NESTING 32   /* lists inside lists, blocks inside blocks */

#endif
