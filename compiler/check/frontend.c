/* frontend.c — read files, parse, follow `use`, run the checker (frontend.h). */
#include "frontend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file that is not a regular file is, for the message. */
static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

/* Read a plan file. Only a regular file, or a pipe that has a writer (`llmc
 * check <(gen)`, `gen | llmc check /dev/stdin`) when pipes_ok, is read: a
 * directory, a device, a socket or a FIFO nobody writes to is refused before
 * any blocking read. stat() first so that a device is never opened; the open
 * is O_NONBLOCK and fstat() checks the same kind again (the path may have been
 * swapped in between); a FIFO is probed with one non-blocking read, which
 * returns 0 when no writer has it open. */
static char *read_plan_file(const char *path, size_t *len, Arena *a, Diags *d, const SrcRange *at,
                            bool pipes_ok)
{
    const char *why = NULL;
    char *buf = NULL;
    int fd = -1;
    struct stat st;
    char *tmp = NULL;
    size_t cap = 0, got = 0;
    if (stat(path, &st) != 0) {
        why = strerror(errno);
        goto out;
    }
    if (!S_ISREG(st.st_mode) && !(pipes_ok && S_ISFIFO(st.st_mode))) {
        why = S_ISDIR(st.st_mode) ? "is a directory" : arena_printf(a, "is %s, not a regular file", file_kind(st.st_mode));
        goto out;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) != 0) {
        why = strerror(errno);
        goto out;
    }
    if (!S_ISREG(st.st_mode) && !(pipes_ok && S_ISFIFO(st.st_mode))) {
        why = S_ISDIR(st.st_mode) ? "is a directory" : arena_printf(a, "is %s, not a regular file", file_kind(st.st_mode));
        goto out;
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > FRONTEND_MAX_FILE_BYTES) {
        why = arena_printf(a, "file is too large (%lld bytes; a plan may have at most %u)",
                           (long long)st.st_size, FRONTEND_MAX_FILE_BYTES);
        goto out;
    }
    cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
    tmp = xmalloc(cap + 1);
    if (S_ISFIFO(st.st_mode)) {
        ssize_t r;
        do r = read(fd, tmp, cap); while (r < 0 && errno == EINTR);
        if (r == 0) { why = "is a FIFO with no writer, not a regular file"; goto out; }
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { why = strerror(errno); goto out; }
        if (r > 0) got = (size_t)r;
    }
    /* A writer exists (or it is a regular file): ordinary blocking reads to EOF. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    for (;;) {
        if (got == cap) {
            if (cap > FRONTEND_MAX_FILE_BYTES) break;
            cap *= 2;
            tmp = xrealloc(tmp, cap + 1);
        }
        ssize_t r = read(fd, tmp + got, cap - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { why = strerror(errno); break; }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (!why && got > FRONTEND_MAX_FILE_BYTES)
        why = arena_printf(a, "file is too large (more than %u bytes, the most a plan may have)",
                           FRONTEND_MAX_FILE_BYTES);
    if (!why) {
        buf = arena_alloc(a, got + 1);
        memcpy(buf, tmp, got);
        buf[got] = 0;
        *len = got;
    }
out:
    free(tmp);
    if (fd >= 0) close(fd);
    if (why) {
        if (at) diag_error(d, *at, "cannot read '%s': %s", path, why);
        else diag_error_nopos(d, "cannot read '%s': %s", path, why);
        return NULL;
    }
    return buf;
}

char *frontend_read_file(const char *path, size_t *len, Arena *a, Diags *d, const SrcRange *at)
{
    return read_plan_file(path, len, a, d, at, true);
}

SourceFile *frontend_parse_file(const char *path, Arena *a, Diags *d)
{
    size_t len = 0;
    char *text = frontend_read_file(path, &len, a, d, NULL);
    if (!text) return NULL;
    diags_add_source(d, path, text, len);
    return parse_source(path, text, len, a, d);
}

/* ---- `use` resolution ---- */

typedef struct {
    Arena *a;
    Diags *d;
    PtrVec files;       /* SourceFile *, in load order */
    PtrVec loaded;      /* canonical paths of files[] (same order) */
    PtrVec stack;       /* canonical paths being loaded (cycle detection) */
    PtrVec stack_names; /* their display paths */
} Loader;

/* Lexical clean-up for display and opening: "a/./b" -> "a/b", "a/b/../c" -> "a/c"
 * ('..' after '..' or at the start is kept). */
static const char *normalize_path(Arena *a, const char *path)
{
    size_t n = strlen(path);
    char *out = arena_alloc(a, n + 2);
    const char **parts = arena_alloc(a, sizeof(char *) * (n + 1));
    size_t *lens = arena_alloc(a, sizeof(size_t) * (n + 1));
    int np = 0;
    bool abs = path[0] == '/';
    for (const char *p = path; *p;) {
        while (*p == '/') p++;
        const char *q = p;
        while (*q && *q != '/') q++;
        size_t len = (size_t)(q - p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
            /* skip */
        } else if (len == 2 && p[0] == '.' && p[1] == '.' && np > 0 &&
                   !(lens[np - 1] == 2 && parts[np - 1][0] == '.' && parts[np - 1][1] == '.')) {
            np--;
        } else if (!(len == 2 && p[0] == '.' && p[1] == '.' && abs && np == 0)) {
            parts[np] = p;
            lens[np++] = len;
        }
        p = q;
    }
    size_t o = 0;
    if (abs) out[o++] = '/';
    for (int i = 0; i < np; i++) {
        if (i) out[o++] = '/';
        memcpy(out + o, parts[i], lens[i]);
        o += lens[i];
    }
    if (o == 0) out[o++] = '.';
    out[o] = 0;
    return out;
}

/* "dir/of/using.llm" + "x.llm" -> "dir/of/x.llm"; absolute paths stay. */
static const char *resolve_relative(Arena *a, const char *using_file, const char *path)
{
    if (path[0] == '/') return normalize_path(a, path);
    const char *slash = strrchr(using_file, '/');
    if (!slash) return normalize_path(a, path);
    return normalize_path(a, arena_printf(a, "%.*s/%s", (int)(slash - using_file), using_file, path));
}

static void load_file(Loader *L, const char *path, const char *canon, const SrcRange *use_at);

static void load_uses(Loader *L, SourceFile *sf)
{
    for (int i = 0; i < sf->nitems; i++) {
        Item *it = sf->items[i];
        if (it->kind != ITEM_USE) continue;
        if (strcmp(it->kind_name, "use") != 0) continue;   /* reported by the checker */
        if (!it->use_path[0]) {
            diag_error(L->d, it->use_at, "empty path in 'use'");
            continue;
        }
        const char *path = resolve_relative(L->a, sf->path, it->use_path);
        char real[PATH_MAX];
        if (!realpath(path, real)) {
            diag_error(L->d, it->use_at, "cannot read '%s': %s", path, strerror(errno));
            continue;
        }
        struct stat st;
        if (stat(real, &st) != 0) {
            diag_error(L->d, it->use_at, "cannot read '%s': %s", path, strerror(errno));
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            /* Only plain files: a FIFO or device named in a plan could block forever. */
            diag_error(L->d, it->use_at, "cannot use '%s': it is %s, not a regular file", path,
                       file_kind(st.st_mode));
            continue;
        }
        bool cycle = false;
        for (int k = 0; k < L->stack.n; k++) {
            if (strcmp(L->stack.items[k], real) != 0) continue;
            Diag *g = diag_error(L->d, it->use_at, "'use' cycle: '%s' uses itself", path);
            for (int j = k; j < L->stack.n; j++)
                diag_note(g, "'%s' uses '%s'", (const char *)L->stack_names.items[j],
                          j + 1 < L->stack.n ? (const char *)L->stack_names.items[j + 1] : path);
            cycle = true;
            break;
        }
        if (cycle) continue;
        bool seen = false;
        for (int k = 0; k < L->loaded.n; k++)
            if (strcmp(L->loaded.items[k], real) == 0) seen = true;
        if (seen) continue;      /* shared file used twice: load once */
        load_file(L, path, arena_strdup(L->a, real), &it->use_at);
    }
}

static void load_file(Loader *L, const char *path, const char *canon, const SrcRange *use_at)
{
    size_t len = 0;
    char *text = read_plan_file(path, &len, L->a, L->d, use_at, false);   /* checked again after open */
    if (!text) return;
    /* A used file that does not parse is not a plan (`use "/proc/self/environ"`):
     * one error naming it, none of its lines quoted -- a CI job checking an
     * untrusted plan must not print the files it names. */
    Diags *trial = diags_new();
    parse_source(path, text, len, L->a, trial);
    SrcPos first = {0};
    bool bad = diags_error_count(trial) > 0;
    if (bad) diags_first_error_pos(trial, &first);
    diags_free(trial);
    if (bad) {
        Diag *g = diag_error(L->d, *use_at, "'%s' is not a plan: it does not parse as .llm (line %d, column %d)", path,
                             first.line, first.col);
        diag_note(g, "'use' takes .llm files (clusters, models, datasets, profiles); its lines are not shown here");
        diag_help(g, "to see what is wrong with it, check it alone: llmc check %s", path);
        return;
    }
    diags_add_source(L->d, path, text, len);
    SourceFile *sf = parse_source(path, text, len, L->a, L->d);
    ptrvec_push(L->a, &L->stack, (void *)canon);
    ptrvec_push(L->a, &L->stack_names, (void *)path);
    ptrvec_push(L->a, &L->loaded, (void *)canon);
    load_uses(L, sf);
    ptrvec_push(L->a, &L->files, sf);   /* after what it uses: definitions in use order */
    L->stack.n--;
    L->stack_names.n--;
}

Plan *frontend_load(const char *path, Diags *d)
{
    return frontend_load_overrides(path, NULL, 0, d);
}

Plan *frontend_load_overrides(const char *path, const PlanOverride *ov, int nov, Diags *d)
{
    Arena *a = arena_new();
    Loader L = {.a = a, .d = d};
    size_t len = 0;
    char *text = frontend_read_file(path, &len, a, d, NULL);
    if (!text) {
        arena_free(a);
        return NULL;
    }
    char real[PATH_MAX];
    const char *canon = realpath(path, real) ? arena_strdup(a, real) : arena_strdup(a, path);
    diags_add_source(d, path, text, len);
    SourceFile *sf = parse_source(path, text, len, a, d);
    if (sf->nitems == 0 && !diags_error_count(d)) {   /* nothing to check is not a checked plan */
        SrcRange at = {{sf->path, 1, 1}, {sf->path, 1, 1}};
        Diag *g = diag_error(d, at, "the plan is empty: it holds no blocks and no 'use'");
        diag_help(g, "a plan names a cluster, a model, datasets, a train block and a job; see examples/");
    }
    ptrvec_push(a, &L.stack, (void *)canon);
    ptrvec_push(a, &L.stack_names, (void *)sf->path);
    ptrvec_push(a, &L.loaded, (void *)canon);
    load_uses(&L, sf);
    ptrvec_push(a, &L.files, sf);
    if (nov) apply_overrides((SourceFile **)L.files.items, L.files.n, ov, nov, a, d);

    Plan *plan = arena_alloc(a, sizeof(Plan));
    plan->arena = a;
    plan->main_file = sf->path;
    check_plan((SourceFile **)L.files.items, L.files.n, plan, d);
    return plan;
}

void plan_free(Plan *p)
{
    if (p) arena_free(p->arena);
}
