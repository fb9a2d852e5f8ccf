#!/bin/bash
# stand_in_trainer.sh — takes llmc-train's place (LLMC_TRAIN=...) when the
# emitted job script runs on the local test Slurm, to test the script's side
# of the protocol (docs/artifacts.md): it appends how it was started to
# $LLMC_STAND_IN_LOG and, like a trainer that got USR2, exits 3 from `run` on
# the job's first start, then 0 once the job has been requeued.
echo "$1 $2 rank=${SLURM_PROCID:-?} restart=${SLURM_RESTART_COUNT:-0} master=${MASTER_ADDR:-}:${MASTER_PORT:-}" \
    >>"${LLMC_STAND_IN_LOG:?}"
if [[ $1 == run && ${SLURM_RESTART_COUNT:-0} == 0 ]]; then exit 3; fi
exit 0
