#!/bin/bash
# tests/e2e/slurm.sh LLMC LLMC_TRAIN DIST_TEST — the whole path on a real two-node Slurm
# (tests/slurm/cluster.sh): `llmc` compiles tests/e2e/tiny_2node.llm, the cluster
# is configured from the emitted slurm.conf/gres.conf snippets, and the emitted job
# script is submitted with sbatch, unchanged. Three jobs:
#   A. runs to the end (150 steps): COMPLETED, both ranks ran (one per node), loss went down,
#      the final checkpoint and the exported model verify, logs where the script says
#   B. preempted twice: `scancel --signal=USR2` (trainer checkpoints, exits 3, the
#      script requeues), then `scontrol requeue` (Slurm's TERM, same path); the job
#      resumes each time and ends with weights bit-identical to A's
#   C. (a much longer run) rank 1 is killed with -9: the job FAILS within 60 s with a message naming
#      the task, and the latest checkpoint still verifies
#   D. Open MPI's mpirun inside a two-node allocation (the other launch dist.c
#      accepts): one rank per node, the same reduced bits on both
# Needs root (Slurm). Everything it starts is torn down on exit.
set -u
LLMC=$(realpath "$1"); BIN=$(realpath "$2"); DIST_TEST=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/tests/e2e/tiny_examples.sh"
CLUSTER=$ROOT/tests/slurm/cluster.sh
T=$(mktemp -d /tmp/e2e-slurm.XXXXXX)
trap '"$CLUSTER" stop "$T/slurm" >/dev/null 2>&1; rm -rf "$T"' EXIT
PY=python3
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
BAD_TAIL=40 FINISH_SECONDS=1

if [[ $(id -u) -ne 0 ]]; then echo "FAIL needs root (Slurm)"; fail=1; finish; fi
unset OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_JOB_ID SLURM_JOBID
# The trainer as the script starts it (the script takes MASTER_ADDR from the
# node's NodeAddr, so the unresolvable names n1, n2 of this cluster work).
export LLMC_TRAIN=$BIN LLMC_THREADS=1

# compile DIR [STEPS]: tests/e2e/tiny_2node.llm (max_steps = STEPS) compiled in DIR
# (its own run/ and shards), logs/ made
compile() {
    mkdir -p "$1/logs" && tiny_examples "$1" &&
        sed "s/max_steps        = 150/max_steps        = ${2:-150}/" "$HERE/tiny_2node.llm" >"$1/tiny_2node.llm" &&
        (cd "$1" && "$LLMC" tiny_2node.llm -o out) >"$1/llmc.log" 2>&1
}
# submit DIR -> job id on stdout (submitted from DIR, as a user would)
submit() { (cd "$1" && sbatch --parsable out/tiny_2node.slurm); }
job_field() { scontrol show job "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -n 1 | cut -d= -f2; }
# wait_state ID SECONDS STATE... -> 0 when the job reached one of the states
wait_state() {
    local id=$1 secs=$2 i s; shift 2
    for ((i = 0; i < secs * 5; i++)); do
        s=$(job_field "$id" JobState)
        for want in "$@"; do [[ "$s" == "$want" ]] && return 0; done
        sleep 0.2
    done
    return 1
}
wait_for_line() {
    local i
    for ((i = 0; i < $3 * 5; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
    return 1
}
# wait_step FILE MIN SECONDS [AFTER]: until rank 0 logged step >= MIN (on stdout: the .out file) (after the
# last line matching AFTER, when given); prints the step reached.
wait_step() {
    local i n
    for ((i = 0; i < $3 * 5; i++)); do
        n=$(awk -v after="${4:-}" 'after != "" && $0 ~ after { n = 0 }
            match($0, /\] step [0-9]+\//) { v = substr($0, RSTART + 7, RLENGTH - 8) + 0; if (v > n) n = v }
            END { print n + 0 }' "$1" 2>/dev/null)
        [[ ${n:-0} -ge $2 ]] && { echo "$n"; return 0; }
        sleep 0.2
    done
    return 1
}
# release_requeued ID N: wait (bounded) until the job runs again for the N-th time.
# A requeued job is held for AuthInfo=cred_expire (10 s on the test cluster, see
# tests/slurm/cluster.sh); starting it earlier races Slurm's revoked credential.
release_requeued() {
    local i
    for ((i = 0; i < 450; i++)); do
        [[ $(job_field "$1" JobState) == RUNNING && $(job_field "$1" Restarts) -ge $2 ]] && return 0
        sleep 0.2
    done
    return 1
}
ckpt_dir() { $PY -c 'import json,os,sys; d=sys.argv[1]; print(os.path.normpath(os.path.join(d, json.load(open(d+"/plan.json"))["checkpoint"]["dir"])))' "$1/out"; }
verify_latest() {   # verify_latest CKPT_DIR LOG
    local latest
    latest=$(cat "$1/latest" 2>/dev/null) || return 1
    "$BIN" verify "$1/$latest" >"$2" 2>&1
}

SECONDS=0
for d in a b c; do compile "$T/$d" $([[ $d == c ]] && echo 20000) || { bad "llmc compile" "$T/$d/llmc.log"; finish; }; done
ok "llmc compiled tests/e2e/tiny_2node.llm (slurm.conf, gres.conf, tiny_2node.slurm, plan.json)"
if "$CLUSTER" start "$T/slurm" "$T/a/out/slurm.conf" "$T/a/out/gres.conf" >"$T/cluster.log" 2>&1; then
    eval "$("$CLUSTER" env "$T/slurm")"
    ok "local Slurm from the emitted snippet: $(sinfo -h -o '%P %D nodes %T' | tr '\n' ' ')"
else bad "cluster start" "$T/cluster.log"; finish; fi

# ---- A: a full run
A=$(submit "$T/a")
if [[ -n "$A" ]] && wait_state "$A" 300 COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL; then :; fi
state=$(job_field "$A" JobState)
err=$T/a/logs/tiny_2node-$A.err out=$T/a/logs/tiny_2node-$A.out
if [[ "$state" == COMPLETED && "$(job_field "$A" ExitCode)" == 0:0 ]]; then ok "job A COMPLETED, exit 0"
else bad "job A: ${state:-no state}" "$err" "$out"; fi
# .err exists where the script says; a clean run may leave it empty (nothing warned)
[[ -s "$out" && -f "$err" ]] && grep -q "llmc: job $A restart 0: 2 node(s)" "$out" \
    && ok "logs where the script says: logs/tiny_2node-$A.out and .err" || bad "job A logs" "$out" "$err"
# progress on stdout (.out), each line with its ISO 8601 time first
grep -q '^[0-9T:.-]*Z \[rank 0/2 n1\] rank 0 of 2 started on n1' "$out" && grep -q '^[0-9T:.-]*Z \[rank 1/2 n2\] rank 1 of 2 started on n2' "$out" \
    && ok "both ranks ran: rank 0 on n1, rank 1 on n2 (stdout, timestamped)" || bad "ranks on nodes" "$out"
CA=$(ckpt_dir "$T/a")
if $PY - "$T/a/run/metrics.jsonl" <<'PYEOF'
import json, sys
l = [json.loads(x)["loss"] for x in open(sys.argv[1])]
sys.exit(0 if len(l) == 150 and sum(l[-5:]) / 5 < 0.5 * sum(l[:5]) / 5 else 1)
PYEOF
then ok "loss went down: first steps $(head -n 1 "$T/a/run/metrics.jsonl" | grep -o '"loss":[0-9.]*'), last $(tail -n 1 "$T/a/run/metrics.jsonl" | grep -o '"loss":[0-9.]*')"
else bad "loss did not go down" "$T/a/run/metrics.jsonl"; fi
if [[ "$(cat "$CA/latest" 2>/dev/null)" == step-00000150 ]] && verify_latest "$CA" "$T/a.verify" && "$BIN" verify "$T/a/run/final" >>"$T/a.verify" 2>&1
then ok "final checkpoint step-00000150 and the exported model verify (llmc-train verify)"
else bad "final checkpoint" "$T/a.verify" "$err"; fi

# ---- B: USR2 (scancel --signal), requeue, resume; then scontrol requeue (TERM), resume
B=$(submit "$T/b")
errb=$T/b/logs/tiny_2node-$B.err outb=$T/b/logs/tiny_2node-$B.out
if wait_step "$outb" 15 120 >/dev/null; then
    scancel --signal=USR2 "$B"
    if wait_for_line "$errb" "requeueing job $B" 60 && release_requeued "$B" 1 &&
       wait_for_line "$outb" 'resumed from .* at step' 120; then
        ok "USR2: trainer $(grep -o 'stopping at step [0-9]* (USR2); exit 3' "$outb" | head -n 1), script requeued, job resumed ($(grep -o 'resumed from [^ ]* at step [0-9]*' "$outb" | head -n 1 | sed 's/.* at //'))"
    else bad "USR2 preemption" "$errb" "$outb"; fi
else bad "job B did not reach step 15" "$errb" "$outb"; fi
first=$(grep -o 'stopping at step [0-9]*' "$outb" | head -n 1 | grep -o '[0-9]*$')
if [[ -n "$first" ]] && wait_step "$outb" $((first + 10)) 120 'resumed from' >/dev/null; then
    scontrol requeue "$B"
    if wait_for_line "$outb" 'stopping at step [0-9]* (TERM)' 60 && release_requeued "$B" 2 &&
       wait_state "$B" 300 COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL && [[ $(job_field "$B" JobState) == COMPLETED ]]; then
        ok "scontrol requeue: trainer $(grep -o 'stopping at step [0-9]* (TERM)' "$outb" | head -n 1), job requeued and COMPLETED (restarts: $(job_field "$B" Restarts))"
    else bad "scontrol requeue (state $(job_field "$B" JobState))" "$errb" "$outb"; fi
else bad "job B did not get 10 steps past its first stop (${first:-none}) after the requeue" "$errb" "$outb"; fi
if [[ -f "$T/b/run/final/model.safetensors" ]] && cmp -s "$T/a/run/final/model.safetensors" "$T/b/run/final/model.safetensors" &&
   cmp -s "$CA/step-00000150/optimizer.safetensors" "$(ckpt_dir "$T/b")/step-00000150/optimizer.safetensors"; then
    ok "preempted twice, resumed twice: final weights and optimizer state bit-identical to job A"
else bad "job B's final weights differ from job A's" "$errb" "$outb"; fi

# ---- C: kill -9 of rank 1
C=$(submit "$T/c")
errc=$T/c/logs/tiny_2node-$C.err outc=$T/c/logs/tiny_2node-$C.out
if wait_for_line "$outc" 'checkpoint step 20 ' 120; then
    victim=""
    for p in $(pgrep -f "llmc-train run"); do
        grep -qzx "SLURM_JOB_ID=$C" "/proc/$p/environ" 2>/dev/null && grep -qzx "SLURM_PROCID=1" "/proc/$p/environ" 2>/dev/null && victim=$p
    done
    start=$SECONDS
    [[ -n "$victim" ]] && kill -9 "$victim"
    if [[ -n "$victim" ]] && wait_state "$C" 60 FAILED CANCELLED COMPLETED TIMEOUT NODE_FAIL &&
       [[ $(job_field "$C" JobState) == FAILED ]] && grep -q 'srun: error: n2: task 1: ' "$errc" &&
       grep -q '^[0-9T:.-]*Z \[rank 0/2 n1\] error: lost the connection to rank 1' "$errc"; then
        ok "kill -9 of rank 1: job FAILED in $((SECONDS - start)) s; rank 0: '$(grep -o 'error: lost the connection to rank 1' "$errc")'"
    else bad "kill -9 of rank 1 (victim '$victim', state $(job_field "$C" JobState))" "$errc"; fi
    CC=$(ckpt_dir "$T/c")
    if verify_latest "$CC" "$T/c.verify"; then ok "after the kill, the latest checkpoint $(cat "$CC/latest") verifies"
    else bad "latest checkpoint after the kill" "$T/c.verify"; fi
else bad "job C did not checkpoint step 20" "$outc" "$errc"; fi

# ---- D: mpirun inside the allocation (the partition of tiny_2node.llm: the emitted
# snippet sets no default partition)
cat >"$T/mpi.sh" <<JOB
#!/bin/bash
#SBATCH --partition=debug --nodes=2 --ntasks-per-node=1 --time=5 -o $T/mpi-%j.out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
mpirun "$DIST_TEST" check
JOB
D=$(sbatch --parsable "$T/mpi.sh")
if wait_state "$D" 120 COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL && [[ $(job_field "$D" JobState) == COMPLETED ]] &&
   grep -q 'rank 0 of 2 started on n1 (local rank 0, Open MPI)' "$T/mpi-$D.out" &&
   grep -q 'rank 1 of 2 started on n2 (local rank 0, Open MPI)' "$T/mpi-$D.out" &&
   [[ $(grep -c '^rank [01]/2 ok ' "$T/mpi-$D.out") -eq 2 && $(grep '^rank [01]/2 ok ' "$T/mpi-$D.out" | awk '{print $4}' | sort -u | wc -l) -eq 1 ]]
then ok "mpirun inside a 2-node allocation: rank 0 on n1, rank 1 on n2, same bits"
else bad "mpirun inside the allocation (state $(job_field "$D" JobState))" "$T/mpi-$D.out"; fi

finish
