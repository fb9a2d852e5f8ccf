/* emit_fs.c — the output directory, written atomically, file by file.
 *
 * Everything is written into a fresh temporary directory beside DIR
 * (".DIR.llmc-XXXXXX", same file system, so rename is atomic), each file
 * fsync'd. A DIR that does not exist: the temporary directory is renamed to
 * it. An existing DIR: it must be empty or hold OUTDIR_MARKER, the manifest
 * of the files llmc wrote there (so `-o ~` cannot touch a home directory),
 * and only those files are replaced, each by rename(2), or removed when the
 * new output no longer has them; shards, plan files and checkpoints kept in
 * DIR stay. Every check comes before the first change; the manifest first
 * lists old and new files together, so that whatever happens midway, every
 * file llmc may have put in DIR is listed, then only the new set. Files are
 * created with openat(O_EXCL|O_NOFOLLOW) under the temporary directory's fd,
 * from names checked to be plain components, and moved with renameat under
 * DIR's fd opened O_NOFOLLOW: nothing is written outside DIR. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "emit_internal.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdir -p for the output directory's parent: `llmc plan.llm -o out/run1`
 * works on a fresh checkout. Only directories are created, never files. */
static int make_parents(const char *path)
{
    char *p = strdup(path);
    if (!p) return -1;
    mode_t mask = umask(0);
    umask(mask);
    int rc = 0;
    for (char *s = p + 1; ; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0777 & ~mask) != 0 && errno != EEXIST) { rc = -1; break; }
        *s = c;
        if (!c) break;
    }
    free(p);
    return rc;
}

static bool component_ok(const char *s, size_t n)
{
    if (n == 0 || n > 255) return false;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '/' || s[i] == '\0') return false;
    return true;
}

/* "a" or "a/b", each a plain component */
static bool relname_ok(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash) return component_ok(name, strlen(name));
    if (strchr(slash + 1, '/')) return false;
    return component_ok(name, (size_t)(slash - name)) && component_ok(slash + 1, strlen(slash + 1));
}

int outdir_begin(OutDir *o, const char *out_dir, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->tmp_fd = -1;
    size_t n = strlen(out_dir);
    while (n > 1 && out_dir[n - 1] == '/') n--;
    o->final_path = strndup(out_dir, n);
    char *d1 = strndup(out_dir, n), *d2 = strndup(out_dir, n);
    if (!o->final_path || !d1 || !d2) {
        snprintf(err, errlen, "out of memory");
        free(d1); free(d2); free(o->final_path); o->final_path = NULL;
        return -1;
    }
    const char *parent = dirname(d1), *base = basename(d2);
    int rc = -1;
    if (n == 0 || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        snprintf(err, errlen, "output directory '%s': name a directory (not '.', '..' or '/')", out_dir);
        goto done;
    }
    if (asprintf(&o->tmp_path, "%s/.%s.llmc-XXXXXX", parent, base) < 0) {
        o->tmp_path = NULL;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    bool made = mkdtemp(o->tmp_path) != NULL;
    if (!made && errno == ENOENT && make_parents(parent) == 0) {
        memcpy(o->tmp_path + strlen(o->tmp_path) - 6, "XXXXXX", 6);   /* mkdtemp may have filled it */
        made = mkdtemp(o->tmp_path) != NULL;
    }
    if (!made) {
        snprintf(err, errlen, "cannot create a directory beside '%s': %s", o->final_path, strerror(errno));
        free(o->tmp_path); o->tmp_path = NULL;
        goto done;
    }
    o->tmp_fd = open(o->tmp_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (o->tmp_fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", o->tmp_path, strerror(errno));
        goto done;
    }
    /* mkdtemp makes 0700; the output is an ordinary directory */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(o->tmp_fd, 0777 & ~mask);
    rc = 0;
done:
    free(d1); free(d2);
    if (rc != 0) outdir_abort(o);
    return rc;
}

int outdir_mkdir(OutDir *o, const char *name, char *err, size_t errlen)
{
    if (!component_ok(name, strlen(name))) {
        snprintf(err, errlen, "refusing to create directory '%s' (not a plain name)", name);
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    if (mkdirat(o->tmp_fd, name, 0777 & ~mask) != 0) {
        snprintf(err, errlen, "cannot create %s/%s: %s", o->final_path, name, strerror(errno));
        return -1;
    }
    o->dirs = realloc(o->dirs, sizeof(char *) * (size_t)(o->ndirs + 1));
    if (!o->dirs || !(o->dirs[o->ndirs] = strdup(name))) { snprintf(err, errlen, "out of memory"); return -1; }
    o->ndirs++;
    return 0;
}

int outdir_write(OutDir *o, const char *name, const char *data, size_t len, int mode,
                 char *err, size_t errlen)
{
    if (!relname_ok(name)) {
        snprintf(err, errlen, "refusing to write '%s' (not a plain name inside the output directory)", name);
        return -1;
    }
    int fd = openat(o->tmp_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s/%s: %s", o->final_path, name, strerror(errno));
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, errlen, "cannot write %s/%s: %s", o->final_path, name, w < 0 ? strerror(errno) : "short write");
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    /* the mode asked for, whatever the umask (scripts must stay executable) */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, (mode_t)mode & ~mask & 0777) != 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "cannot write %s/%s: %s", o->final_path, name, strerror(errno));
        close(fd);
        return -1;
    }
    if (close(fd) != 0) {
        snprintf(err, errlen, "cannot write %s/%s: %s", o->final_path, name, strerror(errno));
        return -1;
    }
    if (strcmp(name, OUTDIR_MARKER) == 0) return 0;   /* the manifest does not list itself */
    o->files = realloc(o->files, sizeof(char *) * (size_t)(o->nfiles + 1));
    if (!o->files || !(o->files[o->nfiles] = strdup(name))) { snprintf(err, errlen, "out of memory"); return -1; }
    o->nfiles++;
    return 0;
}

static void fsync_parent(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) { fsync(fd); close(fd); }
    free(copy);
}

static const char manifest_head[] =
    "# Written by llmc: the files it put in this directory, one per line.\n"
    "# `llmc PLAN -o DIR` replaces (or removes) exactly these and leaves every\n"
    "# other file here alone: shards, plans and checkpoints may live beside them.\n";

typedef struct {
    char **names;
    int n;
} NameList;

static bool list_has(const NameList *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return true;
    return false;
}

static int list_add(NameList *l, const char *name)
{
    char **grown = realloc(l->names, sizeof(char *) * (size_t)(l->n + 1));
    if (!grown) return -1;
    l->names = grown;
    if (!(l->names[l->n] = strdup(name))) return -1;
    l->n++;
    return 0;
}

static void list_free(NameList *l)
{
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    l->names = NULL;
    l->n = 0;
}

/* The manifest in DIR (dir_fd): 1 and its file names in *l (lines that are
 * not plain relative names are ignored: they are never touched); 0 when DIR
 * has none; -1 on error. A marker of an older llmc lists nothing: *legacy. */
static int read_manifest(int dir_fd, NameList *l, bool *legacy)
{
    *legacy = false;
    int fd = openat(dir_fd, OUTDIR_MARKER, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (text && got < (size_t)st.st_size) {
        ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!text) return -1;
    text[got] = '\0';
    *legacy = strncmp(text, "# Written by llmc", 17) != 0;
    for (char *line = text; !*legacy && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (line[0] != '#' && line[0] && relname_ok(line) && strcmp(line, OUTDIR_MARKER) != 0 &&
            !list_has(l, line) && list_add(l, line) != 0) {
            free(text);
            return -1;
        }
        line = nl ? nl + 1 : line + strlen(line);
    }
    free(text);
    return 1;
}

/* The manifest text listing a then those of b not in a. */
static char *manifest_text(const NameList *a, const NameList *b)
{
    size_t len = sizeof manifest_head;
    for (int i = 0; i < a->n; i++) len += strlen(a->names[i]) + 1;
    for (int i = 0; b && i < b->n; i++) len += strlen(b->names[i]) + 1;
    char *t = malloc(len);
    if (!t) return NULL;
    char *p = stpcpy(t, manifest_head);
    for (int i = 0; i < a->n; i++) p = stpcpy(stpcpy(p, a->names[i]), "\n");
    for (int i = 0; b && i < b->n; i++)
        if (!list_has(a, b->names[i])) p = stpcpy(stpcpy(p, b->names[i]), "\n");
    return t;
}

/* Write text as NAME in the temporary directory (replacing an earlier one). */
static int stage_text(OutDir *o, const char *name, const char *text, char *err, size_t errlen)
{
    unlinkat(o->tmp_fd, name, 0);
    return outdir_write(o, name, text, strlen(text), 0644, err, errlen);   /* the manifest is not listed */
}

/* Is the directory part of "a/b" (if any) a real directory in dir_fd, not a link? */
static bool parent_is_dir(int dir_fd, const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash) return true;
    char part[256];
    size_t n = (size_t)(slash - name);
    if (n >= sizeof part) return false;
    memcpy(part, name, n);
    part[n] = '\0';
    struct stat st;
    return fstatat(dir_fd, part, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Write the manifest listing a and b (b may be empty) in the staging
 * directory, then rename it over dir_fd's: readers see the old or the new
 * list, never half of one. 0, or -1 with err. */
static int put_manifest(OutDir *o, int dir_fd, const NameList *a, const NameList *b, char *err, size_t errlen)
{
    char *text = manifest_text(a, b);
    if (!text) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = stage_text(o, OUTDIR_MARKER, text, err, errlen);
    free(text);
    if (rc != 0) return -1;
    if (renameat(o->tmp_fd, OUTDIR_MARKER, dir_fd, OUTDIR_MARKER) != 0) {
        snprintf(err, errlen, "cannot write %s/%s: %s", o->final_path, OUTDIR_MARKER, strerror(errno));
        return -1;
    }
    return 0;
}

/* A directory without a manifest is taken only when it is empty (llmc never
 * writes into a directory it did not make). 0, or -1 with err. */
static int check_empty(OutDir *o, int dir_fd, char *err, size_t errlen)
{
    DIR *d = fdopendir(dup(dir_fd));
    bool empty = d != NULL;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
    if (d) closedir(d);
    if (!empty) {
        snprintf(err, errlen, "'%s' exists and was not written by llmc (no %s in it); not replacing it",
                 o->final_path, OUTDIR_MARKER);
        return -1;
    }
    return 0;
}

/* Check everything before changing anything: each subdirectory llmc puts
 * there is a directory (or absent), and each file it writes is absent or
 * listed in the old manifest (legacy: the marker of an older llmc, which
 * lists nothing; then every file counts as llmc's). 0, or -1 with err. */
static int check_replaceable(OutDir *o, int dir_fd, const NameList *old, const NameList *now, bool legacy,
                             char *err, size_t errlen)
{
    struct stat st;
    for (int i = 0; i < o->ndirs; i++) {
        if (fstatat(dir_fd, o->dirs[i], &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue;
            snprintf(err, errlen, "cannot inspect %s/%s: %s", o->final_path, o->dirs[i], strerror(errno));
            return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s/%s is in the way (not a directory, and llmc puts one there); not replacing it",
                     o->final_path, o->dirs[i]);
            return -1;
        }
    }
    for (int i = 0; i < now->n; i++) {
        if (!parent_is_dir(dir_fd, now->names[i])) continue;   /* its directory is made below, or refused above */
        if (fstatat(dir_fd, now->names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue;
            snprintf(err, errlen, "cannot inspect %s/%s: %s", o->final_path, now->names[i], strerror(errno));
            return -1;
        }
        bool ours = legacy || list_has(old, now->names[i]);
        if (!ours || S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s/%s exists and llmc did not write it (it is not listed in %s); not replacing it",
                     o->final_path, now->names[i], OUTDIR_MARKER);
            return -1;
        }
    }
    return 0;
}

/* The new files take their places (their subdirectories made first, with
 * the umask's permissions). 0, or -1 with err. */
static int move_new_files(OutDir *o, int dir_fd, const NameList *now, char *err, size_t errlen)
{
    mode_t mask = umask(0);
    umask(mask);
    for (int i = 0; i < o->ndirs; i++)
        if (mkdirat(dir_fd, o->dirs[i], 0777 & ~mask) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s/%s: %s", o->final_path, o->dirs[i], strerror(errno));
            return -1;
        }
    for (int i = 0; i < now->n; i++)
        if (renameat(o->tmp_fd, now->names[i], dir_fd, now->names[i]) != 0) {
            snprintf(err, errlen, "cannot replace %s/%s: %s", o->final_path, now->names[i], strerror(errno));
            return -1;
        }
    return 0;
}

/* Files of the last output that this one does not have go, and so do the
 * subdirectories they leave empty (never one holding anything else). */
static void remove_stale(int dir_fd, const NameList *old, const NameList *now)
{
    struct stat st;
    for (int i = 0; i < old->n; i++) {
        if (list_has(now, old->names[i]) || !parent_is_dir(dir_fd, old->names[i])) continue;
        if (fstatat(dir_fd, old->names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
            unlinkat(dir_fd, old->names[i], 0);
        char *slash = strchr(old->names[i], '/');
        if (slash) {
            *slash = '\0';
            unlinkat(dir_fd, old->names[i], AT_REMOVEDIR);   /* fails unless empty: fine */
            *slash = '/';
        }
    }
}

/* Replace the files of an existing llmc output directory (see the top): check,
 * 1. the manifest lists the old and the new files, 2. the new files move in,
 * 3. the stale ones go, 4. the manifest lists the new files only; a crash at
 * any point leaves a manifest that covers every llmc file present. */
static int commit_in_place(OutDir *o, char *err, size_t errlen)
{
    int dir_fd = open(o->final_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", o->final_path, strerror(errno));
        return -1;
    }
    int rc = -1;
    NameList old = {0}, now = {0}, none = {0};
    bool legacy = false;
    int m = read_manifest(dir_fd, &old, &legacy);
    if (m < 0) {
        snprintf(err, errlen, "cannot read %s/%s: %s", o->final_path, OUTDIR_MARKER, strerror(errno));
        goto done;
    }
    if (m == 0 && check_empty(o, dir_fd, err, errlen)) goto done;
    for (int i = 0; i < o->nfiles; i++)
        if (list_add(&now, o->files[i]) != 0) { snprintf(err, errlen, "out of memory"); goto done; }
    if (check_replaceable(o, dir_fd, &old, &now, legacy, err, errlen)) goto done;
    if (put_manifest(o, dir_fd, &old, &now, err, errlen)) goto done;
    fsync(dir_fd);
    if (move_new_files(o, dir_fd, &now, err, errlen)) goto done;
    remove_stale(dir_fd, &old, &now);
    if (put_manifest(o, dir_fd, &now, &none, err, errlen)) goto done;
    for (int i = 0; i < o->ndirs; i++) {
        int sub = openat(dir_fd, o->dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) { fsync(sub); close(sub); }
    }
    if (fsync(dir_fd) != 0) {
        snprintf(err, errlen, "cannot sync '%s': %s", o->final_path, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    list_free(&old);
    list_free(&now);
    close(dir_fd);
    return rc;
}

int outdir_commit(OutDir *o, char *err, size_t errlen)
{
    /* the manifest of this output, for a later compile into the same DIR */
    NameList now = {o->files, o->nfiles}, none = {0};
    char *text = manifest_text(&now, &none);
    if (!text) { snprintf(err, errlen, "out of memory"); return -1; }
    int w = stage_text(o, OUTDIR_MARKER, text, err, errlen);
    free(text);
    if (w != 0) return -1;
    if (fsync(o->tmp_fd) != 0) {
        snprintf(err, errlen, "cannot sync %s: %s", o->tmp_path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(o->final_path, &st) != 0) {
        if (errno != ENOENT) {
            snprintf(err, errlen, "cannot inspect '%s': %s", o->final_path, strerror(errno));
            return -1;
        }
        if (rename(o->tmp_path, o->final_path) != 0) {
            snprintf(err, errlen, "cannot create '%s': %s", o->final_path, strerror(errno));
            return -1;
        }
        close(o->tmp_fd);
        o->tmp_fd = -1;
        free(o->tmp_path);
        o->tmp_path = NULL;
        fsync_parent(o->final_path);
        return 0;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(err, errlen, "'%s' is a symbolic link; name the directory it points to", o->final_path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "'%s' exists and is not a directory; not replacing it", o->final_path);
        return -1;
    }
    return commit_in_place(o, err, errlen);
}

void outdir_abort(OutDir *o)
{
    if (o->tmp_fd >= 0) close(o->tmp_fd);
    o->tmp_fd = -1;
    if (o->tmp_path) remove_tree(o->tmp_path);
    free(o->tmp_path);
    o->tmp_path = NULL;
    free(o->final_path);
    o->final_path = NULL;
    for (int i = 0; i < o->nfiles; i++) free(o->files[i]);
    free(o->files);
    o->files = NULL;
    o->nfiles = 0;
    for (int i = 0; i < o->ndirs; i++) free(o->dirs[i]);
    free(o->dirs);
    o->dirs = NULL;
    o->ndirs = 0;
}
