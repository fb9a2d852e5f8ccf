/* emit_fs.c — the output directory, written atomically.
 *
 * Everything is written into a fresh temporary directory beside DIR
 * (".DIR.llmc-XXXXXX", same file system, so rename is atomic), each file
 * fsync'd; then the temporary directory takes DIR's place in one step
 * (renameat2 RENAME_EXCHANGE; rename(2) when DIR does not exist) and the old
 * tree is removed. A failure before that step leaves DIR exactly as it was.
 * An existing DIR is replaced only if llmc wrote it (it holds OUTDIR_MARKER)
 * or it is empty, so `-o ~` cannot wipe a home directory. Files are created
 * with openat(O_EXCL|O_NOFOLLOW) under the temporary directory's fd, from
 * names checked to be plain components: nothing is written outside DIR. */
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
    return 0;
}

/* 1: llmc's earlier output or an empty directory; 0: something else; -1: error */
static int replaceable(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return -1;
    int ok = 1;
    bool marker = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (strcmp(e->d_name, OUTDIR_MARKER) == 0) marker = true;
        else ok = 0;
    }
    closedir(d);
    return marker ? 1 : ok;
}

static void fsync_parent(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) { fsync(fd); close(fd); }
    free(copy);
}

int outdir_commit(OutDir *o, char *err, size_t errlen)
{
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
    int r = replaceable(o->final_path);
    if (r < 0) {
        snprintf(err, errlen, "cannot read '%s': %s", o->final_path, strerror(errno));
        return -1;
    }
    if (r == 0) {
        snprintf(err, errlen, "'%s' exists and was not written by llmc (no %s in it); not replacing it",
                 o->final_path, OUTDIR_MARKER);
        return -1;
    }
    /* swap: tmp_path now names the old tree */
    if (renameat2(AT_FDCWD, o->tmp_path, AT_FDCWD, o->final_path, RENAME_EXCHANGE) != 0) {
        if (errno != EINVAL && errno != ENOSYS) {
            snprintf(err, errlen, "cannot replace '%s': %s", o->final_path, strerror(errno));
            return -1;
        }
        /* file systems without exchange: move the old tree aside first */
        char *old = NULL;
        if (asprintf(&old, "%s.old", o->tmp_path) < 0) { snprintf(err, errlen, "out of memory"); return -1; }
        if (rename(o->final_path, old) != 0) {
            snprintf(err, errlen, "cannot move '%s' aside: %s", o->final_path, strerror(errno));
            free(old);
            return -1;
        }
        if (rename(o->tmp_path, o->final_path) != 0) {
            snprintf(err, errlen, "cannot replace '%s': %s", o->final_path, strerror(errno));
            rename(old, o->final_path);   /* put the old one back */
            free(old);
            return -1;
        }
        remove_tree(old);
        free(old);
        close(o->tmp_fd);
        o->tmp_fd = -1;
        free(o->tmp_path);
        o->tmp_path = NULL;
        fsync_parent(o->final_path);
        return 0;
    }
    fsync_parent(o->final_path);
    close(o->tmp_fd);
    o->tmp_fd = -1;
    remove_tree(o->tmp_path);
    free(o->tmp_path);
    o->tmp_path = NULL;
    return 0;
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
}
