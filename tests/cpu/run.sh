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
py=${PYTHON:-/usr/bin/python3}   # Debian python3-torch; PYTHON= another with torch + numpy
# make_fixtures.py is deterministic here (two runs, same bytes) and reproduces the
# committed fixtures to float64 accuracy (same_fixtures.py says why not to the byte)
scratch=$(mktemp -d /tmp/cpu-fixtures.XXXXXX)
mkdir "$scratch/a" "$scratch/b"
if "$py" "$here/make_fixtures.py" "$scratch/a" >/dev/null 2>&1 &&
   "$py" "$here/make_fixtures.py" "$scratch/b" >/dev/null 2>&1 &&
   "$py" "$here/make_lora_fixtures.py" "$scratch/a" >/dev/null 2>&1 &&
   "$py" "$here/make_lora_fixtures.py" "$scratch/b" >/dev/null 2>&1 && diff -r "$scratch/a" "$scratch/b" >/dev/null
then echo "ok   make_fixtures.py and make_lora_fixtures.py write the same bytes twice"; pass=$((pass + 1))
else echo "FAIL make_fixtures.py / make_lora_fixtures.py is not deterministic on this machine"; fail=$((fail + 1)); fi
"$py" "$here/same_fixtures.py" "$scratch/a" "$here/fixtures" >"$out" 2>&1; rc=$?
cat "$out"; tally fixtures "$out" $rc
rm -rf "$scratch"
scratch=$(mktemp -d /tmp/cpu-model.XXXXXX)
"$BUILD/tests/cpu/test_model" --export-hf "$scratch/a" "$here"/fixtures/*.safetensors >"$out" 2>&1; rc=$?
grep -v '^  \[' "$out"; tally model "$out" $rc
# the export is deterministic: twice on this machine, the same bytes
"$BUILD/tests/cpu/test_model" --export-hf "$scratch/b" "$here"/fixtures/*.safetensors >/dev/null 2>&1
if diff -r "$scratch/a" "$scratch/b" >/dev/null; then echo "ok   HF export: the same bytes twice"; pass=$((pass + 1))
else echo "FAIL HF export differs between two runs"; fail=$((fail + 1)); fi
# ... and matches the committed export (weights to the byte, logits within tolerance)
"$py" "$here/same_export.py" "$scratch/a" "$here/fixtures/hf" >"$out" 2>&1; rc=$?
cat "$out"; tally export "$out" $rc
# the fresh export loads in the hand-written PyTorch model with our logits
"$py" "$here/check_hf_load.py" --local "$scratch/a" >"$out" 2>&1; rc=$?
cat "$out"; tally hf-load "$out" $rc
rm -rf "$scratch"
# the numerics under every OpenBLAS kernel set this CPU can run (their summation
# orders differ; the tolerances above must hold for all of them)
flags=$(grep -m1 '^flags' /proc/cpuinfo)
for core in Prescott Sandybridge Haswell Zen SkylakeX; do
    case $core in
        Sandybridge) need=avx ;; Haswell|Zen) need="avx2 fma" ;; SkylakeX) need="avx512f avx512bw avx512vl avx512dq" ;; *) need=pni ;;   # SSE3
    esac
    missing=; for f in $need; do [[ " $flags " == *" $f "* ]] || missing+=" $f"; done
    if [[ -n $missing ]]; then echo "note kernels $core: not run, this CPU lacks$missing"; continue; fi
    OPENBLAS_CORETYPE=$core "$BUILD/tests/cpu/test_model" "$here"/fixtures/*.safetensors >"$out" 2>&1; rc=$?
    sed -i "s/^model:/model [$core]:/" "$out"
    grep -v '^  \[' "$out"; tally "model-$core" "$out" $rc
done
scratch=$(mktemp -d /tmp/cpu-formats.XXXXXX)
"$BUILD/tests/cpu/test_formats" "$scratch" "$here/tiny_plan.json" "$here/../frontend/files" >"$out" 2>&1; rc=$?
rm -rf "$scratch"
cat "$out"; tally formats "$out" $rc
"$BUILD/tests/cpu/test_states" >"$out" 2>&1; rc=$?
cat "$out"; tally states "$out" $rc
bash "$here/states_test.sh" "$BUILD/llmc-train" "$BUILD/tests/cpu/make_shards" >"$out" 2>&1; rc=$?
cat "$out"; tally states-run "$out" $rc
bash "$here/states_converge.sh" "$BUILD/llmc" "$BUILD/llmc-train" >"$out" 2>&1; rc=$?
cat "$out"; tally states-converge "$out" $rc
bash "$here/train_test.sh" "$BUILD/llmc-train" "$BUILD/tests/cpu/make_shards" >"$out" 2>&1; rc=$?
cat "$out"; tally train "$out" $rc
bash "$here/finetune_test.sh" "$BUILD/llmc-train" "$BUILD/tests/cpu/make_shards" >"$out" 2>&1; rc=$?
grep -v '^\[rank' "$out"; tally finetune "$out" $rc
bash "$here/loop_test.sh" "$BUILD/llmc-train" "$BUILD/tests/cpu/loop_test" "$BUILD/tests/cpu/make_shards" >"$out" 2>&1; rc=$?
cat "$out"; tally loop "$out" $rc
bash "$here/tiny_example_test.sh" "$BUILD/llmc" "$BUILD/llmc-train" >"$out" 2>&1; rc=$?
cat "$out"; tally tiny "$out" $rc
rm -f "$out"
echo "cpu: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
