# tests/e2e/slurm_lib.sh — the part every local-Slurm test shares; sourced as
#   HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/slurm_lib.sh" NAME
# It sets ROOT (the repository), CLUSTER (tests/slurm/cluster.sh) and T (a
# scratch directory /tmp/NAME.XXXXXX, removed at exit with its cluster stopped),
# and has ok/bad/finish from tests/lib.sh (the closing "N passed, N failed" line), job_field
# JOB FIELD (from scontrol), wait_state JOB SECONDS STATE..., wait_for_line
# FILE PATTERN SECONDS and
# tiny_examples DIR. Slurm needs root: without it the test fails at once.
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$ROOT/tests/slurm/cluster.sh
T=$(mktemp -d "/tmp/$1.XXXXXX")
trap '"$CLUSTER" stop "$T/slurm" >/dev/null 2>&1; rm -rf "$T"' EXIT
. "$ROOT/tests/lib.sh"   # ok, bad, finish
BAD_TAIL=40
. "$ROOT/tests/e2e/tiny_examples.sh"
[[ $(id -u) -eq 0 ]] || { echo "FAIL needs root (Slurm)"; fail=1; finish; }
job_field() { scontrol show job "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -n 1 | cut -d= -f2; }
wait_state() {  # JOB SECONDS STATE... : until the job is in one of the states
    local i s
    for ((i = 0; i < $2 * 2; i++)); do
        s=$(job_field "$1" JobState)
        for want in "${@:3}"; do [[ $s == "$want" ]] && return 0; done
        sleep 0.5
    done
    return 1
}
wait_for_line() {
    local i
    for ((i = 0; i < $3 * 5; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
    return 1
}
