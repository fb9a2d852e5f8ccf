#!/bin/bash
# Run each named test suite (make target test-NAME), sum their closing
# "N passed, N failed" lines, and close with the total. A suite that exits
# non-zero without reporting a failure, or prints no such line, counts one failure.
#
# The suites named in BACKGROUND_SUITES start first, in the background, and are
# reported at the end: the wall time is the foreground's plus what is left of
# theirs. Each word of BACKGROUND_SUITES is one lane, its suites joined by "+"
# and run one after the other; the lanes run beside each other and beside the
# foreground; a lane written "nice:A+B" runs under nice, taking the CPU the
# others leave. A suite runs in a lane only when it shares nothing with what
# runs beside it: its own Slurm cluster (tests/slurm/cluster.sh: state
# directory, ports, spool), scratch directories and ports, and no build
# output written by another (`make test` builds the suites' binaries ahead).
# The default lanes: two of suites that mostly wait, on stand-ins that sleep
# (time limits, Slurm's 30 s ticks, requeues, timeouts), e2e-lf-timelimit (six
# minutes) first and then e2e-timelimit and status, whose trainers run until
# Slurm stops them, once the foreground's busiest suites are done; and one of
# checks that only compute and have no time limit to meet, niced. The suites
# named in QUIET_SUITES (default: estimator-live, a check timed by the wall clock)
# run last, alone, once the foreground and every lane are done.
set -u
total_pass=0 total_fail=0
background=${BACKGROUND_SUITES-e2e-lf-timelimit+e2e-timelimit+status \
submit+slurm+e2e-dist+e2e-dist-san+e2e-prom+e2e-lf-chain+e2e-lf-merge \
nice:estimator+boundaries+limits+golden+vocab}
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

requested=" $* " in_bg=" " bg=()
for lane in $background; do
    nice=
    [[ $lane == nice:* ]] && { nice=nice; lane=${lane#nice:}; }
    IFS=+ read -ra lane_suites <<<"$lane"
    run=()
    for s in "${lane_suites[@]}"; do
        [[ $requested == *" $s "* && $in_bg != *" $s "* ]] || continue
        run+=("$s"); in_bg+="$s "
        echo "=== suite $s (in the background; reported at the end)"
    done
    ((${#run[@]})) || continue
    bg+=("${run[@]}")
    ( for s in "${run[@]}"; do
          t0=$SECONDS
          $nice make -s --no-print-directory "test-$s" >"$bg_dir/$s" 2>&1
          echo "$? $((SECONDS - t0))" >"$bg_dir/$s.rc"
      done ) &
done
# The foreground's order: that of the arguments, the suites named in LAST_SUITES
# (default: cpu, whose trainers' BLAS threads slow down most beside the lanes)
# moved to the end, when the lanes have mostly finished.
last=" ${LAST_SUITES-cpu} " quiet=" ${QUIET_SUITES-estimator-live} " fg=() fg_last=() fg_quiet=()
for s in "$@"; do
    [[ $in_bg == *" $s "* ]] && continue
    if [[ $quiet == *" $s "* ]]; then fg_quiet+=("$s")
    elif [[ $last == *" $s "* ]]; then fg_last+=("$s")
    else fg+=("$s"); fi
done
# run_fg SUITE: in the foreground, its output shown as it comes
run_fg() {
    local s=$1 t0=$SECONDS log rc
    echo "=== suite $s"
    log=$(mktemp)
    make -s --no-print-directory "test-$s" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    count "$s" "$log" "$rc" $((SECONDS - t0))
    rm -f "$log"
}
for s in ${fg[@]+"${fg[@]}"} ${fg_last[@]+"${fg_last[@]}"}; do run_fg "$s"; done
wait
for s in ${fg_quiet[@]+"${fg_quiet[@]}"}; do run_fg "$s"; done
for s in "${bg[@]}"; do
    echo "=== suite $s (ran in the background)"
    cat "$bg_dir/$s"
    read -r rc secs <"$bg_dir/$s.rc" || { rc=1; secs=?; }
    count "$s" "$bg_dir/$s" "$rc" "$secs"
done
echo "$total_pass passed, $total_fail failed"
[[ $total_fail -eq 0 ]]
