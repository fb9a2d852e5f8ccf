#!/bin/bash
# GPU trust (issue 27), one section of tests/cuda/device.sh: compute-sanitizer over
# a few steps of each path, two runs of one plan giving the same bits, and the
# tiny plan's held-out exact match over several seeds.
#   tests/cuda/trust.sh OUTDIR [SEEDS]
# Needs build/llmc-train-cuda and .cuda-run/tiny (tests/cuda/make_tiny_run.sh).
set -uo pipefail
out=${1:?usage: trust.sh OUTDIR [SEEDS]}
seeds=${2:-1 2 3 4 5}
r=.cuda-run/tiny bin=./build/llmc-train-cuda
mkdir -p "$out"
note() { echo "$*" | tee -a "$out/summary.txt"; }
# variant BASE NAME SEED [ATTENTION]: plan-NAME.json, BASE with its own output and seed
variant() {
    python3 - "$r/$1.json" "$r/plan-$2.json" "$2" "$3" "${4:-}" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); n = sys.argv[3]
p["output"]["dir"] = "run-" + n; p["checkpoint"]["dir"] = "run-" + n + "/ckpt"
p["train"]["seed"] = int(sys.argv[4])
if sys.argv[5]: p["train"]["attention"] = sys.argv[5]
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
}
# same A B: the per-step loss, lr and grad-norm of two runs, and their exported weights
same() {
    python3 - "$r/run-$1" "$r/run-$2" <<'PY'
import hashlib, json, os, sys
def steps(d):
    return [(o["step"], o["loss"], o["lr"], o.get("grad_norm")) for o in map(json.loads, open(d + "/metrics.jsonl"))]
def sha(d):
    h = {}
    for sub in ("final", "adapter"):
        for root, _, files in os.walk(os.path.join(d, sub)):
            for f in sorted(files):
                if f.endswith(".safetensors"):
                    h[os.path.join(sub, f)] = hashlib.sha256(open(os.path.join(root, f), "rb").read()).hexdigest()
    return h
a, b = steps(sys.argv[1]), steps(sys.argv[2])
diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
ha, hb = sha(sys.argv[1]), sha(sys.argv[2])
ok = len(a) == len(b) and diff is None and ha == hb and ha
print(("SAME" if ok else "DIFFERENT") + f": {len(a)} vs {len(b)} steps, first differing step "
      f"{a[diff][0] if diff is not None else '-'}, weights {'equal' if ha == hb else 'differ'} "
      f"({', '.join(k + ' ' + v[:12] for k, v in sorted(ha.items()))})")
PY
}
# reproducibility: the same plan twice
for v in "plan-gpu eager" "plan-gpu flash" "plan-gpu-lora eager"; do
    set -- $v
    for k in a b; do
        variant $1 rep$k 42 $2
        rm -rf $r/run-rep$k
        $bin run $r/plan-rep$k.json > "$out/rep_${1}_$2_$k.log" 2>&1
    done
    note "twice $1 $2: $(same repa repb)"
done
# held-out exact match over seeds
for s in $seeds; do
    variant plan-gpu seed$s $s
    rm -rf $r/run-seed$s
    $bin run $r/plan-seed$s.json --eval-shards $r/shards-eval > "$out/seed$s.log" 2>&1
    note "seed $s: exit $? ; $(tr -d ' \n' < $r/run-seed$s/result.json 2>/dev/null)"
done
# sanitizers: 3 steps of each path
for v in "plan-gpu eager memcheck initcheck racecheck synccheck" "plan-gpu flash memcheck initcheck racecheck" \
         "plan-gpu-lora eager memcheck initcheck" "plan-gpu-freeze eager initcheck"; do
    set -- $v
    variant $1 san 42 $2
    base=$1 att=$2; shift 2
    for tool in "$@"; do
        rm -rf $r/run-san
        compute-sanitizer --tool $tool --show-backtrace device --print-limit 20 $bin run $r/plan-san.json \
            --stop-after 3 > "$out/san_${base}_${att}_$tool.log" 2>&1
        note "sanitizer $tool $base $att: exit $? ; $(grep -h 'ERROR SUMMARY' "$out/san_${base}_${att}_$tool.log" | tail -1)"
    done
done
