/* stopsig.h — preemption: SIGUSR2 (Slurm's --signal=USR2@T), SIGTERM, SIGINT or
 * SIGHUP (unless inherited as ignored, as under nohup) ask the
 * trainer to finish the current step, write a checkpoint and exit with
 * STOP_EXIT_REQUEUE so Slurm requeues the job (runtime/base/stopsig.c).
 * stopsig_install also ignores SIGXFSZ: a write past `ulimit -f` then fails
 * with EFBIG and is reported like a full disk, exit 1, instead of killing the
 * process without a message. */
#ifndef LLMC_STOPSIG_H
#define LLMC_STOPSIG_H

#define STOP_EXIT_REQUEUE 3   /* exit status after a requested stop + checkpoint */

void stopsig_install(void);
/* Non-zero once a stop signal arrived (async-signal-safe flag). */
int stopsig_requested(void);
/* The signal's name, for the log line ("USR2", "TERM", "INT", "HUP"), or NULL. */
const char *stopsig_name(void);

#endif
