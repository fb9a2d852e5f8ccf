/* test_estimate.c — check vectors for the estimator (compiler/estimate/): the
 * hand-built plans every test file uses, and main, which runs them all.
 *
 * Sources of the expected numbers:
 *   - parameter counts: transformers itself (hf_reference.json, written by
 *     hf_reference.py) and the figures quoted in the issue;
 *   - model states: the ZeRO paper (Rajbhandari et al. 2020), figure 1 / table 1;
 *   - activations: Korthikanti et al. 2022 (eq. 1 and the GPT-3 ratios of
 *     section 4), and the bytes autograd saves in transformers' layers;
 *   - time: hand arithmetic written out beside each check.
 * The checks are split by topic: test_estimate_memory.c (parameters, memory per
 * GPU), test_estimate_time.c (data, time, communication, offload),
 * test_estimate_plans.c (defaults, fields, profiles, stages, families).
 * Usage: test_estimate DIR   (DIR holds hf_reference.json)
 */
#include "test_estimate.h"

int passed, failed;

bool near(double got, double want, double rel)
{
    return fabs(got - want) <= rel * fabs(want);
}

/* ---- hand-built plans ---- */

const GpuSpec H100 = {"H100_80GB", "h100_80gb", 81559.0 * 1048576, 81510.0 * 1048576,
                      989.0, 3.35, 0.40, 1979.0};

const SrcRange BATCH_AT = {{"t.llm", 20, 3}, {"t.llm", 20, 20}};
const SrcRange TIME_AT = {{"t.llm", 30, 3}, {"t.llm", 30, 12}};

PlanModel model(ModelArch arch, int layers, int hidden, int heads, int kv, int head_dim,
                int ffn, int vocab, bool tied)
{
    PlanModel m;
    memset(&m, 0, sizeof m);
    m.name = "m";
    m.arch = arch;
    m.layers = layers; m.hidden = hidden; m.heads = heads; m.kv_heads = kv;
    m.head_dim = head_dim; m.ffn = ffn; m.vocab = vocab;
    m.tie_embeddings = tied;
    m.qkv_bias = arch == ARCH_QWEN2;
    m.qk_norm = arch == ARCH_QWEN3;
    return m;
}

/* A bf16 job on `nodes` x 8 H100 with one dataset of `tokens` tokens. */
void fixture(Fixture *f, PlanModel m, int nodes, int context, int batch,
             ShardStage shard, Recompute rc, double tokens)
{
    memset(f, 0, sizeof *f);
    f->m = m;
    f->ds.name = "d";
    f->ds.at = (SrcRange){{"t.llm", 10, 1}, {"t.llm", 10, 8}};
    f->ds.samples = -1;
    f->ds.tokens = tokens >= 0 ? (int64_t)tokens : -1;
    f->dsp[0] = &f->ds;
    f->t.stage = STAGE_PT;
    f->t.model = &f->m;
    f->t.data = f->dsp; f->t.ndata = 1;
    f->t.context = context; f->t.epochs = 1;
    f->t.micro_batch = batch; f->t.batch_at = BATCH_AT; f->t.grad_accum = 1;
    f->t.precision = PREC_BF16; f->t.shard = shard; f->t.recompute = rc;
    f->t.attention = ATTN_FLASH; f->t.packing = true; f->t.bytes_per_token = 4.0;
    f->c.name = "metal";
    f->c.gpu = &H100; f->c.gpus_per_node = 8; f->c.cpus = 224;
    f->c.memory_bytes = 2ull << 40;
    f->j.name = "job";
    f->j.run = &f->t; f->j.cluster = &f->c; f->j.nodes = nodes;
    f->j.time_seconds = 48 * 3600.0; f->j.time_at = TIME_AT;
    f->j.requeue = true;
}

/* Run estimate_job and return the rendered diagnostics (caller frees). */
char *run_job(const PlanJob *j, Estimate *e, int *errors)
{
    Diags *d = diags_new();
    *errors = estimate_job(j, e, d);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (diags_error_count(d) + diags_warning_count(d) > 0)
        diags_render(d, mem, DIAG_FMT_HUMAN, 0);
    fclose(mem);
    CHECK(diags_error_count(d) == *errors, "returned error count %d matches Diags %d",
          *errors, diags_error_count(d));
    diags_free(d);
    return text;
}

cJSON *load_json(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void set_fabric(Fixture *f)
{
    f->c.link_bytes_per_s = 900e9;   /* NVLink 4, both directions */
    f->c.nics = 8; f->c.nic_bits_per_s = 400e9;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/estimator";
    cJSON *ref = load_json(dir, "hf_reference.json");
    CHECK(ref != NULL, "read %s/hf_reference.json", dir);

    test_params_issue();
    if (ref) test_params_transformers(ref);
    test_zero_paper();
    test_korthikanti();
    if (ref) test_layer_vs_transformers(ref);
    if (ref) test_step_peak(ref);
    test_llama_layer_formula();
    test_fit_boundary();
    test_examples();
    test_llmc_cuda_allocation();
    test_llmc_states_fp8();
    cJSON *cuda_ref = load_json(dir, "llmc_cuda_reference.json");
    CHECK(cuda_ref != NULL, "read %s/llmc_cuda_reference.json", dir);
    if (cuda_ref) test_llmc_cuda_measured(cuda_ref);
    cJSON_Delete(cuda_ref);
    cJSON *zero_ref = load_json(dir, "llmc_zero_reference.json");
    CHECK(zero_ref != NULL, "read %s/llmc_zero_reference.json", dir);
    if (zero_ref) test_llmc_zero_measured(zero_ref);
    cJSON_Delete(zero_ref);
    test_llmc_cudnn_workspace();
    cJSON *cudnn_ref = load_json(dir, "cudnn_workspace_reference.json");
    CHECK(cudnn_ref != NULL, "read %s/cudnn_workspace_reference.json", dir);
    if (cudnn_ref) test_llmc_cudnn_measured(cudnn_ref);
    cJSON_Delete(cudnn_ref);
    test_comm_buffers();
    test_low_use_warning();
    test_time_arithmetic();
    test_sft_tokens();
    test_cpu_plan();
    test_hostile();
    test_collectives();
    test_padding_mean();
    test_hpz();
    test_defaults();
    test_comm_volumes();
    test_step_breakdown();
    test_train_states();
    test_host_memory();
    test_padding_stats();
    test_offload_time();
    test_pure_bf16();
    test_estimate_fields("docs");
    test_site_profile();
    test_preference();
    test_startup();
    test_families();
    test_mixture();
    test_optim_liger();

    cJSON_Delete(ref);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
