# tests/lib.sh — what the suites' scripts share; source it: . "$ROOT/tests/lib.sh".
# The tallies and the closing line tests/run-suites.sh sums:
#   ok NAME           a check passed: "ok   NAME"
#   bad NAME [LOG...] a check failed: "FAIL NAME", then each LOG under "--- LOG":
#                     its last BAD_TAIL lines (20 unless set; BAD_TAIL=all: the whole file)
#   summary [LABEL]   the closing line, "[LABEL: ]N passed, N failed"
#   finish [LABEL]    summary, then exit: 0 when nothing failed, else 1
#                     (FINISH_SECONDS=1: the script's seconds on the line before)
# A script that prints its checks otherwise (quietly, or with its own prefix)
# redefines ok/bad after sourcing and keeps the tallies pass and fail.
# The training prelude of the runtime's tests:
#   train_prelude NAME  T, a scratch directory /tmp/NAME.XXXXXX removed at exit with
#                       the processes listed in PIDS (killed), and no rank or Slurm
#                       job environment inherited from the caller
#   private_copy VAR... each binary the variable VAR names copied into $T, and VAR
#                       pointed at the copy (other builds in the shared tree may
#                       relink the originals meanwhile)
#   free_port [AFTER]   sets PORT to a TCP port nobody listens on, the first after
#                       AFTER (else from the script's pid), in 15000-19999
# Ports on this host, kept apart so that suites side by side never meet: the local
# Slurm clusters' daemons 10000-14999 and their jobs' rendezvous 20000-39999 (the
# emitted script's 20000 + job id % 20000; tests/slurm/cluster.sh gives each running
# cluster its own job ids), the tests' own rendezvous 15000-19999 (free_port), all
# below the kernel's ephemeral ports (32768 up would be taken by outgoing connections).
pass=0 fail=0
BAD_TAIL=${BAD_TAIL:-20}

ok()  { echo "ok   $1"; pass=$((pass + 1)); }

bad()
{
    echo "FAIL $1"; shift
    local f
    for f in "$@"; do
        echo "--- $f"
        if [[ $BAD_TAIL == all ]]; then cat "$f"; else tail -n "$BAD_TAIL" "$f"; fi
    done
    fail=$((fail + 1))
}

summary() { echo "${1:+$1: }$pass passed, $fail failed"; }

finish()
{
    [[ ${FINISH_SECONDS:-0} == 1 ]] && echo "($SECONDS s)"
    summary "$@"
    [[ $fail -eq 0 ]]
    exit
}

train_prelude()
{
    T=$(mktemp -d "/tmp/$1.XXXXXX")
    PIDS=()
    trap lib_cleanup EXIT
    unset OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_JOB_ID SLURM_JOBID
}

# The exit trap of train_prelude: the processes a test started, then its scratch.
lib_cleanup()
{
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}

private_copy()
{
    local v
    for v in "$@"; do
        cp "${!v}" "$T/$(basename "${!v}")" || return 1
        printf -v "$v" '%s' "$T/$(basename "${!v}")"
    done
}

free_port()
{
    local p=$(( ${1:-$(( 15000 + $$ % 5000 - 1 ))} + 1 )) i
    for ((i = 0; i < 5000; i++, p++)); do
        ((p > 19999)) && p=15000
        ss -Htan "sport = :$p" 2>/dev/null | grep -q . || { PORT=$p; return 0; }
    done
    echo "free_port: no free port in 15000-19999" >&2
    return 1
}
