/* estimate_fields.c — the fields of an Estimate that its two JSON forms print:
 * plan.json's "estimate" object (compiler/emit/emit_plan_json.c, a subset, in
 * an order the trainer's readers and golden/ fix) and `llmc explain
 * --format=json` (compiler/cli/explain.c, every field). One row per field
 * (docs/estimator.md, "plan.json estimate fields"); each writer keeps only its
 * number formatting. Add a field to the JSON by adding its row here. */
#include <cjson/cJSON.h>
#include "estimate.h"

/* X(field, kind, position in plan.json's "estimate" or -1 when explain alone
 * prints it). Rows in explain's order. */
#define ESTIMATE_FIELDS(X) \
    X(params_total, EST_INT, 0) X(params_embedding, EST_INT, 1) X(params_per_layer, EST_INT, 2) \
    X(weights_bytes, EST_NUM, 3) X(grads_bytes, EST_NUM, 4) X(optimizer_bytes, EST_NUM, 5) \
    X(activations_bytes, EST_NUM, 6) X(logits_bytes, EST_NUM, 7) X(comm_bytes, EST_NUM, 9) \
    X(reserve_bytes, EST_NUM, 10) X(total_bytes, EST_NUM, 11) X(usable_bytes, EST_NUM, 12) \
    X(max_micro_batch_that_fits, EST_INT, 13) \
    X(tokens_per_epoch, EST_NUM, 14) X(tokens_measured, EST_BOOL, 15) X(samples_per_epoch, EST_NUM, 16) \
    X(tokens_total, EST_NUM, 17) X(flops_per_token, EST_NUM, 18) X(mfu, EST_NUM, 19) \
    X(step_seconds, EST_NUM, 20) X(total_seconds, EST_NUM, 21) X(gpu_hours, EST_NUM, 22) \
    X(steps_total, EST_INT, 23) X(global_batch, EST_INT, 24) X(requeue_segments, EST_INT, 25) \
    X(cpu_only, EST_BOOL, 26) X(world_size, EST_INT, 27) X(data_parallel, EST_INT, 28) \
    X(model_bytes_per_param, EST_NUM, 29) X(activation_bytes_per_value, EST_NUM, 30) \
    X(activations_layers_bytes, EST_NUM, 31) X(activations_working_bytes, EST_NUM, 32) \
    X(reserve_context_bytes, EST_NUM, 33) X(reserve_fragmentation_bytes, EST_NUM, 34) \
    X(logits_chunked, EST_BOOL, 35) X(logits_bytes_per_value, EST_NUM, -1) X(logits_chunk_rows, EST_NUM, -1) \
    X(activations_transformers, EST_BOOL, -1) X(llmc_cuda_allocation, EST_BOOL, -1) X(fits, EST_BOOL, 36) \
    X(seq_tokens, EST_NUM, 37) X(attn_cudnn, EST_BOOL, -1) X(attn_cudnn_deterministic, EST_BOOL, -1) \
    X(attn_workspace_bytes, EST_NUM, 8) \
    X(fp8_weights_bytes, EST_NUM, -1) X(fp8_scratch_bytes, EST_NUM, -1) X(fp8_flops_share, EST_NUM, -1) \
    X(sequences_per_epoch, EST_NUM, 38) X(size_read_from_file, EST_BOOL, -1) X(samples_unknown, EST_BOOL, -1) \
    X(tokens_source, EST_TOKEN_SOURCE, -1) \
    X(peak_flops_per_device, EST_NUM, 39) X(tokens_per_second, EST_NUM, 40) X(time_limit_seconds, EST_NUM, 41) \
    X(fabric_known, EST_BOOL, -1) X(compute_seconds, EST_NUM, -1) X(comm_allgather_bytes, EST_NUM, -1) \
    X(comm_reduce_scatter_bytes, EST_NUM, -1) X(comm_allreduce_bytes, EST_NUM, -1) \
    X(comm_sent_bytes, EST_NUM, -1) X(comm_collectives, EST_NUM, -1) X(comm_intra_seconds, EST_NUM, -1) \
    X(comm_inter_seconds, EST_NUM, -1) X(comm_latency_seconds, EST_NUM, -1) X(comm_seconds, EST_NUM, -1) \
    X(comm_overlap_seconds, EST_NUM, -1) X(comm_exposed_seconds, EST_NUM, -1) X(comm_bound, EST_BOOL, -1) \
    X(host_process_bytes, EST_NUM, -1) X(host_model_bytes, EST_NUM, -1) X(host_data_bytes, EST_NUM, -1) \
    X(host_pinned_bytes, EST_NUM, -1) X(host_offload_bytes, EST_NUM, -1) X(host_bytes, EST_NUM, -1) \
    X(host_usable_bytes, EST_NUM, -1) X(host_fits, EST_BOOL, -1) \
    X(padded_seq_tokens, EST_NUM, -1) X(padding_from_stats, EST_BOOL, -1) X(padding_assumed, EST_BOOL, -1) \
    X(padding_full_rows, EST_BOOL, -1) \
    X(trainable_params, EST_NUM, -1) X(frozen_bytes_per_param, EST_NUM, -1) \
    X(offload_time_known, EST_BOOL, -1) X(offload_d2h_bytes, EST_NUM, -1) X(offload_h2d_bytes, EST_NUM, -1) \
    X(offload_pcie_seconds, EST_NUM, -1) X(offload_pcie_exposed_seconds, EST_NUM, -1) \
    X(cpu_optimizer_params, EST_NUM, -1) X(cpu_optimizer_threads, EST_NUM, -1) \
    X(cpu_optimizer_params_per_s, EST_NUM, -1) X(cpu_optimizer_seconds, EST_NUM, -1) \
    X(offload_exposed_seconds, EST_NUM, -1) X(offload_bound, EST_BOOL, -1) \
    X(seqs_per_sample, EST_NUM, -1) X(nograd_seqs_per_sample, EST_NUM, -1) X(reference, EST_REFERENCE, -1) \
    X(reference_params, EST_NUM, -1) X(reference_bytes, EST_NUM, -1) X(reference_logits_bytes, EST_NUM, -1) \
    X(tokenize_tokens, EST_NUM, -1) X(tokenize_workers, EST_NUM, -1) X(tokenize_rate, EST_NUM, -1) \
    X(tokenize_seconds, EST_NUM, -1) X(tokenize_every_start, EST_BOOL, -1) X(ddp_timeout_seconds, EST_NUM, -1) \
    X(ddp_timeout_raised, EST_BOOL, -1) X(load_bytes, EST_NUM, -1) X(load_seconds, EST_NUM, -1) \
    X(checkpoint_bytes, EST_NUM, -1) X(checkpoint_export_bytes, EST_NUM, -1) \
    X(checkpoint_write_seconds, EST_NUM, -1) X(checkpoint_kept_bytes, EST_NUM, -1) \
    X(checkpoint_every_steps, EST_NUM, -1) X(checkpoints_total, EST_NUM, -1) X(resume_seconds, EST_NUM, -1) \
    X(startup_seconds, EST_NUM, -1) X(wall_seconds, EST_NUM, -1)

/* A merge job's own rows (Estimate.merge; docs/language.md, "merge NAME"),
 * after the others and only for a merge job: explain alone prints them. */
#define ESTIMATE_MERGE_FIELDS(X) \
    X(merge, EST_BOOL, -1) X(merge_adapter_params, EST_NUM, -1) X(merge_value_bytes, EST_NUM, -1) \
    X(merge_flops, EST_NUM, -1) X(merge_seconds, EST_NUM, -1) X(merge_write_bytes, EST_NUM, -1) \
    X(merge_write_seconds, EST_NUM, -1)

static const char *reference_name(RefKind r)
{
    return r == REF_COPY ? "copy" : r == REF_ADAPTERS_OFF ? "adapters_off" : "none";
}

/* A row's value in every form its kind can be printed in. */
#define EST_ROW(f, k, pos) \
    out[n++] = (EstimateField){#f, k, pos, (double)e->f, (int64_t)e->f, (double)e->f != 0, \
                               k == EST_TOKEN_SOURCE ? estimate_token_source_name((TokenSource)e->f) \
                               : k == EST_REFERENCE  ? reference_name((RefKind)e->f) : NULL};

int estimate_fields(const Estimate *e, EstimateField out[ESTIMATE_FIELD_MAX])
{
    int n = 0;
    ESTIMATE_FIELDS(EST_ROW)
    if (e->merge) { ESTIMATE_MERGE_FIELDS(EST_ROW) }
    return n;
}

/* The same rows' count, checked by the array size above at compile time. */
#define EST_ONE(f, k, pos) +1
_Static_assert(0 ESTIMATE_FIELDS(EST_ONE) ESTIMATE_MERGE_FIELDS(EST_ONE) <= ESTIMATE_FIELD_MAX,
               "ESTIMATE_FIELD_MAX is below the rows");

/* Every row as cJSON prints it (explain's writer; plan.json's formats its own numbers). */
cJSON *estimate_to_json(const Estimate *e)
{
    cJSON *o = cJSON_CreateObject();
    EstimateField f[ESTIMATE_FIELD_MAX];
    int n = estimate_fields(e, f);
    for (int i = 0; i < n; i++) {
        switch (f[i].kind) {
        case EST_NUM: cJSON_AddNumberToObject(o, f[i].key, f[i].num); break;
        case EST_INT: cJSON_AddNumberToObject(o, f[i].key, (double)f[i].i); break;
        case EST_BOOL: cJSON_AddBoolToObject(o, f[i].key, f[i].b); break;
        case EST_TOKEN_SOURCE:
        case EST_REFERENCE: cJSON_AddStringToObject(o, f[i].key, f[i].str); break;
        }
    }
    return o;
}
