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

typedef struct {
    yaml_emitter_t em;
    Buf out;
    bool failed;
} Yaml;

static int to_buf(void *data, unsigned char *buffer, size_t size)
{
    Buf *b = data;
    buf_put(b, (const char *)buffer, size);
    return !b->failed;
}

static void emit_ev(Yaml *y, yaml_event_t *ev)
{
    if (y->failed) { yaml_event_delete(ev); return; }
    if (!yaml_emitter_emit(&y->em, ev)) y->failed = true;
}

static void scalar(Yaml *y, const char *text, bool quoted)
{
    yaml_event_t ev;
    yaml_scalar_style_t style = quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text), !quoted, quoted, style)) {
        y->failed = true;
        return;
    }
    emit_ev(y, &ev);
}

static void key(Yaml *y, const char *k) { scalar(y, k, false); }
static void kstr(Yaml *y, const char *k, const char *v) { key(y, k); scalar(y, v ? v : "", true); }
static void kword(Yaml *y, const char *k, const char *v) { key(y, k); scalar(y, v, false); }
static void kint(Yaml *y, const char *k, long long v)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", v);
    key(y, k);
    scalar(y, t, false);
}
static void kbool(Yaml *y, const char *k, bool v) { key(y, k); scalar(y, v ? "true" : "false", false); }

static void map_begin(Yaml *y)
{
    yaml_event_t ev;
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    emit_ev(y, &ev);
}
static void map_end(Yaml *y)
{
    yaml_event_t ev;
    yaml_mapping_end_event_initialize(&ev);
    emit_ev(y, &ev);
}
static void seq_begin(Yaml *y)
{
    yaml_event_t ev;
    yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
    emit_ev(y, &ev);
}
static void seq_end(Yaml *y)
{
    yaml_event_t ev;
    yaml_sequence_end_event_initialize(&ev);
    emit_ev(y, &ev);
}
static void kmap(Yaml *y, const char *k) { key(y, k); map_begin(y); }
static void kseq(Yaml *y, const char *k) { key(y, k); seq_begin(y); }

/* One document, after the comment lines `header`; body writes its top mapping. */
typedef void (*Body)(Yaml *, const JobLayout *);

static char *document(const JobLayout *L, const char *header, Body body, char *err, size_t errlen)
{
    Yaml y;
    memset(&y, 0, sizeof y);
    buf_init(&y.out);
    buf_puts(&y.out, header);
    if (!yaml_emitter_initialize(&y.em)) { buf_free(&y.out); snprintf(err, errlen, "libyaml: cannot initialise the emitter"); return NULL; }
    yaml_emitter_set_output(&y.em, to_buf, &y.out);
    yaml_emitter_set_unicode(&y.em, 1);
    yaml_emitter_set_width(&y.em, -1);
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit_ev(&y, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 0);
    emit_ev(&y, &ev);
    map_begin(&y);
    body(&y, L);
    map_end(&y);
    yaml_document_end_event_initialize(&ev, 1);
    emit_ev(&y, &ev);
    yaml_stream_end_event_initialize(&ev);
    emit_ev(&y, &ev);
    bool failed = y.failed || y.out.failed;
    if (failed) snprintf(err, errlen, "libyaml: %s", y.em.problem ? y.em.problem : "out of memory writing the YAML");
    yaml_emitter_delete(&y.em);
    if (failed) { buf_free(&y.out); return NULL; }
    return y.out.data;
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

static void resources_map(Yaml *y, const JobLayout *L, int64_t milli, uint64_t mem, bool gpu_key_full)
{
    char q[48];
    k8s_cpu_quantity(milli, q, sizeof q);
    kstr(y, "cpu", q);
    k8s_bytes_quantity(mem, q, sizeof q);
    kstr(y, "memory", q);
    if (L->gpu && gpu_key_full) {
        snprintf(q, sizeof q, "%d", L->gpus_per_node);
        kstr(y, "nvidia.com/gpu", q);
    }
}

static void node_selector(Yaml *y, const PlanK8s *k)
{
    if (k->nnode_selector == 0) return;
    kmap(y, "nodeSelector");
    for (int i = 0; i < k->nnode_selector; i++) {
        const char *s = k->node_selector[i];
        const char *eq = strchr(s, '=');
        char kbuf[320];
        snprintf(kbuf, sizeof kbuf, "%.*s", (int)(eq - s), s);
        kstr(y, kbuf, eq + 1);
    }
    map_end(y);
}

static void tolerations(Yaml *y, const PlanK8s *k)
{
    if (k->ntolerations == 0) return;
    kseq(y, "tolerations");
    for (int i = 0; i < k->ntolerations; i++) {
        const PlanToleration *t = &k->tolerations[i];
        map_begin(y);
        kstr(y, "key", t->key);
        kword(y, "operator", t->value ? "Equal" : "Exists");
        if (t->value) kstr(y, "value", t->value);
        kword(y, "effect", t->effect);
        map_end(y);
    }
    seq_end(y);
}

static void volume_source(Yaml *y, const PlanVolume *v)
{
    if (v->pvc) {
        kmap(y, "persistentVolumeClaim");
        kstr(y, "claimName", v->source);
        map_end(y);
    } else {
        kmap(y, "hostPath");
        kstr(y, "path", v->source);
        kword(y, "type", "Directory");
        map_end(y);
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

static char *partition_config(const JobLayout *L)
{
    Buf t;
    buf_init(&t);
    slurm_time(&t, L->job->time_seconds);
    char *s = NULL;
    if (asprintf(&s, "Default=YES MaxTime=%s State=UP", t.data ? t.data : "UNLIMITED") < 0) s = NULL;
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
    if (cr) kstr(y, "name", "slurmd");
    kstr(y, "image", k->image);
    kmap(y, "resources");
    kmap(y, "limits");
    resources_map(y, L, (int64_t)L->cluster->cpus * 1000, L->cluster->memory_bytes, true);
    map_end(y);
    kmap(y, "requests");
    resources_map(y, L, k->cpu_request_milli, k->memory_request, true);
    map_end(y);
    map_end(y);
    if (k->nvolumes) {
        kseq(y, "volumeMounts");
        for (int i = 0; i < k->nvolumes; i++) {
            map_begin(y);
            kstr(y, "name", k->volumes[i].name);
            kstr(y, "mountPath", k->volumes[i].mount);
            map_end(y);
        }
        seq_end(y);
    }
}

static void slinky_pod(Yaml *y, const JobLayout *L, bool cr)
{
    const PlanK8s *k = L->cluster->k8s;
    if (cr) {
        char host[80];
        snprintf(host, sizeof host, "%s-", k->node_set);
        kstr(y, "hostname", host);
    }
    node_selector(y, k);
    tolerations(y, k);
    if (k->nvolumes) {
        kseq(y, "volumes");
        for (int i = 0; i < k->nvolumes; i++) {
            map_begin(y);
            kstr(y, "name", k->volumes[i].name);
            volume_source(y, &k->volumes[i]);
            map_end(y);
        }
        seq_end(y);
    }
}

static void slinky_values_body(Yaml *y, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    const PlanK8s *k = c->k8s;
    char *gres = gres_line(L), *part = partition_config(L);
    if (L->gpu) {
        char *gl = gres_conf_line(L);
        kmap(y, "configFiles");
        char *text = NULL;
        if (gl && asprintf(&text, "%s\n", gl) >= 0) { kstr(y, "gres.conf", text); free(text); }
        else y->failed = true;
        free(gl);
        map_end(y);
        kmap(y, "controller");
        kstr(y, "extraConf", "GresTypes=gpu");
        map_end(y);
    }
    kmap(y, "nodesets");
    kmap(y, k->node_set);
    kbool(y, "enabled", true);
    kword(y, "scalingMode", "StatefulSet");
    kint(y, "replicas", c->nhosts);
    kint(y, "ordinalPadding", 0);
    kmap(y, "slurmd");
    slinky_slurmd(y, L, false);
    map_end(y);
    if (gres && gres[0]) kstr(y, "extraConf", gres);
    kmap(y, "partition");
    kbool(y, "enabled", false);
    map_end(y);
    kmap(y, "podSpec");
    slinky_pod(y, L, false);
    map_end(y);
    map_end(y);
    map_end(y);
    kmap(y, "partitions");
    kmap(y, "all");
    kbool(y, "enabled", false);
    map_end(y);
    kmap(y, c->partition);
    kbool(y, "enabled", true);
    kseq(y, "nodesets");
    scalar(y, k->node_set, true);
    seq_end(y);
    kstr(y, "config", part);
    map_end(y);
    map_end(y);
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
    kword(y, "apiVersion", "slinky.slurm.net/v1beta1");
    kword(y, "kind", "NodeSet");
    kmap(y, "metadata");
    kstr(y, "name", name);
    kstr(y, "namespace", k->namespace_);
    map_end(y);
    kmap(y, "spec");
    kmap(y, "controllerRef");
    kstr(y, "name", k->cluster_name);
    map_end(y);
    if (gres && gres[0]) kstr(y, "extraConf", gres);
    kmap(y, "partition");
    kbool(y, "enabled", false);
    map_end(y);
    kword(y, "scalingMode", "StatefulSet");
    kint(y, "replicas", c->nhosts);
    kint(y, "ordinalPadding", 0);
    kmap(y, "slurmd");
    slinky_slurmd(y, L, true);
    map_end(y);
    kmap(y, "template");
    kmap(y, "spec");
    slinky_pod(y, L, true);
    map_end(y);
    map_end(y);
    map_end(y);
    if (!gres) y->failed = true;
    free(gres);
}

/* ---- Soperator ---- */

static void image_obj(Yaml *y, const char *img)
{
    char repo[1024];
    const char *tag;
    image_split(img, repo, sizeof repo, &tag);
    kmap(y, "image");
    kstr(y, "repository", repo);
    if (tag) kstr(y, "tag", tag);
    kword(y, "pullPolicy", "IfNotPresent");
    map_end(y);
}

static void soperator_nodeset_body(Yaml *y, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    const PlanK8s *k = c->k8s;
    char *gres = gres_line(L);
    kword(y, "apiVersion", "slurm.nebius.ai/v1alpha1");
    kword(y, "kind", "NodeSet");
    kmap(y, "metadata");
    kstr(y, "name", k->node_set);
    kstr(y, "namespace", k->namespace_);
    map_end(y);
    kmap(y, "spec");
    kstr(y, "clusterName", k->cluster_name);
    kint(y, "replicas", c->nhosts);
    kword(y, "updateStrategy", "rollingUpdate");
    kmap(y, "gpu");
    kbool(y, "enabled", L->gpu);
    if (L->gpu) {
        kmap(y, "nvidia");
        kbool(y, "gdrCopyEnabled", false);
        map_end(y);
    }
    map_end(y);
    node_selector(y, k);
    tolerations(y, k);
    kmap(y, "nodeConfig");
    if (gres && gres[0]) kstr(y, "static", gres);
    if (L->gpu) {
        char *gl = gres_conf_line(L);
        kseq(y, "gresConfig");
        scalar(y, gl ? gl : "", true);
        seq_end(y);
        if (!gl) y->failed = true;
        free(gl);
    }
    map_end(y);
    kmap(y, "slurmd");
    image_obj(y, k->image);
    kmap(y, "resources");
    resources_map(y, L, k->cpu_request_milli, k->memory_request, true);
    map_end(y);
    kmap(y, "volumes");
    kmap(y, "spool");
    kmap(y, "emptyDir");
    map_end(y);
    map_end(y);
    kmap(y, "jail");
    kmap(y, "persistentVolumeClaim");
    kstr(y, "claimName", k->jail);
    map_end(y);
    map_end(y);
    if (k->nvolumes) {
        /* jobs run inside the jail: the plan's paths are mounts into it */
        kseq(y, "jailSubMounts");
        for (int i = 0; i < k->nvolumes; i++) {
            map_begin(y);
            kstr(y, "name", k->volumes[i].name);
            kstr(y, "mountPath", k->volumes[i].mount);
            kbool(y, "readOnly", false);
            kmap(y, "volumeSource");
            volume_source(y, &k->volumes[i]);
            map_end(y);
            map_end(y);
        }
        seq_end(y);
    }
    map_end(y);
    map_end(y);
    kmap(y, "munge");
    image_obj(y, k->munge_image);
    kmap(y, "resources");   /* Soperator's chart defaults for the munge sidecar */
    kstr(y, "cpu", "2000m");
    kstr(y, "memory", "4Gi");
    map_end(y);
    map_end(y);
    map_end(y);
    if (!gres) y->failed = true;
    free(gres);
}

static void soperator_partition_body(Yaml *y, const JobLayout *L)
{
    const PlanCluster *c = L->cluster;
    char *part = partition_config(L);
    kmap(y, "spec");
    kmap(y, "partitionConfiguration");
    kword(y, "configType", "structured");
    kseq(y, "partitions");
    map_begin(y);
    kstr(y, "name", c->partition);
    kseq(y, "nodeSetRefs");
    scalar(y, c->k8s->node_set, true);
    seq_end(y);
    kstr(y, "config", part);
    map_end(y);
    seq_end(y);
    map_end(y);
    map_end(y);
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
