/* train_cuda.h — `llmc-train-cuda run PLAN.json` (runtime/cuda/train_cuda.c). */
#ifndef LLMC_TRAIN_CUDA_H
#define LLMC_TRAIN_CUDA_H

/* Arguments after "run"; returns 0, 1 (failure), 2 (usage/plan) or STOP_EXIT_REQUEUE. */
int cmd_run_cuda(int argc, char **argv);

#endif
