#!/bin/bash
# tests/emitters/golden.sh record|check LLMC — golden/: the full output of every
# plan with a job block in examples/ and tests/emitters/plans/, as golden/NAME/.
#   record  recompile each plan into golden/NAME (make golden)
#   check   compile each into a scratch directory at the same depth as golden/NAME
#           (relative paths in the artifacts depend on where they are) and
#           diff -r against golden/NAME; then compile again from a different
#           working directory (a directory whose examples/ and tests/ link to
#           the repository's) and demand identical bytes; and again from / with
#           absolute names and from the plan's own directory (relative paths
#           in a plan are relative to its file): identical bytes.
# Run from the repository root. Closes with "N passed, N failed".
set -u
mode=$1
LLMC=$(realpath "$2")
ROOT=$(pwd)
. "$ROOT/tests/lib.sh"   # ok, bad, finish

plans=()
for p in examples/*.llm examples/*/*.llm tests/emitters/plans/*.llm; do
    [[ -f $p ]] && grep -qE '^job ' "$p" && plans+=("$p")
done

# sweeps (llmc PLAN -o DIR --sweep ...; issue 34): golden/NAME/POINT/ per point
SWEEP_NAME=(sweep_qwen7b_batch)
SWEEP_PLAN=(examples/qwen7b_lora.llm)
SWEEP_ARG=("train.batch=1 per gpu,2 per gpu,4 per gpu")

if [[ $mode == record ]]; then
    mkdir -p golden
    for i in "${!SWEEP_NAME[@]}"; do
        name=${SWEEP_NAME[$i]}
        rm -rf "golden/$name"
        if "$LLMC" -q "${SWEEP_PLAN[$i]}" -o "golden/$name" --sweep "${SWEEP_ARG[$i]}" >/dev/null; then echo "recorded golden/$name"
        else echo "FAILED --sweep ${SWEEP_ARG[$i]} ${SWEEP_PLAN[$i]}"; exit 1; fi
    done
    for p in "${plans[@]}"; do
        name=$(basename "$p" .llm)
        if "$LLMC" "$p" -o "golden/$name" 2>/dev/null; then echo "recorded golden/$name"; else echo "FAILED $p"; exit 1; fi
    done
    exit 0
fi

[[ $mode == check ]] || { echo "usage: golden.sh record|check LLMC" >&2; exit 2; }
mkdir -p build
SCRATCH=$(mktemp -d /tmp/golden-check.XXXXXX)
OTHER=$(mktemp -d /tmp/golden-cwd.XXXXXX)
OUT=
trap 'rm -rf "$SCRATCH" "$OTHER" ${OUT:+"$OUT"}' EXIT
mkdir -p "$OTHER/build"
ln -s "$ROOT/examples" "$OTHER/examples"
ln -s "$ROOT/tests" "$OTHER/tests"
for p in "${plans[@]}"; do
    name=$(basename "$p" .llm)
    if [[ ! -d golden/$name ]]; then
        bad "golden/$name missing (make golden, review, commit)"
        continue
    fi
    # build/golden-NAME.PID sits two levels below the root, like golden/NAME
    out="build/golden-$name.$$"
    OUT=$out
    if ! "$LLMC" "$p" -o "$out" >"$SCRATCH/$name.log" 2>&1; then
        bad "llmc $p"
        cat "$SCRATCH/$name.log"
        continue
    fi
    if diff -r "golden/$name" "$out" >"$SCRATCH/$name.diff"; then
        ok "golden/$name matches"
    else
        bad "golden/$name differs (make golden to re-record if intended)"
        head -n 40 "$SCRATCH/$name.diff"
    fi
    if (cd "$OTHER" && "$LLMC" "$p" -o "build/$name") >"$SCRATCH/$name.log2" 2>&1 &&
        diff -r "$out" "$OTHER/build/$name" >/dev/null; then
        ok "$name: same bytes from another working directory"
    else
        bad "$name: output differs when compiled from another working directory"
        cat "$SCRATCH/$name.log2"
        diff -r "$out" "$OTHER/build/$name" | head -n 20
    fi
    # relative paths in a plan are relative to its file (issue 14 item 6): the
    # same bytes when llmc runs in / with absolute names, and in the plan's
    # own directory (the output at the same place, so the same relative paths)
    rm -rf "$ROOT/$out.a" "$ROOT/$out.b"
    if (cd / && "$LLMC" "$ROOT/$p" -o "$ROOT/$out.a") >"$SCRATCH/$name.log3" 2>&1 &&
        (cd "$(dirname "$p")" && "$LLMC" "$(basename "$p")" -o "$ROOT/$out.b") >>"$SCRATCH/$name.log3" 2>&1 &&
        diff -r "$out" "$ROOT/$out.a" >"$SCRATCH/$name.diff3" && diff -r "$out" "$ROOT/$out.b" >>"$SCRATCH/$name.diff3"; then
        ok "$name: same bytes compiled from / and from the plan's directory"
    else
        bad "$name: output depends on the working directory (/ or the plan's directory)"
        cat "$SCRATCH/$name.log3"; head -n 20 "$SCRATCH/$name.diff3"
    fi
    rm -rf "$out" "$ROOT/$out.a" "$ROOT/$out.b"
done
for i in "${!SWEEP_NAME[@]}"; do
    name=${SWEEP_NAME[$i]}
    out="build/golden-$name.$$"
    OUT=$out
    if ! "$LLMC" -q "${SWEEP_PLAN[$i]}" -o "$out" --sweep "${SWEEP_ARG[$i]}" >"$SCRATCH/$name.log" 2>&1; then
        bad "llmc ${SWEEP_PLAN[$i]} --sweep ${SWEEP_ARG[$i]}"; cat "$SCRATCH/$name.log"
    elif diff -r "golden/$name" "$out" >"$SCRATCH/$name.diff"; then
        ok "golden/$name (--sweep ${SWEEP_ARG[$i]}) matches"
    else
        bad "golden/$name differs (make golden to re-record if intended)"
        head -n 40 "$SCRATCH/$name.diff"
    fi
    rm -rf "$out"
done
finish
