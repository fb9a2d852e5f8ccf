/* cli.h — what llmc's subcommands share on the command line (compiler/cli/cli.c):
 * getopt_long's failures named, and the values of --format and --color.
 *
 * Every subcommand parses with getopt_long, so both spellings work
 * (--output=DIR and --output DIR), options and files mix in any order, and
 * "--" ends the options. A bad option or value is reported as
 *     llmc check: error: --format: 'xml' is not one of human, json
 *     try 'llmc check --help'
 * and the subcommand exits 2. */
#ifndef LLMC_CLI_H
#define LLMC_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "estimate.h"
#include "frontend.h"

/* The long options every subcommand takes (val: the CLI_OPT_* codes). */
enum { CLI_OPT_FORMAT = 0x100, CLI_OPT_COLOR, CLI_OPT_VERSION, CLI_OPT_FIRST_FREE };
#define CLI_COMMON_OPTIONS                                              \
    {"format", required_argument, NULL, CLI_OPT_FORMAT},                \
    {"color", required_argument, NULL, CLI_OPT_COLOR},                  \
    {"colour", required_argument, NULL, CLI_OPT_COLOR},                 \
    {"help", no_argument, NULL, 'h'},                                   \
    {"version", no_argument, NULL, CLI_OPT_VERSION}

/* getopt_long returned '?' (unknown option) or ':' (a value missing): print
 * the message naming the option (cmd e.g. "llmc check"). Returns 2. */
int cli_getopt_error(const char *cmd, int c, char **argv);
/* A usage error of cmd: the message (printf-style), then the --help hint. Returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* --format VALUE: *json set; 0, or 2 after the message naming the value. */
int cli_format(const char *cmd, const char *value, bool *json);
/* --color VALUE: *colour 1 always, 0 never, -1 auto; 0, or 2 after the message. */
int cli_colour(const char *cmd, const char *value, int *colour);
/* 9.5e6 -> "9.5M"; seconds -> "850 ms", "12.5 s", "3.2 min", "5.0 h", "3.1 d". */
void cli_fmt_count(char *buf, size_t n, double v);
void cli_fmt_duration(char *buf, size_t n, double sec);
/* --set BLOCK.KEY=VALUE (repeatable; llmc, check, explain): the values from
 * the command line, in order (frontend.h: PlanOverride). */
typedef struct {
    PlanOverride *items;
    int n;
} CliOverrides;
/* Add one; a key given twice (by --set or --sweep) is a usage error: 2 after
 * the message, else 0. */
int cli_add_override(const char *cmd, CliOverrides *o, const char *option, const char *arg);
/* The diagnostics as diags_render writes them in JSON, as a tree (a new array). */
struct cJSON *cli_diagnostics_json(Diags *d);
/* estimate_job, with the rows of the job's prepared shards when shards_dir
 * (may be NULL) holds an index.json for the plan's context and packing whose
 * tokens are the data's (estimate_job_rows); one that does not fit is a warning
 * in d, and the steps are counted from the tokens. */
int cli_estimate_job(const PlanJob *job, const char *shards_dir, Estimate *e, Diags *d);
/* --version's line. */
void cli_version(void);

#endif
