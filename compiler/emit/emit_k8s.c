/* emit_k8s.c — the artifacts of a cluster whose Slurm runs in Kubernetes
 * (`slurm = slinky "V"` or `slurm = soperator "V"`), in place of the
 * slurm.conf/gres.conf snippets: what each operator consumes.
 *
 *   Slinky (SchedMD slurm-operator, API slinky.slurm.net/v1beta1):
 *     slinky-values.yaml   values for its `slurm` Helm chart: the node set,
 *                          the partition, gres.conf and GresTypes
 *     slinky-nodeset.yaml  the NodeSet the chart renders from those values
 *   Soperator (Nebius, API slurm.nebius.ai/v1alpha1):
 *     soperator-nodeset.yaml    the NodeSet of the cluster's workers
 *     soperator-partition.yaml  a merge patch of the SlurmCluster: the partition
 *
 * Every figure comes from the JobLayout and the cluster block, so the GRES
 * type and count, node names and partition are the ones the batch script asks
 * for. YAML through libyaml, deterministic; tests/emitters/k8s_check.py
 * validates each file against the operators' recorded CRD schemas. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "emit_internal.h"
#include "emit_yaml.h"

/* One document, after the comment lines `header`; body writes its top mapping. */
typedef void (*Body)(Yaml *, const JobLayout *);
typedef struct { const JobLayout *L; Body body; } K8sCtx;

static void k8s_document(Yaml *y, const void *ctx)
{
    const K8sCtx *c = ctx;
    c->body(y, c->L);
}

static char *document(const JobLayout *L, const char *header, Body body, char *err, size_t errlen)
{
    K8sCtx c = {L, body};
    return yw_document(header, true, k8s_document, &c, err, errlen);
}

/* ---- Kubernetes quantities ---- */

/* Bytes as a quantity, exactly: the largest binary suffix that divides it
 * ("2Ti", "1800Gi") or the largest decimal one ("1500G" for 1.5 TB), whichever
 * is shorter (binary on a tie), else plain bytes. */
void k8s_bytes_quantity(uint64_t b, char *out, size_t n)
{
    static const char *const bin[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
    static const char *const dec[] = {"E", "P", "T", "G", "M", "k"};
    char a[48], d[48];
    snprintf(a, sizeof a, "%llu", (unsigned long long)b);
    snprintf(d, sizeof d, "%llu", (unsigned long long)b);
    for (int i = 0; i < 6; i++) {
        uint64_t unit = 1ULL << (10 * (6 - i));
        if (b >= unit && b % unit == 0) { snprintf(a, sizeof a, "%llu%s", (unsigned long long)(b / unit), bin[i]); break; }
    }
    uint64_t unit = 1000000000000000000ULL;
    for (int i = 0; i < 6; i++, unit /= 1000)
        if (b >= unit && b % unit == 0) { snprintf(d, sizeof d, "%llu%s", (unsigned long long)(b / unit), dec[i]); break; }
    snprintf(out, n, "%s", strlen(d) < strlen(a) ? d : a);
}

/* Millicores as a quantity: "224" for whole CPUs, else "120500m". */
void k8s_cpu_quantity(int64_t milli, char *out, size_t n)
{
    if (milli % 1000 == 0) snprintf(out, n, "%lld", (long long)(milli / 1000));
    else snprintf(out, n, "%lldm", (long long)milli);
}

/* ---- shared pieces ---- */

static const char *operator_name(const PlanCluster *c)
{
    return c->slurm == SLURM_SLINKY ? "Slinky slurm-operator" : "Soperator";
}

/* Split an image reference into repository and tag (digest references stay whole). */
static void image_split(const char *img, char *repo, size_t nrepo, const char **tag)
{
    const char *slash = strrchr(img, '/');
    const char *colon = strrchr(slash ? slash : img, ':');
    if (strchr(img, '@') || !colon) { snprintf(repo, nrepo, "%s", img); *tag = NULL; return; }
    snprintf(repo, nrepo, "%.*s", (int)(colon - img), img);
    *tag = colon + 1;
}

/* cpu, memory, the GPUs and the plan's RDMA resource (requests = limits for
 * the extended resources, as Kubernetes requires). */
static void resources_map(Yaml *y, const JobLayout *L, int64_t milli, uint64_t mem)
{
    const PlanK8s *k = L->cluster->k8s;
    char q[48];
    k8s_cpu_quantity(milli, q, sizeof q);
    yw_str(y, "cpu", q);
    k8s_bytes_quantity(mem, q, sizeof q);
    yw_str(y, "memory", q);
    if (L->gpu) {
        snprintf(q, sizeof q, "%d", L->gpus_per_node);
        yw_str(y, "nvidia.com/gpu", q);
    }
    if (k->rdma_resource) {
        snprintf(q, sizeof q, "%d", k->rdma_count);
        yw_str(y, k->rdma_resource, q);
    }
}

static void node_selector(Yaml *y, const PlanK8s *k)
{
    if (k->nnode_selector == 0) return;
    yw_kmap(y, "nodeSelector");
    for (int i = 0; i < k->nnode_selector; i++) {
        const char *s = k->node_selector[i];
        const char *eq = strchr(s, '=');
        char kbuf[320];
        snprintf(kbuf, sizeof kbuf, "%.*s", (int)(eq - s), s);
        yw_str(y, kbuf, eq + 1);
    }
    yw_map_end(y);
}

static void tolerations(Yaml *y, const PlanK8s *k)
{
    if (k->ntolerations == 0) return;
    yw_kseq(y, "tolerations");
    for (int i = 0; i < k->ntolerations; i++) {
        const PlanToleration *t = &k->tolerations[i];
        yw_map_begin(y);
        yw_str(y, "key", t->key);
        yw_word(y, "operator", t->value ? "Equal" : "Exists");
        if (t->value) yw_str(y, "value", t->value);
        yw_word(y, "effect", t->effect);
        yw_map_end(y);
    }
    yw_seq_end(y);
}

static void volume_source(Yaml *y, const PlanVolume *v)
{
    if (v->pvc) {
        yw_kmap(y, "persistentVolumeClaim");
        yw_str(y, "claimName", v->source);
        yw_map_end(y);
    } else {
        yw_kmap(y, "hostPath");
        yw_str(y, "path", v->source);
        yw_word(y, "type", "Directory");
        yw_map_end(y);
    }
}

static char *gres_line(const JobLayout *L)
{
    char *s = NULL;
    if (!L->gpu) return strdup("");
    if (asprintf(&s, "Gres=gpu:%s:%d", L->gres_type, L->gpus_per_node) < 0) return NULL;
    return s;
}

static char *gres_conf_line(const JobLayout *L)
{
    char *s = NULL;
    char files[32];
    if (L->gpus_per_node == 1) snprintf(files, sizeof files, "/dev/nvidia0");
    else snprintf(files, sizeof files, "/dev/nvidia[0-%d]", L->gpus_per_node - 1);
    if (asprintf(&s, "Name=gpu Type=%s File=%s", L->gres_type, files) < 0) return NULL;
    return s;
}

/* The partition's line: the site's limit (partition_max_time), never one
 * job's time, and not the default partition (the job scripts name it). */
static char *partition_config(const JobLayout *L)
{
    const PlanK8s *k = L->cluster->k8s;
    char *s = NULL;
    if (k->partition_max_seconds <= 0) return strdup("State=UP");
    Buf t;
    buf_init(&t);
    slurm_time(&t, k->partition_max_seconds);
    if (asprintf(&s, "MaxTime=%s State=UP", t.data ? t.data : "UNLIMITED") < 0) s = NULL;
    buf_free(&t);
    return s;
}

static char *header(const JobLayout *L, const char *what, const char *how)
{
    const PlanCluster *c = L->cluster;
    char *s = NULL;
    if (asprintf(&s, "# %s for cluster %s (%s %s), written by llmc.\n# %s\n", what, c->name, operator_name(c),
                 c->slurm_version, how) < 0)
        return NULL;
    return s;
}

/* ---- Slinky ---- */

/* The slurmd container, as the chart's nodeset.slurmd and the NodeSet's spec.slurmd. */
static void slinky_slurmd(Yaml *y, const JobLayout *L, bool cr)
{
    const PlanK8s *k = L->cluster->k8s;
    if (cr) yw_str(y, "name", "slurmd");
    yw_str(y, "image", k->image);
    yw_kmap(y, "resources");
    yw_kmap(y, "limits");
    resources_map(y, L, (int64_t)L->cluster->cpus * 1000, k->memory_limit);
    yw_map_end(y);
    yw_kmap(y, "requests");
    resources_map(y, L, k->cpu_request_milli, k->memory_request);
    yw_map_end(y);
    yw_map_end(y);
    yw_kseq(y, "volumeMounts");
    yw_map_begin(y);   /* NCCL's and the data loaders' shared memory */
    yw_str(y, "name", "shm");
    yw_str(y, "mountPath", "/dev/shm");
    yw_map_end(y);
    for (int i = 0; i < k->nvolumes; i++) {
        yw_map_begin(y);
        yw_str(y, "name", k->volumes[i].name);
        yw_str(y, "mountPath", k->volumes[i].mount);
        yw_map_end(y);
    }
    yw_seq_end(y);
}

static void slinky_pod(Yaml *y, const JobLayout *L, bool cr)
{
    const PlanK8s *k = L->cluster->k8s;
    if (cr) {
        char host[80];
        snprintf(host, sizeof host, "%s-", k->node_set);
        yw_str(y, "hostname", host);
    }
    if (k->host_network) {   /* the nodes' RDMA/IB interfaces for NCCL; DNS of the cluster still */
        yw_bool(y, "hostNetwork", true);
        yw_word(y, "dnsPolicy", "ClusterFirstWithHostNet");
    }
    node_selector(y, k);
    tolerations(y, k);
    char q[48];
    k8s_bytes_quantity(k->shm_bytes, q, sizeof q);
    yw_kseq(y, "volumes");
    yw_map_begin(y);
    yw_str(y, "name", "shm");
    yw_kmap(y, "emptyDir");
    yw_word(y, "medium", "Memory");
    yw_str(y, "sizeLimit", q);
    yw_map_end(y);
    yw_map_end(y);
    for (int i = 0; i < k->nvolumes; i++) {
        yw_map_begin(y);
        yw_str(y, "name", k->volumes[i].name);
        volume_source(y, &k->volumes[i]);
        yw_map_end(y);
    }
    yw_seq_end(y);
}

static void slinky_values_body(Yaml *y, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    const PlanK8s *k = c->k8s;
    char *gres = gres_line(L), *part = partition_config(L);
    if (L->gpu) {
        char *gl = gres_conf_line(L);
        yw_kmap(y, "configFiles");
        char *text = NULL;
        if (gl && asprintf(&text, "%s\n", gl) >= 0) { yw_str(y, "gres.conf", text); free(text); }
        else y->failed = true;
        free(gl);
        yw_map_end(y);
        yw_kmap(y, "controller");
        yw_str(y, "extraConf", "GresTypes=gpu");
        yw_map_end(y);
    }
    yw_kmap(y, "nodesets");
    yw_kmap(y, k->node_set);
    yw_bool(y, "enabled", true);
    yw_word(y, "scalingMode", "StatefulSet");
    yw_int(y, "replicas", c->nhosts);
    yw_int(y, "ordinalPadding", 0);
    yw_kmap(y, "slurmd");
    slinky_slurmd(y, L, false);
    yw_map_end(y);
    if (gres && gres[0]) yw_str(y, "extraConf", gres);
    yw_kmap(y, "partition");
    yw_bool(y, "enabled", false);
    yw_map_end(y);
    yw_kmap(y, "podSpec");
    slinky_pod(y, L, false);
    yw_map_end(y);
    yw_map_end(y);
    yw_map_end(y);
    yw_kmap(y, "partitions");
    yw_kmap(y, "all");
    yw_bool(y, "enabled", false);
    yw_map_end(y);
    yw_kmap(y, c->partition);
    yw_bool(y, "enabled", true);
    yw_kseq(y, "nodesets");
    yw_value(y, k->node_set, true);
    yw_seq_end(y);
    yw_str(y, "config", part);
    yw_map_end(y);
    yw_map_end(y);
    if (!gres || !part) y->failed = true;
    free(gres);
    free(part);
}

static void slinky_nodeset_body(Yaml *y, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    const PlanK8s *k = c->k8s;
    char name[200];
    snprintf(name, sizeof name, "%s-worker-%s", k->cluster_name, k->node_set);
    char *gres = gres_line(L);
    yw_word(y, "apiVersion", "slinky.slurm.net/v1beta1");
    yw_word(y, "kind", "NodeSet");
    yw_kmap(y, "metadata");
    yw_str(y, "name", name);
    yw_str(y, "namespace", k->namespace_);
    yw_map_end(y);
    yw_kmap(y, "spec");
    yw_kmap(y, "controllerRef");
    yw_str(y, "name", k->cluster_name);
    yw_map_end(y);
    if (gres && gres[0]) yw_str(y, "extraConf", gres);
    yw_kmap(y, "partition");
    yw_bool(y, "enabled", false);
    yw_map_end(y);
    yw_word(y, "scalingMode", "StatefulSet");
    yw_int(y, "replicas", c->nhosts);
    yw_int(y, "ordinalPadding", 0);
    yw_kmap(y, "slurmd");
    slinky_slurmd(y, L, true);
    yw_map_end(y);
    yw_kmap(y, "template");
    yw_kmap(y, "spec");
    slinky_pod(y, L, true);
    yw_map_end(y);
    yw_map_end(y);
    yw_map_end(y);
    if (!gres) y->failed = true;
    free(gres);
}

/* ---- Soperator ---- */

static void image_obj(Yaml *y, const char *img)
{
    char repo[1024];
    const char *tag;
    image_split(img, repo, sizeof repo, &tag);
    yw_kmap(y, "image");
    yw_str(y, "repository", repo);
    if (tag) yw_str(y, "tag", tag);
    yw_word(y, "pullPolicy", "IfNotPresent");
    yw_map_end(y);
}

static void soperator_nodeset_body(Yaml *y, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    const PlanK8s *k = c->k8s;
    char *gres = gres_line(L);
    yw_word(y, "apiVersion", "slurm.nebius.ai/v1alpha1");
    yw_word(y, "kind", "NodeSet");
    yw_kmap(y, "metadata");
    yw_str(y, "name", k->node_set);
    yw_str(y, "namespace", k->namespace_);
    yw_map_end(y);
    yw_kmap(y, "spec");
    yw_str(y, "clusterName", k->cluster_name);
    yw_int(y, "replicas", c->nhosts);
    yw_word(y, "updateStrategy", "rollingUpdate");
    yw_kmap(y, "gpu");
    yw_bool(y, "enabled", L->gpu);
    if (L->gpu) {
        yw_kmap(y, "nvidia");
        yw_bool(y, "gdrCopyEnabled", false);
        yw_map_end(y);
    }
    yw_map_end(y);
    node_selector(y, k);
    tolerations(y, k);
    yw_kmap(y, "nodeConfig");
    if (gres && gres[0]) yw_str(y, "static", gres);
    if (L->gpu) {
        char *gl = gres_conf_line(L);
        yw_kseq(y, "gresConfig");
        yw_value(y, gl ? gl : "", true);
        yw_seq_end(y);
        if (!gl) y->failed = true;
        free(gl);
    }
    yw_map_end(y);
    yw_kmap(y, "slurmd");
    image_obj(y, k->image);
    yw_kmap(y, "resources");
    resources_map(y, L, k->cpu_request_milli, k->memory_request);
    yw_map_end(y);
    yw_kmap(y, "volumes");
    char shm[48];
    k8s_bytes_quantity(k->shm_bytes, shm, sizeof shm);
    yw_str(y, "sharedMemorySize", shm);   /* Soperator mounts /dev/shm of this size itself */
    yw_kmap(y, "spool");
    yw_kmap(y, "emptyDir");
    yw_map_end(y);
    yw_map_end(y);
    yw_kmap(y, "jail");
    yw_kmap(y, "persistentVolumeClaim");
    yw_str(y, "claimName", k->jail);
    yw_map_end(y);
    yw_map_end(y);
    if (k->nvolumes) {
        /* jobs run inside the jail: the plan's paths are mounts into it */
        yw_kseq(y, "jailSubMounts");
        for (int i = 0; i < k->nvolumes; i++) {
            yw_map_begin(y);
            yw_str(y, "name", k->volumes[i].name);
            yw_str(y, "mountPath", k->volumes[i].mount);
            yw_bool(y, "readOnly", false);
            yw_kmap(y, "volumeSource");
            volume_source(y, &k->volumes[i]);
            yw_map_end(y);
            yw_map_end(y);
        }
        yw_seq_end(y);
    }
    yw_map_end(y);
    yw_map_end(y);
    yw_kmap(y, "munge");
    image_obj(y, k->munge_image);
    yw_kmap(y, "resources");   /* Soperator's chart defaults for the munge sidecar */
    yw_str(y, "cpu", "2000m");
    yw_str(y, "memory", "4Gi");
    yw_map_end(y);
    yw_map_end(y);
    yw_map_end(y);
    if (!gres) y->failed = true;
    free(gres);
}

static void soperator_partition_body(Yaml *y, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    char *part = partition_config(L);
    yw_kmap(y, "spec");
    yw_kmap(y, "partitionConfiguration");
    yw_word(y, "configType", "structured");
    yw_kseq(y, "partitions");
    yw_map_begin(y);
    yw_str(y, "name", c->partition);
    yw_kseq(y, "nodeSetRefs");
    yw_value(y, c->k8s->node_set, true);
    yw_seq_end(y);
    yw_str(y, "config", part);
    yw_map_end(y);
    yw_seq_end(y);
    yw_map_end(y);
    yw_map_end(y);
    if (!part) y->failed = true;
    free(part);
}

/* ---- the files ---- */

static const K8sArtifact slinky_files[] = {
    {"slinky-values.yaml", "Helm values for the Slinky `slurm` chart",
     "helm install slurm oci://ghcr.io/slinkyproject/charts/slurm -f slinky-values.yaml (docs/artifacts.md)", slinky_values_body},
    {"slinky-nodeset.yaml", "The NodeSet the chart renders from slinky-values.yaml",
     "kubectl apply -f slinky-nodeset.yaml, only when the node set is managed without the chart (docs/artifacts.md)", slinky_nodeset_body},
};
static const K8sArtifact soperator_files[] = {
    {"soperator-nodeset.yaml", "The Soperator NodeSet of the GPU workers", "kubectl apply -f soperator-nodeset.yaml (docs/artifacts.md)",
     soperator_nodeset_body},
    {"soperator-partition.yaml", "Merge patch of the SlurmCluster: the partition of the node set",
     "kubectl patch slurmcluster NAME --type merge --patch-file soperator-partition.yaml (docs/artifacts.md)", soperator_partition_body},
};

int k8s_artifacts(const PlanCluster *c, const K8sArtifact **out)
{
    if (!c || !c->k8s || c->slurm == SLURM_HOSTS) { *out = NULL; return 0; }
    if (c->slurm == SLURM_SLINKY) { *out = slinky_files; return 2; }
    *out = soperator_files;
    return 2;
}

char *emit_k8s(const JobLayout *L, const K8sArtifact *a, char *err, size_t errlen)
{
    if (!L->cluster->k8s || !L->cluster->k8s->node_set || !L->cluster->k8s->image ||
        (L->cluster->slurm == SLURM_SOPERATOR && (!L->cluster->k8s->munge_image || !L->cluster->k8s->jail))) {
        snprintf(err, errlen, "cluster '%s': its kubernetes block is incomplete", L->cluster->name);
        return NULL;
    }
    char *h = header(L, a->what, a->how);
    if (!h) { snprintf(err, errlen, "out of memory"); return NULL; }
    char *text = document(L, h, (Body)a->body, err, errlen);
    free(h);
    return text;
}
