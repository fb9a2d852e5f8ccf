/* model_files.c — the compiler's reader of a model's config.json.
 *
 * The keys, defaults and size bound are contract/hf_config_keys.h's, the ones
 * runtime/store/hf_config.c (hf_config_read) loads the same file by. The
 * compiler may not include runtime headers (a folder is an include boundary,
 * docs/compiler.md), hence a reader of its own, with its own messages and its
 * leniency about RoPE scaling (reported at the plan's line); tests/frontend
 * checks both against the same fixtures through llmc check and llmc-train
 * check-plan. */
#include "model_files.h"
#include "plan.h"
#include "hf_config_keys.h"   /* contract/ */
#include "plan_keys.h"        /* contract/: the column keys named in messages */
#include "diag.h"             /* diag_escape */

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int get_int(cJSON *o, const char *k, long def, long *out, const char *file, char *why, int whylen)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) { snprintf(why, (size_t)whylen, "%s has no \"%s\"", file, k); return -1; }
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1e9) {
        snprintf(why, (size_t)whylen, "%s: \"%s\" is not a positive integer", file, k);
        return -1;
    }
    *out = (long)v->valuedouble;
    return 0;
}

int model_config_read(const char *dir, ModelFileConfig *out, char *why, int whylen)
{
    memset(out, 0, sizeof *out);
    snprintf(out->file, sizeof out->file, "%s/config.json", dir);
    const char *file = out->file;
    /* O_NONBLOCK: a FIFO in the model's place must not hang the compiler */
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(why, (size_t)whylen, "%s", strerror(errno)); return 1; }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        snprintf(why, (size_t)whylen, "%s is not a regular file", file);
        return -1;
    }
    if (sb.st_size > HF_CONFIG_MAX_BYTES) {
        close(fd);
        snprintf(why, (size_t)whylen, "%s is larger than 16 MiB: not a model config", file);
        return -1;
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)sb.st_size) : -1;
    close(fd);
    if (n < 0) { free(buf); snprintf(why, (size_t)whylen, "%s: cannot read", file); return 1; }
    buf[n] = 0;
    cJSON *o = cJSON_ParseWithLength(buf, (size_t)n);
    free(buf);
    int rc = -1;
    if (!cJSON_IsObject(o)) { snprintf(why, (size_t)whylen, "%s is not a JSON object", file); goto done; }
    const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "model_type"));
    if (!mt) { snprintf(why, (size_t)whylen, "%s has no \"model_type\"", file); goto done; }
    int arch = plan_vocab_find(arch_json_names, mt);   /* HF's model_type is the row's JSON spelling */
    if (arch >= 0) out->arch = (ModelArch)arch;
    else {
        char words[128];
        snprintf(why, (size_t)whylen, "%s: model_type \"%.40s\" is not %s", file, mt,
                 plan_vocab_list(words, sizeof words, arch_json_names, PLAN_VOCAB_ALL_ROWS));
        goto done;
    }
    /* each integer row in order; get_int takes positive integers only, so a
       default of 0 (hidden < heads) reads as 1 and the shape checks say why */
    long iv;
#define READ_INT(field, key, rule) { \
        long def = hf_config_int_default(rule, out->hidden, out->heads); \
        if (get_int(o, key, def == 0 ? 1 : def, &iv, file, why, whylen)) goto done; \
        out->field = (int)iv; }
    HF_CONFIG_INTS(READ_INT)
#undef READ_INT
    cJSON *params = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
    cJSON *top = cJSON_GetObjectItemCaseSensitive(o, "rope_theta");
    cJSON *nested = cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, "rope_theta") : NULL;
    out->rope_theta = cJSON_IsNumber(nested) ? nested->valuedouble : cJSON_IsNumber(top) ? top->valuedouble
                                                                                           : HF_DEFAULT_ROPE_THETA;
    cJSON *scaling[2] = {params, cJSON_GetObjectItemCaseSensitive(o, "rope_scaling")};
    for (int i = 0; i < 2; i++) {
        if (!cJSON_IsObject(scaling[i])) continue;
        cJSON *t = cJSON_GetObjectItemCaseSensitive(scaling[i], "rope_type");
        if (!t) t = cJSON_GetObjectItemCaseSensitive(scaling[i], "type");
        const char *type = cJSON_GetStringValue(t);
        if (type && strcmp(type, "default")) {
            /* a string of the file's, echoed by init-model into a plan comment
             * and messages: a newline or escape in it must not start a line */
            char head[41];
            snprintf(head, sizeof head, "%.40s", type);
            char *clean = diag_escape(head);
            snprintf(out->rope_scaling, sizeof out->rope_scaling, "%s", clean ? clean : "?");
            free(clean);
        }
        else if (!type && i == 1) snprintf(out->rope_scaling, sizeof out->rope_scaling, "(no rope_type)");
    }
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "rms_norm_eps");
    out->rms_eps = cJSON_IsNumber(v) ? v->valuedouble : HF_DEFAULT_RMS_EPS;
    /* gemma2 ties its embedding unless config.json says otherwise (transformers' Gemma2Config default) */
    cJSON *tie = cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings");
    out->tie_embeddings = cJSON_IsBool(tie) ? cJSON_IsTrue(tie) : out->arch == ARCH_GEMMA2;
    out->experts = out->experts_per_token = 0;
    if (out->arch == ARCH_MIXTRAL) {
        long E, K;
        if (get_int(o, "num_local_experts", 8, &E, file, why, whylen) ||
            get_int(o, "num_experts_per_tok", 2, &K, file, why, whylen))
            goto done;
        out->experts = (int)E; out->experts_per_token = (int)K;
    } else if (out->arch == ARCH_QWEN3_MOE) {
        /* every layer sparse (decoder_sparse_step 1, no mlp_only_layers): the
         * experts' MLP is moe_intermediate_size wide, which `ffn` describes */
        long E, K, FE, step;
        if (get_int(o, "num_experts", -1, &E, file, why, whylen) ||
            get_int(o, "num_experts_per_tok", -1, &K, file, why, whylen) ||
            get_int(o, "moe_intermediate_size", -1, &FE, file, why, whylen) ||
            get_int(o, "decoder_sparse_step", 1, &step, file, why, whylen))
            goto done;
        cJSON *dense = cJSON_GetObjectItemCaseSensitive(o, "mlp_only_layers");
        if (step != 1 || (cJSON_IsArray(dense) && cJSON_GetArraySize(dense) > 0)) {
            snprintf(why, (size_t)whylen, "%s: some layers are dense (decoder_sparse_step %ld, mlp_only_layers): "
                     "llmc describes models whose every layer is a mixture of experts", file, step);
            goto done;
        }
        out->experts = (int)E; out->experts_per_token = (int)K; out->ffn = (int)FE;
    }
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

/* ---- dataset records ---- */
/* LLaMA-Factory's default columns and tags of each format (its data/README):
 * what dataset_info.json writes out (emit_dataset_info.c) and what the
 * records are checked against. */
void dataset_effective(const PlanDataset *ds, DatasetColumns *c, DatasetTags *t)
{
    *c = ds->columns;
    *t = ds->tags;
    switch (ds->format) {
    case FORMAT_ALPACA:
        if (!c->prompt) c->prompt = "instruction";
        if (!c->query) c->query = "input";
        /* ranking data answers in chosen/rejected (LLaMA-Factory's pairwise
         * converter reads no response column) */
        if (!c->response && !ds->ranking) c->response = "output";
        break;
    case FORMAT_SHAREGPT:
        if (!c->messages) c->messages = "conversations";
        if (!t->role) t->role = "from";
        if (!t->content) t->content = "value";
        if (!t->user) t->user = "human";
        if (!t->assistant) t->assistant = "gpt";
        if (!t->observation) t->observation = "observation";
        if (!t->function) t->function = "function_call";
        if (!t->system) t->system = "system";
        break;
    case FORMAT_TEXT:
        if (!c->text) c->text = "text";
        break;
    }
}


enum { RECORDS_MAX = 100, PREFIX_MAX = 8 << 20 };

typedef struct {
    char *what;              /* the problem, without the record number */
    int first;               /* 1-based record where first seen */
    char *keys;              /* that record's keys */
    int count;
} Problem;

typedef struct {
    Problem p[16];
    int n;
} Problems;

static char *keys_of(const cJSON *o)
{
    size_t len = 1;
    for (const cJSON *k = o ? o->child : NULL; k; k = k->next) len += strlen(k->string ? k->string : "") + 2;
    char *s = calloc(1, len + 8);
    if (!s) return NULL;
    int n = 0;
    for (const cJSON *k = o ? o->child : NULL; k; k = k->next, n++) {
        if (n) strcat(s, ", ");
        strcat(s, k->string ? k->string : "");
    }
    if (!n) strcpy(s, "none");
    return s;
}

static void add_problem(Problems *ps, int rec, const cJSON *obj, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_problem(Problems *ps, int rec, const cJSON *obj, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->p[i].what, what) == 0) { ps->p[i].count++; return; }
    if (ps->n == 16) return;
    Problem *p = &ps->p[ps->n++];
    p->what = strdup(what);
    p->first = rec;
    p->keys = obj ? keys_of(obj) : NULL;
    p->count = 1;
}

static bool has_key(const cJSON *o, const char *k)
{
    return k && cJSON_GetObjectItemCaseSensitive(o, k) != NULL;
}

static void check_record(const PlanDataset *ds, const DatasetColumns *c, const DatasetTags *t, const cJSON *r, int rec,
                         Problems *ps)
{
    if (!cJSON_IsObject(r)) { add_problem(ps, rec, NULL, "is not a JSON object"); return; }
    typedef struct { const char *col, *block_key; } Need;
    Need need[5];
    int nn = 0;
    switch (ds->format) {
    case FORMAT_ALPACA:
        need[nn++] = (Need){c->prompt, PLAN_KEY(COLUMNS, prompt)};
        if (c->response) need[nn++] = (Need){c->response, PLAN_KEY(COLUMNS, response)};
        break;
    case FORMAT_SHAREGPT:
        need[nn++] = (Need){c->messages, PLAN_KEY(COLUMNS, messages)};
        break;
    case FORMAT_TEXT:
        need[nn++] = (Need){c->text, PLAN_KEY(COLUMNS, text)};
        break;
    }
    if (ds->ranking) {
        if (c->chosen) need[nn++] = (Need){c->chosen, PLAN_KEY(COLUMNS, chosen)};
        if (c->rejected) need[nn++] = (Need){c->rejected, PLAN_KEY(COLUMNS, rejected)};
    }
    for (int i = 0; i < nn; i++)
        if (!has_key(r, need[i].col))
            add_problem(ps, rec, r, "has no key '%s' (columns { %s = \"%s\" })", need[i].col, need[i].block_key,
                        need[i].col);
    if (c->kto_tag && !has_key(r, c->kto_tag))
        add_problem(ps, rec, r, "has no key '%s' (columns { kto_tag = \"%s\" })", c->kto_tag, c->kto_tag);
    if (ds->format != FORMAT_SHAREGPT || !has_key(r, c->messages)) return;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(r, c->messages);
    if (!cJSON_IsArray(msgs)) { add_problem(ps, rec, r, "has '%s' but it is not a list of messages", c->messages); return; }
    const char *roles[] = {t->user, t->assistant, t->system, t->observation, t->function};
    for (const cJSON *m = msgs->child; m; m = m->next) {
        if (!cJSON_IsObject(m)) { add_problem(ps, rec, NULL, "has a message in '%s' that is not an object", c->messages); break; }
        if (!has_key(m, t->role)) {
            add_problem(ps, rec, m, "has a message without key '%s' (tags { role = \"%s\" })", t->role, t->role);
            break;
        }
        if (!has_key(m, t->content)) {
            add_problem(ps, rec, m, "has a message without key '%s' (tags { content = \"%s\" })", t->content, t->content);
            break;
        }
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, t->role));
        bool known = false;
        for (int i = 0; role && i < 5; i++) known |= roles[i] && strcmp(role, roles[i]) == 0;
        if (!known) {
            add_problem(ps, rec, NULL, "has a message whose '%s' is \"%.40s\", not one of the tags "
                        "(user \"%s\", assistant \"%s\", system \"%s\", observation \"%s\", function \"%s\")",
                        t->role, role ? role : "(not a string)", t->user, t->assistant, t->system,
                        t->observation, t->function);
            break;
        }
    }
}

/* The first records of a .json array or .jsonl file from its first bytes. */
static int read_records(const char *file, cJSON **recs, int *n, bool *truncated, char *why, int whylen)
{
    *n = 0;
    *truncated = false;
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(why, (size_t)whylen, "%s", strerror(errno)); return 1; }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) { close(fd); snprintf(why, (size_t)whylen, "not a regular file"); return 1; }
    size_t want = sb.st_size > PREFIX_MAX ? PREFIX_MAX : (size_t)sb.st_size;
    char *buf = malloc(want + 1);
    size_t got = 0;
    while (buf && got < want) {
        ssize_t k = read(fd, buf + got, want - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (!buf) { snprintf(why, (size_t)whylen, "out of memory"); return 1; }
    buf[got] = 0;
    bool jsonl = strlen(file) > 6 && strcmp(file + strlen(file) - 6, ".jsonl") == 0;
    const char *p = buf, *end = buf + got;
    if (!jsonl) {
        while (p < end && strchr(" \t\r\n", *p)) p++;
        if (p >= end || *p != '[') {
            free(buf);
            snprintf(why, (size_t)whylen, "a .json dataset must be a JSON array of records");
            return -1;
        }
        p++;
    }
    while (p < end && *n < RECORDS_MAX) {
        while (p < end && strchr(" \t\r\n,", *p)) p++;
        if (p >= end || (!jsonl && *p == ']')) break;
        /* one value: to the end of the line (jsonl), or to its balancing bracket */
        const char *q = p;
        if (jsonl) {
            while (q < end && *q != '\n') q++;
        } else {
            int depth = 0;
            bool str = false;
            for (; q < end; q++) {
                if (str) { if (*q == '\\') q++; else if (*q == '"') str = false; continue; }
                if (*q == '"') str = true;
                else if (*q == '{' || *q == '[') depth++;
                else if (*q == '}' || *q == ']') { if (--depth <= 0) { q++; break; } }
                else if (depth == 0 && (*q == ',' || *q == ']')) break;
            }
            if (depth > 0) { *truncated = true; break; }   /* cut by the prefix */
        }
        if (q >= end && got < (size_t)sb.st_size) { *truncated = true; break; }
        cJSON *r = cJSON_ParseWithLength(p, (size_t)(q - p));
        if (!r) {
            free(buf);
            for (int i = 0; i < *n; i++) cJSON_Delete(recs[i]);
            *n = 0;
            snprintf(why, (size_t)whylen, "record %d is not valid JSON", *n + 1);
            return -1;
        }
        recs[(*n)++] = r;
        p = q;
    }
    free(buf);
    return 0;
}

void dataset_check_records(const void *plan_dataset, Diags *d)
{
    const PlanDataset *ds = plan_dataset;
    if (!ds->file) return;
    SrcRange at = ds->file_at;
    size_t len = strlen(ds->file);
    if (len > 8 && strcmp(ds->file + len - 8, ".parquet") == 0) {
        Diag *g = diag_note_at(d, at, "dataset '%s': parquet records are not read by llmc check", ds->name);
        diag_note(g, "not checked: its columns and tags against the records");
        return;
    }
    cJSON *recs[RECORDS_MAX];
    int n = 0;
    bool truncated = false;
    char why[300];
    int rc = read_records(ds->file, recs, &n, &truncated, why, (int)sizeof why);
    if (rc > 0) {
        Diag *g = diag_note_at(d, at, "dataset '%s': %s is not readable here (%s)", ds->name, ds->file, why);
        diag_note(g, "not checked: its format, columns and tags against the records");
        return;
    }
    if (rc < 0) {
        diag_error(d, at, "dataset '%s': %s: %s", ds->name, ds->file, why);
        return;
    }
    DatasetColumns c;
    DatasetTags t;
    dataset_effective(ds, &c, &t);
    Problems ps = {0};
    for (int i = 0; i < n; i++) check_record(ds, &c, &t, recs[i], i + 1, &ps);
    SrcRange pat = ds->columns_at.start.file ? ds->columns_at : ds->format_at;
    for (int i = 0; i < ps.n; i++) {
        Problem *p = &ps.p[i];
        bool tag = strstr(p->what, PLAN_KEY(DATASET, tags)) != NULL;
        Diag *g = diag_error(d, tag && ds->tags_at.start.file ? ds->tags_at : pat, "dataset '%s': record %d of %s %s",
                             ds->name, p->first, ds->file, p->what);
        if (p->keys) diag_note(g, "its keys: %s", p->keys);
        diag_note(g, "%d of the first %d records have this problem", p->count, n);
        free(p->what);
        free(p->keys);
    }
    for (int i = 0; i < n; i++) cJSON_Delete(recs[i]);
}

/* ---- the tokenizer's added tokens ---- */

/* Past the end of the JSON value at p (within end); NULL when it runs off the
 * end. Nested values are skipped by their brackets, strings by their quotes,
 * without building them: tokenizer.json is 10 MB of vocabulary and merges. */
static const char *skip_json_value(const char *p, const char *end)
{
    int depth = 0;
    do {
        if (p >= end) return NULL;
        if (*p == '"') {
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\') p++;
            if (p >= end) return NULL;
            p++;
        } else if (*p == '{' || *p == '[') {
            depth++; p++;
        } else if (*p == '}' || *p == ']') {
            depth--; p++;
        } else if (depth > 0) {
            p++;
        } else {
            while (p < end && !strchr(",}] \t\r\n", *p)) p++;
        }
    } while (depth > 0);
    return p;
}

static const char *skip_json_ws(const char *p, const char *end)
{
    while (p < end && strchr(" \t\r\n", *p)) p++;
    return p;
}

/* The value of the top-level member `key` of the JSON object text, parsed; NULL
 * when the text is not an object or has no such member. */
static cJSON *top_member(const char *text, size_t len, const char *key)
{
    const char *p = skip_json_ws(text, text + len), *end = text + len;
    if (p >= end || *p != '{') return NULL;
    p = skip_json_ws(p + 1, end);
    while (p && p < end && *p == '"') {
        const char *k = p + 1, *ke = skip_json_value(p, end);
        if (!ke) return NULL;
        p = skip_json_ws(ke, end);
        if (p >= end || *p != ':') return NULL;
        const char *v = skip_json_ws(p + 1, end), *ve = skip_json_value(v, end);
        if (!ve) return NULL;
        if ((size_t)(ke - 1 - k) == strlen(key) && memcmp(k, key, strlen(key)) == 0)
            return cJSON_ParseWithLength(v, (size_t)(ve - v));
        p = skip_json_ws(ve, end);
        if (p < end && *p == ',') p = skip_json_ws(p + 1, end);
    }
    return NULL;
}

int tokenizer_missing_tokens(const char *path, const char *const *tokens, int n, bool *missing, char *file,
                             int filelen, char *why, int whylen)
{
    size_t plen = strlen(path);
    if (plen > 5 && strcmp(path + plen - 5, ".json") == 0) snprintf(file, (size_t)filelen, "%s", path);
    else snprintf(file, (size_t)filelen, "%s/tokenizer.json", path);
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(why, (size_t)whylen, "%s", strerror(errno)); return 1; }
    struct stat sb;
    enum { TOKENIZER_MAX = 256 << 20 };
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > TOKENIZER_MAX) {
        close(fd);
        snprintf(why, (size_t)whylen, "%s is %s", file, sb.st_size > TOKENIZER_MAX ? "larger than 256 MiB" : "not a regular file");
        return -1;
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)sb.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)sb.st_size - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (!buf || got < (size_t)sb.st_size) { free(buf); snprintf(why, (size_t)whylen, "%s: cannot read", file); return 1; }
    cJSON *added = top_member(buf, got, "added_tokens");
    free(buf);
    if (!cJSON_IsArray(added)) {
        cJSON_Delete(added);
        snprintf(why, (size_t)whylen, "%s has no \"added_tokens\" list (not a Hugging Face tokenizer.json)", file);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        missing[i] = true;
        const cJSON *e;
        cJSON_ArrayForEach(e, added) {
            const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "content"));
            if (content && strcmp(content, tokens[i]) == 0) { missing[i] = false; break; }
        }
    }
    cJSON_Delete(added);
    return 0;
}
