/* model_cuda_step.c — the optimizer step on the GPU (AdamW over this rank's
 * shard or the trained spans, ZeRO-2/3's step, optimizer offload's streamed
 * step from host memory), and the training state's way to and from the host
 * (whole, gathered to rank 0, or each rank its shard).
 */
#include "model_cuda_internal.h"

/* Element i of a moment array (fp32 or bf16 bits). */
static void *mom_at(const CudaModel *m, void *mom, size_t i)
{
    return (char *)mom + i * state_bytes(m);
}

/* AdamW on n elements whose flat index starts at goff, with this model's moment
 * format (the bf16 moments' rounding keyed by the plan's seed and the step). */
static void adamw_state(CudaModel *m, float *master, uint16_t *lo, bf16_t *param, const float *grad, void *mo,
                        void *ve, size_t n, size_t goff, float lr, float b1, float b2, float eps, float wd, float bc1,
                        float bc2, float grad_mult, float clip)
{
    cudaStream_t st = m->stream;
    if (m->bf16_states)
        k_adamw_bf16(master, lo, param, grad, mo, ve, n, goff, m->decay_end, lr, b1, b2, eps, wd, bc1, bc2, m->sumsq,
                     grad_mult, clip, m->seed, (uint32_t)m->step, st);
    else
        k_adamw(master, lo, param, grad, mo, ve, n, goff, m->decay_end, lr, b1, b2, eps, wd, bc1, bc2, m->sumsq,
                grad_mult, clip, st);
}

/* AdamW with the master weights and moments in host memory: each tensor in
 * chunks, uploaded on off.up, updated on the compute stream, downloaded on
 * off.down, three staging sets in flight so both copy directions and the update
 * overlap. The uploads of this step wait for the previous step's downloads; this
 * step's downloads finish behind the next forward pass (offload_sync waits). */
static void offload_adamw(CudaModel *m, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                          float grad_mult, float clip)
{
    CudaOffload *o = &m->off;
    cudaStream_t st = m->stream, up = o->up, down = o->down;
    const size_t FB = sizeof(float);
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)o->ev_free[0], down));
    CUDA_CHECK(cudaStreamWaitEvent(up, (cudaEvent_t)o->ev_free[0], 0));
    size_t k = 0;
    for (int i = 0; i < m->n_params; i++) {
        const CudaParam *p = &m->params[i];
        for (size_t j = 0; j < p->numel; j += o->chunk, k++) {
            size_t n = p->numel - j < o->chunk ? p->numel - j : o->chunk, h = p->host_off + j, d = p->off + j;
            int b = (int)(k % CUDA_OFFLOAD_BUFS);
            float *sw = o->stage[b], *sm = sw + o->chunk, *sv = sm + o->chunk;
            cudaEvent_t in = o->ev_in[b], done = o->ev_done[b], fr = o->ev_free[b];
            if (k >= CUDA_OFFLOAD_BUFS) CUDA_CHECK(cudaStreamWaitEvent(up, fr, 0));
            CUDA_CHECK(cudaMemcpyAsync(sw, o->host_w + h, n * FB, cudaMemcpyHostToDevice, up));
            CUDA_CHECK(cudaMemcpyAsync(sm, o->host_m + h, n * FB, cudaMemcpyHostToDevice, up));
            CUDA_CHECK(cudaMemcpyAsync(sv, o->host_v + h, n * FB, cudaMemcpyHostToDevice, up));
            CUDA_CHECK(cudaEventRecord(in, up));
            CUDA_CHECK(cudaStreamWaitEvent(st, in, 0));
            k_adamw(sw, NULL, m->w + d, m->grad + d, sm, sv, n, d, m->decay_end, lr, b1, b2, eps, wd, bc1, bc2, m->sumsq,
                    grad_mult, clip, st);
            CUDA_CHECK(cudaEventRecord(done, st));
            CUDA_CHECK(cudaStreamWaitEvent(down, done, 0));
            CUDA_CHECK(cudaMemcpyAsync(o->host_w + h, sw, n * FB, cudaMemcpyDeviceToHost, down));
            CUDA_CHECK(cudaMemcpyAsync(o->host_m + h, sm, n * FB, cudaMemcpyDeviceToHost, down));
            CUDA_CHECK(cudaMemcpyAsync(o->host_v + h, sv, n * FB, cudaMemcpyDeviceToHost, down));
            CUDA_CHECK(cudaEventRecord(fr, down));
        }
    }
}

/* The host state is final (every download of the last step done). */
static void offload_sync(CudaModel *m)
{
    if (m->offload) CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->off.down));
}

void cuda_model_offload_adopt(CudaModel *m, int step)
{
    m->f8_stale = 1;
    CudaOffload *o = &m->off;
    cudaStream_t st = m->stream;
    offload_sync(m);
    for (int i = 0; i < m->n_params; i++) {
        const CudaParam *p = &m->params[i];
        for (size_t j = 0; j < p->numel; j += o->chunk) {
            size_t n = p->numel - j < o->chunk ? p->numel - j : o->chunk;
            CUDA_CHECK(cudaMemcpyAsync(o->stage[0], o->host_w + p->host_off + j, n * sizeof(float),
                                       cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->w + p->off + j, o->stage[0], n, st);
        }
    }
    m->step = step;
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
}

/* ZeRO-2/3's step: the shard's summed gradient is in gacc once the
 * communication stream is done. The norm: each fixed block's sum of squares
 * (blocks never straddle shards), zero elsewhere, summed over ranks (one term
 * per block is not zero, so the sum is exact) and then in block order: the same
 * bits on any number of ranks. AdamW on the shard; ZeRO-2 all-gathers the
 * updated bf16 weights, ZeRO-3 gathers them as the next pass needs them. */
static float zero_step(CudaModel *m, float grad_mult, float lr, float b1, float b2, float eps, float wd,
                       float clip)
{
    cudaStream_t st = m->stream;
    stream_after(m, st, comm_stream(m));
    PHASE(m, PH_GRAD_REDUCE);
    size_t nb = grad_norm_blocks(m->n_total);
    CUDA_CHECK(cudaMemsetAsync(m->norm_parts, 0, nb * sizeof(float), st));
    k_sumsq_blocks(m->norm_parts + m->shard_off / GRAD_NORM_BLOCK, m->gacc, m->shard_len, GRAD_NORM_BLOCK, st);
    if (m->par.world > 1) cuda_coll_allreduce_f32(m->par.comm, m->norm_parts, nb, st);
    CUDA_CHECK(cudaMemsetAsync(m->sumsq, 0, sizeof(float), st));
    k_sum_add(m->sumsq, m->norm_parts, (int)nb, st);
    PHASE(m, PH_GRAD_NORM);
    m->step++;
    float bc1 = 1.f - powf(b1, (float)m->step), bc2 = 1.f - powf(b2, (float)m->step);
    if (m->shard_len)
        adamw_state(m, m->master, NULL, m->zero == 3 ? m->wsh : m->w + m->shard_off, m->gacc, m->m, m->v,
                    m->shard_len, m->shard_off, lr, b1, b2, eps, wd, bc1, bc2, grad_mult, clip);
    if (m->zero == 2 && m->par.world > 1)
        cuda_coll_allgather_range(m->par.comm, m->w + m->shard_off, m->starts, 0, m->n_total, sizeof(bf16_t), m->w,
                                  st);
    gathers_forget(m);
    PHASE(m, PH_ADAMW);
    float ss = 0.f;
    CUDA_CHECK(cudaMemcpyAsync(&ss, m->sumsq, sizeof ss, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    return sqrtf(ss) * grad_mult;
}

float cuda_model_step(CudaModel *m, float grad_mult, float lr, float b1, float b2, float eps, float wd,
                      float clip)
{
    m->f8_stale = 1;
    cudaStream_t st = m->stream;
    CudaColl *comm = m->par.comm;
    CudaLora *ad = m->lora;
    if (m->zero) return zero_step(m, grad_mult, lr, b1, b2, eps, wd, clip);
    if (m->par.world > 1) {
        if (m->finetune != METHOD_FULL) {   /* replicated: every rank steps the summed gradients */
            if (ad) cuda_coll_allreduce_f32(comm, ad->grad, ad->n_total, st);
            else
                for (int i = 0; i < m->n_spans; i++)
                    cuda_coll_allreduce_f32(comm, m->grad + m->span[i].off, m->span[i].len, st);
        } else if (m->par.zero1) {
            /* ZeRO-1: each rank receives the summed gradient of its own shard. */
            cuda_coll_reduce_scatter_f32(comm, m->grad, m->grad + m->shard_off, m->shard_len, st);
        } else {
            cudaEvent_t e = (cudaEvent_t)m->layer_done[m->cfg.layers];
            CUDA_CHECK(cudaEventRecord(e, (cudaStream_t)m->par.comm_stream));
            CUDA_CHECK(cudaStreamWaitEvent(st, e, 0));
        }
    }
    PHASE(m, PH_GRAD_REDUCE);
    if (ad) {
        k_sumsq(m->sumsq, m->sumsq_scratch, ad->grad, ad->n_total, st);
    } else if (m->n_spans == 1) {
        k_sumsq(m->sumsq, m->sumsq_scratch, m->grad + m->span[0].off, m->span[0].len, st);
    } else {   /* one partial per span, summed in a fixed order */
        for (int i = 0; i < m->n_spans; i++)
            k_sumsq(m->sumsq + 1 + i, m->sumsq_scratch, m->grad + m->span[i].off, m->span[i].len, st);
        CUDA_CHECK(cudaMemsetAsync(m->sumsq, 0, sizeof(float), st));
        k_sum_add(m->sumsq, m->sumsq + 1, m->n_spans, st);
    }
    if (m->par.world > 1 && m->par.zero1)
        cuda_coll_allreduce_f32(comm, m->sumsq, 1, st);
    PHASE(m, PH_GRAD_NORM);
    m->step++;
    float bc1 = 1.f - powf(b1, (float)m->step), bc2 = 1.f - powf(b2, (float)m->step);
    if (ad)   /* every adapter is a matrix: all take weight decay */
        k_adamw(ad->master, NULL, ad->w, ad->grad, ad->m, ad->v, ad->n_total, 0, ad->n_total, lr, b1, b2, eps, wd, bc1,
                bc2, m->sumsq, grad_mult, clip, st);
    else if (m->offload)
        offload_adamw(m, lr, b1, b2, eps, wd, bc1, bc2, grad_mult, clip);
    else
        for (int i = 0; i < m->n_spans; i++) {
            size_t so = span_state_off(m, i), off = m->span[i].off;
            adamw_state(m, m->master ? m->master + so : NULL, m->master_lo ? m->master_lo + so : NULL, m->w + off,
                        m->grad + off, mom_at(m, m->m, so), mom_at(m, m->v, so), m->span[i].len, off, lr, b1, b2,
                        eps, wd, bc1, bc2, grad_mult, clip);
        }
    if (m->par.world > 1 && m->par.zero1)
        cuda_coll_allgather_bf16(comm, m->w + m->shard_off, m->w, m->shard_len, st);
    PHASE(m, PH_ADAMW);
    float ss = 0.f;
    CUDA_CHECK(cudaMemcpyAsync(&ss, m->sumsq, sizeof ss, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    return sqrtf(ss) * grad_mult;
}

/* ZeRO-2/3: the shard's master weights and moments straight from the host
 * arrays; the bf16 weights whole through the last unit's bucket (ZeRO-2), or
 * the shard's from its master weights (ZeRO-3: the same rounding). */
static void zero_set_flat(CudaModel *m, const float *w, const float *mom1, const float *mom2, int step)
{
    cudaStream_t st = (cudaStream_t)m->stream;
    size_t len = m->shard_len * sizeof(float), chunk = zl_unit_len(&m->units[m->cfg.layers]);
    if (m->shard_len) {
        /* Default: the state may be pinned host memory (off_shard) */
        CUDA_CHECK(cudaMemcpyAsync(m->master, w + m->shard_off, len, cudaMemcpyDefault, st));
        if (mom1 && mom2 && m->bf16_states) {   /* through gacc (free between steps), rounded to bf16 */
            CUDA_CHECK(cudaMemcpyAsync(m->gacc, mom1 + m->shard_off, len, cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->m, m->gacc, m->shard_len, st);
            CUDA_CHECK(cudaMemcpyAsync(m->gacc, mom2 + m->shard_off, len, cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->v, m->gacc, m->shard_len, st);
        } else if (mom1 && mom2) {
            CUDA_CHECK(cudaMemcpyAsync(m->m, mom1 + m->shard_off, len, cudaMemcpyDefault, st));
            CUDA_CHECK(cudaMemcpyAsync(m->v, mom2 + m->shard_off, len, cudaMemcpyDefault, st));
        }
        if (m->zero == 3) k_f32_to_bf16(m->wsh, m->master, m->shard_len, st);
    }
    if (m->zero == 2)
        for (size_t o = 0; o < m->n_total; o += chunk) {
            size_t n = m->n_total - o < chunk ? m->n_total - o : chunk;
            CUDA_CHECK(cudaMemcpyAsync(m->gtail, w + o, n * sizeof(float), cudaMemcpyHostToDevice, st));
            k_f32_to_bf16(m->w + o, m->gtail, n, st);
        }
    if (mom1 && mom2) m->step = step;
    gathers_forget(m);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
}

/* ZeRO-2/3: a shard array (master weights or a moment) whole into host (may be
 * NULL: this rank only takes part), a last-unit bucket at a time. Collective.
 * A shard in host memory (offload) is put in its place in the bucket first and
 * gathered in place: collectives take device memory. */
static void zero_get_host(CudaModel *m, const float *shard, float *host)
{
    cudaStream_t st = (cudaStream_t)m->stream;
    size_t chunk = zl_unit_len(&m->units[m->cfg.layers]);
    for (size_t o = 0; o < m->n_total; o += chunk) {
        size_t n = m->n_total - o < chunk ? m->n_total - o : chunk, a, b;
        zl_owned(m->starts, m->par.rank, o, n, &a, &b);
        if (m->off_shard && a < b)
            CUDA_CHECK(cudaMemcpyAsync(m->gtail + (a - o), shard + (a - m->shard_off), (b - a) * sizeof(float),
                                       cudaMemcpyDefault, st));
        zero_allgather(m, m->off_shard ? NULL : shard, sizeof(float), o, n, m->gtail, st);
        if (host) CUDA_CHECK(cudaMemcpyAsync(host + o, m->gtail, n * sizeof(float), cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
}

void cuda_model_set_flat(CudaModel *m, const float *w, const float *mom1, const float *mom2, int step)
{
    m->f8_stale = 1;
    if (m->offload) { log_error("set_flat under offload"); abort(); }
    if (m->zero) { zero_set_flat(m, w, mom1, mom2, step); return; }
    size_t bytes = m->n_total * sizeof(float);
    if (!m->grad) {   /* LoRA: bf16 weights only, converted through a small bounce buffer */
        size_t chunk = (size_t)16 << 20;
        float *tmp;
        CUDA_CHECK(cudaMalloc((void **)&tmp, chunk * sizeof(float)));
        for (size_t o = 0; o < m->n_total; o += chunk) {
            size_t n = m->n_total - o < chunk ? m->n_total - o : chunk;
            CUDA_CHECK(cudaMemcpyAsync(tmp, w + o, n * sizeof(float), cudaMemcpyHostToDevice, (cudaStream_t)m->stream));
            k_f32_to_bf16(m->w + o, tmp, n, (cudaStream_t)m->stream);
            CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
        }
        CUDA_CHECK(cudaFree(tmp));
        if (mom1 && mom2) m->step = step;
        return;
    }
    /* Every copy on the model's stream: a plain cudaMemcpy from pageable memory may
     * return before its DMA lands, and the non-blocking stream would not wait. */
    cudaStream_t st = (cudaStream_t)m->stream;
    float *tmp = m->grad;   /* scratch between steps */
    CUDA_CHECK(cudaMemcpyAsync(tmp, w, bytes, cudaMemcpyHostToDevice, st));
    adopt_weights(m, tmp);
    if (mom1 && mom2) {   /* bf16 moments: through the gradient buffer, rounded to bf16 */
        const float *src[2] = {mom1, mom2};
        void *dst[2] = {m->m, m->v};
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < m->n_spans; i++) {
                size_t so = span_state_off(m, i), off = m->span[i].off, len = m->span[i].len * sizeof(float);
                void *to = m->bf16_states ? (void *)(m->grad + so) : mom_at(m, dst[k], so);
                CUDA_CHECK(cudaMemcpyAsync(to, src[k] + off, len, cudaMemcpyHostToDevice, st));
            }
            if (m->bf16_states) k_f32_to_bf16(dst[k], m->grad, m->n_state, st);
        }
        m->step = step;
    }
    CUDA_CHECK(cudaMemsetAsync(m->grad, 0, bytes, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

/* One fp32 shard array -> a full host array (all-gather through the gradient buffer). */
static void gather_to_host(CudaModel *m, const float *shard, float *host)
{
    cudaStream_t st = m->stream;
    if (m->par.world > 1 && m->par.zero1) {
        cuda_coll_allgather_f32(m->par.comm, shard, m->grad, m->shard_len, st);
        CUDA_CHECK(cudaStreamSynchronize(st));
        if (host) CUDA_CHECK(cudaMemcpy(host, m->grad, m->n_total * sizeof(float), cudaMemcpyDeviceToHost));
    } else if (host) {
        CUDA_CHECK(cudaStreamSynchronize(st));
        CUDA_CHECK(cudaMemcpy(host, shard, m->n_total * sizeof(float), cudaMemcpyDeviceToHost));
    }
}

/* The spans of a fine-tuning run's state into full flat host arrays (the
 * rest of host is left as it is). */
static void spans_to_host(CudaModel *m, const float *state, float *host)
{
    if (!host) return;
    for (int i = 0; i < m->n_spans; i++)
        CUDA_CHECK(cudaMemcpy(host + m->span[i].off, state + span_state_off(m, i), m->span[i].len * sizeof(float),
                              cudaMemcpyDeviceToHost));
}

/* The fp32 master weights of what trains, in the state layout (the spans back to
 * back): m->master, or the split pairs joined into the gradient buffer (scratch
 * between steps), at the shard's own offset so that a ZeRO-1 all-gather from it
 * is in place. Enqueued on the model's stream. */
static const float *master_f32(CudaModel *m)
{
    if (!m->master_lo) return m->master;
    float *out = m->grad + m->shard_off;
    for (int i = 0; i < m->n_spans; i++) {
        size_t so = span_state_off(m, i);
        k_master_join(out + so, m->w + m->span[i].off, m->master_lo + so, m->span[i].len, (cudaStream_t)m->stream);
    }
    return out;
}

/* A moment array as fp32 in the state layout (n elements): itself, or the bf16
 * moments widened into scratch; ready for a plain cudaMemcpy when it returns. */
static const float *mom_f32(CudaModel *m, void *mom, size_t n, float *scratch)
{
    if (!m->bf16_states) return mom;
    k_bf16_to_f32(scratch, mom, n, (cudaStream_t)m->stream);
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
    return scratch;
}

void cuda_model_get_flat(CudaModel *m, float *w, float *mom1, float *mom2)
{
    if (m->offload) { offload_sync(m); return; }   /* the host state is the state */
    if (m->zero) {
        void *arr[3] = {m->master, m->m, m->v};
        float *host[3] = {w, mom1, mom2};
        for (int k = 0; k < 3; k++) {
            zero_get_host(m, k ? mom_f32(m, arr[k], m->shard_len, m->gacc) : arr[k], host[k]);
        }
        return;
    }
    if (m->finetune != METHOD_FULL) {   /* one rank; LoRA: the base never changes (no span) */
        const float *master = master_f32(m);
        CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
        spans_to_host(m, master, w);
        if (mom1) spans_to_host(m, mom_f32(m, m->m, m->n_state, m->grad), mom1);
        if (mom2) spans_to_host(m, mom_f32(m, m->v, m->n_state, m->grad), mom2);
        if ((m->master_lo || m->bf16_states) && m->grad)   /* the scratch back to the zeros a step starts from */
            CUDA_CHECK(cudaMemsetAsync(m->grad, 0, m->n_total * sizeof(float), (cudaStream_t)m->stream));
        CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
        return;
    }
    gather_to_host(m, master_f32(m), w);
    gather_to_host(m, mom_f32(m, m->m, m->n_state, m->grad + m->shard_off), mom1);
    gather_to_host(m, mom_f32(m, m->v, m->n_state, m->grad + m->shard_off), mom2);
    CUDA_CHECK(cudaMemsetAsync(m->grad, 0, m->n_total * sizeof(float), (cudaStream_t)m->stream));
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
}

void cuda_model_get_shard(CudaModel *m, float *w, float *mom1, float *mom2)
{
    if (!m->zero || !m->shard_len) return;
    cudaStream_t st = (cudaStream_t)m->stream;
    void *arr[3] = {m->master, m->m, m->v};
    float *host[3] = {w, mom1, mom2};
    for (int k = 0; k < 3; k++) {   /* one at a time: gacc holds one moment in fp32 */
        const float *src = k ? mom_f32(m, arr[k], m->shard_len, m->gacc) : arr[k];
        CUDA_CHECK(cudaMemcpyAsync(host[k] + m->shard_off, src, m->shard_len * sizeof(float), cudaMemcpyDefault, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
}

float *cuda_model_host_shard(CudaModel *m, int k)
{
    if (!m->off_shard) return NULL;
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->stream));
    return k == 0 ? m->master : k == 1 ? (float *)m->m : (float *)m->v;
}

void cuda_model_host_shard_adopt(CudaModel *m, int step, int moments)
{
    cudaStream_t st = (cudaStream_t)m->stream;
    m->f8_stale = 1;
    if (m->zero != 3) { log_error("internal error: host_shard_adopt is for ZeRO-3"); abort(); }
    if (m->shard_len) k_f32_to_bf16(m->wsh, m->master, m->shard_len, st);   /* read over the host link */
    if (moments) m->step = step;
    gathers_forget(m);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
}

size_t cuda_device_used(void)
{
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return tot - fr;
}

double cuda_model_flops_per_token(const CudaModel *m, int T)
{
    const ModelConfig *c = &m->cfg;
    double C = c->hidden, HD = (double)c->heads * c->head_dim, KVD = (double)c->kv_heads * c->head_dim;
    double per_layer = C * (HD + 2 * KVD) + HD * C + 3.0 * C * c->ffn, head = (double)c->vocab * C;
    double n_mm = c->layers * per_layer + head, attn = 2.0 * HD * T;   /* attn: one layer's QK^T + PV per token */
    if (m->finetune == METHOD_FULL) return 6.0 * n_mm + 6.0 * c->layers * attn;
    /* forward everywhere; the backward's input gradients from the top down to
     * train_lo (LoRA: 0), weight gradients only for what trains */
    int below = m->finetune == METHOD_FREEZE ? m->train_lo : 0;
    double f = 2.0 * n_mm + 2.0 * head + 2.0 * c->layers * attn;
    f += (c->layers - below) * (2.0 * per_layer + 4.0 * attn);
    f += (m->train_hi - m->train_lo) * 2.0 * per_layer;
    if (m->lora) {   /* each adapter: forward, input gradient and weight gradient */
        double n_ad = 0;
        for (int i = 0; i < m->lora->n_params; i++) n_ad += (double)m->lora->params[i].numel;
        f += 6.0 * n_ad;
    }
    return f;
}
