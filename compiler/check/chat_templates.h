/* chat_templates.h — the chat templates a plan may name (`template = NAME`),
 * one table for the checker and the emitters. Names are LLaMA-Factory's
 * (src/llamafactory/data/template.py, register_template); tests/emitters
 * checks every name and token list against the list derived from its source
 * (tests/emitters/lf_keys.txt, "@template" lines). */
#ifndef LLMC_CHAT_TEMPLATES_H
#define LLMC_CHAT_TEMPLATES_H

#include <stdbool.h>
#include "plan.h"

typedef struct {
    const char *name;          /* as in plans and LLaMA-Factory's `template` */
    unsigned archs;            /* bit 1 << ModelArch for each llmc arch it is for;
                                  0: none of them (the family's own architecture) */
    const char *families[4];   /* what a model path of its family contains (lower
                                  case, NULL-terminated); empty: any model */
    bool llmc;                 /* llmc-train renders it too (runtime/data/chat_template.c) */
    bool efficient_eos;        /* register_template(..., efficient_eos=True): the eos
                                  ends each response unformatted; LLaMA-Factory
                                  refuses train_on_prompt with it */
    const char *tokens[6];     /* the special tokens its user, assistant and system
                                  turns (and prefix) are written with, which the
                                  tokenizer must have (NULL-terminated) */
} ChatTemplateInfo;

/* The entry of t (TEMPLATE_NONE included: pre-training, no template). */
const ChatTemplateInfo *chat_template_info(ChatTemplate t);
/* The number of templates (ChatTemplate values 0 .. n-1). */
int chat_template_count(void);

#endif
