/* check_train.c — train NAME: stage, model and data, hyperparameters,
 * execution (precision, shard, recompute, attention, backend), checkpoints,
 * output, the LLaMA-Factory-only keys, and the cross-field rules between them. */
#include "check_internal.h"

/* The train keys contract/plan_keys.h's rows alone describe (READ ROW, ROW_AT),
 * read by check_row_keys before the rules below run. */
static const RowRead train_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanTrain, type, row, field),
    PLAN_KEYS_TRAIN(X)
#undef X
};

/* `data = [a, b]` or `data = a`: distinct dataset references. */
static void get_dataset_list(Checker *c, const Entry *e, PlanDataset ***out, int *nout)
{
    if (!want_terms(c, e, 1, "a list of dataset names")) return;
    const Term *x = e->value->terms[0];
    PtrVec list = {0};
    if (x->kind == TERM_LIST) {
        if (x->nitems == 0) diag_error(c->d, x->at, "'%s' needs at least one dataset", e->key);
        for (int i = 0; i < x->nitems; i++) {
            const Value *iv = x->items[i];
            if (iv->nterms != 1) {
                diag_error(c->d, iv->terms[1]->at, "unexpected %s in the list of datasets", term_desc(c, iv->terms[1]));
                continue;
            }
            PlanDataset *ds = resolve_ref(c, e, iv->terms[0], K_DATASET);
            if (!ds) continue;
            bool dup = false;
            for (int k = 0; k < list.n; k++) dup |= list.items[k] == ds;
            if (dup) diag_error(c->d, iv->at, "dataset '%s' is listed twice", ds->name);
            else ptrvec_push(c->a, &list, ds);
        }
    } else {
        PlanDataset *ds = resolve_ref(c, e, x, K_DATASET);
        if (ds) ptrvec_push(c->a, &list, ds);
    }
    *out = (PlanDataset **)list.items;
    *nout = list.n;
}

/* ---- the LLaMA-Factory-only keys of a train block ---- */

/* What data a stage trains on (LLaMA-Factory's processors: pretrain reads text,
 * supervised and feedback (kto) one answer per example, pairwise (rm, dpo)
 * a chosen and a rejected answer). */
static void check_stage_data(Checker *c, const PlanTrain *t, const PlanDataset *ds, SrcRange at)
{
    const char *st = stage_llm_names[t->stage];
    Diag *g;
    if (t->stage == STAGE_PT) {
        if (ds->format != FORMAT_TEXT) {
            g = diag_error(c->d, at, "pre-training (pt) needs text data, but dataset '%s' is %s", ds->name, format_llm_names[ds->format]);
            diag_help(g, "use a dataset with format = text, or stage = sft");
        }
        return;
    }
    if (ds->format == FORMAT_TEXT) {
        g = diag_error(c->d, at, "%s needs conversations, but dataset '%s' is text", st, ds->name);
        diag_help(g, "use an alpaca or sharegpt dataset, or stage = pt");
        return;
    }
    bool pairs = t->stage == STAGE_RM || t->stage == STAGE_DPO;
    if (pairs && !ds->ranking) {
        g = diag_error(c->d, at, "stage %s needs ranking data, but dataset '%s' is not a ranking dataset", st, ds->name);
        diag_note(g, "%s learns from pairs: a chosen and a rejected answer to each prompt", st);
        diag_help(g, "set 'ranking = true' and columns { chosen = \"...\" rejected = \"...\" } in dataset '%s'", ds->name);
    } else if (!pairs && ds->ranking) {
        g = diag_error(c->d, at, "dataset '%s' is a ranking dataset; stage %s cannot train on it", ds->name, st);
        diag_note(g, "ranking data (chosen/rejected pairs) is for stage = rm or stage = dpo");
    } else if (t->stage == STAGE_KTO && !ds->columns.kto_tag) {
        g = diag_error(c->d, at, "stage kto needs a kto tag, but dataset '%s' has no columns { kto_tag = \"...\" }", ds->name);
        diag_note(g, "KTO learns from single answers labelled desirable (true) or undesirable (false)");
    } else if (t->stage != STAGE_KTO && ds->columns.kto_tag) {
        g = diag_warning(c->d, ds->columns_at, "column 'kto_tag' of dataset '%s' is ignored by stage %s", ds->name, st);
        diag_note(g, "only stage = kto reads it");
    }
}

static bool get_steps(Checker *c, const Entry *e, int64_t *out)
{
    const Value *v = e->value;
    if (v && (is_count_of(v, "steps") || (v->nterms == 1 && v->terms[0]->kind == TERM_INT))) {
        const Term *n = v->terms[0];
        if (n->overflow || n->ival < 1) { diag_error(c->d, v->at, "'%s' must be at least 1 step", e->key); return false; }
        if (!within(c, n->at, e->key, PL_CKPT_EVERY_STEPS, (double)n->ival, n->text)) return false;
        *out = n->ival;
        return true;
    }
    if (!v) return want_terms(c, e, 2, "a step count");
    Diag *g = diag_error(c->d, v->at, "'%s' must be a step count, found %s", e->key, value_desc(c, v));
    diag_help(g, "for example: %s = 100 steps", e->key);
    return false;
}

/* train: lora_target = all | [MODULE, ...], the linear layers of the
 * model (q_proj ... down_proj), each once. */
static void check_train_lora_target(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, PLAN_KEY(TRAIN, lora_target))) && want_terms(c, e, 1, "'all' or a list of module names")) {
        const Term *x = e->value->terms[0];
        if (x->kind == TERM_IDENT && strcmp(x->str, "all") == 0) {
            t->lora_target = NULL;
            t->nlora_target = 0;
        } else if (x->kind != TERM_LIST || x->nitems == 0) {
            Diag *g = diag_error(c->d, x->at, "'lora_target' must be 'all' or a list of module names, found %s", term_desc(c, x));
            diag_help(g, "for example: lora_target = [q_proj, v_proj]");
        } else {
            const char **names = arena_alloc(c->a, sizeof(char *) * (size_t)x->nitems);
            int n = 0;
            for (int i = 0; i < x->nitems; i++) {
                const Value *iv = x->items[i];
                const Term *m = iv->terms[0];
                if (iv->nterms != 1 || (m->kind != TERM_IDENT && m->kind != TERM_STRING)) {
                    diag_error(c->d, iv->at, "'lora_target' takes module names, found %s", value_desc(c, iv));
                    continue;
                }
                bool known = false, dup = false;
                for (int k = 0; k < LORA_TARGETS; k++) known |= strcmp(m->str, lora_module_llm_names[k]) == 0;
                for (int k = 0; k < n; k++) dup |= strcmp(names[k], m->str) == 0;
                if (!known) {
                    const char *dym = did_you_mean(m->str, lora_module_llm_names, LORA_TARGETS);
                    Diag *g = dym ? diag_error(c->d, m->at, "unknown module '%s' for lora_target; did you mean '%s'?", m->str, dym)
                                  : diag_error(c->d, m->at, "unknown module '%s' for lora_target", m->str);
                    diag_note(g, "the linear layers of %s models: %s",
                              t->model ? arch_llm_names[t->model->arch] : "llama/qwen", join_names(c->a, lora_module_llm_names, LORA_TARGETS));
                } else if (dup) {
                    diag_error(c->d, m->at, "module '%s' is listed twice", m->str);
                } else {
                    names[n++] = m->str;
                }
            }
            t->lora_target = names;
            t->nlora_target = n;
        }
    }
}

/* train: val_size = PERCENT (of the data, above 0 and below 100) | INT
 * (samples held out). */
static void check_train_val_size(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, PLAN_KEY(TRAIN, val_size))) && e->value) {
        t->val_at = e->at;
        if (is_percent(e->value)) {
            double f;
            if (get_percent(c, e, 100, &f)) {
                if (f <= 0 || f >= 1) diag_error(c->d, e->value->at, "'val_size' as a percentage must be above 0%% and below 100%%");
                else t->val_size = f;
            }
        } else {
            int64_t n;
            if (get_int(c, e, 1, (int64_t)1 << 40, &n)) t->val_size = (double)n;
        }
    } else if (e) {
        want_terms(c, e, 1, "a percentage or a sample count");
    }
}

/* train: eval_batch = INT per gpu (as batch). */
static void check_train_eval_batch(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, PLAN_KEY(TRAIN, eval_batch))) && e->value) {
        const Value *bv = e->value;
        if (bv->nterms == 3 && bv->terms[0]->kind == TERM_INT && bv->terms[1]->kind == TERM_IDENT &&
            strcmp(bv->terms[1]->str, "per") == 0 && bv->terms[2]->kind == TERM_IDENT && strcmp(bv->terms[2]->str, "gpu") == 0) {
            const PlanLimit *l = plan_limit(PL_TRAIN_MICRO_BATCH);
            if (bv->terms[0]->overflow || plan_limit_violation(l, (double)bv->terms[0]->ival))
                diag_error(c->d, bv->terms[0]->at, "'eval_batch' must be between %.0f and %.0f per gpu, found %s",
                           l->min, l->max, bv->terms[0]->text);
            else
                t->eval_batch = (int)bv->terms[0]->ival;
        } else {
            Diag *g = diag_error(c->d, bv->at, "'eval_batch' must be a count per gpu, found %s", value_desc(c, bv));
            diag_help(g, "for example: eval_batch = 8 per gpu");
        }
    } else if (e) {
        want_terms(c, e, 3, "a count per gpu");
    }
}

/* train: the keys LLaMA-Factory reads beside the llmc trainer's: method's
 * LoRA/freeze/quantization settings, preference training, evaluation, data
 * loading, the DDP timeout and reporting (method, lora_rank, dora, rslora,
 * quant_method, pref_loss, pref_beta, pref_ftx, offload, data_shared_fs,
 * streaming and report_to are rows alone; lora_alpha and freeze_layers are
 * rows with a rule). Defaults as LLaMA-Factory's (lora_rank
 * 8, lora_alpha 2 x rank, freeze_layers 2, pref_beta 0.1, ddp_timeout 30 min). */
static void check_train_lf_keys(Checker *c, Scope *s, PlanTrain *t, const bool *ok)
{
    Entry *e;
    t->quant_bits = t->method == METHOD_QLORA ? 4 : 0;
    if (!ok[PLAN_KEY_INDEX(TRAIN, lora_alpha)]) t->lora_alpha = 2 * t->lora_rank;
    if ((e = find(s, PLAN_KEY(TRAIN, lora_dropout)))) {
        const PlanLimit *l = plan_limit(PL_FINETUNE_LORA_DROPOUT);
        double x;
        if (get_number(c, e, l->min, false, l->max, &x)) {   /* the row's open maximum, in words of its own */
            if (x >= l->max)
                diag_error(c->d, e->value->at, "'lora_dropout' must be below %g, found %s", l->max, e->value->terms[0]->text);
            else t->lora_dropout = x;
        }
    }
    check_train_lora_target(c, s, t);
    if (ok[PLAN_KEY_INDEX(TRAIN, freeze_layers)]) {
        e = find(s, PLAN_KEY(TRAIN, freeze_layers));
        if (t->freeze_layers == 0)
            diag_error(c->d, e->value->at, "'freeze_layers' must not be 0 (the number of trainable layers: N last, -N first)");
        else if (t->model && t->model->layers > 0 && abs(t->freeze_layers) > t->model->layers)
            diag_error(c->d, e->value->at, "'freeze_layers' (%d) is more than the %d layers of model '%s'",
                       t->freeze_layers, t->model->layers, t->model->name);
    }
    if ((e = find(s, PLAN_KEY(TRAIN, quant_bits))) && get_int32_lim(c, e, PL_KEY_TRAIN_QUANT_BITS, &t->quant_bits) &&
        t->quant_bits != 4 && t->quant_bits != 8) {
        diag_error(c->d, e->value->at, "'quant_bits' must be 4 or 8, found %d", t->quant_bits);
        t->quant_bits = 4;
    }
    if ((e = find(s, PLAN_KEY(TRAIN, ref_model)))) { t->ref_model_at = e->at; t->ref_model = get_ref(c, e, K_MODEL); }
    check_train_val_size(c, s, t);
    if ((e = find(s, PLAN_KEY(TRAIN, eval_data)))) { t->eval_data_at = e->at; get_dataset_list(c, e, &t->eval_data, &t->neval_data); }
    if ((e = find(s, PLAN_KEY(TRAIN, eval_every)))) { t->eval_every_at = e->at; get_steps(c, e, &t->eval_every_steps); }
    check_train_eval_batch(c, s, t);
    if ((e = find(s, PLAN_KEY(TRAIN, tokenized_path)))) { t->tokenized_at = e->at; t->tokenized_path = get_plan_path(c, e, false); }
    t->ddp_timeout_seconds = 1800;
    if ((e = find(s, PLAN_KEY(TRAIN, ddp_timeout)))) {
        t->ddp_timeout_at = e->at;
        double secs;
        if (get_duration(c, e, &secs)) {
            if (secs < 60) diag_error(c->d, e->value->at, "'ddp_timeout' must be at least 1 min (loading a large model takes longer)");
            else if (secs > 86400) diag_error(c->d, e->value->at, "'ddp_timeout' must be at most 1 d: a hung collective must end the job");
            else t->ddp_timeout_seconds = secs;
        }
    }
    if ((e = find(s, PLAN_KEY(TRAIN, run_name))) && get_string(c, e, &t->run_name)) {
        if (!t->run_name[0] || plan_control_char_at(t->run_name) >= 0) {
            diag_error(c->d, e->value->at, "'run_name' must be non-empty text without control characters");
            t->run_name = NULL;
        }
    }
    t->log_every = 1;
    if ((e = find(s, PLAN_KEY(TRAIN, log_every)))) get_steps(c, e, &t->log_every);
}

/* backend = llmc: the llmc trainer does pt and sft, full, freeze or LoRA
 * (the backends' limits are contract/backend_caps.h, checked with the job), and
 * reads no other LLaMA-Factory key; a LoRA or freeze key needs its method. */
static void check_train_llmc_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    static const char *const llmc_ft_keys[] = {PLAN_KEY(TRAIN, lora_rank), PLAN_KEY(TRAIN, lora_alpha),
                                               PLAN_KEY(TRAIN, lora_dropout), PLAN_KEY(TRAIN, lora_target),
                                               PLAN_KEY(TRAIN, rslora), PLAN_KEY(TRAIN, freeze_layers)};
    const char *what = NULL;
    SrcRange at = t->at;
    Entry *sched = find(s, PLAN_KEY(TRAIN, schedule)), *ck = find(s, PLAN_KEY(TRAIN, checkpoint_every));
    if (t->method == METHOD_QLORA) { what = "method = qlora"; at = t->method_at; }
    else if (t->stage > STAGE_SFT) { what = arena_printf(c->a, "stage = %s", stage_llm_names[t->stage]); at = t->stage_at; }
    else if (t->schedule == SCHED_WSD && sched) { what = "schedule = wsd"; at = sched->value->at; }
    else if (t->checkpoint_epoch && ck) { what = "checkpoint_every = epoch"; at = ck->value->at; }
    else {
        /* the first LLaMA-Factory-only key (contract/plan_keys.h, BACKENDS) the plan sets */
        const PlanKeyList *rows = &plan_key_lists[PKB_TRAIN];
        for (int k = 0; k < rows->n && !what; k++)
            if (rows->keys[k].backends == PK_LF && (e = find(s, rows->keys[k].key))) { what = e->key; at = e->key_at; }
    }
    if (what) {
        g = diag_error(c->d, at, "%s is not implemented by the llmc trainer yet", what);
        diag_note(g, "run '%s' uses backend = llmc%s; the llmc trainer does pt and sft with method = full, "
                  "freeze or lora", t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s' (LLaMA-Factory runs it)", t->name);
        return;
    }
    if (t->method == METHOD_LORA && t->lora_dropout > 0) {
        e = find(s, PLAN_KEY(TRAIN, lora_dropout));
        g = diag_error(c->d, e ? e->value->at : t->method_at,
                       "lora_dropout = %g is not implemented by the llmc trainer (its LoRA has no dropout)",
                       t->lora_dropout);
        diag_help(g, "set lora_dropout = 0, or backend = llamafactory in run '%s'", t->name);
    }
    if (t->method == METHOD_FREEZE && !find(s, PLAN_KEY(TRAIN, freeze_layers)) && t->model && t->model->layers > 0 &&
        t->freeze_layers > t->model->layers)
        diag_error(c->d, t->method_at, "method = freeze trains the last %d layers by default, but model '%s' has %d",
                   t->freeze_layers, t->model->name, t->model->layers);
    for (int k = 0; k < NUNITS(llmc_ft_keys); k++) {
        bool freeze_key = k == NUNITS(llmc_ft_keys) - 1;
        if ((e = find(s, llmc_ft_keys[k])) && t->method != (freeze_key ? METHOD_FREEZE : METHOD_LORA)) {
            g = diag_error(c->d, e->key_at, "'%s' is only used with method = %s", e->key, method_llm_names[freeze_key ? METHOD_FREEZE : METHOD_LORA]);
            diag_note(g, "run '%s' uses method = %s", t->name, method_llm_names[t->method]);
        }
    }
}

/* backend = llamafactory: each method's keys only with that method, and
 * the combinations LLaMA-Factory and DeepSpeed load (qlora's quantization,
 * DoRA, offload by ZeRO stage). */
static void check_train_lf_method_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    bool lora = t->method == METHOD_LORA || t->method == METHOD_QLORA;
    static const char *const lora_keys[] = {PLAN_KEY(TRAIN, lora_rank), PLAN_KEY(TRAIN, lora_alpha),
                                            PLAN_KEY(TRAIN, lora_dropout), PLAN_KEY(TRAIN, lora_target),
                                            PLAN_KEY(TRAIN, dora), PLAN_KEY(TRAIN, rslora)};
    for (int k = 0; k < NUNITS(lora_keys); k++)
        if (!lora && (e = find(s, lora_keys[k]))) {
            g = diag_error(c->d, e->key_at, "'%s' is only used with method = lora or qlora", e->key);
            diag_note(g, "run '%s' uses method = %s", t->name, method_llm_names[t->method]);
        }
    if (t->method != METHOD_FREEZE && (e = find(s, PLAN_KEY(TRAIN, freeze_layers))))
        diag_error(c->d, e->key_at, "'freeze_layers' is only used with method = freeze");
    if (t->method != METHOD_QLORA && ((e = find(s, PLAN_KEY(TRAIN, quant_bits))) || (e = find(s, PLAN_KEY(TRAIN, quant_method))))) {
        g = diag_error(c->d, e->key_at, "'%s' is only used with method = qlora", e->key);
        diag_note(g, "qlora quantises the frozen base model and trains LoRA adapters on it");
    }
    if (t->method == METHOD_QLORA && t->quant_method == QUANT_EETQ && t->quant_bits != 8)
        diag_error(c->d, (e = find(s, PLAN_KEY(TRAIN, quant_method))) ? e->value->at : t->method_at,
                   "quant_method = eetq quantises to 8 bits only; set quant_bits = 8");
    /* LLaMA-Factory's quantization.py: only bitsandbytes at 4 bits loads
     * under ZeRO-3 (hqq, eetq and 8-bit bnb refuse it); adapter.py: DoRA
     * only on a bitsandbytes-quantised base */
    if (t->method == METHOD_QLORA && t->shard == SHARD_ZERO3 && (t->quant_method != QUANT_BNB || t->quant_bits != 4)) {
        g = diag_error(c->d, t->shard_at, "method = qlora with shard = zero3 needs quant_method = bnb and quant_bits = 4");
        diag_note(g, "LLaMA-Factory loads only a 4-bit bitsandbytes base under DeepSpeed ZeRO-3");
        diag_help(g, "use shard = zero2, or quant_bits = 4 with quant_method = bnb");
    }
    if (t->method == METHOD_QLORA && t->use_dora && t->quant_method != QUANT_BNB) {
        e = find(s, PLAN_KEY(TRAIN, dora));
        diag_error(c->d, e ? e->key_at : t->at, "dora needs quant_method = bnb (LLaMA-Factory: DoRA is not compatible with %s)",
                   quant_method_llm_names[t->quant_method]);
    }
    if (t->offload != OFFLOAD_NONE) {
        if (t->shard < SHARD_ZERO2 || (t->offload == OFFLOAD_ALL && t->shard != SHARD_ZERO3)) {
            g = diag_error(c->d, t->offload_at, "offload = %s needs shard = %s", offload_llm_names[t->offload],
                           t->offload == OFFLOAD_ALL ? shard_llm_names[SHARD_ZERO3] : "zero2 or zero3");
            diag_note(g, "DeepSpeed offloads optimizer states from ZeRO-2 on and parameters only with ZeRO-3");
        }
    }
}

/* backend = llamafactory: preference keys per stage (pref_loss for dpo;
 * pref_beta, pref_ftx, ref_model for dpo and kto), a reference model only
 * where the loss uses one, with the model's vocabulary. */
static void check_train_lf_pref_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    bool dpo = t->stage == STAGE_DPO, pref = dpo || t->stage == STAGE_KTO;
    if (!dpo && (e = find(s, PLAN_KEY(TRAIN, pref_loss)))) {
        g = diag_error(c->d, e->key_at, "'pref_loss' is only used with stage = dpo");
        diag_note(g, "orpo and simpo are dpo's pref_loss = orpo / simpo");
    }
    static const char *const pref_keys[] = {PLAN_KEY(TRAIN, pref_beta), PLAN_KEY(TRAIN, pref_ftx), PLAN_KEY(TRAIN, ref_model)};
    for (int k = 0; k < NUNITS(pref_keys); k++)
        if (!pref && (e = find(s, pref_keys[k])))
            diag_error(c->d, e->key_at, "'%s' is only used with stage = dpo or stage = kto", e->key);
    if (dpo && t->ref_model && (t->pref_loss == PREF_ORPO || t->pref_loss == PREF_SIMPO)) {
        g = diag_error(c->d, t->ref_model_at, "pref_loss = %s uses no reference model", pref_loss_llm_names[t->pref_loss]);
        diag_help(g, "remove ref_model");
    }
    if (t->ref_model && t->model && t->ref_model->vocab != t->model->vocab) {
        g = diag_error(c->d, t->ref_model_at, "reference model '%s' has vocab %d, model '%s' has %d",
                       t->ref_model->name, t->ref_model->vocab, t->model->name, t->model->vocab);
        diag_note(g, "both score the same tokens: they must share the tokenizer");
    }
}

/* backend = llamafactory: evaluation (val_size or eval_data, the eval keys
 * only with one) and data loading (streaming for pt with max_steps, the
 * tokenized cache not the output directory). */
static void check_train_lf_eval_rules(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    Diag *g;
    if (t->val_size > 0 && t->neval_data > 0) {
        g = diag_error(c->d, t->eval_data_at, "set either val_size or eval_data, not both");
        diag_note(g, "val_size holds out part of 'data'; eval_data names separate datasets");
    }
    bool evals = t->val_size > 0 || t->neval_data > 0;
    if (!evals && ((e = find(s, PLAN_KEY(TRAIN, eval_every))) || (e = find(s, PLAN_KEY(TRAIN, eval_batch))))) {
        g = diag_error(c->d, e->key_at, "'%s' needs an evaluation set", e->key);
        diag_help(g, "add 'val_size = 5%%' or 'eval_data = [NAME]'");
    }
    if (evals && t->streaming && t->val_size > 0 && t->val_size < 1)
        diag_error(c->d, t->val_at, "with streaming = true, val_size must be a sample count, not a percentage");
    if (t->max_steps > 0 && t->eval_every_steps > t->max_steps)
        diag_warning(c->d, t->eval_every_at, "eval_every (%lld steps) is more than max_steps (%lld): no evaluation runs",
                     (long long)t->eval_every_steps, (long long)t->max_steps);
    /* data */
    if (t->streaming && t->stage != STAGE_PT) {
        g = diag_error(c->d, t->streaming_at, "streaming is for pre-training corpora (stage = pt)");
        diag_note(g, "run '%s' is stage %s", t->name, stage_llm_names[t->stage]);
    } else if (t->streaming && t->max_steps <= 0) {
        g = diag_error(c->d, t->streaming_at, "streaming = true needs max_steps");
        diag_note(g, "a streamed dataset has no length, so epochs cannot decide when the run ends");
    }
    if (t->tokenized_path && t->output_dir && strcmp(t->tokenized_path, t->output_dir) == 0)
        diag_error(c->d, t->tokenized_at, "'tokenized_path' must not be the output directory");
}

/* The rules across the LLaMA-Factory keys, for the backend that reads them. */
/* ---- LLaMA-Factory run-time keys (issue 33; docs/language.md, "train NAME",
 * "Start-up and data") ---- */

/* mix_strategy = concat | interleave_under | interleave_over | interleave_once;
 * interleave_probs = [P, ...]: one per dataset of `data`, each in (0, 1],
 * summing to 1 (datasets' interleave_datasets draws with them), only with an
 * interleave strategy. */
static void check_train_lf_mix(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e, *pe = find(s, PLAN_KEY(TRAIN, interleave_probs));
    int v;
    if ((e = find(s, PLAN_KEY(TRAIN, mix_strategy)))) {
        t->mix_at = e->at;
        if (get_enum(c, e, mix_llm_names, MIX_COUNT, &v)) t->mix = (MixStrategy)v;
    }
    if (!pe) return;
    t->interleave_probs_at = pe->at;
    if (t->mix == MIX_CONCAT) {
        Diag *g = diag_error(c->d, pe->key_at, "'interleave_probs' needs mix_strategy = interleave_under, "
                             "interleave_over or interleave_once");
        diag_note(g, "concatenated datasets are not drawn from by weight");
        return;
    }
    if (!want_terms(c, pe, 1, "a list of numbers")) return;
    const Term *x = pe->value->terms[0];
    if (x->kind != TERM_LIST || x->nitems < 1) {
        Diag *g = diag_error(c->d, x->at, "'interleave_probs' must be a list of numbers, one per dataset");
        diag_help(g, "for example: interleave_probs = [0.7, 0.3]");
        return;
    }
    double *p = arena_alloc(c->a, sizeof(double) * (size_t)x->nitems), sum = 0;
    for (int i = 0; i < x->nitems; i++) {
        const Value *iv = x->items[i];
        if (iv->nterms != 1 || !is_number(iv->terms[0]) || iv->terms[0]->overflow || !(iv->terms[0]->fval > 0) ||
            iv->terms[0]->fval > 1) {
            diag_error(c->d, iv->at, "each of 'interleave_probs' must be a number above 0 and at most 1");
            return;
        }
        p[i] = iv->terms[0]->fval;
        sum += p[i];
    }
    if (x->nitems != t->ndata && t->ndata > 0) {
        Diag *g = diag_error(c->d, x->at, "'interleave_probs' has %d values, but run '%s' has %d datasets", x->nitems,
                             t->name, t->ndata);
        diag_note(g, "one probability per dataset of 'data', in its order");
        return;
    }
    if (fabs(sum - 1) > 1e-6) {
        Diag *g = diag_error(c->d, x->at, "'interleave_probs' sum to %g, not 1", sum);
        diag_note(g, "datasets' interleave_datasets draws each example from a dataset with these probabilities");
        return;
    }
    t->interleave_probs = p;
    t->ninterleave_probs = x->nitems;
}

/* The keys that pass to LLaMA-Factory's own arguments (names and types from
 * its dataclasses: tests/emitters/lf_keys.txt): optim = NAME (transformers'
 * OptimizerNames llmc estimates), neat_packing (a row: sft only; packing
 * on), wsd_decay = PERCENT (schedule =
 * wsd: the decay's share of the steps, default 10%). */
static void check_train_lf_passthrough(Checker *c, Scope *s, PlanTrain *t, const bool *ok)
{
    Entry *e;
    int v;
    if ((e = find(s, PLAN_KEY(TRAIN, optim)))) {
        t->optim_at = e->at;
        if (get_enum(c, e, optim_llm_names, OPTIM_COUNT, &v)) t->optim = (OptimKind)v;
        if (t->offload != OFFLOAD_NONE && t->optim != OPTIM_ADAMW_TORCH && t->optim != OPTIM_ADAMW_TORCH_FUSED) {
            Diag *g = diag_error(c->d, e->value->at, "optim = %s does not go with offload = %s",
                                 optim_llm_names[t->optim], offload_llm_names[t->offload]);
            diag_note(g, "DeepSpeed's CPU offload steps its own CPU Adam on the host (zero_force_ds_cpu_optimizer)");
            diag_help(g, "offload = none, or optim = adamw_torch");
        }
        if (t->precision == PREC_PURE_BF16 && (t->optim == OPTIM_ADAMW_8BIT || t->optim == OPTIM_PAGED_ADAMW_8BIT))
            diag_warning(c->d, e->value->at, "optim = %s keeps 8-bit moments of bf16 weights: pure_bf16 saves "
                         "little more", optim_llm_names[t->optim]);
    }
    if (ok[PLAN_KEY_INDEX(TRAIN, neat_packing)]) {
        e = find(s, PLAN_KEY(TRAIN, neat_packing));
        if (t->neat_packing && t->stage != STAGE_SFT) {
            Diag *g = diag_error(c->d, e->key_at, "'neat_packing' is only used with stage = sft");
            diag_note(g, "LLaMA-Factory refuses it for other stages (hparams/parser.py)");
        } else if (t->neat_packing) {
            t->packing = true;   /* LLaMA-Factory's data_args: neat_packing turns packing on */
        }
    }
    t->wsd_decay = 0.1;
    if ((e = find(s, PLAN_KEY(TRAIN, wsd_decay)))) {
        t->wsd_decay_at = e->at;
        if (t->schedule != SCHED_WSD) {
            Diag *g = diag_error(c->d, e->key_at, "'wsd_decay' is only used with schedule = wsd");
            diag_help(g, "schedule = wsd");
        } else {
            double x;
            if (get_percent(c, e, 100, &x)) {
                if (!(x > 0)) diag_error(c->d, e->value->at, "'wsd_decay' must be above 0%%");
                else t->wsd_decay = x;
            }
        }
    }
}

/* The data mixture and the keys passed through to LLaMA-Factory
 * (tokenize_rate, the estimator's tokens per second of one preprocessing
 * worker, and max_samples, the first N samples of each dataset it keeps, are
 * rows alone). */
static void check_train_lf_extras(Checker *c, Scope *s, PlanTrain *t, const bool *ok)
{
    check_train_lf_mix(c, s, t);
    check_train_lf_passthrough(c, s, t, ok);
}

static void check_train_lf_rules(Checker *c, Scope *s, PlanTrain *t, const bool *ok)
{
    if (t->backend == BACKEND_LLMC) {
        check_train_llmc_rules(c, s, t);
        return;
    }
    check_train_lf_method_rules(c, s, t);
    check_train_lf_extras(c, s, t, ok);
    check_train_lf_pref_rules(c, s, t);
    check_train_lf_eval_rules(c, s, t);
}

/* precision = pure_bf16 is LLaMA-Factory's (pure_bf16: the model stays bf16,
 * trainable parameters are not upcast, torch's AdamW keeps m and v in bf16),
 * and only without DeepSpeed ZeRO: LLaMA-Factory refuses it under ZeRO-3
 * (hparams/parser.py), and ZeRO-1/2 (offload included) keep fp32 partitions of
 * the weights and fp32 moments whatever the model's dtype (DeepSpeed's
 * runtime/zero/stage_1_and_2.py), so the run would not be the one planned. */
static void check_train_precision_rules(Checker *c, const PlanTrain *t)
{
    if (t->precision != PREC_PURE_BF16) return;
    Diag *g;
    if (t->backend == BACKEND_LLMC) {
        g = diag_error(c->d, t->precision_at, "precision = pure_bf16 is not implemented by the llmc trainer");
        diag_note(g, "run '%s' uses backend = llmc%s; the llmc trainer trains bf16 mixed precision with fp32 master "
                  "weights and Adam moments; pure_bf16 is LLaMA-Factory's", t->name,
                  t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s', or precision = bf16", t->name);
        return;
    }
    if (t->shard == SHARD_NONE && t->offload == OFFLOAD_NONE) return;
    const char *shard = shard_llm_names[t->shard], *offload = offload_llm_names[t->offload];
    const char *what = t->shard == SHARD_NONE ? arena_printf(c->a, "offload = %s", offload)
                     : t->offload == OFFLOAD_NONE ? arena_printf(c->a, "shard = %s", shard)
                     : arena_printf(c->a, "shard = %s and offload = %s", shard, offload);
    if (t->shard == SHARD_ZERO3) {
        g = diag_error(c->d, t->precision_at, "precision = pure_bf16 is incompatible with DeepSpeed ZeRO-3 (%s)", what);
        diag_note(g, "LLaMA-Factory refuses it before training starts");
    } else {
        g = diag_error(c->d, t->precision_at, "precision = pure_bf16 does not train in pure bf16 under DeepSpeed ZeRO (%s)",
                       what);
        diag_note(g, "DeepSpeed's ZeRO optimizer keeps fp32 copies of the weights and fp32 Adam moments whatever "
                  "the model's dtype: the run would take bf16 mixed precision's memory, not pure_bf16's");
    }
    if (t->shard == SHARD_NONE)
        diag_help(g, "remove offload: pure_bf16 runs with shard = none and no offload");
    else
        diag_help(g, "precision = bf16 with %s, or precision = pure_bf16 with shard = none and no offload", what);
}

/* Does the last component of a model path (lower case) contain one of the
 * NULL-terminated words? */
static bool path_names(const char *path, const char *const *words)
{
    if (!path) return false;
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--;   /* "/models/x/": x */
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    char low[256];
    size_t n = 0;
    for (size_t k = start; k < end && n + 1 < sizeof low; k++)
        low[n++] = (char)(path[k] >= 'A' && path[k] <= 'Z' ? path[k] - 'A' + 'a' : path[k]);
    low[n] = '\0';
    for (int i = 0; words[i]; i++) if (strstr(low, words[i])) return true;
    return false;
}

/* The chat template against the model (compiler/check/chat_templates.c): the family
 * its path names, else its arch (a warning either way: a template may be
 * meant); the llmc trainer's templates; the special tokens of the template in
 * the model's tokenizer.json when it is readable here (an error: the turns
 * would be cut into plain-text pieces, or LLaMA-Factory adds a token with an
 * untrained embedding that LoRA leaves frozen). */
static void check_train_template(Checker *c, const PlanTrain *t, SrcRange at)
{
    const PlanModel *m = t->model;
    const ChatTemplateInfo *ti = chat_template_info(t->template_);
    const char *path = m->path ? m->path : m->tokenizer;
    if (ti->families[0]) {
        const ChatTemplateInfo *named = NULL;   /* a template whose family the path names */
        for (int i = 1; i < chat_template_count() && !named; i++) {
            const ChatTemplateInfo *o = chat_template_info((ChatTemplate)i);
            if (o->families[0] && path_names(path, o->families)) named = o;
        }
        if (named && !path_names(path, ti->families)) {
            Diag *g = diag_warning(c->d, at, "template %s, but the path of model '%s' names a %s model", ti->name, m->name,
                                   named->name);
            diag_note(g, "a chat template must match the format the model was (or will be) trained with");
            diag_help(g, "template = %s (LLaMA-Factory's template for that family)", named->name);
        } else if (!named && !(ti->archs & (1u << m->arch))) {
            Diag *g = diag_warning(c->d, at, "template %s with %s model '%s'", ti->name, arch_llm_names[m->arch], m->name);
            diag_note(g, "a chat template must match the format the model was (or will be) trained with");
        }
    }
    if (t->backend == BACKEND_LLMC && !ti->llmc) {
        /* the templates llmc-train renders (the table's llmc column), "a and b" and "a or b" */
        const char *mine[TEMPLATE_COUNT];
        int n = 0;
        for (int i = 1; i < chat_template_count(); i++)
            if (chat_template_info((ChatTemplate)i)->llmc) mine[n++] = chat_template_info((ChatTemplate)i)->name;
        char and_list[256] = "", or_list[256] = "";
        for (int i = 0; i < n; i++) {
            const char *sep = i == 0 ? "" : i < n - 1 ? ", " : NULL;
            snprintf(and_list + strlen(and_list), sizeof and_list - strlen(and_list), "%s%s", sep ? sep : " and ", mine[i]);
            snprintf(or_list + strlen(or_list), sizeof or_list - strlen(or_list), "%s%s", sep ? sep : " or ", mine[i]);
        }
        Diag *g = diag_error(c->d, at, "template %s is not implemented by the llmc trainer yet", ti->name);
        diag_note(g, "llmc-train renders the %s templates; LLaMA-Factory renders all of llmc's", and_list);
        diag_help(g, "use backend = llamafactory in run '%s', or template = %s", t->name, or_list);
    }
    if (!ti->tokens[0] || !m->tokenizer) return;
    int n = 0;
    while (ti->tokens[n]) n++;
    bool miss[8] = {false};
    char file[4200], why[600];
    if (n > 8) n = 8;
    int rc = tokenizer_missing_tokens(m->tokenizer, ti->tokens, n, miss, file, (int)sizeof file, why, (int)sizeof why);
    if (rc > 0) {
        /* a pretrained model's unreadable directory has its own note (check_model) */
        char cfg[4200];
        snprintf(cfg, sizeof cfg, "%s/config.json", m->path ? m->path : "");
        bool noted = !m->from_scratch && m->path && strcmp(m->tokenizer, m->path) == 0 && access(cfg, R_OK) != 0;
        if (!noted) {
            Diag *g = diag_note_at(c->d, m->tokenizer_at, "model '%s': %s is not readable here (%s)", m->name, file, why);
            diag_note(g, "not checked: the special tokens of template %s against the tokenizer", ti->name);
        }
        return;
    }
    if (rc < 0) {
        diag_error(c->d, m->tokenizer_at, "model '%s': %s", m->name, why);
        return;
    }
    char missing[400] = "";
    int nmissing = 0;
    for (int i = 0; i < n; i++) {
        if (!miss[i]) continue;
        size_t l = strlen(missing);
        snprintf(missing + l, sizeof missing - l, "%s%s", nmissing++ ? ", " : "", ti->tokens[i]);
    }
    if (!nmissing) return;
    bool lf = t->backend == BACKEND_LLAMAFACTORY;
    Diag *g = (lf ? diag_warning : diag_error)(c->d, at, "template %s writes %s: not tokens of %s", ti->name, missing,
                                               file);
    diag_note(g, lf ? "LLaMA-Factory adds the stop word as a new token with an untrained embedding (LoRA leaves it "
                      "frozen) and splits the other markers into plain-text pieces"
                    : "llmc-train cannot end a turn without the stop word as one token, and would split the others "
                      "into pieces");
    diag_help(g, "the tokenizer of the model's chat (instruct) version, or a template made for this tokenizer");
}

/* train: stage = ENUM, model = NAME, data = [NAME], template = ENUM,
 * context = INT (read by its row, required here). Returns whether the stage was read (the rules that depend
 * on it are skipped otherwise). */
static bool check_train_what(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    int v;
    bool stage_ok = false;
    if ((e = require(c, s, PLAN_KEY(TRAIN, stage), stage_llm_names[STAGE_SFT]))) {
        t->stage_at = e->at;
        if (get_enum(c, e, stage_llm_names, STAGE_COUNT, &v)) { t->stage = (TrainStage)v; stage_ok = true; }
    }
    if ((e = require(c, s, PLAN_KEY(TRAIN, model), "NAME"))) { t->model_at = e->at; t->model = get_ref(c, e, K_MODEL); }
    if ((e = require(c, s, PLAN_KEY(TRAIN, data), "[NAME]"))) {
        t->data_at = e->at;
        get_dataset_list(c, e, &t->data, &t->ndata);
    }
    t->template_ = TEMPLATE_NONE;
    Entry *tmpl = find(s, PLAN_KEY(TRAIN, template));
    const char *template_names[TEMPLATE_COUNT];
    for (int i = 0; i < TEMPLATE_COUNT; i++) template_names[i] = chat_template_info((ChatTemplate)i)->name;
    if (tmpl) { t->template_at = tmpl->at; if (get_enum(c, tmpl, template_names, TEMPLATE_COUNT, &v)) t->template_ = (ChatTemplate)v; }
    require(c, s, PLAN_KEY(TRAIN, context), "4096");   /* read by its row */
    return stage_ok;
}

/* train: batch = INT per gpu (the micro batch; the global batch follows
 * from the nodes and grad_accum). */
static void check_train_batch(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = require(c, s, PLAN_KEY(TRAIN, batch), "4 per gpu")) && e->value) {
        t->batch_at = e->at;
        const Value *bv = e->value;
        if (bv->nterms >= 3 && bv->terms[0]->kind == TERM_INT && bv->terms[1]->kind == TERM_IDENT &&
            strcmp(bv->terms[1]->str, "per") == 0) {
            const Term *unit = bv->terms[2];
            if (unit->kind != TERM_IDENT || strcmp(unit->str, "gpu") != 0) {
                Diag *g = diag_error(c->d, unit->at, "'batch' is counted per gpu, found 'per %s'", unit->text);
                diag_note(g, "on CPU-only clusters 'per gpu' means per trainer process");
            } else if (want_terms(c, e, 3, "a count per gpu")) {
                const PlanLimit *l = plan_limit(PL_TRAIN_MICRO_BATCH);
                if (bv->terms[0]->overflow || plan_limit_violation(l, (double)bv->terms[0]->ival))
                    diag_error(c->d, bv->terms[0]->at, "'batch' must be between %.0f and %.0f per gpu, found %s",
                               l->min, l->max, bv->terms[0]->text);
                else
                    t->micro_batch = (int)bv->terms[0]->ival;
            }
        } else {
            Diag *g = diag_error(c->d, bv->at, "'batch' must be a count per gpu, found %s", value_desc(c, bv));
            diag_help(g, "for example: batch = 4 per gpu (the global batch follows from nodes and grad_accum)");
        }
    }
}

/* train: warmup = PERCENT | INT [steps]. */
static void check_train_warmup(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, PLAN_KEY(TRAIN, warmup))) && e->value) {
        t->warmup_at = e->at;
        const Value *wv = e->value;
        if (is_percent(wv)) get_percent(c, e, plan_limit(PL_TRAIN_WARMUP_RATIO)->max * 100, &t->warmup_ratio);
        else if (is_count_of(wv, "steps")) {
            if (wv->terms[0]->ival < 0) diag_error(c->d, wv->at, "'warmup' must not be negative");
            else if (within(c, wv->terms[0]->at, PLAN_KEY(TRAIN, warmup), PL_TRAIN_WARMUP_STEPS,
                            wv->terms[0]->overflow ? INFINITY : (double)wv->terms[0]->ival, wv->terms[0]->text))
                t->warmup_steps = wv->terms[0]->ival;
        } else if (wv->nterms == 1 && wv->terms[0]->kind == TERM_INT) {
            get_int_lim(c, e, PL_TRAIN_WARMUP_STEPS, &t->warmup_steps);
        } else {
            Diag *g = diag_error(c->d, wv->at, "'warmup' must be a percentage of the steps or a step count, found %s", value_desc(c, wv));
            diag_help(g, "for example: warmup = 3%% or warmup = 100 steps");
        }
    } else if (e) {
        want_terms(c, e, 1, "a percentage or a step count");
    }
}

/* train: betas = [NUMBER, NUMBER] (Adam's beta1, beta2). */
static void check_train_betas(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, PLAN_KEY(TRAIN, betas))) && want_terms(c, e, 1, "a list of two numbers")) {
        const Term *x = e->value->terms[0];
        if (x->kind != TERM_LIST || x->nitems != 2 || x->items[0]->nterms != 1 || x->items[1]->nterms != 1 ||
            !is_number(x->items[0]->terms[0]) || !is_number(x->items[1]->terms[0])) {
            Diag *g = diag_error(c->d, x->at, "'betas' must be a list of two numbers");
            diag_help(g, "for example: betas = [0.9, 0.95]");
        } else {
            double b1 = x->items[0]->terms[0]->fval, b2 = x->items[1]->terms[0]->fval;
            const Term *t1 = x->items[0]->terms[0], *t2 = x->items[1]->terms[0];
            if (within(c, t1->at, "beta1", PL_TRAIN_BETA1, t1->overflow ? INFINITY : b1, t1->text) &&
                within(c, t2->at, "beta2", PL_TRAIN_BETA2, t2->overflow ? INFINITY : b2, t2->text)) {
                t->beta1 = b1;
                t->beta2 = b2;
            }
        }
    }
}

/* train: seed = INT, at most 2^53 - 1 (plan.json's numbers are doubles). */
static void check_train_seed(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    int64_t seed;
    if ((e = find(s, PLAN_KEY(TRAIN, seed)))) {
        const Term *st = e->value && e->value->nterms == 1 ? e->value->terms[0] : NULL;
        const PlanLimit *l = plan_limit(PL_TRAIN_SEED);
        if (st && st->kind == TERM_INT && (st->overflow || (double)st->ival > l->max)) {
            Diag *g = diag_error(c->d, st->at, "'seed' must be at most %.0f, found %s", l->max, st->text);
            diag_note(g, "plan.json numbers are read as doubles, exact up to 2^53 - 1; a larger seed would change");
        } else if (get_int_lim(c, e, PL_TRAIN_SEED, &seed)) {
            t->seed = (uint64_t)seed;
        }
    }
}

/* train: the length and the optimizer keys that need more than their row
 * (epochs, max_steps, grad_accum, schedule, weight_decay, eps and grad_clip
 * are rows alone; lr and min_lr are rows, required and at most lr here):
 * batch, warmup, betas, seed (defaults: AdamW as torch's, seed 42). */
static void check_train_optimizer(Checker *c, Scope *s, PlanTrain *t, const bool *ok)
{
    check_train_batch(c, s, t);
    require(c, s, PLAN_KEY(TRAIN, lr), "1e-5");   /* lr and min_lr read by their rows */
    if (ok[PLAN_KEY_INDEX(TRAIN, min_lr)] && t->lr > 0 && t->min_lr > t->lr)
        diag_error(c->d, find(s, PLAN_KEY(TRAIN, min_lr))->value->at, "min_lr (%g) must not exceed lr (%g)", t->min_lr, t->lr);
    check_train_warmup(c, s, t);
    t->beta1 = 0.9;
    t->beta2 = 0.999;
    t->seed = 42;
    check_train_betas(c, s, t);
    check_train_seed(c, s, t);
}

/* train: mfu = PERCENT | NUMBER (a fraction of the GPU's peak, for the
 * time estimate). */
static void check_train_mfu(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    if ((e = find(s, PLAN_KEY(TRAIN, mfu))) && e->value) {
        t->mfu_at = e->at;
        if (is_percent(e->value)) {
            if (get_percent(c, e, 100, &t->mfu) && t->mfu == 0) { diag_error(c->d, e->value->at, "'mfu' must be above 0%%"); t->mfu = 0; }
        } else {
            get_number(c, e, 0, true, 1, &t->mfu);
        }
    } else if (e) {
        want_terms(c, e, 1, "a fraction or percentage");
    }
}

/* train: how it runs, the keys that need more than their row (precision,
 * shard, recompute, attention, bad_records and backend are rows alone):
 * deterministic (default: on with backend = llmc, off with llamafactory, as
 * HF's full_determinism), packing (a row; default: on for pt), train_on_prompt and
 * mask_history (default off; their rules in check_train_masking_rules), mfu,
 * bytes_per_token, output (default runs/NAME). */
static void check_train_execution(Checker *c, Scope *s, PlanTrain *t, bool stage_ok, const bool *ok)
{
    Entry *e;
    if (!ok[PLAN_KEY_INDEX(TRAIN, packing)]) t->packing = stage_ok && t->stage == STAGE_PT;
    if ((e = find(s, PLAN_KEY(TRAIN, train_on_prompt)))) { t->train_on_prompt_at = e->key_at; get_bool(c, e, &t->train_on_prompt); }
    if ((e = find(s, PLAN_KEY(TRAIN, mask_history)))) { t->mask_history_at = e->key_at; get_bool(c, e, &t->mask_history); }
    check_train_mfu(c, s, t);
    t->deterministic = t->backend == BACKEND_LLMC;
    if ((e = find(s, PLAN_KEY(TRAIN, deterministic)))) { t->deterministic_at = e->key_at; get_bool(c, e, &t->deterministic); }
    if ((e = find(s, PLAN_KEY(TRAIN, output)))) { t->output_at = e->at; t->output_dir = get_plan_path(c, e, false); }
    else { t->output_dir = arena_printf(c->a, "runs/%s", t->name); t->output_default = true; }
}

/* train: checkpoint_every = DURATION | INT steps (default 30 min);
 * checkpoint_keep is a row alone. */
static void check_train_checkpoints(Checker *c, Scope *s, PlanTrain *t)
{
    Entry *e;
    t->checkpoint_every_seconds = 1800;
    if ((e = find(s, PLAN_KEY(TRAIN, checkpoint_every))) && e->value) {
        t->checkpoint_at = e->at;
        if (e->value->nterms == 1 && e->value->terms[0]->kind == TERM_IDENT && !strcmp(e->value->terms[0]->str, "epoch")) {
            /* LLaMA-Factory's save_strategy: epoch (backend = llamafactory only: check_train_llmc_rules) */
            t->checkpoint_epoch = true;
            t->checkpoint_every_seconds = 0;
        } else if (is_count_of(e->value, "steps")) {
            const Term *n = e->value->terms[0];
            if (n->ival < 1 && !n->overflow) diag_error(c->d, e->value->at, "'checkpoint_every' must be at least 1 step");
            else if (within(c, n->at, PLAN_KEY(TRAIN, checkpoint_every), PL_CKPT_EVERY_STEPS,
                            n->overflow ? INFINITY : (double)n->ival, n->text)) {
                t->checkpoint_every_steps = e->value->terms[0]->ival;
                t->checkpoint_every_seconds = 0;
            }
        } else {
            double secs;
            if (get_duration(c, e, &secs)) {
                const PlanLimit *l = plan_limit(PL_CKPT_EVERY_SECONDS);
                if (plan_limit_violation(l, secs) == 3)
                    diag_error(c->d, e->value->at, "'checkpoint_every' must be more than 0 s");
                else if (plan_limit_violation(l, secs))
                    diag_error(c->d, e->value->at, "'checkpoint_every' must be at most %g d", l->max / 86400);
                else {
                    t->checkpoint_every_seconds = secs;
                    /* valid, but a large model then spends its time writing checkpoints */
                    if (secs < 60)
                        diag_warning(c->d, e->value->at, "checkpoint every %g s: more often than once a minute", secs);
                }
            }
        }
    } else if (e) {
        want_terms(c, e, 1, "a duration or a step count");
    }
}

/* The run's rules across its model: context within max_context, no RoPE
 * scaling for llmc-train, the template's markers tokens of the tokenizer. */
static void check_train_model_rules(Checker *c, PlanTrain *t, const Entry *tmpl)
{
    if (t->model && t->context > 0 && t->model->max_context > 0 && t->context > t->model->max_context) {
        Diag *g = diag_error(c->d, t->context_at, "context %d exceeds the max_context %d of model '%s'",
                             t->context, t->model->max_context, t->model->name);
        diag_note(g, "max_context of '%s' is set at %s:%d", t->model->name, t->model->max_context_at.start.file,
                  t->model->max_context_at.start.line);
    }
    if (t->model && t->model->arch >= ARCH_LLMC_COUNT && t->backend == BACKEND_LLMC) {
        static const char *const why[] = {
            [ARCH_MISTRAL] = "its head_dim and sliding-window attention are outside llmc-train's one model code path",
            [ARCH_GEMMA2] = "Gemma 2's four norms per layer, GeGLU, logit soft-capping and alternating sliding-window "
                            "attention are not in llmc-train's model",
            [ARCH_MIXTRAL] = "llmc-train has no mixture-of-experts layers (router, experts, load balancing)",
            [ARCH_QWEN3_MOE] = "llmc-train has no mixture-of-experts layers (router, experts, load balancing)",
        };
        Diag *g = diag_error(c->d, t->model_at, "model '%s' (arch = %s) cannot be trained by llmc-train",
                             t->model->name, arch_llm_names[t->model->arch]);
        diag_note(g, "%s; run '%s' uses backend = llmc%s", why[t->model->arch], t->name,
                  t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s' (LLaMA-Factory trains %s models)", t->name,
                  arch_llm_names[t->model->arch]);
    }
    if (t->model && t->model->rope_scaling && t->backend == BACKEND_LLMC) {
        Diag *g = diag_error(c->d, t->model_at, "model '%s' uses RoPE scaling %s, which llmc-train does not implement",
                             t->model->name, t->model->rope_scaling);
        diag_note(g, "run '%s' uses backend = llmc%s; llmc-train refuses such a model rather than train it as plain RoPE",
                  t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s' (LLaMA-Factory applies the scaling)", t->name);
    }
    if (t->model && tmpl && t->template_ != TEMPLATE_NONE && t->stage != STAGE_PT && tmpl->value)
        check_train_template(c, t, tmpl->value->at);
}

/* The run's rules across its stage (read): a chat template for sft, the
 * datasets' formats for the stage and the backend, epochs vs max_steps,
 * warmup within max_steps. */
static void check_train_stage_rules(Checker *c, const Scope *s, PlanTrain *t, const Entry *tmpl)
{
    if (t->stage != STAGE_PT && !tmpl && !s->broken) {
        Diag *g = diag_error(c->d, s->at, "%s run '%s' needs a chat template", stage_llm_names[t->stage], t->name);
        diag_help(g, "add 'template = qwen' or 'template = llama3' (the model's chat format)");
    } else if (t->stage != STAGE_PT && tmpl && t->template_ == TEMPLATE_NONE && tmpl->value && tmpl->value->terms[0]->kind == TERM_IDENT &&
               strcmp(tmpl->value->terms[0]->str, "none") == 0) {
        diag_error(c->d, tmpl->value->at, "%s needs a chat template; 'none' is only for pt", stage_llm_names[t->stage]);
    } else if (t->stage == STAGE_PT && tmpl && t->template_ != TEMPLATE_NONE) {
        diag_warning(c->d, tmpl->value->at, "template is ignored for pt (pre-training reads raw text)");
    }
    for (int i = 0; i < t->ndata; i++) check_stage_data(c, t, t->data[i], t->data_at);
    for (int i = 0; i < t->neval_data; i++) check_stage_data(c, t, t->eval_data[i], t->eval_data_at);
    /* The llmc trainer reads JSON and JSON Lines (runtime/data/records.c), no Parquet. */
    for (int i = 0; i < t->ndata + t->neval_data; i++) {
        const PlanDataset *ds = i < t->ndata ? t->data[i] : t->eval_data[i - t->ndata];
        if (t->backend != BACKEND_LLMC || !ds || (!ds->directory && !ds->hf_hub)) continue;
        Diag *g = diag_error(c->d, ds->hf_hub ? ds->hf_hub_at : ds->file_at, "dataset '%s' is %s, which the llmc "
                             "trainer cannot read", ds->name, ds->hf_hub ? "a Hub dataset" : "a directory of shards");
        diag_note(g, "llmc-train prepare reads one local JSON or JSON Lines file; run '%s' uses backend = llmc%s",
                  t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "set backend = llamafactory in run '%s', or give one local file", t->name);
    }
    for (int i = 0; i < t->ndata; i++) {
        const PlanDataset *ds = t->data[i];
        if (t->backend != BACKEND_LLMC || !ds->file || ds->directory || plan_llmc_reads_dataset(ds->file)) continue;
        Diag *g = diag_error(c->d, ds->file_at, "dataset '%s' is a Parquet file, which the llmc trainer cannot read",
                             ds->name);
        diag_note(g, "run '%s' uses backend = llmc%s", t->name, t->backend_at.start.file ? "" : " (the default)");
        diag_help(g, "convert it to JSON Lines (.jsonl), or set backend = llamafactory in run '%s'", t->name);
    }
    if (t->max_steps > 0 && t->epochs_at.start.file)
        diag_warning(c->d, t->epochs_at, "epochs is ignored: max_steps is set and decides the length of run '%s'", t->name);
    if (t->max_steps > 0 && t->warmup_steps > 0 && t->warmup_steps >= t->max_steps)
        diag_error(c->d, t->warmup_at, "warmup (%lld steps) must be shorter than max_steps (%lld)",
                   (long long)t->warmup_steps, (long long)t->max_steps);
    /* epochs too small for one optimizer step on any dataset (a dataset has
     * at most PLAN_INT_EXACT_MAX records): 1e-320, a denormal, passes the
     * row's "greater than 0", and both trainers would round the run up to a
     * whole step. Against the data itself: emit_check_estimated. */
    if (t->max_steps <= 0 && t->epochs_at.start.file && t->epochs * PLAN_INT_EXACT_MAX < 1) {
        Diag *g = diag_error(c->d, t->epochs_at, "epochs = %.3g is less than one optimizer step of any dataset", t->epochs);
        diag_note(g, "%.3g epochs of the largest dataset a plan can name (%.0f records) is %.3g records, fewer than one",
                  t->epochs, PLAN_INT_EXACT_MAX, t->epochs * PLAN_INT_EXACT_MAX);
        diag_help(g, "epochs = 1, or max_steps = N for a run of N steps");
    }
}

/* train_on_prompt and mask_history as LLaMA-Factory allows them: sft only
 * (hparams/parser.py), not both (hparams/data_args.py), and train_on_prompt
 * not with a template that ends responses with an efficient eos
 * (data/template.py, get_template_and_fix_tokenizer). */
static void check_train_masking_rules(Checker *c, const PlanTrain *t)
{
    Diag *g;
    const SrcRange *at[2] = {&t->train_on_prompt_at, &t->mask_history_at};
    const bool set[2] = {t->train_on_prompt, t->mask_history};
    static const char *const key[2] = {PLAN_KEY(TRAIN, train_on_prompt), PLAN_KEY(TRAIN, mask_history)};
    for (int k = 0; k < 2; k++)
        if (set[k] && t->stage != STAGE_SFT) {
            g = diag_error(c->d, *at[k], "'%s' is only used with stage = sft, not %s", key[k], stage_llm_names[t->stage]);
            diag_note(g, "LLaMA-Factory refuses it outside sft (hparams/parser.py)");
        }
    if (t->stage != STAGE_SFT) return;
    if (t->train_on_prompt && t->mask_history) {
        g = diag_error(c->d, t->mask_history_at, "'mask_history' and 'train_on_prompt' cannot both be set");
        diag_note(g, "LLaMA-Factory refuses the pair (hparams/data_args.py): mask_history trains only the last "
                  "response, train_on_prompt every prompt");
        diag_help(g, "remove one of them from run '%s'", t->name);
    }
    if (t->train_on_prompt && chat_template_info(t->template_)->efficient_eos) {
        g = diag_error(c->d, t->train_on_prompt_at, "'train_on_prompt' cannot be used with template = %s",
                       chat_template_info(t->template_)->name);
        diag_note(g, "LLaMA-Factory refuses train_on_prompt with a template whose efficient_eos is set "
                  "(data/template.py)");
    }
}

/* train: output, normalised (contract/path_policy.h), is no system directory
 * and does not overlap what the run reads: not inside the model directory,
 * not the directory of a dataset, of the tokenizer or of the plan that names
 * it. llmc-train refuses the same plan.json (runtime/plan/plan.c). The
 * default (runs/NAME in the compiled directory) is always its own. */
static void check_train_output_path(Checker *c, Scope *s, const PlanTrain *t)
{
    if (t->output_default || !t->output_dir) return;
    const Entry *oe = find(s, PLAN_KEY(TRAIN, output));
    const char *value = oe && oe->value && oe->value->nterms == 1 && oe->value->terms[0]->kind == TERM_STRING
                        ? oe->value->terms[0]->str : t->output_dir;
    PathInput in[4 + 2 * 64];
    int n = 0;
    const PlanModel *m = t->model;
    if (m && m->path) in[n++] = (PathInput){"the model directory", m->path, m->path, PATH_INPUT_WITHIN};
    if (m && m->tokenizer && (!m->path || strcmp(m->tokenizer, m->path)))
        in[n++] = (PathInput){"the tokenizer directory", m->tokenizer, m->tokenizer, PATH_INPUT_EQUAL};
    const char *file = t->output_at.start.file, *slash = file ? strrchr(file, '/') : NULL;
    const char *plan_dir = !file ? NULL : !slash ? "." : slash == file ? "/" : arena_printf(c->a, "%.*s", (int)(slash - file), file);
    if (plan_dir) in[n++] = (PathInput){"the directory of plan file", file, plan_dir, PATH_INPUT_EQUAL};
    for (int k = 0; k < 2; k++) {
        PlanDataset *const *ds = k ? t->eval_data : t->data;
        int nds = k ? t->neval_data : t->ndata;
        for (int i = 0; i < nds && n < (int)NUNITS(in); i++) {
            const char *f = ds[i] ? ds[i]->file : NULL;
            if (!f) continue;
            const char *sl = strrchr(f, '/');
            const char *dir = !sl ? "." : sl == f ? "/" : arena_printf(c->a, "%.*s", (int)(sl - f), f);
            in[n++] = (PathInput){arena_printf(c->a, "the directory of dataset '%s', file", ds[i]->name), f, dir, PATH_INPUT_EQUAL};
        }
    }
    char msg[3 * PATH_POLICY_MAX];
    if (path_policy_output(value, t->output_dir, in, n, msg, sizeof msg))
        diag_error(c->d, t->output_at, "'output' %s", msg);
}

/* train NAME { ... }: every key in the order below, then the rules across
 * keys (LLaMA-Factory's own keys and rules last). */
void check_train(Checker *c, const Item *it, PlanTrain *t)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, PKB_TRAIN);
    bool ok[PLAN_KEYS_MAX];
    check_row_keys(c, &s, PKB_TRAIN, train_reads, t, ok);
    bool stage_ok = check_train_what(c, &s, t);
    Entry *tmpl = find(&s, PLAN_KEY(TRAIN, template));
    check_train_optimizer(c, &s, t, ok);
    check_train_execution(c, &s, t, stage_ok, ok);
    check_train_checkpoints(c, &s, t);
    check_train_lf_keys(c, &s, t, ok);
    report_missing(c, &s);
    check_train_model_rules(c, t, tmpl);
    check_train_output_path(c, &s, t);
    if (!stage_ok) return;
    check_train_stage_rules(c, &s, t, tmpl);
    check_train_masking_rules(c, t);
    check_train_lf_rules(c, &s, t, ok);
    check_train_precision_rules(c, t);
    check_train_formats(c, &s, t, ok);
}
