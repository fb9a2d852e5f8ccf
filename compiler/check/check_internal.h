/* check_internal.h — what the checker's files share; nothing outside
 * compiler/check/ includes it (the checker's interface is frontend.h).
 *
 * The checker is split by block, as Lua splits by phase: check_value.c reads
 * keys and typed values for every block; check_site.c, check_cluster.c,
 * check_k8s.c, check_model.c, check_dataset.c, check_train.c and check_job.c
 * each own one block's keys and cross-field rules; check.c collects the
 * blocks and checks them in dependency order.
 */
#ifndef LLMC_CHECK_INTERNAL_H
#define LLMC_CHECK_INTERNAL_H

#include "frontend.h"
#include "hostlist.h"
#include "model_files.h"
#include "chat_templates.h"
#include "plan_limits.h"   /* contract/: the limits llmc-train's plan reader also applies */
#include "backend_caps.h"  /* contract/: what each llmc-train backend runs, which it also refuses */
#include "path_policy.h"   /* contract/: where a run may write, which llmc-train also refuses */
#include "plan_keys.h"     /* contract/: the keys of each block, their types, rows and defaults */

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { K_CLUSTER, K_MODEL, K_DATASET, K_TRAIN, K_JOB, K_GPU, K_PROFILE, K_MERGE, K_COUNT } BlockKind;
extern const char *const kind_names[K_COUNT];

typedef struct {
    const char *name;
    BlockKind kind;
    const Item *item;
    void *obj;           /* PlanCluster *, PlanModel *, ... */
} Symbol;

typedef struct {
    Arena *a;
    Diags *d;
    Plan *plan;
    Symbol *syms;
    int nsyms, capsyms;
    int *index;          /* open-addressing hash of syms by name: slot -> index + 1 */
    size_t nindex;
} Checker;

/* The entries of one block or sub-block, with how to name it in messages. */
typedef struct {
    Entry **es;
    int n;
    const char *where;   /* "model block 'qwen72b'" */
    SrcRange at;         /* where "missing key" points */
    bool broken;         /* syntax error inside: do not report missing keys */
    const char *missing[32], *examples[32];   /* required keys not set */
    int nmissing;
    const char *suggested[32];   /* keys offered by "did you mean": not also "missing" */
    int nsuggested;
} Scope;

typedef struct {
    const char *unit;
    double scale;
} Unit;

#define NUNITS(u) ((int)(sizeof(u) / sizeof((u)[0])))

static inline bool is_number(const Term *t) { return t->kind == TERM_INT || t->kind == TERM_FLOAT; }

/* How the checker reads a row of contract/plan_keys.h marked READ ROW,
 * ROW_AT or ROW_AT_VALUE (check_row_keys): its limit or vocabulary, and where its value and
 * position go in the block's struct. A block's RowRead table parallels its
 * rows, made by expanding PLAN_KEYS_<BLOCK> with CK_READ_##READ. */
typedef struct {
    bool read;                  /* false: the block's rules read the key */
    int limit;                  /* PK_INT, PK_INT64, PK_NUM, PK_SIZE: its limit row (plan_key_limit) */
    const char *const *names;   /* PK_ENUM: the concept's `.llm` words, NULL-terminated */
    size_t off, at_off;         /* the value; its position (SIZE_MAX: not kept) */
    bool value_at;              /* the position is the value's (ROW_AT_VALUE), not the entry's */
} RowRead;

#define CK_ROW_PK_INT(row) row, NULL
#define CK_ROW_PK_INT64(row) row, NULL
#define CK_ROW_PK_NUM(row) row, NULL
#define CK_ROW_PK_BOOL(row) 0, NULL
#define CK_ROW_PK_SIZE(row) row, NULL
#define CK_ROW_PK_ENUM(row) 0, row##_llm_names
#define CK_READ_RULE(T, type, row, field) {0}
#define CK_READ_ROW(T, type, row, field) {true, CK_ROW_##type(row), offsetof(T, field), SIZE_MAX, false}
#define CK_READ_ROW_AT(T, type, row, field) {true, CK_ROW_##type(row), offsetof(T, field), offsetof(T, field##_at), false}
#define CK_READ_ROW_AT_VALUE(T, type, row, field) {true, CK_ROW_##type(row), offsetof(T, field), offsetof(T, field##_at), true}
/* The struct members the rows read into are declared from the rows
 * (PLAN_ROW_MEMBER, plan.h), of the C type the reader writes for the row's
 * TYPE; an ENUM's is written as an int, which every concept's enum is. */
#define CK_ENUM_IS_INT(name, ...) _Static_assert(sizeof(name##_enum) == sizeof(int), #name "_enum is not an int");
PLAN_VOCAB_CONCEPTS(CK_ENUM_IS_INT)
PLAN_VOCAB_LLM_CONCEPTS(CK_ENUM_IS_INT)
#undef CK_ENUM_IS_INT

/* check_value.c: keys, values, references, paths */
const char *join_names(Arena *a, const char *const *names, int n);
const char *term_desc(Checker *c, const Term *t);
const char *value_desc(Checker *c, const Value *v);
Scope scope_of(Checker *c, const Item *it, Entry **es, int n, const char *sub);
void check_keys(Checker *c, Scope *s, PlanKeyBlock b);
void check_row_keys(Checker *c, const Scope *s, PlanKeyBlock b, const RowRead *reads, void *obj, bool *ok);
Entry *find(const Scope *s, const char *key);
Entry *require(Checker *c, Scope *s, const char *key, const char *example);
void report_missing(Checker *c, const Scope *s);
bool want_terms(Checker *c, const Entry *e, int n, const char *what);
bool get_int(Checker *c, const Entry *e, int64_t min, int64_t max, int64_t *out);
bool get_int32(Checker *c, const Entry *e, int min, int max, int *out);
bool get_number(Checker *c, const Entry *e, double min, bool min_open, double max, double *out);
bool within(Checker *c, SrcRange at, const char *what, int id, double x, const char *shown);
bool get_int_lim(Checker *c, const Entry *e, int id, int64_t *out);
bool get_int32_lim(Checker *c, const Entry *e, int id, int *out);
bool get_number_lim(Checker *c, const Entry *e, int id, double *out);
bool get_string(Checker *c, const Entry *e, const char **out);
bool get_bool(Checker *c, const Entry *e, bool *out);
bool get_enum(Checker *c, const Entry *e, const char *const *names, int n, int *out);
bool get_quantity(Checker *c, const Entry *e, const Unit *units, int nunits,
                  const char *what, const char *example, double *out);
bool get_size(Checker *c, const Entry *e, uint64_t *out);
bool get_size_lim(Checker *c, const Entry *e, int id, uint64_t *out);
bool get_duration(Checker *c, const Entry *e, double *out);
bool is_percent(const Value *v);
bool get_percent(Checker *c, const Entry *e, double max_pct, double *out);
bool is_count_of(const Value *v, const char *word);
Symbol *lookup(Checker *c, const char *name);
void add_symbol(Checker *c, Symbol s);
void *resolve_ref(Checker *c, const Entry *e, const Term *t, BlockKind kind);
void *get_ref(Checker *c, const Entry *e, BlockKind kind);
const char *get_path(Checker *c, const Entry *e, bool is_file);
const char *get_plan_path(Checker *c, const Entry *e, bool is_file);

/* check_site.c: site settings of a cluster or job */
const char **get_string_list(Checker *c, const Entry *e, int *n, const char *what, SrcRange **ats);
void check_site(Checker *c, const Item *it, Scope *s, PlanSite *site);
void merge_site(Checker *c, const PlanSite *cl, PlanSite *j);

/* check_cluster.c: gpu, cluster and profile blocks */
void check_gpu(Checker *c, const Item *it, PlanGpu *g);
void check_cluster(Checker *c, const Item *it, PlanCluster *cl);
void check_profile(Checker *c, const Item *it, PlanProfile *p);

/* check_k8s.c: Slurm on Kubernetes */
void check_cluster_k8s(Checker *c, const Item *it, Scope *s, PlanCluster *cl);
void check_k8s_paths(Checker *c, const PlanJob *j);

/* check_model.c */
void check_model(Checker *c, const Item *it, PlanModel *m);

/* check_dataset.c */
void check_dataset(Checker *c, const Item *it, PlanDataset *ds);

/* check_train.c */
void check_train(Checker *c, const Item *it, PlanTrain *t);

/* check_precision.c: number formats against other keys (fp8, fp8_lm_head,
 * master_weights, optimizer_states): the train block's rules (ok: check_row_keys'
 * per row), and the job's (its cluster's GPU) */
void check_train_formats(Checker *c, Scope *s, PlanTrain *t, const bool *ok);
void check_job_formats(Checker *c, const PlanJob *j, const PlanCluster *cl, const PlanTrain *t);

/* check_merge.c: merge blocks (before the train blocks; their links after) */
void check_merge(Checker *c, const Item *it, PlanMerge *m);
void check_merge_links(Checker *c, const PlanMerge *m);

/* check_job.c: jobs, alone and against each other */
void check_job(Checker *c, const Item *it, PlanJob *j);
void check_job_after(Checker *c, const Plan *plan, int idx);
void check_job_chain_order(Checker *c, const Plan *plan, int idx);
void check_job_outputs(Checker *c, const Plan *plan, int idx);
#endif
