/* plan_keys.h — the keys of a `.llm` plan: THE SINGLE SOURCE.
 *
 * One row per key of each block and sub-block. llmc's checker
 * (compiler/check/) takes a block's known keys and its "did you mean"
 * candidates from the block's rows, reads the rows marked ROW itself (type,
 * limit or vocabulary row, default: one loop, check_row_keys), and refuses a
 * LLaMA-Factory-only key on backend = llmc by the BACKENDS column. The rest of
 * a block's keys are read by the block's rules (compiler/check/check_BLOCK.c),
 * which join keys to each other. tests/frontend reads these rows: every key is
 * documented in docs/language.md, every plan.json path is in a golden plan.json.
 * Adding a key: docs/compiler.md, "Adding things".
 *
 * Columns of PLAN_KEYS_<BLOCK>(X), in the order the checker offers them as
 * "did you mean" candidates:
 *   KEY       the `.llm` key, as a C name (the table holds its spelling; the
 *             checker's rules name it PLAN_KEY(BLOCK, KEY), which compiles
 *             only for a row of the block, never as a string of their own)
 *   TYPE      PK_<TYPE> (PlanKeyType below): what the value is, with its unit
 *   ROW       PL_<ID>, the key's row in plan_limits.h, or PL_KEY_<ID>, its
 *             row in PLAN_KEY_LIMITS below (a key llmc-train does not read);
 *             or a concept of plan_vocab.h (`shard`: its shard_llm_names; a
 *             RATE or FORM key's words, `gpu_link`, `mail_type`, too);
 *             NONE: none of them
 *   DEFAULT   the value when the key is left out, as the `.llm` writes it;
 *             "required": it must be written; "": derived by the block's rules
 *             (docs/language.md says from what)
 *   BACKENDS  PK_LF: backend = llamafactory only, the llmc backend refuses the
 *             key itself (train rows); PK_LLMC: backend = llmc only, the
 *             llamafactory backend refuses it (train rows); PK_ANY: no refusal by key (a value or a
 *             combination one backend lacks is a rule of the block, e.g. a
 *             Hub dataset or a mixture-of-experts model on backend = llmc)
 *   JSON      where plan.json holds it ("a|b": either, by its form); "-": not
 *             in plan.json (LLaMA-Factory's YAML, the job script, the estimate)
 *   READ      ROW: the checker reads it by this row alone (TYPE INT, INT64,
 *             NUM, BOOL, ENUM or SIZE, ROW, DEFAULT) into FIELD, and ROW_AT
 *             also records where (FIELD_at: the entry, `key = value`;
 *             ROW_AT_VALUE: the value); a DEFAULT of "" or "required"
 *             is then the rules' (they see whether the row read a value),
 *             and a SIZE row's DEFAULT is always "";
 *             RULE: the block's rules read it
 *   FIELD     the member of the checker's block struct (plan.h) for READ
 *             ROW/ROW_AT/ROW_AT_VALUE, which the row declares (PLAN_ROW_MEMBER:
 *             of TYPE's C type, with FIELD_at for ROW_AT*); _ for RULE
 *
 * This folder is shared by both programs and includes nothing of either.
 */
#ifndef LLMC_CONTRACT_PLAN_KEYS_H
#define LLMC_CONTRACT_PLAN_KEYS_H

#include "plan_limits.h"
#include "plan_vocab.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    PK_INT,        /* integer (int) */
    PK_INT64,      /* integer (64 bits) */
    PK_NUM,        /* number, integer or float */
    PK_BOOL,       /* true | false */
    PK_ENUM,       /* one word of its ROW's concept (or of the rules' own list) */
    PK_STRING,     /* "text" */
    PK_STRINGS,    /* ["text", ...] */
    PK_PATH,       /* "path", relative to the directory llmc runs from */
    PK_REF,        /* the name of another block */
    PK_REFS,       /* [NAME, ...] */
    PK_SIZE,       /* NUMBER B | KB ... | KiB ... */
    PK_DURATION,   /* NUMBER s | min | h | d */
    PK_PERCENT,    /* NUMBER % (or a fraction where the rules say) */
    PK_STEPS,      /* INT steps (or a duration where the rules say) */
    PK_PER_GPU,    /* INT per gpu */
    PK_HOSTLIST,   /* a Slurm hostlist, hgx[001-032] */
    PK_GPUS,       /* GPU x COUNT, from the catalogue or a gpu block */
    PK_RATE,       /* a link: a word of the rules' list, or NUMBER GBps | Gbps */
    PK_FORM,       /* a form of its own (docs/language.md) */
    PK_BLOCK,      /* { key = value ... } */
} PlanKeyType;

typedef enum { PK_ANY, PK_LF, PK_LLMC } PlanKeyBackends;

/* The bounds of the keys no plan_limits.h row bounds, because llmc-train
 * does not read them (the job script, the estimate and LLaMA-Factory's YAML
 * take them): one row each, as plan_limits.h's, named PL_KEY_<ID> in a key
 * row's ROW column, applied by the checker alone.
 * Columns: ID, KIND (PLAN_INT | PLAN_NUM), MIN, MAX, FLAGS (PLAN_MIN_OPEN,
 * PLAN_MAX_OPEN), MEANING. */
#define PLAN_KEY_LIMITS(X) \
    X(CLUSTER_CPUS,        PLAN_INT, 1, 100000, 0, "CPU cores per node") \
    X(K8S_POOL_GPUS,       PLAN_INT, 1, 64, 0, "nvidia.com/gpu each node of the Kubernetes pool offers") \
    X(K8S_CPU_REQUEST,     PLAN_NUM, 0, 100000, PLAN_MIN_OPEN, "CPUs the slurmd pod requests (to 1m, a rule)") \
    X(MODEL_EXPERTS,       PLAN_INT, 1, 1024, 0, "experts per mixture-of-experts layer") \
    X(MODEL_EXPERTS_TOP_K, PLAN_INT, 1, 1024, 0, "experts each token is routed to") \
    X(JOB_TASKS,           PLAN_INT, 1, 1024, 0, "tasks (trainer processes) per node") \
    X(JOB_CPUS_PER_TASK,   PLAN_INT, 1, 100000, 0, "CPU cores per task") \
    X(SBATCH_SWITCHES,     PLAN_INT, 1, 1024, 0, "most leaf switches of the allocation (--switches)") \
    X(SBATCH_GPUS_PER_TASK,PLAN_INT, 1, 64, 0, "GPUs per task (--gpus-per-task)") \
    X(TRAIN_QUANT_BITS,    PLAN_INT, 1, 64, 0, "qlora's bits per weight of the frozen base (4 or 8, a rule)") \
    X(TRAIN_PREF_BETA,     PLAN_NUM, 0, 1000, PLAN_MIN_OPEN, "preference loss beta") \
    X(TRAIN_PREF_FTX,      PLAN_NUM, 0, 1000, 0, "supervised loss weight of preference training") \
    X(TRAIN_BYTES_PER_TOKEN, PLAN_NUM, 0, 1000, PLAN_MIN_OPEN, "bytes per token of a dataset known by size") \
    X(TRAIN_TOKENIZE_RATE, PLAN_NUM, 0, 1e9, PLAN_MIN_OPEN, "tokens per second one preprocessing worker tokenises") \
    X(TRAIN_MAX_SAMPLES,   PLAN_INT, 1, 1125899906842624.0, 0, "samples kept of each dataset (2^50 at most)")

/* Their ids continue plan_limits.h's PlanLimitId: one number names a row of
 * either table (plan_key_limit). */
enum {
    PL_KEY_FIRST_ = PL_COUNT - 1,
#define PLAN_KEY_LIMIT_ID(id, kind, min, max, flags, meaning) PL_KEY_##id,
    PLAN_KEY_LIMITS(PLAN_KEY_LIMIT_ID)
#undef PLAN_KEY_LIMIT_ID
    PL_KEY_END_
};

/* The row of limit id: plan_limits.h's (id < PL_COUNT) or a key's own. */
static inline const PlanLimit *plan_key_limit(int id)
{
    static const PlanLimit rows[] = {
#define PLAN_KEY_LIMIT_ROW(id, kind, min, max, flags, meaning) \
    {"-", "-", kind, (double)(min), (double)(max), flags, "-", meaning},
        PLAN_KEY_LIMITS(PLAN_KEY_LIMIT_ROW)
#undef PLAN_KEY_LIMIT_ROW
    };
    return id < PL_COUNT ? plan_limit((PlanLimitId)id) : &rows[id - PL_COUNT];
}

/* cluster NAME { } */
#define PLAN_KEYS_CLUSTER(X) \
    X(partition,      PK_STRING,   NONE, "required", PK_ANY, "slurm.partition", RULE, _) \
    X(nodes,          PK_HOSTLIST, NONE, "required", PK_ANY, "-", RULE, _) \
    X(gpu,            PK_GPUS,     NONE, "required", PK_ANY, "parallel.gpus_per_node", RULE, _) \
    X(cpus,           PK_INT,      PL_KEY_CLUSTER_CPUS, "required", PK_ANY, "-", ROW_AT, cpus) \
    X(memory,         PK_SIZE,     NONE, "required", PK_ANY, "-", RULE, _) \
    X(gpu_link,       PK_RATE,     gpu_link, "", PK_ANY, "-", RULE, _) \
    X(network,        PK_RATE,     NONE, "", PK_ANY, "-", RULE, _) \
    X(network_kind,   PK_ENUM,     network_kind, "infiniband", PK_ANY, "-", RULE, _) \
    X(host_link,      PK_RATE,     host_link, "", PK_ANY, "-", RULE, _) \
    X(slurm,          PK_FORM,     slurm, "hosts", PK_ANY, "-", RULE, _) \
    X(kubernetes,     PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _) \
    X(env,            PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _) \
    X(sbatch,         PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _) \
    X(setup,          PK_STRINGS,  NONE, "", PK_ANY, "-", RULE, _) \
    X(container,      PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _)

/* cluster NAME { kubernetes { } } */
#define PLAN_KEYS_KUBERNETES(X) \
    X(namespace,            PK_STRING,   NONE, "", PK_ANY, "-", RULE, _) \
    X(cluster_name,         PK_STRING,   NONE, "", PK_ANY, "-", RULE, _) \
    X(image,                PK_STRING,   NONE, "required", PK_ANY, "-", RULE, _) \
    X(munge_image,          PK_STRING,   NONE, "required", PK_ANY, "-", RULE, _) \
    X(jail,                 PK_STRING,   NONE, "required", PK_ANY, "-", RULE, _) \
    X(pool_gpus,            PK_INT,      PL_KEY_K8S_POOL_GPUS, "required", PK_ANY, "-", RULE, _) \
    X(node_selector,        PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _) \
    X(tolerations,          PK_FORM,     taint_effect, "", PK_ANY, "-", RULE, _) \
    X(cpu_request,          PK_NUM,      PL_KEY_K8S_CPU_REQUEST, "", PK_ANY, "-", RULE, _) \
    X(memory_request,       PK_SIZE,     NONE, "", PK_ANY, "-", RULE, _) \
    X(volumes,              PK_FORM,     NONE, "", PK_ANY, "-", RULE, _) \
    X(system_reserve,       PK_SIZE,     NONE, "", PK_ANY, "-", RULE, _) \
    X(shm,                  PK_SIZE,     NONE, "", PK_ANY, "-", RULE, _) \
    X(host_network,         PK_BOOL,     NONE, "false", PK_ANY, "-", ROW, host_network) \
    X(rdma,                 PK_STRING,     NONE, "", PK_ANY, "-", RULE, _) \
    X(partition_max_time,   PK_DURATION, NONE, "", PK_ANY, "-", RULE, _)

/* sbatch { } of a cluster or job: #SBATCH lines of the job script */
#define PLAN_KEYS_SBATCH(X) \
    X(constraint,      PK_STRING,  NONE, "", PK_ANY, "-", RULE, _) \
    X(exclusive,       PK_BOOL,    NONE, "", PK_ANY, "-", RULE, _) \
    X(reservation,     PK_STRING,  NONE, "", PK_ANY, "-", RULE, _) \
    X(gpus_per_node,   PK_BOOL,    NONE, "", PK_ANY, "-", RULE, _) \
    X(gres_type,       PK_FORM,    NONE, "", PK_ANY, "-", RULE, _) \
    X(mail_user,       PK_STRING,  NONE, "", PK_ANY, "-", RULE, _) \
    X(mail_type,       PK_FORM,    mail_type, "", PK_ANY, "-", RULE, _) \
    X(comment,         PK_STRING,  NONE, "", PK_ANY, "-", RULE, _) \
    X(exclude,         PK_STRING,  NONE, "", PK_ANY, "-", RULE, _) \
    X(nodelist,        PK_STRING,  NONE, "", PK_ANY, "-", RULE, _) \
    X(switches,        PK_INT,     PL_KEY_SBATCH_SWITCHES, "", PK_ANY, "-", ROW_AT_VALUE, switches) \
    X(gpus_per_task,   PK_INT,     PL_KEY_SBATCH_GPUS_PER_TASK, "", PK_ANY, "-", ROW_AT_VALUE, gpus_per_task) \
    X(extra,           PK_FORM,    NONE, "", PK_ANY, "-", RULE, _)

/* container { } of a cluster or job */
#define PLAN_KEYS_CONTAINER(X) \
    X(runtime,   PK_ENUM,    container_runtime, "required", PK_ANY, "-", ROW, container) \
    X(image,     PK_STRING,  NONE, "required", PK_ANY, "-", RULE, _) \
    X(mounts,    PK_STRINGS, NONE, "", PK_ANY, "-", RULE, _)

/* gpu NAME { }: a GPU outside the catalogue */
#define PLAN_KEYS_GPU(X) \
    X(memory,      PK_SIZE,    NONE, "required", PK_ANY, "-", RULE, _) \
    X(usable,      PK_SIZE,    NONE, "", PK_ANY, "-", RULE, _) \
    X(bf16,        PK_FORM,    NONE, "required", PK_ANY, "-", RULE, _) \
    X(fp8,         PK_FORM,    NONE, "", PK_ANY, "-", RULE, _) \
    X(hbm,         PK_RATE,    NONE, "required", PK_ANY, "-", RULE, _) \
    X(gres_type,   PK_STRING,  NONE, "", PK_ANY, "-", RULE, _) \
    X(mfu,         PK_PERCENT, NONE, "", PK_ANY, "-", RULE, _) \
    X(vendor,      PK_ENUM,    vendor, "nvidia", PK_ANY, "-", ROW, vendor)

/* profile NAME { }: a site's measured efficiency (docs/estimator.md) */
#define PLAN_KEYS_PROFILE(X) \
    X(backend,         PK_ENUM,    backend, "", PK_ANY, "-", ROW_AT, backend) \
    X(mfu,             PK_PERCENT, NONE, "", PK_ANY, "-", RULE, _) \
    X(step_overhead,   PK_DURATION, NONE, "", PK_ANY, "-", RULE, _) \
    X(intra_node_bw,   PK_RATE,    NONE, "", PK_ANY, "-", RULE, _) \
    X(inter_node_bw,   PK_RATE,    NONE, "", PK_ANY, "-", RULE, _) \
    X(from,            PK_STRINGS, NONE, "", PK_ANY, "-", RULE, _)

/* model NAME { }: the shape keys may come from the model's config.json */
#define PLAN_KEYS_MODEL(X) \
    X(arch,                PK_ENUM,  arch, "required", PK_ANY, "model.arch", ROW_AT, arch) \
    X(path,                PK_PATH,  NONE, "required", PK_ANY, "model.path", RULE, _) \
    X(tokenizer,           PK_PATH,  NONE, "", PK_ANY, "tokenizer.path", RULE, _) \
    X(init,                PK_ENUM,  init, "pretrained", PK_ANY, "model.init", ROW, init) \
    X(layers,              PK_INT,   PL_MODEL_LAYERS, "", PK_ANY, "model.layers", ROW_AT, layers) \
    X(hidden,              PK_INT,   PL_MODEL_HIDDEN, "", PK_ANY, "model.hidden", ROW_AT, hidden) \
    X(heads,               PK_INT,   PL_MODEL_HEADS, "", PK_ANY, "model.heads", ROW_AT, heads) \
    X(kv_heads,            PK_INT,   PL_MODEL_KV_HEADS, "", PK_ANY, "model.kv_heads", ROW_AT, kv_heads) \
    X(head_dim,            PK_INT,   PL_MODEL_HEAD_DIM, "", PK_ANY, "model.head_dim", ROW_AT, head_dim) \
    X(ffn,                 PK_INT,   PL_MODEL_FFN, "", PK_ANY, "model.ffn", ROW_AT, ffn) \
    X(vocab,               PK_INT,   PL_MODEL_VOCAB, "", PK_ANY, "model.vocab", ROW_AT, vocab) \
    X(max_context,         PK_INT,   PL_MODEL_MAX_CONTEXT, "", PK_ANY, "model.max_context", ROW_AT, max_context) \
    X(rope_theta,          PK_NUM,   PL_MODEL_ROPE_THETA, "", PK_ANY, "model.rope_theta", ROW, rope_theta) \
    X(rms_eps,             PK_NUM,   PL_MODEL_RMS_EPS, "", PK_ANY, "model.rms_eps", ROW, rms_eps) \
    X(tie_embeddings,      PK_BOOL,  NONE, "", PK_ANY, "model.tie_embeddings", ROW, tie_embeddings) \
    X(experts,             PK_INT,   PL_KEY_MODEL_EXPERTS, "", PK_ANY, "-", RULE, _) \
    X(experts_per_token,   PK_INT,   PL_KEY_MODEL_EXPERTS_TOP_K, "", PK_ANY, "-", RULE, _)

/* dataset NAME { } */
#define PLAN_KEYS_DATASET(X) \
    X(file,      PK_PATH,  NONE, "required", PK_ANY, "datasets[].file", RULE, _) \
    X(format,    PK_ENUM,  format, "required", PK_ANY, "datasets[].format", ROW_AT, format) \
    X(columns,   PK_BLOCK, NONE, "", PK_ANY, "-", RULE, _) \
    X(tags,      PK_BLOCK, NONE, "", PK_ANY, "-", RULE, _) \
    X(ranking,   PK_BOOL,  NONE, "false", PK_ANY, "-", ROW, ranking) \
    X(samples,   PK_INT64, PL_DATASET_SAMPLES, "", PK_ANY, "datasets[].samples", ROW_AT, samples) \
    X(size,      PK_SIZE,  PL_DATASET_SIZE, "", PK_ANY, "datasets[].size_bytes", ROW_AT, size_bytes) \
    X(tokens,    PK_INT64, PL_DATASET_TOKENS, "", PK_ANY, "datasets[].tokens", ROW_AT, tokens) \
    X(hf_hub,    PK_STRING, NONE, "", PK_ANY, "-", RULE, _)

/* dataset NAME { columns { } }: the record's fields (dataset_info.json's columns) */
#define PLAN_KEYS_COLUMNS(X) \
    X(prompt,     PK_STRING, NONE, "", PK_ANY, "datasets[].columns.prompt", RULE, _) \
    X(query,      PK_STRING, NONE, "", PK_ANY, "datasets[].columns.query", RULE, _) \
    X(response,   PK_STRING, NONE, "", PK_ANY, "datasets[].columns.response", RULE, _) \
    X(history,    PK_STRING, NONE, "", PK_ANY, "datasets[].columns.history", RULE, _) \
    X(messages,   PK_STRING, NONE, "", PK_ANY, "datasets[].columns.messages", RULE, _) \
    X(system,     PK_STRING, NONE, "", PK_ANY, "datasets[].columns.system", RULE, _) \
    X(tools,      PK_STRING, NONE, "", PK_ANY, "datasets[].columns.tools", RULE, _) \
    X(text,       PK_STRING, NONE, "", PK_ANY, "datasets[].columns.text", RULE, _) \
    X(chosen,     PK_STRING, NONE, "", PK_ANY, "-", RULE, _) \
    X(rejected,   PK_STRING, NONE, "", PK_ANY, "-", RULE, _) \
    X(kto_tag,    PK_STRING, NONE, "", PK_ANY, "-", RULE, _)

/* dataset NAME { tags { } }: sharegpt's message fields and role words */
#define PLAN_KEYS_TAGS(X) \
    X(role,          PK_STRING, NONE, "", PK_ANY, "datasets[].tags.role", RULE, _) \
    X(content,       PK_STRING, NONE, "", PK_ANY, "datasets[].tags.content", RULE, _) \
    X(user,          PK_STRING, NONE, "", PK_ANY, "datasets[].tags.user", RULE, _) \
    X(assistant,     PK_STRING, NONE, "", PK_ANY, "datasets[].tags.assistant", RULE, _) \
    X(observation,   PK_STRING, NONE, "", PK_ANY, "datasets[].tags.observation", RULE, _) \
    X(function,      PK_STRING, NONE, "", PK_ANY, "datasets[].tags.function", RULE, _) \
    X(system,        PK_STRING, NONE, "", PK_ANY, "datasets[].tags.system", RULE, _)

/* train NAME { }. BACKENDS PK_LLMC: the llamafactory backend refuses the key
 * (check_train_llmc_keys). PK_LF: the llmc trainer refuses the key, the first
 * set in this order (check_train_llmc_rules); the LoRA and freeze keys run on
 * both with their method. */
#define PLAN_KEYS_TRAIN(X) \
    X(stage,              PK_ENUM,     stage, "required", PK_ANY, "stage", RULE, _) \
    X(model,              PK_REF,      NONE, "required", PK_ANY, "model.name", RULE, _) \
    X(data,               PK_REFS,     NONE, "required", PK_ANY, "datasets[].name", RULE, _) \
    X(template,           PK_ENUM,     NONE, "", PK_ANY, "tokenizer.template", RULE, _) \
    X(context,            PK_INT,      PL_DATA_CONTEXT, "required", PK_ANY, "data.context", ROW_AT, context) \
    X(epochs,             PK_NUM,      PL_TRAIN_EPOCHS, "1", PK_ANY, "train.epochs", ROW_AT, epochs) \
    X(max_steps,          PK_INT64,    PL_TRAIN_MAX_STEPS, "0", PK_ANY, "train.max_steps", ROW_AT, max_steps) \
    X(batch,              PK_PER_GPU,  PL_TRAIN_MICRO_BATCH, "required", PK_ANY, "train.micro_batch", RULE, _) \
    X(grad_accum,         PK_INT,      PL_TRAIN_GRAD_ACCUM, "1", PK_ANY, "train.grad_accum", ROW_AT, grad_accum) \
    X(lr,                 PK_NUM,      PL_TRAIN_LR, "required", PK_ANY, "train.lr", ROW_AT, lr) \
    X(min_lr,             PK_NUM,      PL_TRAIN_MIN_LR, "0", PK_ANY, "train.min_lr", ROW, min_lr) \
    X(schedule,           PK_ENUM,     schedule, "cosine", PK_ANY, "train.schedule", ROW, schedule) \
    X(warmup,             PK_PERCENT,  PL_TRAIN_WARMUP_RATIO, "0", PK_ANY, "train.warmup_ratio|train.warmup_steps", RULE, _) \
    X(weight_decay,       PK_NUM,      PL_TRAIN_WEIGHT_DECAY, "0", PK_ANY, "train.weight_decay", ROW, weight_decay) \
    X(betas,              PK_FORM,     PL_TRAIN_BETA1, "[0.9, 0.999]", PK_ANY, "train.beta1|train.beta2", RULE, _) \
    X(eps,                PK_NUM,      PL_TRAIN_EPS, "1e-8", PK_ANY, "train.eps", ROW, adam_eps) \
    X(grad_clip,          PK_NUM,      PL_TRAIN_GRAD_CLIP, "1", PK_ANY, "train.grad_clip", ROW, grad_clip) \
    X(seed,               PK_INT64,    PL_TRAIN_SEED, "42", PK_ANY, "train.seed", RULE, _) \
    X(precision,          PK_ENUM,     precision, "bf16", PK_ANY, "train.precision", ROW_AT, precision) \
    X(master_weights,     PK_ENUM,     master_weights, "fp32", PK_LLMC, "train.master_weights", ROW_AT, master_weights) \
    X(optimizer_states,   PK_ENUM,     optimizer_states, "fp32", PK_LLMC, "train.optimizer_states", ROW_AT, optimizer_states) \
    X(fp8_lm_head,        PK_BOOL,     NONE, "", PK_LLMC, "train.fp8_lm_head", ROW_AT, fp8_lm_head) \
    X(fp8_backend,        PK_ENUM,     fp8_backend, "auto", PK_LF, "-", RULE, _) \
    X(shard,              PK_ENUM,     shard, "none", PK_ANY, "parallel.zero_stage", ROW_AT, shard) \
    X(recompute,          PK_ENUM,     recompute, "none", PK_ANY, "train.recompute", ROW_AT, recompute) \
    X(attention,          PK_ENUM,     attention, "flash", PK_ANY, "train.attention", ROW, attention) \
    X(deterministic,      PK_BOOL,     NONE, "", PK_ANY, "train.deterministic", RULE, _) \
    X(packing,            PK_BOOL,     NONE, "", PK_ANY, "data.packing", ROW, packing) \
    X(train_on_prompt,    PK_BOOL,     NONE, "false", PK_ANY, "data.train_on_prompt", RULE, _) \
    X(mask_history,       PK_BOOL,     NONE, "false", PK_ANY, "data.mask_history", RULE, _) \
    X(bad_records,        PK_ENUM,     bad_records, "fail", PK_ANY, "data.on_bad_record", ROW, bad_records) \
    X(mfu,                PK_PERCENT,  NONE, "", PK_ANY, "-", RULE, _) \
    X(bytes_per_token,    PK_NUM,      PL_KEY_TRAIN_BYTES_PER_TOKEN, "4", PK_ANY, "-", ROW, bytes_per_token) \
    X(backend,            PK_ENUM,     backend, "llmc", PK_ANY, "backend", ROW_AT, backend) \
    X(output,             PK_PATH,     NONE, "", PK_ANY, "output.dir", RULE, _) \
    X(checkpoint_every,   PK_STEPS,    PL_CKPT_EVERY_SECONDS, "30 min", PK_ANY, "checkpoint.every_seconds|checkpoint.every_steps", RULE, _) \
    X(checkpoint_keep,    PK_INT,      PL_CKPT_KEEP, "2", PK_ANY, "checkpoint.keep", ROW, checkpoint_keep) \
    X(method,             PK_ENUM,     method, "full", PK_ANY, "finetune.method", ROW_AT, method) \
    X(lora_rank,          PK_INT,      PL_FINETUNE_LORA_RANK, "8", PK_ANY, "finetune.lora_rank", ROW, lora_rank) \
    X(lora_alpha,         PK_INT,      PL_FINETUNE_LORA_ALPHA, "", PK_ANY, "finetune.lora_alpha", ROW, lora_alpha) \
    X(lora_dropout,       PK_NUM,      PL_FINETUNE_LORA_DROPOUT, "0", PK_ANY, "finetune.lora_dropout", RULE, _) \
    X(lora_target,        PK_FORM,     lora_module, "", PK_ANY, "finetune.lora_target", RULE, _) \
    X(dora,               PK_BOOL,     NONE, "false", PK_LF, "-", ROW, use_dora) \
    X(rslora,             PK_BOOL,     NONE, "false", PK_ANY, "finetune.rslora", ROW, use_rslora) \
    X(freeze_layers,      PK_INT,      PL_FINETUNE_FREEZE_LAYERS, "2", PK_ANY, "finetune.freeze_layers", ROW, freeze_layers) \
    X(quant_bits,         PK_INT,      PL_KEY_TRAIN_QUANT_BITS, "", PK_LF, "-", RULE, _) \
    X(quant_method,       PK_ENUM,     quant_method, "bnb", PK_LF, "-", ROW, quant_method) \
    X(offload,            PK_ENUM,     offload, "none", PK_ANY, "parallel.offload", ROW_AT, offload) \
    X(pref_loss,          PK_ENUM,     pref_loss, "sigmoid", PK_LF, "-", ROW_AT, pref_loss) \
    X(pref_beta,          PK_NUM,      PL_KEY_TRAIN_PREF_BETA, "0.1", PK_LF, "-", ROW, pref_beta) \
    X(pref_ftx,           PK_NUM,      PL_KEY_TRAIN_PREF_FTX, "0", PK_LF, "-", ROW, pref_ftx) \
    X(ref_model,          PK_REF,      NONE, "", PK_LF, "-", RULE, _) \
    X(val_size,           PK_NUM,      NONE, "0", PK_LF, "-", RULE, _) \
    X(eval_data,          PK_REFS,     NONE, "", PK_LF, "-", RULE, _) \
    X(eval_every,         PK_STEPS,    NONE, "", PK_LF, "-", RULE, _) \
    X(eval_batch,         PK_PER_GPU,  PL_TRAIN_MICRO_BATCH, "", PK_LF, "-", RULE, _) \
    X(tokenized_path,     PK_PATH,     NONE, "", PK_LF, "-", RULE, _) \
    X(data_shared_fs,     PK_BOOL,     NONE, "true", PK_LF, "-", ROW, data_shared_fs) \
    X(streaming,          PK_BOOL,     NONE, "false", PK_LF, "-", ROW_AT, streaming) \
    X(ddp_timeout,        PK_DURATION, NONE, "30 min", PK_LF, "-", RULE, _) \
    X(report_to,          PK_ENUM,     report_to, "none", PK_LF, "-", ROW, report_to) \
    X(run_name,           PK_STRING,   NONE, "", PK_LF, "-", RULE, _) \
    X(log_every,          PK_STEPS,    NONE, "1", PK_ANY, "output.log_every", RULE, _) \
    X(tokenize_rate,      PK_NUM,      PL_KEY_TRAIN_TOKENIZE_RATE, "", PK_LF, "-", ROW_AT, tokenize_rate) \
    X(mix_strategy,       PK_ENUM,     mix, "concat", PK_LF, "-", RULE, _) \
    X(interleave_probs,   PK_FORM,     NONE, "", PK_LF, "-", RULE, _) \
    X(max_samples,        PK_INT64,    PL_KEY_TRAIN_MAX_SAMPLES, "0", PK_LF, "-", ROW_AT, max_samples) \
    X(optim,              PK_ENUM,     optim, "adamw_torch", PK_LF, "-", RULE, _) \
    X(liger_kernel,       PK_BOOL,     NONE, "false", PK_LF, "-", ROW, liger_kernel) \
    X(neat_packing,       PK_BOOL,     NONE, "false", PK_LF, "-", ROW, neat_packing) \
    X(wsd_decay,          PK_PERCENT,  NONE, "10%", PK_LF, "-", RULE, _)

/* merge NAME { }: LLaMA-Factory's export of a LoRA run's adapter merged into
 * its base (llamafactory-cli export), a model directory a later run trains;
 * a job runs it (run = NAME). Not in plan.json: the merge job's YAML. */
#define PLAN_KEYS_MERGE(X) \
    X(adapter,         PK_REF,      NONE, "required", PK_ANY, "-", RULE, _) \
    X(model,           PK_REF,      NONE, "required", PK_ANY, "-", RULE, _) \
    X(output,          PK_PATH,     NONE, "required", PK_ANY, "-", RULE, _) \
    X(dtype,           PK_ENUM,     merge_dtype, "auto", PK_ANY, "-", ROW_AT, dtype) \
    X(device,          PK_ENUM,     merge_device, "cpu", PK_ANY, "-", ROW_AT, device) \
    X(shard_size,      PK_SIZE,     NONE, "5 GB", PK_ANY, "-", RULE, _) \
    X(legacy_format,   PK_BOOL,     NONE, "false", PK_ANY, "-", ROW, legacy_format)

/* job NAME { } */
#define PLAN_KEYS_JOB(X) \
    X(run,             PK_REF,      NONE, "required", PK_ANY, "-", RULE, _) \
    X(cluster,         PK_REF,      NONE, "required", PK_ANY, "slurm.cluster", RULE, _) \
    X(nodes,           PK_INT,      NONE, "required", PK_ANY, "parallel.nodes", RULE, _) \
    X(tasks,           PK_INT,      PL_KEY_JOB_TASKS, "", PK_ANY, "parallel.tasks_per_node", RULE, _) \
    X(time,            PK_DURATION, NONE, "required", PK_ANY, "slurm.time_limit_seconds", RULE, _) \
    X(mem,             PK_SIZE,     NONE, "", PK_ANY, "-", RULE, _) \
    X(cpus_per_task,   PK_INT,      PL_KEY_JOB_CPUS_PER_TASK, "", PK_ANY, "slurm.cpus_per_task", ROW_AT, cpus_per_task) \
    X(account,         PK_STRING,   NONE, "", PK_ANY, "-", RULE, _) \
    X(qos,             PK_STRING,   NONE, "", PK_ANY, "-", RULE, _) \
    X(logs,            PK_PATH,     NONE, "logs", PK_ANY, "-", RULE, _) \
    X(requeue,         PK_BOOL,     NONE, "true", PK_ANY, "slurm.requeue", ROW, requeue) \
    X(env,             PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _) \
    X(sbatch,          PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _) \
    X(setup,           PK_STRINGS,  NONE, "", PK_ANY, "-", RULE, _) \
    X(container,       PK_BLOCK,    NONE, "", PK_ANY, "-", RULE, _) \
    X(after,           PK_REF,      NONE, "", PK_ANY, "-", RULE, _) \
    X(profile,         PK_REF,      NONE, "", PK_ANY, "-", RULE, _)

/* Every block's list: NAME (PLAN_KEYS_<NAME>, PKB_<NAME>) and how the block
 * or sub-block is written. */
#define PLAN_KEY_BLOCKS(X) \
    X(CLUSTER,    "cluster") \
    X(KUBERNETES, "cluster.kubernetes") \
    X(SBATCH,     "sbatch") \
    X(CONTAINER,  "container") \
    X(GPU,        "gpu") \
    X(PROFILE,    "profile") \
    X(MODEL,      "model") \
    X(DATASET,    "dataset") \
    X(COLUMNS,    "dataset.columns") \
    X(TAGS,       "dataset.tags") \
    X(TRAIN,      "train") \
    X(MERGE,      "merge") \
    X(JOB,        "job")

typedef enum {
#define PLAN_KEY_BLOCK_ID(name, spelled) PKB_##name,
    PLAN_KEY_BLOCKS(PLAN_KEY_BLOCK_ID)
#undef PLAN_KEY_BLOCK_ID
    PKB_COUNT
} PlanKeyBlock;

/* The most keys of one block (the checker's key arrays are this long). */
#define PLAN_KEYS_MAX 128

typedef struct {
    const char *key;
    PlanKeyType type;
    const char *row;           /* "PL_TRAIN_LR", "shard", "NONE" */
    const char *dflt;
    PlanKeyBackends backends;
    const char *json;
    bool read_by_row;          /* READ ROW, ROW_AT or ROW_AT_VALUE */
} PlanKey;

#define PLAN_KEY_READ_RULE false
#define PLAN_KEY_READ_ROW true
#define PLAN_KEY_READ_ROW_AT true
#define PLAN_KEY_READ_ROW_AT_VALUE true
#define PLAN_KEY_ROW(key, type, row, dflt, backends, json, read, field) \
    {#key, type, #row, dflt, backends, json, PLAN_KEY_READ_##read},
#define PLAN_KEY_COUNT_ONE(key, type, row, dflt, backends, json, read, field) +1
#define PLAN_KEY_MEMBER(key, type, row, dflt, backends, json, read, field) char key;
/* Per block: its rows' table plan_keys_<BLOCK>, their count, and
 * PlanKeyRows_<BLOCK>, a struct of one char per row in row order, so that a
 * key's offset in it is its row's index (PLAN_KEY_INDEX) and a key that is no
 * row of the block does not compile. */
#define PLAN_KEY_TABLE(name, spelled) \
    static const PlanKey plan_keys_##name[] = {PLAN_KEYS_##name(PLAN_KEY_ROW)}; \
    enum { PLAN_KEYS_N_##name = 0 PLAN_KEYS_##name(PLAN_KEY_COUNT_ONE) }; \
    _Static_assert(PLAN_KEYS_N_##name <= PLAN_KEYS_MAX, "PLAN_KEYS_MAX"); \
    typedef struct { PLAN_KEYS_##name(PLAN_KEY_MEMBER) } PlanKeyRows_##name; \
    _Static_assert(sizeof(PlanKeyRows_##name) == PLAN_KEYS_N_##name, "one char per row");
PLAN_KEY_BLOCKS(PLAN_KEY_TABLE)
#undef PLAN_KEY_TABLE

/* The index of key KEY in block BLOCK's rows (plan_keys_<BLOCK>, the ok[] of
 * the checker's row reader): PLAN_KEY_INDEX(TRAIN, lora_rank). */
#define PLAN_KEY_INDEX(BLOCK, KEY) ((int)offsetof(PlanKeyRows_##BLOCK, KEY))
/* The `.llm` spelling of key KEY of block BLOCK, "lora_rank" for
 * PLAN_KEY(TRAIN, lora_rank); an address constant, so static tables may hold
 * it. It compiles only if KEY is a row of BLOCK: the rules never spell a key
 * the rows do not have. */
#define PLAN_KEY(BLOCK, KEY) (&#KEY[0 * sizeof(((PlanKeyRows_##BLOCK *)0)->KEY)])

typedef struct {
    const char *spelled;       /* "train", "dataset.columns" */
    const PlanKey *keys;
    int n;
} PlanKeyList;

static const PlanKeyList plan_key_lists[PKB_COUNT] = {
#define PLAN_KEY_LIST(name, spelled) {spelled, plan_keys_##name, PLAN_KEYS_N_##name},
    PLAN_KEY_BLOCKS(PLAN_KEY_LIST)
#undef PLAN_KEY_LIST
};

#endif
