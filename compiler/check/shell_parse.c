/* shell_parse.c — does a setup line parse as bash? Asked of bash itself.
 *
 * The job script runs each setup line with `eval "$setup_line"` under
 * #!/bin/bash (templates/job_*.slurm.tmpl), so the one parser that decides is
 * bash's: `/bin/bash -n -c LINE` parses exactly that text as eval does (both
 * parse a string with parse_and_execute) and executes nothing (-n: noexec).
 * A lexer of our own was the alternative; it missed `echo $(date`, and every
 * construct bash adds (here-documents, $(( )), case inside $( )) would be one
 * more rule to get wrong, so bash answers instead. No startup file is read
 * (--norc --noprofile, an environment with no BASH_ENV), stdin is /dev/null,
 * and the child has a CPU-time limit: a hostile line cannot hang llmc. */
#include "shell_parse.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHELL_PATH "/bin/bash"
#define SHELL_CPU_SECONDS 10

/* bash's first message line without its "/bin/bash: -c: line N: " prefix
 * (the line number counts inside the one setup line and means nothing here). */
static void first_message(char *text, char *out, size_t n)
{
    char *nl = strchr(text, '\n');
    if (nl) *nl = 0;
    char *p = text, *line = strstr(text, "line ");
    if (line) {
        char *colon = strchr(line, ':');
        if (colon && colon[1] == ' ') p = colon + 2;
    }
    snprintf(out, n, "%s", p);
}

static void child(const char *line, int errfd)
{
    static char *const env[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
    struct rlimit cpu = {SHELL_CPU_SECONDS, SHELL_CPU_SECONDS};
    setrlimit(RLIMIT_CPU, &cpu);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) { dup2(null, 0); dup2(null, 1); }
    dup2(errfd, 2);
    char *argv[] = {"bash", "--norc", "--noprofile", "-n", "-c", (char *)line, NULL};
    execve(SHELL_PATH, argv, env);
    /* not started (no bash here, or a line over the kernel's 128 KiB for one
     * argument): said with a marker byte that bash's own messages never start with */
    dprintf(2, "\001%s", strerror(errno));
    _exit(127);
}

ShellParse shell_parse_line(const char *line, char *msg, size_t msgsz)
{
    int fd[2];
    msg[0] = 0;
    if (pipe2(fd, O_CLOEXEC)) {
        snprintf(msg, msgsz, "%s cannot run here (pipe: %s)", SHELL_PATH, strerror(errno));
        return SHELL_NO_SHELL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]); close(fd[1]);
        snprintf(msg, msgsz, "%s cannot run here (fork: %s)", SHELL_PATH, strerror(errno));
        return SHELL_NO_SHELL;
    }
    if (pid == 0) child(line, fd[1]);
    close(fd[1]);
    char err[4096];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd[0], err + got, sizeof err - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got == sizeof err - 1) {   /* the rest is drained, not kept */
            char sink[4096];
            while (read(fd[0], sink, sizeof sink) > 0) {}
            break;
        }
    }
    err[got] = 0;
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && got && err[0] == '\001') {
        bool too_long = !strcmp(err + 1, strerror(E2BIG));   /* this line only; the next may run */
        snprintf(msg, msgsz, too_long ? "%s -c cannot take a line this long (%s)" : "%s cannot run here (%s)",
                 SHELL_PATH, err + 1);
        return too_long ? SHELL_UNCHECKED : SHELL_NO_SHELL;
    }
    if (WIFSIGNALED(status)) {
        snprintf(msg, msgsz, "%s -n died of signal %d parsing it", SHELL_PATH, WTERMSIG(status));
        return SHELL_BAD;
    }
    if (WEXITSTATUS(status) != 0) {
        if (got) first_message(err, msg, msgsz);
        else snprintf(msg, msgsz, "%s -n exits %d", SHELL_PATH, WEXITSTATUS(status));
        return SHELL_BAD;
    }
    if (got) {   /* parsed, with a warning (a here-document cut off by the end of the line) */
        first_message(err, msg, msgsz);
        if (!strncmp(msg, "warning: ", 9)) memmove(msg, msg + 9, strlen(msg + 9) + 1);   /* the caller says "warns" */
        return SHELL_WARNS;
    }
    return SHELL_OK;
}
