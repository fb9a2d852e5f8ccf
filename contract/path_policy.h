/* path_policy.h — where a run may write: THE SINGLE SOURCE.
 *
 * llmc's checker (compiler/check/check_train.c, check_train_output_path) and
 * llmc-train's plan reader (runtime/plan/plan.c, check_run_paths: `run`,
 * `check-plan`, `prepare`) normalise the directories a plan writes into and
 * the inputs it reads through the functions below, and refuse the same
 * places with the same words: the file-system root, a system directory
 * (PATH_SYSTEM_DIRS), an output inside the model directory or equal to the
 * directory of an input (dataset, tokenizer, the plan itself). llmc-train
 * applies it again at start because plan.json may have been edited by hand.
 *
 * Normalised once: the path is joined to its base (the working directory for
 * a relative one), the longest prefix that exists is resolved by realpath()
 * (symbolic links and ".." as the kernel sees them), and the rest, which
 * does not exist yet, is resolved lexically ("." and ".." and "//"), as
 * `mkdir -p` would create it. "/.", "/tmp/..", "../../../.." from near the
 * root and a symbolic link to /etc all resolve to what they name.
 *
 * Header only (static inline), like plan_limits.h: both programs include it
 * and neither links an extra object. */
#ifndef LLMC_CONTRACT_PATH_POLICY_H
#define LLMC_CONTRACT_PATH_POLICY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The longest path the policy handles (longer ones are refused as such). */
#define PATH_POLICY_MAX 4096

/* System directories no run writes into. BELOW 1: the directory and
 * everything inside it; 0: the directory itself only (/var/tmp/run and
 * /home/me/runs are ordinary places for a run; /var and /home are not). */
#define PATH_SYSTEM_DIRS(X) \
    X("/bin", 1) X("/boot", 1) X("/dev", 1) X("/etc", 1) X("/lib", 1) X("/lib32", 1) \
    X("/lib64", 1) X("/libx32", 1) X("/proc", 1) X("/sbin", 1) X("/sys", 1) X("/usr", 1) \
    X("/var", 0) X("/home", 0)

/* "." and ".." and repeated '/' of the absolute path in, resolved lexically
 * into out (at least strlen(in) + 2 bytes). */
static inline void path_policy_lexical(const char *in, char *out)
{
    size_t n = 0;
    for (const char *q = in; *q;) {
        while (*q == '/') q++;
        const char *end = q;
        while (*end && *end != '/') end++;
        size_t len = (size_t)(end - q);
        if (len == 2 && q[0] == '.' && q[1] == '.') {
            while (n > 0 && out[n - 1] != '/') n--;
            if (n > 0) n--;
        } else if (len > 0 && !(len == 1 && q[0] == '.')) {
            out[n++] = '/';
            memcpy(out + n, q, len);
            n += len;
        }
        q = end;
    }
    if (n == 0) out[n++] = '/';
    out[n] = 0;
}

/* path (relative to the working directory unless absolute) normalised into
 * out[PATH_POLICY_MAX]: realpath of the longest existing prefix, the rest
 * lexically. 0, or -1 when the path (or the working directory) is too long. */
static inline int path_policy_resolve(const char *path, char *out)
{
    char abs[2 * PATH_POLICY_MAX];
    if (path[0] == '/') {
        if (strlen(path) >= sizeof abs) return -1;
        strcpy(abs, path);
    } else {
        char cwd[PATH_POLICY_MAX];
        if (!getcwd(cwd, sizeof cwd)) return -1;
        if ((size_t)snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= sizeof abs) return -1;
    }
    size_t cut = strlen(abs);
    for (;;) {
        char save = abs[cut];
        abs[cut] = 0;
        char *real = realpath(cut ? abs : "/", NULL);
        abs[cut] = save;
        if (real) {
            char joined[3 * PATH_POLICY_MAX];
            int w = snprintf(joined, sizeof joined, "%s/%s", real, abs + cut);
            free(real);
            if (w < 0 || (size_t)w >= sizeof joined) return -1;
            char norm[3 * PATH_POLICY_MAX + 2];
            path_policy_lexical(joined, norm);
            if (strlen(norm) >= PATH_POLICY_MAX) return -1;
            strcpy(out, norm);
            return 0;
        }
        /* drop the last component (and the slashes before it) */
        while (cut > 0 && abs[cut - 1] == '/') cut--;
        while (cut > 0 && abs[cut - 1] != '/') cut--;
        while (cut > 1 && abs[cut - 1] == '/') cut--;
        if (cut == 0) return -1;   /* not even "/" resolved */
        if (cut == 1) cut = 0;     /* "/" itself: realpath("/") next */
    }
}

/* inner is outer or inside it (both normalised). */
static inline int path_policy_within(const char *outer, const char *inner)
{
    size_t n = strlen(outer);
    if (n == 1 && outer[0] == '/') return 1;
    return strncmp(outer, inner, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

/* The normalised dir as a system root, in words ("the file-system root",
 * "the system directory /etc"), or NULL when it is none: the root itself or
 * one of PATH_SYSTEM_DIRS itself. What a container mount may not bring in
 * from the host (a directory inside one, /etc/slurm or /usr/local/cuda, is an
 * ordinary mount). */
static inline const char *path_policy_system_root(const char *dir, char *why, size_t n)
{
    if (!strcmp(dir, "/")) {
        snprintf(why, n, "the file-system root");
        return why;
    }
#define PATH_SYSTEM_ROOT_ROW(d, below) \
    if (!strcmp(dir, d)) { snprintf(why, n, "the system directory %s", d); return why; }
    PATH_SYSTEM_DIRS(PATH_SYSTEM_ROOT_ROW)
#undef PATH_SYSTEM_ROOT_ROW
    return NULL;
}

/* Why a run must not write into the normalised directory dir, as words
 * (a system root as above, or "inside the system directory /usr"), or NULL
 * when it may. */
static inline const char *path_policy_system(const char *dir, char *why, size_t n)
{
    if (path_policy_system_root(dir, why, n)) return why;
#define PATH_SYSTEM_ROW(d, below) \
    if ((below) && path_policy_within(d, dir)) { snprintf(why, n, "inside the system directory %s", d); return why; }
    PATH_SYSTEM_DIRS(PATH_SYSTEM_ROW)
#undef PATH_SYSTEM_ROW
    return NULL;
}

/* An input a run reads, for the overlap rules: the output must not be inside
 * (or be) a WITHIN input (the model directory: export and checkpoints would
 * mix with the weights it loads), nor be an EQUAL input (the directory of a
 * dataset, the tokenizer directory, the plan's own directory). */
typedef enum { PATH_INPUT_EQUAL, PATH_INPUT_WITHIN } PathInputRule;
typedef struct {
    const char *what;    /* "the model directory", "the directory of plan file" ... */
    const char *value;   /* as the plan writes it, for the message */
    const char *path;    /* the directory, as a path to normalise; NULL: skipped */
    PathInputRule rule;
} PathInput;

/* The directory value (written by the plan as value; path is what to
 * normalise, relative to the working directory) that a run writes into,
 * checked against the system directories and the inputs. 0 when it may;
 * 1 with msg completed after the key: `"VALUE" resolves to "DIR", which is
 * WHY`; -1 when the path is too long to normalise (msg says so). */
static inline int path_policy_output(const char *value, const char *path, const PathInput *in, int nin,
                                     char *msg, size_t msgsz)
{
    char dir[PATH_POLICY_MAX], why[PATH_POLICY_MAX + 160];
    if (path_policy_resolve(path, dir)) {
        snprintf(msg, msgsz, "\"%s\" is too long to resolve (over %d bytes)", value, PATH_POLICY_MAX);
        return -1;
    }
    const char *sys = path_policy_system(dir, why, sizeof why);
    if (sys) {
        snprintf(msg, msgsz, "\"%s\" resolves to \"%s\", which is %s: the run would write its checkpoints, "
                 "final model and metrics there", value, dir, sys);
        return 1;
    }
    for (int i = 0; i < nin; i++) {
        char other[PATH_POLICY_MAX];
        if (!in[i].path || path_policy_resolve(in[i].path, other)) continue;
        int within = in[i].rule == PATH_INPUT_WITHIN ? path_policy_within(other, dir) : !strcmp(other, dir);
        if (!within) continue;
        snprintf(msg, msgsz, "\"%s\" resolves to \"%s\", which is %s%s \"%s\" (\"%s\"): the run's output would "
                 "mix with what it reads", value, dir, strcmp(other, dir) ? "inside " : "", in[i].what, in[i].value, other);
        return 1;
    }
    return 0;
}

/* A directory the run reads (model path, tokenizer path): refused when it
 * resolves to the file-system root. 0, or 1 with msg as path_policy_output. */
static inline int path_policy_input_dir(const char *value, const char *path, char *msg, size_t msgsz)
{
    char dir[PATH_POLICY_MAX];
    if (path_policy_resolve(path, dir)) {
        snprintf(msg, msgsz, "\"%s\" is too long to resolve (over %d bytes)", value, PATH_POLICY_MAX);
        return 1;
    }
    if (strcmp(dir, "/")) return 0;
    snprintf(msg, msgsz, "\"%s\" resolves to \"/\", the file-system root, not a model or tokenizer directory", value);
    return 1;
}

/* A container mount SRC[:DST] (both absolute; DST NULL: the same path in the
 * container), normalised as every other path: SRC through this host's file
 * system like path_policy_resolve, DST lexically (it names a place in the
 * image, not here). Refused: SRC a system root (the job would see the host's
 * system files, and write them with rw), DST the container's root (it would
 * hide the image). 0, or 1 (the host side) or 2 (the container side) with
 * msg completed after "container mount 'M': ". */
static inline int path_policy_mount(const char *src, const char *dst, char *msg, size_t msgsz)
{
    char host[PATH_POLICY_MAX], why[PATH_POLICY_MAX + 160];
    if (path_policy_resolve(src, host)) {
        snprintf(msg, msgsz, "the host side \"%s\" is too long to resolve (over %d bytes)", src, PATH_POLICY_MAX);
        return 1;
    }
    if (path_policy_system_root(host, why, sizeof why)) {
        snprintf(msg, msgsz, "the host side \"%s\" resolves to \"%s\", which is %s: the job would see the host's "
                 "system files there, and write them with rw", src, host, why);
        return 1;
    }
    if (dst && strlen(dst) < PATH_POLICY_MAX) {
        char in[PATH_POLICY_MAX + 2];
        path_policy_lexical(dst, in);
        if (!strcmp(in, "/")) {
            snprintf(msg, msgsz, "the container side \"%s\" resolves to \"/\": the mount would hide the image's "
                     "own root", dst);
            return 2;
        }
    }
    return 0;
}

#endif
