#!/bin/bash
# Per-rank GPU allocations of the llmc CUDA trainer under ZeRO-1/2/3 and ZeRO-3
# with optimizer offload, 2 and 4 ranks sharing one GPU over the host transport
# (LLMC_TRANSPORT=host; the allocations of a rank do not depend on where its
# peers run), for the estimator's check vectors (llmc_zero_reference.json,
# test_estimate_memory.c). Rank 0 prints the bench line: its shard is the
# largest (shards are whole GRAD_NORM_BLOCKs, the last rank's the shortest).
# 7B does not fit this way: two of its ranks need 168 GiB of the 139 GiB device (or
# 213 GB of pinned host memory under offload). ZREF_MODELS picks the models
# (default: 0.5B and 1.5B); ZREF_CASES runs chosen cases instead, one after another:
#   ZREF_CASES="MODEL:WORLD:ZERO:OFFLOAD[:BATCH:SEQ:RECOMPUTE] ..."
#       (defaults 2, 1024, none; RECOMPUTE none|full|selective)
#   ZREF_SOLO=1   each case as rank 0 alone on the GPU (LLMC_TRANSPORT=solo,
#                 runtime/cuda/cuda_coll.h): the real rank's allocations for a rank
#                 count whose ranks cannot share the one GPU (7B, 72B at 256 ranks)
# Needs a GPU machine (build/llmc-train-cuda). From the repository root:
#   bash tests/estimator/llmc_zero_reference.sh OUTDIR > tests/estimator/llmc_zero_reference.json
set -uo pipefail
out=${1:?usage: llmc_zero_reference.sh OUTDIR}
mkdir -p "$out"
case_run() {   # MODEL WORLD ZERO OFFLOAD(0|1) PORT [BATCH SEQ RECOMPUTE]: rank 0's line to OUT/row_*.json
    local model=$1 world=$2 zero=$3 off=$4 port=$5 b=${6:-2} t=${7:-1024} rc=${8:-none} k pids=() rcs=""
    local name="$1_w$2_z$3_o$4_b${b}_t${t}_$rc" tr=host ranks=$world args=()
    ((off)) && args+=(--offload)
    [[ $rc == full ]] && args+=(--recompute)
    [[ $rc == selective ]] && args+=(--selective-recompute)
    [[ ${ZREF_SOLO:-0} == 1 ]] && tr=solo ranks=1
    for ((k = 0; k < ranks; k++)); do
        env LLMC_TRANSPORT=$tr LLMC_ATTN=flash RANK=$k WORLD_SIZE=$world LOCAL_RANK=$k MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port timeout 300 ./build/llmc-train-cuda bench --model "$model" --batch "$b" --seq "$t" \
            --steps 1 --warmup 1 --zero "$zero" "${args[@]}" \
            > "$out/row_$name.$k.json" 2> "$out/row_$name.$k.log" &
        pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k"; rcs+="$? "; done
    echo "$name: exit $rcs" >&2
}
# each case its own port (the cases of a group run side by side, in subshells)
port=29700
# ZREF_CASES (above): only these cases, one after another (also a case that failed
# or ran out of time beside others); the rows printed are theirs
if [[ -n ${ZREF_CASES:-} ]]; then
    for c in $ZREF_CASES; do
        IFS=: read -r m w z o b t rc <<< "$c"
        case_run "$m" "$w" "$z" "$o" $((port += 1)) "$b" "$t" "$rc"
    done
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
keep = ("model", "batch", "seq", "world", "transport", "zero", "recompute", "offload", "attention", "deterministic",
        "params", "allocated_gib")
rows = [json.loads(l) for l in sys.stdin if l.strip()]
rows.sort(key=lambda r: (r["params"], r["world"], r["zero"], r["offload"], r["batch"], r["seq"]))
json.dump([{k: r[k] for k in keep if k in r} for r in rows], sys.stdout, indent=1)
print()'
