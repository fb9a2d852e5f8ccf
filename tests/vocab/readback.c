/* tests/vocab/readback.c PLAN.json — what llmc-train's plan reader
 * (runtime/plan/plan.c) made of the plan's enumerated words: one line
 * "CONCEPT VALUE" per concept of contract/plan_vocab.h, the enum's value as a
 * number (lora_module: one line per targeted module), and train.fp8_lm_head
 * (0 or 1, as read or derived). run_plan_load first, then
 * run_plan_load_data (format, bad_records). A refusal prints
 * "refused: MESSAGE" and exits 1; usage exits 2.
 * readback --templates NAME...: "NAME 1" for each chat template llmc-train
 * renders (runtime/data/chat_template.c), "NAME 0" for the others. */
#include <stdio.h>
#include <string.h>
#include "../../runtime/plan/plan.h"   /* the runtime's, not compiler/check/plan.h (Makefile, TEST_INC) */
#include "../../runtime/data/chat_template.h"

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--templates")) {
        for (int i = 2; i < argc; i++) printf("%s %d\n", argv[i], chat_template_find(argv[i]) != NULL);
        return 0;
    }
    if (argc != 2) { fprintf(stderr, "usage: readback PLAN.json\n"); return 2; }
    RunPlan p;
    char err[1024];
    if (run_plan_load(&p, argv[1], err, sizeof err)) { printf("refused: %s\n", err); return 1; }
    printf("arch %d\ninit %d\nstage %d\nbackend %d\nmethod %d\nprecision %d\nshard %d\nrecompute %d\n"
           "attention %d\nschedule %d\noffload %d\nmaster_weights %d\noptimizer_states %d\n",
           (int)p.model.arch, (int)p.init, (int)p.stage, (int)p.backend, (int)p.ft.method, (int)p.precision,
           p.zero_stage, (int)p.recompute, (int)p.attention, (int)p.schedule, (int)p.offload, (int)p.master_weights,
           (int)p.optimizer_states);
    printf("fp8_lm_head %d\n", p.fp8_lm_head);   /* a bool beside them (train.fp8_lm_head) */
    for (int m = 0; m < LORA_TARGETS; m++)
        if (p.ft.lora_targets & (1u << m)) printf("lora_module %d\n", m);
    run_plan_free(&p);
    if (run_plan_load_data(&p, argv[1], err, sizeof err)) { printf("refused: %s\n", err); return 1; }
    for (size_t i = 0; i < p.n_datasets; i++) printf("format %d\n", (int)p.datasets[i].format);
    printf("bad_records %d\n", (int)p.bad_records);
    run_plan_free(&p);
    return 0;
}
