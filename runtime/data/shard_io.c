/* shard_io.c — shard files and index.json: atomic writes, checked reads. */
#include "shard_io.h"
#include "run_formats.h"   /* contract/: index.json's name and keys, which llmc status reads too */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* The library's error convention (docs/runtime.md, "Errors"): the message
 * into the caller's err, -1 back; nothing printed here. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* "dir/file", malloc'd (NULL when out of memory). */
static char *join_path(const char *dir, const char *file)
{
    size_t a = strlen(dir), b = strlen(file);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, file, b + 1);
    return p;
}

/* At most 1 GiB per call (Linux moves at most 0x7ffff000 bytes per
 * write/read); a short transfer is continued and EINTR retried, so a shard
 * of several GiB is written whole or the call fails. */
static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* By offset, not through the file position: the rows of one shard are read
 * from wherever the epoch's order sends the reader. */
static int pread_all(int fd, void *data, size_t len, uint64_t off)
{
    char *p = data;
    while (len) {
        ssize_t r = pread(fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) { errno = EIO; return -1; }  /* file shorter than its header says */
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* fsync the directory holding PATH so the rename itself is durable. */
static void sync_parent_dir(const char *path)
{
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    int fd = open(slash ? (dir[0] ? dir : "/") : ".", O_RDONLY | O_DIRECTORY);
    if (fd >= 0) { fsync(fd); close(fd); }
    free(dir);
}

/* Open PATH.tmp for writing; returns fd and sets *tmp (caller frees). Beside
 * PATH, so on its file system and the rename is atomic; O_TRUNC, so a .tmp
 * left by a killed prepare is simply overwritten. */
static int open_tmp(const char *path, char **tmp, char *err, size_t errlen)
{
    size_t n = strlen(path);
    *tmp = malloc(n + 5);
    if (!*tmp) return fail(err, errlen, "out of memory");
    memcpy(*tmp, path, n);
    memcpy(*tmp + n, ".tmp", 5);
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fail(err, errlen, "%s: %s", *tmp, strerror(errno));
        free(*tmp);
        *tmp = NULL;
    }
    return fd;
}

/* fsync, then rename over PATH, then fsync the directory: after a crash PATH
 * is the old file or the whole new one, never a short one (without the
 * first fsync a file system may commit the rename before the data). On any
 * failure the .tmp goes, so nothing half-written is left under either name. */
static int finish_tmp(int fd, char *tmp, const char *path, char *err, size_t errlen)
{
    if (fsync(fd) != 0) {
        fail(err, errlen, "%s: fsync: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        fail(err, errlen, "rename %s -> %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    sync_parent_dir(path);
    return 0;
}

int shard_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    char *tmp;
    int fd = open_tmp(path, &tmp, err, errlen);
    if (fd < 0) return -1;
    if (write_all(fd, data, len) != 0) {
        fail(err, errlen, "%s: write: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    return finish_tmp(fd, tmp, path, err, errlen);
}

int shard_write(const char *path, const ShardHeader *h, const uint32_t *ids,
                const uint32_t *pos, const uint8_t *mask, char *err, size_t errlen)
{
    /* magic, version and reserved are set here, not by callers: a header is
     * always well-formed, and a set prepared twice is the same bytes */
    ShardHeader hd = *h;
    memcpy(hd.magic, SHARD_MAGIC, 8);
    hd.version = SHARD_VERSION;
    memset(hd.reserved, 0, sizeof hd.reserved);
    size_t n = (size_t)hd.n_rows * hd.context;   /* cells: 4 + 4 + 1 bytes each, in shard.h's order */
    char *tmp;
    int fd = open_tmp(path, &tmp, err, errlen);
    if (fd < 0) return -1;
    if (write_all(fd, &hd, sizeof hd) || write_all(fd, ids, n * 4) ||
        write_all(fd, pos, n * 4) || write_all(fd, mask, n)) {
        fail(err, errlen, "%s: write: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    return finish_tmp(fd, tmp, path, err, errlen);
}

int shard_index_write(const char *dir, const ShardIndexInfo *info, const ShardEntry *shards,
                      size_t n, char *err, size_t errlen)
{
    /* the totals are summed from the entries, so index.json cannot disagree
     * with its own list; shard_set_open checks each entry against its file */
    uint64_t rows = 0, docs = 0, labels = 0;
    for (size_t i = 0; i < n; i++) {
        rows += shards[i].n_rows;
        docs += shards[i].n_docs;
        labels += shards[i].n_label_tokens;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, shard_index_keys[IX_VERSION], SHARD_INDEX_VERSION);
    cJSON_AddNumberToObject(o, shard_index_keys[IX_CONTEXT], info->context);
    cJSON_AddNumberToObject(o, shard_index_keys[IX_VOCAB_SIZE], info->vocab_size);
    cJSON_AddNumberToObject(o, shard_index_keys[IX_PAD_ID], info->pad_id);
    cJSON_AddBoolToObject(o, shard_index_keys[IX_PACKING], info->packing);
    cJSON_AddStringToObject(o, shard_index_keys[IX_DATA_HASH], info->data_hash ? info->data_hash : "");
    cJSON_AddNumberToObject(o, shard_index_keys[IX_N_ROWS], (double)rows);
    cJSON_AddNumberToObject(o, shard_index_keys[IX_N_DOCS], (double)docs);
    cJSON_AddNumberToObject(o, shard_index_keys[IX_N_TOKENS], (double)info->n_tokens);
    cJSON_AddNumberToObject(o, shard_index_keys[IX_N_LABEL_TOKENS], (double)labels);
    if (info->summary_json) {   /* nested as an object, not as a string of JSON */
        cJSON *s = cJSON_Parse(info->summary_json);
        if (s) cJSON_AddItemToObject(o, shard_index_keys[IX_SUMMARY], s);
    }
    cJSON *arr = cJSON_AddArrayToObject(o, shard_index_keys[IX_SHARDS]);
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, shard_entry_keys[SE_FILE], shards[i].file);
        cJSON_AddNumberToObject(e, shard_entry_keys[SE_N_ROWS], (double)shards[i].n_rows);
        cJSON_AddNumberToObject(e, shard_entry_keys[SE_N_DOCS], (double)shards[i].n_docs);
        cJSON_AddNumberToObject(e, shard_entry_keys[SE_N_LABEL_TOKENS], (double)shards[i].n_label_tokens);
        cJSON_AddItemToArray(arr, e);
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return fail(err, errlen, "out of memory");
    size_t len = strlen(text);
    char *buf = malloc(len + 2);
    if (!buf) { free(text); return fail(err, errlen, "out of memory"); }
    memcpy(buf, text, len);
    buf[len] = '\n';
    free(text);
    /* index.json last and atomically: replacing it is what makes the new set
     * the live one (readers open only the shards it lists) */
    char *path = join_path(dir, SHARD_INDEX_FILE);
    int rc = path ? shard_write_file_atomic(path, buf, len + 1, err, errlen)
                  : fail(err, errlen, "out of memory");
    free(path);
    free(buf);
    return rc;
}

/* The whole of a regular file, NUL-terminated for cJSON, if at most max
 * bytes; NULL with err otherwise. */
char *shard_read_small_file(const char *path, size_t max, char *err, size_t errlen)
{
    /* O_NONBLOCK + fstat: a FIFO or device in place of index.json is refused, never waited on */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { fail(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fail(err, errlen, "%s: not a regular file", path);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); fail(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;   /* one byte more than max tells "larger" apart */
    fclose(f);
    if (!buf) { fail(err, errlen, "out of memory"); return NULL; }
    if (n > max) { free(buf); fail(err, errlen, "%s: larger than %zu bytes", path, max); return NULL; }
    buf[n] = '\0';
    return buf;
}

/* A non-negative integer field of o, or -1 with err set. At most 2^53: the
 * largest integer cJSON's double holds exactly; above it a count could be
 * off by one without a sign. */
static int get_u64(const cJSON *o, const char *key, uint64_t *out, const char *where,
                   char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return fail(err, errlen, "%s: '%s' missing or not a non-negative integer", where, key);
    *out = (uint64_t)v->valuedouble;
    return 0;
}

/* No message on failure: a missing or unreadable index.json only means "not
 * up to date", and prepare then writes a new set. */
char *shard_index_data_hash(const char *dir)
{
    char err[64];
    char *path = join_path(dir, SHARD_INDEX_FILE);
    if (!path) return NULL;
    char *text = shard_read_small_file(path, 64u << 20, err, sizeof err);
    free(path);
    if (!text) return NULL;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_DATA_HASH]);
    char *out = cJSON_IsString(h) ? strdup(h->valuestring) : NULL;
    cJSON_Delete(o);
    return out;
}

char **shard_index_files(const char *dir)
{
    char err[64];
    char *path = join_path(dir, SHARD_INDEX_FILE);
    if (!path) return NULL;
    char *text = shard_read_small_file(path, 256u << 20, err, sizeof err);
    free(path);
    if (!text) return NULL;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_SHARDS]);
    char **names = NULL;
    if (cJSON_IsArray(arr)) {
        size_t n = (size_t)cJSON_GetArraySize(arr), k = 0;
        names = calloc(n + 1, sizeof *names);
        for (const cJSON *e = arr->child; names && e; e = e->next) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, shard_entry_keys[SE_FILE]);
            /* plain names only: what prepare keeps or sweeps is always inside dir */
            if (cJSON_IsString(f) && f->valuestring[0] && !strchr(f->valuestring, '/') &&
                !(names[k] = strdup(f->valuestring))) { shard_names_free(names); names = NULL; }
            else if (cJSON_IsString(f) && names[k]) k++;
        }
    }
    cJSON_Delete(o);
    return names;
}

void shard_names_free(char **names)
{
    for (size_t i = 0; names && names[i]; i++) free(names[i]);
    free(names);
}

/* Safe on a set that failed half-way through opening: fds not yet opened are
 * -1, names not yet copied NULL (shard_set_open sets them so first). */
void shard_set_close(ShardSet *set)
{
    for (size_t i = 0; i < set->n_shards; i++) {
        if (set->shards[i].fd >= 0) close(set->shards[i].fd);
        free(set->shards[i].file);
        free(set->shards[i].path);
    }
    free(set->shards);
    free(set->dir);
    free(set->data_hash);
    memset(set, 0, sizeof *set);
}

/* Check one shard file against its index entry and the set's figures. */
static int open_shard(ShardSet *set, ShardEntry *e, char *err, size_t errlen)
{
    e->fd = open(e->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO must not block the open */
    if (e->fd < 0) return fail(err, errlen, "%s: %s", e->path, strerror(errno));
    struct stat rs;
    if (fstat(e->fd, &rs) != 0 || !S_ISREG(rs.st_mode)) return fail(err, errlen, "%s: not a regular file", e->path);
    ShardHeader h;
    if (pread_all(e->fd, &h, sizeof h, 0) != 0)
        return fail(err, errlen, "%s: cannot read shard header", e->path);
    if (memcmp(h.magic, SHARD_MAGIC, 8) != 0)
        return fail(err, errlen, "%s: not an llmc shard (bad magic)", e->path);
    if (h.version != SHARD_VERSION)
        return fail(err, errlen, "%s: shard version %u, expected %u", e->path, h.version, SHARD_VERSION);
    if (h.context != set->context || h.vocab_size != set->vocab_size || h.pad_id != set->pad_id)
        return fail(err, errlen, "%s: header (context %u, vocab %u, pad %u) disagrees with " SHARD_INDEX_FILE " "
                    "(context %u, vocab %u, pad %u)", e->path, h.context, h.vocab_size, h.pad_id,
                    set->context, set->vocab_size, set->pad_id);
    if (h.n_rows != e->n_rows || h.n_docs != e->n_docs || h.n_label_tokens != e->n_label_tokens)
        return fail(err, errlen, "%s: header counts disagree with " SHARD_INDEX_FILE, e->path);
    struct stat st;
    if (fstat(e->fd, &st) != 0) return fail(err, errlen, "%s: %s", e->path, strerror(errno));
    /* the size must be exactly header + 9 bytes a cell (id 4, pos 4, mask 1):
     * a truncated shard or a foreign file fails here, when the run starts, not
     * at the row it would have read hours later (the product checked first) */
    if (h.n_rows > (UINT64_MAX - sizeof h) / 9 / (h.context ? h.context : 1))
        return fail(err, errlen, "%s: row count too large", e->path);
    uint64_t want = sizeof h + h.n_rows * (uint64_t)h.context * 9u;
    if ((uint64_t)st.st_size != want)
        return fail(err, errlen, "%s: %" PRIu64 " bytes, expected %" PRIu64 " (truncated or foreign file)",
                    e->path, (uint64_t)st.st_size, want);
    return 0;
}

/* index.json, then every shard it lists opened and checked (open_shard);
 * rows are numbered across the set in index order (first_row). */
int shard_set_open(ShardSet *set, const char *dir, char *err, size_t errlen)
{
    memset(set, 0, sizeof *set);
    set->dir = strdup(dir);
    char *path = join_path(dir, SHARD_INDEX_FILE);
    if (!set->dir || !path) { free(path); shard_set_close(set); return fail(err, errlen, "out of memory"); }
    char *text = shard_read_small_file(path, 256u << 20, err, errlen);
    if (!text) { free(path); shard_set_close(set); return -1; }
    cJSON *o = cJSON_Parse(text);
    free(text);
    int rc = -1;
    uint64_t v, context, vocab, pad, n_tokens;
    const cJSON *arr, *packing, *hash;
    if (!cJSON_IsObject(o)) { fail(err, errlen, "%s: not a JSON object", path); goto done; }
    if (get_u64(o, shard_index_keys[IX_VERSION], &v, path, err, errlen)) goto done;
    if (v != SHARD_INDEX_VERSION) {
        fail(err, errlen, "%s: index version %" PRIu64 ", expected %d", path, v, SHARD_INDEX_VERSION);
        goto done;
    }
    if (get_u64(o, shard_index_keys[IX_CONTEXT], &context, path, err, errlen) ||
        get_u64(o, shard_index_keys[IX_VOCAB_SIZE], &vocab, path, err, errlen) ||
        get_u64(o, shard_index_keys[IX_PAD_ID], &pad, path, err, errlen) ||
        get_u64(o, shard_index_keys[IX_N_TOKENS], &n_tokens, path, err, errlen))
        goto done;
    /* the header stores them as uint32; pad must be a token id */
    if (context == 0 || context > UINT32_MAX || vocab == 0 || vocab > UINT32_MAX || pad >= vocab) {
        fail(err, errlen, "%s: context/vocab_size/pad_id out of range", path);
        goto done;
    }
    set->context = (uint32_t)context;
    set->vocab_size = (uint32_t)vocab;
    set->pad_id = (uint32_t)pad;
    set->n_tokens = n_tokens;
    packing = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_PACKING]);
    set->packing = cJSON_IsTrue(packing);
    hash = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_DATA_HASH]);
    set->data_hash = strdup(cJSON_IsString(hash) ? hash->valuestring : "");
    arr = cJSON_GetObjectItemCaseSensitive(o, shard_index_keys[IX_SHARDS]);
    if (!cJSON_IsArray(arr)) { fail(err, errlen, "%s: '%s' missing or not an array", path, shard_index_keys[IX_SHARDS]); goto done; }
    set->n_shards = (size_t)cJSON_GetArraySize(arr);
    set->shards = calloc(set->n_shards ? set->n_shards : 1, sizeof *set->shards);
    if (!set->shards) { set->n_shards = 0; fail(err, errlen, "out of memory"); goto done; }
    for (size_t i = 0; i < set->n_shards; i++) set->shards[i].fd = -1;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        ShardEntry *s = &set->shards[i];
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, shard_entry_keys[SE_FILE]);
        if (!cJSON_IsString(file) || !file->valuestring[0] || strchr(file->valuestring, '/')) {
            fail(err, errlen, "%s: shard %zu: '%s' must be a plain file name", path, i, shard_entry_keys[SE_FILE]);
            goto done;
        }
        s->file = strdup(file->valuestring);
        s->path = join_path(dir, file->valuestring);
        if (!s->file || !s->path) { fail(err, errlen, "out of memory"); goto done; }
        if (get_u64(e, shard_entry_keys[SE_N_ROWS], &s->n_rows, path, err, errlen) ||
            get_u64(e, shard_entry_keys[SE_N_DOCS], &s->n_docs, path, err, errlen) ||
            get_u64(e, shard_entry_keys[SE_N_LABEL_TOKENS], &s->n_label_tokens, path, err, errlen))
            goto done;
        s->first_row = set->n_rows;
        set->n_rows += s->n_rows;
        set->n_docs += s->n_docs;
        set->n_label_tokens += s->n_label_tokens;
        if (open_shard(set, s, err, errlen)) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(o);
    free(path);
    if (rc) shard_set_close(set);
    return rc;
}

int shard_set_read_rows(const ShardSet *set, uint64_t row, uint64_t n,
                        uint32_t *ids, uint32_t *pos, uint8_t *mask, char *err, size_t errlen)
{
    if (row > set->n_rows || n > set->n_rows - row)
        return fail(err, errlen, "rows %" PRIu64 "..%" PRIu64 " out of range (%" PRIu64 " rows)",
                    row, row + n, set->n_rows);
    /* find the shard holding `row`: binary search over first_row */
    size_t lo = 0, hi = set->n_shards;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (set->shards[mid].first_row <= row) lo = mid; else hi = mid;
    }
    /* a range may span shards; in each, ids, pos and mask are three sections of
     * the file (shard.h), so a range is up to three preads per shard */
    uint64_t ctx = set->context;
    while (n > 0) {
        const ShardEntry *s = &set->shards[lo];
        uint64_t local = row - s->first_row;
        if (local >= s->n_rows) { lo++; continue; }   /* empty shards */
        uint64_t take = s->n_rows - local < n ? s->n_rows - local : n;
        uint64_t total = s->n_rows * ctx;
        uint64_t off_ids = sizeof(ShardHeader), off_pos = off_ids + total * 4, off_mask = off_pos + total * 4;
        if ((ids && pread_all(s->fd, ids, take * ctx * 4, off_ids + local * ctx * 4)) ||
            (pos && pread_all(s->fd, pos, take * ctx * 4, off_pos + local * ctx * 4)) ||
            (mask && pread_all(s->fd, mask, take * ctx, off_mask + local * ctx)))
            return fail(err, errlen, "%s: read: %s", s->path, strerror(errno));
        if (ids) ids += take * ctx;
        if (pos) pos += take * ctx;
        if (mask) mask += take * ctx;
        row += take;
        n -= take;
        lo++;
    }
    return 0;
}
