/* log.c — per-rank log prefix; see log.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "log.h"

static char prefix[160];
static char stamped[200];   /* log_prefix's answer: the time, then prefix */
static int info_fd = STDOUT_FILENO;   /* log_info's stream (log_info_to_stderr) */

/* A line logged before log_set_rank (an early error) still gets the host name. */
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
        snprintf(prefix, sizeof prefix, "[%s] ", host);   /* a command of no rank: prepare, verify */
    else
        snprintf(prefix, sizeof prefix, "[rank %d/%d %s] ", rank, world, host);
}

char *log_time(char out[32])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000);
    return out;
}

const char *log_prefix(void)
{
    char t[32];
    ensure_prefix();
    snprintf(stamped, sizeof stamped, "%s %s", log_time(t), prefix);
    return stamped;
}

/* The one writer behind log_info/note/warn/error: "TIME PREFIX KIND message\n" to FD. A message longer than
 * the 2 KiB line is cut (its last byte becomes the newline) rather than split over two writes. */
static void log_line(int fd, const char *kind, const char *fmt, va_list ap)
{
    char line[2048], t[32];
    ensure_prefix();
    int n = snprintf(line, sizeof line, "%s %s%s", log_time(t), prefix, kind);
    if (n < 0) return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m < 0) return;
    size_t len = strlen(line);
    if (len == sizeof line - 1) line[len - 1] = '\n';          /* truncated */
    else if (len == 0 || line[len - 1] != '\n') line[len++] = '\n';
    /* One write per line: lines of concurrent ranks stay whole. stdout may
     * hold a progress line that stdio has not written yet: out first. */
    if (fd == STDOUT_FILENO) fflush(stdout);
    ssize_t w = write(fd, line, len);
    (void)w;
}

void log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line(info_fd, "", fmt, ap);
    va_end(ap);
}

void log_info_to_stderr(void)
{
    info_fd = STDERR_FILENO;
}

void log_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line(STDERR_FILENO, "", fmt, ap);
    va_end(ap);
}

void log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line(STDERR_FILENO, "warning: ", fmt, ap);
    va_end(ap);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line(STDERR_FILENO, "error: ", fmt, ap);
    va_end(ap);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;   /* overlong */
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;                                              /* surrogate */
    if (cp >= 0x80 && cp <= 0x9F) return 0;                                                  /* C1 control */
    return len;
}

char *log_escape(char *out, size_t outlen, const char *s, size_t len)
{
    if (!outlen) return out;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0;
    while (i < len) {
        /* one input character's output: itself, a named escape (\n) or \xNN; at most 4 bytes */
        char piece[8];
        size_t pn, step;
        unsigned c = p[i];
        size_t u = utf8_len(p + i, len - i);
        if (c >= 0x20 && c < 0x7F) { piece[0] = (char)c; pn = 1; step = 1; }
        else if (c >= 0x80 && u) { memcpy(piece, p + i, u); pn = u; step = u; }
        else {
            const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == 0x1B ? "\\e" : NULL;
            if (named) { memcpy(piece, named, 2); pn = 2; }
            else { snprintf(piece, sizeof piece, "\\x%02X", c); pn = 4; }
            step = 1;
        }
        if (o + pn + 1 > outlen || (i + step < len && o + pn + 4 > outlen)) {
            /* no room for this piece (and, when more follows, for "...") */
            if (outlen >= 4) {
                size_t keep = o;
                while (keep + 4 > outlen) keep--;
                if (keep < o)   /* not inside a character */
                    while (keep > 0 && ((unsigned char)out[keep] & 0xC0) == 0x80) keep--;
                memcpy(out + keep, "...", 3);
                o = keep + 3;
            }
            break;
        }
        memcpy(out + o, piece, pn);
        o += pn;
        i += step;
    }
    out[o < outlen ? o : outlen - 1] = '\0';
    return out;
}
