/* args.h — llmc-train's command-line conventions (runtime/base/args.c).
 *
 * Every subcommand parses with getopt_long: --opt=VALUE and --opt VALUE both
 * work, options and operands mix, "--" ends the options, --help prints the
 * subcommand's usage on stdout and exits 0. A bad option or value is named:
 *     llmc-train run: error: --stop-after: 'abc' is not an integer (0 to 9223372036854775807)
 *     try 'llmc-train run --help'
 * and the subcommand exits 2. */
#ifndef LLMC_ARGS_H
#define LLMC_ARGS_H

#define LLMC_TRAIN_VERSION "0.1.0"

/* getopt_long returned '?' (unknown option) or ':' (a value missing): the
 * message naming the option (cmd e.g. "llmc-train run"). Returns 2. */
int args_getopt_error(const char *cmd, int c, char **argv);
/* A usage error of cmd: the message (printf-style), then the --help hint. Returns 2. */
int args_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The value of option opt as a decimal integer in [lo, hi]; 0, or 2 after the
 * message naming opt, the value and the range. */
int args_int(const char *cmd, const char *opt, const char *value, long long lo, long long hi, long long *out);
/* The same for a finite number in [lo, hi]. */
int args_double(const char *cmd, const char *opt, const char *value, double lo, double hi, double *out);

/* A subcommand with one operand and no option but --help (verify DIR,
 * check-plan PLAN.json): -1 with *operand set, else the exit code (0 after
 * --help, usage printed on stdout; 2 after a usage error). */
int args_one_operand(const char *cmd, const char *usage, int argc, char **argv, const char **operand);

#endif
