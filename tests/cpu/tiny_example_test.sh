#!/bin/bash
# tests/cpu/tiny_example_test.sh LLMC LLMC_TRAIN — the tiny example's real pipeline,
# shortened: examples/tiny/tiny.llm compiled by llmc, `prepare` with the real
# tokenizer (train and held-out sets), 40 steps of `run --eval-shards`; checks the
# loss falls, the result and the HF export (tokenizer files, eos id) are complete.
set -u
LLMC=$(realpath "$1"); BIN=$(realpath "$2")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
train_prelude cpu-tiny
private_copy LLMC BIN
cd "$ROOT"
if "$LLMC" examples/tiny/tiny.llm -o "$T/tiny" >"$T/llmc.log" 2>&1 && [[ -f $T/tiny/plan.json ]]; then
    python3 - "$T/tiny/plan.json" "$T" <<'PY'
import json, os, sys
path, t = sys.argv[1], sys.argv[2]
p = json.load(open(path))
p["train"]["max_steps"] = 40
p["output"]["dir"] = os.path.join(t, "run")
p["checkpoint"]["dir"] = os.path.join(t, "ckpt")
json.dump(p, open(path, "w"), indent=1)
for d in p["datasets"]:
    d["file"] = os.path.join(os.path.dirname(d["file"]), "arith_eval.json")
p["data"]["shards_dir"] = "shards-eval"
json.dump(p, open(os.path.join(t, "tiny", "plan-eval.json"), "w"), indent=1)
PY
    ok "llmc compiles examples/tiny/tiny.llm"
else bad "llmc examples/tiny/tiny.llm" "$T/llmc.log"; finish cpu-tiny; fi
"$BIN" prepare "$T/tiny/plan.json" >"$T/prep.log" 2>&1 && "$BIN" prepare "$T/tiny/plan-eval.json" >>"$T/prep.log" 2>&1 \
    && ok "prepare: train and held-out shards" || bad "prepare" "$T/prep.log"
"$BIN" run "$T/tiny/plan.json" --eval-shards "$T/tiny/shards-eval" >"$T/run.log" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && python3 - "$T/run/metrics.jsonl" "$T/run/result.json" <<'PY'
import json, math, sys
m = [json.loads(l) for l in open(sys.argv[1])]
r = json.load(open(sys.argv[2]))
ok = (len(m) == 40 and m[0]["loss"] > math.log(512) - 0.5 and m[-1]["loss"] < m[0]["loss"] - 2.0
      and r["eval_documents"] == 400 and 0 <= r["eval_correct"] <= 400 and r["unigram_baseline"] > 0)
sys.exit(0 if ok else 1)
PY
then ok "run 40 steps: loss from ~ln(512) down by > 2 nats; 400 held-out questions evaluated"
else bad "tiny run (exit $rc)" "$T/run.log" "$T/run/result.json"; fi
F="$T/run/final"
if [[ -f $F/tokenizer.json && -f $F/tokenizer_config.json ]] && grep -q '"eos_token_id": [0-9]' "$F/config.json" \
   && "$BIN" verify "$F" >/dev/null 2>&1
then ok "export: tokenizer files copied, eos_token_id from the tokenizer, manifest verifies"
else bad "tiny export" "$F/config.json"; fi
# the held-out sums are not in training (examples/tiny/make_data.py keeps them apart)
if python3 - "$ROOT/examples/tiny/data/arith.json" "$ROOT/examples/tiny/data/arith_eval.json" <<'PY'
import json, sys
q = lambda f: {r["messages"][1]["content"] for r in json.load(open(f))}
tr, ev = q(sys.argv[1]), q(sys.argv[2])
sys.exit(0 if len(ev) == 400 and not tr & ev and len(tr) == 9600 else 1)
PY
then ok "data: 400 held-out sums, none of them among the 9600 trained"
else bad "held-out questions overlap the training set" /dev/null; fi
# generate answers greedily: as many held-out sums right as the teacher-forced count
mapfile -t qs < <(python3 -c 'import json,sys
for r in json.load(open(sys.argv[1])): print(r["messages"][1]["content"])' "$ROOT/examples/tiny/data/arith_eval.json")
"$BIN" generate "$F" --system Compute. --max-new 8 "${qs[@]}" >"$T/gen.txt" 2>"$T/gen.err"; rc=$?
right=$(awk -F' -> ' '{split($1, x, " [+] "); if (x[1] + x[2] == $2 && $2 != "") n++} END {print n + 0}' "$T/gen.txt")
want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval_correct"])' "$T/run/result.json" 2>/dev/null)
if [[ $rc -eq 0 && $(wc -l <"$T/gen.txt") -eq 400 && $right == "$want" ]]; then
    ok "generate: 400 greedy answers, $right right = the teacher-forced count"
else bad "generate (exit $rc, $right right, result.json $want)" "$T/gen.err" "$T/gen.txt"; fi
"$BIN" generate --help >/dev/null && ! "$BIN" generate "$F" --max-new 0 "1 + 1" 2>/dev/null && ok "generate: --help 0, a bad --max-new refused" \
    || bad "generate usage" /dev/null
# resume identity by content (issue 28 item 2): a checkpoint belongs to the data's
# bytes and the plan fields that change the tokens, not to mtimes or descriptive
# counts. A touch of the data or `samples = N` added to the .llm between two
# segments: prepare finds the shards up to date and the run resumes; a changed
# byte: prepared again and the checkpoint refused, the field named.
P=$T/proj
mkdir -p "$P" && cp -r "$ROOT/examples/tiny/tokenizer" "$ROOT/examples/tiny/data" "$ROOT/examples/tiny/tiny.llm" "$P/"
compile_proj() {
    "$LLMC" "$P/tiny.llm" -o "$P/out" >"$T/rc.log" 2>&1 && python3 - "$P/out/plan.json" "$T" <<'PY'
import json, os, sys
p = json.load(open(sys.argv[1]))
p["train"]["max_steps"] = 6
p["checkpoint"]["every_steps"] = 2
p["output"]["dir"] = os.path.join(sys.argv[2], "rrun")
p["checkpoint"]["dir"] = os.path.join(sys.argv[2], "rrun", "checkpoints")
json.dump(p, open(sys.argv[1], "w"), indent=1)
PY
}
segment() {   # STOP-AFTER LOG: prepare, then run until that step
    "$BIN" prepare "$P/out/plan.json" >"$2.prep" 2>&1 && "$BIN" run "$P/out/plan.json" --stop-after "$1" >"$2" 2>&1
}
compile_proj && segment 2 "$T/r1.log"; rc=$?
[[ $rc -eq 3 ]] && ok "content resume: first segment stops after step 2 (exit 3)" || bad "content resume: first segment (exit $rc)" "$T/rc.log" "$T/r1.log"
touch -d '2001-01-01' "$P/data/arith.json"
segment 4 "$T/r2.log"; rc=$?
if [[ $rc -eq 3 ]] && grep -q "up to date" "$T/r2.log.prep" && grep -q "resumed from .* at step 2" "$T/r2.log"
then ok "content resume: data touched between segments: shards up to date, resumed at step 2"
else bad "content resume after touch (exit $rc)" "$T/r2.log.prep" "$T/r2.log"; fi
cache_mtime=$(python3 -c 'import json,sys; print([int(e["mtime_s"]) for e in json.load(open(sys.argv[1]))["files"] if e["file"].endswith("/arith.json")][0])' "$P/out/shards/content-cache.json" 2>/dev/null)
[[ $cache_mtime == "$(stat -c %Y "$P/data/arith.json")" ]] && ok "content-cache.json: the touched file's new mtime recorded with its digest" \
    || bad "content cache (mtime $cache_mtime)" "$P/out/shards/content-cache.json"
sed -i 's/^\(  format *= sharegpt\)$/\1\n  samples = 9600/' "$P/tiny.llm"
grep -q 'samples = 9600' "$P/tiny.llm" && compile_proj && segment 6 "$T/r3.log"; rc=$?
if [[ $rc -eq 0 ]] && grep -q '"samples": 9600' "$P/out/plan.json" && grep -q "up to date" "$T/r3.log.prep" \
   && grep -q "resumed from .* at step 4" "$T/r3.log"
then ok "content resume: samples = 9600 added to the .llm and recompiled: resumed at step 4, finished"
else bad "content resume after samples = N (exit $rc)" "$T/rc.log" "$T/r3.log.prep" "$T/r3.log"; fi
sed -i '0,/Compute\./s//Compute!/' "$P/data/arith.json"
"$BIN" prepare "$P/out/plan.json" >"$T/r4.log.prep" 2>&1; "$BIN" run "$P/out/plan.json" >"$T/r4.log" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && ! grep -q "up to date" "$T/r4.log.prep" \
   && grep -q "was written with data.content [0-9a-f]\{32\}, the plan says [0-9a-f]\{32\} (it belongs to another plan" "$T/r4.log"
then ok "content resume: one byte of the data changed: prepared again, the checkpoint refused naming data.content"
else bad "content resume after a changed byte (exit $rc)" "$T/r4.log.prep" "$T/r4.log"; fi
finish cpu-tiny
