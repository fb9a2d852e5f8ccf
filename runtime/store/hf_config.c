/* hf_config.c — read/write HF config.json (hf_config.h). */
#include "hf_config.h"
#include "hf_config_keys.h"   /* contract/: the keys, defaults and bound llmc's checker reads by too */
#include "json_stream.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *arch_type(ModelArch a)
{
    return plan_vocab_name(arch_json_names, ARCH_COUNT, a);   /* HF's model_type is the row's JSON spelling */
}

/* config.json's "architectures" entry: the transformers class that loads the model for causal LM. */
static const char *arch_class(ModelArch a)
{
    return a == ARCH_LLAMA ? "LlamaForCausalLM" : a == ARCH_QWEN2 ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM";
}

/* An integer member, or dflt when absent and dflt >= 0.
 * Refused: a fraction, a negative number or more than 1e9 (no model dimension comes near; the int it is stored
 * in keeps it exactly). 0, or -1 with "PATH: ..." in err. */
static int get_i(cJSON *o, const char *k, long dflt, long *out, const char *path, char *err, size_t errlen)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) {
        /* DFLT < 0 (HF_REQUIRED): the key must be there */
        if (dflt >= 0) { *out = dflt; return 0; }
        snprintf(err, errlen, "%s: missing \"%s\"", path, k);
        return -1;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e9) {
        snprintf(err, errlen, "%s: \"%s\" is not a non-negative integer", path, k);
        return -1;
    }
    *out = (long)v->valuedouble;
    return 0;
}

/* RoPE as transformers writes it: version 4 puts `rope_theta` (and an optional
 * `rope_scaling` object) at the top level, version 5 puts both in
 * `rope_parameters` {rope_theta, rope_type, ...}. Both trainers implement plain
 * RoPE only, so a scaling type other than "default" (llama3, yarn, linear,
 * dynamic, longrope) is refused rather than trained as the wrong model. Without
 * any theta, the Llama/Qwen default 10000. */
static int read_rope(cJSON *o, const char *file, double *theta, char *err, size_t errlen)
{
    cJSON *params = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
    cJSON *top = cJSON_GetObjectItemCaseSensitive(o, "rope_theta");
    cJSON *nested = cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, "rope_theta") : NULL;
    if ((top && !cJSON_IsNull(top) && !cJSON_IsNumber(top)) || (nested && !cJSON_IsNumber(nested))) {
        snprintf(err, errlen, "%s: \"rope_theta\" is not a number", file);
        return -1;
    }
    if (cJSON_IsNumber(top) && nested && top->valuedouble != nested->valuedouble) {
        snprintf(err, errlen, "%s: \"rope_theta\" %g and \"rope_parameters.rope_theta\" %g disagree", file,
                 top->valuedouble, nested->valuedouble);
        return -1;
    }
    *theta = nested ? nested->valuedouble : cJSON_IsNumber(top) ? top->valuedouble : HF_DEFAULT_ROPE_THETA;
    if (!(*theta > 0) || !isfinite(*theta)) { snprintf(err, errlen, "%s: rope_theta %g is not positive", file, *theta); return -1; }
    cJSON *scaling[2] = {params, cJSON_GetObjectItemCaseSensitive(o, "rope_scaling")};
    for (int i = 0; i < 2; i++) {
        if (!scaling[i] || cJSON_IsNull(scaling[i])) continue;
        if (!cJSON_IsObject(scaling[i])) {
            snprintf(err, errlen, "%s: \"%s\" is not an object", file, i ? "rope_scaling" : "rope_parameters");
            return -1;
        }
        cJSON *t = cJSON_GetObjectItemCaseSensitive(scaling[i], "rope_type");
        if (!t) t = cJSON_GetObjectItemCaseSensitive(scaling[i], "type");
        const char *type = cJSON_GetStringValue(t);
        if (!type && t) { snprintf(err, errlen, "%s: rope_type is not a string", file); return -1; }
        if (type && strcmp(type, "default")) {
            snprintf(err, errlen, "%s: RoPE scaling \"%.40s\" is not implemented by llmc-train (plain RoPE only); "
                     "train this model with backend = llamafactory", file, type);
            return -1;
        }
        if (!type && i == 1) {
            snprintf(err, errlen, "%s: \"rope_scaling\" names no rope_type", file);
            return -1;
        }
    }
    return 0;
}

/* PATH: a model directory (its config.json is read) or the file itself. */
int hf_config_read(const char *path, ModelConfig *out, char *err, size_t errlen)
{
    char file[4096];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(file, sizeof file, "%s/config.json", path);
    else snprintf(file, sizeof file, "%s", path);
    FILE *f = open_regular_file(file, "model config", err, errlen);
    if (!f) return -1;
    char *buf = malloc(HF_CONFIG_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, HF_CONFIG_MAX_BYTES + 1, f) : 0;
    fclose(f);
    if (!buf) { snprintf(err, errlen, "out of memory"); return -1; }
    if (n > HF_CONFIG_MAX_BYTES) { free(buf); snprintf(err, errlen, "%s: larger than 16 MiB: not a model config", file); return -1; }
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    if (!cJSON_IsObject(o)) { cJSON_Delete(o); snprintf(err, errlen, "%s: not a JSON object", file); return -1; }
    memset(out, 0, sizeof *out);
    int rc = -1;
    const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "model_type"));
    /* model_type chooses the family, and with it the flags below that config.json does not state */
    if (!mt) { snprintf(err, errlen, "%s: missing \"model_type\"", file); goto done; }
    int arch = plan_vocab_find(arch_json_names, mt);
    if (arch >= 0 && (LLMC_TRAIN_ARCH & PLAN_VOCAB_BIT(arch))) out->arch = (ModelArch)arch;
    else {
        char words[128];
        snprintf(err, errlen, "%s: model_type \"%s\" is not %s", file, mt,
                 plan_vocab_list(words, sizeof words, arch_json_names, LLMC_TRAIN_ARCH));
        goto done;
    }
    /* a row's default may depend on rows above it (head_dim from hidden_size / num_attention_heads): the order of
     * HF_CONFIG_INTS is the reading order */
    long iv;   /* each integer row in order (model_config_check below judges the shape) */
#define READ_INT(field, key, rule) { \
        if (get_i(o, key, hf_config_int_default(rule, out->hidden, out->heads), &iv, file, err, errlen)) goto done; \
        out->field = (int)iv; }
    HF_CONFIG_INTS(READ_INT)
#undef READ_INT
    if (read_rope(o, file, &out->rope_theta, err, errlen)) goto done;
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "rms_norm_eps");
    /* the flags that are not config keys in every family: Qwen2 always has q/k/v biases and no key for them,
     * Qwen3 always normalizes q and k; Llama says attention_bias */
    out->rms_eps = cJSON_IsNumber(v) ? v->valuedouble : HF_DEFAULT_RMS_EPS;
    out->tie_embeddings = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings"));
    out->qkv_bias = out->arch == ARCH_QWEN2 ||
                    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "attention_bias"));
    out->qk_norm = out->arch == ARCH_QWEN3;
    rc = model_config_check(out, err, errlen);
done:
    cJSON_Delete(o);
    return rc;
}

/* The shortest %g form that reads back as the same double (1e-06, not 9.99...e-07). */
static void shortest_double(char *buf, size_t len, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* JSON wants a float to look like one when it has no exponent or point: 1000000 -> 1000000.0 */
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", len - strlen(buf) - 1);
}

/* config.json for a model with no source config (trained from scratch): the keys transformers needs to load each
 * family, written as PATH.tmp, fsync'd and renamed. BOS_ID/EOS_ID < 0 are left out. */
int hf_config_write(const char *path, const ModelConfig *c, const char *torch_dtype,
                    int bos_id, int eos_id, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", arch_class(c->arch), arch_type(c->arch));
    fprintf(f, "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
               "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
               "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n",
            c->hidden, c->ffn, c->layers, c->heads, c->kv_heads, c->head_dim, c->vocab, c->max_context);
    char theta[32], eps[32];
    shortest_double(theta, sizeof theta, c->rope_theta);
    shortest_double(eps, sizeof eps, c->rms_eps);
    fprintf(f, "  \"rope_theta\": %s,\n  \"rms_norm_eps\": %s,\n  \"hidden_act\": \"silu\",\n", theta, eps);
    fprintf(f, "  \"tie_word_embeddings\": %s,\n", c->tie_embeddings ? "true" : "false");
    /* Qwen2 has no attention_bias key: its q/k/v biases are implied (hf_config_read) */
    if (c->arch != ARCH_QWEN2)
        fprintf(f, "  \"attention_bias\": %s,\n", c->qkv_bias ? "true" : "false");
    if (c->arch == ARCH_LLAMA) fprintf(f, "  \"mlp_bias\": false,\n");
    if (c->arch != ARCH_LLAMA) fprintf(f, "  \"use_sliding_window\": false,\n");
    fprintf(f, "  \"attention_dropout\": 0.0,\n  \"initializer_range\": 0.02,\n  \"use_cache\": true,\n");
    if (bos_id >= 0) fprintf(f, "  \"bos_token_id\": %d,\n", bos_id);
    if (eos_id >= 0) fprintf(f, "  \"eos_token_id\": %d,\n", eos_id);
    fprintf(f, "  \"torch_dtype\": \"%s\"\n}\n", torch_dtype);
    int rc = (fflush(f) || fsync(fileno(f))) ? -1 : 0;
    if (fclose(f)) rc = -1;
    if (!rc && rename(tmp, path)) rc = -1;
    if (rc) { snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno)); unlink(tmp); }
    return rc;
}

/* ---- config.json derived from the source model's ---- */

/* The text of a config.json (at most 16 MiB), NUL-terminated, or NULL with err. */
static char *read_config_text(const char *file, size_t *len, char *err, size_t errlen)
{
    FILE *f = open_regular_file(file, "model config", err, errlen);
    if (!f) return NULL;
    /* 16 MiB: HF_CONFIG_MAX_BYTES's bound (contract/hf_config_keys.h), restated here */
    enum { CONFIG_MAX = 16 << 20 };
    char *buf = malloc(CONFIG_MAX + 1);
    size_t n = buf ? fread(buf, 1, CONFIG_MAX + 1, f) : 0;
    fclose(f);
    if (!buf) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (n > CONFIG_MAX) { free(buf); snprintf(err, errlen, "%s: larger than 16 MiB: not a model config", file); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* JSON's four blanks. skip_value and top_members walk text cJSON has already accepted, so they check nothing. */
static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Past the end of the JSON value at p, in text cJSON has accepted.
 * P is at a value's first byte (not a blank); returns the byte after the value. */
static const char *skip_value(const char *p)
{
    int depth = 0;
    do {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
        } else if (*p == '{' || *p == '[') {
            depth++; p++;
        } else if (*p == '}' || *p == ']') {
            depth--; p++;
        } else if (depth > 0) {
            p++;
        } else {   /* a number, true, false, null */
            while (*p && !strchr(",}] \t\r\n", *p)) p++;
        }
    } while (depth > 0 && *p);
    return p;
}

typedef struct { const char *key; size_t key_len; const char *val, *val_end; } TopMember;

/* The members of the top-level object of valid JSON text, in order; returns
 * their count (at most max; later ones are not needed: see hf_config_derive). */
static int top_members(const char *text, TopMember *out, int max)
{
    const char *p = skip_ws(text);
    if (*p != '{') return 0;
    int n = 0;
    for (p = skip_ws(p + 1); *p == '"' && n < max; n++) {
        /* the key: between its quotes (ke at the closing one), escapes left as written */
        const char *k = p + 1, *ke = skip_value(p) - 1;
        p = skip_ws(skip_ws(ke + 1) + 1);   /* past ':' */
        out[n] = (TopMember){k, (size_t)(ke - k), p, skip_value(p)};
        p = skip_ws(out[n].val_end);
        if (*p == ',') p = skip_ws(p + 1);
    }
    return n;
}

int hf_config_derive(const char *path, const char *source, const ModelConfig *c, const char *torch_dtype, char *err,
                     size_t errlen)
{
    char src[4096], tmp[4200];
    struct stat sb;
    if (stat(source, &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(src, sizeof src, "%s/config.json", source);
    else snprintf(src, sizeof src, "%s", source);
    size_t len;
    char *text = read_config_text(src, &len, err, errlen);
    if (!text) return -1;
    /* parsed only to check it is an object and count its members: the copy below is made from the text */
    cJSON *o = cJSON_ParseWithLength(text, len);
    int is_obj = cJSON_IsObject(o), n_keys = cJSON_GetArraySize(o);
    cJSON_Delete(o);
    if (!is_obj) { free(text); snprintf(err, errlen, "%s: not a JSON object", src); return -1; }
    /* + 1: an object with no member still gets a valid allocation */
    TopMember *m = malloc(((size_t)n_keys + 1) * sizeof *m);
    if (!m) { free(text); snprintf(err, errlen, "out of memory"); return -1; }
    /* the members located in the text itself, so the copy below keeps the source's bytes, order and spacing */
    int n = top_members(text, m, n_keys);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { free(m); free(text); snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    /* Byte for byte but the dtype: "torch_dtype" (transformers 4) and "dtype"
     * (transformers 5) wherever the source has them, one "torch_dtype" added
     * after the last member when it has neither. Nothing else changes in
     * training: llmc-train never resizes the vocabulary and refuses a plan whose
     * shape differs from this file (run_init.c). */
    const char *at = text;
    int dtype_keys = 0;
    for (int i = 0; i < n; i++) {
        int is_dtype = (m[i].key_len == 11 && !memcmp(m[i].key, "torch_dtype", 11)) ||
                       (m[i].key_len == 5 && !memcmp(m[i].key, "dtype", 5));
        if (!is_dtype) continue;
        fwrite(at, 1, (size_t)(m[i].val - at), f);
        fprintf(f, "\"%s\"", torch_dtype);
        at = m[i].val_end;
        dtype_keys++;
    }
    /* neither key: "torch_dtype" goes after the last member, before the closing brace and whatever follows it */
    if (!dtype_keys && n > 0) {
        fwrite(at, 1, (size_t)(m[n - 1].val_end - at), f);
        fprintf(f, ",\n  \"torch_dtype\": \"%s\"", torch_dtype);
        at = m[n - 1].val_end;
    }
    /* the rest of the source, from the last replaced value on */
    fputs(at, f);
    free(m);
    free(text);
    int rc = (fflush(f) || fsync(fileno(f))) ? -1 : 0;
    if (fclose(f)) rc = -1;
    if (rc) { snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(errno)); unlink(tmp); return -1; }
    /* What was written must still describe the weights beside it. */
    ModelConfig back;
    char diff[128];
    if (hf_config_read(tmp, &back, err, errlen)) { unlink(tmp); return -1; }
    if (hf_config_diff(c, &back, diff, sizeof diff)) {
        snprintf(err, errlen, "%s describes another model than the one exported: %s (model vs config)", src, diff);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path)) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); unlink(tmp); return -1; }
    return 0;
}

/* rope_theta is compared with a relative tolerance: a value that went through decimal text (a config written
 * with %g) need not come back to the same bits. */
int hf_config_diff(const ModelConfig *a, const ModelConfig *b, char *buf, size_t len)
{
#define CMP(field) \
    if (a->field != b->field) { snprintf(buf, len, #field " %g vs %g", (double)a->field, (double)b->field); return 1; }
    CMP(arch) CMP(layers) CMP(hidden) CMP(heads) CMP(kv_heads) CMP(head_dim) CMP(ffn) CMP(vocab)
    CMP(tie_embeddings) CMP(qkv_bias) CMP(qk_norm)
#undef CMP
    if (fabs(a->rope_theta - b->rope_theta) > 1e-6 * b->rope_theta) {
        snprintf(buf, len, "rope_theta %g vs %g", a->rope_theta, b->rope_theta);
        return 1;
    }
    return 0;
}
