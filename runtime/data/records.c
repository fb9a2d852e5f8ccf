/* records.c — LLaMA-Factory record rules, with the position of what is wrong. */
#include "records.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names in RecReason's order: they are output (prepare's summary line,
 * index.json's skipped_by_reason, docs/shards.md), so a name never changes. */
static const char *const REASONS[REC_N_REASONS] = {
    "ok", "invalid_json", "not_object", "missing_column", "bad_type", "unknown_role",
    "role_order", "odd_turns", "no_turns", "empty_turn", "empty_text", "unsupported", "too_large",
};

const char *rec_reason_name(RecReason r)
{
    return r < REC_N_REASONS ? REASONS[r] : "?";
}

void record_view_free(RecordView *v)
{
    free(v->msgs);
    unibuf_free(&v->joined);
    memset(v, 0, sizeof *v);
}

/* Every refusal says what is wrong (msg) and where: *where is the JSON value
 * at fault, whose line and column prepare prints before the message. */
static RecReason bad(RecReason r, const JsonValue *at, const JsonValue **where, char *msg, size_t msglen,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    *where = at;
    return r;
}

static const char *type_name(JvType t)
{
    static const char *const names[] = {"null", "false", "true", "a number", "a string", "a list", "an object"};
    return names[t];
}

/* Messages point into the record's strings, not copies: a view is valid as
 * long as the record it came from (one batch slot). */
static int push_msg(RecordView *v, ChatRole role, const char *s, size_t len)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        ChatMessage *m = realloc(v->msgs, cap * sizeof *m);
        if (!m) return -1;
        v->msgs = m;
        v->cap = cap;
    }
    v->msgs[v->n++] = (ChatMessage){role, s, len};
    return 0;
}

static int tag_is(const char *tag, const char *role)
{
    return tag && !strcmp(tag, role);
}

/* An optional string column: missing or null -> absent (0); a string -> 1; else -1. */
static int opt_string(const JsonValue *rec, const char *column, const JsonValue **out)
{
    *out = column ? jv_get(rec, column) : NULL;
    if (!*out || (*out)->type == JV_NULL) { *out = NULL; return 0; }
    return (*out)->type == JV_STRING ? 1 : -1;
}

/* LLaMA-Factory's SharegptDatasetConverter (data/converter.py): a first
 * message with the system tag is the system prompt, else the system column;
 * then user (or observation) and assistant turns alternate, and their count
 * is even. Where LLaMA-Factory logs "Invalid role tag" and drops the example,
 * this says which message and why. Every message is checked for its shape
 * before any is used, so the loops below may read role and content freely. */
static RecReason sharegpt(const DatasetSpec *d, const JsonValue *rec, RecordView *v,
                          const JsonValue **where, char *msg, size_t msglen)
{
    const JsonValue *list = jv_get(rec, d->messages);
    if (!list) return bad(REC_MISSING_COLUMN, rec, where, msg, msglen, "no '%s' column", d->messages);
    if (list->type != JV_ARRAY)
        return bad(REC_BAD_TYPE, list, where, msg, msglen, "'%s' is %s, expected a list of messages",
                   d->messages, type_name(list->type));
    const JsonValue *m = list->child;
    /* each message: an object with a string role and a string content */
    for (const JsonValue *x = m; x; x = x->next) {
        if (x->type != JV_OBJECT)
            return bad(REC_BAD_TYPE, x, where, msg, msglen, "a message is %s, expected an object", type_name(x->type));
        const JsonValue *role = jv_get(x, d->role), *content = jv_get(x, d->content);
        if (!role) return bad(REC_MISSING_COLUMN, x, where, msg, msglen, "message has no '%s'", d->role);
        if (role->type != JV_STRING)
            return bad(REC_BAD_TYPE, role, where, msg, msglen, "'%s' is %s, expected a string", d->role,
                       type_name(role->type));
        if (!content) return bad(REC_MISSING_COLUMN, x, where, msg, msglen, "message has no '%s'", d->content);
        if (content->type != JV_STRING)
            return bad(REC_BAD_TYPE, content, where, msg, msglen, "'%s' is %s, expected a string", d->content,
                       type_name(content->type));
    }
    if (m && tag_is(d->system_tag, jv_get(m, d->role)->str)) {
        const JsonValue *c = jv_get(m, d->content);
        v->system = c->str;
        v->system_len = c->len;
        m = m->next;
    } else {
        const JsonValue *sys;
        int r = opt_string(rec, d->system, &sys);
        if (r < 0) return bad(REC_BAD_TYPE, sys, where, msg, msglen, "'%s' is %s, expected a string", d->system,
                              type_name(sys->type));
        if (r > 0) { v->system = sys->str; v->system_len = sys->len; }
    }
    size_t turn = 0;
    for (; m; m = m->next, turn++) {
        const JsonValue *role = jv_get(m, d->role), *content = jv_get(m, d->content);
        const char *r = role->str;
        int odd = turn % 2 == 0;   /* LLaMA-Factory's "odd" turns are the 1st, 3rd, ... */
        ChatRole cr;
        if (tag_is(d->user, r) || tag_is(d->observation, r)) cr = tag_is(d->user, r) ? ROLE_USER : ROLE_OBSERVATION;
        else if (tag_is(d->assistant, r)) cr = ROLE_ASSISTANT;
        else if (tag_is(d->function, r))
            return bad(REC_UNSUPPORTED, role, where, msg, msglen, "function-call turns ('%s') are not supported yet", r);
        else if (tag_is(d->system_tag, r))
            return bad(REC_ROLE_ORDER, role, where, msg, msglen, "a '%s' turn is only allowed first", r);
        else
            return bad(REC_UNKNOWN_ROLE, role, where, msg, msglen,
                       "unknown role '%s' (the dataset's tags: user '%s', assistant '%s'%s%s%s)", r, d->user,
                       d->assistant, d->system_tag ? ", system '" : "", d->system_tag ? d->system_tag : "",
                       d->system_tag ? "'" : "");
        if (odd != (cr != ROLE_ASSISTANT))
            return bad(REC_ROLE_ORDER, role, where, msg, msglen,
                       "message %zu has role '%s' where %s turn is expected (turns alternate user/assistant)",
                       turn + 1, r, odd ? "a user" : "an assistant");
        if (content->len == 0)
            return bad(REC_EMPTY_TURN, content, where, msg, msglen, "message %zu ('%s') is empty", turn + 1, r);
        if (push_msg(v, cr, content->str, content->len))
            return bad(REC_UNSUPPORTED, rec, where, msg, msglen, "out of memory");
    }
    /* LLaMA-Factory's "Invalid message count": an odd count ends on a prompt */
    if (turn == 0) return bad(REC_NO_TURNS, list, where, msg, msglen, "no user/assistant turns");
    if (turn % 2)
        return bad(REC_ODD_TURNS, list, where, msg, msglen,
                   "the conversation ends with a user turn (%zu message%s; nothing to train on)", turn,
                   turn == 1 ? "" : "s");
    return REC_OK;
}

/* LLaMA-Factory's AlpacaDatasetConverter: history pairs first, then one user
 * turn "prompt\nquery" (each part only when non-empty) and the response. An
 * empty instruction or response is refused (empty_turn), as an empty
 * sharegpt message is. */
static RecReason alpaca(const DatasetSpec *d, const JsonValue *rec, RecordView *v,
                        const JsonValue **where, char *msg, size_t msglen)
{
    const JsonValue *hist = d->history ? jv_get(rec, d->history) : NULL;
    if (hist && hist->type == JV_ARRAY) {   /* [[query, response], ...] */
        for (const JsonValue *h = hist->child; h; h = h->next) {
            if (h->type != JV_ARRAY || h->n_children != 2 || h->child->type != JV_STRING ||
                h->child->next->type != JV_STRING)
                return bad(REC_BAD_TYPE, h, where, msg, msglen, "'%s' entries must be [query, response] strings",
                           d->history);
            if (push_msg(v, ROLE_USER, h->child->str, h->child->len) ||
                push_msg(v, ROLE_ASSISTANT, h->child->next->str, h->child->next->len))
                return bad(REC_UNSUPPORTED, rec, where, msg, msglen, "out of memory");
        }
    } else if (hist && hist->type != JV_NULL) {
        return bad(REC_BAD_TYPE, hist, where, msg, msglen, "'%s' is %s, expected a list", d->history,
                   type_name(hist->type));
    }
    const JsonValue *prompt, *query, *response, *sys;
    int rp = opt_string(rec, d->prompt, &prompt), rq = opt_string(rec, d->query, &query);
    int rr = opt_string(rec, d->response, &response), rs = opt_string(rec, d->system, &sys);
    if (rp < 0) return bad(REC_BAD_TYPE, prompt, where, msg, msglen, "'%s' is %s, expected a string", d->prompt, type_name(prompt->type));
    if (rq < 0) return bad(REC_BAD_TYPE, query, where, msg, msglen, "'%s' is %s, expected a string", d->query, type_name(query->type));
    if (rs < 0) return bad(REC_BAD_TYPE, sys, where, msg, msglen, "'%s' is %s, expected a string", d->system, type_name(sys->type));
    if (rr < 0) return bad(REC_BAD_TYPE, response, where, msg, msglen, "'%s' is %s, expected a string", d->response, type_name(response->type));
    if (rr == 0) return bad(REC_MISSING_COLUMN, rec, where, msg, msglen, "no '%s' column", d->response ? d->response : "response");
    /* "prompt\nquery", each only when non-empty */
    if (rp && prompt->len && unibuf_append(&v->joined, prompt->str, prompt->len))
        return bad(REC_UNSUPPORTED, rec, where, msg, msglen, "out of memory");
    if (rq && query->len) {
        if ((v->joined.len && unibuf_append(&v->joined, "\n", 1)) || unibuf_append(&v->joined, query->str, query->len))
            return bad(REC_UNSUPPORTED, rec, where, msg, msglen, "out of memory");
    }
    if (v->joined.len == 0)
        return bad(REC_EMPTY_TURN, rp ? prompt : rec, where, msg, msglen, "the instruction ('%s'%s%s) is empty",
                   d->prompt ? d->prompt : "prompt", d->query ? " + " : "", d->query ? d->query : "");
    if (response->len == 0)
        return bad(REC_EMPTY_TURN, response, where, msg, msglen, "the response ('%s') is empty", d->response);
    if (push_msg(v, ROLE_USER, (const char *)v->joined.p, v->joined.len) ||
        push_msg(v, ROLE_ASSISTANT, response->str, response->len))
        return bad(REC_UNSUPPORTED, rec, where, msg, msglen, "out of memory");
    if (rs > 0) { v->system = sys->str; v->system_len = sys->len; }
    return REC_OK;
}

RecReason record_convert(const DatasetSpec *spec, const JsonValue *rec, RecordView *v,
                         const JsonValue **where, char *msg, size_t msglen)
{
    /* the view is reused record after record: its buffers stay, its contents go */
    v->n = 0;
    v->system = v->text = NULL;
    v->system_len = v->text_len = 0;
    v->joined.len = 0;
    msg[0] = '\0';
    *where = rec;
    if (rec->type != JV_OBJECT)
        return bad(REC_NOT_OBJECT, rec, where, msg, msglen, "a record is %s, expected an object", type_name(rec->type));
    if (spec->tools) {   /* an empty tools value ("", [], null) is no tools */
        const JsonValue *t = jv_get(rec, spec->tools);
        if (t && !(t->type == JV_NULL || (t->type == JV_STRING && t->len == 0) ||
                   (t->type == JV_ARRAY && t->n_children == 0)))
            return bad(REC_UNSUPPORTED, t, where, msg, msglen, "tools ('%s') are not supported yet", spec->tools);
    }
    switch (spec->format) {
    case FORMAT_SHAREGPT: return sharegpt(spec, rec, v, where, msg, msglen);
    case FORMAT_ALPACA: return alpaca(spec, rec, v, where, msg, msglen);
    case FORMAT_TEXT: {   /* pre-training: one string column, LLaMA-Factory's default name "text" */
        const char *col = spec->text ? spec->text : "text";
        const JsonValue *t = jv_get(rec, col);
        if (!t) return bad(REC_MISSING_COLUMN, rec, where, msg, msglen, "no '%s' column", col);
        if (t->type != JV_STRING)
            return bad(REC_BAD_TYPE, t, where, msg, msglen, "'%s' is %s, expected a string", col, type_name(t->type));
        if (t->len == 0) return bad(REC_EMPTY_TEXT, t, where, msg, msglen, "'%s' is empty", col);
        v->text = t->str;
        v->text_len = t->len;
        return REC_OK;
    }
    }
    return REC_UNSUPPORTED;
}
