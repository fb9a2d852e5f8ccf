/* chat_template.h — LLaMA-Factory's chat templates "qwen" and "llama3", and its
 * way of turning a conversation into token ids and labels.
 *
 * As in LLaMA-Factory (src/llamafactory/data/template.py, processor/supervised.py):
 * message i is rendered by its role's format string, the first one preceded by
 * the template prefix (llama3: the bos token) and the system turn (qwen: its
 * default system prompt when the record has none); each string is tokenized
 * on its own; messages pair up as (prompt, response); every response is
 * trained on (mask 1), every prompt is not; and a conversation longer than the
 * cutoff is cut pair by pair by infer_seqlen. LLaMA-Factory's train_on_prompt
 * trains the prompts too; its mask_history trains only the last response and
 * gives the cutoff to the last pairs first (ChatMasking). */
#ifndef LLMC_CHAT_TEMPLATE_H
#define LLMC_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>
#include "tokenizer.h"

typedef struct {
    const char *name;
    const char *user, *assistant, *system, *observation;  /* "{{content}}" is replaced */
    const char *default_system;                           /* NULL: none */
    int bos_prefix;                                       /* bos token before the first turn */
    const char *stop_word;                                /* replaces the tokenizer's eos */
    const char *pretrain_eos;                             /* pre-training text ends with this token
                                                             instead (NULL: the stop word) */
} ChatTemplate;

/* The template of that name among those llmc-train renders (the table in
 * chat_template.c, the one place their names are written on this side; the
 * checker marks the same ones, tests/vocab checks both agree); NULL for any
 * other name. */
const ChatTemplate *chat_template_find(const char *name);
/* Their names for a message, "qwen or llama3" (sep " or ") or "qwen, llama3". */
const char *chat_template_names(const char *sep);

typedef enum { ROLE_USER, ROLE_ASSISTANT, ROLE_OBSERVATION } ChatRole;

typedef struct {
    ChatRole role;
    const char *content;
    size_t len;
} ChatMessage;

/* A document rendered to pieces of text (or single token ids), each belonging
 * to prompt (target 0) or response (target 1) of a pair. */
typedef struct {
    uint32_t off, len;    /* text in doc->text */
    int64_t token;        /* >= 0: this one id instead of text */
    uint32_t pair;
    uint8_t target;
} ChatPiece;

typedef struct {
    ChatPiece *pieces;
    size_t n, cap;
    UniBuf text;
    uint32_t n_pairs;
    int pretrain;         /* a plain-text document: not cut by infer_seqlen */
} ChatDoc;

void chat_doc_reset(ChatDoc *doc);
void chat_doc_free(ChatDoc *doc);

/* Render a conversation: msgs alternate user (or observation) / assistant,
 * n even and >= 2. system may be NULL or empty (then the default system).
 * bos_id: the tokenizer's bos id, or -1. 0 ok, -1 out of memory. */
int chat_render(const ChatTemplate *tpl, const char *system, size_t system_len,
                const ChatMessage *msgs, size_t n, int64_t bos_id, ChatDoc *doc);

/* Render a pre-training document: [bos] text eos (bos_id -1: none). */
int chat_render_text(const char *text, size_t len, int64_t bos_id, int64_t eos_id, ChatDoc *doc);

/* LLaMA-Factory's infer_seqlen: how much of a prompt and a response fit in cutoff. */
void chat_infer_seqlen(size_t source_len, size_t target_len, size_t cutoff,
                       size_t *new_source, size_t *new_target);

/* Tokenize doc and cut it to cutoff tokens: appends to ids and to mask
 * (one byte per id, 1 = trained). 0 ok, -1 out of memory. */
int chat_tokenize(const ChatDoc *doc, TokEncoder *enc, size_t cutoff, TokIds *ids, UniBuf *mask);

/* LLaMA-Factory's loss-masking switches of SFT (DataArguments; it refuses
 * both together). A pre-training document ignores them. */
typedef struct {
    int train_on_prompt;   /* prompt tokens are trained too (mask 1) */
    int mask_history;      /* only the last response is trained; the cutoff keeps
                              the last pairs, walked last to first */
} ChatMasking;

/* chat_tokenize with the masking m (chat_tokenize: {0, 0}). *cut (when not
 * NULL) is set to 1 when the cutoff left out any token of the document (a
 * pair cut by infer_seqlen or dropped whole), else 0. */
int chat_tokenize_masked(const ChatDoc *doc, TokEncoder *enc, size_t cutoff, ChatMasking m, TokIds *ids,
                         UniBuf *mask, int *cut);

#endif
