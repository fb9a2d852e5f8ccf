#!/bin/bash
# tests/cpu/finetune_test.sh LLMC_TRAIN MAKE_SHARDS — freeze and LoRA through `llmc-train run`
# (the math against PyTorch is test_model's, fixtures from make_lora_fixtures.py):
#   - LoRA on a pretrained base (a full run's export): the loss falls; checkpoints hold the
#     adapters and their moments only; OUT/adapter is a PEFT adapter (adapter_config.json,
#     adapter_model.safetensors under PEFT's names and shapes); OUT/final is the merged
#     model, W + scale B A of the base and the adapter; stop + resume: the same bits
#   - freeze: only the trainable layer changes; the checkpoint holds it alone; resume
#   - refusals: a LoRA checkpoint for a full plan (fingerprint), LoRA with ZeRO or dropout
set -u
BIN=$(realpath "$1"); MKSH=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
train_prelude cpu-finetune
export LLMC_THREADS=1
PY=/usr/bin/python3   # Debian's python3-torch

# mkrun DIR METHOD [EDIT]: 12 steps on the shared shards; lora on q, v and down, rank 4, alpha 8
mkrun() {
    mkdir -p "$1"
    $PY - "$HERE/tiny_plan.json" "$1/plan.json" "$2" "${3:-pass}" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["train"].update(max_steps=12, lr=0.05)
p["data"]["shards_dir"] = "../shards"
p["finetune"] = {"method": sys.argv[3], "lora_rank": 4, "lora_alpha": 8, "lora_dropout": 0.0,
                 "lora_target": ["q_proj", "v_proj", "down_proj"], "rslora": False, "freeze_layers": 1}
exec(sys.argv[4])
json.dump(p, open(sys.argv[2], "w"), indent=1)
PYEOF
}
run() { (cd "$1" && shift && "$BIN" run plan.json "$@") >"$T/log" 2>&1; }

mkdir -p "$T/shards"
"$MKSH" "$T/shards" 96 32 64 7 >/dev/null 2>&1 || { bad make_shards; finish; }

# the base: a full run's HF export
mkrun "$T/base" full 'p["train"]["max_steps"] = 4'
run "$T/base" || { bad "full base run" "$T/log"; finish; }
PRE='p["model"].update(init="pretrained", path="../base/run/final")'

# 1. LoRA on the pretrained base
mkrun "$T/lora" lora "$PRE"
run "$T/lora"; rc=$?
if [[ $rc -eq 0 ]] && grep -q 'lora: 1664 of 24480 parameters trainable' "$T/log" &&
   $PY - "$T/lora/run/metrics.jsonl" <<'PYEOF'
import json, sys
l = [json.loads(x)["loss"] for x in open(sys.argv[1])]
sys.exit(0 if len(l) == 12 and sum(l[-3:]) / 3 < sum(l[:3]) / 3 - 0.05 else 1)
PYEOF
then ok "LoRA on a pretrained base: 1664 trainable parameters, the loss falls over 12 steps (mean of 3)"
else bad "LoRA run (exit $rc)" "$T/log"; fi
cp "$T/log" "$T/lora.log"

# the files: PEFT adapter, merged export, adapter-only checkpoints
if $PY - "$T/lora" "$T/base/run/final/model.safetensors" <<'PYEOF'
import json, math, struct, sys
import torch
d, base_path = sys.argv[1], sys.argv[2]
def st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n)); data = f.read()
    out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        b, e = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(data[b:e]), dtype=torch.float32).reshape(v["shape"]).double()
    return out
cfg = json.load(open(d + "/run/adapter/adapter_config.json"))
want = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "lora_dropout": 0, "bias": "none", "use_rslora": False,
        "task_type": "CAUSAL_LM", "target_modules": ["q_proj", "v_proj", "down_proj"]}
assert all(cfg[k] == v for k, v in want.items()), cfg
ad = st(d + "/run/adapter/adapter_model.safetensors")
mods = {"q_proj": "self_attn", "v_proj": "self_attn", "down_proj": "mlp"}
names = {f"base_model.model.model.layers.{l}.{g}.{m}.lora_{x}.weight" for l in range(2) for m, g in mods.items() for x in "AB"}
assert set(ad) == names, sorted(set(ad) ^ names)
H, kd, F = 32, 2 * 8, 64
shape = {"q_proj": (32, H), "v_proj": (kd, H), "down_proj": (H, F)}
base, merged = st(base_path), st(d + "/run/final/model.safetensors")
assert set(base) == set(merged)
worst = 0.0
for l in range(2):
    for m, g in mods.items():
        pre = f"base_model.model.model.layers.{l}.{g}.{m}"
        A, B = ad[pre + ".lora_A.weight"], ad[pre + ".lora_B.weight"]
        assert tuple(A.shape) == (4, shape[m][1]) and tuple(B.shape) == (shape[m][0], 4), (pre, A.shape, B.shape)
        assert B.abs().max() > 0, pre + ": B never trained"
        w = f"model.layers.{l}.{g}.{m}.weight"
        ref = base[w] + 2.0 * (B @ A)   # scale alpha / r = 2
        worst = max(worst, float(((merged[w] - ref).abs() / (1e-6 + 1e-6 * ref.abs())).max()))
for k in base:   # what LoRA does not target is the base, bit for bit
    if not any(f".{m}." in k for m in mods):
        assert torch.equal(base[k], merged[k]), k
assert worst <= 1, worst
ck = open(d + "/ckpt/latest").read().strip()
assert set(st(f"{d}/ckpt/{ck}/model.safetensors")) == names
PYEOF
then ok "LoRA export: PEFT adapter_config.json + adapter_model.safetensors (PEFT names, shapes); final = base + 2 B A; checkpoint = adapters"
else bad "LoRA files" "$T/lora.log"; fi

# stop after step 4, resume: the adapters and their moments bit-identical to the uninterrupted run
mkrun "$T/lstop" lora "$PRE"
run "$T/lstop" --stop-after 4; rc1=$?
run "$T/lstop"; rc2=$?
if [[ $rc1 -eq 3 && $rc2 -eq 0 ]] && grep -q 'resumed from ./ckpt at step 4' "$T/log" &&
   cmp -s "$T/lora/run/adapter/adapter_model.safetensors" "$T/lstop/run/adapter/adapter_model.safetensors" &&
   cmp -s "$T/lora/ckpt/step-00000012/optimizer.safetensors" "$T/lstop/ckpt/step-00000012/optimizer.safetensors"
then ok "LoRA: stop at step 4 + resume gives the uninterrupted adapters and moments bit for bit"
else bad "LoRA stop/resume (exit $rc1, $rc2)" "$T/log"; fi

# a LoRA checkpoint belongs to its plan: another alpha (same shapes) is refused by the
# fingerprint, a full plan by the tensors the checkpoint lacks
mkrun "$T/lstop" lora "$PRE; p['finetune']['lora_alpha'] = 16"
run "$T/lstop"; rc=$?
[[ $rc -eq 1 ]] && grep -q 'was written with finetune.lora_alpha 8, the plan says 16' "$T/log" \
    && ok "a LoRA checkpoint for another lora_alpha: refused by the fingerprint" || bad "LoRA checkpoint, alpha 16 (exit $rc)" "$T/log"
mkrun "$T/lstop" full "$PRE"
run "$T/lstop"; rc=$?
[[ $rc -eq 1 ]] && grep -q 'model.safetensors: tensor model.embed_tokens.weight is missing' "$T/log" \
    && ok "a LoRA checkpoint for a full plan: refused (it holds no base weights)" || bad "LoRA checkpoint, full plan (exit $rc)" "$T/log"

# 2. freeze: the last layer trains, nothing else moves
mkrun "$T/frz" freeze "$PRE"
run "$T/frz"; rc=$?
if [[ $rc -eq 0 ]] && grep -q 'freeze: 9344 of 22816 parameters trainable' "$T/log" &&
   $PY - "$T/base/run/final/model.safetensors" "$T/frz/run/final/model.safetensors" "$T/frz/ckpt" <<'PYEOF'
import json, struct, sys
def st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n)); data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a, b = st(sys.argv[1]), st(sys.argv[2])
moved = {k for k in a if a[k] != b[k]}
layer1 = {k for k in a if k.startswith("model.layers.1.")}
assert moved == layer1, sorted(moved ^ layer1)
ck = open(sys.argv[3] + "/latest").read().strip()
assert set(st(f"{sys.argv[3]}/{ck}/model.safetensors")) == layer1
PYEOF
then ok "freeze_layers = 1: exactly layer 1's tensors change; checkpoints hold layer 1 alone"
else bad "freeze (exit $rc)" "$T/log"; fi
mkrun "$T/fstop" freeze "$PRE"
run "$T/fstop" --stop-after 4; rc1=$?
run "$T/fstop"; rc2=$?
[[ $rc1 -eq 3 && $rc2 -eq 0 ]] && cmp -s "$T/frz/run/final/model.safetensors" "$T/fstop/run/final/model.safetensors" \
    && ok "freeze: stop + resume, final weights bit-identical" || bad "freeze stop/resume (exit $rc1, $rc2)" "$T/log"

# 3. what the CPU backend refuses before starting (exit 2, the key named)
refuse() {   # NAME METHOD EDIT TEXT
    mkrun "$T/ref" "$2" "$PRE; $3"
    run "$T/ref"; local rc=$?
    [[ $rc -eq 2 ]] && grep -qF "$4" "$T/log" && ok "refused: $1" || bad "refusal $1 (exit $rc)" "$T/log"
}
refuse "LoRA with ZeRO" lora 'p["parallel"]["zero_stage"] = 2' "finetune.method = lora with parallel.zero_stage = 2"
refuse "LoRA dropout" lora 'p["finetune"]["lora_dropout"] = 0.1' "finetune.lora_dropout = 0.1: the CPU backend trains LoRA without dropout"
refuse "qlora" qlora 'pass' "finetune.method = qlora"
mkrun "$T/ref" freeze "$PRE; p['finetune']['freeze_layers'] = 3"
run "$T/ref"; rc=$?
[[ $rc -eq 2 ]] && grep -qF "finetune.freeze_layers: 3 is not a number of trainable layers" "$T/log" \
    && ok "refused: freeze_layers beyond the model's layers" || bad "freeze_layers 3 (exit $rc)" "$T/log"

finish
