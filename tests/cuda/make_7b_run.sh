#!/bin/bash
# Prepare .cuda-run/q7b/ for tests/cuda/device.sh's `run7b` section, on this (CPU)
# machine: a Qwen2.5-7B-shaped plan with backend = llmc and offload = optimizer on
# one H200 (examples/qwen7b_offload.llm with its paths pointed here), its text
# data (the repository's docs, repeated: enough rows for a few 262,144-token steps),
# compiled and tokenized into shards with the tiny example's tokenizer.
# Needs build/llmc and build/llmc-train.
set -euo pipefail
cd "$(dirname "$0")/../.."
d=.cuda-run/q7b
rm -rf $d
mkdir -p $d/data
cp -r examples/tiny/tokenizer $d/tokenizer
python3 - "$d/data/text.jsonl" <<'PY'
import glob, json, sys
docs = [open(p).read() for p in sorted(glob.glob("docs/*.md")) + ["README.md"]]
with open(sys.argv[1], "w") as f:
    for rep in range(6):
        for t in docs:
            for part in t.split("\n## "):
                if len(part) > 200: f.write(json.dumps({"text": part}) + "\n")
PY
sed -e 's|output     = "/runs/qwen7b_offload"|output     = "run"|' \
    -e 's|file   = "/data/web_text.jsonl"|file   = "data/text.jsonl"|' \
    -e 's|path           = "/models/Qwen2.5-7B"|init           = scratch\n  tokenizer      = "tokenizer"|' \
    examples/qwen7b_offload.llm > $d/plan.llm
build/llmc $d/plan.llm -o $d/out > /dev/null
build/llmc-train prepare $d/out/plan.json
