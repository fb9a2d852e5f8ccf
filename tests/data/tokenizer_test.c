/* tokenizer_test.c — token ids against reference fixtures, decode round trips,
 * and pre-token splits where the JavaScript reference cannot be trusted.
 *
 *   tokenizer_test TOKENIZER_DIR corpus.json fixture.json
 *   tokenizer_test --pretok                  (pre-tokenizer cases only) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "tokenizer.h"

static int passed, failed;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(2); }
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

/* Split s into pre-tokens and compare with want[] (NULL-terminated). */
static void check_split(PretokKind kind, const char *s, const char *const *want)
{
    size_t n = strlen(s);
    uint8_t *buf = malloc(n + PRETOK_PAD);
    memcpy(buf, s, n);
    memset(buf + n, 0xFF, PRETOK_PAD);
    int ok = 1;
    size_t i = 0, k = 0;
    while (i < n) {
        size_t len = pretok_next(kind, buf + i, n - i);
        if (!want[k] || strlen(want[k]) != len || memcmp(want[k], buf + i, len)) {
            fprintf(stderr, "FAIL pretok of \"%s\": piece %zu is \"%.*s\"\n", s, k, (int)len, buf + i);
            ok = 0;
            break;
        }
        i += len;
        k++;
    }
    if (ok && want[k]) { fprintf(stderr, "FAIL pretok of \"%s\": missing \"%s\"\n", s, want[k]); ok = 0; }
    if (ok) passed++; else failed++;
    free(buf);
}

#define SPLIT(kind, s, ...) check_split(kind, s, (const char *const[]){__VA_ARGS__, NULL})

static void pretok_cases(void)
{
    /* Oniguruma (Hugging Face) semantics where JavaScript differs */
    SPLIT(PRETOK_DIGIT1, "it'\u017f", "it", "'\u017f");                  /* long s folds to s */
    SPLIT(PRETOK_DIGIT1, "a\xc2\x85\xc2\x85" "b", "a", "\xc2\x85", "\xc2\x85" "b"); /* NEL is \s */
    SPLIT(PRETOK_DIGIT1, "a \xef\xbb\xbf" "b", "a", " \xef\xbb\xbf", "b");   /* BOM is not \s */
    /* the rules themselves */
    SPLIT(PRETOK_DIGIT1, "Hello world", "Hello", " world");
    SPLIT(PRETOK_DIGIT1, "a  b", "a", " ", " b");
    SPLIT(PRETOK_DIGIT1, "a   \n\n  b", "a", "   \n\n", " ", " b");
    SPLIT(PRETOK_DIGIT1, "x  ", "x", "  ");
    SPLIT(PRETOK_DIGIT1, "12345", "1", "2", "3", "4", "5");
    SPLIT(PRETOK_DIGITS3, "12345", "123", "45");
    SPLIT(PRETOK_DIGITS3, "a1234b", "a", "123", "4", "b");
    SPLIT(PRETOK_DIGIT1, "I'M you're", "I", "'M", " you", "'re");
    SPLIT(PRETOK_DIGIT1, " !!\n\nx", " !!\n\n", "x");
    SPLIT(PRETOK_DIGIT1, "(yes)", "(yes", ")");
    SPLIT(PRETOK_DIGIT1, "\t\tword", "\t", "\tword");
    SPLIT(PRETOK_DIGIT1, "\r\nx", "\r\n", "x");
    SPLIT(PRETOK_DIGIT1, "a\x01" "b", "a", "\x01" "b");
}

/* A tokenizer.json that is the tiny one with one edit: the load must fail with `want` in the message. */
static void load_error(const char *scratch, const char *tiny_json, const char *from, const char *to, const char *want)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", scratch);
    const char *at = strstr(tiny_json, from);
    if (!at) { failed++; fprintf(stderr, "FAIL load_error: '%s' not in the tiny tokenizer.json\n", from); return; }
    FILE *f = fopen(path, "wb");
    fwrite(tiny_json, 1, (size_t)(at - tiny_json), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    fclose(f);
    Tokenizer *t = tok_load(path, err, sizeof err);
    if (!t && strstr(err, want)) passed++;
    else { failed++; fprintf(stderr, "FAIL load_error (%s): got \"%s\"\n", want, t ? "(loaded)" : err); }
    tok_free(t);
}

static void load_errors(const char *scratch)
{
    size_t n;
    char *tiny = slurp("examples/tiny/tokenizer/tokenizer.json", &n);
    load_error(scratch, tiny, "\"type\": \"BPE\"", "\"type\": \"Unigram\"", "model.type must be \"BPE\"");
    load_error(scratch, tiny, "\"type\": \"NFC\"", "\"type\": \"NFKC\"", "normalizer 'NFKC' is not supported");
    load_error(scratch, tiny, "\\p{N}|", "\\p{N}{1,2}|", "Split regex is not one of the supported patterns");
    load_error(scratch, tiny, "\"Ā\": 0,", "", "lacks the byte token for 0x00");
    load_error(scratch, tiny, "\"merges\": [", "\"merges\": [[\"zz\", \"qq\"], ", "merges[0] 'zz qq': a part is not in the vocabulary");
    load_error(scratch, tiny, "\"single_word\": false", "\"single_word\": true", "single_word=true is not supported");
    load_error(scratch, tiny, "\"version\"", "\"version\" x", "not valid JSON");
    load_error(scratch, tiny, "\"byte_fallback\": false", "\"byte_fallback\": true", "byte_fallback=true is not supported");
    char err[512];
    Tokenizer *t = tok_load("/nonexistent/tok", err, sizeof err);
    if (!t && strstr(err, "No such file")) passed++; else { failed++; fprintf(stderr, "FAIL missing dir: %s\n", err); }
    free(tiny);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--load-errors")) {
        load_errors(argv[2]);
        printf("tokenizer_test: %d passed, %d failed\n", passed, failed);
        return failed != 0;
    }
    if (argc == 2 && !strcmp(argv[1], "--pretok")) {
        pretok_cases();
        printf("tokenizer_test: %d passed, %d failed\n", passed, failed);
        return failed != 0;
    }
    if (argc != 4) { fprintf(stderr, "usage: tokenizer_test DIR corpus.json fixture.json | --pretok\n"); return 2; }
    char err[512];
    Tokenizer *tok = tok_load(argv[1], err, sizeof err);
    if (!tok) { fprintf(stderr, "FAIL load: %s\n", err); printf("0 passed, 1 failed\n"); return 1; }
    size_t len;
    char *text = slurp(argv[2], &len);
    cJSON *corpus = cJSON_Parse(text);
    free(text);
    text = slurp(argv[3], &len);
    cJSON *fixture = cJSON_Parse(text);
    free(text);
    const cJSON *cases = cJSON_GetObjectItem(fixture, "cases");
    if (!corpus || !cases || cJSON_GetArraySize(corpus) != cJSON_GetArraySize(cases)) {
        fprintf(stderr, "corpus and fixture do not match; re-run tests/data/make_reference.mjs\n");
        return 2;
    }
    TokEncoder *enc = tok_encoder_new(tok);
    const cJSON *c, *f = cases->child;
    cJSON_ArrayForEach(c, corpus) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const cJSON *t = cJSON_GetObjectItem(c, "text"), *h = cJSON_GetObjectItem(c, "hex");
        uint8_t *in;
        size_t n;
        if (t) { n = strlen(t->valuestring); in = malloc(n + 1); memcpy(in, t->valuestring, n); }
        else { in = malloc(strlen(h->valuestring) / 2 + 1); n = unhex(h->valuestring, in); }
        TokIds ids = {0};
        tok_encode(enc, (const char *)in, n, &ids);
        const cJSON *want = cJSON_GetObjectItem(f, "ids");
        size_t wn = (size_t)cJSON_GetArraySize(want), i = 0;
        const cJSON *w = want->child;
        for (; i < ids.len && w; i++, w = w->next)
            if ((double)ids.ids[i] != w->valuedouble) break;
        if (i == ids.len && i == wn) passed++;
        else {
            failed++;
            fprintf(stderr, "FAIL %s/%s: ids differ at %zu (got %zu ids, want %zu):", argv[1], name, i, ids.len, wn);
            for (size_t k = i; k < ids.len && k < i + 6; k++) fprintf(stderr, " %u", ids.ids[k]);
            fprintf(stderr, " | want");
            for (size_t k = 0; w && k < 6; k++, w = w->next) fprintf(stderr, " %d", (int)w->valuedouble);
            fputc('\n', stderr);
        }
        /* decode gives back the text as the tokenizer saw it: invalid bytes
         * replaced, then NFC (both no-ops on text that needs neither) */
        UniBuf clean = {0}, norm = {0}, back = {0};
        utf8_sanitize(in, n, &clean);
        unicode_nfc(clean.p, clean.len, &norm);
        const UniBuf *expect = strstr(argv[1], "llama") ? &clean : &norm;
        tok_decode(tok, ids.ids, ids.len, &back);
        if (back.len == expect->len && !memcmp(back.p, expect->p, back.len)) passed++;
        else { failed++; fprintf(stderr, "FAIL %s/%s: decode round trip\n", argv[1], name); }
        unibuf_free(&clean);
        unibuf_free(&norm);
        unibuf_free(&back);
        tokids_free(&ids);
        free(in);
        f = f->next;
    }
    tok_encoder_free(enc);
    tok_free(tok);
    cJSON_Delete(corpus);
    cJSON_Delete(fixture);
    printf("tokenizer_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
