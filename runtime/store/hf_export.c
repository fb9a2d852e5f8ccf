/* hf_export.c — the HF model directory a run exports (whole, or written by
 * every rank together) and the PEFT adapter directory (LoRA), written and read. */
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
#include "plan_limits.h"   /* contract/: the lora_rank row an adapter's r is read by */
#include "run_formats.h"   /* contract/: the checkpoint files' names */
#include "hf_config.h"
#include "log.h"
#include "sha256.h"
#include "store_internal.h"

/* ---- HF export ---- */

/* The id of an added token by its content, from tokenizer.json; -1 if absent.
 * Special tokens (bos/eos) are added tokens in tokenizer.json, so only that list is searched. */
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
 * cannot be read or is not JSON.
 * NULL: special_ids leaves the ids unknown; peft_load refuses the adapter. */
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

/* bos/eos ids named by tokenizer_config.json, looked up in tokenizer.json.
 * config.json of a model written from scratch names them; -1 each when unknown (then left out).
 * tokenizer_config.json spells a token as a string or as an AddedToken object {"content": ...}. */
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

/* DIR.tmp, empty: where an export is written before it is renamed into place.
 * A leftover of an interrupted export is removed first. */
static int export_tmp(const char *dir, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    snprintf(tmp, tmplen, "%s.tmp", dir);
    store_remove_flat_dir(tmp);
    if (mkdir_parents(tmp)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    return 0;
}

/* Everything of an HF model directory but its weights: config.json (carried
 * over from the source model, or written from m's shape) and the tokenizer's files. */
static int export_side_files(const char *tmp, const Model *m, StDtype dtype, const char *tokenizer_dir,
                             const char *source_model, char *err, size_t errlen)
{
    /* the tokenizer's files and generation_config.json, as an HF model directory holds them; each copied when
     * present */
    static const char *tok_files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                      "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja",
                                      "generation_config.json"};
    char p[4200], src[4200];
    snprintf(p, sizeof p, "%s/config.json", tmp);
    /* config.json's torch_dtype names the dtype the weights are stored in */
    const char *torch_dtype = dtype == ST_BF16 ? "bfloat16" : "float32";
    /* a fine-tuned model keeps its source's config.json, every key llmc-train does not read included */
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
        if (store_copy_file(src, p, err, errlen)) return -1;
        copied++;
    }
    /* a tokenizer directory holding none of them is a wrong path, not a tokenizer */
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
    /* rename cannot replace a directory that holds files: the previous export is removed first, right before */
    store_remove_flat_dir(dir);
    if (rename(tmp, dir)) { snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno)); return -1; }
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    /* the rename lives in DIR's parent: "/x" has "/" for it */
    if (slash) { *slash = 0; fsync_dir(parent[0] ? parent : "/"); }
    return 0;
}

/* The whole export by one process: weights hashed while written, side files, manifest, rename into DIR. */
int hf_export(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir, const char *source_model,
              char *err, size_t errlen)
{
    char tmp[4096], p[4200];
    if (export_tmp(dir, tmp, sizeof tmp, err, errlen)) return -1;
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    ManifestHash known[1] = {{"model.safetensors", ""}};
    if (store_write_model_file(p, m, m->w, "", dtype, known[0].hex, err, errlen)) return -1;
    if (export_side_files(tmp, m, dtype, tokenizer_dir, source_model, err, errlen)) return -1;
    return export_seal(dir, tmp, known, err, errlen);
}

/* Rank 0's part of a sharded export (checkpoint.h): model.safetensors laid out at full size, the side files
 * written; the ranks then fill their ranges (hf_export_shard_write) and rank 0 seals (hf_export_shard_finish). */
int hf_export_shard_begin(const char *dir, const Model *m, StDtype dtype, const char *tokenizer_dir,
                          const char *source_model, char *err, size_t errlen)
{
    char tmp[4096], p[4200], **names;
    int n;
    if (export_tmp(dir, tmp, sizeof tmp, err, errlen)) return -1;
    StWriteTensor *t = store_model_tensors(m, m->w, "", &names, &n);
    if (!t) { snprintf(err, errlen, "out of memory"); return -1; }
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    int rc = st_create(p, t, n, dtype, "\"format\":\"pt\"", err, errlen);
    store_free_tensors(t, names, n);
    if (rc || export_side_files(tmp, m, dtype, tokenizer_dir, source_model, err, errlen)) return -1;
    fsync_dir(tmp);
    return 0;
}

/* Every rank: its part of the weights into DIR.tmp/model.safetensors, laid out by hf_export_shard_begin. */
int hf_export_shard_write(const char *dir, const Model *m, const ModelPart *part, char *err, size_t errlen)
{
    char p[4200];
    const char *const prefix[1] = {""};
    const float *const buf[1] = {m->w};
    snprintf(p, sizeof p, "%s.tmp/model.safetensors", dir);
    return store_fill_file(p, m, 1, prefix, buf, part, err, errlen);
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

/* DIR as PEFT's save_pretrained leaves it: adapter_model.safetensors (fp32) and adapter_config.json, plus our
 * manifest; built in DIR.tmp and renamed into place like an export. */
int peft_export(const char *dir, const Lora *l, int alpha, int rslora, const char *base_model, char *err,
                size_t errlen)
{
    char tmp[4096], p[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    store_remove_flat_dir(tmp);
    if (mkdir_parents(tmp)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", tmp);
    ManifestHash known[1] = {{"adapter_model.safetensors", ""}};
    if (store_write_model_file(p, &l->p, l->p.w, "", ST_F32, known[0].hex, err, errlen)) return -1;
    /* PEFT's LoraConfig as save_pretrained writes it (the keys peft reads back) */
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToObject(c, "base_model_name_or_path", base_model ? cJSON_CreateString(base_model) : cJSON_CreateNull());
    /* fixed: no bias trained, no other module saved; dropout 0.0 (it acts only in training) */
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
    /* as export_seal: rename cannot replace a directory that holds files */
    store_remove_flat_dir(dir);
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
    /* r within the plan's own lora_rank row (contract/plan_limits.h: what a plan may ask, the backends then
     * check their own range). A target module outside the seven this trainer adapts is refused, not dropped:
     * the adapter would compute another function */
    const PlanLimit *rank = plan_limit(PL_FINETUNE_LORA_RANK);
    if (!cJSON_IsNumber(r) || plan_limit_violation(rank, r->valuedouble) ||
        !cJSON_IsNumber(al) || al->valuedouble < 1 || al->valuedouble > 1 << 20 || !targets || unknown) {
        snprintf(err, errlen, "%s: want r (an integer %.0f-%.0f), lora_alpha (1-%d) and target_modules among q_proj, "
                 "k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj", path, rank->min, rank->max, 1 << 20);
        cJSON_Delete(j);
        return NULL;
    }
    *alpha = (int)al->valuedouble;
    /* absent means false, as in PEFT's LoraConfig */
    *rslora = cJSON_IsTrue(cJSON_GetObjectItem(j, "use_rslora"));
    Lora *l = lora_new(base, targets, (int)r->valuedouble, *alpha, *rslora, 1);
    cJSON_Delete(j);
    if (!l) { snprintf(err, errlen, "out of memory (LoRA adapters)"); return NULL; }
    StModel st;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (st_open(&st, path, err, errlen)) { lora_free(l); return NULL; }
    for (int i = 0; i < l->p.n_params; i++) {
        const ParamInfo *p = &l->p.params[i];
        /* every adapter tensor lora_new made must be there at its size; extra tensors in the file are ignored */
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
