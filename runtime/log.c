/* log.c — per-rank log prefix; see log.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "log.h"

static char prefix[160];

static void ensure_prefix(void)
{
    if (!prefix[0]) log_set_rank(-1, -1, NULL);
}

void log_set_rank(int rank, int world, const char *host)
{
    char name[64] = "?";
    if (!host) {
        if (gethostname(name, sizeof name) != 0) strcpy(name, "?");
        name[sizeof name - 1] = '\0';
        host = name;
    }
    if (rank < 0)
        snprintf(prefix, sizeof prefix, "[rank ?/? %s] ", host);
    else
        snprintf(prefix, sizeof prefix, "[rank %d/%d %s] ", rank, world, host);
}

const char *log_prefix(void)
{
    ensure_prefix();
    return prefix;
}

static void log_line(const char *kind, const char *fmt, va_list ap)
{
    char line[2048];
    ensure_prefix();
    int n = snprintf(line, sizeof line, "%s%s", prefix, kind);
    if (n < 0) return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m < 0) return;
    size_t len = strlen(line);
    if (len == sizeof line - 1) line[len - 1] = '\n';          /* truncated */
    else if (len == 0 || line[len - 1] != '\n') line[len++] = '\n';
    /* One write per line: lines of concurrent ranks stay whole. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line("", fmt, ap);
    va_end(ap);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line("error: ", fmt, ap);
    va_end(ap);
}
