# tests/cpu/synth_lib.sh — sourced by the CPU trainer's run tests on synthetic
# shards (train_test.sh, states_test.sh), with NAME and BIN (llmc-train) set:
# a scratch directory T (removed at exit, with the processes listed in PIDS), a
# private copy of llmc-train in BIN (other builds in the shared tree may relink
# build/llmc-train meanwhile), no rank environment, the ok/bad tallies, and
# mkrun DIR [python expression editing plan dict p]: a run directory holding the
# shards of $T/shards and tests/cpu/tiny_plan.json edited.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d "/tmp/cpu-$NAME.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
cp "$BIN" "$T/llmc-train" && BIN="$T/llmc-train"
unset OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_JOB_ID SLURM_JOBID
export LLMC_THREADS=2
pass=0 fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; for f in "$@"; do echo "--- $f"; tail -n 30 "$f"; done; fail=$((fail + 1)); }
PY=python3

mkrun() {
    mkdir -p "$1/shards"
    cp -r "$T/shards/." "$1/shards/"
    $PY - "$HERE/tiny_plan.json" "$1/plan.json" "${2:-}" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
if sys.argv[3]:
    exec(sys.argv[3])
json.dump(p, open(sys.argv[2], "w"), indent=1)
PYEOF
}
