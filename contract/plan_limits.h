/* plan_limits.h — the limits of a valid plan: THE SINGLE SOURCE.
 *
 * One row per numeric plan.json field (docs/plan.md). llmc's checker
 * (compiler/check/) refuses a plan value outside its row with a position;
 * llmc-train's plan reader (runtime/plan/plan.c) refuses the same field outside the
 * same row with the field named. So whatever llmc accepts the trainer accepts,
 * and what the trainer would refuse after the queue wait llmc refuses first.
 * Do not restate a limit anywhere else: change the row. tests/limits/ reads
 * this file and walks every row's edges through both programs.
 *
 * This folder is shared by both programs and includes nothing of either:
 * the runtime never sees compiler/ headers (docs/plan.md, *Limits*).
 *
 * Columns of PLAN_LIMITS(X):
 *   ID       PL_<ID> names the row in C
 *   SECT     plan.json object ("datasets" for every element of that array)
 *   KEY      key inside it
 *   KIND     PLAN_INT (a JSON integer: no fraction, exact in a double) or PLAN_NUM
 *   MIN,MAX  bounds (inclusive unless FLAGS says open)
 *   FLAGS    PLAN_MIN_OPEN / PLAN_MAX_OPEN: that bound itself is refused;
 *            PLAN_NULLABLE: null is allowed (unset)
 *   LLM      where the .llm sets it, and how: "block.key FORM", FORM with %v for
 *            the value (and %p for the value x 100, a percentage); "-" when the
 *            compiler derives it (it then checks what it derives)
 *   MEANING  unit and meaning, for messages and docs
 */
#ifndef LLMC_CONTRACT_PLAN_LIMITS_H
#define LLMC_CONTRACT_PLAN_LIMITS_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* 2^53 - 1: the largest integer every JSON reader (a double) holds exactly. */
#define PLAN_INT_EXACT_MAX 9007199254740991.0
/* The longest duration anywhere in a plan (a job's time, a checkpoint interval). */
#define PLAN_YEAR_SECONDS (366.0 * 86400)

#define PLAN_LIMITS(X) \
    X(MODEL_LAYERS,      "model", "layers",      PLAN_INT, 1, 1000, 0, "model.layers %v", "transformer layers") \
    X(MODEL_HIDDEN,      "model", "hidden",      PLAN_INT, 1, 1 << 20, 0, "model.hidden %v", "hidden size (values per token)") \
    X(MODEL_HEADS,       "model", "heads",       PLAN_INT, 1, 4096, 0, "model.heads %v", "attention (query) heads") \
    X(MODEL_KV_HEADS,    "model", "kv_heads",    PLAN_INT, 1, 4096, 0, "model.kv_heads %v", "key/value heads") \
    X(MODEL_HEAD_DIM,    "model", "head_dim",    PLAN_INT, 2, 1024, 0, "model.head_dim %v", "values per head (even: RoPE rotates halves)") \
    X(MODEL_FFN,         "model", "ffn",         PLAN_INT, 1, 1 << 22, 0, "model.ffn %v", "MLP intermediate size") \
    X(MODEL_VOCAB,       "model", "vocab",       PLAN_INT, 2, 1 << 24, 0, "model.vocab %v", "vocabulary size (tokens; one token predicts nothing)") \
    X(MODEL_MAX_CONTEXT, "model", "max_context", PLAN_INT, 2, 1 << 24, 0, "model.max_context %v", "longest sequence the model supports (tokens)") \
    X(MODEL_ROPE_THETA,  "model", "rope_theta",  PLAN_NUM, 0, 1e12, PLAN_MIN_OPEN, "model.rope_theta %v", "RoPE base") \
    X(MODEL_RMS_EPS,     "model", "rms_eps",     PLAN_NUM, 0, 1, PLAN_MIN_OPEN, "model.rms_eps %v", "RMSNorm epsilon") \
    X(DATASET_SAMPLES,   "datasets", "samples",  PLAN_INT, 1, PLAN_INT_EXACT_MAX, PLAN_NULLABLE, "dataset.samples %v", "records in the dataset") \
    X(DATASET_SIZE,      "datasets", "size_bytes", PLAN_INT, 1, PLAN_INT_EXACT_MAX, PLAN_NULLABLE, "dataset.size %v B", "dataset file size (bytes)") \
    X(DATASET_TOKENS,    "datasets", "tokens",   PLAN_INT, 1, PLAN_INT_EXACT_MAX, PLAN_NULLABLE, "dataset.tokens %v", "tokens in the dataset") \
    X(DATA_CONTEXT,      "data",  "context",     PLAN_INT, 2, 1 << 24, 0, "train.context %v", "tokens per sequence (one predicts nothing)") \
    X(TRAIN_EPOCHS,      "train", "epochs",      PLAN_NUM, 0, 1e6, PLAN_MIN_OPEN | PLAN_NULLABLE, "train.epochs %v", "passes over the data") \
    X(TRAIN_MAX_STEPS,   "train", "max_steps",   PLAN_INT, 1, 1e15, PLAN_NULLABLE, "train.max_steps %v", "optimizer steps (wins over epochs)") \
    X(TRAIN_MICRO_BATCH, "train", "micro_batch", PLAN_INT, 1, 65536, 0, "train.batch %v per gpu", "sequences per rank per micro-step") \
    X(TRAIN_GRAD_ACCUM,  "train", "grad_accum",  PLAN_INT, 1, 1 << 20, 0, "train.grad_accum %v", "micro-steps per optimizer step") \
    X(TRAIN_GLOBAL_BATCH,"train", "global_batch",PLAN_INT, 1, 1 << 30, 0, "-", "sequences per optimizer step (micro_batch x grad_accum x data_parallel)") \
    X(TRAIN_LR,          "train", "lr",          PLAN_NUM, 0, 1, PLAN_MIN_OPEN, "train.lr %v", "peak learning rate (0 trains nothing)") \
    X(TRAIN_MIN_LR,      "train", "min_lr",      PLAN_NUM, 0, 1, PLAN_NULLABLE, "train.min_lr %v", "final learning rate (at most lr)") \
    X(TRAIN_WARMUP_RATIO,"train", "warmup_ratio",PLAN_NUM, 0, 1, PLAN_NULLABLE, "train.warmup %p%", "warmup as a fraction of the steps") \
    X(TRAIN_WARMUP_STEPS,"train", "warmup_steps",PLAN_INT, 0, 1e15, PLAN_NULLABLE, "train.warmup %v steps", "warmup steps") \
    X(TRAIN_WEIGHT_DECAY,"train", "weight_decay",PLAN_NUM, 0, 10, 0, "train.weight_decay %v", "AdamW weight decay") \
    X(TRAIN_BETA1,       "train", "beta1",       PLAN_NUM, 0, 1, PLAN_MAX_OPEN, "train.betas [%v, 0.999]", "AdamW beta1") \
    X(TRAIN_BETA2,       "train", "beta2",       PLAN_NUM, 0, 1, PLAN_MAX_OPEN, "train.betas [0.9, %v]", "AdamW beta2") \
    X(TRAIN_EPS,         "train", "eps",         PLAN_NUM, 0, 1, PLAN_MIN_OPEN, "train.eps %v", "AdamW epsilon (0 divides by zero)") \
    X(TRAIN_GRAD_CLIP,   "train", "grad_clip",   PLAN_NUM, 0, 1e6, 0, "train.grad_clip %v", "gradient norm clip (0: off)") \
    X(TRAIN_SEED,        "train", "seed",        PLAN_INT, 0, PLAN_INT_EXACT_MAX, 0, "train.seed %v", "random seed") \
    X(PARALLEL_WORLD,    "parallel", "world_size",    PLAN_INT, 1, 1 << 20, 0, "-", "trainer processes (nodes x tasks_per_node)") \
    X(PARALLEL_DP,       "parallel", "data_parallel", PLAN_INT, 1, 1 << 20, 0, "-", "data-parallel ranks") \
    X(PARALLEL_ZERO,     "parallel", "zero_stage",    PLAN_INT, 0, 3, 0, "-", "ZeRO stage across data-parallel ranks (0 none, 1 optimizer states, 2 and gradients, 3 and weights)") \
    X(FINETUNE_LORA_RANK,    "finetune", "lora_rank",     PLAN_INT, 1, 4096, 0, "-", "LoRA rank (inner dimension of the adapters)") \
    X(FINETUNE_LORA_ALPHA,   "finetune", "lora_alpha",    PLAN_INT, 1, 1 << 20, 0, "-", "LoRA alpha (scale alpha / rank, or alpha / sqrt(rank) with rslora)") \
    X(FINETUNE_LORA_DROPOUT, "finetune", "lora_dropout",  PLAN_NUM, 0, 1, PLAN_MAX_OPEN, "-", "dropout on the adapters' input") \
    X(FINETUNE_FREEZE_LAYERS,"finetune", "freeze_layers", PLAN_INT, -1000, 1000, 0, "-", "trainable layers of method freeze: N > 0 the last N, N < 0 the first -N") \
    X(CKPT_EVERY_STEPS,  "checkpoint", "every_steps",   PLAN_INT, 1, 1e15, PLAN_NULLABLE, "train.checkpoint_every %v steps", "steps between checkpoints") \
    X(CKPT_EVERY_SECONDS,"checkpoint", "every_seconds", PLAN_NUM, 0, PLAN_YEAR_SECONDS, PLAN_MIN_OPEN | PLAN_NULLABLE, "train.checkpoint_every %v s", "seconds between checkpoints") \
    X(CKPT_KEEP,         "checkpoint", "keep",          PLAN_INT, 1, 1000, 0, "train.checkpoint_keep %v", "checkpoints kept") \
    X(OUTPUT_LOG_EVERY,  "output", "log_every",  PLAN_INT, 1, 1e9, 0, "-", "steps between metrics lines")

typedef enum { PLAN_INT, PLAN_NUM } PlanLimitKind;
enum { PLAN_MIN_OPEN = 1, PLAN_MAX_OPEN = 2, PLAN_NULLABLE = 4 };

typedef struct {
    const char *sect, *key;
    PlanLimitKind kind;
    double min, max;
    int flags;
    const char *llm, *meaning;
} PlanLimit;

typedef enum {
#define PLAN_LIMIT_ID(id, sect, key, kind, min, max, flags, llm, meaning) PL_##id,
    PLAN_LIMITS(PLAN_LIMIT_ID)
#undef PLAN_LIMIT_ID
    PL_COUNT
} PlanLimitId;

static inline const PlanLimit *plan_limit(PlanLimitId id)
{
    static const PlanLimit rows[PL_COUNT] = {
#define PLAN_LIMIT_ROW(id, sect, key, kind, min, max, flags, llm, meaning) \
    {sect, key, kind, (double)(min), (double)(max), flags, llm, meaning},
        PLAN_LIMITS(PLAN_LIMIT_ROW)
#undef PLAN_LIMIT_ROW
    };
    return &rows[id];
}

/* 0 when x satisfies the row; else what is wrong: 1 not a finite number,
 * 2 not an integer (PLAN_INT), 3 below (or at an open) minimum, 4 above (or at
 * an open) maximum. */
static inline int plan_limit_violation(const PlanLimit *l, double x)
{
    if (!isfinite(x)) return 1;
    if (l->kind == PLAN_INT && x != floor(x)) return 2;
    if (x < l->min || ((l->flags & PLAN_MIN_OPEN) && x == l->min)) return 3;
    if (x > l->max || ((l->flags & PLAN_MAX_OPEN) && x == l->max)) return 4;
    return 0;
}

/* The bound a violation 3 or 4 broke, as words: "at least 1", "greater than 0",
 * "at most 1000", "less than 1". */
static inline const char *plan_limit_bound_word(const PlanLimit *l, int violation)
{
    if (violation == 3) return (l->flags & PLAN_MIN_OPEN) ? "greater than" : "at least";
    return (l->flags & PLAN_MAX_OPEN) ? "less than" : "at most";
}

/* The optimizer steps epochs passes over rows sequences make at a global batch
 * of global_batch, before the trainers round them up to a whole step: under 1
 * the epochs do not fill one step, which llmc refuses (against the counted
 * data) and llmc-train refuses at start (against its shards). */
static inline double plan_epoch_steps(double epochs, double rows, double global_batch)
{
    return global_batch > 0 ? epochs * rows / global_batch : 0;
}

/* ---- rules on text the plan carries into files, scripts and terminals ---- */

/* Offset of the first control character in s, or -1: a C0 byte, DEL, or a
 * C1 control U+0080..U+009F (UTF-8 0xC2 0x80..0x9F; U+0085 is a line break
 * to some readers, U+009B starts a terminal escape). Names, columns, tags and
 * paths reach job scripts, JSON and terminals. */
static inline long plan_control_char_at(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return (long)(p - (const unsigned char *)s);
    return -1;
}

/* The control character plan_control_char_at found at s + at, as words for a
 * message: "byte 0x0a" or "U+0085". */
static inline const char *plan_control_char_name(const char *s, long at, char buf[16])
{
    const unsigned char *p = (const unsigned char *)s + at;
    if (p[0] == 0xc2) snprintf(buf, 16, "U+%04X", (unsigned)p[1]);
    else snprintf(buf, 16, "byte 0x%02x", (unsigned)p[0]);
    return buf;
}

/* A directory the trainer writes into (output.dir, checkpoint.dir): NULL when
 * fine, else why not. The root directory would receive `latest`, step-* and
 * their rotation. */
static inline const char *plan_write_dir_problem(const char *s)
{
    if (!s[0]) return "is empty";
    if (plan_control_char_at(s) >= 0) return "contains a control character";
    size_t n = strspn(s, "/");
    if (n == strlen(s)) return "is the root directory";
    return NULL;
}

/* A file name inside output.dir (output.metrics): relative, no '..'
 * component, not a directory. NULL when fine, else why not. */
static inline const char *plan_inner_file_problem(const char *s)
{
    if (!s[0]) return "is empty";
    if (plan_control_char_at(s) >= 0) return "contains a control character";
    if (s[0] == '/') return "must be relative to output.dir, not absolute";
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') return "must stay inside output.dir (no '..')";
        p += n;
        if (*p) p++;
    }
    if (s[strlen(s) - 1] == '/' || !strcmp(s, ".") ||
        (strlen(s) >= 2 && !strcmp(s + strlen(s) - 2, "/.")))
        return "names a directory, not a file";
    return NULL;
}

/* Dataset files the llmc trainer reads (runtime/data/records.c): JSON and JSON Lines.
 * LLaMA-Factory also reads Parquet. */
static inline int plan_llmc_reads_dataset(const char *file)
{
    const char *dot = strrchr(file, '.');
    const char *slash = strrchr(file, '/');
    if (!dot || (slash && dot < slash)) return 0;
    return !strcmp(dot, ".json") || !strcmp(dot, ".jsonl");
}

#endif
