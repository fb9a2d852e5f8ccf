/* check_cluster.c — the hardware blocks: gpu NAME (a GPU outside the
 * catalogue), cluster NAME (partition, nodes, GPUs, links, network) and
 * profile NAME (a site's measured efficiency and bandwidths). */
#include "check_internal.h"

/* ---- blocks ---- */

/* Bandwidths: bytes per second for links between GPUs (as NVIDIA quotes NVLink),
 * bits per second for network adapters (as NICs are sold). Two types: a link
 * in Gbps or a NIC in GBps is an error, never a silent factor of 8. The lexer
 * has no '/', so "GB/s" is written GBps and "Gb/s" Gbps. */
static const Unit byte_rate_units[] = {{"MBps", 1e6}, {"GBps", 1e9}, {"TBps", 1e12}};
static const Unit bit_rate_units[] = {{"Mbps", 1e6}, {"Gbps", 1e9}, {"Tbps", 1e12}};
/* The bandwidth of each named link, as quoted (both directions): the rows of
 * contract/plan_vocab.h's PLAN_GPU_LINK and PLAN_HOST_LINK (GPU to host
 * memory: PCIe 4.0 / 5.0 x16, NVLink-C2C on GH200), by their enums. */
static const double gpu_link_rates[] = {
    [GPU_LINK_NVLINK3] = 600e9, [GPU_LINK_NVLINK4] = 900e9, [GPU_LINK_NVLINK5] = 1800e9,
    [GPU_LINK_PCIE4] = 64e9, [GPU_LINK_PCIE5] = 128e9};
_Static_assert(NUNITS(gpu_link_rates) == GPU_LINK_COUNT, "a rate per PLAN_GPU_LINK row");
static const double host_link_rates[] = {[HOST_LINK_PCIE4] = 64e9, [HOST_LINK_PCIE5] = 128e9, [HOST_LINK_C2C] = 900e9};
_Static_assert(NUNITS(host_link_rates) == HOST_LINK_COUNT, "a rate per PLAN_HOST_LINK row");

/* `NUMBER UNIT` for a rate; units: the table of this key, other: the other type. */
static bool get_rate(Checker *c, const Entry *e, const Term *num, const Term *u, const Unit *units,
                     const Unit *other, const char *example, double *out)
{
    const char *names[3] = {units[0].unit, units[1].unit, units[2].unit};
    const char *list = join_names(c->a, names, 3);
    if (!is_number(num)) {
        Diag *g = diag_error(c->d, num->at, "'%s' must be a bandwidth, found %s", e->key, term_desc(c, num));
        diag_help(g, "for example: %s = %s", e->key, example);
        return false;
    }
    if (!u) {
        Diag *g = diag_error(c->d, num->at, "'%s' needs a unit: %s", e->key, list);
        diag_help(g, "for example: %s = %s", e->key, example);
        return false;
    }
    if (u->kind == TERM_IDENT) {
        for (int i = 0; i < 3; i++) {
            if (strcmp(u->str, units[i].unit) != 0) continue;
            if (!(num->fval > 0) || num->overflow || num->fval * units[i].scale > 1e15) {
                diag_error(c->d, num->at, "'%s' must be a positive bandwidth up to 1000 TBps", e->key);
                return false;
            }
            *out = num->fval * units[i].scale;
            return true;
        }
        for (int i = 0; i < 3; i++) {
            if (strcmp(u->str, other[i].unit) != 0) continue;
            Diag *g = diag_error(c->d, u->at, "'%s' takes %s per second, not %s: %s is %s per second",
                                 e->key, units == bit_rate_units ? "bits" : "bytes", u->str, u->str,
                                 other == bit_rate_units ? "bits" : "bytes");
            diag_note(g, "%s", units == bit_rate_units
                                   ? "network adapters are rated in bits per second (400 Gbps = 50 GBps)"
                                   : "GPU links are quoted in bytes per second (NVLink 4 = 900 GBps)");
            diag_help(g, "for example: %s = %s", e->key, example);
            return false;
        }
    }
    Diag *g = diag_error(c->d, u->at, "'%s' is not a unit of bandwidth; '%s' takes %s", u->kind == TERM_IDENT ? u->str : u->text,
                         e->key, list);
    if (u->kind == TERM_IDENT) {
        const char *dym = did_you_mean(u->str, names, 3);
        if (dym) diag_help(g, "did you mean '%s'?", dym);
    }
    return false;
}

/* ---- gpu NAME { } : a GPU the catalogue lacks ---- */

static const Unit flops_units[] = {{"TFLOPS", 1}, {"PFLOPS", 1000}};

/* The gpu keys contract/plan_keys.h's rows alone describe (READ ROW: vendor),
 * read by check_row_keys before the rules below run. */
static const RowRead gpu_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanGpu, type, row, field),
    PLAN_KEYS_GPU(X)
#undef X
};

void check_gpu(Checker *c, const Item *it, PlanGpu *g)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, PKB_GPU);
    check_row_keys(c, &s, PKB_GPU, gpu_reads, g, NULL);
    GpuSpec *spec = &g->spec;
    spec->name = g->name;
    spec->default_mfu = 0.35;
    if (gpu_catalog_find(g->name)) {
        Diag *d = diag_error(c->d, g->at, "GPU '%s' is in the catalogue already", g->name);
        diag_help(d, "use it as it is, or give your part another name");
    }
    Entry *e;
    uint64_t bytes = 0;
    if ((e = require(c, &s, PLAN_KEY(GPU, memory), "96 GB")) && get_size(c, e, &bytes)) {
        if (bytes < (1ull << 30)) diag_error(c->d, e->value->at, "GPU memory must be at least 1 GiB");
        else { spec->mem_bytes = (double)bytes; spec->usable_bytes = 0.98 * (double)bytes; }
    }
    if ((e = find(&s, PLAN_KEY(GPU, usable))) && get_size(c, e, &bytes)) {
        if (spec->mem_bytes > 0 && (double)bytes > spec->mem_bytes)
            diag_error(c->d, e->value->at, "'usable' is more than the GPU's memory");
        else if (bytes < (1ull << 30)) diag_error(c->d, e->value->at, "'usable' must be at least 1 GiB");
        else spec->usable_bytes = (double)bytes;
    }
    double x;
    if ((e = require(c, &s, PLAN_KEY(GPU, bf16), "989 TFLOPS")) &&
        get_quantity(c, e, flops_units, NUNITS(flops_units), "a dense bf16 peak", "989 TFLOPS", &x)) {
        if (!(x > 0) || x > 100000) diag_error(c->d, e->value->at, "'bf16' must be between 0 and 100 PFLOPS");
        else spec->bf16_tflops = x;
    }
    /* a part without FP8 tensor cores leaves it out: precision = fp8 is refused there */
    if ((e = find(&s, PLAN_KEY(GPU, fp8))) &&
        get_quantity(c, e, flops_units, NUNITS(flops_units), "a dense FP8 peak", "1979 TFLOPS", &x)) {
        if (!(x > 0) || x > 100000) diag_error(c->d, e->value->at, "'fp8' must be between 0 and 100 PFLOPS");
        else spec->fp8_tflops = x;
    }
    if ((e = require(c, &s, PLAN_KEY(GPU, hbm), "4 TBps")) && e->value &&
        get_rate(c, e, e->value->terms[0], e->value->nterms > 1 ? e->value->terms[1] : NULL, byte_rate_units,
                 bit_rate_units, "4 TBps", &x) && want_terms(c, e, 2, "a bandwidth"))
        spec->hbm_tbps = x / 1e12;
    spec->gres_type = NULL;
    const char *str;
    if ((e = find(&s, PLAN_KEY(GPU, gres_type)))) {
        if (get_string(c, e, &str)) {
            bool ok = str[0] && str[0] != '-' && str[0] != '.';
            for (const char *p = str; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.')) ok = false;
            if (!ok) diag_error(c->d, e->value->at, "'gres_type' must be letters, digits, '_', '-' or '.'");
            else spec->gres_type = str;
        }
    } else {
        char *low = arena_strdup(c->a, g->name);
        for (char *p = low; *p; p++) *p = (char)tolower((unsigned char)*p);
        spec->gres_type = low;
    }
    if ((e = find(&s, PLAN_KEY(GPU, mfu))) && get_percent(c, e, 100, &x)) {
        if (x <= 0) diag_error(c->d, e->value->at, "'mfu' must be more than 0%%");
        else spec->default_mfu = x;
    }
    report_missing(c, &s);
}

/* A GPU by name: the plan's gpu blocks, then the catalogue; *amd its vendor. */
static const GpuSpec *find_gpu(Checker *c, const char *name, bool *amd)
{
    Symbol *sym = lookup(c, name);
    if (sym && sym->kind == K_GPU) { if (amd) *amd = ((PlanGpu *)sym->obj)->vendor == VENDOR_AMD; return &((PlanGpu *)sym->obj)->spec; }
    const GpuSpec *g = gpu_catalog_find(name);
    if (amd) *amd = gpu_catalog_is_amd(g);
    return g;
}

/* gpu_link = nvlink4 | 900 GBps;  network = 8 x 400 Gbps;  network_kind = infiniband | roce;
 * host_link = pcie5 | 128 GBps (GPU to host memory: DeepSpeed offload).
 * Without them, the GPU's usual node from the catalogue (gpu_catalog_fabric). */
static void check_cluster_fabric(Checker *c, Scope *s, PlanCluster *cl)
{
    Entry *e;
    const GpuFabric *fab = gpu_catalog_fabric(cl->gpu);
    if (fab) {
        cl->link_bytes_per_s = fab->link_bytes_per_s; cl->link_default = true;
        cl->nics = fab->nics; cl->nic_bits_per_s = fab->nic_bits_per_s; cl->network_default = true;
        cl->host_link_bytes_per_s = fab->host_link_bytes_per_s; cl->host_link_default = true;
    }
    if ((e = find(s, PLAN_KEY(CLUSTER, gpu_link))) && e->value) {
        const Value *v = e->value;
        const Term *t = v->terms[0];
        double x;
        if (t->kind == TERM_IDENT) {
            int k;
            if (want_terms(c, e, 1, "a link name or a bandwidth") &&
                get_enum(c, e, gpu_link_llm_names, GPU_LINK_COUNT, &k)) {
                cl->link_bytes_per_s = gpu_link_rates[k]; cl->link_default = false; cl->link_at = v->at;
            }
        } else if (v->nterms <= 2 &&
                   get_rate(c, e, t, v->nterms == 2 ? v->terms[1] : NULL, byte_rate_units, bit_rate_units,
                            "900 GBps", &x)) {
            cl->link_bytes_per_s = x; cl->link_default = false; cl->link_at = v->at;
        } else if (v->nterms > 2) {
            want_terms(c, e, 2, "a bandwidth");
        }
    }
    if ((e = find(s, PLAN_KEY(CLUSTER, network))) && e->value) {
        const Value *v = e->value;
        const Term *k = v->terms[0];
        double x;
        if (v->nterms < 3 || k->kind != TERM_INT || v->terms[1]->kind != TERM_IDENT ||
            strcmp(v->terms[1]->str, "x") != 0) {
            Diag *g = diag_error(c->d, v->at, "'network' must be adapters per node x speed, found %s",
                                 value_desc(c, v));
            diag_help(g, "for example: network = 8 x 400 Gbps");
        } else if (k->ival < 1 || k->ival > 64) {
            diag_error(c->d, k->at, "network adapters per node must be between 1 and 64, found %s", k->text);
        } else if (want_terms(c, e, 4, "adapters x speed") &&
                   get_rate(c, e, v->terms[2], v->terms[3], bit_rate_units, byte_rate_units, "8 x 400 Gbps", &x)) {
            cl->nics = (int)k->ival; cl->nic_bits_per_s = x; cl->network_default = false; cl->network_at = v->at;
        }
    }
    if ((e = find(s, PLAN_KEY(CLUSTER, host_link))) && e->value) {
        const Value *v = e->value;
        const Term *t = v->terms[0];
        double x;
        int k;
        if (t->kind == TERM_IDENT) {
            if (want_terms(c, e, 1, "a link name or a bandwidth") &&
                get_enum(c, e, host_link_llm_names, HOST_LINK_COUNT, &k)) {
                cl->host_link_bytes_per_s = host_link_rates[k]; cl->host_link_default = false; cl->host_link_at = v->at;
            }
        } else if (v->nterms <= 2 &&
                   get_rate(c, e, t, v->nterms == 2 ? v->terms[1] : NULL, byte_rate_units, bit_rate_units,
                            "128 GBps", &x)) {
            cl->host_link_bytes_per_s = x; cl->host_link_default = false; cl->host_link_at = v->at;
        } else if (v->nterms > 2) {
            want_terms(c, e, 2, "a bandwidth");
        }
    }
    if ((e = find(s, PLAN_KEY(CLUSTER, network_kind)))) {
        int k;
        char words[64];
        if (want_terms(c, e, 1, plan_vocab_list(words, sizeof words, network_kind_llm_names, PLAN_VOCAB_ALL_ROWS)) &&
            get_enum(c, e, network_kind_llm_names, NETWORK_KIND_COUNT, &k))
            cl->network_roce = k == NETWORK_ROCE;
    }
    if (!cl->gpu && (cl->link_bytes_per_s > 0 && !cl->link_default)) {
        cl->link_bytes_per_s = 0;
        diag_warning(c->d, cl->link_at, "'gpu_link' on a cluster without GPUs is ignored");
    }
    if (!cl->gpu && (cl->host_link_bytes_per_s > 0 && !cl->host_link_default)) {
        cl->host_link_bytes_per_s = 0;
        diag_warning(c->d, cl->host_link_at, "'host_link' on a cluster without GPUs is ignored");
    }
}

/* The cluster keys contract/plan_keys.h's rows read (check_row_keys). */
static const RowRead cluster_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanCluster, type, row, field),
    PLAN_KEYS_CLUSTER(X)
#undef X
};

void check_cluster(Checker *c, const Item *it, PlanCluster *cl)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, PKB_CLUSTER);
    check_row_keys(c, &s, PKB_CLUSTER, cluster_reads, cl, NULL);
    Entry *e;
    if ((e = require(c, &s, PLAN_KEY(CLUSTER, partition), "\"gpu\""))) {
        cl->partition_at = e->at;
        if (get_string(c, e, &cl->partition)) {
            bool ok = cl->partition[0] != 0;
            for (const char *p = cl->partition; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.')) ok = false;
            if (!ok) diag_error(c->d, e->value->at, "partition name must be letters, digits, '_', '-' or '.'");
        }
    }
    if ((e = require(c, &s, PLAN_KEY(CLUSTER, nodes), "hgx[001-032]")) && want_terms(c, e, 1, "a hostlist")) {
        const Term *t = e->value->terms[0];
        cl->hostlist_at = t->at;
        if (t->kind == TERM_INT) {   /* a minimal cluster: a node count, the admin's slurm.conf has the rest */
            cl->minimal = true;
            if (t->overflow || t->ival < 1 || t->ival > HOSTLIST_MAX_HOSTS)
                diag_error(c->d, t->at, "'nodes' must be a hostlist or a node count from 1 to %d", HOSTLIST_MAX_HOSTS);
            else cl->nhosts = (int)t->ival;
        } else if (t->kind == TERM_HOSTLIST || t->kind == TERM_IDENT || t->kind == TERM_STRING) {
            const char *err = NULL;
            int n = hostlist_expand(c->a, t->str, &cl->hosts, &err);
            if (n < 0) diag_error(c->d, t->at, "%s", err);
            else { cl->hostlist = t->str; cl->nhosts = n; }
        } else {
            Diag *g = diag_error(c->d, t->at, "'nodes' must be a hostlist, found %s", term_desc(c, t));
            diag_help(g, "for example: nodes = hgx[001-032]");
        }
    }
    if ((e = require(c, &s, PLAN_KEY(CLUSTER, gpu), "H100_80GB x 8")) && e->value) {
        const Value *v = e->value;
        const Term *t = v->terms[0];
        cl->gpu_at = v->at;
        const char *names[32];
        int n = gpu_catalog_count();
        for (int i = 0; i < n && i < 32; i++) names[i] = gpu_catalog_at(i)->name;
        const char *count_word = v->nterms >= 2 && v->terms[1]->kind == TERM_IDENT ? v->terms[1]->str : NULL;
        if (t->kind == TERM_IDENT && strcmp(t->str, "none") == 0) {
            if (want_terms(c, e, 1, "'none' alone")) { cl->gpu = NULL; cl->gpus_per_node = 0; }
        } else if (t->kind != TERM_IDENT) {
            Diag *g = diag_error(c->d, t->at, "'gpu' must be a GPU model and count, found %s", term_desc(c, t));
            diag_help(g, "for example: gpu = H100_80GB x 8 (or gpu = none for CPU-only nodes)");
        } else if (!find_gpu(c, t->str, NULL)) {
            for (int i = 0; i < c->nsyms && n < 32; i++)
                if (c->syms[i].kind == K_GPU) names[n++] = c->syms[i].name;
            const char *dym = did_you_mean(t->str, names, n);
            Diag *g = dym ? diag_error(c->d, t->at, "unknown GPU '%s'; did you mean '%s'?", t->str, dym)
                          : diag_error(c->d, t->at, "unknown GPU '%s'", t->str);
            diag_note(g, "known GPUs: %s", join_names(c->a, names, n));
        } else if (v->nterms == 1) {
            Diag *g = diag_error(c->d, t->at, "'gpu' needs a count per node");
            diag_help(g, "write gpu = %s x 8", t->str);
        } else if (count_word && count_word[0] == 'x' && count_word[1] && v->nterms == 2 &&
                   strspn(count_word + 1, "0123456789") == strlen(count_word + 1)) {
            int k = atoi(count_word + 1);
            if (k < 1 || k > 16 || strlen(count_word) > 3) diag_error(c->d, v->terms[1]->at, "GPUs per node must be between 1 and 16");
            else { cl->gpu = find_gpu(c, t->str, &cl->gpu_amd); cl->gpus_per_node = k; }
        } else if (!count_word || strcmp(count_word, "x") != 0) {
            Diag *g = diag_error(c->d, v->terms[1]->at, "expected 'x' and a count after the GPU name");
            diag_help(g, "write gpu = %s x 8", t->str);
        } else if (v->nterms < 3) {
            diag_error(c->d, v->terms[1]->at, "expected a GPU count after 'x'");
        } else if (want_terms(c, e, 3, "a GPU model and count")) {
            const Term *k = v->terms[2];
            if (k->kind != TERM_INT) diag_error(c->d, k->at, "GPU count must be an integer, found %s", term_desc(c, k));
            else if (k->ival < 1 || k->ival > 16) diag_error(c->d, k->at, "GPUs per node must be between 1 and 16, found %s", k->text);
            else { cl->gpu = find_gpu(c, t->str, &cl->gpu_amd); cl->gpus_per_node = (int)k->ival; }
        }
    } else if (e) {
        want_terms(c, e, 1, "a GPU model and count");
    }
    /* A node count instead of a hostlist: CPUs and memory are the admin's, optional. */
    bool minimal = cl->minimal;
    if (!minimal) require(c, &s, PLAN_KEY(CLUSTER, cpus), "224");   /* read by its row */
    if ((e = minimal ? find(&s, PLAN_KEY(CLUSTER, memory)) : require(c, &s, PLAN_KEY(CLUSTER, memory), "2 TiB"))) {
        cl->memory_at = e->at;
        if (get_size(c, e, &cl->memory_bytes) && cl->memory_bytes < (1u << 20)) {
            diag_error(c->d, e->value->at, "node memory must be at least 1 MiB");
            cl->memory_bytes = 0;
        }
    }
    check_cluster_fabric(c, &s, cl);
    check_cluster_k8s(c, it, &s, cl);
    check_site(c, it, &s, &cl->site);
    report_missing(c, &s);
    if (minimal && !s.broken) {
        Diag *g = diag_note_at(c->d, cl->hostlist_at, "cluster '%s' is declared by node count: no slurm.conf or "
                               "gres.conf snippet is written, the site's slurm.conf is used as it is", cl->name);
        diag_note(g, "not checked: node names%s%s, and that partition '%s' and GPU GRES '%s' exist as the plan says",
                  cl->cpus ? "" : ", CPUs per node (cpus_per_task defaults to 1)",
                  cl->memory_bytes ? "" : ", memory per node (mem and the host-memory estimate)",
                  cl->partition ? cl->partition : "?",
                  !cl->gpu ? "none" : cl->site.gres == 2 ? "gpu (untyped)" : cl->site.gres == 1 ? cl->site.gres_type
                                                                                               : cl->gpu->gres_type);
    }
}

/* ---- profile NAME { } : a site profile (docs/estimator.md, "Site profiles") ---- */

/* The profile keys contract/plan_keys.h's rows read (check_row_keys). */
static const RowRead profile_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanProfile, type, row, field),
    PLAN_KEYS_PROFILE(X)
#undef X
};

void check_profile(Checker *c, const Item *it, PlanProfile *p)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, PKB_PROFILE);
    Entry *e;
    bool ok[PLAN_KEYS_MAX];
    check_row_keys(c, &s, PKB_PROFILE, profile_reads, p, ok);
    p->backend_set = ok[PLAN_KEY_INDEX(PROFILE, backend)];   /* no default: the estimator's own */
    p->step_overhead_s = -1;
    if ((e = find(&s, PLAN_KEY(PROFILE, mfu))) && e->value) {
        p->mfu_at = e->at;
        if (is_percent(e->value)) {
            if (get_percent(c, e, 100, &p->mfu) && p->mfu == 0) { diag_error(c->d, e->value->at, "'mfu' must be above 0%%"); p->mfu = 0; }
        } else {
            get_number(c, e, 0, true, 1, &p->mfu);
        }
    } else if (e) {
        want_terms(c, e, 1, "a fraction or percentage");
    }
    if ((e = find(&s, PLAN_KEY(PROFILE, step_overhead)))) {
        p->step_overhead_at = e->at;
        double x;
        if (get_duration(c, e, &x)) {
            if (x > 3600) diag_error(c->d, e->value->at, "'step_overhead' must be at most 1 h per optimizer step");
            else p->step_overhead_s = x;
        }
    }
    struct { const char *key; double *out; SrcRange *at; } bws[] = {
        {PLAN_KEY(PROFILE, intra_node_bw), &p->intra_bytes_per_s, &p->intra_at},
        {PLAN_KEY(PROFILE, inter_node_bw), &p->inter_bytes_per_s, &p->inter_at}};
    for (int i = 0; i < 2; i++) {
        if (!(e = find(&s, bws[i].key)) || !e->value) continue;
        *bws[i].at = e->at;
        const Value *val = e->value;
        if (val->nterms > 2) { want_terms(c, e, 2, "a bandwidth"); continue; }
        get_rate(c, e, val->terms[0], val->nterms == 2 ? val->terms[1] : NULL, byte_rate_units, bit_rate_units,
                 "40 GBps", bws[i].out);
    }
    if ((e = find(&s, PLAN_KEY(PROFILE, from)))) p->from = get_string_list(c, e, &p->nfrom, "a list of run directories", NULL);
    if (!p->mfu_at.start.file && !p->step_overhead_at.start.file && !p->intra_at.start.file && !p->inter_at.start.file) {
        Diag *g = diag_error(c->d, it->name_at, "profile '%s' sets none of mfu, step_overhead, intra_node_bw, inter_node_bw",
                             p->name);
        diag_help(g, "llmc calibrate RUN_DIR... -o PROFILE.llm writes one from measured runs");
    }
}
