/* tokenizer.c — byte-level BPE: loading tokenizer.json, encoding, decoding. */
#include "tokenizer.h"
#include "json_stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

/* The two Split patterns we implement (pretok.re), byte for byte as in tokenizer.json. */
static const char PATTERN_DIGIT1[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PATTERN_DIGITS3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum { TF_EXISTS = 1, TF_ADDED = 2, TF_SPECIAL = 4, TF_RAWTEXT = 8 };

typedef struct {
    uint32_t id;
    uint32_t off, len;       /* content in the pool */
    uint8_t lstrip, rstrip, special;
} AddedToken;

struct Tokenizer {
    uint32_t n_ids;
    uint32_t *tok_off, *tok_len;   /* per id: its bytes in pool */
    uint8_t *tok_flags;
    uint8_t *pool;
    size_t pool_len, pool_cap;

    uint32_t *vocab_slots;         /* id + 1 per slot, 0 empty; key = bytes of the id */
    size_t vocab_mask;

    uint64_t *merge_keys;          /* (left << 32 | right) + 1, 0 empty */
    uint32_t *merge_rank, *merge_new;
    size_t merge_mask;

    uint32_t byte_id[256];
    int nfc, ignore_merges;
    PretokKind kind;

    AddedToken *added;
    size_t n_added;
    uint32_t *added_slots;         /* index + 1 into added, 0 empty; key = content */
    size_t added_mask;
    uint8_t added_first[256];      /* bytes that start some added token */
    uint32_t added_lens[64];       /* distinct content lengths, longest first */
    size_t n_added_lens;

    int64_t eos, pad, bos;
    int add_bos;
};

int tokids_push(TokIds *t, uint32_t id)
{
    if (t->len == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        uint32_t *p = realloc(t->ids, cap * sizeof *p);
        if (!p) return -1;
        t->ids = p;
        t->cap = cap;
    }
    t->ids[t->len++] = id;
    return 0;
}

void tokids_free(TokIds *t)
{
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0x100000001B3ull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    return x ^ (x >> 33);
}

static size_t table_size(size_t n)
{
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    return cap;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- ByteLevel: GPT-2's reversible map of bytes to printable characters ---- */

static uint32_t byte_to_char[256];
static int16_t char_to_byte[0x144];   /* every mapped character is below U+0144 */

static void bytelevel_build(void)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_char[b] = direct ? (uint32_t)b : (uint32_t)(256 + n++);
    }
    for (int c = 0; c < 0x144; c++) char_to_byte[c] = -1;
    for (int b = 0; b < 256; b++) char_to_byte[byte_to_char[b]] = (int16_t)b;
}

static void bytelevel_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, bytelevel_build);
}

/* ByteLevel text -> bytes into out. 0 ok; 1 if text has a character outside the map. */
static int bytelevel_decode(const char *text, UniBuf *out)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        uint32_t c;
        i += utf8_decode(s + i, n - i, &c);
        if (c >= 0x144 || char_to_byte[c] < 0) return 1;
        uint8_t b = (uint8_t)char_to_byte[c];
        if (unibuf_append(out, &b, 1)) return -1;
    }
    return 0;
}

/* ---- the pool and lookups ---- */

static int pool_add(Tokenizer *t, const void *p, size_t n, uint32_t *off)
{
    if (t->pool_cap - t->pool_len < n) {
        size_t cap = t->pool_cap ? t->pool_cap : 1 << 16;
        while (cap - t->pool_len < n) cap *= 2;
        uint8_t *np = realloc(t->pool, cap);
        if (!np) return -1;
        t->pool = np;
        t->pool_cap = cap;
    }
    if (t->pool_len > UINT32_MAX - n) return -1;
    memcpy(t->pool + t->pool_len, p, n);
    *off = (uint32_t)t->pool_len;
    t->pool_len += n;
    return 0;
}

static int64_t vocab_find(const Tokenizer *t, const uint8_t *s, size_t n)
{
    if (!t->vocab_slots) return -1;
    for (size_t i = hash_bytes(s, n) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        uint32_t v = t->vocab_slots[i];
        if (!v) return -1;
        uint32_t id = v - 1;
        if (t->tok_len[id] == n && !memcmp(t->pool + t->tok_off[id], s, n)) return id;
    }
}

/* Insert id keyed by its bytes; returns 1 if the key was already present. */
static int vocab_insert(Tokenizer *t, uint32_t id)
{
    const uint8_t *s = t->pool + t->tok_off[id];
    size_t n = t->tok_len[id];
    for (size_t i = hash_bytes(s, n) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        uint32_t v = t->vocab_slots[i];
        if (!v) { t->vocab_slots[i] = id + 1; return 0; }
        if (t->tok_len[v - 1] == n && !memcmp(t->pool + t->tok_off[v - 1], s, n)) return 1;
    }
}

static int merge_find(const Tokenizer *t, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *new_id)
{
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    for (size_t i = hash_u64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        uint64_t k = t->merge_keys[i];
        if (!k) return 0;
        if (k == key) { *rank = t->merge_rank[i]; *new_id = t->merge_new[i]; return 1; }
    }
}

static const AddedToken *added_find(const Tokenizer *t, const uint8_t *s, size_t n)
{
    if (!t->added_slots) return NULL;
    for (size_t i = hash_bytes(s, n) & t->added_mask;; i = (i + 1) & t->added_mask) {
        uint32_t v = t->added_slots[i];
        if (!v) return NULL;
        const AddedToken *a = &t->added[v - 1];
        if (a->len == n && !memcmp(t->pool + a->off, s, n)) return a;
    }
}

/* ---- loading ---- */

static char *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    /* a FIFO or device is refused before it can block or never end */
    FILE *f = open_regular_file(path, "tokenizer file", err, errlen);
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        fail(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf || n != (size_t)st.st_size) {
        free(buf);
        fail(err, errlen, "%s: cannot read", path);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int json_true(const cJSON *o, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int valid_id(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 16777216.0 &&
           v->valuedouble == (double)(int)v->valuedouble;
}

static int check_normalizer(Tokenizer *t, const cJSON *n, const char *path, char *err, size_t errlen)
{
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = json_str(n, "type");
    if (type && !strcmp(type, "NFC")) { t->nfc = 1; return 0; }
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        const cJSON *e;
        cJSON_ArrayForEach(e, list) if (check_normalizer(t, e, path, err, errlen)) return -1;
        return 0;
    }
    return fail(err, errlen, "%s: normalizer '%s' is not supported (only NFC or none)", path,
                type ? type : "?");
}

static int check_bytelevel(const cJSON *b, const char *what, const char *path, char *err, size_t errlen)
{
    if (json_true(b, "add_prefix_space"))
        return fail(err, errlen, "%s: %s ByteLevel with add_prefix_space=true is not supported", path, what);
    if (json_true(b, "use_regex"))
        return fail(err, errlen, "%s: %s ByteLevel with use_regex=true (GPT-2 pattern) is not supported",
                    path, what);
    return 0;
}

static int check_pretokenizer(Tokenizer *t, const cJSON *p, const char *path, char *err, size_t errlen)
{
    const char *type = json_str(p, "type");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
    if (!type || strcmp(type, "Sequence") || cJSON_GetArraySize(list) != 2)
        return fail(err, errlen, "%s: pre_tokenizer must be Sequence[Split, ByteLevel] "
                    "(the Qwen2/Llama 3 layout)", path);
    const cJSON *split = cJSON_GetArrayItem(list, 0), *bl = cJSON_GetArrayItem(list, 1);
    const char *st = json_str(split, "type"), *bt = json_str(bl, "type");
    if (!st || strcmp(st, "Split") || !bt || strcmp(bt, "ByteLevel"))
        return fail(err, errlen, "%s: pre_tokenizer must be Sequence[Split, ByteLevel]", path);
    const char *re = json_str(cJSON_GetObjectItemCaseSensitive(split, "pattern"), "Regex");
    const char *behavior = json_str(split, "behavior");
    if (!behavior || strcmp(behavior, "Isolated") || json_true(split, "invert"))
        return fail(err, errlen, "%s: Split pre-tokenizer must have behavior Isolated, invert false", path);
    if (re && !strcmp(re, PATTERN_DIGIT1)) t->kind = PRETOK_DIGIT1;
    else if (re && !strcmp(re, PATTERN_DIGITS3)) t->kind = PRETOK_DIGITS3;
    else
        return fail(err, errlen, "%s: Split regex is not one of the supported patterns "
                    "(Qwen2's or Llama 3's): %s", path, re ? re : "(missing)");
    return check_bytelevel(bl, "pre_tokenizer", path, err, errlen);
}

/* A special-token setting of tokenizer_config.json: "text" or {"content": "text"}. */
static int64_t config_token(const Tokenizer *t, const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const char *s = cJSON_IsString(v) ? v->valuestring : json_str(v, "content");
    return s ? tok_token_id(t, s) : -1;
}

static int load_added(Tokenizer *t, const cJSON *list, const char *path, char *err, size_t errlen)
{
    size_t n = (size_t)cJSON_GetArraySize(list);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    t->added_mask = table_size(n) - 1;
    t->added_slots = calloc(t->added_mask + 1, sizeof *t->added_slots);
    if (!t->added || !t->added_slots) return fail(err, errlen, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const char *content = json_str(e, "content");
        if (!valid_id(id) || !content || !content[0])
            return fail(err, errlen, "%s: added_tokens[%zu]: needs an integer id and non-empty content",
                        path, t->n_added);
        if (json_true(e, "single_word"))
            return fail(err, errlen, "%s: added token '%s': single_word=true is not supported", path, content);
        AddedToken *a = &t->added[t->n_added];
        a->id = (uint32_t)id->valuedouble;
        a->len = (uint32_t)strlen(content);
        a->lstrip = (uint8_t)json_true(e, "lstrip");
        a->rstrip = (uint8_t)json_true(e, "rstrip");
        if (pool_add(t, content, a->len, &a->off)) return fail(err, errlen, "out of memory");
        a->special = (uint8_t)json_true(e, "special");
        size_t i = hash_bytes((const uint8_t *)content, a->len) & t->added_mask;
        while (t->added_slots[i]) i = (i + 1) & t->added_mask;
        t->added_slots[i] = (uint32_t)t->n_added + 1;
        t->added_first[(uint8_t)content[0]] = 1;
        size_t k = 0;
        while (k < t->n_added_lens && t->added_lens[k] != a->len) k++;
        if (k == t->n_added_lens) {
            if (k == sizeof t->added_lens / sizeof t->added_lens[0])
                return fail(err, errlen, "%s: too many distinct added-token lengths", path);
            t->added_lens[t->n_added_lens++] = a->len;
        }
        t->n_added++;
    }
    /* longest first: leftmost-longest matching tries lengths in this order */
    for (size_t i = 1; i < t->n_added_lens; i++)
        for (size_t j = i; j > 0 && t->added_lens[j - 1] < t->added_lens[j]; j--) {
            uint32_t x = t->added_lens[j];
            t->added_lens[j] = t->added_lens[j - 1];
            t->added_lens[j - 1] = x;
        }
    return 0;
}

static int load_merges(Tokenizer *t, const cJSON *merges, const char *path, char *err, size_t errlen)
{
    size_t n = (size_t)cJSON_GetArraySize(merges);
    t->merge_mask = table_size(n) - 1;
    t->merge_keys = calloc(t->merge_mask + 1, sizeof *t->merge_keys);
    t->merge_rank = malloc((t->merge_mask + 1) * sizeof *t->merge_rank);
    t->merge_new = malloc((t->merge_mask + 1) * sizeof *t->merge_new);
    if (!t->merge_keys || !t->merge_rank || !t->merge_new) return fail(err, errlen, "out of memory");
    UniBuf a = {0}, b = {0}, ab = {0};
    uint32_t rank = 0;
    int rc = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        const char *left = NULL, *right = NULL;
        char *copy = NULL;
        if (cJSON_IsString(m)) {            /* "a b" */
            copy = strdup(m->valuestring);
            char *sp = copy ? strchr(copy, ' ') : NULL;
            if (sp) { *sp = '\0'; left = copy; right = sp + 1; }
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2) {   /* ["a", "b"] */
            const cJSON *x = cJSON_GetArrayItem(m, 0), *y = cJSON_GetArrayItem(m, 1);
            if (cJSON_IsString(x) && cJSON_IsString(y)) { left = x->valuestring; right = y->valuestring; }
        }
        a.len = b.len = ab.len = 0;
        if (!left || bytelevel_decode(left, &a) || bytelevel_decode(right, &b) ||
            unibuf_append(&ab, a.p, a.len) || unibuf_append(&ab, b.p, b.len)) {
            rc = fail(err, errlen, "%s: merges[%u] is not a pair of byte-level tokens", path, rank);
            free(copy);
            break;
        }
        int64_t ia = vocab_find(t, a.p, a.len), ib = vocab_find(t, b.p, b.len), iab = vocab_find(t, ab.p, ab.len);
        if (ia < 0 || ib < 0 || iab < 0) {
            rc = fail(err, errlen, "%s: merges[%u] '%s %s': %s not in the vocabulary", path, rank, left, right,
                      iab < 0 && ia >= 0 && ib >= 0 ? "the merged token is" : "a part is");
            free(copy);
            break;
        }
        free(copy);
        uint64_t key = ((uint64_t)ia << 32 | (uint64_t)ib) + 1;
        size_t i = hash_u64(key) & t->merge_mask;
        while (t->merge_keys[i] && t->merge_keys[i] != key) i = (i + 1) & t->merge_mask;
        if (!t->merge_keys[i]) {   /* a repeated pair keeps its first (best) rank */
            t->merge_keys[i] = key;
            t->merge_rank[i] = rank;
            t->merge_new[i] = (uint32_t)iab;
        }
        rank++;
    }
    unibuf_free(&a);
    unibuf_free(&b);
    unibuf_free(&ab);
    return rc;
}

static int load_json(Tokenizer *t, const cJSON *root, const char *path, char *err, size_t errlen)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *type = json_str(model, "type");
    if (!type || strcmp(type, "BPE"))
        return fail(err, errlen, "%s: model.type must be \"BPE\" (byte-level BPE)", path);
    if (json_true(model, "byte_fallback"))
        return fail(err, errlen, "%s: BPE byte_fallback=true is not supported", path);
    const char *prefix = json_str(model, "continuing_subword_prefix");
    const char *suffix = json_str(model, "end_of_word_suffix");
    if ((prefix && prefix[0]) || (suffix && suffix[0]))
        return fail(err, errlen, "%s: continuing_subword_prefix/end_of_word_suffix are not supported", path);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout))
        return fail(err, errlen, "%s: BPE dropout is not supported", path);
    t->ignore_merges = json_true(model, "ignore_merges");
    if (check_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), path, err, errlen) ||
        check_pretokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), path, err, errlen))
        return -1;
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    const char *dt = json_str(dec, "type");
    if (dec && !cJSON_IsNull(dec) && (!dt || strcmp(dt, "ByteLevel")))
        return fail(err, errlen, "%s: decoder '%s' is not supported (ByteLevel only)", path, dt ? dt : "?");

    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return fail(err, errlen, "%s: model.vocab must be an object", path);
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added))
        return fail(err, errlen, "%s: added_tokens must be an array", path);
    uint32_t max_id = 0;
    size_t n_vocab = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!valid_id(e)) return fail(err, errlen, "%s: vocab entry '%s': id must be an integer in [0, 2^24)",
                                      path, e->string);
        if ((uint32_t)e->valuedouble > max_id) max_id = (uint32_t)e->valuedouble;
        n_vocab++;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (valid_id(id) && (uint32_t)id->valuedouble > max_id) max_id = (uint32_t)id->valuedouble;
    }
    if (!n_vocab) return fail(err, errlen, "%s: model.vocab is empty", path);
    t->n_ids = max_id + 1;
    t->tok_off = calloc(t->n_ids, sizeof *t->tok_off);
    t->tok_len = calloc(t->n_ids, sizeof *t->tok_len);
    t->tok_flags = calloc(t->n_ids, 1);
    t->vocab_mask = table_size(n_vocab) - 1;
    t->vocab_slots = calloc(t->vocab_mask + 1, sizeof *t->vocab_slots);
    if (!t->tok_off || !t->tok_len || !t->tok_flags || !t->vocab_slots) return fail(err, errlen, "out of memory");
    UniBuf b = {0};
    cJSON_ArrayForEach(e, vocab) {
        uint32_t id = (uint32_t)e->valuedouble;
        if (t->tok_flags[id]) { unibuf_free(&b); return fail(err, errlen, "%s: vocab id %u used twice", path, id); }
        b.len = 0;
        int r = bytelevel_decode(e->string, &b);
        if (r < 0) { unibuf_free(&b); return fail(err, errlen, "out of memory"); }
        t->tok_flags[id] = TF_EXISTS;
        if (r == 1) {   /* not byte-level text: keep its text for decoding, never produced by BPE */
            t->tok_flags[id] |= TF_RAWTEXT;
            if (pool_add(t, e->string, strlen(e->string), &t->tok_off[id])) { unibuf_free(&b); return -1; }
            t->tok_len[id] = (uint32_t)strlen(e->string);
            continue;
        }
        if (pool_add(t, b.p, b.len, &t->tok_off[id])) { unibuf_free(&b); return fail(err, errlen, "out of memory"); }
        t->tok_len[id] = (uint32_t)b.len;
        if (vocab_insert(t, id)) {
            unibuf_free(&b);
            return fail(err, errlen, "%s: vocab entry '%s' appears twice", path, e->string);
        }
    }
    unibuf_free(&b);
    for (int i = 0; i < 256; i++) {
        uint8_t c = (uint8_t)i;
        int64_t id = vocab_find(t, &c, 1);
        if (id < 0) return fail(err, errlen, "%s: the vocabulary lacks the byte token for 0x%02X", path, i);
        t->byte_id[i] = (uint32_t)id;
    }
    if (load_added(t, added, path, err, errlen)) return -1;
    for (size_t i = 0; i < t->n_added; i++) {
        const AddedToken *a = &t->added[i];
        t->tok_flags[a->id] = TF_EXISTS | TF_ADDED | (a->special ? TF_SPECIAL : 0);
        t->tok_off[a->id] = a->off;
        t->tok_len[a->id] = a->len;
    }
    return load_merges(t, cJSON_GetObjectItemCaseSensitive(model, "merges"), path, err, errlen);
}

Tokenizer *tok_load(const char *path, char *err, size_t errlen)
{
    bytelevel_init();
    struct stat st;
    char json_path[4096], cfg_path[4096];
    int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(json_path, sizeof json_path, is_dir ? "%s/tokenizer.json" : "%s", path);
    snprintf(cfg_path, sizeof cfg_path, "%s", json_path);
    char *slash = strrchr(cfg_path, '/');
    snprintf(slash ? slash + 1 : cfg_path, sizeof cfg_path - (size_t)(slash ? slash + 1 - cfg_path : 0),
             "tokenizer_config.json");

    size_t len;
    char *text = read_file(json_path, &len, err, errlen);
    if (!text) return NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) { fail(err, errlen, "%s: not valid JSON", json_path); return NULL; }
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t) { cJSON_Delete(root); fail(err, errlen, "out of memory"); return NULL; }
    t->eos = t->pad = t->bos = -1;
    int rc = load_json(t, root, json_path, err, errlen);
    cJSON_Delete(root);
    if (rc) { tok_free(t); return NULL; }

    if (stat(cfg_path, &st) == 0) {
        text = read_file(cfg_path, &len, err, errlen);
        cJSON *cfg = text ? cJSON_ParseWithLength(text, len) : NULL;
        free(text);
        if (!cfg) {
            fail(err, errlen, "%s: not valid JSON", cfg_path);
            tok_free(t);
            return NULL;
        }
        t->eos = config_token(t, cfg, "eos_token");
        t->pad = config_token(t, cfg, "pad_token");
        t->bos = config_token(t, cfg, "bos_token");
        t->add_bos = json_true(cfg, "add_bos_token");
        cJSON_Delete(cfg);
    }
    return t;
}

void tok_free(Tokenizer *t)
{
    if (!t) return;
    free(t->tok_off);
    free(t->tok_len);
    free(t->tok_flags);
    free(t->pool);
    free(t->vocab_slots);
    free(t->merge_keys);
    free(t->merge_rank);
    free(t->merge_new);
    free(t->added);
    free(t->added_slots);
    free(t);
}

uint32_t tok_vocab_size(const Tokenizer *t) { return t->n_ids; }
int64_t tok_eos_id(const Tokenizer *t) { return t->eos; }
int64_t tok_pad_id(const Tokenizer *t) { return t->pad; }
int64_t tok_bos_id(const Tokenizer *t) { return t->bos; }
int tok_add_bos(const Tokenizer *t) { return t->add_bos; }

int64_t tok_token_id(const Tokenizer *t, const char *text)
{
    size_t n = strlen(text);
    const AddedToken *a = added_find(t, (const uint8_t *)text, n);
    if (a) return a->id;
    return vocab_find(t, (const uint8_t *)text, n);
}

const uint8_t *tok_token_bytes(const Tokenizer *t, uint32_t id, size_t *len)
{
    if (id >= t->n_ids || !(t->tok_flags[id] & TF_EXISTS)) return NULL;
    *len = t->tok_len[id];
    return t->pool + t->tok_off[id];
}

int tok_is_special(const Tokenizer *t, uint32_t id)
{
    return id < t->n_ids && (t->tok_flags[id] & TF_SPECIAL);
}

int tok_decode(const Tokenizer *t, const uint32_t *ids, size_t n, UniBuf *out)
{
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const uint8_t *p = tok_token_bytes(t, ids[i], &len);
        if (!p || unibuf_append(out, p, len)) return -1;
    }
    return 0;
}

int tok_token_display(const Tokenizer *t, uint32_t id, UniBuf *out)
{
    size_t len;
    const uint8_t *p = tok_token_bytes(t, id, &len);
    if (!p) return -1;
    if (t->tok_flags[id] & (TF_ADDED | TF_RAWTEXT)) return unibuf_append(out, p, len);
    for (size_t i = 0; i < len; i++) {
        uint8_t u[4];
        if (unibuf_append(out, u, utf8_encode(byte_to_char[p[i]], u))) return -1;
    }
    return 0;
}

/* ---- encoding ---- */

typedef struct {
    uint32_t id;
    int32_t prev, next;
    uint32_t len;
} Symbol;

typedef struct {
    uint32_t rank, pos, new_id;
} Candidate;

typedef struct {
    uint64_t hash;
    uint32_t key_off, key_len, ids_off, ids_len;
} CacheSlot;

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_WORD 256

struct TokEncoder {
    const Tokenizer *tok;
    UniBuf clean, norm;
    Symbol *syms;
    size_t syms_cap;
    Candidate *heap;
    size_t heap_len, heap_cap;
    CacheSlot *cache;       /* CACHE_SLOTS entries; key_len 0 = empty */
    size_t cache_used;
    UniBuf cache_keys;
    TokIds cache_ids;
};

TokEncoder *tok_encoder_new(const Tokenizer *tok)
{
    TokEncoder *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->tok = tok;
    e->cache = calloc(CACHE_SLOTS, sizeof *e->cache);
    if (!e->cache) { free(e); return NULL; }
    return e;
}

void tok_encoder_free(TokEncoder *e)
{
    if (!e) return;
    unibuf_free(&e->clean);
    unibuf_free(&e->norm);
    free(e->syms);
    free(e->heap);
    free(e->cache);
    unibuf_free(&e->cache_keys);
    tokids_free(&e->cache_ids);
    free(e);
}

static int cand_less(const Candidate *a, const Candidate *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(TokEncoder *e, Candidate c)
{
    if (e->heap_len == e->heap_cap) {
        size_t cap = e->heap_cap ? e->heap_cap * 2 : 256;
        Candidate *h = realloc(e->heap, cap * sizeof *h);
        if (!h) return -1;
        e->heap = h;
        e->heap_cap = cap;
    }
    size_t i = e->heap_len++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = c;
    return 0;
}

static Candidate heap_pop(TokEncoder *e)
{
    Candidate top = e->heap[0], last = e->heap[--e->heap_len];
    size_t i = 0, n = e->heap_len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!cand_less(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = last;
    return top;
}

static int push_pair(TokEncoder *e, uint32_t pos)
{
    Symbol *s = e->syms;
    if (s[pos].next < 0) return 0;
    uint32_t rank, new_id;
    if (!merge_find(e->tok, s[pos].id, s[s[pos].next].id, &rank, &new_id)) return 0;
    return heap_push(e, (Candidate){rank, pos, new_id});
}

/* BPE of one pre-token: merge the lowest-ranked adjacent pair, leftmost first,
 * until no pair merges (as Hugging Face's BPE::merge_word). */
static int bpe_word(TokEncoder *e, const uint8_t *w, size_t n, TokIds *out)
{
    const Tokenizer *t = e->tok;
    if (n == 1) return tokids_push(out, t->byte_id[w[0]]);
    if (t->ignore_merges) {
        int64_t id = vocab_find(t, w, n);
        if (id >= 0) return tokids_push(out, (uint32_t)id);
    }
    if (n > e->syms_cap) {
        Symbol *s = realloc(e->syms, n * sizeof *s);
        if (!s) return -1;
        e->syms = s;
        e->syms_cap = n;
    }
    Symbol *s = e->syms;
    for (size_t i = 0; i < n; i++)
        s[i] = (Symbol){t->byte_id[w[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, 1};
    e->heap_len = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (push_pair(e, (uint32_t)i)) return -1;
    while (e->heap_len) {
        Candidate c = heap_pop(e);
        Symbol *a = &s[c.pos];
        if (a->len == 0 || a->next < 0) continue;
        Symbol *b = &s[a->next];
        uint32_t rank, new_id;
        if (!merge_find(t, a->id, b->id, &rank, &new_id) || new_id != c.new_id) continue;   /* stale */
        a->id = c.new_id;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) s[a->next].prev = (int32_t)c.pos;
        if (a->prev >= 0 && push_pair(e, (uint32_t)a->prev)) return -1;
        if (push_pair(e, c.pos)) return -1;
    }
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (tokids_push(out, s[i].id)) return -1;
    return 0;
}

static void cache_clear(TokEncoder *e)
{
    memset(e->cache, 0, CACHE_SLOTS * sizeof *e->cache);
    e->cache_used = 0;
    e->cache_keys.len = 0;
    e->cache_ids.len = 0;
}

/* BPE through the per-encoder cache of frequent pre-tokens. */
static int encode_word(TokEncoder *e, const uint8_t *w, size_t n, TokIds *out)
{
    if (n > CACHE_MAX_WORD) return bpe_word(e, w, n, out);
    uint64_t h = hash_bytes(w, n);
    size_t i = h & (CACHE_SLOTS - 1);
    for (; e->cache[i].key_len; i = (i + 1) & (CACHE_SLOTS - 1)) {
        CacheSlot *c = &e->cache[i];
        if (c->hash == h && c->key_len == n && !memcmp(e->cache_keys.p + c->key_off, w, n)) {
            for (uint32_t k = 0; k < c->ids_len; k++)
                if (tokids_push(out, e->cache_ids.ids[c->ids_off + k])) return -1;
            return 0;
        }
    }
    size_t start = out->len;
    if (bpe_word(e, w, n, out)) return -1;
    if (e->cache_used >= CACHE_SLOTS / 2) {   /* full: start over (cheap, and keeps memory bounded) */
        cache_clear(e);
        i = h & (CACHE_SLOTS - 1);
    }
    size_t key_off = e->cache_keys.len, ids_off = e->cache_ids.len;
    if (unibuf_append(&e->cache_keys, w, n)) return -1;
    for (size_t k = start; k < out->len; k++)
        if (tokids_push(&e->cache_ids, out->ids[k])) return -1;
    e->cache[i] = (CacheSlot){h, (uint32_t)key_off, (uint32_t)n, (uint32_t)ids_off, (uint32_t)(out->len - start)};
    e->cache_used++;
    return 0;
}

/* Text without added tokens: replace invalid UTF-8, normalize, pre-tokenize, BPE. */
static int encode_plain(TokEncoder *e, const uint8_t *s, size_t n, TokIds *out)
{
    if (n == 0) return 0;
    const uint8_t *text = s;
    if (!utf8_valid(s, n)) {
        e->clean.len = 0;
        if (utf8_sanitize(s, n, &e->clean)) return -1;
        text = e->clean.p;
        n = e->clean.len;
    }
    e->norm.len = 0;
    if ((e->tok->nfc ? unicode_nfc(text, n, &e->norm) : unibuf_append(&e->norm, text, n)) ||
        unibuf_reserve(&e->norm, PRETOK_PAD))
        return -1;
    n = e->norm.len;
    memset(e->norm.p + n, 0xFF, PRETOK_PAD);
    const uint8_t *p = e->norm.p;
    for (size_t i = 0; i < n;) {
        size_t k = pretok_next(e->tok->kind, p + i, n - i);
        if (encode_word(e, p + i, k, out)) return -1;
        i += k;
    }
    return 0;
}

/* Whitespace (Unicode White_Space) ending at s[end) going back / starting at s[start]. */
static size_t space_before(const uint8_t *s, size_t end)
{
    size_t i = end;
    while (i > 0) {
        size_t j = i - 1;
        while (j > 0 && (s[j] & 0xC0) == 0x80 && i - j < 4) j--;
        uint32_t c;
        if (utf8_decode(s + j, i - j, &c) != i - j || !(unicode_flags(c) & UNI_SPACE)) break;
        i = j;
    }
    return end - i;
}

static size_t space_after(const uint8_t *s, size_t start, size_t n)
{
    size_t i = start;
    while (i < n) {
        uint32_t c;
        size_t k = utf8_decode(s + i, n - i, &c);
        if (!(unicode_flags(c) & UNI_SPACE)) break;
        i += k;
    }
    return i - start;
}

int tok_encode(TokEncoder *e, const char *text, size_t len, TokIds *out)
{
    const Tokenizer *t = e->tok;
    const uint8_t *s = (const uint8_t *)text;
    size_t seg = 0;   /* start of the text not yet encoded */
    for (size_t i = 0; i < len;) {
        const AddedToken *a = NULL;
        if (t->added_first[s[i]])
            for (size_t k = 0; k < t->n_added_lens && !a; k++)
                if (t->added_lens[k] <= len - i) a = added_find(t, s + i, t->added_lens[k]);
        if (!a) { i++; continue; }
        size_t start = i, end = i + a->len;
        if (a->lstrip) start -= space_before(s + seg, i - seg);
        if (a->rstrip) end += space_after(s, end, len);
        if (encode_plain(e, s + seg, start - seg, out) || tokids_push(out, a->id)) return -1;
        seg = i = end;
    }
    return encode_plain(e, s + seg, len - seg, out);
}
