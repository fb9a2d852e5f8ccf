/* emit.c — emit_outputs: every artifact of every job, into one directory,
 * atomically (emit_fs.c). One job: its files at the top of DIR. Several jobs:
 * one subdirectory per job, each with the same set of files, so a job script
 * always finds plan.json beside itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_internal.h"

typedef char *(*LayoutWriter)(const JobLayout *, char *, size_t);

static int put(OutDir *o, const char *prefix, const char *name, char *text, int mode, Diags *d)
{
    char err[512];
    if (!text) return -1;   /* the writer reported */
    char *path = NULL;
    if (asprintf(&path, "%s%s", prefix, name) < 0) { free(text); diag_error_nopos(d, "out of memory"); return -1; }
    int rc = outdir_write(o, path, text, strlen(text), mode, err, sizeof err);
    if (rc != 0) diag_error_nopos(d, "%s", err);
    free(path);
    free(text);
    return rc;
}

static int emit_job(OutDir *o, const char *out_dir, const char *prefix, const PlanJob *job,
                    const Estimate *e, Diags *d)
{
    JobLayout L;
    job_layout(job, &L);
    char *art_dir = NULL;
    if (asprintf(&art_dir, "%s/%s", out_dir, prefix) < 0) { diag_error_nopos(d, "out of memory"); return -1; }
    L.art_dir = art_dir;
    char err[512] = "";
    char *text;
    char *script_name = NULL;
    int rc = 0;

#define WRITE(name, expr, mode)                                            \
    do {                                                                   \
        err[0] = '\0';                                                     \
        text = (expr);                                                     \
        if (!text) { diag_error_nopos(d, "%s: %s", (name), err); rc = -1; } \
        else if (put(o, prefix, (name), text, (mode), d) != 0) rc = -1;    \
    } while (0)

    const K8sArtifact *k8s;
    int nk8s = k8s_artifacts(L.cluster, &k8s);
    /* A cluster declared by node count is the admin's: no snippet to merge. */
    if (nk8s == 0 && !L.cluster->minimal) {
        WRITE("slurm.conf", emit_slurm_conf(&L, err, sizeof err), 0644);
        WRITE("gres.conf", emit_gres_conf(&L, err, sizeof err), 0644);
    }
    /* Slurm in Kubernetes: the operator's resources instead of the snippets */
    for (int i = 0; i < nk8s; i++) WRITE(k8s[i].name, emit_k8s(&L, &k8s[i], err, sizeof err), 0644);
    if (asprintf(&script_name, "%s.slurm", job->name) < 0) { diag_error_nopos(d, "out of memory"); free(art_dir); return -1; }
    WRITE(script_name, emit_job_script(&L, e, err, sizeof err), 0755);
    free(script_name);
    WRITE("plan.json", emit_plan_json(&L, e, err, sizeof err), 0644);
    WRITE("dataset_info.json", emit_dataset_info(&L, err, sizeof err), 0644);
    if (L.train->backend == BACKEND_LLAMAFACTORY) {
        WRITE(lf_yaml_name(), emit_lf_yaml(&L, e, err, sizeof err), 0644);
        WRITE(lf_deepspeed_name(&L), emit_lf_deepspeed(&L, err, sizeof err), 0644);
    }
#undef WRITE
    free(art_dir);
    return rc;
}

int emit_outputs(const Plan *plan, const Estimate *ests, const char *out_dir, Diags *d)
{
    /* The checks that keep every write inside DIR and every script safe
     * must hold whatever the caller did before. */
    Diags *own = diags_new();
    int bad = own ? emit_check(plan, own) : 1;
    if (own) diags_free(own);
    if (bad) {
        diag_error_nopos(d, "nothing written to '%s': the plan fails the artifact checks (see `llmc check`)", out_dir);
        return -1;
    }
    if (plan->njobs < 1) {
        diag_error_nopos(d, "nothing to write: the plan has no job block");
        return -1;
    }
    for (int i = 0; i < plan->njobs; i++)
        if (!plan->jobs[i] || !plan->jobs[i]->run || !plan->jobs[i]->cluster || !plan->jobs[i]->run->model) {
            diag_error_nopos(d, "nothing written to '%s': job %d is incomplete", out_dir, i + 1);
            return -1;
        }

    /* LLaMA-Factory cannot checkpoint on a signal: a run longer than the
     * limit ends at the limit and resumes only when resubmitted. */
    for (int i = 0; ests && i < plan->njobs; i++) {
        const PlanJob *job = plan->jobs[i];
        if (job->run->backend == BACKEND_LLAMAFACTORY && ests[i].requeue_segments > 1) {
            Diag *g = diag_warning(d, job->time_at, "the run needs %d time limits; LLaMA-Factory stops at each limit",
                                   ests[i].requeue_segments);
            diag_note(g, "it saves every save_steps and resumes from the last checkpoint in output_dir when resubmitted");
            diag_help(g, "backend = llmc checkpoints on USR2 before the limit and requeues itself");
        }
    }

    OutDir o;
    char err[512];
    if (outdir_begin(&o, out_dir, err, sizeof err) != 0) {
        diag_error_nopos(d, "%s", err);
        return -1;
    }
    int rc = 0;   /* outdir_commit writes the manifest, OUTDIR_MARKER */
    for (int i = 0; rc == 0 && i < plan->njobs; i++) {
        const PlanJob *job = plan->jobs[i];
        const Estimate *e = ests ? &ests[i] : NULL;
        char *prefix = NULL;
        if (plan->njobs == 1) {
            prefix = strdup("");
        } else {
            if (outdir_mkdir(&o, job->name, err, sizeof err) != 0) { diag_error_nopos(d, "%s", err); rc = -1; break; }
            if (asprintf(&prefix, "%s/", job->name) < 0) prefix = NULL;
        }
        if (!prefix) { diag_error_nopos(d, "out of memory"); rc = -1; break; }
        rc = emit_job(&o, out_dir, prefix, job, e, d);
        free(prefix);
    }
    if (rc == 0 && outdir_commit(&o, err, sizeof err) != 0) {
        diag_error_nopos(d, "%s", err);
        rc = -1;
    }
    outdir_abort(&o);
    return rc;
}
