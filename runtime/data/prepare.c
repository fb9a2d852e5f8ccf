/* prepare.c — `llmc-train prepare PLAN.json`: the plan's datasets -> token shards.
 *
 * The main thread streams records in order (json_stream), checks them
 * (records), renders them with the chat template into a batch; worker threads
 * tokenize a batch while the main thread reads the next one; the main thread
 * packs finished batches into rows in record order, so the output does not
 * depend on the number of threads. Shards are written whole (temp, fsync,
 * rename) and index.json last; a directory whose index.json carries the same
 * data hash is left alone. docs/shards.md describes the output. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "args.h"
#include "chat_template.h"
#include "commands.h"
#include "cpus.h"
#include "json_stream.h"
#include "log.h"
#include "plan.h"
#include "records.h"
#include "shard_io.h"
#include "stopsig.h"
#include "tokenizer.h"

#define BATCH 1024
#define BATCH_BYTES ((size_t)32 << 20)   /* a batch also closes at this much rendered text */
#define SLOT_KEEP ((size_t)1 << 20)      /* a slot's buffers above this are freed after use */
#define MAX_SHOWN_BAD 10
#define MAX_SHOWN_CHECK 100

/* ---- the plan's data section ---- */

/* plan.json as runtime/plan/plan.c reads it for preparing (run_plan_load_data),
 * with what prepare derives from it. */
typedef struct {
    RunPlan rp;
    int pretrain;               /* stage "pt" */
    const char *tokenizer_path;
    const ChatTemplate *tpl;
    const DatasetSpec *ds;
    size_t n_ds;
    uint32_t context;
    int packing;
    int skip_bad;               /* on_bad_record "skip" */
    const char *shards_dir;
    int64_t model_vocab;        /* -1 when absent */
    char hash[33];              /* data_hash: 32 hex digits of a SHA-256 */
    cJSON *cache;               /* content-cache.json as it is to be written */
    int cache_reread;           /* a file's digest was not in the cache */
} DataPlan;

/* Messages go through log.h (docs/runtime.md, "Errors"), their text escaped
 * first: they echo file names, column and role names from the plan and the
 * data. Progress and the summary are log_info lines on stdout, except under
 * --check, whose stdout is the JSON summary: then they go to stderr. */
static int info_to_stderr;

typedef enum { SAY_ERROR, SAY_WARN, SAY_INFO } SayKind;

static void say_line(SayKind kind, const char *fmt, va_list ap)
{
    char text[2048], safe[4096];
    vsnprintf(text, sizeof text, fmt, ap);
    log_escape(safe, sizeof safe, text, strlen(text));
    if (kind == SAY_ERROR) log_error("%s", safe);
    else if (kind == SAY_WARN) log_warn("%s", safe);
    else if (info_to_stderr) log_note("%s", safe);
    else log_info("%s", safe);
}

/* An error; returns -1, so that `return say_error(...)` reports and fails. */
__attribute__((format(printf, 1, 2))) static int say_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(SAY_ERROR, fmt, ap);
    va_end(ap);
    return -1;
}

__attribute__((format(printf, 1, 2))) static void say_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(SAY_WARN, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void say_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(SAY_INFO, fmt, ap);
    va_end(ap);
}

/* path relative to the plan's directory (docs/plan.md) unless absolute */
static char *resolve(const char *dir, const char *path)
{
    if (path[0] == '/' || !dir[0]) return strdup(path);
    size_t a = strlen(dir), b = strlen(path);
    char *p = malloc(a + b + 2);
    if (p) { memcpy(p, dir, a); p[a] = '/'; memcpy(p + a + 1, path, b + 1); }
    return p;
}

static void free_plan(DataPlan *p)
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
static void save_content_cache(DataPlan *p)
{
    if (!p->cache || !p->cache_reread) return;
    char *cp = cache_path(p), *text = cJSON_Print(p->cache), err[512];
    if (cp && text && shard_write_file_atomic(cp, text, strlen(text), err, sizeof err))
        say_warn("%s: not written (%s); the next prepare reads the input files again", cp, err);
    p->cache_reread = 0;
    free(cp);
    free(text);
}

/* Read the plan through runtime/plan/plan.c (the one plan.json reader) and derive
 * the template and the data hash (reread: without content-cache.json). */
static int load_plan(const char *path, DataPlan *p, int reread)
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
        return say_error("%s: tokenizer.template \"%s\" is not supported (qwen, llama3)", path, r->template_);
    if (!p->pretrain && !p->tpl) return say_error("%s: an sft plan needs tokenizer.template (qwen or llama3)", path);
    return data_hash(p, reread);
}

/* ---- tokenizing batches on worker threads ---- */

typedef struct {
    ChatDoc doc;
    TokIds ids;
    UniBuf mask;
    int failed;
    int cut;                  /* the context cut tokens off this document */
    size_t dataset;           /* index into the plan's datasets */
    size_t start;             /* resuming: tokens of this document already in shards */
} Slot;

typedef struct {
    Slot slots[BATCH];
    size_t n;
} TokBatch;

typedef struct Pool Pool;

typedef struct {
    Pool *pool;
    pthread_t thread;
    TokEncoder *enc;
} Worker;

struct Pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    TokBatch *batch;             /* in flight, or NULL */
    unsigned generation;
    atomic_size_t next;       /* next slot of batch to take */
    size_t finished;          /* slots of batch done */
    int active;               /* workers still inside batch */
    size_t cutoff;
    ChatMasking masking;      /* sft: train_on_prompt, mask_history */
    int quit;
    Worker *workers;
    int n_workers;
};

static void *worker_main(void *arg)
{
    Worker *w = arg;
    Pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->work, &p->mu);
        if (p->quit) { pthread_mutex_unlock(&p->mu); return NULL; }
        seen = p->generation;
        TokBatch *b = p->batch;
        if (!b) { pthread_mutex_unlock(&p->mu); continue; }   /* woke after that batch was done */
        p->active++;
        pthread_mutex_unlock(&p->mu);
        size_t mine = 0, i;
        while ((i = atomic_fetch_add(&p->next, 1)) < b->n) {
            Slot *s = &b->slots[i];
            s->ids.len = s->mask.len = 0;
            s->failed = chat_tokenize_masked(&s->doc, w->enc, p->cutoff, p->masking, &s->ids, &s->mask, &s->cut) != 0;
            mine++;
        }
        pthread_mutex_lock(&p->mu);
        p->finished += mine;
        p->active--;
        if (p->finished == b->n && p->active == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void pool_dispatch(Pool *p, TokBatch *b)
{
    pthread_mutex_lock(&p->mu);
    p->batch = b;
    atomic_store(&p->next, 0);
    p->finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

static void pool_wait(Pool *p)
{
    pthread_mutex_lock(&p->mu);
    /* every slot done and no worker still holding the batch (it is refilled next) */
    while (p->batch && (p->finished < p->batch->n || p->active > 0)) pthread_cond_wait(&p->done, &p->mu);
    p->batch = NULL;
    pthread_mutex_unlock(&p->mu);
}

/* ---- packing rows into shards ---- */

/* The stats file's length histogram (docs/estimator.md "The stats file"): bin i
 * holds documents of i*STATS_BIN .. (i+1)*STATS_BIN-1 tokens, the last bin all
 * longer ones; 4096 bins is what llmc reads. */
#define STATS_BIN 16
#define STATS_BINS 4096

/* Per dataset, for index.json and the stats file: the estimator can use real
 * token counts. cut: documents the context cut tokens off (LLaMA-Factory's
 * cutoff_len does the same, silently); cut_untrained: those of them left with
 * no token to train (a prompt that fills the context). */
typedef struct {
    uint64_t kept, skipped, tokens, labels, cut, cut_untrained;
    uint64_t hist[STATS_BINS];  /* documents by length as packed */
} DatasetCounts;

typedef struct {
    const char *dir;
    char prefix[16];            /* shard-PREFIX-NNNNN.bin: differs from the live set's */
    uint32_t context, pad_id, vocab_size;
    int packing, pretrain;
    int dry;                    /* --check: count rows, write nothing */
    uint64_t rows_per_shard;
    /* the shard being filled: rows_in_shard complete rows + the open row */
    uint32_t *ids, *pos;
    uint8_t *mask;
    uint64_t rows_in_shard;
    uint32_t fill;              /* tokens in the open row */
    uint64_t shard_docs, shard_labels;
    ShardEntry *entries;
    size_t n_entries;
    uint64_t n_tokens, n_labels, n_rows, n_docs;
    /* resuming (docs/shards.md "Resuming"): documents are numbered in stream order
     * (doc_seq); a shard written inside document `resume_doc` leaves its first
     * `resume_at` tokens in the shards so far. After every shard the journal
     * (progress.json) records that point, the shards and the counts. */
    uint64_t doc_seq, resume_doc, resume_at;
    DatasetCounts *per_ds;      /* the documents done so far, by dataset */
    size_t n_ds;
    const char *data_hash;
    int journal;                /* write progress.json after each shard */
    int stopped;                /* that shard is written: stop now */
    uint64_t journal_doc;       /* resume_doc as the journal last recorded it */
} Packer;

static int journal_write(Packer *k);

static int write_shard(Packer *k)
{
    if (k->rows_in_shard == 0) return 0;
    char name[64], err[512];
    snprintf(name, sizeof name, "shard-%s-%05zu.bin", k->prefix, k->n_entries);
    char *path = resolve(k->dir, name);
    ShardHeader h = {.context = k->context, .n_rows = k->rows_in_shard, .vocab_size = k->vocab_size,
                     .pad_id = k->pad_id, .n_docs = k->shard_docs, .n_label_tokens = k->shard_labels};
    int rc = k->dry ? 0 : shard_write(path, &h, k->ids, k->pos, k->mask, err, sizeof err);
    free(path);
    if (rc) return say_error("%s", err);
    ShardEntry *e = realloc(k->entries, (k->n_entries + 1) * sizeof *e);
    if (!e) return say_error("out of memory");
    k->entries = e;
    e[k->n_entries++] = (ShardEntry){.file = strdup(name), .n_rows = k->rows_in_shard, .n_docs = k->shard_docs,
                                     .n_label_tokens = k->shard_labels, .fd = -1};
    k->n_rows += k->rows_in_shard;
    k->rows_in_shard = 0;
    k->shard_docs = k->shard_labels = 0;
    if (k->journal && journal_write(k)) return -1;
    if (stopsig_requested()) k->stopped = 1;
    return 0;
}

/* Close the open row (pad it) and start a new one; write the shard when full. */
static int close_row(Packer *k)
{
    if (k->fill == 0) return 0;
    size_t base = (size_t)k->rows_in_shard * k->context;
    for (uint32_t t = k->fill; t < k->context; t++) {
        k->ids[base + t] = k->pad_id;
        k->pos[base + t] = 0;
        k->mask[base + t] = 0;
    }
    k->fill = 0;
    k->rows_in_shard++;
    if (k->rows_in_shard == k->rows_per_shard) return write_shard(k);
    return 0;
}

/* Place tokens [from, to) of a document at the open row; the row must have room. */
static void place(Packer *k, const uint32_t *ids, const uint8_t *mask, size_t from, size_t to)
{
    size_t base = (size_t)k->rows_in_shard * k->context + k->fill;
    for (size_t i = from; i < to; i++) {
        size_t j = base + (i - from);
        k->ids[j] = ids[i];
        k->pos[j] = (uint32_t)(i - from);
        k->mask[j] = i == from ? 0 : mask[i];   /* the first token of a segment predicts nothing */
        k->shard_labels += k->mask[j];
        k->n_labels += k->mask[j];
    }
    k->fill += (uint32_t)(to - from);
    k->n_tokens += to - from;
}

/* A document is done: all its tokens are in rows (cut at the context unless
 * pre-training text is streamed); count it for its dataset. */
static void doc_done(Packer *k, DatasetCounts *c, const uint8_t *mask, size_t n, uint64_t seq, int cut)
{
    uint64_t labels = 0;
    for (size_t i = 1; i < n; i++) labels += mask[i];
    c->tokens += n;
    c->labels += labels;
    c->cut += cut != 0;
    c->cut_untrained += cut && !labels;
    c->hist[n / STATS_BIN < STATS_BINS ? n / STATS_BIN : STATS_BINS - 1]++;
    k->resume_doc = seq + 1;
    k->resume_at = 0;
}

/* Pack document number seq (its tokens from `start` on: a resumed prepare
 * continues a streamed document where the last shard cut it). */
static int pack_doc(Packer *k, const uint32_t *ids, const uint8_t *mask, size_t n, size_t start, int cut,
                    DatasetCounts *c)
{
    uint64_t seq = k->doc_seq++;
    if (n == 0) { doc_done(k, c, mask, 0, seq, cut); return 0; }
    if (start == 0) k->n_docs++;
    if (k->pretrain && k->packing) {
        /* one stream of documents cut into rows; a piece continuing in the next row starts at pos 0 */
        int first = start == 0;
        size_t at = start;
        while (at < n) {
            size_t room = k->context - k->fill, take = n - at < room ? n - at : room;
            if (first) { k->shard_docs++; first = 0; }
            place(k, ids, mask, at, at + take);
            at += take;
            if (at == n) doc_done(k, c, mask, n, seq, cut);
            else { k->resume_doc = seq; k->resume_at = at; }
            if (k->fill == k->context && close_row(k)) return -1;
        }
        return 0;
    }
    if (n > k->context) { n = k->context; cut = 1; }   /* the tokenizer's cutoff is the context: not reached */
    if (!k->packing || k->fill + n > k->context) {
        k->resume_doc = seq;        /* a shard written here holds none of this document */
        k->resume_at = 0;
        if (close_row(k)) return -1;
    }
    k->shard_docs++;
    place(k, ids, mask, 0, n);
    doc_done(k, c, mask, n, seq, cut);
    if (!k->packing || k->fill == k->context) return close_row(k);
    return 0;
}

/* ---- the journal: resuming an interrupted prepare ---- */

#define JOURNAL "progress.json"

/* The histogram as a JSON array, cut after its last non-empty bin. */
static cJSON *hist_json(const DatasetCounts *c)
{
    size_t n = STATS_BINS;
    while (n > 1 && c->hist[n - 1] == 0) n--;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)c->hist[i]));
    return a;
}

/* Write DIR/progress.json (atomically) for the shards written so far: what a
 * prepare stopped by a signal, killed or preempted continues from. */
static int journal_write(Packer *k)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddStringToObject(j, "data_hash", k->data_hash);
    cJSON_AddStringToObject(j, "prefix", k->prefix);
    cJSON_AddNumberToObject(j, "context", k->context);
    cJSON_AddNumberToObject(j, "rows_per_shard", (double)k->rows_per_shard);
    cJSON_AddNumberToObject(j, "resume_doc", (double)k->resume_doc);
    cJSON_AddNumberToObject(j, "resume_at", (double)k->resume_at);
    cJSON_AddNumberToObject(j, "n_tokens", (double)k->n_tokens);
    cJSON_AddNumberToObject(j, "n_labels", (double)k->n_labels);
    cJSON_AddNumberToObject(j, "n_rows", (double)k->n_rows);
    cJSON_AddNumberToObject(j, "n_docs", (double)k->n_docs);
    cJSON *sh = cJSON_AddArrayToObject(j, "shards");
    for (size_t i = 0; i < k->n_entries; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", k->entries[i].file);
        cJSON_AddNumberToObject(o, "n_rows", (double)k->entries[i].n_rows);
        cJSON_AddNumberToObject(o, "n_docs", (double)k->entries[i].n_docs);
        cJSON_AddNumberToObject(o, "n_label_tokens", (double)k->entries[i].n_label_tokens);
        cJSON_AddItemToArray(sh, o);
    }
    cJSON *ds = cJSON_AddArrayToObject(j, "datasets");
    for (size_t i = 0; i < k->n_ds; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "tokens", (double)k->per_ds[i].tokens);
        cJSON_AddNumberToObject(o, "label_tokens", (double)k->per_ds[i].labels);
        cJSON_AddNumberToObject(o, "records_cut", (double)k->per_ds[i].cut);
        cJSON_AddNumberToObject(o, "records_cut_untrained", (double)k->per_ds[i].cut_untrained);
        cJSON_AddItemToObject(o, "length_counts", hist_json(&k->per_ds[i]));
        cJSON_AddItemToArray(ds, o);
    }
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    k->journal_doc = k->resume_doc;
    char *path = resolve(k->dir, JOURNAL), err[512];
    int rc = text && path ? shard_write_file_atomic(path, text, strlen(text), err, sizeof err) : -1;
    if (rc) say_error("%s", text && path ? err : "out of memory");
    free(text);
    free(path);
    return rc;
}

static int journal_u64(const cJSON *o, const char *key, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0) return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

/* Take up the journal of an interrupted prepare of the same data (hash,
 * context, rows per shard, datasets): its shards (each there with the size its
 * rows make), counts and resume point go into k. 1 resumed; 0 no usable
 * journal (none, another data hash, or a shard missing: start over). */
static int journal_take(Packer *k)
{
    char *path = resolve(k->dir, JOURNAL);
    FILE *f = path ? fopen(path, "rb") : NULL;
    free(path);
    if (!f) return 0;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[65536];
    size_t got;
    while (mem && (got = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, got, mem);
    fclose(f);
    if (mem) fclose(mem);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    uint64_t ctx, rps, n_ds;
    const cJSON *hash = cJSON_GetObjectItemCaseSensitive(j, "data_hash");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(j, "prefix");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(j, "shards");
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(j, "datasets");
    int ok = cJSON_IsString(hash) && !strcmp(hash->valuestring, k->data_hash) && cJSON_IsString(prefix) &&
             strlen(prefix->valuestring) < sizeof k->prefix && cJSON_IsArray(sh) && cJSON_IsArray(ds) &&
             !journal_u64(j, "context", &ctx) && ctx == k->context && !journal_u64(j, "rows_per_shard", &rps) &&
             rps == k->rows_per_shard && (n_ds = (uint64_t)cJSON_GetArraySize(ds)) == k->n_ds &&
             !journal_u64(j, "resume_doc", &k->resume_doc) && !journal_u64(j, "resume_at", &k->resume_at) &&
             !journal_u64(j, "n_tokens", &k->n_tokens) && !journal_u64(j, "n_labels", &k->n_labels) &&
             !journal_u64(j, "n_rows", &k->n_rows) && !journal_u64(j, "n_docs", &k->n_docs);
    size_t i = 0;
    for (const cJSON *d = ok ? ds->child : NULL; d && ok; d = d->next, i++) {
        ok = !journal_u64(d, "tokens", &k->per_ds[i].tokens) && !journal_u64(d, "label_tokens", &k->per_ds[i].labels) &&
             !journal_u64(d, "records_cut", &k->per_ds[i].cut) &&
             !journal_u64(d, "records_cut_untrained", &k->per_ds[i].cut_untrained);
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(d, "length_counts");
        ok = ok && cJSON_IsArray(h) && cJSON_GetArraySize(h) <= STATS_BINS;
        size_t b = 0;
        for (const cJSON *c = ok ? h->child : NULL; c && ok; c = c->next, b++) {
            ok = cJSON_IsNumber(c) && c->valuedouble >= 0 && c->valuedouble <= 9007199254740992.0;
            if (ok) k->per_ds[i].hist[b] = (uint64_t)c->valuedouble;
        }
    }
    size_t n = ok ? (size_t)cJSON_GetArraySize(sh) : 0;
    ShardEntry *e = ok && n ? calloc(n, sizeof *e) : NULL;
    if (n && !e) ok = 0;
    i = 0;
    for (const cJSON *o = ok ? sh->child : NULL; o && ok; o = o->next, i++) {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, "file");
        char want[64];
        snprintf(want, sizeof want, "shard-%s-%05zu.bin", prefix->valuestring, i);
        ok = cJSON_IsString(file) && !strcmp(file->valuestring, want) && !journal_u64(o, "n_rows", &e[i].n_rows) &&
             !journal_u64(o, "n_docs", &e[i].n_docs) && !journal_u64(o, "n_label_tokens", &e[i].n_label_tokens);
        struct stat st;
        char *p = ok ? resolve(k->dir, want) : NULL;
        ok = ok && p && stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
             (uint64_t)st.st_size == sizeof(ShardHeader) + e[i].n_rows * k->context * 9;
        free(p);
        e[i].fd = -1;
        if (ok) e[i].file = strdup(want);
    }
    if (ok) {
        snprintf(k->prefix, sizeof k->prefix, "%s", prefix->valuestring);
        k->entries = e;
        k->n_entries = n;
        k->doc_seq = k->resume_doc;
    } else {
        for (size_t m = 0; e && m < n; m++) free(e[m].file);
        free(e);
        k->resume_doc = k->resume_at = k->n_tokens = k->n_labels = k->n_rows = k->n_docs = 0;
        memset(k->per_ds, 0, k->n_ds * sizeof *k->per_ds);
    }
    cJSON_Delete(j);
    return ok;
}

static void journal_remove(const char *dir)
{
    char *path = resolve(dir, JOURNAL);
    if (path) unlink(path);
    free(path);
}

/* ---- the stats file: what llmc's estimator reads beside each dataset ---- */

/* FILE.stats.json beside each dataset (docs/estimator.md "The stats file"):
 * records kept, tokens as packed, the length histogram, and the settings they
 * depend on (context, packing, template; no paths, so that the same data and
 * settings give the same bytes wherever prepare runs). A cache for `llmc check/explain`, so a data directory that cannot be
 * written to is a warning. */
static void write_stats(const DataPlan *plan, const DatasetCounts *per_ds)
{
    for (size_t i = 0; i < plan->n_ds; i++) {
        const DatasetCounts *c = &per_ds[i];
        if (c->kept == 0) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "format", "llmc-data-stats");
        cJSON_AddNumberToObject(o, "version", 1);
        cJSON_AddNumberToObject(o, "records", (double)c->kept);
        cJSON_AddNumberToObject(o, "tokens", (double)c->tokens);
        cJSON_AddNumberToObject(o, "label_tokens", (double)c->labels);
        cJSON_AddNumberToObject(o, "records_cut", (double)c->cut);
        cJSON_AddNumberToObject(o, "records_cut_untrained", (double)c->cut_untrained);
        cJSON_AddNumberToObject(o, "records_skipped", (double)c->skipped);
        cJSON *h = cJSON_AddObjectToObject(o, "length_histogram");
        cJSON_AddNumberToObject(h, "bin_tokens", STATS_BIN);
        cJSON_AddItemToObject(h, "counts", hist_json(c));
        cJSON_AddNumberToObject(o, "context", plan->context);
        cJSON_AddBoolToObject(o, "packing", plan->packing);
        if (plan->tpl) cJSON_AddStringToObject(o, "template", plan->tpl->name);
        else cJSON_AddNullToObject(o, "template");
        char *text = cJSON_Print(o);
        cJSON_Delete(o);
        size_t n = strlen(plan->ds[i].file) + sizeof ".stats.json";
        char *path = malloc(n), err[512];
        if (path) snprintf(path, n, "%s.stats.json", plan->ds[i].file);
        if (!text || !path) say_warn("out of memory writing the stats of dataset %s", plan->ds[i].name);
        else if (shard_write_file_atomic(path, text, strlen(text), err, sizeof err))
            say_warn("%s (llmc estimates dataset %s from its file size instead)", err, plan->ds[i].name);
        free(text);
        free(path);
    }
}

/* ---- the command ---- */

/* A slot that held a big record gives its memory back instead of keeping it for the next. */
static void slot_trim(Slot *s)
{
    if (s->doc.text.cap > SLOT_KEEP || s->doc.cap * sizeof *s->doc.pieces > SLOT_KEEP) chat_doc_free(&s->doc);
    if (s->ids.cap * sizeof *s->ids.ids > SLOT_KEEP) tokids_free(&s->ids);
    if (s->mask.cap > SLOT_KEEP) unibuf_free(&s->mask);
}

/* Pack a tokenized batch in record order. Stops early once a stop signal's
 * shard is written (k->stopped). */
static int pack_batch(Packer *k, TokBatch *b)
{
    for (size_t i = 0; i < b->n && !k->stopped; i++) {
        Slot *s = &b->slots[i];
        if (s->failed) return say_error("out of memory while tokenizing");
        if (pack_doc(k, s->ids.ids, s->mask.p, s->ids.len, s->start, s->cut, &k->per_ds[s->dataset])) return -1;
        slot_trim(s);
    }
    return 0;
}


typedef struct {
    uint64_t kept, skipped[REC_N_REASONS], shown;
} Counts;


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void human(double v, char *out, size_t n)
{
    if (v >= 1e9) snprintf(out, n, "%.2fG", v / 1e9);
    else if (v >= 1e6) snprintf(out, n, "%.2fM", v / 1e6);
    else if (v >= 1e3) snprintf(out, n, "%.1fk", v / 1e3);
    else snprintf(out, n, "%.0f", v);
}

typedef struct {
    int tty;
    double start, last;
    uint64_t total_bytes, done_bytes;
} Progress;

static void progress(Progress *pr, const Counts *c, const Packer *k, int final)
{
    double t = now_s();
    if (!final && t - pr->last < (pr->tty ? 0.5 : 10.0)) return;
    pr->last = t;
    double el = t - pr->start > 1e-6 ? t - pr->start : 1e-6;
    uint64_t recs = c->kept;
    for (int r = 1; r < REC_N_REASONS; r++) recs += c->skipped[r];
    char a[32], b[32], d[32];
    human((double)recs / el, a, sizeof a);
    human((double)k->n_tokens, b, sizeof b);
    human((double)k->n_tokens / el, d, sizeof d);
    double frac = pr->total_bytes ? (double)pr->done_bytes / (double)pr->total_bytes : 1.0;
    double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    char line[256];
    snprintf(line, sizeof line, "%" PRIu64 " records (%s/s), %s tokens (%s/s), %.0f%%, ETA %02d:%02d", recs, a, b, d,
             frac * 100, (int)eta / 60, (int)eta % 60);
    if (!pr->tty) { say_info("%s", line); return; }
    /* on a terminal one line, redrawn in place (as run's step line) */
    FILE *o = info_to_stderr ? stderr : stdout;
    fprintf(o, "\r%s%s%s", log_prefix(), line, final ? "\n" : "");
    fflush(o);
}

/* Remove prepare's own files from dir (shard-*.bin, shard-*.bin.tmp,
 * index.json.tmp) except the shards named in keep (NULL-terminated). Files
 * prepare did not write are never touched; index.json is only ever replaced. */
static int sweep_dir(const char *dir, char *const *keep)
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
static void choose_prefix(char out[16], const char *hash, char *const *live)
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
static int lock_dir(const char *dir)
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
            ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
            holder[n > 0 ? n : 0] = '\0';
            holder[strcspn(holder, "\n")] = '\0';
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
    char host[128] = "?", text[256], when[32] = "";
    if (gethostname(host, sizeof host) != 0) strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int len = snprintf(text, sizeof text, "pid %ld on %s since %s\n", (long)getpid(), host, when);
    if (ftruncate(fd, 0) == 0 && len > 0 && pwrite(fd, text, (size_t)len, 0) < 0) { /* the holder note is best effort */ }
    free(path);
    return fd;
}

static int mkdirs(const char *path)
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
static void unlock_dir(int fd)
{
    if (fd < 0) return;
    if (ftruncate(fd, 0) != 0) { /* the note is only a hint for waiters */ }
    close(fd);
}

static void usage(FILE *out)
{
    fputs("usage: llmc-train prepare PLAN.json [--threads N] [--force] [--check] [--shard-tokens N]\n"
          "                                   [--max-record-bytes N]   (--opt=VALUE or --opt VALUE)\n"
          "  tokenizes the plan's datasets into packed token shards in data.shards_dir\n"
          "  --threads N        tokenizer threads (default $LLMC_THREADS, else the CPUs this\n"
          "                     process may run on: its affinity mask, e.g. Slurm's --cpus-per-task)\n"
          "  --force            redo even when index.json says the shards are up to date\n"
          "  --check            read, check and tokenize everything, list every bad record\n"
          "                     (up to 100) and the totals; write nothing\n"
          "  --shard-tokens N   tokens per shard file (default $LLMC_SHARD_TOKENS, else 33554432)\n"
          "  --max-record-bytes N  a record taking more memory than N bytes once read is a bad\n"
          "                     record (\"too_large\"; default 16777216 = 16 MiB, at most 1 GiB)\n", out);
}

/* One prepare: its options, the plan, and what the steps below share. */
typedef struct {
    /* the command line */
    const char *plan_path;
    long threads;
    long long shard_tokens;     /* tokens per shard file (whole rows: rows_per_shard = this / context) */
    long long max_record;       /* bytes a record may take once read */
    int force, check_only;
    /* set up */
    DataPlan plan;
    int lock_fd;                /* DIR/.prepare.lock; -1 before it is taken, and under --check */
    char **live;                /* the shards index.json names now (the live set) */
    Tokenizer *tok;
    uint32_t vocab;
    int64_t eos, pad, bos;      /* special ids as LLaMA-Factory sets them */
    DatasetCounts *per_ds;      /* [plan.n_ds] */
    Packer k;
    int resumed;                /* the journal's shards were taken up */
    /* reading and tokenizing (valid once `writing`) */
    int writing;                /* past set-up: the pool exists, and a failure removes what was written */
    Pool pool;
    int started;                /* worker threads running */
    TokBatch *batches;          /* two: one is filled while the pool tokenizes the other */
    TokBatch *inflight;         /* the batch the pool has, or NULL */
    int cur, fatal;
    RecordView view;
    Counts counts;
    Progress pr;
    uint64_t bytes_before;      /* bytes of the datasets read before the current one */
    /* resuming: the documents before the journal's point are in its shards (read
     * and checked again for the counts, not tokenized); the one it cut continues */
    uint64_t doc_seq, skip_docs, skip_at;
    char err[512];
} Prep;

/* The command line into P; -1 to go on, else the exit status (0 after --help). */
static int prep_parse_args(Prep *P, int argc, char **argv)
{
    P->threads = cpus_available();
    /* LLMC_SHARD_TOKENS: the default of --shard-tokens where the job script starts prepare */
    const char *st_env = getenv("LLMC_SHARD_TOKENS");
    P->shard_tokens = 1LL << 25;
    int shard_tokens_given = 0;
    P->max_record = (long long)JS_MAX_RECORD_DEFAULT;
    static const struct option longopts[] = {
        {"threads", required_argument, NULL, 't'}, {"max-record-bytes", required_argument, NULL, 'm'},
        {"shard-tokens", required_argument, NULL, 's'}, {"force", no_argument, NULL, 'f'},
        {"check", no_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *cmd = "llmc-train prepare";
    long long v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': if (args_int(cmd, "--threads", optarg, 1, 1024, &v)) return 2; P->threads = (long)v; break;
        case 'm': if (args_int(cmd, "--max-record-bytes", optarg, 1024, 1LL << 30, &P->max_record)) return 2; break;
        case 's':
            if (args_int(cmd, "--shard-tokens", optarg, 1, 1LL << 40, &P->shard_tokens)) return 2;
            shard_tokens_given = 1;
            break;
        case 'f': P->force = 1; break;
        case 'c': P->check_only = 1; break;
        case 'h': usage(stdout); return 0;
        default: return args_getopt_error(cmd, c, argv);
        }
    }
    if (optind < argc) P->plan_path = argv[optind++];
    if (optind < argc) return args_usage_error(cmd, "unexpected argument '%s' (one PLAN.json)", argv[optind]);
    if (!P->plan_path) return args_usage_error(cmd, "PLAN.json is required");
    if (P->threads < 1 || P->threads > 1024)
        return args_usage_error(cmd, "%ld threads (the CPUs available or LLMC_THREADS): want 1 to 1024", P->threads);
    /* the whole value must be the number, as for --shard-tokens: "12k" is refused, not read as 12 */
    if (!shard_tokens_given && st_env && *st_env &&
        args_int(cmd, "LLMC_SHARD_TOKENS", st_env, 1, 1LL << 40, &P->shard_tokens))
        return 2;
    return -1;
}

/* A --max-record-bytes other than the default changes which records are kept:
 * it becomes part of the data hash (the key index.json is compared by). */
static void prep_key_max_record(Prep *P)
{
    if (P->max_record == (long long)JS_MAX_RECORD_DEFAULT) return;
    EVP_MD_CTX *h = sha_new();
    if (!h) return;
    char n[32];
    snprintf(n, sizeof n, "%lld", P->max_record);
    sha_add_str(h, P->plan.hash);
    sha_add_str(h, n);
    sha_final_hex(h, P->plan.hash, sizeof P->plan.hash);
}

/* Up to date, or the lock. index.json is replaced atomically, so it is read
 * without the lock; after waiting for the lock it is read again (another
 * prepare may have done the work meanwhile). -1 to go on (locked), else the
 * exit status: 0 up to date, STOP_EXIT_REQUEUE up to date but asked to stop. */
static int prep_lock_unless_up_to_date(Prep *P)
{
    for (int locked = 0; !P->check_only; locked++) {
        if (!P->force) {
            char *have = shard_index_data_hash(P->plan.shards_dir);
            int same = have && !strcmp(have, P->plan.hash);
            free(have);
            if (same) {
                save_content_cache(&P->plan);
                say_info("%s is up to date (data hash %s)", P->plan.shards_dir, P->plan.hash);
                if (!stopsig_requested()) return 0;
                /* the job was asked to stop (its time limit is near): requeue it now */
                say_info("stop signal %s: exiting %d to be requeued", stopsig_name() ? stopsig_name() : "?",
                         STOP_EXIT_REQUEUE);
                return STOP_EXIT_REQUEUE;
            }
        }
        if (locked) break;
        if (mkdirs(P->plan.shards_dir)) {
            say_error("%s: %s", P->plan.shards_dir, strerror(errno));
            return 2;
        }
        if ((P->lock_fd = lock_dir(P->plan.shards_dir)) < 0) return 2;
        save_content_cache(&P->plan);
    }
    return -1;
}

/* The tokenizer, checked against the model, and the special ids as
 * LLaMA-Factory sets them: the template's stop word replaces eos, pad falls
 * back to eos; pre-training text ends with eos (llama3: <|end_of_text|>).
 * -1 to go on, else the exit status. */
static int prep_load_tokenizer(Prep *P)
{
    const DataPlan *plan = &P->plan;
    if (!(P->tok = tok_load(plan->tokenizer_path, P->err, sizeof P->err))) { say_error("%s", P->err); return 2; }
    P->vocab = tok_vocab_size(P->tok);
    if (plan->model_vocab >= 0 && (int64_t)P->vocab > plan->model_vocab) {
        say_error("the tokenizer has %u ids but model.vocab is %" PRId64, P->vocab, plan->model_vocab);
        return 1;
    }
    P->eos = plan->tpl ? tok_token_id(P->tok, plan->tpl->stop_word) : tok_eos_id(P->tok);
    if (plan->tpl && !strcmp(plan->tpl->name, "llama3") && plan->pretrain)
        P->eos = tok_token_id(P->tok, "<|end_of_text|>");
    P->pad = tok_pad_id(P->tok) >= 0 ? tok_pad_id(P->tok) : P->eos;
    P->bos = tok_bos_id(P->tok);
    if (P->eos < 0 || P->pad < 0) {
        say_error("%s: the tokenizer has no end-of-sequence token%s", plan->tokenizer_path,
                  plan->tpl ? " for the template" : " (tokenizer_config.json eos_token)");
        return 1;
    }
    return -1;
}

/* The packer, and the output directory made ready for the new set: the live
 * set (the one index.json names) stays in place and readable until the new set
 * is complete; the shards an interrupted prepare of the same data recorded in
 * its journal are taken up (unless --force); other leftovers go. -1 to go on,
 * else the exit status. */
static int prep_take_up_journal(Prep *P)
{
    const DataPlan *plan = &P->plan;
    if (!(P->per_ds = calloc(plan->n_ds, sizeof *P->per_ds))) { say_error("out of memory"); return 1; }
    P->k = (Packer){.dir = plan->shards_dir, .context = plan->context, .pad_id = (uint32_t)P->pad,
                    .vocab_size = P->vocab, .packing = plan->packing, .pretrain = plan->pretrain,
                    .dry = P->check_only, .per_ds = P->per_ds, .n_ds = plan->n_ds, .data_hash = plan->hash,
                    .journal = !P->check_only};
    Packer *k = &P->k;
    k->rows_per_shard = (uint64_t)P->shard_tokens / plan->context ? (uint64_t)P->shard_tokens / plan->context : 1;
    if (P->check_only) return -1;
    P->live = shard_index_files(plan->shards_dir);
    P->resumed = !P->force && journal_take(k);
    if (!P->resumed) journal_remove(plan->shards_dir);
    size_t n_live = 0;
    while (P->live && P->live[n_live]) n_live++;
    char **keep = calloc(n_live + k->n_entries + 1, sizeof *keep);
    for (size_t i = 0; keep && i < n_live; i++) keep[i] = P->live[i];
    for (size_t i = 0; keep && i < k->n_entries; i++) keep[n_live + i] = k->entries[i].file;
    int swept = keep ? sweep_dir(plan->shards_dir, keep) : say_error("out of memory");
    free(keep);
    if (swept) return 2;
    if (P->resumed)
        say_info("resuming: %zu shard%s of an interrupted prepare kept; continuing at document %" PRIu64,
                 k->n_entries, k->n_entries == 1 ? "" : "s", k->resume_doc + 1);
    return -1;
}

/* The tokenizer threads, the two batches and the packer's row buffers (one
 * shard of rows: ids and positions 4 bytes a cell, the label mask 1). From
 * here on a failure removes what this prepare wrote. 0, or -1 after a message. */
static int prep_start_pool(Prep *P)
{
    const DataPlan *plan = &P->plan;
    Packer *k = &P->k;
    P->writing = 1;
    P->pool = (Pool){.cutoff = plan->pretrain && plan->packing ? SIZE_MAX : plan->context,
                     .masking = {.train_on_prompt = plan->rp.train_on_prompt, .mask_history = plan->rp.mask_history},
                     .n_workers = (int)P->threads};
    Pool *pool = &P->pool;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->work, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->workers = calloc((size_t)P->threads, sizeof *pool->workers);
    P->batches = calloc(2, sizeof *P->batches);
    if (!P->resumed) choose_prefix(k->prefix, plan->hash, P->live);
    size_t cells = (size_t)k->rows_per_shard * plan->context;
    k->ids = malloc(cells * 4);
    k->pos = malloc(cells * 4);
    k->mask = malloc(cells);
    if (!pool->workers || !P->batches || !k->ids || !k->pos || !k->mask) return say_error("out of memory");
    for (int i = 0; i < pool->n_workers; i++) {
        pool->workers[i].pool = pool;
        pool->workers[i].enc = tok_encoder_new(P->tok);
        if (!pool->workers[i].enc ||
            pthread_create(&pool->workers[i].thread, NULL, worker_main, &pool->workers[i])) {
            tok_encoder_free(pool->workers[i].enc);
            return say_error("cannot start worker threads");
        }
        P->started++;
    }
    return 0;
}

/* A record that failed its checks (why, msg; where: its position, or NULL):
 * under "fail" the prepare stops (P->fatal), under "skip" and --check it is
 * counted by reason and the first few are listed. */
static void prep_bad_record(Prep *P, size_t di, JsonStream *js, RecReason why, const JsonValue *where,
                            const char *msg)
{
    const DatasetSpec *ds = &P->plan.ds[di];
    char full[900];
    if (where)
        snprintf(full, sizeof full, "%s:%u:%u: record %" PRIu64 ": %s", ds->file, where->line, where->col,
                 js_record_number(js), msg);
    else
        snprintf(full, sizeof full, "%s", msg);
    if (!P->plan.skip_bad && !P->check_only) {
        say_error("%s", full);
        say_error("stopping: data.on_bad_record is \"fail\" (\"skip\" counts and skips bad records)");
        P->fatal = 1;
        return;
    }
    P->counts.skipped[why]++;
    P->per_ds[di].skipped++;
    if (P->counts.shown++ < (P->check_only ? MAX_SHOWN_CHECK : MAX_SHOWN_BAD)) {
        if (P->check_only) say_error("%s", full);
        else say_warn("%s (skipped)", full);
    }
}

/* Fill batch b from dataset di's stream: every record checked and converted,
 * the good ones rendered with the chat template (the documents before a
 * resume point only counted). Stops at BATCH records or BATCH_BYTES of text,
 * so memory stays bounded with big records. Returns 0 at the end of the
 * file, 1 while there is more; sets P->fatal on an error. */
static int prep_fill_batch(Prep *P, size_t di, JsonStream *js, TokBatch *b)
{
    const DatasetSpec *ds = &P->plan.ds[di];
    b->n = 0;
    size_t b_bytes = 0;   /* rendered text in this batch */
    while (b->n < BATCH && b_bytes < BATCH_BYTES) {
        JsonValue *rec;
        int rc = js_next(js, &rec);
        if (rc == JS_END) return 0;
        if (rc == JS_ERROR) { say_error("%s", js_error(js)); P->fatal = 1; return 1; }
        RecReason why;
        const JsonValue *where = NULL;
        char msg[600];
        if (rc == JS_BAD_RECORD || rc == JS_TOO_LARGE) {
            why = rc == JS_TOO_LARGE ? REC_TOO_LARGE : REC_INVALID_JSON;
            snprintf(msg, sizeof msg, "%s%s", js_error(js),
                     rc == JS_TOO_LARGE ? "; --max-record-bytes raises the limit" : "");
        } else {
            why = record_convert(ds, rec, &P->view, &where, msg, sizeof msg);
        }
        if (why != REC_OK) {
            prep_bad_record(P, di, js, why, where, msg);
            if (P->fatal) return 1;
            continue;
        }
        if (P->doc_seq < P->skip_docs) {
            P->doc_seq++;
            P->counts.kept++;
            P->per_ds[di].kept++;
            continue;
        }
        Slot *s = &b->slots[b->n];
        s->dataset = di;
        s->start = P->doc_seq++ == P->skip_docs ? (size_t)P->skip_at : 0;
        const RecordView *v = &P->view;
        int rr = ds->format == FORMAT_TEXT
                     ? chat_render_text(v->text, v->text_len, tok_add_bos(P->tok) ? P->bos : -1, P->eos, &s->doc)
                     : chat_render(P->plan.tpl, v->system, v->system_len, v->msgs, v->n, P->bos, &s->doc);
        if (rr) { say_error("out of memory"); P->fatal = 1; return 1; }
        b_bytes += s->doc.text.len;
        b->n++;
        P->counts.kept++;
        P->per_ds[di].kept++;
    }
    return 1;
}

/* Every dataset in order, a batch at a time: while the pool tokenizes one
 * batch the next is read; finished batches are packed in record order, so the
 * shards do not depend on the number of threads. Ends at the last record, an
 * error (P->fatal) or a stop signal (P->k.stopped). Returns the exit status
 * the prepare has so far (2 when a dataset cannot be opened, else 1). */
static int prep_read_datasets(Prep *P)
{
    int status = 1;
    P->pr = (Progress){.tty = isatty(info_to_stderr ? 2 : 1), .start = now_s()};
    P->pr.last = P->pr.start;
    for (size_t i = 0; i < P->plan.n_ds; i++) {
        struct stat st;
        if (stat(P->plan.ds[i].file, &st) == 0) P->pr.total_bytes += (uint64_t)st.st_size;
    }
    P->skip_docs = P->resumed ? P->k.resume_doc : 0;
    P->skip_at = P->resumed ? P->k.resume_at : 0;
    for (size_t di = 0; di < P->plan.n_ds && !P->fatal && !P->k.stopped; di++) {
        JsonStream *js = js_open(P->plan.ds[di].file, P->err, sizeof P->err);
        if (!js) { say_error("%s", P->err); status = 2; P->fatal = 1; break; }
        js_set_max_record(js, (size_t)P->max_record);
        int more = 1;
        while (more && !P->fatal && !P->k.stopped) {
            TokBatch *b = &P->batches[P->cur];
            more = prep_fill_batch(P, di, js, b);
            P->pr.done_bytes = P->bytes_before + js_offset(js);
            /* the previous batch is tokenized meanwhile; pack it, then hand this one out */
            if (P->inflight) {
                pool_wait(&P->pool);
                if (pack_batch(&P->k, P->inflight)) P->fatal = 1;
                P->inflight = NULL;
            }
            if (P->fatal || P->k.stopped) break;
            if (b->n) { pool_dispatch(&P->pool, b); P->inflight = b; P->cur ^= 1; }
            progress(&P->pr, &P->counts, &P->k, 0);
        }
        P->bytes_before += js_offset(js);
        js_close(js);
    }
    if (P->inflight) {
        pool_wait(&P->pool);
        if (!P->fatal && !P->k.stopped && pack_batch(&P->k, P->inflight)) P->fatal = 1;
        P->inflight = NULL;
    }
    record_view_free(&P->view);
    uint64_t limit = P->check_only ? MAX_SHOWN_CHECK : MAX_SHOWN_BAD;
    if (P->counts.shown > limit)
        say_info("%" PRIu64 " more bad record%s not listed (the first %" PRIu64 " are)%s", P->counts.shown - limit,
                 P->counts.shown - limit == 1 ? "" : "s", limit,
                 P->check_only ? "" : "; prepare --check lists up to 100");
    return status;
}

/* The totals as JSON (for index.json and --check's stdout) and as text for
 * the summary line: " (reason n, ...)" in reasons, empty when none skipped. */
static cJSON *prep_summary(const Prep *P, uint64_t *skipped, char *reasons, size_t reasons_len)
{
    const Counts *counts = &P->counts;
    *skipped = 0;
    for (int r = 1; r < REC_N_REASONS; r++) *skipped += counts->skipped[r];
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddNumberToObject(sum, "records_kept", (double)counts->kept);
    cJSON_AddNumberToObject(sum, "records_skipped", (double)*skipped);
    cJSON *by = cJSON_AddObjectToObject(sum, "skipped_by_reason");
    reasons[0] = '\0';
    for (int r = 1; r < REC_N_REASONS; r++) {
        if (!counts->skipped[r]) continue;
        cJSON_AddNumberToObject(by, rec_reason_name((RecReason)r), (double)counts->skipped[r]);
        size_t l = strlen(reasons);
        snprintf(reasons + l, reasons_len - l, "%s%s %" PRIu64, l ? ", " : " (", rec_reason_name((RecReason)r),
                 counts->skipped[r]);
    }
    if (reasons[0]) strncat(reasons, ")", reasons_len - strlen(reasons) - 1);
    cJSON *dsa = cJSON_AddArrayToObject(sum, "datasets");
    for (size_t i = 0; i < P->plan.n_ds; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", P->plan.ds[i].name);
        cJSON_AddNumberToObject(o, "records_kept", (double)P->per_ds[i].kept);
        cJSON_AddNumberToObject(o, "records_skipped", (double)P->per_ds[i].skipped);
        cJSON_AddNumberToObject(o, "tokens", (double)P->per_ds[i].tokens);
        cJSON_AddNumberToObject(o, "label_tokens", (double)P->per_ds[i].labels);
        cJSON_AddNumberToObject(o, "records_cut", (double)P->per_ds[i].cut);
        cJSON_AddNumberToObject(o, "records_cut_untrained", (double)P->per_ds[i].cut_untrained);
        cJSON_AddItemToArray(dsa, o);
    }
    return sum;
}

/* Once per dataset the context cut records of: how many, with its file and
 * the context, beside the bad records it dropped (those are also listed and
 * summed by reason); the counts also go to the stats file and index.json. */
static void prep_say_cut(const Prep *P)
{
    for (size_t i = 0; i < P->plan.n_ds; i++) {
        const DatasetCounts *c = &P->per_ds[i];
        if (!c->cut) continue;
        char file[600], untrained[96] = "", dropped[64] = "";
        log_escape(file, sizeof file, P->plan.ds[i].file, strlen(P->plan.ds[i].file));
        if (c->cut_untrained)
            snprintf(untrained, sizeof untrained, " (%" PRIu64 " of them left with no token to train)", c->cut_untrained);
        if (c->skipped) snprintf(dropped, sizeof dropped, ", %" PRIu64 " dropped as bad records", c->skipped);
        say_warn("dataset %s (%s): %" PRIu64 " of %" PRIu64 " records cut at the context of %u tokens%s%s",
                 P->plan.ds[i].name, file, c->cut, c->kept, P->plan.context, untrained, dropped);
    }
}

/* After the last record: the last row and shard, the summary, then (not under
 * --check) the stats files, index.json — the moment the new set becomes the
 * live one — and the sweep of the previous set. Returns the exit status. */
static int prep_finish_set(Prep *P)
{
    const DataPlan *plan = &P->plan;
    Packer *k = &P->k;
    if (close_row(k) || write_shard(k)) return 1;
    P->pr.done_bytes = P->pr.total_bytes;
    progress(&P->pr, &P->counts, k, 1);
    if (P->counts.kept == 0 || k->n_rows == 0) {
        char files[1024] = "";
        for (size_t i = 0; i < plan->n_ds; i++) {
            size_t l = strlen(files);
            snprintf(files + l, sizeof files - l, "%s%s", i ? ", " : "", plan->ds[i].file);
        }
        uint64_t seen = P->counts.kept;
        for (int r = 1; r < REC_N_REASONS; r++) seen += P->counts.skipped[r];
        say_error("no usable records in the plan's datasets (%s): %" PRIu64 " read, none kept with a token to train",
                  files, seen);
        return 1;
    }
    prep_say_cut(P);
    uint64_t skipped;
    char reasons[512];
    cJSON *sum = prep_summary(P, &skipped, reasons, sizeof reasons);
    if (!P->check_only) write_stats(plan, P->per_ds);
    free(P->per_ds);
    P->per_ds = NULL;
    char *sum_text = cJSON_PrintUnformatted(sum);
    cJSON_Delete(sum);
    if (P->check_only) {
        /* the totals as one JSON line on stdout (for tools), the verdict on stderr */
        printf("%s\n", sum_text ? sum_text : "{}");
        free(sum_text);
        say_info("--check: %" PRIu64 " records good, %" PRIu64 " bad%s; %" PRIu64 " tokens (%" PRIu64
                 " trained) in %" PRIu64 " rows of %u", P->counts.kept, skipped, reasons, k->n_tokens, k->n_labels,
                 k->n_rows, plan->context);
        return skipped && !plan->skip_bad ? 1 : 0;
    }
    ShardIndexInfo info = {.context = plan->context, .vocab_size = P->vocab, .pad_id = (uint32_t)P->pad,
                           .packing = plan->packing, .n_tokens = k->n_tokens, .data_hash = plan->hash,
                           .summary_json = sum_text};
    int irc = shard_index_write(plan->shards_dir, &info, k->entries, k->n_entries, P->err, sizeof P->err);
    free(sum_text);
    if (irc) { say_error("%s", P->err); return 1; }
    /* the new index.json is in place: the previous set's files go */
    char **keep = calloc(k->n_entries + 1, sizeof *keep);
    for (size_t i = 0; keep && i < k->n_entries; i++) keep[i] = k->entries[i].file;
    if (keep) sweep_dir(plan->shards_dir, keep);
    free(keep);
    journal_remove(plan->shards_dir);
    say_info("%" PRIu64 " records kept, %" PRIu64 " skipped%s; %" PRIu64 " tokens (%" PRIu64 " trained) in %" PRIu64
             " rows of %u, %zu shard%s -> %s", P->counts.kept, skipped, reasons, k->n_tokens, k->n_labels, k->n_rows,
             plan->context, k->n_entries, k->n_entries == 1 ? "" : "s", plan->shards_dir);
    return 0;
}

/* Free everything P holds and return status. A failed prepare that got as far
 * as writing removes what it wrote of the new set, and its journal; the live
 * set stays. A stopped one keeps both for the next prepare. */
static int prep_close(Prep *P, int status)
{
    if (P->writing && status != 0 && status != STOP_EXIT_REQUEUE && !P->check_only && P->lock_fd >= 0) {
        sweep_dir(P->plan.shards_dir, P->live);
        journal_remove(P->plan.shards_dir);
    }
    shard_names_free(P->live);
    unlock_dir(P->lock_fd);
    free(P->per_ds);
    if (P->writing) {
        Pool *pool = &P->pool;
        pthread_mutex_lock(&pool->mu);
        pool->quit = 1;
        pthread_cond_broadcast(&pool->work);
        pthread_mutex_unlock(&pool->mu);
        for (int i = 0; i < P->started; i++) {
            pthread_join(pool->workers[i].thread, NULL);
            tok_encoder_free(pool->workers[i].enc);
        }
        for (int b = 0; P->batches && b < 2; b++)
            for (size_t i = 0; i < BATCH; i++) {
                chat_doc_free(&P->batches[b].slots[i].doc);
                tokids_free(&P->batches[b].slots[i].ids);
                unibuf_free(&P->batches[b].slots[i].mask);
            }
        free(P->batches);
        free(pool->workers);
        pthread_mutex_destroy(&pool->mu);
        pthread_cond_destroy(&pool->work);
        pthread_cond_destroy(&pool->done);
    }
    for (size_t i = 0; i < P->k.n_entries; i++) free(P->k.entries[i].file);
    free(P->k.entries);
    free(P->k.ids);
    free(P->k.pos);
    free(P->k.mask);
    tok_free(P->tok);
    free_plan(&P->plan);
    return status;
}

/* prepare: arguments, plan, (up to date?) lock, tokenizer, journal, pool,
 * read and pack every dataset, then the summary and index.json. */
int cmd_prepare(int argc, char **argv)
{
    Prep *P = calloc(1, sizeof *P);
    if (!P) { log_error("out of memory"); return 1; }
    P->lock_fd = -1;
    int rc = prep_parse_args(P, argc, argv);
    if (rc >= 0) { free(P); return rc; }
    /* First thing: under Slurm a requeued job's prepare step may get the job's
     * USR2 while it starts, whose default action would kill it (the job fails). */
    if (!P->check_only) stopsig_install();
    info_to_stderr = P->check_only;
    if (load_plan(P->plan_path, &P->plan, P->force)) rc = 2;   /* --force: every file read again */
    else {
        prep_key_max_record(P);
        if ((rc = prep_lock_unless_up_to_date(P)) < 0 && (rc = prep_load_tokenizer(P)) < 0)
            rc = prep_take_up_journal(P);
    }
    if (rc >= 0) {
        rc = prep_close(P, rc);
        free(P);
        return rc;
    }
    if (prep_start_pool(P)) rc = 1;
    else {
        rc = prep_read_datasets(P);
        if (!P->fatal && P->k.stopped) {
            say_info("stop signal %s: %zu shard%s written and recorded in %s/" JOURNAL "; exiting %d to be "
                     "requeued (the next prepare continues at document %" PRIu64 ")",
                     stopsig_name() ? stopsig_name() : "?", P->k.n_entries, P->k.n_entries == 1 ? "" : "s",
                     P->plan.shards_dir, STOP_EXIT_REQUEUE, P->k.journal_doc + 1);
            rc = STOP_EXIT_REQUEUE;
        } else if (!P->fatal)
            rc = prep_finish_set(P);
    }
    rc = prep_close(P, rc);
    free(P);
    return rc;
}
