/* generate.c — `llmc-train generate MODEL_DIR QUESTION...`: greedy answers of
 * an exported model (HF directory: config.json, model.safetensors, tokenizer
 * files), on the CPU. Each question is rendered as one user turn of the chat
 * template, as prepare renders a record, and the model continues it token by
 * token (argmax) until the template's stop word or --max-new tokens. The demo
 * shows held-out questions with it; it is no serving path: every new token
 * runs the whole sequence again (no KV cache), which costs nothing at the
 * demo's size. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "chat_template.h"
#include "checkpoint.h"
#include "commands.h"
#include "hf_config.h"
#include "log.h"
#include "model.h"
#include "tokenizer.h"

static void gen_usage(FILE *out)
{
    fputs("usage: llmc-train generate MODEL_DIR [--template qwen|llama3] [--system TEXT] [--max-new N]\n"
          "                           QUESTION...\n"
          "  prints each QUESTION and the model's greedy answer (one user turn of the chat\n"
          "  template; MODEL_DIR is an export such as OUTPUT_DIR/final)\n"
          "  --template NAME  chat template (default qwen)\n"
          "  --system TEXT    system prompt (default: the template's)\n"
          "  --max-new N      at most N new tokens per answer (default 32)\n", out);
}

/* The prompt of one question: the rendered turn up to where the assistant's
 * text starts (its first label position), in ids. */
static int gen_prompt(const ChatTemplate *tpl, const char *system, const char *question, TokEncoder *enc,
                      int64_t bos, TokIds *prompt)
{
    ChatMessage msgs[2] = {{ROLE_USER, question, strlen(question)}, {ROLE_ASSISTANT, "", 0}};
    ChatDoc doc = {0};
    UniBuf mask = {0};
    int rc = chat_render(tpl, system, system ? strlen(system) : 0, msgs, 2, bos, &doc) ||
             chat_tokenize(&doc, enc, SIZE_MAX, prompt, &mask) ? -1 : 0;
    size_t end = 0;
    while (!rc && end < prompt->len && !mask.p[end]) end++;
    if (!rc) prompt->len = end;
    chat_doc_free(&doc);
    unibuf_free(&mask);
    return rc;
}

/* Greedy continuation of ids (in place) until stop or max_new new tokens. */
static int gen_greedy(Model *m, TokIds *ids, size_t max_new, uint32_t stop)
{
    int T = (int)(ids->len + max_new);
    if (T > m->cfg.max_context) T = m->cfg.max_context;
    if ((int)ids->len >= T) return 0;
    ModelActs *acts = model_acts_new(&m->cfg, 1, T);
    uint32_t *tok = calloc((size_t)T, sizeof *tok), *pos = calloc((size_t)T, sizeof *pos);
    uint8_t *mask = calloc((size_t)T, 1);   /* no labels: the forward pass only */
    int rc = acts && tok && pos && mask ? 0 : -1;
    for (int t = 0; t < T; t++) pos[t] = (uint32_t)t;
    while (!rc && (int)ids->len < T) {
        memcpy(tok, ids->ids, ids->len * sizeof *tok);   /* later positions do not reach earlier ones */
        Batch b = {.ids = tok, .pos = pos, .mask = mask, .B = 1, .T = T};
        int64_t n_labels;
        model_forward(m, acts, &b, &n_labels);
        const float *row = model_logits(acts) + (ids->len - 1) * (size_t)m->cfg.vocab;
        uint32_t best = 0;
        for (int v = 1; v < m->cfg.vocab; v++) if (row[v] > row[best]) best = (uint32_t)v;
        if (best == stop) break;
        if (tokids_push(ids, best)) rc = -1;
    }
    model_acts_free(acts);
    free(tok);
    free(pos);
    free(mask);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    const char *dir = NULL, *tname = "qwen", *system = NULL;
    long max_new = 32;
    static const struct option longopts[] = {
        {"template", required_argument, NULL, 't'}, {"system", required_argument, NULL, 's'},
        {"max-new", required_argument, NULL, 'n'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *cmd = "llmc-train generate";
    long long v;
    int c;
    optind = 1;
    opterr = 0;
    /* options anywhere; a question that starts with '-' goes after "--" */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': tname = optarg; break;
        case 's': system = optarg; break;
        case 'n': if (args_int(cmd, "--max-new", optarg, 1, 4096, &v)) return 2; max_new = (long)v; break;
        case 'h': gen_usage(stdout); return 0;
        default: return args_getopt_error(cmd, c, argv);
        }
    }
    if (optind < argc) dir = argv[optind++];
    int first_q = optind < argc ? optind : 0;
    if (!dir || !first_q) return args_usage_error(cmd, "want an exported model directory and at least one question");
    const ChatTemplate *tpl = chat_template_find(tname);
    if (!tpl) return args_usage_error(cmd, "--template: '%s' is not %s", tname, chat_template_names(" or "));
    char err[1024] = "out of memory";
    ModelConfig cfg;
    Model m = {0};
    Tokenizer *tok = NULL;
    TokEncoder *enc = NULL;
    int status = 1;
    if (hf_config_read(dir, &cfg, err, sizeof err) || model_init(&m, &cfg) ||
        load_hf_weights(dir, &m, err, sizeof err) || !(tok = tok_load(dir, err, sizeof err)) ||
        !(enc = tok_encoder_new(tok))) {
        char shown[1024];
        log_error("%s", log_escape(shown, sizeof shown, err, strlen(err)));
        goto out;
    }
    int64_t stop = tok_token_id(tok, tpl->stop_word);
    if (stop < 0) { log_error("%s: no %s token", dir, tpl->stop_word); goto out; }
    status = 0;
    for (int i = first_q; i < argc && !status; i++) {
        TokIds ids = {0};
        UniBuf text = {0};
        size_t plen = 0;
        if (gen_prompt(tpl, system, argv[i], enc, tok_bos_id(tok), &ids) || (plen = ids.len, 0) ||
            gen_greedy(&m, &ids, (size_t)max_new, (uint32_t)stop) ||
            tok_decode(tok, ids.ids + plen, ids.len - plen, &text)) {
            log_error("out of memory");
            status = 1;
        } else {
            printf("%s -> %.*s\n", argv[i], (int)text.len, (const char *)text.p);
        }
        tokids_free(&ids);
        unibuf_free(&text);
    }
out:
    tok_encoder_free(enc);
    tok_free(tok);
    model_free(&m);
    return status;
}
