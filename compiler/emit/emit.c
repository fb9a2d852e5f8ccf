/* emit.c — emit_outputs: every artifact of every job, into one directory,
 * atomically (emit_fs.c). One job: its files at the top of DIR. Several jobs:
 * one subdirectory per job, each with the same set of files, so a job script
 * always finds plan.json beside itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_internal.h"
#include "plan_limits.h"   /* contract/: plan_epoch_steps, as llmc-train counts them */

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

/* Where the run of job a (the job another runs after) leaves what the next
 * one starts from, as a path relative to llmc's working directory (like
 * art_dir): LLaMA-Factory saves the model or the adapter into output_dir,
 * llmc-train exports the model to output_dir/final (docs/runtime.md). A
 * default output is runs/NAME inside a's own subdirectory (a chain has two
 * jobs or more, so each has one). */
static char *chain_start_path(const char *out_dir, const PlanJob *a)
{
    if (a->merge) return strdup(a->merge->output_dir);   /* the merged model: a plan path */
    const PlanTrain *t = a->run;
    const char *final = t->backend == BACKEND_LLMC ? "/final" : "";
    char *p = NULL;
    int n = t->output_default ? asprintf(&p, "%s/%s/%s%s", out_dir, a->name, t->output_dir, final)
                              : asprintf(&p, "%s%s", t->output_dir, final);
    return n < 0 ? NULL : p;
}

static int emit_job(OutDir *o, const char *out_dir, const char *prefix, const PlanJob *job,
                    const Estimate *e, Diags *d)
{
    JobLayout L;
    job_layout(job, &L);
    char *art_dir = NULL;
    if (asprintf(&art_dir, "%s/%s", out_dir, prefix) < 0) { diag_error_nopos(d, "out of memory"); return -1; }
    L.art_dir = art_dir;
    char *start = NULL;
    if (job->after) {
        if (!(start = chain_start_path(out_dir, job->after))) { diag_error_nopos(d, "out of memory"); free(art_dir); return -1; }
        L.start_path = start;
        const PlanTrain *ta = job->after->run;
        L.start_adapter = ta && ta->backend == BACKEND_LLAMAFACTORY &&
                          (ta->method == METHOD_LORA || ta->method == METHOD_QLORA);
    } else if (job->merge && job->merge->adapter) {
        /* the adapter of a run no job of this plan runs: where its output says */
        if (!(start = strdup(job->merge->adapter->output_dir))) { diag_error_nopos(d, "out of memory"); free(art_dir); return -1; }
        L.start_path = start;
        L.start_adapter = true;
    }
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
    if (asprintf(&script_name, "%s.slurm", job->name) < 0) { diag_error_nopos(d, "out of memory"); free(start); free(art_dir); return -1; }
    WRITE(script_name, emit_job_script(&L, e, err, sizeof err), 0755);
    free(script_name);
    if (job->merge) {
        /* llamafactory-cli export reads its YAML alone: no plan.json, data or DeepSpeed file */
        WRITE(lf_merge_yaml_name(), emit_lf_merge_yaml(&L, err, sizeof err), 0644);
        free(start);
        free(art_dir);
        return rc;
    }
    WRITE("plan.json", emit_plan_json(&L, e, err, sizeof err), 0644);
    WRITE("dataset_info.json", emit_dataset_info(&L, err, sizeof err), 0644);
    if (L.train->backend == BACKEND_LLAMAFACTORY) {
        WRITE(lf_yaml_name(), emit_lf_yaml(&L, e, err, sizeof err), 0644);
        WRITE(lf_deepspeed_name(&L), emit_lf_deepspeed(&L, err, sizeof err), 0644);
    }
#undef WRITE
    free(start);
    free(art_dir);
    return rc;
}

/* DIR/submit.sh for a plan of several jobs: each job's sbatch in an order
 * where a job comes after the one it runs after, with the dependency. */
static char *emit_submit_script(const Plan *plan, char *err, size_t errlen)
{
    int n = plan->njobs;
    int *order = calloc((size_t)n, sizeof *order);   /* position + 1 in the submission, 0: not yet */
    Buf b;
    buf_init(&b);
    int done = 0;
    for (int pass = 0; order && done < n && pass < n; pass++)
        for (int i = 0; i < n; i++) {
            const PlanJob *j = plan->jobs[i];
            if (order[i]) continue;
            int dep = -1;
            for (int k = 0; j->after && k < n; k++) if (plan->jobs[k] == j->after) dep = k;
            if (dep >= 0 && !order[dep]) continue;
            order[i] = ++done;
            Buf q;
            buf_init(&q);
            sh_quote(&q, j->log_dir ? j->log_dir : "logs");
            buf_printf(&b, "%smkdir -p -- %s\n", done > 1 ? "\n" : "", q.data ? q.data : "logs");
            buf_free(&q);
            if (dep >= 0) {
                buf_printf(&b, "id_%d=$(sbatch --parsable --dependency=afterok:\"$id_%d\" --kill-on-invalid-dep=yes \"$@\" "
                              "\"$dir/%s/%s.slurm\")\n", done, order[dep], j->name, j->name);
                buf_printf(&b, "id_%d=${id_%d%%%%;*}\n", done, done);
                buf_printf(&b, "echo \"%s: job $id_%d (after %s: job $id_%d)\"\n", j->name, done, plan->jobs[dep]->name,
                           order[dep]);
            } else {
                buf_printf(&b, "id_%d=$(sbatch --parsable \"$@\" \"$dir/%s/%s.slurm\")\n", done, j->name, j->name);
                buf_printf(&b, "id_%d=${id_%d%%%%;*}\n", done, done);
                buf_printf(&b, "echo \"%s: job $id_%d\"\n", j->name, done);
            }
        }
    bool complete = order && done == n && !b.failed;
    free(order);
    if (!complete) {
        buf_free(&b);
        snprintf(err, errlen, done < n ? "the jobs' 'after' form a cycle" : "out of memory");
        return NULL;
    }
    if (b.len) b.data[--b.len] = '\0';   /* the template line ends it */
    Tmpl t;
    tmpl_init(&t);
    tmpl_setf(&t, "njobs", "%d", n);
    tmpl_set(&t, "submit_lines", b.data);
    buf_free(&b);
    return template_fill(&t, "submit.sh", err, errlen);
}

/* The run's length as the estimate counts it (steps from epochs and the
 * data) against what the plan asks of it: epochs must give the data at
 * least one global batch, and a warmup in steps must end before the run does
 * (max_steps' own case is the checker's). An error when the steps are counted
 * (stated tokens, prepare's stats or shards) and the llmc trainer runs it; a
 * warning when they are a guess from file sizes or sample counts, or when
 * LLaMA-Factory runs it: transformers' schedulers accept a warmup longer than
 * the run (get_*_schedule_with_warmup ramp for every step, so the learning
 * rate never reaches its peak) and round a fraction of a step up to one. */
static void check_run_length(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanTrain *t = job->run;
    if (t->max_steps > 0 || e->tokens_source == TOKENS_UNKNOWN || e->global_batch < 1) return;
    bool counted = e->tokens_source <= TOKENS_FROM_STATS || e->sequences_from_shards;
    bool firm = counted && t->backend == BACKEND_LLMC;
    const char *source = counted ? "counted" : "estimated from the datasets' sizes or sample counts";
    const char *why_warning = firm ? NULL : !counted ? "a warning, not an error: the steps are an estimate"
                                                    : "a warning, not an error: LLaMA-Factory runs it as written "
                                                      "(transformers' schedules accept it)";
    double seqs = e->seqs_per_sample > 1 ? e->seqs_per_sample : 1;
    double batches = plan_epoch_steps(t->epochs, e->sequences_per_epoch / seqs, (double)e->global_batch);
    if (t->epochs_at.start.file && batches < 1) {
        Diag *g = (firm ? diag_error : diag_warning)(d, t->epochs_at, "epochs = %g gives run '%s' %.3g of one "
                                                     "optimizer step", t->epochs, t->name, batches);
        diag_note(g, "%.0f sequences per epoch (%s), a global batch of %lld: the trainer would round it up to a "
                  "whole step", e->sequences_per_epoch, source, (long long)e->global_batch);
        if (why_warning) diag_note(g, "%s", why_warning);
        diag_help(g, "epochs = %g gives one step", ceil(t->epochs / batches * 1e6) / 1e6);
        return;
    }
    if (t->warmup_steps > 0 && e->steps_total > 0 && t->warmup_steps >= e->steps_total) {
        Diag *g = (firm ? diag_error : diag_warning)(d, t->warmup_at, "warmup (%lld steps) is as long as run '%s' "
                                                     "or longer: it has %lld steps, so the learning rate never "
                                                     "reaches its peak lr %g", (long long)t->warmup_steps, t->name,
                                                     (long long)e->steps_total, t->lr);
        diag_note(g, "%lld steps: %g epochs of %.0f sequences (%s) at a global batch of %lld",
                  (long long)e->steps_total, t->epochs, e->sequences_per_epoch / seqs, source,
                  (long long)e->global_batch);
        if (why_warning) diag_note(g, "%s", why_warning);
        diag_help(g, "a warmup in percent follows the run's length: warmup = 3%%");
    }
}

int emit_check_estimated(const Plan *plan, const Estimate *ests, Diags *d)
{
    int before = diags_error_count(d);
    for (int i = 0; ests && i < plan->njobs; i++)
        if (plan->jobs[i] && plan->jobs[i]->run) check_run_length(plan->jobs[i], &ests[i], d);
    for (int i = 0; ests && i < plan->njobs; i++) {
        const PlanJob *job = plan->jobs[i];
        if (!job || !job->run || job->run->backend != BACKEND_LLAMAFACTORY || ests[i].requeue_segments <= 1) continue;
        const PlanTrain *t = job->run;
        int n = ests[i].requeue_segments;
        if (t->stage == STAGE_RM && (t->method == METHOD_FULL || t->method == METHOD_FREEZE)) {
            /* hparams/parser.py: can_resume_from_checkpoint = False for rm with full/freeze */
            Diag *g = diag_error(d, job->time_at, "run '%s' needs %d time limits, but LLaMA-Factory cannot resume "
                                 "a %s rm run from a checkpoint", t->name, n, method_llm_names[t->method]);
            diag_note(g, "every requeued start would train from step 0 again (hparams/parser.py drops resume_from_checkpoint)");
            diag_help(g, "a time limit the whole run fits in, or method = lora");
        }
        /* requeue off: the estimator warns that the run may not finish */
    }
    return diags_error_count(d) - before;
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
        if (!plan->jobs[i] || !plan->jobs[i]->cluster ||
            !(plan->jobs[i]->merge || (plan->jobs[i]->run && plan->jobs[i]->run->model))) {
            diag_error_nopos(d, "nothing written to '%s': job %d is incomplete", out_dir, i + 1);
            return -1;
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
    if (rc == 0 && plan->njobs > 1) {
        err[0] = '\0';
        char *text = emit_submit_script(plan, err, sizeof err);
        if (!text) { diag_error_nopos(d, "submit.sh: %s", err); rc = -1; }
        else rc = put(&o, "", "submit.sh", text, 0755, d);
    }
    if (rc == 0 && outdir_commit(&o, err, sizeof err) != 0) {
        diag_error_nopos(d, "%s", err);
        rc = -1;
    }
    outdir_abort(&o);
    return rc;
}
