/* emit.h — artifacts from the typed plan (templates/ filled by compiler/emit_*.c). */
#ifndef LLMC_EMIT_H
#define LLMC_EMIT_H

#include "plan.h"
#include "estimate.h"

/* The file a merge job's directory holds instead of plan.json: its YAML for
 * `llamafactory-cli export` (llmc submit and status find merge jobs by it). */
#define LLMC_MERGE_YAML "llamafactory_merge.yaml"

/* Cross-file lints (GRES type/count, ntasks vs world size, memory/CPU requests
 * fit the node, time format). Run by both `llmc check` and compile.
 * Returns the number of errors added to d. */
int emit_check(const Plan *plan, Diags *d);

/* The rules that need the estimate (ests[i] of plan->jobs[i]): a
 * LLaMA-Factory run that needs several time limits must be able to resume.
 * Run by both `llmc check` and compile, after the estimator. Returns the
 * number of errors added to d. */
int emit_check_estimated(const Plan *plan, const Estimate *ests, Diags *d);

/* Write every artifact of every job in plan into out_dir: a temp directory
 * beside out_dir, renamed into place when out_dir is new; in an earlier output
 * only the files listed in its manifest are replaced (emit_fs.c); on a failure
 * before the first change out_dir is left as it was. ests[i] is the estimate of plan->jobs[i]. Returns 0 on success, else
 * reports into d and returns non-zero. */
int emit_outputs(const Plan *plan, const Estimate *ests, const char *out_dir, Diags *d);

#endif
