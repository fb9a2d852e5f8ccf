/* check_k8s.c — Slurm on Kubernetes: a cluster's slurm runtime (hosts,
 * Slinky, Soperator) and its kubernetes block (names, volumes, node fit),
 * and the plan's paths against the pods' volumes. */
#include "check_internal.h"

/* The kubernetes keys contract/plan_keys.h's rows read (check_row_keys). */
static const RowRead k8s_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanK8s, type, row, field),
    PLAN_KEYS_KUBERNETES(X)
#undef X
};

/* ---- Slurm on Kubernetes (docs/language.md, "Slurm on Kubernetes") ---- */

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return true;
    return false;
}

/* RFC 1123 label (Kubernetes namespaces, volume and node set names): at most 63
 * of [a-z0-9-], starting and ending alphanumeric. NULL when s is one, else why not. */
static const char *dns_label_why(const char *s)
{
    size_t n = strlen(s);
    if (n == 0) return "it is empty";
    if (n > 63) return "it is longer than 63 characters";
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
            return isupper((unsigned char)s[i]) ? "it has an upper-case letter" : "it has a character other than a-z, 0-9 and '-'";
    if (s[0] == '-' || s[n - 1] == '-') return "it starts or ends with '-'";
    return NULL;
}

/* RFC 1123 subdomain (claim names, label-key prefixes): labels joined by '.', at most 253. */
static const char *dns_subdomain_why(const char *s)
{
    size_t n = strlen(s);
    if (n == 0) return "it is empty";
    if (n > 253) return "it is longer than 253 characters";
    char part[256];
    const char *p = s;
    while (1) {
        const char *dot = strchr(p, '.');
        size_t k = dot ? (size_t)(dot - p) : strlen(p);
        if (k > 63) return "a part between dots is longer than 63 characters";
        memcpy(part, p, k);
        part[k] = 0;
        const char *why = dns_label_why(part);
        if (why) return k == 0 ? "it has an empty part between dots" : why;
        if (!dot) return NULL;
        p = dot + 1;
    }
}

/* A label name or value: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends
 * (a value may be empty). */
static const char *label_name_why(const char *s, bool may_be_empty)
{
    size_t n = strlen(s);
    if (n == 0) return may_be_empty ? NULL : "it is empty";
    if (n > 63) return "it is longer than 63 characters";
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return "it has a character other than letters, digits, '-', '_' and '.'";
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1])) return "it does not start and end with a letter or digit";
    return NULL;
}

/* A label (or taint) key: [PREFIX/]NAME, PREFIX a DNS subdomain. */
static const char *label_key_why(Arena *a, const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash) return label_name_why(s, false);
    const char *why = dns_subdomain_why(arena_printf(a, "%.*s", (int)(slash - s), s));
    if (why) return arena_printf(a, "its prefix is not a DNS subdomain: %s", why);
    return label_name_why(slash + 1, false);
}

static bool get_k8s_string(Checker *c, Scope *s, const char *key, const char **out, SrcRange *at)
{
    Entry *e = find(s, key);
    if (!e) return false;
    if (at) *at = e->at;
    return get_string(c, e, out);
}

/* A list of strings, a list even of one `[ "a" ]` (unlike get_string_list); returns the terms (NULL + error when not one). */
static const Term *get_strict_string_list(Checker *c, const Entry *e, const char *example)
{
    if (!want_terms(c, e, 1, "a list of strings")) return NULL;
    const Term *x = e->value->terms[0];
    if (x->kind != TERM_LIST) {
        Diag *g = diag_error(c->d, x->at, "'%s' must be a list of strings, found %s", e->key, term_desc(c, x));
        diag_help(g, "for example: %s = [%s]", e->key, example);
        return NULL;
    }
    for (int i = 0; i < x->nitems; i++)
        if (x->items[i]->nterms != 1 || x->items[i]->terms[0]->kind != TERM_STRING) {
            diag_error(c->d, x->items[i]->at, "'%s' must be a list of strings, found %s", e->key, value_desc(c, x->items[i]));
            return NULL;
        }
    return x;
}

/* An image reference with a tag or a digest (what runs must not move). */
static bool check_image(Checker *c, const Entry *e, const char *img)
{
    const char *last_slash = strrchr(img, '/');
    const char *tag = strrchr(last_slash ? last_slash : img, ':');
    bool ok = img[0] && !strchr(img, ' ') && !has_control(img);
    if (!ok) {
        diag_error(c->d, e->value->at, "'%s' is not an image reference", e->key);
        return false;
    }
    if (!strchr(img, '@') && (!tag || !tag[1])) {
        Diag *g = diag_error(c->d, e->value->at, "image '%s' has no tag or digest", img);
        diag_note(g, "an image without a tag is whatever ':latest' is when the pod starts");
        diag_help(g, "name the version: %s = \"%s:TAG\"", e->key, img);
        return false;
    }
    return true;
}

static void check_k8s_volumes(Checker *c, const Entry *e, PlanK8s *k)
{
    if (!want_terms(c, e, 1, "a list of volumes")) return;
    const Term *x = e->value->terms[0];
    if (x->kind != TERM_LIST) {
        Diag *g = diag_error(c->d, x->at, "'volumes' must be a list, found %s", term_desc(c, x));
        diag_help(g, "for example: volumes = [pvc \"data-hps\" at \"/mnt/data-hps\"]");
        return;
    }
    k->volumes = arena_alloc(c->a, sizeof(PlanVolume) * (size_t)(x->nitems ? x->nitems : 1));
    int nhost = 0;
    for (int i = 0; i < x->nitems; i++) {
        const Value *v = x->items[i];
        const Term *t = v->terms[0];
        if (t->kind == TERM_IDENT && strcmp(t->str, "pvc") && strcmp(t->str, "host")) {
            Diag *g = diag_error(c->d, t->at, "unknown volume kind '%s'", t->str);
            diag_note(g, "a volume is pvc \"CLAIM\" at \"/PATH\" (a PersistentVolumeClaim) or host \"/DIR\" at \"/PATH\" (a hostPath)");
            continue;
        }
        if (v->nterms != 4 || t->kind != TERM_IDENT ||
            v->terms[1]->kind != TERM_STRING || v->terms[2]->kind != TERM_IDENT || strcmp(v->terms[2]->str, "at") ||
            v->terms[3]->kind != TERM_STRING) {
            Diag *g = diag_error(c->d, v->at, "a volume is pvc \"CLAIM\" at \"/PATH\" or host \"/DIR\" at \"/PATH\", found %s",
                                 value_desc(c, v));
            diag_help(g, "for example: volumes = [pvc \"data-hps\" at \"/mnt/data-hps\"]");
            continue;
        }
        PlanVolume vol = {.pvc = t->str[0] == 'p', .source = v->terms[1]->str, .mount = v->terms[3]->str, .at = v->at};
        const char *why;
        if (vol.pvc && (why = dns_subdomain_why(vol.source))) {
            diag_error(c->d, v->terms[1]->at, "claim name '%s' is not a Kubernetes name: %s", vol.source, why);
            continue;
        }
        if (vol.pvc && strlen(vol.source) > 63) {
            diag_error(c->d, v->terms[1]->at, "claim name '%s' is longer than 63 characters (it is also the pod's volume name)", vol.source);
            continue;
        }
        if (strcmp(vol.mount, "/dev/shm") == 0 || strncmp(vol.mount, "/dev/shm/", 9) == 0) {
            diag_error(c->d, v->terms[3]->at, "/dev/shm is the pod's shared memory (the kubernetes block's 'shm'), not a volume's mount");
            continue;
        }
        if (vol.pvc && strcmp(vol.source, "shm") == 0) {
            diag_error(c->d, v->terms[1]->at, "claim name 'shm' is the pod's /dev/shm volume (the claim is also the pod's volume name)");
            continue;
        }
        if (!vol.pvc && (vol.source[0] != '/' || has_control(vol.source))) {
            diag_error(c->d, v->terms[1]->at, "a host directory must be an absolute path");
            continue;
        }
        if (vol.mount[0] != '/' || strlen(vol.mount) < 2 || has_control(vol.mount) || strstr(vol.mount, "..") ||
            vol.mount[strlen(vol.mount) - 1] == '/') {
            diag_error(c->d, v->terms[3]->at, "a mount path must be an absolute path without '..' or a trailing '/'");
            continue;
        }
        vol.name = vol.pvc ? vol.source : arena_printf(c->a, "host-%d", ++nhost);
        bool dup = false;
        for (int j = 0; j < k->nvolumes; j++)
            if (strcmp(k->volumes[j].mount, vol.mount) == 0 || strcmp(k->volumes[j].name, vol.name) == 0) {
                Diag *g = diag_error(c->d, v->at, "volume '%s' at '%s' repeats a volume name or mount path", vol.name, vol.mount);
                diag_note(g, "first at line %d", k->volumes[j].at.start.line);
                dup = true;
                break;
            }
        if (!dup) k->volumes[k->nvolumes++] = vol;
    }
}

/* `nodes` on Kubernetes: NAME-[0-N], the names the operator gives its pods
 * (and so the Slurm nodes): NAME is the node set. */
static void check_k8s_nodes(Checker *c, PlanCluster *cl, PlanK8s *k)
{
    if (!cl->hostlist || cl->nhosts < 1) return;
    const char *h0 = cl->hosts[0];
    const char *dash = strrchr(h0, '-');
    const char *why = NULL;
    char *name = dash ? arena_printf(c->a, "%.*s", (int)(dash - h0), h0) : NULL;
    if (!name) why = "the hosts are not NAME-0, NAME-1, ...";
    else if ((why = dns_label_why(name))) why = arena_printf(c->a, "node set name '%s' is not a DNS-1123 label: %s", name, why);
    for (int i = 0; !why && i < cl->nhosts; i++) {
        char *want = arena_printf(c->a, "%s-%d", name, i);
        if (strcmp(cl->hosts[i], want) != 0)
            why = arena_printf(c->a, "host %d is '%s', the operator names it '%s'", i + 1, cl->hosts[i], want);
    }
    if (!why && strlen(cl->hosts[cl->nhosts - 1]) > 63)
        why = arena_printf(c->a, "pod name '%s' is longer than 63 characters", cl->hosts[cl->nhosts - 1]);
    if (why) {
        Diag *g = diag_error(c->d, cl->hostlist_at, "on Kubernetes, 'nodes' must be the pods the operator creates: %s", why);
        diag_note(g, "%s names the pods of node set NAME NAME-0 .. NAME-(N-1), and Slurm's nodes after them",
                  cl->slurm == SLURM_SLINKY ? "Slinky" : "Soperator");
        diag_help(g, "for example: nodes = gpu-[0-%d]", cl->nhosts > 1 ? cl->nhosts - 1 : 0);
        return;
    }
    k->node_set = name;
}

/* cluster: slurm = hosts | slinky "VERSION" | soperator "VERSION" (a
 * version is MAJOR.MINOR[.PATCH][-PRE]); e is the slurm entry or NULL. */
static void check_cluster_slurm(Checker *c, const Entry *e, PlanCluster *cl)
{
    if (e && want_terms(c, e, e->value && e->value->nterms >= 2 ? 2 : 1, "hosts, or an operator and its version")) {
        const Term *t = e->value->terms[0];
        cl->slurm_at = e->value->at;
        int r = -1;
        if (t->kind == TERM_IDENT)
            r = plan_vocab_find(slurm_llm_names, t->str);
        if (r < 0) {
            const char *dym = t->kind == TERM_IDENT ? did_you_mean(t->str, slurm_llm_names, SLURM_COUNT) : NULL;
            Diag *g = dym ? diag_error(c->d, t->at, "unknown slurm '%s'; did you mean '%s'?", t->str, dym)
                          : diag_error(c->d, t->at, "'slurm' must be hosts, slinky or soperator, found %s", term_desc(c, t));
            diag_note(g, "slurm = hosts | slinky \"VERSION\" | soperator \"VERSION\"");
        } else if (r == SLURM_HOSTS && e->value->nterms != 1) {
            diag_error(c->d, e->value->terms[1]->at, "'slurm = hosts' takes no version");
        } else if (r != SLURM_HOSTS && (e->value->nterms != 2 || e->value->terms[1]->kind != TERM_STRING)) {
            Diag *g = diag_error(c->d, e->value->nterms > 1 ? e->value->terms[1]->at : t->at,
                                 "'slurm = %s' needs the operator's version as a string", t->str);
            diag_help(g, "for example: slurm = %s \"%s\"", t->str, r == SLURM_SLINKY ? "1.3.0" : "5.0.0");
        } else {
            const char *v = r == SLURM_HOSTS ? NULL : e->value->terms[1]->str;
            bool ok = true;
            if (v) {   /* MAJOR.MINOR[.PATCH][-PRE] */
                const char *p = v;
                int parts = 0;
                while (isdigit((unsigned char)*p)) {
                    while (isdigit((unsigned char)*p)) p++;
                    parts++;
                    if (*p != '.') break;
                    p++;
                }
                if (*p == '-') { p++; ok = *p != 0; for (; *p; p++) ok &= isalnum((unsigned char)*p) || *p == '.'; }
                ok &= parts >= 2 && parts <= 3 && *p == 0;
                if (!ok) {
                    Diag *g = diag_error(c->d, e->value->terms[1]->at, "'%s' is not an operator version", v);
                    diag_help(g, "write MAJOR.MINOR[.PATCH], for example \"%s\"", r == SLURM_SLINKY ? "1.3.0" : "5.0.0");
                }
            }
            if (ok) { cl->slurm = (SlurmRuntime)r; cl->slurm_version = v; }
        }
    }
}

/* kubernetes: namespace and cluster_name (DNS-1123 labels), image, and
 * for Soperator its munge_image and jail claim (refused for Slinky). */
static void check_k8s_names(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k)
{
    const char *why;
    const char *str;
    SrcRange at;
    Entry *x;
    if (get_k8s_string(c, ks, PLAN_KEY(KUBERNETES, namespace), &str, &at)) {
        if ((why = dns_label_why(str)))
            diag_error(c->d, find(ks, PLAN_KEY(KUBERNETES, namespace))->value->at,
                       "namespace '%s' is not a DNS-1123 label: %s", str, why);
        else k->namespace_ = str;
    }
    if (get_k8s_string(c, ks, PLAN_KEY(KUBERNETES, cluster_name), &str, &at)) {
        if ((why = dns_label_why(str)))
            diag_error(c->d, find(ks, PLAN_KEY(KUBERNETES, cluster_name))->value->at,
                       "cluster_name '%s' is not a DNS-1123 label: %s", str, why);
        else k->cluster_name = str;
    }
    if ((x = require(c, ks, PLAN_KEY(KUBERNETES, image), "\"ghcr.io/slinkyproject/slurmd:25.11-ubuntu24.04\"")) && get_string(c, x, &str) &&
        check_image(c, x, str)) {
        k->image = str; k->image_at = x->value->at;
    }
    if (cl->slurm == SLURM_SOPERATOR) {
        if ((x = require(c, ks, PLAN_KEY(KUBERNETES, munge_image), "\"cr.eu-north1.nebius.cloud/soperator/munge:TAG\"")) && get_string(c, x, &str) &&
            check_image(c, x, str)) {
            k->munge_image = str; k->munge_image_at = x->value->at;
        }
        if ((x = require(c, ks, PLAN_KEY(KUBERNETES, jail), "\"jail-pvc\"")) && get_string(c, x, &str)) {
            if ((why = dns_subdomain_why(str))) diag_error(c->d, x->value->at, "claim name '%s' is not a Kubernetes name: %s", str, why);
            else { k->jail = str; k->jail_at = x->value->at; }
        }
    } else {
        const char *only[] = {PLAN_KEY(KUBERNETES, munge_image), PLAN_KEY(KUBERNETES, jail)};
        for (int i = 0; i < 2; i++)
            if ((x = find(ks, only[i]))) diag_error(c->d, x->key_at, "'%s' is a Soperator setting; Slinky has none", only[i]);
    }
}

/* kubernetes: pool_gpus = INT, the nvidia.com/gpu a node of the pool
 * offers: at least the cluster's GPUs per node, or no slurmd pod is scheduled. */
static void check_k8s_pool_gpus(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k)
{
    Entry *x;
    if (cl->gpu && (x = require(c, ks, PLAN_KEY(KUBERNETES, pool_gpus), "8"))) {
        k->pool_gpus_at = x->value ? x->value->at : x->at;
        if (get_int32_lim(c, x, PL_KEY_K8S_POOL_GPUS, &k->pool_gpus) && cl->gpus_per_node > k->pool_gpus) {
            Diag *g = diag_error(c->d, cl->gpu_at, "%d GPUs per node, but the Kubernetes pool offers %d per node (nvidia.com/gpu)",
                                 cl->gpus_per_node, k->pool_gpus);
            diag_note(g, "pool_gpus = %d at line %d: a slurmd pod asking for nvidia.com/gpu: %d is never scheduled",
                      k->pool_gpus, k->pool_gpus_at.start.line, cl->gpus_per_node);
        }
    } else if (!cl->gpu && (x = find(ks, PLAN_KEY(KUBERNETES, pool_gpus)))) {
        diag_warning(c->d, x->key_at, "'pool_gpus' on a cluster without GPUs is ignored");
    }
}

/* kubernetes: node_selector = ["KEY=VALUE", ...], Kubernetes label
 * keys and values, each key once. */
static void check_k8s_node_selector(Checker *c, Scope *ks, PlanK8s *k)
{
    const char *why;
    Entry *x;
    if ((x = find(ks, PLAN_KEY(KUBERNETES, node_selector)))) {
        const Term *l = get_strict_string_list(c, x, "\"nvidia.com/gpu.present=true\"");
        if (l) {
            k->node_selector = arena_alloc(c->a, sizeof(char *) * (size_t)(l->nitems + 1));
            for (int i = 0; i < l->nitems; i++) {
                const Term *t = l->items[i]->terms[0];
                const char *eq = strchr(t->str, '=');
                if (!eq) {
                    Diag *g = diag_error(c->d, t->at, "a node selector is \"KEY=VALUE\", found \"%s\"", t->str);
                    diag_help(g, "for example: \"nvidia.com/gpu.present=true\"");
                    continue;
                }
                const char *key = arena_printf(c->a, "%.*s", (int)(eq - t->str), t->str);
                if ((why = label_key_why(c->a, key))) { diag_error(c->d, t->at, "label key '%s' is not a Kubernetes label key: %s", key, why); continue; }
                if ((why = label_name_why(eq + 1, true))) { diag_error(c->d, t->at, "label value '%s' is not a Kubernetes label value: %s", eq + 1, why); continue; }
                bool dup = false;
                for (int j = 0; j < k->nnode_selector; j++)
                    dup |= strncmp(k->node_selector[j], t->str, (size_t)(eq - t->str) + 1) == 0;
                if (dup) diag_error(c->d, t->at, "label key '%s' is selected twice", key);
                else k->node_selector[k->nnode_selector++] = t->str;
            }
        }
    }
}

/* kubernetes: tolerations = ["KEY[=VALUE]:EFFECT", ...], as kubectl
 * taint writes taints. */
static void check_k8s_tolerations(Checker *c, Scope *ks, PlanK8s *k)
{
    const char *why;
    Entry *x;
    if ((x = find(ks, PLAN_KEY(KUBERNETES, tolerations)))) {
        const Term *l = get_strict_string_list(c, x, "\"nvidia.com/gpu:NoSchedule\"");
        if (l) {
            k->tolerations = arena_alloc(c->a, sizeof(PlanToleration) * (size_t)(l->nitems + 1));
            for (int i = 0; i < l->nitems; i++) {
                const Term *t = l->items[i]->terms[0];
                const char *colon = strrchr(t->str, ':');
                if (!colon) {
                    Diag *g = diag_error(c->d, t->at, "a toleration is \"KEY[=VALUE]:EFFECT\" (as kubectl taint writes taints), found \"%s\"", t->str);
                    diag_help(g, "for example: \"nvidia.com/gpu:NoSchedule\"");
                    continue;
                }
                int eff = plan_vocab_find(taint_effect_llm_names, colon + 1);
                if (eff < 0) {
                    Diag *g = diag_error(c->d, t->at, "unknown taint effect '%s'", colon + 1);
                    diag_note(g, "effects: %s", join_names(c->a, taint_effect_llm_names, TAINT_EFFECT_COUNT));
                    continue;
                }
                char *kv = arena_printf(c->a, "%.*s", (int)(colon - t->str), t->str);
                char *eq = strchr(kv, '=');
                if (eq) *eq = 0;
                if ((why = label_key_why(c->a, kv))) { diag_error(c->d, t->at, "taint key '%s' is not a Kubernetes key: %s", kv, why); continue; }
                if (eq && (why = label_name_why(eq + 1, true))) { diag_error(c->d, t->at, "taint value '%s' is not a Kubernetes label value: %s", eq + 1, why); continue; }
                k->tolerations[k->ntolerations++] = (PlanToleration){kv, eq ? eq + 1 : NULL, taint_effect_json_names[eff]};
            }
        }
    }
}

/* kubernetes: cpu_request (CPUs, in Kubernetes' 1m steps) and
 * memory_request (at least 1 MiB), each at most the pod's limit: the
 * cluster's cpus and memory. */
static void check_k8s_requests(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k)
{
    Entry *x;
    if ((x = find(ks, PLAN_KEY(KUBERNETES, cpu_request)))) {
        double v;
        if (get_number_lim(c, x, PL_KEY_K8S_CPU_REQUEST, &v)) {
            double m = v * 1000;
            if (fabs(m - llround(m)) > 1e-6) {
                Diag *g = diag_error(c->d, x->value->at, "'cpu_request' is finer than Kubernetes' 1m (a thousandth of a CPU)");
                diag_help(g, "round it to three decimals: %.3f", v);
            } else if (m > (double)cl->cpus * 1000 && cl->cpus) {
                Diag *g = diag_error(c->d, x->value->at, "'cpu_request' %s is more than the node's 'cpus' %d (the limit)", x->value->terms[0]->text, cl->cpus);
                diag_note(g, "the slurmd pod's CPU limit is the cluster's cpus; a request cannot exceed its limit");
            } else {
                k->cpu_request_milli = llround(m); k->cpu_request_at = x->value->at;
            }
        }
    }
    if ((x = find(ks, PLAN_KEY(KUBERNETES, memory_request)))) {
        uint64_t b;
        if (get_size(c, x, &b)) {
            if (b < (1u << 20)) diag_error(c->d, x->value->at, "'memory_request' must be at least 1 MiB");
            else if (cl->memory_bytes && b > cl->memory_bytes) {
                Diag *g = diag_error(c->d, x->value->at, "'memory_request' is more than the node's 'memory' (the limit)");
                diag_note(g, "the slurmd pod's memory limit is the cluster's memory; a request cannot exceed its limit");
            } else if (k->memory_limit && b > k->memory_limit) {
                Diag *g = diag_error(c->d, x->value->at, "'memory_request' is more than the slurmd pod's memory limit, %.1f GiB",
                                     (double)k->memory_limit / (1ull << 30));
                diag_note(g, "the limit is the node's memory less system_reserve (%.1f GiB) for the kubelet and the system",
                          (double)k->system_reserve / (1ull << 30));
            } else { k->memory_request = b; k->memory_request_at = x->value->at; }
        }
    }
}

/* The memory a Kubernetes node keeps from its pods by default: GKE's
 * reservation for the kubelet and the system (25% of the first 4 GiB, 20% of
 * the next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB) plus
 * the kubelet's 100 MiB eviction threshold; rounded up to a whole GiB. */
static uint64_t k8s_default_reserve(uint64_t mem)
{
    static const struct { double upto_gib, share; } tier[] = {{4, 0.25}, {8, 0.20}, {16, 0.10}, {128, 0.06}, {1e18, 0.02}};
    double gib = (double)mem / (1ull << 30), r = 100.0 / 1024, from = 0;
    for (size_t i = 0; i < sizeof tier / sizeof *tier && gib > from; i++) {
        double upto = gib < tier[i].upto_gib ? gib : tier[i].upto_gib;
        r += (upto - from) * tier[i].share;
        from = tier[i].upto_gib;
    }
    return (uint64_t)ceil(r) << 30;
}

/* kubernetes: system_reserve (the node's memory its pods may not use; the
 * pod's limit is memory less it, in whole GiB), shm (/dev/shm, at most the
 * limit; default half of it), host_network (Slinky), rdma = "RESOURCE=COUNT"
 * (an extended resource such as rdma/ib or nvidia.com/hostdev) and
 * partition_max_time (the partition's MaxTime: the site's, not a job's). */
static void check_k8s_node_fit(Checker *c, Scope *ks, const PlanCluster *cl, PlanK8s *k, const bool *ok)
{
    Entry *x;
    uint64_t mem = cl->memory_bytes;
    k->system_reserve = k8s_default_reserve(mem);
    if ((x = find(ks, PLAN_KEY(KUBERNETES, system_reserve)))) {
        uint64_t b;
        if (get_size(c, x, &b)) { k->system_reserve = b; k->system_reserve_at = x->value->at; }
    }
    if (mem && k->system_reserve + (1ull << 30) > mem) {
        Diag *g = diag_error(c->d, x && x->value ? x->value->at : cl->memory_at,
                             "system_reserve %.1f GiB leaves the slurmd pod less than 1 GiB of the node's %.1f GiB",
                             (double)k->system_reserve / (1ull << 30), (double)mem / (1ull << 30));
        diag_help(g, "set system_reserve below the node's memory (the default is GKE's reservation for the kubelet)");
        k->system_reserve = 0;
    }
    k->memory_limit = mem > k->system_reserve ? ((mem - k->system_reserve) >> 30) << 30 : mem;
    if (k->memory_limit == 0) k->memory_limit = mem;
    k->memory_request = k->memory_limit;
    k->shm_bytes = (k->memory_limit / 2 >> 30) << 30;
    if (!k->shm_bytes) k->shm_bytes = k->memory_limit / 2;
    if ((x = find(ks, PLAN_KEY(KUBERNETES, shm)))) {
        uint64_t b;
        if (get_size(c, x, &b)) {
            if (b < (64u << 20)) diag_error(c->d, x->value->at, "'shm' must be at least 64 MiB (Docker's default, already too small for NCCL)");
            else if (b > k->memory_limit) {
                Diag *g = diag_error(c->d, x->value->at, "'shm' is more than the slurmd pod's memory limit, %.1f GiB",
                                     (double)k->memory_limit / (1ull << 30));
                diag_note(g, "/dev/shm is a memory-backed emptyDir: what it holds counts against the pod's memory limit");
            } else { k->shm_bytes = b; k->shm_at = x->value->at; }
        }
    }
    if (ok[PLAN_KEY_INDEX(KUBERNETES, host_network)] && k->host_network && cl->slurm == SLURM_SOPERATOR) {
        Diag *g = diag_error(c->d, find(ks, PLAN_KEY(KUBERNETES, host_network))->value->at,
                             "'host_network': Soperator's NodeSet has no hostNetwork field");
        diag_note(g, "Soperator sets up its workers' network itself; 'host_network' is a Slinky setting");
    }
    const char *str;
    if ((x = find(ks, PLAN_KEY(KUBERNETES, rdma))) && get_string(c, x, &str)) {
        const char *eq = strrchr(str, '=');
        const char *name = eq ? arena_printf(c->a, "%.*s", (int)(eq - str), str) : str;
        const char *why = !eq ? "it has no '=COUNT'"
                          : !strchr(name, '/') ? "a device plugin's resource name has a domain (rdma/ib)"
                                               : label_key_why(c->a, name);
        char *end = NULL;
        long n = eq ? strtol(eq + 1, &end, 10) : 0;
        if (!why && (!end || *end || end == eq + 1 || n < 1 || n > 64)) why = "COUNT is not a whole number from 1 to 64";
        if (why) {
            Diag *g = diag_error(c->d, x->value->at, "'rdma' is \"RESOURCE=COUNT\", an extended resource each slurmd pod asks for: %s", why);
            diag_help(g, "for example: rdma = \"rdma/ib=1\" (an RDMA shared device plugin) or \"nvidia.com/hostdev=8\" (SR-IOV)");
        } else if (!strncmp(name, "nvidia.com/gpu", 14)) {
            diag_error(c->d, x->value->at, "'rdma' names '%s', which the pod asks for already (the cluster's GPUs)", name);
        } else { k->rdma_resource = name; k->rdma_count = (int)n; k->rdma_at = x->value->at; }
    }
    if ((x = find(ks, PLAN_KEY(KUBERNETES, partition_max_time)))) {
        double secs;
        if (get_duration(c, x, &secs)) {
            if (secs < 60) diag_error(c->d, x->value->at, "'partition_max_time' must be at least 1 min");
            else { k->partition_max_seconds = secs; k->partition_max_at = x->value->at; }
        }
    }
}

/* cluster: the slurm runtime and, on Kubernetes (Slinky, Soperator), the
 * kubernetes { } block: names, pool, scheduling, requests, volumes, nodes. */
void check_cluster_k8s(Checker *c, const Item *it, Scope *s, PlanCluster *cl)
{
    Entry *e = find(s, PLAN_KEY(CLUSTER, slurm));
    Entry *kb = find(s, PLAN_KEY(CLUSTER, kubernetes));
    check_cluster_slurm(c, e, cl);
    if (cl->slurm == SLURM_HOSTS) {
        if (kb && (!e || cl->slurm_at.start.line))
            diag_error(c->d, kb->key_at, "'kubernetes' settings need 'slurm = slinky \"VERSION\"' or 'slurm = soperator \"VERSION\"'");
        return;
    }
    if (!kb || kb->value) {
        Diag *g = diag_error(c->d, kb ? kb->key_at : e->key_at, "a cluster with slurm = %s needs a 'kubernetes { }' block",
                             slurm_llm_names[cl->slurm]);
        diag_help(g, "add kubernetes { image = \"...:TAG\"  pool_gpus = 8 }");
        return;
    }
    PlanK8s *k = arena_alloc(c->a, sizeof *k);
    k->at = kb->key_at;
    k->namespace_ = "slurm";
    k->cluster_name = "slurm";
    k->cpu_request_milli = (int64_t)cl->cpus * 1000;
    k->memory_request = cl->memory_bytes;
    Scope ks = scope_of(c, it, kb->sub, kb->nsub, PLAN_KEY(CLUSTER, kubernetes));
    ks.at = kb->key_at;
    check_keys(c, &ks, PKB_KUBERNETES);
    bool ok[PLAN_KEYS_MAX];
    check_row_keys(c, &ks, PKB_KUBERNETES, k8s_reads, k, ok);
    check_k8s_node_fit(c, &ks, cl, k, ok);
    check_k8s_names(c, &ks, cl, k);
    check_k8s_pool_gpus(c, &ks, cl, k);
    check_k8s_node_selector(c, &ks, k);
    check_k8s_tolerations(c, &ks, k);
    check_k8s_requests(c, &ks, cl, k);
    Entry *x;
    if ((x = find(&ks, PLAN_KEY(KUBERNETES, volumes)))) check_k8s_volumes(c, x, k);
    report_missing(c, &ks);
    check_k8s_nodes(c, cl, k);
    cl->k8s = k;
}

/* A path of the plan that a pod must reach lies on one of the cluster's volumes. */
static void check_k8s_path(Checker *c, const PlanCluster *cl, const char *what, const char *path, SrcRange at)
{
    if (!path || path[0] != '/' || !cl->k8s) return;
    for (int i = 0; i < cl->k8s->nvolumes; i++) {
        size_t n = strlen(cl->k8s->volumes[i].mount);
        if (strncmp(path, cl->k8s->volumes[i].mount, n) == 0 && (path[n] == '/' || path[n] == 0)) return;
    }
    Diag *g = diag_error(c->d, at, "%s '%s' is on no volume of cluster '%s'", what, path, cl->name);
    diag_note(g, "the slurmd pods see only what the cluster's kubernetes block mounts (its 'volumes')");
    diag_help(g, "add volumes = [pvc \"CLAIM\" at \"/MOUNT\"] with a mount path above it");
}

void check_k8s_paths(Checker *c, const PlanJob *j)
{
    const PlanCluster *cl = j->cluster;
    const PlanTrain *t = j->run;
    if (cl && cl->k8s && j->merge && j->merge->model) {   /* a merge job reads the base, writes the merged model */
        check_k8s_path(c, cl, "model path", j->merge->model->path, j->merge->model->path_at);
        check_k8s_path(c, cl, "merge output directory", j->merge->output_dir, j->merge->output_at);
    }
    if (!cl || !cl->k8s || !t) return;
    if (t->model && !t->model->from_scratch) check_k8s_path(c, cl, "model path", t->model->path, t->model->path_at);
    if (t->model && t->model->tokenizer && (!t->model->path || strcmp(t->model->tokenizer, t->model->path) != 0))
        check_k8s_path(c, cl, PLAN_KEY(MODEL, tokenizer), t->model->tokenizer, t->model->tokenizer_at);
    for (int i = 0; i < t->ndata; i++)
        if (t->data[i]) check_k8s_path(c, cl, "data file", t->data[i]->file, t->data[i]->file_at);
    for (int i = 0; i < t->neval_data; i++)
        if (t->eval_data[i]) check_k8s_path(c, cl, "data file", t->eval_data[i]->file, t->eval_data[i]->file_at);
    check_k8s_path(c, cl, "output directory", t->output_dir, t->output_at);
    if (cl->k8s->partition_max_seconds > 0 && j->time_seconds > cl->k8s->partition_max_seconds) {
        Diag *g = diag_error(c->d, j->time_at, "the job's time is more than partition '%s' allows (partition_max_time of cluster '%s')",
                             cl->partition ? cl->partition : "?", cl->name);
        diag_note(g, "partition_max_time at %s:%d: Slurm refuses a job whose --time exceeds the partition's MaxTime",
                  cl->k8s->partition_max_at.start.file, cl->k8s->partition_max_at.start.line);
    }
}
