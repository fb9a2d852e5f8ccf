#!/bin/bash
# stand_in_trainer.sh — takes llmc-train's place (LLMC_TRAIN=...) when the
# emitted job script runs on the local test Slurm, to test the script's side
# of the protocol (docs/artifacts.md). It appends how it was started to
# $LLMC_STAND_IN_LOG. `run` on the job's first start behaves like a trainer
# asked to stop: it waits (at most 60 s) for SIGUSR2 — which Slurm's
# --signal=USR2@T or `scancel --signal=USR2` delivers to every rank of the
# step — then exits 3. Once the job has been requeued, `run` succeeds.
# With LLMC_STAND_IN_CRASH_RANK=R, rank R's `run` fails at once (exit 1).
log=${LLMC_STAND_IN_LOG:?}
echo "$1 $2 rank=${SLURM_PROCID:-?} restart=${SLURM_RESTART_COUNT:-0} master=${MASTER_ADDR:-}:${MASTER_PORT:-}" >>"$log"
if [[ $1 == run && ${SLURM_PROCID:-} == "${LLMC_STAND_IN_CRASH_RANK:-none}" ]]; then exit 1; fi
if [[ $1 == run && ${SLURM_RESTART_COUNT:-0} == 0 ]]; then
    trap 'echo "usr2 rank=${SLURM_PROCID:-?}" >>"$log"; exit 3' USR2
    echo "waiting rank=${SLURM_PROCID:-?}" >>"$log"
    for ((i = 0; i < 600; i++)); do sleep 0.1; done
    exit 1
fi
exit 0
