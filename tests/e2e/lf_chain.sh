#!/bin/bash
# tests/e2e/lf_chain.sh LLMC — chained jobs on the local Slurm
# (`make test-e2e-lf-chain`, about 1 min): tests/e2e/lf_chain.llm (a LoRA SFT,
# then DPO with `after = sft_job`), submitted with one `bash out/submit.sh`,
# with a stand-in for llamafactory-cli (tests/e2e/stand_in_lf_trainer.sh). The
# SFT job is sent USR2 once (as its --signal does before a time limit): it
# waits for a save and requeues itself. Passes when the DPO job waited for the
# SFT job through its requeue (afterok), then started from the SFT adapter, and
# both completed; and when a DPO job submitted alone, before any SFT, stops at
# once with a message instead of starting LLaMA-Factory.
set -u
LLMC=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/slurm_lib.sh" e2e-lf-chain   # ROOT, CLUSTER, T, ok/bad/finish, job_field, wait_for_line, wait_state
unset SLURM_JOB_ID SLURM_JOBID SLURM_RESTART_COUNT

mkdir -p "$T/logs" && tiny_examples "$T"
cp "$HERE/lf_chain.llm" "$T/lf_chain.llm"
(cd "$T" && "$LLMC" lf_chain.llm -o out) >"$T/llmc.log" 2>&1 || { bad "llmc compile" "$T/llmc.log"; finish; }
[[ -x $T/out/submit.sh ]] && ok "a plan of two jobs gets out/submit.sh" || bad "no out/submit.sh" "$T/llmc.log"
"$CLUSTER" start "$T/slurm" "$T/out/sft_job/slurm.conf" "$T/out/sft_job/gres.conf" >"$T/cluster.log" 2>&1 ||
    { bad "cluster" "$T/cluster.log"; finish; }
eval "$("$CLUSTER" env "$T/slurm")"
export LLAMAFACTORY_CLI=$HERE/stand_in_lf_trainer.sh LLMC_STAND_IN_STEP_SECONDS=0.1 LLMC_STAND_IN_LOG=$T/stand-in.log

# The DPO job alone, before any SFT: it stops with a message, LLaMA-Factory never starts.
alone=$(cd "$T" && sbatch --parsable out/dpo_job/dpo_job.slurm)
if wait_state "$alone" 60 FAILED COMPLETED CANCELLED && [[ $(job_field "$alone" JobState) == FAILED ]] &&
    grep -q "adapter_config.json is missing: job sft_job has not completed" "$T/logs/dpo_job-$alone.err" &&
    [[ ! -s $T/stand-in.log ]]; then
    ok "the DPO job submitted before the SFT job stops with a message"
else bad "the DPO job alone: $(job_field "$alone" JobState)" "$T/logs/dpo_job-$alone.err" "$T/stand-in.log"; fi

(cd "$T" && bash out/submit.sh) >"$T/submit.log" 2>&1 || { bad "submit.sh" "$T/submit.log"; finish; }
sft=$(sed -n 's/^sft_job: job \([0-9]*\)$/\1/p' "$T/submit.log")
dpo=$(sed -n 's/^dpo_job: job \([0-9]*\) (after sft_job: job \([0-9]*\))$/\1/p' "$T/submit.log")
if [[ -n $sft && -n $dpo ]] && [[ $(job_field "$dpo" Dependency) == "afterok:${sft}"* ]]; then
    ok "submit.sh: sft_job $sft, dpo_job $dpo with afterok:$sft"
else bad "submit.sh output" "$T/submit.log"; finish; fi
# USR2 to the SFT job's batch shell once it has saved: the script waits for the next save and requeues.
for ((i = 0; i < 120; i++)); do [[ -f $T/runs/sft/checkpoint-20/trainer_state.json ]] && break; sleep 0.5; done
scancel --batch --signal=USR2 "$sft"
wait_state "$sft" 90 COMPLETED FAILED CANCELLED TIMEOUT
if [[ $(job_field "$sft" JobState) == COMPLETED && $(job_field "$sft" Restarts) == 1 ]] &&
    grep -q "llmc: requeueing job $sft" "$T/logs/sft_job-$sft.err"; then
    ok "the SFT job requeued itself once on USR2 and completed"
else bad "SFT job: $(job_field "$sft" JobState), restarts $(job_field "$sft" Restarts)" "$T/logs/sft_job-$sft.err"; fi
wait_state "$dpo" 90 COMPLETED FAILED CANCELLED TIMEOUT
adapter=$(cd "$T/runs/sft" 2>/dev/null && pwd)
starts=$(grep -c '^start node=0 ' "$T/stand-in.log")
if [[ $(job_field "$dpo" JobState) == COMPLETED ]] &&
    [[ $(grep -c "^start node=[01] restart=0 step=0 model=../../examples/tiny/model adapter=$adapter\$" "$T/stand-in.log") -eq 2 ]] &&
    (( starts == 3 )) && [[ $(grep -n "^start node=0 .*adapter=$adapter" "$T/stand-in.log" | cut -d: -f1) -gt \
        $(grep -n "^done node=0 step=60 " "$T/stand-in.log" | cut -d: -f1) ]] &&
    [[ -f $T/runs/dpo/trainer_state.json ]]; then
    ok "the DPO job started after the SFT job completed (through its requeue), from its adapter, and completed"
else bad "DPO job: $(job_field "$dpo" JobState)" "$T/stand-in.log" "$T/logs/dpo_job-$dpo.err"; fi
finish
