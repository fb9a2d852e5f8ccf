/* submit.h — `llmc submit`, `llmc cancel` and `llmc logs` on the directory
 * llmc wrote (compiler/cli/submit.c; docs/status.md), and what they share with
 * `llmc status`: the jobs of that directory and the ids recorded for them.
 *
 * A directory of one job holds plan.json and JOB.slurm; a chain's (a plan of
 * several jobs) holds submit.sh and a directory per job, JOB/plan.json and
 * JOB/JOB.slurm. `llmc submit` records what it submitted in DIR/jobs.json:
 *     {"submitted_from": "/abs/cwd",
 *      "jobs": [{"job": "sft_job", "id": "123", "after": null,
 *                "stdout": "/abs/logs/sft_job-123.out", "stderr": "..."}, ...]}
 * in submission order (a job after the one it depends on). */
#ifndef LLMC_SUBMIT_H
#define LLMC_SUBMIT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *name;            /* the job block's name */
    char *dir;             /* the directory holding its plan.json */
    char *script;          /* its JOB.slurm */
    char id[32];           /* recorded Slurm job id, "" when none */
    char *after;           /* recorded: the job it waits for (afterok), or NULL */
    char *stdout_path, *stderr_path;   /* recorded: its Slurm output files, or NULL */
    bool merge;            /* a merge job: LLMC_MERGE_YAML in its directory, no plan.json */
} RunJob;

typedef struct {
    char *out;             /* the directory as given, without trailing '/' */
    bool chain;            /* submit.sh and a directory per job */
    RunJob *jobs;          /* submission order when recorded, else the output's order */
    int n;
    bool recorded;         /* jobs.json was there */
} RunDir;

/* The jobs of the directory llmc wrote, with the ids jobs.json records.
 * 0, or -1 with err set (not such a directory, a broken jobs.json). */
int rundir_load(const char *out, RunDir *rd, char *err, size_t errlen);
void rundir_free(RunDir *rd);
/* Whether out is a chain's directory (submit.sh, no plan.json). */
bool rundir_is_chain(const char *out);

/* argv[0] is the command's name. Exit statuses in docs/llmc.1. */
int submit_main(int argc, char **argv);
int cancel_main(int argc, char **argv);
int logs_main(int argc, char **argv);

#endif
