/* lock_holder.c — the note a lock file's holder leaves in it (lock_holder.h). */
#include "lock_holder.h"

#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <stdio.h>
#include <unistd.h>

void lock_holder_write(int fd)
{
    char host[128] = "?", text[256], when[32] = "";
    if (gethostname(host, sizeof host) != 0) strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int len = snprintf(text, sizeof text, "pid %ld on %s since %s\n", (long)getpid(), host, when);
    if (ftruncate(fd, 0) == 0 && len > 0 && pwrite(fd, text, (size_t)len, 0) < 0) { /* best effort */ }
}

void lock_holder_read(int fd, char *buf, size_t cap)
{
    if (!cap) return;
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}
