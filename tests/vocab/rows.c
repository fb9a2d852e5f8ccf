/* tests/vocab/rows.c — every row of contract/plan_vocab.h, one a line, for
 * tests/vocab/vocab.py (which so reads the rows the programs are built from,
 * not a second parse of the header):
 *   CONCEPT  LLM_KEY  JSON_PATH  INDEX  C_ID  LLM  JSON  LLMC_TRAIN(0/1)
 * tab-separated; `rows llm`: the same for the concepts plan.json does not hold
 * (PLAN_VOCAB_LLM_CONCEPTS; JSON_PATH "-"), and the chat templates, whose
 * names' one place is compiler/check/chat_templates.c's table (concept
 * template, C_ID TEMPLATE_<NAME>); `rows keys`: every row of contract/plan_keys.h instead,
 *   BLOCK  KEY
 * (the key names the spellings search looks for in compiler/check/). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "chat_templates.h"   /* compiler/check/: the template names' table */
#include "plan_keys.h"
#include "plan_vocab.h"

static const char *concept, *llm_key, *json_path;
static unsigned accept;

#define ROW(id, llm, json) \
    printf("%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\n", concept, llm_key, json_path, (int)(id), #id, llm, json, \
           (accept & PLAN_VOCAB_BIT(id)) != 0);
#define CONCEPT(name, ROWS, key, path, mask) \
    concept = #name; llm_key = key; json_path = path; accept = (mask); \
    ROWS(ROW)
/* the concepts plan.json does not hold: the same columns, JSON_PATH "-" */
#define LLM_CONCEPT(name, ROWS, key) \
    concept = #name; llm_key = key; json_path = "-"; accept = 0; \
    ROWS(ROW)

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "keys")) {
        for (int b = 0; b < PKB_COUNT; b++)
            for (int k = 0; k < plan_key_lists[b].n; k++)
                printf("%s\t%s\n", plan_key_lists[b].spelled, plan_key_lists[b].keys[k].key);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "llm")) {
        PLAN_VOCAB_LLM_CONCEPTS(LLM_CONCEPT)
        for (int t = 0; t < chat_template_count(); t++) {
            const char *name = chat_template_info((ChatTemplate)t)->name;
            char id[64] = "TEMPLATE_";
            for (size_t i = 0; name[i] && i + 10 < sizeof id; i++) id[9 + i] = (char)toupper((unsigned char)name[i]);
            /* the last column: llmc-train renders it (the checker's mark) */
            printf("template\ttrain.template\t-\t%d\t%s\t%s\t%s\t%d\n", t, id, name, name,
                   chat_template_info((ChatTemplate)t)->llmc);
        }
        return 0;
    }
    PLAN_VOCAB_CONCEPTS(CONCEPT)
    return 0;
}
