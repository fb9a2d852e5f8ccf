/* cpus.c — thread counts from LLMC_THREADS or the affinity mask (cpus.h).
 * _SC_NPROCESSORS_ONLN counts the whole node: under Slurm a step granted 2 of
 * 224 CPUs would start 224 threads on 2 CPUs. */
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpus.h"
#include "log.h"

/* The CPUs this process may run on: the affinity mask Slurm (or taskset) set, else every online CPU. */
static int cpus_granted(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int cpus_available(void)
{
    static int warned;
    const char *env = getenv("LLMC_THREADS");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (!*end && n > 0 && n <= 4096) return (int)n;
        int granted = cpus_granted();
        if (!warned++)   /* a tuning knob: the run goes on, but not silently */
            log_warn("LLMC_THREADS='%s' is not a thread count from 1 to 4096: using the %d CPUs this process "
                     "may run on", env, granted);
        return granted;
    }
    return cpus_granted();
}
