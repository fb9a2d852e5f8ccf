/* commands.h — the subcommands of llmc-train; runtime/cli/main.c dispatches to them.
 * Each takes the arguments after the subcommand name (argv[0] is the subcommand)
 * and returns the process exit status: 0 ok, 1 failure of the work, 2 usage or I/O. */
#ifndef LLMC_COMMANDS_H
#define LLMC_COMMANDS_H

int cmd_tokenize(int argc, char **argv);  /* runtime/data/tokenize_cmd.c: text on stdin -> ids (--decode) */
int cmd_prepare(int argc, char **argv);   /* runtime/data/prepare.c: plan.json -> token shards */
int cmd_run(int argc, char **argv);       /* runtime/cpu/cpu_backend.c over runtime/train/train_loop.c: plan.json -> training */
int cmd_verify(int argc, char **argv);    /* runtime/store/store_files.c: sha256 manifest check */
int cmd_generate(int argc, char **argv);  /* runtime/cli/generate.c: an export's greedy answers to questions */
int cmd_export(int argc, char **argv);    /* runtime/cli/export.c: a checkpoint -> HF model (and PEFT adapter) */

#endif
