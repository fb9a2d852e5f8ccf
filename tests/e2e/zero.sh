#!/bin/bash
# tests/e2e/zero.sh LLMC_TRAIN MAKE_SHARDS LLMC — ZeRO on the CPU backend across ranks
# (runtime/cpu/cpu_backend.c, docs/runtime.md "ZeRO on the CPU backend"):
#   - ZeRO-2 and ZeRO-3 on 2 and 4 ranks (Open MPI's mpirun, and srun-style TCP
#     ranks): final weights and optimizer state bit-identical to 1 rank without
#     sharding at the same global batch, whatever the accumulation; ZeRO-1 and
#     no sharding with accumulation 1 likewise; a tied-embedding model under ZeRO-3
#   - a checkpoint written under one stage and rank count resumes under another
#     and ends on the uninterrupted run's bits
#   - llmc accepts shard = zero3 for backend = llmc on a CPU cluster (plan.json
#     zero_stage 3, which llmc-train check-plan accepts)
# Every wait is bounded.
set -u
BIN=$(realpath "$1"); MKSH=$(realpath "$2"); LLMC=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
train_prelude e2e-zero
BAD_TAIL=30
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
export OMPI_MCA_rmaps_base_oversubscribe=1 LLMC_THREADS=1

# mkrun DIR WORLD ACCUM ZERO [tied]: 8 steps of micro-batch 2, global batch
# 2 x ACCUM x WORLD, a checkpoint every 4 steps, on the shared shards.
mkrun() {
    mkdir -p "$1"
    python3 - "$ROOT/tests/cpu/tiny_plan.json" "$1/plan.json" "$2" "$3" "$4" "${5:-untied}" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
world, accum, zero, tied = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "tied"
p["train"].update(max_steps=8, micro_batch=2, grad_accum=accum, global_batch=2 * accum * world)
p["parallel"].update(world_size=world, data_parallel=world, nodes=world, zero_stage=zero)
p["model"]["tie_embeddings"] = tied
p["data"]["shards_dir"] = "../shards"
p["checkpoint"]["every_steps"] = 4
json.dump(p, open(sys.argv[2], "w"), indent=1)
PYEOF
}
wait_pid() {   # wait_pid PID SECONDS -> RC (124: still running)
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        if ! kill -0 "$1" 2>/dev/null; then wait "$1" 2>/dev/null; RC=$?; return 0; fi
        sleep 0.1
    done
    RC=124
}
# launch DIR WORLD [ARGS...]: run the plan in DIR on WORLD ranks (mpirun; 1: plain) -> RC, log DIR/log
launch() {
    local d=$1 n=$2; shift 2
    if [[ $n -eq 1 ]]; then (cd "$d" && timeout 300 "$BIN" run plan.json "$@") >"$d/log" 2>&1
    else (cd "$d" && timeout 300 mpirun -np "$n" "$BIN" run plan.json "$@") >"$d/log" 2>&1; fi
    RC=$?
}
same_as() {   # same_as REF DIR: final weights and the step-4 optimizer state
    cmp -s "$1/run/final/model.safetensors" "$2/run/final/model.safetensors" &&
        cmp -s "$1/ckpt/step-00000004/optimizer.safetensors" "$2/ckpt/step-00000004/optimizer.safetensors"
}

mkdir -p "$T/shards"
"$MKSH" "$T/shards" 96 32 64 7 >/dev/null 2>&1 || { bad make_shards; finish; }

# The reference: 1 rank, no sharding, accumulation 4.
for tie in untied tied; do
    mkrun "$T/ref-$tie" 1 4 0 $tie
    launch "$T/ref-$tie" 1
    [[ $RC -eq 0 ]] || { bad "1-rank reference ($tie, exit $RC)" "$T/ref-$tie/log"; finish; }
done
REF=$T/ref-untied

# 1. stage x ranks under mpirun, the same global batch of 8
for c in "2 2 2" "2 4 1" "3 2 2" "3 4 1" "1 4 1" "0 4 1" "3 1 4"; do
    read -r z n a <<<"$c"
    d=$T/z$z-n$n
    mkrun "$d" $n $a $z
    launch "$d" $n
    if [[ $RC -eq 0 ]] && same_as "$REF" "$d" && { [[ $z -eq 0 ]] || grep -q "ZeRO-$z: [0-9]* of [0-9]* parameters on this rank" "$d/log"; }
    then ok "ZeRO-$z on $n rank(s) x accumulation $a: final weights and optimizer state bit-identical to 1 rank"
    else bad "ZeRO-$z on $n rank(s) x accumulation $a (exit $RC)" "$d/log"; fi
done
# the 4-rank ZeRO-3 run held a quarter of the parameters (whole 4096-float blocks) on each rank
grep -q 'ZeRO-3: 8192 of 22816 parameters on this rank' "$T/z3-n4/log" \
    && ok "ZeRO-3 on 4 ranks: rank 0 owns 8192 of 22816 parameters" || bad "ZeRO-3 shard size" "$T/z3-n4/log"

# ZeRO-3's checkpoints are written by every rank in place (checkpoint.h ckpt_shard_*):
# the same bytes as 1 rank's, file by file, and the manifest verifies
ck=$T/z3-n4/ckpt/step-00000004
if grep -q 'each rank writes its shard' "$T/z3-n4/log" && cmp -s "$REF/ckpt/step-00000004/model.safetensors" "$ck/model.safetensors" &&
   cmp -s "$REF/ckpt/step-00000004/optimizer.safetensors" "$ck/optimizer.safetensors" &&
   "$BIN" verify "$ck" >"$T/verify.log" 2>&1
then ok "ZeRO-3 on 4 ranks: each rank wrote its shard of the checkpoint; model and optimizer files are 1 rank's bytes; verify passes"
else bad "ZeRO-3 sharded checkpoint" "$T/z3-n4/log" "$T/verify.log"; fi
# and the final export too (checkpoint.h hf_export_shard_*): 1 rank's bytes, manifest included
if grep -q 'each rank writes its part of the weights' "$T/z3-n4/log" &&
   cmp -s "$REF/run/final/model.safetensors" "$T/z3-n4/run/final/model.safetensors" &&
   cmp -s "$REF/run/final/MANIFEST.sha256" "$T/z3-n4/run/final/MANIFEST.sha256" &&
   [[ ! -e $T/z3-n4/run/final.tmp ]] && "$BIN" verify "$T/z3-n4/run/final" >"$T/verify-final.log" 2>&1
then ok "ZeRO-3 on 4 ranks: each rank wrote its part of the final export; 1 rank's bytes and manifest; verify passes"
else bad "ZeRO-3 sharded export" "$T/z3-n4/log" "$T/verify-final.log"; fi

# held-out evaluation after a ZeRO-3 run (rank 0 evaluates on the gathered weights): 1 rank's result
mkrun "$T/ev-ref" 1 4 0
launch "$T/ev-ref" 1 --eval-shards ../shards
mkrun "$T/ev3" 2 2 3
launch "$T/ev3" 2 --eval-shards ../shards
[[ $RC -eq 0 ]] && grep -q '"eval_loss"' "$T/ev3/run/result.json" && cmp -s "$T/ev-ref/run/result.json" "$T/ev3/run/result.json" \
    && ok "ZeRO-3 on 2 ranks, --eval-shards: result.json (held-out loss, exact match) identical to 1 rank" \
    || bad "ZeRO-3 eval (exit $RC)" "$T/ev3/log"

# 2. tied embeddings (the LM head is the embedding's unit: gathered twice per pass)
mkrun "$T/tied3" 2 2 3 tied
launch "$T/tied3" 2
[[ $RC -eq 0 ]] && same_as "$T/ref-tied" "$T/tied3" \
    && ok "ZeRO-3, tied embeddings, 2 ranks x accumulation 2: bit-identical to 1 rank" \
    || bad "ZeRO-3 tied (exit $RC)" "$T/tied3/log"

# 3. srun-style TCP ranks (peers relayed through rank 0), ZeRO-3 on 4 ranks
PORT=
tcp_ranks() {   # DIR ARGS...: 4 TCP ranks of DIR/plan.json in the background -> TCP (pids), logs DIR/log.R
    local d=$1; shift
    free_port $PORT
    TCP=()
    for r in 0 1 2 3; do
        (cd "$d" && exec env SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=$r SLURM_LOCALID=$r MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$PORT LLMC_DIST_TIMEOUT=300 "$BIN" run plan.json "$@") >"$d/log.$r" 2>&1 &
        TCP+=($!); PIDS+=($!)
    done
}
d=$T/tcp3
mkrun "$d" 4 1 3
tcp_ranks "$d"
rc=0; for p in "${TCP[@]}"; do wait_pid "$p" 120; [[ $RC -eq 0 ]] || rc=$RC; done
[[ $rc -eq 0 ]] && same_as "$REF" "$d" \
    && ok "ZeRO-3 on 4 TCP ranks: bit-identical to 1 rank" || bad "ZeRO-3 over TCP (exit $rc)" "$d"/log.*

# 3b. a rank killed mid-run (ZeRO-3 on 4 TCP ranks): the others stop within 60 s
# with a message (rank 0 names the dead rank; the others lose rank 0, their hub),
# every rank exits non-zero, and the newest checkpoint verifies and resumes
d=$T/kill3
mkrun "$d" 4 1 3
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["train"]["max_steps"] = 100000
p["checkpoint"]["every_steps"] = 10; json.dump(p, open(sys.argv[1], "w"))' "$d/plan.json"
tcp_ranks "$d"
for ((i = 0; i < 600; i++)); do grep -q 'checkpoint step 20 ' "$d/log.0" 2>/dev/null && break; sleep 0.1; done
sleep 0.2
kill -9 "${TCP[2]}"; wait "${TCP[2]}" 2>/dev/null
good=1 t0=$SECONDS
for r in 0 1 3; do wait_pid "${TCP[$r]}" 60; [[ $RC -ne 0 && $RC -ne 124 ]] || good=0; done
took=$((SECONDS - t0))
grep -q 'error: lost the connection to rank 2' "$d/log.0" || good=0
for r in 1 3; do grep -q 'error: lost the connection to rank 0' "$d/log.$r" || good=0; done
latest=$(cat "$d/ckpt/latest" 2>/dev/null)
"$BIN" verify "$d/ckpt/$latest" >"$d/verify.log" 2>&1 || good=0
if [[ $good -eq 1 && $took -le 60 ]]; then
    tcp_ranks "$d" --stop-after $((10#${latest#step-} + 2))
    rc=""; for p in "${TCP[@]}"; do wait_pid "$p" 120; rc+="$RC "; done
    [[ $rc == "3 3 3 3 " ]] && grep -q "resumed from ./ckpt at step $((10#${latest#step-}))" "$d/log.0" \
        && ok "ZeRO-3 on 4 TCP ranks, rank 2 killed mid-run: the others stopped in ${took} s naming why, $latest verifies and resumes" \
        || bad "ZeRO-3 kill: resume from $latest (exit $rc)" "$d"/log.*
else bad "ZeRO-3 kill: the others (${took} s) or the checkpoint ${latest:-none}" "$d"/log.* "$d/verify.log"; fi

# 4. stop after step 4 (a checkpoint, exit 3) under one stage and rank count, resume under another
resume_case() {   # NAME  WORLD1 ACCUM1 ZERO1  WORLD2 ACCUM2 ZERO2
    local d=$T/resume-$1
    mkrun "$d" $2 $3 $4
    launch "$d" $2 --stop-after 4
    local rc1=$RC
    mkrun "$d" $5 $6 $7
    launch "$d" $5
    if [[ $rc1 -eq 3 && $RC -eq 0 ]] && grep -q 'resumed from ./ckpt at step 4' "$d/log" &&
       cmp -s "$REF/run/final/model.safetensors" "$d/run/final/model.safetensors" &&
       cmp -s "$REF/ckpt/step-00000008/optimizer.safetensors" "$d/ckpt/step-00000008/optimizer.safetensors"
    then ok "checkpoint of ZeRO-$4 on $2 rank(s) resumed as ZeRO-$7 on $5 rank(s): the uninterrupted run's bits"
    else bad "resume ZeRO-$4 x $2 -> ZeRO-$7 x $5 (exit $rc1, $RC)" "$d/log"; fi
}
resume_case 3to2 2 2 3 4 1 2
resume_case 0to3 1 4 0 2 2 3
resume_case 3to0 4 1 3 1 4 0
resume_case 2to3 2 2 2 2 2 3

# 5. an HF initial model under ZeRO-3 (runtime/store/checkpoint.h load_hf_weights_part):
# each rank reads only its shard's parameters, the shards add up to the model,
# and the run is 1 rank's bits (the reference's export is the initial model)
pretrained() {   # pretrained DIR: model.init = pretrained from the reference's export
    python3 - "$1/plan.json" "$REF/run/final" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["model"].update(init="pretrained", path=sys.argv[2])
json.dump(p, open(sys.argv[1], "w"), indent=1)
PYEOF
}
mkrun "$T/hf-ref" 1 4 0; pretrained "$T/hf-ref"; launch "$T/hf-ref" 1
hf_rc=$RC
for c in "2 2" "4 1"; do
    read -r n a <<<"$c"
    d=$T/hf-z3-n$n
    mkrun "$d" $n $a 3; pretrained "$d"; launch "$d" $n
    reads=$(grep -o 'initial weights: read [0-9]* of 22816 parameters' "$d/log" | awk '{s += $4; n++} END {print n, s}')
    # whole 4096-float blocks: 2 ranks own 12288 + 10528, 4 ranks 8192 + 8192 + 6432 + 0
    if [[ $hf_rc -eq 0 && $RC -eq 0 && $reads == "$n 22816" ]] && same_as "$T/hf-ref" "$d" &&
       ! grep -q "initial weights: read 22816 of" "$d/log"
    then ok "HF initial model, ZeRO-3 on $n ranks: each rank read only its shard (${reads#* } parameters read over $n ranks), bit-identical to 1 rank"
    else bad "HF init under ZeRO-3 on $n ranks (exit $hf_rc, $RC; reads: $reads)" "$T/hf-ref/log" "$d/log"; fi
done
# a checkpoint resumed under ZeRO-3 reads each rank's shard of the weights and moments:
# section 4's 0to3 and 2to3 cases end on the uninterrupted run's bits

# 6. the checker: a two-node CPU plan with shard = zero3 compiles, and the trainer takes its plan.json
sed 's/^  shard  *= none$/  shard = zero3/' "$ROOT/tests/e2e/tiny_2node.llm" >"$ROOT/tests/e2e/.zero3-$$.llm"
(cd "$ROOT" && "$LLMC" "tests/e2e/.zero3-$$.llm" -o "$T/llmc-out") >"$T/llmc.log" 2>&1; rc=$?
rm -f "$ROOT/tests/e2e/.zero3-$$.llm"
if [[ $rc -eq 0 ]] && grep -q '"zero_stage":.3,\?$' "$T/llmc-out/plan.json" && "$BIN" check-plan "$T/llmc-out/plan.json" >>"$T/llmc.log" 2>&1
then ok "llmc: shard = zero3 with backend = llmc on a CPU cluster compiles; llmc-train check-plan accepts zero_stage 3"
else bad "llmc shard = zero3 on CPUs (exit $rc)" "$T/llmc.log"; fi

# ... and method = lora on the CPU cluster (shard none): finetune.method "lora" in plan.json
sed -e 's/^  shard  *= none$/  shard = none\n  method = lora\n  lora_rank = 4\n  lora_target = [q_proj, v_proj]/' \
    "$ROOT/tests/e2e/tiny_2node.llm" >"$ROOT/tests/e2e/.lora-$$.llm"
(cd "$ROOT" && "$LLMC" "tests/e2e/.lora-$$.llm" -o "$T/llmc-lora") >"$T/llmc.log" 2>&1; rc=$?
rm -f "$ROOT/tests/e2e/.lora-$$.llm"
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["finetune"]; sys.exit(0 if (f["method"], f["lora_rank"], f["lora_alpha"], f["lora_target"]) == ("lora", 4, 8, ["q_proj", "v_proj"]) else 1)' "$T/llmc-lora/plan.json" &&
   "$BIN" check-plan "$T/llmc-lora/plan.json" >>"$T/llmc.log" 2>&1
then ok "llmc: method = lora with backend = llmc on a CPU cluster compiles (finetune in plan.json); check-plan accepts"
else bad "llmc method = lora on CPUs (exit $rc)" "$T/llmc.log"; fi

finish
