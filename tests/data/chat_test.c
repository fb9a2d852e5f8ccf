/* chat_test.c — chat templates and LLaMA-Factory truncation against
 * fixtures/chat.json (made by make_chat_reference.mjs), plus infer_seqlen cases.
 *   chat_test chat.json QWEN3_DIR LLAMA3_DIR TINY_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "chat_template.h"

static int passed, failed;
#define CHECK(cond, ...) do { if (cond) passed++; else { failed++; \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void seqlen(size_t s, size_t t, size_t cut, size_t ws, size_t wt)
{
    size_t ns, nt;
    chat_infer_seqlen(s, t, cut, &ns, &nt);
    CHECK(ns == ws && nt == wt, "infer_seqlen(%zu, %zu, %zu) = (%zu, %zu), want (%zu, %zu)", s, t, cut, ns, nt, ws, wt);
}

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: chat_test chat.json QWEN3 LLAMA3 TINY\n"); return 2; }
    /* the three branches of infer_seqlen, computed by hand from processor_utils.py */
    seqlen(10, 20, 100, 10, 20);     /* target*2 < cutoff: nothing cut */
    seqlen(300, 20, 100, 80, 20);    /* source cut */
    seqlen(20, 300, 100, 20, 80);    /* target cut to cutoff - source */
    seqlen(300, 100, 100, 75, 25);   /* both: int(100 * 100/400) = 25 */
    seqlen(5, 5, 0, 0, 0);

    Tokenizer *toks[3];
    char err[512];
    for (int i = 0; i < 3; i++) {
        toks[i] = tok_load(argv[2 + i], err, sizeof err);
        if (!toks[i]) { fprintf(stderr, "%s\n", err); return 2; }
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (fread(text, 1, (size_t)n, f) != (size_t)n) return 2;
    text[n] = '\0';
    fclose(f);
    cJSON *cases = cJSON_Parse(text);
    free(text);
    const cJSON *c;
    ChatDoc doc = {0};
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *tn = cJSON_GetObjectItem(c, "tokenizer")->valuestring;
        int ti = !strcmp(tn, "qwen3") ? 0 : !strcmp(tn, "llama3") ? 1 : 2;
        const ChatTemplate *tpl = chat_template_find(cJSON_GetObjectItem(c, "template")->valuestring);
        const char *system = cJSON_GetObjectItem(c, "system")->valuestring;
        size_t cutoff = (size_t)cJSON_GetObjectItem(c, "cutoff")->valuedouble;
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages"), *m;
        ChatMessage cm[16];
        size_t k = 0;
        cJSON_ArrayForEach(m, msgs) {
            const char *role = cJSON_GetObjectItem(m, "role")->valuestring;
            const char *content = cJSON_GetObjectItem(m, "content")->valuestring;
            cm[k++] = (ChatMessage){!strcmp(role, "user") ? ROLE_USER : !strcmp(role, "assistant") ? ROLE_ASSISTANT
                                                                                                   : ROLE_OBSERVATION,
                                    content, strlen(content)};
        }
        TokEncoder *enc = tok_encoder_new(toks[ti]);
        TokIds ids = {0};
        UniBuf mask = {0};
        int rc = chat_render(tpl, system, strlen(system), cm, k, tok_bos_id(toks[ti]), &doc) ||
                 chat_tokenize(&doc, enc, cutoff, &ids, &mask);
        const cJSON *wi = cJSON_GetObjectItem(c, "ids"), *wm = cJSON_GetObjectItem(c, "mask");
        int ok = !rc && (size_t)cJSON_GetArraySize(wi) == ids.len && mask.len == ids.len;
        size_t at = 0;
        for (const cJSON *a = wi->child, *b = wm->child; ok && a; a = a->next, b = b->next, at++)
            if ((double)ids.ids[at] != a->valuedouble || (double)mask.p[at] != b->valuedouble) ok = 0;
        CHECK(ok, "%s: got %zu ids, want %d; first difference at %zu", name, ids.len, cJSON_GetArraySize(wi), at);
        tokids_free(&ids);
        unibuf_free(&mask);
        tok_encoder_free(enc);
    }
    chat_doc_free(&doc);
    /* pre-training text: [bos] text eos, everything trained, cut at the cutoff */
    TokEncoder *enc = tok_encoder_new(toks[2]);
    TokIds ids = {0};
    UniBuf mask = {0};
    chat_render_text("What is 1 + 2?", 14, -1, 511, &doc);
    chat_tokenize(&doc, enc, 1000, &ids, &mask);
    CHECK(ids.len == 9 && ids.ids[8] == 511 && mask.len == 9 && mask.p[0] == 1, "pretrain doc: %zu ids", ids.len);
    ids.len = mask.len = 0;
    chat_tokenize(&doc, enc, 4, &ids, &mask);
    CHECK(ids.len == 4, "pretrain doc cut: %zu", ids.len);
    CHECK(chat_template_find("chatml") == NULL && chat_template_find(NULL) == NULL, "unknown template");
    tokids_free(&ids);
    unibuf_free(&mask);
    tok_encoder_free(enc);
    chat_doc_free(&doc);
    for (int i = 0; i < 3; i++) tok_free(toks[i]);
    cJSON_Delete(cases);
    printf("chat_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
