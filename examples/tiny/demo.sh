#!/bin/bash
# examples/tiny/demo.sh — the tiny example end to end, from the repository root:
# compile examples/tiny/tiny.llm into out/tiny, tokenize the training and the
# held-out arithmetic sets into shards, train from scratch on this machine's CPU,
# and print the outcome: final loss vs the unigram baseline, and the greedy
# exact-match accuracy on held-out questions.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLMC=${LLMC:-build/llmc}
TRAIN=${LLMC_TRAIN:-build/llmc-train}
OUT=out/tiny
for b in "$LLMC" "$TRAIN"; do
    [[ -x $b ]] || { echo "demo: $b is not built (run make)" >&2; exit 2; }
done

echo "== compile examples/tiny/tiny.llm -> $OUT"
"$LLMC" examples/tiny/tiny.llm -o "$OUT"

# The held-out set: the same plan with the evaluation file and its own shards.
python3 - "$OUT/plan.json" "$OUT/plan-eval.json" <<'PY'
import json, os, sys
p = json.load(open(sys.argv[1]))
for d in p["datasets"]:
    d["file"] = os.path.join(os.path.dirname(d["file"]), "arith_eval.json")
    d["samples"] = d["tokens"] = d["size_bytes"] = None
p["data"]["shards_dir"] = "shards-eval"
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY

echo "== prepare: tokenize into packed shards"
"$TRAIN" prepare "$OUT/plan.json"
"$TRAIN" prepare "$OUT/plan-eval.json"

# A fresh run each time (the plan resumes from checkpoints otherwise).
run_dir=$(python3 -c 'import json,os,sys; p=json.load(open(sys.argv[1])); print(os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), p["output"]["dir"])))' "$OUT/plan.json")
ckpt_dir=$(python3 -c 'import json,os,sys; p=json.load(open(sys.argv[1])); print(os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), p["checkpoint"]["dir"])))' "$OUT/plan.json")
rm -rf "$run_dir" "$ckpt_dir"

echo "== train (CPU, fp32)"
start=$(date +%s)
"$TRAIN" run "$OUT/plan.json" --eval-shards "$OUT/shards-eval"
secs=$(( $(date +%s) - start ))

python3 - "$run_dir/result.json" "$secs" "$run_dir" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print()
print(f"== result ({r['steps']} steps in {sys.argv[2]} s)")
print(f"  training loss  {r['final_loss']:.3f}  (unigram baseline {r['unigram_baseline']:.3f}:"
      f" {r['unigram_baseline'] / max(r['final_loss'], 1e-9):.1f}x lower)")
print(f"  held-out       loss {r['eval_loss']:.3f}, greedy exact-match accuracy"
      f" {r['eval_correct']}/{r['eval_documents']} = {100 * r['eval_accuracy']:.1f}%")
print(f"  model          {sys.argv[3]}/final (HF format; llmc-train verify checks it)")
print(f"  loss curve     {sys.argv[3]}/loss_curve.svg")
PY
