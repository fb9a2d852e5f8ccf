/* checkpoint.c — training checkpoints: written whole or by every rank
 * together, verified and resumed (any rank count), and the run lock. */
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
#include "run_formats.h"   /* contract/: the checkpoint files' names */
#include "hf_config.h"
#include "lock_holder.h"
#include "log.h"
#include "sha256.h"
#include "store_internal.h"

/* ---- training checkpoints ---- */

/* Seconds on a monotonic clock, for the progress lines of a save or a verify. */
static double ckpt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Key and value are cut to their fixed fields (39 and 79 bytes); the writer and the resume both build theirs
 * through here, so a cut value still compares equal. */
void ckpt_fp_add(CkptFingerprint *fp, const char *key, const char *fmt, ...)
{
    if (fp->n >= CKPT_FP_MAX) return;
    snprintf(fp->f[fp->n].key, sizeof fp->f[fp->n].key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fp->f[fp->n].val, sizeof fp->f[fp->n].val, fmt, ap);
    va_end(ap);
    fp->n++;
}

/* Append s as a JSON string (quoted, escaped).
 * Returns the new length, counted on past CAP when OUT is full (nothing is written there), so the caller
 * checks once at the end (len >= cap) instead of after every piece. */
static size_t json_quote(char *out, size_t cap, size_t len, const char *s)
{
    if (len < cap) out[len] = '"';
    len++;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char e[8];
        /* control bytes escaped as JSON requires; bytes >= 0x80 (UTF-8) pass as they are */
        if (c == '"' || c == '\\') snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20) snprintf(e, sizeof e, "\\u%04x", c);
        else { e[0] = (char)c; e[1] = 0; }
        for (char *q = e; *q; q++, len++) if (len < cap) out[len] = *q;
    }
    if (len < cap) out[len] = '"';
    return len + 1;
}

/* state.json's text, malloc'd; NULL when out of memory or when it would pass CAP (then reported as out of
 * memory by finish_step). The step counters and the generator state make the resume exact: the data order
 * continues at rows_consumed and the RNG where it stopped. CAP: 1 KiB for the fixed fields, 300 bytes per
 * fingerprint field (a 40-byte key and an 80-byte value, quoted), 6 bytes per byte of the plan's path (the
 * longest escape, \u00XX). */
static char *state_json(const AdamW *opt, const TrainState *s, int64_t write_seq, const CkptFingerprint *fp,
                        const CkptPlanRef *plan_ref)
{
    size_t cap = 1024 + (fp ? (size_t)fp->n * 300 : 0) + (plan_ref ? 6 * sizeof plan_ref->path + 128 : 0);
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t len = (size_t)snprintf(buf, cap,
             "{\n  \"format\": \"llmc-train-checkpoint\",\n  \"version\": 2,\n  \"write_seq\": %" PRId64 ",\n"
             "  \"" CKPT_STATE_STEP_KEY "\": %" PRId64 ",\n"
             "  \"adam_t\": %" PRId64 ",\n  \"rows_consumed\": %" PRId64 ",\n  \"tokens_seen\": %" PRId64 ",\n"
             "  \"rng\": [\"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\"]",
             write_seq, s->step, opt->t, s->rows_consumed, s->tokens_seen, s->rng.s[0], s->rng.s[1], s->rng.s[2],
             s->rng.s[3]);
    if (fp) {
        len += (size_t)snprintf(buf + len, cap - len, ",\n  \"fingerprint\": {");
        for (int i = 0; i < fp->n && len < cap; i++) {
            len += (size_t)snprintf(buf + len, cap - len, "%s\n    ", i ? "," : "");
            len = json_quote(buf, cap, len, fp->f[i].key);
            if (len + 2 < cap) { buf[len++] = ':'; buf[len++] = ' '; }
            len = json_quote(buf, cap, len, fp->f[i].val);
        }
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "\n  }");
    }
    if (plan_ref && plan_ref->path[0] && len < cap) {
        len += (size_t)snprintf(buf + len, cap - len, ",\n  \"plan\": {\"path\": ");
        len = json_quote(buf, cap, len, plan_ref->path);
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, ", \"sha256\": \"%s\"}", plan_ref->sha256);
    }
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "\n}\n");
    if (len >= cap) { free(buf); return NULL; }
    return buf;
}

/* state.json is about 1 KiB with its fingerprint; a file past 1 MiB is not one. */
#define STATE_MAX_BYTES (1u << 20)
#define EXACT_INT_MAX 9007199254740992.0   /* 2^53: larger JSON numbers are not exact integers */

/* An integer field of state.json in [lo, hi]. 0, or -1 with "PATH: field KEY ..." in err. */
static int state_int(const cJSON *o, const char *key, double lo, double hi, int64_t *out, const char *path,
                     char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) { snprintf(err, errlen, "%s: field \"%s\" is missing", path, key); return -1; }
    if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble || floor(v->valuedouble) != v->valuedouble) {
        snprintf(err, errlen, "%s: field \"%s\" is not an integer", path, key);
        return -1;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(err, errlen, "%s: field \"%s\" = %.17g is outside %.17g..%.17g", path, key, v->valuedouble, lo, hi);
        return -1;
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* What parse_state takes from state.json: the training state and what a resume checks it against. */
typedef struct {
    int64_t adam_t, write_seq;
    TrainState st;
    int has_fp;
    int has_plan_ref;
    CkptPlanRef plan_ref;
} ParsedState;

/* state.json's optional "plan": {"path": absolute, no control bytes, "sha256":
 * 64 hex digits}. 0 (ps->has_plan_ref says whether it was there), or -1 (err). */
static int state_plan_ref(const cJSON *o, const char *path, ParsedState *ps, char *err, size_t errlen)
{
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "plan");
    if (!pr) return 0;
    const char *pp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pr, "path"));
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pr, "sha256"));
    if (!cJSON_IsObject(pr) || !pp || !ph) {
        store_say(err, errlen, "%s: field \"plan\" is not {\"path\": STRING, \"sha256\": STRING}", path);
        return -1;
    }
    size_t n = strlen(pp);
    int ctrl = 0;
    for (const unsigned char *c = (const unsigned char *)pp; *c; c++) ctrl |= *c < 0x20 || *c == 0x7f;
    if (pp[0] != '/' || n >= sizeof ps->plan_ref.path || ctrl) {
        store_say(err, errlen, "%s: field \"plan\".\"path\" is not an absolute path of at most %zu bytes without control "
                 "characters", path, sizeof ps->plan_ref.path - 1);
        return -1;
    }
    if (strlen(ph) != 64 || strspn(ph, "0123456789abcdef") != 64) {
        store_say(err, errlen, "%s: field \"plan\".\"sha256\" is not 64 lowercase hex digits", path);
        return -1;
    }
    memcpy(ps->plan_ref.path, pp, n + 1);
    memcpy(ps->plan_ref.sha256, ph, 65);
    ps->has_plan_ref = 1;
    return 0;
}

/* Range-check a checkpoint's state.json text (path for messages; dir_step: the
 * step its directory name says). Returns 0; -1 when invalid (err names path and
 * field); -2 when valid but its fingerprint differs from want (err names the fields). */
static int parse_state(const char *path, const char *name, const char *text, int64_t dir_step,
                       const CkptLimits *lim, const CkptFingerprint *want, ParsedState *ps, char *err, size_t errlen)
{
    memset(ps, 0, sizeof *ps);
    cJSON *o = cJSON_Parse(text);
    int rc = -1;
    if (!cJSON_IsObject(o)) { store_say(err, errlen, "%s: not a JSON object", path); goto done; }
    const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "format"));
    if (!fmt || strcmp(fmt, "llmc-train-checkpoint")) {
        store_say(err, errlen, "%s: field \"format\" is not \"llmc-train-checkpoint\"", path);
        goto done;
    }
    int64_t version;
    /* version 1 (an older writer): no write_seq and no fingerprint required */
    if (state_int(o, "version", 1, 2, &version, path, err, errlen)) goto done;
    if (version >= 2 && state_int(o, "write_seq", 1, EXACT_INT_MAX, &ps->write_seq, path, err, errlen)) goto done;

    /* the fingerprint first: a checkpoint of another plan is refused as such */
    const cJSON *fpo = cJSON_GetObjectItemCaseSensitive(o, "fingerprint");
    if (version >= 2 && !cJSON_IsObject(fpo)) {
        store_say(err, errlen, "%s: field \"fingerprint\" is missing or not an object", path);
        goto done;
    }
    ps->has_fp = fpo != NULL;
    if (fpo && want) {
        char diff[1024] = "";
        size_t dl = 0;
        int nd = 0, known = 0;
        for (int i = 0; i < want->n; i++) {
            const char *have = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fpo, want->f[i].key));
            known += have != NULL;
            /* DIFF collects every differing field, each value cut to 60 bytes, so the message names them all */
            if (!have || !strcmp(have, want->f[i].val)) continue;   /* a key an older writer did not record */
            if (dl < sizeof diff)
                dl += (size_t)snprintf(diff + dl, sizeof diff - dl, "%s%s %.60s, the plan says %s", nd ? "; " : "",
                                       want->f[i].key, have, want->f[i].val);
            nd++;
        }
        if (nd) {
            store_say(err, errlen, "checkpoint %s was written with %s (it belongs to another plan: resume with that plan, "
                     "point checkpoint.dir elsewhere, or pass --fresh to start over at step 0)", name, diff);
            rc = -2;
            goto done;
        }
        /* every writer of version 2 records the fields: an empty (or emptied)
         * fingerprint would turn the plan check off without a word */
        if (version >= 2 && want->n && !known) {
            store_say(err, errlen, "%s: field \"fingerprint\" records none of the fields a resume checks (%s, ...)", path,
                want->f[0].key);
            goto done;
        }
    }

    /* the counters against the plan (lim, NULL when only the weights are read): a checkpoint past the run's
     * last step or with rows/tokens the batch and context cannot give is corrupt or another run's */
    double max_steps = lim && lim->total_steps > 0 ? (double)lim->total_steps : EXACT_INT_MAX;
    if (state_int(o, CKPT_STATE_STEP_KEY, 1, max_steps, &ps->st.step, path, err, errlen)) goto done;
    if (dir_step >= 0 && ps->st.step != dir_step) {
        store_say(err, errlen, "%s: field \"step\" = %" PRId64 " but the directory is for step %" PRId64, path,
                 ps->st.step, dir_step);
        goto done;
    }
    if (state_int(o, "adam_t", 0, EXACT_INT_MAX, &ps->adam_t, path, err, errlen)) goto done;
    if (ps->adam_t != ps->st.step) {
        store_say(err, errlen, "%s: field \"adam_t\" = %" PRId64 ", not the step %" PRId64 " (one AdamW update per step)",
                 path, ps->adam_t, ps->st.step);
        goto done;
    }
    if (state_int(o, "rows_consumed", 0, EXACT_INT_MAX, &ps->st.rows_consumed, path, err, errlen)) goto done;
    if (lim && lim->global_batch > 0 && (double)ps->st.rows_consumed != (double)ps->st.step * (double)lim->global_batch) {
        store_say(err, errlen, "%s: field \"rows_consumed\" = %" PRId64 ", not step %" PRId64 " x global_batch %" PRId64,
                 path, ps->st.rows_consumed, ps->st.step, lim->global_batch);
        goto done;
    }
    double max_tok = lim && lim->context > 0 ? (double)ps->st.rows_consumed * (double)lim->context : EXACT_INT_MAX;
    if (max_tok > EXACT_INT_MAX) max_tok = EXACT_INT_MAX;
    if (state_int(o, "tokens_seen", 0, max_tok, &ps->st.tokens_seen, path, err, errlen)) goto done;
    const cJSON *rng = cJSON_GetObjectItemCaseSensitive(o, "rng");
    if (!cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4) {
        store_say(err, errlen, "%s: field \"rng\" is not an array of 4 hex strings", path);
        goto done;
    }
    uint64_t any = 0;
    for (int i = 0; i < 4; i++) {
        const char *h = cJSON_GetStringValue(cJSON_GetArrayItem(rng, i));
        if (!h || strlen(h) != 16 || strspn(h, "0123456789abcdefABCDEF") != 16) {
            store_say(err, errlen, "%s: field \"rng\"[%d] is not 16 hex digits", path, i);
            goto done;
        }
        ps->st.rng.s[i] = strtoull(h, NULL, 16);
        any |= ps->st.rng.s[i];
    }
    /* a seeded xoshiro256** state is never all zero (from zero it would give zeros forever): not ours */
    if (!any) { store_say(err, errlen, "%s: field \"rng\" is all zero (not a generator state)", path); goto done; }
    if (state_plan_ref(o, path, ps, err, errlen)) goto done;
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

/* The step of a directory name "step-NNNNNNNN" (8 or more digits), or -1.
 * At most 15 digits: every such number is an exact integer in a double (2^53 is about 9e15). */
static int64_t name_step(const char *name)
{
    if (strncmp(name, CKPT_STEP_PREFIX, strlen(CKPT_STEP_PREFIX))) return -1;
    size_t pl = strlen(CKPT_STEP_PREFIX), nd = strspn(name + pl, "0123456789");
    if (nd < 8 || nd > 15 || name[pl + nd]) return -1;
    return strtoll(name + pl, NULL, 10);
}

/* One step-* directory of a checkpoint directory, as scan_ckpts found it. */
typedef struct {
    char name[32];
    int64_t step, seq;   /* seq: write_seq from state.json; 0 none recorded (older writer); -1 unreadable */
} CkptEntry;

/* Write order first, step second: a run resumed from an older step writes lower steps later, and those are
 * the newest. An unreadable state.json (seq -1) sorts last. */
static int cmp_newest_first(const void *a, const void *b)
{
    const CkptEntry *x = a, *y = b;
    if (x->seq != y->seq) return x->seq > y->seq ? -1 : 1;
    if (x->step != y->step) return x->step > y->step ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The step-* directories of ckpt_dir, newest first by write order (then step).
 * Only the write order is read from state.json here; verification is try_load's. NULL (count 0) when the
 * directory cannot be read or holds none. */
static CkptEntry *scan_ckpts(const char *ckpt_dir, int *count)
{
    *count = 0;
    DIR *d = opendir(ckpt_dir);
    if (!d) return NULL;
    CkptEntry *v = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t step = name_step(e->d_name);
        if (step < 0) continue;
        char p[4200], perr[256];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", ckpt_dir, e->d_name);
        /* lstat: a link named like a step is skipped, not followed */
        if (lstat(p, &sb) || !S_ISDIR(sb.st_mode)) continue;
        CkptEntry *nv = realloc(v, (size_t)(n + 1) * sizeof *nv);
        if (!nv) break;
        v = nv;
        store_say(v[n].name, sizeof v[n].name, "%s", e->d_name);
        v[n].step = step;
        v[n].seq = -1;
        snprintf(p, sizeof p, "%s/%s/%s", ckpt_dir, e->d_name, ckpt_files[CF_STATE]);
        char *text = store_read_regular(p, STATE_MAX_BYTES, perr, sizeof perr);
        cJSON *o = text ? cJSON_Parse(text) : NULL;
        const cJSON *ws = cJSON_GetObjectItemCaseSensitive(o, "write_seq");
        if (cJSON_IsObject(o)) {
            if (!ws) v[n].seq = 0;
            /* at most 2^52, so the next one (+1) is still an exact integer that a resume accepts */
            else if (cJSON_IsNumber(ws) && ws->valuedouble >= 1 && ws->valuedouble <= EXACT_INT_MAX / 2 &&
                     floor(ws->valuedouble) == ws->valuedouble)
                v[n].seq = (int64_t)ws->valuedouble;
        }
        cJSON_Delete(o);
        free(text);
        n++;
    }
    closedir(d);
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_newest_first);
    *count = n;
    return v;
}

/* Rotation: keep the `keep` newest checkpoints by write order, the one `latest`
 * names (just written) and every one written after it; remove the others. */
static void prune(const char *ckpt_dir, const char *latest, int keep)
{
    int n;
    CkptEntry *v = scan_ckpts(ckpt_dir, &n);
    int li = -1;
    for (int i = 0; i < n; i++) if (!strcmp(v[i].name, latest)) li = i;
    /* LI is the just-written one's index, newest first: it and everything newer survive even past KEEP */
    int first_removable = keep > li + 1 ? keep : li + 1;
    for (int i = first_removable; i < n; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", ckpt_dir, v[i].name);
        /* our step directories hold only files; one that holds more stays (rmdir fails) and is tried again */
        store_remove_flat_dir(p);
    }
    free(v);
}

/* The write order of a new checkpoint: one more than any already in ckpt_dir. */
static int64_t next_write_seq(const char *ckpt_dir)
{
    int n_old;
    CkptEntry *old = scan_ckpts(ckpt_dir, &n_old);
    int64_t seq = 1;
    for (int i = 0; i < n_old; i++) if (old[i].seq >= seq) seq = old[i].seq + 1;
    free(old);
    return seq;
}

/* The names of step's directory: step-NNNNNNNN and CKPT_DIR/.tmp-step-NNNNNNNN.
 * The temporary directory is a dot name beside the steps, so scan_ckpts never takes a half-written one for a step. */
static void step_names(const char *ckpt_dir, int64_t step, char name[32], char tmp[4096])
{
    snprintf(name, 32, CKPT_STEP_PREFIX "%08" PRId64, step);
    snprintf(tmp, 4096, "%s/.tmp-%s", ckpt_dir, name);
}

/* A fresh, empty temporary directory for step (a leftover of an interrupted save removed).
 * TNAME ("tmp-step-NNNNNNNN") is the name store_clear_name sets a stuck leftover aside under. */
static int make_tmp_dir(const char *ckpt_dir, const char *name, const char *tmp, char *err, size_t errlen)
{
    if (mkdir_parents(ckpt_dir)) { snprintf(err, errlen, "%s: %s", ckpt_dir, strerror(errno)); return -1; }
    char tname[48];
    snprintf(tname, sizeof tname, "tmp-%s", name);
    if (store_clear_name(ckpt_dir, tmp, tname, err, errlen)) return -1;
    if (mkdir(tmp, 0755)) { snprintf(err, errlen, "%s: %s", tmp, strerror(errno)); return -1; }
    return 0;
}

/* The optimizer file's tensors: exp_avg.* then exp_avg_sq.* (c1 + c2 of
 * them), their names in n1 and n2 until optimizer_tensors_free. NULL when out
 * of memory (nothing to free). */
static StWriteTensor *optimizer_tensors(const Model *m, const AdamW *opt, char ***n1, char ***n2, int *c1, int *c2)
{
    StWriteTensor *t1 = store_model_tensors(m, opt->m, "exp_avg.", n1, c1);
    StWriteTensor *t2 = store_model_tensors(m, opt->v, "exp_avg_sq.", n2, c2);
    StWriteTensor *all = t1 && t2 ? malloc((size_t)(*c1 + *c2) * sizeof *all) : NULL;
    if (all) {
        memcpy(all, t1, (size_t)*c1 * sizeof *all);
        memcpy(all + *c1, t2, (size_t)*c2 * sizeof *all);
        free(t1);
        free(t2);
        return all;
    }
    if (t1) store_free_tensors(t1, *n1, *c1);
    if (t2) store_free_tensors(t2, *n2, *c2);
    return NULL;
}

/* store_free_tensors frees ALL and N1's names; N2's names (the second half of ALL) are freed here. */
static void optimizer_tensors_free(StWriteTensor *all, char **n1, int c1, char **n2, int c2)
{
    store_free_tensors(all, n1, c1);
    for (int i = 0; i < c2; i++) free(n2[i]);
    free(n2);
}
/* optimizer.safetensors' metadata: its own format name (a model's weights say "pt") */
#define OPTIMIZER_META "\"format\":\"llmc-adamw\""

/* The rest of a save, once model.safetensors and optimizer.safetensors are in
 * tmp with their digests in known[0..1]: state.json, the manifest, the rename,
 * `latest`, rotation.
 * The order is the crash safety: the step directory appears under its name only complete (manifest written,
 * synced), `latest` names it only once that rename is synced, and older checkpoints are pruned last, so a
 * crash at any point leaves `latest` naming a whole checkpoint (or scan_ckpts finding one). */
static int finish_step(const char *ckpt_dir, const char *name, const char *tmp, int64_t seq, const AdamW *opt,
                       const TrainState *st, const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep,
                       ManifestHash known[3], char *err, size_t errlen)
{
    char final[4096], p[4200];
    snprintf(final, sizeof final, "%s/%s", ckpt_dir, name);
    char *sj = state_json(opt, st, seq, fp, plan_ref);
    snprintf(p, sizeof p, "%s/%s", tmp, ckpt_files[CF_STATE]);
    if (!sj) snprintf(err, errlen, "%s: out of memory", p);
    int rc = sj ? store_write_file_atomic(p, sj, strlen(sj), err, errlen) : -1;
    if (!rc) {
        Sha256 h;
        sha256_init(&h);
        sha256_update(&h, sj, strlen(sj));
        if (sha256_final_hex(&h, known[2].hex)) { snprintf(err, errlen, "%s: sha256 failed (libcrypto)", p); rc = -1; }
    }
    free(sj);
    if (rc || manifest_write_known(tmp, known, 3, err, errlen)) return -1;
    fsync_dir(tmp);
    /* a stale directory of the same step (resumed from an older one) */
    if (store_clear_name(ckpt_dir, final, name, err, errlen)) return -1;
    if (rename(tmp, final)) { snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno)); return -1; }
    fsync_dir(ckpt_dir);
    char latest[64];
    snprintf(latest, sizeof latest, "%s\n", name);
    snprintf(p, sizeof p, "%s/%s", ckpt_dir, ckpt_files[CF_LATEST]);
    if (store_write_file_atomic(p, latest, strlen(latest), err, errlen)) return -1;
    fsync_dir(ckpt_dir);
    prune(ckpt_dir, name, keep);
    return 0;
}

int ckpt_save(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st,
              const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep, char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, st->step, name, tmp);
    if (mkdir_parents(ckpt_dir)) { snprintf(err, errlen, "%s: %s", ckpt_dir, strerror(errno)); return -1; }
    /* taken before the save: the checkpoints now there are the ones this one must sort after */
    int64_t seq = next_write_seq(ckpt_dir);
    if (make_tmp_dir(ckpt_dir, name, tmp, err, errlen)) return -1;

    /* every file is hashed while it is written: the manifest reads nothing back. known[0] and [1] are filled as
     * the two files are written, known[2] (state.json) by finish_step, which writes it */
    ManifestHash known[3] = {{"model.safetensors", ""}, {"optimizer.safetensors", ""}, {ckpt_files[CF_STATE], ""}};
    /* fp32 weights and AdamW's two moments: three floats per parameter */
    double mb = (double)m->n_floats * 4 * 3 / 1e6, t0 = ckpt_now();
    log_info("checkpoint write %s: %.1f MB (weights, optimizer moments, state; hashed while written)", name, mb);
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    if (store_write_model_file(p, m, m->w, "", ST_F32, known[0].hex, err, errlen)) return -1;
    log_info("checkpoint write %s: model.safetensors done (%.1f MB, %.1f s)", name, mb / 3, ckpt_now() - t0);
    /* optimizer moments: one file, exp_avg.* then exp_avg_sq.* */
    char **n1, **n2;
    int c1, c2, rc = -1;
    StWriteTensor *all = optimizer_tensors(m, opt, &n1, &n2, &c1, &c2);
    if (all) {
        snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
        rc = st_write_sha256(p, all, c1 + c2, ST_F32, OPTIMIZER_META, known[1].hex, err, errlen);
        optimizer_tensors_free(all, n1, c1, n2, c2);
    } else {
        snprintf(err, errlen, "out of memory");
    }
    if (rc || finish_step(ckpt_dir, name, tmp, seq, opt, st, fp, plan_ref, keep, known, err, errlen)) return -1;
    double dt = ckpt_now() - t0;
    log_info("checkpoint write %s: done, %.1f MB in %.1f s (%.0f MB/s, one pass)", name, mb, dt, dt > 0 ? mb / dt : 0.0);
    return 0;
}

/* ---- sharded save: no rank holds the whole state ---- */

int ckpt_shard_begin(const char *ckpt_dir, const Model *m, const AdamW *opt, int64_t step, char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, step, name, tmp);
    if (make_tmp_dir(ckpt_dir, name, tmp, err, errlen)) return -1;
    log_info("checkpoint write %s: %.1f MB (weights, optimizer moments, state; each rank writes its shard)", name,
             (double)m->n_floats * 4 * 3 / 1e6);
    char **names, **n1, **n2;
    int n, c1, c2;
    StWriteTensor *t = store_model_tensors(m, m->w, "", &names, &n);
    StWriteTensor *all = t ? optimizer_tensors(m, opt, &n1, &n2, &c1, &c2) : NULL;
    if (!all) {
        if (t) store_free_tensors(t, names, n);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    int rc = st_create(p, t, n, ST_F32, "\"format\":\"pt\"", err, errlen);
    snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
    if (!rc) rc = st_create(p, all, c1 + c2, ST_F32, OPTIMIZER_META, err, errlen);
    store_free_tensors(t, names, n);
    optimizer_tensors_free(all, n1, c1, n2, c2);
    if (!rc) fsync_dir(tmp);
    return rc;
}

/* Every rank, between ckpt_shard_begin and ckpt_shard_finish: its part of the weights into model.safetensors and
 * of both moments into optimizer.safetensors, each file opened once (store_fill_file). */
int ckpt_shard_write(const char *ckpt_dir, const Model *m, const AdamW *opt, int64_t step, const ModelPart *part,
                     char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, step, name, tmp);
    const char *const wp[1] = {""}, *const op[2] = {"exp_avg.", "exp_avg_sq."};
    const float *const wb[1] = {m->w}, *const ob[2] = {opt->m, opt->v};
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    if (store_fill_file(p, m, 1, wp, wb, part, err, errlen)) return -1;
    snprintf(p, sizeof p, "%s/optimizer.safetensors", tmp);
    return store_fill_file(p, m, 2, op, ob, part, err, errlen);
}

int ckpt_shard_finish(const char *ckpt_dir, const Model *m, const AdamW *opt, const TrainState *st,
                      const CkptFingerprint *fp, const CkptPlanRef *plan_ref, int keep, char *err, size_t errlen)
{
    char name[32], tmp[4096], p[4200];
    step_names(ckpt_dir, st->step, name, tmp);
    double t0 = ckpt_now(), mb = (double)m->n_floats * 4 * 3 / 1e6;
    /* the pieces came from every rank: the digests are of the files as they are on disk */
    ManifestHash known[3] = {{"model.safetensors", ""}, {"optimizer.safetensors", ""}, {ckpt_files[CF_STATE], ""}};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", tmp, known[k].name);
        if (sha256_file_hex(p, known[k].hex)) { snprintf(err, errlen, "%s: cannot hash: %s", p, strerror(errno)); return -1; }
    }
    if (finish_step(ckpt_dir, name, tmp, next_write_seq(ckpt_dir), opt, st, fp, plan_ref, keep, known, err, errlen))
        return -1;
    log_info("checkpoint write %s: done, %.1f MB hashed in %.1f s", name, mb, ckpt_now() - t0);
    return 0;
}

/* Verify and load one checkpoint directory. 0 loaded into m/opt/st; -1 it fails
 * verification (why in err, naming the file); -2 its fingerprint differs (err).
 * The manifest is checked before any byte is used: a damaged checkpoint is refused whole, never half-loaded.
 * On -1, M and OPT may already hold part of this checkpoint's tensors: the caller loads another over them or fails. */
static int try_load(const char *ckpt_dir, const char *name, const CkptFingerprint *fp, const CkptLimits *lim,
                    Model *m, AdamW *opt, TrainState *st, const ModelPart *part, int *has_fp, char *err, size_t errlen)
{
    char dir[4200], p[4300];
    snprintf(dir, sizeof dir, "%s/%s", ckpt_dir, name);
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        store_say(err, errlen, "%s: %s", dir, errno && !S_ISDIR(sb.st_mode) ? strerror(errno) : "not a directory");
        return -1;
    }
    double t0 = ckpt_now();
    /* hashing a large checkpoint takes a while: the log says what the run is doing */
    log_info("checkpoint verify %s: sha256 manifest", name);
    int mc = manifest_check(dir, NULL, err, errlen);
    if (mc) return -1;
    log_info("checkpoint verify %s: ok (%.1f s)", name, ckpt_now() - t0);
    snprintf(p, sizeof p, "%s/%s", dir, ckpt_files[CF_STATE]);
    char *text = store_read_regular(p, STATE_MAX_BYTES, err, errlen);
    if (!text) return -1;
    ParsedState ps;
    int rc = parse_state(p, dir, text, name_step(name), lim, fp, &ps, err, errlen);
    free(text);
    if (rc) return rc;
    StModel sm;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    rc = store_read_model_tensors(&sm, m, m->w, "", part, NULL, err, errlen);
    st_close(&sm);
    if (rc) return -1;
    snprintf(p, sizeof p, "%s/optimizer.safetensors", dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    rc = store_read_model_tensors(&sm, m, opt->m, "exp_avg.", part, NULL, err, errlen);
    if (!rc) rc = store_read_model_tensors(&sm, m, opt->v, "exp_avg_sq.", part, NULL, err, errlen);
    st_close(&sm);
    if (rc) return -1;
    *st = ps.st;
    opt->t = ps.adam_t;
    *has_fp = ps.has_fp;
    return 0;
}

/* CHECKPOINT as a step directory: dir itself when it holds state.json, else
 * the step its `latest` names. Its name (step-NNNNNNNN) into name. 0, or -1.
 * For the readers of a path the user gives (export: ckpt_load_weights, ckpt_plan_ref), where either form may
 * come; a resume scans its own checkpoint directory instead. */
static int step_dir_of(const char *dir, char *step_dir, size_t step_dir_len, char *name, size_t name_len, char *err,
                       size_t errlen)
{
    char p[4300];
    struct stat sb;
    store_say(p, sizeof p, "%s/%s", dir, ckpt_files[CF_STATE]);
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        store_say(err, errlen, "%s: %s", dir, stat(dir, &sb) ? strerror(errno) : "not a directory");
        return -1;
    }
    if (stat(p, &sb) && errno == ENOENT) {   /* a checkpoint directory: the step `latest` names */
        store_say(p, sizeof p, "%s/%s", dir, ckpt_files[CF_LATEST]);
        /* `latest` is one step name and a newline: 256 bytes is plenty, more is not a latest file */
        char *text = store_read_regular(p, 256, err, errlen);
        if (!text) {
            store_say(err, errlen, "%s: neither a checkpoint step (no state.json) nor a checkpoint directory (no latest)", dir);
            return -1;
        }
        size_t n = strcspn(text, "\r\n");
        snprintf(name, name_len, "%.*s", (int)(n < name_len ? n : name_len - 1), text);
        int bad = n == 0 || n >= name_len || name_step(name) < 0;
        free(text);
        if (bad) {
            store_say(err, errlen, "%s: does not name a step directory (step-NNNNNNNN)", p);
            return -1;
        }
        store_say(step_dir, step_dir_len, "%s/%s", dir, name);
    } else {
        /* a step directory given itself: its last path component is the step's name */
        const char *slash = strrchr(dir, '/');
        snprintf(name, name_len, "%s", slash && slash[1] ? slash + 1 : dir);
        store_say(step_dir, step_dir_len, "%s", dir);
    }
    return 0;
}

/* CHECKPOINT (step_dir_of) verified by its manifest first -- no byte of a
 * damaged checkpoint is used -- and its state.json parsed (want: fingerprint
 * fields that must agree, or NULL). 0, or -1 (err). */
static int open_step(const char *dir, const CkptFingerprint *want, char *step_dir, size_t step_dir_len,
                     ParsedState *ps, char *err, size_t errlen)
{
    char p[4400], name[256];
    if (step_dir_of(dir, step_dir, step_dir_len, name, sizeof name, err, errlen)) return -1;
    if (manifest_check(step_dir, NULL, err, errlen)) return -1;
    store_say(p, sizeof p, "%s/%s", step_dir, ckpt_files[CF_STATE]);
    char *text = store_read_regular(p, STATE_MAX_BYTES, err, errlen);
    if (!text) return -1;
    int rc = parse_state(p, step_dir, text, name_step(name), NULL, want, ps, err, errlen);
    free(text);
    return rc ? -1 : 0;
}

/* The weights only, no moments and no state applied: `llmc-train export` of a checkpoint (runtime/cli/export.c).
 * All of m->w is read (part NULL). */
int ckpt_load_weights(const char *dir, const CkptFingerprint *want, Model *m, int64_t *step, char *step_dir,
                      size_t step_dir_len, char *err, size_t errlen)
{
    char p[4300];
    ParsedState ps;
    if (open_step(dir, want, step_dir, step_dir_len, &ps, err, errlen)) return -1;
    int rc;
    StModel sm;
    store_say(p, sizeof p, "%s/model.safetensors", step_dir);
    if (st_open(&sm, p, err, errlen)) return -1;
    rc = store_read_model_tensors(&sm, m, m->w, "", NULL, NULL, err, errlen);
    st_close(&sm);
    if (rc) return -1;
    *step = ps.st.step;
    return 0;
}

int ckpt_plan_ref(const char *dir, CkptPlanRef *ref, int64_t *step, char *err, size_t errlen)
{
    char step_dir[4300];
    ParsedState ps;
    if (open_step(dir, NULL, step_dir, sizeof step_dir, &ps, err, errlen)) return -1;
    *step = ps.st.step;
    if (!ps.has_plan_ref) return 1;
    *ref = ps.plan_ref;
    return 0;
}

/* 1 resumed (warn may say from which and why not `latest`), 0 nothing to resume (or --fresh), -1 with err. */
int ckpt_resume(const char *ckpt_dir, const CkptFingerprint *fp, const CkptLimits *lim, int fresh, Model *m,
                AdamW *opt, TrainState *st, const ModelPart *part, char *warn, size_t warnlen, char *err,
                size_t errlen)
{
    if (warnlen) warn[0] = 0;
    int n;
    CkptEntry *v = scan_ckpts(ckpt_dir, &n);
    char lp[4200], latest[32] = "", lerr[1024] = "";
    store_say(lp, sizeof lp, "%s/%s", ckpt_dir, ckpt_files[CF_LATEST]);
    int have_latest = 0;
    struct stat lsb;
    /* absent and unreadable differ: with no step directory, an absent `latest` is a fresh start, an unreadable
     * one (a directory, no permission) an error */
    int no_latest = lstat(lp, &lsb) && errno == ENOENT;
    char *text = no_latest ? NULL : store_read_regular(lp, 256, lerr, sizeof lerr);
    if (text) {
        have_latest = 1;
        text[strcspn(text, "\n")] = 0;
        if (name_step(text) >= 0) store_say(latest, sizeof latest, "%s", text);
        else store_say(lerr, sizeof lerr, "%s: does not name a step-NNNNNNNN directory", lp);
        free(text);
    } else if (!no_latest) {
        have_latest = 1;   /* there, but unreadable: lerr says why */
    }
    /* --fresh: the old checkpoints stay on disk (rotation removes them as new ones are written); only a warning */
    if (fresh) {
        if (n || have_latest)
            store_say(warn, warnlen, "--fresh: starting at step 0; the %d checkpoint(s) in %s are not resumed "
                     "(rotation removes them oldest first as new ones are written)", n, ckpt_dir);
        free(v);
        return 0;
    }
    /* No latest but step directories (a full disk or a crash between the
     * step's rename and latest's write): the newest by write order that
     * verifies is adopted, with a warning; never a silent start at step 0. */
    if (!have_latest && !n) { free(v); return 0; }
    if (!have_latest) store_say(lerr, sizeof lerr, "%s is missing", lp);
    /* candidates: the one latest names, then the others newest first by write order */
    char first_why[1400] = "", first_name[4300] = "";
    int rc = -1, has_fp = 1, tried = 0;
    const char *used = NULL;
    /* FIRST_WHY/FIRST_NAME: why the first candidate failed, the message the user needs when none loads */
    if (latest[0]) {
        tried++;
        rc = try_load(ckpt_dir, latest, fp, lim, m, opt, st, part, &has_fp, first_why, sizeof first_why);
        store_say(first_name, sizeof first_name, "%s/%s (named by %s)", ckpt_dir, latest, lp);
        if (rc == 0) used = latest;
    } else {
        store_say(first_why, sizeof first_why, "%s", lerr);
        store_say(first_name, sizeof first_name, "%s", lp);
    }
    char why[1400];
    /* only a damaged checkpoint (-1) moves on to an older one; another plan's (-2) stops the search */
    for (int i = 0; rc == -1 && i < n; i++) {
        if (!strcmp(v[i].name, latest)) continue;
        tried++;
        rc = try_load(ckpt_dir, v[i].name, fp, lim, m, opt, st, part, &has_fp, why, sizeof why);
        if (rc == 0) used = v[i].name;
        /* the failure worth reporting: another plan's checkpoint, or (no `latest`) the newest one's */
        if (rc == -2 || (rc == -1 && !have_latest && tried == 1)) store_say(first_why, sizeof first_why, "%s", why);
    }
    if (rc == -2) {
        store_say(err, errlen, "%s", first_why);
    } else if (rc == -1 && !have_latest) {
        store_say(err, errlen, "%s holds %d checkpoint(s) (the newest by write order: %s) but no %s, and none of them "
                 "verifies (%s): refusing to start over at step 0; pass --fresh to train from scratch anyway",
                 ckpt_dir, n, v[0].name, lp, first_why);
    } else if (rc == -1) {
        if (latest[0])
            store_say(err, errlen, "checkpoint %s fails verification: %s%s", first_name, first_why,
                     tried > 1 ? "; no other checkpoint there verifies either" : "");
        else
            store_say(err, errlen, "%s%s", first_why, tried ? "; no checkpoint there verifies" : "");
    } else if (!have_latest) {
        store_say(warn, warnlen, "%s holds %d checkpoint(s) but no %s (a full disk or a crash before it was written): "
                 "adopting %s/%s, the newest checkpoint (by write order) that verifies", ckpt_dir, n, lp, ckpt_dir,
                 used ? used : "?");
    } else if (used != latest || !latest[0]) {
        store_say(warn, warnlen, "checkpoint %s fails verification: %s; resuming from %s/%s instead, the newest "
                 "checkpoint (by write order) that verifies", first_name, first_why, ckpt_dir, used ? used : "?");
    }
    if (rc == 0 && !has_fp) {
        size_t wl = strlen(warn);
        store_say(warn + wl, warnlen - wl, "%scheckpoint %s/%s records no fingerprint (written by an older llmc-train): "
                 "cannot check that this plan wrote it", wl ? "; " : "", ckpt_dir, used ? used : "?");
    }
    free(v);
    return rc == 0 ? 1 : -1;
}

/* ---- the run lock (checkpoint.h) ---- */

/* flock, not a lock file's existence: the kernel drops the lock when the process dies (a killed or preempted
 * job), so no stale lock is ever left for a requeued run to trip on. */
int run_lock_take(const char *dir, char *warn, size_t warn_cap, char *err, size_t err_cap)
{
    warn[0] = '\0';
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/.run.lock", dir) >= sizeof path) {
        snprintf(err, err_cap, "%s: path too long", dir);
        return -1;
    }
    if (mkdir_parents(dir)) { snprintf(err, err_cap, "%s: %s", dir, strerror(errno)); return -1; }
    /* O_NOFOLLOW: a link planted in place of the lock file is not written through */
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_cap, "%s: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    /* LOCK_NB: a second run is told at once, never queued behind the first */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            snprintf(warn, warn_cap, "%s: this file system does not lock (%s); two runs of this plan at once are "
                     "not kept apart", path, strerror(errno));
            return fd;
        }
        char holder[256], shown[300];
        lock_holder_read(fd, holder, sizeof holder);
        snprintf(err, err_cap, "%s: another run of this plan is using %s (%s); not starting a second one "
                 "(it would write the same checkpoints and metrics)", path, dir,
                 holder[0] ? log_escape(shown, sizeof shown, holder, strlen(holder))
                           : "its holder has not written who it is yet");
        close(fd);
        return -1;
    }
    /* who holds it, for the message a second run prints; the lock lasts while the returned fd is open */
    lock_holder_write(fd);
    return fd;
}
