#!/bin/bash
# tests/e2e/dist.sh DIST_TEST — runtime/base/dist.c under real launchers: Open MPI's
# mpirun, srun-style ranks (SLURM_PROCID/SLURM_STEP_NUM_TASKS + MASTER_ADDR/PORT
# TCP rendezvous, started here by hand as srun would) and torchrun-style ranks
# (RANK/WORLD_SIZE/LOCAL_RANK, the same TCP). Checks rank-order sums (and ZeRO's
# reduce-scatter and all-gathers, f32 and 2-byte elements) on
# every rank with the same bits on both backends, that kill -9 of one rank stops
# the others with a clear message within 60 s, and that USR2/TERM on one rank
# stops all ranks with exit 3. Every wait is bounded.
set -u
BIN=$(realpath "$1")
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
train_prelude e2e-dist
BAD_TAIL=all
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
export OMPI_MCA_rmaps_base_oversubscribe=1
unset WORLD_SIZE RANK LOCAL_RANK   # torchrun's, beside the prelude's
# Under ASan (E2E_SAN=1) Open MPI's own allocations at exit are reported as
# leaks (libmpi and its plugins); leak checking stays on for everything else.
MPI_ENV=()
[[ ${E2E_SAN:-0} == 1 ]] && MPI_ENV=(env ASAN_OPTIONS=detect_leaks=0)

# A port nobody listens on (tests may run beside other jobs), a new one each time.
PORT=
next_port() { free_port $PORT; }

# tcp_start N MODE LOGPREFIX [ENV...]: start N srun-style ranks in the background.
tcp_start() {
    local n=$1 mode=$2 log=$3; shift 3
    next_port
    TCP_PIDS=()
    for ((r = 0; r < n; r++)); do
        env "$@" SLURM_STEP_NUM_TASKS=$n SLURM_PROCID=$r SLURM_LOCALID=$r \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$BIN" "$mode" >"$log.$r" 2>&1 &
        TCP_PIDS+=($!); PIDS+=($!)
    done
}

# torch_start N MODE LOGPREFIX [ENV...]: the same with torchrun-style variables.
torch_start() {
    local n=$1 mode=$2 log=$3; shift 3
    next_port
    TCP_PIDS=()
    for ((r = 0; r < n; r++)); do
        env "$@" WORLD_SIZE=$n RANK=$r LOCAL_RANK=$r \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$BIN" "$mode" >"$log.$r" 2>&1 &
        TCP_PIDS+=($!); PIDS+=($!)
    done
}

# wait_for_line FILE PATTERN SECONDS
wait_for_line() {
    local i
    for ((i = 0; i < $3 * 10; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

# wait_pid PID SECONDS -> sets RC (124 when it did not end in time)
wait_pid() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        if ! kill -0 "$1" 2>/dev/null; then wait "$1" 2>/dev/null; RC=$?; return 0; fi
        sleep 0.1
    done
    RC=124
}

# 1. plain run: rank 0 of 1
if "$BIN" check >"$T/single" 2>&1 && grep -q '^rank 0/1 ok' "$T/single"; then ok "single rank"; else bad "single rank" "$T/single"; fi

# 1b. log_info_to_stderr: a command whose stdout is its answer (bench's JSON line) moves
# its progress lines, the ranks' start lines among them, to stderr
"$BIN" logstream >"$T/ls.out" 2>"$T/ls.err"
if grep -q 'progress on stdout' "$T/ls.out" && ! grep -q 'progress on stderr' "$T/ls.out" &&
   grep -q 'progress on stderr' "$T/ls.err" && ! grep -q 'progress on stdout' "$T/ls.err"
then ok "log_info_to_stderr: later progress lines on stderr, stdout left to the answer"
else bad "log_info_to_stderr" "$T/ls.out" "$T/ls.err"; fi

# 2. mpirun, 2 ranks: rank-order sums, same bits on both
timeout 120 "${MPI_ENV[@]}" mpirun -np 2 "$BIN" check >"$T/mpi2" 2>&1; rc=$?
if [[ $rc -eq 0 && $(grep -c ' ok ' "$T/mpi2") -eq 2 && $(grep ' ok ' "$T/mpi2" | awk '{print $4}' | sort -u | wc -l) -eq 1 ]]
then ok "mpirun 2 ranks: rank-order sum, same bits"; else bad "mpirun 2 ranks (rc $rc)" "$T/mpi2"; fi

# 3. srun-style TCP, 2 and 3 ranks; the 2-rank bits equal mpirun's
for n in 2 3; do
    tcp_start $n check "$T/tcp$n"
    rc=0; for p in "${TCP_PIDS[@]}"; do wait_pid "$p" 60; [[ $RC -eq 0 ]] || rc=$RC; done
    hashes=$(cat "$T/tcp$n".* | grep ' ok ' | awk '{print $4}' | sort -u)
    if [[ $rc -eq 0 && $(cat "$T/tcp$n".* | grep -c ' ok ') -eq $n && $(wc -l <<<"$hashes") -eq 1 ]]; then
        ok "tcp $n ranks: rank-order sum, same bits"
    else bad "tcp $n ranks (rc $rc)" "$T/tcp$n".*; fi
    [[ $n -eq 2 ]] && tcp2_hash=$hashes
done
# 3a. the same ranks on this one machine move their messages through shared memory
# (dist.c's rings); LLMC_DIST_SHM=0 keeps TCP: both give the same bits
shm_free=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
if [[ ${shm_free:-0} -lt 65536 ]]; then   # 3 ranks reserve 32 MiB; without room, TCP is right
    if grep -q 'TCP rendezvous)' "$T/tcp3.0"; then ok "tcp ranks, ${shm_free:-no} KiB free in /dev/shm: TCP sockets"
    else bad "tcp ranks without room in /dev/shm" "$T/tcp3.0"; fi
elif grep -q 'TCP rendezvous, shared memory)' "$T/tcp3.0"; then ok "tcp ranks on one machine: shared-memory rings"
else bad "tcp ranks on one machine did not take shared memory" "$T/tcp3.0"; fi
# a /dev/shm too small for the rings (a container's, as root in a mount namespace
# of its own): the segment is refused at its reservation, TCP sockets carry the job
if unshare -m true 2>/dev/null; then
    next_port
    unshare -m bash -c 'mount -t tmpfs -o size=8m tmpfs /dev/shm || exit 9
        for r in 0 1; do WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT='"$PORT"' \
            timeout 60 '"$BIN"' check > '"$T"'/smallshm.$r 2>&1 & done; wait'
    rc=$?
    if [[ $rc -eq 0 && $(cat "$T"/smallshm.* | grep -c ' ok ') -eq 2 ]] && grep -q 'TCP rendezvous)' "$T/smallshm.0"
    then ok "/dev/shm of 8 MiB: the rings are refused up front, TCP sockets carry the job"
    else bad "/dev/shm of 8 MiB (rc $rc)" "$T"/smallshm.*; fi
fi
tcp_start 3 check "$T/plain3" LLMC_DIST_SHM=0
rc=0; for p in "${TCP_PIDS[@]}"; do wait_pid "$p" 60; [[ $RC -eq 0 ]] || rc=$RC; done
plain_hash=$(cat "$T/plain3".* | grep ' ok ' | awk '{print $4}' | sort -u)
tcp3_hash=$(cat "$T/tcp3".* | grep ' ok ' | awk '{print $4}' | sort -u)
if [[ $rc -eq 0 && $(cat "$T/plain3".* | grep -c ' ok ') -eq 3 && "$plain_hash" == "$tcp3_hash" ]] &&
   grep -q 'TCP rendezvous)' "$T/plain3.0"
then ok "LLMC_DIST_SHM=0: 3 ranks over TCP sockets, the same bits as shared memory"
else bad "LLMC_DIST_SHM=0, 3 ranks (rc $rc)" "$T/plain3".*; fi
mpi_hash=$(grep ' ok ' "$T/mpi2" | awk '{print $4}' | sort -u)
if [[ -n "$mpi_hash" && "$mpi_hash" == "$tcp2_hash" ]]; then ok "mpirun and tcp give the same bits"
else bad "mpirun ($mpi_hash) and tcp ($tcp2_hash) bits differ"; fi

# 3b. torchrun-style variables: the same TCP ranks, the same bits as srun-style
torch_start 2 check "$T/torch2"
rc=0; for p in "${TCP_PIDS[@]}"; do wait_pid "$p" 60; [[ $RC -eq 0 ]] || rc=$RC; done
torch_hash=$(cat "$T/torch2".* | grep ' ok ' | awk '{print $4}' | sort -u)
if [[ $rc -eq 0 && $(cat "$T/torch2".* | grep -c 'rank [01]/2 ok ') -eq 2 && "$torch_hash" == "$tcp2_hash" ]]
then ok "torchrun-style 2 ranks: TCP, same bits as srun-style"; else bad "torchrun-style 2 ranks (rc $rc)" "$T/torch2".*; fi
# srun's variables win over torchrun's (as in runtime/cuda/cuda_dist.c): one srun task is rank 0 of 1
env SLURM_STEP_NUM_TASKS=1 SLURM_PROCID=0 WORLD_SIZE=2 RANK=1 timeout 30 "$BIN" check >"$T/srun1torch" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && grep -q '^rank 0/1 ok' "$T/srun1torch"; then ok "one srun task beside WORLD_SIZE=2: rank 0 of 1"
else bad "one srun task beside WORLD_SIZE=2 (rc $rc)" "$T/srun1torch"; fi

# 4. kill -9 one rank under mpirun: mpirun ends the job, non-zero, within 60 s
"${MPI_ENV[@]}" mpirun -np 2 "$BIN" loop >"$T/mpikill" 2>&1 &
mp=$!; PIDS+=($mp)
if wait_for_line "$T/mpikill" 'rank 1/2 .*ready pid' 30; then
    victim=$(grep 'rank 1/2 .*ready pid' "$T/mpikill" | sed 's/.*pid //')
    kill -9 "$victim"
    wait_pid $mp 60
    if [[ $RC -ne 0 && $RC -ne 124 ]] && grep -q 'rank 1 .*signal 9' "$T/mpikill"
    then ok "mpirun: kill -9 of rank 1 stops the job (exit $RC) within 60 s"
    else bad "mpirun: kill -9 of rank 1 (exit $RC)" "$T/mpikill"; fi
else bad "mpirun loop did not start" "$T/mpikill"; fi

# 5. kill -9 one rank on TCP (a middle rank, then rank 0; shared memory, then rank 1
# again over TCP sockets): the others exit 1 within 60 s, saying why
# (each case its own logs: with the first case's, the third could see that case's
# 'ready' line before its own rank 1 has truncated the file, and kill it unstarted)
for case in 1 0 1s; do
    victim=$case shm=1; [[ $case == 1s ]] && { victim=1; shm=0; }
    log="$T/tcpkill$case"
    tcp_start 3 loop "$log" LLMC_DIST_TIMEOUT=300 LLMC_DIST_SHM=$shm
    if wait_for_line "$log.$victim" 'ready' 30; then
        kill -9 "${TCP_PIDS[$victim]}"
        wait "${TCP_PIDS[$victim]}" 2>/dev/null   # reap quietly (no "Killed" line)
        good=1
        for r in 0 1 2; do
            [[ $r -eq $victim ]] && continue
            wait_pid "${TCP_PIDS[$r]}" 60
            [[ $RC -eq 1 ]] && grep -q 'error: lost the connection to rank' "$log.$r" || good=0
        done
        how=$([[ $shm == 1 ]] && echo "shared memory" || echo "LLMC_DIST_SHM=0")
        if [[ $good -eq 1 ]]; then ok "tcp ($how): kill -9 of rank $victim stops the others with a message within 60 s"
        else bad "tcp ($how): kill -9 of rank $victim" "$log".*; fi
    else bad "tcp loop did not start" "$log".*; fi
done

# 6. USR2 to one rank (TCP) / TERM to one rank: all ranks finish the step and exit 3
for sig in USR2 TERM; do
    tcp_start 2 loop "$T/tcpstop$sig"
    if wait_for_line "$T/tcpstop$sig.1" 'ready' 30; then
        kill -s $sig "${TCP_PIDS[1]}"
        good=1
        for r in 0 1; do wait_pid "${TCP_PIDS[$r]}" 60; [[ $RC -eq 3 ]] || good=0; done
        grep -q "stop requested ($sig)" "$T/tcpstop$sig.1" || good=0
        if [[ $good -eq 1 ]]; then ok "tcp: $sig on rank 1 stops both ranks with exit 3"
        else bad "tcp: $sig on rank 1" "$T/tcpstop$sig".*; fi
    else bad "tcp loop did not start" "$T/tcpstop$sig".*; fi
done

# 7. USR2 to mpirun: forwarded to the ranks, which stop together with exit 3
"${MPI_ENV[@]}" mpirun -np 2 "$BIN" loop >"$T/mpistop" 2>&1 &   # no wrapper: the signal goes to mpirun
mp=$!; PIDS+=($mp)
if wait_for_line "$T/mpistop" 'rank 1/2 .*ready' 30 && wait_for_line "$T/mpistop" 'rank 0/2 .*ready' 30; then
    kill -USR2 $mp
    wait_pid $mp 60
    if [[ $RC -eq 3 && $(grep -c 'stop requested' "$T/mpistop") -eq 2 ]]; then ok "mpirun: USR2 stops both ranks with exit 3"
    else bad "mpirun: USR2 (exit $RC)" "$T/mpistop"; fi
else bad "mpirun loop did not start" "$T/mpistop"; fi

# 8. rank 0 fails and leaves while rank 1 waits for it in a collective: no hang
for launcher in mpirun tcp; do
    start=$SECONDS
    if [[ $launcher == mpirun ]]; then
        LLMC_DIST_TIMEOUT=5 timeout 120 "${MPI_ENV[@]}" mpirun -np 2 "$BIN" leave0 >"$T/leave.$launcher" 2>&1; rc=$?
        want='did not reach the end of the run'
    else
        tcp_start 2 leave0 "$T/leave.$launcher"
        rc=0; for p in "${TCP_PIDS[@]}"; do wait_pid "$p" 60; [[ $RC -ne 0 ]] && rc=$RC; done
        cat "$T/leave.$launcher".* >"$T/leave.$launcher"
        want='rank 1/2 .*error: lost the connection to rank 0'
    fi
    if [[ $rc -ne 0 && $rc -ne 124 && $((SECONDS - start)) -lt 60 ]] && grep -q "$want" "$T/leave.$launcher"
    then ok "$launcher: rank 0 leaves early, the job ends in $((SECONDS - start)) s with a message"
    else bad "$launcher: rank 0 leaves early (rc $rc)" "$T/leave.$launcher"; fi
done

# 9. misconfiguration fails fast with a message
env SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 "$BIN" check >"$T/noaddr" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q 'set MASTER_ADDR and MASTER_PORT' "$T/noaddr"; then ok "srun without MASTER_ADDR: clear error"
else bad "srun without MASTER_ADDR (rc $rc)" "$T/noaddr"; fi
env WORLD_SIZE=2 RANK=1 "$BIN" check >"$T/torchnoaddr" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q '(WORLD_SIZE) started 2 ranks; set MASTER_ADDR and MASTER_PORT' "$T/torchnoaddr"
then ok "WORLD_SIZE without MASTER_ADDR: clear error"; else bad "WORLD_SIZE without MASTER_ADDR (rc $rc)" "$T/torchnoaddr"; fi
env WORLD_SIZE=2 RANK=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "$BIN" check >"$T/torchbadrank" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q 'RANK is missing or not in 0..1' "$T/torchbadrank"
then ok "RANK out of range: clear error"; else bad "RANK out of range (rc $rc)" "$T/torchbadrank"; fi
env WORLD_SIZE=2 RANK=1 LOCAL_RANK=x MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "$BIN" check >"$T/badlocal" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q "LOCAL_RANK='x' is not a local rank" "$T/badlocal"
then ok "LOCAL_RANK not a number: clear error"; else bad "LOCAL_RANK not a number (rc $rc)" "$T/badlocal"; fi
env SLURM_STEP_NUM_TASKS=two "$BIN" check >"$T/badworld" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q "SLURM_STEP_NUM_TASKS='two' is not a number of ranks" "$T/badworld"
then ok "SLURM_STEP_NUM_TASKS not a number: clear error"; else bad "SLURM_STEP_NUM_TASKS not a number (rc $rc)" "$T/badworld"; fi
LLMC_DIST_TIMEOUT=99999999 "$BIN" check >"$T/badtimeout" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q 'LLMC_DIST_TIMEOUT must be' "$T/badtimeout"; then ok "LLMC_DIST_TIMEOUT out of range: clear error"
else bad "LLMC_DIST_TIMEOUT out of range (rc $rc)" "$T/badtimeout"; fi
next_port
start=$SECONDS
env LLMC_DIST_TIMEOUT=2 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    timeout 30 "$BIN" check >"$T/noroot" 2>&1; rc=$?
if [[ $rc -eq 1 && $((SECONDS - start)) -lt 10 ]] && grep -q 'could not connect to rank 0' "$T/noroot"
then ok "rank 0 never comes: bounded wait, clear error"; else bad "rank 0 never comes (rc $rc)" "$T/noroot"; fi

# 10. a build without MPI (NOMPI_BIN, when given) refuses mpirun with a message, and srun-style ranks still work
if [[ -n "${NOMPI_BIN:-}" ]]; then
    timeout 120 mpirun -np 2 "$NOMPI_BIN" check >"$T/nompi" 2>&1; rc=$?
    if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q 'built without MPI' "$T/nompi"; then ok "no-MPI build under mpirun: refuses with a message"
    else bad "no-MPI build under mpirun (rc $rc)" "$T/nompi"; fi
    save=$BIN; BIN=$(realpath "$NOMPI_BIN")
    tcp_start 2 check "$T/nompitcp"
    rc=0; for p in "${TCP_PIDS[@]}"; do wait_pid "$p" 60; [[ $RC -eq 0 ]] || rc=$RC; done
    if [[ $rc -eq 0 && $(cat "$T/nompitcp".* | grep ' ok ' | awk '{print $4}' | sort -u) == "$tcp2_hash" ]]
    then ok "no-MPI build: srun-style ranks work, same bits"; else bad "no-MPI build over TCP (rc $rc)" "$T/nompitcp".*; fi
    BIN=$save
fi

finish
