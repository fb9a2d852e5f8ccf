/* chat_templates.c — the chat template table (chat_templates.h). Tokens:
 * the literal special tokens in the format_user, format_assistant,
 * format_system and format_prefix slots of LLaMA-Factory's register_template
 * (tool and observation turns left out: Llama 3.0's tokenizer has no
 * <|eom_id|>, for one); Llama 2's and Mistral's [INST] are plain text to
 * their tokenizers, so they need none. efficient_eos: as each one's
 * register_template call in LLaMA-Factory's src/llamafactory/data/template.py
 * (only glm4 sets efficient_eos=True among these). */
#include "chat_templates.h"

#define A(x) (1u << (x))

/* Indexed by ChatTemplate (plan.h): keep the order of that enum. */
static const ChatTemplateInfo TEMPLATES[] = {
    {"none", A(ARCH_LLAMA) | A(ARCH_QWEN2) | A(ARCH_QWEN3), {0}, true, false, {0}},
    {"qwen", A(ARCH_QWEN2) | A(ARCH_QWEN3) | A(ARCH_QWEN3_MOE), {"qwen"}, true, false, {"<|im_start|>", "<|im_end|>"}},
    {"llama3", A(ARCH_LLAMA), {"llama-3", "llama3"}, true, false, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
    {"default", A(ARCH_LLAMA) | A(ARCH_QWEN2) | A(ARCH_QWEN3), {0}, false, false, {0}},
    {"empty", A(ARCH_LLAMA) | A(ARCH_QWEN2) | A(ARCH_QWEN3), {0}, false, false, {0}},
    {"qwen3", A(ARCH_QWEN3) | A(ARCH_QWEN3_MOE), {"qwen3"}, false, false, {"<|im_start|>", "<|im_end|>"}},
    {"qwen3_nothink", A(ARCH_QWEN3) | A(ARCH_QWEN3_MOE), {"qwen3"}, false, false, {"<|im_start|>", "<|im_end|>"}},
    {"llama2", A(ARCH_LLAMA), {"llama-2", "llama2"}, false, false, {0}},
    {"mistral", A(ARCH_LLAMA) | A(ARCH_MISTRAL) | A(ARCH_MIXTRAL), {"mistral", "mixtral"}, false, false, {0}},
    {"gemma", A(ARCH_GEMMA2), {"gemma"}, false, false, {"<start_of_turn>", "<end_of_turn>"}},
    {"gemma3", 0, {"gemma-3", "gemma3"}, false, false, {"<start_of_turn>", "<end_of_turn>"}},
    {"deepseek", A(ARCH_LLAMA), {"deepseek"}, false, false, {0}},
    {"deepseek3", 0, {"deepseek-v3", "deepseek-r1", "deepseekv3"}, false, false, {"<｜User｜>", "<｜Assistant｜>"}},
    {"deepseekr1", A(ARCH_LLAMA) | A(ARCH_QWEN2), {"deepseek-r1"}, false, false, {"<｜User｜>", "<｜Assistant｜>"}},
    {"glm4", 0, {"glm-4", "glm4"}, false, true, {"<|system|>", "<|user|>", "<|assistant|>", "[gMASK]", "<sop>"}},
    {"phi", 0, {"phi-3", "phi3"}, false, false, {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}},
    {"phi4", 0, {"phi-4", "phi4"}, false, false, {"<|im_start|>", "<|im_sep|>", "<|im_end|>"}},
    {"gemma2", A(ARCH_GEMMA2), {"gemma-2", "gemma2"}, false, true, {"<start_of_turn>", "<end_of_turn>"}},
    {"mistral_small", A(ARCH_MISTRAL), {"mistral-small", "mistral_small"}, false, false, {0}},
};
_Static_assert(sizeof TEMPLATES / sizeof TEMPLATES[0] == TEMPLATE_COUNT, "one entry per ChatTemplate");

const ChatTemplateInfo *chat_template_info(ChatTemplate t)
{
    return (unsigned)t < TEMPLATE_COUNT ? &TEMPLATES[t] : &TEMPLATES[0];
}

int chat_template_count(void) { return TEMPLATE_COUNT; }
