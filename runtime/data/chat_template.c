/* chat_template.c — rendering and tokenizing conversations as LLaMA-Factory does. */
#include "chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Format strings copied from LLaMA-Factory's template.py (register_template). */
static const ChatTemplate TEMPLATES[] = {
    {
        .name = "qwen",
        .user = "<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n",
        .assistant = "{{content}}<|im_end|>\n",
        .system = "<|im_start|>system\n{{content}}<|im_end|>\n",
        .observation = "<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n"
                       "<|im_start|>assistant\n",
        /* used when a record has no system turn (template.py: `system or self.default_system`) */
        .default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
        .bos_prefix = 0,
        .stop_word = "<|im_end|>",
    },
    {
        .name = "llama3",
        .user = "<|start_header_id|>user<|end_header_id|>\n\n{{content}}<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n",
        .assistant = "{{content}}<|eot_id|>",
        .system = "<|start_header_id|>system<|end_header_id|>\n\n{{content}}<|eot_id|>",
        .observation = "<|start_header_id|>ipython<|end_header_id|>\n\n{{content}}<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n",
        .default_system = NULL,
        .bos_prefix = 1,   /* llama3's format_prefix is the bos token: it opens the first turn */
        .stop_word = "<|eot_id|>",
        .pretrain_eos = "<|end_of_text|>",   /* LLaMA-Factory's pt data ends documents with it */
    },
};

#define N_TEMPLATES (sizeof TEMPLATES / sizeof TEMPLATES[0])

const ChatTemplate *chat_template_find(const char *name)
{
    for (size_t i = 0; name && i < N_TEMPLATES; i++)
        if (!strcmp(TEMPLATES[i].name, name)) return &TEMPLATES[i];
    return NULL;
}

const char *chat_template_names(const char *sep)
{
    static char buf[256];   /* messages only: the names are short and few */
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_TEMPLATES; i++) {
        int n = snprintf(buf + len, sizeof buf - len, "%s%s", i ? sep : "", TEMPLATES[i].name);
        if (n < 0 || (size_t)n >= sizeof buf - len) break;
        len += (size_t)n;
    }
    return buf;
}

void chat_doc_reset(ChatDoc *doc)
{
    doc->n = 0;
    doc->text.len = 0;
    doc->n_pairs = 0;
    doc->pretrain = 0;
}

void chat_doc_free(ChatDoc *doc)
{
    free(doc->pieces);
    unibuf_free(&doc->text);
    memset(doc, 0, sizeof *doc);
}

/* A piece is one unit of encoding: LLaMA-Factory tokenizes each element of a
 * template slot on its own (_convert_elements_to_ids), so no token spans two
 * pieces. pair: the (prompt, response) pair it belongs to; target: 0 in the
 * prompt, 1 in the response; token >= 0 for a special token taken as an id. */
static ChatPiece *new_piece(ChatDoc *doc, uint32_t pair, int target)
{
    if (doc->n == doc->cap) {
        size_t cap = doc->cap ? doc->cap * 2 : 16;
        ChatPiece *p = realloc(doc->pieces, cap * sizeof *p);
        if (!p) return NULL;
        doc->pieces = p;
        doc->cap = cap;
    }
    ChatPiece *p = &doc->pieces[doc->n++];
    memset(p, 0, sizeof *p);
    p->pair = pair;
    p->target = (uint8_t)target;
    p->token = -1;
    p->off = (uint32_t)doc->text.len;
    return p;
}

static int add_token(ChatDoc *doc, uint32_t pair, int target, int64_t id)
{
    ChatPiece *p = new_piece(doc, pair, target);
    if (!p) return -1;
    p->token = id;
    return 0;
}

/* One string element: fmt with {{content}} replaced (an empty result is skipped, as LLaMA-Factory does). */
static int add_format(ChatDoc *doc, uint32_t pair, int target, const char *fmt, const char *content, size_t len)
{
    const char *hole = strstr(fmt, "{{content}}");
    size_t before = hole ? (size_t)(hole - fmt) : strlen(fmt);
    size_t start = doc->text.len;
    if (unibuf_append(&doc->text, fmt, before)) return -1;
    if (hole && (unibuf_append(&doc->text, content, len) || unibuf_append(&doc->text, hole + 11, strlen(hole + 11))))
        return -1;
    size_t n = doc->text.len - start;
    if (n == 0) return 0;
    if (n > UINT32_MAX || start > UINT32_MAX) return -1;   /* pieces store 32-bit offsets */
    ChatPiece *p = new_piece(doc, pair, target);
    if (!p) return -1;
    p->off = (uint32_t)start;
    p->len = (uint32_t)n;
    return 0;
}

int chat_render(const ChatTemplate *tpl, const char *system, size_t system_len,
                const ChatMessage *msgs, size_t n, int64_t bos_id, ChatDoc *doc)
{
    chat_doc_reset(doc);
    if (!system || system_len == 0) {   /* `system or default_system` */
        system = tpl->default_system;
        system_len = system ? strlen(system) : 0;
    }
    /* messages alternate user/assistant (records.c checked that): message i
     * is the prompt (even) or the response (odd) of pair i/2, as
     * encode_multiturn pairs them; bos and the system turn go at the front of
     * the first prompt, as template.py's _encode puts them in turn 0 */
    for (size_t i = 0; i < n; i++) {
        uint32_t pair = (uint32_t)(i / 2);
        int target = (int)(i % 2);
        if (i == 0) {
            if (tpl->bos_prefix && bos_id >= 0 && add_token(doc, pair, target, bos_id)) return -1;
            if (system_len && add_format(doc, pair, target, tpl->system, system, system_len)) return -1;
        }
        const char *fmt = msgs[i].role == ROLE_USER ? tpl->user
                        : msgs[i].role == ROLE_ASSISTANT ? tpl->assistant : tpl->observation;
        if (add_format(doc, pair, target, fmt, msgs[i].content, msgs[i].len)) return -1;
    }
    doc->n_pairs = (uint32_t)(n / 2);
    return 0;
}

/* Pre-training text: bos (when the tokenizer adds one), the text, eos, as
 * one response: every token is trained and a document is cut only at the
 * cutoff (chat_tokenize). */
int chat_render_text(const char *text, size_t len, int64_t bos_id, int64_t eos_id, ChatDoc *doc)
{
    chat_doc_reset(doc);
    doc->pretrain = 1;
    doc->n_pairs = 1;
    if (bos_id >= 0 && add_token(doc, 0, 1, bos_id)) return -1;
    if (len && add_format(doc, 0, 1, "{{content}}", text, len)) return -1;
    if (eos_id >= 0 && add_token(doc, 0, 1, eos_id)) return -1;
    return 0;
}

/* LLaMA-Factory's infer_seqlen (data/processor/processor_utils.py), in
 * size_t: a short response keeps the whole budget, a short prompt leaves the
 * rest to the response, otherwise the budget is split in their proportion
 * (truncated toward zero, as Python's int()). */
void chat_infer_seqlen(size_t source_len, size_t target_len, size_t cutoff,
                       size_t *new_source, size_t *new_target)
{
    size_t max_target;
    if (target_len * 2 < cutoff) max_target = cutoff;
    else if (source_len * 2 < cutoff) max_target = cutoff - source_len;
    else max_target = (size_t)((double)cutoff * ((double)target_len / (double)(source_len + target_len)));
    *new_target = target_len < max_target ? target_len : max_target;
    size_t max_source = cutoff > *new_target ? cutoff - *new_target : 0;
    *new_source = source_len < max_source ? source_len : max_source;
}

static int push_mask(UniBuf *mask, uint8_t v, size_t n)
{
    if (n == 0) return 0;
    if (unibuf_reserve(mask, n)) return -1;
    memset(mask->p + mask->len, v, n);
    mask->len += n;
    return 0;
}

/* The ids of one pair's pieces, from *k on, into side[0] (prompt) and side[1]
 * (response), which it empties first. 0 ok, -1 out of memory. */
static int tokenize_pair(const ChatDoc *doc, TokEncoder *enc, uint32_t pair, size_t *k, TokIds side[2])
{
    side[0].len = side[1].len = 0;
    for (; *k < doc->n && doc->pieces[*k].pair == pair; (*k)++) {
        const ChatPiece *p = &doc->pieces[*k];
        TokIds *t = &side[p->target];
        int rc = p->token >= 0 ? tokids_push(t, (uint32_t)p->token)
                               : tok_encode(enc, (const char *)doc->text.p + p->off, p->len, t);
        if (rc) return -1;
    }
    return 0;
}

/* The first ns prompt ids and nt response ids of a pair, with their masks. */
static int push_pair(const uint32_t *src, size_t ns, const uint32_t *tgt, size_t nt, uint8_t src_mask,
                     uint8_t tgt_mask, TokIds *ids, UniBuf *mask)
{
    for (size_t i = 0; i < ns; i++) if (tokids_push(ids, src[i])) return -1;
    for (size_t i = 0; i < nt; i++) if (tokids_push(ids, tgt[i])) return -1;
    return push_mask(mask, src_mask, ns) || push_mask(mask, tgt_mask, nt) ? -1 : 0;
}

/* mask_history, as _encode_data_example with it: every pair tokenized, then
 * walked last to first against the cutoff (the last turns get the budget
 * first), each walked pair put before the ones walked already, and only the
 * last pair's response trained. Walked pairs are the last `walked` ones, so
 * they are written in their own order. */
static int tokenize_history(const ChatDoc *doc, TokEncoder *enc, size_t cutoff, ChatMasking m, TokIds *ids,
                            UniBuf *mask, int *cut)
{
    size_t n = doc->n_pairs, k = 0, total = 0, walked = 0;
    TokIds side[2] = {{0}, {0}}, all = {0};
    size_t *len = calloc(n ? 4 * n : 1, sizeof *len);   /* prompt, response; their kept parts */
    int rc = len ? 0 : -1;
    for (uint32_t pair = 0; pair < n && !rc; pair++) {
        rc = tokenize_pair(doc, enc, pair, &k, side);
        for (int t = 0; t < 2 && !rc; t++) {
            len[4 * pair + (size_t)t] = side[t].len;
            for (size_t i = 0; i < side[t].len && !rc; i++) rc = tokids_push(&all, side[t].ids[i]);
        }
    }
    for (size_t back = 0; back < n && !rc && total < cutoff; back++, walked++) {
        size_t *l = &len[4 * (n - 1 - back)];
        chat_infer_seqlen(l[0], l[1], cutoff - total, &l[2], &l[3]);
        total += l[2] + l[3];
    }
    size_t off = 0;
    for (size_t pair = 0; pair < n && !rc; pair++) {
        const size_t *l = &len[4 * pair];
        if (pair < n - walked || l[2] < l[0] || l[3] < l[1]) *cut = 1;
        if (pair >= n - walked)
            rc = push_pair(all.ids + off, l[2], all.ids + off + l[0], l[3], m.train_on_prompt ? 1 : 0,
                           pair == n - 1, ids, mask);
        off += l[0] + l[1];
    }
    free(len);
    tokids_free(&all);
    tokids_free(&side[0]);
    tokids_free(&side[1]);
    return rc ? -1 : 0;
}

/* As SupervisedDatasetProcessor._encode_data_example: pair by pair, each cut
 * by infer_seqlen against what is left of the cutoff, until none is left;
 * prompt tokens get mask 0 (LLaMA-Factory's IGNORE_INDEX labels; 1 with
 * train_on_prompt, whose labels are the prompt ids), response tokens 1.
 * Neither llmc template has an efficient eos, so none is added. */
int chat_tokenize_masked(const ChatDoc *doc, TokEncoder *enc, size_t cutoff, ChatMasking m, TokIds *ids,
                         UniBuf *mask, int *cut)
{
    int cut_here = 0;
    if (!cut) cut = &cut_here;
    *cut = 0;
    if (m.mask_history && !doc->pretrain) return tokenize_history(doc, enc, cutoff, m, ids, mask, cut);
    TokIds side[2] = {{0}, {0}};
    size_t total = 0, k = 0;
    int rc = 0;
    uint8_t prompt_mask = m.train_on_prompt && !doc->pretrain ? 1 : 0;
    for (uint32_t pair = 0; pair < doc->n_pairs && !rc; pair++) {
        if (!doc->pretrain && total >= cutoff) { *cut = 1; break; }   /* pairs left out whole */
        if ((rc = tokenize_pair(doc, enc, pair, &k, side))) break;
        size_t ns, nt;
        if (doc->pretrain) {   /* a plain document is simply cut at the cutoff */
            ns = 0;
            nt = side[1].len < cutoff ? side[1].len : cutoff;
        } else {
            chat_infer_seqlen(side[0].len, side[1].len, cutoff - total, &ns, &nt);
        }
        if (ns < side[0].len || nt < side[1].len) *cut = 1;
        rc = push_pair(side[0].ids, ns, side[1].ids, nt, prompt_mask, 1, ids, mask);
        total += ns + nt;
    }
    tokids_free(&side[0]);
    tokids_free(&side[1]);
    return rc ? -1 : 0;
}

int chat_tokenize(const ChatDoc *doc, TokEncoder *enc, size_t cutoff, TokIds *ids, UniBuf *mask)
{
    return chat_tokenize_masked(doc, enc, cutoff, (ChatMasking){0, 0}, ids, mask, NULL);
}
