#!/bin/bash
# stand_in_lf_trainer.sh — takes llamafactory-cli's place (LLAMAFACTORY_CLI=...)
# in tests/e2e/lf_timelimit.sh: `train YAML` trains as the HF Trainer under
# LLaMA-Factory does, as far as the job script can see it.
#   - Resume: the newest directory OUTPUT_DIR/checkpoint-N (transformers'
#     get_last_checkpoint, which LLaMA-Factory calls with overwrite_output_dir
#     false); its trainer_state.json gives the step and the state. A newest
#     checkpoint without trainer_state.json fails the start, as a resume from
#     it fails the real Trainer.
#   - Steps: $LLMC_STAND_IN_STEP_SECONDS each (default 0); the state is a hash
#     chained over the step numbers, so a run that skips or repeats steps ends
#     with another state than an uninterrupted one.
#   - Saves (node 0 only, as rank 0 writes the Trainer's files): every
#     save_steps and at max_steps, checkpoint-N/ with model.safetensors first
#     and trainer_state.json last, $LLMC_STAND_IN_SAVE_SECONDS (default 0) apart;
#     then only the newest save_total_limit checkpoints are kept (rotation).
#     At the end trainer_state.json and model.safetensors in OUTPUT_DIR, with
#     adapter_config.json (finetuning_type lora) or config.json, as
#     save_model writes them.
#   - Log: node 0 appends one line per step to OUTPUT_DIR/trainer_log.jsonl in
#     LLaMA-Factory's LogCallback format (current_steps, total_steps, loss ...).
#   - adapter_name_or_path (a later stage of a chain): the directory must hold
#     adapter_config.json, else the start fails, as loading the adapter does.
#   - With LLMC_STAND_IN_MODELS=1, model_name_or_path must hold config.json,
#     as loading the model needs (the older tests' plans name a model directory
#     that is not there).
# Each start appends a line to $LLMC_STAND_IN_LOG (with the model and adapter).
#
# `export YAML` merges as `llamafactory-cli export` does (a merge job): the
# YAML must say finetuning_type lora and name template, export_dir, the base
# (model_name_or_path, with config.json) and the adapter (adapter_config.json
# and model.safetensors, whose state it takes); it writes export_dir/config.json
# (the base's), model.safetensors ("merged STATE", STATE the adapter's) and
# appends "export base=... adapter=... dir=... state=..." to the log.
set -u
[[ ${1:-} == train || ${1:-} == export ]] && [[ -f ${2:-} ]] || { echo "stand-in: usage: train|export YAML" >&2; exit 2; }
yaml=$2
key() { sed -n "s/^$1: //p" "$yaml" | head -n 1 | sed 's/^"\(.*\)"$/\1/'; }
absdir() { [[ $1 == /* ]] && echo "$1" || echo "$PWD/$1"; }
if [[ $1 == export ]]; then
    base=$(key model_name_or_path) adapter=$(key adapter_name_or_path) dir=$(key export_dir)
    [[ $(key finetuning_type) == lora && -n $(key template) && -n $dir ]] ||
        { echo "stand-in: $yaml: an export needs finetuning_type lora, template and export_dir" >&2; exit 2; }
    base=$(absdir "$base") adapter=$(absdir "$adapter") dir=$(absdir "$dir")
    [[ -f $base/config.json ]] || { echo "stand-in: no model at $base (config.json)" >&2; exit 1; }
    [[ -f $adapter/adapter_config.json && -f $adapter/model.safetensors ]] ||
        { echo "stand-in: no adapter at $adapter" >&2; exit 1; }
    state=$(cat "$adapter/model.safetensors")
    mkdir -p "$dir"
    echo "merged $state" >"$dir/model.safetensors"
    cp "$base/config.json" "$dir/config.json"   # save_pretrained writes config.json with the weights
    echo "export base=$(cd "$base" && pwd) adapter=$(cd "$adapter" && pwd) dir=$(cd "$dir" && pwd) state=$state" >>"${LLMC_STAND_IN_LOG:-/dev/null}"
    exit 0
fi
out=$(key output_dir) save=$(key save_steps) keep=$(key save_total_limit) max=$(key max_steps)
[[ -n $out && $save =~ ^[0-9]+$ && $keep =~ ^[0-9]+$ && $max =~ ^[0-9]+$ ]] ||
    { echo "stand-in: $yaml lacks output_dir, save_steps, save_total_limit or max_steps" >&2; exit 2; }
[[ $out == /* ]] || out=$PWD/$out
node=${NODE_RANK:-0}
model=$(key model_name_or_path) adapter=$(key adapter_name_or_path) ftype=$(key finetuning_type)
if [[ ${LLMC_STAND_IN_MODELS:-0} == 1 && ! -f $(absdir "$model")/config.json ]]; then
    echo "stand-in: no model at $model (config.json)" >&2; exit 1
fi
if [[ -n $adapter ]]; then
    [[ $adapter == /* ]] || adapter=$PWD/$adapter
    [[ -f $adapter/adapter_config.json ]] || { echo "stand-in: no adapter at $adapter" >&2; exit 1; }
    adapter=$(cd "$adapter" && pwd)
fi

last=-1
for d in "$out"/checkpoint-*; do
    n=${d##*/checkpoint-}
    if [[ -d $d && $n =~ ^[0-9]+$ ]] && (( n > last )); then last=$n; fi
done
step=0 state=start
if (( last >= 0 )); then
    f=$out/checkpoint-$last/trainer_state.json
    [[ -f $f ]] || { echo "stand-in: cannot resume: $f: no such file" >&2; exit 1; }
    step=$(sed -n 's/.*"global_step": \([0-9]*\).*/\1/p' "$f")
    state=$(sed -n 's/.*"state": "\([0-9a-f]*\)".*/\1/p' "$f")
fi
echo "start node=$node restart=${SLURM_RESTART_COUNT:-0} step=$step model=$model adapter=$adapter" >>"${LLMC_STAND_IN_LOG:-/dev/null}"

save_checkpoint() {
    local d=$out/checkpoint-$step
    mkdir -p "$d"
    echo "$state" >"$d/model.safetensors"
    sleep "${LLMC_STAND_IN_SAVE_SECONDS:-0}"
    printf '{"global_step": %d, "state": "%s"}\n' "$step" "$state" >"$d/trainer_state.json"
    local all=() n
    for d in "$out"/checkpoint-*; do
        n=${d##*/checkpoint-}
        [[ -d $d && $n =~ ^[0-9]+$ ]] && all+=("$n")
    done
    mapfile -t all < <(printf '%s\n' "${all[@]}" | sort -n)
    for ((n = 0; n + keep < ${#all[@]}; n++)); do rm -rf -- "$out/checkpoint-${all[n]}"; done
}

mkdir -p "$out"
while (( step < max )); do
    sleep "${LLMC_STAND_IN_STEP_SECONDS:-0}"
    step=$((step + 1))
    state=$(printf '%s %d' "$state" "$step" | sha256sum | cut -c1-16)
    if (( node == 0 )); then   # LLaMA-Factory's LogCallback line (logging_steps 1), as llmc status and logs read it
        l=$(( step < 290 ? 300 - step : 10 ))
        printf '{"current_steps": %d, "total_steps": %d, "loss": %d.%02d, "lr": 0.0001, "epoch": 0.01, "percentage": %d, "elapsed_time": "0:00:%02d", "remaining_time": "0:00:01"}\n' \
            "$step" "$max" $((l / 100)) $((l % 100)) $((100 * step / max)) $((step % 60)) >>"$out/trainer_log.jsonl"
    fi
    if (( node == 0 && (step % save == 0 || step == max) )); then save_checkpoint; fi
done
if (( node == 0 )); then
    echo "$state" >"$out/model.safetensors"
    printf '{"global_step": %d, "state": "%s"}\n' "$step" "$state" >"$out/trainer_state.json"
    if [[ $ftype == lora ]]; then echo '{"peft_type": "LORA"}' >"$out/adapter_config.json"; else echo '{}' >"$out/config.json"; fi
fi
echo "done node=$node step=$step state=$state" >>"${LLMC_STAND_IN_LOG:-/dev/null}"
