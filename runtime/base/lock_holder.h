/* lock_holder.h — who holds a lock file (prepare's .prepare.lock, run's
 * .run.lock): the holder writes a one-line note into the file it locked, a
 * process that finds the lock taken reads it to say who is in the way. The
 * flock is what keeps processes apart; the note is only for the message. */
#ifndef LLMC_LOCK_HOLDER_H
#define LLMC_LOCK_HOLDER_H

#include <stddef.h>

/* "pid PID on HOST since UTC-TIME\n" into fd (the locked file), replacing what
 * was there; best effort: a failure leaves the lock as it is. */
void lock_holder_write(int fd);
/* The note's first line into buf (empty when the holder has not written it yet). */
void lock_holder_read(int fd, char *buf, size_t cap);

#endif
