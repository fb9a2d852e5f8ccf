#!/bin/bash
# tests/e2e/timelimit.sh LLMC LLMC_TRAIN — a real time limit on the local Slurm
# (`make test-e2e-timelimit`, about 40 s).
# The emitted script is submitted with a 1-minute limit and Slurm's own early
# warning (`sbatch --time=1 --signal=USR2@30`, the form llmc emits when a run
# needs several time limits) for a run of several minutes. 30 s, not llmc's own
# lead: the requeued segment gets the same warning 30 s after it starts, and on a
# loaded 2-core machine its trainer was once not yet running 15 s in (the signal's
# default action then killed the task: see docs/operations.md). Slurm, not the test,
# sends USR2: the trainer checkpoints and exits 3, the script requeues, and the job
# resumes from that checkpoint instead of being killed at the limit.
set -u
LLMC=$(realpath "$1"); BIN=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/slurm_lib.sh" e2e-timelimit   # ROOT, CLUSTER, T, ok/bad/finish, job_field, wait_for_line
unset OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_JOB_ID SLURM_JOBID
export LLMC_TRAIN=$BIN LLMC_THREADS=1

mkdir -p "$T/logs" && tiny_examples "$T"
sed -e 's/max_steps        = 150/max_steps        = 20000/' -e 's/checkpoint_every = 10 steps/checkpoint_every = 100 steps/' \
    "$HERE/tiny_2node.llm" >"$T/long.llm"
(cd "$T" && "$LLMC" long.llm -o out) >"$T/llmc.log" 2>&1 || { bad "llmc compile" "$T/llmc.log"; finish; }
"$CLUSTER" start "$T/slurm" "$T/out/slurm.conf" "$T/out/gres.conf" >"$T/cluster.log" 2>&1 || { bad "cluster" "$T/cluster.log"; finish; }
eval "$("$CLUSTER" env "$T/slurm")"

id=$(cd "$T" && sbatch --parsable --time=1 --signal=USR2@30 out/tiny_2node.slurm)
err=$T/logs/tiny_2node-$id.err out=$T/logs/tiny_2node-$id.out   # the trainer's progress: stdout
if wait_for_line "$out" 'stopping at step [0-9]* (USR2); exit 3' 120 && wait_for_line "$err" "requeueing job $id" 30; then
    step=$(grep -o 'stopping at step [0-9]*' "$out" | head -n 1 | grep -o '[0-9]*$')
    ok "Slurm's USR2 before the 1-minute limit: checkpoint at step $step, exit 3, requeued"
else bad "no USR2 stop before the time limit (state $(job_field "$id" JobState))" "$err"; finish; fi
# The requeued job starts again after AuthInfo=cred_expire (10 s, tests/slurm/cluster.sh).
for ((i = 0; i < 450; i++)); do
    [[ $(job_field "$id" JobState) == RUNNING && $(job_field "$id" Restarts) -ge 1 ]] && break
    sleep 0.2
done
if wait_for_line "$out" "resumed from .* at step $step\$" 60; then ok "the requeued job resumed at step $step"
else scontrol show job "$id" >"$T/job.txt"; bad "no resume at step $step" "$out" "$err" "$T/job.txt" "$T/slurm/log/slurmctld.log"; fi
! grep -q 'DUE TO TIME LIMIT' "$err" && ok "never killed by the time limit" || bad "killed at the time limit" "$err"
scancel "$id"
finish
