/* data_commands.h — the data subcommands of llmc-train and llmc-train-cuda.
 * As every subcommand: the arguments after its name (argv[0] is the name), the
 * process exit status back (0 ok, 1 failure of the work, 2 usage or I/O). */
#ifndef LLMC_DATA_COMMANDS_H
#define LLMC_DATA_COMMANDS_H

int cmd_tokenize(int argc, char **argv);  /* tokenize_cmd.c: text on stdin -> ids (--decode) */
int cmd_prepare(int argc, char **argv);   /* prepare.c: plan.json -> token shards */

#endif
