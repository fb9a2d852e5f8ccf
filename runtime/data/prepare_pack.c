/* prepare_pack.c — documents into rows and shards (docs/shards.md): packing in
 * record order, each shard written whole, the journal (progress.json) an
 * interrupted prepare resumes from, and the stats file beside each dataset.
 */
#include "prepare_internal.h"

static int journal_write(Packer *k);

int write_shard(Packer *k)
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
int close_row(Packer *k)
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
int pack_doc(Packer *k, const uint32_t *ids, const uint8_t *mask, size_t n, size_t start, int cut,
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
int journal_take(Packer *k)
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

void journal_remove(const char *dir)
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
void write_stats(const DataPlan *plan, const DatasetCounts *per_ds)
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
