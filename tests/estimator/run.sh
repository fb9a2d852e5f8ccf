#!/bin/bash
# Run the estimator's unit checks, then `llmc explain` on every example against
# tests/estimator/expected/NAME.txt (and NAME.json for --format=json).
# Closes with one "N passed, N failed" line. UPDATE=1 re-records the goldens.
set -u
unit=$1 llmc=$2
here=$(dirname "$0")
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)

out=$("$unit" "$here" 2>&1); rc=$?
echo "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
if [[ -n "$line" ]]; then
    pass=$((pass + ${line%% passed*}))
    f=${line#*passed, }; fail=$((fail + ${f%% failed*}))
fi
[[ $rc -ne 0 && -z "$line" ]] && { echo "FAIL unit checks exited $rc"; fail=$((fail + 1)); }

for plan in examples/*.llm examples/*/*.llm tests/estimator/plans/*.llm; do
    [[ -f "$plan" ]] || continue
    name=$(basename "$plan" .llm)
    for fmt in txt json; do
        want=$here/expected/$name.$fmt
        args=(explain "$plan" --color=never)
        [[ $fmt == json ]] && args+=(--format=json)
        got=$("$llmc" "${args[@]}" 2>&1); rc=$?
        got+=$'\n'"exit $rc"
        if [[ ${UPDATE:-0} == 1 ]]; then
            mkdir -p "$here/expected"; printf '%s\n' "$got" >"$want"
        fi
        if [[ -f "$want" ]] && diff -u "$want" <(printf '%s\n' "$got") >/dev/null; then
            pass=$((pass + 1))
        else
            echo "FAIL explain $plan ($fmt):"
            if [[ -f "$want" ]]; then diff -u "$want" <(printf '%s\n' "$got") | head -40
            else echo "  no golden $want (UPDATE=1 records it)"; fi
            fail=$((fail + 1))
        fi
    done
done
# The command line: usage errors exit 2, a missing plan file exits 2.
expect_exit() {
    local want=$1; shift
    "$llmc" "$@" >/dev/null 2>&1; local rc=$?
    if [[ $rc -eq $want ]]; then pass=$((pass + 1))
    else echo "FAIL llmc $*: exit $rc, want $want"; fail=$((fail + 1)); fi
}
expect_exit 2 explain
expect_exit 2 explain --bogus examples/tiny/tiny.llm
expect_exit 2 explain examples/tiny/tiny.llm examples/tiny/tiny.llm
expect_exit 2 explain /nonexistent/plan.llm
expect_exit 0 explain --help
expect_exit 1 explain tests/estimator/plans/qwen32b_b8_no_requeue.llm --format=json

# llmc calibrate and the profile block (tests/estimator/calibrate_test.sh)
out=$(bash "$here/calibrate_test.sh" "$llmc" 2>&1)
echo "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
if [[ -n "$line" ]]; then
    pass=$((pass + ${line%% passed*}))
    f=${line#*passed, }; fail=$((fail + ${f%% failed*}))
else
    echo "FAIL calibrate_test.sh printed no count"; fail=$((fail + 1))
fi

finish
