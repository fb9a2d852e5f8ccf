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

/* One metric of a TYPE (gauge or counter), labelled llmc_job: Prometheus'
 * own `job` label is the scrape job's (node_exporter here), so ours would be
 * renamed exported_job or overwrite it. */
static void metric(FILE *f, const char *type, const char *name, const char *help, const char *job, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (isnan(v))      fprintf(f, "%s{llmc_job=\"%s\"} NaN\n", name, job);
    else if (isinf(v)) fprintf(f, "%s{llmc_job=\"%s\"} %sInf\n", name, job, v > 0 ? "+" : "-");
    else               fprintf(f, "%s{llmc_job=\"%s\"} %.17g\n", name, job, v);
}

static void gauge(FILE *f, const char *name, const char *help, const char *job, double v)
{
    metric(f, "gauge", name, help, job, v);
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
    gauge(f, "llmc_train_step", "Optimizer steps completed.", job, (double)m->step);
    gauge(f, "llmc_train_total_steps", "Optimizer steps in the whole run.", job, (double)m->total_steps);
    gauge(f, "llmc_train_loss", "Training loss of the last step.", job, m->loss);
    gauge(f, "llmc_train_lr", "Learning rate of the last step.", job, m->lr);
    gauge(f, "llmc_train_tokens_per_second", "Training throughput, all ranks.", job, m->tokens_per_second);
    gauge(f, "llmc_train_step_seconds", "Wall time of the last step.", job, m->step_seconds);
    /* a counter (it only grows, across resumes too: the checkpoint carries it), hence _total */
    metric(f, "counter", "llmc_train_tokens_total", "Tokens trained on so far, all ranks.", job, m->tokens_total);
    gauge(f, "llmc_train_grad_norm", "Gradient norm before clipping, last step.", job, m->grad_norm);
    gauge(f, "llmc_train_world_size", "Ranks in the job.", job, (double)m->world_size);
    gauge(f, "llmc_train_peak_rss_bytes", "Peak resident memory of rank 0.", job, rss);
    if (m->step_seconds_estimate > 0)
        gauge(f, "llmc_train_step_seconds_estimate", "The plan's estimated wall time of one step.", job,
              m->step_seconds_estimate);
    if (m->memory_estimate_bytes > 0)
        gauge(f, "llmc_train_memory_estimate_bytes", "The plan's estimated memory per GPU.", job,
              m->memory_estimate_bytes);
    if (m->checkpoint_dir) {
        char lp[4200], name[64] = "";
        struct stat st;
        snprintf(lp, sizeof lp, "%s/latest", m->checkpoint_dir);
        FILE *l = stat(lp, &st) == 0 && S_ISREG(st.st_mode) ? fopen(lp, "r") : NULL;
        if (l) {
            if (fscanf(l, "step-%63[0-9]", name) != 1) name[0] = 0;
            fclose(l);
        }
        if (name[0]) {
            gauge(f, "llmc_train_checkpoint_step", "Step of the latest complete checkpoint.", job, atof(name));
            gauge(f, "llmc_train_checkpoint_timestamp_seconds", "When the latest checkpoint was completed (Unix time).",
                  job, (double)st.st_mtime);
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
