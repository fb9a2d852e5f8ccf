/* fuzz_json.c — libFuzzer target: any bytes as a dataset file (array or JSON
 * Lines), each record checked as sharegpt, alpaca and text and, when valid,
 * rendered with the qwen template. No crash, no hang, no leak. */
#include <stdlib.h>
#include <string.h>
#include "json_stream.h"
#include "records.h"

static DatasetSpec specs[3] = {
    {.format = FMT_SHAREGPT, .messages = "messages", .system = "system", .tools = "tools", .role = "role",
     .content = "content", .user = "user", .assistant = "assistant", .observation = "observation",
     .function = "function_call", .system_tag = "system"},
    {.format = FMT_ALPACA, .prompt = "instruction", .query = "input", .response = "output", .history = "history",
     .system = "system"},
    {.format = FMT_TEXT, .text = "text"},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    JsonStream *s = js_open_memory((const char *)data, size, "fuzz");
    if (!s) return 0;
    RecordView view = {0};
    ChatDoc doc = {0};
    const ChatTemplate *tpl = chat_template_find("qwen");
    JsonValue *rec;
    int rc;
    while ((rc = js_next(s, &rec)) != JS_END && rc != JS_ERROR) {
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
        }
    }
    chat_doc_free(&doc);
    record_view_free(&view);
    js_close(s);
    return 0;
}
