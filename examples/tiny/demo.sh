#!/bin/bash
# examples/tiny/demo.sh — the tiny example end to end, from the repository root
# (`make demo`): compile examples/tiny/tiny.llm into out/tiny, tokenize the
# training and the held-out additions into shards, train a model from scratch on
# this machine's CPU, and show what it learned: exact answers on held-out sums it
# never saw (examples/tiny/make_data.py keeps them out of training), three of them
# answered by the model itself, and the loss curve as SVG and PNG.
# About 30 lines of output; the trainer's own log goes to out/tiny-run/train.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLMC=${LLMC:-build/llmc}
TRAIN=${LLMC_TRAIN:-build/llmc-train}
OUT=out/tiny
for b in "$LLMC" "$TRAIN"; do
    [[ -x $b ]] || { echo "demo: $b is not built (run make)" >&2; exit 2; }
done
py_plan() { python3 -c "import json,os,sys; p=json.load(open(sys.argv[1])); $1" "$OUT/plan.json"; }

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
for plan in "$OUT/plan.json" "$OUT/plan-eval.json"; do
    "$TRAIN" prepare "$plan" 2>&1 | grep -v ' records (.*/s), ' | sed 's/^llmc-train prepare: /  /'
done

# A fresh run each time (the plan resumes from checkpoints otherwise).
run_dir=$(py_plan 'print(os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), p["output"]["dir"])))')
ckpt_dir=$(py_plan 'print(os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), p["checkpoint"]["dir"])))')
rm -rf "$run_dir" "$ckpt_dir"
mkdir -p "$run_dir"

echo "== train from scratch (CPU, fp32; the trainer's log: $run_dir/train.log)"
start=$EPOCHREALTIME
"$TRAIN" run "$OUT/plan.json" --eval-shards "$OUT/shards-eval" >"$run_dir/train.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' INT TERM
# One progress line: rewritten in place on a terminal, a plain line every
# 20% of the steps otherwise (a log file gets a handful, not thousands).
tty=0; [[ -t 1 ]] && tty=1
shown=-1
while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5
    line=$(tail -n 1 "$run_dir/metrics.jsonl" 2>/dev/null) || continue
    total=$(grep -m1 -o 'step [0-9]*/[0-9]*' "$run_dir/train.log" 2>/dev/null | cut -d/ -f2) || total=
    [[ -n $line && -n $total ]] || continue
    msg=$(python3 -c '
import json, sys, time
r = json.loads(sys.argv[1]); total = int(sys.argv[2]); el = time.time() - float(sys.argv[3])
step = r["step"]; eta = el * (total - step) / max(step, 1)
print("%d %s" % (step * 5 // total, "  step %5d/%d  loss %7.4f  %4.0f s  ETA %d:%02d" % (step, total, r["loss"], el, eta // 60, eta % 60)))
'  "$line" "$total" "$start" 2>/dev/null) || continue
    if (( tty )); then printf '\r%s' "${msg#* }"
    elif (( ${msg%% *} > shown )); then shown=${msg%% *}; echo "${msg#* }"; fi
done
(( tty )) && echo
rc=0; wait "$pid" || rc=$?
trap - INT TERM
if (( rc != 0 )); then echo "demo: the trainer failed (exit $rc):" >&2; tail -n 20 "$run_dir/train.log" >&2; exit 1; fi
secs=$(python3 -c 'import sys, time; print(round(time.time() - float(sys.argv[1])))' "$start")

python3 - "$run_dir/result.json" "$secs" "$run_dir" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"== result ({r['steps']} steps in {sys.argv[2]} s)")
print(f"  training loss  {r['final_loss']:.4f}  (unigram baseline {r['unigram_baseline']:.3f})")
print(f"  held-out       {r['eval_correct']}/{r['eval_documents']} sums answered exactly"
      f" = {100 * r['eval_accuracy']:.1f}% (loss {r['eval_loss']:.4f})")
PY

echo "== three held-out questions (never in training), answered by the model:"
mapfile -t qs < <(python3 -c '
import json
for r in json.load(open("examples/tiny/data/arith_eval.json"))[:3]:
    print(r["messages"][1]["content"])')
"$TRAIN" generate "$run_dir/final" --system "Compute." --max-new 8 "${qs[@]}" | while IFS= read -r line; do
    q=${line% -> *} a=${line##* -> }
    want=$(( ${q% + *} + ${q#* + } ))
    [[ $a == "$want" ]] && mark="right" || mark="wrong, $want"
    printf '  %-8s = %-4s (%s)\n' "$q" "$a" "$mark"
done

baseline=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["unigram_baseline"])' "$run_dir/result.json")
python3 examples/tiny/plot_loss.py "$run_dir/metrics.jsonl" "$run_dir/loss_curve.png" "$baseline"
echo "== files"
echo "  model          $run_dir/final (HF format; llmc-train verify checks it)"
echo "  loss curve     $run_dir/loss_curve.svg, $run_dir/loss_curve.png"
