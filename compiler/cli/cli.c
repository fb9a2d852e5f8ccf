/* cli.c — llmc's command-line conventions; see cli.h. */
#include "cli.h"
#include "run_formats.h"   /* contract/: index.json's name and keys */
#include "diag.h"
#include "arena.h"
#include "estimate.h"

#include <math.h>

#include <getopt.h>
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llmc's version, printed by --version (llmc-train has its own: runtime/base/args.h). */
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
    /* a short option inside a cluster ("-qx") is named by its letter alone */
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

/* One decimal with K, M, B or T, as token and parameter counts are usually written. */
void cli_fmt_count(char *buf, size_t n, double v)
{
    if (v < 1e3) snprintf(buf, n, "%.0f", v);
    else if (v < 1e6) snprintf(buf, n, "%.1fK", v / 1e3);
    else if (v < 1e9) snprintf(buf, n, "%.1fM", v / 1e6);
    else if (v < 1e12) snprintf(buf, n, "%.1fB", v / 1e9);
    else snprintf(buf, n, "%.1fT", v / 1e12);
}

/* Each unit is kept up to twice the next one (120 s, 2 h, 72 h), so "90 s" is not "1.5 min". */
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
    /* the same key from --set and --sweep is refused too: which value wins would be a guess */
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
    /* notes alone are not reported: an empty array when there is no error or warning */
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

/* DIR/index.json's n_rows, n_tokens, context and packing. false when absent or not an index. */
static bool read_index(const char *dir, double *rows, double *tokens, double *context, int *packing)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/" SHARD_INDEX_FILE, dir) >= sizeof path) return false;
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    /* index.json is a few hundred bytes; one past 4 MiB is cut, fails to parse and counts as absent */
    char *buf = xmalloc(1 << 22);
    size_t n = fread(buf, 1, (1 << 22) - 1, fp);
    fclose(fp);
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_N_ROWS]),
                *t = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_N_TOKENS]);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_CONTEXT]),
                *p = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_PACKING]);
    bool ok = cJSON_IsNumber(r) && r->valuedouble >= 1 && r->valuedouble < 1e15 && cJSON_IsNumber(t) &&
              t->valuedouble >= 0 && cJSON_IsNumber(c) && cJSON_IsBool(p);
    if (ok) {
        *rows = floor(r->valuedouble);
        *tokens = t->valuedouble;
        *context = c->valuedouble;
        *packing = cJSON_IsTrue(p);
    }
    cJSON_Delete(o);
    return ok;
}

/* The shards' rows are used only when they were prepared for this plan: the same context and packing, and the
 * same token count as the data's own stats; otherwise a warning says why and the steps come from the tokens. */
int cli_estimate_job(const PlanJob *job, const char *shards_dir, Estimate *e, Diags *d)
{
    double rows = 0, tokens = 0, context = 0;
    int packing = 0;
    if (!shards_dir || !job || !job->run || !read_index(shards_dir, &rows, &tokens, &context, &packing))
        return estimate_job(job, e, d);
    const PlanTrain *t = job->run;
    const char *why = NULL;
    char buf[256];
    if (context != t->context) {
        snprintf(buf, sizeof buf, "context %.0f, the plan's %d", context, t->context);
        why = buf;
    } else if (packing != (int)t->packing) {
        snprintf(buf, sizeof buf, "packing %s, the plan's %s", packing ? "true" : "false", t->packing ? "true" : "false");
        why = buf;
    } else {
        /* the tokens prepare counted beside the data must be the shards' (else they are another data's) */
        Diags *scratch = diags_new();
        Estimate probe;
        estimate_job(job, &probe, scratch);
        diags_free(scratch);
        if (probe.tokens_source <= TOKENS_FROM_STATS && fabs(probe.tokens_per_epoch - tokens) > 0.5) {
            snprintf(buf, sizeof buf, "%.0f tokens, the data's stats say %.0f (prepared from other data)", tokens,
                     probe.tokens_per_epoch);
            why = buf;
        }
    }
    if (why) {
        diag_help(diag_warning(d, job->at, "%s/index.json: %s: its rows are not used for the steps", shards_dir, why),
                  "`llmc-train prepare` of this plan's plan.json writes them for it");
        return estimate_job(job, e, d);
    }
    return estimate_job_rows(job, rows, e, d);
}
