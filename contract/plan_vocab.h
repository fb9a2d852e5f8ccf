/* plan_vocab.h — the plan's enumerated words: THE SINGLE SOURCE.
 *
 * One row per value of a concept: its C id, its `.llm` spelling (what llmc's
 * checker accepts, compiler/check/) and its plan.json spelling (what
 * llmc writes, compiler/emit/emit_plan_json.c, and llmc-train reads,
 * runtime/plan/plan.c). The C enum made from the rows is the one both programs
 * use, so a value means the same number on both sides of plan.json. Add a value
 * by adding its row; every reader and writer follows.
 *
 * Columns of PLAN_<CONCEPT>(X):  ID, LLM spelling, JSON spelling.
 * The first row is each concept's default where a plan leaves it unset.
 *
 * Each concept's count is a constant beside its enum, not a value of it, so a
 * switch over the enum that misses a row is a -Wswitch error.
 * Each concept also gets <name>_llm_names[] and <name>_json_names[]:
 * NULL-terminated, indexed by the enum (plan_vocab_find looks a word up), the
 * alias <name>_enum of its enum (PLAN_VOCAB_DEFINE), and
 * one line in PLAN_VOCAB_CONCEPTS at the end, which tests/vocab walks: every
 * row's `.llm` spelling through llmc into plan.json and back through
 * llmc-train's reader, and the tree for spellings written anywhere but here.
 *
 * What llmc-train itself runs of a concept, where that is less than every row
 * (the rest is backend = llamafactory's), is a mask of rows: LLMC_TRAIN_<CONCEPT>.
 */
#ifndef LLMC_CONTRACT_PLAN_VOCAB_H
#define LLMC_CONTRACT_PLAN_VOCAB_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define PLAN_VOCAB_ID(id, llm, json) id,
#define PLAN_VOCAB_LLM(id, llm, json) llm,
#define PLAN_VOCAB_JSON(id, llm, json) json,
#define PLAN_VOCAB_ONE(id, llm, json) 1 +
#define PLAN_VOCAB_BIT(id) (1u << (id))
/* A concept's enum Type, its alias name##_enum (the C type of a key whose
 * contract/plan_keys.h row names the concept: the checker's struct members
 * are declared from the rows, PLAN_ROW_MEMBERS in compiler/check/plan.h),
 * and its two spelling tables. */
#define PLAN_VOCAB_DEFINE(name, ROWS, Type) \
    typedef enum { ROWS(PLAN_VOCAB_ID) } Type; \
    typedef Type name##_enum; \
    static const char *const name##_llm_names[] = {ROWS(PLAN_VOCAB_LLM) NULL}; \
    static const char *const name##_json_names[] = {ROWS(PLAN_VOCAB_JSON) NULL};

/* model.arch: the decoder family (HF config.json's model_type, the same word).
 * llmc-train runs the first three (LLMC_TRAIN_ARCH); the others are for
 * backend = llamafactory only (the checker refuses them on llmc, with the reason). */
#define PLAN_ARCH(X) \
    X(ARCH_LLAMA,     "llama",     "llama") \
    X(ARCH_QWEN2,     "qwen2",     "qwen2") \
    X(ARCH_QWEN3,     "qwen3",     "qwen3") \
    X(ARCH_MISTRAL,   "mistral",   "mistral") \
    X(ARCH_GEMMA2,    "gemma2",    "gemma2") \
    X(ARCH_MIXTRAL,   "mixtral",   "mixtral") \
    X(ARCH_QWEN3_MOE, "qwen3_moe", "qwen3_moe")

PLAN_VOCAB_DEFINE(arch, PLAN_ARCH, ModelArch)
#define ARCH_COUNT (PLAN_ARCH(PLAN_VOCAB_ONE) 0)
/* The families runtime/model implements. */
#define LLMC_TRAIN_ARCH (PLAN_VOCAB_BIT(ARCH_LLAMA) | PLAN_VOCAB_BIT(ARCH_QWEN2) | PLAN_VOCAB_BIT(ARCH_QWEN3))
/* The families llmc-train implements are the first ARCH_LLMC_COUNT rows. */
#define ARCH_LLMC_COUNT 3

/* model.init (`init = scratch`): weights from the model directory, or random. */
#define PLAN_INIT(X) \
    X(INIT_PRETRAINED, "pretrained", "pretrained") \
    X(INIT_SCRATCH,    "scratch",    "scratch")

PLAN_VOCAB_DEFINE(init, PLAN_INIT, ModelInit)
#define INIT_COUNT (PLAN_INIT(PLAN_VOCAB_ONE) 0)

/* dataset.format (plan.json datasets[].format): LLaMA-Factory's formatting,
 * plus text for pre-training. */
#define PLAN_FORMAT(X) \
    X(FORMAT_ALPACA,   "alpaca",   "alpaca") \
    X(FORMAT_SHAREGPT, "sharegpt", "sharegpt") \
    X(FORMAT_TEXT,     "text",     "text")

PLAN_VOCAB_DEFINE(format, PLAN_FORMAT, DataFormat)
#define FORMAT_COUNT (PLAN_FORMAT(PLAN_VOCAB_ONE) 0)

/* train.stage (plan.json stage): LLaMA-Factory's stages. */
#define PLAN_STAGE(X) \
    X(STAGE_PT,  "pt",  "pt") \
    X(STAGE_SFT, "sft", "sft") \
    X(STAGE_RM,  "rm",  "rm") \
    X(STAGE_DPO, "dpo", "dpo") \
    X(STAGE_KTO, "kto", "kto")

PLAN_VOCAB_DEFINE(stage, PLAN_STAGE, TrainStage)
#define STAGE_COUNT (PLAN_STAGE(PLAN_VOCAB_ONE) 0)
/* The stages llmc-train trains. */
#define LLMC_TRAIN_STAGE (PLAN_VOCAB_BIT(STAGE_PT) | PLAN_VOCAB_BIT(STAGE_SFT))

/* train.method (plan.json finetune.method): LLaMA-Factory's finetuning_type;
 * qlora = lora on a quantised frozen base. */
#define PLAN_METHOD(X) \
    X(METHOD_FULL,   "full",   "full") \
    X(METHOD_FREEZE, "freeze", "freeze") \
    X(METHOD_LORA,   "lora",   "lora") \
    X(METHOD_QLORA,  "qlora",  "qlora")

PLAN_VOCAB_DEFINE(method, PLAN_METHOD, FinetuneMethod)
#define METHOD_COUNT (PLAN_METHOD(PLAN_VOCAB_ONE) 0)

/* train.lora_target (plan.json finetune.lora_target): the linear layers of a
 * llama/qwen2/qwen3 decoder layer LoRA can adapt, by their HF module names (also
 * PEFT's target_modules), in the order of runtime/model's LoRA targets. */
#define PLAN_LORA_MODULE(X) \
    X(LORA_Q,    "q_proj",    "q_proj") \
    X(LORA_K,    "k_proj",    "k_proj") \
    X(LORA_V,    "v_proj",    "v_proj") \
    X(LORA_O,    "o_proj",    "o_proj") \
    X(LORA_GATE, "gate_proj", "gate_proj") \
    X(LORA_UP,   "up_proj",   "up_proj") \
    X(LORA_DOWN, "down_proj", "down_proj")

PLAN_VOCAB_DEFINE(lora_module, PLAN_LORA_MODULE, LoraModule)
#define LORA_TARGETS (PLAN_LORA_MODULE(PLAN_VOCAB_ONE) 0)

/* train.precision: bf16/fp16 mixed precision (16-bit weights, gradients and
 * activations; fp32 master weights and AdamW moments), fp32, pure_bf16:
 * LLaMA-Factory's pure_bf16, everything bf16 (no fp32 copy; torch's AdamW
 * keeps m and v in the parameter dtype), backend = llamafactory without
 * DeepSpeed ZeRO only (the checker); and fp8: bf16 mixed precision whose
 * projection GEMMs (qkv, o, gate_up, down: forward, input and weight
 * gradients) run in FP8 with per-tensor scales (llmc CUDA backend: E4M3
 * weights and activations, E5M2 gradients; LLaMA-Factory: its fp8 key), on
 * GPUs with FP8 tensor cores (the checker, the catalogue's FP8 peak). */
#define PLAN_PRECISION(X) \
    X(PREC_BF16,      "bf16",      "bf16") \
    X(PREC_FP16,      "fp16",      "fp16") \
    X(PREC_FP32,      "fp32",      "fp32") \
    X(PREC_PURE_BF16, "pure_bf16", "pure_bf16") \
    X(PREC_FP8,       "fp8",       "fp8")

PLAN_VOCAB_DEFINE(precision, PLAN_PRECISION, Precision)
#define PREC_COUNT (PLAN_PRECISION(PLAN_VOCAB_ONE) 0)
/* The precisions llmc-train reads (fp8: the CUDA backend alone runs it; the
 * CPU backend refuses it, contract/backend_caps.h FP8). */
#define LLMC_TRAIN_PRECISION (PLAN_VOCAB_BIT(PREC_BF16) | PLAN_VOCAB_BIT(PREC_FP16) | PLAN_VOCAB_BIT(PREC_FP32) | \
                              PLAN_VOCAB_BIT(PREC_FP8))

/* train.master_weights (plan.json train.master_weights): how the llmc trainer
 * keeps the fp32 master copy of bf16/fp16/fp8 mixed precision: whole (4 bytes
 * a trained parameter), or split: the bf16 weight is the master's high half
 * and only the 16 dropped bits are kept beside it (2 bytes; exact, the same
 * fp32 values; runtime/cuda/master_split.h). The CPU backend trains fp32
 * weights, which are their own master: split is the same run there.
 * backend = llmc only, not with offload (the checker, backend_caps.h). */
#define PLAN_MASTER_WEIGHTS(X) \
    X(MASTER_FP32,  "fp32",  "fp32") \
    X(MASTER_SPLIT, "split", "split")

PLAN_VOCAB_DEFINE(master_weights, PLAN_MASTER_WEIGHTS, MasterWeights)
#define MASTER_COUNT (PLAN_MASTER_WEIGHTS(PLAN_VOCAB_ONE) 0)

/* train.optimizer_states (plan.json train.optimizer_states): AdamW's m and v
 * in fp32 (8 bytes a trained parameter) or bf16 (4 bytes), updated in fp32
 * and stored rounded stochastically (contract/bf16_round.h). backend = llmc
 * only (LLaMA-Factory's nearest: precision = pure_bf16). */
#define PLAN_OPTIM_STATES(X) \
    X(OSTATES_FP32, "fp32", "fp32") \
    X(OSTATES_BF16, "bf16", "bf16")

PLAN_VOCAB_DEFINE(optimizer_states, PLAN_OPTIM_STATES, OptimStates)
#define OSTATES_COUNT (PLAN_OPTIM_STATES(PLAN_VOCAB_ONE) 0)

/* train.fp8_backend (LLaMA-Factory's Fp8Arguments.fp8_backend, with
 * precision = fp8): which library runs its FP8 linears. auto and torchao:
 * torchao's Float8Linear (rowwise recipe); te: Transformer Engine
 * (train/fp8_utils.py create_fp8_kwargs). backend = llamafactory only. */
#define PLAN_FP8_BACKEND(X) \
    X(FP8B_AUTO,    "auto",    "auto") \
    X(FP8B_TORCHAO, "torchao", "torchao") \
    X(FP8B_TE,      "te",      "te")

PLAN_VOCAB_DEFINE(fp8_backend, PLAN_FP8_BACKEND, Fp8Backend)
#define FP8B_COUNT (PLAN_FP8_BACKEND(PLAN_VOCAB_ONE) 0)

/* train.shard: the ZeRO stage. plan.json writes the number (parallel.zero_stage),
 * which is the enum's value; the JSON column is the word llmc's readers print. */
#define PLAN_SHARD(X) \
    X(SHARD_NONE,  "none",  "none") \
    X(SHARD_ZERO1, "zero1", "zero1") \
    X(SHARD_ZERO2, "zero2", "zero2") \
    X(SHARD_ZERO3, "zero3", "zero3")

PLAN_VOCAB_DEFINE(shard, PLAN_SHARD, ShardStage)
#define SHARD_COUNT (PLAN_SHARD(PLAN_VOCAB_ONE) 0)

/* train.recompute: what the backward pass recomputes instead of keeping. */
#define PLAN_RECOMPUTE(X) \
    X(RECOMPUTE_NONE,      "none",      "none") \
    X(RECOMPUTE_SELECTIVE, "selective", "selective") \
    X(RECOMPUTE_FULL,      "full",      "full")

PLAN_VOCAB_DEFINE(recompute, PLAN_RECOMPUTE, Recompute)
#define RECOMPUTE_COUNT (PLAN_RECOMPUTE(PLAN_VOCAB_ONE) 0)

/* train.attention: fused (flash) or materialised-score (eager) attention. */
#define PLAN_ATTENTION(X) \
    X(ATTN_FLASH, "flash", "flash") \
    X(ATTN_EAGER, "eager", "eager")

PLAN_VOCAB_DEFINE(attention, PLAN_ATTENTION, AttentionKind)
#define ATTN_COUNT (PLAN_ATTENTION(PLAN_VOCAB_ONE) 0)

/* train.schedule: the learning-rate curve after warmup. */
#define PLAN_SCHEDULE(X) \
    X(SCHED_COSINE,   "cosine",   "cosine") \
    X(SCHED_LINEAR,   "linear",   "linear") \
    X(SCHED_CONSTANT, "constant", "constant") \
    X(SCHED_WSD,      "wsd",      "wsd")

PLAN_VOCAB_DEFINE(schedule, PLAN_SCHEDULE, LrScheduleKind)
#define SCHED_COUNT (PLAN_SCHEDULE(PLAN_VOCAB_ONE) 0)
/* The schedules runtime/model implements (wsd: backend = llamafactory only). */
#define LLMC_TRAIN_SCHEDULE (PLAN_VOCAB_BIT(SCHED_COSINE) | PLAN_VOCAB_BIT(SCHED_LINEAR) | PLAN_VOCAB_BIT(SCHED_CONSTANT))

/* train.offload (plan.json parallel.offload): what moves to host memory. */
#define PLAN_OFFLOAD(X) \
    X(OFFLOAD_NONE,      "none",      "none") \
    X(OFFLOAD_OPTIMIZER, "optimizer", "optimizer") \
    X(OFFLOAD_ALL,       "all",       "all")

PLAN_VOCAB_DEFINE(offload, PLAN_OFFLOAD, OffloadKind)
#define OFFLOAD_COUNT (PLAN_OFFLOAD(PLAN_VOCAB_ONE) 0)

/* train.mix_strategy (LLaMA-Factory's data_args.mix_strategy): how several
 * datasets make one: concatenated, or interleaved (stopping at the first
 * exhausted, the last, or after one pass). backend = llamafactory only. */
#define PLAN_MIX(X) \
    X(MIX_CONCAT,           "concat",           "concat") \
    X(MIX_INTERLEAVE_UNDER, "interleave_under", "interleave_under") \
    X(MIX_INTERLEAVE_OVER,  "interleave_over",  "interleave_over") \
    X(MIX_INTERLEAVE_ONCE,  "interleave_once",  "interleave_once")

PLAN_VOCAB_DEFINE(mix, PLAN_MIX, MixStrategy)
#define MIX_COUNT (PLAN_MIX(PLAN_VOCAB_ONE) 0)

/* train.optim (LLaMA-Factory: transformers' TrainingArguments.optim,
 * OptimizerNames): the optimizer and where its states live. backend =
 * llamafactory only; the llmc trainer runs its own AdamW. */
#define PLAN_OPTIM(X) \
    X(OPTIM_ADAMW_TORCH,       "adamw_torch",       "adamw_torch") \
    X(OPTIM_ADAMW_TORCH_FUSED, "adamw_torch_fused", "adamw_torch_fused") \
    X(OPTIM_ADAMW_8BIT,        "adamw_8bit",        "adamw_8bit") \
    X(OPTIM_PAGED_ADAMW_8BIT,  "paged_adamw_8bit",  "paged_adamw_8bit") \
    X(OPTIM_PAGED_ADAMW_32BIT, "paged_adamw_32bit", "paged_adamw_32bit") \
    X(OPTIM_ADAFACTOR,         "adafactor",         "adafactor")

PLAN_VOCAB_DEFINE(optim, PLAN_OPTIM, OptimKind)
#define OPTIM_COUNT (PLAN_OPTIM(PLAN_VOCAB_ONE) 0)

/* train.pref_loss (LLaMA-Factory's FinetuningArguments.pref_loss, stage =
 * dpo): the preference loss; orpo and simpo need no reference model.
 * backend = llamafactory only; the JSON column is LLaMA-Factory's word. */
#define PLAN_PREF_LOSS(X) \
    X(PREF_SIGMOID,  "sigmoid",  "sigmoid") \
    X(PREF_HINGE,    "hinge",    "hinge") \
    X(PREF_IPO,      "ipo",      "ipo") \
    X(PREF_KTO_PAIR, "kto_pair", "kto_pair") \
    X(PREF_ORPO,     "orpo",     "orpo") \
    X(PREF_SIMPO,    "simpo",    "simpo")

PLAN_VOCAB_DEFINE(pref_loss, PLAN_PREF_LOSS, PrefLoss)
#define PREF_COUNT (PLAN_PREF_LOSS(PLAN_VOCAB_ONE) 0)

/* train.quant_method (LLaMA-Factory's quantization_method, method = qlora):
 * the library that quantises the frozen base. backend = llamafactory only. */
#define PLAN_QUANT_METHOD(X) \
    X(QUANT_BNB,  "bnb",  "bnb") \
    X(QUANT_HQQ,  "hqq",  "hqq") \
    X(QUANT_EETQ, "eetq", "eetq")

PLAN_VOCAB_DEFINE(quant_method, PLAN_QUANT_METHOD, QuantMethod)
#define QUANT_COUNT (PLAN_QUANT_METHOD(PLAN_VOCAB_ONE) 0)

/* train.report_to (transformers' TrainingArguments.report_to): where
 * LLaMA-Factory also logs its metrics. backend = llamafactory only. */
#define PLAN_REPORT_TO(X) \
    X(REPORT_NONE,        "none",        "none") \
    X(REPORT_TENSORBOARD, "tensorboard", "tensorboard") \
    X(REPORT_WANDB,       "wandb",       "wandb")

PLAN_VOCAB_DEFINE(report_to, PLAN_REPORT_TO, ReportTo)
#define REPORT_COUNT (PLAN_REPORT_TO(PLAN_VOCAB_ONE) 0)

/* merge.device (LLaMA-Factory's export_device): where the adapter is merged,
 * in host memory or on the node's GPUs. */
#define PLAN_MERGE_DEVICE(X) \
    X(MERGE_DEVICE_CPU,  "cpu",  "cpu") \
    X(MERGE_DEVICE_AUTO, "auto", "auto")

PLAN_VOCAB_DEFINE(merge_device, PLAN_MERGE_DEVICE, MergeDevice)
#define MERGE_DEVICE_COUNT (PLAN_MERGE_DEVICE(PLAN_VOCAB_ONE) 0)

/* merge.dtype (LLaMA-Factory's infer_dtype): the dtype the merged model is
 * saved in; auto: the base's torch_dtype (fp32 saved as bf16). The JSON column
 * is LLaMA-Factory's word, which the merge job's YAML holds. */
#define PLAN_MERGE_DTYPE(X) \
    X(MERGE_DTYPE_AUTO, "auto", "auto") \
    X(MERGE_DTYPE_BF16, "bf16", "bfloat16") \
    X(MERGE_DTYPE_FP16, "fp16", "float16") \
    X(MERGE_DTYPE_FP32, "fp32", "float32")

PLAN_VOCAB_DEFINE(merge_dtype, PLAN_MERGE_DTYPE, MergeDtype)
#define MERGE_DTYPE_COUNT (PLAN_MERGE_DTYPE(PLAN_VOCAB_ONE) 0)

/* container.runtime (a cluster's or job's container { }): how the job script
 * starts the trainer in an image, through pyxis (srun --container-image) or
 * Apptainer (apptainer exec). */
#define PLAN_CONTAINER_RUNTIME(X) \
    X(CONTAINER_PYXIS,     "pyxis",     "pyxis") \
    X(CONTAINER_APPTAINER, "apptainer", "apptainer")

PLAN_VOCAB_DEFINE(container_runtime, PLAN_CONTAINER_RUNTIME, ContainerRuntime)
#define CONTAINER_RUNTIME_COUNT (PLAN_CONTAINER_RUNTIME(PLAN_VOCAB_ONE) 0)

/* sbatch.mail_type: Slurm's mail events (sbatch --mail-type), a list of them. */
#define PLAN_MAIL_TYPE(X) \
    X(MAIL_NONE,           "NONE",           "NONE") \
    X(MAIL_BEGIN,          "BEGIN",          "BEGIN") \
    X(MAIL_END,            "END",            "END") \
    X(MAIL_FAIL,           "FAIL",           "FAIL") \
    X(MAIL_REQUEUE,        "REQUEUE",        "REQUEUE") \
    X(MAIL_ALL,            "ALL",            "ALL") \
    X(MAIL_INVALID_DEPEND, "INVALID_DEPEND", "INVALID_DEPEND") \
    X(MAIL_STAGE_OUT,      "STAGE_OUT",      "STAGE_OUT") \
    X(MAIL_TIME_LIMIT,     "TIME_LIMIT",     "TIME_LIMIT") \
    X(MAIL_TIME_LIMIT_90,  "TIME_LIMIT_90",  "TIME_LIMIT_90") \
    X(MAIL_TIME_LIMIT_80,  "TIME_LIMIT_80",  "TIME_LIMIT_80") \
    X(MAIL_TIME_LIMIT_50,  "TIME_LIMIT_50",  "TIME_LIMIT_50") \
    X(MAIL_ARRAY_TASKS,    "ARRAY_TASKS",    "ARRAY_TASKS")

PLAN_VOCAB_DEFINE(mail_type, PLAN_MAIL_TYPE, MailType)
#define MAIL_TYPE_COUNT (PLAN_MAIL_TYPE(PLAN_VOCAB_ONE) 0)

/* cluster.kubernetes.tolerations: the effect of a taint the slurmd pods
 * tolerate, the EFFECT of each "KEY[=VALUE]:EFFECT" (as kubectl taint
 * writes taints; the pod spec's word, which the JSON column is). */
#define PLAN_TAINT_EFFECT(X) \
    X(TAINT_NO_SCHEDULE,        "NoSchedule",       "NoSchedule") \
    X(TAINT_PREFER_NO_SCHEDULE, "PreferNoSchedule", "PreferNoSchedule") \
    X(TAINT_NO_EXECUTE,         "NoExecute",        "NoExecute")

PLAN_VOCAB_DEFINE(taint_effect, PLAN_TAINT_EFFECT, TaintEffect)
#define TAINT_EFFECT_COUNT (PLAN_TAINT_EFFECT(PLAN_VOCAB_ONE) 0)

/* cluster.slurm: who runs Slurm, the hosts themselves or an operator on
 * Kubernetes (Slinky's slurm-operator, Nebius' Soperator), with its version. */
#define PLAN_SLURM(X) \
    X(SLURM_HOSTS,     "hosts",     "hosts") \
    X(SLURM_SLINKY,    "slinky",    "slinky") \
    X(SLURM_SOPERATOR, "soperator", "soperator")

PLAN_VOCAB_DEFINE(slurm, PLAN_SLURM, SlurmRuntime)
#define SLURM_COUNT (PLAN_SLURM(PLAN_VOCAB_ONE) 0)

/* cluster.network_kind: the inter-node fabric, for the estimate's
 * collectives (RoCE: Ethernet's congestion control costs some bandwidth). */
#define PLAN_NETWORK_KIND(X) \
    X(NETWORK_INFINIBAND, "infiniband", "infiniband") \
    X(NETWORK_ROCE,       "roce",       "roce")

PLAN_VOCAB_DEFINE(network_kind, PLAN_NETWORK_KIND, NetworkKind)
#define NETWORK_KIND_COUNT (PLAN_NETWORK_KIND(PLAN_VOCAB_ONE) 0)

/* cluster.gpu_link: the link between a node's GPUs by name, for the
 * estimate's collectives (or a bandwidth, NUMBER GBps). Each row's bandwidth
 * is compiler/check/check_cluster.c's gpu_link_rates[], indexed by this enum. */
#define PLAN_GPU_LINK(X) \
    X(GPU_LINK_NVLINK3, "nvlink3", "nvlink3") \
    X(GPU_LINK_NVLINK4, "nvlink4", "nvlink4") \
    X(GPU_LINK_NVLINK5, "nvlink5", "nvlink5") \
    X(GPU_LINK_PCIE4,   "pcie4",   "pcie4") \
    X(GPU_LINK_PCIE5,   "pcie5",   "pcie5")

PLAN_VOCAB_DEFINE(gpu_link, PLAN_GPU_LINK, GpuLink)
#define GPU_LINK_COUNT (PLAN_GPU_LINK(PLAN_VOCAB_ONE) 0)

/* cluster.host_link: a GPU's link to host memory by name (DeepSpeed
 * offload's path): PCIe 4.0 / 5.0 x16, NVLink-C2C (GH200); or a bandwidth.
 * Each row's bandwidth is check_cluster.c's host_link_rates[]. */
#define PLAN_HOST_LINK(X) \
    X(HOST_LINK_PCIE4, "pcie4", "pcie4") \
    X(HOST_LINK_PCIE5, "pcie5", "pcie5") \
    X(HOST_LINK_C2C,   "c2c",   "c2c")

PLAN_VOCAB_DEFINE(host_link, PLAN_HOST_LINK, HostLink)
#define HOST_LINK_COUNT (PLAN_HOST_LINK(PLAN_VOCAB_ONE) 0)

/* gpu.vendor: whose GPU a gpu block describes. */
#define PLAN_GPU_VENDOR(X) \
    X(VENDOR_NVIDIA, "nvidia", "nvidia") \
    X(VENDOR_AMD,    "amd",    "amd")

PLAN_VOCAB_DEFINE(vendor, PLAN_GPU_VENDOR, GpuVendor)
#define VENDOR_COUNT (PLAN_GPU_VENDOR(PLAN_VOCAB_ONE) 0)

/* train.backend (plan.json backend): which trainer runs the plan. */
#define PLAN_BACKEND(X) \
    X(BACKEND_LLMC,         "llmc",         "llmc") \
    X(BACKEND_LLAMAFACTORY, "llamafactory", "llamafactory")

/* (PlanBackend: the trainer a plan names; not llmc-train's TrainBackend, the
 * training loop's CPU or CUDA backend, runtime/train/train_loop.h) */
PLAN_VOCAB_DEFINE(backend, PLAN_BACKEND, PlanBackend)
#define BACKEND_COUNT (PLAN_BACKEND(PLAN_VOCAB_ONE) 0)

/* train.bad_records (plan.json data.on_bad_record): a record prepare cannot
 * read stops it, or is skipped and counted. */
#define PLAN_BAD_RECORDS(X) \
    X(BADREC_FAIL, "fail", "fail") \
    X(BADREC_SKIP, "skip", "skip")

PLAN_VOCAB_DEFINE(bad_records, PLAN_BAD_RECORDS, BadRecordPolicy)
#define BADREC_COUNT (PLAN_BAD_RECORDS(PLAN_VOCAB_ONE) 0)

/* Every concept above: X(name, PLAN_ROWS, .llm key, plan.json path, rows
 * llmc-train reads). The plan.json path is where llmc writes the JSON spelling
 * ("-": not written as a word, see the concept); llmc-train refuses a row
 * outside the last column, naming the ones it takes. */
#define PLAN_VOCAB_ALL_ROWS (~0u)
#define PLAN_VOCAB_CONCEPTS(X) \
    X(arch,        PLAN_ARCH,        "model.arch",        "model.arch",             LLMC_TRAIN_ARCH) \
    X(init,        PLAN_INIT,        "model.init",        "model.init",             PLAN_VOCAB_ALL_ROWS) \
    X(format,      PLAN_FORMAT,      "dataset.format",    "datasets[].format",      PLAN_VOCAB_ALL_ROWS) \
    X(stage,       PLAN_STAGE,       "train.stage",       "stage",                  LLMC_TRAIN_STAGE) \
    X(method,      PLAN_METHOD,      "train.method",      "finetune.method",        PLAN_VOCAB_ALL_ROWS) \
    X(lora_module, PLAN_LORA_MODULE, "train.lora_target", "finetune.lora_target[]", PLAN_VOCAB_ALL_ROWS) \
    X(precision,   PLAN_PRECISION,   "train.precision",   "train.precision",        LLMC_TRAIN_PRECISION) \
    X(master_weights,   PLAN_MASTER_WEIGHTS, "train.master_weights",   "train.master_weights",   PLAN_VOCAB_ALL_ROWS) \
    X(optimizer_states, PLAN_OPTIM_STATES,   "train.optimizer_states", "train.optimizer_states", PLAN_VOCAB_ALL_ROWS) \
    X(shard,       PLAN_SHARD,       "train.shard",       "-",                      PLAN_VOCAB_ALL_ROWS) \
    X(recompute,   PLAN_RECOMPUTE,   "train.recompute",   "train.recompute",        PLAN_VOCAB_ALL_ROWS) \
    X(attention,   PLAN_ATTENTION,   "train.attention",   "train.attention",        PLAN_VOCAB_ALL_ROWS) \
    X(schedule,    PLAN_SCHEDULE,    "train.schedule",    "train.schedule",         LLMC_TRAIN_SCHEDULE) \
    X(offload,     PLAN_OFFLOAD,     "train.offload",     "parallel.offload",       PLAN_VOCAB_ALL_ROWS) \
    X(backend,     PLAN_BACKEND,     "train.backend",     "backend",                PLAN_VOCAB_ALL_ROWS) \
    X(bad_records, PLAN_BAD_RECORDS, "train.bad_records", "data.on_bad_record",     PLAN_VOCAB_ALL_ROWS)

/* The concepts plan.json does not hold, nor llmc-train read (LLaMA-Factory's
 * YAML, its merge job's, the job script or the estimate take them):
 * X(name, PLAN_ROWS, .llm key). The checker reads their keys by these rows as
 * it reads the concepts above. (The chat templates' names, `template`, are
 * one table with what each template is for and writes:
 * compiler/check/chat_templates.c, which tests/vocab reads as their one place.) */
#define PLAN_VOCAB_LLM_CONCEPTS(X) \
    X(slurm,        PLAN_SLURM,        "cluster.slurm") \
    X(network_kind, PLAN_NETWORK_KIND, "cluster.network_kind") \
    X(vendor,       PLAN_GPU_VENDOR,   "gpu.vendor") \
    X(fp8_backend,  PLAN_FP8_BACKEND,  "train.fp8_backend") \
    X(mix,          PLAN_MIX,          "train.mix_strategy") \
    X(optim,        PLAN_OPTIM,        "train.optim") \
    X(pref_loss,    PLAN_PREF_LOSS,    "train.pref_loss") \
    X(quant_method, PLAN_QUANT_METHOD, "train.quant_method") \
    X(report_to,    PLAN_REPORT_TO,    "train.report_to") \
    X(merge_device, PLAN_MERGE_DEVICE, "merge.device") \
    X(merge_dtype,  PLAN_MERGE_DTYPE,  "merge.dtype") \
    X(gpu_link,     PLAN_GPU_LINK,     "cluster.gpu_link") \
    X(host_link,    PLAN_HOST_LINK,    "cluster.host_link") \
    X(container_runtime, PLAN_CONTAINER_RUNTIME, "container.runtime") \
    X(mail_type,    PLAN_MAIL_TYPE,    "sbatch.mail_type") \
    X(taint_effect, PLAN_TAINT_EFFECT, "cluster.kubernetes.tolerations")

/* A mask holds a bit per row (PLAN_VOCAB_BIT): at most 32 rows a concept. */
#ifndef __cplusplus
#define PLAN_VOCAB_FITS_MASK(name, ROWS, key, path, mask) \
    _Static_assert((ROWS(PLAN_VOCAB_ONE) 0) <= 32, #name ": more rows than a mask of PLAN_VOCAB_BIT holds");
PLAN_VOCAB_CONCEPTS(PLAN_VOCAB_FITS_MASK)
#endif

/* The index of word in a NULL-terminated spelling table; -1 if it is none of them. */
static inline int plan_vocab_find(const char *const *names, const char *word)
{
    for (int i = 0; word && names[i]; i++)
        if (strcmp(names[i], word) == 0) return i;
    return -1;
}

/* names[v], or "?" for a value outside the table (a corrupted enum). */
static inline const char *plan_vocab_name(const char *const *names, int count, int v)
{
    return v >= 0 && v < count ? names[v] : "?";
}

/* The words of the rows in accept (a mask of PLAN_VOCAB_BIT; PLAN_VOCAB_ALL_ROWS),
 * for a message: "a, b or c" into buf. */
static inline const char *plan_vocab_list(char *buf, size_t len, const char *const *names, unsigned accept)
{
    int n = 0, k = 0;
    for (int i = 0; names[i]; i++) n += (accept & PLAN_VOCAB_BIT(i)) != 0;
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; names[i] && at < len; i++) {
        if (!(accept & PLAN_VOCAB_BIT(i))) continue;
        int w = snprintf(buf + at, len - at, "%s%s", k == 0 ? "" : k == n - 1 ? " or " : ", ", names[i]);
        if (w < 0) break;
        at += (size_t)w;
        k++;
    }
    return buf;
}

#endif
