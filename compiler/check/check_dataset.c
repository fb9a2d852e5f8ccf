/* check_dataset.c — dataset NAME: file, directory of shards or Hub id,
 * format, columns and tags, and the sizes the estimator reads. */
#include "check_internal.h"

/* The dataset keys contract/plan_keys.h's rows read (check_row_keys) before
 * the rules below run. */
static const RowRead dataset_reads[] = {
#define X(key, type, row, dflt, backends, json, read, field) CK_READ_##read(PlanDataset, type, row, field),
    PLAN_KEYS_DATASET(X)
#undef X
};

/* Fill a columns/tags sub-block; `slots` parallels block b's rows. */
static void get_string_table(Checker *c, const Item *it, const Entry *e, PlanKeyBlock b, const char **slots[])
{
    const PlanKeyList *keys = &plan_key_lists[b];
    if (!e->sub && e->value) {
        Diag *g = diag_error(c->d, e->value->at, "'%s' is a block of names, not a value", e->key);
        diag_help(g, "write %s { %s = \"...\" }", e->key, keys->keys[0].key);
        return;
    }
    Scope s = scope_of(c, it, e->sub, e->nsub, e->key);
    s.at = e->key_at;
    check_keys(c, &s, b);
    for (int k = 0; k < keys->n; k++) {
        Entry *x = find(&s, keys->keys[k].key);
        const char *str;
        if (!x || !get_string(c, x, &str)) continue;
        if (!str[0]) { diag_error(c->d, x->value->at, "'%s' must not be empty", x->key); continue; }
        long cc = plan_control_char_at(str);
        if (cc >= 0) {
            char ch[16];
            Diag *g = diag_error(c->d, x->value->at, "'%s' contains a control character (%s at offset %ld)",
                                 x->key, plan_control_char_name(str, cc, ch), cc);
            diag_note(g, "names of columns and tags reach dataset_info.json, the trainer's messages and terminals");
        }   /* kept: the rules below need not also call it missing */
        *slots[k] = str;
    }
}

static void check_dataset_block(Checker *c, const Item *it, PlanDataset *ds);

/* ---- data as it is stored (issue 33): a directory of shards, a Hub name,
 * no glob (LLaMA-Factory's data/loader.py reads a file, or every file of a
 * directory, all of one type; a Hub dataset by hf_hub_url). ---- */

/* LLaMA-Factory's FILEEXT2TYPE (extras/constants.py) that llmc plans take. */
static bool dataset_shard_ext_ok(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcmp(dot, ".json") || !strcmp(dot, ".jsonl") || !strcmp(dot, ".parquet"));
}

/* The files of a directory of shards, when readable here: one extension for
 * all (LLaMA-Factory: "File types should be identical"), no subdirectory (it
 * would be passed on as a file), at least one; their sizes summed into the
 * dataset's size when none is stated. */
static void check_dataset_directory(Checker *c, const Entry *e, PlanDataset *ds)
{
    DIR *dir = opendir(ds->file);
    if (!dir) {
        Diag *g = diag_note_at(c->d, e->value->at, "dataset '%s': directory %s is not readable here (%s)", ds->name,
                               ds->file, strerror(errno));
        diag_note(g, "not checked: its shards' types and records");
        return;
    }
    struct dirent *de;
    const char *first_ext = NULL, *first_name = NULL;
    int files = 0;
    uint64_t total = 0;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.') continue;
        char *path = arena_printf(c->a, "%s/%s", ds->file, de->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            Diag *g = diag_error(c->d, e->value->at, "dataset '%s': %s holds a subdirectory '%s'", ds->name, ds->file,
                                 de->d_name);
            diag_note(g, "LLaMA-Factory passes every entry of the directory on as a data file");
            closedir(dir);
            return;
        }
        const char *dot = strrchr(de->d_name, '.');
        if (!dataset_shard_ext_ok(de->d_name)) {
            Diag *g = diag_error(c->d, e->value->at, "dataset '%s': shard '%s' in %s is not .json, .jsonl or .parquet",
                                 ds->name, de->d_name, ds->file);
            diag_note(g, "LLaMA-Factory reads every file of the directory, all of one type");
            closedir(dir);
            return;
        }
        if (!first_ext) { first_ext = arena_strdup(c->a, dot); first_name = arena_strdup(c->a, de->d_name); }
        else if (strcmp(first_ext, dot)) {
            Diag *g = diag_error(c->d, e->value->at, "dataset '%s': %s mixes shard types ('%s' and '%s')", ds->name,
                                 ds->file, first_name, de->d_name);
            diag_note(g, "LLaMA-Factory refuses a directory whose files differ in type (\"File types should be identical\")");
            closedir(dir);
            return;
        }
        files++;
        total += (uint64_t)st.st_size;
    }
    closedir(dir);
    if (files == 0) {
        diag_error(c->d, e->value->at, "dataset '%s': directory %s holds no data files", ds->name, ds->file);
        return;
    }
    if (!ds->size_bytes) ds->size_bytes = total;
}

/* file = "...": a directory of shards (trailing '/') or a glob (refused).
 * Returns true when the entry was handled here (directory or error). */
static bool check_dataset_file_kind(Checker *c, const Entry *e, PlanDataset *ds)
{
    const char *raw;
    if (!e->value || e->value->nterms != 1 || e->value->terms[0]->kind != TERM_STRING) return false;
    raw = e->value->terms[0]->str;
    if (raw && strpbrk(raw, "*?[")) {
        Diag *g = diag_error(c->d, e->value->at, "dataset '%s': file \"%s\" is a pattern, which LLaMA-Factory cannot "
                             "read", ds->name, raw);
        diag_note(g, "LLaMA-Factory's loader takes one file, or a directory whose every file it reads (all of one type)");
        diag_help(g, "put the shards in one directory and write file = \"DIR/\"");
        return true;
    }
    size_t n = raw ? strlen(raw) : 0;
    if (n < 2 || raw[n - 1] != '/') return false;
    ds->directory = true;
    ds->file = get_plan_path(c, e, false);
    if (ds->file) check_dataset_directory(c, e, ds);
    return true;
}

/* hf_hub = "ORG/NAME": a dataset on the Hugging Face Hub (dataset_info.json's
 * hf_hub_url), instead of file. */
static void check_dataset_hub(Checker *c, Scope *s, const Entry *hub, PlanDataset *ds)
{
    Entry *f = find(s, PLAN_KEY(DATASET, file));
    if (f) {
        Diag *g = diag_error(c->d, f->key_at, "dataset '%s' names both 'file' and 'hf_hub'", ds->name);
        diag_help(g, "keep one: a local file or directory, or a Hub dataset");
    }
    const char *name;
    if (!get_string(c, hub, &name)) return;
    ds->hf_hub_at = hub->at;
    const char *slash = strchr(name, '/');
    bool ok = slash && slash != name && slash[1] && !strchr(slash + 1, '/');
    for (const char *p = name; ok && *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr("._-/", *p))) ok = false;
    if (!ok) {
        Diag *g = diag_error(c->d, hub->value->at, "'hf_hub' must be a Hub dataset name \"ORG/NAME\", found \"%s\"", name);
        diag_note(g, "letters, digits, '.', '_' and '-', one '/' (as huggingface.co/datasets/ORG/NAME)");
        return;
    }
    ds->hf_hub = name;
}

/* A dataset block, then (when the block itself is right) the first records of
 * its file where it is readable here (model_files.c). */
void check_dataset(Checker *c, const Item *it, PlanDataset *ds)
{
    int before = diags_error_count(c->d);
    check_dataset_block(c, it, ds);
    if (diags_error_count(c->d) == before && ds->file && !ds->directory) dataset_check_records(ds, c->d);
}

static void check_dataset_block(Checker *c, const Item *it, PlanDataset *ds)
{
    Scope s = scope_of(c, it, it->entries, it->nentries, NULL);
    check_keys(c, &s, PKB_DATASET);
    Entry *e;
    ds->samples = -1;   /* not stated: the rows leave these (DEFAULT "") */
    ds->tokens = -1;
    bool ok[PLAN_KEYS_MAX];
    check_row_keys(c, &s, PKB_DATASET, dataset_reads, ds, ok);
    Entry *hub = find(&s, PLAN_KEY(DATASET, hf_hub));
    if (hub) check_dataset_hub(c, &s, hub, ds);
    else if ((e = require(c, &s, PLAN_KEY(DATASET, file), "\"/mnt/data-hps/data/NAME.json\""))) {
        ds->file_at = e->at;
        if (!check_dataset_file_kind(c, e, ds)) ds->file = get_plan_path(c, e, true);
        if (ds->file && !ds->directory) {
            const char *dot = strrchr(ds->file, '.');
            const char *slash = strrchr(ds->file, '/');
            if (!dot || (slash && dot < slash) ||
                (strcmp(dot, ".json") && strcmp(dot, ".jsonl") && strcmp(dot, ".parquet"))) {
                Diag *g = diag_error(c->d, e->value->at, "dataset file must end in .json, .jsonl or .parquet");
                diag_note(g, "these are the formats LLaMA-Factory and llmc-train read");
            }
        }
    }
    require(c, &s, PLAN_KEY(DATASET, format), format_llm_names[FORMAT_SHAREGPT]);   /* read by its row */
    bool format_ok = ok[PLAN_KEY_INDEX(DATASET, format)];
    const char **col_slots[] = {&ds->columns.prompt, &ds->columns.query, &ds->columns.response,
                                &ds->columns.history, &ds->columns.messages, &ds->columns.system,
                                &ds->columns.tools, &ds->columns.text, &ds->columns.chosen,
                                &ds->columns.rejected, &ds->columns.kto_tag};
    const char **tag_slots[] = {&ds->tags.role, &ds->tags.content, &ds->tags.user, &ds->tags.assistant,
                                &ds->tags.observation, &ds->tags.function, &ds->tags.system};
    _Static_assert(NUNITS(col_slots) == PLAN_KEYS_N_COLUMNS && NUNITS(tag_slots) == PLAN_KEYS_N_TAGS,
                   "a slot per row of contract/plan_keys.h");
    Entry *cols = find(&s, PLAN_KEY(DATASET, columns)), *tags = find(&s, PLAN_KEY(DATASET, tags));
    if (cols) { ds->columns_at = cols->at; get_string_table(c, it, cols, PKB_COLUMNS, col_slots); }
    if (tags) { ds->tags_at = tags->at; get_string_table(c, it, tags, PKB_TAGS, tag_slots); }
    report_missing(c, &s);

    if (!format_ok) return;
    /* LLaMA-Factory's rules for which columns and tags each format uses. */
    const char *fmt = format_llm_names[ds->format];
    SrcRange cat = cols ? cols->key_at : ds->format_at;
    const DatasetColumns *co = &ds->columns;
    struct { const char *name, *val; bool alpaca, sharegpt, text; } use[] = {
        {PLAN_KEY(COLUMNS, prompt), co->prompt, 1, 0, 0}, {PLAN_KEY(COLUMNS, query), co->query, 1, 0, 0},
        {PLAN_KEY(COLUMNS, response), co->response, 1, 0, 0}, {PLAN_KEY(COLUMNS, history), co->history, 1, 0, 0},
        {PLAN_KEY(COLUMNS, messages), co->messages, 0, 1, 0}, {PLAN_KEY(COLUMNS, system), co->system, 1, 1, 0},
        {PLAN_KEY(COLUMNS, tools), co->tools, 1, 1, 0}, {PLAN_KEY(COLUMNS, text), co->text, 0, 0, 1},
        {PLAN_KEY(COLUMNS, chosen), co->chosen, 1, 1, 0}, {PLAN_KEY(COLUMNS, rejected), co->rejected, 1, 1, 0},
        {PLAN_KEY(COLUMNS, kto_tag), co->kto_tag, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof use / sizeof use[0]; i++) {
        if (!use[i].val) continue;
        bool ok = ds->format == FORMAT_ALPACA ? use[i].alpaca : ds->format == FORMAT_SHAREGPT ? use[i].sharegpt : use[i].text;
        Entry *x = NULL;
        for (int k = 0; cols && k < cols->nsub; k++)
            if (strcmp(cols->sub[k]->key, use[i].name) == 0) { x = cols->sub[k]; break; }
        SrcRange at = x ? x->key_at : cat;
        if (!ok) {
            Diag *g = diag_error(c->d, at, "column '%s' is not used by %s datasets", use[i].name, fmt);
            diag_note(g, ds->format == FORMAT_ALPACA ? "alpaca columns: prompt, query, response, history, system, tools"
                         : ds->format == FORMAT_SHAREGPT ? "sharegpt columns: messages, system, tools"
                                                         : "text columns: text");
        } else if ((i == 8 || i == 9) && !ds->ranking) {
            Diag *g = diag_error(c->d, at, "column '%s' is only used by ranking datasets", use[i].name);
            diag_help(g, "add 'ranking = true' for preference data");
        } else if (i == 10 && ds->ranking) {
            Diag *g = diag_error(c->d, at, "column 'kto_tag' is not used by ranking datasets");
            diag_note(g, "KTO data holds one answer per example and a true/false label (kto_tag), not pairs");
        }
    }
    Diag *g;
    switch (ds->format) {
    case FORMAT_SHAREGPT:
        if (!co->messages) {
            g = diag_error(c->d, cat, "sharegpt dataset '%s' needs columns { messages = \"...\" }", ds->name);
            diag_note(g, "the column that holds the list of turns (LLaMA-Factory: \"conversations\" by default)");
        }
        if (!ds->tags.role || !ds->tags.content) {
            g = diag_error(c->d, tags ? tags->key_at : ds->format_at,
                           "sharegpt dataset '%s' needs tags { role = \"...\" content = \"...\" }", ds->name);
            diag_note(g, "the keys of each turn that hold the speaker and the text");
        }
        break;
    case FORMAT_ALPACA:
        if (!co->prompt) {
            g = diag_error(c->d, cat, "alpaca dataset '%s' needs columns { prompt = \"...\" }", ds->name);
            diag_note(g, "the column with the instruction (LLaMA-Factory: \"instruction\")");
        }
        if (!ds->ranking && !co->response) {
            g = diag_error(c->d, cat, "alpaca dataset '%s' needs columns { response = \"...\" }", ds->name);
            diag_note(g, "the column with the answer (LLaMA-Factory: \"output\")");
        }
        break;
    case FORMAT_TEXT:
        if (!co->text) diag_error(c->d, cat, "text dataset '%s' needs columns { text = \"...\" }", ds->name);
        if (ds->ranking) diag_error(c->d, find(&s, PLAN_KEY(DATASET, ranking))->value->at, "text datasets cannot be ranking datasets");
        break;
    }
    if (ds->ranking && ds->format != FORMAT_TEXT && (!co->chosen || !co->rejected)) {
        g = diag_error(c->d, cat, "ranking dataset '%s' needs columns { chosen = \"...\" rejected = \"...\" }", ds->name);
        diag_note(g, "preference data holds a preferred and a rejected answer per example");
    }
    if (tags && ds->format != FORMAT_SHAREGPT) {
        g = diag_error(c->d, tags->key_at, "tags are only used by sharegpt datasets, not %s", fmt);
        diag_help(g, "remove the tags block, or set format = sharegpt");
    }
}
