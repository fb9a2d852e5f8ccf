/* parser.y — the .llm grammar (Lemon). Driven token by token from
 * compiler/front/parse.c, which turns a name followed by '=' or '{' into KEY so that
 * entries need no separator: `context = 2560  epochs = 5`. */

%name LlmcParse
%token_prefix TK_
%token_type { Token }
%extra_argument { ParseCtx *ctx }
%stack_size 256

%include {
#include <assert.h>
#include <string.h>
#include "parse_ctx.h"
struct yyParser;
static void report_syntax_error(struct yyParser *p, int major, const Token *tok, ParseCtx *ctx);
}

%syntax_error { report_syntax_error(yypParser, yymajor, &yyminor, ctx); }
%stack_overflow { ctx->overflow = true; }

/* Token order fixes the TK_ numbers; COMMENT never reaches the parser. */
%token IDENT KEY EQ LBRACE RBRACE LBRACKET RBRACKET COMMA INT FLOAT STRING HOSTLIST PERCENT COMMENT.

%type entries { PtrVec * }
%type entry { Entry * }
%type value { Value * }
%type term { Term * }
%type elems { PtrVec * }

file ::= items.
items ::= items item.
items ::= .

item ::= IDENT(K) KEY(N) LBRACE entries(E) RBRACE(R).  { ctx_block(ctx, &K, &N, E, &R); }
item ::= KEY(N) LBRACE entries(E) RBRACE(R).           { ctx_block(ctx, &N, NULL, E, &R); }
item ::= IDENT(K) STRING(S).                           { ctx_use(ctx, &K, &S); }
item ::= error.

entries(A) ::= entries(B) entry(E).  { A = B; if (E) ptrvec_push(ctx->arena, A, E); }
entries(A) ::= .                     { A = arena_alloc(ctx->arena, sizeof(PtrVec)); }

entry(A) ::= KEY(K) EQ value(V).                       { A = ctx_entry(ctx, &K, V, NULL, NULL); }
entry(A) ::= KEY(K) LBRACE entries(E) RBRACE(R).       { A = ctx_entry(ctx, &K, NULL, E, &R); }
entry(A) ::= KEY(K) EQ LBRACE entries(E) RBRACE(R).    { A = ctx_entry(ctx, &K, NULL, E, &R); }
entry(A) ::= error.                                    { A = NULL; }

value(A) ::= term(T).                { A = ctx_value(ctx, NULL, T); }
value(A) ::= value(B) term(T).       { A = ctx_value(ctx, B, T); }

term(A) ::= INT(T).                  { A = ctx_term(ctx, TERM_INT, &T); }
term(A) ::= FLOAT(T).                { A = ctx_term(ctx, TERM_FLOAT, &T); }
term(A) ::= STRING(T).               { A = ctx_term(ctx, TERM_STRING, &T); }
term(A) ::= IDENT(T).                { A = ctx_term(ctx, TERM_IDENT, &T); }
term(A) ::= HOSTLIST(T).             { A = ctx_term(ctx, TERM_HOSTLIST, &T); }
term(A) ::= PERCENT(T).              { A = ctx_term(ctx, TERM_PERCENT, &T); }
term(A) ::= LBRACKET(L) RBRACKET(R).                   { A = ctx_list(ctx, &L, NULL, &R); }
term(A) ::= LBRACKET(L) elems(E) RBRACKET(R).          { A = ctx_list(ctx, &L, E, &R); }
term(A) ::= LBRACKET(L) elems(E) COMMA RBRACKET(R).    { A = ctx_list(ctx, &L, E, &R); }

elems(A) ::= value(V).               { A = arena_alloc(ctx->arena, sizeof(PtrVec)); ptrvec_push(ctx->arena, A, V); }
elems(A) ::= elems(B) COMMA value(V). { A = B; ptrvec_push(ctx->arena, A, V); }

%code {
/* Would the parser, in its present state, accept token `major`? Simulates the
 * reductions on a copy of the state stack (Lemon's tables use default
 * reductions, so the top state alone does not say). */
static bool parser_accepts(yyParser *p, int major)
{
    YYACTIONTYPE st[300];
    int top = (int)(p->yytos - p->yystack);
    if (top >= 290) return false;
    for (int i = 0; i <= top; i++) st[i] = p->yystack[i].stateno;
    for (int guard = 0; guard < 1000; guard++) {
        YYACTIONTYPE act = yy_find_shift_action((YYCODETYPE)major, st[top]);
        if (act <= YY_MAX_SHIFTREDUCE || act == YY_ACCEPT_ACTION) return true;
        if (act < YY_MIN_REDUCE) return false;
        int rule = act - YY_MIN_REDUCE;
        top += yyRuleInfoNRhs[rule];
        if (top < 0) return false;
        YYACTIONTYPE go = yy_find_reduce_action(st[top], (YYCODETYPE)yyRuleInfoLhs[rule]);
        if (++top >= 290) return false;
        st[top] = go;
    }
    return false;
}

/* True while Lemon recovers from a syntax error (further errors are not
 * reported until three tokens have been shifted). */
int LlmcParseRecovering(void *p)
{
    return ((yyParser *)p)->yyerrcnt >= 0;
}

static void report_syntax_error(struct yyParser *p, int major, const Token *tok, ParseCtx *ctx)
{
    bool expected[YYNTOKEN];
    for (int t = 0; t < YYNTOKEN; t++)
        expected[t] = t != YYERRORSYMBOL && t != TK_COMMENT && parser_accepts(p, t);
    ctx_syntax_error(ctx, major, tok, expected, YYNTOKEN);
}
}
