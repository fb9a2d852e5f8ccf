/* check_model.c — model NAME: arch, path and tokenizer, the shape keys
 * (from config.json when it is readable here, and checked against it), and the
 * shape rules every backend relies on. */
#include "check_internal.h"

/* The model keys contract/plan_keys.h's rows read (check_row_keys) before the
 * rules below run; the rules keep what the rows cannot say: a key required
 * only without a config.json, a default by arch or from config.json, and a
 * written value compared with config.json. */
static const RowRead model_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanModel, type, row, field),
    PLAN_KEYS_MODEL(X)
#undef X
};

/* model: path = "DIR". A pretrained model's
 * config.json, when readable here, is read into cfg: the shape keys may then
 * be left out (taken from it) and must agree with it where written. Returns
 * whether cfg holds it. */
static bool check_model_config(Checker *c, const Item *it, Scope *s, PlanModel *m, ModelFileConfig *cfg)
{
    bool have_cfg = false;
    Entry *pe = find(s, PLAN_KEY(MODEL, path));
    if (pe) { m->path_at = pe->at; m->path = get_plan_path(c, pe, false); }
    char pmsg[PATH_POLICY_MAX + 200];
    if (m->path && path_policy_input_dir(pe->value->terms[0]->str, m->path, pmsg, sizeof pmsg)) {
        diag_error(c->d, pe->value->at, "'path' %s", pmsg);
        m->path = NULL;
    }
    if (!m->from_scratch && m->path) {
        const char *dir = m->path;
        char why[600];
        int rc = model_config_read(dir, cfg, why, (int)sizeof why);
        if (rc == 0) have_cfg = true;
        else if (rc < 0) {
            Diag *g = diag_error(c->d, pe->value->at, "model '%s': %s", it->name ? it->name : "?", why);
            diag_note(g, "llmc-train reads the same file (llama, qwen2 and qwen3 configs as transformers writes them)");
        } else {
            Diag *g = diag_note_at(c->d, pe->value->at, "model '%s': %s/config.json is not readable here (%s)",
                                   it->name ? it->name : "?", dir, why);
            diag_note(g, "not checked: the plan's arch and shape against the model's config.json");
        }
    }
    return have_cfg;
}

/* model: arch (read by its row; required without a config.json, from its
 * model_type otherwise). pe is the path entry, ok the rows read. */
static void check_model_arch(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                             const Entry *pe, const bool *ok)
{
    Entry *e;
    if ((e = have_cfg ? find(s, PLAN_KEY(MODEL, arch)) : require(c, s, PLAN_KEY(MODEL, arch), arch_llm_names[ARCH_QWEN2]))) {
        if (ok[PLAN_KEY_INDEX(MODEL, arch)] && have_cfg && (int)m->arch != cfg->arch) {
            Diag *g = diag_error(c->d, e->value->at, "arch = %s, but %s has model_type \"%s\"", arch_llm_names[m->arch],
                                 cfg->file, arch_llm_names[cfg->arch]);
            diag_help(g, "write arch = %s, or leave it out to take it from config.json", arch_llm_names[cfg->arch]);
        }
    } else if (have_cfg) {
        m->arch = (ModelArch)cfg->arch;
        m->arch_at = pe->at;
    }
}

/* model: tokenizer = "DIR" (default: path). A pretrained model is loaded
 * from path; from scratch, path is optional and the tokenizer must be named. */
static void check_model_tokenizer(Checker *c, const Item *it, Scope *s, PlanModel *m)
{
    Entry *e;
    if (!m->from_scratch) require(c, s, PLAN_KEY(MODEL, path), "\"/mnt/data-hps/models/NAME\"");   /* read above */
    char pmsg[PATH_POLICY_MAX + 200];
    if ((e = find(s, PLAN_KEY(MODEL, tokenizer)))) {
        m->tokenizer_at = e->at;
        m->tokenizer = get_plan_path(c, e, false);
        if (m->tokenizer && path_policy_input_dir(e->value->terms[0]->str, m->tokenizer, pmsg, sizeof pmsg)) {
            diag_error(c->d, e->value->at, "'tokenizer' %s", pmsg);
            m->tokenizer = NULL;
        }
    }
    else if (m->from_scratch && !find(s, PLAN_KEY(MODEL, path)) && !s->broken) {
        Diag *g = diag_error(c->d, s->at, "model block '%s' trains from scratch and needs 'tokenizer'", it->name ? it->name : "?");
        diag_help(g, "add 'tokenizer = \"DIR\"' (a directory with tokenizer.json)");
    } else { m->tokenizer = m->path; m->tokenizer_at = m->path_at; }
    /* readable here: the files the trainer's export copies beside the model
     * (llmc-train run refuses the same directory at start) */
    struct stat st;
    if (!m->tokenizer || s->broken || stat(m->tokenizer, &st) != 0 || !S_ISDIR(st.st_mode)) return;
    char f[4200];
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "%s/%s", m->tokenizer, i ? "tokenizer_config.json" : "tokenizer.json");
        if (access(f, R_OK) == 0) return;
    }
    Diag *g = diag_error(c->d, m->tokenizer_at, "model '%s': %s \"%s\" holds neither tokenizer.json nor tokenizer_config.json",
                         it->name ? it->name : "?",
                         m->tokenizer == m->path ? PLAN_KEY(MODEL, path) : PLAN_KEY(MODEL, tokenizer), m->tokenizer);
    diag_note(g, "the trained model is exported with its tokenizer's files; llmc-train refuses to start without them");
    if (m->tokenizer == m->path) diag_help(g, "name the directory that holds them: tokenizer = \"DIR\"");
}

/* model: the shape, layers, hidden, heads, ffn, vocab, max_context (each
 * read by its row, required without a config.json, else taken from it and
 * compared), kv_heads (default: heads) and head_dim. Returns whether head_dim
 * was given (or read). */
static bool check_model_shape_keys(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                                   const Entry *pe, const bool *ok)
{
    Entry *e;
    struct { int row; int *out; SrcRange *at; const char *ex; int cfg; const char *hf; } ints[] = {
        {PLAN_KEY_INDEX(MODEL, layers), &m->layers, &m->layers_at, "80", cfg->layers, "num_hidden_layers"},
        {PLAN_KEY_INDEX(MODEL, hidden), &m->hidden, &m->hidden_at, "8192", cfg->hidden, "hidden_size"},
        {PLAN_KEY_INDEX(MODEL, heads), &m->heads, &m->heads_at, "64", cfg->heads, "num_attention_heads"},
        {PLAN_KEY_INDEX(MODEL, ffn), &m->ffn, &m->ffn_at, "29568", cfg->ffn, "intermediate_size"},
        {PLAN_KEY_INDEX(MODEL, vocab), &m->vocab, &m->vocab_at, "152064", cfg->vocab, "vocab_size"},
        {PLAN_KEY_INDEX(MODEL, max_context), &m->max_context, &m->max_context_at, "32768", cfg->max_context, "max_position_embeddings"},
        {PLAN_KEY_INDEX(MODEL, kv_heads), &m->kv_heads, &m->kv_heads_at, NULL, cfg->kv_heads, "num_key_value_heads"},
        {PLAN_KEY_INDEX(MODEL, head_dim), &m->head_dim, &m->head_dim_at, NULL, cfg->head_dim, "head_dim"},
    };
    bool head_dim_set = false, kv_set = false;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        bool optional = ints[i].ex == NULL;
        int row = ints[i].row;
        const char *key = plan_keys_MODEL[row].key;
        e = have_cfg || optional ? find(s, key) : require(c, s, key, ints[i].ex);
        if (e) {
            if (ok[row] && optional) *(i == 6 ? &kv_set : &head_dim_set) = true;
            if (ok[row] && have_cfg && *ints[i].out != ints[i].cfg) {
                Diag *g = diag_error(c->d, e->value->at, "%s = %d, but %s has %s = %d", key, *ints[i].out,
                                     cfg->file, ints[i].hf, ints[i].cfg);
                diag_help(g, "write %s = %d, or leave it out to take it from config.json", key, ints[i].cfg);
            }
        } else if (have_cfg) {
            *ints[i].out = ints[i].cfg;
            *ints[i].at = pe->value->at;
            within(c, pe->value->at, key, model_reads[row].limit, ints[i].cfg,
                   arena_printf(c->a, "%d in %s", ints[i].cfg, cfg->file));
            if (optional) *(i == 6 ? &kv_set : &head_dim_set) = true;
        }
    }
    if (!kv_set) { m->kv_heads = m->heads; m->kv_heads_at = m->heads_at; }
    return head_dim_set;
}

/* model: rope_theta, rms_eps, tie_embeddings (read by their rows; when not
 * written, from config.json, else by arch: llama 5e5 and 1e-5, qwen 1e6 and
 * 1e-6), each written one compared with config.json; RoPE scaling in
 * config.json is a warning (llmc-train refuses it). */
static void check_model_numbers(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                                const Entry *pe, const bool *ok)
{
    Entry *e;
    /* transformers' config defaults: gemma2 10000 and 1e-6 (tied embedding);
     * mistral and mixtral 1e6 and 1e-5 */
    struct { int row; const char *hf; double *out; double cfg, dflt; } nums[] = {
        {PLAN_KEY_INDEX(MODEL, rope_theta), "rope_theta", &m->rope_theta, cfg->rope_theta,
         m->arch == ARCH_LLAMA ? 500000.0 : m->arch == ARCH_GEMMA2 ? 10000.0 : 1000000.0},
        {PLAN_KEY_INDEX(MODEL, rms_eps), "rms_norm_eps", &m->rms_eps, cfg->rms_eps,
         m->arch == ARCH_LLAMA || m->arch == ARCH_MISTRAL || m->arch == ARCH_MIXTRAL ? 1e-5 : 1e-6},
    };
    for (int i = 0; i < 2; i++) {
        const char *key = plan_keys_MODEL[nums[i].row].key;
        if (!ok[nums[i].row]) { *nums[i].out = have_cfg ? nums[i].cfg : nums[i].dflt; continue; }
        e = find(s, key);
        if (have_cfg && fabs(*nums[i].out - nums[i].cfg) > 1e-9 * fabs(nums[i].cfg)) {
            Diag *g = diag_error(c->d, e->value->at, "%s = %g, but %s has %s = %g", key, *nums[i].out,
                                 cfg->file, nums[i].hf, nums[i].cfg);
            diag_help(g, "write %s = %g, or leave it out to take it from config.json", key, nums[i].cfg);
        }
    }
    if (!ok[PLAN_KEY_INDEX(MODEL, tie_embeddings)])
        m->tie_embeddings = have_cfg ? cfg->tie_embeddings : m->arch == ARCH_GEMMA2;
    else if (have_cfg && m->tie_embeddings != cfg->tie_embeddings)
        diag_error(c->d, find(s, PLAN_KEY(MODEL, tie_embeddings))->value->at, "tie_embeddings = %s, but %s has tie_word_embeddings = %s",
                   m->tie_embeddings ? "true" : "false", cfg->file, cfg->tie_embeddings ? "true" : "false");
    if (have_cfg && cfg->rope_scaling[0]) {
        m->rope_scaling = arena_printf(c->a, "%s", cfg->rope_scaling);
        Diag *g = diag_warning(c->d, pe->value->at, "%s asks for RoPE scaling %s, which llmc-train does not implement",
                               cfg->file, cfg->rope_scaling);
        diag_note(g, "llmc-train refuses the model; LLaMA-Factory (backend = llamafactory) applies it");
    }
    m->qkv_bias = m->arch == ARCH_QWEN2;
    m->qk_norm = m->arch == ARCH_QWEN3 || m->arch == ARCH_QWEN3_MOE;
    m->norms_per_layer = m->arch == ARCH_GEMMA2 ? 4 : 2;
}

/* model: experts, experts_per_token — mixtral only (required without a
 * config.json, else taken from it and compared); 1 <= top-k <= experts. */
static void check_model_experts(Checker *c, Scope *s, PlanModel *m, const ModelFileConfig *cfg, bool have_cfg,
                                const Entry *pe)
{
    Entry *e;
    bool moe = m->arch == ARCH_MIXTRAL || m->arch == ARCH_QWEN3_MOE;
    struct { const char *key, *hf, *ex; int *out; SrcRange *at; int cfg, limit; } keys[] = {
        {PLAN_KEY(MODEL, experts), m->arch == ARCH_QWEN3_MOE ? "num_experts" : "num_local_experts", "8", &m->experts, &m->experts_at,
         cfg->experts, PL_KEY_MODEL_EXPERTS},
        {PLAN_KEY(MODEL, experts_per_token), "num_experts_per_tok", "2", &m->experts_per_token, &m->experts_per_token_at,
         cfg->experts_per_token, PL_KEY_MODEL_EXPERTS_TOP_K},
    };
    for (int i = 0; i < 2; i++) {
        if (!moe) {
            if ((e = find(s, keys[i].key))) {
                Diag *g = diag_error(c->d, e->key_at, "'%s' is only used by mixture-of-experts models (arch = mixtral, "
                                     "qwen3_moe)", keys[i].key);
                diag_note(g, "arch = %s is a dense model", arch_llm_names[m->arch]);
            }
            continue;
        }
        e = have_cfg ? find(s, keys[i].key) : require(c, s, keys[i].key, keys[i].ex);
        if (e) {
            *keys[i].at = e->at;
            if (get_int32_lim(c, e, keys[i].limit, keys[i].out) && have_cfg && *keys[i].out != keys[i].cfg) {
                Diag *g = diag_error(c->d, e->value->at, "%s = %d, but %s has %s = %d", keys[i].key, *keys[i].out,
                                     cfg->file, keys[i].hf, keys[i].cfg);
                diag_help(g, "write %s = %d, or leave it out to take it from config.json", keys[i].key, keys[i].cfg);
            }
        } else if (have_cfg) {
            *keys[i].out = keys[i].cfg;
            *keys[i].at = pe->value->at;
        }
    }
    if (moe && m->experts > 0 && m->experts_per_token > m->experts)
        diag_error(c->d, m->experts_per_token_at, "experts_per_token (%d) must not exceed experts (%d)",
                   m->experts_per_token, m->experts);
}

/* Shape rules: grouped-query heads divide evenly, head_dim = hidden / heads
 * (except qwen3, where it is its own key) and even (rotary embeddings rotate
 * pairs). */
static void check_model_shape_rules(Checker *c, PlanModel *m, bool head_dim_set)
{
    if (m->heads > 0 && m->kv_heads > 0) {
        if (m->kv_heads > m->heads) {
            diag_error(c->d, m->kv_heads_at, "kv_heads (%d) must not exceed heads (%d)", m->kv_heads, m->heads);
        } else if (m->heads % m->kv_heads != 0) {
            Diag *g = diag_error(c->d, m->kv_heads_at, "heads (%d) must be divisible by kv_heads (%d)", m->heads, m->kv_heads);
            diag_note(g, "each key/value head serves a whole group of query heads");
        }
    }
    if (m->hidden > 0 && m->heads > 0) {
        if (!head_dim_set) {
            if (m->hidden % m->heads != 0) {
                Diag *g = diag_error(c->d, m->hidden_at, "hidden (%d) must be divisible by heads (%d)", m->hidden, m->heads);
                diag_help(g, "or set head_dim explicitly (qwen3)");
            } else if (within(c, m->hidden_at, PLAN_KEY(MODEL, head_dim), PL_MODEL_HEAD_DIM, m->hidden / m->heads,
                              arena_printf(c->a, "hidden / heads = %d", m->hidden / m->heads))) {
                m->head_dim = m->hidden / m->heads;
                m->head_dim_at = m->hidden_at;
            }
        } else if ((m->arch == ARCH_LLAMA || m->arch == ARCH_QWEN2) && (int64_t)m->head_dim * m->heads != m->hidden) {
            Diag *g = diag_error(c->d, m->head_dim_at, "head_dim x heads (%d x %d = %lld) must equal hidden (%d) for %s",
                                 m->head_dim, m->heads, (long long)m->head_dim * m->heads, m->hidden, arch_llm_names[m->arch]);
            diag_note(g, "qwen3, mistral, gemma2, mixtral and qwen3_moe have a head_dim independent of hidden; llama and "
                         "qwen2 do not");
        }
        if (m->head_dim > 0 && m->head_dim % 2 != 0)
            diag_error(c->d, m->head_dim_at, "head_dim (%d) must be even for rotary embeddings", m->head_dim);
    }
}

/* model NAME { ... }: the keys the rows read, config.json (when readable),
 * arch, tokenizer, the shape and the numbers, then the shape rules. */
void check_model(Checker *c, const Item *it, PlanModel *m)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, PKB_MODEL);
    bool ok[PLAN_KEYS_MAX];
    check_row_keys(c, &s, PKB_MODEL, model_reads, m, ok);
    m->from_scratch = m->init == INIT_SCRATCH;
    ModelFileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    bool have_cfg = check_model_config(c, it, &s, m, &cfg);
    const Entry *pe = find(&s, PLAN_KEY(MODEL, path));
    check_model_arch(c, &s, m, &cfg, have_cfg, pe, ok);
    check_model_tokenizer(c, it, &s, m);
    bool head_dim_set = check_model_shape_keys(c, &s, m, &cfg, have_cfg, pe, ok);
    check_model_numbers(c, &s, m, &cfg, have_cfg, pe, ok);
    check_model_experts(c, &s, m, &cfg, have_cfg, pe);
    report_missing(c, &s);
    check_model_shape_rules(c, m, head_dim_set);
}
