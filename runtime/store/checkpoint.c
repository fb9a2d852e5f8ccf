/* checkpoint.c — training checkpoints, HF export, manifests, `llmc-train verify`. */
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
#include "commands.h"
#include "run_formats.h"   /* contract/: the checkpoint files' names */
#include "hf_config.h"
#include "log.h"
#include "sha256.h"

/* snprintf for messages, where cutting a long path short is fine. */
static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (len) vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int write_file_atomic(const char *path, const char *data, size_t n, char *err, size_t errlen)
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

static int copy_file(const char *from, const char *to, char *err, size_t errlen)
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
static void remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* dir (a step directory, or the temporary one of a save) removed so that its
 * name can be written again; when it cannot be (it holds a subdirectory, a
 * file that cannot be unlinked, or it is not a directory) it is renamed to
 * CKPT/.set-aside-NAME-N with a warning instead, so that a requeued run does
 * not fail on it at the same step forever. 0, or -1 with err. */
static int clear_name(const char *ckpt_dir, const char *dir, const char *name, char *err, size_t errlen)
{
    remove_flat_dir(dir);
    struct stat st;
    if (lstat(dir, &st) != 0 && errno == ENOENT) return 0;
    char aside[4200];
    int e = EEXIST;
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
        if (stat(p, &sb) || !S_ISREG(sb.st_mode) || !strcmp(e->d_name, ckpt_files[CF_MANIFEST])) continue;
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn) break;
        names = nn;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    return names ? names : calloc(1, sizeof *names);
}

int manifest_write(const char *dir, char *err, size_t errlen)
{
    return manifest_write_known(dir, NULL, 0, err, errlen);
}

int manifest_write_known(const char *dir, const ManifestHash *known, int nknown, char *err, size_t errlen)
{
    int n = 0;
    char **names = list_files(dir, &n);
    if (!names) { snprintf(err, errlen, "%s: %s", dir, strerror(errno)); return -1; }
    size_t cap = (size_t)n * 400 + 1, len = 0;
    char *text = malloc(cap);
    int rc = text ? 0 : -1;
    for (int i = 0; i < n && !rc; i++) {
        char p[4096], hex[65];
        const char *have = NULL;
        for (int k = 0; k < nknown && !have; k++) if (!strcmp(known[k].name, names[i])) have = known[k].hex;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (have) snprintf(hex, sizeof hex, "%s", have);
        else if (sha256_file_hex(p, hex)) { snprintf(err, errlen, "%s: %s", p, strerror(errno)); rc = -1; break; }
        len += (size_t)snprintf(text + len, cap - len, "%s  %s\n", hex, names[i]);
    }
    if (!rc) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, ckpt_files[CF_MANIFEST]);
        rc = write_file_atomic(p, text, len, err, errlen);
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

/* sha256 of a regular file. 0, or -1 with err. */
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
        if (n < 0) { say(err, errlen, "%s: %s", path, strerror(errno)); close(fd); sha256_final(&s, d); return -1; }
        if (n == 0) break;
        sha256_update(&s, buf, (size_t)n);
    }
    close(fd);
    if (sha256_final_hex(&s, hex)) { say(err, errlen, "%s: sha256 failed (libcrypto)", path); return -1; }
    return 0;
}

/* Read a small regular file into a NUL-terminated malloc'd buffer. NULL with err. */
static char *read_regular(const char *path, size_t max, char *err, size_t errlen)
{
    int fd = open_regular(path, NULL, err, errlen);
    if (fd < 0) return NULL;
    char *buf = malloc(max + 1);
    size_t got = 0;
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
    char line[4600], first_bad[1200] = "";
    char **listed = NULL;
    int bad = 0, lines = 0, lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t L = strlen(line);
        if (L && line[L - 1] == '\n') line[--L] = 0;
        else if (L == sizeof line - 1) { snprintf(err, errlen, "%s:%d: line too long", p, lineno); rc = -1; break; }
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
        if (hash_regular(fp, hex, &notreg, herr, sizeof herr)) why = notreg ? "FAILED not a regular file" : "FAILED open or read";
        else if (strncasecmp(hex, line, 64)) why = "FAILED";
        if (why) {
            if (!bad) {
                if (!strcmp(why, "FAILED")) say(first_bad, sizeof first_bad, "%s: checksum differs from %s", fp, p);
                else snprintf(first_bad, sizeof first_bad, "%s", herr);
            }
            bad = 1;
        }
        if (out) fprintf(out, "%s: %s\n", name, why ? why : "OK");
    }
    fclose(f);
    if (!rc && !lines) { snprintf(err, errlen, "%s: lists no files", p); rc = -1; }
    if (!rc) {
        /* a file present but not listed is also a mismatch: the manifest covers the whole directory */
        int n = 0;
        char **names = list_files(dir, &n);
        for (int i = 0; names && i < n; i++) {
            int is_listed = 0;
            for (int j = 0; j < lines && !is_listed; j++) is_listed = !strcmp(listed[j], names[i]);
            if (!is_listed) {
                if (!bad) say(first_bad, sizeof first_bad, "%s/%s: not listed in %s", dir, names[i], p);
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

/* ---- tensors of a model ---- */

static StWriteTensor *model_tensors(const Model *m, const float *buf, const char *prefix, char ***names_out, int *n_out)
{
    StWriteTensor *t = calloc((size_t)m->n_params, sizeof *t);
    char **names = calloc((size_t)m->n_params, sizeof *names);
    if (!t || !names) { free(t); free(names); return NULL; }
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        size_t len = strlen(prefix) + strlen(p->name) + 1;
        names[i] = malloc(len);
        if (names[i]) snprintf(names[i], len, "%s%s", prefix, p->name);
        t[i] = (StWriteTensor){names[i], p->ndim, {p->shape[0], p->shape[1]}, buf + p->offset};
    }
    *names_out = names;
    *n_out = m->n_params;
    return t;
}

static void free_tensors(StWriteTensor *t, char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(t);
}

/* model.safetensors at path; its sha256 (hashed while written) into hex. */
static int write_model_file(const char *path, const Model *m, const float *buf, const char *prefix, StDtype dt,
                            char hex[65], char *err, size_t errlen)
{
    char **names;
    int n;
    StWriteTensor *t = model_tensors(m, buf, prefix, &names, &n);
    if (!t) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = st_write_sha256(path, t, n, dt, "\"format\":\"pt\"", hex, err, errlen);
    free_tensors(t, names, n);
    return rc;
}

/* Tensor t's elements that part asks for (all when part is NULL or n < 0),
 * read to buf + off (off: the tensor's first float in the flat buffer). */
static int read_tensor_part(const StModel *st, const StTensor *t, float *buf, size_t off, const ModelPart *part,
                            size_t *n_read, char *err, size_t errlen)
{
    if (!part || part->n < 0) {
        *n_read += t->numel;
        return st_read_f32(st, t, buf + off, err, errlen);
    }
    for (int k = 0; k < part->n; k++) {
        size_t lo = part->r[k][0] > off ? part->r[k][0] : off;
        size_t hi = part->r[k][1] < off + t->numel ? part->r[k][1] : off + t->numel;
        if (lo >= hi) continue;
        if (st_read_f32_range(st, t, lo - off, hi - lo, buf + lo, err, errlen)) return -1;
        *n_read += hi - lo;
    }
    return 0;
}

/* Read every tensor of m (name = prefix + param name) from st into buf; only
 * part of it when part is set (every name and shape is checked all the same). */
static int read_model_tensors(const StModel *st, const Model *m, float *buf, const char *prefix,
                              const ModelPart *part, size_t *n_read, char *err, size_t errlen)
{
    size_t unused = 0;
    if (!n_read) n_read = &unused;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        char name[160];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        const StTensor *t = st_find(st, name);
        if (!t) { snprintf(err, errlen, "%s: tensor %s is missing", st->files[0], name); return -1; }
        int shape_ok = t->ndim == p->ndim && t->shape[0] == p->shape[0] && (p->ndim == 1 || t->shape[1] == p->shape[1]);
        if (!shape_ok) {
            snprintf(err, errlen, "%s: tensor %s has shape [%lld%s%lld], the model needs [%lld%s%lld]",
                     st->files[t->file], name, (long long)t->shape[0], t->ndim > 1 ? "," : "",
                     t->ndim > 1 ? (long long)t->shape[1] : 0LL, (long long)p->shape[0], p->ndim > 1 ? "," : "",
                     p->ndim > 1 ? (long long)p->shape[1] : 0LL);
            return -1;
        }
        if (read_tensor_part(st, t, buf, p->offset, part, n_read, err, errlen)) return -1;
    }
    return 0;
}

int load_hf_weights_part(const char *path, Model *m, const ModelPart *part, size_t *n_read, char *err,
                         size_t errlen)
{
    StModel st;
    if (n_read) *n_read = 0;
    if (st_open(&st, path, err, errlen)) return -1;
    int rc = read_model_tensors(&st, m, m->w, "", part, n_read, err, errlen);
    st_close(&st);
    return rc;
}

int load_hf_weights(const char *path, Model *m, char *err, size_t errlen)
{
    return load_hf_weights_part(path, m, NULL, NULL, err, errlen);
}

/* ---- training checkpoints ---- */

/* Seconds on a monotonic clock, for the progress lines of a save or a verify. */
static double ckpt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ckpt_fp_add(CkptFingerprint *fp, const char *key, const char *fmt, ...)
{
    if (fp->n >= CKPT_FP_MAX) return;
    snprintf(fp->f[fp->n].key, sizeof fp->f[fp->n].key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fp->f[fp->n].val, sizeof fp->f[fp->n].val, fmt, ap);
    va_end(ap);
    fp->n++;
}

/* Append s as a JSON string (quoted, escaped). */
static size_t json_quote(char *out, size_t cap, size_t len, const char *s)
{
    if (len < cap) out[len] = '"';
    len++;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char e[8];
        if (c == '"' || c == '\\') snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20) snprintf(e, sizeof e, "\\u%04x", c);
        else { e[0] = (char)c; e[1] = 0; }
        for (char *q = e; *q; q++, len++) if (len < cap) out[len] = *q;
    }
    if (len < cap) out[len] = '"';
    return len + 1;
}

static char *state_json(const AdamW *opt, const TrainState *s, int64_t write_seq, const CkptFingerprint *fp,
                        const CkptPlanRef *plan_ref)
{
    size_t cap = 1024 + (fp ? (size_t)fp->n * 300 : 0) + (plan_ref ? 6 * sizeof plan_ref->path + 128 : 0);
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t len = (size_t)snprintf(buf, cap,
             "{\n  \"format\": \"llmc-train-checkpoint\",\n  \"version\": 2,\n  \"write_seq\": %" PRId64 ",\n"
             "  \"" CKPT_STATE_STEP_KEY "\": %" PRId64 ",\n"
             "  \"adam_t\": %" PRId64 ",\n  \"rows_consumed\": %" PRId64 ",\n  \"tokens_seen\": %" PRId64 ",\n"
             "  \"rng\": [\"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\"]",
             write_seq, s->step, opt->t, s->rows_consumed, s->tokens_seen, s->rng.s[0], s->rng.s[1], s->rng.s[2],
             s->rng.s[3]);
    if (fp) {
        len += (size_t)snprintf(buf + len, cap - len, ",\n  \"fingerprint\": {");
        for (int i = 0; i < fp->n && len < cap; i++) {
            len += (size_t)snprintf(buf + len, cap - len, "%s\n    ", i ? "," : "");
            len = json_quote(buf, cap, len, fp->f[i].key);
            if (len + 2 < cap) { buf[len++] = ':'; buf[len++] = ' '; }
            len = json_quote(buf, cap, len, fp->f[i].val);
        }
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "\n  }");
    }
    if (plan_ref && plan_ref->path[0] && len < cap) {
        len += (size_t)snprintf(buf + len, cap - len, ",\n  \"plan\": {\"path\": ");
        len = json_quote(buf, cap, len, plan_ref->path);
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, ", \"sha256\": \"%s\"}", plan_ref->sha256);
    }
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "\n}\n");
    if (len >= cap) { free(buf); return NULL; }
    return buf;
}

#define STATE_MAX_BYTES (1u << 20)
#define EXACT_INT_MAX 9007199254740992.0   /* 2^53: larger JSON numbers are not exact integers */

/* An integer field of state.json in [lo, hi]. 0, or -1 with "PATH: field KEY ..." in err. */
static int state_int(const cJSON *o, const char *key, double lo, double hi, int64_t *out, const char *path,
                     char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) { snprintf(err, errlen, "%s: field \"%s\" is missing", path, key); return -1; }
    if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble || floor(v->valuedouble) != v->valuedouble) {
        snprintf(err, errlen, "%s: field \"%s\" is not an integer", path, key);
        return -1;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(err, errlen, "%s: field \"%s\" = %.17g is outside %.17g..%.17g", path, key, v->valuedouble, lo, hi);
        return -1;
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

typedef struct {
    int64_t adam_t, write_seq;
    TrainState st;
    int has_fp;
    int has_plan_ref;
    CkptPlanRef plan_ref;
} ParsedState;

/* state.json's optional "plan": {"path": absolute, no control bytes, "sha256":
 * 64 hex digits}. 0 (ps->has_plan_ref says whether it was there), or -1 (err). */
static int state_plan_ref(const cJSON *o, const char *path, ParsedState *ps, char *err, size_t errlen)
{
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "plan");
    if (!pr) return 0;
    const char *pp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pr, "path"));
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pr, "sha256"));
    if (!cJSON_IsObject(pr) || !pp || !ph) {
        say(err, errlen, "%s: field \"plan\" is not {\"path\": STRING, \"sha256\": STRING}", path);
        return -1;
    }
    size_t n = strlen(pp);
    int ctrl = 0;
    for (const unsigned char *c = (const unsigned char *)pp; *c; c++) ctrl |= *c < 0x20 || *c == 0x7f;
    if (pp[0] != '/' || n >= sizeof ps->plan_ref.path || ctrl) {
        say(err, errlen, "%s: field \"plan\".\"path\" is not an absolute path of at most %zu bytes without control "
                 "characters", path, sizeof ps->plan_ref.path - 1);
        return -1;
    }
    if (strlen(ph) != 64 || strspn(ph, "0123456789abcdef") != 64) {
        say(err, errlen, "%s: field \"plan\".\"sha256\" is not 64 lowercase hex digits", path);
        return -1;
    }
    memcpy(ps->plan_ref.path, pp, n + 1);
    memcpy(ps->plan_ref.sha256, ph, 65);
    ps->has_plan_ref = 1;
    return 0;
}

/* Range-check a checkpoint's state.json text (path for messages; dir_step: the
 * step its directory name says). Returns 0; -1 when invalid (err names path and
 * field); -2 when valid but its fingerprint differs from want (err names the fields). */
static int parse_state(const char *path, const char *name, const char *text, int64_t dir_step,
                       const CkptLimits *lim, const CkptFingerprint *want, ParsedState *ps, char *err, size_t errlen)
{
    memset(ps, 0, sizeof *ps);
    cJSON *o = cJSON_Parse(text);
    int rc = -1;
    if (!cJSON_IsObject(o)) { say(err, errlen, "%s: not a JSON object", path); goto done; }
    const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "format"));
    if (!fmt || strcmp(fmt, "llmc-train-checkpoint")) {
        say(err, errlen, "%s: field \"format\" is not \"llmc-train-checkpoint\"", path);
        goto done;
    }
    int64_t version;
    if (state_int(o, "version", 1, 2, &version, path, err, errlen)) goto done;
    if (version >= 2 && state_int(o, "write_seq", 1, EXACT_INT_MAX, &ps->write_seq, path, err, errlen)) goto done;

    /* the fingerprint first: a checkpoint of another plan is refused as such */
    const cJSON *fpo = cJSON_GetObjectItemCaseSensitive(o, "fingerprint");
    if (version >= 2 && !cJSON_IsObject(fpo)) {
        say(err, errlen, "%s: field \"fingerprint\" is missing or not an object", path);
        goto done;
    }
    ps->has_fp = fpo != NULL;
    if (fpo && want) {
        char diff[1024] = "";
        size_t dl = 0;
        int nd = 0, known = 0;
        for (int i = 0; i < want->n; i++) {
            const char *have = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fpo, want->f[i].key));
            known += have != NULL;
            if (!have || !strcmp(have, want->f[i].val)) continue;   /* a key an older writer did not record */
            if (dl < sizeof diff)
                dl += (size_t)snprintf(diff + dl, sizeof diff - dl, "%s%s %.60s, the plan says %s", nd ? "; " : "",
                                       want->f[i].key, have, want->f[i].val);
            nd++;
        }
        if (nd) {
            say(err, errlen, "checkpoint %s was written with %s (it belongs to another plan: resume with that plan, "
                     "point checkpoint.dir elsewhere, or pass --fresh to start over at step 0)", name, diff);
            rc = -2;
            goto done;
        }
        /* every writer of version 2 records the fields: an empty (or emptied)
         * fingerprint would turn the plan check off without a word */
        if (version >= 2 && want->n && !known) {
            say(err, errlen, "%s: field \"fingerprint\" records none of the fields a resume checks (%s, ...)", path,
                want->f[0].key);
            goto done;
        }
    }

    double max_steps = lim && lim->total_steps > 0 ? (double)lim->total_steps : EXACT_INT_MAX;
    if (state_int(o, CKPT_STATE_STEP_KEY, 1, max_steps, &ps->st.step, path, err, errlen)) goto done;
    if (dir_step >= 0 && ps->st.step != dir_step) {
        say(err, errlen, "%s: field \"step\" = %" PRId64 " but the directory is for step %" PRId64, path,
                 ps->st.step, dir_step);
        goto done;
    }
    if (state_int(o, "adam_t", 0, EXACT_INT_MAX, &ps->adam_t, path, err, errlen)) goto done;
    if (ps->adam_t != ps->st.step) {
        say(err, errlen, "%s: field \"adam_t\" = %" PRId64 ", not the step %" PRId64 " (one AdamW update per step)",
                 path, ps->adam_t, ps->st.step);
        goto done;
    }
    if (state_int(o, "rows_consumed", 0, EXACT_INT_MAX, &ps->st.rows_consumed, path, err, errlen)) goto done;
    if (lim && lim->global_batch > 0 && (double)ps->st.rows_consumed != (double)ps->st.step * (double)lim->global_batch) {
        say(err, errlen, "%s: field \"rows_consumed\" = %" PRId64 ", not step %" PRId64 " x global_batch %" PRId64,
                 path, ps->st.rows_consumed, ps->st.step, lim->global_batch);
        goto done;
    }
    double max_tok = lim && lim->context > 0 ? (double)ps->st.rows_consumed * (double)lim->context : EXACT_INT_MAX;
    if (max_tok > EXACT_INT_MAX) max_tok = EXACT_INT_MAX;
    if (state_int(o, "tokens_seen", 0, max_tok, &ps->st.tokens_seen, path, err, errlen)) goto done;
    const cJSON *rng = cJSON_GetObjectItemCaseSensitive(o, "rng");
    if (!cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4) {
        say(err, errlen, "%s: field \"rng\" is not an array of 4 hex strings", path);
        goto done;
    }
    uint64_t any = 0;
    for (int i = 0; i < 4; i++) {
        const char *h = cJSON_GetStringValue(cJSON_GetArrayItem(rng, i));
        if (!h || strlen(h) != 16 || strspn(h, "0123456789abcdefABCDEF") != 16) {
            say(err, errlen, "%s: field \"rng\"[%d] is not 16 hex digits", path, i);
            goto done;
        }
        ps->st.rng.s[i] = strtoull(h, NULL, 16);
        any |= ps->st.rng.s[i];
    }
    if (!any) { say(err, errlen, "%s: field \"rng\" is all zero (not a generator state)", path); goto done; }
    if (state_plan_ref(o, path, ps, err, errlen)) goto done;
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

/* The step of a directory name "step-NNNNNNNN" (8 or more digits), or -1. */
static int64_t name_step(const char *name)
{
    if (strncmp(name, CKPT_STEP_PREFIX, strlen(CKPT_STEP_PREFIX))) return -1;
    size_t pl = strlen(CKPT_STEP_PREFIX), nd = strspn(name + pl, "0123456789");
    if (nd < 8 || nd > 15 || name[pl + nd]) return -1;
    return strtoll(name + pl, NULL, 10);
}

typedef struct {
    char name[32];
    int64_t step, seq;   /* seq: write_seq from state.json; 0 none recorded (older writer); -1 unreadable */
} CkptEntry;

static int cmp_newest_first(const void *a, const void *b)
{
    const CkptEntry *x = a, *y = b;
    if (x->seq != y->seq) return x->seq > y->seq ? -1 : 1;
    if (x->step != y->step) return x->step > y->step ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The step-* directories of ckpt_dir, newest first by write order (then step). */
static CkptEntry *scan_ckpts(const char *ckpt_dir, int *count)
{
    *count = 0;
    DIR *d = opendir(ckpt_dir);
    if (!d) return NULL;
    CkptEntry *v = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t step = name_step(e->d_name);
        if (step < 0) continue;
        char p[4200], perr[256];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", ckpt_dir, e->d_name);
        if (lstat(p, &sb) || !S_ISDIR(sb.st_mode)) continue;
        CkptEntry *nv = realloc(v, (size_t)(n + 1) * sizeof *nv);
        if (!nv) break;
        v = nv;
        say(v[n].name, sizeof v[n].name, "%s", e->d_name);
        v[n].step = step;
        v[n].seq = -1;
        snprintf(p, sizeof p, "%s/%s/%s", ckpt_dir, e->d_name, ckpt_files[CF_STATE]);
        char *text = read_regular(p, STATE_MAX_BYTES, perr, sizeof perr);
        cJSON *o = text ? cJSON_Parse(text) : NULL;
        const cJSON *ws = cJSON_GetObjectItemCaseSensitive(o, "write_seq");
        if (cJSON_IsObject(o)) {
            if (!ws) v[n].seq = 0;
            /* at most 2^52, so the next one (+1) is still an exact integer that a resume accepts */
            else if (cJSON_IsNumber(ws) && ws->valuedouble >= 1 && ws->valuedouble <= EXACT_INT_MAX / 2 &&
                     floor(ws->valuedouble) == ws->valuedouble)
                v[n].seq = (int64_t)ws->valuedouble;
        }
        cJSON_Delete(o);
        free(text);
        n++;
    }
    closedir(d);
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_newest_first);
    *count = n;
    return v;
}

/* Rotation: keep the `keep` newest checkpoints by write order, the one `latest`
 * names (just written) and every one written after it; remove the others. */
static void prune(const char *ckpt_dir, const char *latest, int keep)
{
    int n;
    CkptEntry *v = scan_ckpts(ckpt_dir, &n);
    int li = -1;
    for (int i = 0; i < n; i++) if (!strcmp(v[i].name, latest)) li = i;
    int first_removable = keep > li + 1 ? keep : li + 1;
    for (int i = first_removable; i < n; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", ckpt_dir, v[i].name);
        remove_flat_dir(p);
    }
    free(v);
}

/* The write order of a new checkpoint: one more than any already in ckpt_dir. */
static int64_t next_write_seq(const char *ckpt_dir)
{
    int n_old;
    CkptEntry *old = scan_ckpts(ckpt_dir, &n_old);
    int64_t seq = 1;
    for (int i = 0; i < n_old; i++) if (old[i].seq >= seq) seq = old[i].seq + 1;
    free(old);
    return seq;
}

/* The names of step's directory: step-NNNNNNNN and CKPT_DIR/.tmp-step-NNNNNNNN. */
static void step_names(const char *ckpt_dir, int64_t step, char name[32], char tmp[4096])
{
    snprintf(name, 32, CKPT_STEP_PREFIX "%08" PRId64, step);
    snprintf(tmp, 4096, "%s/.tmp-%s", ckpt_dir, name);
}

/* A fresh, empty temporary directory for step (a leftover of an interrupted save removed). */
static int make_tmp_dir(const char *ckpt_dir, const char *name, const char *tmp, char *err, size_t errlen)
{
    if (mkdir_parents(ckpt_dir)) { snprintf(err, errlen, "%s: %s", ckpt_dir, strerror(errno)); return -1; }
    char tname[48];
    snprintf(tname, sizeof tname, "tmp-%s", name);
    if (clear_name(ckpt_dir, tmp, tname, err, errlen)) return -1;
    if (mkdir(tmp, 0755)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    return 0;
}

/* The optimizer file's tensors: exp_avg.* then exp_avg_sq.* (c1 + c2 of
 * them), their names in n1 and n2 until optimizer_tensors_free. NULL when out
 * of memory (nothing to free). */
static StWriteTensor *optimizer_tensors(const Model *m, const AdamW *opt, char ***n1, char ***n2, int *c1, int *c2)
{
    StWriteTensor *t1 = model_tensors(m, opt->m, "exp_avg.", n1, c1);
    StWriteTensor *t2 = model_tensors(m, opt->v, "exp_avg_sq.", n2, c2);
    StWriteTensor *all = t1 && t2 ? malloc((size_t)(*c1 + *c2) * sizeof *all) : NULL;
    if (all) {
        memcpy(all, t1, (size_t)*c1 * sizeof *all);
        memcpy(all + *c1, t2, (size_t)*c2 * sizeof *all);
        free(t1);
        free(t2);
        return all;
    }
    if (t1) free_tensors(t1, *n1, *c1);
    if (t2) free_tensors(t2, *n2, *c2);
    return NULL;
}

static void optimizer_tensors_free(StWriteTensor *all, char **n1, int c1, char **n2, int c2)
{
    free_tensors(all, n1, c1);
    for (int i = 0; i < c2; i++) free(n2[i]);
    free(n2);
}
#define OPTIMIZER_META "\"format\":\"llmc-adamw\""

/* The rest of a save, once model.safetensors and optimizer.safetensors are in
 * tmp with their digests in known[0..1]: state.json, the manifest, the rename,
 * `latest`, rotation. */
static int finish_step(const char *ckpt_dir, const char *name, const char *tmp, int64_t seq, const AdamW *opt,
                       const TrainState *st, const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep,
                       ManifestHash known[3], char *err, size_t errlen)
{
    char final[4096], p[4200];
    snprintf(final, sizeof final, "%s/%s", ckpt_dir, name);
    char *sj = state_json(opt, st, seq, fp, plan_ref);
    snprintf(p, sizeof p, "%s/%s", tmp, ckpt_files[CF_STATE]);
    if (!sj) snprintf(err, errlen, "%s: out of memory", p);
    int rc = sj ? write_file_atomic(p, sj, strlen(sj), err, errlen) : -1;
    if (!rc) {
        Sha256 h;
        sha256_init(&h);
        sha256_update(&h, sj, strlen(sj));
        if (sha256_final_hex(&h, known[2].hex)) { snprintf(err, errlen, "%s: sha256 failed (libcrypto)", p); rc = -1; }
    }
    free(sj);
    if (rc || manifest_write_known(tmp, known, 3, err, errlen)) return -1;
    fsync_dir(tmp);
    /* a stale directory of the same step (resumed from an older one) */
    if (clear_name(ckpt_dir, final, name, err, errlen)) return -1;
    if (rename(tmp, final)) { snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno)); return -1; }
    fsync_dir(ckpt_dir);
    char latest[64];
    snprintf(latest, sizeof latest, "%s\n", name);
    snprintf(p, sizeof p, "%s/%s", ckpt_dir, ckpt_files[CF_LATEST]);
    if (write_file_atomic(p, latest, strlen(latest), err, errlen)) return -1;
    fsync_dir(ckpt_dir);
    prune(ckpt_dir, name, keep);
    return 0;
}

int ckpt_save(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st,
              const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep, char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, st->step, name, tmp);
    if (mkdir_parents(ckpt_dir)) { snprintf(err, errlen, "%s: %s", ckpt_dir, strerror(errno)); return -1; }
    int64_t seq = next_write_seq(ckpt_dir);
    if (make_tmp_dir(ckpt_dir, name, tmp, err, errlen)) return -1;

    /* every file is hashed while it is written: the manifest reads nothing back */
    ManifestHash known[3] = {{"model.safetensors", ""}, {"optimizer.safetensors", ""}, {ckpt_files[CF_STATE], ""}};
    double mb = (double)m->n_floats * 4 * 3 / 1e6, t0 = ckpt_now();
    log_info("checkpoint write %s: %.1f MB (weights, optimizer moments, state; hashed while written)", name, mb);
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    if (write_model_file(p, m, m->w, "", ST_F32, known[0].hex, err, errlen)) return -1;
    log_info("checkpoint write %s: model.safetensors done (%.1f MB, %.1f s)", name, mb / 3, ckpt_now() - t0);
    /* optimizer moments: one file, exp_avg.* then exp_avg_sq.* */
    char **n1, **n2;
    int c1, c2, rc = -1;
    StWriteTensor *all = optimizer_tensors(m, opt, &n1, &n2, &c1, &c2);
    if (all) {
        snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
        rc = st_write_sha256(p, all, c1 + c2, ST_F32, OPTIMIZER_META, known[1].hex, err, errlen);
        optimizer_tensors_free(all, n1, c1, n2, c2);
    } else {
        snprintf(err, errlen, "out of memory");
    }
    if (rc || finish_step(ckpt_dir, name, tmp, seq, opt, st, fp, plan_ref, keep, known, err, errlen)) return -1;
    double dt = ckpt_now() - t0;
    log_info("checkpoint write %s: done, %.1f MB in %.1f s (%.0f MB/s, one pass)", name, mb, dt, dt > 0 ? mb / dt : 0.0);
    return 0;
}

/* ---- sharded save: no rank holds the whole state ---- */

int ckpt_shard_begin(const char *ckpt_dir, const Model *m, const AdamW *opt, int64_t step, char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, step, name, tmp);
    if (make_tmp_dir(ckpt_dir, name, tmp, err, errlen)) return -1;
    log_info("checkpoint write %s: %.1f MB (weights, optimizer moments, state; each rank writes its shard)", name,
             (double)m->n_floats * 4 * 3 / 1e6);
    char **names, **n1, **n2;
    int n, c1, c2;
    StWriteTensor *t = model_tensors(m, m->w, "", &names, &n);
    StWriteTensor *all = t ? optimizer_tensors(m, opt, &n1, &n2, &c1, &c2) : NULL;
    if (!all) {
        if (t) free_tensors(t, names, n);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    int rc = st_create(p, t, n, ST_F32, "\"format\":\"pt\"", err, errlen);
    snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
    if (!rc) rc = st_create(p, all, c1 + c2, ST_F32, OPTIMIZER_META, err, errlen);
    free_tensors(t, names, n);
    optimizer_tensors_free(all, n1, c1, n2, c2);
    if (!rc) fsync_dir(tmp);
    return rc;
}

/* The elements of part (flat offsets into buf's layout) that fall in tensor
 * NAME = prefix + the param name, written in place through fd; every tensor is
 * checked against the model first. */
static int fill_part(const StModel *sm, int fd, const Model *m, const char *prefix, const float *buf,
                     const ModelPart *part, char *err, size_t errlen)
{
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *pi = &m->params[i];
        char name[160];
        snprintf(name, sizeof name, "%s%s", prefix, pi->name);
        const StTensor *t = st_find(sm, name);
        if (!t || t->numel != pi->numel) { snprintf(err, errlen, "%s: tensor %s is missing", sm->files[0], name); return -1; }
        for (int k = 0; k < part->n; k++) {
            size_t lo = part->r[k][0] > pi->offset ? part->r[k][0] : pi->offset;
            size_t hi = part->r[k][1] < pi->offset + pi->numel ? part->r[k][1] : pi->offset + pi->numel;
            if (lo < hi && st_fill(sm, fd, t, lo - pi->offset, hi - lo, buf + lo, err, errlen)) return -1;
        }
    }
    return 0;
}

/* This rank's part of n buffers (tensor names prefix[k] + param name) into
 * the file at path that st_create laid out: opened once, synced once. */
static int fill_file(const char *path, const Model *m, int n, const char *const *prefix, const float *const *buf,
                     const ModelPart *part, char *err, size_t errlen)
{
    StModel sm;
    if (st_open(&sm, path, err, errlen)) return -1;
    int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); rc = -1; }
    for (int k = 0; k < n && !rc; k++) rc = fill_part(&sm, fd, m, prefix[k], buf[k], part, err, errlen);
    if (fd >= 0 && ((fsync(fd) && !rc) | (close(fd) && !rc))) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    st_close(&sm);
    return rc ? -1 : 0;
}

int ckpt_shard_write(const char *ckpt_dir, const Model *m, const AdamW *opt, int64_t step, const ModelPart *part,
                     char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, step, name, tmp);
    const char *const wp[1] = {""}, *const op[2] = {"exp_avg.", "exp_avg_sq."};
    const float *const wb[1] = {m->w}, *const ob[2] = {opt->m, opt->v};
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    if (fill_file(p, m, 1, wp, wb, part, err, errlen)) return -1;
    snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
    return fill_file(p, m, 2, op, ob, part, err, errlen);
}

int ckpt_shard_finish(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st,
                      const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep, char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, st->step, name, tmp);
    double t0 = ckpt_now(), mb = (double)m->n_floats * 4 * 3 / 1e6;
    /* the pieces came from every rank: the digests are of the files as they are on disk */
    ManifestHash known[3] = {{"model.safetensors", ""}, {"optimizer.safetensors", ""}, {ckpt_files[CF_STATE], ""}};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", tmp, known[k].name);
        if (sha256_file_hex(p, known[k].hex)) { snprintf(err, errlen, "%s: cannot hash: %s", p, strerror(errno)); return -1; }
    }
    if (finish_step(ckpt_dir, name, tmp, next_write_seq(ckpt_dir), opt, st, fp, plan_ref, keep, known, err, errlen))
        return -1;
    log_info("checkpoint write %s: done, %.1f MB hashed in %.1f s", name, mb, ckpt_now() - t0);
    return 0;
}

/* Verify and load one checkpoint directory. 0 loaded into m/opt/st; -1 it fails
 * verification (why in err, naming the file); -2 its fingerprint differs (err). */
static int try_load(const char *ckpt_dir, const char *name, const CkptFingerprint *fp, const CkptLimits *lim,
                    Model *m, AdamW *opt, TrainState *st, const ModelPart *part, int *has_fp, char *err, size_t errlen)
{
    char dir[4200], p[4300];
    snprintf(dir, sizeof dir, "%s/%s", ckpt_dir, name);
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        say(err, errlen, "%s: %s", dir, errno && !S_ISDIR(sb.st_mode) ? strerror(errno) : "not a directory");
        return -1;
    }
    double t0 = ckpt_now();
    log_info("checkpoint verify %s: sha256 manifest", name);
    int mc = manifest_check(dir, NULL, err, errlen);
    if (mc) return -1;
    log_info("checkpoint verify %s: ok (%.1f s)", name, ckpt_now() - t0);
    snprintf(p, sizeof p, "%s/%s", dir, ckpt_files[CF_STATE]);
    char *text = read_regular(p, STATE_MAX_BYTES, err, errlen);
    if (!text) return -1;
    ParsedState ps;
    int rc = parse_state(p, dir, text, name_step(name), lim, fp, &ps, err, errlen);
    free(text);
    if (rc) return rc;
    StModel sm;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    rc = read_model_tensors(&sm, m, m->w, "", part, NULL, err, errlen);
    st_close(&sm);
    if (rc) return -1;
    snprintf(p, sizeof p, "%s/optimizer.safetensors", dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    rc = read_model_tensors(&sm, m, opt->m, "exp_avg.", part, NULL, err, errlen);
    if (!rc) rc = read_model_tensors(&sm, m, opt->v, "exp_avg_sq.", part, NULL, err, errlen);
    st_close(&sm);
    if (rc) return -1;
    *st = ps.st;
    opt->t = ps.adam_t;
    *has_fp = ps.has_fp;
    return 0;
}

/* CHECKPOINT as a step directory: dir itself when it holds state.json, else
 * the step its `latest` names. Its name (step-NNNNNNNN) into name. 0, or -1. */
static int step_dir_of(const char *dir, char *step_dir, size_t step_dir_len, char *name, size_t name_len, char *err,
                       size_t errlen)
{
    char p[4300];
    struct stat sb;
    say(p, sizeof p, "%s/%s", dir, ckpt_files[CF_STATE]);
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        say(err, errlen, "%s: %s", dir, stat(dir, &sb) ? strerror(errno) : "not a directory");
        return -1;
    }
    if (stat(p, &sb) && errno == ENOENT) {   /* a checkpoint directory: the step `latest` names */
        say(p, sizeof p, "%s/%s", dir, ckpt_files[CF_LATEST]);
        char *text = read_regular(p, 256, err, errlen);
        if (!text) {
            say(err, errlen, "%s: neither a checkpoint step (no state.json) nor a checkpoint directory (no latest)", dir);
            return -1;
        }
        size_t n = strcspn(text, "\r\n");
        snprintf(name, name_len, "%.*s", (int)(n < name_len ? n : name_len - 1), text);
        int bad = n == 0 || n >= name_len || name_step(name) < 0;
        free(text);
        if (bad) {
            say(err, errlen, "%s: does not name a step directory (step-NNNNNNNN)", p);
            return -1;
        }
        say(step_dir, step_dir_len, "%s/%s", dir, name);
    } else {
        const char *slash = strrchr(dir, '/');
        snprintf(name, name_len, "%s", slash && slash[1] ? slash + 1 : dir);
        say(step_dir, step_dir_len, "%s", dir);
    }
    return 0;
}

/* CHECKPOINT (step_dir_of) verified by its manifest first -- no byte of a
 * damaged checkpoint is used -- and its state.json parsed (want: fingerprint
 * fields that must agree, or NULL). 0, or -1 (err). */
static int open_step(const char *dir, const CkptFingerprint *want, char *step_dir, size_t step_dir_len,
                     ParsedState *ps, char *err, size_t errlen)
{
    char p[4400], name[256];
    if (step_dir_of(dir, step_dir, step_dir_len, name, sizeof name, err, errlen)) return -1;
    if (manifest_check(step_dir, NULL, err, errlen)) return -1;
    say(p, sizeof p, "%s/%s", step_dir, ckpt_files[CF_STATE]);
    char *text = read_regular(p, STATE_MAX_BYTES, err, errlen);
    if (!text) return -1;
    int rc = parse_state(p, step_dir, text, name_step(name), NULL, want, ps, err, errlen);
    free(text);
    return rc ? -1 : 0;
}

int ckpt_load_weights(const char *dir, const CkptFingerprint *want, Model *m, int64_t *step, char *step_dir,
                      size_t step_dir_len, char *err, size_t errlen)
{
    char p[4300];
    ParsedState ps;
    if (open_step(dir, want, step_dir, step_dir_len, &ps, err, errlen)) return -1;
    int rc;
    StModel sm;
    say(p, sizeof p, "%s/model.safetensors", step_dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    rc = read_model_tensors(&sm, m, m->w, "", NULL, NULL, err, errlen);
    st_close(&sm);
    if (rc) return -1;
    *step = ps.st.step;
    return 0;
}

int ckpt_plan_ref(const char *dir, CkptPlanRef *ref, int64_t *step, char *err, size_t errlen)
{
    char step_dir[4300];
    ParsedState ps;
    if (open_step(dir, NULL, step_dir, sizeof step_dir, &ps, err, errlen)) return -1;
    *step = ps.st.step;
    if (!ps.has_plan_ref) return 1;
    *ref = ps.plan_ref;
    return 0;
}

int ckpt_resume(const char *ckpt_dir, const CkptFingerprint *fp, const CkptLimits *lim, int fresh, Model *m,
                AdamW *opt, TrainState *st, const ModelPart *part, char *warn, size_t warnlen, char *err,
                size_t errlen)
{
    if (warnlen) warn[0] = 0;
    int n;
    CkptEntry *v = scan_ckpts(ckpt_dir, &n);
    char lp[4200], latest[32] = "", lerr[1024] = "";
    say(lp, sizeof lp, "%s/%s", ckpt_dir, ckpt_files[CF_LATEST]);
    int have_latest = 0;
    struct stat lsb;
    int no_latest = lstat(lp, &lsb) && errno == ENOENT;
    char *text = no_latest ? NULL : read_regular(lp, 256, lerr, sizeof lerr);
    if (text) {
        have_latest = 1;
        text[strcspn(text, "\n")] = 0;
        if (name_step(text) >= 0) say(latest, sizeof latest, "%s", text);
        else say(lerr, sizeof lerr, "%s: does not name a step-NNNNNNNN directory", lp);
        free(text);
    } else if (!no_latest) {
        have_latest = 1;   /* there, but unreadable: lerr says why */
    }
    if (fresh) {
        if (n || have_latest)
            say(warn, warnlen, "--fresh: starting at step 0; the %d checkpoint(s) in %s are not resumed "
                     "(rotation removes them oldest first as new ones are written)", n, ckpt_dir);
        free(v);
        return 0;
    }
    /* No latest but step directories (a full disk or a crash between the
     * step's rename and latest's write): the newest by write order that
     * verifies is adopted, with a warning; never a silent start at step 0. */
    if (!have_latest && !n) { free(v); return 0; }
    if (!have_latest) say(lerr, sizeof lerr, "%s is missing", lp);
    /* candidates: the one latest names, then the others newest first by write order */
    char first_why[1400] = "", first_name[4300] = "";
    int rc = -1, has_fp = 1, tried = 0;
    const char *used = NULL;
    if (latest[0]) {
        tried++;
        rc = try_load(ckpt_dir, latest, fp, lim, m, opt, st, part, &has_fp, first_why, sizeof first_why);
        say(first_name, sizeof first_name, "%s/%s (named by %s)", ckpt_dir, latest, lp);
        if (rc == 0) used = latest;
    } else {
        say(first_why, sizeof first_why, "%s", lerr);
        say(first_name, sizeof first_name, "%s", lp);
    }
    char why[1400];
    for (int i = 0; rc == -1 && i < n; i++) {
        if (!strcmp(v[i].name, latest)) continue;
        tried++;
        rc = try_load(ckpt_dir, v[i].name, fp, lim, m, opt, st, part, &has_fp, why, sizeof why);
        if (rc == 0) used = v[i].name;
        if (rc == -2 || (rc == -1 && !have_latest && tried == 1)) say(first_why, sizeof first_why, "%s", why);
    }
    if (rc == -2) {
        say(err, errlen, "%s", first_why);
    } else if (rc == -1 && !have_latest) {
        say(err, errlen, "%s holds %d checkpoint(s) (the newest by write order: %s) but no %s, and none of them "
                 "verifies (%s): refusing to start over at step 0; pass --fresh to train from scratch anyway",
                 ckpt_dir, n, v[0].name, lp, first_why);
    } else if (rc == -1) {
        if (latest[0])
            say(err, errlen, "checkpoint %s fails verification: %s%s", first_name, first_why,
                     tried > 1 ? "; no other checkpoint there verifies either" : "");
        else
            say(err, errlen, "%s%s", first_why, tried ? "; no checkpoint there verifies" : "");
    } else if (!have_latest) {
        say(warn, warnlen, "%s holds %d checkpoint(s) but no %s (a full disk or a crash before it was written): "
                 "adopting %s/%s, the newest checkpoint (by write order) that verifies", ckpt_dir, n, lp, ckpt_dir,
                 used ? used : "?");
    } else if (used != latest || !latest[0]) {
        say(warn, warnlen, "checkpoint %s fails verification: %s; resuming from %s/%s instead, the newest "
                 "checkpoint (by write order) that verifies", first_name, first_why, ckpt_dir, used ? used : "?");
    }
    if (rc == 0 && !has_fp) {
        size_t wl = strlen(warn);
        say(warn + wl, warnlen - wl, "%scheckpoint %s/%s records no fingerprint (written by an older llmc-train): "
                 "cannot check that this plan wrote it", wl ? "; " : "", ckpt_dir, used ? used : "?");
    }
    free(v);
    return rc == 0 ? 1 : -1;
}

/* ---- HF export ---- */

/* The id of an added token by its content, from tokenizer.json; -1 if absent. */
static int added_token_id(cJSON *tok, const char *content)
{
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(tok, "added_tokens")) {
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(e, "content"));
        cJSON *id = cJSON_GetObjectItem(e, "id");
        if (c && cJSON_IsNumber(id) && !strcmp(c, content)) return (int)id->valuedouble;
    }
    return -1;
}

/* A JSON file of at most 256 MiB, parsed; NULL when it is not a regular file,
 * cannot be read or is not JSON. */
static cJSON *read_json(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) || !S_ISREG(sb.st_mode)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    if (n < 0 || n > (256L << 20)) { fclose(f); return NULL; }
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[got] = 0;
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    return o;
}

/* bos/eos ids named by tokenizer_config.json, looked up in tokenizer.json. */
static void special_ids(const char *tokdir, int *bos, int *eos)
{
    *bos = *eos = -1;
    if (!tokdir) return;
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", tokdir);
    cJSON *cfg = read_json(p);
    snprintf(p, sizeof p, "%s/tokenizer.json", tokdir);
    cJSON *tok = read_json(p);
    if (cfg && tok) {
        const char *keys[2] = {"bos_token", "eos_token"};
        int *out[2] = {bos, eos};
        for (int i = 0; i < 2; i++) {
            cJSON *v = cJSON_GetObjectItem(cfg, keys[i]);
            const char *s = cJSON_IsString(v) ? v->valuestring : cJSON_GetStringValue(cJSON_GetObjectItem(v, "content"));
            if (s) *out[i] = added_token_id(tok, s);
        }
    }
    cJSON_Delete(cfg);
    cJSON_Delete(tok);
}

/* DIR.tmp, empty: where an export is written before it is renamed into place. */
static int export_tmp(const char *dir, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    snprintf(tmp, tmplen, "%s.tmp", dir);
    remove_flat_dir(tmp);
    if (mkdir_parents(tmp)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    return 0;
}

/* Everything of an HF model directory but its weights: config.json (carried
 * over from the source model, or written from m's shape) and the tokenizer's files. */
static int export_side_files(const char *tmp, const Model *m, StDtype dtype, const char *tokenizer_dir,
                             const char *source_model, char *err, size_t errlen)
{
    static const char *tok_files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                      "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja",
                                      "generation_config.json"};
    char p[4200], src[4200];
    snprintf(p, sizeof p, "%s/config.json", tmp);
    const char *torch_dtype = dtype == ST_BF16 ? "bfloat16" : "float32";
    if (source_model) {
        if (hf_config_derive(p, source_model, &m->cfg, torch_dtype, err, errlen)) return -1;
    } else {
        int bos, eos;
        special_ids(tokenizer_dir, &bos, &eos);
        if (hf_config_write(p, &m->cfg, torch_dtype, bos, eos, err, errlen)) return -1;
    }
    int copied = 0;
    for (size_t i = 0; tokenizer_dir && i < sizeof tok_files / sizeof tok_files[0]; i++) {
        snprintf(src, sizeof src, "%s/%s", tokenizer_dir, tok_files[i]);
        if (access(src, R_OK)) continue;
        snprintf(p, sizeof p, "%s/%s", tmp, tok_files[i]);
        if (copy_file(src, p, err, errlen)) return -1;
        copied++;
    }
    if (tokenizer_dir && !copied) {
        snprintf(err, errlen, "%s: no tokenizer.json or tokenizer_config.json to copy", tokenizer_dir);
        return -1;
    }
    return 0;
}

/* The manifest (the weights' digest given, the small files read and hashed),
 * then DIR.tmp renamed to DIR, both synced. */
static int export_seal(const char *dir, const char *tmp, ManifestHash *weights, char *err, size_t errlen)
{
    if (manifest_write_known(tmp, weights, 1, err, errlen)) return -1;
    fsync_dir(tmp);
    remove_flat_dir(dir);
    if (rename(tmp, dir)) { snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno)); return -1; }
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) { *slash = 0; fsync_dir(parent[0] ? parent : "/"); }
    return 0;
}

int hf_export(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir, const char *source_model,
              char *err, size_t errlen)
{
    char tmp[4096], p[4200];
    if (export_tmp(dir, tmp, sizeof tmp, err, errlen)) return -1;
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    ManifestHash known[1] = {{"model.safetensors", ""}};
    if (write_model_file(p, m, m->w, "", dtype, known[0].hex, err, errlen)) return -1;
    if (export_side_files(tmp, m, dtype, tokenizer_dir, source_model, err, errlen)) return -1;
    return export_seal(dir, tmp, known, err, errlen);
}

int hf_export_shard_begin(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir,
                          const char *source_model, char *err, size_t errlen)
{
    char tmp[4096], p[4200], **names;
    int n;
    if (export_tmp(dir, tmp, sizeof tmp, err, errlen)) return -1;
    StWriteTensor *t = model_tensors(m, m->w, "", &names, &n);
    if (!t) { snprintf(err, errlen, "out of memory"); return -1; }
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    int rc = st_create(p, t, n, dtype, "\"format\":\"pt\"", err, errlen);
    free_tensors(t, names, n);
    if (rc || export_side_files(tmp, m, dtype, tokenizer_dir, source_model, err, errlen)) return -1;
    fsync_dir(tmp);
    return 0;
}

int hf_export_shard_write(const char *dir, const Model *m, const ModelPart *part, char *err, size_t errlen)
{
    char p[4200];
    const char *const prefix[1] = {""};
    const float *const buf[1] = {m->w};
    snprintf(p, sizeof p, "%s.tmp/model.safetensors", dir);
    return fill_file(p, m, 1, prefix, buf, part, err, errlen);
}

int hf_export_shard_finish(const char *dir, char *err, size_t errlen)
{
    char tmp[4096], p[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    /* the pieces came from every rank: the digest is of the file as it is on disk */
    ManifestHash known[1] = {{"model.safetensors", ""}};
    if (sha256_file_hex(p, known[0].hex)) { snprintf(err, errlen, "%s: cannot hash: %s", p, strerror(errno)); return -1; }
    return export_seal(dir, tmp, known, err, errlen);
}

/* ---- PEFT adapter export (LoRA) ---- */

/* PEFT's target_modules names, in LORA_* order: the HF module names of
 * contract/plan_vocab.h's rows. */
#define peft_modules lora_module_json_names

int peft_export(const char *dir, const Lora *l, int alpha, int rslora, const char *base_model, char *err,
                size_t errlen)
{
    char tmp[4096], p[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    remove_flat_dir(tmp);
    if (mkdir_parents(tmp)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", tmp);
    ManifestHash known[1] = {{"adapter_model.safetensors", ""}};
    if (write_model_file(p, &l->p, l->p.w, "", ST_F32, known[0].hex, err, errlen)) return -1;
    /* PEFT's LoraConfig as save_pretrained writes it (the keys peft reads back) */
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToObject(c, "base_model_name_or_path", base_model ? cJSON_CreateString(base_model) : cJSON_CreateNull());
    cJSON_AddStringToObject(c, "bias", "none");
    cJSON_AddBoolToObject(c, "fan_in_fan_out", 0);
    cJSON_AddBoolToObject(c, "inference_mode", 1);
    cJSON_AddBoolToObject(c, "init_lora_weights", 1);
    cJSON_AddNumberToObject(c, "lora_alpha", alpha);
    cJSON_AddNumberToObject(c, "lora_dropout", 0.0);
    cJSON_AddNullToObject(c, "modules_to_save");
    cJSON_AddStringToObject(c, "peft_type", "LORA");
    cJSON_AddNumberToObject(c, "r", l->rank);
    cJSON *tm = cJSON_AddArrayToObject(c, "target_modules");
    for (int t = 0; t < LORA_TARGETS; t++)
        if (l->targets & (1u << t)) cJSON_AddItemToArray(tm, cJSON_CreateString(peft_modules[t]));
    cJSON_AddStringToObject(c, "task_type", "CAUSAL_LM");
    cJSON_AddBoolToObject(c, "use_rslora", rslora != 0);
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    snprintf(p, sizeof p, "%s/adapter_config.json", tmp);
    FILE *f = text ? fopen(p, "w") : NULL;
    int bad = !f || fputs(text, f) < 0 || fputc('\n', f) < 0;
    if (f && (fflush(f) || fsync(fileno(f)))) bad = 1;
    if (f && fclose(f)) bad = 1;
    free(text);
    if (bad) { snprintf(err, errlen, "%s: cannot write", p); return -1; }
    if (manifest_write_known(tmp, known, 1, err, errlen)) return -1;   /* the config: read and hashed */
    fsync_dir(tmp);
    remove_flat_dir(dir);
    if (rename(tmp, dir)) { snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno)); return -1; }
    return 0;
}

Lora *peft_load(const char *dir, const Model *base, int *alpha, int *rslora, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    cJSON *j = read_json(path);
    if (!j) { snprintf(err, errlen, "%s: not a readable JSON file", path); return NULL; }
    const cJSON *r = cJSON_GetObjectItem(j, "r"), *al = cJSON_GetObjectItem(j, "lora_alpha"), *x;
    unsigned targets = 0;
    int unknown = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "target_modules")) {
        int k = 0;
        while (k < LORA_TARGETS && !(cJSON_IsString(x) && !strcmp(x->valuestring, peft_modules[k]))) k++;
        if (k < LORA_TARGETS) targets |= 1u << k;
        else unknown = 1;
    }
    if (!cJSON_IsNumber(r) || r->valuedouble != (int)r->valuedouble || r->valuedouble < 1 || r->valuedouble > 1024 ||
        !cJSON_IsNumber(al) || al->valuedouble < 1 || al->valuedouble > 1 << 20 || !targets || unknown) {
        snprintf(err, errlen, "%s: want r (an integer 1-1024), lora_alpha (1-%d) and target_modules among q_proj, "
                 "k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj", path, 1 << 20);
        cJSON_Delete(j);
        return NULL;
    }
    *alpha = (int)al->valuedouble;
    *rslora = cJSON_IsTrue(cJSON_GetObjectItem(j, "use_rslora"));
    Lora *l = lora_new(base, targets, (int)r->valuedouble, *alpha, *rslora, 1);
    cJSON_Delete(j);
    if (!l) { snprintf(err, errlen, "out of memory (LoRA adapters)"); return NULL; }
    StModel st;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (st_open(&st, path, err, errlen)) { lora_free(l); return NULL; }
    for (int i = 0; i < l->p.n_params; i++) {
        const ParamInfo *p = &l->p.params[i];
        const StTensor *t = st_find(&st, p->name);
        if (!t || t->numel != p->numel) {
            snprintf(err, errlen, "%s: %s %s", path, p->name, t ? "has the wrong size" : "is missing");
            st_close(&st);
            lora_free(l);
            return NULL;
        }
        if (st_read_f32(&st, t, l->p.w + p->offset, err, errlen)) { st_close(&st); lora_free(l); return NULL; }
    }
    st_close(&st);
    return l;
}

/* ---- the run lock (checkpoint.h) ---- */

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
