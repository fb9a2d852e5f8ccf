#!/bin/bash
# tests/estimator/calib/record_gpu.sh — record the CUDA trainer's runs that the
# estimator suite calibrates on (docs/estimator.md, "Site profiles"): the tiny
# example's data and tokenizer with a Qwen2.5-0.5B-shaped model (24 layers of
# 896, ffn 4864; the tiny 512-token vocabulary) in bf16 on one H200, at three
# micro batches (BATCHES, default "32 64 128" x 128 tokens), STEPS optimizer
# steps each (max_steps; default 60).
#   record_gpu.sh prep WORK    on any machine with build/llmc and build/llmc-train:
#                              compile WORK/bB/out/plan.json and prepare its shards
#   record_gpu.sh run WORK     on the GPU machine (build/llmc-train-cuda): train
#                              each in turn, then copy each plan.json, metrics.jsonl
#                              and gpu_metrics.jsonl to DEST/gpu_bB/ (DEST default
#                              tests/estimator/calib; the run dir is runs/tiny_sft)
# From the repository root. plan.json names its shards and run directory
# relative to itself, so WORK travels: the device tool carries .cuda-run/, hence
# WORK=.cuda-run/calib.
set -euo pipefail
cd "$(dirname "$0")/../../.."
phase=${1:?usage: record_gpu.sh prep|run WORK}
WORK=${2:?usage: record_gpu.sh prep|run WORK}
BATCHES=${BATCHES:-"32 64 128"}
STEPS=${STEPS:-60}
DEST=${DEST:-tests/estimator/calib}
TINY=$PWD/examples/tiny
if [[ $phase == prep ]]; then
    mkdir -p "$WORK"
    WORK=$(cd "$WORK" && pwd)
    for b in $BATCHES; do
        d=$WORK/b$b
        rm -rf "$d"; mkdir -p "$d"
        sed -e "s|batch            = 8 per gpu|batch            = $b per gpu|" \
            -e 's|  gpu       = none .*|  gpu       = H200_141GB x 1|' -e 's|cpus      = 2|cpus      = 16|' \
            -e 's|memory    = 4 GiB|memory    = 128 GiB|' -e 's|layers         = 2$|layers         = 24|' \
            -e 's|hidden         = 64$|hidden         = 896|' -e 's|heads          = 4$|heads          = 14|' \
            -e 's|ffn            = 176$|ffn            = 4864|' -e 's|precision        = fp32|precision        = bf16|' \
            -e 's|attention        = eager|attention        = flash|' \
            -e "s|epochs           = 16|max_steps        = $STEPS|" \
            -e "s|\"tokenizer\"|\"$TINY/tokenizer\"|" -e "s|\"data/arith.json\"|\"$TINY/data/arith.json\"|" \
            -e '/^  output /d' -e 's|checkpoint_every = 500 steps|checkpoint_every = 100000 steps|' \
            "$TINY/tiny.llm" >"$d/gpu_b$b.llm"
        for want in "batch            = $b per gpu" "H200_141GB x 1" "layers         = 24" "hidden         = 896" \
                    "heads          = 14" "ffn            = 4864" "precision        = bf16" "max_steps        = $STEPS"; do
            grep -q "$want" "$d/gpu_b$b.llm" || { echo "record_gpu: '$want' not set in gpu_b$b.llm" >&2; exit 1; }
        done
        build/llmc "$d/gpu_b$b.llm" -o "$d/out" >/dev/null 2>&1
        build/llmc-train prepare "$d/out/plan.json" >"$d/prepare.log" 2>&1
        echo "b$b: compiled and prepared in $d/out"
    done
    exit 0
fi
[[ $phase == run ]] || { echo "usage: record_gpu.sh prep|run WORK" >&2; exit 2; }
WORK=$(cd "$WORK" && pwd)
for b in $BATCHES; do
    d=$WORK/b$b
    rm -rf "$d/out/runs"
    rc=0; build/llmc-train-cuda run "$d/out/plan.json" >"$d/run.log" 2>&1 || rc=$?
    [[ $rc == 0 ]] || { echo "record_gpu: run b$b failed ($rc)" >&2; tail "$d/run.log" >&2; exit 1; }
done
for b in $BATCHES; do
    d=$WORK/b$b
    dst=$DEST/gpu_b$b
    rm -rf "$dst"; mkdir -p "$dst/runs/tiny_sft"
    cp "$d/out/plan.json" "$dst/plan.json"
    cp "$d/out/runs/tiny_sft/metrics.jsonl" "$d/out/runs/tiny_sft/gpu_metrics.jsonl" "$dst/runs/tiny_sft/"
    echo "b$b: $(wc -l <"$dst/runs/tiny_sft/metrics.jsonl") steps -> $dst"
done
