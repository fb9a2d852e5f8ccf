/* check_job.c — job NAME: its keys, the job against its cluster (fit, site
 * settings) and its run (the llmc backend's capabilities, the global batch),
 * then the plan's jobs against each other (after = JOB, output directories). */
#include "check_internal.h"

/* The job keys contract/plan_keys.h's rows alone describe (check_row_keys). */
static const RowRead job_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanJob, type, row, field),
    PLAN_KEYS_JOB(X)
#undef X
};

/* Rules on a job's merged site settings. */
static void check_job_site(Checker *c, const PlanJob *j)
{
    const PlanSite *s = &j->site;
    const PlanCluster *cl = j->cluster;
    if (!cl->gpu && (cl->hostlist || cl->minimal)) {
        if (s->gres)
            diag_error(c->d, s->gres_at, "'gres_type' on cluster '%s', which has no GPUs", cl->name);
        if (s->gpus_per_node == 1)
            diag_error(c->d, s->gpus_per_node_at, "'gpus_per_node' on cluster '%s', which has no GPUs", cl->name);
    }
    if (s->mail_type && !s->mail_user && strcmp(s->mail_type, mail_type_json_names[MAIL_NONE]) != 0) {
        Diag *g = diag_warning(c->d, s->mail_type_at, "'mail_type' without 'mail_user': Slurm mails the submitting user");
        diag_help(g, "add mail_user = \"NAME@SITE\" to the sbatch block");
    }
}

/* job: run = NAME, cluster = NAME, nodes = INT, time = DURATION (at least
 * 1 min), mem, cpus_per_task, account, qos, logs (default "logs"), requeue
 * (default on), tasks, after = JOB, and the site keys. Returns the tasks
 * entry (NULL when not given: the default follows from the cluster). */
static Entry *check_job_keys(Checker *c, const Item *it, Scope *s, PlanJob *j)
{
    check_keys(c, s, PKB_JOB);
    check_row_keys(c, s, PKB_JOB, job_reads, j, NULL);
    Entry *e;
    if ((e = require(c, s, PLAN_KEY(JOB, run), "NAME"))) {
        j->run_at = e->at;
        /* a merge job: llamafactory-cli export of a merge block */
        const Symbol *sym = e->value && e->value->nterms == 1 && e->value->terms[0]->kind == TERM_IDENT
                            ? lookup(c, e->value->terms[0]->str) : NULL;
        if (sym && sym->kind == K_MERGE) j->merge = sym->obj;
        else j->run = get_ref(c, e, K_TRAIN);
    }
    if ((e = require(c, s, PLAN_KEY(JOB, cluster), "NAME"))) { j->cluster_at = e->at; j->cluster = get_ref(c, e, K_CLUSTER); }
    if ((e = require(c, s, PLAN_KEY(JOB, nodes), "32"))) { j->nodes_at = e->at; get_int32(c, e, 1, HOSTLIST_MAX_HOSTS, &j->nodes); }
    if ((e = require(c, s, PLAN_KEY(JOB, time), "48 h"))) {
        j->time_at = e->at;
        if (get_duration(c, e, &j->time_seconds) && j->time_seconds < 60) {
            diag_error(c->d, e->value->at, "'time' must be at least 1 min");
            j->time_seconds = 0;
        }
    }
    if ((e = find(s, PLAN_KEY(JOB, mem)))) { j->mem_at = e->at; get_size(c, e, &j->mem_bytes); }
    if ((e = find(s, PLAN_KEY(JOB, account))) && get_string(c, e, &j->account)) {
        j->account_at = e->value->at;
        if (!j->account[0]) diag_error(c->d, e->value->at, "'account' must not be empty");
    }
    if ((e = find(s, PLAN_KEY(JOB, qos))) && get_string(c, e, &j->qos)) {
        j->qos_at = e->value->at;
        if (!j->qos[0]) diag_error(c->d, e->value->at, "'qos' must not be empty");
    }
    j->log_dir = plan_keys_JOB[PLAN_KEY_INDEX(JOB, logs)].dflt;
    if ((e = find(s, PLAN_KEY(JOB, logs)))) { j->log_dir_at = e->at; const char *p = get_path(c, e, false); if (p) j->log_dir = p; }
    Entry *tasks = find(s, PLAN_KEY(JOB, tasks));
    if (tasks) { j->tasks_at = tasks->at; get_int32_lim(c, tasks, PL_KEY_JOB_TASKS, &j->tasks_per_node); }
    if ((e = find(s, PLAN_KEY(JOB, after)))) { j->after_at = e->at; j->after = get_ref(c, e, K_JOB); }
    if ((e = find(s, PLAN_KEY(JOB, profile)))) { j->profile_at = e->at; j->profile = get_ref(c, e, K_PROFILE); }
    check_site(c, it, s, &j->site);
    report_missing(c, s);
    return tasks;
}

/* The job against its cluster: site settings merged, nodes within the
 * cluster, one task per GPU (1 on CPU nodes), cpus_per_task (default: the
 * node's CPUs shared by its tasks) and mem within a node. */
static void check_job_fits_cluster(Checker *c, PlanJob *j, const PlanCluster *cl, const Entry *tasks)
{
    merge_site(c, &cl->site, &j->site);
    check_job_site(c, j);
    if (j->nodes > 0 && cl->nhosts > 0 && j->nodes > cl->nhosts) {
        Diag *g = diag_error(c->d, j->nodes_at, "job asks for %d nodes, but cluster '%s' has %d", j->nodes, cl->name, cl->nhosts);
        if (cl->hostlist) diag_note(g, "cluster '%s' nodes = %s", cl->name, cl->hostlist);
        else diag_note(g, "cluster '%s' nodes = %d", cl->name, cl->nhosts);
    }
    if (cl->gpus_per_node > 0) {
        if (tasks && j->tasks_per_node > 0 && j->tasks_per_node != cl->gpus_per_node) {
            Diag *g = diag_error(c->d, tasks->value->at, "'tasks' must equal the %d GPUs per node of cluster '%s'",
                                 cl->gpus_per_node, cl->name);
            diag_note(g, "llmc runs one trainer process per GPU");
        }
        if (!tasks) j->tasks_per_node = cl->gpus_per_node;
    } else if (!tasks) {
        j->tasks_per_node = 1;
    }
    /* sbatch { gpus_per_task }: the allocation's tasks x it must be the GPUs the
     * script asks per node; LLaMA-Factory's launcher is one task per node that
     * needs them all (srun would inherit one GPU per task) */
    if (j->site.gpus_per_task > 0 && cl->gpus_per_node > 0) {
        if (j->merge || (j->run && j->run->backend == BACKEND_LLAMAFACTORY)) {
            Diag *g = diag_error(c->d, j->site.gpus_per_task_at, "'gpus_per_task' does not go with backend = "
                                 "llamafactory (%s '%s')", j->merge ? "merge" : "run", j->merge ? j->merge->name : j->run->name);
            diag_note(g, "its job step is one launcher per node over all %d GPUs; srun would give it only %d",
                      cl->gpus_per_node, j->site.gpus_per_task);
        } else if (j->tasks_per_node > 0 && j->site.gpus_per_task * j->tasks_per_node != cl->gpus_per_node) {
            Diag *g = diag_error(c->d, j->site.gpus_per_task_at, "gpus_per_task = %d with %d tasks per node asks for %d "
                                 "GPUs per node; the script asks for the %d of cluster '%s'", j->site.gpus_per_task,
                                 j->tasks_per_node, j->site.gpus_per_task * j->tasks_per_node, cl->gpus_per_node, cl->name);
            diag_help(g, "gpus_per_task = %d", cl->gpus_per_node / j->tasks_per_node > 0 ? cl->gpus_per_node / j->tasks_per_node : 1);
        }
    }
    if (!j->cpus_per_task && cl->cpus > 0 && j->tasks_per_node > 0) {
        j->cpus_per_task = cl->cpus / j->tasks_per_node;
        if (j->cpus_per_task < 1) j->cpus_per_task = 1;
    }
    if (j->tasks_per_node > 0 && cl->cpus > 0 && j->cpus_per_task * j->tasks_per_node > cl->cpus) {
        Diag *g = diag_error(c->d, j->cpus_per_task_at.start.file ? j->cpus_per_task_at : j->tasks_at,
                             "%d tasks x %d cpus_per_task = %d CPUs, but nodes of cluster '%s' have %d",
                             j->tasks_per_node, j->cpus_per_task, j->tasks_per_node * j->cpus_per_task, cl->name, cl->cpus);
        diag_help(g, "cpus_per_task = %d fits", cl->cpus / j->tasks_per_node > 0 ? cl->cpus / j->tasks_per_node : 1);
    }
    if (j->mem_bytes && cl->memory_bytes && j->mem_bytes > cl->memory_bytes) {
        Diag *g = diag_error(c->d, j->mem_at, "'mem' asks for more memory than a node of cluster '%s' has", cl->name);
        diag_note(g, "cluster '%s' memory is set at %s:%d", cl->name, cl->memory_at.start.file, cl->memory_at.start.line);
    }
}

/* What the llmc trainer's backend for this cluster implements (the table
 * llmc_backend_caps, contract/backend_caps.h): a plan that relies on more would pass the estimate and
 * then run out of memory, or be refused by llmc-train after the queue wait.
 * On one rank there is nothing to shard: every stage is the same. */
static void check_job_llmc_caps(Checker *c, const PlanJob *j, const PlanCluster *cl, const PlanTrain *t)
{
    int64_t llmc_world = (int64_t)(j->nodes > 0 ? j->nodes : 1) * (j->tasks_per_node > 0 ? j->tasks_per_node : 1);
    LlmcBackendId backend = cl->gpu ? LLMC_BACKEND_CUDA : LLMC_BACKEND_CPU;
    const LlmcBackendCaps *caps = &llmc_backend_caps[backend];
    bool finetune = t->method == METHOD_LORA || t->method == METHOD_FREEZE;
    if (t->backend == BACKEND_LLMC && finetune && !caps->finetune) {
        Diag *g = diag_error(c->d, t->method_at.start.file ? t->method_at : t->at,
                             "method = %s is not implemented by the llmc trainer on %s", method_llm_names[t->method],
                             caps->where);
        diag_help(g, "use backend = llamafactory in run '%s'", t->name);
    } else if (t->backend == BACKEND_LLMC && finetune && !llmc_finetune_ok(backend, t->offload)) {
        Diag *g = diag_error(c->d, t->offload_at.start.file ? t->offload_at : t->at,
                             "offload with method = %s is not implemented by the llmc trainer on %s",
                             method_llm_names[t->method], caps->where);
        diag_note(g, "the llmc CUDA backend offloads full training's optimizer; the trainable part of freeze or "
                  "lora is small");
        diag_help(g, "remove offload from run '%s'", t->name);
    } else if (t->backend == BACKEND_LLMC && t->method == METHOD_LORA && !llmc_lora_rank_ok(backend, t->lora_rank)) {
        bool too_big = caps->lora_rank_max && t->lora_rank > caps->lora_rank_max;
        Diag *g = diag_error(c->d, t->method_at.start.file ? t->method_at : t->at,
                             "lora_rank = %d: the llmc trainer on %s takes ranks that are multiples of %d%s",
                             t->lora_rank, caps->where, caps->lora_rank_step,
                             too_big ? arena_printf(c->a, " up to %d", caps->lora_rank_max) : "");
        diag_help(g, "lora_rank = %d", llmc_lora_rank_nearest(backend, t->lora_rank));
    } else if (t->backend == BACKEND_LLMC && finetune && !llmc_shard_ok(backend, true, (int)t->shard, 1)) {
        Diag *g = diag_error(c->d, t->shard_at.start.file ? t->shard_at : t->at,
                             "shard = %s with method = %s is not implemented by the llmc trainer on %s",
                             shard_llm_names[t->shard], method_llm_names[t->method], caps->where);
        diag_note(g, "the llmc trainer shards full training only; the trainable part of freeze or lora is small");
        diag_help(g, "use shard = none");
    } else if (t->backend == BACKEND_LLMC && !llmc_shard_ok(backend, false, (int)t->shard, (int)llmc_world)) {
        Diag *g = diag_error(c->d, t->shard_at.start.file ? t->shard_at : t->at,
                             "shard = %s is not implemented by the llmc trainer on %s",
                             shard_llm_names[t->shard], caps->where);
        diag_note(g, "%s; job '%s' has %lld ranks", caps->shard_note, j->name, (long long)llmc_world);
        diag_help(g, "use backend = llamafactory (DeepSpeed ZeRO-%d), or shard = %s if it fits (llmc explain)",
                  (int)t->shard, shard_llm_names[caps->max_shard]);
    }
    /* The llmc GPU backend is CUDA: an AMD part runs LLaMA-Factory (ROCm). */
    if (t->backend == BACKEND_LLMC && cl->gpu && cl->gpu_amd) {
        Diag *g = diag_error(c->d, t->backend_at.start.file ? t->backend_at : j->cluster_at,
                             "the llmc trainer has no backend for %s (AMD) GPUs", cl->gpu->name);
        diag_note(g, "llmc-train-cuda is built with CUDA, cuBLASLt and NCCL");
        diag_help(g, "use backend = llamafactory in run '%s' (PyTorch on ROCm)", t->name);
    }
    /* Optimizer offload in the llmc trainer: the CUDA backend, the optimizer
     * only (master weights and moments in pinned host memory): the whole state
     * on one GPU, each rank's shard under ZeRO-2/3 on several. */
    if (t->backend == BACKEND_LLMC && !llmc_offload_ok(backend, t->offload, (int)t->shard, (int)llmc_world)) {
        bool multi = cl->gpu && llmc_world > 1 && t->offload <= caps->max_offload;
        const char *why = !cl->gpu ? "the CPU backend keeps everything in host memory already"
                        : t->offload == OFFLOAD_ALL ? "the llmc CUDA backend offloads the optimizer, not the parameters"
                        : multi ? arena_printf(c->a, "on several GPUs the llmc CUDA backend offloads each rank's "
                                               "shard of the optimizer, which needs shard = zero2 or zero3; job '%s' "
                                               "has %lld ranks", j->name, (long long)llmc_world)
                        : NULL;
        if (why) {
            Diag *g = diag_error(c->d, t->offload_at, "offload = %s is not implemented by the llmc trainer here",
                                 offload_llm_names[t->offload]);
            diag_note(g, "%s", why);
            if (multi) diag_help(g, "shard = zero2 (or zero3) in run '%s'", t->name);
            else diag_help(g, "use backend = llamafactory in run '%s' (DeepSpeed offload)", t->name);
        }
    }
}

/* Global batch arithmetic: sequences per optimizer step (batch per gpu x
 * grad_accum x processes) within the limit and, for sft, within the samples
 * of the data (else an epoch has no step). */
static void check_job_global_batch(Checker *c, const PlanJob *j, const PlanTrain *t)
{
    if (j->nodes > 0 && j->tasks_per_node > 0 && t->micro_batch > 0 && t->grad_accum > 0) {
        int64_t world = (int64_t)j->nodes * j->tasks_per_node;
        int64_t global = world * t->micro_batch * t->grad_accum;
        const PlanLimit *gl = plan_limit(PL_TRAIN_GLOBAL_BATCH);
        if (within(c, j->nodes_at, "world size", PL_PARALLEL_WORLD, (double)world,
                   arena_printf(c->a, "%lld processes (%d nodes x %d)", (long long)world, j->nodes, j->tasks_per_node)) &&
            plan_limit_violation(gl, (double)global)) {
            Diag *g = diag_error(c->d, j->nodes_at, "global batch of %lld sequences is more than %.0f",
                                 (long long)global, gl->max);
            diag_note(g, "global batch = batch %d per gpu x grad_accum %d x %lld processes (%d nodes x %d)",
                      t->micro_batch, t->grad_accum, (long long)world, j->nodes, j->tasks_per_node);
        }
        int64_t samples = 0;
        bool known = t->ndata > 0;
        for (int i = 0; i < t->ndata; i++) {
            if (t->data[i]->samples < 0) known = false;
            else samples += t->data[i]->samples;
        }
        if (known && t->stage == STAGE_SFT && global > samples) {
            Diag *g = diag_error(c->d, j->nodes_at,
                                 "global batch of %lld sequences is larger than the %lld samples of run '%s'",
                                 (long long)global, (long long)samples, t->name);
            diag_note(g, "global batch = batch %d per gpu x grad_accum %d x %lld processes (%d nodes x %d)",
                      t->micro_batch, t->grad_accum, (long long)world, j->nodes, j->tasks_per_node);
            diag_help(g, "use fewer nodes or a smaller batch so that an epoch has at least one step");
        }
    }
}

/* A job's profile measured one trainer: the other's efficiency is not the same. */
static void check_job_profile(Checker *c, const PlanJob *j, const PlanTrain *t)
{
    const PlanProfile *p = j->profile;
    if (!p || !p->backend_set || p->backend == t->backend) return;
    Diag *g = diag_error(c->d, j->profile_at, "profile '%s' was measured on backend = %s, but run '%s' uses backend = %s",
                         p->name, backend_llm_names[p->backend], t->name, backend_llm_names[t->backend]);
    diag_note(g, "profile '%s' backend is set at %s:%d", p->name, p->backend_at.start.file, p->backend_at.start.line);
    diag_help(g, "calibrate a profile from runs of backend = %s (llmc calibrate)", backend_llm_names[t->backend]);
}

/* A merge job (run = MERGE): llamafactory-cli export is one process on one
 * node (export_device auto spreads the model over that node's GPUs). */
static void check_job_merge(Checker *c, const PlanJob *j, const PlanCluster *cl)
{
    const PlanMerge *m = j->merge;
    if (j->nodes > 1) {
        Diag *g = diag_error(c->d, j->nodes_at, "job '%s' runs merge '%s' on %d nodes; llamafactory-cli export is one "
                             "process on one node", j->name, m->name, j->nodes);
        diag_help(g, "nodes = 1");
    }
    if (m->device == MERGE_DEVICE_AUTO && !cl->gpu && (cl->hostlist || cl->minimal)) {
        Diag *g = diag_error(c->d, m->device_at, "merge '%s' has device = auto, but job '%s' runs it on cluster '%s', "
                             "which has no GPUs", m->name, j->name, cl->name);
        diag_help(g, "device = cpu (the merge in host memory)");
    }
}

/* job NAME { ... }: its keys, then the job against its cluster and against
 * its run (checkpoint cadence, precision on CPUs, the llmc backend's
 * capabilities, the global batch). */

void check_job(Checker *c, const Item *it, PlanJob *j)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    Entry *tasks = check_job_keys(c, it, &s, j);
    const PlanCluster *cl = j->cluster;
    if (!cl) return;
    check_job_fits_cluster(c, j, cl, tasks);
    if (j->merge) check_job_merge(c, j, cl);
    const PlanTrain *t = j->run;
    if (!t) return;
    if (t->checkpoint_at.start.file && t->checkpoint_every_seconds > 0 && j->time_seconds > 0 &&
        t->checkpoint_every_seconds >= j->time_seconds) {
        Diag *g = diag_warning(c->d, t->checkpoint_at, "run '%s' checkpoints less often than job '%s' may run",
                               t->name, j->name);
        diag_note(g, "a job stopped at its time limit before the first checkpoint loses all of its work");
    }
    /* (fp8 there: check_job_formats, with what FP8 needs) */
    if (!cl->gpu && (cl->hostlist || cl->minimal) && t->precision != PREC_FP32 && t->precision != PREC_FP8) {
        Diag *g = diag_error(c->d, t->precision_at.start.file ? t->precision_at : j->cluster_at,
                             "cluster '%s' has no GPUs, so run '%s' must use precision = fp32", cl->name, t->name);
        diag_note(g, "the CPU backend trains in fp32; bf16 is the default");
    }
    check_job_llmc_caps(c, j, cl, t);
    check_job_formats(c, j, cl, t);
    check_job_global_batch(c, j, t);
    check_job_profile(c, j, t);
}

/* ---- chained jobs (`after = JOB`) and output directories ---- */

static bool method_is_adapter(FinetuneMethod m) { return m == METHOD_LORA || m == METHOD_QLORA; }

/* The job of plan that runs train block t (NULL: none). */
static const PlanJob *job_running(const Plan *plan, const PlanTrain *t)
{
    for (int i = 0; t && i < plan->njobs; i++) if (plan->jobs[i]->run == t) return plan->jobs[i];
    return NULL;
}

/* The job of plan that runs merge m (NULL: none). */
static const PlanJob *job_merging(const Plan *plan, const PlanMerge *m)
{
    for (int i = 0; m && i < plan->njobs; i++) if (plan->jobs[i]->merge == m) return plan->jobs[i];
    return NULL;
}

/* A merge in a chain: a merge job starts after the job that trains its
 * adapter; a job after a merge job trains the merged model. */
static void check_job_after_merge(Checker *c, const Plan *plan, const PlanJob *j, const PlanJob *a)
{
    if (j->merge && a->run != j->merge->adapter) {
        Diag *g = diag_error(c->d, j->after_at, "job '%s' merges the adapter of run '%s', but job '%s' it runs after "
                             "%s", j->name, j->merge->adapter ? j->merge->adapter->name : "?", a->name,
                             a->merge ? arena_printf(c->a, "runs merge '%s'", a->merge->name)
                                      : arena_printf(c->a, "trains run '%s'", a->run ? a->run->name : "?"));
        diag_note(g, "the merge reads the adapter that run's job leaves in its output");
        const PlanJob *trains = job_running(plan, j->merge->adapter);
        if (trains) diag_help(g, "after = %s", trains->name);
        return;
    }
    if (j->run && a->merge && j->run->model != &a->merge->merged) {
        Diag *g = diag_error(c->d, j->run->model_at.start.file ? j->run->model_at : j->after_at,
                             "run '%s' trains model '%s', but job '%s' it runs after writes the merged model '%s'",
                             j->run->name, j->run->model ? j->run->model->name : "?", a->name, a->merge->name);
        diag_note(g, "job '%s' starts from what job '%s' writes: the model of merge '%s'", j->name, a->name, a->merge->name);
        diag_help(g, "model = %s in run '%s'", a->merge->name, j->run->name);
    }
}

/* The order a merge needs: its job waits for the job that trains the
 * adapter, and a run of the merged model waits for the merge's job
 * (afterok); a merge's adapter run without an output and without a job in
 * the plan leaves nothing to merge. */
void check_job_chain_order(Checker *c, const Plan *plan, int idx)
{
    const PlanJob *j = plan->jobs[idx];
    const PlanMerge *m = j->merge;
    if (m && m->adapter) {
        const PlanJob *trains = job_running(plan, m->adapter);
        if (trains && !j->after) {
            Diag *g = diag_error(c->d, j->run_at, "job '%s' merges the adapter that job '%s' trains, but does not wait "
                                 "for it", j->name, trains->name);
            diag_note(g, "without the order both are queued at once; the merge would read no adapter, or one half "
                      "written");
            diag_help(g, "after = %s", trains->name);
        } else if (!trains && m->adapter->output_default) {
            Diag *g = diag_error(c->d, m->adapter_at, "merge '%s': run '%s' has no 'output' and no job of this plan "
                                 "runs it, so its adapter is nowhere", m->name, m->adapter->name);
            diag_help(g, "output = \"DIR\" in run '%s' (where its adapter was saved), or a job that runs it",
                      m->adapter->name);
        }
    }
    const PlanModel *tm = j->run ? j->run->model : NULL;
    const PlanJob *mj = tm && tm->merged_from ? job_merging(plan, tm->merged_from) : NULL;
    if (mj && !j->after) {
        Diag *g = diag_error(c->d, j->run_at, "run '%s' trains the merged model '%s' that job '%s' writes, but job "
                             "'%s' does not wait for it", j->run->name, tm->name, mj->name, j->name);
        diag_help(g, "after = %s", mj->name);
    }
}

/* One job after another: the later run starts from the earlier one's trained
 * model (LLaMA-Factory full/freeze: its output_dir; llmc: output_dir/final)
 * or, after LoRA/QLoRA, from the same base with that adapter. */
void check_job_after(Checker *c, const Plan *plan, int idx)
{
    const PlanJob *j = plan->jobs[idx];
    const PlanJob *a = j->after;
    if (!a) return;
    if (a == j) {
        diag_error(c->d, j->after_at, "job '%s' cannot run after itself", j->name);
        return;
    }
    /* a cycle: reported once, at the job of the cycle that comes first in the plan */
    const PlanJob *p = a;
    for (int n = 0; p && n <= plan->njobs; n++, p = p->after) {
        if (p != j) continue;
        bool first = true;
        const PlanJob *q = a;
        for (int m = 0; q && q != j && m <= plan->njobs; m++, q = q->after)
            for (int k = 0; k < idx; k++) if (plan->jobs[k] == q) first = false;
        if (first) {
            Diag *g = diag_error(c->d, j->after_at, "jobs form a cycle through 'after': job '%s' waits for itself", j->name);
            diag_help(g, "the first job of a chain has no 'after'");
        }
        return;
    }
    if (j->merge || a->merge) {
        check_job_after_merge(c, plan, j, a);
        return;
    }
    const PlanTrain *t = j->run, *ta = a->run;
    if (!t || !ta) return;
    if (t->model && ta->model && t->model != ta->model) {
        Diag *g = diag_error(c->d, t->model_at.start.file ? t->model_at : j->after_at,
                             "run '%s' trains model '%s', but job '%s' it runs after trains model '%s'",
                             t->name, t->model->name, a->name, ta->model->name);
        diag_note(g, "job '%s' starts from the model job '%s' trained: the same network", j->name, a->name);
        diag_help(g, "model = %s in run '%s'", ta->model->name, t->name);
    }
    bool adapter = ta->backend == BACKEND_LLAMAFACTORY && method_is_adapter(ta->method);
    if (adapter && (t->backend != BACKEND_LLAMAFACTORY || !method_is_adapter(t->method))) {
        Diag *g = diag_error(c->d, j->after_at, "run '%s' cannot start from the LoRA adapter job '%s' trains", t->name, a->name);
        if (t->backend != BACKEND_LLAMAFACTORY)
            diag_note(g, "the llmc trainer loads whole models, not adapters");
        else
            diag_note(g, "LLaMA-Factory takes an adapter (adapter_name_or_path) only with method lora or qlora");
        diag_help(g, "method = lora in run '%s' (with backend = llamafactory), or a full run '%s'", t->name, ta->name);
        /* a full run needs the merged model: LLaMA-Factory's export merges base + adapter */
        if (ta->model && t->backend == BACKEND_LLAMAFACTORY)
            diag_help(g, "or merge first: merge %s_merged { adapter = %s  model = %s  output = \"DIR\" }, a job that "
                         "runs it after job '%s', and model = %s_merged in run '%s', its job after the merge's",
                      ta->name, ta->name, ta->model->name, a->name, ta->name, t->name);
    } else if (adapter && (t->method == METHOD_QLORA || t->shard == SHARD_ZERO3) &&
               (t->stage == STAGE_DPO || t->stage == STAGE_KTO)) {
        /* model/adapter.py: no merge on a quantised base or under ZeRO-3, so the
         * adapter is trained further and the reference is the base without it */
        Diag *g = diag_warning(c->d, j->after_at, "run '%s' trains the adapter of job '%s' further; its reference model is "
                               "the base without that adapter", t->name, a->name);
        diag_note(g, "LLaMA-Factory merges an adapter into the base only when the base is not quantised and not under "
                     "ZeRO-3 (%s)", t->method == METHOD_QLORA ? "method = qlora" : "shard = zero3");
        diag_help(g, "method = lora with shard = zero2 or none, so the %s reference is the model after '%s'",
                  t->stage == STAGE_DPO ? "DPO" : "KTO", ta->name);
    }
}

/* A job resumes from the checkpoints in its output directory: two jobs writing
 * one (or one inside the other) would resume from each other's. Default
 * outputs (runs/NAME in each job's own compiled directory) never meet. */
static bool path_within(const char *outer, const char *inner)
{
    size_t n = strlen(outer);
    while (n > 1 && outer[n - 1] == '/') n--;
    return strncmp(outer, inner, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

void check_job_outputs(Checker *c, const Plan *plan, int idx)
{
    const PlanJob *j = plan->jobs[idx];
    const PlanTrain *t = j->run;
    if (!t || t->output_default || !t->output_dir) return;
    for (int k = 0; k < idx; k++) {
        const PlanTrain *o = plan->jobs[k]->run;
        if (!o || o->output_default || !o->output_dir) continue;
        if (!path_within(o->output_dir, t->output_dir) && !path_within(t->output_dir, o->output_dir)) continue;
        Diag *g = o == t
            ? diag_error(c->d, j->run_at, "jobs '%s' and '%s' both run '%s', so both write to output directory \"%s\"",
                         plan->jobs[k]->name, j->name, t->name, t->output_dir)
            : diag_error(c->d, t->output_at.start.file ? t->output_at : j->run_at,
                         "jobs '%s' and '%s' write to one output directory: \"%s\" and \"%s\"",
                         plan->jobs[k]->name, j->name, o->output_dir, t->output_dir);
        diag_note(g, "a job resumes from the checkpoints in its output directory; it would take the other job's");
        diag_help(g, "give each job's run its own 'output'");
        return;
    }
}
