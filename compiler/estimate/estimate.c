/* estimate.c — memory per GPU and time to train, from the typed plan alone.
 *
 * Every formula and constant is documented, with its source, in
 * docs/estimator.md; the names of the constants (estimate_internal.h) match
 * that document. The inputs are the PlanJob and what hangs off it (section
 * "Inputs"). This file runs the parts (estimate_internal.h lists them) in
 * order for one job.
 */
#include "estimate_internal.h"

int estimate_job(const PlanJob *job, Estimate *out, Diags *d)
{
    return estimate_job_rows(job, 0, out, d);
}

int estimate_job_rows(const PlanJob *job, double shard_rows, Estimate *out, Diags *d)
{
    memset(out, 0, sizeof *out);
    if (job && job->merge && job->merge->model && job->merge->adapter && job->cluster) {
        estimate_merge(job, out);
        return report_merge(job, out, d);
    }
    if (!job || !job->run || !job->run->model || !job->cluster) return 0;
    const PlanTrain *t = job->run;
    if (!is_cpu_only(job->cluster) && job->cluster->gpu->usable_bytes <= 0) return 0;

    estimate_memory(job, t->micro_batch, t->recompute, t->shard, out);
    out->max_micro_batch_that_fits = max_fitting_batch(job, t->recompute, t->shard);
    const PlanDataset *missing = count_tokens(t, out);
    if (shard_rows >= 1 && !missing) {
        /* the rows prepare wrote: packing leaves room in rows, so more than tokens / context */
        out->sequences_per_epoch = shard_rows;
        out->sequences_from_shards = true;
        out->seq_tokens = out->tokens_per_epoch / shard_rows;
        /* a packed row is computed at its full context, its unused end included */
        if (t->packing && t->context > 0) out->padded_seq_tokens = t->context;
        else if (!(out->padded_seq_tokens >= out->seq_tokens)) out->padded_seq_tokens = out->seq_tokens;
    }
    estimate_time(job, out);
    estimate_startup(job, out);
    estimate_host(job, out);

    int errors = report_memory(job, out, d);
    if (out->fits) report_comm(job, out, d);
    errors += report_host(job, out, d);
    errors += report_time(job, out, d, missing);
    errors += report_startup(job, out, d);
    return errors;
}

int estimate_job_hpz(const PlanJob *job, int group, Estimate *out)
{
    Diags *d = diags_new();
    estimate_hpz_group = group;
    estimate_job_rows(job, 0, out, d);
    estimate_hpz_group = 0;
    diags_free(d);
    /* the secondary copy: every weight's 16-bit partition over the group */
    if (group > 1 && out->usable_bytes > 0) {
        double extra = 2.0 * (double)out->params_total / group;
        out->comm_bytes += extra;
        out->total_bytes += extra;
        out->fits = out->total_bytes <= out->usable_bytes;
    }
    return 0;
}
