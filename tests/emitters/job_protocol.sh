#!/bin/bash
# tests/emitters/job_protocol.sh JOB_SCRIPT PLAN_JSON — the emitted llmc job
# script's side of the exit-status protocol (docs/artifacts.md), with stand-in
# srun and scontrol on PATH instead of Slurm, so each case is deterministic: the
# cases a real Slurm only produces by chance of timing (a time-limit USR2 that
# kills a step or a rank as it starts: srun exits 128 + USR2) are set up directly.
#   srun      prints its step to $STEPS; the prepare step exits $PREPARE_RC; the
#             training step exits $TRAIN_SRUN_RC if set, else runs its command
#             (the script's rank wrapper, one rank) with the stand-in trainer
#   scontrol  answers hostnames and node queries; `requeue ID` is noted in $STEPS
#   trainer   `run` exits $TRAINER_RC
# Each case: the script's exit status, whether it requeued, and its message (on
# stdout or stderr).
# Closes with "N passed, N failed".
set -u
job=$(realpath "$1")
plan=$(realpath "$2")
ROOT=$(pwd)
. "$ROOT/tests/lib.sh"
T=$(mktemp -d /tmp/job-protocol.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin"
cat >"$T/bin/srun" <<'EOF'
#!/bin/bash
while [[ $# -gt 0 && $1 == -* ]]; do shift; done   # the step's options, all --opt or --opt=value
[[ ${1:-} == nvidia-smi ]] && exit 0                # the GPU sampler of a GPU plan, where nvidia-smi exists
if [[ ${2:-} == prepare ]]; then echo "srun prepare" >>"$STEPS"; exit "$PREPARE_RC"; fi
echo "srun train" >>"$STEPS"
if [[ -n ${TRAIN_SRUN_RC:-} ]]; then exit "$TRAIN_SRUN_RC"; fi
SLURM_PROCID=0 exec "$@"
EOF
cat >"$T/bin/scontrol" <<'EOF'
#!/bin/bash
case "$1 ${2:-}" in
    "show hostnames") echo node1 ;;
    "show node") echo "NodeName=node1 Arch=x86_64 NodeAddr=127.0.0.1 NodeHostName=node1" ;;
    "show job") ;;
    "requeue "*) echo "requeue $2" >>"$STEPS" ;;
    *) echo "scontrol stand-in: $*" >&2; exit 1 ;;
esac
EOF
cat >"$T/bin/trainer" <<'EOF'
#!/bin/bash
echo "trainer $1" >>"$STEPS"
exit "$TRAINER_RC"
EOF
chmod +x "$T/bin/srun" "$T/bin/scontrol" "$T/bin/trainer"

# case NAME WANT_RC WANT_REQUEUE(0|1) WANT_MESSAGE ENV...
case_() {
    local name=$1 want_rc=$2 want_rq=$3 want_msg=$4 d
    shift 4
    d=$T/$name
    mkdir -p "$d"
    : >"$d/steps"
    (cd "$d" && env -u SLURM_RESTART_COUNT PATH="$T/bin:$PATH" SLURM_JOB_ID=4242 SLURM_JOB_NODELIST=node1 \
        SLURM_SUBMIT_DIR="$d" LLMC_PLAN="$plan" LLMC_TRAIN="$T/bin/trainer" STEPS="$d/steps" PREPARE_RC=0 \
        TRAINER_RC=0 "$@" bash "$job" >"$d/out" 2>"$d/err")
    local rc=$? rq=0
    grep -qx "requeue 4242" "$d/steps" && rq=1
    if [[ $rc == "$want_rc" && $rq == "$want_rq" ]] && cat "$d/out" "$d/err" | grep -qF -- "$want_msg"; then
        ok "job script: $name: exit $rc, $([[ $rq == 1 ]] && echo requeued || echo not requeued)"
    else
        bad "job script: $name: exit $rc (want $want_rc), requeue $rq (want $want_rq), message '$want_msg'" \
            "$d/out" "$d/err" "$d/steps"
    fi
    [[ ! -e $d/logs/.llmc-stop-4242 ]] || bad "job script: $name: the stop mark was left behind"
}

case_ "trained to the end" 0 0 "llmc: job 4242 restart 0: 1 node(s), master 127.0.0.1:" TRAINER_RC=0
case_ "the trainer checkpointed and stopped (exit 3 through the wrapper's mark)" 0 1 \
    "the trainer checkpointed and stopped (exit 3); requeueing job 4242" TRAINER_RC=3
case_ "a rank killed by USR2 before its wrapper's trap (srun 128 + USR2)" 0 1 \
    "a rank was stopped by USR2 as it started (srun exit status 140)" TRAIN_SRUN_RC=140
case_ "the trainer failed (exit 1)" 1 0 "the trainer failed (srun exit status 1)" TRAINER_RC=1
case_ "a rank killed by TERM without a checkpoint (srun 128 + TERM)" 143 0 \
    "the trainer failed (srun exit status 143)" TRAIN_SRUN_RC=143
case_ "prepare stopped after a shard (exit 3)" 0 1 "prepare stopped after a shard (exit 3); requeueing job 4242" \
    PREPARE_RC=3
case_ "prepare killed by USR2 as it started (srun 128 + USR2)" 0 1 \
    "prepare was stopped by USR2 as it started (srun exit status 140)" PREPARE_RC=140
case_ "prepare failed" 1 0 "prepare failed (srun exit status 1)" PREPARE_RC=1
# a stop before training must not train: the training step never ran
if ! grep -q "srun train" "$T/prepare killed by USR2 as it started (srun 128 + USR2)/steps"; then
    ok "job script: no training step after prepare's stop"
else
    bad "job script: a training step ran after prepare's stop" "$T/prepare killed by USR2 as it started (srun 128 + USR2)/steps"
fi
finish
