#!/bin/bash
# tests/cpu/run.sh BUILD — run the CPU trainer's checks; close with "N passed, N failed".
set -u
BUILD=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
tally() {   # tally NAME OUTPUT-FILE EXIT-STATUS
    local line p f
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$2" | tail -n 1)
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+'); f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
    if [[ -z "$line" ]]; then p=0 f=1; echo "FAIL $1: no result line (exit $3)"; fi
    if [[ $3 -ne 0 && ${f:-0} -eq 0 ]]; then f=1; echo "FAIL $1: exit $3"; fi
    pass=$((pass + p)); fail=$((fail + f))
}
out=$(mktemp)
# the committed PyTorch fixtures are what make_fixtures.py writes
scratch=$(mktemp -d /tmp/cpu-fixtures.XXXXXX)
same_fixtures() {
    local f
    for f in "$here"/fixtures/*.safetensors; do cmp -s "$f" "$scratch/$(basename "$f")" || return 1; done
}
if /usr/bin/python3 "$here/make_fixtures.py" "$scratch" >/dev/null 2>&1 && same_fixtures
then echo "ok   make_fixtures.py reproduces the committed fixtures byte for byte"; pass=$((pass + 1))
else echo "FAIL make_fixtures.py output differs from tests/cpu/fixtures"; fail=$((fail + 1)); fi
rm -rf "$scratch"
scratch=$(mktemp -d /tmp/cpu-model.XXXXXX)
"$BUILD/tests/cpu/test_model" --export-hf "$scratch" "$here"/fixtures/*.safetensors >"$out" 2>&1; rc=$?
grep -v '^  \[' "$out"; tally model "$out" $rc
# the export is deterministic: the committed HF fixtures are exactly what we write
if diff -r "$scratch" "$here/fixtures/hf" >/dev/null; then echo "ok   HF export bytes equal the committed fixtures"; pass=$((pass + 1))
else echo "FAIL HF export differs from tests/cpu/fixtures/hf"; fail=$((fail + 1)); fi
rm -rf "$scratch"
/usr/bin/python3 "$here/check_hf_load.py" --local "$here/fixtures/hf" >"$out" 2>&1; rc=$?
cat "$out"; tally hf-load "$out" $rc
scratch=$(mktemp -d /tmp/cpu-formats.XXXXXX)
"$BUILD/tests/cpu/test_formats" "$scratch" "$here/tiny_plan.json" >"$out" 2>&1; rc=$?
rm -rf "$scratch"
cat "$out"; tally formats "$out" $rc
bash "$here/train_test.sh" "$BUILD/llmc-train" "$BUILD/tests/cpu/make_shards" >"$out" 2>&1; rc=$?
cat "$out"; tally train "$out" $rc
bash "$here/tiny_example_test.sh" "$BUILD/llmc" "$BUILD/llmc-train" >"$out" 2>&1; rc=$?
cat "$out"; tally tiny "$out" $rc
rm -f "$out"
echo "cpu: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
