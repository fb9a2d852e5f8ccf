/* commands.h — llmc-train's own subcommands (runtime/cli/main.c dispatches to
 * them, beside cmd_run of cpu_backend.h, the data commands of data_commands.h
 * and cmd_verify of checkpoint.h). The arguments after the subcommand's name,
 * the exit status back: 0 ok, 1 failure of the work, 2 usage or I/O. */
#ifndef LLMC_CLI_COMMANDS_H
#define LLMC_CLI_COMMANDS_H

int cmd_generate(int argc, char **argv);  /* generate.c: an export's greedy answers to questions */
int cmd_export(int argc, char **argv);    /* export.c: a checkpoint -> HF model (and PEFT adapter) */

#endif
