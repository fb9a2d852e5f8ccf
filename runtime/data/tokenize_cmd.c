/* tokenize_cmd.c — `llmc-train tokenize`: look at what the tokenizer does.
 *
 *   llmc-train tokenize --tokenizer DIR            text on stdin -> ids, one line
 *   llmc-train tokenize --tokenizer DIR --tokens   one token per line: id, JSON-quoted token text
 *   llmc-train tokenize --tokenizer DIR --decode   ids on stdin (space/comma separated,
 *                                                  [ ] allowed) -> the text, raw bytes */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "data_commands.h"
#include "log.h"
#include "tokenizer.h"

static void usage(FILE *out)
{
    fputs("usage: llmc-train tokenize --tokenizer DIR [--decode | --tokens]\n"
          "  reads text on stdin and prints its token ids (no special tokens are added;\n"
          "  special tokens written in the text, like <|im_end|>, are recognized)\n"
          "  --tokens   one line per token: id and its text as Hugging Face shows it\n"
          "  --decode   read ids on stdin, write the text they decode to\n", out);
}

/* All of stdin: the text is encoded as one string, as tokenizer.encode sees
 * it (a split by lines would change the tokens at the breaks). */
static int read_stdin(UniBuf *b)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        if (unibuf_append(b, chunk, n)) return -1;
    return ferror(stdin) ? -1 : 0;
}

/* Print s as a JSON string (escapes control characters, quotes, backslashes). */
static void print_json_string(const uint8_t *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\u%04x", c);   /* bytes >= 0x80 pass: UTF-8 is valid JSON */
        else putchar(c);
    }
    putchar('"');
}

/* Ids separated by blanks or commas, brackets ignored, so a Python list
 * printed by transformers pastes in as it is. The first bad id stops it with
 * its byte position; nothing is written then. */
static int decode_ids(const Tokenizer *tok, const UniBuf *in)
{
    TokIds ids = {0};
    UniBuf out = {0};
    int rc = 0;
    size_t i = 0;
    while (i < in->len && !rc) {
        uint8_t c = in->p[i];
        if (c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r' || c == '[' || c == ']') { i++; continue; }
        if (c < '0' || c > '9') {
            char shown[8];
            log_escape(shown, sizeof shown, (const char *)&c, 1);
            log_error("stdin byte %zu: expected a token id, found '%s'", i + 1, shown);
            rc = 1;
            break;
        }
        uint64_t v = 0;
        /* stops growing past UINT32_MAX, so a huge number is reported, not wrapped */
        while (i < in->len && in->p[i] >= '0' && in->p[i] <= '9' && v <= UINT32_MAX) v = v * 10 + (in->p[i++] - '0');
        size_t len;
        if (v >= tok_vocab_size(tok) || !tok_token_bytes(tok, (uint32_t)v, &len)) {
            log_error("id %llu is not in the vocabulary (size %u)",
                      (unsigned long long)v, tok_vocab_size(tok));
            rc = 1;
            break;
        }
        if (tokids_push(&ids, (uint32_t)v)) rc = 1;
    }
    if (!rc && tok_decode(tok, ids.ids, ids.len, &out)) rc = 1;
    if (!rc && out.len) fwrite(out.p, 1, out.len, stdout);   /* raw bytes: a token may be half a character */
    tokids_free(&ids);
    unibuf_free(&out);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"tokenizer", required_argument, NULL, 't'},
        {"decode", no_argument, NULL, 'd'},
        {"tokens", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "llmc-train tokenize", *dir = NULL;
    int decode = 0, tokens = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': dir = optarg; break;
        case 'd': decode = 1; break;
        case 'k': tokens = 1; break;
        case 'h': usage(stdout); return 0;
        default: return args_getopt_error(cmd, c, argv);
        }
    }
    if (optind < argc) return args_usage_error(cmd, "unexpected argument '%s' (the text comes on stdin)", argv[optind]);
    if (!dir) return args_usage_error(cmd, "--tokenizer DIR is required");
    if (decode && tokens) return args_usage_error(cmd, "--decode and --tokens exclude each other");
    char err[512];
    /* exit 2 when the tokenizer or stdin cannot be read (as a bad plan is 2),
     * 1 for input the tokenizer refuses */
    Tokenizer *tok = tok_load(dir, err, sizeof err);
    if (!tok) {
        char shown[1024];
        log_error("%s", log_escape(shown, sizeof shown, err, strlen(err)));
        return 2;
    }
    UniBuf in = {0};
    if (read_stdin(&in)) {
        log_error("reading stdin: %s", strerror(errno));
        tok_free(tok);
        unibuf_free(&in);
        return 2;
    }
    int rc = 0;
    if (decode) {
        rc = decode_ids(tok, &in);
    } else {
        TokEncoder *enc = tok_encoder_new(tok);
        TokIds ids = {0};
        if (!enc || tok_encode(enc, (const char *)in.p, in.len, &ids)) {
            log_error("out of memory");
            rc = 1;
        } else if (tokens) {
            UniBuf shown = {0};
            for (size_t i = 0; i < ids.len; i++) {
                shown.len = 0;
                tok_token_display(tok, ids.ids[i], &shown);   /* as HF shows it: byte-level "Ġ" for a space */
                printf("%u\t", ids.ids[i]);
                print_json_string(shown.p, shown.len);
                putchar('\n');
            }
            unibuf_free(&shown);
        } else {
            for (size_t i = 0; i < ids.len; i++) printf(i ? " %u" : "%u", ids.ids[i]);
            putchar('\n');
        }
        tokids_free(&ids);
        tok_encoder_free(enc);
    }
    unibuf_free(&in);
    tok_free(tok);
    if (fflush(stdout) != 0) return 2;
    return rc;
}
