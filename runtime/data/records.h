/* records.h — LLaMA-Factory dataset records (sharegpt, alpaca, plain text):
 * validation with positions, and conversion to messages for chat_template.
 *
 * The rules are LLaMA-Factory's (src/llamafactory/data/converter.py and the
 * supervised processor's drop rule): after an optional first system turn,
 * roles alternate user-or-observation / assistant, and the count is even.
 * Where LLaMA-Factory would silently drop or mis-train a record, llmc names it:
 * a record that is not an object, a missing or mistyped column, an unknown
 * role, roles out of order, a conversation not ending with the assistant, an
 * empty turn, an empty text. Function-call turns and tools are not supported
 * yet and are reported as such. */
#ifndef LLMC_RECORDS_H
#define LLMC_RECORDS_H

#include <stddef.h>
#include "chat_template.h"
#include "json_stream.h"
#include "plan.h"             /* DatasetSpec: one dataset of the plan */

typedef enum {
    REC_OK,
    REC_INVALID_JSON,     /* not valid JSON (JSON Lines: the line is skipped) */
    REC_NOT_OBJECT,
    REC_MISSING_COLUMN,
    REC_BAD_TYPE,
    REC_UNKNOWN_ROLE,
    REC_ROLE_ORDER,
    REC_ODD_TURNS,
    REC_NO_TURNS,
    REC_EMPTY_TURN,
    REC_EMPTY_TEXT,
    REC_UNSUPPORTED,
    REC_TOO_LARGE,        /* more memory than --max-record-bytes once read (skipped unread) */
    REC_N_REASONS
} RecReason;

/* Short stable name of a reason ("role_order"), used in summaries and index.json. */
const char *rec_reason_name(RecReason r);

/* A record seen as messages (sharegpt, alpaca) or a text (text). Pointers
 * refer to the JsonValue tree or to the view's own storage. */
typedef struct {
    ChatMessage *msgs;
    size_t n, cap;
    const char *system;
    size_t system_len;
    const char *text;
    size_t text_len;
    UniBuf joined;        /* alpaca: "prompt\nquery" */
} RecordView;

void record_view_free(RecordView *v);

/* Check rec against spec and fill view. On a bad record returns its reason,
 * sets *where to the offending value (for its line:col) and writes what is
 * wrong into msg. */
RecReason record_convert(const DatasetSpec *spec, const JsonValue *rec, RecordView *view,
                         const JsonValue **where, char *msg, size_t msglen);

#endif
