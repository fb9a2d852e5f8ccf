#!/bin/bash
# tests/cpu/states_converge.sh LLMC LLMC_TRAIN — convergence of bf16 optimizer
# states (train.optimizer_states = bf16) against fp32 states on the tiny plan
# (examples/tiny/tiny.llm as written: seed 42, 16 epochs, 4800 steps): the plan
# compiled by llmc, prepared once, trained twice at once (one thread each), then
# the held-out accuracy on the 400 sums neither run saw.
#
# The tiny task is learnt in a sudden phase (loss ~0.6 to ~0.02 within a few
# hundred steps) whose onset moves with every rounding difference, fp32 states
# included: the plan as it was before 2026-12-03 (beta2 0.999, 8 epochs) ended
# at 75.75% held out with this machine's native OpenBLAS kernels (onset after
# step 1800) and at 100% with OPENBLAS_CORETYPE=Haswell (onset near step 1200).
# One run against one run is
# therefore not a measurement of a difference of a point or two; the check is
# that bf16 states learn the task as fp32 states do: held out at least fp32
# states' accuracy, or 90% where fp32 states get more, less 2 points.
# Measured on the plan as it is (2026-12-03, this machine, one thread a run as
# here): fp32 100.00% / bf16 100.00%. On the plan before it (2026-12-02): native fp32
# 75.75% / bf16 99.25%, Haswell fp32 100.00% / bf16 99.75% (Haswell with two
# threads a run: 99.75% / 92.50%); other seeds (native; not checked here):
# seed 1 99.50% / 11.50% (bf16: no onset within 2400 steps; 98.25% / 88.75%
# with 16 epochs), seed 2 94.50% / 96.75%, seed 3 95.25% / 99.00%.
set -u
LLMC=$(realpath "$1"); BIN=$(realpath "$2")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
train_prelude cpu-converge
private_copy LLMC BIN
cd "$ROOT"
if ! "$LLMC" examples/tiny/tiny.llm -o "$T/tiny" >"$T/llmc.log" 2>&1; then
    bad "llmc examples/tiny/tiny.llm" "$T/llmc.log"; finish cpu-converge
fi
python3 - "$T/tiny/plan.json" "$T" <<'PY'
import json, os, sys
path, t = sys.argv[1], sys.argv[2]
p = json.load(open(path))
for st in ("fp32", "bf16"):
    q = json.loads(json.dumps(p))
    q["train"]["optimizer_states"] = st
    q["output"]["dir"] = os.path.join(t, "run-" + st)
    q["checkpoint"]["dir"] = os.path.join(t, "ckpt-" + st)
    json.dump(q, open(os.path.join(t, "tiny", "plan-" + st + ".json"), "w"), indent=1)
for d in p["datasets"]:
    d["file"] = os.path.join(os.path.dirname(d["file"]), "arith_eval.json")
p["data"]["shards_dir"] = "shards-eval"
json.dump(p, open(os.path.join(t, "tiny", "plan-eval.json"), "w"), indent=1)
PY
if "$BIN" prepare "$T/tiny/plan-fp32.json" >"$T/prep.log" 2>&1 && "$BIN" prepare "$T/tiny/plan-eval.json" >>"$T/prep.log" 2>&1
then ok "tiny plan compiled and prepared (train and held-out shards)"
else bad "prepare" "$T/prep.log"; finish cpu-converge; fi
RUNS=()
for st in fp32 bf16; do
    LLMC_THREADS=1 "$BIN" run "$T/tiny/plan-$st.json" --eval-shards "$T/tiny/shards-eval" >"$T/run-$st.log" 2>&1 &
    PIDS+=($!); RUNS+=($!)
done
wait "${RUNS[0]}"; rc0=$?; wait "${RUNS[1]}"; rc1=$?
if [[ $rc0 -eq 0 && $rc1 -eq 0 ]] && python3 - "$T/run-fp32/result.json" "$T/run-bf16/result.json" >"$T/cmp.out" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
fa, fb = a["eval_correct"] / a["eval_documents"], b["eval_correct"] / b["eval_documents"]
print(f"held out: fp32 states {100 * fa:.2f}%, bf16 states {100 * fb:.2f}% "
      f"(final loss {a['final_loss']:.4g}, {b['final_loss']:.4g})")
sys.exit(0 if a["eval_documents"] == 400 == b["eval_documents"] and fb >= min(fa, 0.90) - 0.02 else 1)
PY
then ok "tiny plan, all its steps: bf16 states learn it as fp32 states do (at least min(fp32, 90%) - 2 points): $(cat "$T/cmp.out")"
else bad "convergence (exit $rc0, $rc1): $(cat "$T/cmp.out" 2>/dev/null)" "$T/run-fp32.log" "$T/run-bf16.log"; fi
finish cpu-converge
