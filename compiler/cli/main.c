/* main.c — the llmc command line: compile, check, fmt, explain. */
#include "cli.h"
#include "emit.h"
#include "estimate.h"
#include "fmt.h"
#include "frontend.h"
#include "status.h"
#include "submit.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>

int explain_main(int argc, char **argv);   /* compiler/cli/explain.c */
int init_model_main(int argc, char **argv);   /* compiler/cli/init_model.c */
int calibrate_main(int argc, char **argv);    /* compiler/cli/calibrate.c */

/* llmc(1)'s exit statuses: CI tells a plan with errors (1) from a command
 * that could not run at all (2). */
enum { EXIT_CLEAN = 0, EXIT_PLAN = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
    "usage: llmc PLAN -o DIR            compile: check, estimate, write DIR/\n"
    "       llmc check PLAN...          diagnostics only (exit 1 on any error)\n"
    "       llmc fmt [--check|-w] PLAN...   canonical formatting\n"
    "       llmc explain PLAN           the estimate, figure by figure\n"
    "       llmc PLAN -o DIR --sweep BLOCK.KEY=V1,V2,...   one output per point, DIR/KEY=V/,\n"
    "                                   and a table of the estimates\n"
    "       llmc status OUT_DIR         a submitted run: Slurm, progress, estimate vs measured\n"
    "       llmc submit|cancel|logs OUT_DIR   sbatch the output (a chain in order), scancel it,\n"
    "                                   its log\n"
    "       llmc init-model DIR [NAME]  the model block for a Hugging Face model directory\n"
    "       llmc calibrate RUN... [-o PROFILE.llm]  a site profile from measured runs\n"
    "       llmc --help | --version     (every command takes --help)\n"
    "\n"
    "options (--opt=VALUE or --opt VALUE):\n"
    "  -o DIR, --output DIR     output directory (compile)\n"
    "  --set BLOCK.KEY=VALUE    a value instead of the plan's (repeatable; llmc, check,\n"
    "                           explain): typed and checked like the file\n"
    "  --sweep BLOCK.KEY=V1,V2,...  compile: one output directory per value (two --sweep:\n"
    "                           every pair), a summary table; exit 1 if a point has errors\n"
    "  -q, --quiet              no notes (e.g. files not readable on this machine); errors\n"
    "                           and warnings still shown\n"
    "  --format human|json      diagnostics as text (stderr) or JSON (stdout)\n"
    "  --color auto|always|never  colour in text diagnostics (auto: only on a terminal,\n"
    "                           and not when NO_COLOR is set)\n"
    "  --check                  fmt: exit 1 and list files that are not formatted\n"
    "  -w, --write              fmt: rewrite files in place\n"
    "\n"
    "exit status: 0 clean, 1 errors in the plan, 2 usage or I/O error\n"
    "see llmc(1), llmc-train(1) and docs/language.md\n";

static const char check_usage[] =
    "usage: llmc check [-q] [--set BLOCK.KEY=VALUE]... [--format human|json] [--color auto|always|never] PLAN...\n"
    "Check each plan (syntax, types, references, estimates, cross-file rules) and write\n"
    "nothing. Every error of every file, in source order.\n"
    "  -q, --quiet  no notes; errors and warnings still shown\n"
    "  --set BLOCK.KEY=VALUE  a value instead of the plan's (repeatable), checked like the file\n"
    "exit status: 0 clean, 1 errors in a plan, 2 usage or I/O error\n";

static const char fmt_usage[] =
    "usage: llmc fmt [--check | -w] [--format human|json] [--color auto|always|never] PLAN...\n"
    "Print a plan in the canonical layout (comments kept).\n"
    "  --check      list the files that are not formatted; exit 1 if any\n"
    "  -w, --write  rewrite the files in place (atomically)\n"
    "exit status: 0 clean, 1 a file not formatted or with errors, 2 usage or I/O error\n";

/* The subcommands that share parse_options; explain, status and init-model
 * parse their own. */
typedef enum { SUB_COMPILE, SUB_CHECK, SUB_FMT } Sub;
static const char *const sub_name[] = {"llmc", "llmc check", "llmc fmt"};
static const char *const sub_usage[] = {usage_text, check_usage, fmt_usage};

/* What parse_options read: the files in order (argv's own strings; the array is malloc'd) and the options. */
typedef struct Options {
    DiagFormat format;
    int colour;
    const char *out_dir;
    bool fmt_check, fmt_write;
    bool quiet;   /* -q: notes not printed */
    CliOverrides sets;        /* --set BLOCK.KEY=VALUE and --sweep BLOCK.KEY=V1,V2,..., in order */
    int nsweeps;
    const char **files;
    int nfiles;
} Options;

static int options_error(struct Options *o, Sub sub, const char *fmt, const char *arg);

enum { OPT_CHECK = CLI_OPT_FIRST_FREE, OPT_SET, OPT_SWEEP };

/* Parse a subcommand's options (argv[0]: the command's name); returns -1 on
 * success, else the exit code (0 after --help or --version). */
static int parse_options(int argc, char **argv, Options *o, Sub sub)
{
    static const struct option longopts[] = {
        CLI_COMMON_OPTIONS,
        {"output", required_argument, NULL, 'o'},
        {"check", no_argument, NULL, OPT_CHECK},
        {"write", no_argument, NULL, 'w'},
        {"quiet", no_argument, NULL, 'q'},
        {"set", required_argument, NULL, OPT_SET},
        {"sweep", required_argument, NULL, OPT_SWEEP},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = sub_name[sub];
    o->format = DIAG_FMT_HUMAN;
    o->colour = -1;   /* auto: colour only on a terminal, and not under NO_COLOR */
    /* never more files than arguments */
    o->files = xcalloc((size_t)argc + 1, sizeof(char *));
    optind = 1;
    opterr = 0;
    int c;
    bool json = false;
    /* a leading ':' in the short options: a missing value comes back as ':', not '?', for its own message */
    while ((c = getopt_long(argc, argv, ":ho:wq", longopts, NULL)) != -1) {
        int rc = -1;
        switch (c) {
        case 'h': fputs(sub_usage[sub], stdout); rc = EXIT_CLEAN; break;
        case CLI_OPT_VERSION: cli_version(); rc = EXIT_CLEAN; break;
        case CLI_OPT_FORMAT:
            if (cli_format(cmd, optarg, &json)) rc = EXIT_USAGE;
            o->format = json ? DIAG_FMT_JSON : DIAG_FMT_HUMAN;
            break;
        case CLI_OPT_COLOR: if (cli_colour(cmd, optarg, &o->colour)) rc = EXIT_USAGE; break;
        case 'o':
            if (sub == SUB_CHECK) return options_error(o, sub, "%s", "check writes nothing; -o is for compiling");
            if (sub != SUB_COMPILE) return options_error(o, sub, "%s", "-o/--output is for compiling (llmc PLAN -o DIR)");
            o->out_dir = optarg;
            break;
        case 'q': o->quiet = true; break;
        case OPT_SET: case OPT_SWEEP: {
            const char *opt = c == OPT_SET ? "--set" : "--sweep";
            if (sub == SUB_FMT) return options_error(o, sub, "%s prints the file as written; --set and --sweep are for llmc, check and explain", "fmt");
            if (c == OPT_SWEEP && sub != SUB_COMPILE)
                return options_error(o, sub, "--sweep compiles one output per point: llmc PLAN -o DIR --sweep %s", optarg);
            if (c == OPT_SWEEP && o->nsweeps == 2)
                return options_error(o, sub, "at most two --sweep (every pair is compiled); not '%s' too", optarg);
            if (cli_add_override(cmd, &o->sets, opt, optarg)) {
                free(o->files);
                free(o->sets.items);
                o->files = NULL;
                return EXIT_USAGE;
            }
            if (c == OPT_SWEEP) o->nsweeps++;   /* compile_sweep takes its points apart */
            break;
        }
        case OPT_CHECK: case 'w':
            if (sub != SUB_FMT) return options_error(o, sub, "'%s' is an option of llmc fmt", c == 'w' ? "-w" : "--check");
            if (c == 'w') o->fmt_write = true;
            else o->fmt_check = true;
            break;
        default: rc = cli_getopt_error(cmd, c, argv); break;
        }
        if (rc >= 0) {
            free(o->files);
            free(o->sets.items);
            o->files = NULL;
            return rc;
        }
    }
    /* getopt_long (GNU) moves the operands after the options, so files and options mix in any order */
    for (int i = optind; i < argc; i++) o->files[o->nfiles++] = argv[i];
    if (o->out_dir && !o->out_dir[0]) return options_error(o, sub, "%s", "empty output directory (-o '')");
    return -1;
}

/* A usage error after parse_options allocated: frees what it holds, prints the message, returns 2. */
static int options_error(Options *o, Sub sub, const char *fmt, const char *arg)
{
    free(o->sets.items);
    o->sets.items = NULL;
    free(o->files);
    o->files = NULL;
    return cli_usage_error(sub_name[sub], fmt, arg);
}

/* Print every diagnostic at once, sorted into source order by diags_render;
 * JSON goes to stdout (a tool reads it), text to stderr.
 * Returns 1 when there was an error, else 0; frees D. */
static int finish(Diags *d, const Options *o)
{
    if (o->quiet) diags_drop_notes(d);
    diags_render(d, o->format == DIAG_FMT_JSON ? stdout : stderr, o->format, o->colour);
    int rc = EXIT_CLEAN;
    if (diags_error_count(d)) rc = EXIT_PLAN;
    diags_free(d);
    return rc;
}

/* Where a job's prepared shards are when the output is out_dir (plan.json's
 * data.shards_dir, "shards" beside it): OUT/shards, or OUT/JOB/shards for a
 * plan of several jobs. NULL without out_dir. malloc'd. */
static char *shards_dir_of(const char *out_dir, const Plan *plan, const PlanJob *job)
{
    if (!out_dir) return NULL;
    size_t n = strlen(out_dir) + strlen(job->name) + 16;
    char *p = xmalloc(n);
    if (plan->njobs > 1) snprintf(p, n, "%s/%s/shards", out_dir, job->name);
    else snprintf(p, n, "%s/shards", out_dir);
    return p;
}

/* Front end, then estimator and cross-file lints; the plan is kept for emitting. NULL (and *io_error) when
 * PATH cannot be read; otherwise the plan, with its diagnostics in D. The estimates (one per job, *ests_out,
 * malloc'd) exist only for a plan without errors; OUT_DIR, when compiling, locates the jobs' shards. */
static Plan *check_one(const char *path, const CliOverrides *sets, const char *out_dir, Diags *d, Estimate **ests_out,
                       bool *io_error)
{
    Plan *plan = frontend_load_overrides(path, sets->items, sets->n, d);
    if (!plan) {
        *io_error = true;
        return NULL;
    }
    /* estimates only for a plan without errors: they read the checked values */
    if (diags_error_count(d)) return plan;
    Estimate *ests = xcalloc((size_t)plan->njobs + 1, sizeof(Estimate));
    for (int i = 0; i < plan->njobs; i++) {
        char *shards = shards_dir_of(out_dir, plan, plan->jobs[i]);
        cli_estimate_job(plan->jobs[i], shards, &ests[i], d);
        free(shards);
    }
    emit_check(plan, d);
    emit_check_estimated(plan, ests, d);
    if (ests_out) *ests_out = ests;
    else free(ests);
    return plan;
}

/* llmc check PLAN...: every file checked with the same --set values, nothing written. Exit 2 when a file
 * could not be read, else 1 on any error. */
static int cmd_check(int argc, char **argv)
{
    Options o = {0};
    int rc = parse_options(argc, argv, &o, SUB_CHECK);
    if (rc >= 0) return rc;   /* options freed by options_error */
    if (o.nfiles == 0) return options_error(&o, SUB_CHECK, "%s", "check needs at least one PLAN");
    /* every file is checked even after one fails: one run reports every error */
    Diags *d = diags_new();
    bool io_error = false;
    for (int i = 0; i < o.nfiles; i++) {
        int before = diags_error_count(d);
        Plan *plan = check_one(o.files[i], &o.sets, NULL, d, NULL, &io_error);
        if (plan && plan->njobs == 0 && diags_error_count(d) == before) {
            /* a library of blocks for `use` checks clean; compiling it is an error */
            SrcRange at = {{o.files[i], 1, 1}, {o.files[i], 1, 1}};
            diag_help(diag_note_at(d, at, "the plan has no job block: `llmc PLAN -o DIR` would have nothing to write"),
                      "a job block names what to run where: job NAME { run = TRAIN  cluster = CLUSTER  nodes = 1  time = 1 h }");
        }
        plan_free(plan);
    }
    free(o.files);
    free(o.sets.items);
    rc = finish(d, &o);
    return io_error ? EXIT_USAGE : rc;
}

/* ---- --sweep: one output per point ---- */

/* The most points one sweep compiles (each is a whole compile). */
#define SWEEP_MAX_POINTS 64
/* The longest name of a point's directory. */
#define SWEEP_MAX_LABEL 200

/* One --sweep: its key and its values, parsed by sweep_axis. */
typedef struct {
    const char *key;     /* "train.batch" (into the spec, keylen bytes) */
    int keylen;
    char **values;       /* each trimmed, malloc'd */
    int n;
} SweepAxis;

/* "train.batch=1,4,8" -> the key and its values, split at the commas outside
 * strings and brackets ("[a, b]" is one value). 0, or 2 after the message. */
static int sweep_axis(const char *spec, SweepAxis *ax)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec)
        return cli_usage_error("llmc", "--sweep %s: expected BLOCK.KEY=V1,V2,...", spec);
    ax->key = spec;
    ax->keylen = (int)(eq - spec);
    const char *p = eq + 1;
    for (;;) {
        int depth = 0;
        bool quoted = false;
        const char *q = p;
        for (; *q && (quoted || depth > 0 || *q != ','); q++) {
            if (quoted && *q == '\\' && q[1]) q++;
            else if (*q == '"') quoted = !quoted;
            else if (!quoted && *q == '[') depth++;
            else if (!quoted && *q == ']' && depth > 0) depth--;
        }
        const char *a = p, *b = q;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
        if (a == b)
            return cli_usage_error("llmc", "--sweep %s: an empty value (values are separated by single commas)", spec);
        ax->values = xrealloc(ax->values, sizeof(char *) * (size_t)(ax->n + 1));
        char *v = xmalloc((size_t)(b - a) + 1);
        memcpy(v, a, (size_t)(b - a));
        v[b - a] = 0;
        ax->values[ax->n++] = v;
        if (!*q) break;
        p = q + 1;
    }
    return 0;
}

/* "KEY=VALUE" of an axis as a directory name: the key's last name, the value
 * with every byte but letters, digits and ._+- as '_'. */
static void sweep_label(char *out, size_t cap, const SweepAxis *ax, int vi)
{
    const char *last = ax->key;
    for (int i = 0; i < ax->keylen; i++)
        if (ax->key[i] == '.') last = ax->key + i + 1;
    size_t o = strlen(out);
    o += (size_t)snprintf(out + o, cap > o ? cap - o : 0, "%s%.*s=", o ? "," : "",
                          (int)(ax->keylen - (last - ax->key)), last);
    /* cut at CAP; compile_sweep then refuses a label longer than SWEEP_MAX_LABEL, so nothing is cut silently */
    for (const char *v = ax->values[vi]; *v && o + 1 < cap; v++) {
        char ch = *v;
        bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '.' || ch == '_' || ch == '+' || ch == '-';
        out[o++] = keep ? ch : '_';
        out[o] = 0;
    }
}

typedef struct {
    /* LABEL: "KEY=V[,KEY2=V2]", the point's directory name; checked against SWEEP_MAX_LABEL after it is built */
    char label[SWEEP_MAX_LABEL + 64];
    char *dir;
    char *args[2];           /* "train.batch=4": the point's --sweep overrides */
    int errors;
    bool estimated, written, io_error;
    int njobs;
    const char **jobs;       /* names (malloc'd) */
    Estimate *ests;
} SweepPoint;

/* One row of the table, each column padded to W; the last column (the output) unpadded. */
static void sweep_row(FILE *out, const char *const cell[7], const int w[7])
{
    for (int c = 0; c < 6; c++) fprintf(out, "%-*s  ", w[c], cell[c]);
    fprintf(out, "%s\n", cell[6]);
}

/* The summary: one row per point and job. */
static void sweep_table(FILE *out, SweepPoint *pts, int npts)
{
    static const char *const head[7] = {"point", "job", "memory/device", "fits", "time to train", "tokens/s",
                                        "output"};
    int nrows = 1;
    for (int i = 0; i < npts; i++) nrows += pts[i].njobs ? pts[i].njobs : 1;
    char (*cells)[7][SWEEP_MAX_LABEL + 96] = xcalloc((size_t)nrows, sizeof *cells);
    for (int c = 0; c < 7; c++) snprintf(cells[0][c], sizeof cells[0][c], "%s", head[c]);
    int r = 1;
    for (int i = 0; i < npts; i++) {
        const SweepPoint *p = &pts[i];
        for (int j = 0; j < (p->njobs ? p->njobs : 1); j++, r++) {
            char (*row)[SWEEP_MAX_LABEL + 96] = cells[r];
            snprintf(row[0], sizeof row[0], "%s", p->label);
            snprintf(row[1], sizeof row[1], "%s", p->njobs ? p->jobs[j] : "-");
            const Estimate *e = p->estimated && p->njobs ? &p->ests[j] : NULL;
            if (e && e->usable_bytes > 0)
                snprintf(row[2], sizeof row[2], "%.1f of %.1f GiB", e->total_bytes / 1073741824.0,
                         e->usable_bytes / 1073741824.0);
            else if (e) snprintf(row[2], sizeof row[2], "%.1f GiB", e->total_bytes / 1073741824.0);
            else snprintf(row[2], sizeof row[2], "-");
            snprintf(row[3], sizeof row[3], "%s", !e ? "-" : e->fits && e->host_fits ? "yes" : "no");
            if (e && e->total_seconds > 0) cli_fmt_duration(row[4], sizeof row[4], e->total_seconds);
            else snprintf(row[4], sizeof row[4], "-");
            if (e && e->tokens_per_second > 0) cli_fmt_count(row[5], sizeof row[5], e->tokens_per_second);
            else snprintf(row[5], sizeof row[5], "-");
            if (p->written) snprintf(row[6], sizeof row[6], "%s", p->dir);
            else if (p->io_error) snprintf(row[6], sizeof row[6], "not written (I/O error)");
            else snprintf(row[6], sizeof row[6], "not written (%d error%s)", p->errors, p->errors == 1 ? "" : "s");
        }
    }
    int w[7] = {0};
    for (int i = 0; i < nrows; i++)
        /* a cell may echo a value from the command line: escaped before its width is measured */
        for (int c = 0; c < 7; c++) {
            char *clean = diag_escape(cells[i][c]);
            snprintf(cells[i][c], sizeof cells[i][c], "%s", clean);
            free(clean);
            int len = (int)strlen(cells[i][c]);
            if (len > w[c]) w[c] = len;
        }
    for (int i = 0; i < nrows; i++) {
        const char *cell[7];
        for (int c = 0; c < 7; c++) cell[c] = cells[i][c];
        sweep_row(out, cell, w);
    }
    free(cells);
}

/* llmc PLAN -o DIR --sweep K=V1,V2 [--sweep K2=...]: every point compiled like
 * `llmc PLAN -o DIR/K=V --set K=V`, its diagnostics under its name, then the
 * table (or, with --format json, one object on stdout). Exit 1 if a point has
 * errors, 2 on an I/O error. */
static int compile_sweep(Options *o)
{
    SweepAxis ax[2] = {{0}};
    int nax = 0, rc = EXIT_CLEAN;
    /* BASE: the --set values, with room for the (at most two) sweep values of a point appended after them */
    CliOverrides base = {xcalloc((size_t)o->sets.n + 2, sizeof(PlanOverride)), 0};
    for (int i = 0; i < o->sets.n; i++) {
        const PlanOverride *ov = &o->sets.items[i];
        if (strcmp(ov->option, "--sweep") != 0) {
            /* --set values apply to every point; the sweep values are added per point below */
            base.items[base.n++] = *ov;   /* room for two sweep values after them */
        } else if (sweep_axis(ov->arg, &ax[nax++])) {
            rc = EXIT_USAGE;
        }
    }
    /* two axes: every pair (the grid); one axis: its values */
    int npts = rc ? 0 : nax == 2 ? ax[0].n * ax[1].n : ax[0].n;
    /* each point is a whole compile and an output directory: the grid is capped */
    if (!rc && npts > SWEEP_MAX_POINTS) rc = cli_usage_error("llmc", "--sweep: %d points; at most %d", npts, SWEEP_MAX_POINTS);
    SweepPoint *pts = xcalloc((size_t)(rc ? 1 : npts), sizeof(SweepPoint));
    for (int i = 0; !rc && i < npts; i++) {
        /* point i of the grid: the first axis varies slowest */
        int vi[2] = {nax == 2 ? i / ax[1].n : i, nax == 2 ? i % ax[1].n : 0};
        for (int k = 0; k < nax; k++) {
            sweep_label(pts[i].label, sizeof pts[i].label, &ax[k], vi[k]);
            size_t n = (size_t)ax[k].keylen + strlen(ax[k].values[vi[k]]) + 2;
            pts[i].args[k] = xmalloc(n);
            snprintf(pts[i].args[k], n, "%.*s=%s", ax[k].keylen, ax[k].key, ax[k].values[vi[k]]);
        }
        if (strlen(pts[i].label) > SWEEP_MAX_LABEL)
            rc = cli_usage_error("llmc", "--sweep: the point '%.40s...' makes a directory name longer than %d bytes",
                                 pts[i].label, SWEEP_MAX_LABEL);
        /* two points with one directory name would overwrite each other's output */
        for (int j = 0; !rc && j < i; j++)
            if (strcmp(pts[i].label, pts[j].label) == 0)
                rc = cli_usage_error("llmc", "--sweep: two points are both '%s' (a value given twice, or values that differ only in characters a directory name cannot keep)", pts[i].label);
    }
    /* the parent of the points' directories; each point's own is made by emit_outputs */
    if (!rc && mkdir(o->out_dir, 0777) != 0 && errno != EEXIST) {
        char *clean = diag_escape(o->out_dir);
        fprintf(stderr, "llmc: error: cannot create '%s': %s\n", clean, strerror(errno));
        free(clean);
        rc = EXIT_USAGE;
    }
    cJSON *json = !rc && o->format == DIAG_FMT_JSON ? cJSON_CreateArray() : NULL;
    bool any_errors = false, any_io = false;
    for (int i = 0; !rc && i < npts; i++) {
        SweepPoint *p = &pts[i];
        size_t n = strlen(o->out_dir) + strlen(p->label) + 2;
        p->dir = xmalloc(n);
        snprintf(p->dir, n, "%s/%s", o->out_dir, p->label);
        CliOverrides sets = base;
        for (int k = 0; k < nax; k++) sets.items[sets.n++] = (PlanOverride){"--sweep", p->args[k]};
        Diags *d = diags_new();
        Estimate *ests = NULL;
        /* each point is checked and estimated on its own, with its own diagnostics */
        Plan *plan = check_one(o->files[0], &sets, p->dir, d, &ests, &p->io_error);
        if (plan && !diags_error_count(d) && plan->njobs == 0) {
            SrcRange at = {{o->files[0], 1, 1}, {o->files[0], 1, 1}};
            diag_error(d, at, "nothing to compile: the plan has no job block");
        }
        if (plan && ests) {
            p->estimated = true;
            p->jobs = xcalloc((size_t)plan->njobs + 1, sizeof(char *));
            p->ests = xcalloc((size_t)plan->njobs + 1, sizeof(Estimate));
            for (int j = 0; j < plan->njobs; j++) {
                /* only the jobs that train (a run and a cluster) have a row: a merge job has no such estimate */
                if (!plan->jobs[j]->run || !plan->jobs[j]->cluster) continue;
                p->jobs[p->njobs] = xstrdup(plan->jobs[j]->name);
                p->ests[p->njobs++] = ests[j];
            }
        }
        if (plan && !diags_error_count(d)) {
            if (emit_outputs(plan, ests, p->dir, d) == 0) p->written = true;
            else p->io_error = true;
        }
        free(ests);
        plan_free(plan);
        if (o->quiet) diags_drop_notes(d);
        p->errors = diags_error_count(d);
        if (json) {
            cJSON *pt = cJSON_CreateObject();
            cJSON_AddStringToObject(pt, "point", p->label);
            cJSON *vals = cJSON_AddObjectToObject(pt, "values");
            for (int k = 0; k < nax; k++) {
                char key[256];
                snprintf(key, sizeof key, "%.*s", ax[k].keylen, ax[k].key);
                cJSON_AddStringToObject(vals, key, strchr(p->args[k], '=') + 1);
            }
            if (p->written) cJSON_AddStringToObject(pt, "output", p->dir);
            else cJSON_AddNullToObject(pt, "output");
            cJSON *jobs = cJSON_AddArrayToObject(pt, "jobs");
            for (int j = 0; j < p->njobs; j++) {
                cJSON *jo = cJSON_CreateObject();
                cJSON_AddStringToObject(jo, "job", p->jobs[j]);
                cJSON_AddItemToObject(jo, "estimate", estimate_to_json(&p->ests[j]));
                cJSON_AddItemToArray(jobs, jo);
            }
            cJSON_AddItemToObject(pt, "diagnostics", cli_diagnostics_json(d));
            cJSON_AddItemToArray(json, pt);
            /* each point's diagnostics under its name, so a reader knows which value caused them */
        } else if (diags_error_count(d) + diags_warning_count(d) + diags_note_count(d) > 0) {
            char *clean = diag_escape(p->label);
            fprintf(stderr, "llmc: sweep point %s:\n", clean);
            free(clean);
            diags_render(d, stderr, DIAG_FMT_HUMAN, o->colour);
        }
        diags_free(d);
        any_errors |= p->errors > 0;
        any_io |= p->io_error;
    }
    fflush(stderr);
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "points", json);
        char *text = cJSON_Print(root);
        if (text) printf("%s\n", text);
        free(text);
        cJSON_Delete(root);
    } else if (!rc) {
        sweep_table(stdout, pts, npts);
    }
    for (int i = 0; i < (rc ? 0 : npts); i++) {
        for (int j = 0; j < pts[i].njobs; j++) free((char *)pts[i].jobs[j]);
        free(pts[i].jobs);
        free(pts[i].ests);
        free(pts[i].dir);
    }
    for (int i = 0; i < npts; i++) free(pts[i].args[0]), free(pts[i].args[1]);
    for (int k = 0; k < nax; k++) {
        for (int v = 0; v < ax[k].n; v++) free(ax[k].values[v]);
        free(ax[k].values);
    }
    free(pts);
    free(base.items);
    free(o->files);
    free(o->sets.items);
    if (rc) return rc;
    return any_io ? EXIT_USAGE : any_errors ? EXIT_PLAN : EXIT_CLEAN;
}

/* llmc PLAN -o DIR: check, estimate, and write DIR only when the plan is clean (or one DIR per --sweep point).
 * Exit 0 written, 1 errors in the plan, 2 when reading or writing failed. */
static int cmd_compile(int argc, char **argv)
{
    Options o = {0};
    int rc = parse_options(argc, argv, &o, SUB_COMPILE);
    if (rc >= 0) return rc;   /* options freed by options_error */
    if (o.nfiles != 1) return options_error(&o, SUB_COMPILE, "%s", "compile takes exactly one PLAN (llmc PLAN -o DIR)");
    if (!o.out_dir) return options_error(&o, SUB_COMPILE, "%s", "compile needs an output directory: llmc PLAN -o DIR");
    if (o.nsweeps) return compile_sweep(&o);
    Diags *d = diags_new();
    bool io_error = false;
    Estimate *ests = NULL;
    Plan *plan = check_one(o.files[0], &o.sets, o.out_dir, d, &ests, &io_error);
    bool emitted = false, emit_failed = false;
    if (plan && !diags_error_count(d) && plan->njobs == 0) {
        SrcRange at = {{o.files[0], 1, 1}, {o.files[0], 1, 1}};
        diag_help(diag_error(d, at, "nothing to compile: the plan has no job block"),
                  "a job block names what to run where: job NAME { run = TRAIN  cluster = CLUSTER  nodes = 1  time = 1 h }");
    }
    /* nothing is written unless the whole plan is clean: a half-right output
     * directory is worse than none */
    if (plan && !diags_error_count(d)) {
        if (emit_outputs(plan, ests, o.out_dir, d) == 0) emitted = true;
        else emit_failed = true;   /* the plan was clean: writing failed, an I/O error */
    }
    free(ests);
    free(o.files);
    free(o.sets.items);
    rc = finish(d, &o);
    plan_free(plan);
    if (io_error || emit_failed) return EXIT_USAGE;
    if (rc == EXIT_CLEAN && !emitted) return EXIT_USAGE;   /* defensive: clean yet nothing written */
    return rc;
}

/* Every byte of text to fd (short writes and EINTR retried). */
static bool write_all(int fd, const char *text, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        done += (size_t)w;
    }
    return true;
}

/* Rewrite a file with several hard links in place (truncate, write, fsync), as
 * gofmt -w does: a rename would give this name a new inode and leave the other
 * names with the old text. Not atomic: the price of keeping the links. */
static bool write_in_place(const char *target, const char *text, size_t len)
{
    int fd = open(target, O_WRONLY | O_TRUNC | O_CLOEXEC);
    bool ok = fd >= 0 && write_all(fd, text, len);
    if (ok && fsync(fd) != 0) ok = false;
    if (fd >= 0 && close(fd) != 0) ok = false;
    return ok;
}

/* Replace the contents of the file path names, atomically: a temporary file
 * beside the real file (a symbolic link is followed, and stays a link), with
 * the file's mode and, where allowed, its owner; fsync; rename over it. A
 * read-only file is refused (even for root, who could write it), and a file
 * with several hard links is rewritten in place. */
static bool write_atomic(const char *path, const char *text, size_t len)
{
    char *target = realpath(path, NULL);
    struct stat st;
    /* the link's target is replaced, so the link itself stays a link */
    if (!target || stat(target, &st) != 0) {
        char *clean = diag_escape(path);
        fprintf(stderr, "llmc: error: cannot write '%s': %s\n", clean, strerror(errno));
        free(clean);
        free(target);
        return false;
    }
    /* read-only: refused; several names: rewritten in place so every name sees the new text */
    if (!(st.st_mode & 0222) || st.st_nlink > 1) {
        bool ro = !(st.st_mode & 0222);
        bool ok = !ro && write_in_place(target, text, len);
        if (!ok) {
            char *clean = diag_escape(path);
            if (ro)
                fprintf(stderr, "llmc: error: '%s' is read-only (mode %04o): not rewritten (make it writable first)\n",
                        clean, (unsigned)(st.st_mode & 07777));
            else
                fprintf(stderr, "llmc: error: cannot write '%s': %s\n", clean, strerror(errno));
            free(clean);
        }
        free(target);
        return ok;
    }
    size_t n = strlen(target) + 32;
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.llmc-fmt.XXXXXX", target);
    int fd = mkstemp(tmp);   /* a unique name: two fmt -w of one file cannot collide */
    bool ok = fd >= 0 && write_all(fd, text, len);
    /* the new file takes the old one's owner (when allowed) and mode: a rewrite changes only the text */
    if (ok && fchown(fd, st.st_uid, st.st_gid) != 0) { /* not ours to give away: keep ours */ }
    if (ok && fchmod(fd, st.st_mode & 07777) != 0) ok = false;
    if (ok && fsync(fd) != 0) ok = false;
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (ok && rename(tmp, target) != 0) ok = false;
    if (!ok) {
        int e = errno;
        char *clean = diag_escape(path);
        fprintf(stderr, "llmc: error: cannot write '%s': %s\n", clean, strerror(e));
        free(clean);
        if (fd >= 0) unlink(tmp);
    }
    free(tmp);
    free(target);
    return ok;
}

/* llmc fmt: a plan with syntax errors is not formatted (1); its diagnostics are shown. Without -w or --check
 * the one file is printed to stdout. */
static int cmd_fmt(int argc, char **argv)
{
    Options o = {0};
    int rc = parse_options(argc, argv, &o, SUB_FMT);
    if (rc >= 0) return rc;   /* options freed by options_error */
    if (o.nfiles == 0) return options_error(&o, SUB_FMT, "%s", "fmt needs at least one PLAN");
    if (o.fmt_check && o.fmt_write) return options_error(&o, SUB_FMT, "%s", "--check and -w exclude each other");
    if (!o.fmt_check && !o.fmt_write && o.nfiles > 1)
        return options_error(&o, SUB_FMT, "%s", "fmt prints one file; use -w or --check for several");
    Diags *d = diags_new();
    Arena *a = arena_new();
    int status = EXIT_CLEAN;
    for (int i = 0; i < o.nfiles; i++) {
        int before = diags_error_count(d);
        SourceFile *sf = frontend_parse_file(o.files[i], a, d);
        if (!sf) { status = EXIT_USAGE; continue; }
        /* a file with syntax errors is not formatted: the output would lose what the parser skipped */
        if (diags_error_count(d) > before) { if (status == EXIT_CLEAN) status = EXIT_PLAN; continue; }
        size_t len;
        char *text = fmt_source(sf, &len);
        /* unchanged files are not rewritten: their mtime stays (editors and build tools see no change) */
        bool same = len == sf->len && memcmp(text, sf->text, len) == 0;
        if (o.fmt_check) {
            if (!same) {
                char *clean = diag_escape(o.files[i]);
                printf("%s\n", clean);
                free(clean);
                if (status == EXIT_CLEAN) status = EXIT_PLAN;
            }
        } else if (o.fmt_write) {
            if (!same && !write_atomic(o.files[i], text, len)) status = EXIT_USAGE;
        } else {
            fwrite(text, 1, len, stdout);
        }
        free(text);
    }
    arena_free(a);
    free(o.files);
    free(o.sets.items);
    int drc = finish(d, &o);
    return status != EXIT_CLEAN ? status : drc;
}

/* The subcommand is argv[1]; each gets argv from its own name on, so its getopt sees it as argv[0]. */
int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return EXIT_CLEAN;
    }
    if (strcmp(cmd, "--version") == 0) {
        cli_version();
        return EXIT_CLEAN;
    }
    /* a first word that is no subcommand is a plan to compile */
    /* plain string compares: a plan file named like a subcommand is given as ./check */
    if (strcmp(cmd, "check") == 0) return cmd_check(argc - 1, argv + 1);
    if (strcmp(cmd, "fmt") == 0) return cmd_fmt(argc - 1, argv + 1);
    if (strcmp(cmd, "explain") == 0) return explain_main(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0) return status_main(argc - 1, argv + 1);
    if (strcmp(cmd, "submit") == 0) return submit_main(argc - 1, argv + 1);
    if (strcmp(cmd, "cancel") == 0) return cancel_main(argc - 1, argv + 1);
    if (strcmp(cmd, "logs") == 0) return logs_main(argc - 1, argv + 1);
    if (strcmp(cmd, "init-model") == 0) return init_model_main(argc - 1, argv + 1);
    if (strcmp(cmd, "calibrate") == 0) return calibrate_main(argc - 1, argv + 1);
    return cmd_compile(argc, argv);   /* llmc PLAN -o DIR: argv[0] is the program */
}
