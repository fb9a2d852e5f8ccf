#!/bin/bash
# tests/cpu/tiny_example_test.sh LLMC LLMC_TRAIN — the tiny example's real pipeline,
# shortened: examples/tiny/tiny.llm compiled by llmc, `prepare` with the real
# tokenizer (train and held-out sets), 40 steps of `run --eval-shards`; checks the
# loss falls, the result and the HF export (tokenizer files, eos id) are complete.
set -u
LLMC=$(realpath "$1"); BIN=$(realpath "$2")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/cpu-tiny.XXXXXX)
trap 'rm -rf "$T"' EXIT
# private copies: other builds in the shared tree may relink the binaries meanwhile
cp "$LLMC" "$T/llmc" && cp "$BIN" "$T/llmc-train" && LLMC="$T/llmc" BIN="$T/llmc-train"
pass=0 fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; for f in "$@"; do echo "--- $f"; tail -n 20 "$f"; done; fail=$((fail + 1)); }
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
else bad "llmc examples/tiny/tiny.llm" "$T/llmc.log"; echo "cpu-tiny: $pass passed, $((fail + 1)) failed"; exit 1; fi
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
echo "cpu-tiny: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
