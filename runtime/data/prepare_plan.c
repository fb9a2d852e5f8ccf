/* prepare_plan.c — what identifies the output of `llmc-train prepare`: the
 * plan's data section as read for preparing, its data hash (what the tokens are
 * made of; docs/shards.md), and the output directory the prepare owns (its
 * lock, the sweep of leftovers, names apart from the live set's).
 */
#include "prepare_internal.h"
#include "lock_holder.h"

void free_plan(DataPlan *p)
{
    cJSON_Delete(p->cache);
    p->cache = NULL;
    run_plan_free(&p->rp);
}

/* ---- the data hash: what the tokens are made of (docs/shards.md) ----
 * SHA-256 of the plan fields that change the tokens and of the bytes of every
 * input file (datasets, tokenizer.json, tokenizer_config.json). Not of paths,
 * sizes, mtimes or the descriptive counts (samples, size, tokens): a `touch`,
 * a moved file or `samples = N` added to the .llm leave the hash, hence the
 * shards and a checkpoint's fingerprint (run_init.c), as they are. The
 * files' digests are cached in SHARDS/content-cache.json under their path,
 * size and mtime: a file is read again only when one of those changed. */

static void sha_add(EVP_MD_CTX *h, const void *data, size_t n)
{
    EVP_DigestUpdate(h, data, n);
}

static void sha_add_str(EVP_MD_CTX *h, const char *s)
{
    sha_add(h, s, strlen(s) + 1);   /* with its NUL: fields cannot run into each other */
}

/* lowercase hex of the digest so far, up to n-1 characters, into out[n]; frees h */
static int sha_final_hex(EVP_MD_CTX *h, char *out, size_t n)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    int ok = EVP_DigestFinal_ex(h, d, &len) == 1;
    EVP_MD_CTX_free(h);
    size_t k = 0;
    for (unsigned i = 0; ok && i < len && k + 2 < n; i++, k += 2) snprintf(out + k, 3, "%02x", d[i]);
    out[k] = 0;
    return ok ? 0 : -1;
}

static EVP_MD_CTX *sha_new(void)
{
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    if (h && EVP_DigestInit_ex(h, EVP_sha256(), NULL) != 1) { EVP_MD_CTX_free(h); h = NULL; }
    return h;
}

/* SHA-256 of the regular file's bytes into hex[65]; 0, or -1 with err (a FIFO,
 * a device or a directory is refused, never waited on: open_regular_file). */
static int sha_file(const char *path, const char *what, char hex[65], char *err, size_t errlen)
{
    FILE *f = open_regular_file(path, what, err, errlen);
    if (!f) return -1;
    EVP_MD_CTX *h = sha_new();
    char *buf = malloc((size_t)1 << 20);
    size_t r;
    while (h && buf && (r = fread(buf, 1, (size_t)1 << 20, f)) > 0) sha_add(h, buf, r);
    int bad = !h || !buf || ferror(f);
    if (bad) snprintf(err, errlen, "%s: %s", path, !h || !buf ? "out of memory" : strerror(errno));
    free(buf);
    fclose(f);
    if (bad) {
        if (h) EVP_MD_CTX_free(h);
        return -1;
    }
    if (sha_final_hex(h, hex, 65)) { snprintf(err, errlen, "%s: SHA-256 failed (libcrypto)", path); return -1; }
    return 0;
}

/* The digest of one input file: from the cache when its path, size and mtime
 * match an entry, else read (and *reread set). The entry is added to fresh. */
static int content_digest(const char *path, const char *what, const cJSON *cache, cJSON *fresh, char hex[65],
                          int *reread, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    char *real = realpath(path, NULL);   /* the key: one file, whatever the working directory */
    const char *key = real ? real : path;
    double size = (double)st.st_size, sec = (double)st.st_mtim.tv_sec, nsec = (double)st.st_mtim.tv_nsec;
    const cJSON *e;
    int found = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cache, "files")) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "file");
        const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "sha256"));
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(e, "size");
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(e, "mtime_s");
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(e, "mtime_ns");
        if (cJSON_IsString(f) && !strcmp(f->valuestring, key) && d && strlen(d) == 64 &&
            strspn(d, "0123456789abcdef") == 64 && cJSON_IsNumber(sz) && sz->valuedouble == size &&
            cJSON_IsNumber(ms) && ms->valuedouble == sec && cJSON_IsNumber(mn) && mn->valuedouble == nsec) {
            memcpy(hex, d, 65);
            found = 1;
            break;
        }
    }
    if (!found && sha_file(path, what, hex, err, errlen)) {
        free(real);
        return -1;
    }
    *reread |= !found;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", key);
    free(real);
    cJSON_AddNumberToObject(o, "size", size);
    cJSON_AddNumberToObject(o, "mtime_s", sec);
    cJSON_AddNumberToObject(o, "mtime_ns", nsec);
    cJSON_AddStringToObject(o, "sha256", hex);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(fresh, "files"), o);
    return 0;
}

/* A plan section without the keys that do not change the tokens, added to h. */
static void sha_add_section(EVP_MD_CTX *h, const cJSON *sec, const char *const *drop)
{
    cJSON *c = cJSON_Duplicate(sec, 1);
    for (size_t i = 0; c && drop[i]; i++) cJSON_DeleteItemFromObjectCaseSensitive(c, drop[i]);
    char *s = c ? cJSON_PrintUnformatted(c) : NULL;
    sha_add_str(h, s ? s : "null");
    free(s);
    cJSON_Delete(c);
}

static char *cache_path(const DataPlan *p)
{
    size_t n = strlen(p->shards_dir) + sizeof "/content-cache.json";
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/content-cache.json", p->shards_dir);
    return s;
}

/* The idempotence key and the shards' identity: the plan's stage, the
 * tokenizer's template, each dataset's format, columns and tags, the data
 * section but shards_dir, and the content of every input file. */
static int data_hash(DataPlan *p, int reread)
{
    char *cp = cache_path(p);
    char err[1024];
    char *text = cp && !reread ? shard_read_small_file(cp, (size_t)1 << 26, err, sizeof err) : NULL;
    cJSON *cache = text ? cJSON_Parse(text) : NULL;
    free(text);
    free(cp);
    p->cache = cJSON_CreateObject();
    cJSON_AddItemToObject(p->cache, "files", cJSON_CreateArray());
    EVP_MD_CTX *h = sha_new();
    if (!h) { cJSON_Delete(cache); return say_error("libcrypto: SHA-256 unavailable"); }
    sha_add_str(h, "llmc-shards-2");
    sha_add_str(h, stage_json_names[p->rp.stage]);
    const cJSON *root = p->rp.json;
    sha_add_section(h, cJSON_GetObjectItemCaseSensitive(root, "tokenizer"), (const char *const[]){"path", NULL});
    sha_add_section(h, cJSON_GetObjectItemCaseSensitive(root, "data"), (const char *const[]){"shards_dir", NULL});
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(root, "datasets");
    size_t k = 0;
    char hex[65];
    int rc = 0;
    for (const cJSON *d = cJSON_IsArray(ds) ? ds->child : NULL; d && k < p->n_ds; d = d->next, k++) {
        sha_add_section(h, d, (const char *const[]){"name", "file", "samples", "size_bytes", "tokens", NULL});
        if (content_digest(p->ds[k].file, "dataset", cache, p->cache, hex, &p->cache_reread, err, sizeof err)) {
            rc = say_error("%s", err);
            break;
        }
        sha_add_str(h, hex);
    }
    struct stat st;
    int is_dir = stat(p->tokenizer_path, &st) == 0 && S_ISDIR(st.st_mode);
    const char *const names[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; !rc && i < (is_dir ? 2 : 1); i++) {
        char tj[4200];
        snprintf(tj, sizeof tj, is_dir ? "%s/%s" : "%s", p->tokenizer_path, names[i]);
        /* unreadable: the tokenizer's loader says why, in its own words */
        sha_add_str(h, content_digest(tj, "tokenizer file", cache, p->cache, hex, &p->cache_reread, err, sizeof err)
                       ? "absent" : hex);
    }
    cJSON_Delete(cache);
    if (rc) { EVP_MD_CTX_free(h); return rc; }
    if (sha_final_hex(h, p->hash, sizeof p->hash)) return say_error("libcrypto: SHA-256 failed");
    return 0;
}

/* SHARDS/content-cache.json rewritten (atomically) when a file was read for its
 * digest; a failure only costs the next prepare a reread (a warning). */
void save_content_cache(DataPlan *p)
{
    if (!p->cache || !p->cache_reread) return;
    char *cp = cache_path(p), *text = cJSON_Print(p->cache), err[512];
    if (cp && text && shard_write_file_atomic(cp, text, strlen(text), err, sizeof err))
        say_warn("%s: not written (%s); the next prepare reads the input files again", cp, err);
    p->cache_reread = 0;
    free(cp);
    free(text);
}

/* A --max-record-bytes other than the default changes which records are kept:
 * it becomes part of the data hash (the key index.json is compared by). */
void data_hash_max_record(DataPlan *p, long long max_record)
{
    if (max_record == (long long)JS_MAX_RECORD_DEFAULT) return;
    EVP_MD_CTX *h = sha_new();
    if (!h) return;
    char n[32];
    snprintf(n, sizeof n, "%lld", max_record);
    sha_add_str(h, p->hash);
    sha_add_str(h, n);
    sha_final_hex(h, p->hash, sizeof p->hash);
}

/* Read the plan through runtime/plan/plan.c (the one plan.json reader) and derive
 * the template and the data hash (reread: without content-cache.json). */
int load_plan(const char *path, DataPlan *p, int reread)
{
    memset(p, 0, sizeof *p);
    char err[1024];
    if (run_plan_load_data(&p->rp, path, err, sizeof err)) return say_error("%s", err);
    const RunPlan *r = &p->rp;
    p->pretrain = r->stage == STAGE_PT;
    p->tokenizer_path = r->tokenizer_path;
    p->ds = r->datasets;
    p->n_ds = r->n_datasets;
    p->context = (uint32_t)r->context;
    p->packing = r->packing;
    p->skip_bad = r->bad_records == BADREC_SKIP;
    p->shards_dir = r->shards_dir;
    p->model_vocab = r->model_vocab;
    if (r->template_ && !(p->tpl = chat_template_find(r->template_)))
        return say_error("%s: tokenizer.template \"%s\" is not supported (%s)", path, r->template_,
                         chat_template_names(", "));
    if (!p->pretrain && !p->tpl)
        return say_error("%s: an sft plan needs tokenizer.template (%s)", path, chat_template_names(" or "));
    return data_hash(p, reread);
}

/* Remove prepare's own files from dir (shard-*.bin, shard-*.bin.tmp,
 * index.json.tmp) except the shards named in keep (NULL-terminated). Files
 * prepare did not write are never touched; index.json is only ever replaced. */
int sweep_dir(const char *dir, char *const *keep)
{
    DIR *d = opendir(dir);
    if (!d) return say_error("%s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        int ours = !strcmp(e->d_name, "index.json.tmp") || !strcmp(e->d_name, JOURNAL ".tmp") ||
                   (!strncmp(e->d_name, "shard-", 6) &&
                    ((n > 4 && !strcmp(e->d_name + n - 4, ".bin")) || (n > 8 && !strcmp(e->d_name + n - 8, ".bin.tmp"))));
        for (size_t i = 0; ours && keep && keep[i]; i++)
            if (!strcmp(keep[i], e->d_name)) ours = 0;
        if (!ours) continue;
        char *p = resolve(dir, e->d_name);
        if (p) { unlink(p); free(p); }
    }
    closedir(d);
    return 0;
}

/* New shard names must not be those of the live set, which stays readable
 * until the new index.json replaces it: take 8 hex digits of the data hash,
 * or the next 8 when the live set already uses them. */
void choose_prefix(char out[16], const char *hash, char *const *live)
{
    for (int half = 0; half < 2; half++) {
        snprintf(out, 16, "%.8s", hash + 8 * half);
        char head[32];
        snprintf(head, sizeof head, "shard-%s-", out);
        int used = 0;
        for (size_t i = 0; live && live[i]; i++)
            if (!strncmp(live[i], head, strlen(head))) used = 1;
        if (!used) return;
    }
}

/* Take DIR/.prepare.lock (flock, released by the kernel when this process
 * ends, however it ends): concurrent prepares of one plan, as the tasks of a
 * Slurm job array start them, run one after another. Returns the open fd, or
 * -1 after a message. A file system without locks is a warning, not an error. */
int lock_dir(const char *dir)
{
    char *path = resolve(dir, ".prepare.lock");
    if (!path) return say_error("out of memory");
    int fd = open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) say_error("%s: not a regular file", path);
        else say_error("%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        free(path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            char holder[256];
            lock_holder_read(fd, holder, sizeof holder);
            say_info("%s: another prepare of this output is running (%s); waiting for it to finish", path,
                holder[0] ? holder : "its holder did not say who it is yet");
            double t0 = now_s();
            int rc;
            while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {}
            if (rc != 0) { say_error("%s: lock: %s", path, strerror(errno)); close(fd); free(path); return -1; }
            say_info("%s: lock taken after %.0f s", path, now_s() - t0);
        } else {
            say_warn("%s: this file system does not lock (%s); concurrent prepares of this plan are not "
                "kept apart", path, strerror(errno));
            free(path);
            return fd;
        }
    }
    lock_holder_write(fd);
    free(path);
    return fd;
}

int mkdirs(const char *path)
{
    char *p = strdup(path);
    if (!p) return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) { free(p); return -1; }
        *s = '/';
    }
    int rc = mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
    free(p);
    return rc;
}

/* Release the lock; the holder note goes with it. */
void unlock_dir(int fd)
{
    if (fd < 0) return;
    if (ftruncate(fd, 0) != 0) { /* the note is only a hint for waiters */ }
    close(fd);
}
