#!/bin/bash
# tests/e2e/prom_test.sh PROM_TEST — runtime/train/prom.c's unit checks (PROM_TEST DIR),
# then the file it leaves (every metric, escaped label values, NaN/+Inf) through
# `promtool check metrics`, Prometheus' own linter (Debian: prometheus).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
bin=$1
d=$(mktemp -d /tmp/e2e-prom.XXXXXX)
trap 'rm -rf "$d"' EXIT
out=$("$bin" "$d"); rc=$?
echo "$out" | grep -v '^[0-9]* passed, [0-9]* failed$'
pass=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p' <<<"$out")
fail=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p' <<<"$out")
[[ -z $pass ]] && { pass=0; fail=1; echo "FAIL prom_test printed no result (exit $rc)"; }
if ! command -v promtool >/dev/null; then
    echo "FAIL promtool not found (apt-get install prometheus; .ci/deps.sh installs it)"; fail=$((fail + 1))
elif lint=$(promtool check metrics <"$d/llmc_train.prom" 2>&1); then
    ok "promtool check metrics: no problem found"
else
    echo "FAIL promtool check metrics:"; echo "$lint" | sed 's/^/     /'; fail=$((fail + 1))
fi
finish
