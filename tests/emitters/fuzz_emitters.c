/* fuzz_emitters.c — libFuzzer over the whole compile of a plan: front end,
 * estimator, emit_check, then every artifact writer in memory. For any plan
 * the front end and emit_check accept, the artifacts must be well formed:
 * plan.json, dataset_info.json and the DeepSpeed JSON parse, the LLaMA-Factory
 * YAML parses, slurm.conf and gres.conf have exactly their template's lines
 * and the script exactly its #SBATCH lines (nothing injected), and no
 * artifact holds a control byte other than newline and tab. A violation
 * aborts (a crash for libFuzzer). `make fuzz-emitters` (clang). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <yaml.h>
#include "emit_internal.h"
#include "frontend.h"

static char plan_path[64];
static long reached;   /* inputs whose artifacts were written and checked */

static void at_exit(void)
{
    if (plan_path[0]) remove(plan_path);
    fprintf(stderr, "fuzz_emitters: %ld inputs reached the artifact writers\n", reached);
}

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static int count_prefix(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, prefix, len) == 0) n++;
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

static void require(int ok, const char *what, const char *text)
{
    if (ok) return;
    fprintf(stderr, "fuzz_emitters: %s\n----\n%s\n----\n", what, text ? text : "(null)");
    abort();
}

static void no_control(const char *text, const char *what)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        require(*p >= ' ' || *p == '\n' || *p == '\t', what, text);
}

static void json_ok(char *text, const char *what)
{
    require(text != NULL, what, NULL);
    cJSON *j = cJSON_Parse(text);
    require(j != NULL, what, text);
    cJSON_Delete(j);
    free(text);
}

static void yaml_ok(char *text)
{
    require(text != NULL, "YAML written", NULL);
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    int ok = yaml_parser_load(&parser, &doc);
    require(ok && yaml_document_get_root_node(&doc) != NULL, "YAML parses", text);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(text);
}

static void check_job(const PlanJob *job, const Estimate *e)
{
    JobLayout L;
    job_layout(job, &L);
    char err[512];

    if (!L.cluster->minimal) {   /* a cluster by node count writes no snippet (emit.c) */
        char *conf = emit_slurm_conf(&L, err, sizeof err);
        require(conf != NULL, err, NULL);
        no_control(conf, "slurm.conf: control byte");
        require(count_char(conf, '\n') == (L.gpu ? 7 : 6), "slurm.conf: exactly the template's lines", conf);
        free(conf);

        char *gres = emit_gres_conf(&L, err, sizeof err);
        require(gres != NULL, err, NULL);
        no_control(gres, "gres.conf: control byte");
        require(count_char(gres, '\n') == 2, "gres.conf: exactly the template's lines", gres);
        free(gres);
    }

    char *script = emit_job_script(&L, e, err, sizeof err);
    require(script != NULL, err, NULL);
    no_control(script, "job script: control byte");
    bool lf = L.train->backend == BACKEND_LLAMAFACTORY;
    bool signal = job->requeue && estimate_stop_signal_seconds(job, e) < job->time_seconds;   /* both backends */
    const PlanSite *site = &job->site;   /* the site's directives, one line each */
    int sbatch = 10 + L.gpu + (job->account != NULL) + (job->qos != NULL) + 1 + signal + (site->constraint != NULL) +
                 (site->exclusive == 1) + (site->reservation != NULL) + (site->mail_type != NULL) +
                 (site->mail_user != NULL) + (site->comment != NULL) + (site->exclude != NULL) +
                 (site->nodelist != NULL) + (site->switches > 0) + (site->gpus_per_task > 0) + site->nextra;
    require(count_prefix(script, "#SBATCH") == sbatch, "job script: exactly the expected #SBATCH lines", script);
    free(script);

    json_ok(emit_plan_json(&L, e, err, sizeof err), "plan.json parses");
    json_ok(emit_dataset_info(&L, err, sizeof err), "dataset_info.json parses");
    if (lf) {
        yaml_ok(emit_lf_yaml(&L, e, err, sizeof err));
        json_ok(emit_lf_deepspeed(&L, err, sizeof err), "DeepSpeed JSON parses");
    }
}

/* Structured mode (input starts with 'S'): the rest is split at NUL bytes
 * into the strings of a plan that is otherwise valid, so most inputs reach the
 * writers and the fuzzer works on exactly the strings that reach artifacts. */
static const char structured_plan[] =
    "cluster %s {\n  partition = \"%s\"\n  nodes = %s\n  gpu = %s\n  cpus = 64\n  memory = 512 GiB\n}\n"
    "model m {\n  arch = qwen2  path = \"%s\"\n  layers = 2  hidden = 64  heads = 4  kv_heads = 2\n"
    "  ffn = 176  vocab = 512  max_context = 256\n}\n"
    "dataset %s {\n  file = \"%s\"  format = sharegpt  samples = 1000\n  columns { messages = \"%s\" }\n"
    "  tags { role = \"%s\" content = \"c\" user = \"u\" assistant = \"a\" }\n}\n"
    "train t {\n  stage = sft  model = m  data = [%s]  template = qwen  context = 128  epochs = 1\n"
    "  batch = 1 per gpu  lr = 1e-4  warmup = 1%%  precision = %s  shard = %s  recompute = full\n"
    "  output = \"%s\"  backend = %s\n}\n"
    "job %s {\n  run = t  cluster = %s  nodes = 1  time = %s\n  logs = \"%s\"  account = \"%s\"\n}\n";

static size_t structured(const uint8_t *data, size_t size, char *out, size_t cap)
{
    const char *f[16];
    char buf[4096];
    size_t n = size < sizeof buf - 1 ? size : sizeof buf - 1;
    memcpy(buf, data, n);
    buf[n] = '\0';
    static const char *const dflt[16] = {
        "c", "gpu", "n[01-02]", "H100_80GB x 8", "/models/m", "d", "/data/d.json", "messages",
        "role", "/runs/t", "llmc", "j", "1 h", "logs", "acct", "",
    };
    int k = 0;
    char *p = buf;
    while (k < 15) {
        f[k] = p < buf + n ? p : dflt[k];
        if (!*f[k]) f[k] = dflt[k];
        k++;
        p += strlen(p) + 1;
    }
    static const char *const gpus[] = { "H100_80GB x 8", "none", "A100_40GB x 1", "H200_141GB x 4" };
    static const char *const backends[] = { "llmc", "llamafactory" };
    const char *gpu = gpus[(unsigned char)f[3][0] % 4];
    const char *backend = backends[(unsigned char)f[10][0] % 2];
    bool cpu = strcmp(gpu, "none") == 0;
    int len = snprintf(out, cap, structured_plan, f[0], f[1], f[2], gpu, f[4], f[5], f[6], f[7], f[8],
                       f[5], cpu ? "fp32" : "bf16", cpu ? "none" : "zero2", f[9], backend, f[11], f[0],
                       f[12], f[13], f[14]);
    return len < 0 ? 0 : ((size_t)len < cap ? (size_t)len : cap - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[16384];
    if (size > 0 && data[0] == 'S') {
        size_t n = structured(data + 1, size - 1, text, sizeof text);
        data = (const uint8_t *)text;
        size = n;
    }
    if (!plan_path[0]) {
        snprintf(plan_path, sizeof plan_path, "/tmp/fuzz_emitters.%d.llm", (int)getpid());
        atexit(at_exit);
    }
    FILE *fp = fopen(plan_path, "wb");
    if (!fp) return 0;
    fwrite(data, 1, size, fp);
    fclose(fp);

    Diags *d = diags_new();
    Plan *plan = frontend_load(plan_path, d);
    if (plan && diags_error_count(d) == 0 && plan->njobs > 0) {
        Estimate *ests = calloc((size_t)plan->njobs, sizeof *ests);
        for (int i = 0; ests && i < plan->njobs; i++) estimate_job(plan->jobs[i], &ests[i], d);
        if (ests && diags_error_count(d) == 0 && emit_check(plan, d) == 0)
            for (int i = 0; i < plan->njobs; i++) {
                check_job(plan->jobs[i], &ests[i]);
                reached++;
            }
        free(ests);
    }
    if (getenv("FUZZ_EMITTERS_DEBUG")) {   /* show why an input stopped early */
        fprintf(stderr, "%.*s\n", (int)size, (const char *)data);
        if (diags_error_count(d) + diags_warning_count(d)) diags_render(d, stderr, DIAG_FMT_HUMAN, 0);
    }
    plan_free(plan);
    diags_free(d);
    return 0;
}
