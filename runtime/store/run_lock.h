/* run_lock.h — one run at a time per checkpoint directory.
 *
 * run_lock_take creates DIR (and its parents) and takes an exclusive flock on
 * DIR/.run.lock, which the kernel releases when the process ends, however it
 * ends. The holder writes "pid P on HOST since TIME" into the file. A second
 * run of the same plan (a duplicate submission, a requeue racing a manual run)
 * does not wait (it would only train the same steps again) but fails at once
 * with a message naming the holder, before it reads or writes any checkpoint.
 * Returns the open fd (kept open for the run), or -1 with the reason in err.
 * A file system without locks is a warning in warn (warn[0] otherwise 0), and
 * the run goes on unlocked. */
#ifndef LLMC_RUN_LOCK_H
#define LLMC_RUN_LOCK_H

#include <stddef.h>

int run_lock_take(const char *dir, char *warn, size_t warn_cap, char *err, size_t err_cap);

#endif
