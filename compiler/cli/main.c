/* main.c — the llmc command line: compile, check, fmt, explain. */
#include "cli.h"
#include "emit.h"
#include "estimate.h"
#include "fmt.h"
#include "frontend.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    "       llmc status OUT_DIR         a submitted run: Slurm, progress, estimate vs measured\n"
    "       llmc init-model DIR [NAME]  the model block for a Hugging Face model directory\n"
    "       llmc calibrate RUN... [-o PROFILE.llm]  a site profile from measured runs\n"
    "       llmc --help | --version     (every command takes --help)\n"
    "\n"
    "options (--opt=VALUE or --opt VALUE):\n"
    "  -o DIR, --output DIR     output directory (compile)\n"
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
    "usage: llmc check [-q] [--format human|json] [--color auto|always|never] PLAN...\n"
    "Check each plan (syntax, types, references, estimates, cross-file rules) and write\n"
    "nothing. Every error of every file, in source order.\n"
    "  -q, --quiet  no notes; errors and warnings still shown\n"
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

typedef struct Options {
    DiagFormat format;
    int colour;
    const char *out_dir;
    bool fmt_check, fmt_write;
    bool quiet;   /* -q: notes not printed */
    const char **files;
    int nfiles;
} Options;

static int options_error(struct Options *o, Sub sub, const char *fmt, const char *arg);

enum { OPT_CHECK = CLI_OPT_FIRST_FREE };

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
        {NULL, 0, NULL, 0},
    };
    const char *cmd = sub_name[sub];
    o->format = DIAG_FMT_HUMAN;
    o->colour = -1;   /* auto: colour only on a terminal, and not under NO_COLOR */
    o->files = xcalloc((size_t)argc + 1, sizeof(char *));
    optind = 1;
    opterr = 0;
    int c;
    bool json = false;
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
        case OPT_CHECK: case 'w':
            if (sub != SUB_FMT) return options_error(o, sub, "'%s' is an option of llmc fmt", c == 'w' ? "-w" : "--check");
            if (c == 'w') o->fmt_write = true;
            else o->fmt_check = true;
            break;
        default: rc = cli_getopt_error(cmd, c, argv); break;
        }
        if (rc >= 0) {
            free(o->files);
            o->files = NULL;
            return rc;
        }
    }
    for (int i = optind; i < argc; i++) o->files[o->nfiles++] = argv[i];
    if (o->out_dir && !o->out_dir[0]) return options_error(o, sub, "%s", "empty output directory (-o '')");
    return -1;
}

static int options_error(Options *o, Sub sub, const char *fmt, const char *arg)
{
    free(o->files);
    o->files = NULL;
    return cli_usage_error(sub_name[sub], fmt, arg);
}

/* Print every diagnostic at once, sorted into source order by diags_render;
 * JSON goes to stdout (a tool reads it), text to stderr. */
static int finish(Diags *d, const Options *o)
{
    if (o->quiet) diags_drop_notes(d);
    diags_render(d, o->format == DIAG_FMT_JSON ? stdout : stderr, o->format, o->colour);
    int rc = EXIT_CLEAN;
    if (diags_error_count(d)) rc = EXIT_PLAN;
    diags_free(d);
    return rc;
}

/* Front end, then estimator and cross-file lints; the plan is kept for emitting. */
static Plan *check_one(const char *path, Diags *d, Estimate **ests_out, bool *io_error)
{
    Plan *plan = frontend_load(path, d);
    if (!plan) {
        *io_error = true;
        return NULL;
    }
    /* estimates only for a plan without errors: they read the checked values */
    if (diags_error_count(d)) return plan;
    Estimate *ests = xcalloc((size_t)plan->njobs + 1, sizeof(Estimate));
    for (int i = 0; i < plan->njobs; i++) estimate_job(plan->jobs[i], &ests[i], d);
    emit_check(plan, d);
    emit_check_estimated(plan, ests, d);
    if (ests_out) *ests_out = ests;
    else free(ests);
    return plan;
}

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
        Plan *plan = check_one(o.files[i], d, NULL, &io_error);
        if (plan && plan->njobs == 0 && diags_error_count(d) == before) {
            /* a library of blocks for `use` checks clean; compiling it is an error */
            SrcRange at = {{o.files[i], 1, 1}, {o.files[i], 1, 1}};
            diag_help(diag_note_at(d, at, "the plan has no job block: `llmc PLAN -o DIR` would have nothing to write"),
                      "a job block names what to run where: job NAME { run = TRAIN  cluster = CLUSTER  nodes = 1  time = 1 h }");
        }
        plan_free(plan);
    }
    free(o.files);
    rc = finish(d, &o);
    return io_error ? EXIT_USAGE : rc;
}

static int cmd_compile(int argc, char **argv)
{
    Options o = {0};
    int rc = parse_options(argc, argv, &o, SUB_COMPILE);
    if (rc >= 0) return rc;   /* options freed by options_error */
    if (o.nfiles != 1) return options_error(&o, SUB_COMPILE, "%s", "compile takes exactly one PLAN (llmc PLAN -o DIR)");
    if (!o.out_dir) return options_error(&o, SUB_COMPILE, "%s", "compile needs an output directory: llmc PLAN -o DIR");
    Diags *d = diags_new();
    bool io_error = false;
    Estimate *ests = NULL;
    Plan *plan = check_one(o.files[0], d, &ests, &io_error);
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
    rc = finish(d, &o);
    plan_free(plan);
    if (io_error || emit_failed) return EXIT_USAGE;
    if (rc == EXIT_CLEAN && !emitted) return EXIT_USAGE;   /* defensive: clean yet nothing written */
    return rc;
}

/* Replace the contents of the file path names, atomically: a temporary file
 * beside the real file (a symbolic link is followed, and stays a link), with
 * the file's mode and, where allowed, its owner; fsync; rename over it. */
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
    size_t n = strlen(target) + 32;
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.llmc-fmt.XXXXXX", target);
    int fd = mkstemp(tmp);   /* a unique name: two fmt -w of one file cannot collide */
    bool ok = fd >= 0;
    size_t done = 0;
    while (ok && done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = false;
        else done += (size_t)w;
    }
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
    int drc = finish(d, &o);
    return status != EXIT_CLEAN ? status : drc;
}

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
    if (strcmp(cmd, "check") == 0) return cmd_check(argc - 1, argv + 1);
    if (strcmp(cmd, "fmt") == 0) return cmd_fmt(argc - 1, argv + 1);
    if (strcmp(cmd, "explain") == 0) return explain_main(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0) return status_main(argc - 1, argv + 1);
    if (strcmp(cmd, "init-model") == 0) return init_model_main(argc - 1, argv + 1);
    if (strcmp(cmd, "calibrate") == 0) return calibrate_main(argc - 1, argv + 1);
    return cmd_compile(argc, argv);   /* llmc PLAN -o DIR: argv[0] is the program */
}
