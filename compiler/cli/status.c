/* status.c — `llmc status OUT_DIR|PLAN.json`: Slurm's view of the job, the
 * trainer's progress and the plan's estimate side by side (docs/status.md). */
#include "status.h"
#include "arena.h"
#include "calib_fit.h"
#include "cli.h"
#include "slurm_tools.h"
#include "submit.h"
#include "emit.h"       /* LLMC_MERGE_YAML: a merge job's directory */
#include "plan_vocab.h"   /* contract/: plan.json's words (backend) */
#include "run_formats.h"  /* contract/: the names and keys of the files a run writes */

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


enum { ST_OK = 0, ST_FAILED = 1, ST_USAGE = 2 };
#define WINDOW 20          /* steps for the smoothed loss and the median step time */

/* One line of the trainer's log: NAN where the log does not say (LLaMA-Factory logs no step time or tokens). */
typedef struct {
    double step, loss, dt, tps, tokens;
    double elapsed;            /* LLaMA-Factory: elapsed_time (whole seconds), else NAN */
} MPoint;

/* The plan's estimate refitted to this run's step times: the profile
 * `llmc calibrate` would fit from the run so far (calib_fit.h). */
typedef struct {
    bool ok;
    char *note;                /* why there is none */
    double measured_s;         /* calibrate's measurement of the run */
    double first_step, last_step;
    int steps_used;
    double step_s;             /* the estimate's step time with the fitted profile */
    double mfu, plan_mfu;      /* fitted; the plan's (0: not recorded) */
} Refit;

typedef struct {
    char node[128];
    int index;
    double util, mem_used_mib, mem_total_mib;
    char time[64];
} GpuSample;

/* Everything one view shows, gathered by collect(); every string is malloc'd and freed by status_free. A
 * number the plan or the files do not give is NAN (or -1 for counts), printed as "?" or JSON null. */
typedef struct {
    /* the plan */
    char *plan_path, *plan_dir, *job, *backend, *out_dir, *metrics_path, *ckpt_dir, *shards_dir;
    double est_step_s, est_total_bytes, est_usable_bytes, est_total_s, est_rows, time_limit_s;
    long est_steps, est_segments, max_steps, global_batch;
    double epochs;
    /* the trainer's files */
    bool metrics_found;
    MPoint *pts;
    size_t n, cap;
    StatusPoint *evals;
    size_t nevals, evcap;
    long total_steps;          /* from the .prom file or trainer_log.jsonl, else the estimate */
    const char *total_src;
    double rows;               /* shard rows (index.json), else the estimate's sequences */
    bool done;                 /* result.json exists */
    double final_loss, result_eval_loss;
    Refit refit;
    /* checkpoint */
    char *ckpt_name, *ckpt_note;
    long ckpt_step;
    double ckpt_age;
    bool ckpt_valid;
    /* Slurm */
    char *slurm_note;          /* why there is no Slurm view, or what is missing */
    char *acct_note;
    bool have_job;
    char job_id[32], state[64], reason[128], nodes[256], stdout_path[PATH_MAX];
    double run_time, job_limit;
    long restarts, log_segments, acct_segments;
    int njobs_matched;
    /* GPU samples */
    GpuSample *gpus;
    size_t ngpus;
    char *gpu_note;
    bool merge;                /* a merge job: out_dir is its export_dir, done its config.json written */
} Status;

/* Every string and array a Status owns; the Status is zeroed, so a second call is harmless. */
static void status_free(Status *s)
{
    free(s->plan_path); free(s->plan_dir); free(s->job); free(s->backend); free(s->out_dir);
    free(s->metrics_path); free(s->ckpt_dir); free(s->shards_dir);
    free(s->pts); free(s->evals);
    free(s->ckpt_name); free(s->ckpt_note); free(s->slurm_note); free(s->acct_note);
    free(s->gpus); free(s->gpu_note); free(s->refit.note);
    memset(s, 0, sizeof *s);
}


/* ---- files ---------------------------------------------------------------- */


/* REL against DIR (plan.json's paths are relative to its directory), malloc'd; NULL when REL is. */
static char *join_path(const char *dir, const char *rel)
{
    if (!rel) return NULL;
    if (rel[0] == '/' || !dir) return xstrdup(rel);
    return cli_xprintf("%s/%s", dir, rel);
}

/* O's string member K, or NULL (also when O is NULL or K is not a string). */
static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* O's number member K, or DFLT. */
static double jnum(const cJSON *o, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* ---- the plan ------------------------------------------------------------- */

/* TARGET (an output directory or its plan.json) read into S: where the run writes (made absolute against the
 * plan's directory) and the estimate's figures. Only output.dir is required; the rest is shown when there.
 * 0, or -1 with err. */
static int load_plan(Status *s, const char *target, char *err, size_t errlen)
{
    struct stat st;
    if (stat(target, &st) != 0) {
        snprintf(err, errlen, "%s: %s", target, strerror(errno));
        return -1;
    }
    /* "out/" names out/plan.json, not out//plan.json */
    size_t tl = strlen(target);
    while (tl > 1 && target[tl - 1] == '/') tl--;
    char *path = S_ISDIR(st.st_mode) ? cli_xprintf("%.*s/plan.json", (int)tl, target) : xstrdup(target);
    char *buf;
    size_t len;
    int r = cli_read_file(path, &buf, &len, err, errlen);
    if (r == 1) snprintf(err, errlen, "%s: no plan.json (give the directory llmc wrote, or its plan.json)", path);
    if (r) { free(path); return -1; }
    cJSON *j = cJSON_ParseWithLength(buf, len);
    free(buf);
    const cJSON *ver = j ? cJSON_GetObjectItemCaseSensitive(j, "llmc_plan_version") : NULL;
    if (!cJSON_IsObject(j) || !cJSON_IsNumber(ver)) {
        snprintf(err, errlen, "%s: not a plan.json written by llmc (no llmc_plan_version)", path);
        cJSON_Delete(j);
        free(path);
        return -1;
    }
    s->plan_path = path;
    char *slash = strrchr(path, '/');
    /* "/plan.json" has "/" for its directory, "plan.json" has "." */
    s->plan_dir = slash ? cli_xprintf("%.*s", (int)(slash - path) ? (int)(slash - path) : 1, path) : xstrdup(".");
    s->job = xstrdup(jstr(j, "job") ? jstr(j, "job") : "?");
    s->backend = xstrdup(jstr(j, "backend") ? jstr(j, "backend") : "llmc");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(j, "output");
    const cJSON *ck = cJSON_GetObjectItemCaseSensitive(j, "checkpoint");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "train");
    const cJSON *sl = cJSON_GetObjectItemCaseSensitive(j, "slurm");
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(j, "estimate");
    const cJSON *da = cJSON_GetObjectItemCaseSensitive(j, "data");
    const char *od = jstr(out, "dir");
    if (!od) {
        snprintf(err, errlen, "%s: output.dir: expected a string", path);
        cJSON_Delete(j);
        return -1;
    }
    s->out_dir = join_path(s->plan_dir, od);
    const char *mt = jstr(out, "metrics");
    s->metrics_path = join_path(s->out_dir, mt ? mt : RUN_METRICS_FILE);
    /* LLaMA-Factory's log is named also while it does not exist yet */
    if (strcmp(s->backend, backend_json_names[BACKEND_LLAMAFACTORY]) == 0) {
        free(s->metrics_path);
        s->metrics_path = join_path(s->out_dir, LF_TRAINER_LOG_FILE);
    }
    s->ckpt_dir = jstr(ck, "dir") ? join_path(s->plan_dir, jstr(ck, "dir")) : NULL;
    s->shards_dir = jstr(da, "shards_dir") ? join_path(s->plan_dir, jstr(da, "shards_dir")) : NULL;
    s->max_steps = (long)jnum(tr, "max_steps", -1);
    s->epochs = jnum(tr, "epochs", NAN);
    /* a figure missing from the train block falls back to the estimate's, then to "unknown" */
    s->global_batch = (long)jnum(tr, "global_batch", jnum(es, "global_batch", 0));
    s->time_limit_s = jnum(sl, "time_limit_seconds", NAN);
    s->est_step_s = jnum(es, "step_seconds", NAN);
    s->est_total_s = jnum(es, "total_seconds", NAN);
    s->est_total_bytes = jnum(es, "total_bytes", NAN);
    s->est_usable_bytes = jnum(es, "usable_bytes", NAN);
    s->est_steps = (long)jnum(es, "steps_total", -1);
    s->est_segments = (long)jnum(es, "requeue_segments", -1);
    /* rows per epoch: packed sequences when the estimate counted them, else samples */
    s->est_rows = jnum(es, "sequences_per_epoch", jnum(es, "samples_per_epoch", NAN));
    cJSON_Delete(j);
    return 0;
}

/* The same plan reading as `llmc status`, for `llmc calibrate` (status.h). */
char *status_trainer_log(const char *dir, char *err, size_t errlen)
{
    Status s;
    memset(&s, 0, sizeof s);
    if (load_plan(&s, dir, err, errlen)) {
        status_free(&s);
        return NULL;
    }
    char *path = xstrdup(s.metrics_path);
    status_free(&s);
    return path;
}

/* ---- the trainer's metrics ------------------------------------------------ */

/* Append to the loss curve / the held-out losses; both arrays grow by doubling. */
static void push_point(Status *s, MPoint p)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->pts = xrealloc(s->pts, s->cap * sizeof *s->pts);
    }
    s->pts[s->n++] = p;
}

static void push_eval(Status *s, double step, double loss)
{
    if (s->nevals == s->evcap) {
        s->evcap = s->evcap ? s->evcap * 2 : 16;
        s->evals = xrealloc(s->evals, s->evcap * sizeof *s->evals);
    }
    s->evals[s->nevals++] = (StatusPoint){step, loss};
}

/* "1 day, 2:03:04" / "0:01:05" (Python's str(timedelta)) -> seconds, or NAN. */
static double parse_timedelta(const char *t)
{
    if (!t) return NAN;
    double days = 0;
    const char *p = strstr(t, "day");
    if (p) {
        days = atof(t);
        p = strchr(p, ',');
        if (!p) return NAN;
        t = p + 1;
    }
    int h, m;
    double sec;
    if (sscanf(t, " %d:%d:%lf", &h, &m, &sec) != 3) return NAN;
    return days * 86400 + h * 3600.0 + m * 60.0 + sec;
}

/* Each complete line is one JSON object; a last line without its newline is
 * still being written and is skipped. Anything else is an error.
 * 0 also when the log does not exist yet (metrics_found stays false); -1 with err on a line that is not ours.
 * LLaMA-Factory's trainer_log.jsonl mixes training lines (with loss) and evaluation lines (eval_loss only). */
static int load_metrics(Status *s, char *err, size_t errlen)
{
    /* the two trainers' logs differ in keys (contract/run_formats.h names both) but share the line format */
    bool lf = strcmp(s->backend, backend_json_names[BACKEND_LLAMAFACTORY]) == 0;
    char *path = xstrdup(s->metrics_path);
    char *buf;
    size_t len;
    int r = cli_read_file(path, &buf, &len, err, errlen);
    if (r) { free(path); return r < 0 ? -1 : 0; }
    s->metrics_found = true;
    size_t lineno = 0;
    for (char *line = buf; line < buf + len;) {
        char *nl = memchr(line, '\n', (size_t)(buf + len - line));
        if (!nl) break;   /* partial last line */
        lineno++;
        *nl = 0;
        char *q = line;
        while (*q == ' ' || *q == '\t' || *q == '\r') q++;
        if (*q) {
            cJSON *o = cJSON_Parse(q);
            const char *step_key = lf ? lf_log_keys[LK_CURRENT_STEPS] : metrics_keys[MK_STEP];
            const cJSON *stp = cJSON_GetObjectItemCaseSensitive(o, step_key);
            if (!cJSON_IsObject(o) || !cJSON_IsNumber(stp)) {
                snprintf(err, errlen, "%s:%zu: not a metrics line (expected a JSON object with \"%s\")",
                         s->metrics_path, lineno, step_key);
                cJSON_Delete(o);
                free(buf);
                free(path);
                return -1;
            }
            if (lf) {
                double st = stp->valuedouble;
                /* LLaMA-Factory states its own total on every line: the best total there is */
                double tot = jnum(o, lf_log_keys[LK_TOTAL_STEPS], -1);
                if (tot > 0) { s->total_steps = (long)tot; s->total_src = LF_TRAINER_LOG_FILE; }
                double ev = jnum(o, lf_log_keys[LK_EVAL_LOSS], NAN);
                if (isfinite(ev)) push_eval(s, st, ev);
                double loss = jnum(o, lf_log_keys[LK_LOSS], NAN);
                double el = parse_timedelta(jstr(o, lf_log_keys[LK_ELAPSED_TIME]));
                if (isfinite(loss)) push_point(s, (MPoint){st, loss, NAN, NAN, NAN, el});
            } else {
                const cJSON *lo = cJSON_GetObjectItemCaseSensitive(o, metrics_keys[MK_LOSS]);
                if (!cJSON_IsNumber(lo)) {
                    snprintf(err, errlen, "%s:%zu: not a metrics line (no numeric \"%s\")", s->metrics_path, lineno,
                             metrics_keys[MK_LOSS]);
                    cJSON_Delete(o);
                    free(buf);
                    free(path);
                    return -1;
                }
                push_point(s, (MPoint){stp->valuedouble, lo->valuedouble, jnum(o, metrics_keys[MK_STEP_TIME_S], NAN),
                                       jnum(o, metrics_keys[MK_TOKENS_PER_S], NAN), jnum(o, metrics_keys[MK_TOKENS], NAN),
                                       NAN});
            }
            cJSON_Delete(o);
        }
        line = nl + 1;
    }
    free(buf);
    free(path);
    return 0;
}

/* The total steps from the Prometheus file (the trainer's own count): the
 * sample line NAME{LABELS} VALUE of its row. */
static void load_prom(Status *s)
{
    char *path = join_path(s->out_dir, RUN_PROM_FILE), *buf, e[256];
    const char *name = prom_metric_names[PM_TOTAL_STEPS];
    size_t len, nl = strlen(name);
    if (cli_read_file(path, &buf, &len, e, sizeof e) == 0) {
        for (char *l = buf; l && *l;) {
            /* "NAME{" and not a longer metric name that starts with NAME */
            if (strncmp(l, name, nl) == 0 && l[nl] == '{') {
                char *sp = strchr(l, '}');
                if (sp) { s->total_steps = atol(sp + 1); s->total_src = RUN_PROM_FILE; }
            }
            l = strchr(l, '\n');
            if (l) l++;
        }
        free(buf);
    }
    free(path);
}

/* Rows per epoch: the prepared shards' count (index.json) when they exist, else the estimate's. */
static void load_rows(Status *s)
{
    s->rows = s->est_rows;
    if (!s->shards_dir) return;
    char *path = join_path(s->shards_dir, SHARD_INDEX_FILE), *buf, e[256];
    size_t len;
    if (cli_read_file(path, &buf, &len, e, sizeof e) == 0) {
        cJSON *j = cJSON_ParseWithLength(buf, len);
        double r = jnum(j, shard_index_keys[IX_N_ROWS], NAN);
        /* an index without a positive n_rows is not used: the estimate's figure stays */
        if (r > 0) s->rows = r;
        cJSON_Delete(j);
        free(buf);
    }
    free(path);
}

/* result.json marks the run finished; its held-out loss joins the curve at the final step. */
static void load_result(Status *s)
{
    char *path = join_path(s->out_dir, RUN_RESULT_FILE), *buf, e[256];
    size_t len;
    s->final_loss = s->result_eval_loss = NAN;
    if (cli_read_file(path, &buf, &len, e, sizeof e) == 0) {
        cJSON *j = cJSON_ParseWithLength(buf, len);
        /* the trainer writes result.json (atomically) when the run ends: its presence means finished */
        if (cJSON_IsObject(j)) {
            s->done = true;
            s->final_loss = jnum(j, result_keys[RK_FINAL_LOSS], NAN);
            s->result_eval_loss = jnum(j, result_keys[RK_EVAL_LOSS], NAN);
            if (isfinite(s->result_eval_loss))
                push_eval(s, jnum(j, result_keys[RK_STEPS], s->n ? s->pts[s->n - 1].step : 0), s->result_eval_loss);
        }
        cJSON_Delete(j);
        free(buf);
    }
    free(path);
}

/* The run's step times refitted as `llmc calibrate` fits them (one run: the
 * mfu, or the slope of elapsed_time for LLaMA-Factory), and the plan
 * estimated again with that profile. */
static void load_refit(Status *s)
{
    Refit *f = &s->refit;
    if (!s->metrics_found) return;
    CalibRun r;
    memset(&r, 0, sizeof r);
    r.arg = s->metrics_path;
    r.data_path = xstrdup(s->metrics_path);
    r.plan_path = xstrdup(s->plan_path);
    r.src = strcmp(s->backend, backend_json_names[BACKEND_LLAMAFACTORY]) == 0 ? CALIB_SRC_LF : CALIB_SRC_LLMC;
    if (calib_run_load(&r) != CALIB_OK) {
        f->note = xstrdup(r.err);
    } else {
        CalibFit fit;
        calib_fit(&r, 1, &fit);
        PlanProfile pf;
        calib_fit_profile(&fit, &pf);
        Estimate e;
        f->step_s = calib_predict(&r, &pf, &e);
        f->measured_s = r.step_s;
        f->first_step = r.first_step;
        f->last_step = r.last_step;
        f->steps_used = r.steps_used;
        f->mfu = fit.v[CALIB_P_MFU];
        f->plan_mfu = r.est_default_mfu;
        f->ok = isfinite(f->step_s) && f->step_s > 0;
        if (!f->ok) f->note = cli_xprintf("%s: the plan has no step-time estimate to refit", s->plan_path);
    }
    calib_run_free(&r);
}

/* ---- checkpoints ---------------------------------------------------------- */

/* The checkpoint `latest` names: its manifest present and its state.json's step. The hashes are not checked
 * (llmc-train verify does that): status must stay quick beside a checkpoint of many GB. */
static void load_ckpt_llmc(Status *s)
{
    s->ckpt_step = -1;
    if (!s->ckpt_dir) { s->ckpt_note = xstrdup("the plan names no checkpoint directory"); return; }
    char *lp = join_path(s->ckpt_dir, ckpt_files[CF_LATEST]), *buf, e[512];
    size_t len;
    int r = cli_read_file(lp, &buf, &len, e, sizeof e);
    if (r) {
        s->ckpt_note = r > 0 ? cli_xprintf("none yet (%s absent)", lp) : xstrdup(e);
        free(lp);
        return;
    }
    struct stat st;
    /* `latest` is rewritten at each save: its age is the newest checkpoint's */
    if (stat(lp, &st) == 0) s->ckpt_age = difftime(time(NULL), st.st_mtime);
    free(lp);
    size_t k = strcspn(buf, "\r\n");
    buf[k] = 0;
    /* a plain name inside the checkpoint directory, nothing that leads out of it */
    if (!buf[0] || strchr(buf, '/') || strcmp(buf, "..") == 0 || strcmp(buf, ".") == 0) {
        s->ckpt_note = cli_xprintf("%s/%s does not name a checkpoint", s->ckpt_dir, ckpt_files[CF_LATEST]);
        free(buf);
        return;
    }
    s->ckpt_name = buf;
    char *d = join_path(s->ckpt_dir, buf), *man = cli_xprintf("%s/%s", d, ckpt_files[CF_MANIFEST]),
         *sj = cli_xprintf("%s/%s", d, ckpt_files[CF_STATE]), *sb;
    struct stat ms;
    if (stat(man, &ms) != 0 || !S_ISREG(ms.st_mode)) {
        s->ckpt_note = cli_xprintf("%s: no %s", d, ckpt_files[CF_MANIFEST]);
    } else if (cli_read_file(sj, &sb, &len, e, sizeof e) != 0) {
        s->ckpt_note = cli_xprintf("%s: no readable %s", d, ckpt_files[CF_STATE]);
    } else {
        cJSON *j = cJSON_ParseWithLength(sb, len);
        double step = jnum(j, CKPT_STATE_STEP_KEY, -1);
        if (step >= 0) { s->ckpt_step = (long)step; s->ckpt_valid = true; }
        else s->ckpt_note = cli_xprintf("%s/%s: no %s", d, ckpt_files[CF_STATE], CKPT_STATE_STEP_KEY);
        cJSON_Delete(j);
        free(sb);
    }
    free(d); free(man); free(sj);
}

/* LLaMA-Factory: OUTPUT_DIR/checkpoint-N with trainer_state.json; the highest N. */
static void load_ckpt_lf(Status *s)
{
    s->ckpt_step = -1;
    DIR *dir = opendir(s->out_dir);
    if (!dir) { s->ckpt_note = cli_xprintf("none yet (%s: %s)", s->out_dir, strerror(errno)); return; }
    struct dirent *de;
    long best = -1;
    while ((de = readdir(dir))) {
        char *end;
        size_t pl = strlen(LF_CKPT_PREFIX);
        if (strncmp(de->d_name, LF_CKPT_PREFIX, pl) != 0) continue;
        long n = strtol(de->d_name + pl, &end, 10);
        /* "checkpoint-N" exactly, and only a higher N than the best so far */
        if (*end || n < 0 || n <= best) continue;
        char *ts = cli_xprintf("%s/%s/%s", s->out_dir, de->d_name, LF_CKPT_STATE_FILE);
        struct stat st;
        /* a checkpoint directory without trainer_state.json (one still being written) is not counted */
        if (stat(ts, &st) == 0 && S_ISREG(st.st_mode)) {
            best = n;
            free(s->ckpt_name);
            s->ckpt_name = xstrdup(de->d_name);
            s->ckpt_age = difftime(time(NULL), st.st_mtime);
        }
        free(ts);
    }
    closedir(dir);
    if (best >= 0) { s->ckpt_step = best; s->ckpt_valid = true; }
    else s->ckpt_note = xstrdup("none yet (no " LF_CKPT_PREFIX "N/" LF_CKPT_STATE_FILE ")");
}

/* ---- Slurm ---------------------------------------------------------------- */




/* "[D-]HH:MM:SS", "MM:SS", "UNLIMITED" -> seconds (NAN when unknown). */
static double slurm_duration(const char *t)
{
    if (!t[0] || strcmp(t, "UNLIMITED") == 0 || strcmp(t, "INVALID") == 0) return NAN;
    long d = 0, h = 0, m = 0, sec = 0;
    const char *dash = strchr(t, '-');
    if (dash) { d = atol(t); t = dash + 1; }
    int n = sscanf(t, "%ld:%ld:%ld", &h, &m, &sec);
    if (n == 2) { sec = m; m = h; h = 0; }
    else if (n == 1) { m = h; h = 0; }
    else if (n != 3) return NAN;
    return d * 86400.0 + h * 3600.0 + m * 60.0 + sec;
}

/* P resolved (links, "..", relative) so two spellings of one directory compare equal; P itself when it cannot
 * be resolved (on another machine). malloc'd. */
static char *real_or_copy(const char *p)
{
    char *r = realpath(p, NULL);
    return r ? r : xstrdup(p);
}

/* Cut S at its first newline (a tool's one-line message). */
static void first_line(char *s)
{
    s[strcspn(s, "\n")] = 0;
}


/* Slurm's view of the job: WANT_ID when given; else the newest job named like the plan's job whose batch
 * script (Command) lies in the plan's directory, which is where llmc wrote it. Then the segments the job went
 * through, counted three ways (scontrol's Restarts, the log's restart lines, sacct's rows): each can miss some. */
static void load_slurm(Status *s, const char *want_id)
{
    if (!cli_on_path("scontrol")) {
        s->slurm_note = xstrdup("scontrol is not on PATH: no Slurm view (the trainer's files only)");
        return;
    }
    char *out = NULL;
    /* -o: one line per job; WANT_ID NULL ends the argv, which asks for every job scontrol knows */
    char *argv[] = {"scontrol", "show", "job", "-o", (char *)want_id, NULL};
    int rc = cli_run_capture(argv, &out);
    if (rc != 0) {
        s->slurm_note = slurm_failure("scontrol show job", out);
        free(out);
        return;
    }
    char *pdir = real_or_copy(s->plan_dir);
    char val[PATH_MAX];
    long best = -1;
    for (char *line = out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (slurm_field(line, "JobId", val, sizeof val)) {
            long id = atol(val);
            bool match = want_id != NULL;
            if (!match && slurm_field(line, "JobName", val, sizeof val) && strcmp(val, s->job) == 0 &&
                slurm_field(line, "Command", val, sizeof val)) {
                /* Command is the batch script's path: its directory against the plan's */
                char *slash = strrchr(val, '/');
                if (slash) *slash = 0;
                char *cdir = real_or_copy(slash ? (val[0] ? val : "/") : ".");
                match = strcmp(cdir, pdir) == 0;
                free(cdir);
            }
            if (match) s->njobs_matched++;
            if (match && id > best) {
                best = id;
                s->have_job = true;
                snprintf(s->job_id, sizeof s->job_id, "%ld", id);
                if (!slurm_field(line, "JobState", s->state, sizeof s->state)) strcpy(s->state, "?");
                if (!slurm_field(line, "Reason", s->reason, sizeof s->reason)) s->reason[0] = 0;
                if (!slurm_field(line, "NodeList", s->nodes, sizeof s->nodes)) s->nodes[0] = 0;
                if (!slurm_field(line, "StdOut", s->stdout_path, sizeof s->stdout_path)) s->stdout_path[0] = 0;
                s->restarts = slurm_field(line, "Restarts", val, sizeof val) ? atol(val) : 0;
                s->run_time = slurm_field(line, "RunTime", val, sizeof val) ? slurm_duration(val) : NAN;
                s->job_limit = slurm_field(line, "TimeLimit", val, sizeof val) ? slurm_duration(val) : NAN;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(pdir);
    free(out);
    if (!s->have_job) {
        s->slurm_note = want_id ? cli_xprintf("job %s: not known to Slurm", want_id)
                                : cli_xprintf("no job named %s submitted from %s is known to slurmctld "
                                          "(finished jobs are forgotten after MinJobAge)", s->job, s->plan_dir);
        return;
    }
    /* segments as the job log tells them: the script prints one "restart N" line per start */
    s->log_segments = -1;
    if (s->stdout_path[0]) {
        char *buf, e[256];
        size_t len;
        if (cli_read_file(s->stdout_path, &buf, &len, e, sizeof e) == 0) {
            char pat[64];
            /* the job id in the pattern: a log shared by several jobs counts only this one's starts */
            snprintf(pat, sizeof pat, "llmc: job %s restart ", s->job_id);
            s->log_segments = 0;
            for (char *p = buf; (p = strstr(p, pat)); p += strlen(pat)) s->log_segments++;
            free(buf);
        }
    }
    /* sacct: every segment of a requeued job (-D), when accounting storage is configured */
    s->acct_segments = -1;
    if (!cli_on_path("sacct")) { s->acct_note = xstrdup("sacct is not on PATH"); return; }
    /* -n no header, -P parsable, -X the job not its steps, -D every requeued run (duplicates): one line each */
    char *av[] = {"sacct", "-n", "-P", "-X", "-D", "-j", s->job_id, "--format=JobID,State", NULL};
    rc = cli_run_capture(av, &out);
    if (rc != 0 || !out) {
        if (out) first_line(out);
        s->acct_note = cli_xprintf("sacct: %s", out && out[0] ? out : "failed");
    } else {
        s->acct_segments = 0;
        for (char *p = out; *p; p++)
            if (*p == '\n') s->acct_segments++;
    }
    free(out);
}

/* ---- nvidia-smi samples --------------------------------------------------- */

/* LOGDIR/JOB-ID-gpu-NODE.csv: nvidia-smi --query-gpu=timestamp,index,utilization.gpu,
 * memory.used,memory.total,... --format=csv; the last sample of each GPU.
 * The samples sit beside the job's log (StdOut's directory), one file per node, written by the job script. */
static void load_gpus(Status *s)
{
    if (!s->have_job || !s->stdout_path[0]) {
        s->gpu_note = xstrdup("no job log directory known (no Slurm view)");
        return;
    }
    char *dir = xstrdup(s->stdout_path), *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    char *pat = cli_xprintf("%s/%s-%s-gpu-*.csv", dir, s->job, s->job_id);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0) {
        s->gpu_note = cli_xprintf("no nvidia-smi samples (%s)", pat);
        free(dir); free(pat);
        return;
    }
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *fp = g.gl_pathv[i];
        /* the node's name is what follows "-gpu-" in the file name (%N in the job script) */
        const char *nd = strstr(fp + strlen(dir), "-gpu-");
        char node[128];
        snprintf(node, sizeof node, "%s", nd ? nd + 5 : "?");
        char *dot = strrchr(node, '.');
        if (dot) *dot = 0;
        char *buf, e[256];
        size_t len;
        if (cli_read_file(fp, &buf, &len, e, sizeof e) != 0) continue;
        for (char *line = buf; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            char ts[64];
            int idx;
            double util, used, total;
            /* nvidia-smi's CSV with units; the header line and a line being written (no '\n') do not match */
            if (nl && sscanf(line, "%63[^,], %d, %lf %%, %lf MiB, %lf MiB", ts, &idx, &util, &used, &total) == 5) {
                size_t k;
                for (k = 0; k < s->ngpus; k++)
                    if (s->gpus[k].index == idx && strcmp(s->gpus[k].node, node) == 0) break;
                if (k == s->ngpus) {
                    s->gpus = xrealloc(s->gpus, (s->ngpus + 1) * sizeof *s->gpus);
                    s->ngpus++;
                }
                GpuSample *gs = &s->gpus[k];
                snprintf(gs->node, sizeof gs->node, "%s", node);
                snprintf(gs->time, sizeof gs->time, "%s", ts);
                gs->index = idx;
                gs->util = util;
                gs->mem_used_mib = used;
                gs->mem_total_mib = total;
            }
            line = nl ? nl + 1 : NULL;
        }
        free(buf);
    }
    if (!s->ngpus) s->gpu_note = cli_xprintf("no samples yet in %s", pat);
    globfree(&g);
    free(dir);
    free(pat);
}

/* ---- derived figures ------------------------------------------------------ */

/* qsort's order for doubles, without the overflow of a subtraction cast to int. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    bool have_step;
    double step, loss, loss_smooth, tps, step_s, epoch, epochs_total, pct;
    long total;
    int window;
    double err_pct;            /* (estimate - measured) / measured */
    double eta_s, seg_left_s, seg_end_step;
    bool eta_refit;            /* eta_s from the refit (else the median of the window) */
    double plan_eta_s;         /* the plan's estimate for the same steps */
    double refit_err_pct;      /* (estimate - refitted) / refitted */
    bool drifts;               /* |refit_err_pct| > CALIB_DRIFT_PERCENT */
    long more_segments;
    bool finishes_in_segment;
} Derived;

/* The figures computed from a Status for display: progress, smoothed loss, step time, ETAs, segments.
 * The step time is the median of the last WINDOW steps, which one slow step (a save, an evaluation) does not
 * move; with a refit, the ETA uses the refitted step time instead. */
static Derived derive(const Status *s)
{
    Derived d;
    memset(&d, 0, sizeof d);
    d.step = d.loss = d.loss_smooth = d.tps = d.step_s = d.epoch = d.epochs_total = d.pct = NAN;
    d.err_pct = d.eta_s = d.seg_left_s = d.seg_end_step = d.plan_eta_s = d.refit_err_pct = NAN;
    d.more_segments = -1;
    /* the total steps: the trainer's own count first, then the plan's max_steps, then the estimate */
    d.total = s->total_steps > 0 ? s->total_steps : s->max_steps > 0 ? s->max_steps : s->est_steps;
    if (s->n) {
        const MPoint *last = &s->pts[s->n - 1];
        d.have_step = true;
        d.step = last->step;
        d.loss = last->loss;
        /* the last WINDOW points: recent enough to follow the run, long enough to smooth the loss */
        size_t w = s->n < WINDOW ? s->n : WINDOW;
        d.window = (int)w;
        double sum = 0, tsum = 0;
        int tn = 0;
        double dts[WINDOW];
        int nd = 0;
        for (size_t i = s->n - w; i < s->n; i++) {
            sum += s->pts[i].loss;
            if (isfinite(s->pts[i].tps)) { tsum += s->pts[i].tps; tn++; }
            if (isfinite(s->pts[i].dt) && s->pts[i].dt > 0) dts[nd++] = s->pts[i].dt;
        }
        d.loss_smooth = sum / (double)w;
        if (tn) d.tps = tsum / tn;
        if (nd) {
            qsort(dts, (size_t)nd, sizeof *dts, cmp_double);
            d.step_s = nd % 2 ? dts[nd / 2] : 0.5 * (dts[nd / 2 - 1] + dts[nd / 2]);
        }
        /* LLaMA-Factory logs whole seconds since its start: the slope over the
         * window, back to where a requeued segment restarted the clock */
            /* (no per-step times in the log: only LLaMA-Factory's elapsed_time to go by) */
        if (!nd && isfinite(last->elapsed)) {
            size_t j = s->n - 1;
            while (j > s->n - w && isfinite(s->pts[j - 1].elapsed) && s->pts[j - 1].elapsed <= s->pts[j].elapsed) j--;
            if (last->step > s->pts[j].step)
                d.step_s = (last->elapsed - s->pts[j].elapsed) / (last->step - s->pts[j].step);
        }
        /* no log line yet: the checkpoint's step is the progress known */
    } else if (s->ckpt_valid) {
        d.step = (double)s->ckpt_step;
    }
    if (isfinite(d.step) && d.total > 0) d.pct = 100.0 * d.step / (double)d.total;
    if (isfinite(d.step) && s->rows > 0 && s->global_batch > 0) {
        /* epochs from rows consumed: step x global batch over the rows of one epoch */
        d.epoch = d.step * (double)s->global_batch / s->rows;
        if (d.total > 0) d.epochs_total = (double)d.total * (double)s->global_batch / s->rows;
    }
    if (isfinite(d.step_s) && isfinite(s->est_step_s) && d.step_s > 0)
        d.err_pct = 100.0 * (s->est_step_s - d.step_s) / d.step_s;
    if (isfinite(d.step_s) && d.total > 0 && isfinite(d.step))
        d.eta_s = ((double)d.total - d.step) * d.step_s;
    if (s->refit.ok) {
        if (isfinite(s->est_step_s) && s->est_step_s > 0) {
            d.refit_err_pct = 100.0 * (s->est_step_s - s->refit.step_s) / s->refit.step_s;
            d.drifts = fabs(d.refit_err_pct) > CALIB_DRIFT_PERCENT;
        }
        if (d.total > 0 && isfinite(d.step)) {
            d.eta_s = ((double)d.total - d.step) * s->refit.step_s;
            d.eta_refit = true;
            if (isfinite(s->est_step_s)) d.plan_eta_s = ((double)d.total - d.step) * s->est_step_s;
        }
    }
    /* finished: no ETA, whatever the step times say */
    if (s->done) d.eta_s = 0;
    /* the current segment: what is left of its time limit, and whether the run ends inside it */
    if (s->have_job && strcmp(s->state, "RUNNING") == 0 && isfinite(s->job_limit) && isfinite(s->run_time)) {
        d.seg_left_s = s->job_limit - s->run_time;
        if (d.seg_left_s < 0) d.seg_left_s = 0;
        if (isfinite(d.eta_s)) {
            d.finishes_in_segment = d.eta_s <= d.seg_left_s;
            if (!d.finishes_in_segment) {
                /* the step the segment reaches before its time limit, at the same step time as the ETA */
                d.seg_end_step = d.step + d.seg_left_s / (d.eta_refit ? s->refit.step_s : d.step_s);
                /* what this segment cannot finish, in whole time limits */
                d.more_segments = (long)ceil((d.eta_s - d.seg_left_s) / s->job_limit);
            }
        }
    }
    return d;
}

/* The one word for the run: Slurm's state when the job is known ("done" when it COMPLETED and result.json
 * exists, "completed" when it ended without one), else what the files say. */
static const char *overall(const Status *s)
{
    if (s->have_job) {
        if (strcmp(s->state, "COMPLETED") == 0) return s->done ? "done" : "completed";
        return s->state;
    }
    if (s->done) return "done";
    if (s->metrics_found) return "unknown";
    return "not started";
}

/* ---- output --------------------------------------------------------------- */

/* A duration in the two largest units ("3m05s", "2h10m", "3d04h"), "?" when unknown. */
static const char *fmt_dur(double sec, char *b, size_t n)
{
    if (!isfinite(sec)) snprintf(b, n, "?");
    else if (sec < 60) snprintf(b, n, "%.1fs", sec);
    else if (sec < 3600) snprintf(b, n, "%dm%02ds", (int)(sec / 60), (int)fmod(sec, 60));
    else if (sec < 86400 * 2) snprintf(b, n, "%dh%02dm", (int)(sec / 3600), (int)fmod(sec / 60, 60));
    else snprintf(b, n, "%dd%02dh", (int)(sec / 86400), (int)fmod(sec / 3600, 24));
    return b;
}

/* The segments the job ran in: the largest of the three counts load_slurm gathered. */
static long segments(const Status *s)
{
    /* Restarts counts requeues: the segments are one more */
    long seg = s->restarts + 1;
    if (s->log_segments > seg) seg = s->log_segments;
    if (s->acct_segments > seg) seg = s->acct_segments;
    return seg;
}

/* The refit: the step time `llmc calibrate` would fit from this run, beside
 * the plan's, and whether the run drifts from the estimate. */
static void print_refit(FILE *f, const Status *s, const Derived *d)
{
    const Refit *r = &s->refit;
    if (!s->metrics_found) return;
    if (!r->ok) {
        fprintf(f, "  refit       not yet: %s\n", r->note ? r->note : "no measurement");
        return;
    }
    fprintf(f, "  refit       %.4g s a step (steps %.0f-%.0f", r->step_s, r->first_step, r->last_step);
    if (r->plan_mfu > 0) fprintf(f, "; mfu %.3g fitted, the plan's %.3g", r->mfu, r->plan_mfu);
    else fprintf(f, "; mfu %.3g fitted", r->mfu);
    fprintf(f, ")");
    if (isfinite(d->refit_err_pct)) {
        fprintf(f, ": estimate error %+.1f%%", d->refit_err_pct);
        if (d->drifts)
            fprintf(f, ", the run drifts from the estimate (beyond %.0f%%); fit the site profile from it: "
                       "llmc calibrate %s", CALIB_DRIFT_PERCENT, s->out_dir);
        else fprintf(f, ", within %.0f%% of the estimate", CALIB_DRIFT_PERCENT);
    }
    fprintf(f, "\n");
}

/* The human view (docs/status.md): one line per topic, "?" for what is not known yet. */
static void print_human(FILE *f, const Status *s, const Derived *d)
{
    char a[32], b[32], c[32];
    fprintf(f, "%s: %s  (backend %s, plan %s)\n", s->job, overall(s), s->backend, s->plan_path);
    if (s->have_job) {
        fprintf(f, "  slurm       job %s %s", s->job_id, s->state);
        /* a pending job's Reason (Priority, Resources, ...) is why it waits */
        if (strcmp(s->state, "PENDING") == 0 && s->reason[0]) fprintf(f, " (%s)", s->reason);
        if (strcmp(s->state, "RUNNING") == 0)
            fprintf(f, " on %s, %s of the %s limit", s->nodes, fmt_dur(s->run_time, a, sizeof a),
                    fmt_dur(s->job_limit, b, sizeof b));
        long seg = segments(s);
        fprintf(f, "; segment %ld (%ld requeue%s", seg, seg - 1, seg == 2 ? "" : "s");
        if (s->est_segments > 0) fprintf(f, "; the plan expects %ld segment%s", s->est_segments, s->est_segments == 1 ? "" : "s");
        fprintf(f, ")\n");
        /* a plan submitted several times: the newest job is shown, the count says there are others */
        if (s->njobs_matched > 1) fprintf(f, "              (%d jobs of this plan known; showing the newest)\n", s->njobs_matched);
        /* without sacct the segment count may be low: say where it came from */
        if (s->acct_note) fprintf(f, "              %s; segments from scontrol's Restarts and the job log\n", s->acct_note);
    } else {
        fprintf(f, "  slurm       %s\n", s->slurm_note);
    }
    if (s->merge) {   /* llamafactory-cli export: no steps, the merged model or not */
        fprintf(f, "  merged      %s: %s\n", s->out_dir, s->done ? "written (config.json)" : "not written yet");
        return;
    }
    if (!s->metrics_found) {
        fprintf(f, "  progress    no metrics yet (%s)\n", s->metrics_path);
    } else if (d->have_step) {
        fprintf(f, "  progress    step %.0f", d->step);
        if (d->total > 0) fprintf(f, "/%ld (%.1f%%)", d->total, d->pct);
        if (isfinite(d->epoch)) fprintf(f, ", epoch %.2f of %.2f", d->epoch, d->epochs_total);
        fprintf(f, "\n  loss        %.4f latest, %.4f mean of the last %d step%s", d->loss, d->loss_smooth,
                d->window, d->window == 1 ? "" : "s");
        if (s->nevals) fprintf(f, "; held-out %.4f at step %.0f", s->evals[s->nevals - 1].loss, s->evals[s->nevals - 1].step);
        fprintf(f, "\n");
        if (isfinite(d->tps)) fprintf(f, "  speed       %.0f tokens/s (mean of the last %d steps)\n", d->tps, d->window);
    } else {
        fprintf(f, "  progress    %s has no steps yet\n", s->metrics_path);
    }
    fprintf(f, "  step time   ");
    if (isfinite(d->step_s))
        fprintf(f, strcmp(s->backend, backend_json_names[BACKEND_LLAMAFACTORY]) == 0 ? "%.4g s measured (elapsed_time over the last %d steps)"
                                                           : "%.4g s measured (median of the last %d)",
                d->step_s, d->window);
    else fprintf(f, "not measured yet");
    if (isfinite(s->est_step_s)) fprintf(f, ", %.4g s estimated", s->est_step_s);
    if (isfinite(d->err_pct))
        fprintf(f, ": estimate error %+.1f%% (%s)", d->err_pct,
                /* the same threshold as calibrate's drift */
                fabs(d->err_pct) <= CALIB_DRIFT_PERCENT ? "on target" : d->err_pct > 0 ? "the run is faster than planned"
                                                                       : "the run is slower than planned");
    fprintf(f, "\n");
    print_refit(f, s, d);
    if (s->done) {
        fprintf(f, "  eta         finished");
        if (isfinite(s->final_loss)) fprintf(f, " (final loss %.4f)", s->final_loss);
        fprintf(f, "\n");
    } else if (isfinite(d->eta_s)) {
        fprintf(f, "  eta         run: %s", fmt_dur(d->eta_s, a, sizeof a));
        if (d->eta_refit && isfinite(d->plan_eta_s))
            fprintf(f, " refitted (the plan's estimate for these steps: %s", fmt_dur(d->plan_eta_s, b, sizeof b));
        else fprintf(f, " (from the median step time");
        if (isfinite(s->est_total_s)) fprintf(f, "; the plan: %s in all", fmt_dur(s->est_total_s, c, sizeof c));
        fprintf(f, ")");
        if (isfinite(d->seg_left_s)) {
            if (d->finishes_in_segment)
                fprintf(f, "; this segment: %s left, the run finishes in it", fmt_dur(d->seg_left_s, b, sizeof b));
            else
                fprintf(f, "; this segment: %s left, ends near step %.0f, then %ld more segment%s",
                        fmt_dur(d->seg_left_s, b, sizeof b), d->seg_end_step, d->more_segments,
                        d->more_segments == 1 ? "" : "s");
        }
        fprintf(f, "\n");
    }
    if (s->ckpt_valid)
        fprintf(f, "  checkpoint  %s (step %ld), %s old\n", s->ckpt_name, s->ckpt_step, fmt_dur(s->ckpt_age, a, sizeof a));
    else
        fprintf(f, "  checkpoint  %s\n", s->ckpt_note ? s->ckpt_note : "none");
    if (s->ngpus) {
        for (size_t i = 0; i < s->ngpus; i++) {
            const GpuSample *g = &s->gpus[i];
            fprintf(f, "  gpu         %s/%d: %.0f%% busy, %.1f of %.1f GiB", g->node, g->index, g->util,
                    g->mem_used_mib / 1024, g->mem_total_mib / 1024);
            if (isfinite(s->est_total_bytes))
                fprintf(f, " (estimate %.1f GiB)", s->est_total_bytes / 1073741824.0);
            fprintf(f, " at %s\n", g->time);
        }
    } else {
        fprintf(f, "  gpu         %s\n", s->gpu_note ? s->gpu_note : "no samples");
    }
}

/* JSON has no NaN or infinity: an unknown number is null, and the key is always there. */
static void jset_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static void jset_str(cJSON *o, const char *k, const char *v)
{
    if (v) cJSON_AddStringToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

/* The --format json view: the same figures as print_human, every key present (null when unknown). */
static cJSON *to_json(const Status *s, const Derived *d)
{
    cJSON *o = cJSON_CreateObject();
    jset_str(o, "job", s->job);
    jset_str(o, "status", overall(s));
    jset_str(o, "backend", s->backend);
    jset_str(o, "plan", s->plan_path);
    cJSON *sl = cJSON_AddObjectToObject(o, "slurm");
    if (s->have_job) {
        jset_str(sl, "job_id", s->job_id);
        jset_str(sl, "state", s->state);
        jset_str(sl, "reason", s->reason);
        jset_str(sl, "nodes", s->nodes);
        jset_num(sl, "run_seconds", s->run_time);
        jset_num(sl, "time_limit_seconds", s->job_limit);
        cJSON_AddNumberToObject(sl, "restarts", (double)s->restarts);
        cJSON_AddNumberToObject(sl, "segments", (double)segments(s));
        jset_num(sl, "segments_in_log", s->log_segments >= 0 ? (double)s->log_segments : NAN);
        jset_num(sl, "segments_in_sacct", s->acct_segments >= 0 ? (double)s->acct_segments : NAN);
        jset_str(sl, "sacct", s->acct_note);
        jset_str(sl, "log", s->stdout_path[0] ? s->stdout_path : NULL);
        cJSON_AddNumberToObject(sl, "jobs_of_this_plan", s->njobs_matched);
    } else {
        jset_str(sl, "job_id", NULL);
        jset_str(sl, "note", s->slurm_note);
    }
    jset_num(sl, "planned_segments", s->est_segments > 0 ? (double)s->est_segments : NAN);
    if (s->merge) {   /* llamafactory-cli export: no progress, the merged model or not */
        jset_str(o, "kind", "merge");
        jset_str(o, "merged_model", s->out_dir);
        cJSON_AddBoolToObject(o, "merged", s->done);
        return o;
    }
    cJSON *p = cJSON_AddObjectToObject(o, "progress");
    jset_str(p, "metrics", s->metrics_path);
    cJSON_AddBoolToObject(p, "metrics_found", s->metrics_found);
    jset_num(p, "step", d->step);
    jset_num(p, "total_steps", d->total > 0 ? (double)d->total : NAN);
    jset_num(p, "percent", d->pct);
    jset_num(p, "epoch", d->epoch);
    jset_num(p, "epochs", d->epochs_total);
    jset_num(p, "loss", d->loss);
    jset_num(p, "loss_smoothed", d->loss_smooth);
    cJSON_AddNumberToObject(p, "smoothing_window", d->window);
    jset_num(p, "eval_loss", s->nevals ? s->evals[s->nevals - 1].loss : NAN);
    jset_num(p, "tokens_per_second", d->tps);
    cJSON_AddBoolToObject(p, "done", s->done);
    jset_num(p, "final_loss", s->final_loss);
    cJSON *t = cJSON_AddObjectToObject(o, "step_time");
    jset_num(t, "measured_seconds", d->step_s);
    jset_num(t, "estimated_seconds", s->est_step_s);
    jset_num(t, "estimate_error_percent", d->err_pct);
    cJSON *rf = cJSON_AddObjectToObject(o, "refit");
    cJSON_AddBoolToObject(rf, "fitted", s->refit.ok);
    jset_str(rf, "note", s->refit.ok ? NULL : s->refit.note);
    jset_num(rf, "measured_seconds", s->refit.ok ? s->refit.measured_s : NAN);
    jset_num(rf, "first_step", s->refit.ok ? s->refit.first_step : NAN);
    jset_num(rf, "last_step", s->refit.ok ? s->refit.last_step : NAN);
    jset_num(rf, "steps_used", s->refit.ok ? s->refit.steps_used : NAN);
    jset_num(rf, "step_seconds", s->refit.ok ? s->refit.step_s : NAN);
    jset_num(rf, "mfu", s->refit.ok ? s->refit.mfu : NAN);
    jset_num(rf, "plan_mfu", s->refit.plan_mfu > 0 ? s->refit.plan_mfu : NAN);
    jset_num(rf, "estimate_error_percent", d->refit_err_pct);
    if (isfinite(d->refit_err_pct)) cJSON_AddBoolToObject(rf, "drifts", d->drifts);
    else cJSON_AddNullToObject(rf, "drifts");
    cJSON_AddNumberToObject(rf, "drift_threshold_percent", CALIB_DRIFT_PERCENT);
    cJSON *e = cJSON_AddObjectToObject(o, "eta");
    jset_num(e, "run_seconds", d->eta_s);
    jset_str(e, "from", !isfinite(d->eta_s) ? NULL : s->done ? "finished" : d->eta_refit ? "refit" : "median step time");
    jset_num(e, "plan_seconds", d->plan_eta_s);
    jset_num(e, "planned_total_seconds", s->est_total_s);
    jset_num(e, "segment_left_seconds", d->seg_left_s);
    if (isfinite(d->seg_left_s) && isfinite(d->eta_s)) cJSON_AddBoolToObject(e, "finishes_in_segment", d->finishes_in_segment);
    else cJSON_AddNullToObject(e, "finishes_in_segment");
    jset_num(e, "segment_end_step", d->seg_end_step);
    jset_num(e, "more_segments", d->more_segments >= 0 ? (double)d->more_segments : NAN);
    cJSON *c = cJSON_AddObjectToObject(o, "checkpoint");
    cJSON_AddBoolToObject(c, "valid", s->ckpt_valid);
    jset_str(c, "name", s->ckpt_valid ? s->ckpt_name : NULL);
    jset_num(c, "step", s->ckpt_valid ? (double)s->ckpt_step : NAN);
    jset_num(c, "age_seconds", s->ckpt_valid ? s->ckpt_age : NAN);
    jset_str(c, "note", s->ckpt_note);
    cJSON *g = cJSON_AddArrayToObject(o, "gpus");
    for (size_t i = 0; i < s->ngpus; i++) {
        cJSON *x = cJSON_CreateObject();
        jset_str(x, "node", s->gpus[i].node);
        cJSON_AddNumberToObject(x, "index", s->gpus[i].index);
        jset_num(x, "utilization_percent", s->gpus[i].util);
        jset_num(x, "memory_used_bytes", s->gpus[i].mem_used_mib * 1048576.0);
        jset_num(x, "memory_total_bytes", s->gpus[i].mem_total_mib * 1048576.0);
        jset_str(x, "time", s->gpus[i].time);
        cJSON_AddItemToArray(g, x);
    }
    jset_num(o, "estimated_memory_bytes_per_gpu", s->est_total_bytes);
    jset_str(o, "gpu_note", s->ngpus ? NULL : s->gpu_note);
    return o;
}

/* ---- the command ---------------------------------------------------------- */

/* One job's Status. The order matters: the refit needs the metrics, result.json's eval point the last step,
 * the GPU samples the job's log path from Slurm. Only the plan and a malformed log are errors; anything else
 * missing is a note in the view. */
static int collect(Status *s, const char *target, const char *job_id, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (load_plan(s, target, err, errlen)) return -1;
    if (load_metrics(s, err, errlen)) return -1;
    if (strcmp(s->backend, backend_json_names[BACKEND_LLAMAFACTORY]) != 0) load_prom(s);
    load_rows(s);
    load_result(s);
    load_refit(s);
    if (strcmp(s->backend, backend_json_names[BACKEND_LLAMAFACTORY]) == 0) load_ckpt_lf(s);
    else load_ckpt_llmc(s);
    load_slurm(s, job_id);
    load_gpus(s);
    return 0;
}

/* A merge job of a chain (DIR/LLMC_MERGE_YAML, no plan.json): its Slurm
 * state, and whether the merged model is written (export_dir/config.json,
 * what the job script checks last). */
static int collect_merge(Status *s, const char *dir, const char *name, const char *job_id, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->merge = true;
    s->plan_path = cli_xprintf("%s/%s", dir, LLMC_MERGE_YAML);
    s->plan_dir = xstrdup(dir);
    s->job = xstrdup(name);
    s->backend = xstrdup(backend_json_names[BACKEND_LLAMAFACTORY]);
    char *buf;
    size_t len;
    if (cli_read_file(s->plan_path, &buf, &len, err, errlen)) return -1;
    /* the YAML is llmc's own (emit), one key a line with a quoted value: a search, not a YAML parser */
    const char *key = strstr(buf, "\nexport_dir: \"");
    const char *v = key ? key + strlen("\nexport_dir: \"") : NULL, *q = v ? strchr(v, '"') : NULL;
    if (!q) {
        snprintf(err, errlen, "%s: no export_dir", s->plan_path);
        free(buf);
        return -1;
    }
    s->out_dir = v[0] == '/' ? cli_xprintf("%.*s", (int)(q - v), v) : cli_xprintf("%s/%.*s", dir, (int)(q - v), v);
    free(buf);
    char *cfg = cli_xprintf("%s/config.json", s->out_dir);
    struct stat st;
    s->done = stat(cfg, &st) == 0 && S_ISREG(st.st_mode);
    free(cfg);
    load_slurm(s, job_id);
    return 0;
}

/* Ctrl-C under --watch ends the loop after the current view instead of killing it half-printed. */
static volatile sig_atomic_t stop_watch;
static void on_sigint(int sig) { (void)sig; stop_watch = 1; }

/* ---- a chain: the directory of a plan of several jobs (DIR/submit.sh) ---- */

/* The chain's state from its jobs': failed (one ended other than COMPLETED),
 * running (one pending or running), completed (all), not submitted (none
 * known, nothing written), else unknown. */
static const char *chain_state(const Status *st, int n, bool *failed)
{
    int completed = 0, active = 0, seen = 0;
    *failed = false;
    for (int i = 0; i < n; i++) {
        const Status *s = &st[i];
        if (s->have_job && slurm_state_active(s->state)) active++;
        else if (s->have_job && strcmp(s->state, "COMPLETED") != 0) *failed = true;
        else if ((s->have_job && strcmp(s->state, "COMPLETED") == 0) || s->done) completed++;
        if (s->have_job || s->metrics_found || s->done) seen++;
    }
    if (*failed) return "failed";
    if (active) return "running";
    if (completed == n) return "completed";
    if (seen == 0) return "not submitted";
    return "unknown";
}

/* Every job of a chain, then the chain's state; redrawn under --watch until the chain stops running. Exit
 * status as status_main's, from chain_state. */
static int chain_status(const char *target, bool json, bool watch, double interval, bool tty)
{
    int rc = ST_OK;
    char err[PATH_MAX + 256];
    for (;;) {
        RunDir rd;
        if (rundir_load(target, &rd, err, sizeof err)) {
            fprintf(stderr, "llmc status: error: %s\n", err);
            return ST_USAGE;
        }
        Status *st = xcalloc((size_t)rd.n, sizeof(Status));
        Derived *dv = xcalloc((size_t)rd.n, sizeof(Derived));
        for (int i = 0; i < rd.n; i++) {
            const char *id = rd.jobs[i].id[0] ? rd.jobs[i].id : NULL;
            if (rd.jobs[i].merge ? collect_merge(&st[i], rd.jobs[i].dir, rd.jobs[i].name, id, err, sizeof err)
                                 : collect(&st[i], rd.jobs[i].dir, id, err, sizeof err)) {
                fprintf(stderr, "llmc status: error: %s\n", err);
                for (int k = 0; k <= i; k++) status_free(&st[k]);
                free(st);
                free(dv);
                rundir_free(&rd);
                return ST_USAGE;
            }
            dv[i] = derive(&st[i]);
        }
        bool failed;
        const char *state = chain_state(st, rd.n, &failed);
        /* on a terminal each view replaces the last (cursor home, clear); a pipe gets them one after another */
        if (watch && tty && !json) fputs("\033[H\033[2J", stdout);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "chain", rd.out);
            cJSON_AddStringToObject(o, "status", state);
            cJSON *arr = cJSON_AddArrayToObject(o, "jobs");
            for (int i = 0; i < rd.n; i++) {
                cJSON *j = to_json(&st[i], &dv[i]);
                if (rd.jobs[i].after) cJSON_AddStringToObject(j, "after", rd.jobs[i].after);
                else cJSON_AddNullToObject(j, "after");
                cJSON_AddItemToArray(arr, j);
            }
            /* under --watch one line per view, so a reader can take each line as one JSON document */
            char *txt = watch ? cJSON_PrintUnformatted(o) : cJSON_Print(o);
            fputs(txt, stdout);
            fputc('\n', stdout);
            free(txt);
            cJSON_Delete(o);
        } else {
            printf("chain %s: %s (%d jobs%s:", rd.out, state, rd.n, rd.recorded ? "" : ", none recorded by llmc submit");
            for (int i = 0; i < rd.n; i++)
                printf("%s %s %s", i ? "," : "", st[i].job, st[i].have_job ? st[i].state : overall(&st[i]));
            printf(")\n");
            for (int i = 0; i < rd.n; i++) {
                fputc('\n', stdout);
                print_human(stdout, &st[i], &dv[i]);
                if (rd.jobs[i].after) printf("  after       %s (afterok)\n", rd.jobs[i].after);
            }
        }
        fflush(stdout);
        rc = failed ? ST_FAILED : ST_OK;
        /* --watch ends once the chain is no longer running */
        bool finished = strcmp(state, "running") != 0;
        for (int i = 0; i < rd.n; i++) status_free(&st[i]);
        free(st);
        free(dv);
        rundir_free(&rd);
        if (!watch || finished || stop_watch) break;
        if (!json && !tty) fputc('\n', stdout);
        struct timespec ts = {(time_t)interval, (long)(fmod(interval, 1.0) * 1e9)};
        /* a signal other than Ctrl-C resumes the wait; Ctrl-C (stop_watch) ends it */
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_watch) {}
        if (stop_watch) break;
    }
    return rc;
}

static const char status_usage[] =
    "usage: llmc status [--format human|json] [--watch[=SECONDS]] [--plot FILE.svg|FILE.png]\n"
    "                   [--job JOBID] OUT_DIR|PLAN.json\n"
    "Slurm's view of the job, the trainer's progress and the plan's estimate (docs/status.md).\n"
    "  --watch[=SECONDS]  redraw every SECONDS (0.1 to 86400; default 2) until Ctrl-C\n"
    "Of a chain's directory (a plan of several jobs: OUT_DIR/submit.sh), every job and the\n"
    "chain's state (failed, running, completed, not submitted).\n"
    "The job is the one --job names, else the one llmc submit recorded (OUT_DIR/jobs.json),\n"
    "else the newest of this plan that Slurm knows.\n"
    "exit status: 0 shown (the job completed, running or waiting, or no Slurm view),\n"
    "             1 the job ended otherwise (FAILED, CANCELLED, TIMEOUT ...), 2 usage or I/O error\n";


/* The one-job view, or chain_status for a chain's directory; the job is --job's, else the one llmc submit
 * recorded, else the newest of this plan Slurm knows (load_slurm). */
int status_main(int argc, char **argv)
{
    bool json = false, watch = false;
    double interval = 2;
    const char *target = NULL, *plot = NULL, *job_id = NULL;
    enum { OPT_WATCH = CLI_OPT_FIRST_FREE, OPT_PLOT, OPT_JOB };
    static const struct option longopts[] = {
        CLI_COMMON_OPTIONS,
        {"watch", optional_argument, NULL, OPT_WATCH},   /* optional: --watch=SECONDS only */
        {"plot", required_argument, NULL, OPT_PLOT},
        {"job", required_argument, NULL, OPT_JOB},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "llmc status";
    int c, colour = -1;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': fputs(status_usage, stdout); return ST_OK;
        case CLI_OPT_VERSION: cli_version(); return ST_OK;
        case CLI_OPT_FORMAT: if (cli_format(cmd, optarg, &json)) return ST_USAGE; break;
        case CLI_OPT_COLOR: if (cli_colour(cmd, optarg, &colour)) return ST_USAGE; break;   /* status prints no colour */
        case OPT_WATCH:
            watch = true;
            if (optarg) {
                char *end;
                interval = strtod(optarg, &end);
                if (end == optarg || *end || !(interval >= 0.1 && interval <= 86400))
                    return cli_usage_error(cmd, "--watch=SECONDS needs 0.1 to 86400, not '%s'", optarg);
            }
            break;
        case OPT_PLOT: plot = optarg; break;
        case OPT_JOB: job_id = optarg; break;
        default: return cli_getopt_error(cmd, c, argv);
        }
    }
    if (optind == argc) return cli_usage_error(cmd, "no OUT_DIR or plan.json given");
    if (argc - optind > 1) return cli_usage_error(cmd, "one OUT_DIR or plan.json, not '%s' too", argv[optind + 1]);
    target = argv[optind];
    if (job_id) {
        /* digits, and '_' for an array task ("1234_7") */
        bool id = job_id[0] && strlen(job_id) <= 20;
        for (const char *p = job_id; *p; p++)
            if (!isdigit((unsigned char)*p) && *p != '_') id = false;
        if (!id) return cli_usage_error(cmd, "--job needs a Slurm job id (digits), not '%s'", job_id);
    }
    if (plot) {
        size_t n = strlen(plot);
        if (n < 5 || (strcmp(plot + n - 4, ".svg") != 0 && strcmp(plot + n - 4, ".png") != 0)) {
            return cli_usage_error(cmd, "--plot needs a FILE.svg or FILE.png, not '%s'", plot);
        }
    }
    bool tty = isatty(STDOUT_FILENO);
    char err[PATH_MAX + 256];
    if (watch) signal(SIGINT, on_sigint);
    if (rundir_is_chain(target)) {
        if (plot || job_id)
            return cli_usage_error(cmd, "%s is a chain's directory: --%s is for one job's (%s/JOB)", target,
                                   plot ? "plot" : "job", target);
        return chain_status(target, json, watch, interval, tty);
    }
    /* the id llmc submit recorded, when there is one */
    RunDir rec;
    char recid[32] = "";
    struct stat tst;
    if (!job_id && stat(target, &tst) == 0 && S_ISDIR(tst.st_mode) && rundir_load(target, &rec, err, sizeof err) == 0) {
        /* a single job's recorded id; a chain's are looked up per job in chain_status */
        if (rec.recorded && rec.n == 1 && rec.jobs[0].id[0]) snprintf(recid, sizeof recid, "%s", rec.jobs[0].id);
        rundir_free(&rec);
        if (recid[0]) job_id = recid;
    }
    /* a merge job's own directory (DIR/JOB of a chain): no plan.json, its YAML */
    char *mplan = cli_xprintf("%s/plan.json", target), *myaml = cli_xprintf("%s/%s", target, LLMC_MERGE_YAML);
    bool merge_dir = access(mplan, F_OK) != 0 && access(myaml, R_OK) == 0;
    free(mplan);
    free(myaml);
    if (merge_dir && plot) return cli_usage_error(cmd, "%s is a merge job's directory: it has no loss to plot", target);
    /* the merge job's name is its directory's last component, as the chain names it */
    char *mname = NULL;
    if (merge_dir) {
        size_t tl = strlen(target);
        while (tl > 1 && target[tl - 1] == '/') tl--;
        const char *b = target + tl;
        while (b > target && b[-1] != '/') b--;
        mname = cli_xprintf("%.*s", (int)(target + tl - b), b);
    }
    int rc = ST_OK;
    for (;;) {
        Status s;
        if (merge_dir ? collect_merge(&s, target, mname, job_id, err, sizeof err)
                      : collect(&s, target, job_id, err, sizeof err)) {
            fprintf(stderr, "llmc status: error: %s\n", err);
            status_free(&s);
            free(mname);
            return ST_USAGE;
        }
        Derived d = derive(&s);
        if (watch && tty && !json) fputs("\033[H\033[2J", stdout);
        if (json) {
            cJSON *o = to_json(&s, &d);
            char *txt = watch ? cJSON_PrintUnformatted(o) : cJSON_Print(o);
            fputs(txt, stdout);
            fputc('\n', stdout);
            free(txt);
            cJSON_Delete(o);
        } else {
            print_human(stdout, &s, &d);
        }
        fflush(stdout);
        if (plot) {
            StatusPoint *tp = xmalloc((s.n + 1) * sizeof *tp);
            for (size_t i = 0; i < s.n; i++) tp[i] = (StatusPoint){s.pts[i].step, s.pts[i].loss};
            char *title = cli_xprintf("%s: loss (%s)", s.job, s.metrics_path);
            int r = status_plot(plot, title, tp, s.n, s.evals, s.nevals, err, sizeof err);
            free(tp);
            free(title);
            if (r) {
                fprintf(stderr, "llmc status: error: %s\n", err);
                status_free(&s);
                return ST_USAGE;
            }
        }
        bool active = s.have_job && slurm_state_active(s.state);
        /* --watch stops once result.json is there and Slurm no longer runs the job */
        bool finished = s.done && !active;
        /* the exit status says how the job ended: Slurm's states other than these are failures */
        rc = s.have_job && !active && strcmp(s.state, "COMPLETED") != 0 ? ST_FAILED : ST_OK;
        status_free(&s);
        if (!watch || finished || stop_watch) break;
        if (!json && !tty) fputc('\n', stdout);
        struct timespec ts = {(time_t)interval, (long)(fmod(interval, 1.0) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_watch) {}
        if (stop_watch) break;
    }
    free(mname);
    return rc;
}
