/* slurm_tools.h — what llmc status, submit, cancel and logs share
 * (compiler/cli/slurm_tools.c): a file read whole, a program run without a
 * shell, and the output of Slurm's clients (scontrol, sbatch, scancel) read. */
#ifndef LLMC_SLURM_TOOLS_H
#define LLMC_SLURM_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

/* printf into a new malloc'd string. */
char *cli_xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Read a whole regular file (at most 1 GiB), NUL-terminated. 0 ok, 1 absent
 * (ENOENT), -1 error (err set: "PATH: why"). */
int cli_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen);
/* Whether prog is an executable in a directory of PATH. */
bool cli_on_path(const char *prog);
/* Run argv (no shell; stdin /dev/null), capture stdout and stderr together
 * into *out (malloc'd). Returns the exit status, -1 if it could not run. */
int cli_run_capture(char *const argv[], char **out);
/* KEY=VALUE out of one line of `scontrol show job -o` (the value up to the next space). */
bool slurm_field(const char *line, const char *key, char *val, size_t vlen);
/* A Slurm client's failure in one line: away from the cluster (no slurm.conf,
 * no controller) its several "error:" lines say only that; else its last line.
 * May change out. Returns a malloc'd string. */
char *slurm_failure(const char *tool, char *out);
/* Slurm's job states in which a job may still run (PENDING, RUNNING, REQUEUED ...). */
bool slurm_state_active(const char *state);

#endif
