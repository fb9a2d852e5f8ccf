/* prom_test DIR — runtime/train/prom.c: the Prometheus text file is complete, escaped,
 * replaced atomically, and left alone when it cannot be written. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "prom.h"

static int pass, fail;
static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (ok) pass++; else fail++;
}

static char *slurp(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: prom_test DIR\n"); return 2; }
    char path[4096], bad[4096];
    snprintf(path, sizeof path, "%s/llmc_train.prom", argv[1]);
    snprintf(bad, sizeof bad, "%s/no-such-dir/llmc_train.prom", argv[1]);

    PromMetrics m = { .job = "a\"b\\c\nd", .step = 7, .total_steps = 100, .loss = 2.5, .lr = 1e-4,
                      .tokens_per_second = 1234.5, .step_seconds = 0.25, .tokens_total = 9e9,
                      .grad_norm = NAN, .world_size = 2 };
    check(prom_write(path, &m) == 0, "prom_write returns 0");
    char *s = slurp(path);
    static const char *names[] = { "llmc_train_step", "llmc_train_total_steps", "llmc_train_loss", "llmc_train_lr",
        "llmc_train_tokens_per_second", "llmc_train_step_seconds", "llmc_train_tokens_total",
        "llmc_train_grad_norm", "llmc_train_world_size", "llmc_train_peak_rss_bytes" };
    int all = s != NULL;
    for (size_t i = 0; all && i < sizeof names / sizeof names[0]; i++) {
        char help[128], type[128];
        snprintf(help, sizeof help, "# HELP %s ", names[i]);
        snprintf(type, sizeof type, "# TYPE %s %s\n", names[i], !strcmp(names[i], "llmc_train_tokens_total") ? "counter" : "gauge");
        all = strstr(s, help) && strstr(s, type);
    }
    check(all, "all ten metrics with HELP and TYPE lines (tokens_total a counter, the rest gauges)");
    check(s && strstr(s, "llmc_train_step{llmc_job=\"a\\\"b\\\\c\\nd\"} 7\n"), "llmc_job label escaped (quote, backslash, newline)");
    check(s && !strstr(s, "{job="), "no `job` label (Prometheus' own)");
    check(s && strstr(s, "llmc_train_grad_norm{llmc_job=\"a\\\"b\\\\c\\nd\"} NaN\n"), "NaN written as NaN");
    check(s && strstr(s, "llmc_train_tokens_total{llmc_job=\"a\\\"b\\\\c\\nd\"} 9000000000\n"), "large values exact");

    m.step = 8;
    check(prom_write(path, &m) == 0 && (s = slurp(path)) && strstr(s, "} 8\n") && !strstr(s, "} 7\n"),
          "a second write replaces the file");
    check(count_entries(argv[1]) == 1, "no temporary file left behind");
    check(prom_write(bad, &m) == -1, "an unwritable path fails with -1");
    check((s = slurp(path)) && strstr(s, "} 8\n"), "the previous file is untouched by a failed write");

    /* every metric, the optional ones too, for promtool (tests/e2e/prom_test.sh) */
    char ck[4200], latest[4300];
    snprintf(ck, sizeof ck, "%s/ckpt", argv[1]);
    snprintf(latest, sizeof latest, "%s/latest", ck);
    FILE *l = mkdir(ck, 0755) == 0 ? fopen(latest, "w") : NULL;
    if (l) { fputs("step-00000008\n", l); fclose(l); }
    m.step_seconds_estimate = 0.2;
    m.memory_estimate_bytes = 7.5e10;
    m.checkpoint_dir = ck;
    m.grad_norm = INFINITY;
    check(prom_write(path, &m) == 0 && (s = slurp(path)) && strstr(s, "llmc_train_checkpoint_step{llmc_job=") &&
          strstr(s, "llmc_train_memory_estimate_bytes{") && strstr(s, "llmc_train_grad_norm{llmc_job=\"a\\\"b\\\\c\\nd\"} +Inf\n"),
          "the optional metrics written; +Inf as Prometheus writes it");
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
