/* slurm_tools.c — what llmc status, submit, cancel and logs share: files read
 * whole, programs run without a shell, and Slurm's clients' output (slurm_tools.h). */
#include "slurm_tools.h"
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* MAX_FILE: cli_read_file refuses a file over 1 GiB rather than hold it in memory. */
#define MAX_FILE (1u << 30)

/* Measured first, then formatted: no length limit, and out of memory ends llmc (xmalloc). */
char *cli_xprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

/* Read a whole regular file. 0 ok, 1 absent (ENOENT), -1 error (err set). */
int cli_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    *buf = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO in a file's place must not hang the open; fstat then refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 1;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((unsigned long long)st.st_size > MAX_FILE) {
        snprintf(err, errlen, "%s: larger than %u MiB", path, MAX_FILE >> 20);
        close(fd);
        return -1;
    }
    /* sized from fstat, grown if the file grows while read (a log being written) */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *p = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > MAX_FILE) break;
            cap *= 2;
            p = xrealloc(p, cap);
        }
        ssize_t r = read(fd, p + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR) continue;
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            free(p);
            close(fd);
            return -1;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    p[n] = 0;
    *buf = p;
    *len = n;
    return 0;
}

bool cli_on_path(const char *prog)
{
    const char *p = getenv("PATH");
    if (!p) return false;
    char buf[PATH_MAX];
    while (*p) {
        size_t n = strcspn(p, ":");
        /* an empty PATH element means the current directory, as the shell takes it */
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, n ? p : ".", prog);
        if (access(buf, X_OK) == 0) return true;
        p += n;
        if (*p) p++;
    }
    return false;
}

/* Run argv (no shell), capture stdout and stderr together. Returns the exit status, -1 if it could not run. */
int cli_run_capture(char *const argv[], char **out)
{
    int fd[2];
    *out = NULL;
    if (pipe(fd)) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    /* stdin from /dev/null: a client that would read input gets EOF instead of waiting on the terminal */
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc) { close(fd[0]); return -1; }
    size_t cap = 4096, n = 0;
    char *b = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) b = xrealloc(b, cap *= 2);
        ssize_t r = read(fd[0], b + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    b[n] = 0;
    close(fd[0]);
    int wst;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {}
    *out = b;
    /* killed by a signal: -1, as if it could not run */
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
}

/* KEY=VALUE out of one line of `scontrol show job -o` (value up to the next space). */
bool slurm_field(const char *line, const char *key, char *val, size_t vlen)
{
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p += kl) {
        /* the key must start a field: "JobId" must not match inside "ArrayJobId=" */
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            const char *v = p + kl + 1;
            /* scontrol -o separates fields by spaces, so a value holding one (a path) is cut there */
            size_t n = strcspn(v, " \n");
            snprintf(val, vlen, "%.*s", (int)n, v);
            return true;
        }
    }
    return false;
}

/* A Slurm client's failure in one line: away from the cluster (no slurm.conf,
 * no controller) its several "error:" lines say only that; else its last line. */
char *slurm_failure(const char *tool, char *out)
{
    if (!out || !out[0]) return cli_xprintf("%s failed: no output", tool);
    if (strstr(out, "resolve_ctls_from_dns_srv") || strstr(out, "Could not establish a configuration source") ||
        strstr(out, "s_p_parse_file") || strstr(out, "Unable to contact slurm controller"))
        return cli_xprintf("%s: no Slurm controller answers here (no slurm.conf or SLURM_CONF, or slurmctld is down): "
                       "no Slurm view (the trainer's files only)", tool);
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n') out[--n] = 0;
    char *last = strrchr(out, '\n');
    return cli_xprintf("%s failed: %s", tool, last ? last + 1 : out);
}

/* Slurm's job states in which the job has not ended (squeue(1), "JOB STATE CODES"): waiting, running, being
 * requeued, suspended or finishing. Any other state is final. */
bool slurm_state_active(const char *state)
{
    static const char *const active[] = {"RUNNING", "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                                         "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING", "STAGE_OUT",
                                         "SIGNALING", "STOPPED", "RESV_DEL_HOLD"};
    for (size_t i = 0; i < sizeof active / sizeof *active; i++)
        if (strcmp(state, active[i]) == 0) return true;
    return false;
}
