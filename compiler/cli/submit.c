/* submit.c — `llmc submit OUT`, `llmc cancel OUT`, `llmc logs OUT` (submit.h,
 * docs/status.md): the directory llmc wrote handled as one thing, a chain of
 * jobs included, through Slurm's own clients (sbatch, scancel, scontrol). */
#include "submit.h"
#include "arena.h"
#include "cli.h"
#include "slurm_tools.h"
#include "status.h"
#include "emit.h"       /* LLMC_MERGE_YAML */

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The exit statuses of submit, cancel and logs (submit.h): 0 done, 1 Slurm refused or a job failed, 2 usage or
 * I/O error. */
enum { SUB_OK = 0, SUB_FAILED = 1, SUB_USAGE = 2 };

/* ---- the directory's jobs ------------------------------------------------- */

/* A regular file (stat follows links). */
static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A job's name as the emitter writes it, and so safe as a directory and file name: letters, digits, '_', '-'
 * and '.', not starting with '.', at most 200 bytes. A name read from a file that breaks this is not ours. */
static bool job_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 200) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.') return false;
    return s[0] != '.';
}

/* A Slurm job id: digits, with '_' for an array task ("1234_7"), at most 20 bytes (RunJob.id holds 32). */
static bool job_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 20) return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]) && s[i] != '_') return false;
    return true;
}

/* A chain's directory holds submit.sh and one subdirectory per job, but no plan.json of its own. */
bool rundir_is_chain(const char *out)
{
    char *plan = cli_xprintf("%s/plan.json", out), *sub = cli_xprintf("%s/submit.sh", out);
    bool chain = !is_file(plan) && is_file(sub);
    free(plan);
    free(sub);
    return chain;
}

/* Append job NAME (N bytes): its directory (OUT itself, or OUT/NAME in a chain) and its script NAME.slurm. */
static void add_job(RunDir *rd, const char *name, size_t n)
{
    rd->jobs = xrealloc(rd->jobs, sizeof(RunJob) * (size_t)(rd->n + 1));
    RunJob *j = &rd->jobs[rd->n++];
    memset(j, 0, sizeof *j);
    j->name = cli_xprintf("%.*s", (int)n, name);
    j->dir = rd->chain ? cli_xprintf("%s/%s", rd->out, j->name) : xstrdup(rd->out);
    j->script = cli_xprintf("%s/%s.slurm", j->dir, j->name);
}

void rundir_free(RunDir *rd)
{
    for (int i = 0; i < rd->n; i++) {
        RunJob *j = &rd->jobs[i];
        free(j->name); free(j->dir); free(j->script); free(j->after); free(j->stdout_path); free(j->stderr_path);
    }
    free(rd->jobs);
    free(rd->out);
    memset(rd, 0, sizeof *rd);
}

/* O's string member K, or NULL. */
static const char *jstring(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* DIR/jobs.json into rd (ids, order). 0, or -1 with err set. */
static int load_record(RunDir *rd, char *err, size_t errlen)
{
    char *path = cli_xprintf("%s/jobs.json", rd->out), *buf;
    size_t len;
    int r = cli_read_file(path, &buf, &len, err, errlen);
    if (r) {
        free(path);
        return r < 0 ? -1 : 0;
    }
    cJSON *root = cJSON_ParseWithLength(buf, len);
    free(buf);
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs");
    int rc = 0, placed = 0;
    if (!cJSON_IsArray(jobs)) {
        snprintf(err, errlen, "%s: not a record of llmc submit (no \"jobs\" array)", path);
        rc = -1;
    }
    const cJSON *e;
    const cJSON *list = rc ? NULL : jobs;
    cJSON_ArrayForEach(e, list) {
        const char *name = jstring(e, "job"), *id = jstring(e, "id"), *after = jstring(e, "after");
        int k = -1;
        /* only among the jobs not placed yet: a name listed twice is not found the second time */
        for (int i = placed; name && i < rd->n; i++)
            if (strcmp(rd->jobs[i].name, name) == 0) k = i;
        if (!name || !id || !job_id_ok(id) || k < 0) {
            snprintf(err, errlen, "%s: job %d: %s", path, placed + 1,
                     !name ? "no \"job\" name" : !id || !job_id_ok(id) ? "no Slurm job \"id\" (digits)"
                                                 : "not a job of this directory (or listed twice)");
            rc = -1;
            break;
        }
        /* jobs.json lists the jobs in submission order: each found job moves to the next place, so the
         * directory's order (the listing's) gives way to the order Slurm got them in */
        RunJob j = rd->jobs[k];   /* to its place in the submission order */
        memmove(&rd->jobs[placed + 1], &rd->jobs[placed], sizeof(RunJob) * (size_t)(k - placed));
        snprintf(j.id, sizeof j.id, "%s", id);
        j.after = after ? xstrdup(after) : NULL;
        j.stdout_path = jstring(e, "stdout") ? xstrdup(jstring(e, "stdout")) : NULL;
        j.stderr_path = jstring(e, "stderr") ? xstrdup(jstring(e, "stderr")) : NULL;
        rd->jobs[placed++] = j;
    }
    cJSON_Delete(root);
    free(path);
    /* no jobs.json at all is fine (nothing submitted yet): recorded stays false */
    if (rc == 0) rd->recorded = true;
    return rc;
}

/* OUT as submit.h describes it: one job (OUT/plan.json) or a chain (its jobs from .llmc-output, the list of
 * files llmc wrote), then the record of the last submission (jobs.json) when there is one. */
int rundir_load(const char *out, RunDir *rd, char *err, size_t errlen)
{
    memset(rd, 0, sizeof *rd);
    struct stat st;
    if (stat(out, &st) != 0) {
        snprintf(err, errlen, "%s: %s", out, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory (give the directory llmc wrote)", out);
        return -1;
    }
    size_t n = strlen(out);
    /* "out/" and "out" name one directory, and messages show it once */
    while (n > 1 && out[n - 1] == '/') n--;
    rd->out = cli_xprintf("%.*s", (int)n, out);
    char *plan = cli_xprintf("%s/plan.json", rd->out), *buf = NULL;
    size_t len;
    int rc = -1;
    if (is_file(plan)) {
        if (cli_read_file(plan, &buf, &len, err, errlen) == 0) {
            cJSON *j = cJSON_ParseWithLength(buf, len);
            const char *name = jstring(j, "job");
            if (name && job_name_ok(name, strlen(name))) {
                add_job(rd, name, strlen(name));
                rc = 0;
            } else {
                snprintf(err, errlen, "%s: not a plan.json written by llmc (no job name)", plan);
            }
            cJSON_Delete(j);
        }
    } else if (rundir_is_chain(rd->out)) {
        rd->chain = true;
        char *list = cli_xprintf("%s/.llmc-output", rd->out);
        int r = cli_read_file(list, &buf, &len, err, errlen);
        if (r == 1) snprintf(err, errlen, "%s: missing (the list of what llmc wrote names the chain's jobs)", list);
        for (char *line = r ? NULL : buf; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t ll = nl ? (size_t)(nl - line) : strlen(line);
            const char *slash = memchr(line, '/', ll);
            /* a job's directory: its plan.json, or a merge job's YAML */
            size_t rest = slash ? (size_t)(line + ll - slash) - 1 : 0;
            bool plan_file = slash && rest == strlen("plan.json") && strncmp(slash + 1, "plan.json", rest) == 0;
            bool merge_file = slash && rest == strlen(LLMC_MERGE_YAML) && strncmp(slash + 1, LLMC_MERGE_YAML, rest) == 0;
            /* .llmc-output lists every file llmc wrote, one per line: a job is a directory holding its plan.json
             * (or a merge job's YAML); '#' lines are comments */
            if (line[0] != '#' && (plan_file || merge_file) && job_name_ok(line, (size_t)(slash - line))) {
                add_job(rd, line, (size_t)(slash - line));
                rd->jobs[rd->n - 1].merge = merge_file;
            }
            line = nl ? nl + 1 : NULL;
        }
        if (r == 0 && rd->n == 0) snprintf(err, errlen, "%s: names no job's plan.json", list);
        else if (r == 0) rc = 0;
        free(list);
    } else {
        snprintf(err, errlen, "%s: no plan.json and no submit.sh: not a directory llmc wrote (llmc PLAN -o DIR)", rd->out);
    }
    free(buf);
    free(plan);
    if (rc == 0) rc = load_record(rd, err, errlen);
    if (rc) rundir_free(rd);
    return rc;
}

/* ---- Slurm ---------------------------------------------------------------- */

/* What scontrol knows of job id: 1 known (state, and the output files when
 * out/errp are given), 0 not known (finished long ago, or never), -1 no answer
 * (*note: why, one line). */
static int job_state(const char *id, char *state, size_t n, char *outp, char *errp, size_t pn, char **note)
{
    *note = NULL;
    if (!cli_on_path("scontrol")) {
        *note = xstrdup("scontrol is not on PATH");
        return -1;
    }
    char *out = NULL;
    char *argv[] = {"scontrol", "show", "job", "-o", (char *)id, NULL};
    int rc = cli_run_capture(argv, &out);
    if (rc != 0) {
        /* scontrol's wording for a job it no longer holds (past MinJobAge) or never had: not an error here */
        bool unknown = out && strstr(out, "Invalid job id");
        if (!unknown) *note = slurm_failure("scontrol show job", out);
        free(out);
        return unknown ? 0 : -1;
    }
    /* an answer without JobState is not a job line: treated as unknown */
    int known = slurm_field(out, "JobState", state, n) ? 1 : 0;
    if (outp && !slurm_field(out, "StdOut", outp, pn)) outp[0] = 0;
    if (errp && !slurm_field(out, "StdErr", errp, pn)) errp[0] = 0;
    free(out);
    return known;
}

/* #SBATCH --KEY=VALUE of a job script (the first), or NULL. */
static char *sbatch_option(const char *script_text, const char *key)
{
    /* only the script's header: sbatch reads #SBATCH lines up to the first command, and so does this */
    char pat[64];
    snprintf(pat, sizeof pat, "#SBATCH --%s=", key);
    for (const char *line = script_text; line && *line;) {
        if (strncmp(line, pat, strlen(pat)) == 0) {
            const char *v = line + strlen(pat);
            return cli_xprintf("%.*s", (int)strcspn(v, "\n"), v);
        }
        /* sbatch itself stops reading #SBATCH lines at the first command line */
        if (strncmp(line, "#!", 2) != 0 && strncmp(line, "#", 1) != 0 && line[0] != '\n') break;   /* past the header */
        line = strchr(line, '\n');
        if (line) line++;
    }
    return NULL;
}

/* A --output/--error pattern with %x (the job's name), %j (its id) and %%
 * filled, relative to cwd; NULL when it holds another pattern (then scontrol
 * names the file while the job is known). */
static char *expand_output(const char *pat, const char *name, const char *id, const char *cwd)
{
    if (!pat) return NULL;
    /* room for each %x and %j eight times; a pattern with more is not expanded (NULL), never cut */
    size_t cap = strlen(pat) + strlen(name) * 8 + strlen(id) * 8 + strlen(cwd) + 8, o = 0;
    char *r = xmalloc(cap);
    /* a relative pattern is relative to where sbatch ran, which jobs.json records as submitted_from */
    if (pat[0] != '/') o = (size_t)snprintf(r, cap, "%s/", cwd);
    for (const char *p = pat; *p; p++) {
        const char *add = NULL;
        char one[2] = {*p, 0};
        if (*p != '%') add = one;
        else if (p[1] == 'x') add = name;
        else if (p[1] == 'j') add = id;
        else if (p[1] == '%') add = "%";
        /* %N, %A, %a, %u ...: known only to Slurm; scontrol names the file while the job is known */
        else { free(r); return NULL; }
        if (*p == '%') p++;
        size_t al = strlen(add);
        if (o + al + 1 > cap) { free(r); return NULL; }
        memcpy(r + o, add, al);
        o += al;
    }
    r[o] = 0;
    return r;
}

/* ---- llmc submit ------------------------------------------------------------ */

/* DIR/jobs.json replaced atomically (a temporary file, fsync, rename). */
static int write_record(const RunDir *rd, const char *cwd, char *err, size_t errlen)
{
    cJSON *root = cJSON_CreateObject();
    /* the submission's working directory: relative --output patterns are relative to it */
    cJSON_AddStringToObject(root, "submitted_from", cwd);
    cJSON *arr = cJSON_AddArrayToObject(root, "jobs");
    for (int i = 0; i < rd->n; i++) {
        const RunJob *j = &rd->jobs[i];
        if (!j->id[0]) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "job", j->name);
        cJSON_AddStringToObject(o, "id", j->id);
        if (j->after) cJSON_AddStringToObject(o, "after", j->after);
        else cJSON_AddNullToObject(o, "after");
        if (j->stdout_path) cJSON_AddStringToObject(o, "stdout", j->stdout_path);
        if (j->stderr_path) cJSON_AddStringToObject(o, "stderr", j->stderr_path);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    /* mkstemp: two submits at once cannot write the same temporary file */
    char *path = cli_xprintf("%s/jobs.json", rd->out), *tmp = cli_xprintf("%s/.jobs.json.XXXXXX", rd->out);
    int fd = mkstemp(tmp);
    bool ok = fd >= 0 && text;
    size_t len = text ? strlen(text) : 0, done = 0;
    while (ok && done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = false;
        else done += (size_t)w;
    }
    /* 0644: mkstemp creates 0600, but jobs.json is as readable as the rest of the output */
    if (ok && (write(fd, "\n", 1) != 1 || fchmod(fd, 0644) != 0 || fsync(fd) != 0)) ok = false;
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) unlink(tmp);
    }
    free(text);
    free(path);
    free(tmp);
    return ok ? 0 : -1;
}

/* mkdir -p of the directory of a log pattern (Slurm does not create it).
 * A directory part that holds a '%' pattern cannot be made before the job has an id: left alone. Errors are
 * ignored: sbatch then reports the log file it cannot open. */
static void make_log_dir(const char *pattern, const char *cwd)
{
    const char *slash = pattern ? strrchr(pattern, '/') : NULL;
    if (!slash || memchr(pattern, '%', (size_t)(slash - pattern))) return;
    char *dir = pattern[0] == '/' ? cli_xprintf("%.*s", (int)(slash - pattern), pattern)
                                  : cli_xprintf("%s/%.*s", cwd, (int)(slash - pattern), pattern);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0777);
            *p = '/';
        }
    mkdir(dir, 0777);
    free(dir);
}

static const char submit_usage[] =
    "usage: llmc submit OUT_DIR [SBATCH_OPTION...]\n"
    "Submit what `llmc PLAN -o OUT_DIR` wrote with sbatch: its job script, or for a plan of\n"
    "several jobs OUT_DIR/submit.sh (each job after the one it depends on, afterok).\n"
    "Prints each job's id and records them in OUT_DIR/jobs.json (for llmc status, cancel\n"
    "and logs). The options after OUT_DIR go to every sbatch.\n"
    "exit status: 0 submitted, 1 sbatch refused a job (those before it stay submitted and\n"
    "             recorded), 2 usage or I/O error, or a recorded job still pending or running\n";

/* getopt for a command with only --help and --version: the index of the first
 * operand, or -(exit status + 1) after --help, --version or an error. */
static int plain_options(int argc, char **argv, const char *cmd, const char *usage, const char *shortopts,
                         const struct option *more, int (*on_opt)(int c, const char *arg, void *ctx), void *ctx)
{
    /* the five common options, then MORE: room for ten */
    struct option longopts[16] = {CLI_COMMON_OPTIONS};
    int nl = 5;
    for (int i = 0; more && more[i].name && nl < 15; i++) longopts[nl++] = more[i];
    longopts[nl] = (struct option){NULL, 0, NULL, 0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == 'h') { fputs(usage, stdout); return -(SUB_OK + 1); }
        if (c == CLI_OPT_VERSION) { cli_version(); return -(SUB_OK + 1); }
        if (c == CLI_OPT_FORMAT || c == CLI_OPT_COLOR)
            return -(cli_usage_error(cmd, "%s prints plain text; --format and --color are not its options", cmd) + 1);
        if (on_opt && c != '?' && c != ':') {
            int r = on_opt(c, optarg, ctx);
            if (r < 0) continue;
            return -(r + 1);
        }
        return -(cli_getopt_error(cmd, c, argv) + 1);
    }
    return optind;
}

/* llmc submit OUT [ARGS...]: sbatch of the one job, or bash submit.sh for a chain (which submits its jobs in
 * order with afterok), then the ids recorded in OUT/jobs.json for status, cancel and logs. A recorded job that
 * is still pending or running blocks a second submission. */
int submit_main(int argc, char **argv)
{
    const char *cmd = "llmc submit";
    /* "+": options end at OUT_DIR, so what follows it is passed to sbatch untouched */
    int first = plain_options(argc, argv, cmd, submit_usage, "+:h", NULL, NULL, NULL);
    if (first < 0) return -first - 1;
    if (first == argc) return cli_usage_error(cmd, "no OUT_DIR given");
    char err[PATH_MAX + 512];
    RunDir rd;
    if (rundir_load(argv[first], &rd, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s\n", cmd, err);
        return SUB_USAGE;
    }
    /* a submission still pending or running is not submitted twice */
    /* (a job Slurm no longer knows, or one that ended, does not stop a new submission) */
    for (int i = 0; rd.recorded && i < rd.n; i++) {
        char state[64], *note;
        if (!rd.jobs[i].id[0] || job_state(rd.jobs[i].id, state, sizeof state, NULL, NULL, 0, &note) != 1) {
            free(note);
            continue;
        }
        if (slurm_state_active(state)) {
            fprintf(stderr, "%s: error: %s/jobs.json: %s is job %s, %s: llmc cancel %s first, or wait\n", cmd, rd.out,
                    rd.jobs[i].name, rd.jobs[i].id, state, rd.out);
            rundir_free(&rd);
            return SUB_USAGE;
        }
    }
    if (!cli_on_path("sbatch")) {
        fprintf(stderr, "%s: error: sbatch is not on PATH: submit on a machine of the Slurm cluster\n", cmd);
        rundir_free(&rd);
        return SUB_USAGE;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) {
        fprintf(stderr, "%s: error: the working directory: %s\n", cmd, strerror(errno));
        rundir_free(&rd);
        return SUB_USAGE;
    }
    for (int i = 0; i < rd.n; i++) {   /* a new submission: the old record goes */
        rd.jobs[i].id[0] = 0;
        free(rd.jobs[i].after); free(rd.jobs[i].stdout_path); free(rd.jobs[i].stderr_path);
        rd.jobs[i].after = rd.jobs[i].stdout_path = rd.jobs[i].stderr_path = NULL;
    }
    /* sbatch: the one script, or the chain's submit.sh (its order and afterok) */
    int nextra = argc - first - 1;
    char **av = xcalloc((size_t)nextra + 6, sizeof(char *));
    int k = 0;
    char *script = rd.chain ? cli_xprintf("%s/submit.sh", rd.out) : xstrdup(rd.jobs[0].script);
    const char *prog = rd.chain ? "bash" : "sbatch";
    av[k++] = (char *)prog;
    /* --parsable: sbatch prints "ID" or "ID;CLUSTER", nothing to scrape */
    if (!rd.chain) av[k++] = "--parsable";
    /* extra arguments go before the script for sbatch (its options), after it for submit.sh (passed on) */
    for (int i = 0; i < nextra && !rd.chain; i++) av[k++] = argv[first + 1 + i];
    av[k++] = script;
    for (int i = 0; i < nextra && rd.chain; i++) av[k++] = argv[first + 1 + i];
    char *text = NULL;
    size_t len;
    if (!rd.chain) {   /* Slurm opens the log files, but does not make their directory */
        if (cli_read_file(script, &text, &len, err, sizeof err) == 0) {
            char *o = sbatch_option(text, "output"), *e = sbatch_option(text, "error");
            make_log_dir(o, cwd);
            make_log_dir(e, cwd);
            free(o);
            free(e);
        }
        free(text);
    }
    char *out = NULL;
    int rc = cli_run_capture(av, &out);
    free(av);
    /* the ids: sbatch's one line, or one "NAME: job ID" line per job from submit.sh */
    int submitted = 0;
    for (char *line = out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!rd.chain) {
            char id[32];
            /* "ID;CLUSTER" with several clusters: the id is before the ';' */
            size_t n = strcspn(line, ";");
            snprintf(id, sizeof id, "%.*s", (int)(n < 31 ? n : 31), line);
            if (job_id_ok(id) && rc == 0) snprintf(rd.jobs[0].id, sizeof rd.jobs[0].id, "%s", id), submitted = 1;
        } else {
            /* submit.sh's lines: "NAME: job ID" or "NAME: job ID (after DEP: job DEPID)" */
            for (int i = 0; i < rd.n; i++) {
                size_t nn = strlen(rd.jobs[i].name);
                if (strncmp(line, rd.jobs[i].name, nn) != 0 || strncmp(line + nn, ": job ", 6) != 0) continue;
                const char *p = line + nn + 6;
                size_t idn = strspn(p, "0123456789_");
                if (idn == 0 || idn > 20) continue;
                snprintf(rd.jobs[i].id, sizeof rd.jobs[i].id, "%.*s", (int)idn, p);
                p += idn;
                if (strncmp(p, " (after ", 8) == 0) {
                    const char *dep = p + 8, *colon = strstr(dep, ": job ");
                    if (colon) rd.jobs[i].after = cli_xprintf("%.*s", (int)(colon - dep), dep);
                }
                /* submission order: this job after the ones already placed */
                /* (as load_record does, so the record lists the jobs in the order they went to Slurm) */
                RunJob j = rd.jobs[i];
                memmove(&rd.jobs[submitted + 1], &rd.jobs[submitted], sizeof(RunJob) * (size_t)(i - submitted));
                rd.jobs[submitted++] = j;
                break;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    /* each submitted job's output files, from its script's --output/--error */
    for (int i = 0; i < submitted; i++) {
        RunJob *j = &rd.jobs[i];
        if (cli_read_file(j->script, &text, &len, err, sizeof err) != 0) continue;
        char *name = sbatch_option(text, "job-name"), *o = sbatch_option(text, "output"), *e = sbatch_option(text, "error");
        /* Slurm's default is slurm-%j.out in the submission directory; --error defaults to --output */
        j->stdout_path = expand_output(o ? o : "slurm-%j.out", name ? name : j->name, j->id, cwd);
        j->stderr_path = expand_output(e ? e : o ? o : "slurm-%j.out", name ? name : j->name, j->id, cwd);
        free(name); free(o); free(e); free(text);
    }
    int status = SUB_OK;
    for (int i = 0; i < submitted; i++) {
        if (rd.jobs[i].after) printf("%s: job %s (after %s)\n", rd.jobs[i].name, rd.jobs[i].id, rd.jobs[i].after);
        else printf("%s: job %s\n", rd.jobs[i].name, rd.jobs[i].id);
    }
    /* recorded even when a later job of a chain failed: the ones submitted must stay cancellable */
    if (submitted && write_record(&rd, cwd, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s (the jobs are submitted)\n", cmd, err);
        status = SUB_USAGE;
    } else if (submitted) {
        printf("recorded in %s/jobs.json\n", rd.out);
    }
    /* a partial chain is reported with how to cancel what did go in */
    if (rc != 0 || submitted < rd.n) {
        char *why = rc < 0 ? cli_xprintf("%s could not be run", prog) : slurm_failure(rd.chain ? "submit.sh" : "sbatch", out);
        fprintf(stderr, "%s: error: %s", cmd, why);
        if (submitted < rd.n) {
            fprintf(stderr, " (%d of %d job%s submitted", submitted, rd.n, rd.n == 1 ? "" : "s");
            if (submitted) fprintf(stderr, "; llmc cancel %s cancels them", rd.out);
            fputc(')', stderr);
        }
        fputc('\n', stderr);
        free(why);
        if (status == SUB_OK) status = SUB_FAILED;
    }
    free(out);
    free(script);
    rundir_free(&rd);
    return status;
}

/* ---- llmc cancel ------------------------------------------------------------ */

static const char cancel_usage[] =
    "usage: llmc cancel OUT_DIR\n"
    "Cancel (scancel) the jobs `llmc submit OUT_DIR` recorded in OUT_DIR/jobs.json that are\n"
    "still pending or running; say what each finished job ended as.\n"
    "exit status: 0 cancelled (or nothing left to cancel), 1 scancel refused,\n"
    "             2 usage or I/O error, or no job recorded\n";

/* llmc cancel OUT: scancel of every recorded job still pending or running, in one call. */
int cancel_main(int argc, char **argv)
{
    const char *cmd = "llmc cancel";
    int first = plain_options(argc, argv, cmd, cancel_usage, ":h", NULL, NULL, NULL);
    if (first < 0) return -first - 1;
    if (first == argc) return cli_usage_error(cmd, "no OUT_DIR given");
    if (argc - first > 1) return cli_usage_error(cmd, "one OUT_DIR, not '%s' too", argv[first + 1]);
    char err[PATH_MAX + 512];
    RunDir rd;
    if (rundir_load(argv[first], &rd, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s\n", cmd, err);
        return SUB_USAGE;
    }
    if (!rd.recorded) {
        fprintf(stderr, "%s: error: %s/jobs.json: no job recorded (llmc submit %s records them)\n", cmd, rd.out, rd.out);
        rundir_free(&rd);
        return SUB_USAGE;
    }
    if (!cli_on_path("scancel")) {
        fprintf(stderr, "%s: error: scancel is not on PATH: cancel on a machine of the Slurm cluster\n", cmd);
        rundir_free(&rd);
        return SUB_USAGE;
    }
    /* the last submitted first: a job waiting on another goes before it */
    char **av = xcalloc((size_t)rd.n + 2, sizeof(char *));
    int k = 0, status = SUB_OK;
    av[k++] = "scancel";
    for (int i = rd.n - 1; i >= 0; i--) {
        RunJob *j = &rd.jobs[i];
        if (!j->id[0]) continue;
        char state[64], *note;
        int known = job_state(j->id, state, sizeof state, NULL, NULL, 0, &note);
        /* no answer from Slurm: nothing is cancelled, rather than cancel some jobs blind */
        if (known < 0) {
            fprintf(stderr, "%s: error: %s\n", cmd, note);
            free(note);
            status = SUB_USAGE;
            break;
        }
        if (known == 0) printf("%s: job %s is no longer known to Slurm (finished)\n", j->name, j->id);
        else if (!slurm_state_active(state)) printf("%s: job %s already ended: %s\n", j->name, j->id, state);
        else {
            av[k++] = j->id;
            printf("%s: job %s (%s): cancelling\n", j->name, j->id, state);
        }
    }
    if (status == SUB_OK && k > 1) {
        char *out = NULL;
        int rc = cli_run_capture(av, &out);
        if (rc != 0) {
            char *why = slurm_failure("scancel", out);
            fprintf(stderr, "%s: error: %s\n", cmd, why);
            free(why);
            status = SUB_FAILED;
        }
        free(out);
    }
    free(av);
    rundir_free(&rd);
    return status;
}

/* ---- llmc logs -------------------------------------------------------------- */

static const char logs_usage[] =
    "usage: llmc logs [-f] [--err | --metrics] [--job NAME] OUT_DIR\n"
    "Print a submitted run's log: its Slurm output file (the batch script's and the ranks'\n"
    "standard output, as recorded by llmc submit or named by scontrol), with --err its\n"
    "standard error, with --metrics the trainer's own log (llmc's metrics.jsonl or\n"
    "LLaMA-Factory's trainer_log.jsonl). Of a chain, the first job not completed (else the\n"
    "last), or --job NAME.\n"
    "  -f, --follow  keep printing what is appended until the job ends (or Ctrl-C)\n"
    "exit status: 0 printed (the job completed or is running), 1 the followed job ended\n"
    "             otherwise (FAILED, CANCELLED, TIMEOUT ...), 2 usage or I/O error\n";

/* llmc logs' options (logs_opt fills them). */
typedef struct {
    bool follow, err, metrics;
    const char *job;
} LogsOpts;

enum { OPT_ERR = CLI_OPT_FIRST_FREE, OPT_METRICS, OPT_JOB };

/* plain_options' callback: -1 when C was taken, else the exit status. */
static int logs_opt(int c, const char *arg, void *ctx)
{
    LogsOpts *o = ctx;
    switch (c) {
    case 'f': o->follow = true; return -1;
    case OPT_ERR: o->err = true; return -1;
    case OPT_METRICS: o->metrics = true; return -1;
    case OPT_JOB: o->job = arg; return -1;
    default: return SUB_USAGE;
    }
}

/* Ctrl-C under -f ends the follow loop; the rest of the output already read is printed. */
static volatile sig_atomic_t stop_follow;
static void on_sigint(int sig) { (void)sig; stop_follow = 1; }

/* Copy fd's bytes from *off to its end onto stdout. -1 on a read error. */
static int copy_new(int fd, off_t *off)
{
    char buf[65536];
    for (;;) {
        ssize_t r = pread(fd, buf, sizeof buf, *off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        fwrite(buf, 1, (size_t)r, stdout);
        *off += r;
    }
    fflush(stdout);
    return 0;
}

/* llmc logs OUT: the job's output file (or --err, --metrics), copied to stdout; with -f, followed like tail -f
 * until the job ends. The path comes from jobs.json's record, else from scontrol. */
int logs_main(int argc, char **argv)
{
    const char *cmd = "llmc logs";
    static const struct option more[] = {
        {"follow", no_argument, NULL, 'f'},
        {"err", no_argument, NULL, OPT_ERR},
        {"metrics", no_argument, NULL, OPT_METRICS},
        {"job", required_argument, NULL, OPT_JOB},
        {NULL, 0, NULL, 0},
    };
    LogsOpts o = {0};
    int first = plain_options(argc, argv, cmd, logs_usage, ":hf", more, logs_opt, &o);
    if (first < 0) return -first - 1;
    if (first == argc) return cli_usage_error(cmd, "no OUT_DIR given");
    if (argc - first > 1) return cli_usage_error(cmd, "one OUT_DIR, not '%s' too", argv[first + 1]);
    if (o.err && o.metrics) return cli_usage_error(cmd, "--err and --metrics exclude each other");
    char err[PATH_MAX + 512];
    RunDir rd;
    if (rundir_load(argv[first], &rd, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s\n", cmd, err);
        return SUB_USAGE;
    }
    /* which job: --job, the only one, or the chain's first not completed */
    /* the chain's first job not COMPLETED is the one running, waiting, or failed: the log worth reading */
    int pick = -1;
    char state[64] = "", outp[PATH_MAX] = "", errp[PATH_MAX] = "";
    bool have_state = false;
    for (int i = 0; i < rd.n; i++) {
        if (o.job && strcmp(rd.jobs[i].name, o.job) == 0) pick = i;
        if (o.job) continue;
        char st[64] = "", *note = NULL;
        bool known = rd.jobs[i].id[0] && job_state(rd.jobs[i].id, st, sizeof st, NULL, NULL, 0, &note) == 1;
        free(note);
        pick = i;
        if (!known || strcmp(st, "COMPLETED") != 0) break;
    }
    if (pick < 0) {
        fprintf(stderr, "%s: error: %s has no job '%s'", cmd, rd.out, o.job);
        for (int i = 0; i < rd.n; i++) fprintf(stderr, "%s%s", i ? ", " : " (its jobs: ", rd.jobs[i].name);
        fputs(")\n", stderr);
        rundir_free(&rd);
        return SUB_USAGE;
    }
    RunJob *j = &rd.jobs[pick];
    if (j->id[0]) {
        char *note = NULL;
        have_state = job_state(j->id, state, sizeof state, outp, errp, sizeof outp, &note) == 1;
        free(note);
    }
    char *path = NULL;
    if (o.metrics) path = status_trainer_log(j->dir, err, sizeof err);
    else if (o.err && (j->stderr_path || errp[0])) path = xstrdup(j->stderr_path ? j->stderr_path : errp);
    else if (!o.err && (j->stdout_path || outp[0])) path = xstrdup(j->stdout_path ? j->stdout_path : outp);
    else if (!j->id[0])
        snprintf(err, sizeof err, "%s: no job recorded for %s in %s/jobs.json (llmc submit %s records them; "
                 "--metrics prints the trainer's log without Slurm)", rd.out, j->name, rd.out, rd.out);
    else
        snprintf(err, sizeof err, "job %s (%s): its %s file is not known (scontrol does not name it)", j->id, j->name,
                 o.err ? "standard error" : "output");
    if (!path) {
        fprintf(stderr, "%s: error: %s\n", cmd, err);
        rundir_free(&rd);
        return SUB_USAGE;
    }
    if (j->id[0]) fprintf(stderr, "==> %s: job %s%s%s: %s <==\n", j->name, j->id, have_state ? " " : "",
                          have_state ? state : "", path);
    else fprintf(stderr, "==> %s: %s <==\n", j->name, path);
    fflush(stderr);
    if (o.follow) signal(SIGINT, on_sigint);
    int fd = -1, status = SUB_OK;
    off_t off = 0;
    struct timespec last_check = {0};
    for (;;) {
        if (fd < 0) {
            /* O_NONBLOCK: a FIFO in the log's place must not hang the open; fstat then refuses it */
            fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
            struct stat st;
            if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
                fprintf(stderr, "%s: error: %s: not a regular file\n", cmd, path);
                status = SUB_USAGE;
                break;
            }
            if (fd < 0 && (errno != ENOENT || !o.follow)) {
                fprintf(stderr, "%s: error: %s: %s%s\n", cmd, path, strerror(errno),
                        errno == ENOENT && have_state && slurm_state_active(state) ? " (not written yet: -f waits for it)" : "");
                status = SUB_USAGE;
                break;
            }
        }
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && st.st_size < off) off = 0;   /* truncated: from the start */
            if (copy_new(fd, &off)) {
                fprintf(stderr, "%s: error: %s: %s\n", cmd, path, strerror(errno));
                status = SUB_USAGE;
                break;
            }
        }
        if (!o.follow || stop_follow) break;
        /* the job's state every 2 s: once it ended, the rest is printed and that is all */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* scontrol at most every 2 s: the loop itself polls the file every 250 ms */
        if (j->id[0] && now.tv_sec - last_check.tv_sec >= 2) {
            last_check = now;
            char *note = NULL;
            int known = job_state(j->id, state, sizeof state, NULL, NULL, 0, &note);
            free(note);
            if (known == 0 || (known == 1 && !slurm_state_active(state))) {
                if (fd >= 0) copy_new(fd, &off);
                if (known == 1 && strcmp(state, "COMPLETED") != 0) status = SUB_FAILED;
                fprintf(stderr, "==> %s: job %s %s <==\n", j->name, j->id, known ? state : "no longer known to Slurm");
                break;
            }
        }
        /* new output is looked for four times a second */
        struct timespec ts = {0, 250 * 1000 * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_follow) {}
    }
    if (fd >= 0) close(fd);
    if (!o.follow && status == SUB_OK && have_state && !slurm_state_active(state) && strcmp(state, "COMPLETED") != 0)
        status = SUB_FAILED;
    free(path);
    rundir_free(&rd);
    return status;
}
