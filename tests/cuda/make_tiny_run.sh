#!/bin/bash
# Prepare .cuda-run/tiny/ for tests/cuda/device.sh's `run` section, on this (CPU)
# machine: compile examples/tiny/tiny.llm, tokenize its data into shards, write
# plan-cpu.json / plan-gpu.json / plan-gpu2.json (private output directories; the
# GPU plans in bf16, plan-gpu2 on 2 ranks with ZeRO-1 and the same global batch),
# plan-{cpu,gpu}-{lora,freeze,freeze-first}.json (300 steps of fine-tuning),
# prepare the held-out questions into shards-eval/, and train plan-cpu.json with
# the CPU trainer (--eval-shards) for the reference metrics and result.json, and
# zero_estimates.json (zero_check.py estimates) for the zero section.
# Needs build/llmc and build/llmc-train. Add /.cuda-run/ to .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .cuda-run/tiny
mkdir -p .cuda-run
build/llmc examples/tiny/tiny.llm -o .cuda-run/tiny > /dev/null
build/llmc-train prepare .cuda-run/tiny/plan.json
python3 - <<'PY'
import json, os
p = json.load(open(".cuda-run/tiny/plan.json"))
def variant(name, prec, ft=None, **par):
    q = json.loads(json.dumps(p))
    q["output"]["dir"] = "run-" + name
    q["checkpoint"]["dir"] = "run-" + name + "/ckpt"
    q["train"]["precision"] = prec
    if ft:   # fine-tuning variants: 300 steps of the same data
        q["finetune"].update(ft)
        q["train"]["max_steps"] = 300
    if par:
        q["train"].update(micro_batch=p["train"]["micro_batch"] // 2, grad_accum=1,
                          global_batch=p["train"]["global_batch"])
        q["parallel"].update(par)
    json.dump(q, open(f".cuda-run/tiny/plan-{name}.json", "w"), indent=1)
variant("cpu", "fp32")
variant("gpu", "bf16")
variant("gpu2", "bf16", world_size=2, data_parallel=2, zero_stage=1, gpus_per_node=2)
# freeze (the last layer trains; the first layer, below a frozen one) and LoRA on every linear layer
for ft_name, ft in (("lora", dict(method="lora", lora_rank=8, lora_alpha=16)),
                    ("freeze", dict(method="freeze", freeze_layers=1)),
                    ("freeze-first", dict(method="freeze", freeze_layers=-1))):
    variant("cpu-" + ft_name, "fp32", ft)
    variant("gpu-" + ft_name, "bf16", ft)
# the held-out questions (arith_eval.json) as shards of the same context, for --eval-shards
q = json.loads(json.dumps(p))
for d in q["datasets"]:
    d["file"] = os.path.join(os.path.dirname(d["file"]), "arith_eval.json")
q["data"]["shards_dir"] = "shards-eval"
json.dump(q, open(".cuda-run/tiny/plan-eval.json", "w"), indent=1)
PY
build/llmc-train prepare .cuda-run/tiny/plan-eval.json
build/llmc-train run .cuda-run/tiny/plan-cpu.json --eval-shards .cuda-run/tiny/shards-eval
rm -rf .cuda-run/tiny/run-cpu/ckpt .cuda-run/tiny/run-cpu/final
for ft in lora freeze freeze-first; do
    build/llmc-train run .cuda-run/tiny/plan-cpu-$ft.json > /dev/null
    rm -rf .cuda-run/tiny/run-cpu-$ft/ckpt
done
# the zero section's per-case memory estimates (llmc explain of each case's plan)
python3 tests/cuda/zero_check.py estimates .cuda-run/tiny build/llmc
