/* emit_text.c — small text helpers for the emitters: a growable buffer,
 * shell quoting, Slurm hostlist compression, Slurm time limits, and the
 * character rules for names that reach Slurm lines and shell scripts. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "emit_internal.h"
#include "plan_limits.h"   /* contract/: plan_control_char_at */

void buf_init(Buf *b) { memset(b, 0, sizeof *b); }

void buf_free(Buf *b) { free(b->data); buf_init(b); }

void buf_put(Buf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) { b->failed = true; return; }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

void buf_printf(Buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) { b->failed = true; return; }
    if ((size_t)n < sizeof small) { buf_put(b, small, (size_t)n); return; }
    char *big = malloc((size_t)n + 1);
    if (!big) { b->failed = true; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_put(b, big, (size_t)n);
    free(big);
}

/* Inside single quotes nothing is special except the quote itself, which is
 * written as '\'' (close, escaped quote, reopen). */
void sh_quote(Buf *b, const char *s)
{
    buf_put(b, "'", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') buf_put(b, "'\\''", 4);
        else buf_put(b, p, 1);
    }
    buf_put(b, "'", 1);
}

/* A host name split as PREFIX + DIGITS (the numeric suffix Slurm ranges over). */
typedef struct {
    size_t prefix_len;   /* bytes before the numeric suffix */
    int width;           /* digits in the suffix; 0 = no numeric suffix */
    bool padded;         /* the suffix has a leading zero ("007") */
    unsigned long num;
} HostKey;

static HostKey host_key(const char *h)
{
    HostKey k = { strlen(h), 0, false, 0 };
    size_t n = strlen(h), i = n;
    while (i > 0 && isdigit((unsigned char)h[i - 1])) i--;
    /* Suffixes longer than 9 digits are kept as they are (no overflow). */
    if (i < n && n - i <= 9) {
        k.prefix_len = i;
        k.width = (int)(n - i);
        k.padded = h[i] == '0' && k.width > 1;
        k.num = strtoul(h + i, NULL, 10);
    }
    return k;
}

/* Slurm pads a range to the width of its bounds: n[001-032] is fixed width,
 * n[9-10] is not. A group is either fixed width (its first name is padded:
 * every member has exactly that many digits) or free (every member unpadded). */
static bool joins_group(const char *first, HostKey kf, const char *h, HostKey kh)
{
    if (kf.width == 0 || kh.width == 0 || kf.prefix_len != kh.prefix_len ||
        memcmp(first, h, kf.prefix_len) != 0)
        return false;
    return kf.padded ? kh.width == kf.width : !kh.padded;
}

void hostlist_compress(Buf *b, char *const *hosts, int nhosts)
{
    int i = 0;
    while (i < nhosts) {
        if (i > 0) buf_put(b, ",", 1);
        HostKey k = host_key(hosts[i]);
        /* hosts[i..j) form one bracket expression */
        int j = i + 1;
        while (j < nhosts && joins_group(hosts[i], k, hosts[j], host_key(hosts[j]))) j++;
        if (k.width == 0 || j - i == 1) {
            buf_puts(b, hosts[i]);
            i++;
            continue;
        }
        int w = k.padded ? k.width : 0;
        buf_put(b, hosts[i], k.prefix_len);
        buf_put(b, "[", 1);
        int r = i;
        while (r < j) {
            /* a run of consecutive numbers hosts[r..s] */
            int s = r;
            while (s + 1 < j && host_key(hosts[s + 1]).num == host_key(hosts[s]).num + 1) s++;
            if (r > i) buf_put(b, ",", 1);
            buf_printf(b, "%0*lu", w, host_key(hosts[r]).num);
            if (s > r) buf_printf(b, "-%0*lu", w, host_key(hosts[s]).num);
            r = s + 1;
        }
        buf_put(b, "]", 1);
        i = j;
    }
}

void slurm_time(Buf *b, double seconds)
{
    if (!(seconds > 0)) seconds = 60;
    double minutes_d = ceil(seconds / 60.0 - 1e-9);
    if (minutes_d > 1e9) minutes_d = 1e9;
    long long minutes = (long long)minutes_d;
    long long days = minutes / (24 * 60);
    int hours = (int)(minutes / 60 % 24), mins = (int)(minutes % 60);
    buf_printf(b, "%lld-%02d:%02d:00", days, hours, mins);
}

bool slurm_name_ok(const char *s)
{
    if (!s || !*s || *s == '-' || *s == '.') return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-')) return false;
    return true;
}

long sbatch_path_bad_at(const char *s)
{
    static const char bad[] = "'\"\\$`%;&|<>()*?[]{}!#~,=";
    long cc = plan_control_char_at(s);   /* C1 controls too: they are two bytes, not one */
    for (const char *p = s; *p && (cc < 0 || p - s < cc); p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || strchr(bad, c)) return p - s;
    }
    return cc;
}

/* ---- relative paths between the run directory and the output ---- */

/* Lexically normalised absolute form of path (relative to cwd): no ".",
 * no "..", no repeated '/'. Returns a malloc'd string. */
static char *lexical_abs(const char *cwd, const char *path)
{
    Buf in;
    buf_init(&in);
    if (path[0] != '/') { buf_puts(&in, cwd); buf_puts(&in, "/"); }
    buf_puts(&in, path);
    if (in.failed) { buf_free(&in); return NULL; }
    char *out = malloc(in.len + 2);
    if (!out) { buf_free(&in); return NULL; }
    size_t n = 0;
    const char *p = in.data;
    while (*p) {
        while (*p == '/') p++;
        const char *e = p;
        while (*e && *e != '/') e++;
        size_t len = (size_t)(e - p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
            /* skip */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && out[n - 1] != '/') n--;
            if (n > 0) n--;   /* drop the '/' too */
        } else {
            out[n++] = '/';
            memcpy(out + n, p, len);
            n += len;
        }
        p = e;
    }
    if (n == 0) out[n++] = '/';
    out[n] = '\0';
    buf_free(&in);
    return out;
}

char *artifact_path(const JobLayout *L, const char *path)
{
    if (!path) return NULL;
    if (path[0] == '/' || !L->art_dir) return strdup(path);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return strdup(path);
    char *from = lexical_abs(cwd, L->art_dir), *to = lexical_abs(cwd, path);
    char *res = NULL;
    if (from && to) {
        /* longest common prefix of whole components */
        size_t i = 0, common = 0;
        while (from[i] && from[i] == to[i]) {
            i++;
            if (from[i] == '/' || from[i] == '\0') {
                if (to[i] == '/' || to[i] == '\0') common = i;
            }
        }
        Buf b;
        buf_init(&b);
        if (strcmp(from, "/") != 0)
            for (const char *p = from + common; *p; p++)
                if (*p == '/') buf_puts(&b, "../");
        const char *rest = to + common;
        if (*rest == '/') rest++;
        buf_puts(&b, rest);
        if (b.len == 0) buf_puts(&b, ".");
        else if (b.data[b.len - 1] == '/') b.data[--b.len] = '\0';
        res = b.failed ? NULL : b.data;
        if (!res) buf_free(&b);
    }
    free(from);
    free(to);
    return res ? res : strdup(path);
}

char *artifact_output_dir(const JobLayout *L)
{
    const PlanTrain *t = L->train;
    if (!t->output_dir) return strdup("output");
    if (t->output_default) return strdup(t->output_dir);
    return artifact_path(L, t->output_dir);
}
