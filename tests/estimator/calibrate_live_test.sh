#!/bin/bash
# tests/estimator/calibrate_live_test.sh LLMC LLMC_TRAIN — the prediction check of
# `llmc calibrate` on runs made here (docs/estimator.md, "Site profiles"): the CPU
# trainer runs the tiny plan at micro batches 8, 16 and 32, and the profile fitted on
# 8 and 32 must predict 16's measured step time within 15%. Its own suite
# (estimator-live), which tests/run-suites.sh runs alone once every other suite is
# done (QUIET_SUITES): it times steps by the wall clock. Ends with "N passed, N failed".
set -u
llmc=$1 train=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-python3}
T=$(mktemp -d /tmp/llmc-calib-live.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
. "$here/calib/lib.sh"   # pred_err, within15

# record_cpu.sh: one CPU, the shapes taking turns in 10 rounds of 4 steps so that a
# change of the machine's speed slows them alike; the profile (mfu and a time per step)
# must predict within 15%: the issue's bar for a calibrated estimate, and the drift
# threshold of llmc status (CALIB_DRIFT_PERCENT). Wall-clock times: when this ran in the
# estimator suite, niced beside the other suites, the load they put on the machine fell
# on one shape's rounds more than another's (CI, 2026-12-06: -21.5%, then -19.6% and
# +28.3% before +2.7%; the step at batch 16 measured 173 ms against 69 ms quiet), hence
# its own suite, run alone. Quiet, the errors seen are -12% to +13%, so up to three
# independent recordings are made and one must be within 15%; a broken fit misses on
# every one: uncalibrated, the estimate is +46% to +270% off here.
if [[ -z $train || ! -x $train ]]; then
    bad "the live prediction check needs llmc-train (calibrate_live_test.sh LLMC LLMC_TRAIN)"
else
    live_errs=
    for try in 1 2 3; do
        if ! (LLMC=$(realpath "$llmc") LLMC_TRAIN=$(realpath "$train") STEPS=4 ROUNDS=10 DEST="$T/live$try" \
                bash "$here/calib/record_cpu.sh" "$T/live_work$try") >"$T/live$try.log" 2>&1; then
            live_errs="record_cpu.sh: $(tail -5 "$T/live$try.log")"; break
        fi
        out=$("$llmc" calibrate "$T/live$try/cpu_b8/runs/tiny_sft" "$T/live$try/cpu_b32/runs/tiny_sft" \
              --check "$T/live$try/cpu_b16/runs/tiny_sft" 2>&1 >/dev/null)
        err=$(pred_err "$out")
        echo "  prediction check live $try (this machine, batch 16 from 8 and 32): $(grep '^  check     step' <<<"$out" | sed 's/^ *check *//')"
        if within15 "$err"; then live_errs=; break; fi
        live_errs+="${live_errs:+; }try $try: ${err:-no figure}% ($out)"
    done
    [[ -z $live_errs ]] && ok "live prediction within 15% (batch 16 from 8 and 32)" || bad "live prediction within 15% in one of three recordings: $live_errs"
fi

finish
