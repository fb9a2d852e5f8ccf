#!/bin/bash
# The CUDA suite for machines without a GPU; closes with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
pass=0 fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
tmp=$(mktemp -d /tmp/llmc-cuda-ci.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bin=${BUILD:-build}/llmc-train-cuda
# The CUDA runtime maps memory where ASan's shadow gap would be.
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0}

if make -s cuda SAN="${SAN:-0}" > "$tmp/build.log" 2>&1 && [[ -x $bin ]]; then ok "make cuda"
else bad "make cuda"; tail -30 "$tmp/build.log"; echo "$pass passed, $fail failed"; exit 1; fi

# expect NAME WANT_EXIT WANT_TEXT CMD...: exit status and a phrase of the output
expect() {
    local name=$1 want=$2 text=$3; shift 3
    "$@" > "$tmp/out" 2>&1
    local rc=$?
    if [[ $rc -eq $want ]] && grep -qF -- "$text" "$tmp/out"; then ok "$name"
    else bad "$name (exit $rc, want $want and '$text')"; head -5 "$tmp/out"; fi
}

# Parameter counts of the published checkpoints (Qwen2.5-0.5B: 494,032,768; 1.5B: 1,543,714,304).
expect "qwen2.5-0.5b parameter count" 0 "parameters 494032768" $bin params --model qwen2.5-0.5b
expect "qwen2.5-1.5b parameter count" 0 "parameters 1543714304" $bin params --model qwen2.5-1.5b
expect "HF tensor names" 0 "model.layers.23.self_attn.k_proj.bias" $bin params --model qwen2.5-0.5b
cat > "$tmp/config.json" <<'JSON'
{"model_type": "qwen2", "num_hidden_layers": 24, "hidden_size": 896, "num_attention_heads": 14,
 "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936, "rope_theta": 1000000.0,
 "rms_norm_eps": 1e-06, "tie_word_embeddings": false}
JSON
# Untied: one more [vocab, hidden] matrix (lm_head.weight).
expect "config.json, untied head" 0 "parameters 630167424" $bin params --config "$tmp/config.json"
expect "config.json lm_head" 0 "lm_head.weight" $bin params --config "$tmp/config.json"
echo '{"model_type": "qwen2", "hidden_size": 896}' > "$tmp/partial.json"
expect "config.json missing keys" 2 "num_hidden_layers" $bin params --config "$tmp/partial.json"
echo '{"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 100, "vocab_size": 512}' > "$tmp/odd.json"
expect "shape the kernels cannot take" 1 "multiples of 8" $bin params --config "$tmp/odd.json"
expect "unknown model" 2 "unknown model 'qwen9'" $bin params --model qwen9
expect "bad integer option" 2 "bad integer" $bin bench --model tiny --batch x
expect "unknown option" 2 "unknown option '--frobnicate'" $bin bench --frobnicate
expect "unknown command" 2 "unknown command 'train'" $bin train
expect "check needs its files" 2 "check needs" $bin check --config "$tmp/config.json"
expect "run without a plan" 2 "usage: llmc-train-cuda run" $bin run
expect "run: the one loop's options (--eval-shards)" 2 "--eval-shards DIR" $bin run
expect "run with a missing plan" 2 "$tmp/nope.json" $bin run "$tmp/nope.json"
echo '{"llmc_plan_version": 1' > "$tmp/broken.json"
expect "run with a broken plan" 2 "broken.json" $bin run "$tmp/broken.json"
expect "help" 0 "run PLAN.json" $bin --help
echo '{"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512, "head_dim": 16}' > "$tmp/qwen3.json"
expect "Qwen3 (qk_norm) refused" 2 "qk_norm" $bin params --config "$tmp/qwen3.json"
if make -s attn-check SAN="${SAN:-0}" > "$tmp/attn.log" 2>&1; then ok "make attn-check"
else bad "make attn-check"; tail -20 "$tmp/attn.log"; fi
expect "attention documents for cuDNN's ragged layout" 0 "5 passed, 0 failed" ${BUILD:-build}/attn_check --documents
# What the CUDA backend does not do yet is refused before any rank starts (cu_unsupported).
python3 - tests/cpu/tiny_plan.json "$tmp/zero3.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["model"].update(heads=2, kv_heads=2, head_dim=16)
p["parallel"].update(zero_stage=3, world_size=2, data_parallel=2)
p["train"]["global_batch"] = 2 * p["train"]["global_batch"]
json.dump(p, open(sys.argv[2], "w"))
PY
expect "run: ZeRO-3 on 2 ranks refused" 2 "parallel.zero_stage = 3 on 2 ranks: the CUDA backend shards optimizer states only" $bin run "$tmp/zero3.json"
python3 - tests/cpu/tiny_plan.json "$tmp/lora.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["model"].update(heads=2, kv_heads=2, head_dim=16)
p["finetune"] = {"method": "lora", "lora_rank": 4, "lora_alpha": 8, "lora_dropout": 0.0, "lora_target": ["q_proj"],
                 "rslora": False, "freeze_layers": 1}
json.dump(p, open(sys.argv[2], "w"))
PY
expect "run: LoRA rank 4 refused" 2 "lora_rank = 4: the CUDA backend takes ranks that are multiples of 8" $bin run "$tmp/lora.json"
python3 - "$tmp/lora.json" "$tmp/lora2.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["finetune"]["lora_rank"] = 8
p["parallel"].update(world_size=2, data_parallel=2)
p["train"]["global_batch"] = 2 * p["train"]["global_batch"]
json.dump(p, open(sys.argv[2], "w"))
PY
expect "run: LoRA on 2 ranks refused" 2 "finetune.method = lora runs on one GPU without offload in the CUDA backend" $bin run "$tmp/lora2.json"
if ! nvidia-smi -L > /dev/null 2>&1; then
    expect "bench without a GPU" 1 "no CUDA device" $bin bench --model tiny --steps 1
    expect "attn_check without a GPU" 1 "no GPU" ${BUILD:-build}/attn_check
fi
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
