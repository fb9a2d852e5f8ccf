/* store_files.c — the store's file helpers (atomic writes, copies, flat
 * directories), MANIFEST.sha256 written and checked, `llmc-train verify`. */
#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "run_formats.h"   /* contract/: the checkpoint files' names */
#include "hf_config.h"
#include "log.h"
#include "sha256.h"
#include "store_internal.h"

/* snprintf for messages, where cutting a long path short is fine. */
void store_say(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (len) vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

/* A rename is durable only once its directory is synced: after a power loss the new name could otherwise be
 * missing though the file's data is on disk. */
int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* PATH holds DATA whole or keeps what it held: written as PATH.tmp, fsync'd, renamed over PATH (rename is
 * atomic within a file system). The directory is not synced here; the caller syncs it after its renames. */
int store_write_file_atomic(const char *path, const char *data, size_t n, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    int rc = fwrite(data, 1, n, f) != n || fflush(f) || fsync(fileno(f));
    if (fclose(f)) rc = 1;
    if (!rc && rename(tmp, path)) rc = 1;
    if (rc) { snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno)); unlink(tmp); return -1; }
    return 0;
}

/* FROM's bytes into TO (created or truncated), fsync'd. Not atomic: the callers copy into a temporary
 * directory that is renamed into place as a whole. */
int store_copy_file(const char *from, const char *to, char *err, size_t errlen)
{
    FILE *in = fopen(from, "rb");
    if (!in) { snprintf(err, errlen, "%s: %s", from, strerror(errno)); return -1; }
    FILE *out = fopen(to, "wb");
    if (!out) { fclose(in); snprintf(err, errlen, "%s: %s", to, strerror(errno)); return -1; }
    char buf[1 << 16];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) { rc = -1; break; }
    if (ferror(in)) rc = -1;
    fclose(in);
    if (fflush(out) || fsync(fileno(out))) rc = -1;
    if (fclose(out)) rc = -1;
    if (rc) snprintf(err, errlen, "copy %s -> %s failed: %s", from, to, strerror(errno));
    return rc;
}

/* Remove a directory with only regular files in it (our own checkpoint dirs). */
void store_remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        /* "." and ".." only: a dot file in a checkpoint directory is removed like the rest */
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    /* fails, leaving DIR, when something could not be unlinked (a subdirectory): store_clear_name checks */
    rmdir(dir);
}

/* dir (a step directory, or the temporary one of a save) removed so that its
 * name can be written again; when it cannot be (it holds a subdirectory, a
 * file that cannot be unlinked, or it is not a directory) it is renamed to
 * CKPT/.set-aside-NAME-N with a warning instead, so that a requeued run does
 * not fail on it at the same step forever. 0, or -1 with err. */
int store_clear_name(const char *ckpt_dir, const char *dir, const char *name, char *err, size_t errlen)
{
    store_remove_flat_dir(dir);
    struct stat st;
    if (lstat(dir, &st) != 0 && errno == ENOENT) return 0;
    char aside[4200];
    int e = EEXIST;
    /* the first free suffix; 1000 set-aside copies of one name means something else is wrong */
    for (int i = 1; i <= 1000; i++) {
        snprintf(aside, sizeof aside, "%s/.set-aside-%s-%d", ckpt_dir, name, i);
        if (lstat(aside, &st) == 0) continue;
        if (rename(dir, aside) == 0) {
            log_warn("%s could not be removed (it holds a subdirectory or a file that cannot be deleted, or is not "
                     "a directory): set aside as %s; delete it when you have looked at it", dir, aside);
            return 0;
        }
        e = errno;
        break;
    }
    snprintf(err, errlen, "%s can neither be removed nor set aside: %s", dir, strerror(e));
    return -1;
}

/* PATH is copied into a 4 KiB buffer (PATH_MAX on Linux); each '/' is cut in turn to create the prefix. */
int mkdir_parents(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return -1;
        *s = '/';
    }
    if (mkdir(p, 0755) && errno != EEXIST) return -1;
    return 0;
}

/* qsort's comparison for an array of C strings: byte order, the same on every machine whatever the locale. */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of the regular files in dir (without MANIFEST.sha256). */
static char **list_files(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[4096];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        /* a vanished name, a directory or a FIFO is skipped; stat follows links, so a link to a file is listed
         * (and manifest_check then refuses it: open_regular does not follow links) */
        if (stat(p, &sb) || !S_ISREG(sb.st_mode) || !strcmp(e->d_name, ckpt_files[CF_MANIFEST])) continue;
        /* out of memory ends the list early: a manifest of fewer files then fails its own check, never passes */
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn) break;
        names = nn;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    /* an empty directory gives an empty list, not NULL (which means DIR could not be read) */
    return names ? names : calloc(1, sizeof *names);
}

/* MANIFEST.sha256 over every regular file of DIR, each read and hashed; sha256sum's text format, so
 * `sha256sum -c MANIFEST.sha256` in DIR checks it too. */
int manifest_write(const char *dir, char *err, size_t errlen)
{
    return manifest_write_known(dir, NULL, 0, err, errlen);
}

int manifest_write_known(const char *dir, const ManifestHash *known, int nknown, char *err, size_t errlen)
{
    int n = 0;
    char **names = list_files(dir, &n);
    if (!names) { snprintf(err, errlen, "%s: %s", dir, strerror(errno)); return -1; }
    /* a line is 64 hex digits, two spaces, the name (at most 255 bytes on Linux) and '\n': under 400 */
    size_t cap = (size_t)n * 400 + 1, len = 0;
    char *text = malloc(cap);
    int rc = text ? 0 : -1;
    for (int i = 0; i < n && !rc; i++) {
        char p[4096], hex[65];
        const char *have = NULL;
        for (int k = 0; k < nknown && !have; k++) if (!strcmp(known[k].name, names[i])) have = known[k].hex;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        /* a known digest was computed over the bytes as they were written: no second read */
        if (have) snprintf(hex, sizeof hex, "%s", have);
        else if (sha256_file_hex(p, hex)) { snprintf(err, errlen, "%s: %s", p, strerror(errno)); rc = -1; break; }
        len += (size_t)snprintf(text + len, cap - len, "%s  %s\n", hex, names[i]);
    }
    if (!rc) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, ckpt_files[CF_MANIFEST]);
        rc = store_write_file_atomic(p, text, len, err, errlen);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(text);
    return rc;
}

/* Open path for reading only if it is a regular file: O_NONBLOCK, so a FIFO
 * without a writer cannot block the open, then fstat. fd, or -1 with err
 * ("PATH: not a regular file" or strerror). *not_regular set when that was why. */
static int open_regular(const char *path, int *not_regular, char *err, size_t errlen)
{
    if (not_regular) *not_regular = 0;
    /* O_NOFOLLOW: a checkpoint's or an export's file is itself, not a link to
     * bytes elsewhere that verify and resume would vouch for */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ELOOP) {
        if (not_regular) *not_regular = 1;
        snprintf(err, errlen, "%s: not a regular file (a symbolic link)", path);
        return -1;
    }
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        int e = errno;
        int notreg = !fstat(fd, &sb) && !S_ISREG(sb.st_mode);
        close(fd);
        if (notreg) {
            if (not_regular) *not_regular = 1;
            snprintf(err, errlen, "%s: not a regular file (%s)", path,
                     S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                     : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : S_ISSOCK(sb.st_mode) ? "a socket" : "not a file");
        } else snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* sha256 of a regular file. 0, or -1 with err.
 * Through open_regular, so a FIFO or link listed in a manifest fails rather than blocks or vouches for another
 * file. BUF: 1 MiB, static to keep it off the stack. */
static int hash_regular(const char *path, char hex[65], int *not_regular, char *err, size_t errlen)
{
    int fd = open_regular(path, not_regular, err, errlen);
    if (fd < 0) return -1;
    Sha256 s;
    sha256_init(&s);
    static unsigned char buf[1 << 20];
    uint8_t d[32];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { store_say(err, errlen, "%s: %s", path, strerror(errno)); close(fd); sha256_final(&s, d); return -1; }
        if (n == 0) break;
        sha256_update(&s, buf, (size_t)n);
    }
    close(fd);
    if (sha256_final_hex(&s, hex)) { store_say(err, errlen, "%s: sha256 failed (libcrypto)", path); return -1; }
    return 0;
}

/* Read a small regular file into a NUL-terminated malloc'd buffer. NULL with err. */
char *store_read_regular(const char *path, size_t max, char *err, size_t errlen)
{
    int fd = open_regular(path, NULL, err, errlen);
    if (fd < 0) return NULL;
    char *buf = malloc(max + 1);
    size_t got = 0;
    /* up to MAX + 1 bytes: one more than MAX tells a file that is too large */
    while (buf && got <= max) {
        ssize_t n = read(fd, buf + got, max + 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); free(buf); close(fd); return NULL; }
        if (n == 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    if (got > max) { snprintf(err, errlen, "%s: larger than %zu bytes", path, max); free(buf); return NULL; }
    buf[got] = 0;
    return buf;
}

/* One manifest line, in either of sha256sum's formats: "HASH  NAME" (text mode)
 * or "HASH *NAME" (binary mode). HASH: 64 hex digits (either case). NAME: a
 * file of the directory itself (no '/'). The name's start, or NULL. */
static const char *manifest_line_name(const char *line, size_t L)
{
    if (L < 67 || strspn(line, "0123456789abcdefABCDEF") != 64 || line[64] != ' ' ||
        (line[65] != ' ' && line[65] != '*'))
        return NULL;
    const char *name = line + 66;
    if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) return NULL;
    return name;
}

int manifest_check(const char *dir, FILE *out, char *err, size_t errlen)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, ckpt_files[CF_MANIFEST]);
    int fd = open_regular(p, NULL, err, errlen);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        if (fd >= 0) { close(fd); snprintf(err, errlen, "%s: %s", p, strerror(errno)); }
        return -1;
    }
    /* LINE: 67 bytes of hash and separator plus a name; FIRST_BAD: the message err gets (it fits cmd_verify's) */
    char line[4600], first_bad[1200] = "";
    char **listed = NULL;
    int bad = 0, lines = 0, lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t L = strlen(line);
        /* LINE full with no '\n': longer than any line we accept (a last line without '\n' is fine) */
        if (L && line[L - 1] == '\n') line[--L] = 0;
        else if (L == sizeof line - 1) { snprintf(err, errlen, "%s:%d: line too long", p, lineno); rc = -1; break; }
        /* a blank line is skipped */
        if (!L) continue;
        const char *name = manifest_line_name(line, L);
        if (!name) {
            snprintf(err, errlen, "%s:%d: not a 'SHA256  FILE' or 'SHA256 *FILE' line", p, lineno);
            rc = -1;
            break;
        }
        char **nl = realloc(listed, (size_t)(lines + 1) * sizeof *nl);
        if (!nl || !(nl[lines] = strdup(name))) { listed = nl ? nl : listed; snprintf(err, errlen, "out of memory"); rc = -1; break; }
        listed = nl;
        lines++;
        char fp[4096 + 4700], hex[65], herr[1024];
        snprintf(fp, sizeof fp, "%s/%s", dir, name);
        int notreg = 0;
        const char *why = NULL;
        /* the digest compares in either case: sha256sum writes lowercase, but a hand-made manifest may not */
        if (hash_regular(fp, hex, &notreg, herr, sizeof herr)) why = notreg ? "FAILED not a regular file" : "FAILED open or read";
        else if (strncasecmp(hex, line, 64)) why = "FAILED";
        if (why) {
            if (!bad) {
                if (!strcmp(why, "FAILED")) store_say(first_bad, sizeof first_bad, "%s: checksum differs from %s", fp, p);
                else snprintf(first_bad, sizeof first_bad, "%s", herr);
            }
            bad = 1;
        }
        /* the same words sha256sum -c prints */
        if (out) fprintf(out, "%s: %s\n", name, why ? why : "OK");
    }
    fclose(f);
    /* an empty manifest would vouch for nothing: unreadable, not verified */
    if (!rc && !lines) { snprintf(err, errlen, "%s: lists no files", p); rc = -1; }
    if (!rc) {
        /* a file present but not listed is also a mismatch: the manifest covers the whole directory */
        int n = 0;
        char **names = list_files(dir, &n);
        for (int i = 0; names && i < n; i++) {
            int is_listed = 0;
            for (int j = 0; j < lines && !is_listed; j++) is_listed = !strcmp(listed[j], names[i]);
            if (!is_listed) {
                if (!bad) store_say(first_bad, sizeof first_bad, "%s/%s: not listed in %s", dir, names[i], p);
                bad = 1;
                if (out) fprintf(out, "%s: FAILED not in manifest\n", names[i]);
            }
            free(names[i]);
        }
        free(names);
        if (bad) snprintf(err, errlen, "%s", first_bad);
        rc = bad;
    }
    for (int j = 0; j < lines; j++) free(listed[j]);
    free(listed);
    return rc;
}

int cmd_verify(int argc, char **argv)
{
    const char *dir;
    int rc = args_one_operand("llmc-train verify",
                              "usage: llmc-train verify DIR   (checks DIR/MANIFEST.sha256)\n"
                              "  every file listed matches, and every file is listed (sha256sum -c agrees)\n"
                              "exit status: 0 verified, 1 a mismatch, 2 no readable manifest or usage error\n",
                              argc, argv, &dir);
    if (rc >= 0) return rc;
    char err[1400];
    rc = manifest_check(dir, stdout, err, sizeof err);
    if (rc < 0) { log_error("%s", err); return 2; }
    if (rc) log_error("%s: checksum mismatch (first: %s)", dir, err);
    return rc ? 1 : 0;
}
