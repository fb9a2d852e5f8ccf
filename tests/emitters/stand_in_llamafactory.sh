#!/bin/bash
# stand_in_llamafactory.sh — takes llamafactory-cli's place (LLAMAFACTORY_CLI=...)
# when the emitted LLaMA-Factory job script runs on the local test Slurm: it
# appends the launcher environment torchrun would get to $LLMC_STAND_IN_LOG and
# succeeds only if it was asked to `train` a YAML found in its working directory.
echo "$1 $2 node_rank=${NODE_RANK:-} nnodes=${NNODES:-} nproc=${NPROC_PER_NODE:-} force=${FORCE_TORCHRUN:-}" \
    "master=${MASTER_ADDR:-}:${MASTER_PORT:-} host=${SLURMD_NODENAME:-} cwd=$PWD" >>"${LLMC_STAND_IN_LOG:?}"
[[ $1 == train && -f $2 ]]
