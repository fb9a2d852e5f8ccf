#!/bin/bash
# tests/e2e/llmc-train-local.sh — LLMC_TRAIN for jobs on the one-host test cluster
# (tests/slurm/cluster.sh): there the node names (n1, n2) do not resolve, so the
# emitted script's MASTER_ADDR=<first node name> cannot be connected to. This
# replaces MASTER_ADDR by the node's NodeAddr from Slurm (what Slurm itself uses to
# reach the node) when, and only when, the name does not resolve, then execs the
# real trainer ($LLMC_TRAIN_BIN) in its place (same pid, so signals reach it).
if [[ -n "${MASTER_ADDR:-}" ]] && ! getent hosts "$MASTER_ADDR" >/dev/null; then
    addr=$(scontrol show node "$MASTER_ADDR" -o 2>/dev/null | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')
    [[ -n "$addr" ]] && export MASTER_ADDR=$addr
fi
exec "${LLMC_TRAIN_BIN:?set LLMC_TRAIN_BIN to the llmc-train binary}" "$@"
