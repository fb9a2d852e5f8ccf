#!/bin/bash
# Per-rank GPU allocations of the llmc CUDA trainer under ZeRO-1/2/3 and ZeRO-3
# with optimizer offload, 2 and 4 ranks sharing one GPU over the host transport
# (LLMC_TRANSPORT=host; the allocations of a rank do not depend on where its
# peers run), for the estimator's check vectors (llmc_zero_reference.json,
# test_estimate_memory.c). Rank 0 prints the bench line: its shard is the
# largest (shards are whole GRAD_NORM_BLOCKs, the last rank's the shortest).
# 7B does not fit this way: its states alone are 16 x 7.6e9 = 122 GB on the one
# GPU (or pinned in a 128 GiB host under offload). ZREF_MODELS picks the models
# (default: 0.5B and 1.5B); ZREF_CASES below.
# Needs a GPU machine (build/llmc-train-cuda). From the repository root:
#   bash tests/estimator/llmc_zero_reference.sh OUTDIR > tests/estimator/llmc_zero_reference.json
set -uo pipefail
out=${1:?usage: llmc_zero_reference.sh OUTDIR}
mkdir -p "$out"
case_run() {   # MODEL WORLD ZERO OFFLOAD(0|1) PORT: one bench per rank, rank 0's line to OUT/row_*.json
    local model=$1 world=$2 zero=$3 off=$4 port=$5 k pids=() name="$1_w$2_z$3_o$4"
    for ((k = 0; k < world; k++)); do
        env LLMC_TRANSPORT=host LLMC_ATTN=flash RANK=$k WORLD_SIZE=$world LOCAL_RANK=$k MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port timeout 300 ./build/llmc-train-cuda bench --model "$model" --batch 2 --seq 1024 \
            --steps 1 --warmup 1 --zero "$zero" $( ((off)) && echo --offload) \
            > "$out/row_$name.$k.json" 2> "$out/row_$name.$k.log" &
        pids+=($!)
    done
    local rcs=""
    for k in "${pids[@]}"; do wait "$k"; rcs+="$? "; done
    echo "$name: exit $rcs" >&2
}
# each case its own port (the cases of a group run side by side, in subshells)
port=29700
# ZREF_CASES="MODEL:WORLD:ZERO:OFFLOAD ...": only these cases, one after another (a
# case that failed or ran out of time beside others); the rows printed are theirs
if [[ -n ${ZREF_CASES:-} ]]; then
    for c in $ZREF_CASES; do IFS=: read -r m w z o <<< "$c"; case_run "$m" "$w" "$z" "$o" $((port += 1)); done
else
for model in ${ZREF_MODELS:-qwen2.5-0.5b qwen2.5-1.5b}; do
    for world in 2 4; do
        case_run $model $world 1 0 $((port += 1))   # the largest alone (one GPU holds every case's ranks)
        for zo in "2 0" "3 0" "3 1"; do port=$((port + 1)); case_run $model $world $zo $port & done
        wait
    done
done
fi
cat "$out"/row_*.0.json | python3 -c '
import json, sys
keep = ("model", "batch", "seq", "world", "zero", "recompute", "offload", "attention", "params", "allocated_gib")
rows = [json.loads(l) for l in sys.stdin if l.strip()]
rows.sort(key=lambda r: (r["params"], r["world"], r["zero"], r["offload"]))
json.dump([{k: r[k] for k in keep if k in r} for r in rows], sys.stdout, indent=1)
print()'
