/* cpu_backend.h — the CPU backend of the training loop (runtime/cpu_backend.c),
 * exposed so that a test can build a backend on top of it (tests/cpu/loop_test.c). */
#ifndef LLMC_CPU_BACKEND_H
#define LLMC_CPU_BACKEND_H

#include "model.h"
#include "optim.h"
#include "train_loop.h"

typedef struct {
    Model *m;              /* the loop's host model, trained in place */
    AdamW *opt;            /* the loop's host optimizer */
    ModelActs *acts;       /* activations of one micro-batch */
    float *acc;            /* the step's summed gradients */
    double loss_sum;       /* the step's summed token loss on this rank */
    ModelActs *eval_acts;  /* held-out evaluation: activations for eval_T tokens a row */
    int eval_T;
} CpuBackend;

/* Fill be with the CPU backend's functions over c. */
void cpu_backend_init(TrainBackend *be, CpuBackend *c);

#endif
