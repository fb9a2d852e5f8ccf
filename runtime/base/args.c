/* args.c — llmc-train's command-line conventions; see args.h. */
#include "args.h"
#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Not a log.h line: a usage error comes before any rank exists and is read
 * at a terminal, so it is the conventional "PROG: error: ..." with the hint
 * (docs/runtime.md, "Errors"). */
int args_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024], shown[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* an argument may hold control characters */
    fprintf(stderr, "%s: error: %s\ntry '%s --help'\n", cmd, log_escape(shown, sizeof shown, msg, strlen(msg)), cmd);
    return 2;
}

int args_getopt_error(const char *cmd, int c, char **argv)
{
    /* the argument getopt stopped at: "--frobnicate", "--tokenizer" or "-x" */
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    char shortopt[3] = {'-', (char)optopt, 0};
    /* a short option may sit inside a cluster ("-xv"): name the letter itself */
    if (optopt && strncmp(arg, "--", 2) != 0) arg = shortopt;
    if (c == ':') return args_usage_error(cmd, "option '%s' needs a value", arg);
    return args_usage_error(cmd, "unknown option '%s'", arg);
}

int args_int(const char *cmd, const char *opt, const char *value, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);   /* base 10: "010" is ten, not eight */
    /* the whole value must be the number: "12x" and "" are refused, as is overflow (errno) */
    if (errno || end == value || *end || v < lo || v > hi)
        return args_usage_error(cmd, "%s: bad integer '%s' (%lld to %lld)", opt, value, lo, hi);
    *out = v;
    return 0;
}

int args_double(const char *cmd, const char *opt, const char *value, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || !isfinite(v) || v < lo || v > hi)   /* "nan" and "inf" parse: refused */
        return args_usage_error(cmd, "%s: bad number '%s' (%g to %g)", opt, value, lo, hi);
    *out = v;
    return 0;
}

int args_one_operand(const char *cmd, const char *usage, int argc, char **argv, const char **operand)
{
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') { fputs(usage, stdout); return 0; }
        return args_getopt_error(cmd, c, argv);
    }
    if (optind == argc) { fputs(usage, stderr); return 2; }   /* no operand: the usage is the message */
    if (argc - optind > 1) return args_usage_error(cmd, "one operand, not '%s' too", argv[optind + 1]);
    *operand = argv[optind];
    return -1;
}
