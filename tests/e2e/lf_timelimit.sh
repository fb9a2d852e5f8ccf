#!/bin/bash
# tests/e2e/lf_timelimit.sh LLMC — a LLaMA-Factory run three times longer than
# its time limit on the local Slurm (`make test-e2e-lf-timelimit`, about 8 min).
# The emitted script of tests/e2e/lf_long.llm (2 nodes, one launcher per node)
# is submitted with a 1-minute limit and Slurm's own early warning to the
# batch shell (`sbatch --time=1 --signal=B:USR2@20`: the form llmc emits, with
# the test's lead; slurmctld checks every 30 s and signals when the lead plus
# 30 s is left, so 20 s to 50 s before the limit), with a stand-in for llamafactory-cli that trains 720 steps
# of 0.25 s and saves every 20 (tests/e2e/stand_in_lf_trainer.sh). At each
# warning the script waits for the next save and requeues the job; each start
# resumes from the newest whole checkpoint. A cut-off checkpoint left in the
# output directory before the first start is moved aside. Passes when the job
# completes after several requeues, was never killed by the time limit, and
# ends with the final step and state of an uninterrupted run of the same YAML.
set -u
LLMC=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/slurm_lib.sh" e2e-lf-timelimit   # ROOT, CLUSTER, T, ok/bad/finish, job_field, wait_for_line
STAND_IN=$HERE/stand_in_lf_trainer.sh
unset SLURM_JOB_ID SLURM_JOBID SLURM_RESTART_COUNT

mkdir -p "$T/logs" && tiny_examples "$T"
cp "$HERE/lf_long.llm" "$T/lf_long.llm"
(cd "$T" && "$LLMC" lf_long.llm -o out) >"$T/llmc.log" 2>&1 || { bad "llmc compile" "$T/llmc.log"; finish; }
if grep -qx '#SBATCH --signal=B:USR2@[0-9]*' "$T/out/lf_long.slurm" && grep -qx '#SBATCH --requeue' "$T/out/lf_long.slurm" &&
    grep -qx 'save_steps: 20' "$T/out/llamafactory_train.yaml"; then
    ok "the script asks for USR2 to the batch shell before the limit; save_steps 20"
else bad "no --signal=B:USR2 / --requeue / save_steps 20" "$T/out/lf_long.slurm"; fi

# The uninterrupted run: the same YAML, no Slurm, no time limit.
mkdir -p "$T/ref"
sed 's#^output_dir: .*#output_dir: "'"$T"'/ref/run"#' "$T/out/llamafactory_train.yaml" >"$T/ref/llamafactory_train.yaml"
(cd "$T/ref" && NODE_RANK=0 "$STAND_IN" train llamafactory_train.yaml) >"$T/ref.log" 2>&1 || { bad "uninterrupted run" "$T/ref.log"; finish; }
want=$(cat "$T/ref/run/trainer_state.json")

"$CLUSTER" start "$T/slurm" "$T/out/slurm.conf" "$T/out/gres.conf" >"$T/cluster.log" 2>&1 || { bad "cluster" "$T/cluster.log"; finish; }
eval "$("$CLUSTER" env "$T/slurm")"

# A checkpoint cut off while being written (no trainer_state.json), as a kill
# during a save leaves it: resuming from it would fail the start.
mkdir -p "$T/run/checkpoint-5" && echo partial >"$T/run/checkpoint-5/model.safetensors"

export LLAMAFACTORY_CLI=$STAND_IN LLMC_STAND_IN_STEP_SECONDS=0.25 LLMC_STAND_IN_SAVE_SECONDS=0.5
export LLMC_STAND_IN_LOG=$T/stand-in.log
id=$(cd "$T" && sbatch --parsable --time=1 --signal=B:USR2@20 out/lf_long.slurm)
err=$T/logs/lf_long-$id.err
state=
for ((i = 0; i < 1080; i++)); do   # 18 min at most
    state=$(job_field "$id" JobState)
    [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED || $state == TIMEOUT ]] && break
    sleep 1
done
restarts=$(job_field "$id" Restarts)
if [[ $state == COMPLETED ]] && (( restarts >= 3 )); then ok "completed after $restarts requeues (3 min of steps, 1-minute limit)"
else bad "job $id: $state after $restarts requeues" "$err" "$LLMC_STAND_IN_LOG"; finish; fi
# The script's own lines in order: U for a warning, R for a requeue. Each
# segment but the last is U R; the last segment may get a warning too (the
# lead is 20-50 s and it may still be training then) and must then finish
# without a requeue, so the sequence is (UR)^restarts with an optional U.
lines=$(grep -o -e 'llmc: USR2, the time limit is near' -e "llmc: requeueing job $id; it resumes from .*/checkpoint-[0-9]*\$" "$err" |
    sed -e 's/^llmc: USR2.*/U/' -e 's/^llmc: requeueing.*/R/' | tr -d '\n')
want_seq=$(printf 'UR%.0s' $(seq 1 "$restarts"))
if [[ $lines == "$want_seq" || $lines == "${want_seq}U" ]]; then ok "each of the $restarts requeued segments: USR2, wait for a save, requeue (script lines $lines)"
else bad "script lines $lines (U = USR2, R = requeue), restarts $restarts" "$err"; fi
! grep -q 'DUE TO TIME LIMIT' "$err" && ok "never killed by the time limit" || bad "killed at the time limit" "$err"
if grep -q "checkpoint-5 has no trainer_state.json (cut off while saving); moved to .*/incomplete-checkpoint-5.$id.0\$" "$err" &&
    [[ -f $T/run/incomplete-checkpoint-5.$id.0/model.safetensors && ! -e $T/run/checkpoint-5 ]]; then
    ok "a cut-off checkpoint is moved aside before the start"
else bad "the cut-off checkpoint-5 was not moved aside" "$err"; fi
# every start after the first resumed where the previous segment's last save was
starts=$(grep -c '^start node=0 ' "$LLMC_STAND_IN_LOG")
resumed=$(grep -c '^start node=0 restart=[1-9][0-9]* step=[1-9]' "$LLMC_STAND_IN_LOG")
if (( starts == restarts + 1 && resumed == restarts )) && grep -q '^start node=0 restart=0 step=0 ' "$LLMC_STAND_IN_LOG" &&
    (( $(grep -c '^start node=1 ' "$LLMC_STAND_IN_LOG") == starts )); then
    ok "both nodes start $starts times; each start after the first resumes from a checkpoint"
else bad "starts $starts, resumed $resumed, restarts $restarts" "$LLMC_STAND_IN_LOG"; fi
got=$(cat "$T/run/trainer_state.json" 2>/dev/null)
if [[ -n $want && $got == "$want" ]]; then ok "the final step and state are the uninterrupted run's: $got"
else bad "final state '$got', uninterrupted '$want'" "$LLMC_STAND_IN_LOG"; fi
finish
