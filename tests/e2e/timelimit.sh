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
scontrol setdebug debug >/dev/null 2>&1   # the log then names the time-limit warning (send_job_warn_signal) and each requeue

id=$(cd "$T" && sbatch --parsable --time=1 --signal=USR2@30 out/tiny_2node.slurm)
err=$T/logs/tiny_2node-$id.err out=$T/logs/tiny_2node-$id.out   # the trainer's progress: stdout
if wait_for_line "$out" 'stopping at step [0-9]* (USR2); exit 3' 120 && wait_for_line "$err" "requeueing job $id" 30; then
    step=$(grep -o 'stopping at step [0-9]*' "$out" | head -n 1 | grep -o '[0-9]*$')
    ok "Slurm's USR2 before the 1-minute limit: checkpoint at step $step, exit 3, requeued"
else bad "no USR2 stop before the time limit (state $(job_field "$id" JobState))" "$err"; finish; fi
# The requeued job is held until its BeginTime, requeue + AuthInfo=cred_expire + 1
# (11 s, tests/slurm/cluster.sh), and nothing schedules it at that moment: slurmctld's
# next periodic pass or backfill cycle (both every 30 s, the tick that also sends the
# time-limit warning) starts it, so it resumes 11-41 s after the requeue (30 s in every
# run here). 150 s covers that with room for a loaded machine, watching the job: one
# that leaves the queue (not requeued) or is held fails at once; any failure prints the
# job, its nodes and what slurmctld and the slurmds logged about it.
resumed=0 why= t0=$SECONDS
while ((SECONDS - t0 < 150)); do
    grep -q "resumed from .* at step $step\$" "$out" && { resumed=1; break; }
    state=$(job_field "$id" JobState) reason=$(job_field "$id" Reason) prio=$(job_field "$id" Priority)
    case $state in
        COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)
            why="the job ended ($state, reason $reason): it was not requeued"; break ;;
    esac
    [[ $state == PENDING && ( $prio == 0 || $reason == *Held* || $reason == *held* ) ]] &&
        { why="the requeued job is held ($reason, priority $prio)"; break; }
    sleep 0.5
done
if ((resumed)); then ok "the requeued job resumed at step $step"
else
    # What a failure needs to explain itself: the job as Slurm sees it, the nodes, the
    # controller's lines about this job and its nodes (requeues, warnings, drains, errors).
    { date -u '+now %FT%T'; scontrol show job "$id"; sinfo -N -o '%N %T %E'; } >"$T/job.txt" 2>&1
    grep -E "JobId=$id|Requeu|warning signal|[Dd]rain|not responding|DOWN|error" "$T/slurm/log/slurmctld.log" >"$T/ctld.txt"
    cat "$T"/slurm/log/slurmd-*.log | grep -E "error|revoked|launch|$id\.batch" | tail -n 30 >"$T/slurmd.txt"
    bad "no resume at step $step${why:+: $why} (waited $((SECONDS - t0)) s)" "$out" "$err" "$T/job.txt" "$T/ctld.txt" "$T/slurmd.txt"
fi
! grep -q 'DUE TO TIME LIMIT' "$err" && ok "never killed by the time limit" || bad "killed at the time limit" "$err"
scancel "$id"
finish
