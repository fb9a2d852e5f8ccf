/* hf_config_keys.h — what llmc and llmc-train read of a Hugging Face
 * config.json: THE SINGLE SOURCE of its keys, defaults and size bound.
 *
 * llmc's checker reads a plan's model directory to compare it with the plan
 * (compiler/check/model_files.c, model_config_read: lenient about RoPE scaling,
 * which it reports with the plan's position) and llmc-train reads it to load
 * the weights (runtime/store/hf_config.c, hf_config_read: refuses what it
 * cannot train). Neither program may include the other's headers, so each
 * has its reader and its messages; what the file means is here. model_type is
 * contract/plan_vocab.h's arch row (its JSON spelling).
 *
 * Columns of HF_CONFIG_INTS(X):  FIELD (of ModelConfig / ModelFileConfig),
 * KEY, DEFAULT (a value, or HF_REQUIRED, HF_SAME_AS_HEADS: num_attention_heads,
 * HF_HIDDEN_PER_HEAD: hidden_size / num_attention_heads). Rows in reading
 * order: a default names only rows above it.
 */
#ifndef LLMC_CONTRACT_HF_CONFIG_KEYS_H
#define LLMC_CONTRACT_HF_CONFIG_KEYS_H

#define HF_REQUIRED (-1L)
#define HF_SAME_AS_HEADS (-2L)
#define HF_HIDDEN_PER_HEAD (-3L)

#define HF_CONFIG_INTS(X) \
    X(layers,      "num_hidden_layers",       HF_REQUIRED) \
    X(hidden,      "hidden_size",             HF_REQUIRED) \
    X(heads,       "num_attention_heads",     HF_REQUIRED) \
    X(kv_heads,    "num_key_value_heads",     HF_SAME_AS_HEADS) \
    X(head_dim,    "head_dim",                HF_HIDDEN_PER_HEAD) \
    X(ffn,         "intermediate_size",       HF_REQUIRED) \
    X(vocab,       "vocab_size",              HF_REQUIRED) \
    X(max_context, "max_position_embeddings", 2048L)

/* rope_theta (top level, or rope_parameters.rope_theta from transformers 5)
 * and rms_norm_eps when the file has none: the Llama/Qwen defaults. */
#define HF_DEFAULT_ROPE_THETA 10000.0
#define HF_DEFAULT_RMS_EPS 1e-6
/* config.json is a few KiB; this bounds what a wrong file can cost. */
#define HF_CONFIG_MAX_BYTES (16 << 20)

/* A row's default given the rows read above it: a value >= 0, or HF_REQUIRED
 * (-1). hidden / heads is 0 when heads is (the readers refuse that shape). */
static inline long hf_config_int_default(long rule, long hidden, long heads)
{
    if (rule == HF_SAME_AS_HEADS) return heads;
    if (rule == HF_HIDDEN_PER_HEAD) return heads > 0 ? hidden / heads : 0;
    return rule;
}

#endif
