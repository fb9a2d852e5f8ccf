/* check.c — the checker: AST of every file -> typed plan (plan.h).
 *
 * Reports, in one run, every unknown/duplicate/missing key, wrong type, wrong or
 * missing unit, out-of-range value, undefined or wrong-kind reference, and the
 * cross-field rules (model shape, context, hostlist size, dataset format vs
 * columns/tags, stage vs data, template, global batch, paths). A plan with
 * errors is still filled as far as possible so that later rules can run.
 */
#include "check_internal.h"

const char *const kind_names[K_COUNT] = {"cluster", "model", "dataset", "train", "job", "gpu", "profile", "merge"};

/* ---- the plan ---- */

static void add_block(Checker *c, const Item *it)
{
    BlockKind kind = K_COUNT;
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(it->kind_name, kind_names[k]) == 0) kind = (BlockKind)k;
    if (kind == K_COUNT) {
        const char *dym = did_you_mean(it->kind_name, kind_names, K_COUNT);
        Diag *g = dym ? diag_error(c->d, it->kind_at, "unknown block '%s'; did you mean '%s'?", it->kind_name, dym)
                      : diag_error(c->d, it->kind_at, "unknown block '%s'", it->kind_name);
        diag_note(g, "blocks: cluster, model, dataset, train, merge, job, gpu, profile");
        return;
    }
    if (!it->name) {
        Diag *g = diag_error(c->d, it->kind_at, "%s block needs a name", it->kind_name);
        diag_help(g, "write '%s NAME { ... }'", it->kind_name);
        return;
    }
    Symbol *prev = lookup(c, it->name);
    if (prev) {
        Diag *g = diag_error(c->d, it->name_at, "duplicate block name '%s'", it->name);
        diag_note(g, "'%s' is already a %s block at %s:%d", it->name, kind_names[prev->kind],
                  prev->item->name_at.start.file, prev->item->name_at.start.line);
        return;
    }
    size_t sizes[K_COUNT] = {sizeof(PlanCluster), sizeof(PlanModel), sizeof(PlanDataset), sizeof(PlanTrain), sizeof(PlanJob),
                             sizeof(PlanGpu), sizeof(PlanProfile), sizeof(PlanMerge)};
    void *obj = arena_alloc(c->a, sizes[kind]);
    /* Every Plan* struct starts with `const char *name; SrcRange at;` (its
     * row members, PLAN_ROW_MEMBER, come after them). */
#define CK_HEAD(T) \
    _Static_assert(offsetof(T, name) == 0 && offsetof(T, at) == offsetof(PlanCluster, at), #T " starts with name, at");
    CK_HEAD(PlanCluster) CK_HEAD(PlanModel) CK_HEAD(PlanDataset) CK_HEAD(PlanTrain) CK_HEAD(PlanJob) CK_HEAD(PlanGpu)
    CK_HEAD(PlanProfile) CK_HEAD(PlanMerge)
#undef CK_HEAD
    PlanCluster *head = obj;
    head->name = it->name;
    head->at = it->name_at;
    add_symbol(c, (Symbol){it->name, kind, it, obj});
}

void check_plan(SourceFile **files, int nfiles, Plan *plan, Diags *d)
{
    Checker c = {.a = plan->arena, .d = d, .plan = plan};
    for (int f = 0; f < nfiles; f++)
        for (int i = 0; i < files[f]->nitems; i++) {
            const Item *it = files[f]->items[i];
            if (it->kind == ITEM_BLOCK) {
                add_block(&c, it);
            } else if (strcmp(it->kind_name, "use") != 0) {
                static const char *const stmts[] = {"use"};
                const char *dym = did_you_mean(it->kind_name, stmts, 1);
                Diag *g = diag_error(d, it->kind_at, "unknown statement '%s'%s", it->kind_name,
                                     dym ? "; did you mean 'use'?" : "");
                diag_note(g, "a string at the top level follows 'use': use \"cluster.llm\"");
            }
        }
    /* Check in dependency order: later kinds refer to earlier ones (a merge
     * before the train blocks, which may name the model it writes; what it
     * joins to its LoRA run after them, check_merge_links). */
    PtrVec lists[K_COUNT] = {{0}};
    static const BlockKind order[K_COUNT] = {K_GPU, K_PROFILE, K_CLUSTER, K_MODEL, K_DATASET, K_MERGE, K_TRAIN, K_JOB};
    for (int o = 0; o < K_COUNT; o++)
        for (int i = 0; i < c.nsyms; i++) {
            Symbol *s = &c.syms[i];
            if (s->kind != order[o]) continue;
            switch (s->kind) {
            case K_GPU: check_gpu(&c, s->item, s->obj); break;
            case K_CLUSTER: check_cluster(&c, s->item, s->obj); break;
            case K_MODEL: check_model(&c, s->item, s->obj); break;
            case K_DATASET: check_dataset(&c, s->item, s->obj); break;
            case K_TRAIN: check_train(&c, s->item, s->obj); break;
            case K_JOB: check_job(&c, s->item, s->obj); break;
            case K_PROFILE: check_profile(&c, s->item, s->obj); break;
            case K_MERGE: check_merge(&c, s->item, s->obj); break;
            case K_COUNT: break;
            }
            ptrvec_push(c.a, &lists[s->kind], s->obj);
        }
    plan->clusters = (PlanCluster **)lists[K_CLUSTER].items; plan->nclusters = lists[K_CLUSTER].n;
    plan->models = (PlanModel **)lists[K_MODEL].items; plan->nmodels = lists[K_MODEL].n;
    plan->datasets = (PlanDataset **)lists[K_DATASET].items; plan->ndatasets = lists[K_DATASET].n;
    plan->trains = (PlanTrain **)lists[K_TRAIN].items; plan->ntrains = lists[K_TRAIN].n;
    plan->merges = (PlanMerge **)lists[K_MERGE].items; plan->nmerges = lists[K_MERGE].n;
    for (int i = 0; i < plan->nmerges; i++) check_merge_links(&c, plan->merges[i]);
    plan->jobs = (PlanJob **)lists[K_JOB].items; plan->njobs = lists[K_JOB].n;
    for (int i = 0; i < plan->njobs; i++) check_k8s_paths(&c, plan->jobs[i]);
    for (int i = 0; i < plan->njobs; i++) {
        check_job_after(&c, plan, i);
        check_job_chain_order(&c, plan, i);
        check_job_outputs(&c, plan, i);
    }
    free(c.syms);
    free(c.index);
}
