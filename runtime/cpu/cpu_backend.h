/* cpu_backend.h — the CPU backend of the training loop (runtime/cpu/cpu_backend.c),
 * exposed so that a test can build a backend on top of it (tests/cpu/loop_test.c). */
#ifndef LLMC_CPU_BACKEND_H
#define LLMC_CPU_BACKEND_H

#include "model.h"
#include "optim.h"
#include "train_loop.h"

/* Weights of a unit gathered for use (ZeRO-3): at most the last unit and the
 * tied embedding at once. */
#define CPU_GATHER_SLOTS 2

typedef struct {
    Model *m;              /* the loop's host model: trained in place (ZeRO 0-2) */
    AdamW *opt;            /* the loop's host optimizer: trained in place (ZeRO 0) */
    ModelActs *acts;       /* activations of one micro-batch */
    float *acc;            /* ZeRO 0-1: this rank's summed gradients of the step (whole) */
    double loss_sum;       /* the step's summed token loss on this rank */
    ModelActs *eval_acts;  /* held-out evaluation: activations for eval_T tokens a row */
    int eval_T;
    /* ZeRO (parallel.zero_stage; see cpu_backend.c) */
    int zero, rank, world;
    size_t *starts;        /* world + 1 shard bounds of the flat buffer */
    size_t lo, hi;         /* this rank's shard */
    size_t part_r[1][2];   /* state_part under ZeRO-3: [lo, hi) */
    float *gsh;            /* ZeRO >= 1: the shard's summed gradient */
    float *wsh;            /* ZeRO >= 1: the shard's weights (ZeRO 1-2: inside m->w) */
    AdamW osh;             /* ZeRO >= 1: the shard's moments and step count */
    Model work;            /* what forward and backward run on (ZeRO 3: no weights, hooks) */
    Model tv;              /* what trains (model_trainable of m): all of it, frozen layers' rest, adapters */
    int have_tv;
    ModelHooks hooks;
    int micro;             /* the micro-batch's index in its step */
    float *gathered[CPU_GATHER_SLOTS];
    int gathered_unit[CPU_GATHER_SLOTS];
} CpuBackend;

/* Fill be with the CPU backend's functions over c. */
void cpu_backend_init(TrainBackend *be, CpuBackend *c);

/* llmc-train run: the training loop over this backend (a subcommand: the
 * arguments after "run", the exit status back). */
int cmd_run(int argc, char **argv);

#endif
