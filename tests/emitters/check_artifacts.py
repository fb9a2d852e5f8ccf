#!/usr/bin/python3
"""check_artifacts.py DIR... — parse every artifact llmc wrote and check what
each consumer needs: JSON parses (json.load), LLaMA-Factory's YAML parses
(yaml.safe_load) with only keys LLaMA-Factory's HfArgumentParser accepts, each
of the type its dataclass declares (it does not convert), dataset_info.json
has every column and tag of its format, plan.json has docs/plan.md's keys.
Prints "ok"/"FAIL" lines; exit 1 on any failure. Run with Debian's python3
(/usr/bin/python3 has PyYAML)."""
import json, os, sys
import yaml

# key -> type, from LLaMA-Factory src/llamafactory/hparams/{model,data,finetuning,
# training}_args.py and transformers' Seq2SeqTrainingArguments.
LF_KEYS = {
    "model_name_or_path": str, "stage": str, "do_train": bool, "finetuning_type": str,
    "deepspeed": str, "disable_gradient_checkpointing": bool, "flash_attn": str,
    "dataset": str, "dataset_dir": str, "template": str, "cutoff_len": int, "packing": bool,
    "overwrite_cache": bool, "preprocessing_num_workers": int, "output_dir": str,
    "logging_steps": int, "save_steps": int, "save_total_limit": int, "save_only_model": bool,
    "plot_loss": bool, "overwrite_output_dir": bool, "report_to": str,
    "per_device_train_batch_size": int, "gradient_accumulation_steps": int,
    "learning_rate": float, "num_train_epochs": float, "max_steps": int,
    "lr_scheduler_type": str, "lr_scheduler_kwargs": dict, "warmup_ratio": float,
    "warmup_steps": int, "weight_decay": float, "adam_beta1": float, "adam_beta2": float,
    "adam_epsilon": float, "max_grad_norm": float, "seed": int, "bf16": bool, "fp16": bool,
    "ddp_timeout": int,
}
LF_CHOICES = {
    "stage": {"pt", "sft", "rm", "ppo", "dpo", "kto"},
    "finetuning_type": {"lora", "oft", "freeze", "full"},
    "flash_attn": {"auto", "disabled", "sdpa", "fa2", "fa3"},
    "lr_scheduler_type": {"linear", "cosine", "cosine_with_min_lr", "constant", "constant_with_warmup"},
}
COLUMNS = {"alpaca": ["prompt", "query", "response", "history", "system", "tools"],
           "sharegpt": ["messages", "system", "tools"]}
TAGS = ["role_tag", "content_tag", "user_tag", "assistant_tag", "observation_tag",
        "function_tag", "system_tag"]
PLAN_KEYS = ["llmc_plan_version", "job", "stage", "backend", "model", "tokenizer", "datasets",
             "data", "train", "parallel", "checkpoint", "output", "estimate"]

passed = failed = 0
def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok: passed += 1
    else: failed += 1

def check_dir(d):
    names = sorted(os.listdir(d))
    for n in names:
        p = os.path.join(d, n)
        if os.path.isdir(p):
            check_dir(p)
            continue
        if n.endswith(".json"):
            try:
                with open(p) as f:
                    doc = json.load(f)
                check(True, f"{p}: JSON parses")
            except Exception as e:
                check(False, f"{p}: JSON parses ({e})")
                continue
            if n == "dataset_info.json":
                for name, e in doc.items():
                    fmt = e.get("formatting")
                    ok = "file_name" in e and fmt in COLUMNS and isinstance(e.get("ranking"), bool)
                    ok = ok and all(c in e.get("columns", {}) for c in COLUMNS.get(fmt, []))
                    if fmt == "sharegpt":
                        ok = ok and all(t in e.get("tags", {}) for t in TAGS)
                        ok = ok and all(e["tags"][t] for t in ("role_tag", "content_tag", "user_tag", "assistant_tag"))
                    else:
                        ok = ok and e["columns"].get("prompt") is not None
                    check(ok, f"{p}: {name}: every column and tag of {fmt} written out")
            if n == "plan.json":
                check(all(k in doc for k in PLAN_KEYS) and doc["llmc_plan_version"] == 1,
                      f"{p}: plan.json has every top-level key, version 1")
                t = doc["train"]
                check((t["warmup_ratio"] is None) != (t["warmup_steps"] is None),
                      f"{p}: exactly one of warmup_ratio/warmup_steps")
                par = doc["parallel"]
                check(par["world_size"] == par["nodes"] * par["tasks_per_node"],
                      f"{p}: world_size = nodes x tasks_per_node")
        elif n.endswith(".yaml"):
            try:
                with open(p) as f:
                    doc = yaml.safe_load(f)
                check(isinstance(doc, dict), f"{p}: YAML parses to a mapping")
            except Exception as e:
                check(False, f"{p}: YAML parses ({e})")
                continue
            unknown = [k for k in doc if k not in LF_KEYS]
            check(not unknown, f"{p}: only keys LLaMA-Factory accepts {unknown or ''}")
            wrong = [k for k in doc if k in LF_KEYS and type(doc[k]) is not LF_KEYS[k]]
            check(not wrong, f"{p}: every value has its declared type {[(k, type(doc[k]).__name__) for k in wrong] or ''}")
            bad = [k for k, c in LF_CHOICES.items() if k in doc and doc[k] not in c]
            check(not bad, f"{p}: enumerated values are valid {bad or ''}")
            ds = os.path.join(d, doc.get("deepspeed", ""))
            check(os.path.isfile(ds), f"{p}: the deepspeed file it names exists")
            info = json.load(open(os.path.join(d, "dataset_info.json")))
            check(all(x in info for x in doc["dataset"].split(",")), f"{p}: every dataset is in dataset_info.json")

for d in sys.argv[1:]:
    check_dir(d)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
