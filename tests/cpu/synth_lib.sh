# tests/cpu/synth_lib.sh — sourced by the CPU trainer's run tests on synthetic
# shards (train_test.sh, states_test.sh), with NAME and BIN (llmc-train) set:
# tests/lib.sh's training prelude (T, PIDS, no rank environment), a private copy
# of llmc-train in BIN, the ok/bad tallies (logs' last 30 lines), and
# mkrun DIR [python expression editing plan dict p]: a run directory holding the
# shards of $T/shards and tests/cpu/tiny_plan.json edited.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../lib.sh"   # ok, bad, finish, train_prelude, private_copy
train_prelude "cpu-$NAME"
private_copy BIN
export LLMC_THREADS=2
BAD_TAIL=30
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
