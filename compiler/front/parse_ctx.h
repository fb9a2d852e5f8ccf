/* parse_ctx.h — what the Lemon actions (grammar/parser.y) call to build the AST;
 * implemented in compiler/front/parse.c. */
#ifndef LLMC_PARSE_CTX_H
#define LLMC_PARSE_CTX_H

#include <stdbool.h>
#include "ast.h"

typedef struct {
    Arena *arena;
    Diags *diags;
    SourceFile *sf;
    PtrVec items;
    bool overflow;
    int syntax_errors;
    /* Where errors were reported since the last top-level block ended (a block
     * holding one is marked broken). Pruned at each block and capped, so that
     * millions of errors cost neither memory nor a scan per block. */
    SrcPos *error_pos;
    int nerror_pos, error_pos_cap;
    Token prev;          /* the token before the one being parsed */
    Token prev_key;      /* the last KEY token */
} ParseCtx;

void ctx_block(ParseCtx *, const Token *kind, const Token *name, PtrVec *entries, const Token *close);
void ctx_use(ParseCtx *, const Token *kw, const Token *path);
Entry *ctx_entry(ParseCtx *, const Token *key, Value *v, PtrVec *sub, const Token *close);
Value *ctx_value(ParseCtx *, Value *v, Term *t);
Term *ctx_term(ParseCtx *, TermKind, const Token *);
Term *ctx_list(ParseCtx *, const Token *open, PtrVec *elems, const Token *close);
void ctx_syntax_error(ParseCtx *, int major, const Token *tok, const bool *expected, int ntokens);

#endif
