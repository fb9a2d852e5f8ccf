/* plan.h — the typed plan: what the checker builds from the AST, and the only
 * thing the estimator and the emitters read. Every value keeps the source range
 * it came from (field `*_at`), so later stages can point at the line.
 *
 * Memory: everything hangs off Plan's arena and is freed by plan_free().
 * Units are normalised here: sizes in bytes, durations in seconds,
 * percentages as fractions (3% -> 0.03).
 */
#ifndef LLMC_PLAN_H
#define LLMC_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include "diag.h"
#include "plan_vocab.h"   /* contract/: the enums plan.json shares with llmc-train */
#include "plan_keys.h"    /* contract/: the keys of each block, the members their rows read into */

/* A block struct's members that its rows of contract/plan_keys.h read (READ
 * ROW, ROW_AT, ROW_AT_VALUE; check_row_keys), declared from the rows:
 * PLAN_KEYS_TRAIN(PLAN_ROW_MEMBER) is `int context; SrcRange context_at;
 * double epochs; ...`. The C type is the TYPE column's (an ENUM's: its
 * concept's enum, <concept>_enum of contract/plan_vocab.h), and the ROW_AT
 * rows add FIELD_at; a RULE row declares nothing (its rules' members are
 * written out in the struct). A block's expansion comes after its `name`
 * and `at`, which every block struct starts with (compiler/check/check.c). */
#define PLAN_ROW_MEMBER(key, type, row, dflt, backends, json, read, field) PLAN_ROW_MEMBER_##read(type, row, field)
#define PLAN_ROW_MEMBER_RULE(type, row, field)
#define PLAN_ROW_MEMBER_ROW(type, row, field) PLAN_ROW_CTYPE_##type(row) field;
#define PLAN_ROW_MEMBER_ROW_AT(type, row, field) PLAN_ROW_CTYPE_##type(row) field; SrcRange field##_at;
#define PLAN_ROW_MEMBER_ROW_AT_VALUE PLAN_ROW_MEMBER_ROW_AT
#define PLAN_ROW_CTYPE_PK_INT(row) int
#define PLAN_ROW_CTYPE_PK_INT64(row) int64_t
#define PLAN_ROW_CTYPE_PK_NUM(row) double
#define PLAN_ROW_CTYPE_PK_BOOL(row) bool
#define PLAN_ROW_CTYPE_PK_SIZE(row) uint64_t
#define PLAN_ROW_CTYPE_PK_ENUM(row) row##_enum

/* ---- built-in GPU catalogue (compiler/check/gpu_catalog.c) ---- */
typedef struct {
    const char *name;        /* as written in plans: "H100_80GB" */
    const char *gres_type;   /* Slurm GRES type: "h100_80gb" (lower case, used in
                                slurm.conf, gres.conf and --gres alike) */
    double mem_bytes;        /* HBM capacity, bytes */
    double usable_bytes;     /* what a process can allocate (capacity minus driver/ECC reserve) */
    double bf16_tflops;      /* dense bf16 tensor peak, TFLOP/s */
    double hbm_tbps;         /* memory bandwidth, TB/s */
    double default_mfu;      /* achieved model-FLOPs utilisation assumed when the plan sets none */
    double fp8_tflops;       /* dense FP8 (E4M3/E5M2) tensor peak, TFLOP/s; 0: no FP8 tensor cores */
} GpuSpec;

/* The usual node built around a part (HGX/DGX): the cluster block's defaults
 * for `gpu_link` and `network` (docs/estimator.md, "Fabric"). */
typedef struct {
    double link_bytes_per_s; /* GPU-to-GPU inside a node, per GPU, both directions together
                                (NVIDIA's figure: NVLink 4 = 900 GB/s) */
    int nics;                /* network adapters per node */
    double nic_bits_per_s;   /* per adapter, one direction (400 Gb/s NDR) */
    const char *link_name;   /* "NVLink 4", "PCIe 4.0" */
    double host_link_bytes_per_s; /* GPU to host memory, per GPU, both directions together as
                                     quoted (PCIe 5.0 x16 = 128 GB/s): DeepSpeed offload's path */
    const char *host_link_name;   /* "PCIe 5.0", "NVLink-C2C" */
} GpuFabric;

const GpuSpec *gpu_catalog_find(const char *name);
const GpuFabric *gpu_catalog_fabric(const GpuSpec *gpu);   /* NULL for none */
/* A catalogue entry from AMD (false for anything else, declared GPUs included:
 * the checker sets PlanCluster.gpu_amd from those). */
bool gpu_catalog_is_amd(const GpuSpec *gpu);
int gpu_catalog_count(void);
const GpuSpec *gpu_catalog_at(int i);

/* ---- enums ----
 * Every enum a key names is contract/plan_vocab.h's rows: those plan.json
 * carries (ModelArch, TrainStage, Precision, ...), shared with llmc-train, and
 * those only llmc's outputs take (PrefLoss, MergeDtype, ContainerRuntime,
 * ...: PLAN_VOCAB_LLM_CONCEPTS); all but the chat templates below. */
/* Chat templates: their names are one table with what each template is for
 * and writes, compiler/check/chat_templates.c (which tests/vocab reads as the
 * names' one place), one entry per value, in this order. */
typedef enum {
    TEMPLATE_NONE, TEMPLATE_QWEN, TEMPLATE_LLAMA3, TEMPLATE_DEFAULT, TEMPLATE_EMPTY, TEMPLATE_QWEN3,
    TEMPLATE_QWEN3_NOTHINK, TEMPLATE_LLAMA2, TEMPLATE_MISTRAL, TEMPLATE_GEMMA, TEMPLATE_GEMMA3,
    TEMPLATE_DEEPSEEK, TEMPLATE_DEEPSEEK3, TEMPLATE_DEEPSEEKR1, TEMPLATE_GLM4, TEMPLATE_PHI, TEMPLATE_PHI4,
    TEMPLATE_GEMMA2, TEMPLATE_MISTRAL_SMALL,
    TEMPLATE_COUNT
} ChatTemplate;

/* ---- site settings: `env { }`, `sbatch { }`, `setup = [ ]`, `container { }` in a
 * cluster or job block (docs/language.md, "Site settings"). A job's own settings
 * are merged over its cluster's by the checker into the job's `site`. ---- */
typedef struct { const char *name, *value; SrcRange at; } PlanEnvVar;
typedef struct {
    /* read by their rows (PLAN_ROW_MEMBER): sbatch's switches and gpus_per_task
     * (--switches=N, --gpus-per-task=N; 0 unset), the container's runtime */
    PLAN_KEYS_SBATCH(PLAN_ROW_MEMBER)
    PLAN_KEYS_CONTAINER(PLAN_ROW_MEMBER)
    PlanEnvVar *env; int nenv;              /* exported before the launch, in this order */
    const char **setup; int nsetup; SrcRange setup_at;  /* shell lines run before the launch */
    const char *constraint; SrcRange constraint_at;     /* #SBATCH --constraint */
    int exclusive; SrcRange exclusive_at;   /* -1 unset, 0 no, 1 --exclusive */
    const char *reservation; SrcRange reservation_at;
    int gpus_per_node; SrcRange gpus_per_node_at; /* -1 unset; 1: --gpus-per-node instead of --gres */
    int gres; SrcRange gres_at;             /* 0 unset (catalogue type), 1 `gres_type = "x"`, 2 `gres_type = none` */
    const char *gres_type;                  /* gres == 1 */
    const char *mail_user; SrcRange mail_user_at;
    const char *mail_type; SrcRange mail_type_at;  /* "END,FAIL" */
    const char *comment; SrcRange comment_at;
    /* issue 33's escape hatches: typed #SBATCH options and a checked free-form list */
    const char *exclude; SrcRange exclude_at;     /* --exclude=HOSTLIST */
    const char *nodelist; SrcRange nodelist_at;   /* --nodelist=HOSTLIST */
    const char **extra; int nextra; SrcRange extra_at; /* sbatch_extra: "--opt[=value]" lines */
    const char *image; SrcRange image_at;   /* the container's image; NULL: no container */
    SrcRange container_at;                  /* the container block; its runtime: container (a row) */
    const char **mounts; int nmounts; SrcRange mounts_at;   /* "SRC:DST[:FLAGS]" */
} PlanSite;

/* ---- blocks ---- */
/* Where a cluster's Slurm runs: on its hosts (slurm.conf/gres.conf snippets),
 * or in Kubernetes under SchedMD's Slinky slurm-operator or Nebius Soperator
 * (their custom resources instead of the snippets; compiler/emit/emit_k8s.c). */

typedef struct {                            /* `key[=value]:Effect`, as `kubectl taint` writes it */
    const char *key, *value, *effect;       /* value NULL: operator Exists */
} PlanToleration;

typedef struct {                            /* one shared volume: `pvc "CLAIM" at "/PATH"` or
                                               `host "/DIR" at "/PATH"` */
    bool pvc;
    const char *source;                     /* claim name, or host directory */
    const char *mount;                      /* where the slurmd pod (and the job) sees it */
    const char *name;                       /* the pod's volume name: the claim, or host-N */
    SrcRange at;
} PlanVolume;

typedef struct {
    PLAN_KEYS_KUBERNETES(PLAN_ROW_MEMBER)   /* read by their rows: host_network (Slinky) */
    SrcRange at;                            /* the `kubernetes` key */
    const char *namespace_;                 /* default "slurm" */
    const char *cluster_name;               /* Slinky: the Controller (helm release) name;
                                               Soperator: the SlurmCluster; default "slurm" */
    const char *node_set;                   /* derived: NAME of `nodes = NAME-[0-N]` */
    const char *image; SrcRange image_at;   /* slurmd container image, with a tag or digest */
    const char *munge_image; SrcRange munge_image_at;  /* Soperator only */
    const char *jail; SrcRange jail_at;     /* Soperator only: the jail's PVC claim name */
    int pool_gpus; SrcRange pool_gpus_at;   /* nvidia.com/gpu each Kubernetes node offers */
    const char **node_selector; int nnode_selector; /* "key=value" */
    PlanToleration *tolerations; int ntolerations;
    int64_t cpu_request_milli; SrcRange cpu_request_at;   /* default: cpus (request = limit) */
    uint64_t memory_request; SrcRange memory_request_at;  /* bytes; default: memory */
    PlanVolume *volumes; int nvolumes;
    /* what multi-node NCCL in a pod needs, and the node's headroom (docs/language.md) */
    uint64_t system_reserve; SrcRange system_reserve_at;  /* memory the node keeps (kubelet, system) */
    uint64_t memory_limit;                  /* the slurmd pod's: memory - system_reserve, whole GiB */
    uint64_t shm_bytes; SrcRange shm_at;    /* /dev/shm (emptyDir, medium Memory); default half the limit */
    const char *rdma_resource; int rdma_count; SrcRange rdma_at;   /* "RESOURCE=COUNT"; NULL: none */
    double partition_max_seconds; SrcRange partition_max_at;     /* the partition's MaxTime; 0: none */
} PlanK8s;

typedef struct {
    const char *name; SrcRange at;          /* block name */
    PLAN_KEYS_CLUSTER(PLAN_ROW_MEMBER)      /* read by their rows: cpus (per node) */
    const char *partition; SrcRange partition_at;
    const char *hostlist; SrcRange hostlist_at;   /* as written: "hgx[001-032]" */
    char **hosts; int nhosts;               /* expanded, in order */
    const GpuSpec *gpu; int gpus_per_node; SrcRange gpu_at;  /* `gpu = none`: gpu NULL,
                                               gpus_per_node 0 (CPU-only nodes) */
    uint64_t memory_bytes; SrcRange memory_at;  /* per node (RealMemory) */
    /* ---- fabric (docs/language.md, cluster block; defaults from the GPU catalogue) ---- */
    double link_bytes_per_s; SrcRange link_at;  /* `gpu_link`: per GPU, both directions together;
                                                   0 = unknown (CPU-only, or a catalogue entry without) */
    bool link_default;                          /* from the catalogue, not the plan */
    int nics; double nic_bits_per_s; SrcRange network_at; /* `network = 8 x 400 Gbps`: per node */
    bool network_default;                       /* from the catalogue, not the plan */
    bool network_roce;                          /* `network_kind = roce` (default infiniband) */
    double host_link_bytes_per_s; SrcRange host_link_at; /* `host_link`: GPU to host memory, per GPU,
                                                   both directions together; 0 = unknown */
    bool host_link_default;                     /* from the catalogue, not the plan */
    /* ---- where Slurm runs (docs/language.md, "Slurm on Kubernetes") ---- */
    SlurmRuntime slurm; SrcRange slurm_at;      /* `slurm = hosts | slinky "V" | soperator "V"` */
    const char *slurm_version;                  /* the operator's version; NULL on hosts */
    PlanK8s *k8s;                               /* the `kubernetes { }` sub-block; NULL on hosts */
    PlanSite site;                          /* the cluster's site settings */
    bool minimal;                           /* `nodes = COUNT` without a hostlist (the admin owns
                                               slurm.conf): hosts NULL, nhosts the count, cpus and
                                               memory 0 unless given; no slurm.conf/gres.conf snippet */
    bool gpu_amd;                           /* an AMD part (ROCm): /dev/dri render nodes, Apptainer --rocm,
                                               no llmc CUDA backend */
} PlanCluster;

struct PlanMerge;

typedef struct {
    const char *name; SrcRange at;
    /* read by their rows: arch, init (as written), the shape (max_context:
     * max_position_embeddings) and tie_embeddings; a shape key not written
     * is the rules', from config.json */
    PLAN_KEYS_MODEL(PLAN_ROW_MEMBER)
    const char *path; SrcRange path_at;     /* HF model directory (config.json, safetensors) */
    const char *tokenizer; SrcRange tokenizer_at; /* dir with tokenizer.json; default = path */
    bool from_scratch;                      /* init = scratch: random init, path only for output config */
    bool qkv_bias;                          /* derived: qwen2 -> true, llama/qwen3 -> false */
    bool qk_norm;                           /* derived: qwen3 -> true */
    int norms_per_layer;                    /* derived: RMSNorm weights per layer, 2 (gemma2: 4, around
                                               attention and MLP both) */
    int experts, experts_per_token;         /* mixtral: experts per layer (num_local_experts) and
                                               the top-k each token goes through; 0 for dense models */
    SrcRange experts_at, experts_per_token_at;
    const char *rope_scaling;               /* the RoPE scaling type of a config.json read at
                                               check time (llama3, yarn, ...); NULL: none or unread */
    const struct PlanMerge *merged_from;    /* the model a merge block writes (its base's shape at
                                               the merge's output); NULL: a model block */
} PlanModel;

/* LLaMA-Factory's dataset_info columns and tags; NULL when not set. */
typedef struct {
    const char *prompt, *query, *response, *history, *messages, *system, *tools, *text;
    const char *chosen, *rejected;          /* ranking (preference) datasets only */
    const char *kto_tag;                    /* KTO: the column with the true/false label */
} DatasetColumns;
typedef struct {
    const char *role, *content, *user, *assistant, *observation, *function, *system;
} DatasetTags;

typedef struct {
    const char *name; SrcRange at;
    /* read by their rows: format, ranking, and what is known of its size:
     * samples (records; -1 unknown), size_bytes (as stated; 0 unknown),
     * tokens (stated or measured; -1 unknown) */
    PLAN_KEYS_DATASET(PLAN_ROW_MEMBER)
    const char *file; SrcRange file_at;     /* NULL for a Hub dataset */
    bool directory;                         /* `file = "DIR/"`: every file in DIR (shards of one type);
                                               backend = llamafactory only */
    const char *hf_hub; SrcRange hf_hub_at; /* `hf_hub = "org/name"`: dataset_info's hf_hub_url;
                                               backend = llamafactory only; NULL otherwise */
    DatasetColumns columns; SrcRange columns_at;
    DatasetTags tags; SrcRange tags_at;
} PlanDataset;

typedef struct PlanTrain {
    const char *name; SrcRange at;
    /* The keys contract/plan_keys.h's rows read (READ ROW, ROW_AT): one
     * member each, FIELD (and FIELD_at), of the row's TYPE; their defaults and
     * meaning are the rows' and docs/language.md's. */
    PLAN_KEYS_TRAIN(PLAN_ROW_MEMBER)
    /* The keys the train block's rules read (compiler/check/check_train.c),
     * and what the rules derive. */
    TrainStage stage; SrcRange stage_at;
    PlanModel *model; SrcRange model_at;
    PlanDataset **data; int ndata; SrcRange data_at;
    ChatTemplate template_; SrcRange template_at;
    int micro_batch; SrcRange batch_at;     /* "4 per gpu" */
    double warmup_ratio; int64_t warmup_steps; SrcRange warmup_at; /* one of them set */
    double beta1, beta2;
    uint64_t seed;
    Fp8Backend fp8_backend; SrcRange fp8_backend_at;            /* LLaMA-Factory, precision = fp8; default auto */
    bool deterministic; SrcRange deterministic_at;  /* same bits every run; default: llmc on */
    bool train_on_prompt; SrcRange train_on_prompt_at;  /* sft: prompt tokens trained too */
    bool mask_history; SrcRange mask_history_at;        /* sft: only the last turn trained */
    double mfu; SrcRange mfu_at;            /* 0 = GPU catalogue default */
    const char *output_dir; SrcRange output_at;   /* where checkpoints/model go */
    int64_t checkpoint_every_steps;         /* 0 = derived from checkpoint_every_seconds */
    double checkpoint_every_seconds; SrcRange checkpoint_at; /* default 30 min */

    /* ---- fine-tuning method (backend = llamafactory only, but full) ---- */
    double lora_dropout;                    /* default 0 */
    const char **lora_target; int nlora_target;  /* module names; NULL/0 = all */
    int quant_bits;                         /* qlora: 4 or 8 (default 4) */
    /* ---- preference stages (rm, dpo, kto) ---- */
    PlanModel *ref_model; SrcRange ref_model_at; /* NULL: LLaMA-Factory's default reference */
    /* ---- evaluation ---- */
    double val_size; SrcRange val_at;       /* 0 = none; < 1 a fraction, >= 1 a count */
    PlanDataset **eval_data; int neval_data; SrcRange eval_data_at;
    int64_t eval_every_steps; SrcRange eval_every_at;   /* 0: LLaMA-Factory's default (no eval) */
    int eval_batch;                         /* per GPU; 0 = batch */
    /* ---- data handling ---- */
    const char *tokenized_path; SrcRange tokenized_at;  /* NULL: tokenise on every start */
    double ddp_timeout_seconds; SrcRange ddp_timeout_at; /* default 30 min; at: unset when not written */
    MixStrategy mix; SrcRange mix_at;       /* mix_strategy (LLaMA-Factory); default concat */
    double *interleave_probs; int ninterleave_probs; SrcRange interleave_probs_at; /* one per dataset */
    /* ---- LLaMA-Factory pass-through keys (issue 33), checked against its dataclasses ---- */
    OptimKind optim; SrcRange optim_at;     /* default adamw_torch (what the Trainer runs) */
    double wsd_decay; SrcRange wsd_decay_at; /* schedule = wsd: the decay's share of the steps (default 10%) */
    bool checkpoint_epoch;                  /* checkpoint_every = epoch: save_strategy epoch */
    /* ---- tracking ---- */
    const char *run_name;                   /* NULL: the train block's name */
    int64_t log_every;                      /* steps; default 1 */
    bool output_default;                    /* no `output`: output_dir "runs/NAME" is relative to the
                                               compiled directory itself (beside plan.json), so a
                                               copied out/ keeps its runs */
} PlanTrain;

/* `profile NAME { ... }`: what a site's own runs measured (`llmc calibrate`
 * writes it; docs/estimator.md, "Site profiles"). A job takes it with
 * `profile = NAME`; each value set replaces the estimator's default. */
typedef struct {
    const char *name; SrcRange at;
    PLAN_KEYS_PROFILE(PLAN_ROW_MEMBER)      /* read by their rows: backend, the trainer the runs measured */
    bool backend_set;                       /* the plan wrote backend */
    double mfu; SrcRange mfu_at;            /* compute efficiency; 0 = not set */
    double step_overhead_s; SrcRange step_overhead_at;  /* per optimizer step; < 0 = not set */
    double intra_bytes_per_s; SrcRange intra_at;  /* effective per GPU, one direction, ring bus
                                                     bandwidth inside a node; 0 = not set */
    double inter_bytes_per_s; SrcRange inter_at;  /* effective per node between nodes; 0 = not set */
    const char **from; int nfrom;           /* the runs it was fitted from, as written */
} PlanProfile;

/* `merge NAME { adapter = RUN  model = BASE  output = "DIR" ... }`: LLaMA-Factory's
 * `llamafactory-cli export` of a LoRA run's adapter merged into its base
 * (docs/language.md, "merge NAME"). A job runs it (`run = NAME`); a train block
 * that names it as its model trains the merged model (`merged`). */
typedef struct PlanMerge {
    const char *name; SrcRange at;
    PLAN_KEYS_MERGE(PLAN_ROW_MEMBER)        /* read by their rows: dtype, device, legacy_format */
    struct PlanTrain *adapter; SrcRange adapter_at;   /* the LoRA run whose adapter (its output) is merged */
    PlanModel *model; SrcRange model_at;    /* the base: the model that run trains */
    const char *output_dir; SrcRange output_at;       /* export_dir: the merged model */
    int shard_gb; SrcRange shard_size_at;   /* export_size: GB per safetensors shard (default 5) */
    PlanModel merged;                       /* the base's shape at output_dir, merged_from = this */
} PlanMerge;

typedef struct PlanJob {
    const char *name; SrcRange at;
    PLAN_KEYS_JOB(PLAN_ROW_MEMBER)          /* read by their rows: cpus_per_task (default cpus /
                                               gpus_per_node, the rules'), requeue */
    PlanTrain *run; SrcRange run_at;        /* NULL for a merge job */
    PlanMerge *merge;                       /* `run = MERGE`: the job exports that merge; NULL else */
    struct PlanJob *after; SrcRange after_at;  /* `after = JOB`: starts when JOB completed
                                               successfully (afterok), from JOB's trained
                                               model or adapter; NULL: none */
    PlanCluster *cluster; SrcRange cluster_at;
    int nodes; SrcRange nodes_at;
    double time_seconds; SrcRange time_at;
    uint64_t mem_bytes; SrcRange mem_at;    /* per node --mem; 0 = all of node */
    const char *account; SrcRange account_at; /* NULL when not set */
    const char *qos; SrcRange qos_at;         /* NULL when not set */
    const char *log_dir; SrcRange log_dir_at; /* default "logs" */
    int tasks_per_node; SrcRange tasks_at;  /* `tasks`; default gpus_per_node, or 1 on a
                                               cluster with `gpu = none` (CPU-only: one
                                               trainer process per node, fp32, no --gres) */
    PlanSite site;                          /* the cluster's site settings with the job's over them */
    const PlanProfile *profile; SrcRange profile_at; /* `profile = NAME`; NULL: the defaults */
} PlanJob;

/* `gpu NAME { memory = ...  bf16 = ...  hbm = ...  gres_type = "..." }`: a GPU the
 * catalogue lacks (docs/language.md, "gpu NAME"); clusters name it like a
 * catalogue entry. */
typedef struct {
    const char *name; SrcRange at;
    GpuSpec spec;            /* spec.name = name */
    PLAN_KEYS_GPU(PLAN_ROW_MEMBER)   /* read by their rows: vendor */
} PlanGpu;

typedef struct Plan {
    const char *main_file;                  /* the file given on the command line */
    PlanCluster **clusters; int nclusters;
    PlanModel **models; int nmodels;
    PlanDataset **datasets; int ndatasets;
    PlanTrain **trains; int ntrains;
    PlanMerge **merges; int nmerges;
    PlanJob **jobs; int njobs;
    void *arena;                            /* owned allocations */
} Plan;

void plan_free(Plan *);

#endif
