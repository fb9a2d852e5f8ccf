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

/* A 3-turn conversation of single-token pieces (no tokenizer needed):
 * prompts of 3, 4, 2 ids and responses of 2, 3, 5. */
static void three_turns(ChatDoc *doc)
{
    static const uint32_t len[3][2] = {{3, 2}, {4, 3}, {2, 5}};
    static const uint32_t first[3][2] = {{10, 20}, {30, 40}, {50, 60}};
    chat_doc_reset(doc);
    for (uint32_t pair = 0; pair < 3; pair++)
        for (uint8_t t = 0; t < 2; t++)
            for (uint32_t i = 0; i < len[pair][t]; i++) {
                if (doc->n == doc->cap) {
                    doc->cap = doc->cap ? 2 * doc->cap : 32;
                    doc->pieces = realloc(doc->pieces, doc->cap * sizeof *doc->pieces);
                }
                doc->pieces[doc->n++] = (ChatPiece){.token = first[pair][t] + i, .pair = pair, .target = t};
            }
    doc->n_pairs = 3;
}

/* ids and mask (a string of 0/1) of the 3-turn conversation cut at cutoff. */
static void masked(const char *what, size_t cutoff, ChatMasking m, const uint32_t *want_ids, size_t n_want,
                   const char *want_mask)
{
    ChatDoc doc = {0};
    three_turns(&doc);
    TokIds ids = {0};
    UniBuf mask = {0};
    int cut = -1;
    int rc = chat_tokenize_masked(&doc, NULL, cutoff, m, &ids, &mask, &cut);
    int ok = !rc && ids.len == n_want && mask.len == n_want && strlen(want_mask) == n_want;
    /* the three pairs are 19 tokens: anything less was cut, and says so (prepare counts it) */
    CHECK(cut == (n_want < 19), "%s, cutoff %zu: cut = %d, want %d", what, cutoff, cut, n_want < 19);
    size_t at = 0;
    for (; ok && at < n_want; at++)
        if (ids.ids[at] != want_ids[at] || mask.p[at] != (uint8_t)(want_mask[at] - '0')) ok = 0;
    CHECK(ok, "%s, cutoff %zu: got %zu ids, want %zu; first difference at %zu", what, cutoff, ids.len, n_want, at);
    tokids_free(&ids);
    unibuf_free(&mask);
    chat_doc_free(&doc);
}

/* train_on_prompt and mask_history against supervised.py's _encode_data_example
 * for the pairs (3, 2), (4, 3), (2, 5), worked by hand with infer_seqlen:
 * - cutoff 100: every pair whole. Default: prompts 0, responses 1;
 *   train_on_prompt: all 1; mask_history: only the last response 1.
 * - cutoff 10, in order: (3,2,10) -> (3,2), total 5; (4,3,5): 6 < 5 no,
 *   8 < 5 no, int(5 * 3/7) = 2 -> (3,2), total 10; pair 3 not reached.
 * - cutoff 10, mask_history (last first): (2,5,10): 10 < 10 no, 4 < 10 ->
 *   max_target 8 -> (2,5), total 7; (4,3,3): int(3 * 3/7) = 1 -> (2,1), total
 *   10; pair 1 dropped. Prepended: pair 2's (30 31 | 40), then pair 3 whole,
 *   only pair 3's response trained.
 * - cutoff 6, in order: (3,2) total 5; (4,3,1): int(1 * 3/7) = 0 -> (1,0).
 * - cutoff 6, mask_history: (2,5,6): 4 < 6 -> max_target 4 -> (2,4), total 6:
 *   the last turn trimmed, the two before dropped. */
static void masking_cases(void)
{
    const ChatMasking none = {0, 0}, prompt = {1, 0}, history = {0, 1};
    static const uint32_t whole[] = {10, 11, 12, 20, 21, 30, 31, 32, 33, 40, 41, 42, 50, 51, 60, 61, 62, 63, 64};
    masked("default", 100, none, whole, 19, "0001100001110011111");
    masked("train_on_prompt", 100, prompt, whole, 19, "1111111111111111111");
    masked("mask_history", 100, history, whole, 19, "0000000000000011111");
    static const uint32_t first10[] = {10, 11, 12, 20, 21, 30, 31, 32, 40, 41};
    masked("default", 10, none, first10, 10, "0001100011");
    masked("train_on_prompt", 10, prompt, first10, 10, "1111111111");
    static const uint32_t last10[] = {30, 31, 40, 50, 51, 60, 61, 62, 63, 64};
    masked("mask_history", 10, history, last10, 10, "0000011111");
    static const uint32_t first6[] = {10, 11, 12, 20, 21, 30};
    masked("default", 6, none, first6, 6, "000110");
    masked("train_on_prompt", 6, prompt, first6, 6, "111111");
    static const uint32_t last6[] = {50, 51, 60, 61, 62, 63};
    masked("mask_history", 6, history, last6, 6, "001111");
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
    masking_cases();

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
    /* the masking switches leave pre-training text as it is */
    ids.len = mask.len = 0;
    int cut = -1;
    chat_tokenize_masked(&doc, enc, 4, (ChatMasking){0, 1}, &ids, &mask, &cut);
    CHECK(ids.len == 4 && mask.len == 4 && mask.p[0] == 1 && mask.p[3] == 1, "pretrain doc, mask_history: %zu", ids.len);
    CHECK(cut == 1, "pretrain doc cut at 4: cut = %d", cut);
    ids.len = mask.len = 0;
    chat_tokenize_masked(&doc, enc, 1000, (ChatMasking){1, 0}, &ids, &mask, &cut);
    CHECK(ids.len == 9 && ids.ids[8] == 511 && mask.p[0] == 1, "pretrain doc, train_on_prompt: %zu", ids.len);
    CHECK(cut == 0, "pretrain doc whole: cut = %d", cut);
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
