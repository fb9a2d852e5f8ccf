/* emit_slurm.c — the Slurm artifacts of a job: the slurm.conf and gres.conf
 * snippets of its cluster and the sbatch script (from templates/). Every value
 * comes from the JobLayout, so the GRES type and count, task counts and memory
 * are the same in all three. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_internal.h"

char *template_fill(Tmpl *t, const char *name, char *err, size_t errlen)
{
    const char *text = template_text(name);
    if (!text) { snprintf(err, errlen, "template %s is missing", name); tmpl_free(t); return NULL; }
    Buf out;
    buf_init(&out);
    char why[256];
    if (tmpl_fill(t, text, &out, why, sizeof why) != 0) {
        snprintf(err, errlen, "templates/%s.tmpl: %s", name, why);
        buf_free(&out);
        tmpl_free(t);
        return NULL;
    }
    tmpl_free(t);
    return out.data ? out.data : strdup("");
}

/* The holes shared by slurm.conf and gres.conf. */
static void cluster_vars(Tmpl *t, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    Buf nodes;
    buf_init(&nodes);
    hostlist_compress(&nodes, c->hosts, c->nhosts);
    tmpl_set(t, "cluster", c->name);
    tmpl_set(t, "nodes", nodes.failed ? NULL : nodes.data);
    if (nodes.failed) t->failed = true;
    buf_free(&nodes);
    tmpl_set(t, "gpu", L->gpu ? "1" : "");
    tmpl_set(t, "cpu_only", L->gpu ? "" : "1");
}

/* "gpu:TYPE:N" or, untyped, "gpu:N" (slurm.conf Gres=, --gres). */
static void gres_spec(Buf *b, const JobLayout *L)
{
    if (L->gres_type) buf_printf(b, "gpu:%s:%d", L->gres_type, L->gpus_per_node);
    else buf_printf(b, "gpu:%d", L->gpus_per_node);
}

char *emit_slurm_conf(const JobLayout *L, char *err, size_t errlen)
{
    Tmpl t;
    tmpl_init(&t);
    cluster_vars(&t, L);
    tmpl_setf(&t, "cpus", "%d", L->cluster->cpus);
    tmpl_setf(&t, "real_memory_mib", "%llu", (unsigned long long)L->node_mem_mib);
    Buf g;
    buf_init(&g);
    if (L->gpu) gres_spec(&g, L);
    tmpl_set(&t, "node_gres", g.data ? g.data : "");
    buf_free(&g);
    tmpl_set(&t, "partition", L->cluster->partition);
    return template_fill(&t, "slurm.conf", err, errlen);
}

char *emit_gres_conf(const JobLayout *L, char *err, size_t errlen)
{
    Tmpl t;
    tmpl_init(&t);
    cluster_vars(&t, L);
    tmpl_set(&t, "gres_type", L->gpu && L->gres_type ? L->gres_type : "");
    tmpl_set(&t, "gres_typed", L->gpu && L->gres_type ? "1" : "");
    tmpl_set(&t, "gres_untyped", L->gpu && !L->gres_type ? "1" : "");
    /* NVIDIA: /dev/nvidiaN; AMD (ROCm): the render nodes /dev/dri/renderD128... */
    bool amd = L->gpu && L->cluster->gpu_amd;
    const char *dev = amd ? "/dev/dri/renderD" : "/dev/nvidia";
    int first = amd ? 128 : 0;
    if (L->gpus_per_node == 1) tmpl_setf(&t, "device_files", "%s%d", dev, first);
    else tmpl_setf(&t, "device_files", "%s[%d-%d]", dev, first, first + (L->gpus_per_node > 0 ? L->gpus_per_node - 1 : 0));
    return template_fill(&t, "gres.conf", err, errlen);
}

/* The site settings of the job (plan.h: PlanSite) as the holes both job
 * templates share: extra #SBATCH lines, exports, setup lines and the
 * container. Every value is checked (compiler/check/check_site.c: check_site) and, where
 * the shell reads it, single-quoted. */
static void site_vars(Tmpl *t, const JobLayout *L)
{
    const PlanSite *s = &L->job->site;
    Buf b;
    buf_init(&b);
    if (L->gpu) {
        buf_puts(&b, s->gpus_per_node == 1 ? "--gpus-per-node=" : "--gres=");
        if (s->gpus_per_node == 1) {
            if (L->gres_type) buf_printf(&b, "%s:", L->gres_type);
            buf_printf(&b, "%d", L->gpus_per_node);
        } else {
            gres_spec(&b, L);
        }
    }
    tmpl_set(t, "gpu_request", b.data ? b.data : "");
    buf_free(&b);

    buf_init(&b);
    if (s->constraint) buf_printf(&b, "#SBATCH --constraint=%s\n", s->constraint);
    if (s->exclusive == 1) buf_puts(&b, "#SBATCH --exclusive\n");
    if (s->reservation) buf_printf(&b, "#SBATCH --reservation=%s\n", s->reservation);
    if (s->mail_type) buf_printf(&b, "#SBATCH --mail-type=%s\n", s->mail_type);
    if (s->mail_user) buf_printf(&b, "#SBATCH --mail-user=%s\n", s->mail_user);
    if (s->comment) buf_printf(&b, "#SBATCH --comment=\"%s\"\n", s->comment);
    if (s->exclude) buf_printf(&b, "#SBATCH --exclude=%s\n", s->exclude);
    if (s->nodelist) buf_printf(&b, "#SBATCH --nodelist=%s\n", s->nodelist);
    if (s->switches > 0) buf_printf(&b, "#SBATCH --switches=%d\n", s->switches);
    /* typed like the GRES request: Slurm refuses a typed --gres beside an untyped --gpus-per-task */
    if (s->gpus_per_task > 0)
        buf_printf(&b, "#SBATCH --gpus-per-task=%s%s%d\n", L->gres_type ? L->gres_type : "", L->gres_type ? ":" : "",
                   s->gpus_per_task);
    for (int i = 0; i < s->nextra; i++) buf_printf(&b, "#SBATCH %s\n", s->extra[i]);
    if (b.len) b.data[--b.len] = '\0';   /* the template line ends it */
    tmpl_set(t, "site_directives", b.data ? b.data : "");
    buf_free(&b);

    buf_init(&b);
    for (int i = 0; i < s->nenv; i++) {
        buf_printf(&b, "%sexport %s=", i ? "\n" : "", s->env[i].name);
        sh_quote(&b, s->env[i].value);
    }
    tmpl_set(t, "site_env", b.data ? b.data : "");
    buf_free(&b);

    buf_init(&b);
    for (int i = 0; i < s->nsetup; i++) {
        buf_puts(&b, i ? "\n    " : "    ");
        sh_quote(&b, s->setup[i]);
    }
    tmpl_set(t, "site_setup", b.data ? b.data : "");
    buf_free(&b);

    bool box = s->image != NULL;   /* a container, s->container its runtime */
    tmpl_set(t, "container", box ? "1" : "");
    tmpl_set(t, "no_container", box ? "" : "1");
    tmpl_set(t, "pyxis", box && s->container == CONTAINER_PYXIS ? "1" : "");
    tmpl_set(t, "apptainer", box && s->container == CONTAINER_APPTAINER ? "1" : "");
    tmpl_set(t, "apptainer_nv", !L->gpu ? "" : L->cluster->gpu_amd ? " --rocm" : " --nv");
    buf_init(&b);
    if (box) sh_quote(&b, s->image);
    tmpl_set(t, "image_q", b.data ? b.data : "");
    buf_free(&b);
    buf_init(&b);
    for (int i = 0; i < s->nmounts; i++) {
        buf_puts(&b, ",");
        buf_puts(&b, s->mounts[i]);
    }
    Buf q;
    buf_init(&q);
    if (b.len) sh_quote(&q, b.data);
    tmpl_set(t, "container_mounts_q", q.data ? q.data : "");
    tmpl_set(t, "plan_mounts", b.len ? "1" : "");
    buf_free(&q);
    buf_free(&b);
}

/* A hole holding path single-quoted for the shell (path is freed). */
static void set_quoted(Tmpl *t, const char *name, char *path)
{
    Buf b;
    buf_init(&b);
    sh_quote(&b, path ? path : "");
    free(path);
    tmpl_set(t, name, b.data ? b.data : "");
    buf_free(&b);
}

/* The holes of the LLaMA-Factory template's two kinds of job: a training run
 * (its output_dir, resumed from) or a merge (`llamafactory-cli export` of the
 * merge's YAML, the merged model's directory checked at the end). */
static void lf_job_vars(Tmpl *t, const JobLayout *L)
{
    const PlanMerge *m = L->merge;
    const PlanTrain *train = m ? m->adapter : L->train;
    tmpl_set(t, "training", m ? "" : "1");
    tmpl_set(t, "merging", m ? "1" : "");
    tmpl_set(t, "merge", m ? m->name : "");
    tmpl_set(t, "train", train ? train->name : "");
    tmpl_set(t, "stage", m || !train ? "" : name_stage(train->stage));
    tmpl_set(t, "marker", m ? lf_merge_yaml_name() : "plan.json");
    tmpl_set(t, "lf_command", m ? "export" : "train");
    tmpl_set(t, "yaml", m ? lf_merge_yaml_name() : lf_yaml_name());
    tmpl_set(t, "deepspeed", m ? "" : lf_deepspeed_name(L));
    tmpl_set(t, m ? "output_dir_q" : "export_dir_q", "");
    set_quoted(t, m ? "export_dir_q" : "output_dir_q", m ? artifact_path(L, m->output_dir) : artifact_output_dir(L));
}

char *emit_job_script(const JobLayout *L, const Estimate *e, char *err, size_t errlen)
{
    const PlanJob *job = L->job;
    const PlanTrain *train = L->train;
    bool lf = L->merge || train->backend == BACKEND_LLAMAFACTORY;
    Tmpl t;
    tmpl_init(&t);
    tmpl_set(&t, "job", job->name);
    tmpl_set(&t, "cluster", L->cluster->name);
    tmpl_set(&t, "partition", L->cluster->partition);
    tmpl_setf(&t, "nodes", "%d", job->nodes);
    tmpl_setf(&t, "tasks_per_node", "%d", L->tasks_per_node);
    tmpl_set(&t, "gpu", L->gpu ? "1" : "");
    site_vars(&t, L);
    tmpl_setf(&t, "cpus_per_task", "%d", L->cpus_per_task);
    /* --mem=0: all of each node's memory */
    if (L->mem_mib) tmpl_setf(&t, "mem", "%lluM", (unsigned long long)L->mem_mib);
    else tmpl_set(&t, "mem", "0");
    Buf b;
    buf_init(&b);
    slurm_time(&b, job->time_seconds);
    tmpl_set(&t, "time", b.data);
    buf_free(&b);
    const char *log_dir = job->log_dir ? job->log_dir : "logs";
    tmpl_set(&t, "log_dir", log_dir);
    buf_init(&b);
    sh_quote(&b, log_dir);
    tmpl_set(&t, "log_dir_q", b.data);
    buf_free(&b);
    tmpl_set(&t, "account", job->account ? job->account : "");
    tmpl_set(&t, "qos", job->qos ? job->qos : "");
    tmpl_set(&t, "requeue", job->requeue ? "1" : "");
    tmpl_set(&t, "no_requeue", job->requeue ? "" : "1");
    /* a merge is not stopped at a checkpoint: it is short, and a requeued
     * export starts over */
    int lead = L->merge ? 0 : job_stop_signal_seconds(L, e);
    if (lead > 0) tmpl_setf(&t, "signal_seconds", "%d", lead);
    else tmpl_set(&t, "signal_seconds", "");
    if (lf) {
        lf_job_vars(&t, L);
        /* after another job: the file LLaMA-Factory saves last into output_dir
         * (the adapter's config, or the model's after save_model or export) */
        if (L->start_path) set_quoted(&t, "start_path_q", artifact_path(L, L->start_path));
        else tmpl_set(&t, "start_path_q", "");
        tmpl_set(&t, "after_job", L->start_path && job->after ? job->after->name : "");
        bool after_merge = job->after && job->after->merge;
        tmpl_set(&t, "start_what", !L->start_path ? "" : L->start_adapter ? "its LoRA adapter"
                                   : after_merge ? "the merged model" : "its model");
        tmpl_set(&t, "start_why", !L->start_path ? "" : after_merge ? "LLaMA-Factory has no model to load"
                                  : "LLaMA-Factory would fail after loading the base");
        tmpl_set(&t, "start_file", !L->start_path ? "" : L->start_adapter ? "adapter_config.json" : "config.json");
        tmpl_setf(&t, "gpus_per_node", "%d", L->gpus_per_node);
        tmpl_setf(&t, "cpus_per_node", "%d", L->cpus_per_task * L->tasks_per_node);
        return template_fill(&t, "job_llamafactory.slurm", err, errlen);
    }
    tmpl_set(&t, "train", train->name);
    tmpl_set(&t, "stage", name_stage(train->stage));
    tmpl_setf(&t, "world_size", "%d", L->world_size);
    tmpl_set(&t, "trainer", L->gpu ? "llmc-train-cuda" : "llmc-train");
    return template_fill(&t, "job_llmc.slurm", err, errlen);
}
