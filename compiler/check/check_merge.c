/* check_merge.c — merge NAME: LLaMA-Factory's export of a LoRA run's adapter
 * merged into its base (`llamafactory-cli export`), the model directory a
 * later run trains (a full DPO after a LoRA SFT). Its keys and the model it
 * writes are checked before the train blocks (which may name it as their
 * model); what it joins to its LoRA run after them (check_merge_links). */
#include "check_internal.h"

/* The merge keys contract/plan_keys.h's rows alone describe (READ ROW):
 * device and dtype by their words (contract/plan_vocab.h's PLAN_MERGE_DEVICE,
 * PLAN_MERGE_DTYPE, whose JSON column is what the emitter writes), and
 * legacy_format, read by check_row_keys before the rules below run. */
static const RowRead merge_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanMerge, type, row, field),
    PLAN_KEYS_MERGE(X)
#undef X
};

/* shard_size: LLaMA-Factory's export_size is whole GB (max_shard_size "NGB") */
static void check_merge_shard_size(Checker *c, const Entry *e, PlanMerge *m)
{
    uint64_t bytes;
    m->shard_size_at = e->at;
    if (!get_size(c, e, &bytes)) return;
    if (bytes % 1000000000ULL != 0 || bytes == 0 || bytes > 1000ULL * 1000000000ULL) {
        Diag *g = diag_error(c->d, e->value->at, "'shard_size' must be a whole number of GB from 1 GB to 1000 GB, "
                             "found %s", value_desc(c, e->value));
        diag_note(g, "LLaMA-Factory's export_size counts whole GB (save_pretrained's max_shard_size \"NGB\")");
        return;
    }
    m->shard_gb = (int)(bytes / 1000000000ULL);
}

/* merge NAME { adapter = RUN  model = BASE  output = "DIR"  dtype  device
 * shard_size  legacy_format }: the keys (dtype, device, legacy_format rows alone), and the
 * model it writes (the base's shape at output, so that a train block may name
 * the merge as its model). */
void check_merge(Checker *c, const Item *it, PlanMerge *m)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, PKB_MERGE);
    check_row_keys(c, &s, PKB_MERGE, merge_reads, m, NULL);
    Entry *e;
    m->shard_gb = 5;   /* LLaMA-Factory's default export_size */
    if ((e = require(c, &s, PLAN_KEY(MERGE, adapter), "sft"))) { m->adapter_at = e->at; m->adapter = get_ref(c, e, K_TRAIN); }
    if ((e = require(c, &s, PLAN_KEY(MERGE, model), "qwen7b"))) { m->model_at = e->at; m->model = get_ref(c, e, K_MODEL); }
    if ((e = require(c, &s, PLAN_KEY(MERGE, output), "\"/mnt/data-hps/models/NAME-merged\""))) {
        m->output_at = e->at;
        m->output_dir = get_plan_path(c, e, false);
    }
    if ((e = find(&s, PLAN_KEY(MERGE, shard_size)))) check_merge_shard_size(c, e, m);
    report_missing(c, &s);
    if (!m->model || !m->model->name || !m->output_dir) return;
    /* the merged model: the base's network, saved with the base's tokenizer
     * files (export writes them beside the weights; the base's are read for
     * the template checks, the merged directory does not exist yet) */
    m->merged = *m->model;
    m->merged.name = m->name;
    m->merged.at = m->at;
    m->merged.path = m->output_dir;
    m->merged.path_at = m->output_at;
    m->merged.from_scratch = false;
    m->merged.merged_from = m;
}

/* Where the merged model must not go (contract/path_policy.h): a system
 * directory, inside the base model's directory or the adapter's (export
 * would mix its files with what it reads), the tokenizer's or the plan's
 * own directory. */
static void check_merge_output_path(Checker *c, const PlanMerge *m)
{
    PathInput in[4];
    int n = 0;
    const PlanModel *b = m->model;
    const PlanTrain *t = m->adapter;
    if (b->path) in[n++] = (PathInput){"the directory of base model", b->path, b->path, PATH_INPUT_WITHIN};
    if (t->output_dir && !t->output_default)
        in[n++] = (PathInput){arena_printf(c->a, "the adapter directory of run '%s'", t->name), t->output_dir,
                              t->output_dir, PATH_INPUT_WITHIN};
    if (b->tokenizer && (!b->path || strcmp(b->tokenizer, b->path)))
        in[n++] = (PathInput){"the tokenizer directory", b->tokenizer, b->tokenizer, PATH_INPUT_EQUAL};
    const char *file = m->output_at.start.file, *slash = file ? strrchr(file, '/') : NULL;
    const char *plan_dir = !file ? NULL : !slash ? "." : slash == file ? "/" : arena_printf(c->a, "%.*s", (int)(slash - file), file);
    if (plan_dir) in[n++] = (PathInput){"the directory of plan file", file, plan_dir, PATH_INPUT_EQUAL};
    char msg[3 * PATH_POLICY_MAX];
    if (path_policy_output(m->output_dir, m->output_dir, in, n, msg, sizeof msg) == 0) return;
    Diag *g = diag_error(c->d, m->output_at, "'output' %s", msg);
    diag_note(g, "merge '%s' writes the merged model there (export_dir)", m->name);
}

/* The merged model and each run's output directory apart (neither inside
 * the other): a run would resume from, or save into, the merged model, and
 * the merge would overwrite what a run saved. Its own adapter run is
 * check_merge_output_path's. */
static void check_merge_vs_outputs(Checker *c, const PlanMerge *m)
{
    char mine[PATH_POLICY_MAX], other[PATH_POLICY_MAX];
    if (path_policy_resolve(m->output_dir, mine)) return;
    for (int i = 0; i < c->plan->ntrains; i++) {
        const PlanTrain *t = c->plan->trains[i];
        if (t == m->adapter || !t->output_dir || t->output_default || path_policy_resolve(t->output_dir, other)) continue;
        if (!path_policy_within(mine, other) && !path_policy_within(other, mine)) continue;
        Diag *g = diag_error(c->d, m->output_at, "merge '%s' writes the merged model to \"%s\", and run '%s' its "
                             "checkpoints to \"%s\"", m->name, m->output_dir, t->name, t->output_dir);
        diag_note(g, "a run resumes from the checkpoints in its output directory; export would write among them");
        diag_help(g, "give merge '%s' an output of its own", m->name);
        return;
    }
}

/* The merge against its LoRA run (after the train blocks are checked): the
 * run trains a LoRA adapter with LLaMA-Factory, on this base; the merged
 * model goes where nothing the merge reads is. */
void check_merge_links(Checker *c, const PlanMerge *m)
{
    const PlanTrain *t = m->adapter;
    if (!t || !m->model || !m->output_dir) return;
    if (t->backend != BACKEND_LLAMAFACTORY) {
        Diag *g = diag_error(c->d, m->adapter_at, "merge '%s': run '%s' uses backend = %s, whose output is a whole "
                             "model, not a LoRA adapter", m->name, t->name, backend_llm_names[t->backend]);
        diag_note(g, "llmc-train exports the adapter merged into the base itself, in %s/final", t->output_dir ? t->output_dir : "its output");
        diag_help(g, "train the merged model directly: a model block with path = \"%s/final\"",
                  t->output_dir ? t->output_dir : "OUTPUT");
        return;
    }
    if (t->method != METHOD_LORA && t->method != METHOD_QLORA) {
        Diag *g = diag_error(c->d, m->adapter_at, "merge '%s': run '%s' trains with method = %s, not a LoRA adapter",
                             m->name, t->name, method_llm_names[t->method]);
        diag_note(g, "llamafactory-cli export merges an adapter (adapter_name_or_path) into its base; a %s run "
                  "saves the whole model in its output", method_llm_names[t->method]);
        diag_help(g, "train the output of run '%s' directly, or merge a run with method = lora", t->name);
        return;
    }
    if (t->model && t->model != m->model) {
        Diag *g = diag_error(c->d, m->model_at, "merge '%s': base model '%s', but run '%s' trained its adapter on "
                             "model '%s'", m->name, m->model->name, t->name, t->model->name);
        diag_note(g, "an adapter holds the difference to the weights it was trained on; merged into another base "
                  "it gives a broken model");
        diag_help(g, "model = %s", t->model->name);
        return;
    }
    if (!m->model->path) {
        Diag *g = diag_error(c->d, m->model_at, "merge '%s': model '%s' has no 'path' to load the base from",
                             m->name, m->model->name);
        diag_note(g, "llamafactory-cli export reads the base (model_name_or_path) and adds the adapter into it");
        return;
    }
    if (t->method == METHOD_QLORA) {
        Diag *g = diag_note_at(c->d, m->adapter_at, "merge '%s': run '%s' trained on a %d-bit base; the adapter is "
                               "merged into the 16-bit base model", m->name, t->name, t->quant_bits);
        diag_note(g, "LLaMA-Factory cannot merge into a quantised model; the merged weights differ slightly from "
                  "what the QLoRA run saw");
    }
    if (m->model->arch == ARCH_MISTRAL || m->model->arch == ARCH_MIXTRAL) {
        Diag *g = diag_warning(c->d, m->model_at, "merge '%s': transformers 5 cannot save %s models after loading "
                               "them (export fails with NotImplementedError)", m->name, arch_llm_names[m->model->arch]);
        diag_note(g, "LLaMA-Factory's export_model says so (train/tuner.py); transformers 4.x exports them");
    }
    check_merge_output_path(c, m);
    check_merge_vs_outputs(c, m);
}
