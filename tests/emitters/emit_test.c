/* emit_test.c — unit tests of the emitters on hand-built plans: shell quoting
 * (round trip through a real bash), hostlist compression (round trip through
 * Slurm's own `scontrol show hostnames` when available), time limits, the
 * template filler, emit_check's positioned errors on hostile plans, and the
 * atomic output directory. Writes only under the scratch directory argv[1].
 * Prints "ok"/"FAIL" per check and closes with "N passed, N failed". */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "emit_internal.h"

static int passed, failed;
static const char *scratch;

static void check(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok) passed++;
    else failed++;
}

/* ---- a hand-built plan (what the front end would build) ---- */

static SrcRange at_line(int line, int col)
{
    SrcRange r = { { "test.llm", line, col }, { "test.llm", line, col + 4 } };
    return r;
}

static const GpuSpec h100 = { "H100_80GB", "h100_80gb", 85520809984.0, 85469429760.0, 989.0, 3.35, 0.40, 1979.0 };

typedef struct {
    Plan plan;
    PlanCluster cluster;
    PlanModel model;
    PlanDataset ds;
    PlanDataset *dsp[1];
    PlanTrain train;
    PlanJob job;
    PlanCluster *cp[1];
    PlanTrain *tp[1];
    PlanJob *jp[1];
    PlanDataset *dp[1];
    PlanModel *mp[1];
    char *hosts[64];
    char hostbuf[64][16];
    Estimate est;
} Fixture;

/* nodes: hosts n01..nNN; gpus 0 = CPU-only */
static void fixture(Fixture *f, int nhosts, int gpus)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < nhosts; i++) {
        snprintf(f->hostbuf[i], sizeof f->hostbuf[i], "gpu%03d", i + 1);
        f->hosts[i] = f->hostbuf[i];
    }
    PlanCluster *c = &f->cluster;
    c->name = "testc"; c->at = at_line(1, 9);
    c->partition = "gpu"; c->partition_at = at_line(2, 15);
    c->hostlist = "gpu[001-...]"; c->hostlist_at = at_line(3, 15);
    c->hosts = f->hosts; c->nhosts = nhosts;
    c->gpu = gpus ? &h100 : NULL; c->gpus_per_node = gpus; c->gpu_at = at_line(4, 15);
    c->cpus = 224; c->cpus_at = at_line(5, 15);
    c->memory_bytes = 2ULL << 40; c->memory_at = at_line(6, 15);

    PlanModel *m = &f->model;
    m->name = "qwen7b"; m->at = at_line(8, 7);
    m->arch = ARCH_QWEN2; m->path = "/mnt/data-hps/models/Qwen2.5-7B";
    m->path_at = at_line(9, 10);
    m->layers = 28; m->hidden = 3584; m->heads = 28; m->kv_heads = 4; m->head_dim = 128;
    m->ffn = 18944; m->vocab = 152064; m->max_context = 32768;
    m->rope_theta = 1000000.0; m->rms_eps = 1e-6; m->qkv_bias = true;

    PlanDataset *ds = &f->ds;
    ds->name = "stem_sft"; ds->at = at_line(12, 9);
    ds->file = "/mnt/data-hps/data/stem_sft.json"; ds->file_at = at_line(13, 10);
    ds->format = FORMAT_SHAREGPT;
    ds->columns.messages = "messages";
    ds->tags.role = "role"; ds->tags.content = "content"; ds->tags.user = "user";
    ds->tags.assistant = "assistant"; ds->tags.system = "system";
    ds->samples = 37123; ds->tokens = -1;
    f->dsp[0] = ds;

    PlanTrain *t = &f->train;
    t->name = "sft"; t->at = at_line(16, 7);
    t->stage = STAGE_SFT; t->model = m; t->data = f->dsp; t->ndata = 1;
    t->template_ = TEMPLATE_QWEN; t->context = 2560; t->epochs = 5; t->micro_batch = 4;
    t->grad_accum = 1; t->lr = 1e-5; t->schedule = SCHED_COSINE; t->warmup_ratio = 0.03;
    t->beta1 = 0.9; t->beta2 = 0.999; t->adam_eps = 1e-8; t->grad_clip = 1.0; t->seed = 42;
    t->precision = PREC_BF16; t->shard = SHARD_ZERO3; t->recompute = RECOMPUTE_FULL;
    t->backend = BACKEND_LLMC; t->output_dir = "/mnt/data-hps/runs/sft";
    t->checkpoint_every_seconds = 1800; t->checkpoint_keep = 2;

    PlanJob *j = &f->job;
    j->name = "train_llm"; j->at = at_line(20, 5);
    j->run = t; j->cluster = c; j->nodes = nhosts; j->nodes_at = at_line(20, 40);
    j->time_seconds = 48 * 3600; j->time_at = at_line(20, 55);
    j->mem_bytes = 64000000000ULL; j->mem_at = at_line(20, 70);
    j->cpus_per_task_at = at_line(20, 80);
    j->log_dir = "logs"; j->log_dir_at = at_line(21, 14);
    j->requeue = true;

    f->cp[0] = c; f->tp[0] = t; f->jp[0] = j; f->dp[0] = ds; f->mp[0] = m;
    Plan *p = &f->plan;
    p->main_file = "test.llm";
    p->clusters = f->cp; p->nclusters = 1;
    p->models = f->mp; p->nmodels = 1;
    p->datasets = f->dp; p->ndatasets = 1;
    p->trains = f->tp; p->ntrains = 1;
    p->jobs = f->jp; p->njobs = 1;

    f->est.step_seconds = 12.5;
    f->est.requeue_segments = 1;
    f->est.global_batch = 4LL * nhosts * (gpus ? gpus : 1);
}

/* ---- helpers ---- */

static char *read_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    Buf b;
    buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) buf_put(&b, chunk, n);
    fclose(fp);
    return b.data ? b.data : strdup("");
}

static int run_shell(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* errors from emit_check rendered as JSON text, for matching positions */
static char *check_json(const Plan *p, int *nerr)
{
    Diags *d = diags_new();
    *nerr = emit_check(p, d);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (diags_error_count(d) + diags_warning_count(d) > 0) diags_render(d, mem, DIAG_FMT_JSON, 0);
    fclose(mem);
    diags_free(d);
    return text;
}

/* ---- tests ---- */

static void test_sh_quote(void)
{
    const char *hostile[] = {
        "plain", "", "it's", "''", "$(touch PWNED)", "`touch PWNED`", "a b\tc",
        "line1\nline2", "back\\slash", "\"dq\"", "; rm -rf PWNED #", "${HOME}", "!event",
        "*?[a]", "-n", "'$(touch PWNED)'\\'",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        Buf q, cmd;
        buf_init(&q);
        buf_init(&cmd);
        sh_quote(&q, hostile[i]);
        /* bash reads the quoted word and prints it back unchanged */
        char out_path[512];
        snprintf(out_path, sizeof out_path, "%s/quote.out", scratch);
        buf_printf(&cmd, "cd '%s' && printf '%%s' %s > quote.out", scratch, q.data);
        FILE *script = fopen("/dev/null", "r");
        if (script) fclose(script);
        char sh_path[512];
        snprintf(sh_path, sizeof sh_path, "%s/quote.sh", scratch);
        FILE *fp = fopen(sh_path, "w");
        fputs(cmd.data, fp);
        fclose(fp);
        char run[1100];
        snprintf(run, sizeof run, "bash '%s'", sh_path);
        int rc = run_shell(run);
        char *got = read_file(out_path);
        char pwned[512];
        snprintf(pwned, sizeof pwned, "%s/PWNED", scratch);
        check(rc == 0 && got && strcmp(got, hostile[i]) == 0 && !exists(pwned),
              "sh_quote round-trips hostile string #%zu through bash", i);
        free(got);
        buf_free(&q);
        buf_free(&cmd);
    }
}

static void hl_case(const char *const *hosts, int n, const char *want)
{
    Buf b;
    buf_init(&b);
    hostlist_compress(&b, (char *const *)hosts, n);
    check(b.data && strcmp(b.data, want) == 0, "hostlist %s (got %s)", want, b.data ? b.data : "(null)");
    /* Slurm itself must expand it back to the same names, in order */
    if (run_shell("command -v scontrol >/dev/null 2>&1") == 0 && b.data) {
        char cmd[4096], path[512];
        snprintf(path, sizeof path, "%s/hostnames.out", scratch);
        /* scontrol needs some slurm.conf even to expand a hostlist */
        snprintf(cmd, sizeof cmd,
                 "printf 'ClusterName=x\\nSlurmctldHost=localhost\\n' > '%s/min.conf' && "
                 "SLURM_CONF='%s/min.conf' scontrol show hostnames '%s' > '%s' 2>/dev/null",
                 scratch, scratch, b.data, path);
        run_shell(cmd);
        char *got = read_file(path);
        Buf want_list;
        buf_init(&want_list);
        for (int i = 0; i < n; i++) { buf_puts(&want_list, hosts[i]); buf_puts(&want_list, "\n"); }
        check(got && want_list.data && strcmp(got, want_list.data) == 0,
              "scontrol show hostnames '%s' gives the original names back", b.data);
        free(got);
        buf_free(&want_list);
    }
    buf_free(&b);
}

static void test_hostlist(void)
{
    const char *a[] = { "hgx001", "hgx002", "hgx003", "hgx004" };
    hl_case(a, 4, "hgx[001-004]");
    const char *b[] = { "n1", "n2", "n3", "n5", "n9", "n10", "n11" };
    hl_case(b, 7, "n[1-3,5,9-11]");
    const char *c[] = { "login", "gpu01", "gpu02", "cpu7" };
    hl_case(c, 4, "login,gpu[01-02],cpu7");
    const char *d[] = { "node" };
    hl_case(d, 1, "node");
    const char *e[] = { "a08", "a09", "a10", "a100" };
    hl_case(e, 4, "a[08-10],a100");
    const char *f[] = { "x7" };
    hl_case(f, 1, "x7");
    const char *g[] = { "r1n01", "r1n02", "r2n01" };
    hl_case(g, 3, "r1n[01-02],r2n01");
}

static void test_time(void)
{
    struct { double s; const char *want; } cases[] = {
        { 48 * 3600, "2-00:00:00" }, { 60, "0-00:01:00" }, { 61, "0-00:02:00" },
        { 90 * 60, "0-01:30:00" }, { 3 * 86400 + 5 * 3600 + 7 * 60, "3-05:07:00" }, { 30, "0-00:01:00" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Buf b;
        buf_init(&b);
        slurm_time(&b, cases[i].s);
        check(strcmp(b.data, cases[i].want) == 0, "slurm_time(%.0f) = %s (got %s)", cases[i].s, cases[i].want, b.data);
        buf_free(&b);
    }
}

/* Kubernetes quantities (emit_k8s.c): exact, and what the CRDs' quantity pattern takes. */
static void test_k8s_quantities(void)
{
    struct { uint64_t b; const char *want; } mem[] = {
        { 2ULL << 40, "2Ti" }, { 1800ULL << 30, "1800Gi" }, { 1536ULL << 20, "1536Mi" },
        { 1ULL << 20, "1Mi" }, { 1000000, "1M" }, { 1500000000000ULL, "1500G" }, { 64000000000ULL, "64G" }, { 1000, "1k" }, { 1023, "1023" }, { 3 * 1024, "3Ki" }, { 0, "0" },
    };
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) {
        char q[48];
        k8s_bytes_quantity(mem[i].b, q, sizeof q);
        check(strcmp(q, mem[i].want) == 0, "k8s_bytes_quantity(%llu) = %s (got %s)", (unsigned long long)mem[i].b, mem[i].want, q);
    }
    struct { int64_t m; const char *want; } cpu[] = { { 224000, "224" }, { 120500, "120500m" }, { 500, "500m" }, { 1, "1m" } };
    for (size_t i = 0; i < sizeof cpu / sizeof cpu[0]; i++) {
        char q[48];
        k8s_cpu_quantity(cpu[i].m, q, sizeof q);
        check(strcmp(q, cpu[i].want) == 0, "k8s_cpu_quantity(%lld) = %s (got %s)", (long long)cpu[i].m, cpu[i].want, q);
    }
}

static void test_template(void)
{
    Tmpl t;
    Buf out;
    char err[256];
    tmpl_init(&t);
    buf_init(&out);
    tmpl_set(&t, "a", "X");
    tmpl_set(&t, "on", "1");
    tmpl_set(&t, "off", "");
    tmpl_set(&t, "b", "Y");
    int rc = tmpl_fill(&t, "1 {{a}} 2\n{{#on}}\nin {{a}}\n{{/on}}\n{{#off}}\nout {{b}}\n{{/off}}\nend\n", &out, err, sizeof err);
    check(rc == 0 && strcmp(out.data, "1 X 2\nin X\nend\n") == 0, "template holes and sections");
    tmpl_free(&t);
    buf_free(&out);

    tmpl_init(&t);
    buf_init(&out);
    rc = tmpl_fill(&t, "{{missing}}\n", &out, err, sizeof err);
    check(rc != 0 && strstr(err, "missing"), "template: an unset hole is an error (%s)", err);
    tmpl_free(&t);
    buf_free(&out);

    tmpl_init(&t);
    buf_init(&out);
    tmpl_set(&t, "unused", "1");
    rc = tmpl_fill(&t, "text\n", &out, err, sizeof err);
    check(rc != 0 && strstr(err, "unused"), "template: a value no hole uses is an error (%s)", err);
    tmpl_free(&t);
    buf_free(&out);

    tmpl_init(&t);
    buf_init(&out);
    tmpl_set(&t, "s", "1");
    rc = tmpl_fill(&t, "{{#s}}\nx\n", &out, err, sizeof err);
    check(rc != 0, "template: an unclosed section is an error (%s)", err);
    tmpl_free(&t);
    buf_free(&out);

    /* a value is inserted verbatim, never re-expanded */
    tmpl_init(&t);
    buf_init(&out);
    tmpl_set(&t, "v", "{{v}}");
    rc = tmpl_fill(&t, "[{{v}}]\n", &out, err, sizeof err);
    check(rc == 0 && strcmp(out.data, "[{{v}}]\n") == 0, "template: values are not re-expanded");
    tmpl_free(&t);
    buf_free(&out);

    const char *names[] = { "slurm.conf", "gres.conf", "job_llmc.slurm", "job_llamafactory.slurm" };
    for (size_t i = 0; i < 4; i++)
        check(template_text(names[i]) && strlen(template_text(names[i])) > 20, "template %s is compiled in", names[i]);
}

/* emit_check on a fixture modified by `mutate`; expect an error at line:col
 * whose summary contains `want`. */
static void expect_error(const char *what, Fixture *f, int line, int col, const char *want)
{
    int n;
    char *json = check_json(&f->plan, &n);
    /* compare without white space: {"line":20,"column":40} */
    char *flat = json ? strdup(json) : NULL;
    if (flat) {
        size_t k = 0;
        for (char *q = flat; *q; q++)
            if (*q != ' ' && *q != '\t' && *q != '\n') flat[k++] = *q;
        flat[k] = '\0';
    }
    char pos[64];
    snprintf(pos, sizeof pos, "\"start\":{\"line\":%d,\"column\":%d}", line, col);
    bool at = flat && strstr(flat, pos);
    free(flat);
    bool says = json && strstr(json, want);
    check(n > 0 && at && says, "emit_check rejects %s at %d:%d (%s)", what, line, col, want);
    if (!(n > 0 && at && says)) printf("     diagnostics: %s\n", json ? json : "(none)");
    free(json);
}

static void test_checks(void)
{
    Fixture f;
    int n;
    fixture(&f, 2, 8);
    char *json = check_json(&f.plan, &n);
    check(n == 0, "emit_check accepts the 2-node H100 fixture");
    if (n) printf("     %s\n", json);
    free(json);

    fixture(&f, 2, 8); f.job.nodes = 3;
    expect_error("nodes > cluster hosts", &f, 20, 40, "3 nodes");
    fixture(&f, 2, 8); f.job.mem_bytes = 3ULL << 40;
    expect_error("--mem larger than the node", &f, 20, 70, "RealMemory");
    fixture(&f, 2, 8); f.job.cpus_per_task = 29;
    expect_error("cpus-per-task x tasks > node CPUs", &f, 20, 80, "232 CPUs");
    fixture(&f, 2, 8); f.job.time_seconds = 0;
    expect_error("a zero time limit", &f, 20, 55, "time limit");
    fixture(&f, 2, 8); f.job.name = "train\nllm";
    expect_error("a newline in the job name", &f, 20, 5, "control character");
    fixture(&f, 2, 8); f.job.name = "x$(reboot)";
    expect_error("$() in the job name", &f, 20, 5, "not a valid Slurm name");
    fixture(&f, 2, 8); f.job.name = "../evil";
    expect_error("a path in the job name", &f, 20, 5, "not a valid Slurm name");
    fixture(&f, 2, 8); f.job.log_dir = "logs'; touch PWNED; '";
    expect_error("a quote in the log dir", &f, 21, 14, "contains '''");
    fixture(&f, 2, 8); f.job.log_dir = "logs/`id`";
    expect_error("a backtick in the log dir", &f, 21, 14, "contains '`'");
    fixture(&f, 2, 8); f.job.log_dir = "logs\n#SBATCH --uid=0";
    expect_error("a newline in the log dir", &f, 21, 14, "control character");
    fixture(&f, 2, 8); f.job.log_dir = "logs/%u";
    expect_error("a Slurm pattern in the log dir", &f, 21, 14, "contains '%'");
    fixture(&f, 2, 8); f.cluster.partition = "gpu Default=NO";
    expect_error("a space in the partition", &f, 2, 15, "partition");
    fixture(&f, 2, 8); f.hosts[1] = "gpu002\nNodeName=evil";
    expect_error("a newline in a node name", &f, 3, 15, "control character");
    fixture(&f, 2, 8); f.model.path = "/mnt/m\nodel";
    expect_error("a newline in the model path", &f, 9, 10, "control character");
    fixture(&f, 2, 8); f.ds.name = "a,b";
    expect_error("a comma in a dataset name", &f, 12, 9, "dataset name");
    fixture(&f, 2, 0); f.train.backend = BACKEND_LLAMAFACTORY;
    f.train.backend_at = at_line(17, 3);
    expect_error("llamafactory on a CPU-only cluster", &f, 17, 3, "GPU cluster");
    fixture(&f, 2, 8); f.hosts[1] = "gpu001";
    expect_error("a node listed twice", &f, 3, 15, "twice");
}

static char *join(const char *dir, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, name) < 0) abort();
    return p;
}

static bool file_has(const char *dir, const char *name, const char *needle)
{
    char *p = join(dir, name);
    char *text = read_file(p);
    bool ok = text && strstr(text, needle);
    if (!ok) printf("     %s lacks: %s\n", p, needle);
    free(p);
    free(text);
    return ok;
}

static bool file_lacks(const char *dir, const char *name, const char *needle)
{
    char *p = join(dir, name);
    char *text = read_file(p);
    bool ok = text && !strstr(text, needle);
    if (!ok) printf("     %s has: %s\n", p, needle);
    free(p);
    free(text);
    return ok;
}

static int emit_to(Fixture *f, const char *dir)
{
    Diags *d = diags_new();
    int rc = emit_outputs(&f->plan, &f->est, dir, d);
    if (rc != 0) diags_render(d, stdout, DIAG_FMT_HUMAN, 0);
    diags_free(d);
    return rc;
}

static int emit_to_quiet(Fixture *f, const char *dir)
{
    Diags *d = diags_new();
    int rc = emit_outputs(&f->plan, &f->est, dir, d);
    diags_free(d);
    return rc;
}

static void test_outputs(void)
{
    Fixture f;
    fixture(&f, 2, 8);
    char *out = join(scratch, "out");
    check(emit_to(&f, out) == 0, "emit_outputs writes the 2-node H100 plan");
    check(file_has(out, "slurm.conf", "NodeName=gpu[001-002] CPUs=224 RealMemory=2097152 Gres=gpu:h100_80gb:8 State=UNKNOWN\n"),
          "slurm.conf NodeName line with hostlist and GRES");
    check(file_has(out, "slurm.conf", "GresTypes=gpu\n") &&
          file_has(out, "slurm.conf", "PartitionName=gpu Nodes=gpu[001-002] State=UP\n") &&
          file_lacks(out, "slurm.conf", "Default=") && file_lacks(out, "slurm.conf", "MaxTime="),
          "slurm.conf GresTypes and partition");
    check(file_has(out, "gres.conf", "NodeName=gpu[001-002] Name=gpu Type=h100_80gb File=/dev/nvidia[0-7]\n"),
          "gres.conf with the same type and count");
    check(file_has(out, "train_llm.slurm", "#SBATCH --gres=gpu:h100_80gb:8\n") &&
          file_has(out, "train_llm.slurm", "#SBATCH --ntasks-per-node=8\n") &&
          file_has(out, "train_llm.slurm", "#SBATCH --cpus-per-task=28\n") &&
          file_has(out, "train_llm.slurm", "#SBATCH --mem=61036M\n") &&
          file_has(out, "train_llm.slurm", "#SBATCH --time=2-00:00:00\n") &&
          file_has(out, "train_llm.slurm", "#SBATCH --output=logs/%x-%j.out\n") &&
          file_has(out, "train_llm.slurm", "#SBATCH --requeue\n"),
          "sbatch directives");
    check(file_has(out, "train_llm.slurm", "bash -c \"$rank_wrapper\" \"$train\" \"$plan\" \"$stop_mark\"") &&
          file_has(out, "train_llm.slurm", "\"$0\" run \"$1\"") &&
          file_has(out, "train_llm.slurm", "scontrol requeue \"$job_id\""),
          "the script launches llmc-train run and requeues on exit 3");
    char *script = join(out, "train_llm.slurm");
    char *text = read_file(script);
    check(text && strstr(text, "#SBATCH --signal=USR2@325\n"),
          "--signal=USR2@T whenever requeue is on, also when the estimate says the run fits one time limit");
    /* every #SBATCH line comes before the first command */
    bool order = true, seen_cmd = false;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, "#SBATCH", 7) == 0 && seen_cmd) order = false;
        if (line[0] != '#' && line[0] != '\n') seen_cmd = true;
        line = nl ? nl + 1 : line + strlen(line);
    }
    check(order, "every #SBATCH directive precedes the first command");
    struct stat st;
    check(stat(script, &st) == 0 && (st.st_mode & 0111), "the job script is executable");
    free(text);
    free(script);
    check(file_has(out, OUTDIR_MARKER, "llmc"), "the output holds the llmc marker");

    /* requeue off: no signal (nothing would bring the job back) */
    f.job.requeue = false;
    check(emit_to(&f, out) == 0 && !file_has(out, "train_llm.slurm", "--signal") &&
          file_has(out, "plan.json", "\"stop_signal_seconds\":\tnull"), "no --signal with requeue = false");
    f.job.requeue = true;

    /* the run needs 3 time-limit segments: USR2 warning */
    f.est.requeue_segments = 3;
    check(emit_to(&f, out) == 0, "re-emit into an existing llmc output directory");
    check(file_has(out, "train_llm.slurm", "#SBATCH --signal=USR2@325\n"),
          "--signal=USR2@T (2 steps + 300 s) when the run needs several segments");
    check(file_has(out, "plan.json", "\"stop_signal_seconds\":\t325"), "plan.json records the signal lead time");

    /* CPU-only cluster: no GRES anywhere */
    Fixture c;
    fixture(&c, 1, 0);
    char *cout = join(scratch, "cpu");
    check(emit_to(&c, cout) == 0, "emit_outputs writes a CPU-only plan");
    char *sc = join(cout, "slurm.conf");
    char *sct = read_file(sc);
    check(sct && !strstr(sct, "Gres") && strstr(sct, "NodeName=gpu001 CPUs=224 RealMemory=2097152 State=UNKNOWN\n"),
          "CPU-only slurm.conf has no Gres");
    free(sct);
    free(sc);
    char *js = join(cout, "train_llm.slurm");
    char *jst = read_file(js);
    check(jst && !strstr(jst, "--gres") && !strstr(jst, "nvidia-smi") && strstr(jst, "#SBATCH --ntasks-per-node=1\n") &&
          strstr(jst, "#SBATCH --cpus-per-task=224\n"),
          "CPU-only script: one task per node with every CPU, no GPUs");
    free(jst);
    free(js);

    /* several jobs: one subdirectory each */
    Fixture two;
    fixture(&two, 2, 8);
    PlanJob second = two.job;
    second.name = "second";
    PlanTrain second_run = two.train;   /* after train_llm, from what it trained */
    second_run.output_dir = "/mnt/data-hps/runs/sft2";
    second.run = &second_run;
    second.after = &two.job;
    PlanJob *jobs[2] = { &second, &two.job };   /* submit.sh puts train_llm first */
    two.plan.jobs = jobs;
    two.plan.njobs = 2;
    Estimate ests[2] = { two.est, two.est };
    char *mout = join(scratch, "multi");
    Diags *d = diags_new();
    check(emit_outputs(&two.plan, ests, mout, d) == 0, "two jobs are written");
    diags_free(d);
    char *p1 = join(mout, "train_llm/plan.json"), *p2 = join(mout, "second/second.slurm");
    check(exists(p1) && exists(p2), "each job in its own subdirectory");
    free(p1); free(p2);
    char *sub = join(mout, "submit.sh");
    char *subt = read_file(sub);
    char *first = subt ? strstr(subt, "id_1=$(sbatch --parsable \"$@\" \"$dir/train_llm/train_llm.slurm\")\n") : NULL;
    check(first && strstr(first, "id_2=$(sbatch --parsable --dependency=afterok:\"$id_1\" --kill-on-invalid-dep=yes \"$@\" "
                                 "\"$dir/second/second.slurm\")\n"),
          "submit.sh: the job it runs after first, then the chained job with afterok on its id");
    struct stat sst;
    check(stat(sub, &sst) == 0 && (sst.st_mode & 0111), "submit.sh is executable");
    free(subt);
    free(sub);
    check(file_has(mout, "second/plan.json", "\"path\":\t\"/mnt/data-hps/runs/sft/final\"") &&
          file_has(mout, "second/plan.json", "\"init\":\t\"pretrained\"") &&
          file_has(mout, "train_llm/plan.json", "\"path\":\t\"/mnt/data-hps/models/Qwen2.5-7B\""),
          "the chained llmc job starts from the export of the first (output/final)");
    free(mout);

    /* LLaMA-Factory backend */
    Fixture lf;
    fixture(&lf, 2, 8);
    lf.train.backend = BACKEND_LLAMAFACTORY;
    char *lout = join(scratch, "lf");
    check(emit_to(&lf, lout) == 0, "emit_outputs writes the llamafactory plan");
    check(file_has(lout, "llamafactory_train.yaml", "learning_rate: 1.0e-05\n") &&
          file_has(lout, "llamafactory_train.yaml", "deepspeed: \"ds_z3_config.json\"\n") &&
          file_has(lout, "llamafactory_train.yaml", "overwrite_output_dir: false\n"),
          "LLaMA-Factory YAML: typed float, deepspeed file, resume on requeue");
    check(file_has(lout, "ds_z3_config.json", "\"stage\":\t3"), "DeepSpeed ZeRO-3 config");
    check(file_lacks(lout, "llamafactory_train.yaml", "train_on_prompt") &&
          file_lacks(lout, "llamafactory_train.yaml", "mask_history") &&
          file_has(lout, "plan.json", "\"train_on_prompt\":\tfalse") &&
          file_has(lout, "plan.json", "\"mask_history\":\tfalse"),
          "loss masking off: no LLaMA-Factory key (its default), false in plan.json");
    char *mask_out = join(scratch, "lf_masking");
    lf.train.mask_history = true;
    check(emit_to(&lf, mask_out) == 0 && file_has(mask_out, "llamafactory_train.yaml", "\nmask_history: true\n") &&
          file_lacks(mask_out, "llamafactory_train.yaml", "train_on_prompt") &&
          file_has(mask_out, "plan.json", "\"mask_history\":\ttrue"),
          "mask_history: the LLaMA-Factory key and plan.json");
    lf.train.mask_history = false;
    lf.train.train_on_prompt = true;
    check(emit_to(&lf, mask_out) == 0 && file_has(mask_out, "llamafactory_train.yaml", "\ntrain_on_prompt: true\n") &&
          file_lacks(mask_out, "llamafactory_train.yaml", "mask_history") &&
          file_has(mask_out, "plan.json", "\"train_on_prompt\":\ttrue"),
          "train_on_prompt: the LLaMA-Factory key and plan.json");
    free(mask_out);
    check(file_has(lout, "train_llm.slurm", "FORCE_TORCHRUN=1") &&
          file_has(lout, "train_llm.slurm", "NODE_RANK=$SLURM_NODEID"),
          "LLaMA-Factory script: torchrun per node with NODE_RANK");
    free(lout);
    free(cout);
    free(out);
}

static void test_atomic(void)
{
    Fixture f;
    fixture(&f, 2, 8);

    /* a directory llmc did not write is never replaced */
    char *foreign = join(scratch, "foreign");
    mkdir(foreign, 0755);
    char *keep = join(foreign, "precious.txt");
    FILE *fp = fopen(keep, "w");
    fputs("mine\n", fp);
    fclose(fp);
    check(emit_to(&f, foreign) != 0, "refuses to replace a directory llmc did not write");
    char *t = read_file(keep);
    check(t && strcmp(t, "mine\n") == 0, "the foreign directory is untouched");
    free(t);

    /* a plan that fails the checks leaves an earlier output exactly as it was */
    char *out = join(scratch, "atomic");
    check(emit_to(&f, out) == 0, "first compile");
    char *plan_path = join(out, "plan.json");
    char *before = read_file(plan_path);
    f.job.log_dir = "bad'dir";
    check(emit_to(&f, out) != 0, "a failing compile reports an error");
    char *after = read_file(plan_path);
    check(before && after && strcmp(before, after) == 0, "a failing compile leaves DIR as it was");
    free(before); free(after);
    /* no temporary directories are left beside it */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q llmc-", scratch);
    check(run_shell(cmd) != 0, "no temporary directory left behind");

    /* a regular file in the way */
    char *file = join(scratch, "afile");
    fp = fopen(file, "w");
    fputs("x", fp);
    fclose(fp);
    f.job.log_dir = "logs";
    check(emit_to(&f, file) != 0, "refuses to replace a regular file");
    /* a symbolic link in DIR's place is not followed or replaced */
    char *link = join(scratch, "alink");
    char *target = join(scratch, "atomic");
    if (symlink(target, link) != 0) abort();
    check(emit_to(&f, link) != 0, "refuses a symbolic link as DIR");
    struct stat lst;
    check(lstat(link, &lst) == 0 && S_ISLNK(lst.st_mode), "the symbolic link is left as it was");
    free(link); free(target);
    /* missing parent directories are made (mkdir -p); a parent that is a
     * regular file is an error */
    char *deep = join(scratch, "no/such/dir");
    char *deep_plan = join(deep, "plan.json");
    check(emit_to(&f, deep) == 0 && access(deep_plan, F_OK) == 0, "missing parent directories are created");
    free(deep_plan);
    char *through_file = join(scratch, "a_file/dir");
    char *a_file = join(scratch, "a_file");
    FILE *plain = fopen(a_file, "w");
    if (plain) fclose(plain);
    check(emit_to(&f, through_file) != 0, "a parent that is a file is an error");
    free(through_file); free(a_file);
    check(emit_to(&f, "/") != 0 && emit_to(&f, ".") != 0, "refuses '/' and '.'");

    /* same plan, two directories: identical bytes */
    char *a = join(scratch, "det_a"), *b = join(scratch, "det_b");
    emit_to(&f, a);
    emit_to(&f, b);
    snprintf(cmd, sizeof cmd, "diff -r '%s' '%s' >/dev/null", a, b);
    check(run_shell(cmd) == 0, "the same plan gives the same bytes");
    free(a); free(b);
    free(deep); free(file); free(plan_path); free(out); free(keep); free(foreign);
}

/* Count lines starting with prefix. */
static int count_lines(const char *text, const char *prefix)
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

/* Property: whatever strings a plan holds in the places that reach Slurm
 * lines and the script, either emit_check rejects the plan and nothing is
 * written, or the artifacts have exactly the lines of a clean plan (nothing
 * injected) and the script parses. Deterministic pseudo-random strings from an
 * alphabet of shell and Slurm metacharacters. */
/* One hostile string into field `which` of f (0-3 the names, 4-13 the site
 * settings); env and mounts live in the caller's storage. */
#define INJECT_FIELDS 14
static void inject(Fixture *f, int which, const char *v, PlanEnvVar *env, const char **list, char *buf, size_t buflen)
{
    PlanSite *site = &f->job.site;
    switch (which) {
    case 0: f->job.log_dir = v; break;
    case 1: f->job.name = v; break;
    case 2: f->cluster.partition = v; break;
    case 3: f->job.account = v; break;
    case 4: env[0] = (PlanEnvVar){"NCCL_SOCKET_IFNAME", v, at_line(30, 5)}; site->env = env; site->nenv = 1; break;
    case 5: list[0] = v; site->setup = list; site->nsetup = 1; site->setup_at = at_line(31, 5); break;
    case 6: site->constraint = v; site->constraint_at = at_line(32, 5); break;
    case 7: site->reservation = v; site->reservation_at = at_line(33, 5); break;
    case 8: site->mail_user = v; site->mail_user_at = at_line(34, 5); break;
    case 9: site->comment = v; site->comment_at = at_line(35, 5); break;
    case 10: site->gres = 1; site->gres_type = v; site->gres_at = at_line(36, 5); break;
    case 11: site->container = CONTAINER_APPTAINER; site->image = v; site->image_at = at_line(37, 5); break;
    case 12:
        snprintf(buf, buflen, "/%s", v);
        site->container = CONTAINER_PYXIS; site->image = "img"; site->image_at = at_line(37, 5);
        list[0] = buf; site->mounts = list; site->nmounts = 1; site->mounts_at = at_line(38, 5);
        break;
    case 13: env[0] = (PlanEnvVar){v, "1", at_line(30, 5)}; site->env = env; site->nenv = 1; break;
    }
}

static char *script_of(Fixture *f, const char *out)
{
    char *name = NULL;
    if (asprintf(&name, "%s.slurm", f->job.name) < 0) abort();
    char *sp = join(out, name);
    char *text = read_file(sp);
    free(sp);
    free(name);
    return text;
}

/* Property: whatever strings a plan holds in the places that reach Slurm
 * lines and the script, either emit_check rejects the plan and nothing is
 * written, or the artifacts have exactly the lines of the same plan with a
 * clean value there (nothing injected) and the script parses. Deterministic
 * pseudo-random strings from an alphabet of shell and Slurm metacharacters;
 * every name and every site setting (env names and values, setup lines,
 * #SBATCH values, container image and mounts). */
static void test_injection_property(void)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop/._-$`'\"\\;|&<>(){}[]*?!#~%,= \t\n";
    uint32_t rng = 12345;
    int accepted = 0, rejected = 0, broken = 0;
    int ref_sbatch[INJECT_FIELDS], ref_lines[INJECT_FIELDS], ref_conf_lines[INJECT_FIELDS];
    char *ref_dir = join(scratch, "prop_ref");
    char cmd[1024];
    for (int w = 0; w < INJECT_FIELDS; w++) {   /* the same field, clean */
        Fixture base;
        fixture(&base, 2, 8);
        PlanEnvVar env[1];
        const char *list[1];
        char buf[64];
        inject(&base, w, w == 13 ? "CLEAN" : "clean", env, list, buf, sizeof buf);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", ref_dir);
        run_shell(cmd);
        ref_sbatch[w] = ref_lines[w] = ref_conf_lines[w] = -1;
        if (emit_to_quiet(&base, ref_dir) != 0) { broken++; continue; }
        char *script = script_of(&base, ref_dir), *cp = join(ref_dir, "slurm.conf"), *conf = read_file(cp);
        if (script) { ref_sbatch[w] = count_lines(script, "#SBATCH"); ref_lines[w] = count_lines(script, ""); }
        if (conf) ref_conf_lines[w] = count_lines(conf, "");
        free(script); free(cp); free(conf);
    }
    int per_field_accepted[INJECT_FIELDS] = {0};
    char *out = join(scratch, "prop");
    for (int iter = 0; iter < 100 * INJECT_FIELDS; iter++) {
        char s[16];
        rng = rng * 1103515245u + 12345u;
        int len = 1 + (int)((rng >> 16) % 6);
        for (int i = 0; i < len; i++) {
            rng = rng * 1103515245u + 12345u;
            s[i] = alphabet[(rng >> 16) % (sizeof alphabet - 1)];
        }
        s[len] = '\0';
        Fixture f;
        fixture(&f, 2, 8);
        int which = iter % INJECT_FIELDS;   /* one hostile field at a time, the others clean */
        PlanEnvVar env[1];
        const char *list[1];
        char buf[64];
        inject(&f, which, s, env, list, buf, sizeof buf);
        Diags *d = diags_new();
        int errs = emit_check(&f.plan, d);
        diags_free(d);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
        run_shell(cmd);
        if (errs > 0) {
            rejected++;
            if (emit_to_quiet(&f, out) == 0 || exists(out)) broken++;
            continue;
        }
        accepted++;
        per_field_accepted[which]++;
        if (emit_to_quiet(&f, out) != 0) { broken++; continue; }
        char *name = NULL;
        if (asprintf(&name, "%s.slurm", f.job.name) < 0) abort();
        char *sp = join(out, name), *cp = join(out, "slurm.conf");
        char *script = read_file(sp), *conf = read_file(cp);
        snprintf(cmd, sizeof cmd, "bash -n '%s' 2>/dev/null", sp);
        bool bad = !script || !conf || count_lines(script, "#SBATCH") != ref_sbatch[which] ||
                   count_lines(script, "") != ref_lines[which] || count_lines(conf, "") != ref_conf_lines[which] ||
                   run_shell(cmd) != 0;
        if (bad) { broken++; printf("     field %d value \"%s\" broke the artifacts\n", which, s); }
        free(script); free(conf); free(sp); free(cp); free(name);
    }
    int fields_accepting = 0;
    for (int w = 0; w < INJECT_FIELDS; w++) fields_accepting += per_field_accepted[w] > 0;
    check(broken == 0 && accepted > 0 && rejected > 0 && fields_accepting == INJECT_FIELDS,
          "%d plans with hostile names and site settings: %d rejected (nothing written), %d accepted "
          "with no injected line (every one of %d fields: %d), %d broken",
          100 * INJECT_FIELDS, rejected, accepted, INJECT_FIELDS, fields_accepting, broken);
    free(out); free(ref_dir);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: emit_test SCRATCH_DIR\n");
        return 2;
    }
    scratch = argv[1];
    test_sh_quote();
    test_hostlist();
    test_time();
    test_k8s_quantities();
    test_template();
    test_checks();
    test_outputs();
    test_atomic();
    test_injection_property();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
