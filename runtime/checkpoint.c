/* checkpoint.c — training checkpoints, HF export, manifests, `llmc-train verify`. */
#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "hf_config.h"
#include "sha256.h"

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
        if (stat(p, &sb) || !S_ISREG(sb.st_mode) || !strcmp(e->d_name, "MANIFEST.sha256")) continue;
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
    int n = 0;
    char **names = list_files(dir, &n);
    if (!names) { snprintf(err, errlen, "%s: %s", dir, strerror(errno)); return -1; }
    size_t cap = (size_t)n * 400 + 1, len = 0;
    char *text = malloc(cap);
    int rc = text ? 0 : -1;
    for (int i = 0; i < n && !rc; i++) {
        char p[4096], hex[65];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (sha256_file_hex(p, hex)) { snprintf(err, errlen, "%s: %s", p, strerror(errno)); rc = -1; break; }
        len += (size_t)snprintf(text + len, cap - len, "%s  %s\n", hex, names[i]);
    }
    if (!rc) {
        char p[4096];
        snprintf(p, sizeof p, "%s/MANIFEST.sha256", dir);
        rc = write_file_atomic(p, text, len, err, errlen);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(text);
    return rc;
}

int manifest_check(const char *dir, FILE *out, char *err, size_t errlen)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/MANIFEST.sha256", dir);
    FILE *f = fopen(p, "r");
    if (!f) { snprintf(err, errlen, "%s: %s", p, strerror(errno)); return -1; }
    char line[4600];
    int bad = 0, lines = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t L = strlen(line);
        if (L && line[L - 1] == '\n') line[--L] = 0;
        if (!L) continue;
        if (L < 67 || line[64] != ' ' || line[65] != ' ' || strspn(line, "0123456789abcdef") != 64 ||
            strchr(line + 66, '/')) {
            snprintf(err, errlen, "%s:%d: not a 'SHA256  FILE' line", p, lineno);
            fclose(f);
            return -1;
        }
        lines++;
        char fp[4096 + 4700], hex[65];
        snprintf(fp, sizeof fp, "%s/%s", dir, line + 66);
        int ok = sha256_file_hex(fp, hex) == 0 && !memcmp(hex, line, 64);
        if (!ok) bad = 1;
        if (out) fprintf(out, "%s: %s\n", line + 66, ok ? "OK" : access(fp, F_OK) ? "FAILED open or read" : "FAILED");
    }
    fclose(f);
    if (!lines) { snprintf(err, errlen, "%s: lists no files", p); return -1; }
    /* a file present but not listed is also a mismatch: the manifest covers the whole directory */
    int n = 0;
    char **names = list_files(dir, &n);
    for (int i = 0; names && i < n; i++) {
        FILE *g = fopen(p, "r");
        int listed = 0;
        while (g && fgets(line, sizeof line, g)) {
            size_t L = strlen(line);
            if (L && line[L - 1] == '\n') line[--L] = 0;
            if (L > 66 && !strcmp(line + 66, names[i])) listed = 1;
        }
        if (g) fclose(g);
        if (!listed) { bad = 1; if (out) fprintf(out, "%s: FAILED not in manifest\n", names[i]); }
        free(names[i]);
    }
    free(names);
    return bad;
}

int cmd_verify(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: llmc-train verify DIR   (checks DIR/MANIFEST.sha256)\n");
        return 2;
    }
    char err[512];
    int rc = manifest_check(argv[1], stdout, err, sizeof err);
    if (rc < 0) { fprintf(stderr, "llmc-train verify: %s\n", err); return 2; }
    if (rc) fprintf(stderr, "llmc-train verify: %s: checksum mismatch\n", argv[1]);
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

static int write_model_file(const char *path, const Model *m, const float *buf, const char *prefix, StDtype dt,
                            char *err, size_t errlen)
{
    char **names;
    int n;
    StWriteTensor *t = model_tensors(m, buf, prefix, &names, &n);
    if (!t) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = st_write(path, t, n, dt, "\"format\":\"pt\"", err, errlen);
    free_tensors(t, names, n);
    return rc;
}

/* Read every tensor of m (name = prefix + param name) from st into buf. */
static int read_model_tensors(const StModel *st, const Model *m, float *buf, const char *prefix, char *err, size_t errlen)
{
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
        if (st_read_f32(st, t, buf + p->offset, err, errlen)) return -1;
    }
    return 0;
}

int load_hf_weights(const char *path, Model *m, char *err, size_t errlen)
{
    StModel st;
    if (st_open(&st, path, err, errlen)) return -1;
    int rc = read_model_tensors(&st, m, m->w, "", err, errlen);
    st_close(&st);
    return rc;
}

/* ---- training checkpoints ---- */

static char *state_json(const AdamW *opt, const TrainState *s)
{
    char *buf = malloc(1024);
    if (!buf) return NULL;
    snprintf(buf, 1024,
             "{\n  \"format\": \"llmc-train-checkpoint\",\n  \"version\": 1,\n  \"step\": %" PRId64 ",\n"
             "  \"adam_t\": %" PRId64 ",\n  \"rows_consumed\": %" PRId64 ",\n  \"tokens_seen\": %" PRId64 ",\n"
             "  \"rng\": [\"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\"]\n}\n",
             s->step, opt->t, s->rows_consumed, s->tokens_seen, s->rng.s[0], s->rng.s[1], s->rng.s[2], s->rng.s[3]);
    return buf;
}

static int parse_state(const char *path, AdamW *opt, TrainState *s, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    cJSON *step = cJSON_GetObjectItem(o, "step"), *t = cJSON_GetObjectItem(o, "adam_t");
    cJSON *rows = cJSON_GetObjectItem(o, "rows_consumed"), *tok = cJSON_GetObjectItem(o, "tokens_seen");
    cJSON *rng = cJSON_GetObjectItem(o, "rng");
    int ok = cJSON_IsNumber(step) && cJSON_IsNumber(t) && cJSON_IsNumber(rows) && cJSON_IsNumber(tok) &&
             cJSON_IsArray(rng) && cJSON_GetArraySize(rng) == 4;
    for (int i = 0; ok && i < 4; i++) {
        const char *h = cJSON_GetStringValue(cJSON_GetArrayItem(rng, i));
        char *end;
        if (!h) { ok = 0; break; }
        s->rng.s[i] = strtoull(h, &end, 16);
        if (*end || end == h) ok = 0;
    }
    if (ok) {
        s->step = (int64_t)step->valuedouble;
        opt->t = (int64_t)t->valuedouble;
        s->rows_consumed = (int64_t)rows->valuedouble;
        s->tokens_seen = (int64_t)tok->valuedouble;
    }
    cJSON_Delete(o);
    if (!ok) { snprintf(err, errlen, "%s: not a valid checkpoint state", path); return -1; }
    return 0;
}

static void prune(const char *ckpt_dir, int keep)
{
    DIR *d = opendir(ckpt_dir);
    if (!d) return;
    char **names = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "step-", 5) || strlen(e->d_name) != 13) continue;
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn) break;
        names = nn;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        if (i < n - keep) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", ckpt_dir, names[i]);
            remove_flat_dir(p);
        }
        free(names[i]);
    }
    free(names);
}

int ckpt_save(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st, int keep,
              char *err, size_t errlen)
{
    char name[32], tmp[4096], final[4096], p[4200];
    snprintf(name, sizeof name, "step-%08" PRId64, st->step);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", ckpt_dir, name);
    snprintf(final, sizeof final, "%s/%s", ckpt_dir, name);
    if (mkdir_parents(ckpt_dir)) { snprintf(err, errlen, "%s: %s", ckpt_dir, strerror(errno)); return -1; }
    remove_flat_dir(tmp);   /* a leftover of an interrupted save */
    if (mkdir(tmp, 0755)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }

    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    if (write_model_file(p, m, m->w, "", ST_F32, err, errlen)) return -1;
    /* optimizer moments: one file, exp_avg.* then exp_avg_sq.* */
    char **n1, **n2;
    int c1, c2;
    StWriteTensor *t1 = model_tensors(m, opt->m, "exp_avg.", &n1, &c1);
    StWriteTensor *t2 = model_tensors(m, opt->v, "exp_avg_sq.", &n2, &c2);
    StWriteTensor *all = t1 && t2 ? malloc((size_t)(c1 + c2) * sizeof *all) : NULL;
    int rc = -1;
    if (all) {
        memcpy(all, t1, (size_t)c1 * sizeof *all);
        memcpy(all + c1, t2, (size_t)c2 * sizeof *all);
        snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
        rc = st_write(p, all, c1 + c2, ST_F32, "\"format\":\"llmc-adamw\"", err, errlen);
    } else {
        snprintf(err, errlen, "out of memory");
    }
    free(all);
    if (t1) free_tensors(t1, n1, c1);
    if (t2) free_tensors(t2, n2, c2);
    if (rc) return -1;

    char *sj = state_json(opt, st);
    snprintf(p, sizeof p, "%s/state.json", tmp);
    rc = sj ? write_file_atomic(p, sj, strlen(sj), err, errlen) : -1;
    free(sj);
    if (rc || manifest_write(tmp, err, errlen)) return -1;
    fsync_dir(tmp);
    remove_flat_dir(final);   /* a stale directory of the same step (resumed from an older one) */
    if (rename(tmp, final)) { snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno)); return -1; }
    fsync_dir(ckpt_dir);
    char latest[64];
    snprintf(latest, sizeof latest, "%s\n", name);
    snprintf(p, sizeof p, "%s/latest", ckpt_dir);
    if (write_file_atomic(p, latest, strlen(latest), err, errlen)) return -1;
    fsync_dir(ckpt_dir);
    prune(ckpt_dir, keep);
    return 0;
}

int ckpt_load_latest(const char *ckpt_dir, Model *m, AdamW *opt, TrainState *st, char *err, size_t errlen)
{
    char p[4700], name[256];
    snprintf(p, sizeof p, "%s/latest", ckpt_dir);
    FILE *f = fopen(p, "r");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "%s: %s", p, strerror(errno));
        return -1;
    }
    int got = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    name[strcspn(name, "\n")] = 0;
    if (!got || strncmp(name, "step-", 5) || strchr(name, '/')) {
        snprintf(err, errlen, "%s: does not name a step-* directory", p);
        return -1;
    }
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", ckpt_dir, name);
    char merr[512];
    int mc = manifest_check(dir, NULL, merr, sizeof merr);
    if (mc) {
        snprintf(err, errlen, "checkpoint %s fails its manifest%s%s", dir, mc < 0 ? ": " : "", mc < 0 ? merr : "");
        return -1;
    }
    StModel sm;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    int rc = read_model_tensors(&sm, m, m->w, "", err, errlen);
    st_close(&sm);
    if (rc) return -1;
    snprintf(p, sizeof p, "%s/optimizer.safetensors", dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    rc = read_model_tensors(&sm, m, opt->m, "exp_avg.", err, errlen);
    if (!rc) rc = read_model_tensors(&sm, m, opt->v, "exp_avg_sq.", err, errlen);
    st_close(&sm);
    if (rc) return -1;
    snprintf(p, sizeof p, "%s/state.json", dir);
    if (parse_state(p, opt, st, err, errlen)) return -1;
    return 1;
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

static cJSON *read_json(const char *path)
{
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

int hf_export(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir, char *err, size_t errlen)
{
    static const char *tok_files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                      "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja",
                                      "generation_config.json"};
    char tmp[4096], p[4200], src[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    remove_flat_dir(tmp);
    if (mkdir_parents(tmp)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    if (write_model_file(p, m, m->w, "", dtype, err, errlen)) return -1;
    int bos, eos;
    special_ids(tokenizer_dir, &bos, &eos);
    snprintf(p, sizeof p, "%s/config.json", tmp);
    if (hf_config_write(p, &m->cfg, dtype == ST_BF16 ? "bfloat16" : "float32", bos, eos, err, errlen)) return -1;
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
    if (manifest_write(tmp, err, errlen)) return -1;
    fsync_dir(tmp);
    remove_flat_dir(dir);
    if (rename(tmp, dir)) { snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno)); return -1; }
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) { *slash = 0; fsync_dir(parent[0] ? parent : "/"); }
    return 0;
}
