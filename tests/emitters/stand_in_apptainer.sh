#!/bin/bash
# stand_in_apptainer.sh — takes apptainer's place (LLMC_APPTAINER=...) when a
# job script compiled with `container { runtime = apptainer }` runs on the local
# test Slurm: it checks the command line the script builds (exec [--nv] --bind
# MOUNTS IMAGE CMD...), appends what it was given and the environment the rank
# sees (the plan's env and setup lines) to $LLMC_STAND_IN_LOG, and runs CMD
# on the host.
log=${LLMC_STAND_IN_LOG:?}
[[ ${1:-} == exec ]] || { echo "stand-in apptainer: expected 'exec', got '${1:-}'" >&2; exit 2; }
shift
nv=0
if [[ ${1:-} == --nv ]]; then nv=1; shift; fi
[[ ${1:-} == --bind && $# -ge 4 ]] || { echo "stand-in apptainer: expected --bind MOUNTS IMAGE CMD" >&2; exit 2; }
bind=$2 image=$3
shift 3
echo "container image=$image nv=$nv bind=$bind cmd=${1##*/} rank=${SLURM_PROCID:-?} ifname=${NCCL_SOCKET_IFNAME:-} debug=${NCCL_DEBUG:-} omp=${OMP_NUM_THREADS:-} setup=${LLMC_SITE_SETUP:-} job=${LLMC_SITE_JOB:-}" >>"$log"
exec "$@"
