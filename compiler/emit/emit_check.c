/* emit_check.c — the per-job layout every artifact is written from, and the
 * checks that the artifacts will be accepted by Slurm and cannot be used to
 * inject into a shell script or a Slurm config line. Run by `llmc check` and
 * before every compile; each error points at the plan value responsible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_internal.h"
#include "plan_limits.h"   /* contract/: plan_control_char_at, as the checker and llmc-train */

#define MIB (1024.0 * 1024.0)
#define MAX_GPUS_PER_NODE 64
#define MAX_TIME_SECONDS (365.0 * 24 * 3600)

void job_layout(const PlanJob *job, JobLayout *L)
{
    memset(L, 0, sizeof *L);
    L->job = job;
    L->train = job->run;
    L->merge = job->merge;
    L->cluster = job->cluster;
    const PlanCluster *c = job->cluster;
    L->gpu = c && c->gpu && c->gpus_per_node > 0;
    /* the site's GRES type where it names one (sbatch { gres_type = "a100" }),
     * none for an untyped GRES (gres_type = none), else the catalogue's */
    const PlanSite *site = &job->site;
    L->gres_type = !L->gpu ? NULL : site->gres == 1 ? site->gres_type : site->gres == 2 ? NULL : c->gpu->gres_type;
    L->gpus_per_node = L->gpu ? c->gpus_per_node : 0;
    /* one rank per GPU; without GPUs one per node unless the plan says */
    if (L->gpu) L->tasks_per_node = c->gpus_per_node;
    else L->tasks_per_node = job->tasks_per_node > 0 ? job->tasks_per_node : 1;
    L->world_size = job->nodes * L->tasks_per_node;
    int cpus = c ? c->cpus : 0;
    if (job->cpus_per_task > 0) L->cpus_per_task = job->cpus_per_task;
    else L->cpus_per_task = cpus / L->tasks_per_node > 0 ? cpus / L->tasks_per_node : 1;
    L->node_mem_mib = c ? (uint64_t)floor((double)c->memory_bytes / MIB) : 0;
    L->mem_mib = job->mem_bytes ? (uint64_t)ceil((double)job->mem_bytes / MIB) : 0;
    L->time_minutes = (int64_t)ceil(job->time_seconds / 60.0 - 1e-9);
}

int stop_signal_lead_seconds(const JobLayout *L, const Estimate *e)
{
    return estimate_stop_signal_seconds(L->job, e);   /* the estimator checks it against the limit */
}

int job_stop_signal_seconds(const JobLayout *L, const Estimate *e)
{
    /* whenever the job can come back (requeue on), not only when the estimate
     * says the run needs several time limits: an estimate can be wrong, and
     * Slurm does not requeue a job cut off at its limit. Never when the lead
     * would swallow the limit (the signal would come at every start). */
    int lead = stop_signal_lead_seconds(L, e);
    return L->job->requeue && lead < L->job->time_seconds ? lead : 0;
}

/* ---- checks ---- */

static void check_name(Diags *d, SrcRange at, const char *what, const char *s)
{
    if (!s) return;
    long cc = plan_control_char_at(s);
    char ch[16];
    if (cc >= 0) {
        Diag *g = diag_error(d, at, "%s contains a control character (%s at offset %ld)",
                             what, plan_control_char_name(s, cc, ch), cc);
        diag_note(g, "it would end the line in slurm.conf, an #SBATCH directive or the job script");
        return;
    }
    if (!slurm_name_ok(s)) {
        Diag *g = diag_error(d, at, "%s '%s' is not a valid Slurm name", what, s);
        diag_note(g, "it reaches slurm.conf, #SBATCH directives and file names unquoted");
        diag_help(g, "use letters, digits, '.', '_' and '-', not starting with '-' or '.'");
    }
}

static void check_path(Diags *d, SrcRange at, const char *what, const char *s)
{
    if (!s) return;
    long cc = plan_control_char_at(s);
    char ch[16];
    if (cc >= 0)
        diag_error(d, at, "%s contains a control character (%s at offset %ld)", what, plan_control_char_name(s, cc, ch), cc);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void check_cluster(const PlanCluster *c, Diags *d)
{
    check_name(d, c->at, "cluster name", c->name);
    check_name(d, c->partition_at, "partition", c->partition);
    if (c->nhosts < 1) diag_error(d, c->hostlist_at, "cluster '%s' has no nodes", c->name ? c->name : "?");
    if (c->minimal || !c->hosts) {
        /* a node count: no host names, and CPUs and memory only where given */
        if (!c->minimal) diag_error(d, c->hostlist_at, "cluster '%s' has no host names", c->name ? c->name : "?");
        if (c->gpu && (c->gpus_per_node < 1 || c->gpus_per_node > MAX_GPUS_PER_NODE))
            diag_error(d, c->gpu_at, "%d GPUs per node: must be between 1 and %d", c->gpus_per_node, MAX_GPUS_PER_NODE);
        return;
    }
    for (int i = 0; i < c->nhosts; i++) {
        if (!slurm_name_ok(c->hosts[i]) || plan_control_char_at(c->hosts[i]) >= 0) {
            check_name(d, c->hostlist_at, "node name", c->hosts[i]);
            break;   /* one message for the hostlist, not one per node */
        }
    }
    /* A node twice would be two NodeName lines for one slurmd: sorted copy,
     * n log n (hostlists run to 100,000 nodes). */
    if (c->nhosts > 1) {
        const char **sorted = malloc((size_t)c->nhosts * sizeof *sorted);
        if (sorted) {
            memcpy(sorted, c->hosts, (size_t)c->nhosts * sizeof *sorted);
            qsort(sorted, (size_t)c->nhosts, sizeof *sorted, compare_strings);
            for (int i = 1; i < c->nhosts; i++)
                if (strcmp(sorted[i - 1], sorted[i]) == 0) {
                    diag_error(d, c->hostlist_at, "node '%s' is listed twice", sorted[i]);
                    break;
                }
            free(sorted);
        }
    }
    if (c->gpu) {
        if (c->gpus_per_node < 1 || c->gpus_per_node > MAX_GPUS_PER_NODE)
            diag_error(d, c->gpu_at, "%d GPUs per node: must be between 1 and %d",
                       c->gpus_per_node, MAX_GPUS_PER_NODE);
        if (!c->gpu->gres_type || !slurm_name_ok(c->gpu->gres_type))
            diag_error(d, c->gpu_at, "GPU '%s' has no usable GRES type name", c->gpu->name);
    } else if (c->gpus_per_node != 0) {
        diag_error(d, c->gpu_at, "%d GPUs per node but no GPU model", c->gpus_per_node);
    }
    if (c->cpus < 1) diag_error(d, c->cpus_at, "cluster '%s': cpus must be at least 1", c->name ? c->name : "?");
    if ((double)c->memory_bytes < MIB)
        diag_error(d, c->memory_at, "node memory %llu bytes is less than 1 MiB (slurm.conf RealMemory counts MiB)",
                   (unsigned long long)c->memory_bytes);
}

/* The site settings (plan.h: PlanSite) as the script will hold them: the
 * checker refuses bad values with their positions; these are the guarantees
 * the emitter itself relies on, whatever built the plan. #SBATCH values are
 * not shell and cannot be quoted, so they keep to a character set; what the
 * shell reads is single-quoted and needs only to stay on its line. */
static bool chars_ok(const char *s, const char *allowed)
{
    if (!s || !*s) return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              (*p >= 0x20 && strchr(allowed, *p))))
            return false;
    return true;
}

static void check_site(const PlanSite *s, Diags *d)
{
    struct { const char *v; SrcRange at; const char *what, *allowed; } dir[] = {
        {s->constraint, s->constraint_at, "constraint", "_.-&|*[]():,!"},
        {s->reservation, s->reservation_at, "reservation", "_.-"},
        {s->mail_user, s->mail_user_at, "mail_user", "_.-+@"},
        {s->mail_type, s->mail_type_at, "mail_type", "_,"},
        {s->comment, s->comment_at, "comment", " _.-+@:=,/()"},
        {s->gres == 1 ? s->gres_type : NULL, s->gres_at, "gres_type", "_.-"},
    };
    for (size_t i = 0; i < sizeof dir / sizeof dir[0]; i++)
        if (dir[i].v && !chars_ok(dir[i].v, dir[i].allowed)) {
            Diag *g = diag_error(d, dir[i].at, "%s '%s' cannot be written into an #SBATCH line", dir[i].what, dir[i].v);
            diag_note(g, "#SBATCH lines are not shell: they cannot be quoted");
        }
    if (s->gres == 1 && s->gres_type && !slurm_name_ok(s->gres_type))
        diag_error(d, s->gres_at, "gres_type '%s' is not a valid Slurm name", s->gres_type);
    for (int i = 0; i < s->nenv; i++) {
        const char *n = s->env[i].name;
        bool ok = n && ((*n >= 'A' && *n <= 'Z') || (*n >= 'a' && *n <= 'z') || *n == '_');
        for (const char *p = n; ok && *p; p++)
            ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
        if (!ok) diag_error(d, s->env[i].at, "environment variable name '%s' is not a shell name", n ? n : "");
        else if (!s->env[i].value || plan_control_char_at(s->env[i].value) >= 0)
            diag_error(d, s->env[i].at, "environment variable '%s' has no value or a control character in it", n);
    }
    for (int i = 0; i < s->nsetup; i++)
        if (!s->setup[i] || plan_control_char_at(s->setup[i]) >= 0)
            diag_error(d, s->setup_at, "setup line %d is missing or has a control character", i + 1);
    if (s->image) {   /* a container */
        if (!*s->image || plan_control_char_at(s->image) >= 0 || strpbrk(s->image, " ,"))
            diag_error(d, s->image_at, "container image is empty or has white space, ',' or a control character");
        for (int i = 0; i < s->nmounts; i++)
            if (!s->mounts[i] || s->mounts[i][0] != '/' || plan_control_char_at(s->mounts[i]) >= 0 ||
                strpbrk(s->mounts[i], " ,"))
                diag_error(d, s->mounts_at, "container mount %d must be an absolute SRC[:DST[:ro|rw]] without white space or ','",
                           i + 1);
    }
}

/* A merge job: LLaMA-Factory on GPU nodes (its container and CLI), the
 * paths its YAML and script take. */
static void check_merge(const PlanMerge *m, const JobLayout *L, Diags *d)
{
    check_name(d, m->at, "merge block name", m->name);
    if (m->model) check_path(d, m->model->path_at, "model path", m->model->path);
    check_path(d, m->output_at, "merge output directory", m->output_dir);
    if (m->adapter) check_path(d, m->adapter->output_at, "output directory", m->adapter->output_dir);
    if (!L->gpu) {
        Diag *g = diag_error(d, L->job->run_at, "merge job '%s' runs LLaMA-Factory, which needs a GPU cluster; '%s' "
                             "has no GPUs", L->job->name, L->cluster->name);
        diag_help(g, "run the merge on the cluster its LoRA run trained on");
    }
}

static void check_job(const PlanJob *job, Diags *d)
{
    check_name(d, job->at, "job name", job->name);
    if (job->name && (strlen(job->name) > 200))
        diag_error(d, job->at, "job name is longer than 200 characters");
    if (job->account) check_name(d, job->account_at, "account", job->account);
    if (job->qos) check_name(d, job->qos_at, "qos", job->qos);
    check_site(&job->site, d);
    if (!job->cluster || (!job->run && !job->merge)) return;   /* the checker reported it */

    const PlanCluster *c = job->cluster;
    JobLayout L;
    job_layout(job, &L);

    if (job->nodes < 1)
        diag_error(d, job->nodes_at, "nodes = %d: a job needs at least one node", job->nodes);
    else if (job->nodes > c->nhosts) {
        Diag *g = diag_error(d, job->nodes_at, "job asks for %d nodes but cluster '%s' has %d",
                             job->nodes, c->name, c->nhosts);
        diag_note(g, "sbatch would reject it: 'Requested node configuration is not available'");
    }

    if (c->cpus > 0 && (int64_t)L.cpus_per_task * L.tasks_per_node > c->cpus) {
        Diag *g = diag_error(d, job->cpus_per_task_at,
                             "%d CPUs per task x %d tasks per node = %lld CPUs, but a node of '%s' has %d",
                             L.cpus_per_task, L.tasks_per_node,
                             (long long)L.cpus_per_task * L.tasks_per_node, c->name, c->cpus);
        diag_help(g, "cpus_per_task = %d fits", c->cpus / L.tasks_per_node > 0 ? c->cpus / L.tasks_per_node : 1);
    }
    if (L.gpu && job->tasks_per_node > 0 && job->tasks_per_node != L.gpus_per_node)
        diag_error(d, job->tasks_at, "tasks = %d but --gres gives %d GPUs per node: one rank per GPU",
                   job->tasks_per_node, L.gpus_per_node);
    if (job->cpus_per_task < 0)
        diag_error(d, job->cpus_per_task_at, "cpus_per_task must be positive");

    if (L.mem_mib > L.node_mem_mib && L.node_mem_mib > 0) {
        Diag *g = diag_error(d, job->mem_at, "--mem=%lluM asks for more than a node of '%s' has (RealMemory=%llu MiB)",
                             (unsigned long long)L.mem_mib, c->name, (unsigned long long)L.node_mem_mib);
        diag_help(g, "leave mem out to ask for the whole node (--mem=0)");
    }

    if (!(job->time_seconds > 0))
        diag_error(d, job->time_at, "time limit must be positive");
    else if (job->time_seconds > MAX_TIME_SECONDS)
        diag_error(d, job->time_at, "time limit of %.0f days is longer than a year", job->time_seconds / 86400);
    else if (fmod(job->time_seconds, 60.0) != 0) {
        Diag *g = diag_warning(d, job->time_at, "time limit rounded up to %lld minutes", (long long)L.time_minutes);
        diag_note(g, "Slurm counts time limits in whole minutes");
    }

    const char *log_dir = job->log_dir ? job->log_dir : "logs";
    long bad = sbatch_path_bad_at(log_dir);
    if (!*log_dir) {
        diag_error(d, job->log_dir_at, "log directory is empty");
    } else if (bad >= 0) {
        char ch[16];
        Diag *g = plan_control_char_at(log_dir) == bad
            ? diag_error(d, job->log_dir_at, "log directory contains a control character (%s at offset %ld)",
                         plan_control_char_name(log_dir, bad, ch), bad)
            : diag_error(d, job->log_dir_at, "log directory contains '%c' (offset %ld), which #SBATCH --output cannot take",
                         log_dir[bad], bad);
        diag_note(g, "#SBATCH lines are not shell: they cannot be quoted, and %% starts a Slurm filename pattern");
    }

    if (job->merge) {
        check_merge(job->merge, &L, d);
        return;
    }
    /* strings that reach the LLaMA-Factory YAML, plan.json and dataset_info */
    const PlanTrain *t = job->run;
    check_name(d, t->at, "train block name", t->name);
    if (t->model) {
        check_path(d, t->model->path_at, "model path", t->model->path);
        check_path(d, t->model->tokenizer_at, "tokenizer path", t->model->tokenizer);
    }
    check_path(d, t->output_at, "output directory", t->output_dir);
    if (t->backend == BACKEND_LLAMAFACTORY) {
        if (!L.gpu) {
            Diag *g = diag_error(d, t->backend_at, "backend = llamafactory needs a GPU cluster; '%s' has no GPUs", c->name);
            diag_help(g, "use backend = llmc, whose CPU backend runs without GPUs");
        }
        if (t->seed > 0xffffffffULL)
            diag_error(d, t->at, "seed %llu does not fit 32 bits, as LLaMA-Factory (numpy) needs",
                       (unsigned long long)t->seed);
    }
    for (int i = 0; i < t->ndata; i++) {
        const PlanDataset *ds = t->data[i];
        if (!ds) continue;
        check_name(d, ds->at, "dataset name", ds->name);   /* joined with ',' in the YAML */
        check_path(d, ds->file_at, "dataset file", ds->file);
    }
    for (int i = 0; i < t->neval_data; i++) {
        const PlanDataset *ds = t->eval_data[i];
        if (!ds) continue;
        check_name(d, ds->at, "dataset name", ds->name);
        check_path(d, ds->file_at, "dataset file", ds->file);
    }
    if (t->ref_model) check_path(d, t->ref_model->path_at, "reference model path", t->ref_model->path);
    if (t->tokenized_path) check_path(d, t->tokenized_at, "tokenized_path", t->tokenized_path);
}

int emit_check(const Plan *plan, Diags *d)
{
    int before = diags_error_count(d);
    for (int i = 0; i < plan->nclusters; i++)
        if (plan->clusters[i]) check_cluster(plan->clusters[i], d);
    for (int i = 0; i < plan->njobs; i++)
        if (plan->jobs[i]) check_job(plan->jobs[i], d);
    for (int i = 0; i < plan->njobs; i++)
        for (int j = i + 1; j < plan->njobs; j++)
            if (plan->jobs[i] && plan->jobs[j] && plan->jobs[i]->name && plan->jobs[j]->name &&
                strcmp(plan->jobs[i]->name, plan->jobs[j]->name) == 0)
                diag_error(d, plan->jobs[j]->at, "a second job named '%s' (its files would overwrite the first's)",
                           plan->jobs[j]->name);
    return diags_error_count(d) - before;
}
