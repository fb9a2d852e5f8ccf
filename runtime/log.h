/* log.h — per-rank log lines (runtime/log.c).
 *
 * Every line on stderr starts with "[rank R/W HOST] " so that the merged output
 * of many ranks (Slurm's one log file per job) says who wrote each line.
 * Before log_set_rank the prefix is "[rank ?/? HOST] ". Lines are written with
 * one write(2) each, so lines of different ranks never interleave mid-line.
 */
#ifndef LLMC_LOG_H
#define LLMC_LOG_H

/* Called by dist_init once the rank is known (host may be NULL: gethostname). */
void log_set_rank(int rank, int world, const char *host);
/* The current prefix, e.g. "[rank 1/2 node02] " (for callers that print themselves). */
const char *log_prefix(void);
/* printf-style; a newline is added when missing. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with "error: " after the prefix. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
