/* stopsig.c — preemption signals: SIGUSR2 (Slurm's --signal=USR2@T), SIGTERM
 * (scancel, Slurm's time limit, mpirun passing on a stop), SIGINT (Ctrl-C, srun
 * passing one on) and SIGHUP (the terminal or the session went away) only set a flag; the
 * training loop polls it between steps, so a stop never interrupts a step or a
 * checkpoint half-way. */
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include "stopsig.h"

static volatile sig_atomic_t stop_signal;   /* 0, or the number of the first stop signal */

static void on_stop_signal(int sig)
{
    if (!stop_signal) stop_signal = sig;
}

void stopsig_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    /* Restart interrupted reads/writes: the flag is checked between steps. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* A file-size limit (ulimit -f) reached: without this SIGXFSZ kills the
     * process with no word; ignored, the write fails with EFBIG and the
     * error path names the file and exits 1 (a failure, not a requeue). */
    signal(SIGXFSZ, SIG_IGN);
    /* nohup: a SIGHUP the caller chose to ignore stays ignored */
    struct sigaction old;
    if (sigaction(SIGHUP, NULL, &old) || old.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
}

int stopsig_requested(void)
{
    return stop_signal != 0;
}

const char *stopsig_name(void)
{
    switch (stop_signal) {
    case SIGUSR2: return "USR2";
    case SIGTERM: return "TERM";
    case SIGINT:  return "INT";
    case SIGHUP:  return "HUP";
    default:      return NULL;
    }
}
