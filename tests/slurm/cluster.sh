#!/bin/bash
# tests/slurm/cluster.sh — a real Slurm cluster on this one host, for tests.
#
#   cluster.sh start STATE_DIR SNIPPET_FILE [GRES_FILE]
#   cluster.sh stop  STATE_DIR
#   cluster.sh env   STATE_DIR        prints: export SLURM_CONF=STATE_DIR/slurm.conf
#
# start: starts munged if it is not answering, writes STATE_DIR/slurm.conf (a base
# configuration + the snippet that `llmc` emitted), starts slurmctld and one
# `slurmd -D -N NAME` per node of the snippet, and waits (at most 60 s) until every
# node is IDLE. On failure it prints the daemons' logs, stops what it started and
# exits 1. On success it prints the SLURM_CONF line to use with sinfo/sbatch/...
# (every client command needs SLURM_CONF=STATE_DIR/slurm.conf in its environment).
# stop: cancels the cluster's jobs, stops its daemons by their pid files and kills
# anything left that belongs to it (found by LLMC_SLURM_STATE in the environment of
# the process); it is safe to call twice or after a failed start.
# Slurm runs as root (SlurmUser=root); start needs root.
#
# How the emitted snippet is adapted to one host (the only rewrites done):
#   - NodeName lines are split into one line per node, each with NodeAddr=127.0.0.1
#     and its own Port= (node names like hgx001 do not resolve; several slurmd on one
#     host need distinct ports). Any NodeAddr/NodeHostname/Port already there is dropped.
#   - gres.conf File= paths are moved into STATE_DIR/dev/ (same file names), where
#     fake GPU character devices are made with mknod (major 195, minor = the number
#     in the name): slurmd only checks that the files exist. AutoDetect= is dropped.
#   - SlurmdParameters=config_overrides lets nodes that claim more CPUs, memory and
#     GPUs than this host has register as IDLE.
# Ports: SlurmctldPort = BASE, node i gets BASE+1+i. BASE comes from
# LLMC_SLURM_PORT_BASE, or else from a checksum of STATE_DIR (so two clusters with
# different state directories, e.g. two test suites at once, get different ports),
# in 10000-14900; it moves up by 100 (wrapping) while any of its ports is in use.
# Job ids: the emitted script's rendezvous port is 20000 + job id % 20000, so two
# clusters numbering their jobs from 1 would both listen on 20001. Each cluster's
# jobs start at FirstJobId = 400 x (BASE / 100 % 50) + 1: running clusters, whose
# BASEs differ, get 400-id windows that never share a rendezvous port
# (tests/lib.sh keeps the other port ranges of the tests apart).
# A requeued job may start again after AuthInfo=cred_expire (10 s here, Slurm's
# default is 120 s): tests of requeue need not wait two minutes. Starting it
# earlier (scontrol update StartTime=now) races the revoked credential of the
# previous run ("Job credential revoked") and fails the job.
# munged is a shared system daemon: it is started when needed and left running.
set -u

die() { echo "cluster.sh: $*" >&2; exit 1; }

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The processes of the cluster carry this variable, so stop can find them all.
state_marker() { echo "LLMC_SLURM_STATE=$1"; }

start_munge() {
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
    mkdir -p /run/munge && chown munge:munge /run/munge || return 1
    runuser -u munge -- munged --force || return 1
    local i
    for ((i = 0; i < 50; i++)); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

port_busy() { ss -Htan "sport = :$1" 2>/dev/null | grep -q .; }

# expand HOSTLIST -> one name per line (Slurm's own hostlist syntax)
expand() { SLURM_CONF="$STATE/expand.conf" scontrol show hostnames "$1"; }

print_logs() {
    local f
    for f in "$STATE"/log/*.log; do
        [[ -f "$f" ]] || continue
        echo "----- $f (last 40 lines)" >&2
        tail -n 40 "$f" >&2
    done
}

cmd_stop() {
    STATE=$1
    [[ -d "$STATE" ]] || return 0
    if [[ -f "$STATE/slurm.conf" && -f "$STATE/run/slurmctld.pid" ]]; then
        # Jobs first, so that their tasks get Slurm's own signals; whatever is
        # still running a second later is killed below.
        SLURM_CONF="$STATE/slurm.conf" timeout 10 scancel --quiet --full --state=RUNNING,PENDING,SUSPENDED \
            --user=root 2>/dev/null && sleep 1
    fi
    # Rounds, until a scan finds nothing: a process started while the last round
    # was being killed (slurmd launching a job step's slurmstepd) is caught by the next.
    local round
    for ((round = 0; round < 5; round++)); do
        stop_round "$STATE" || break
    done
    rm -f "$STATE"/run/*.pid
    return 0
}

# stop_round STATE: kill (TERM, then KILL after 3 s, then wait for them to go)
# every process of the cluster a scan finds; 1 when it found none.
stop_round() {
    local STATE=$1
    local pidfile pid pids=()
    for pidfile in "$STATE"/run/*.pid; do
        [[ -f "$pidfile" ]] || continue
        pid=$(cat "$pidfile" 2>/dev/null)
        [[ "$pid" =~ ^[0-9]+$ ]] && pids+=("$pid")
    done
    # Whatever else belongs to the cluster: processes with the marker (daemons and
    # slurmstepd, from slurmd's environment), job processes (SLURM_JOB_ID and this
    # cluster's SLURM_CONF, even when orphaned), and every descendant of those.
    # Never this script or its callers (a caller may have exported SLURM_CONF).
    local marker env_file ancestors=" " a=$BASHPID
    while [[ "$a" =~ ^[0-9]+$ && $a -gt 1 ]]; do
        ancestors+="$a "
        a=$(awk '{print $4}' "/proc/$a/stat" 2>/dev/null)
    done
    marker=$(state_marker "$STATE")
    for env_file in /proc/[0-9]*/environ; do
        pid=${env_file#/proc/}; pid=${pid%/environ}
        [[ "$ancestors" == *" $pid "* ]] && continue
        if grep -qzxF "$marker" "$env_file" 2>/dev/null ||
           { grep -qzxF "SLURM_CONF=$STATE/slurm.conf" "$env_file" 2>/dev/null &&
             grep -qz '^SLURM_JOB_ID=' "$env_file" 2>/dev/null; }; then
            pids+=("$pid")
        fi
    done
    local tree
    tree=$(ps -e -o pid=,ppid= 2>/dev/null)
    local grew=1 p c
    while [[ $grew -eq 1 ]]; do
        grew=0
        while read -r c p; do
            [[ " ${pids[*]} " == *" $p "* && " ${pids[*]} " != *" $c "* && "$ancestors" != *" $c "* ]] || continue
            pids+=("$c"); grew=1
        done <<<"$tree"
    done
    rm -f "$STATE"/run/*.pid   # read once: a later round must not signal a reused pid
    local live=()
    for pid in "${pids[@]}"; do
        [[ -d /proc/$pid ]] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && live+=("$pid")
    done
    [[ ${#live[@]} -eq 0 ]] && return 1
    pids=("${live[@]}")
    kill -TERM "${pids[@]}" 2>/dev/null
    local i alive
    for ((i = 0; i < 60; i++)); do   # 3 s to go on TERM, then KILL; 3 s more to be gone
        alive=0
        for pid in "${pids[@]}"; do
            [[ -d /proc/$pid ]] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && alive=1
        done
        [[ $alive -eq 0 ]] && break
        [[ $i -eq 30 ]] && kill -KILL "${pids[@]}" 2>/dev/null
        sleep 0.1
    done
    return 0
}

# rewrite_snippet SNIPPET BASE -> slurm.conf lines on stdout; node names in $STATE/nodes
rewrite_snippet() {
    local line name port=$(($2 + 1)) rest
    : >"$STATE/nodes"
    while IFS= read -r line || [[ -n "$line" ]]; do
        if [[ "$line" =~ ^[[:space:]]*NodeName=([^[:space:]]+)(.*)$ ]]; then
            rest=$(sed -E 's/(^|[[:space:]])(NodeAddr|NodeHostname|Port)=[^[:space:]]*//g' <<<"${BASH_REMATCH[2]}")
            for name in $(expand "${BASH_REMATCH[1]}"); do
                echo "NodeName=$name NodeAddr=127.0.0.1 Port=$port$rest"
                echo "$name" >>"$STATE/nodes"
                port=$((port + 1))
            done
        else
            echo "$line"
        fi
    done <"$1"
}

# rewrite_gres GRES_FILE -> gres.conf on stdout, fake devices made under $STATE/dev
rewrite_gres() {
    local line word out dir base dev minor
    while IFS= read -r line || [[ -n "$line" ]]; do
        [[ "$line" =~ ^[[:space:]]*AutoDetect= ]] && continue
        out=""
        for word in $line; do
            if [[ "$word" == File=* ]]; then
                dir=$(dirname "${word#File=}"); base=$(basename "${word#File=}")
                for dev in $(expand "$base"); do
                    minor=${dev//[!0-9]/}
                    [[ -e "$STATE/dev/$dev" ]] || mknod "$STATE/dev/$dev" c 195 "${minor:-0}" ||
                        die "cannot make the fake device $STATE/dev/$dev"
                done
                [[ -n "$dir" ]] || true
                word="File=$STATE/dev/$base"
            fi
            out+="${out:+ }$word"
        done
        echo "$out"
    done <"$1"
}

cmd_start() {
    STATE=$1 SNIPPET=$2 GRES=${3:-}
    [[ $(id -u) -eq 0 ]] || die "start needs root (Slurm runs as root here)"
    [[ -f "$SNIPPET" ]] || die "no snippet file: $SNIPPET"
    [[ -z "$GRES" || -f "$GRES" ]] || die "no gres.conf file: $GRES"
    mkdir -p "$STATE" || die "cannot create $STATE"
    STATE=$(cd "$STATE" && pwd -P)
    [[ -f "$STATE/run/slurmctld.pid" ]] && cmd_stop "$STATE"
    mkdir -p "$STATE"/{state,spool,log,run,dev} || die "cannot create directories under $STATE"
    rm -f "$STATE"/log/*.log
    printf 'ClusterName=expand\nSlurmctldHost=localhost\n' >"$STATE/expand.conf"

    start_munge || die "munged is not answering and could not be started"

    # One start at a time from the choice of ports until the daemons listen on them:
    # two suites starting at the same moment would otherwise both find a base free.
    # The daemons do not inherit the lock ({lock}>&-).
    local base n tries lock
    exec {lock}>/tmp/llmc-test-slurm-ports.lock && flock -w 300 "$lock" ||
        die "cannot lock /tmp/llmc-test-slurm-ports.lock (another cluster start held it 300 s)"
    base=${LLMC_SLURM_PORT_BASE:-$((10000 + $(cksum <<<"$STATE" | cut -d' ' -f1) % 50 * 100))}
    rewrite_snippet "$SNIPPET" "$base" >"$STATE/snippet.conf" || die "cannot read $SNIPPET"
    n=$(wc -l <"$STATE/nodes")
    [[ $n -ge 1 ]] || die "$SNIPPET has no NodeName line"
    for ((tries = 0; tries < 50; tries++)); do
        local p busy=0
        for ((p = base; p <= base + n; p++)); do port_busy $p && { busy=1; break; }; done
        [[ $busy -eq 0 ]] && break
        base=$((10000 + (base - 10000 + 100) % 5000))
    done
    [[ $busy -eq 0 ]] || die "no free ports for slurmctld and $n slurmd (from $base)"
    rewrite_snippet "$SNIPPET" "$base" >"$STATE/snippet.conf"

    local gres_types=""
    grep -q '^[[:space:]]*GresTypes=' "$STATE/snippet.conf" || gres_types="GresTypes=gpu"
    cat >"$STATE/slurm.conf" <<EOF
# Written by tests/slurm/cluster.sh: base configuration for a one-host test cluster.
ClusterName=llmctest
SlurmctldHost=localhost
SlurmctldPort=$base
FirstJobId=$((base / 100 % 50 * 400 + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
KillWait=15
MessageTimeout=10
$gres_types
# ---- the emitted snippet (NodeName lines rewritten, see cluster.sh)
EOF
    cat "$STATE/snippet.conf" >>"$STATE/slurm.conf"
    if [[ -n "$GRES" ]]; then
        rewrite_gres "$GRES" >"$STATE/gres.conf" || die "cannot rewrite $GRES"
    else
        echo "# no gres.conf given" >"$STATE/gres.conf"
    fi

    local marker name
    marker=$(state_marker "$STATE")
    export SLURM_CONF="$STATE/slurm.conf"
    env "$marker" slurmctld -f "$STATE/slurm.conf" -i {lock}>&- ||
        { print_logs; cmd_stop "$STATE"; die "slurmctld did not start"; }
    while read -r name; do
        mkdir -p "$STATE/spool/$name"
        env "$marker" setsid slurmd -D -N "$name" -f "$STATE/slurm.conf" \
            >>"$STATE/log/slurmd-$name.out" 2>&1 </dev/null {lock}>&- &
    done <"$STATE/nodes"

    # Bounded wait: every node IDLE.
    local i states
    for ((i = 0; i < 600; i++)); do
        states=$(timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
        if [[ -n "$states" ]] && ! grep -qv ' idle$' <<<"$states" &&
           [[ $(wc -l <<<"$states") -eq $n ]]; then
            echo "export SLURM_CONF=$STATE/slurm.conf"
            exec {lock}>&-
            return 0
        fi
        sleep 0.1
    done
    echo "cluster.sh: nodes did not all become IDLE within 60 s:" >&2
    echo "$states" >&2
    print_logs
    for f in "$STATE"/log/*.out; do [[ -s "$f" ]] && { echo "----- $f" >&2; tail -n 20 "$f" >&2; }; done
    cmd_stop "$STATE"
    exit 1
}

case "${1:-}" in
    start) [[ $# -ge 3 && $# -le 4 ]] || usage; cmd_start "$2" "$3" "${4:-}" ;;
    stop)  [[ $# -eq 2 ]] || usage; cmd_stop "$(cd "$2" 2>/dev/null && pwd -P || echo "$2")" ;;
    env)   [[ $# -eq 2 ]] || usage; echo "export SLURM_CONF=$(cd "$2" && pwd -P)/slurm.conf" ;;
    *)     usage ;;
esac
