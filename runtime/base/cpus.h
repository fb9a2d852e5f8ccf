/* cpus.h — how many threads a process of llmc-train should run (runtime/base/cpus.c). */
#ifndef LLMC_CPUS_H
#define LLMC_CPUS_H

/* LLMC_THREADS when it is an integer from 1 to 4096 (any other value: one
 * warning); else the CPUs this process may run on (its affinity mask: what
 * Slurm's --cpus-per-task, taskset or a container grants), else the online
 * CPUs; at least 1. */
int cpus_available(void);

#endif
