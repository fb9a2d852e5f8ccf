/* llmc-train — the trainer runtime's command line: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "checkpoint.h"
#include "commands.h"
#include "cpu_backend.h"
#include "data_commands.h"
#include "plan.h"

/* check-plan reads the plan as `run` does: the reader, then what the CPU
 * backend of this build runs (its check_plan: fp8, qlora, ... refused) */
static int cmd_check_plan_cpu(int argc, char **argv)
{
    static CpuBackend c;
    TrainBackend be;
    cpu_backend_init(&be, &c);
    return cmd_check_plan(argc, argv, be.check_plan, be.self);
}

static void usage(FILE *out)
{
    fputs("usage: llmc-train COMMAND [ARGS]\n"
          "\n"
          "commands:\n"
          "  run PLAN.json          train as the plan says (resumes from the latest checkpoint)\n"
          "  prepare PLAN.json      tokenize the plan's datasets into packed token shards\n"
          "  tokenize --tokenizer DIR [--decode]\n"
          "                         text on stdin -> token ids (or ids -> text)\n"
          "  verify DIR             check a checkpoint's sha256 manifest\n"
          "  export --plan PLAN.json CHECKPOINT OUT\n"
          "                         a checkpoint as a Hugging Face model (and PEFT adapter)\n"
          "  generate DIR QUESTION...  an exported model's greedy answers\n"
          "  check-plan PLAN.json   read the plan as run does: exit 0 accepted, 1 refused\n"
          "\n"
          "  --help, --version      (every command takes --help)\n"
          "options take --opt=VALUE or --opt VALUE; see llmc-train(1)\n", out);
}

/* Every subcommand is linked in (runtime/build.mk links every folder's objects):
 * a missing one is a link error, never a message at run time. */
int main(int argc, char **argv)
{
    static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"run", cmd_run}, {"prepare", cmd_prepare},
        {"tokenize", cmd_tokenize}, {"verify", cmd_verify},
        {"check-plan", cmd_check_plan_cpu}, {"generate", cmd_generate},
        {"export", cmd_export},
    };
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version")) { printf("llmc-train %s\n", LLMC_TRAIN_VERSION); return 0; }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        return cmds[i].fn(argc - 1, argv + 1);
    }
    return args_usage_error("llmc-train", "unknown command '%s'", argv[1]);
}
