#!/bin/bash
# tests/cpu/loop_test.sh LLMC_TRAIN LOOP_TEST MAKE_SHARDS — the one training loop
# (runtime/train/train_loop.c) over a backend that keeps its own copy of the training
# state, as llmc-train-cuda's does (tests/cpu/loop_test.c): the loop must write
# the Prometheus file, evaluate the held-out shards and write result.json for any
# backend, hand the state over at init and resume and take it back for every
# checkpoint and the export. The arithmetic is the CPU backend's, so every file
# must equal llmc-train's (the step times aside).
set -u
TRAIN=$(realpath "$1"); LOOP=$(realpath "$2"); MKSH=$(realpath "$3")
NAME=loop BIN=$TRAIN
source "$(dirname "$0")/synth_lib.sh"
TRAIN=$BIN

mkdir -p "$T/shards" "$T/eval"
"$MKSH" "$T/shards" 64 32 64 7 >/dev/null 2>&1 && "$MKSH" "$T/eval" 16 32 64 99 >/dev/null 2>&1 \
    || { bad make_shards; finish cpu-loop; }
mkrun() {
    mkdir -p "$1"; cp -r "$T/shards" "$T/eval" "$1/"
    cp "$HERE/tiny_plan.json" "$1/plan.json"
}
# the metrics without the wall-clock fields
curve() { $PY -c 'import json,sys; [print(*(repr(json.loads(l)[k]) for k in ("step","loss","lr","grad_norm","tokens"))) for l in open(sys.argv[1])]' "$1"; }

# the held-out argmax's rule (first of the greatest, NaN never; the CUDA kernel's too)
"$LOOP" argmax > "$T/argmax.log" 2>&1 && ok "logits_argmax: $(tail -1 "$T/argmax.log")" ||
    bad "logits_argmax" "$T/argmax.log"
mkrun "$T/cpu"; (cd "$T/cpu" && "$TRAIN" run plan.json --eval-shards eval) >"$T/cpu.log" 2>&1; rc1=$?
mkrun "$T/mir"; (cd "$T/mir" && "$LOOP" run plan.json --eval-shards eval) >"$T/mir.log" 2>&1; rc2=$?
if [[ $rc1 -eq 0 && $rc2 -eq 0 ]]; then ok "llmc-train and the mirrored backend: both exit 0"
else bad "runs (exit $rc1, $rc2)" "$T/cpu.log" "$T/mir.log"; fi

P=$T/mir/run/llmc_train.prom
if [[ -f $P ]] && grep -q '^llmc_train_step{llmc_job="[^"]*"} 12$' "$P" && grep -q '^llmc_train_total_steps{llmc_job="[^"]*"} 12$' "$P" \
   && grep -q '^llmc_train_loss{' "$P" && grep -q '^llmc_train_tokens_total{' "$P" && grep -q '^llmc_train_checkpoint_step{' "$P" \
   && diff <(grep -oE '^[a-z_]+' "$T/cpu/run/llmc_train.prom") <(grep -oE '^[a-z_]+' "$P") >/dev/null
then ok "Prometheus file: step 12 of 12, loss, tokens, checkpoint step; the same metrics as llmc-train's"
else bad "Prometheus file" "$P" "$T/mir.log"; fi

if cmp -s "$T/cpu/run/result.json" "$T/mir/run/result.json" && $PY - "$T/mir/run/result.json" "$T/eval/index.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1])); idx = json.load(open(sys.argv[2]))
sys.exit(0 if r["steps"] == 12 and r["unigram_baseline"] > 0 and r["eval_documents"] == idx["n_docs"]
         and 0 < r["eval_correct"] <= r["eval_documents"] and r["eval_loss"] < r["unigram_baseline"] else 1)
PYEOF
then ok "result.json: steps, unigram baseline, held-out loss and exact match of every document, = llmc-train's"
else bad "result.json" "$T/mir/run/result.json" "$T/cpu/run/result.json"; fi

if diff <(curve "$T/cpu/run/metrics.jsonl") <(curve "$T/mir/run/metrics.jsonl") >/dev/null \
   && cmp -s "$T/cpu/run/final/model.safetensors" "$T/mir/run/final/model.safetensors" \
   && cmp -s "$T/cpu/ckpt/step-00000012/optimizer.safetensors" "$T/mir/ckpt/step-00000012/optimizer.safetensors"
then ok "metrics, final export and last checkpoint: bit-identical to llmc-train"
else bad "state handed over wrongly" "$T/mir.log"; fi

[[ $(wc -l < "$T/mir/run/mirror_metrics.jsonl") -eq 12 ]] && grep -q "training 12 steps on 1 mirror(s): .*, state mirrored, unigram baseline" "$T/mir.log" \
    && grep -q "done: 12 steps, final loss .*, state set 1x, gathered [0-9]*x; model in" "$T/mir.log" \
    && grep -q "held-out: loss .* greedy exact match" "$T/mir.log" \
    && ok "backend side file and log phrases (as llmc-train-cuda's gpu_metrics.jsonl, GPU memory)" \
    || bad "backend extras" "$T/mir.log"

# stop after 5 (checkpoint from the backend's state), resume (state handed back): same bits
mkrun "$T/res"
(cd "$T/res" && "$LOOP" run plan.json --stop-after 5) >"$T/res1.log" 2>&1; rc1=$?
cp "$T/res/run/llmc_train.prom" "$T/stop.prom" 2>/dev/null
(cd "$T/res" && "$LOOP" run plan.json) >"$T/res2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 3 && $rc2 -eq 0 ]] && grep -q "resumed from .* at step 5" "$T/res2.log" \
   && cmp -s "$T/cpu/run/final/model.safetensors" "$T/res/run/final/model.safetensors" \
   && cmp -s "$T/cpu/ckpt/step-00000012/optimizer.safetensors" "$T/res/ckpt/step-00000012/optimizer.safetensors" \
   && [[ $(wc -l < "$T/res/run/mirror_metrics.jsonl") -eq 12 ]]
then ok "mirrored backend: stop at 5 (exit 3) + resume -> bit-identical to llmc-train's uninterrupted run"
else bad "stop/resume (exit $rc1, $rc2)" "$T/res1.log" "$T/res2.log"; fi

# the Prometheus file is rewritten after every checkpoint: the stop checkpoint at 5 (every_steps 4)
# and the final one at 12, not the one before them
ck() { sed -nE 's/^llmc_train_checkpoint_step\{[^}]*\} ([0-9]+)$/\1/p' "$1" 2>/dev/null; }
if [[ $(ck "$T/stop.prom") == 5 && $(ck "$T/mir/run/llmc_train.prom") == 12 && $(ck "$T/cpu/run/llmc_train.prom") == 12 ]]
then ok "Prometheus checkpoint step: 5 after the stop checkpoint, 12 after the final one"
else bad "Prometheus checkpoint step: $(ck "$T/stop.prom") after the stop at 5, $(ck "$T/cpu/run/llmc_train.prom") at the end (want 5, 12)"; fi

finish cpu-loop
