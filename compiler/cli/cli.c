/* cli.c — llmc's command-line conventions; see cli.h. */
#include "cli.h"
#include "diag.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLMC_VERSION "0.1.0"

void cli_version(void) { puts("llmc " LLMC_VERSION); }

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *clean = diag_escape(msg);   /* an argument may hold control characters */
    fprintf(stderr, "%s: error: %s\ntry '%s --help'\n", cmd, clean, cmd);
    free(clean);
    return 2;
}

int cli_getopt_error(const char *cmd, int c, char **argv)
{
    /* the argument getopt stopped at: "--frobnicate", "--output" or "-x" */
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    char shortopt[3] = {'-', (char)optopt, 0};
    if (optopt && strncmp(arg, "--", 2) != 0) arg = shortopt;
    if (c == ':') return cli_usage_error(cmd, "option '%s' needs a value", arg);
    return cli_usage_error(cmd, "unknown option '%s'", arg);
}

int cli_format(const char *cmd, const char *value, bool *json)
{
    if (!strcmp(value, "json")) *json = true;
    else if (!strcmp(value, "human")) *json = false;
    else return cli_usage_error(cmd, "--format: '%s' is not one of human, json", value);
    return 0;
}

int cli_colour(const char *cmd, const char *value, int *colour)
{
    if (!strcmp(value, "always")) *colour = 1;
    else if (!strcmp(value, "never")) *colour = 0;
    else if (!strcmp(value, "auto")) *colour = -1;
    else return cli_usage_error(cmd, "--color: '%s' is not one of auto, always, never", value);
    return 0;
}
