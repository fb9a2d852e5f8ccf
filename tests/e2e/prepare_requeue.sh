#!/bin/bash
# tests/e2e/prepare_requeue.sh LLMC LLMC_TRAIN — data preparation under the local
# Slurm (`make test-e2e-prepare`, about a minute): the emitted script's prepare step
# gets a USR2 while it writes shards; prepare finishes the shard it is writing,
# records it and exits 3; the script requeues the job; the requeued job's prepare
# keeps the shards already written (same inode, same mtime) and continues, ending
# with the very bytes an uninterrupted prepare writes; then the job trains and
# completes. Recompiling the plan afterwards keeps the shards, and prepare finds
# them up to date.
set -u
LLMC=$(realpath "$1"); BIN=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/slurm_lib.sh" e2e-prepare   # ROOT, CLUSTER, T, ok/bad/finish, job_field, wait_for_line
unset OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_JOB_ID SLURM_JOBID
# one tokenizer thread and small shards: prepare writes hundreds of shards for some seconds
export LLMC_TRAIN=$BIN LLMC_THREADS=1 LLMC_SHARD_TOKENS=20000

mkdir -p "$T/logs" && tiny_examples "$T"
python3 - "$T/big.json" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    f.write("[\n")
    for i in range(80000):
        f.write((",\n" if i else "") + json.dumps({"messages": [
            {"role": "user", "content": "What is %d + %d? Think about it carefully, step by step." % (i % 97, i % 89)},
            {"role": "assistant", "content": "The answer is %d." % (i % 97 + i % 89)}]}))
    f.write("\n]\n")
PY
sed -e 's|examples/tiny/data/arith.json|big.json|' -e 's/max_steps        = 150/max_steps        = 5/' \
    -e 's/nodes   = 2/nodes   = 1/' "$HERE/tiny_2node.llm" >"$T/prep.llm"
(cd "$T" && "$LLMC" prep.llm -o out) >"$T/llmc.log" 2>&1 || { bad "llmc compile" "$T/llmc.log"; finish; }
grep -q 'prepare "$plan" || rc=$?' "$T/out/tiny_2node.slurm" && grep -q -- '--cpus-per-task=2 --kill-on-bad-exit=1' "$T/out/tiny_2node.slurm" \
    && ok "the prepare step asks for the job's CPUs and passes exit 3 on" || bad "prepare step" "$T/out/tiny_2node.slurm"
# the reference: the same plan prepared without interruption (same relative paths, same data hash)
mkdir -p "$T/ref" && cp "$T/out/plan.json" "$T/ref/plan.json"
"$BIN" prepare "$T/ref/plan.json" >"$T/ref.log" 2>&1 || { bad "reference prepare" "$T/ref.log"; finish; }
"$CLUSTER" start "$T/slurm" "$T/out/slurm.conf" "$T/out/gres.conf" >"$T/cluster.log" 2>&1 || { bad "cluster" "$T/cluster.log"; finish; }
eval "$("$CLUSTER" env "$T/slurm")"

id=$(cd "$T" && sbatch --parsable out/tiny_2node.slurm)
err=$T/logs/tiny_2node-$id.err
out=${err%.err}.out   # prepare's and the trainer's progress (log_info) are on stdout
S=$T/out/shards
for ((i = 0; i < 1200; i++)); do compgen -G "$S/shard-*-00003.bin" >/dev/null && break; sleep 0.05; done
scancel --signal=USR2 "$id"   # to the job's steps: the prepare step
if wait_for_line "$out" 'stop signal USR2: [0-9]* shards written' 60 && wait_for_line "$err" "prepare stopped after a shard (exit 3); requeueing job $id" 30; then
    n=$(grep -o 'stop signal USR2: [0-9]* shards' "$out" | head -n 1 | grep -o '[0-9]* shards' | grep -o '[0-9]*')
    ok "USR2 during prepare: $n shards written, exit 3, the job requeued"
else bad "no stop of prepare (state $(job_field "$id" JobState))" "$err" "$out"; finish; fi
python3 -c 'import json,sys; print("\n".join(s["file"] for s in json.load(open(sys.argv[1]))["shards"]))' "$S/progress.json" \
    >"$T/kept.txt" 2>/dev/null
(cd "$S" && stat -c '%i %Y.%y %n' $(cat "$T/kept.txt")) >"$T/before.txt" 2>&1
[[ $(wc -l <"$T/kept.txt") -eq $n && ! -e $S/index.json ]] && ok "progress.json lists the $n shards; no index.json yet" \
    || bad "journal after the stop" "$T/kept.txt"
# the requeued job starts again after AuthInfo=cred_expire (10 s, tests/slurm/cluster.sh)
if wait_for_line "$out" "resuming: $n shards of an interrupted prepare kept" 120; then ok "the requeued job's prepare resumed with the $n shards"
else scontrol show job "$id" >"$T/job.txt"; bad "no resume" "$err" "$out" "$T/job.txt"; finish; fi
for ((i = 0; i < 600; i++)); do [[ $(job_field "$id" JobState) == COMPLETED ]] && break; sleep 0.2; done
[[ $(job_field "$id" JobState) == COMPLETED ]] && grep -q 'done: 5 steps' "$out" && ok "the job then trained and completed" \
    || bad "job did not complete (state $(job_field "$id" JobState))" "$err" "$out"
(cd "$S" && stat -c '%i %Y.%y %n' $(cat "$T/kept.txt")) 2>&1 | diff - "$T/before.txt" >"$T/stat.diff" \
    && ok "the shards written before the stop were not rewritten" || bad "finished shards rewritten" "$T/stat.diff"
# (the reference's data hash, hence its shard names, differ: its plan's path is another)
same_as_ref() {
    local a b
    paste <(ls "$T/ref/shards" | grep '^shard-') <(ls "$S" | grep '^shard-') | while read -r a b; do
        cmp "$T/ref/shards/$a" "$S/$b" || return 1
    done || return 1
    python3 - "$T/ref/shards/index.json" "$S/index.json" <<'PY'
import json, sys
def norm(path):
    i = json.load(open(path))
    i.pop("data_hash")
    for s in i["shards"]: s["file"] = s["file"].split("-")[-1]
    return i
sys.exit(0 if norm(sys.argv[1]) == norm(sys.argv[2]) else 1)
PY
}
same_as_ref >"$T/ref.diff" 2>&1 && [[ $(ls "$S" | grep -c '^shard-') -eq $(ls "$T/ref/shards" | grep -c '^shard-') ]] \
    && ok "the result is byte for byte an uninterrupted prepare's (every shard, index.json)" \
    || bad "differs from the reference" "$T/ref.diff"
# recompiling keeps the shards: llmc replaces only the files it emits
stat -c '%i %Y %n' "$S"/index.json "$S"/shard-*.bin >"$T/shards.txt"
(cd "$T" && "$LLMC" prep.llm -o out) >"$T/llmc2.log" 2>&1
out=$("$BIN" prepare "$T/out/plan.json" 2>&1)
stat -c '%i %Y %n' "$S"/index.json "$S"/shard-*.bin | diff - "$T/shards.txt" >/dev/null && [[ $out == *"up to date"* ]] \
    && ok "recompiling the plan keeps the shards: prepare finds them up to date" || bad "recompile" "$T/llmc2.log"
finish
