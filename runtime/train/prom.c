/* prom.c — write rank 0's metrics in Prometheus' text exposition format; see prom.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "log.h"
#include "prom.h"
#include "run_formats.h"   /* contract/: the metric names llmc status reads */

/* Label values escape backslash, double quote and newline. */
static void escape_label(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; s && *s && n + 3 < cap; s++) {
        if (*s == '\\' || *s == '"') { out[n++] = '\\'; out[n++] = *s; }
        else if (*s == '\n') { out[n++] = '\\'; out[n++] = 'n'; }
        else out[n++] = *s;
    }
    out[n] = '\0';
}

/* One metric of its row (run_formats.h), labelled RUN_PROM_JOB_LABEL:
 * Prometheus' own `job` label is the scrape job's (node_exporter here), so ours
 * would be renamed exported_job or overwrite it. A name ending in _total is a
 * counter (it only grows), every other a gauge. */
static void metric(FILE *f, PromMetric id, const char *job, double v)
{
    const char *name = prom_metric_names[id];
    size_t n = strlen(name);
    const char *type = n > 6 && strcmp(name + n - 6, "_total") == 0 ? "counter" : "gauge";
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, prom_metric_help[id], name, type);
    if (isnan(v))      fprintf(f, "%s{" RUN_PROM_JOB_LABEL "=\"%s\"} NaN\n", name, job);
    else if (isinf(v)) fprintf(f, "%s{" RUN_PROM_JOB_LABEL "=\"%s\"} %sInf\n", name, job, v > 0 ? "+" : "-");
    else               fprintf(f, "%s{" RUN_PROM_JOB_LABEL "=\"%s\"} %.17g\n", name, job, v);
}

int prom_write(const char *path, const PromMetrics *m)
{
    char job[256], tmp[4096];
    escape_label(job, sizeof job, m->job ? m->job : "");
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        log_error("prom: path too long: %s", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        log_error("prom: cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    struct rusage ru;
    double rss = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss * 1024.0 : NAN;
    metric(f, PM_STEP, job, (double)m->step);
    metric(f, PM_TOTAL_STEPS, job, (double)m->total_steps);
    metric(f, PM_LOSS, job, m->loss);
    metric(f, PM_LR, job, m->lr);
    metric(f, PM_TOKENS_PER_SECOND, job, m->tokens_per_second);
    metric(f, PM_STEP_SECONDS, job, m->step_seconds);
    /* a counter across resumes too: the checkpoint carries it */
    metric(f, PM_TOKENS_TOTAL, job, m->tokens_total);
    metric(f, PM_GRAD_NORM, job, m->grad_norm);
    metric(f, PM_WORLD_SIZE, job, (double)m->world_size);
    metric(f, PM_PEAK_RSS_BYTES, job, rss);
    if (m->step_seconds_estimate > 0) metric(f, PM_STEP_SECONDS_ESTIMATE, job, m->step_seconds_estimate);
    if (m->memory_estimate_bytes > 0) metric(f, PM_MEMORY_ESTIMATE_BYTES, job, m->memory_estimate_bytes);
    if (m->checkpoint_dir) {
        /* the latest complete checkpoint: CKPT_DIR/latest names step-N */
        char lp[4200], name[64] = "";
        struct stat st;
        snprintf(lp, sizeof lp, "%s/%s", m->checkpoint_dir, ckpt_files[CF_LATEST]);
        FILE *l = stat(lp, &st) == 0 && S_ISREG(st.st_mode) ? fopen(lp, "r") : NULL;
        if (l) {
            if (fscanf(l, CKPT_STEP_PREFIX "%63[0-9]", name) != 1) name[0] = 0;
            fclose(l);
        }
        if (name[0]) {
            metric(f, PM_CHECKPOINT_STEP, job, atof(name));
            metric(f, PM_CHECKPOINT_TIMESTAMP_SECONDS, job, (double)st.st_mtime);
        }
    }
    int bad = ferror(f) != 0;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) bad = 1;
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        log_error("prom: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
