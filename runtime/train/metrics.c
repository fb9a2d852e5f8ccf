/* metrics.c — JSON-lines step metrics and the loss-curve SVG (metrics.h). */
#include "metrics.h"
#include "log.h"
#include "run_formats.h"   /* contract/: the keys of a metrics line */

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

uint64_t peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;   /* Linux reports KiB */
}

/* An older writer printed non-finite numbers as C does ("grad_norm":inf),
 * which is not JSON. Rewrite such values of line (NUL-terminated, no newline)
 * as this writer does: null, and the field named in "nonfinite". A malloc'd
 * line, or NULL when there was nothing to rewrite. */
static char *metrics_fix_nonfinite(const char *line)
{
    /* C's spellings, longest first; the value this writer records for each */
    static const struct { const char *c, *as; } words[] = {
        {"-nan", "nan"}, {"nan", "nan"}, {"-inf", "-inf"}, {"inf", "inf"}};
    size_t L = strlen(line), o = 0, fl = 0;
    char *out = malloc(L + 600), flags[512] = "";
    if (!out) return NULL;
    for (size_t i = 0; i < L;) {
        int hit = -1;
        /* "KEY":WORD followed by , or } */
        if (line[i] == ':' && i >= 2 && line[i - 1] == '"')
            for (int w = 0; w < 4 && hit < 0; w++) {
                size_t n = strlen(words[w].c);
                if (!strncmp(line + i + 1, words[w].c, n) && (line[i + 1 + n] == ',' || line[i + 1 + n] == '}'))
                    hit = w;
            }
        if (hit < 0) { out[o++] = line[i++]; continue; }
        size_t kb = i - 1;   /* the key's opening quote */
        while (kb > 0 && line[kb - 1] != '"') kb--;
        int klen = (int)(i - 1 - kb);
        if (kb == 0 || klen > 64 || fl + (size_t)klen + 16 >= sizeof flags) { free(out); return NULL; }
        fl += (size_t)snprintf(flags + fl, sizeof flags - fl, "%s\"%.*s\":\"%s\"", fl ? "," : "", klen, line + kb,
                               words[hit].as);
        memcpy(out + o, ":null", 5);
        o += 5;
        i += 1 + strlen(words[hit].c);
    }
    if (!fl || o == 0 || out[o - 1] != '}') { free(out); return NULL; }
    o--;   /* the flag goes before the closing brace */
    snprintf(out + o, L + 600 - o, ",\"%s\":{%s}}", metrics_keys[MK_NONFINITE], flags);
    return out;
}

/* All of buf, or -1: a short write (a full disk) is an error, not a cut line. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { if (n == 0) errno = ENOSPC; return -1; }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int metrics_open(MetricsFile *mf, const char *path, int64_t keep_through)
{
    mf->path = strdup(path);
    mf->fd = -1;
    /* keep the lines of steps already done (a resumed run rewrites the rest);
     * whatever is not kept is said, never dropped silently */
    FILE *old = fopen(path, "r");
    char *kept = NULL;
    size_t klen = 0, kcap = 0;
    int64_t after = 0, lineno = 0;
    if (old) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, old)) > 0) {
            lineno++;
            int whole = line[n - 1] == '\n';
            if (whole) line[--n] = 0;
            char *fixed = NULL;
            cJSON *o = cJSON_Parse(line);
            if (!o && (fixed = metrics_fix_nonfinite(line))) o = cJSON_Parse(fixed);
            const char *text = fixed ? fixed : line;
            cJSON *s = cJSON_GetObjectItem(o, metrics_keys[MK_STEP]);
            int is_step = cJSON_IsObject(o) && cJSON_IsNumber(s);
            int keep = is_step && whole && s->valuedouble <= (double)keep_through;
            cJSON_Delete(o);
            if (!is_step || !whole) {
                char shown[120], why[96];
                if (!whole) snprintf(why, sizeof why, "a line cut short (no newline: the previous run stopped while writing it)");
                else snprintf(why, sizeof why, "not a metrics line (a JSON object with \"%s\")", metrics_keys[MK_STEP]);
                log_warn("%s:%" PRId64 ": %s, not kept: %s", path, lineno, why,
                         log_escape(shown, sizeof shown, line, (size_t)n));
            } else if (!keep) after++;
            if (keep) {
                size_t tl = strlen(text);
                if (klen + tl + 2 > kcap) {
                    kcap = (klen + tl + 2) * 2;
                    char *k = realloc(kept, kcap);
                    if (!k) { free(fixed); break; }
                    kept = k;
                }
                memcpy(kept + klen, text, tl);
                klen += tl;
                kept[klen++] = '\n';
            }
            free(fixed);
        }
        free(line);
        fclose(old);
    }
    if (after)
        log_info("%s: %" PRId64 " line%s of steps after %" PRId64 " removed: this run continues from step %" PRId64
                 " and writes them again", path, after, after == 1 ? "" : "s", keep_through, keep_through);
    /* rewritten whole with the kept lines: the file then holds each step once,
     * however often the run was resumed */
    mf->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (mf->fd < 0) { free(kept); return -1; }
    int rc = klen && write_all(mf->fd, kept, klen) ? -1 : 0;
    free(kept);
    return rc;
}

/* One metrics line being built: the keys in their row order (run_formats.h),
 * the non-finite numbers named in flags for the closing "nonfinite" object. */
typedef struct {
    char text[1024], flags[256];
    size_t len;
    int over;   /* the line did not fit */
} MetricsLine;

/* ,"KEY":VALUE (no comma before the first key), VALUE printed by fmt. */
__attribute__((format(printf, 3, 4)))
static void line_put(MetricsLine *l, MetricsKey k, const char *fmt, ...)
{
    size_t cap = sizeof l->text;
    int n = l->len < cap ? snprintf(l->text + l->len, cap - l->len, "%s\"%s\":", l->len > 1 ? "," : "", metrics_keys[k]) : -1;
    if (n >= 0) l->len += (size_t)n;
    va_list ap;
    va_start(ap, fmt);
    n = l->len < cap ? vsnprintf(l->text + l->len, cap - l->len, fmt, ap) : -1;
    va_end(ap);
    if (n >= 0) l->len += (size_t)n;
    if (n < 0 || l->len >= cap) l->over = 1;
}

/* A number as JSON: fmt when finite, else null and the key named in flags. */
static void line_num(MetricsLine *l, MetricsKey k, const char *fmt, double v)
{
    if (isfinite(v)) { line_put(l, k, fmt, v); return; }
    line_put(l, k, "null");
    size_t fl = strlen(l->flags);
    snprintf(l->flags + fl, sizeof l->flags - fl, "%s\"%s\":\"%s\"", fl ? "," : "", metrics_keys[k],
             isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

/* One line a step, written by one write() on an O_APPEND descriptor: a reader
 * (llmc status, a dashboard) sees whole lines as they come, lines never
 * interleave, and a killed run loses at most the line being written
 * (metrics_open drops a cut one). %.9g: the 9 significant digits that give an
 * fp32 value back exactly. */
int metrics_write(MetricsFile *mf, const StepMetrics *m)
{
    if (mf->fd < 0) return -1;
    char t[32];
    MetricsLine l = {.text = "{", .len = 1};
    line_put(&l, MK_STEP, "%lld", (long long)m->step);
    line_put(&l, MK_TIME, "\"%s\"", log_time(t));
    line_num(&l, MK_LOSS, "%.9g", m->loss);
    line_num(&l, MK_LR, "%.9g", m->lr);
    line_num(&l, MK_GRAD_NORM, "%.9g", m->grad_norm);
    line_put(&l, MK_TOKENS, "%lld", (long long)m->tokens);
    line_num(&l, MK_TOKENS_PER_S, "%.1f", m->tokens_per_s);
    line_num(&l, MK_STEP_TIME_S, "%.6f", m->step_time_s);
    line_put(&l, MK_PEAK_RSS_BYTES, "%llu", (unsigned long long)m->peak_rss_bytes);
    if (l.flags[0]) line_put(&l, MK_NONFINITE, "{%s}", l.flags);
    if (!l.over) {
        int n = snprintf(l.text + l.len, sizeof l.text - l.len, "}\n");
        if (n < 0 || l.len + (size_t)n >= sizeof l.text) l.over = 1;
        else l.len += (size_t)n;
    }
    if (l.over) { errno = EOVERFLOW; return -1; }
    return write_all(mf->fd, l.text, l.len);
}

void metrics_close(MetricsFile *mf)
{
    if (mf->fd >= 0) { fsync(mf->fd); close(mf->fd); }
    free(mf->path);
    mf->fd = -1;
    mf->path = NULL;
}

int metrics_svg(const char *metrics_path, const char *svg_path, double baseline)
{
    FILE *f = fopen(metrics_path, "r");
    if (!f) return -1;
    double *xs = NULL, *ys = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        cJSON *o = cJSON_Parse(line);
        cJSON *s = cJSON_GetObjectItem(o, metrics_keys[MK_STEP]), *l = cJSON_GetObjectItem(o, metrics_keys[MK_LOSS]);
        if (cJSON_IsNumber(s) && cJSON_IsNumber(l) && isfinite(l->valuedouble)) {
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                double *nx = realloc(xs, cap * sizeof *xs), *ny = nx ? realloc(ys, cap * sizeof *ys) : NULL;
                if (nx) xs = nx;
                if (ny) ys = ny;
                if (!nx || !ny) { cJSON_Delete(o); break; }
            }
            xs[n] = s->valuedouble;
            ys[n] = l->valuedouble;
            n++;
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    if (!n) { free(xs); free(ys); return -1; }
    /* axes: steps first to last; loss from 0 to 5% above the highest point
     * (or the baseline), so the baseline line is always inside the plot */
    double x0 = xs[0], x1 = xs[n - 1], y0 = 0, y1 = ys[0];
    for (size_t i = 0; i < n; i++) if (ys[i] > y1) y1 = ys[i];
    if (baseline > y1) y1 = baseline;
    if (x1 <= x0) x1 = x0 + 1;
    y1 *= 1.05;
    /* the picture in px: width, height, and the margins left, right, top,
     * bottom that hold the labels; PX/PY map data to picture coordinates */
    const double W = 640, H = 400, L = 60, R = 20, T = 30, B = 40;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * (W - L - R))
#define PY(y) (H - B - ((y) - y0) / (y1 - y0) * (H - T - B))
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", svg_path);
    FILE *o = fopen(tmp, "w");
    if (!o) { free(xs); free(ys); return -1; }
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(o, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(o, "<text x=\"%.0f\" y=\"18\">training loss (mean CE per label token) vs step</text>\n", L);
    fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T, L, H - B);
    for (int k = 0; k <= 4; k++) {   /* five ticks on each axis */
        double yv = y0 + (y1 - y0) * k / 4, xv = x0 + (x1 - x0) * k / 4;
        fprintf(o, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", L - 4, PY(yv) + 4, yv);
        fprintf(o, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f</text>\n", PX(xv), H - B + 16, xv);
    }
    fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n", (W + L) / 2, H - 6);
    if (baseline > 0) {
        fprintf(o, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"gray\" stroke-dasharray=\"4 4\"/>\n",
                L, PY(baseline), W - R, PY(baseline));
        fprintf(o, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"gray\">unigram baseline %.3f</text>\n",
                W - R, PY(baseline) - 4, baseline);
    }
    fprintf(o, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
    for (size_t i = 0; i < n; i++) fprintf(o, "%s%.1f,%.1f", i ? " " : "", PX(xs[i]), PY(ys[i]));
    fprintf(o, "\"/>\n</svg>\n");
#undef PX
#undef PY
    free(xs);
    free(ys);
    /* temp, fsync, rename: a viewer never opens half a picture */
    int rc = (fflush(o) || fsync(fileno(o))) ? -1 : 0;
    if (fclose(o)) rc = -1;
    if (!rc && rename(tmp, svg_path)) rc = -1;
    if (rc) unlink(tmp);
    return rc;
}

/* ---- step time against the plan's estimate ---- */

/* A tuning variable, or dflt when unset or not a number in [lo, hi]: a bad
 * value must not turn the warning off or make it fire on every step. */
static double drift_env(const char *name, double dflt, double lo, double hi)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    double x = strtod(v, &end);
    return (*end || !(x >= lo && x <= hi)) ? dflt : x;
}

void step_drift_init(StepDrift *d, const struct cJSON *plan_json)
{
    memset(d, 0, sizeof *d);
    const cJSON *est = cJSON_GetObjectItemCaseSensitive(plan_json, "estimate");
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(est, "step_seconds");
    const cJSON *tb = cJSON_GetObjectItemCaseSensitive(est, "total_bytes");
    d->estimate_s = cJSON_IsNumber(ss) && ss->valuedouble > 0 ? ss->valuedouble : 0;
    d->memory_estimate_bytes = cJSON_IsNumber(tb) && tb->valuedouble > 0 ? tb->valuedouble : 0;
    /* defaults: warn when 20 steps in a row are over 1.5x (or under 1/1.5x) the
     * estimate, far enough out that noise and the warm-up do not trigger it */
    d->margin = drift_env("LLMC_DRIFT_MARGIN", 0.5, 0.01, 100);
    d->need = (int)drift_env("LLMC_DRIFT_STEPS", 20, 1, STEP_DRIFT_MAX);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int step_drift_feed(StepDrift *d, int64_t step, double measured_s)
{
    if (d->warned || d->estimate_s <= 0 || !(measured_s > 0)) return 0;
    if (d->fed++ == 0) return 0;   /* the first step of a process warms caches and allocators */
    double r = measured_s / d->estimate_s;
    int dir = r > 1 + d->margin ? 1 : r < 1 / (1 + d->margin) ? -1 : 0;
    /* a run of consecutive steps off in the same direction; the median of the
     * run is reported (one slow step from a checkpoint write does not move it) */
    if (!dir || dir != d->dir) d->run = 0;
    d->dir = dir;
    if (!dir) return 0;
    d->win[d->run++] = measured_s;
    if (d->run < d->need) return 0;
    double w[STEP_DRIFT_MAX];
    memcpy(w, d->win, (size_t)d->run * sizeof *w);
    qsort(w, (size_t)d->run, sizeof *w, cmp_dbl);
    double med = d->run % 2 ? w[d->run / 2] : 0.5 * (w[d->run / 2 - 1] + w[d->run / 2]);
    d->warned = 1;   /* once per process: a warning, not a stream of them */
    if (dir > 0)
        log_warn("step time %.4g s measured (median of steps %" PRId64 "-%" PRId64 ") vs %.4g s estimated: "
                 "the plan under-estimated the step time (estimate error %+.1f%%): the run is %.2fx slower than planned "
                 "(margin %.0f%%; calibration: docs/estimator.md)",
                 med, step - d->run + 1, step, d->estimate_s, 100 * (d->estimate_s - med) / med, med / d->estimate_s,
                 100 * d->margin);
    else
        log_warn("step time %.4g s measured (median of steps %" PRId64 "-%" PRId64 ") vs %.4g s estimated: "
                 "the plan over-estimated the step time (estimate error %+.1f%%): the run is %.2fx faster than planned "
                 "(margin %.0f%%; calibration: docs/estimator.md)",
                 med, step - d->run + 1, step, d->estimate_s, 100 * (d->estimate_s - med) / med, d->estimate_s / med,
                 100 * d->margin);
    return 1;
}
