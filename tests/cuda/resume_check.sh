#!/bin/bash
# tests/cuda/resume_check.sh OUTDIR — the checkpoint safety of the CUDA trainer on a GPU
# machine, on the tiny plan of make_tiny_run.sh (.cuda-run/tiny/plan-gpu.json): the same
# shared resume code as the CPU trainer (runtime/store/checkpoint.c, runtime/train/run_init.c), exercised
# through llmc-train-cuda. Prints one line per check and "N passed, N failed".
set -u
out=${1:?usage: resume_check.sh OUTDIR}
mkdir -p "$out"
BIN=${BIN:-./build/llmc-train-cuda}   # BIN=./build/llmc-train BASE=plan-cpu.json: the same on the CPU
src=.cuda-run/tiny
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
# plan NAME [python edit of dict p]: a copy of plan-gpu.json with its own output dirs
plan() {
    python3 - "$src/${BASE:-plan-gpu.json}" "$src/plan-$1.json" "$1" "${2:-}" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["output"]["dir"] = "run-" + sys.argv[3]
p["checkpoint"]["dir"] = "run-" + sys.argv[3] + "/ckpt"
p["checkpoint"]["every_steps"] = 100
p["checkpoint"]["every_seconds"] = None
p["checkpoint"]["keep"] = 3
p["train"]["max_steps"] = 300
exec(sys.argv[4])
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
}
run() { local name=$1; shift; (cd "$src" && "../../$BIN" run "plan-$name.json" "$@") >"$out/$name.log" 2>&1; }

# 1. uninterrupted against stopped + resumed. A bit-reproducible backend (the CPU
# one) must give the same final weights to the bit. The CUDA backend is not
# bit-reproducible (fp32 atomics in the attention backward): two uninterrupted runs
# already part after a few steps. There the resumed run must follow the uninterrupted
# one after the resume as closely as a second uninterrupted run does (within 2x, plus
# bf16 noise), which a wrong restore (weights, moments, step, data position) breaks.
plan whole; rm -rf "$src/run-whole"; run whole; rc1=$?
plan split; rm -rf "$src/run-split"; run split --stop-after 150; rc2=$?; run split >>"$out/split.log" 2>&1; rc3=$?
# closeness A B FROM TO: mean |loss difference| of two runs' metrics over steps FROM..TO
closeness() {
    python3 - "$src/run-$1/metrics.jsonl" "$src/run-$2/metrics.jsonl" "$3" "$4" <<'PY'
import json, sys
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p))}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
d = [abs(a[s] - b[s]) for s in range(int(sys.argv[3]), int(sys.argv[4]) + 1)]
print(f"{sum(d) / len(d):.6f}")
PY
}
if [[ $rc1 -ne 0 || $rc2 -ne 3 || $rc3 -ne 0 ]]; then bad "stop/resume (exit $rc1 $rc2 $rc3)"; tail -3 "$out/split.log"
elif cmp -s "$src/run-whole/final/model.safetensors" "$src/run-split/final/model.safetensors"; then
    ok "stop at 150 + resume: final weights bit-identical to an uninterrupted run"
else
    plan whole2; rm -rf "$src/run-whole2"; run whole2
    if cmp -s "$src/run-whole/final/model.safetensors" "$src/run-whole2/final/model.safetensors"; then
        bad "stop at 150 + resume differs from an uninterrupted run, which is bit-reproducible"
    else
        spread=$(closeness whole whole2 151 200) resumed=$(closeness whole split 151 200)
        if python3 -c "import sys; sys.exit(not ($resumed <= 2 * $spread + 2e-3))"
        then ok "stop at 150 + resume (backend not bit-reproducible): steps 151-200 within $resumed of the uninterrupted run; a second uninterrupted run is within $spread"
        else bad "stop at 150 + resume: steps 151-200 $resumed from the uninterrupted run, but a second uninterrupted run is within $spread"; fi
    fi
fi

# 2. a damaged latest falls back to the newest good checkpoint, with a warning naming both
plan fb; rm -rf "$src/run-fb"; run fb --stop-after 250; rc=$?
latest=$(cat "$src/run-fb/ckpt/latest" 2>/dev/null)
if [[ -n $latest && -f "$src/run-fb/ckpt/$latest/model.safetensors" ]]; then
    printf 'garbage' | dd of="$src/run-fb/ckpt/$latest/model.safetensors" bs=1 seek=100 conv=notrunc status=none
    run fb; rc2=$?
    if [[ $rc -eq 3 && $rc2 -eq 0 ]] && grep -q "$latest.*fails verification.*instead" "$out/fb.log" &&
       grep -q "resumed from .* at step 200" "$out/fb.log"
    then ok "damaged $latest: fell back to $(grep -o -m1 "resuming from [^ ]*" "$out/fb.log"), resumed at step 200"
    else bad "fallback (exit $rc $rc2)"; tail -5 "$out/fb.log"; fi
else bad "no latest after --stop-after 250 (exit $rc)"; fi

# 3. a checkpoint of another plan (lr changed) is refused with the field named
plan fp; rm -rf "$src/run-fp"; run fp --stop-after 150
plan fp 'p["train"]["lr"] = p["train"]["lr"] * 2'; run fp; rc=$?
if [[ $rc -ne 0 ]] && grep -q "train.lr" "$out/fp.log"
then ok "resume with lr doubled: refused ($(grep -m1 train.lr "$out/fp.log" | cut -c1-140))"
else bad "fingerprint (exit $rc)"; tail -3 "$out/fp.log"; fi

# 4. step-* without latest: refused unless --fresh
rm -f "$src/run-fp/ckpt/latest"
plan fp; run fp; rc=$?; cp "$out/fp.log" "$out/nolatest.log"
run fp --fresh; rc2=$?
if [[ $rc -ne 0 && $rc2 -eq 0 ]] && grep -q -- "--fresh" "$out/nolatest.log"
then ok "checkpoints without latest: refused (exit $rc), --fresh trains (exit 0)"
else bad "no latest (exit $rc, fresh $rc2)"; tail -3 "$out/nolatest.log"; fi

finish resume-cuda
