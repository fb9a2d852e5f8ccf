/* emit_internal.h — what the emitters share among themselves (not a contract
 * for other stages; emit.h is). One JobLayout per job is derived from the plan
 * once, and every artifact (slurm.conf, gres.conf, the sbatch script,
 * plan.json, the LLaMA-Factory YAML) is written from it, so they cannot
 * disagree about GRES type, task counts or memory. */
#ifndef LLMC_EMIT_INTERNAL_H
#define LLMC_EMIT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "emit.h"

/* ---- a growable text buffer ---- */
typedef struct {
    char *data;
    size_t len, cap;
    bool failed;          /* an allocation failed; data is unusable */
} Buf;

void buf_init(Buf *);
void buf_free(Buf *);
void buf_put(Buf *, const char *s, size_t n);
void buf_puts(Buf *, const char *s);
void buf_printf(Buf *, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- text helpers (emit_text.c) ---- */

/* Append s single-quoted for POSIX sh/bash: 'it'\''s'. Safe for every byte
 * string without NUL (no expansion of $, `, \, !, newlines inside quotes). */
void sh_quote(Buf *, const char *s);

/* Compress host names into a Slurm hostlist expression, keeping their order:
 * hgx001..hgx032 -> "hgx[001-032]", n1 n2 n3 n5 -> "n[1-3,5]". Names whose
 * numeric suffixes differ in width (n01 vs n1) are kept apart, as Slurm does. */
void hostlist_compress(Buf *, char *const *hosts, int nhosts);

/* Slurm time limit "D-HH:MM:SS", rounded up to whole minutes (Slurm counts
 * time limits in minutes). */
void slurm_time(Buf *, double seconds);

/* A name that may appear bare in a Slurm config line, an #SBATCH directive,
 * a shell word and a file name: [A-Za-z0-9._-]+, not starting with '-' or '.'. */
bool slurm_name_ok(const char *s);
/* A path for #SBATCH --output and the shell: no whitespace, control characters,
 * quotes, backslash or shell/Slurm-pattern metacharacters ($ ` % ; & | < > ( )
 * * ? [ ] { } ! # ~ ,). Returns the first offending byte's offset, or -1. */
long sbatch_path_bad_at(const char *s);

/* ---- templates (emit_template.c) ----
 * A template is text with holes {{name}} and conditional lines:
 * a line "{{#flag}}" starts and "{{/flag}}" ends a section that is kept when
 * the hole named flag is set to a non-empty value. Every hole used must be set;
 * every value set must be used (catches a misspelt hole either way). */
typedef struct {
    const char *name;
    char *value;          /* owned */
    bool used;
} TmplVar;

typedef struct {
    TmplVar vars[64];
    int nvars;
    bool failed;
} Tmpl;

void tmpl_init(Tmpl *);
void tmpl_free(Tmpl *);
void tmpl_set(Tmpl *, const char *name, const char *value);
void tmpl_setf(Tmpl *, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fill text into out. Returns 0, or -1 with a message in err (size errlen). */
int tmpl_fill(Tmpl *, const char *text, Buf *out, char *err, size_t errlen);

/* The templates compiled into llmc (the files in templates/, see emit_template_data.c). */
const char *template_text(const char *name);
/* Fill template NAME with t's holes and free t. Returns a malloc'd text, or
 * NULL with a message in err (emit_slurm.c). */
char *template_fill(Tmpl *t, const char *name, char *err, size_t errlen);

/* ---- the per-job layout (emit_check.c) ---- */
typedef struct {
    const PlanJob *job;
    const PlanTrain *train;   /* NULL for a merge job */
    const PlanMerge *merge;   /* a merge job's merge; NULL else */
    const PlanCluster *cluster;
    bool gpu;                 /* the cluster has GPUs (GRES lines, --gres) */
    const char *gres_type;    /* "h100_80gb"; NULL on CPU-only clusters and for an
                                 untyped GRES (the site's gres_type = none) */
    int gpus_per_node;        /* 0 on CPU-only clusters */
    int tasks_per_node;       /* one per GPU; one per node without GPUs */
    int world_size;           /* nodes x tasks_per_node */
    int cpus_per_task;
    uint64_t node_mem_mib;    /* slurm.conf RealMemory */
    uint64_t mem_mib;         /* --mem; 0 = the whole node */
    int64_t time_minutes;     /* --time, rounded up */
    const char *art_dir;      /* the directory the job's artifacts land in, as
                                 given to llmc (relative to its working
                                 directory); NULL: paths are written as is */
    const char *start_path;   /* a job with `after`: the model (or, start_adapter,
                                 the LoRA adapter) the job it runs after trains,
                                 spelled like art_dir (emit.c: chain_start_path);
                                 NULL: the run starts from its model's path */
    bool start_adapter;
} JobLayout;

/* A plan path as the artifacts in L->art_dir must spell it. The checker has
 * joined a plan's relative paths to the directory of the .llm file that
 * writes them (as given to llmc, so relative to its working directory); plan.json,
 * dataset_info.json and the LLaMA-Factory YAML are read relative to their
 * own directory (docs/plan.md). So a relative path is rewritten relative to
 * art_dir (lexically: "out/tiny" + "data/x" -> "../../data/x"); absolute
 * paths stay. Returns a malloc'd string (NULL for NULL). */
char *artifact_path(const JobLayout *L, const char *path);

/* The run's output directory as the artifacts in L->art_dir spell it: the
 * plan's `output` through artifact_path; without one, "runs/NAME" relative
 * to the artifacts' own directory. Returns a malloc'd string. */
char *artifact_output_dir(const JobLayout *L);

/* Derive the layout of job (no checks; emit_check reports what is wrong). */
void job_layout(const PlanJob *job, JobLayout *out);

/* Seconds of warning before the time limit that --signal=USR2@T gives the
 * trainer to finish its step and write a checkpoint (see docs/artifacts.md). */
int stop_signal_lead_seconds(const JobLayout *, const Estimate *);
/* The --signal lead the job script asks for: stop_signal_lead_seconds when
 * the job may be requeued and the lead is shorter than the limit, else 0 (no
 * --signal). The same for both backends. */
int job_stop_signal_seconds(const JobLayout *, const Estimate *);

/* ---- effective dataset columns/tags (emit_dataset_info.c) ----
 * The plan's columns with LLaMA-Factory's documented defaults filled in for
 * the format, so plan.json and dataset_info.json name the same columns. */
void dataset_effective(const PlanDataset *, DatasetColumns *cols, DatasetTags *tags);

/* ---- the artifact writers: each returns a malloc'd text or NULL with err ---- */
char *emit_slurm_conf(const JobLayout *, char *err, size_t errlen);
char *emit_gres_conf(const JobLayout *, char *err, size_t errlen);
char *emit_job_script(const JobLayout *, const Estimate *, char *err, size_t errlen);
char *emit_dataset_info(const JobLayout *, char *err, size_t errlen);
char *emit_plan_json(const JobLayout *, const Estimate *, char *err, size_t errlen);
char *emit_lf_yaml(const JobLayout *, const Estimate *, char *err, size_t errlen);
char *emit_lf_deepspeed(const JobLayout *, char *err, size_t errlen);
/* A merge job's YAML for `llamafactory-cli export` (emit_lf_merge.c); its
 * adapter is L->start_path. */
char *emit_lf_merge_yaml(const JobLayout *, char *err, size_t errlen);
const char *lf_merge_yaml_name(void);
/* Slurm on Kubernetes (emit_k8s.c): the files that replace slurm.conf and
 * gres.conf on a cluster with `slurm = slinky` or `slurm = soperator`. */
typedef struct {
    const char *name;         /* file name: "slinky-values.yaml" */
    const char *what, *how;   /* the header comment: what it is, how to apply it */
    void *body;               /* the writer (emit_k8s.c's own) */
} K8sArtifact;
/* The artifacts of cluster c (0 on hosts). */
int k8s_artifacts(const PlanCluster *c, const K8sArtifact **out);
char *emit_k8s(const JobLayout *, const K8sArtifact *, char *err, size_t errlen);
/* Kubernetes quantities: bytes with the largest exact binary suffix ("2Ti"),
 * millicores as whole CPUs ("224") or "120500m". */
void k8s_bytes_quantity(uint64_t bytes, char *out, size_t n);
void k8s_cpu_quantity(int64_t milli, char *out, size_t n);
/* File names of the LLaMA-Factory artifacts (fixed per shard stage). */
const char *lf_yaml_name(void);
const char *lf_deepspeed_name(const JobLayout *);
/* The YAML's save_steps (emit_llamafactory.c: how it is chosen). */
long long lf_save_steps(const JobLayout *, const Estimate *);

/* Enum spellings shared by plan.json and the YAML. */
const char *name_arch(ModelArch);
const char *name_format(DataFormat);
const char *name_stage(TrainStage);
const char *name_template(ChatTemplate);   /* NULL for TEMPLATE_NONE */
const char *name_precision(Precision);
const char *name_recompute(Recompute);
const char *name_attention(AttentionKind);
const char *name_schedule(LrScheduleKind);
const char *name_backend(PlanBackend);
const char *name_offload(OffloadKind);
int zero_stage(ShardStage);

/* ---- the atomic output directory (emit_fs.c) ---- */
typedef struct {
    char *final_path;     /* DIR as given, without trailing slashes */
    char *tmp_path;       /* .DIR.llmc-XXXXXX beside it */
    int tmp_fd;           /* open directory fd of tmp_path */
    char **files;         /* what was written, relative names, in order: the manifest */
    int nfiles;
    char **dirs;          /* subdirectories made (one component each) */
    int ndirs;
} OutDir;

/* Create the temporary directory beside out_dir. Returns 0, else -1 + err. */
int outdir_begin(OutDir *, const char *out_dir, char *err, size_t errlen);
/* Create a subdirectory (one path component) inside the temporary directory. */
int outdir_mkdir(OutDir *, const char *name, char *err, size_t errlen);
/* Write a file (relative name: one or two safe components "a" or "a/b")
 * inside the temporary directory, with mode, fsync'd. */
int outdir_write(OutDir *, const char *name, const char *data, size_t len, int mode,
                 char *err, size_t errlen);
/* Put the new files in place. A DIR that does not exist: the temporary
 * directory is renamed to it (one atomic step). An existing DIR must be empty
 * or hold OUTDIR_MARKER, the manifest of what llmc wrote there: then exactly
 * the files it lists are replaced (each by an atomic rename) or, when the new
 * output no longer has them, removed; every other file and directory in DIR
 * (shards, plans, checkpoints) is left alone. Everything is checked before
 * anything changes: a file in the way that llmc did not write is refused and
 * DIR is as it was. Returns 0, else -1 + err. */
int outdir_commit(OutDir *, char *err, size_t errlen);
/* Remove the temporary directory if it is still there (after a failure) and
 * free o; call it after outdir_commit too. */
void outdir_abort(OutDir *);

#define OUTDIR_MARKER ".llmc-output"

#endif
