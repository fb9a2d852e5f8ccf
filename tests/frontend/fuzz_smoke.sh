#!/bin/bash
# fuzz_smoke.sh — `make SAN=1 fuzz` builds and runs (issue 28, Why 8): every
# target of FUZZ_TARGETS (the tests/*/test.mk rows, read here so that a new
# target is covered without a second list) built with ASan+UBSan and run for
# FUZZ_TIME seconds from its seed corpus; a target that does not build, or
# whose oracle aborts on a seed or a mutation, fails. From the repository root.
# Prints "N passed, N failed" last.
set -u
TIME=${FUZZ_SMOKE_TIME:-3}
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
targets=$(sed -n 's/^FUZZ_TARGETS *+= *//p' tests/*/test.mk | tr ' ' '\n' | grep . | sort -u)
[[ -n $targets ]] || { echo "FAIL: no FUZZ_TARGETS in tests/*/test.mk"; fail=1; finish; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in $targets; do
    if nice make --no-print-directory -s SAN=1 FUZZ_TIME="$TIME" "$t" >"$log" 2>&1 && grep -q '^Done [0-9]* runs' "$log" &&
       ! grep -q 'ERROR: \(libFuzzer\|AddressSanitizer\)\|runtime error:' "$log"; then
        ok "make SAN=1 $t: $(grep -c '^Done [0-9]* runs' "$log") fuzzer(s) ran ${TIME}s clean"
    else
        fail=$((fail + 1)); echo "FAIL make SAN=1 $t"; grep -m1 -B2 -A12 'ERROR\|error:\|^fuzz_' "$log" | head -30
    fi
done
finish
