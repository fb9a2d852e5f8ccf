#!/bin/bash
# tests/estimator/calib/record_cpu.sh — record the CPU trainer's runs that the
# estimator suite calibrates on (docs/estimator.md, "Site profiles"): the tiny
# example at three micro batches (BATCHES, default "8 16 32") on one CPU
# (cpus = 1 in the plan, the trainer pinned with taskset to CPU $CPU, default 0),
# each compiled into WORK/bB and prepared, then trained in ROUNDS rounds of
# STEPS optimizer steps (--stop-after; each round resumes from the last
# checkpoint), the shapes taking turns so that a busy machine slows them alike.
# Copies each compiled plan.json and the run's metrics.jsonl to
# DEST/cpu_bB/ (DEST default tests/estimator/calib; run dir = the compiled dir's
# runs/tiny_sft). calibrate_live_test.sh runs it with DEST in its own temporary
# directory for the live prediction check.
# Usage: tests/estimator/calib/record_cpu.sh [WORK_DIR]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../../.."
LLMC=${LLMC:-build/llmc}
TRAIN=${LLMC_TRAIN:-build/llmc-train}
WORK=${1:-$(mktemp -d /tmp/llmc-calib.XXXXXX)}
STEPS=${STEPS:-30}
ROUNDS=${ROUNDS:-5}
CPU=${CPU:-0}
BATCHES=${BATCHES:-"8 16 32"}
DEST=${DEST:-tests/estimator/calib}
TINY=$PWD/examples/tiny
for b in $BATCHES; do
    d=$WORK/b$b
    rm -rf "$d"; mkdir -p "$d"
    sed -e "s|batch            = 8 per gpu|batch            = $b per gpu|" -e 's|cpus      = 2|cpus      = 1|' \
        -e "s|\"tokenizer\"|\"$TINY/tokenizer\"|" -e "s|\"data/arith.json\"|\"$TINY/data/arith.json\"|" \
        -e '/^  output /d' -e 's|checkpoint_every = 500 steps|checkpoint_every = 10000 steps|' \
        "$TINY/tiny.llm" >"$d/tiny_b$b.llm"
    grep -q "batch            = $b per gpu" "$d/tiny_b$b.llm"
    grep -q "cpus      = 1" "$d/tiny_b$b.llm"
    "$LLMC" "$d/tiny_b$b.llm" -o "$d/out" >/dev/null
    "$TRAIN" prepare "$d/out/plan.json" >"$d/prepare.log" 2>&1
done
for ((r = 1; r <= ROUNDS; r++)); do
    for b in $BATCHES; do
        d=$WORK/b$b
        rc=0; taskset -c "$CPU" "$TRAIN" run "$d/out/plan.json" --stop-after $((r * STEPS)) >>"$d/run.log" 2>&1 || rc=$?
        [[ $rc == 0 || $rc == 3 ]] || { echo "record_cpu: run b$b failed ($rc)" >&2; tail "$d/run.log" >&2; exit 1; }
    done
done
for b in $BATCHES; do
    d=$WORK/b$b
    dst=$DEST/cpu_b$b
    rm -rf "$dst"; mkdir -p "$dst/runs/tiny_sft"
    cp "$d/out/plan.json" "$dst/plan.json"
    cp "$d/out/runs/tiny_sft/metrics.jsonl" "$dst/runs/tiny_sft/metrics.jsonl"
    echo "b$b: $(wc -l <"$dst/runs/tiny_sft/metrics.jsonl") steps -> $dst"
done
