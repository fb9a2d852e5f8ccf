/* emit_dataset_info.c — dataset_info.json in LLaMA-Factory's own format.
 *
 * LLaMA-Factory (src/llamafactory/data/parser.py, DatasetAttr.join) reads
 * every column and tag of a present "columns"/"tags" object with a default of
 * None, not its documented default: a plan that names only "messages" would
 * silently lose role_tag "from" etc. So every column and tag of the format is
 * written out, with the documented defaults (data/README.md) filled in where
 * the plan is silent. plan.json names the same columns (dataset_effective). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "emit_internal.h"

/* dataset_effective (the defaults below) lives in model_files.c, which llmc check
 * also uses to read the records. */

static void add_str_or_null(cJSON *obj, const char *key, const char *s)
{
    cJSON_AddItemToObject(obj, key, s ? cJSON_CreateString(s) : cJSON_CreateNull());
}

static cJSON *dataset_entry(const JobLayout *L, const PlanDataset *ds)
{
    DatasetColumns c;
    DatasetTags t;
    dataset_effective(ds, &c, &t);
    cJSON *e = cJSON_CreateObject();
    if (ds->hf_hub) {
        /* data/parser.py: hf_hub_url loads from the Hub (load_from "hf_hub") */
        cJSON_AddStringToObject(e, "hf_hub_url", ds->hf_hub);
    } else {
        /* LLaMA-Factory joins dataset_dir (".": the job runs in this directory)
         * with it; a directory keeps its '/' (every file in it is read) */
        char *file = artifact_path(L, ds->file ? ds->file : "");
        char *dir = ds->directory && file ? malloc(strlen(file) + 2) : NULL;
        if (dir) snprintf(dir, strlen(file) + 2, "%s%s", file, file[0] && file[strlen(file) - 1] == '/' ? "" : "/");
        cJSON_AddStringToObject(e, "file_name", dir ? dir : file ? file : "");
        free(dir);
        free(file);
    }
    /* pre-training text is LLaMA-Factory's alpaca format with the text in "prompt" */
    cJSON_AddStringToObject(e, "formatting", format_json_names[ds->format == FORMAT_SHAREGPT ? FORMAT_SHAREGPT : FORMAT_ALPACA]);
    cJSON_AddBoolToObject(e, "ranking", ds->ranking);
    cJSON *cols = cJSON_AddObjectToObject(e, "columns");
    switch (ds->format) {
    case FORMAT_ALPACA:
        add_str_or_null(cols, "prompt", c.prompt);
        add_str_or_null(cols, "query", c.query);
        add_str_or_null(cols, "response", c.response);
        add_str_or_null(cols, "history", c.history);
        add_str_or_null(cols, "system", c.system);
        add_str_or_null(cols, "tools", c.tools);
        break;
    case FORMAT_TEXT:
        add_str_or_null(cols, "prompt", c.text);
        add_str_or_null(cols, "query", NULL);
        add_str_or_null(cols, "response", NULL);
        add_str_or_null(cols, "history", NULL);
        add_str_or_null(cols, "system", NULL);
        add_str_or_null(cols, "tools", NULL);
        break;
    case FORMAT_SHAREGPT: {
        add_str_or_null(cols, "messages", c.messages);
        add_str_or_null(cols, "system", c.system);
        add_str_or_null(cols, "tools", c.tools);
        cJSON *tags = cJSON_AddObjectToObject(e, "tags");
        add_str_or_null(tags, "role_tag", t.role);
        add_str_or_null(tags, "content_tag", t.content);
        add_str_or_null(tags, "user_tag", t.user);
        add_str_or_null(tags, "assistant_tag", t.assistant);
        add_str_or_null(tags, "observation_tag", t.observation);
        add_str_or_null(tags, "function_tag", t.function);
        add_str_or_null(tags, "system_tag", t.system);
        break;
    }
    }
    /* preference data: the pair (rm, dpo) or KTO's desirable/undesirable
     * label; parser.py's DatasetAttr.join reads "chosen", "rejected" and
     * "kto_tag" from the same columns object */
    if (ds->ranking) {
        add_str_or_null(cols, "chosen", c.chosen);
        add_str_or_null(cols, "rejected", c.rejected);
    }
    if (c.kto_tag) add_str_or_null(cols, "kto_tag", c.kto_tag);
    return e;
}

char *emit_dataset_info(const JobLayout *L, char *err, size_t errlen)
{
    cJSON *root = cJSON_CreateObject();
    const PlanTrain *t = L->train;
    /* the training data, then the named eval datasets (eval_dataset) */
    for (int i = 0; i < t->ndata + t->neval_data; i++) {
        const PlanDataset *ds = i < t->ndata ? t->data[i] : t->eval_data[i - t->ndata];
        if (!ds || cJSON_GetObjectItemCaseSensitive(root, ds->name)) continue;
        cJSON_AddItemToObject(root, ds->name, dataset_entry(L, ds));
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) { snprintf(err, errlen, "out of memory writing dataset_info.json"); return NULL; }
    /* end with a newline, like every other artifact */
    size_t n = strlen(text);
    char *out = realloc(text, n + 2);
    if (!out) { free(text); snprintf(err, errlen, "out of memory writing dataset_info.json"); return NULL; }
    out[n] = '\n';
    out[n + 1] = '\0';
    return out;
}
