/* log.h — per-rank log lines (runtime/log.c).
 *
 * Every line on stderr starts with "[rank R/W HOST] " so that the merged output
 * of many ranks (Slurm's one log file per job) says who wrote each line.
 * Before log_set_rank the prefix is "[rank ?/? HOST] ". Lines are written with
 * one write(2) each, so lines of different ranks never interleave mid-line.
 */
#ifndef LLMC_LOG_H
#define LLMC_LOG_H

#include <stddef.h>

/* Called by dist_init once the rank is known (host may be NULL: gethostname). */
void log_set_rank(int rank, int world, const char *host);
/* The current prefix, e.g. "[rank 1/2 node02] " (for callers that print themselves). */
const char *log_prefix(void);
/* printf-style; a newline is added when missing. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with "error: " after the prefix. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copy s[0..len) into out (outlen > 0, always NUL-terminated) so that it is safe
 * to print on a terminal: control characters, DEL, C1 controls (U+0080..U+009F)
 * and bytes that are not UTF-8 are written as \xNN (\n \r \t \e as such, and
 * a backslash stays a backslash); printable ASCII and other valid UTF-8 are
 * kept. When out is too small the text is cut at a character and ends in "...".
 * Returns out. Every message that echoes input (file names, column and role
 * names, record text) goes through this. */
char *log_escape(char *out, size_t outlen, const char *s, size_t len);

#endif
