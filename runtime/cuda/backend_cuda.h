/* backend_cuda.h — `llmc-train-cuda run PLAN.json`: the training loop
 * (runtime/train/train_loop.c) on the CUDA backend (runtime/cuda/backend_cuda.c). */
#ifndef LLMC_BACKEND_CUDA_H
#define LLMC_BACKEND_CUDA_H

/* Arguments after "run"; returns 0, 1 (failure), 2 (usage/plan) or STOP_EXIT_REQUEUE. */
int cmd_run_cuda(int argc, char **argv);

#endif
