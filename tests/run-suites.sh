#!/bin/bash
# Run each named test suite (make target test-NAME), sum their closing
# "N passed, N failed" lines, and close with the total. A suite that exits
# non-zero without reporting a failure, or prints no such line, counts one failure.
#
# The suites named in BACKGROUND_SUITES (default: e2e-lf-timelimit, six minutes
# spent mostly waiting for Slurm's time limits, on its own cluster and ports)
# start first, in the background, and are reported at the end: the wall time is
# the others' plus what is left of theirs.
set -u
total_pass=0 total_fail=0
background=" ${BACKGROUND_SUITES-e2e-lf-timelimit} "
bg_dir=$(mktemp -d)
trap 'rm -rf "$bg_dir"' EXIT

# count NAME LOG RC SECONDS: the suite's time, and its closing line into the totals
count() {
    local s=$1 log=$2 rc=$3 line p f
    echo "--- suite $s: $4 s"
    line=$(grep -E '^([A-Za-z_-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [[ -z "$line" ]]; then
        echo "suite $s: no result line (exit $rc)"
        total_fail=$((total_fail + 1)); return
    fi
    p=$(sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
    f=$(sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\3/' <<<"$line")
    if [[ $rc -ne 0 && $f -eq 0 ]]; then
        echo "suite $s: exit $rc"
        f=1
    fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
}

bg=()
for s in "$@"; do
    [[ $background == *" $s "* ]] || continue
    echo "=== suite $s (in the background; reported at the end)"
    ( t0=$SECONDS
      make -s --no-print-directory "test-$s" >"$bg_dir/$s" 2>&1
      echo "$? $((SECONDS - t0))" >"$bg_dir/$s.rc" ) &
    bg+=("$s")
done
for s in "$@"; do
    [[ $background == *" $s "* ]] && continue
    echo "=== suite $s"
    t0=$SECONDS
    log=$(mktemp)
    make -s --no-print-directory "test-$s" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    count "$s" "$log" "$rc" $((SECONDS - t0))
    rm -f "$log"
done
wait
for s in "${bg[@]}"; do
    echo "=== suite $s (ran in the background)"
    cat "$bg_dir/$s"
    read -r rc secs <"$bg_dir/$s.rc" || { rc=1; secs=?; }
    count "$s" "$bg_dir/$s" "$rc" "$secs"
done
echo "$total_pass passed, $total_fail failed"
[[ $total_fail -eq 0 ]]
