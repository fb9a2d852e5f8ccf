/* tests/vocab/rows.c — every row of contract/plan_vocab.h, one a line, for
 * tests/vocab/vocab.py (which so reads the rows the programs are built from,
 * not a second parse of the header):
 *   CONCEPT  LLM_KEY  JSON_PATH  INDEX  C_ID  LLM  JSON  LLMC_TRAIN(0/1)
 * tab-separated. */
#include <stdio.h>
#include "plan_vocab.h"

static const char *concept, *llm_key, *json_path;
static unsigned accept;

#define ROW(id, llm, json) \
    printf("%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\n", concept, llm_key, json_path, (int)(id), #id, llm, json, \
           (accept & PLAN_VOCAB_BIT(id)) != 0);
#define CONCEPT(name, ROWS, key, path, mask) \
    concept = #name; llm_key = key; json_path = path; accept = (mask); \
    ROWS(ROW)

int main(void)
{
    PLAN_VOCAB_CONCEPTS(CONCEPT)
    return 0;
}
