// tokenizer_lenml.mjs — @lenml/tokenizers (JS port of transformers.js) throughput,
// one thread, on the corpus cut as tokenizer_bench cut it; with LLMC_IDS, also
// counts the documents whose ids differ from llmc's.
//   node bench/tokenizer_lenml.mjs TOKENIZER_DIR CORPUS DOCS_FILE [LLMC_IDS]
import fs from "fs";
import path from "path";
const { TokenizerLoader } = await import(path.resolve(".tok/node_modules/@lenml/tokenizers/dist/main.mjs"));
const [dir, corpus, docsFile, idsFile] = process.argv.slice(2);
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
});
const data = fs.readFileSync(corpus);
const b = fs.readFileSync(docsFile);
const dec = new TextDecoder("utf-8");
const docs = [];
for (let i = 0; i < b.length; i += 16) {
  const off = Number(b.readBigUInt64LE(i)), len = Number(b.readBigUInt64LE(i + 8));
  docs.push(dec.decode(data.subarray(off, off + len)));
}
const t0 = process.hrtime.bigint();
let tokens = 0;
const all = [];
for (const d of docs) { const ids = tok.encode(d, { add_special_tokens: false }); tokens += ids.length; all.push(ids); }
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`lenml threads=1 bytes=${data.length} docs=${docs.length} tokens=${tokens} seconds=${s.toFixed(3)} ` +
  `MB/s=${(data.length / s / 1e6).toFixed(2)} tokens/s=${Math.round(tokens / s)}`);
if (idsFile) {
  const raw = fs.readFileSync(idsFile);
  let at = 0, bad = 0;
  all.forEach((want, i) => {
    const n = raw.readUInt32LE(at);
    let same = n === want.length;
    for (let k = 0; same && k < n; k++) same = raw.readUInt32LE(at + 4 + 4 * k) === want[k];
    at += 4 + 4 * n;
    if (!same && ++bad <= 5) console.log(`MISMATCH doc ${i}`);
  });
  console.log(`exactness: ${all.length - bad} of ${all.length} documents identical to @lenml/tokenizers`);
}
