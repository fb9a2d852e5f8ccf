/* parse.c — the hand-written loop around the Lemon parser (as SQLite does):
 * pulls tokens from the re2c lexer, keeps comments aside for the formatter,
 * turns a name followed by '=' or '{' into KEY, limits nesting, and builds the
 * AST through the ctx_* actions. */
#include "parse_ctx.h"
#include "parser.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The Lemon parser generated from grammar/parser.y (%name LlmcParse); the generated parser.h holds only the
 * TK_* token codes, so its entry points are declared here. */
void *LlmcParseAlloc(void *(*)(size_t));
void LlmcParseFree(void *, void (*)(void *));
void LlmcParse(void *, int, Token, ParseCtx *);
int LlmcParseRecovering(void *);

SrcRange range_join(SrcRange a, SrcRange b)
{
    return (SrcRange){a.start, b.end};
}

/* Remember where an error was reported (see ParseCtx.error_pos). Past
 * ERROR_POS_MAX positions not yet claimed by a block, the last slot holds the
 * latest one: memory stays bounded, and a block that then goes unmarked can
 * only add errors far past the ones shown (DIAG_MAX_SHOWN). */
#define ERROR_POS_MAX 4096

/* Append P to c->error_pos (ctx_block consumes them), growing the array by doubling up to ERROR_POS_MAX. */
static void note_error_pos(ParseCtx *c, SrcPos p)
{
    if (c->nerror_pos == ERROR_POS_MAX) {
        c->error_pos[c->nerror_pos - 1] = p;   /* keep the latest: blocks end after it */
        return;
    }
    if (c->nerror_pos == c->error_pos_cap) {
        c->error_pos_cap = c->error_pos_cap ? c->error_pos_cap * 2 : 16;
        c->error_pos = xrealloc(c->error_pos, sizeof(SrcPos) * (size_t)c->error_pos_cap);
    }
    c->error_pos[c->nerror_pos++] = p;
}

/* ---- AST construction (called from the grammar actions) ---- */

/* `KIND [NAME] { entries }` at the top level: an Item appended to the file's list. NAME is NULL for a block
 * written without one. A block that held a syntax error is marked broken, so the checker does not also report
 * the keys that error swallowed as missing. */
void ctx_block(ParseCtx *c, const Token *kind, const Token *name, PtrVec *entries, const Token *close)
{
    Item *it = arena_alloc(c->arena, sizeof(Item));
    it->kind = ITEM_BLOCK;
    it->kind_name = arena_strndup(c->arena, kind->text, (size_t)kind->len);
    it->kind_at = kind->at;
    if (name) {
        it->name = arena_strndup(c->arena, name->text, (size_t)name->len);
        it->name_at = name->at;
    }
    it->entries = (Entry **)entries->items;
    it->nentries = entries->n;
    it->close_at = close->at;
    it->at = range_join(kind->at, close->at);
    /* Errors before this block's end are inside it or between blocks: either
     * way no later block can hold them, so only those after it are kept. */
    int keep = 0;
    for (int i = 0; i < c->nerror_pos; i++) {
        const SrcPos *p = &c->error_pos[i];
        bool after_start = p->line > it->at.start.line || (p->line == it->at.start.line && p->col >= it->at.start.col);
        bool before_end = p->line < it->at.end.line || (p->line == it->at.end.line && p->col < it->at.end.col);
        if (after_start && before_end) it->broken = true;
        if (!before_end) c->error_pos[keep++] = *p;
    }
    c->nerror_pos = keep;
    ptrvec_push(c->arena, &c->items, it);
}

/* `use "file.llm"`: the decoded path for the loader and the spelling as written for fmt. */
void ctx_use(ParseCtx *c, const Token *kw, const Token *path)
{
    Item *it = arena_alloc(c->arena, sizeof(Item));
    it->kind = ITEM_USE;
    it->kind_name = arena_strndup(c->arena, kw->text, (size_t)kw->len);
    it->kind_at = kw->at;
    it->use_path = lexer_decode_string(c->arena, path);
    it->use_text = arena_strndup(c->arena, path->text, (size_t)path->len);
    it->use_at = path->at;
    it->at = range_join(kw->at, path->at);
    ptrvec_push(c->arena, &c->items, it);
}

/* `key = value` (SUB NULL) or a sub-block `key { ... }` (V NULL, CLOSE its '}'); the range covers either whole. */
Entry *ctx_entry(ParseCtx *c, const Token *key, Value *v, PtrVec *sub, const Token *close)
{
    Entry *e = arena_alloc(c->arena, sizeof(Entry));
    e->key = arena_strndup(c->arena, key->text, (size_t)key->len);
    e->key_at = key->at;
    e->value = v;
    if (sub) {
        e->sub = (Entry **)sub->items;
        e->nsub = sub->n;
        e->close_at = close->at;
        e->at = range_join(key->at, close->at);
    } else {
        e->at = range_join(key->at, v->at);
    }
    return e;
}

/* Append term T to value V, or start a value with it when V is NULL (the grammar's first term); the value's
 * range grows to end where T ends. */
Value *ctx_value(ParseCtx *c, Value *v, Term *t)
{
    if (!v) {
        v = arena_alloc(c->arena, sizeof(Value));
        v->at = t->at;
    }
    PtrVec vec = {(void **)v->terms, v->nterms, v->cap};
    ptrvec_push(c->arena, &vec, t);
    v->terms = (Term **)vec.items;
    v->nterms = vec.n;
    v->cap = vec.cap;
    v->at.end = t->at.end;
    return v;
}

/* One literal term; the source spelling is kept (fmt writes it back as it was), with the decoded value beside
 * it: a number parsed, a string unescaped. */
Term *ctx_term(ParseCtx *c, TermKind kind, const Token *tok)
{
    Term *t = arena_alloc(c->arena, sizeof(Term));
    t->kind = kind;
    t->at = tok->at;
    t->text = arena_strndup(c->arena, tok->text, (size_t)tok->len);
    switch (kind) {
    case TERM_INT:
        errno = 0;
        t->ival = strtoll(t->text, NULL, 10);
        /* not an error here: the checker reports it with the key it belongs to */
        t->overflow = errno == ERANGE;
        t->fval = (double)t->ival;
        break;
    case TERM_FLOAT:
        t->fval = strtod(t->text, NULL);
        t->overflow = !isfinite(t->fval);
        break;
    case TERM_STRING:
        t->str = lexer_decode_string(c->arena, tok);
        break;
    default:
        t->str = t->text;
        break;
    }
    return t;
}

/* `[ v, v, ... ]`, each element a value; ELEMS NULL for "[]". */
Term *ctx_list(ParseCtx *c, const Token *open, PtrVec *elems, const Token *close)
{
    Term *t = arena_alloc(c->arena, sizeof(Term));
    t->kind = TERM_LIST;
    t->at = range_join(open->at, close->at);
    t->text = "[...]";
    if (elems) {
        t->items = (Value **)elems->items;
        t->nitems = elems->n;
    }
    return t;
}

/* ---- syntax errors ---- */

/* The "found ..." half of a syntax error for token code MAJOR; a number or name is quoted, cut to 40 bytes so a
 * runaway token does not flood the message. */
static const char *token_desc(ParseCtx *c, int major, const Token *tok)
{
    switch (major) {
    case 0: return "end of file";
    case TK_EQ: return "'='";
    case TK_LBRACE: return "'{'";
    case TK_RBRACE: return "'}'";
    case TK_LBRACKET: return "'['";
    case TK_RBRACKET: return "']'";
    case TK_COMMA: return "','";
    case TK_PERCENT: return "'%'";
    case TK_STRING: return "a string";
    case TK_INT: case TK_FLOAT:
        return arena_printf(c->arena, "number %.*s", tok->len > 40 ? 40 : tok->len, tok->text);
    case TK_KEY:
    case TK_IDENT:
    case TK_HOSTLIST:
        return arena_printf(c->arena, "'%.*s'", tok->len > 40 ? 40 : tok->len, tok->text);
    default: return "a token";
    }
}

/* Lemon's %syntax_error (through grammar/parser.y's report_syntax_error): MAJOR/TOK is the token it could not
 * shift, EXPECTED[0..NTOKENS) the tokens the state would have taken. The raw set reads badly ("expected IDENT,
 * KEY, INT, FLOAT, ..."), so it is turned into words: INT, STRING and '[' together mean a value is expected; IDENT
 * and KEY without '=' or '}' mean the top level between blocks. A few shapes a user often writes get their own
 * message (a key with no value, an entry after a '}' that closed its block early). */
void ctx_syntax_error(ParseCtx *c, int major, const Token *tok, const bool *expected, int ntokens)
{
    c->syntax_errors++;
    note_error_pos(c, tok->at.start);
    if (diags_full(c->diags)) {   /* only counted now: skip describing it */
        diag_error(c->diags, tok->at, "syntax error");
        return;
    }
    /* fewer than ten NAMES joined: well under 256 bytes */
    char buf[256] = "";
    const char *names[16];
    int n = 0;
    /* the ntokens tests guard the EXPECTED indexes */
    bool value = ntokens > TK_LBRACKET && expected[TK_INT] && expected[TK_STRING] && expected[TK_LBRACKET];
    bool top = ntokens > TK_IDENT && expected[TK_IDENT] && expected[TK_KEY] && !expected[TK_EQ] &&
               !expected[TK_RBRACE] && !value;
    if (top) names[n++] = "a block such as 'model NAME { ... }' or 'use \"file.llm\"'";
    else if (expected[TK_KEY]) names[n++] = "'key = value'";
    if (expected[TK_EQ]) names[n++] = "'='";
    if (expected[TK_LBRACE]) names[n++] = "'{'";
    if (value) names[n++] = "a value";
    else {
        if (expected[TK_IDENT] && !top) names[n++] = "a name";
        if (expected[TK_STRING]) names[n++] = "a string";
    }
    if (expected[TK_COMMA]) names[n++] = "','";
    if (expected[TK_RBRACKET]) names[n++] = "']'";
    if (expected[TK_RBRACE]) names[n++] = "'}'";
    if (expected[0] && n == 0) names[n++] = "end of file";
    for (int i = 0; i < n; i++) {
        if (i) strcat(buf, i == n - 1 ? " or " : ", ");
        strcat(buf, names[i]);
    }
    const char *found = token_desc(c, major, tok);
    Diag *g;
    if (c->prev.kind == TK_EQ && value) {
        g = diag_error(c->diags, tok->at, "expected a value after '=', found %s", found);
        if (major == TK_KEY || major == TK_RBRACE || major == 0)
            diag_note(g, "the value of '%.*s' is missing", c->prev_key.len > 40 ? 40 : c->prev_key.len, c->prev_key.text);
        return;
    }
    if (major == TK_EQ && c->prev.kind == TK_KEY && expected[TK_LBRACE] && !expected[TK_KEY]) {
        g = diag_error(c->diags, c->prev.at, "'%.*s = ...' is outside of any block", c->prev.len > 40 ? 40 : c->prev.len, c->prev.text);
        diag_note(g, "is a '}' above it closing the block too early?");
        return;
    }
    if (n)
        g = diag_error(c->diags, tok->at, "expected %s, found %s", buf, found);
    else
        g = diag_error(c->diags, tok->at, "unexpected %s", found);
    if (major == TK_KEY && top)
        diag_help(g, "a plan is a list of blocks: cluster, model, dataset, train, job; each is 'KIND NAME { key = value ... }'");
    else if (major == 0 && expected[TK_RBRACE])
        diag_note(g, "a block is not closed");
    else if (major == TK_EQ && expected[TK_KEY] == false && !top && expected[TK_RBRACE])
        diag_help(g, "is a key missing before '='?");
}

/* ---- the driver loop ---- */

/* Next token that is not a comment; comments are stored in the SourceFile.
 * Returns the token's kind (0 at the end of input). */
static int next_significant(Lexer *lx, Token *t, ParseCtx *c, PtrVec *comments)
{
    for (;;) {
        /* the lexer reports its own errors: only whether there was one is needed here */
        int errors = lx->errors;
        lexer_next(lx, t);
        if (lx->errors != errors) {
            /* A lexical error: the block around it may have lost entries. */
            note_error_pos(c, t->at.start);
        }
        if (t->kind != TK_COMMENT) return t->kind;
        Comment *cm = arena_alloc(c->arena, sizeof(Comment));
        cm->at = t->at;
        /* Trim trailing blanks so that fmt output is stable. */
        int len = t->len;
        while (len > 1 && (t->text[len - 1] == ' ' || t->text[len - 1] == '\t' || t->text[len - 1] == '\r'))
            len--;
        cm->text = arena_strndup(c->arena, t->text, (size_t)len);
        ptrvec_push(c->arena, comments, cm);
    }
}

/* One file's text to its SourceFile (items and comments; syntax_errors counts the lexer's and the parser's).
 * TEXT must outlive the result: tokens point into it. The loop holds two tokens because whether a name is a KEY
 * depends on the token after it; the parser sees CUR once NEXT is known. */
SourceFile *parse_source(const char *path, const char *text, size_t len, Arena *a, Diags *d)
{
    SourceFile *sf = arena_alloc(a, sizeof(SourceFile));
    sf->path = arena_strdup(a, path);
    sf->text = text;
    sf->len = len;

    ParseCtx c = {.arena = a, .diags = d, .sf = sf};
    PtrVec comments = {0};
    Lexer lx;
    lexer_init(&lx, sf->path, text, len, a, d);
    /* Lemon allocates with malloc: out of memory ends llmc as arena.c's out_of_memory does */
    void *parser = LlmcParseAlloc(malloc);
    if (!parser) {
        fputs("llmc: error: out of memory\n", stderr);
        exit(2);
    }

    int depth = 0, list_depth = 0;
    Token cur, next;
    next_significant(&lx, &cur, &c, &comments);
    for (;;) {
        if (cur.kind == 0) {
            /* token 0, the end of input: Lemon accepts, or reports what is still open */
            LlmcParse(parser, 0, cur, &c);
            break;
        }
        if (cur.kind == TK_LBRACKET || cur.kind == TK_LBRACE) {
            /* counted here so deep nesting stops with a plain message long before Lemon's own stack
             * (%stack_size 256) overflows; c.overflow below is the backstop */
            if (++depth > MAX_NESTING) {
                diag_error(d, cur.at, "nesting deeper than %d levels", MAX_NESTING);
                c.syntax_errors++;
                break;
            }
        } else if ((cur.kind == TK_RBRACKET || cur.kind == TK_RBRACE) && depth > 0) {
            depth--;
        }
        /* The lexer needs to know about lists before it reads the next token. */
        if (cur.kind == TK_LBRACKET) list_depth++;
        lx.in_list = list_depth > 0;
        next_significant(&lx, &next, &c, &comments);
        /* A host-like name before '=' ("kv-heads =") is taken as a key too, so that
         * the checker can say it is unknown and suggest the right one. */
        if ((cur.kind == TK_IDENT || (cur.kind == TK_HOSTLIST && next.kind == TK_EQ)) &&
            (next.kind == TK_EQ || next.kind == TK_LBRACE))
            cur.kind = TK_KEY;
        LlmcParse(parser, cur.kind, cur, &c);
        /* the tokens before the next one, for ctx_syntax_error's messages ("the value of 'lr' is missing") */
        if (cur.kind == TK_KEY) c.prev_key = cur;
        c.prev = cur;
        if (LlmcParseRecovering(parser)) {
            /* Blocks holding tokens skipped in recovery are marked broken. */
            note_error_pos(&c, cur.at.start);
        }
        if (c.overflow) {
            diag_error(d, cur.at, "nesting too deep");
            c.syntax_errors++;
            break;
        }
        cur = next;
        /* the lexer's list mode must be right before it reads the token after CUR, at the next turn's top */
        if (cur.kind == TK_RBRACKET && list_depth > 0) list_depth--;
        /* a brace cannot stand inside a list: leaving list mode at one keeps a missing ']' from changing how
         * the rest of the file is lexed */
        if (cur.kind == TK_LBRACE || cur.kind == TK_RBRACE) list_depth = 0;
        lx.in_list = list_depth > 0;
    }
    /* the AST lives in the arena; only the parser and the error positions were malloc'd */
    LlmcParseFree(parser, free);
    free(c.error_pos);

    sf->items = (Item **)c.items.items;
    sf->nitems = c.items.n;
    sf->comments = (Comment **)comments.items;
    sf->ncomments = comments.n;
    sf->syntax_errors = c.syntax_errors + lx.errors;
    return sf;
}
