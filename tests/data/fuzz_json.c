/* fuzz_json.c — libFuzzer target: any bytes as a dataset file (array or JSON
 * Lines), each record checked as sharegpt, alpaca and text and, when valid,
 * rendered with the qwen template and tokenized with the tiny tokenizer under
 * a cutoff taken from the input. No crash, no hang, no leak; the result never
 * exceeds the cutoff and has one mask byte per id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json_stream.h"
#include "records.h"

static DatasetSpec specs[3] = {
    {.format = FORMAT_SHAREGPT, .messages = "messages", .system = "system", .tools = "tools", .role = "role",
     .content = "content", .user = "user", .assistant = "assistant", .observation = "observation",
     .function = "function_call", .system_tag = "system"},
    {.format = FORMAT_ALPACA, .prompt = "instruction", .query = "input", .response = "output", .history = "history",
     .system = "system"},
    {.format = FORMAT_TEXT, .text = "text"},
};

static Tokenizer *tok;
static TokEncoder *enc;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    char err[512];
    tok = tok_load("examples/tiny/tokenizer", err, sizeof err);
    if (!tok) { fprintf(stderr, "fuzz_json: run from the repository root: %s\n", err); abort(); }
    enc = tok_encoder_new(tok);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cutoff = size ? 1 + data[size - 1] % 64 : 8;
    JsonStream *s = js_open_memory((const char *)data, size, "fuzz");
    if (!s) return 0;
    /* inputs ending in an odd byte also run the too-large skip with a small limit */
    if (size && data[size - 1] & 1) js_set_max_record(s, 1024);
    RecordView view = {0};
    ChatDoc doc = {0};
    const ChatTemplate *tpl = chat_template_find("qwen");
    JsonValue *rec;
    int rc;
    while ((rc = js_next(s, &rec)) != JS_END && rc != JS_ERROR) {
        if (rc == JS_TOO_LARGE && !strstr(js_error(s), "too large")) abort();   /* it says what */
        if (rc != JS_RECORD) continue;
        for (int k = 0; k < 3; k++) {
            const JsonValue *where;
            char msg[512];
            if (record_convert(&specs[k], rec, &view, &where, msg, sizeof msg) != REC_OK) {
                if (!where || !msg[0]) abort();   /* every bad record says where and what */
                continue;
            }
            if (k == 2) chat_render_text(view.text, view.text_len, -1, 0, &doc);
            else chat_render(tpl, view.system, view.system_len, view.msgs, view.n, -1, &doc);
            TokIds ids = {0};
            UniBuf mask = {0};
            if (chat_tokenize(&doc, enc, cutoff, &ids, &mask) || ids.len > cutoff || mask.len != ids.len) abort();
            tokids_free(&ids);
            unibuf_free(&mask);
        }
    }
    chat_doc_free(&doc);
    record_view_free(&view);
    js_close(s);
    return 0;
}
