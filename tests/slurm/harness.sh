#!/bin/bash
# tests/slurm/harness.sh — the local Slurm harness itself (tests/slurm/cluster.sh):
# start from an emitted-style snippet, nodes IDLE with their GPU gres, a job runs on
# both nodes, stop with a job still running leaves no process behind; a CPU-only
# snippet without gres.conf; a snippet without nodes is refused; two clusters started
# at the same moment on the same port base get ports and job ids of their own. Needs root.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/cluster.sh
T=$(mktemp -d /tmp/slurm-harness.XXXXXX)
trap 'for c in gpu cpu pa pb; do "$CLUSTER" stop "$T/$c" >/dev/null 2>&1; done; rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
BAD_TAIL=all

if [[ $(id -u) -ne 0 ]]; then bad "the Slurm harness needs root"; finish; fi

# wait_job ID SECONDS -> JOB_STATE
wait_job() {
    local i
    for ((i = 0; i < $2 * 5; i++)); do
        JOB_STATE=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case "$JOB_STATE" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL) return 0 ;; esac
        sleep 0.2
    done
    return 1
}

# no_process_left STATE -> 0 when nothing of that cluster runs
no_process_left() {
    local env_file
    for env_file in /proc/[0-9]*/environ; do
        grep -qzxF "LLMC_SLURM_STATE=$1" "$env_file" 2>/dev/null && return 1
    done
    return 0
}

# 1. start the two-node GPU cluster
if "$CLUSTER" start "$T/gpu" "$HERE/gpu2.slurm.conf" "$HERE/gpu2.gres.conf" >"$T/start.out" 2>&1; then
    ok "start: two GPU nodes"
else bad "start: two GPU nodes" "$T/start.out"; fi
eval "$("$CLUSTER" env "$T/gpu")"

# 2. sinfo: both nodes idle with 8 GPUs each
sinfo -h -N -o '%N %T %G' | sort -u >"$T/sinfo"
if [[ "$(cat "$T/sinfo")" == $'hgx001 idle gpu:h100:8\nhgx002 idle gpu:h100:8' ]]; then ok "sinfo: hgx001, hgx002 idle with gpu:h100:8"
else bad "sinfo" "$T/sinfo"; fi

# 3. a job asking for the GPUs runs one task on each node and completes
cat >"$T/job.sh" <<JOB
#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gres=gpu:h100:8 --time=5 -o $T/job-%j.out
srun bash -c 'echo "task \$SLURM_PROCID on \$SLURMD_NODENAME gpus \$CUDA_VISIBLE_DEVICES"'
JOB
id=$(sbatch --parsable "$T/job.sh" 2>"$T/sbatch.err")
if [[ -n "$id" ]] && wait_job "$id" 60 && [[ $JOB_STATE == COMPLETED ]] &&
   grep -q 'task 0 on hgx001 gpus 0,1,2,3,4,5,6,7' "$T/job-$id.out" &&
   grep -q 'task 1 on hgx002 gpus 0,1,2,3,4,5,6,7' "$T/job-$id.out"; then
    ok "sbatch: a job on both nodes with 8 GPUs each completes"
else bad "sbatch job $id (${JOB_STATE:-no state})" "$T/sbatch.err" "$T/job-$id.out"; fi

# 4. stop while a job runs: nothing of the cluster is left
cat >"$T/sleep.sh" <<JOB
#!/bin/bash
#SBATCH --nodes=2 --time=5 -o /dev/null
srun sleep 300
JOB
id=$(sbatch --parsable "$T/sleep.sh")
for ((i = 0; i < 100; i++)); do squeue -h -j "$id" -o %T 2>/dev/null | grep -q RUNNING && break; sleep 0.1; done
pids=$(cat "$T"/gpu/run/*.pid 2>/dev/null)
start=$SECONDS
"$CLUSTER" stop "$T/gpu" >"$T/stop.out" 2>&1
left=""
for p in $pids; do kill -0 "$p" 2>/dev/null && left+=" $p"; done
if [[ -n "$pids" && -z "$left" ]] && no_process_left "$T/gpu" && [[ $((SECONDS - start)) -le 30 ]]; then
    ok "stop with a running job leaves no process ($((SECONDS - start)) s)"
else bad "stop left processes:$left (pid files: ${pids:-none}; marked processes left: $(no_process_left "$T/gpu" && echo no || echo yes); $((SECONDS - start)) s)" "$T/stop.out"; fi

# 5. a CPU-only cluster of three nodes (a hostlist with a list and a range), no gres.conf
if "$CLUSTER" start "$T/cpu" "$HERE/cpu3.slurm.conf" >"$T/startcpu.out" 2>&1; then
    eval "$("$CLUSTER" env "$T/cpu")"
    states=$(sinfo -h -N -o '%N %T' | sort -u | tr '\n' ' ')
    if [[ "$states" == "cpu1 idle cpu2 idle cpu3 idle " ]]; then ok "start: three CPU nodes, no gres"
    else bad "cpu nodes: $states"; fi
else bad "start: three CPU nodes" "$T/startcpu.out"; fi
"$CLUSTER" stop "$T/cpu"
no_process_left "$T/cpu" && ok "stop: cpu cluster gone" || bad "stop: cpu cluster left processes"

# 6. a snippet without NodeName lines is refused with a message
echo "PartitionName=x Nodes=ALL" >"$T/empty.conf"
"$CLUSTER" start "$T/empty" "$T/empty.conf" >"$T/empty.out" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q 'has no NodeName line' "$T/empty.out"; then ok "snippet without nodes: clear error"
else bad "snippet without nodes (rc $rc)" "$T/empty.out"; fi

# 7. two clusters started at the same moment, both asked for one port base: each gets
# its own (the choice is locked), and their first jobs' rendezvous ports (the emitted
# script's 20000 + job id % 20000) differ, where two clusters numbering from 1 met
for c in pa pb; do
    LLMC_SLURM_PORT_BASE=12300 "$CLUSTER" start "$T/$c" "$HERE/cpu3.slurm.conf" >"$T/start-$c.out" 2>&1 &
done
wait
declare -A ctld job
for c in pa pb; do
    ctld[$c]=$(sed -n 's/^SlurmctldPort=//p' "$T/$c/slurm.conf" 2>/dev/null)
    job[$c]=$(SLURM_CONF=$T/$c/slurm.conf sbatch --parsable --output=/dev/null --wrap true 2>"$T/sbatch-$c.err")
done
if [[ -n ${ctld[pa]} && -n ${ctld[pb]} && ${ctld[pa]} != "${ctld[pb]}" && ${job[pa]} =~ ^[0-9]+$ && ${job[pb]} =~ ^[0-9]+$ ]] &&
   (( (${job[pa]} - ${job[pb]}) % 20000 != 0 ))
then ok "two clusters at once: slurmctld on ${ctld[pa]} and ${ctld[pb]}, first jobs ${job[pa]} and ${job[pb]} (rendezvous ports $((20000 + ${job[pa]} % 20000)), $((20000 + ${job[pb]} % 20000)))"
else bad "two clusters at once: slurmctld '${ctld[pa]}' '${ctld[pb]}', jobs '${job[pa]}' '${job[pb]}'" \
    "$T/start-pa.out" "$T/start-pb.out" "$T/sbatch-pa.err" "$T/sbatch-pb.err"; fi
for c in pa pb; do "$CLUSTER" stop "$T/$c"; done

finish
