/* estimate_time.c — time to train (docs/estimator.md, "Data and time",
 * "Communication", "Offload time", "Site profiles"): FLOPs per token, the site
 * profile's MFU and fabric, the collectives of a step and what of them hides
 * under compute, DeepSpeed's and llmc's offload, and the steps and tokens in all.
 */
#include <stdlib.h>
#include "estimate_internal.h"

/* ---- FLOPs ------------------------------------------------------------------ */

double estimate_flops_per_token(double matmul_params, double trainable_share, double attn_fwd,
                                Recompute rc, AttentionKind attn)
{
    double share = trainable_share >= 0 && trainable_share <= 1 ? trainable_share : 1;
    double n = matmul_params;
    /* forward 2N; backward: input gradients 2N, weight gradients 2N x share */
    double fpt = 2 * n + 2 * n + 2 * n * share + 3.0 * attn_fwd;
    if (rc == RECOMPUTE_FULL) fpt += 2.0 * n + attn_fwd;
    else if (rc == RECOMPUTE_SELECTIVE && attn == ATTN_EAGER) fpt += attn_fwd;
    return fpt;
}

/* ---- the site profile (docs/estimator.md, "Site profiles") ---------------- */

double estimate_job_mfu(const PlanJob *job, double dflt, Estimate *e)
{
    if (e) e->profile_mfu = false;
    if (job->run && job->run->mfu > 0) return job->run->mfu;
    if (job->profile && job->profile->mfu > 0) {
        if (e) e->profile_mfu = true;
        return job->profile->mfu;
    }
    return dflt;
}

double estimate_default_mfu(const PlanJob *job, const EstimateDefault **mfu_row,
                            const EstimateDefault **method_row)
{
    const PlanTrain *t = job->run;
    bool cpu = is_cpu_only(job->cluster);
    const char *gpu = cpu ? NULL : job->cluster->gpu->name;
    const EstimateDefault *r = cpu ? NULL : estimate_default(DEF_MFU, (int)t->backend, gpu, (int)t->method);
    const EstimateDefault *f = estimate_default(DEF_METHOD_FACTOR, (int)t->backend, gpu, (int)t->method);
    if (mfu_row) *mfu_row = r;
    if (method_row) *method_row = f && f->value != 1.0 ? f : NULL;
    double mfu = r ? r->value : cpu ? CPU_DEFAULT_MFU : job->cluster->gpu->default_mfu;
    return mfu * (f ? f->value : 1.0);
}

void estimate_profile_fabric(const PlanJob *job, Fabric *f, Estimate *e)
{
    const PlanProfile *p = job->profile;
    f->intra_eff_bytes_per_s = p && p->intra_bytes_per_s > 0 ? p->intra_bytes_per_s : 0;
    f->inter_eff_bytes_per_s = p && p->inter_bytes_per_s > 0 ? p->inter_bytes_per_s : 0;
    if (e) {
        e->profile_intra = f->intra_eff_bytes_per_s > 0;
        e->profile_inter = f->inter_eff_bytes_per_s > 0;
    }
}

/* ---- communication ------------------------------------------------------- */

void estimate_collective(const Fabric *f, CollKind k, double bytes, double *sent, double *intra_s,
                         double *inter_s, double *latency_s)
{
    int nodes = f->nodes > 0 ? f->nodes : 1, g = f->gpus_per_node > 0 ? f->gpus_per_node : 1;
    double d = (double)nodes * g;
    double passes = k == COLL_ALL_REDUCE ? 2 : 1;   /* reduce-scatter + all-gather */
    double out = d > 1 ? passes * (d - 1) / d * bytes : 0;
    /* A ring over every rank; with G rings (one per GPU of a node) each node
     * sends the same bytes as one rank over its NICs together, and each GPU
     * sends them over its own link (one direction: half NVIDIA's figure). */
    double link = f->intra_eff_bytes_per_s > 0 ? f->intra_eff_bytes_per_s : f->link_bytes_per_s / 2 * LINK_EFFICIENCY;
    double net = f->inter_eff_bytes_per_s > 0 ? f->inter_eff_bytes_per_s
                                              : f->nics * f->nic_bits_per_s / 8 * NET_EFFICIENCY;
    *sent = out;
    *intra_s = g > 1 && link > 0 ? out / link : 0;
    *inter_s = nodes > 1 && net > 0 ? out / net : 0;
    /* Latency: a chunk goes once (twice for all-reduce) round the ring of D
     * hops, of which one per node crosses the network. */
    double hop_net = f->roce ? HOP_LATENCY_ROCE_S : HOP_LATENCY_IB_S;
    double ring = nodes > 1 ? (d - nodes) * HOP_LATENCY_LINK_S + nodes * hop_net : (d - 1) * HOP_LATENCY_LINK_S;
    *latency_s = d > 1 ? passes * ring : 0;
}

void estimate_comm_volume(const PlanModel *m, const TrainStates *ts, ShardStage shard, bool llmc_trainer,
                          Precision prec, Recompute rc, int grad_accum, int dp, CommVolume *v)
{
    memset(v, 0, sizeof *v);
    if (dp <= 1) return;
    double ga = grad_accum > 0 ? grad_accum : 1;
    double vb = value_bytes(prec);
    double tr = ts->trainable_params > 0 ? ts->trainable_params : 0;
    double all = tr + (ts->frozen_params > 0 ? ts->frozen_params : 0);
    double layers = m->layers > 0 ? m->layers : 0;
    if (llmc_trainer) {
        /* runtime/cuda/model_cuda.c: fp32 gradients. Without ZeRO-1, one
         * all-reduce per layer (and one for the embedding and the rest) on the
         * last micro-step, on the communication stream during backward; with
         * ZeRO-1 one reduce-scatter before and one bf16 all-gather after AdamW
         * (+ the 4-byte norm all-reduce). */
        if (shard >= SHARD_ZERO2 && ts->trainable_params > 0 && ts->frozen_params <= 0) {
            /* ZeRO-2/3 (model_cuda_step.c zero_step, model_cuda_pass.c cuda_model_micro): each
             * micro-step's gradients reduced unit by unit (layers + 1 units)
             * onto the owners' shards as backward finishes them; ZeRO-2 then
             * gathers the updated bf16 weights once, ZeRO-3 gathers each unit's
             * bf16 weights before its forward and again before its backward
             * (recompute works on the weights the backward gathered). */
            double units = layers + 1;
            v->reduce_scatter_bytes = 4 * tr * ga;
            v->allgather_bytes = shard == SHARD_ZERO3 ? 2 * 2 * all * ga : 2 * tr;
            v->allreduce_bytes = 4;
            v->collectives = units * ga + (shard == SHARD_ZERO3 ? 2 * units * ga : 1) + 1;
        } else if (shard >= SHARD_ZERO1) {
            v->reduce_scatter_bytes = 4 * tr;
            v->allgather_bytes = 2 * tr;
            v->allreduce_bytes = 4;
            v->collectives = 3;
        } else {
            v->allreduce_bytes = 4 * tr;
            v->collectives = layers + 1;
        }
        return;
    }
    /* DeepSpeed as emitted (emit_llamafactory.c): 16-bit communication,
     * overlap_comm false, reduce_scatter true, buckets of 5e8 elements (stages
     * 0-2); stage 3 "auto": reduce bucket hidden^2 elements. */
    double bucket = 5e8;
    if (shard == SHARD_NONE) {
        v->allreduce_bytes = vb * tr;
        v->collectives = ceil(tr / bucket);
    } else if (shard == SHARD_ZERO1) {
        v->reduce_scatter_bytes = vb * tr;          /* at the accumulation boundary */
        v->allgather_bytes = vb * tr;               /* updated weights after the step */
        v->collectives = 2 * ceil(tr / bucket);
    } else if (shard == SHARD_ZERO2) {
        v->reduce_scatter_per_micro = vb * tr;      /* gradients partitioned: every micro-step */
        v->reduce_scatter_bytes = ga * vb * tr;
        v->allgather_bytes = vb * tr;
        v->collectives = ga * ceil(tr / bucket) + ceil(tr / bucket);
    } else {
        /* Every micro-step: gather every weight in forward, again in backward
         * and, with recompute, once more for the recomputed forward (released
         * after each use), reduce-scatter every gradient. */
        double h = m->hidden > 0 ? m->hidden : 1;
        double modules = layers * ZERO3_MODULES_PER_LAYER + (m->tie_embeddings ? 1 : 2);
        double passes = zero3_gather_passes(rc);
        v->allgather_per_micro = passes * vb * all;
        v->reduce_scatter_per_micro = vb * tr;
        v->allgather_bytes = ga * v->allgather_per_micro;
        v->reduce_scatter_bytes = ga * v->reduce_scatter_per_micro;
        v->collectives = ga * (passes * modules + ceil(tr / (h * h)));
    }
}

void estimate_offload_volume(const TrainStates *ts, ShardStage shard, Precision prec, Recompute rc, int grad_accum,
                             int dp, double *d2h, double *h2d_step, double *h2d_fetch)
{
    *d2h = *h2d_step = *h2d_fetch = 0;
    if (!ts->offload_optimizer || shard < SHARD_ZERO1) return;
    double ga = grad_accum > 0 ? grad_accum : 1, n = dp > 0 ? dp : 1;
    double vb = value_bytes(prec);
    double tr = ts->trainable_params > 0 ? ts->trainable_params : 0;
    double all = tr + (ts->frozen_params > 0 ? ts->frozen_params : 0);
    *d2h = ga * vb * tr / n;
    bool params = ts->offload_params && shard >= SHARD_ZERO3;
    if (params) *h2d_fetch = ga * zero3_gather_passes(rc) * vb * all / n;   /* before each gather */
    else *h2d_step = vb * tr / n;
}

double estimate_cpu_adam_rate(int threads, int ranks_per_node)
{
    double t = threads > 0 ? threads : 1, r = ranks_per_node > 0 ? ranks_per_node : 1;
    return fmin(t * CPU_ADAM_THREAD_PARAMS_S, CPU_ADAM_NODE_PARAMS_S / r);
}

static double matmul_params(const PlanModel *m, const Estimate *e)
{
    /* The input embedding is a lookup, not a matmul; a tied matrix still
     * multiplies as the lm_head. */
    double n = (double)e->params_total;
    if (!m->tie_embeddings) n -= (double)m->vocab * m->hidden;
    /* mixtral: a token runs through experts_per_token of the experts */
    if (m->experts > 0 && m->experts_per_token > 0 && m->layers > 0)
        n -= (double)m->layers * (m->experts - m->experts_per_token) * 3.0 * m->hidden * m->ffn;
    return n;
}

/* Time of `count` collectives moving `bytes` of tensor in all; adds the terms
 * to the estimate's sums and returns max(intra, inter) + latency. */
static double coll_time(const Fabric *f, CollKind k, double bytes, double count, double launch, Estimate *e)
{
    if (bytes <= 0 || count <= 0) return 0;
    double sent, intra, inter, lat;
    estimate_collective(f, k, bytes, &sent, &intra, &inter, &lat);
    double latency = count * (lat + launch);
    e->comm_sent_bytes += sent;
    e->comm_intra_seconds += intra;
    e->comm_inter_seconds += inter;
    e->comm_latency_seconds += latency;
    return fmax(intra, inter) + latency;
}

/* DeepSpeed's hierarchical partitioning (ZeRO++ hpZ, zero_hpz_partition_size)
 * for the estimate in progress: 0 off, else the GPUs of the secondary group.
 * Only the remedy estimate (estimate_job_hpz) sets it; the emitter writes no
 * such key yet. */
int estimate_hpz_group;

/* The collectives of one optimizer step and what of them hides under compute
 * (docs/estimator.md, "Communication"). fwd_share: the first forward's share
 * of a micro-step's FLOPs. */
static void estimate_step_comm(const PlanJob *job, Estimate *e, const TrainStates *ts, double fwd_share,
                               double *gather_pass_s)
{
    *gather_pass_s = 0;
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    int nodes = job->nodes > 0 ? job->nodes : 1;
    Fabric f = {nodes, c->gpus_per_node, c->link_bytes_per_s, c->nics, c->nic_bits_per_s, c->network_roce, 0, 0};
    estimate_profile_fabric(job, &f, e);
    e->fabric_known = !e->cpu_only && (c->gpus_per_node <= 1 || f.link_bytes_per_s > 0 || f.intra_eff_bytes_per_s > 0) &&
                      (nodes <= 1 || (f.nics > 0 && f.nic_bits_per_s > 0) || f.inter_eff_bytes_per_s > 0);
    if (e->cpu_only || e->data_parallel <= 1 || !e->fabric_known) return;
    bool llmc = t->backend == BACKEND_LLMC;
    ShardStage shard = t->shard;
    int ga = t->grad_accum > 0 ? t->grad_accum : 1;
    CommVolume v;
    estimate_comm_volume(t->model, ts, shard, llmc, t->precision, t->recompute, ga, e->data_parallel, &v);
    e->comm_allgather_bytes = v.allgather_bytes;
    e->comm_reduce_scatter_bytes = v.reduce_scatter_bytes;
    e->comm_allreduce_bytes = v.allreduce_bytes;
    e->comm_collectives = v.collectives;

    double micro = e->compute_seconds / ga;
    double fwd = micro * fwd_share, bwd = micro - fwd;
    double layers = t->model->layers > 0 ? t->model->layers : 0;
    double total = 0, exposed = 0;
    if (llmc) {
        if (shard >= SHARD_ZERO2) {
            /* ZeRO-2/3 (model_cuda_pass.c): each unit's gradients reduced on the
             * communication stream as backward finishes it (hidden under the
             * rest of backward); ZeRO-3 gathers the next layer while this one
             * computes (hidden under forward and backward, but the first);
             * ZeRO-2 gathers the updated weights after AdamW (exposed). */
            double steps_c = ga * (fwd + bwd);
            double rs = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_bytes, (layers + 1) * ga,
                                  COLL_LAUNCH_NCCL_S, e);
            double ag = coll_time(&f, COLL_ALL_GATHER, v.allgather_bytes,
                                  shard == SHARD_ZERO3 ? 2 * (layers + 1) * ga : 1, COLL_LAUNCH_NCCL_S, e);
            double ar = coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, 1, COLL_LAUNCH_NCCL_S, e);
            total = rs + ag + ar;
            exposed = fmax(0, rs - ga * bwd) + rs / ((layers + 1) * ga) + ar +
                      (shard == SHARD_ZERO3 ? fmax(0, ag - steps_c) + ag / (2 * (layers + 1) * ga) : ag);
            if (exposed > total) exposed = total;
        } else if (shard >= SHARD_ZERO1) {
            /* On the compute stream, after backward and around AdamW. */
            total = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_bytes, 1, COLL_LAUNCH_NCCL_S, e) +
                    coll_time(&f, COLL_ALL_GATHER, v.allgather_bytes, 1, COLL_LAUNCH_NCCL_S, e) +
                    coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, 1, COLL_LAUNCH_NCCL_S, e);
            exposed = total;
        } else {
            /* Per-layer buckets on the communication stream while backward goes
             * on (last micro-step only); the last bucket waits for the end. */
            total = coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, layers + 1, COLL_LAUNCH_NCCL_S, e);
            exposed = fmax(0, total - bwd) + total / (layers + 1);
            if (exposed > total) exposed = total;
        }
    } else if (shard == SHARD_ZERO3) {
        /* Prefetch hides the gathers under forward and backward compute (the
         * recomputed forward's with backward's: it runs inside backward), all
         * but the first module's; overlap_comm is off as emitted, so the
         * reduce-scatter of each bucket waits for nothing else. */
        const PlanModel *m = t->model;
        double modules = layers * ZERO3_MODULES_PER_LAYER + (m->tie_embeddings ? 1 : 2);
        double h = m->hidden > 0 ? m->hidden : 1;
        double buckets = ceil(ts->trainable_params / (h * h));
        double passes = zero3_gather_passes(t->recompute);
        double ag = coll_time(&f, COLL_ALL_GATHER, v.allgather_per_micro / passes, modules, COLL_LAUNCH_DS_S, e);
        /* hpZ: the gathers after the forward's come from the secondary copy
         * partitioned inside the group (a node): its GPU links only. */
        Fabric fb = f;
        if (estimate_hpz_group > 1) { fb.nodes = 1; fb.gpus_per_node = estimate_hpz_group; }
        double ag2 = coll_time(&fb, COLL_ALL_GATHER, v.allgather_per_micro * (passes - 1) / passes,
                               (passes - 1) * modules, COLL_LAUNCH_DS_S, e);
        double rs = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_per_micro, buckets, COLL_LAUNCH_DS_S, e);
        *gather_pass_s = ag;
        double first = modules > 0 ? ag / modules : 0;
        double ex = fmin(ag, fmax(0, ag - fwd) + first) + fmin(ag2, fmax(0, ag2 - bwd) + first) + rs;
        /* ga micro-steps alike: scale the sums of one by ga. */
        e->comm_sent_bytes *= ga; e->comm_intra_seconds *= ga; e->comm_inter_seconds *= ga;
        e->comm_latency_seconds *= ga;
        total = ga * (ag + ag2 + rs);
        exposed = ga * ex;
    } else {
        /* DeepSpeed stages 0-2 with overlap_comm off: nothing overlaps. */
        double bucket = 5e8, tr = ts->trainable_params;
        double n = ceil(tr / bucket);
        if (shard == SHARD_NONE)
            total = coll_time(&f, COLL_ALL_REDUCE, v.allreduce_bytes, n, COLL_LAUNCH_DS_S, e);
        else
            total = coll_time(&f, COLL_REDUCE_SCATTER, v.reduce_scatter_bytes, shard == SHARD_ZERO2 ? ga * n : n,
                              COLL_LAUNCH_DS_S, e) +
                    coll_time(&f, COLL_ALL_GATHER, v.allgather_bytes, n, COLL_LAUNCH_DS_S, e);
        exposed = total;
    }
    e->comm_seconds = total;
    e->comm_exposed_seconds = exposed;
    e->comm_overlap_seconds = total - exposed;
    e->comm_bound = total > e->compute_seconds;
}

/* OpenMP threads of each rank's CPU Adam: OMP_NUM_THREADS when the job's
 * environment sets it; else torchrun's default of 1 when a node runs several
 * ranks (LLaMA-Factory launches torchrun, which sets it unless it is set);
 * else the rank's cores. Never more than the rank's cores. */
static int cpu_adam_threads(const PlanJob *job)
{
    int cores = job->cluster->cpus > 0 ? cpu_cores(job) : 0;
    int threads = ranks_per_node(job) > 1 ? 1 : (cores > 0 ? cores : 1);
    for (int i = 0; i < job->site.nenv; i++) {
        const PlanEnvVar *v = &job->site.env[i];
        if (!v->name || !v->value || strcmp(v->name, "OMP_NUM_THREADS") != 0) continue;
        char *end;
        long n = strtol(v->value, &end, 10);
        if (end != v->value && *end == 0 && n >= 1 && n <= 1 << 16) threads = (int)n;
    }
    if (cores > 0 && threads > cores) threads = cores;
    return threads;
}

/* The offload part of one optimizer step (docs/estimator.md, "Offload
 * time"): PCIe copies and DeepSpeed's CPU Adam. The gradient copies go with
 * the reduce-scatter and wait like it (overlap_comm false as emitted); with
 * offload = all each gather first fetches the rank's partition from the host,
 * which prefetch hides as it hides the gather (gather_pass_s: one gather of
 * every weight, 0 when not estimated); the CPU step and the upload after it wait. */
static void estimate_step_offload(const PlanJob *job, Estimate *e, const TrainStates *ts, double fwd_share,
                                  double gather_pass_s)
{
    const PlanTrain *t = job->run;
    const PlanCluster *c = job->cluster;
    if (!e->cpu_only && t->backend == BACKEND_LLMC && t->offload == OFFLOAD_OPTIMIZER && c->host_link_bytes_per_s > 0) {
        /* llmc-train-cuda (model_cuda_step.c, offload_adamw): fp32 master, m and v
         * up and back each optimizer step, 12 bytes per parameter each way,
         * both directions at once; AdamW runs on the GPU. The step waits for
         * the uploads (and the update, negligible beside them); the downloads
         * finish behind the next forward pass. */
        double n = (double)e->params_total, link = c->host_link_bytes_per_s / 2 * HOST_LINK_EFFICIENCY;
        e->offload_time_known = true;
        if (estimate_llmc_offload_shard(t, e)) {
            /* ZeRO-2/3 on several ranks (model_cuda_step.c zero_step over the
             * pinned shard, offload_shard_alloc): the norm reads the shard's
             * summed gradient, then AdamW reads master, m, v and the gradient
             * and writes master, m, v in place over the host link: 20 bytes
             * of the shard up, 12 down at the same time, exposed. Each
             * micro-step's reduced window goes down to the summed gradient (and
             * from the second micro-step on is read back to be added to) on
             * the communication stream, behind backward. */
            double s = n / e->data_parallel, ga = t->grad_accum > 0 ? t->grad_accum : 1;
            e->offload_h2d_bytes = 20 * s + 4 * s * (ga - 1);
            e->offload_d2h_bytes = 12 * s + 4 * s * ga;
            e->offload_pcie_seconds = (e->offload_h2d_bytes + e->offload_d2h_bytes) / link;
            e->offload_pcie_exposed_seconds = 20 * s / link;
            e->offload_exposed_seconds = e->offload_pcie_exposed_seconds;
            e->offload_bound = e->offload_exposed_seconds > fmax(e->compute_seconds, e->comm_seconds);
            return;
        }
        e->offload_d2h_bytes = e->offload_h2d_bytes = 12 * n;
        e->offload_pcie_seconds = 24 * n / link;
        e->offload_pcie_exposed_seconds = 12 * n / link;
        e->offload_exposed_seconds = e->offload_pcie_exposed_seconds;
        e->offload_bound = e->offload_exposed_seconds > fmax(e->compute_seconds, e->comm_seconds);
        return;
    }
    if (e->cpu_only || t->backend != BACKEND_LLAMAFACTORY || !ts->offload_optimizer || t->shard < SHARD_ZERO1 ||
        c->host_link_bytes_per_s <= 0)
        return;
    int ga = t->grad_accum > 0 ? t->grad_accum : 1;
    int dp = e->data_parallel > 0 ? e->data_parallel : 1;
    double d2h, h2d_step, h2d_fetch;
    estimate_offload_volume(ts, t->shard, t->precision, t->recompute, ga, dp, &d2h, &h2d_step, &h2d_fetch);
    double link = c->host_link_bytes_per_s / 2 * HOST_LINK_EFFICIENCY;
    e->offload_time_known = true;
    e->offload_d2h_bytes = d2h;
    e->offload_h2d_bytes = h2d_step + h2d_fetch;
    e->offload_pcie_seconds = (d2h + h2d_step + h2d_fetch) / link;
    double exposed = (d2h + h2d_step) / link;
    if (h2d_fetch > 0) {
        /* Per pass of a micro-step (forward: one gather; backward: the rest,
         * the recomputed forward's with it): fetch + gather against that
         * pass's compute, as the gathers alone are (estimate_step_comm); the
         * difference is the fetch's share. */
        const PlanModel *m = t->model;
        double layers = m->layers > 0 ? m->layers : 0;
        double modules = layers * ZERO3_MODULES_PER_LAYER + (m->tie_embeddings ? 1 : 2);
        double micro = e->compute_seconds / ga, fwd = micro * fwd_share, bwd = micro - fwd;
        double passes = zero3_gather_passes(t->recompute);
        double fetch = h2d_fetch / ga / passes / link, ag = gather_pass_s;
        double with = 0, without = 0;
        double pass[2] = {fwd, bwd}, gathers[2] = {1, passes - 1};
        for (int i = 0; i < 2; i++) {
            double both = gathers[i] * (ag + fetch), alone = gathers[i] * ag;
            with += fmin(both, fmax(0, both - pass[i]) + (ag + fetch) / modules);
            without += fmin(alone, fmax(0, alone - pass[i]) + ag / modules);
        }
        exposed += ga * (with - without);
    }
    e->offload_pcie_exposed_seconds = exposed;
    e->cpu_optimizer_params = (ts->trainable_params > 0 ? ts->trainable_params : 0) / dp;
    e->cpu_optimizer_threads = cpu_adam_threads(job);
    e->cpu_optimizer_params_per_s = estimate_cpu_adam_rate(e->cpu_optimizer_threads, ranks_per_node(job));
    e->cpu_optimizer_seconds = e->cpu_optimizer_params / e->cpu_optimizer_params_per_s;
    e->offload_exposed_seconds = exposed + e->cpu_optimizer_seconds;
    e->offload_bound = e->offload_exposed_seconds > fmax(e->compute_seconds, e->comm_seconds);
}

void estimate_time(const PlanJob *job, Estimate *e)
{
    const PlanTrain *t = job->run;
    const PlanModel *m = t->model;
    const PlanCluster *c = job->cluster;

    int mb = t->micro_batch > 0 ? t->micro_batch : 1;
    int ga = t->grad_accum > 0 ? t->grad_accum : 1;
    e->global_batch = (int64_t)mb * ga * (e->data_parallel > 0 ? e->data_parallel : 1);

    /* FLOPs per token: 6N for the matmuls (forward 2N, backward 4N), plus
     * attention scores and values: forward 4 * layers * s * q_dim, halved for
     * causal masking, times 3 with backward. Recompute repeats forward work. */
    double n = matmul_params(m, e);
    /* With no data to count (max_steps and unknown datasets), sequences are
     * taken as full contexts. */
    if (e->seq_tokens <= 0) e->seq_tokens = t->context > 0 ? t->context : 0;
    /* Batches are computed at their padded length (packed: the mean). */
    if (!(e->padded_seq_tokens >= e->seq_tokens)) e->padded_seq_tokens = e->seq_tokens;
    double s = e->padded_seq_tokens;
    double attn_fwd = 2.0 * (m->layers > 0 ? m->layers : 0) * s * (m->heads * (double)head_dim_of(m));
    TrainStates ts = plan_train_states(t, e);
    e->trainable_params = ts.trainable_params;
    e->frozen_bytes_per_param = ts.frozen_params > 0
                                    ? (ts.frozen_bytes_per_param > 0 ? ts.frozen_bytes_per_param
                                                                     : value_bytes(t->precision))
                                    : 0;
    double share = ts.trainable_params + ts.frozen_params > 0
                       ? ts.trainable_params / (ts.trainable_params + ts.frozen_params) : 1;
    double fpt = estimate_flops_per_token(n, share, attn_fwd, t->recompute, t->attention);
    /* Preference stages: the forwards without gradient (reference, KL), per
     * trained sequence, at a forward's 2N + attention. */
    double seqs = e->seqs_per_sample > 1 ? e->seqs_per_sample : 1;
    fpt += e->nograd_seqs_per_sample / seqs * (2 * n + attn_fwd);
    e->flops_per_token = fpt;
    double fwd_share = fpt > 0 ? (2 * n + attn_fwd) / fpt : 0;

    if (e->cpu_only) {
        e->peak_flops_per_device = cpu_cores(job) * CPU_CORE_PEAK_FLOPS;
        e->mfu = estimate_job_mfu(job, estimate_default_mfu(job, NULL, NULL), e);
    } else {
        /* fp32 on tensor cores runs as TF32 at half the bf16 rate. */
        double peak = c->gpu->bf16_tflops * 1e12;
        if (t->precision == PREC_FP32) peak /= 2;
        e->fp8_flops_share = 0;
        if (t->precision == PREC_FP8 && c->gpu->fp8_tflops > 0 && fpt > 0) {
            /* the projections' forward, input- and weight-gradient GEMMs at
             * the FP8 peak (the llmc trainer's LM head's too with
             * fp8_lm_head), the rest (attention, else the LM head) at
             * bf16's: one peak, blended so that FLOPs / peak is the sum of
             * both times */
            double proj = (m->layers > 0 ? m->layers : 0) * projection_params(m, NULL, NULL);
            if (t->backend == BACKEND_LLMC && t->fp8_lm_head) proj += (double)m->vocab * m->hidden;
            e->fp8_flops_share = estimate_flops_per_token(proj, share, 0, t->recompute, t->attention) / fpt;
            peak = 1 / ((1 - e->fp8_flops_share) / peak + e->fp8_flops_share / (c->gpu->fp8_tflops * 1e12));
        }
        e->peak_flops_per_device = peak;
        e->mfu = estimate_job_mfu(job, estimate_default_mfu(job, NULL, NULL), e);
    }

    if (t->max_steps > 0) {
        e->steps_total = t->max_steps;
    } else if (e->tokens_source == TOKENS_UNKNOWN) {
        e->steps_total = 0;
    } else {
        double epochs = t->epochs > 0 && isfinite(t->epochs) ? t->epochs : 0;
        double steps = ceil(epochs * e->sequences_per_epoch / seqs / (double)e->global_batch);
        e->steps_total = !(steps >= 0) ? 0 : steps > 9e18 ? INT64_MAX : (int64_t)steps;
    }
    double step_tokens = (double)e->global_batch * seqs * e->seq_tokens;
    e->tokens_total = (double)e->steps_total * step_tokens;
    if (t->max_steps <= 0 && e->tokens_source != TOKENS_UNKNOWN) {
        /* The last step of an epoch is partial: count the data, not the slots. */
        double data_tokens = (t->epochs > 0 && isfinite(t->epochs) ? t->epochs : 0) * e->tokens_per_epoch;
        if (data_tokens < e->tokens_total) e->tokens_total = data_tokens;
    }

    double rate = e->world_size * e->peak_flops_per_device * e->mfu;
    double computed = (double)e->global_batch * seqs * e->padded_seq_tokens;   /* padding included */
    e->compute_seconds = rate > 0 ? computed * fpt / rate : 0;
    double gather_pass_s;
    estimate_step_comm(job, e, &ts, fwd_share, &gather_pass_s);
    estimate_step_offload(job, e, &ts, fwd_share, gather_pass_s);
    e->step_overhead_seconds = job->profile && job->profile->step_overhead_s > 0 ? job->profile->step_overhead_s : 0;
    e->step_seconds = e->compute_seconds + e->comm_exposed_seconds + e->offload_exposed_seconds +
                      e->step_overhead_seconds;
    /* The last step of an epoch is partial: the time follows the tokens. */
    e->total_seconds = step_tokens > 0 ? e->tokens_total / step_tokens * e->step_seconds : 0;
    e->tokens_per_second = e->step_seconds > 0 ? step_tokens / e->step_seconds : 0;
    e->gpu_hours = e->total_seconds * e->world_size / 3600.0;

    /* requeue_segments: estimate_startup, with the starts and saves */
    e->time_limit_seconds = job->time_seconds > 0 ? job->time_seconds : 0;
    e->requeue_segments = 1;
}
