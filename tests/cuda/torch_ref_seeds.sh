#!/bin/bash
# The PyTorch reference trainer (tests/cuda/torch_ref.py) on the tiny plan over several
# seeds, for the trust section of tests/cuda/device.sh (issue 27, item 3): one line per
# seed, beside the CUDA trainer's seeds of tests/cuda/trust.sh.
#   tests/cuda/torch_ref_seeds.sh OUTDIR [SEEDS [TORCH_REF_OPTIONS...]]
# SEEDS: one argument, seeds separated by spaces or commas (default "1 2 3 4 5", as
# trust.sh). Default options: --precision bf16 --device cuda; options given after SEEDS
# come after them (so `--device cpu --precision fp32` or `--fp32-logits` override or add).
# Per seed OUTDIR/seedS/ holds metrics.jsonl, result.json, config.json and the log, and
# prints `ref seed S: CORRECT/DOCUMENTS final_loss X` (or why it failed); the last line
# counts the seeds at >= 95% held-out exact match. Exit 0 when every seed ran, 1 if one
# failed, 2 on usage. PYTHON picks the interpreter (default: python3, or Debian's
# /usr/bin/python3 when python3 has no torch). Needs .cuda-run/tiny
# (tests/cuda/make_tiny_run.sh).
set -uo pipefail
if [[ $# -lt 1 || $1 == -* ]]; then
    echo "usage: tests/cuda/torch_ref_seeds.sh OUTDIR [SEEDS [TORCH_REF_OPTIONS...]]" >&2
    exit 2
fi
cd "$(dirname "$0")/../.."
out=$1
seeds=${2:-1 2 3 4 5}
shift $(( $# >= 2 ? 2 : 1 ))
seeds=${seeds//,/ }
for s in $seeds; do
    if ! [[ $s =~ ^[0-9]+$ ]]; then
        echo "torch_ref_seeds.sh: seed '$s' is not a non-negative integer" >&2
        exit 2
    fi
done
r=.cuda-run/tiny
for f in $r/plan-gpu.json $r/shards-eval/index.json; do
    if [[ ! -f $f ]]; then
        echo "torch_ref_seeds.sh: $f is missing (run tests/cuda/make_tiny_run.sh first)" >&2
        exit 2
    fi
done
py=${PYTHON:-python3}
if [[ -z ${PYTHON:-} ]] && ! python3 -c 'import torch' 2> /dev/null && [[ -x /usr/bin/python3 ]]; then
    py=/usr/bin/python3
fi
mkdir -p "$out"
failed=0 good=0 n=0
for s in $seeds; do
    d=$out/seed$s
    rm -rf "$d"
    mkdir -p "$d"
    n=$((n + 1))
    if ! "$py" tests/cuda/torch_ref.py $r/plan-gpu.json --out "$d" --eval-shards $r/shards-eval --seed "$s" \
            --precision bf16 --device cuda "$@" > "$d/log" 2>&1; then
        echo "ref seed $s: failed: $(tail -1 "$d/log")"
        failed=1
        continue
    fi
    line=$("$py" - "$d/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["eval_documents"] > 0 and r["eval_correct"] >= 0.95 * r["eval_documents"]
print(f'{r["eval_correct"]}/{r["eval_documents"]} final_loss {r["final_loss"]:.6f} {int(ok)}')
PY
)
    echo "ref seed $s: ${line% *}"
    good=$((good + ${line##* }))
done
echo "ref: $good of $n seeds at >= 95% held-out exact match ($*)"
exit $failed
