/* model_tensors.c — a model's parameters as safetensors tensors: written
 * whole, read whole or by part (a rank's ranges), filled in place by part. */
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
#include "log.h"
#include "sha256.h"
#include "store_internal.h"

/* ---- tensors of a model ---- */

/* One StWriteTensor per parameter of M, in M's order, its data pointing into BUF (the weights, or a moment
 * buffer of the same flat layout) and its name PREFIX + the parameter's name ("exp_avg." for the optimizer's
 * first moment). Nothing is copied but the names, which *names_out holds until store_free_tensors. NULL when out
 * of memory. */
StWriteTensor *store_model_tensors(const Model *m, const float *buf, const char *prefix, char ***names_out, int *n_out)
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

/* What store_model_tensors returned: the names and the array, never the data (it is the caller's buffer). */
void store_free_tensors(StWriteTensor *t, char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(t);
}

/* model.safetensors at path; its sha256 (hashed while written) into hex. */
int store_write_model_file(const char *path, const Model *m, const float *buf, const char *prefix, StDtype dt,
                           char hex[65], char *err, size_t errlen)
{
    char **names;
    int n;
    StWriteTensor *t = store_model_tensors(m, buf, prefix, &names, &n);
    if (!t) { snprintf(err, errlen, "out of memory"); return -1; }
    /* "format": "pt" in the metadata: transformers refuses a safetensors file whose metadata names no format it
     * knows, so these files load there as they are */
    int rc = st_write_sha256(path, t, n, dt, "\"format\":\"pt\"", hex, err, errlen);
    store_free_tensors(t, names, n);
    return rc;
}

/* Tensor t's elements that part asks for (all when part is NULL or n < 0),
 * read to buf + off (off: the tensor's first float in the flat buffer). */
static int read_tensor_part(const StModel *st, const StTensor *t, float *buf, size_t off, const ModelPart *part,
                            size_t *n_read, char *err, size_t errlen)
{
    if (!part || part->n < 0) {
        *n_read += t->numel;
        return st_read_f32(st, t, buf + off, err, errlen);
    }
    for (int k = 0; k < part->n; k++) {
        /* the part's ranges are flat offsets over the whole model: clipped to this tensor's [off, off + numel) */
        size_t lo = part->r[k][0] > off ? part->r[k][0] : off;
        size_t hi = part->r[k][1] < off + t->numel ? part->r[k][1] : off + t->numel;
        if (lo >= hi) continue;
        if (st_read_f32_range(st, t, lo - off, hi - lo, buf + lo, err, errlen)) return -1;
        *n_read += hi - lo;
    }
    return 0;
}

/* Read every tensor of m (name = prefix + param name) from st into buf; only
 * part of it when part is set (every name and shape is checked all the same). */
int store_read_model_tensors(const StModel *st, const Model *m, float *buf, const char *prefix,
                             const ModelPart *part, size_t *n_read, char *err, size_t errlen)
{
    size_t unused = 0;
    if (!n_read) n_read = &unused;
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
        if (read_tensor_part(st, t, buf, p->offset, part, n_read, err, errlen)) return -1;
    }
    return 0;
}

int load_hf_weights_part(const char *path, Model *m, const ModelPart *part, size_t *n_read, char *err,
                         size_t errlen)
{
    StModel st;
    if (n_read) *n_read = 0;
    if (st_open(&st, path, err, errlen)) return -1;
    int rc = store_read_model_tensors(&st, m, m->w, "", part, n_read, err, errlen);
    st_close(&st);
    return rc;
}

int load_hf_weights(const char *path, Model *m, char *err, size_t errlen)
{
    return load_hf_weights_part(path, m, NULL, NULL, err, errlen);
}

/* The elements of part (flat offsets into buf's layout) that fall in tensor
 * NAME = prefix + the param name, written in place through fd; every tensor is
 * checked against the model first. */
static int fill_part(const StModel *sm, int fd, const Model *m, const char *prefix, const float *buf,
                     const ModelPart *part, char *err, size_t errlen)
{
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *pi = &m->params[i];
        char name[160];
        snprintf(name, sizeof name, "%s%s", prefix, pi->name);
        const StTensor *t = st_find(sm, name);
        /* st_create laid this file out from the same model: a missing or resized tensor means another file */
        if (!t || t->numel != pi->numel) { snprintf(err, errlen, "%s: tensor %s is missing", sm->files[0], name); return -1; }
        for (int k = 0; k < part->n; k++) {
            /* clipped to this tensor, as read_tensor_part clips */
            size_t lo = part->r[k][0] > pi->offset ? part->r[k][0] : pi->offset;
            size_t hi = part->r[k][1] < pi->offset + pi->numel ? part->r[k][1] : pi->offset + pi->numel;
            if (lo < hi && st_fill(sm, fd, t, lo - pi->offset, hi - lo, buf + lo, err, errlen)) return -1;
        }
    }
    return 0;
}

/* This rank's part of n buffers (tensor names prefix[k] + param name) into
 * the file at path that st_create laid out: opened once, synced once. */
int store_fill_file(const char *path, const Model *m, int n, const char *const *prefix, const float *const *buf,
                    const ModelPart *part, char *err, size_t errlen)
{
    StModel sm;
    if (st_open(&sm, path, err, errlen)) return -1;
    /* no O_TRUNC: the other ranks' pieces already in the file stay */
    int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); rc = -1; }
    for (int k = 0; k < n && !rc; k++) rc = fill_part(&sm, fd, m, prefix[k], buf[k], part, err, errlen);
    /* '|', not '||': the close runs even when the fsync failed */
    if (fd >= 0 && ((fsync(fd) && !rc) | (close(fd) && !rc))) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    st_close(&sm);
    return rc ? -1 : 0;
}
