#!/bin/bash
# tests/e2e/train.sh LLMC_TRAIN MAKE_SHARDS — llmc-train across ranks and failures,
# without Slurm (tests/e2e/slurm.sh does the same through sbatch):
#   - 2 ranks under Open MPI's mpirun == 1 rank with twice the accumulation
#   - USR2 to mpirun: both ranks checkpoint and exit 3; the resumed run ends with
#     weights bit-identical to an uninterrupted one
#   - kill -9 of one rank (mpirun, and srun-style TCP): the job ends within 60 s with a
#     clear message; the latest checkpoint verifies and a resume finishes the run
#   - USR2 to a rank still waiting for the others: exit 3 at once (requeue), not a timeout
#   - kill -9 while a checkpoint is being written: that checkpoint is never taken as
#     the latest; resuming gives the uninterrupted run's weights
set -u
BIN=$(realpath "$1"); MKSH=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
train_prelude e2e-train
BAD_TAIL=30
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
export OMPI_MCA_rmaps_base_oversubscribe=1 LLMC_THREADS=1
PY=python3

# mkrun DIR STEPS WORLD ACCUM [SIZE]: a run directory with plan.json on shared shards.
# SIZE=big makes steps and checkpoints slow enough to be interrupted.
mkrun() {
    mkdir -p "$1"
    $PY - "$ROOT/tests/cpu/tiny_plan.json" "$1/plan.json" "$2" "$3" "$4" "${5:-small}" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
steps, world, accum, size = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
p["train"].update(max_steps=steps, grad_accum=accum, global_batch=p["train"]["micro_batch"] * accum * world)
p["parallel"].update(world_size=world, data_parallel=world, nodes=world)
p["data"]["shards_dir"] = "../shards"
p["checkpoint"]["every_steps"] = 2
if size == "big":
    p["model"].update(layers=2, hidden=128, heads=4, kv_heads=2, head_dim=32, ffn=384)
json.dump(p, open(sys.argv[2], "w"), indent=1)
PYEOF
}
# wait_pid PID SECONDS -> RC (124: still running)
wait_pid() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        if ! kill -0 "$1" 2>/dev/null; then wait "$1" 2>/dev/null; RC=$?; return 0; fi
        sleep 0.1
    done
    RC=124
}
wait_for_line() {
    local i
    for ((i = 0; i < $3 * 10; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
# rank_pid MPIRUN_PID RANK -> pid of that rank among mpirun's children
rank_pid() {
    local c
    for c in $(pgrep -P "$1"); do
        grep -qzx "OMPI_COMM_WORLD_RANK=$2" "/proc/$c/environ" 2>/dev/null && { echo "$c"; return; }
    done
}
losses() { $PY -c 'import json,sys; [print(json.loads(l)["step"], json.loads(l)["loss"]) for l in open(sys.argv[1])]' "$1"; }
verify_latest() {   # verify_latest CKPT_DIR LOG -> 0 when latest names a checkpoint that verifies
    local latest
    latest=$(cat "$1/latest" 2>/dev/null) || return 1
    [[ "$latest" == step-* && -d "$1/$latest" ]] && "$BIN" verify "$1/$latest" >"$2" 2>&1
}

mkdir -p "$T/shards"
"$MKSH" "$T/shards" 96 32 64 7 >/dev/null 2>&1 || { bad make_shards; finish; }

# 1. mpirun: 2 ranks x accumulation 1 == 1 rank x accumulation 2
mkrun "$T/one" 24 1 2
mkrun "$T/two" 24 2 1
(cd "$T/one" && "$BIN" run plan.json) >"$T/one.log" 2>&1; rc1=$?
# Each rank's output also to its own files: mpirun forwards the ranks' pipes in
# chunks, so on the shared terminal two ranks' lines can interleave mid-line.
(cd "$T/two" && timeout 300 mpirun -np 2 --output-filename "$T/two-out" "$BIN" run plan.json) >"$T/two.log" 2>&1; rc2=$?
if [[ $rc1 -eq 0 && $rc2 -eq 0 ]] && $PY - "$T/one/run/metrics.jsonl" "$T/two/run/metrics.jsonl" <<'PYEOF'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
sys.exit(0 if len(a) == len(b) == 24 and all(abs(x - y) <= 1e-5 for x, y in zip(a, b)) else 1)
PYEOF
then ok "mpirun 2 ranks == 1 rank with 2x accumulation (24 losses within 1e-5)"
else bad "mpirun 2 ranks vs 1 rank (exit $rc1, $rc2)" "$T/one.log" "$T/two.log"; fi
cmp -s "$T/one/run/final/model.safetensors" "$T/two/run/final/model.safetensors" \
    && ok "mpirun 2 ranks: final weights bit-identical to 1 rank" || bad "2-rank final weights differ from 1-rank"
cat "$T"/two-out/1/rank.*/std* 2>/dev/null | grep -v '^[0-9T:.-]*Z \[rank [01]/2 [^]]*\] ' >"$T/two.unprefixed"
grep -q '^[0-9T:.-]*Z \[rank 0/2 [^]]*\] done: 24 steps' "$T"/two-out/1/rank.0/std* && ! grep -q . "$T/two.unprefixed" \
    && ok "every log line of the 2-rank run has the rank and host prefix" || bad "log prefix (lines without it below)" "$T/two.unprefixed"
grep -q '^llmc_train_step{llmc_job="cpu_test"} 24$' "$T/two/run/llmc_train.prom" && grep -q '^llmc_train_world_size{llmc_job="cpu_test"} 2$' "$T/two/run/llmc_train.prom" \
    && ok "Prometheus textfile: llmc_train_step 24, world size 2" || bad "Prometheus textfile" "$T/two/run/llmc_train.prom"

# 2. USR2 to mpirun mid-run: both ranks stop with exit 3 after a checkpoint; resume == uninterrupted
mkrun "$T/stop" 60 2 1 big
mkrun "$T/full" 60 2 1 big
(cd "$T/full" && timeout 300 mpirun -np 2 "$BIN" run plan.json) >"$T/full.log" 2>&1 || bad "uninterrupted big run" "$T/full.log"
(cd "$T/stop" && exec mpirun -np 2 "$BIN" run plan.json) >"$T/stop1.log" 2>&1 &
mp=$!; PIDS+=($mp)
if wait_for_line "$T/stop1.log" 'step 5/60' 60; then
    kill -USR2 $mp
    wait_pid $mp 60
    (cd "$T/stop" && timeout 300 mpirun -np 2 "$BIN" run plan.json) >"$T/stop2.log" 2>&1; rc2=$?
    if [[ $RC -eq 3 && $rc2 -eq 0 ]] && grep -q 'stopping at step [0-9]* (USR2); exit 3' "$T/stop1.log" &&
       grep -q 'resumed from .* at step' "$T/stop2.log" &&
       cmp -s "$T/full/run/final/model.safetensors" "$T/stop/run/final/model.safetensors"; then
        ok "mpirun: USR2 -> checkpoint + exit 3 ($(grep -o 'stopping at step [0-9]*' "$T/stop1.log")); resume gives bit-identical final weights"
    else bad "mpirun USR2 stop/resume (exit $RC, $rc2)" "$T/stop1.log" "$T/stop2.log"; fi
else bad "mpirun run did not reach step 5" "$T/stop1.log"; fi

# 3. kill -9 of rank 1 under mpirun: the job ends within 60 s; latest checkpoint valid; resume finishes
mkrun "$T/k1" 400 2 1 big
(cd "$T/k1" && exec mpirun -np 2 "$BIN" run plan.json) >"$T/k1.log" 2>&1 &
mp=$!; PIDS+=($mp)
if wait_for_line "$T/k1.log" 'checkpoint step 4 ' 60; then
    victim=$(rank_pid $mp 1)
    start=$SECONDS
    kill -9 "$victim"
    wait_pid $mp 60
    if [[ $RC -ne 0 && $RC -ne 124 ]] && grep -q 'rank 1 .*exited on signal 9' "$T/k1.log" && verify_latest "$T/k1/ckpt" "$T/k1.verify"
    then ok "mpirun: kill -9 of rank 1 ends the job in $((SECONDS - start)) s (exit $RC), latest checkpoint verifies"
    else bad "mpirun: kill -9 of rank 1 (exit $RC)" "$T/k1.log" "$T/k1.verify"; fi
else bad "mpirun big run did not checkpoint" "$T/k1.log"; fi

# 4. kill -9 of rank 0 on srun-style TCP ranks: rank 1 stops with a message within 60 s
mkrun "$T/k2" 400 2 1 big
free_port; port=$PORT
for r in 0 1; do
    (cd "$T/k2" && exec env SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=$r SLURM_LOCALID=$r MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$port "$BIN" run plan.json) >"$T/k2.$r.log" 2>&1 &
    tcp[$r]=$!; PIDS+=($!)
done
if wait_for_line "$T/k2.0.log" 'checkpoint step 4 ' 60; then
    start=$SECONDS
    kill -9 "${tcp[0]}"; wait "${tcp[0]}" 2>/dev/null
    wait_pid "${tcp[1]}" 60
    if [[ $RC -eq 1 ]] && grep -q '^[0-9T:.-]*Z \[rank 1/2 [^]]*\] error: lost the connection to rank 0' "$T/k2.1.log" && verify_latest "$T/k2/ckpt" "$T/k2.verify"
    then ok "tcp: kill -9 of rank 0 stops rank 1 in $((SECONDS - start)) s with a message; latest checkpoint verifies"
    else bad "tcp: kill -9 of rank 0 (rank 1 exit $RC)" "$T/k2.0.log" "$T/k2.1.log" "$T/k2.verify"; fi
else bad "tcp big run did not checkpoint" "$T/k2.0.log" "$T/k2.1.log"; fi

# 4b. USR2 while the ranks gather (a requeued segment can get Slurm's time-limit signal
# as it starts, and a peer may die of it before its handler): rank 1 waiting for rank 0
# stops at once with exit 3 (requeue), not after LLMC_DIST_TIMEOUT with exit 1
mkrun "$T/gather" 40 2 1
free_port "$port"; port=$PORT
(cd "$T/gather" && exec env LLMC_DIST_TIMEOUT=60 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 SLURM_LOCALID=1 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$BIN" run plan.json) >"$T/gather.1.log" 2>&1 &
g1=$!; PIDS+=($g1)
sleep 1.5
start=$SECONDS
kill -USR2 "$g1"
wait_pid "$g1" 20
if [[ $RC -eq 3 && $((SECONDS - start)) -lt 5 ]] && grep -q 'stop signal USR2 before training began: exit 3' "$T/gather.1.log"
then ok "USR2 while the ranks gather: exit 3 in $((SECONDS - start)) s with a message"
else bad "USR2 while the ranks gather (exit $RC)" "$T/gather.1.log"; fi

# 5. kill -9 in the middle of writing a checkpoint: it is never the latest; resume == uninterrupted
mkrun "$T/mid" 24 1 2 big
mkrun "$T/midfull" 24 1 2 big
(cd "$T/midfull" && "$BIN" run plan.json) >"$T/midfull.log" 2>&1 || bad "uninterrupted 1-rank big run" "$T/midfull.log"
(cd "$T/mid" && KILL_LOG="$T/mid1.log" $PY "$HERE/kill_during_checkpoint.py" ckpt 6 -- "$BIN" run plan.json) >"$T/mid.kill" 2>&1
killed=$(sed -n 's/^killed during \.tmp-step-0*//p' "$T/mid.kill")
latest=$(cat "$T/mid/ckpt/latest" 2>/dev/null)
if [[ -n "$killed" && "$latest" == step-* && "$latest" != "step-$(printf %08d "$killed")" ]] && verify_latest "$T/mid/ckpt" "$T/mid.verify"; then
    ok "killed while writing checkpoint $killed: latest stays $latest and verifies"
else bad "kill during checkpoint (killed at '${killed}', latest '$latest')" "$T/mid.kill" "$T/mid1.log" "$T/mid.verify"; fi
(cd "$T/mid" && "$BIN" run plan.json) >"$T/mid2.log" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && grep -q "resumed from .* at step ${latest#step-}" "$T/mid2.log" 2>/dev/null ||
   { [[ $rc -eq 0 ]] && grep -q "resumed from .* at step $((10#${latest#step-}))" "$T/mid2.log"; }; then
    cmp -s "$T/midfull/run/final/model.safetensors" "$T/mid/run/final/model.safetensors" \
        && ok "resume after the kill: final weights bit-identical to the uninterrupted run" \
        || bad "resume after the kill: final weights differ" "$T/mid2.log"
else bad "resume after the kill (exit $rc)" "$T/mid2.log"; fi

finish
