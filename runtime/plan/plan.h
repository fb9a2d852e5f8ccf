/* plan.h (runtime) — plan.json (docs/plan.md, version 1) loaded for llmc-train.
 * Not the compiler's compiler/check/plan.h: this is the runtime's read-only view.
 * Tests that see both programs' folders get the runtime's first where they
 * drive the runtime (tests/cpu, data, e2e, bench) and include it by path
 * elsewhere ("../../runtime/plan/plan.h"), so as not to find compiler/check/plan.h.
 *
 * Every key the trainer needs is checked (present, right type, and in range:
 * the limits are contract/plan_limits.h, the table llmc's checker uses);
 * an error names the key path ("plan.json: train.lr: expected a number").
 * Relative paths are resolved against the directory holding plan.json.
 * `json` keeps the whole parsed document for keys other modules read. */
#ifndef LLMC_RUNTIME_PLAN_H
#define LLMC_RUNTIME_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "model.h"
#include "plan_vocab.h"   /* contract/: the enums plan.json shares with llmc */

#define RUN_PLAN_VERSION 1

/* One dataset of the plan (plan.json "datasets"): its file and the columns and
 * role tags of its format as llmc wrote them (LLaMA-Factory's defaults filled in
 * by the compiler; NULL where the plan says null). Read by run_plan_load_data. */
typedef struct {
    char *name, *file;          /* file: resolved against the plan's directory */
    DataFormat format;          /* contract/plan_vocab.h */
    char *messages, *system, *tools, *prompt, *query, *response, *history, *text;   /* columns */
    char *role, *content, *user, *assistant, *observation, *function, *system_tag;  /* tags */
} DatasetSpec;

/* The enumerated values (stage, arch, init, format, schedule, precision,
 * recompute, attention, offload, method, LoRA targets, backend, bad records)
 * are contract/plan_vocab.h's enums, the ones llmc writes plan.json from; the
 * reader looks each word up in the rows' JSON spellings. How the CUDA backend
 * keeps activations and where the optimizer lives (train.recompute,
 * train.attention, parallel.offload) the CPU backend, which keeps everything in
 * host memory, does not read. */

/* What is trained (plan.json "finetune"; absent: full) */
typedef struct {
    FinetuneMethod method;
    int lora_rank, lora_alpha;
    double lora_dropout;
    unsigned lora_targets;      /* bit i: LoraModule i (LORA_Q .. LORA_DOWN) */
    int rslora;
    int freeze_layers;          /* trainable layers: > 0 the last N, < 0 the first -N */
} RunFinetune;

typedef struct {
    char *path;                 /* plan.json as given */
    char *dir;                  /* its directory */
    char *job;
    PlanBackend backend;        /* absent (hand-written plans): llmc */
    TrainStage stage;           /* STAGE_PT or STAGE_SFT (LLMC_TRAIN_STAGE) */
    /* model */
    char *model_name, *model_path;          /* model_path may be NULL */
    ModelInit init;
    ModelConfig model;
    /* tokenizer */
    char *tokenizer_path;       /* resolved; NULL when unset */
    char *template_;            /* "qwen" | "llama3" | NULL */
    /* data */
    int context, packing;
    int train_on_prompt;        /* sft: prompts are trained too (absent: false) */
    int mask_history;           /* sft: only the last turn is trained (absent: false) */
    char *shards_dir;           /* resolved */
    /* train */
    double epochs;
    int64_t max_steps;          /* -1 when null */
    int micro_batch, grad_accum, global_batch;
    double lr, min_lr;
    LrScheduleKind schedule;
    double warmup_ratio;        /* -1 when null */
    int64_t warmup_steps;       /* -1 when null */
    double weight_decay, beta1, beta2, eps, grad_clip;
    uint64_t seed;
    Precision precision;        /* bf16, fp16, fp32 or fp8 (LLMC_TRAIN_PRECISION; fp8: the CUDA backend's) */
    MasterWeights master_weights;   /* fp32 or split (absent: fp32; the CPU backend's fp32 weights are their own master) */
    OptimStates optimizer_states;   /* AdamW m and v: fp32 or bf16 (absent: fp32) */
    int fp8_lm_head;            /* train.fp8_lm_head: the LM head's GEMMs in FP8 too (absent: true with precision = fp8) */
    Recompute recompute;        /* absent: none */
    AttentionKind attention;    /* absent: flash */
    int deterministic;          /* the same bits every run (CUDA: no float atomics); absent: true */
    /* parallel */
    int world_size, data_parallel;
    int zero_stage;             /* 0 none, 1 optimizer states, 2 + gradients, 3 + weights sharded */
    OffloadKind offload;        /* absent (plans written before it): none */
    RunFinetune ft;
    /* checkpoint */
    char *ckpt_dir;             /* resolved */
    int64_t ckpt_every_steps;   /* -1 when null */
    double ckpt_every_seconds;  /* -1 when null */
    int ckpt_keep, resume;
    /* output */
    char *out_dir, *metrics_path;   /* resolved; metrics_path is inside out_dir unless absolute */
    int log_every;
    /* the data view (run_plan_load_data; run_plan_load leaves these empty) */
    DatasetSpec *datasets;
    size_t n_datasets;
    BadRecordPolicy bad_records;    /* data.on_bad_record */
    int64_t model_vocab;        /* model.vocab, -1 when absent */
    cJSON *json;
} RunPlan;

/* 0 ok; -1 with a message ("PATH: key: what") in err. */
int run_plan_load(RunPlan *p, const char *path, char *err, size_t errlen);
/* The sections `llmc-train prepare` reads (top level, model.vocab, tokenizer,
 * datasets, data), checked as run_plan_load checks them plus what preparing
 * needs: tokenizer.path, data.on_bad_record, a known format per dataset with
 * the columns and tags it reads. The training sections may be absent. */
int run_plan_load_data(RunPlan *p, const char *path, char *err, size_t errlen);
void run_plan_free(RunPlan *p);
/* What a backend of the loop runs of a plan (TrainBackend.check_plan,
 * runtime/train/train_loop.h): 0, or -1 with the refusal in err. */
typedef int (*RunPlanBackendCheck)(void *self, const RunPlan *plan, char *err, size_t errlen);
/* `llmc-train check-plan PLAN.json`: run_plan_load, then backend_check (the
 * build's backend, as `run` asks it; NULL: none); exit 0 accepted, 1 refused
 * (message on stderr), 2 usage. */
int cmd_check_plan(int argc, char **argv, RunPlanBackendCheck backend_check, void *self);
/* tokenizer.path (when set) as the run's export will read it: a directory
 * holding tokenizer.json or tokenizer_config.json. 0 fine (or no tokenizer);
 * 1 refused, why in why ("\"PATH\" holds neither ..."); 2 (only when !strict)
 * missing where it cannot be checked: the directory that would hold it is
 * not here either (a cluster path read on another machine; llmc's "not
 * readable here"). `run` checks strictly at start, check-plan not. */
int run_plan_tokenizer_check(const RunPlan *p, int strict, char *why, size_t n);
/* Resolve a plan-relative path (malloc'd). */
char *run_plan_resolve(const RunPlan *p, const char *rel);

#endif
