/* store_internal.h — what the store's files share and no one else may use:
 * the file helpers (store_files.c) and the model's tensor lists (model_tensors.c),
 * used by the checkpoints (checkpoint.c) and the exports (hf_export.c). */
#ifndef LLMC_STORE_INTERNAL_H
#define LLMC_STORE_INTERNAL_H

#include <stddef.h>

#include "checkpoint.h"
#include "safetensors.h"

void store_say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int store_copy_file(const char *from, const char *to, char *err, size_t errlen);
void store_remove_flat_dir(const char *dir);
int store_clear_name(const char *ckpt_dir, const char *dir, const char *name, char *err, size_t errlen);
char *store_read_regular(const char *path, size_t max, char *err, size_t errlen);
int store_write_file_atomic(const char *path, const char *data, size_t n, char *err, size_t errlen);
StWriteTensor *store_model_tensors(const Model *m, const float *buf, const char *prefix, char ***names_out, int *n_out);
void store_free_tensors(StWriteTensor *t, char **names, int n);
int store_write_model_file(const char *path, const Model *m, const float *buf, const char *prefix, StDtype dt,
                           char hex[65], char *err, size_t errlen);
int store_read_model_tensors(const StModel *st, const Model *m, float *buf, const char *prefix,
                             const ModelPart *part, size_t *n_read, char *err, size_t errlen);
int store_fill_file(const char *path, const Model *m, int n, const char *const *prefix, const float *const *buf,
                    const ModelPart *part, char *err, size_t errlen);

#endif
