/* run_lock.c — the exclusive lock of a run's checkpoint directory (run_lock.h). */
#include "run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "log.h"

int run_lock_take(const char *dir, char *warn, size_t warn_cap, char *err, size_t err_cap)
{
    warn[0] = '\0';
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/.run.lock", dir) >= sizeof path) {
        snprintf(err, err_cap, "%s: path too long", dir);
        return -1;
    }
    if (mkdir_parents(dir)) { snprintf(err, err_cap, "%s: %s", dir, strerror(errno)); return -1; }
    /* O_NOFOLLOW: a link planted in place of the lock file is not written through */
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_cap, "%s: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            snprintf(warn, warn_cap, "%s: this file system does not lock (%s); two runs of this plan at once are "
                     "not kept apart", path, strerror(errno));
            return fd;
        }
        char holder[256], shown[300];
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        snprintf(err, err_cap, "%s: another run of this plan is using %s (%s); not starting a second one "
                 "(it would write the same checkpoints and metrics)", path, dir,
                 holder[0] ? log_escape(shown, sizeof shown, holder, strlen(holder))
                           : "its holder has not written who it is yet");
        close(fd);
        return -1;
    }
    char host[128] = "?", text[256], when[32] = "";
    if (gethostname(host, sizeof host) != 0) strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int len = snprintf(text, sizeof text, "pid %ld on %s since %s\n", (long)getpid(), host, when);
    /* the holder note is best effort: the lock itself is what keeps runs apart */
    if (ftruncate(fd, 0) == 0 && len > 0 && pwrite(fd, text, (size_t)len, 0) < 0) {}
    return fd;
}
