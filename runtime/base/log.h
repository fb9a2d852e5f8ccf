/* log.h — per-rank log lines (runtime/base/log.c).
 *
 * Every line starts with its time (ISO 8601, UTC, milliseconds) and
 * "[rank R/W HOST] ", so that the merged output of many ranks (Slurm's one log
 * file per job) says when and who wrote each line:
 *     2026-12-01T13:10:20.123Z [rank 0/2 n1] step 7/12 loss 3.0428 ...
 * Before log_set_rank (commands of no rank: prepare, verify) the prefix is "[HOST] ". Progress (log_info)
 * goes to stdout, warnings and errors to stderr (Slurm's .out and .err files).
 * Lines are written with one write(2) each, so lines of different ranks never
 * interleave mid-line.
 */
#ifndef LLMC_LOG_H
#define LLMC_LOG_H

#include <stddef.h>

/* Called by dist_init once the rank is known (host may be NULL: gethostname). */
void log_set_rank(int rank, int world, const char *host);
/* The current time and prefix, e.g. "2026-12-01T13:10:20.123Z [rank 1/2 node02] "
 * (for callers that print themselves); valid until the next call. */
const char *log_prefix(void);
/* Now as "2026-12-01T13:10:20.123Z" (UTC) into out; returns out. */
char *log_time(char out[32]);
/* printf-style, to stdout; a newline is added when missing. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* log_info's line on stderr: progress of a command whose stdout is its answer
 * (prepare --check's JSON summary), so that the answer stays parseable. */
void log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* From now on log_info writes to stderr as log_note does: for a command whose
 * stdout is its answer (bench's JSON line), whose ranks log their start. */
void log_info_to_stderr(void);
/* The same to stderr, with "warning: " after the prefix. */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same to stderr, with "error: " after the prefix. */
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
