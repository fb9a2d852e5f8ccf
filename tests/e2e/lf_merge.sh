#!/bin/bash
# tests/e2e/lf_merge.sh LLMC — LoRA SFT -> merge -> full DPO on the local Slurm
# (`make test-e2e-lf-merge`, about 1 min): tests/e2e/lf_merge.llm, three jobs
# submitted with one `llmc submit out` (out/submit.sh), with a stand-in for llamafactory-cli
# (tests/e2e/stand_in_lf_trainer.sh) that trains, and exports as
# `llamafactory-cli export` does: it reads the base and the SFT adapter and
# writes the merged model, which the DPO step must then load
# (LLMC_STAND_IN_MODELS=1: a start without model_name_or_path/config.json
# fails). Passes when the merge job waited for the SFT job and merged its final
# adapter into the base at the merge's output, the DPO job waited for the merge
# and trained the merged model (full), each in that order; and when a merge
# job submitted alone, before any SFT, stops with a message before LLaMA-Factory;
# and when llmc submit records the merge job and llmc status shows it with
# the merged model written.
set -u
LLMC=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/slurm_lib.sh" e2e-lf-merge   # ROOT, CLUSTER, T, ok/bad/finish, job_field, wait_state
unset SLURM_JOB_ID SLURM_JOBID SLURM_RESTART_COUNT
line_of() { grep -n "$1" "$T/stand-in.log" | head -n 1 | cut -d: -f1; }

mkdir -p "$T/logs" "$T/models/base" && tiny_examples "$T"
cp "$HERE/lf_merge.llm" "$T/lf_merge.llm"
# the base model: config.json of the plan's shape (llmc check reads and compares it)
cat >"$T/models/base/config.json" <<'JSON'
{"model_type": "qwen2", "num_hidden_layers": 24, "hidden_size": 896, "num_attention_heads": 14,
 "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936, "max_position_embeddings": 32768,
 "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": false}
JSON
(cd "$T" && "$LLMC" lf_merge.llm -o out) >"$T/llmc.log" 2>&1 || { bad "llmc compile" "$T/llmc.log"; finish; }
if [[ -f $T/out/merge_job/llamafactory_merge.yaml && -x $T/out/merge_job/merge_job.slurm && ! -e $T/out/merge_job/plan.json ]]; then
    ok "the merge job gets its script and llamafactory_merge.yaml"
else bad "merge job files" "$T/llmc.log"; fi
"$CLUSTER" start "$T/slurm" "$T/out/sft_job/slurm.conf" "$T/out/sft_job/gres.conf" >"$T/cluster.log" 2>&1 ||
    { bad "cluster" "$T/cluster.log"; finish; }
eval "$("$CLUSTER" env "$T/slurm")"
export LLAMAFACTORY_CLI=$HERE/stand_in_lf_trainer.sh LLMC_STAND_IN_STEP_SECONDS=0.1 LLMC_STAND_IN_LOG=$T/stand-in.log
export LLMC_STAND_IN_MODELS=1

# The merge job alone, before any SFT: it stops with a message, LLaMA-Factory never starts.
alone=$(cd "$T" && sbatch --parsable out/merge_job/merge_job.slurm)
if wait_state "$alone" 60 FAILED COMPLETED CANCELLED && [[ $(job_field "$alone" JobState) == FAILED ]] &&
    grep -q "adapter_config.json is missing: job sft_job has not completed" "$T/logs/merge_job-$alone.err" &&
    [[ ! -s $T/stand-in.log && ! -e $T/models/merged ]]; then
    ok "the merge job submitted before the SFT job stops with a message"
else bad "the merge job alone: $(job_field "$alone" JobState)" "$T/logs/merge_job-$alone.err" "$T/stand-in.log"; fi

(cd "$T" && "$LLMC" submit out) >"$T/submit.log" 2>&1 || { bad "llmc submit" "$T/submit.log"; finish; }
sft=$(sed -n 's/^sft_job: job \([0-9]*\)$/\1/p' "$T/submit.log")
merge=$(sed -n 's/^merge_job: job \([0-9]*\) (after sft_job)$/\1/p' "$T/submit.log")
dpo=$(sed -n 's/^dpo_job: job \([0-9]*\) (after merge_job)$/\1/p' "$T/submit.log")
if [[ -n $sft && -n $merge && -n $dpo ]] && [[ $(job_field "$merge" Dependency) == "afterok:${sft}"* ]] &&
    [[ $(job_field "$dpo" Dependency) == "afterok:${merge}"* ]]; then
    ok "llmc submit: sft_job $sft, merge_job $merge afterok:$sft, dpo_job $dpo afterok:$merge"
else bad "submit.sh output" "$T/submit.log"; finish; fi
wait_state "$dpo" 120 COMPLETED FAILED CANCELLED TIMEOUT
for j in "$sft" "$merge" "$dpo"; do scontrol show job "$j" >/dev/null 2>&1; done

state=$(cat "$T/runs/sft/model.safetensors" 2>/dev/null)
if [[ $(job_field "$sft" JobState) == COMPLETED && -f $T/runs/sft/adapter_config.json && -n $state ]]; then
    ok "the SFT job trained its LoRA adapter ($state)"
else bad "SFT job: $(job_field "$sft" JobState)" "$T/logs/sft_job-$sft.err" "$T/stand-in.log"; fi
want="export base=$T/models/base adapter=$T/runs/sft dir=$T/models/merged state=$state"
if [[ $(job_field "$merge" JobState) == COMPLETED ]] && grep -qxF "$want" "$T/stand-in.log" &&
    [[ $(cat "$T/models/merged/model.safetensors") == "merged $state" ]] &&
    cmp -s "$T/models/base/config.json" "$T/models/merged/config.json" &&
    grep -q "^llmc: merged model in $T/out/merge_job/../../models/merged$" "$T/logs/merge_job-$merge.out" &&
    (( $(line_of "^export ") > $(line_of "^done node=0 step=30 ") )); then
    ok "the merge job ran after the SFT job and merged its final adapter into the base at models/merged"
else bad "merge job: $(job_field "$merge" JobState)" "$T/logs/merge_job-$merge.err" "$T/logs/merge_job-$merge.out" "$T/stand-in.log"; fi
start=$(sed -n 's/^start node=0 restart=0 step=0 model=\(.*\) adapter=$/\1/p' "$T/stand-in.log" | tail -n 1)
if [[ $(job_field "$dpo" JobState) == COMPLETED && -n $start ]] &&
    [[ $(cd "$T/out/dpo_job" && cd "$start" 2>/dev/null && pwd) == "$T/models/merged" ]] &&
    grep -q '^finetuning_type: "full"' "$T/out/dpo_job/llamafactory_train.yaml" &&
    (( $(grep -c '^start node=0 ' "$T/stand-in.log") == 2 )) &&
    (( $(line_of "^start node=0 restart=0 step=0 model=$start ") > $(line_of "^export ") )) &&
    [[ -f $T/runs/dpo/trainer_state.json && -f $T/runs/dpo/config.json ]]; then
    ok "the DPO job ran after the merge and trained the merged model in full"
else bad "DPO job: $(job_field "$dpo" JobState), model $start" "$T/logs/dpo_job-$dpo.err" "$T/stand-in.log"; fi
# llmc status: the chain with the merge job, and the merge job's own directory
(cd "$T" && "$LLMC" status out) >"$T/status.log" 2>&1
(cd "$T" && "$LLMC" status --format json out/merge_job) >"$T/status-merge.json" 2>&1
if grep -q "^chain out: completed (3 jobs: sft_job COMPLETED, merge_job COMPLETED, dpo_job COMPLETED)$" "$T/status.log" &&
    grep -q "^  merged      out/merge_job/../../models/merged: written (config.json)$" "$T/status.log" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["kind"] == "merge" and d["merged"]
        and d["status"] == "done" and d["slurm"]["job_id"] == sys.argv[2]))' "$T/status-merge.json" "$merge"; then
    ok "llmc status shows the merge job (recorded by llmc submit) and its merged model, in the chain and alone"
else bad "llmc status of the chain" "$T/status.log" "$T/status-merge.json" "$T/out/jobs.json"; fi
finish
