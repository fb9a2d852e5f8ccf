/* estimate_merge.c — a merge job (docs/language.md, "merge NAME"): host and
 * GPU memory and time of llamafactory-cli export, and what of it does not fit.
 */
#include "estimate_internal.h"

/* ---- a merge job: llamafactory-cli export (docs/language.md, "merge NAME") ----
 * The base read in the export dtype (device = cpu: into host memory; auto:
 * spread over the node's GPUs by device_map "auto", run one GPU at a time),
 * the fp32 adapter read and each adapted matrix's B x A added into it (peft's
 * merge_and_unload; on CPUs in fp32), the merged weights written as
 * safetensors shards of shard_size. Rates: the model load's and the
 * checkpoint write's above; LLaMA-Factory's own start (Python, torch,
 * transformers, the tokenizer) is MERGE_START_S. */
#define MERGE_START_S 60.0

void estimate_merge(const PlanJob *job, Estimate *e)
{
    const PlanMerge *m = job->merge;
    const PlanModel *b = m->model;
    const PlanCluster *c = job->cluster;
    int64_t emb, per_layer;
    double n = (double)estimate_params(b, &emb, &per_layer);
    double vb = m->dtype == MERGE_DTYPE_FP32 ? 4 : 2;   /* auto: the base's 16-bit torch_dtype (fp32 saved as bf16) */
    double a = lora_params(m->adapter, b);
    bool gpu = m->device == MERGE_DEVICE_AUTO && c->gpu && c->gpus_per_node > 0;
    e->merge = true;
    e->params_total = (int64_t)n;
    e->params_embedding = emb;
    e->params_per_layer = per_layer;
    e->merge_adapter_params = a;
    e->merge_value_bytes = vb;
    e->world_size = e->data_parallel = 1;
    e->startup_seconds = MERGE_START_S;
    e->load_bytes = 2 * n + 4 * a;
    e->load_seconds = e->load_bytes / MODEL_LOAD_BYTES_PER_S;
    /* B (d_out x r) x A (r x d_in) for every adapted matrix: 2 r d_in d_out
     * FLOPs, about 2 x rank x the adapted weights, which a / (d_in + d_out)
     * per rank bounds; taken as 2 x a x the larger side, the model's hidden
     * or ffn width */
    double wide = b->ffn > b->hidden ? b->ffn : b->hidden;
    e->merge_flops = 2 * a * wide;
    double cores = job->cpus_per_task > 0 ? (double)job->cpus_per_task * (c->gpus_per_node > 0 ? c->gpus_per_node : 1)
                                          : (c->cpus > 0 ? c->cpus : 1);
    e->peak_flops_per_device = gpu ? c->gpu->bf16_tflops * 1e12 : cores * CPU_CORE_PEAK_FLOPS;
    e->mfu = gpu ? c->gpu->default_mfu : CPU_DEFAULT_MFU;
    e->merge_seconds = e->merge_flops / (e->peak_flops_per_device * e->mfu);
    e->merge_write_bytes = vb * n;
    e->merge_write_seconds = e->merge_write_bytes / CKPT_WRITE_BYTES_PER_S;
    e->wall_seconds = e->startup_seconds + e->load_seconds + e->merge_seconds + e->merge_write_seconds;
    e->total_seconds = e->wall_seconds;
    e->time_limit_seconds = job->time_seconds;
    e->requeue_segments = 1;
    /* memory: one process; the largest matrix twice in fp32 while it is merged,
     * one shard staged while it is written */
    double matrix = 4 * 2 * wide * (double)b->hidden;
    double shard = m->shard_gb * 1e9;
    e->host_process_bytes = HOST_TORCH_PROCESS_BYTES;
    e->host_model_bytes = gpu ? shard : vb * n + 4 * a + matrix + shard;
    e->host_bytes = e->host_process_bytes + e->host_model_bytes;
    e->host_usable_bytes = job->mem_bytes ? (double)job->mem_bytes : (double)c->memory_bytes;
    e->host_fits = !(e->host_usable_bytes > 0) || e->host_bytes <= e->host_usable_bytes;
    if (gpu) {
        double g = c->gpus_per_node;
        e->weights_bytes = vb * n / g + 4 * a / g;
        e->activations_bytes = matrix;
        e->reserve_context_bytes = GPU_CONTEXT_BYTES;
        e->reserve_bytes = GPU_CONTEXT_BYTES;
        e->total_bytes = e->weights_bytes + e->activations_bytes + e->reserve_bytes;
        e->usable_bytes = c->gpu->usable_bytes;
        e->fits = e->total_bytes <= e->usable_bytes;
    } else {
        e->fits = true;
    }
}

/* A merge that does not fit in memory or in the job's time limit. */
int report_merge(const PlanJob *job, const Estimate *e, Diags *d)
{
    const PlanMerge *m = job->merge;
    const PlanCluster *c = job->cluster;
    int errors = 0;
    if (!e->host_fits) {
        SrcRange at = job->mem_bytes ? job->mem_at : c->memory_at;
        Diag *dg = diag_error(d, at, "merge '%s' does not fit in host memory: %.1f GiB needed, %s %.1f GiB", m->name,
                              e->host_bytes / GIB, job->mem_bytes ? "the job's mem is" : "the node has",
                              e->host_usable_bytes / GIB);
        diag_note(dg, "the base in %s (%.1f GiB), the adapter, one matrix merged in fp32 and one %d GB shard "
                  "written, and the process (%.1f GiB)", e->merge_value_bytes == 4 ? "fp32" : "16 bits",
                  e->merge_value_bytes * (double)e->params_total / GIB, m->shard_gb, e->host_process_bytes / GIB);
        if (job->mem_bytes && c->memory_bytes >= e->host_bytes)
            diag_help(dg, "mem = %.0f GiB fits (the node has %.1f GiB)", ceil(e->host_bytes / GIB),
                      (double)c->memory_bytes / GIB);
        else if (m->device == MERGE_DEVICE_CPU && c->gpu)
            diag_help(dg, "device = auto in merge '%s': the model spread over the node's %d GPUs", m->name,
                      c->gpus_per_node);
        errors++;
    }
    if (!e->fits) {
        Diag *dg = diag_error(d, m->device_at.start.file ? m->device_at : job->run_at, "merge '%s' does not fit on "
                              "the GPUs: %.1f GiB per GPU needed, %s has %.1f GiB usable", m->name, e->total_bytes / GIB,
                              c->gpu->name, e->usable_bytes / GIB);
        diag_help(dg, "device = cpu (the merge in host memory)");
        errors++;
    }
    if (job->time_seconds > 0 && e->wall_seconds > job->time_seconds) {
        char need[64];
        snprintf(need, sizeof need, "%.0f min", ceil(1.5 * e->wall_seconds / 60));
        Diag *dg = diag_error(d, job->time_at, "merge '%s' does not finish in the job's time limit: about %.0f min "
                              "estimated", m->name, ceil(e->wall_seconds / 60));
        diag_note(dg, "start %.0f s, read %.1f GB at 0.5 GB/s, merge %.0f s, write %.1f GB at 1 GB/s",
                  e->startup_seconds, e->load_bytes / 1e9, e->merge_seconds, e->merge_write_bytes / 1e9);
        diag_help(dg, "time = %s", need);
        errors++;
    }
    return errors;
}
