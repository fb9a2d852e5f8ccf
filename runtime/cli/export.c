/* export.c — `llmc-train export [--plan PLAN.json] CHECKPOINT OUT`: any verified
 * checkpoint of a run as the Hugging Face model directory the run writes at its
 * end (OUT/final), and for a LoRA plan the PEFT adapter too, through the same
 * code (run_export). The plan says what the checkpoint's tensors do not: the
 * model it started from (its config.json, and the frozen weights of a LoRA or
 * freeze run), the precision, the tokenizer and the LoRA settings. Each
 * checkpoint records its plan (path and SHA-256, checkpoint.h CkptPlanRef), so
 * --plan is needed only for older checkpoints or a plan that has since moved
 * or changed. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "checkpoint.h"
#include "commands.h"
#include "log.h"
#include "model.h"
#include "plan.h"
#include "run_init.h"
#include "sha256.h"

static const char export_usage[] =
    "usage: llmc-train export [--plan PLAN.json] [--adapter DIR] CHECKPOINT OUT\n"
    "  the weights of CHECKPOINT (a step directory CKPT_DIR/step-NNNNNNNN, or CKPT_DIR for the\n"
    "  step its `latest` names), verified first (sha256 manifest, state.json, the plan's model\n"
    "  and fine-tuning), as the Hugging Face model directory OUT: model.safetensors in the plan's\n"
    "  precision, config.json, the tokenizer files, MANIFEST.sha256 -- what the run writes to\n"
    "  OUTPUT_DIR/final. A LoRA plan: OUT is the merged model and the PEFT adapter goes to\n"
    "  --adapter DIR (default OUT-adapter). OUT (and DIR) must not exist.\n"
    "  --plan PLAN.json  the plan the checkpoint was trained with (default: the plan.json the\n"
    "                    checkpoint records, if its bytes are unchanged)\n"
    "exit status: 0 exported, 1 the checkpoint fails verification or the export fails,\n"
    "             2 usage or a file that cannot be read\n";

/* The checkpoint's fields an export depends on: the model's shape and what
 * trains (not the data, the schedule or the optimizer). */
static void export_fingerprint(const RunPlan *plan, CkptFingerprint *fp)
{
    ShardSet none = {0};
    none.dir = (char *)"";
    CkptFingerprint all;
    run_fingerprint(plan, &none, 1, 0, &all);
    memset(fp, 0, sizeof *fp);
    for (int i = 0; i < all.n; i++)
        if (!strncmp(all.f[i].key, "model.", 6) || !strncmp(all.f[i].key, "finetune.", 9)) fp->f[fp->n++] = all.f[i];
}

/* The plan CHECKPOINT records, if that file still holds the same bytes.
 * 0, or the exit status with the reason in err. */
static int recorded_plan(const char *ckpt, CkptPlanRef *ref, char *err, size_t errlen)
{
    int64_t step;
    char why[2048];
    int r = ckpt_plan_ref(ckpt, ref, &step, why, sizeof why);
    if (r < 0) { snprintf(err, errlen, "%s", why); return 1; }
    if (r > 0) {
        snprintf(err, errlen, "%s: step %" PRId64 " records no plan (written by an older llmc-train): name it with "
                 "--plan PLAN.json", ckpt, step);
        return 2;
    }
    struct stat sb;
    char hex[65];
    if (stat(ref->path, &sb) || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: step %" PRId64 " was trained with %s, which is %s: name the plan with --plan PLAN.json",
                 ckpt, step, ref->path, stat(ref->path, &sb) ? strerror(errno) : "not a regular file");
        return 2;
    }
    if (sha256_file_hex(ref->path, hex) || strcmp(hex, ref->sha256)) {
        snprintf(err, errlen, "%s: step %" PRId64 " was trained with %s, which has changed since (sha256 %.12s..., "
                 "recorded %.12s...): pass --plan %s to export with the plan as it is now, or name the plan it was "
                 "trained with", ckpt, step, ref->path, hex, ref->sha256, ref->path);
        return 2;
    }
    return 0;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 || errno != ENOENT;
}

int cmd_export(int argc, char **argv)
{
    const char *cmd = "llmc-train export";
    enum { OPT_PLAN = 0x100, OPT_ADAPTER, OPT_VERSION };
    static const struct option longopts[] = {
        {"plan", required_argument, NULL, OPT_PLAN},
        {"adapter", required_argument, NULL, OPT_ADAPTER},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *plan_path = NULL, *adapter = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': fputs(export_usage, stdout); return 0;
        case OPT_VERSION: printf("llmc-train %s\n", LLMC_TRAIN_VERSION); return 0;
        case OPT_PLAN: plan_path = optarg; break;
        case OPT_ADAPTER: adapter = optarg; break;
        default: return args_getopt_error(cmd, c, argv);
        }
    }
    if (argc - optind != 2)
        return args_usage_error(cmd, argc - optind < 2 ? "needs CHECKPOINT and OUT" : "unexpected argument '%s'",
                                argv[optind + 2 < argc ? optind + 2 : optind]);
    const char *ckpt = argv[optind], *out = argv[optind + 1];
    if (!out[0]) return args_usage_error(cmd, "an empty OUT");

    RunPlan plan;
    char err[3 * 4096 + 512];   /* three paths and a sentence */
    CkptPlanRef ref;
    if (!plan_path) {
        int r = recorded_plan(ckpt, &ref, err, sizeof err);
        if (r) {
            log_error("%s", err);
            return r;
        }
        plan_path = ref.path;
    }
    if (run_plan_load(&plan, plan_path, err, sizeof err)) {
        log_error("%s", err);
        return 2;
    }
    char adapter_buf[4200];
    if (plan.ft.method == METHOD_LORA && !adapter) {
        snprintf(adapter_buf, sizeof adapter_buf, "%s-adapter", out);
        adapter = adapter_buf;
    }
    if (adapter && plan.ft.method != METHOD_LORA) {
        run_plan_free(&plan);
        return args_usage_error(cmd, "--adapter: the plan trains no LoRA adapter (finetune.method is not lora)");
    }
    const char *taken = exists(out) ? out : adapter && exists(adapter) ? adapter : NULL;
    if (taken) {
        log_error("%s exists: the export writes a new directory (remove it, or name another)", taken);
        run_plan_free(&plan);
        return 2;
    }

    /* the run's model: the base the plan starts from (frozen weights of a LoRA
     * or freeze run), what trains attached, then the checkpoint's tensors */
    Model m, tv;
    int have_tv = 0, rc = 1;
    if (model_init(&m, &plan.model)) {
        log_error("cannot allocate the model");
        run_plan_free(&plan);
        return 1;
    }
    /* a full run's checkpoint holds every weight: the base is not read */
    if ((plan.ft.method == METHOD_FULL || !run_init_weights(&m, &plan, &plan.model, NULL)) && !run_finetune_attach(&m, &plan)) {
        if (model_trainable(&m, &tv)) log_error("the trainable tensors are not one contiguous range");
        else have_tv = 1;
    }
    CkptFingerprint fp;
    export_fingerprint(&plan, &fp);
    char step_dir[4300];
    int64_t step = 0;
    if (have_tv) {
        if (ckpt_load_weights(ckpt, &fp, &tv, &step, step_dir, sizeof step_dir, err, sizeof err))
            log_error("%s (is %s the plan this checkpoint was trained with?)", err, plan_path);
        else if (run_export(&plan, &m, out, adapter) == 0)
            rc = 0;
    }
    if (rc == 0) {
        printf("exported step %" PRId64 " (%s) to %s", step, step_dir, out);
        if (m.lora) printf(", its LoRA adapter to %s", adapter);
        printf("\n");
    }
    if (have_tv) model_trainable_free(&m, &tv);
    run_finetune_detach(&m);
    model_free(&m);
    run_plan_free(&plan);
    return rc;
}
