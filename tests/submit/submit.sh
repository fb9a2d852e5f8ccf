#!/bin/bash
# tests/submit/submit.sh LLMC — see tests/submit/test.mk. The plan is
# tests/e2e/lf_chain.llm (LoRA SFT, then DPO `after = sft_job`), run by the
# stand-in for llamafactory-cli (tests/e2e/stand_in_lf_trainer.sh).
set -u
LLMC=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/../e2e" && pwd)
. "$HERE/slurm_lib.sh" submit-test   # ROOT, CLUSTER, T, ok/bad/finish, job_field, wait_for_line, wait_state
unset SLURM_JOB_ID SLURM_JOBID SLURM_RESTART_COUNT
# expect NAME RC PATTERN CMD...: exit status RC and PATTERN (grep -E) in stdout+stderr
expect() {
    local name=$1 want=$2 re=$3; shift 3
    "$@" >"$T/x.out" 2>&1; local rc=$?
    if [[ $rc -eq $want ]] && grep -Eq -- "$re" "$T/x.out"; then ok "$name: exit $rc"
    else echo "(exit $rc, wanted $want; pattern $re)" >>"$T/x.out"; bad "$name" "$T/x.out"; fi
}
jobs_json() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join(j["job"]+"="+j["id"]+"/"+str(j["after"]) for j in r["jobs"]))' "$1"; }

mkdir -p "$T/logs" && tiny_examples "$T"
cp "$HERE/lf_chain.llm" "$T/lf_chain.llm"
(cd "$T" && "$LLMC" -q lf_chain.llm -o out) >"$T/llmc.log" 2>&1 || { bad "llmc compile" "$T/llmc.log"; finish; }

# ---- bad input (no Slurm needed) ----
expect "submit of a missing directory" 2 "no-such: No such file" "$LLMC" submit "$T/no-such"
mkdir -p "$T/empty"
expect "submit of a directory llmc did not write" 2 "no plan.json and no submit.sh" "$LLMC" submit "$T/empty"
expect "cancel before any submit" 2 "no job recorded \(llmc submit .* records them\)" "$LLMC" cancel "$T/out"
expect "logs before any submit" 2 "no job recorded for sft_job" "$LLMC" logs "$T/out"
expect "logs --err --metrics" 2 "exclude each other" "$LLMC" logs --err --metrics "$T/out"
expect "logs --job that is not in the chain" 2 "has no job 'nope' \(its jobs: sft_job, dpo_job\)" "$LLMC" logs --job nope --metrics "$T/out"
expect "submit without sbatch on PATH" 2 "sbatch is not on PATH" env PATH=/nonexistent "$LLMC" submit "$T/out"
cp -r "$T/out" "$T/broken" && echo '{"jobs":[{"job":"sft_job","id":"x;rm"}]}' >"$T/broken/jobs.json"
expect "a jobs.json with a bad id" 2 "jobs.json: job 1: no Slurm job \"id\"" "$LLMC" status "$T/broken"
expect "status of a chain never submitted (no Slurm here)" 0 "^chain .*/out: not submitted \(2 jobs, none recorded by llmc submit: sft_job not started, dpo_job not started\)" \
    env PATH=/usr/bin:/bin SLURM_CONF=/nonexistent "$LLMC" status "$T/out"
expect "status --plot of a chain" 2 "a chain's directory: --plot is for one job's" "$LLMC" status --plot "$T/x.svg" "$T/out"

"$CLUSTER" start "$T/slurm" "$T/out/sft_job/slurm.conf" "$T/out/sft_job/gres.conf" >"$T/cluster.log" 2>&1 ||
    { bad "cluster" "$T/cluster.log"; finish; }
eval "$("$CLUSTER" env "$T/slurm")"
export LLAMAFACTORY_CLI=$HERE/stand_in_lf_trainer.sh LLMC_STAND_IN_STEP_SECONDS=0.1 LLMC_STAND_IN_LOG=$T/stand-in.log

# ---- a failed job: the DPO job alone, before any SFT (its script stops: exit 1) ----
(cd "$T" && "$LLMC" submit out/dpo_job) >"$T/alone.log" 2>&1; rc=$?
alone=$(sed -n 's/^dpo_job: job \([0-9]*\)$/\1/p' "$T/alone.log")
if [[ $rc -eq 0 && -n $alone && $(jobs_json "$T/out/dpo_job/jobs.json") == "dpo_job=$alone/None" ]] && grep -q "recorded in out/dpo_job/jobs.json" "$T/alone.log"
then ok "submit of one job's directory: its id printed and recorded"
else bad "submit out/dpo_job (exit $rc)" "$T/alone.log"; fi
wait_state "$alone" 60 FAILED COMPLETED CANCELLED
expect "status of the failed job (recorded id)" 1 "^dpo_job: FAILED" "$LLMC" status "$T/out/dpo_job"
expect "logs --err of the failed job: its standard error" 1 "adapter_config.json is missing: job sft_job has not completed" \
    "$LLMC" logs --err "$T/out/dpo_job"
expect "logs -f of a failed job ends at once, exit 1" 1 "==> dpo_job: job $alone FAILED <==" timeout 20 "$LLMC" logs -f "$T/out/dpo_job"

# ---- the chain: submitted in order, running, completed ----
(cd "$T" && "$LLMC" submit out) >"$T/submit.log" 2>&1; rc=$?
sft=$(sed -n 's/^sft_job: job \([0-9]*\)$/\1/p' "$T/submit.log")
dpo=$(sed -n 's/^dpo_job: job \([0-9]*\) (after sft_job)$/\1/p' "$T/submit.log")
if [[ $rc -eq 0 && -n $sft && -n $dpo ]] && [[ $(job_field "$dpo" Dependency) == "afterok:${sft}"* ]] &&
   [[ $(jobs_json "$T/out/jobs.json") == "sft_job=$sft/None dpo_job=$dpo/sft_job" ]]; then
    ok "submit of the chain: sft_job $sft, dpo_job $dpo with afterok:$sft, both recorded in order"
else bad "submit out (exit $rc)" "$T/submit.log" "$T/out/jobs.json"; finish; fi
expect "submit again while the chain runs" 2 "sft_job is job $sft, (PENDING|RUNNING|CONFIGURING): llmc cancel .* first" "$LLMC" submit "$T/out"
wait_for_line "$T/runs/sft/trainer_log.jsonl" current_steps 60
expect "status of the running chain" 0 "^chain .*out: running \(2 jobs: sft_job RUNNING, dpo_job PENDING\)" "$LLMC" status "$T/out"
"$LLMC" status --format=json "$T/out" >"$T/chain.json" 2>&1
python3 - "$T/chain.json" "$sft" "$dpo" >"$T/py.log" 2>&1 <<'PYEOF' && ok "status --format=json of the chain: the jobs, their ids, states and after" || bad "chain JSON" "$T/py.log" "$T/chain.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["status"] == "running", c["status"]
j = c["jobs"]
assert [x["job"] for x in j] == ["sft_job", "dpo_job"], j
assert j[0]["slurm"]["job_id"] == sys.argv[2] and j[1]["slurm"]["job_id"] == sys.argv[3], [x["slurm"] for x in j]
assert j[0]["after"] is None and j[1]["after"] == "sft_job"
PYEOF
# logs: the chain's first job not completed, its Slurm output file; -f until it completes
timeout 120 "$LLMC" logs -f "$T/out" >"$T/follow.out" 2>"$T/follow.err"; rc=$?
if [[ $rc -eq 0 ]] && grep -q "^==> sft_job: job $sft .*: $T/logs/sft_job-$sft.out <==" "$T/follow.err" &&
   grep -q "==> sft_job: job $sft COMPLETED <==" "$T/follow.err" && cmp -s "$T/follow.out" "$T/logs/sft_job-$sft.out" &&
   [[ -s $T/follow.out ]]; then
    ok "logs -f: sft_job's output file followed until the job completed, every byte ($(wc -c <"$T/follow.out") bytes)"
else bad "logs -f (exit $rc)" "$T/follow.err" "$T/follow.out"; fi
wait_state "$dpo" 90 COMPLETED FAILED CANCELLED TIMEOUT
expect "status of the completed chain" 0 "^chain .*out: completed \(2 jobs: sft_job COMPLETED, dpo_job COMPLETED\)" "$LLMC" status "$T/out"
"$LLMC" logs --metrics "$T/out" >"$T/m.out" 2>"$T/m.err"; rc=$?
[[ $rc -eq 0 ]] && cmp -s "$T/m.out" "$T/runs/dpo/trainer_log.jsonl" && grep -q "==> dpo_job: job $dpo COMPLETED: .*runs/dpo/trainer_log.jsonl <==" "$T/m.err" \
    && ok "logs --metrics of a completed chain: the last job's LLaMA-Factory trainer_log.jsonl" || bad "logs --metrics (exit $rc)" "$T/m.err"
"$LLMC" logs --job sft_job "$T/out" >"$T/l.out" 2>/dev/null; rc=$?
[[ $rc -eq 0 ]] && cmp -s "$T/l.out" "$T/logs/sft_job-$sft.out" && ok "logs --job sft_job: that job's output file" || bad "logs --job (exit $rc)" "$T/l.out"

# ---- cancel: the chain submitted again (the old one completed) and cancelled ----
(cd "$T" && "$LLMC" submit out) >"$T/submit2.log" 2>&1; rc=$?
sft2=$(sed -n 's/^sft_job: job \([0-9]*\)$/\1/p' "$T/submit2.log")
dpo2=$(sed -n 's/^dpo_job: job \([0-9]*\) (after sft_job)$/\1/p' "$T/submit2.log")
[[ $rc -eq 0 && -n $sft2 && $sft2 != "$sft" ]] && ok "submit again once the chain completed: new ids" || bad "submit again (exit $rc)" "$T/submit2.log"
"$LLMC" cancel "$T/out" >"$T/cancel.log" 2>&1; rc=$?
wait_state "$sft2" 30 CANCELLED; wait_state "$dpo2" 30 CANCELLED
if [[ $rc -eq 0 ]] && grep -q "^dpo_job: job $dpo2 (PENDING): cancelling" "$T/cancel.log" && grep -q "^sft_job: job $sft2 (.*): cancelling" "$T/cancel.log" &&
   [[ $(job_field "$sft2" JobState) == CANCELLED && $(job_field "$dpo2" JobState) == CANCELLED ]]; then
    ok "cancel: both jobs cancelled, the dependent one first"
else bad "cancel (exit $rc)" "$T/cancel.log"; fi
expect "status of the cancelled chain" 1 "^chain .*out: failed \(2 jobs: sft_job CANCELLED, dpo_job CANCELLED\)" "$LLMC" status "$T/out"
expect "cancel again: nothing left" 0 "^sft_job: job $sft2 already ended: CANCELLED" "$LLMC" cancel "$T/out"
finish
