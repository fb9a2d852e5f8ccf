/* tests/vocab/rows.c — every row of contract/plan_vocab.h, one a line, for
 * tests/vocab/vocab.py (which so reads the rows the programs are built from,
 * not a second parse of the header):
 *   CONCEPT  LLM_KEY  JSON_PATH  INDEX  C_ID  LLM  JSON  LLMC_TRAIN(0/1)
 * tab-separated; `rows llm`: the same for the concepts plan.json does not hold
 * (PLAN_VOCAB_LLM_CONCEPTS; JSON_PATH "-"); `rows keys`: every row of contract/plan_keys.h instead,
 *   BLOCK  KEY
 * (the key names the spellings search looks for in compiler/check/). */
#include <stdio.h>
#include <string.h>
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
        return 0;
    }
    PLAN_VOCAB_CONCEPTS(CONCEPT)
    return 0;
}
