/* plan_vocab.h — the plan's enumerated words: THE SINGLE SOURCE.
 *
 * One row per value of a concept: its C id, its `.llm` spelling (what llmc's
 * checker accepts, compiler/check/check.c) and its plan.json spelling (what
 * llmc writes, compiler/emit/emit_plan_json.c, and llmc-train reads,
 * runtime/plan/plan.c). The C enum made from the rows is the one both programs
 * use, so a value means the same number on both sides of plan.json. Add a value
 * by adding its row; every reader and writer follows.
 *
 * Columns of PLAN_<CONCEPT>(X):  ID, LLM spelling, JSON spelling.
 * The first row is each concept's default where a plan leaves it unset.
 */
#ifndef LLMC_CONTRACT_PLAN_VOCAB_H
#define LLMC_CONTRACT_PLAN_VOCAB_H

#include <stddef.h>

#define PLAN_VOCAB_ID(id, llm, json) id,
#define PLAN_VOCAB_LLM(id, llm, json) llm,
#define PLAN_VOCAB_JSON(id, llm, json) json,

/* train.recompute: what the backward pass recomputes instead of keeping. */
#define PLAN_RECOMPUTE(X) \
    X(RECOMPUTE_NONE,      "none",      "none") \
    X(RECOMPUTE_SELECTIVE, "selective", "selective") \
    X(RECOMPUTE_FULL,      "full",      "full")

typedef enum { PLAN_RECOMPUTE(PLAN_VOCAB_ID) RECOMPUTE_COUNT } Recompute;

/* NULL-terminated, indexed by the enum, for the readers' one-of lookups. */
static const char *const recompute_llm_names[] = {PLAN_RECOMPUTE(PLAN_VOCAB_LLM) NULL};
static const char *const recompute_json_names[] = {PLAN_RECOMPUTE(PLAN_VOCAB_JSON) NULL};

/* train.offload (plan.json parallel.offload): what moves to host memory. */
#define PLAN_OFFLOAD(X) \
    X(OFFLOAD_NONE,      "none",      "none") \
    X(OFFLOAD_OPTIMIZER, "optimizer", "optimizer") \
    X(OFFLOAD_ALL,       "all",       "all")

typedef enum { PLAN_OFFLOAD(PLAN_VOCAB_ID) OFFLOAD_COUNT } OffloadKind;
static const char *const offload_llm_names[] = {PLAN_OFFLOAD(PLAN_VOCAB_LLM) NULL};
static const char *const offload_json_names[] = {PLAN_OFFLOAD(PLAN_VOCAB_JSON) NULL};

#endif
