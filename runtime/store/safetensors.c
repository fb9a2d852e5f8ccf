/* safetensors.c — read (single file or sharded index) and write HF safetensors. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"

/* bf16 is the top 16 bits of an fp32 (same exponent range). Rounding as
 * torch's .to(torch.bfloat16): to nearest, ties to even; adding 0x7fff plus
 * the lowest kept bit does that in integer arithmetic, and an overflow past
 * the largest finite value carries into infinity, as it should. A NaN keeps
 * its sign and gets the quiet bit, so it cannot round to infinity. */
uint16_t st_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);   /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* Exact: the 16 bits become a float's top half, its lower mantissa bits zero. */
float st_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE half (1, 5, 10 bits; exponent bias 15) to float (bias 127): exact,
 * every half is a float. */
float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else {                                  /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {   /* infinity, or a NaN with its payload kept */
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Bytes per element of the three dtypes read (F32 4; BF16 and F16 2). */
static size_t dtype_size(StDtype d) { return d == ST_F32 ? 4 : 2; }   /* the three dtypes read */

/* A header's dtype string; -1 for any other (F64, I64, ...), which add_tensor refuses by name. */
static int parse_dtype(const char *s, StDtype *out)
{
    if (!strcmp(s, "F32")) *out = ST_F32;
    else if (!strcmp(s, "BF16")) *out = ST_BF16;
    else if (!strcmp(s, "F16")) *out = ST_F16;
    else return -1;
    return 0;
}

/* The whole file, NUL-terminated and malloc'd, or NULL with err; reading MAX + 1 bytes tells a file of exactly
 * MAX bytes from a larger one, which is refused. */
static char *read_small_file(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    fclose(f);
    if (!buf) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    if (n > max) { free(buf); snprintf(err, errlen, "%s: larger than %zu bytes", path, max); return NULL; }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* The index of path in st->files, added when new: a sharded model's tensors
 * name their file by this index.
 * -1 when out of memory; a realloc that failed leaves the arrays as they were, so st_close still frees them. */
static int add_file(StModel *st, const char *path)
{
    for (int i = 0; i < st->n_files; i++)
        if (!strcmp(st->files[i], path)) return i;
    char **f = realloc(st->files, (size_t)(st->n_files + 1) * sizeof *f);
    if (!f) return -1;
    st->files = f;
    uint64_t *d = realloc(st->data_start, (size_t)(st->n_files + 1) * sizeof *d);
    if (!d) return -1;
    st->data_start = d;
    st->files[st->n_files] = strdup(path);
    if (!st->files[st->n_files]) return -1;
    return st->n_files++;
}

static int check_layout(const StModel *st, int t0, const char *path, uint64_t data_len, char *err, size_t errlen);

/* One tensor entry e of file fi's header: dtype F32/BF16/F16, shape, and
 * data_offsets that lie inside the data section (data_len bytes) and hold
 * exactly the shape's elements; appended to st. 0, or -1 with err. */
static int add_tensor(StModel *st, int fi, const char *path, const cJSON *e, uint64_t data_len, char *err,
                      size_t errlen)
{
    cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    StTensor t = {0};
    t.file = fi;
    if (!cJSON_IsString(dt) || parse_dtype(dt->valuestring, &t.dtype)) {
        snprintf(err, errlen, "%s: tensor '%s': unsupported or missing dtype (want F32, BF16 or F16)",
                 path, e->string);
        return -1;
    }
    /* at most 8 dimensions: StTensor.shape's size */
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > 8 || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
        snprintf(err, errlen, "%s: tensor '%s': bad shape or data_offsets", path, e->string);
        return -1;
    }
    t.numel = 1;
    cJSON *d;
    int too_big = 0;
    cJSON_ArrayForEach(d, sh) {
        /* each dimension an integer a double holds exactly; numel checked for overflow */
        /* 1e12: far past any real dimension, and well inside a double's exact integers and a size_t */
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e12 ||
            floor(d->valuedouble) != d->valuedouble) {
            snprintf(err, errlen, "%s: tensor '%s': shape is not a list of non-negative integers", path, e->string);
            return -1;
        }
        t.shape[t.ndim++] = (int64_t)d->valuedouble;
        if (__builtin_mul_overflow(t.numel, (size_t)d->valuedouble, &t.numel)) too_big = 1;
    }
    size_t want_bytes = 0;
    if (too_big || __builtin_mul_overflow(t.numel, dtype_size(t.dtype), &want_bytes)) {
        snprintf(err, errlen, "%s: tensor '%s': its shape has more elements than any file holds", path, e->string);
        return -1;
    }
    cJSON *b0 = cJSON_GetArrayItem(off, 0), *b1 = cJSON_GetArrayItem(off, 1);
    if (!cJSON_IsNumber(b0) || !cJSON_IsNumber(b1) || floor(b0->valuedouble) != b0->valuedouble ||
        floor(b1->valuedouble) != b1->valuedouble) {
        snprintf(err, errlen, "%s: tensor '%s': data_offsets are not integers", path, e->string);
        return -1;
    }
    /* offsets count from the start of the data section, which ends data_len bytes later */
    if (b0->valuedouble < 0 || b1->valuedouble < b0->valuedouble || b1->valuedouble > (double)data_len) {
        snprintf(err, errlen, "%s: tensor '%s': data_offsets outside the file", path, e->string);
        return -1;
    }
    t.begin = (uint64_t)b0->valuedouble;
    t.end = (uint64_t)b1->valuedouble;
    /* the byte range must be exactly the shape's elements: a file that lies
     * about either would have its tensor read short or past its end */
    if (t.end - t.begin != want_bytes) {
        snprintf(err, errlen, "%s: tensor '%s': %llu bytes for %zu elements (%s: %zu bytes)", path, e->string,
                 (unsigned long long)(t.end - t.begin), t.numel, dt->valuestring, want_bytes);
        return -1;
    }
    if (st_find(st, e->string)) {
        snprintf(err, errlen, "%s: tensor '%s' appears twice", path, e->string);
        return -1;
    }
    t.name = strdup(e->string);
    StTensor *nt = realloc(st->tensors, (size_t)(st->n_tensors + 1) * sizeof *nt);
    if (nt) st->tensors = nt;   /* kept even if strdup failed: the old block may be gone */
    if (!t.name || !nt) { free(t.name); snprintf(err, errlen, "out of memory"); return -1; }
    st->tensors[st->n_tensors++] = t;
    return 0;
}

/* Parse one .safetensors file's header and append its tensors. */
static int load_header(StModel *st, const char *path, char *err, size_t errlen)
{
    /* registered before the open so a shard's tensors can name it; a failed open leaves the name, and st_open's
     * caller closes the whole StModel on any error */
    int fi = add_file(st, path);
    if (fi < 0) { snprintf(err, errlen, "out of memory"); return -1; }
    /* O_NONBLOCK: a FIFO without a writer must not block the open; only regular files are read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        snprintf(err, errlen, "%s: not a regular file", path);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);   /* a regular file: blocking reads from here on */
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    unsigned char lenb[8];
    if (fread(lenb, 1, 8, f) != 8) {
        fclose(f);
        snprintf(err, errlen, "%s: not a safetensors file (shorter than 8 bytes)", path);
        return -1;
    }
    /* the format: 8 bytes little-endian header length N, N bytes of JSON,
     * then the data section that data_offsets index (from its start) */
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lenb[i];
    /* about the safetensors library's own limit (headers over 100 000 000 bytes refused) */
    if (hlen > 100u * 1024 * 1024 || hlen + 8 > (uint64_t)sb.st_size) {
        fclose(f);
        snprintf(err, errlen, "%s: bad safetensors header length %llu", path, (unsigned long long)hlen);
        return -1;
    }
    char *hdr = malloc(hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
        free(hdr); fclose(f);
        snprintf(err, errlen, "%s: cannot read header", path);
        return -1;
    }
    fclose(f);
    hdr[hlen] = 0;
    /* hlen + 8 <= st_size was checked above, so no underflow */
    uint64_t data_len = (uint64_t)sb.st_size - 8 - hlen;
    st->data_start[fi] = 8 + hlen;
    cJSON *root = cJSON_Parse(hdr);
    free(hdr);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(err, errlen, "%s: header is not a JSON object", path);
        return -1;
    }
    int rc = 0, t0 = st->n_tensors;
    cJSON *e;
    /* the header's members in file order; cJSON keeps that order, so errors name the first bad tensor */
    cJSON_ArrayForEach(e, root) {
        if (!strcmp(e->string, "__metadata__")) continue;   /* string pairs (format: pt), no tensor */
        if ((rc = add_tensor(st, fi, path, e, data_len, err, errlen))) break;
    }
    cJSON_Delete(root);
    if (!rc) rc = check_layout(st, t0, path, data_len, err, errlen);
    return rc;
}

/* qsort has no context argument: the tensor array being sorted by index
 * (single-threaded: files are opened one at a time). */
static const StTensor *layout_base;
/* By start, then by end: an empty tensor (begin == end) sorts before a tensor starting at the same byte, so
 * check_layout does not take it for an overlap. */
static int cmp_by_offset(const void *a, const void *b)
{
    const StTensor *x = &layout_base[*(const int *)a], *y = &layout_base[*(const int *)b];
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The tensors [t0, n_tensors) of one file must tile its data section exactly, as
 * the safetensors format requires: no overlap (two tensors sharing bytes), no
 * hole, nothing after the last tensor. */
static int check_layout(const StModel *st, int t0, const char *path, uint64_t data_len, char *err, size_t errlen)
{
    int n = st->n_tensors - t0;
    int *ord = malloc((size_t)(n > 0 ? n : 1) * sizeof *ord);
    if (!ord) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < n; i++) ord[i] = t0 + i;
    layout_base = st->tensors;
    if (n > 1) qsort(ord, (size_t)n, sizeof *ord, cmp_by_offset);
    uint64_t at = 0;
    int rc = 0, prev = -1;
    for (int i = 0; i < n && !rc; i++) {
        const StTensor *t = &st->tensors[ord[i]];
        if (t->begin < at) {
            snprintf(err, errlen, "%s: tensor '%s' (bytes %llu..%llu) overlaps tensor '%s' (bytes %llu..%llu)", path,
                     t->name, (unsigned long long)t->begin, (unsigned long long)t->end, st->tensors[prev].name,
                     (unsigned long long)st->tensors[prev].begin, (unsigned long long)st->tensors[prev].end);
            rc = -1;
        } else if (t->begin > at) {
            snprintf(err, errlen, "%s: tensor '%s' starts at byte %llu of the data, leaving bytes %llu..%llu unused "
                     "(a safetensors file has no holes)", path, t->name, (unsigned long long)t->begin,
                     (unsigned long long)at, (unsigned long long)t->begin);
            rc = -1;
        }
        at = t->end;
        prev = ord[i];
    }
    if (!rc && at != data_len) {
        snprintf(err, errlen, "%s: %llu bytes after the last tensor's data (a safetensors file has none)", path,
                 (unsigned long long)(data_len - at));
        rc = -1;
    }
    free(ord);
    return rc;
}

/* A sharded model: model.safetensors.index.json maps each tensor name to
 * its file (weight_map); every file named is opened once, and each tensor
 * the map names must be in one of those files (a name in two files is
 * refused by add_tensor; which file holds it is not compared with the map). */
static int load_index(StModel *st, const char *dir, const char *index, char *err, size_t errlen)
{
    char *text = read_small_file(index, 64u << 20, NULL, err, errlen);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        snprintf(err, errlen, "%s: no \"weight_map\" object", index);
        return -1;
    }
    /* Load each distinct shard file once; the tensors' own headers are authoritative. */
    int rc = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, map) {
        /* a plain name in dir: an index cannot send the reader elsewhere (../, /etc) */
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || e->valuestring[0] == '.') {
            snprintf(err, errlen, "%s: weight_map entry '%s' is not a file name in the directory", index, e->string);
            rc = -1; break;
        }
        /* DIR/NAME of one shard; a name too long for this is cut and then fails to open */
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
        /* many tensors name the same shard: each file's header is read once */
        int seen = 0;
        for (int i = 0; i < st->n_files; i++) if (!strcmp(st->files[i], path)) seen = 1;
        if (!seen && load_header(st, path, err, errlen)) { rc = -1; break; }
    }
    if (!rc) {
        cJSON_ArrayForEach(e, map) {
            if (!st_find(st, e->string)) {
                snprintf(err, errlen, "%s: tensor '%s' is not in %s", index, e->string, e->valuestring);
                rc = -1; break;
            }
        }
    }
    cJSON_Delete(root);
    return rc;
}

/* path: a .safetensors file, or a directory holding the index of a sharded
 * model (used when present) or else one model.safetensors. */
int st_open(StModel *st, const char *path, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    struct stat sb;
    if (stat(path, &sb)) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    int rc;
    /* a directory: the sharded index when there is one, else the single file */
    if (S_ISDIR(sb.st_mode)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
        if (access(p, F_OK) == 0) rc = load_index(st, path, p, err, errlen);
        else {
            snprintf(p, sizeof p, "%s/model.safetensors", path);
            rc = load_header(st, p, err, errlen);
        }
    } else {
        rc = load_header(st, path, err, errlen);
    }
    /* a failed open frees what it built: the caller closes only a successful one */
    if (rc) st_close(st);
    return rc;
}

/* Frees what st_open built; safe on a zeroed or already closed StModel. */
void st_close(StModel *st)
{
    for (int i = 0; i < st->n_files; i++) free(st->files[i]);
    for (int i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    free(st->files);
    free(st->data_start);
    free(st->tensors);
    memset(st, 0, sizeof *st);
}

/* A linear scan: a model has a few hundred tensors and each is looked up once per load. */
const StTensor *st_find(const StModel *st, const char *name)
{
    for (int i = 0; i < st->n_tensors; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

/* Elements [first, first + count) of t into out. F32 straight into out;
 * 16-bit types through a bounded buffer (ST_READ_CHUNK bytes), widened piece
 * by piece: a rank reading its shard of a 72B checkpoint never holds a whole
 * tensor's bytes (the embedding alone is 2.5 GB in bf16). */
#define ST_READ_CHUNK ((size_t)4 << 20)
int st_read_f32_range(const StModel *st, const StTensor *t, size_t first, size_t count, float *out, char *err,
                      size_t errlen)
{
    const char *path = st->files[t->file];
    /* written so that first + count cannot overflow */
    if (first > t->numel || count > t->numel - first) {
        snprintf(err, errlen, "%s: elements [%zu, %zu) of tensor '%s' are outside its %zu", path, first,
                 first + count, t->name, t->numel);
        return -1;
    }
    /* opened per call: an StModel holds paths, not descriptors */
    if (!count) return 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    size_t es = dtype_size(t->dtype), bytes = count * es;
    /* F32 is read straight into OUT (little-endian floats, the host's order on x86-64 and arm64) */
    unsigned char *buf = t->dtype == ST_F32 ? (unsigned char *)out : malloc(bytes < ST_READ_CHUNK ? bytes : ST_READ_CHUNK);
    if (!buf) { close(fd); snprintf(err, errlen, "out of memory"); return -1; }
    off_t at = (off_t)(st->data_start[t->file] + t->begin + first * es);
    size_t done = 0;   /* bytes of the range read */
    int rc = 0;
    while (done < bytes && !rc) {
        size_t want = t->dtype == ST_F32 ? bytes - done : (bytes - done < ST_READ_CHUNK ? bytes - done : ST_READ_CHUNK);
        unsigned char *dst = t->dtype == ST_F32 ? buf + done : buf;
        for (size_t got = 0; got < want;) {
            ssize_t n = pread(fd, dst + got, want - got, at + (off_t)(done + got));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) { snprintf(err, errlen, "%s: short read of tensor '%s'", path, t->name); rc = -1; break; }
            got += (size_t)n;
        }
        if (!rc && t->dtype != ST_F32)
            for (size_t i = 0; i < want / es; i++) {
                uint16_t h = (uint16_t)(buf[i * es] | (buf[i * es + 1] << 8));   /* little-endian, any host */
                out[done / es + i] = t->dtype == ST_BF16 ? st_bf16_to_f32(h) : st_f16_to_f32(h);
            }
        done += want;
    }
    close(fd);
    if (buf != (unsigned char *)out) free(buf);
    return rc;
}

int st_read_f32(const StModel *st, const StTensor *t, float *out, char *err, size_t errlen)
{
    return st_read_f32_range(st, t, 0, t->numel, out, err, errlen);
}

/* The file being written and, when wanted, the hash of every byte that goes
 * into it: the manifest's digest costs no second pass over the file. */
typedef struct {
    FILE *f;
    Sha256 *hash;   /* NULL: not hashed */
} StOut;

/* In pieces of 4 MiB, hash then write each: the kernel writes the dirty pages
 * back while the next piece is hashed, so the disk and the hash overlap. */
static int write_all(StOut *o, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < ((size_t)4 << 20) ? n - done : (size_t)4 << 20;
        if (o->hash) sha256_update(o->hash, b + done, k);
        if (fwrite(b + done, 1, k, o->f) != k) return -1;
        done += k;
    }
    return 0;
}

int st_write(const char *path, const StWriteTensor *t, int n, StDtype dtype,
             const char *metadata_json, char *err, size_t errlen)
{
    return st_write_sha256(path, t, n, dtype, metadata_json, NULL, err, errlen);
}

/* The header st_write writes for t (its JSON padded so the data section
 * starts 8-aligned), malloc'd, its length in *len; the data bytes in *data_len.
 * Built by hand to keep the tensors in the given order. NULL with err. */
static char *st_header(const StWriteTensor *t, int n, StDtype dtype, const char *metadata_json, size_t *len_out,
                       uint64_t *data_len, char *err, size_t errlen)
{
    /* F32 (checkpoints: exact) or BF16 (exports, the dtype the models ship
     * in); F16 is read, never written */
    if (dtype == ST_F16) { snprintf(err, errlen, "st_write: F16 output is not supported"); return NULL; }
    size_t es = dtype_size(dtype);
    /* Room counted from what each entry holds: its name, plus 128 bytes for the keys, the dtype and two
     * 20-digit offsets, plus 21 per dimension (a sign and 19 digits and a comma); the closing brace and up to
     * 7 bytes of alignment padding in the first 256. So no snprintf below is ever cut (the check in the loop
     * guards the count itself). */
    size_t cap = 256 + (metadata_json ? strlen(metadata_json) : 0), len = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].ndim < 0 || t[i].ndim > 8) {
            snprintf(err, errlen, "st_write: tensor '%s' has %d dimensions", t[i].name, t[i].ndim);
            return NULL;
        }
        cap += strlen(t[i].name) + 128 + 21 * (size_t)t[i].ndim;
    }
    char *h = malloc(cap);
    if (!h) { snprintf(err, errlen, "out of memory"); return NULL; }
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{%s}", metadata_json ? metadata_json : "");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
                                dtype == ST_F32 ? "F32" : "BF16");
        for (int d = 0; d < t[i].ndim; d++) {
            len += (size_t)snprintf(h + len, cap - len, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
            numel *= (size_t)t[i].shape[d];
        }
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}",
                                (unsigned long long)off, (unsigned long long)(off + numel * es));
        off += numel * es;
        if (len + 8 >= cap) {
            free(h);
            snprintf(err, errlen, "internal error: st_write's header outgrew its room");
            return NULL;
        }
    }
    h[len++] = '}';
    /* (room for this and the padding: the first 256 bytes of cap beyond the metadata's prefix) */
    while ((len + 8) % 8) h[len++] = ' ';   /* data section starts 8-aligned */
    *len_out = len;
    *data_len = off;
    return h;
}

int st_create(const char *path, const StWriteTensor *t, int n, StDtype dtype, const char *metadata_json, char *err,
              size_t errlen)
{
    size_t len;
    uint64_t data_len;
    char *h = st_header(t, n, dtype, metadata_json, &len, &data_len, err, errlen);
    if (!h) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { free(h); snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)len >> (8 * i));
    /* ftruncate extends with zeros without writing them: a sparse file the ranks then fill */
    int rc = pwrite(fd, lenb, 8, 0) != 8 || pwrite(fd, h, len, 8) != (ssize_t)len ||
             ftruncate(fd, (off_t)(8 + len + data_len)) || fsync(fd);
    if (rc) snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    if (close(fd) && !rc) { snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno)); rc = 1; }
    free(h);
    return rc ? -1 : 0;
}

/* count bytes of b at offset at of fd, through short writes and EINTR. */
static int pwrite_all(int fd, const void *b, size_t count, off_t at)
{
    for (size_t done = 0; done < count;) {
        ssize_t k = pwrite(fd, (const char *)b + done, count - done, at + (off_t)done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        done += (size_t)k;
    }
    return 0;
}

int st_fill(const StModel *st, int fd, const StTensor *t, size_t first, size_t count, const float *data, char *err,
            size_t errlen)
{
    const char *path = st->files[t->file];
    /* F16 is read, never written (st_header refuses it too) */
    if (t->dtype == ST_F16 || first > t->numel || count > t->numel - first) {
        snprintf(err, errlen, "%s: cannot write elements [%zu, %zu) of %s tensor '%s' (%zu elements)", path, first,
                 first + count, t->dtype == ST_F16 ? "F16" : t->dtype == ST_F32 ? "F32" : "BF16", t->name, t->numel);
        return -1;
    }
    size_t es = t->dtype == ST_F32 ? 4 : 2;
    off_t at = (off_t)(st->data_start[t->file] + t->begin + first * es);
    int rc = 0;
    if (t->dtype == ST_F32) {
        rc = pwrite_all(fd, data, count * 4, at);   /* F32 on disk is little-endian: x86-64's own */
    } else {
        unsigned char buf[8192];   /* converted 4096 values at a time, as st_write does */
        for (size_t k = 0; k < count && !rc; k += 4096) {
            size_t m = count - k < 4096 ? count - k : 4096;
            for (size_t j = 0; j < m; j++) {
                uint16_t b = st_f32_to_bf16(data[k + j]);
                buf[2 * j] = (unsigned char)b;
                buf[2 * j + 1] = (unsigned char)(b >> 8);
            }
            rc = pwrite_all(fd, buf, 2 * m, at + (off_t)(2 * k));
        }
    }
    if (rc) snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    return rc;
}

int st_write_sha256(const char *path, const StWriteTensor *t, int n, StDtype dtype,
                    const char *metadata_json, char sha256_hex[65], char *err, size_t errlen)
{
    size_t len;
    uint64_t data_len;
    char *h = st_header(t, n, dtype, metadata_json, &len, &data_len, err, errlen);
    if (!h) return -1;

    /* written as PATH.tmp, fsync'd, renamed: PATH is never a partial file */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) { free(h); snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    Sha256 hash;
    StOut out = {f, sha256_hex ? &hash : NULL};
    if (out.hash) sha256_init(out.hash);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)len >> (8 * i));
    /* the header, then each tensor's data in the header's order, so the offsets st_header computed hold */
    int rc = write_all(&out, lenb, 8) || write_all(&out, h, len);
    free(h);
    for (int i = 0; i < n && !rc; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        if (dtype == ST_F32) { rc = write_all(&out, t[i].data, numel * 4); continue; }
        unsigned char buf[8192];   /* converted 4096 values at a time: no full-size copy */
        for (size_t k = 0; k < numel && !rc; k += 4096) {
            size_t m = numel - k < 4096 ? numel - k : 4096;
            for (size_t j = 0; j < m; j++) {
                uint16_t b = st_f32_to_bf16(t[i].data[k + j]);
                buf[2 * j] = (unsigned char)b;
                buf[2 * j + 1] = (unsigned char)(b >> 8);
            }
            rc = write_all(&out, buf, 2 * m);
        }
    }
    /* synced before the rename, so PATH names complete bytes even after a power loss */
    if (!rc) rc = fflush(f) || fsync(fileno(f));
    if (fclose(f)) rc = -1;
    /* finalized even after a write error, which frees the hash context */
    int hash_failed = out.hash && sha256_final_hex(out.hash, sha256_hex);
    /* a failed digest is no digest: the file is not published, or the manifest would vouch for zeros */
    if (!rc && hash_failed) {
        snprintf(err, errlen, "%s: sha256 failed (libcrypto)", path);
        unlink(tmp);
        return -1;
    }
    if (!rc && rename(tmp, path)) rc = -1;
    if (rc) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
