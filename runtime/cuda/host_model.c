/* host_model.c — runtime/model/model.h parameters <-> the GPU model's flat layout, by HF name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "host_model.h"

/* Matched by HF name, not by position: the two layouts order and pad their
 * tensors differently (the GPU's starts each tensor at a multiple of 64
 * elements, ALIGN_ELEMS in model_cuda.c, for its vectorised kernels).
 * n_params is a few hundred, so the quadratic search costs nothing next to
 * the copy it prepares. A size mismatch is the two model descriptions
 * disagreeing, reported rather than copied past. */
int cuda_host_map(const Model *hm, const CudaModel *cm, size_t *cuda_off, char *err, size_t errlen)
{
    for (int i = 0; i < hm->n_params; i++) {
        const CudaParam *hit = NULL;
        for (int j = 0; j < cm->n_params && !hit; j++)
            if (!strcmp(hm->params[i].name, cm->params[j].name)) hit = &cm->params[j];
        if (!hit || hit->numel != hm->params[i].numel) {
            snprintf(err, errlen, "parameter %s has no counterpart of that size in the CUDA model",
                     hm->params[i].name);
            return -1;
        }
        cuda_off[i] = hit->off;
    }
    return 0;
}

void cuda_host_to_flat(const Model *hm, const size_t *cuda_off, const float *src, float *flat, size_t n_total)
{
    /* the padding between tensors (and after the last, up to a multiple of
     * 64 x world) must be zero: it enters the gradient norm and the sharded
     * optimizer as if it were parameters */
    memset(flat, 0, n_total * sizeof *flat);
    for (int i = 0; i < hm->n_params; i++)
        memcpy(flat + cuda_off[i], src + hm->params[i].offset, hm->params[i].numel * sizeof *flat);
}

/* The inverse: only real parameters are copied back, the padding is dropped. */
void cuda_flat_to_host(const Model *hm, const size_t *cuda_off, const float *flat, float *dst)
{
    for (int i = 0; i < hm->n_params; i++)
        memcpy(dst + hm->params[i].offset, flat + cuda_off[i], hm->params[i].numel * sizeof *dst);
}

/* The intersection of parameter i (flat [cuda_off[i], + numel)) with [lo, hi),
 * as offsets into the parameter: 0 when empty. */
static int param_window(const Model *hm, const size_t *cuda_off, int i, size_t lo, size_t hi, size_t *a, size_t *b)
{
    size_t s = cuda_off[i], e = s + hm->params[i].numel;
    *a = (lo > s ? lo : s) - s;
    *b = (hi < e ? hi : e) - s;
    return lo < e && hi > s && *a < *b;
}

void cuda_host_to_flat_range(const Model *hm, const size_t *cuda_off, const float *src, float *win, size_t lo,
                             size_t hi)
{
    if (lo < hi) memset(win, 0, (hi - lo) * sizeof *win);
    for (int i = 0; i < hm->n_params; i++) {
        size_t a, b;
        if (param_window(hm, cuda_off, i, lo, hi, &a, &b))
            memcpy(win + (cuda_off[i] + a - lo), src + hm->params[i].offset + a, (b - a) * sizeof *win);
    }
}

void cuda_flat_to_host_range(const Model *hm, const size_t *cuda_off, const float *win, float *dst, size_t lo,
                             size_t hi)
{
    for (int i = 0; i < hm->n_params; i++) {
        size_t a, b;
        if (param_window(hm, cuda_off, i, lo, hi, &a, &b))
            memcpy(dst + hm->params[i].offset + a, win + (cuda_off[i] + a - lo), (b - a) * sizeof *dst);
    }
}

int cuda_flat_range_to_host_part(const Model *hm, const size_t *cuda_off, size_t lo, size_t hi, size_t (*r)[2])
{
    int n = 0;
    for (int i = 0; i < hm->n_params; i++) {
        size_t a, b;
        if (!param_window(hm, cuda_off, i, lo, hi, &a, &b)) continue;
        r[n][0] = hm->params[i].offset + a;
        r[n][1] = hm->params[i].offset + b;
        n++;
    }
    return n;
}

int cuda_model_load_hf(CudaModel *cm, const ModelConfig *mc, const char *path, char *err, size_t errlen)
{
    /* through a host fp32 copy in runtime/model/model.h's layout: the CPU runtime's
     * loader converts BF16/F16 and checks every tensor's name and shape */
    Model hm = {0};
    size_t *off = NULL;
    float *flat = NULL;
    int rc = -1;
    if (model_init(&hm, mc)) { snprintf(err, errlen, "cannot allocate the host copy of the model"); goto out; }
    if (load_hf_weights(path, &hm, err, errlen)) goto out;
    off = malloc((size_t)hm.n_params * sizeof *off);
    flat = malloc(cm->n_total * sizeof *flat);
    if (!off || !flat) { snprintf(err, errlen, "out of memory"); goto out; }
    if (cuda_host_map(&hm, cm, off, err, errlen)) goto out;
    cuda_host_to_flat(&hm, off, hm.w, flat, cm->n_total);
    cuda_model_set_flat(cm, flat, NULL, NULL, 0);   /* weights only: no moments, step 0 */
    rc = 0;
out:
    free(flat);
    free(off);
    model_free(&hm);
    return rc;
}
