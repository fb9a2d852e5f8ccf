# tests/estimator/calib/lib.sh — sourced by calibrate_test.sh and calibrate_live_test.sh
# (PY set): the prediction error of `llmc calibrate --check` and the 15% bar.
# pred_err OUTPUT: the "with the profile (E%)" error of calibrate --check's output
pred_err() { sed -n 's/.*check .*with the profile (\([-+0-9.]*\)%).*/\1/p' <<<"$1"; }
# within15 E: |E| <= 15 (the issue's bar for a calibrated estimate, CALIB_DRIFT_PERCENT)
within15() { [[ -n $1 ]] && $PY -c "import sys; sys.exit(0 if abs($1) <= 15 else 1)"; }
