/* cli.c — llmc's command-line conventions; see cli.h. */
#include "cli.h"
#include "diag.h"
#include "arena.h"

#include <getopt.h>
#include <cjson/cJSON.h>
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

void cli_fmt_count(char *buf, size_t n, double v)
{
    if (v < 1e3) snprintf(buf, n, "%.0f", v);
    else if (v < 1e6) snprintf(buf, n, "%.1fK", v / 1e3);
    else if (v < 1e9) snprintf(buf, n, "%.1fM", v / 1e6);
    else if (v < 1e12) snprintf(buf, n, "%.1fB", v / 1e9);
    else snprintf(buf, n, "%.1fT", v / 1e12);
}

void cli_fmt_duration(char *buf, size_t n, double sec)
{
    if (sec < 1) snprintf(buf, n, "%.0f ms", sec * 1000);
    else if (sec < 120) snprintf(buf, n, "%.1f s", sec);
    else if (sec < 2 * 3600) snprintf(buf, n, "%.1f min", sec / 60);
    else if (sec < 72 * 3600) snprintf(buf, n, "%.1f h", sec / 3600);
    else snprintf(buf, n, "%.1f d", sec / 86400);
}

/* The BLOCK.KEY of "BLOCK.KEY=VALUE" (all of arg without '='). */
static size_t key_len(const char *arg)
{
    const char *eq = strchr(arg, '=');
    return eq ? (size_t)(eq - arg) : strlen(arg);
}

int cli_add_override(const char *cmd, CliOverrides *o, const char *option, const char *arg)
{
    size_t k = key_len(arg);
    for (int i = 0; i < o->n; i++)
        if (key_len(o->items[i].arg) == k && strncmp(o->items[i].arg, arg, k) == 0)
            return cli_usage_error(cmd, "%s %.*s: the key is given twice (%s and %s)", option, (int)k, arg,
                                   o->items[i].option, option);
    o->items = xrealloc(o->items, sizeof(PlanOverride) * (size_t)(o->n + 1));
    o->items[o->n++] = (PlanOverride){option, arg};
    return 0;
}

/* The diagnostics as diags_render writes them in JSON, parsed back into a tree. */
cJSON *cli_diagnostics_json(Diags *d)
{
    if (diags_error_count(d) + diags_warning_count(d) == 0) return cJSON_CreateArray();
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return cJSON_CreateArray();
    diags_render(d, mem, DIAG_FMT_JSON, 0);
    fclose(mem);
    cJSON *arr = cJSON_Parse(text);
    free(text);
    return arr ? arr : cJSON_CreateArray();
}
