#!/bin/bash
# Run each named test suite (make target test-NAME), sum their closing
# "N passed, N failed" lines, and close with the total. A suite that exits
# non-zero without reporting a failure, or prints no such line, counts one failure.
set -u
total_pass=0 total_fail=0
for s in "$@"; do
    echo "=== suite $s"
    t0=$SECONDS
    log=$(mktemp)
    make -s --no-print-directory "test-$s" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^([A-Za-z_-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    rm -f "$log"
    echo "--- suite $s: $((SECONDS - t0)) s"
    if [[ -z "$line" ]]; then
        echo "suite $s: no result line (exit $rc)"
        total_fail=$((total_fail + 1)); continue
    fi
    p=$(sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
    f=$(sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\3/' <<<"$line")
    if [[ $rc -ne 0 && $f -eq 0 ]]; then
        echo "suite $s: exit $rc"
        f=1
    fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
done
echo "$total_pass passed, $total_fail failed"
[[ $total_fail -eq 0 ]]
