/* calibrate.c — `llmc calibrate RUN... [-o PROFILE.llm]`: fit a site profile
 * (docs/estimator.md, "Site profiles") from what runs measured.
 *
 * A RUN is a run directory (or a file in one): the llmc trainer's
 * metrics.jsonl (or the CUDA trainer's gpu_metrics.jsonl), or LLaMA-Factory's
 * trainer_log.jsonl. The plan that produced it is the plan.json llmc compiled,
 * found in the run directory or the nearest directory above it (the compiled
 * output the run sits in). The fit is calib_fit.c's (shared with `llmc
 * status`); here: finding the files, and the profile block written out. A bad
 * line is reported as FILE:LINE: and nothing is written. */
#include "calib_fit.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The exit statuses are calib_fit.h's codes: 0 written, 1 a run's files are not usable, 2 usage or I/O. */
enum { CAL_OK = CALIB_OK, CAL_BAD_INPUT = CALIB_BAD_INPUT, CAL_USAGE = CALIB_IO };
#define CAL_MAX_RUNS 64
#define CAL_PLAN_LEVELS 4          /* directories above a run searched for plan.json */
#define CAL_MFU_PLAUSIBLE 0.7      /* the highest published HFU (FSDP + FlashAttention-2 on A100, 0.67) */

static const char cmd[] = "llmc calibrate";
static const char calibrate_usage[] =
    "usage: llmc calibrate [-o PROFILE.llm] [--name NAME] [--check RUN]... RUN...\n"
    "Fit a site profile from measured runs: each RUN is a run directory with the llmc\n"
    "trainer's metrics.jsonl (or gpu_metrics.jsonl) or LLaMA-Factory's trainer_log.jsonl,\n"
    "inside the directory llmc compiled (its plan.json is the plan that produced it).\n"
    "One run fits the mfu; runs on different node counts or batches also fit the\n"
    "network / GPU-link bandwidth (or, without communication, a time per step).\n"
    "  -o, --output FILE  write the profile block there (default: standard output)\n"
    "  --name NAME        the profile's name (default: site)\n"
    "  --check RUN        a run not fitted on: print its step time against the prediction\n"
    "exit status: 0 fitted, 1 a run's data or plan is unusable, 2 usage or I/O error\n"
    "see docs/estimator.md, \"Site profiles\"\n";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "llmc calibrate: error: ..." on stderr; returns 1 (the runs cannot be fitted as given). */
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CAL_BAD_INPUT;
}

/* DIR/NAME, malloc'd; out of memory ends the command (exit 2). */
static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) { fprintf(stderr, "%s: out of memory\n", cmd); exit(CAL_USAGE); }
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool is_file(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISREG(st.st_mode); }
static bool is_dir(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISDIR(st.st_mode); }

/* RUN (r->arg) to its log (data_path, with which trainer wrote it) and to the plan.json of the output it sits in,
 * looked for in its directory and up to CAL_PLAN_LEVELS above: the log sits in output.dir, somewhere inside
 * the compiled output that holds plan.json. 0, or 2 after the message. */
static int locate(CalibRun *r)
{
    char *dir;
    if (is_dir(r->arg)) {
        dir = xstrdup(r->arg);
        /* the logs in calib_src_names' order: the first one present is the run's */
        for (int k = 0; k < CALIB_SRC_COUNT && !r->data_path; k++) {
            char *p = path_join(dir, calib_src_names[k]);
            if (is_file(p)) { r->data_path = p; r->src = (CalibSource)k; } else free(p);
        }
        if (!r->data_path) {
            free(dir);
            fprintf(stderr, "%s: error: %s: no metrics.jsonl, gpu_metrics.jsonl or trainer_log.jsonl in this "
                            "directory\n", cmd, r->arg);
            return CAL_USAGE;
        }
    } else if (is_file(r->arg)) {
        r->data_path = xstrdup(r->arg);
        const char *base = strrchr(r->arg, '/');
        base = base ? base + 1 : r->arg;
        /* a file given itself: its name says which trainer wrote it */
        r->src = strstr(base, "trainer_log") ? CALIB_SRC_LF : strstr(base, "gpu_metrics") ? CALIB_SRC_LLMC_GPU : CALIB_SRC_LLMC;
        dir = xstrdup(r->arg);
        char *sl = strrchr(dir, '/');
        if (sl) *sl = 0; else { free(dir); dir = xstrdup("."); }
    } else {
        fprintf(stderr, "%s: error: %s: %s\n", cmd, r->arg, strerror(errno ? errno : ENOENT));
        return CAL_USAGE;
    }
    for (int lv = 0; lv <= CAL_PLAN_LEVELS && !r->plan_path; lv++) {
        char *p = path_join(dir, "plan.json");
        if (is_file(p)) { r->plan_path = p; break; }
        free(p);
        char *up = path_join(dir, "..");
        free(dir);
        dir = up;
    }
    free(dir);
    if (!r->plan_path) {
        fprintf(stderr, "%s: error: %s: no plan.json in the run directory or the %d above it; calibrate needs the "
                        "plan llmc compiled for the run (llmc PLAN -o DIR)\n", cmd, r->arg, CAL_PLAN_LEVELS);
        return CAL_USAGE;
    }
    return CAL_OK;
}


/* ---- output ---- */

/* A step time: ms below a second, four significant figures either way. */
static void fmt_s(char *b, size_t n, double s)
{
    if (s < 1) snprintf(b, n, "%.4g ms", s * 1e3);
    else snprintf(b, n, "%.4g s", s);
}

/* One run's two lines: its shape, and the measured step time against the estimate before and with profile PF.
 * Written to stderr as a report, and as comments (LEAD "#") into the profile itself. */
static void print_row(FILE *o, const char *lead, CalibRun *r, const PlanProfile *pf)
{
    Estimate e;
    double after = calib_predict(r, pf, &e);
    char m[32], b[32], af[32];
    fmt_s(m, sizeof m, r->step_s);
    fmt_s(b, sizeof b, r->est_default_s);
    fmt_s(af, sizeof af, after);
    fprintf(o, "%s%s  (%s; %s, %d steps)\n", lead, r->arg, r->shape, calib_src_names[r->src], r->steps_used);
    fprintf(o, "%s    step %s measured; estimate %s before (%+.1f%%), %s with the profile (%+.1f%%)\n",
            lead, m, b, r->est_default_s > 0 ? 100 * (r->est_default_s - r->step_s) / r->step_s : 0.0, af,
            100 * (after - r->step_s) / r->step_s);
}

/* The escaped form of a string inside "..." in a plan. */
static void put_str(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', o);
        fputc(*s, o);
    }
    fputc('"', o);
}

/* The profile block, in .llm syntax, headed by the runs it was fitted from (as comments); only the fitted values
 * are written, so the estimator keeps its own defaults for the rest. `from` names the runs for the record. */
static void write_profile(FILE *o, const char *name, CalibRun *runs, int n, const CalibFit *f, PlanBackend be,
                          const PlanProfile *pf)
{
    int nf = 0;
    for (int i = 0; i < n; i++) nf += !runs[i].check_only;
    fprintf(o, "# Site profile fitted by `llmc calibrate` from %d run%s (docs/estimator.md, \"Site profiles\").\n",
            nf, nf == 1 ? "" : "s");
    fprintf(o, "# A job takes it with: use \"THIS_FILE\" and profile = %s in the job block.\n", name);
    for (int i = 0; i < n; i++) if (!runs[i].check_only) print_row(o, "#   ", &runs[i], pf);
    fprintf(o, "profile %s {\n", name);
    fprintf(o, "  backend       = %s\n", backend_llm_names[be]);
    if (f->on[CALIB_P_MFU]) fprintf(o, "  mfu           = %.4g\n", f->v[CALIB_P_MFU]);
    if (f->on[CALIB_P_OVERHEAD]) fprintf(o, "  step_overhead = %.4g s\n", f->v[CALIB_P_OVERHEAD]);
    if (f->on[CALIB_P_INTRA]) fprintf(o, "  intra_node_bw = %.4g GBps\n", f->v[CALIB_P_INTRA] / 1e9);
    if (f->on[CALIB_P_INTER]) fprintf(o, "  inter_node_bw = %.4g GBps\n", f->v[CALIB_P_INTER] / 1e9);
    fprintf(o, "  from          = [");
    for (int i = 0, k = 0; i < n; i++) {
        if (runs[i].check_only) continue;
        if (k++) fputs(", ", o);
        put_str(o, runs[i].arg);
    }
    fprintf(o, "]\n}\n");
}

/* A block name as the language takes it: a letter or '_', then letters, digits and '_'. */
static bool name_ok(const char *s)
{
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

/* --check RUN: a run shown against the fitted profile but not fitted from (a held-out check). */
int calibrate_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"name", required_argument, NULL, 'n'},
        {"check", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *out = NULL, *name = "site";
    CalibRun runs[CAL_MAX_RUNS];
    memset(runs, 0, sizeof runs);
    int n = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        if (c == 'h') { fputs(calibrate_usage, stdout); return CAL_OK; }
        if (c == 'o') out = optarg;
        else if (c == 'n') name = optarg;
        else if (c == 'c') {
            if (n == CAL_MAX_RUNS) return cli_usage_error(cmd, "at most %d runs", CAL_MAX_RUNS);
            runs[n].arg = optarg; runs[n].check_only = true; n++;
        } else return cli_getopt_error(cmd, c, argv);
    }
    if (!name_ok(name)) return cli_usage_error(cmd, "--name: '%s' is not a block name (letters, digits, _)", name);
    for (int i = optind; i < argc; i++) {
        if (n == CAL_MAX_RUNS) return cli_usage_error(cmd, "at most %d runs", CAL_MAX_RUNS);
        runs[n++].arg = argv[i];
    }
    int nfit = 0;
    for (int i = 0; i < n; i++) {
        nfit += !runs[i].check_only;
        /* the runs are written into the profile: one line each, in a string */
        for (const char *q = runs[i].arg; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f)
                return cli_usage_error(cmd, "a run's path has a control character: rename it");
    }
    if (!nfit) return cli_usage_error(cmd, "no RUN given");

    int rc = CAL_OK;
    for (int i = 0; i < n && rc == CAL_OK; i++) {
        CalibRun *r = &runs[i];
        if ((rc = locate(r)) != CAL_OK) break;
        if ((rc = calib_run_load(r)) != CAL_OK) fprintf(stderr, "%s: error: %s\n", cmd, r->err);
    }
    /* one trainer per profile */
    PlanBackend be = BACKEND_LLMC;
    /* one profile describes one trainer: the two backends' step times are not comparable */
    for (int i = 0, first = 1; i < n && rc == CAL_OK; i++) {
        if (runs[i].check_only) continue;
        if (first) { be = runs[i].job.run->backend; first = 0; }
        else if (runs[i].job.run->backend != be)
            rc = fail("%s and %s ran different trainers (backend = llmc and llamafactory): calibrate each on its own",
                      runs[0].arg, runs[i].arg);
    }
    if (rc == CAL_OK) {
        CalibFit f;
        calib_fit(runs, n, &f);
        int room = f.shapes;
        PlanProfile pf;
        calib_fit_profile(&f, &pf);
        fprintf(stderr, "%s: fitted", cmd);
        for (int k = 0; k < CALIB_P_COUNT; k++)
            if (f.on[k]) fprintf(stderr, " %s", calib_param_names[k]);
        fprintf(stderr, " from %d run%s (%d shape%s)\n", nfit, nfit == 1 ? "" : "s", room, room == 1 ? "" : "s");
        if (f.on[CALIB_P_MFU] && f.v[CALIB_P_MFU] > CAL_MFU_PLAUSIBLE && f.v[CALIB_P_MFU] < 0.999)
            fprintf(stderr, "%s: warning: the fitted mfu %.2f is above what published training runs reach (~%.1f): "
                            "the runs hid more communication than the estimate's model of this trainer allows, and "
                            "the mfu absorbs it (docs/estimator.md, \"Site profiles\")\n", cmd, f.v[CALIB_P_MFU],
                    CAL_MFU_PLAUSIBLE);
        if (f.on[CALIB_P_MFU] && f.v[CALIB_P_MFU] >= 0.999)
            fprintf(stderr, "%s: warning: the fitted mfu is at its bound (1): the runs were faster than the plan's "
                            "FLOPs allow at the peak the plan assumes\n", cmd);
        for (int i = 0; i < n; i++) print_row(stderr, runs[i].check_only ? "  check " : "  fit   ", &runs[i], &pf);
        if (!out) {
            write_profile(stdout, name, runs, n, &f, be, &pf);
        } else {
            size_t L = strlen(out) + 8;
            char *tmp = malloc(L);
            if (!tmp) return CAL_USAGE;
            snprintf(tmp, L, "%s.tmp", out);
            /* OUT.tmp, synced, renamed: an existing profile is replaced whole or not at all */
            FILE *o = fopen(tmp, "w");
            if (!o) { fprintf(stderr, "%s: error: %s: %s\n", cmd, tmp, strerror(errno)); free(tmp); rc = CAL_USAGE; }
            else {
                write_profile(o, name, runs, n, &f, be, &pf);
                if (fflush(o) || fsync(fileno(o)) || fclose(o) || rename(tmp, out)) {
                    fprintf(stderr, "%s: error: %s: %s\n", cmd, out, strerror(errno));
                    unlink(tmp);
                    rc = CAL_USAGE;
                } else {
                    fprintf(stderr, "%s: wrote %s\n", cmd, out);
                }
            }
            free(tmp);
        }
    }
    for (int i = 0; i < n; i++) calib_run_free(&runs[i]);
    return rc;
}
