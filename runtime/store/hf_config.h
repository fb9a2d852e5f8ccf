/* hf_config.h — HF config.json for Llama / Qwen2 / Qwen3 causal LMs:
 * read into ModelConfig (to start from a pretrained model) and write one that
 * transformers' AutoConfig/AutoModelForCausalLM load unchanged. */
#ifndef LLMC_HF_CONFIG_H
#define LLMC_HF_CONFIG_H

#include <stddef.h>

#include "model.h"

/* Read DIR/config.json (or a file path). 0 ok; -1 with message in err. */
int hf_config_read(const char *path, ModelConfig *out, char *err, size_t errlen);

/* Write config.json atomically. torch_dtype: "float32" | "bfloat16";
 * bos/eos token ids: -1 to leave them out. */
int hf_config_write(const char *path, const ModelConfig *c, const char *torch_dtype,
                    int bos_id, int eos_id, char *err, size_t errlen);

/* Write config.json atomically for a model trained from SOURCE (its HF
 * directory or config.json): SOURCE's bytes with only the dtype changed
 * ("torch_dtype"/"dtype" set to torch_dtype, "torch_dtype" added when it has
 * neither), so every key the source had (architectures, token ids,
 * rope_scaling, quantization or generation settings) stays as it was. The file
 * written is read back and must describe c. 0 ok; -1 with message in err. */
int hf_config_derive(const char *path, const char *source, const ModelConfig *c, const char *torch_dtype,
                     char *err, size_t errlen);

/* Describe the first difference between two configs ("hidden 64 vs 128") into
 * buf; returns 0 when they agree on everything the model uses. */
int hf_config_diff(const ModelConfig *a, const ModelConfig *b, char *buf, size_t len);

#endif
