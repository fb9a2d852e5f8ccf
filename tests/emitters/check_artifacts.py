#!/usr/bin/python3
"""check_artifacts.py DIR... — parse every artifact llmc wrote and check what
each consumer needs: JSON parses (json.load), LLaMA-Factory's YAML parses
(yaml.safe_load) with only keys LLaMA-Factory's HfArgumentParser accepts, each
of the type its dataclass declares (it does not convert), dataset_info.json
has every column and tag of its format, plan.json has docs/plan.md's keys.
Prints "ok"/"FAIL" lines; exit 1 on any failure. Run with Debian's python3
(/usr/bin/python3 has PyYAML)."""
import json, os, re, sys
import yaml

# key -> type for the keys whose declared type is exactly bool, int, float or
# str (HfArgumentParser.parse_dict does not convert); every other key's
# declared type is checked by lf_keys_check.py. The key set is the list
# derived from LLaMA-Factory's dataclasses (lf_keys.txt, lf_keys_gen.py).
LF_KEYS = {}
for _line in open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lf_keys.txt")):
    if _line[0] in "#@\n":
        continue
    _k, _ann, _ = _line.rstrip("\n").split("\t")
    LF_KEYS[_k] = {"bool": bool, "int": int, "float": float, "str": str}.get(_ann)
# transformers 4.x only (written when the step count is unknown; lf_body)
LF_KEYS.setdefault("warmup_ratio", float)
LF_CHOICES = {
    "stage": {"pt", "sft", "rm", "ppo", "dpo", "kto"},
    "finetuning_type": {"lora", "oft", "freeze", "full"},
    "flash_attn": {"auto", "disabled", "sdpa", "fa2", "fa3"},
    "lr_scheduler_type": {"linear", "cosine", "cosine_with_min_lr", "constant", "constant_with_warmup",
                          "warmup_stable_decay"},
    "quantization_method": {"bnb", "hqq", "eetq"},
    "pref_loss": {"sigmoid", "hinge", "ipo", "kto_pair", "orpo", "simpo"},
    "eval_strategy": {"steps", "epoch"},
    "report_to": {"none", "tensorboard", "wandb"},
    # Fp8Arguments.fp8_backend (a str): the ones train/fp8_utils.py create_fp8_kwargs
    # tells apart ("te", "torchao", "auto"; its help text also names msamp, which
    # it runs as torchao without a recipe)
    "fp8_backend": {"auto", "torchao", "te"},
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
                    # a local file or directory (file_name), or a Hub dataset (hf_hub_url): exactly one
                    ok = ("file_name" in e) != ("hf_hub_url" in e) and fmt in COLUMNS and isinstance(e.get("ranking"), bool)
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
        elif n.endswith(".yaml") and not n.startswith(("slinky-", "soperator-")):   # those: k8s_check.py
            try:
                with open(p) as f:
                    doc = yaml.safe_load(f)
                check(isinstance(doc, dict), f"{p}: YAML parses to a mapping")
            except Exception as e:
                check(False, f"{p}: YAML parses ({e})")
                continue
            unknown = [k for k in doc if k not in LF_KEYS]
            check(not unknown, f"{p}: only keys LLaMA-Factory accepts {unknown or ''}")
            wrong = [k for k in doc if LF_KEYS.get(k) and type(doc[k]) is not LF_KEYS[k]
                     and not (LF_KEYS[k] is float and type(doc[k]) is int)]
            check(not wrong, f"{p}: every value has its declared type {[(k, type(doc[k]).__name__) for k in wrong] or ''}")
            bad = [k for k, c in LF_CHOICES.items() if k in doc and doc[k] not in c]
            check(not bad, f"{p}: enumerated values are valid {bad or ''}")
            if n == "llamafactory_merge.yaml":
                continue   # a merge job's export: no DeepSpeed or data (lf_keys_check.py checks it as export reads it)
            ds = os.path.join(d, doc.get("deepspeed", ""))
            check(os.path.isfile(ds), f"{p}: the deepspeed file it names exists")
            info = json.load(open(os.path.join(d, "dataset_info.json")))
            check(all(x in info for x in doc["dataset"].split(",")), f"{p}: every dataset is in dataset_info.json")
            # the compute type as LLaMA-Factory's web UI sets it: bf16, fp16 or
            # pure_bf16 true when it is the plan's precision, the others false
            # (all three for fp32); pure_bf16 is written only when true; fp8:
            # fp8 true inside bf16 mixed precision (LLaMA-Factory's
            # examples/extras/fp8), with its fp8_backend
            plan_json = os.path.join(d, "plan.json")
            if os.path.isfile(plan_json):
                prec = json.load(open(plan_json))["train"]["precision"]
                flags = {k: doc.get(k, False) for k in ("bf16", "fp16", "pure_bf16", "fp8")}
                want = {k: k == prec or (prec == "fp8" and k == "bf16") for k in flags}
                check(flags == want and "bf16" in doc and "fp16" in doc and ("fp8_backend" in doc) == (prec == "fp8"),
                      f"{p}: bf16/fp16/pure_bf16/fp8 say plan.json's precision {prec} {flags}")

def check_consistency(d):
    """slurm.conf, gres.conf, the job script and plan.json tell one story."""
    files = os.listdir(d)
    scripts = [f for f in files if f.endswith(".slurm")]
    if "slurm.conf" not in files or len(scripts) != 1 or "plan.json" not in files:
        return   # a merge job's directory has no plan.json (its script and snippets are a training job's)
    conf = open(os.path.join(d, "slurm.conf")).read()
    gres = open(os.path.join(d, "gres.conf")).read()
    script = open(os.path.join(d, scripts[0])).read()
    plan = json.load(open(os.path.join(d, "plan.json")))
    node = re.search(r"^NodeName=(\S+) CPUs=(\d+) RealMemory=(\d+)(?: Gres=gpu:(?:(\w+):)?(\d+))? State=UNKNOWN$", conf, re.M)
    sb = dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(\S+))?$", script, re.M))
    if not node:
        check(False, f"{d}: slurm.conf has a NodeName line")
        return
    hosts, cpus, mem, gtype, gcount = node.groups()
    par = plan["parallel"]
    if gcount:
        # typed (gpu:TYPE:N) or untyped (gpu:N, the site's gres_type = none);
        # asked for with --gres or --gpus-per-node (the site's gpus_per_node)
        # NVIDIA /dev/nvidia[0-N], AMD (ROCm) render nodes /dev/dri/renderD[128-M]
        g = re.search(r"^NodeName=(\S+) Name=gpu(?: Type=(\w+))? File=/dev/(nvidia|dri/renderD)(?:\[(\d+)-(\d+)\]|(\d+))$",
                      gres, re.M)
        first = 0 if g is None or g.group(3) == "nvidia" else 128
        files_n = -1 if not g else (int(g.group(5)) - int(g.group(4)) + 1 if g.group(4) else 1)
        files_n = files_n if g and int(g.group(4) or g.group(6)) == first else -1
        spec = f"{gtype}:{gcount}" if gtype else gcount
        asked = sb.get("gres") == f"gpu:{spec}" if "gres" in sb else sb.get("gpus-per-node") == spec
        check(g is not None and g.group(1) == hosts and g.group(2) == gtype and files_n == int(gcount)
              and asked and ("gres" in sb) != ("gpus-per-node" in sb) and "GresTypes=gpu" in conf
              and par["gpus_per_node"] == int(gcount),
              f"{d}: GRES type and count agree in slurm.conf, gres.conf, --gres/--gpus-per-node and plan.json (gpu:{spec})")
        check(int(sb["ntasks-per-node"]) == int(gcount), f"{d}: one task per GPU")
    else:
        check("Gres" not in conf and "gres" not in sb and "gpus-per-node" not in sb and "Name=gpu" not in gres
              and par["gpus_per_node"] == 0,
              f"{d}: no GRES anywhere on a CPU-only cluster")
    check(int(sb["nodes"]) * int(sb["ntasks-per-node"]) == par["world_size"] and int(sb["nodes"]) == par["nodes"],
          f"{d}: nodes x ntasks-per-node = plan.json world_size ({par['world_size']})")
    check(int(sb["cpus-per-task"]) * int(sb["ntasks-per-node"]) <= int(cpus),
          f"{d}: cpus-per-task x tasks fits the node's {cpus} CPUs")
    m = sb["mem"]
    check(m == "0" or (m.endswith("M") and int(m[:-1]) <= int(mem)), f"{d}: --mem={m} fits RealMemory={mem}")
    t = re.fullmatch(r"(\d+)-(\d\d):(\d\d):00", sb["time"])
    check(t is not None and (int(t[1]) * 1440 + int(t[2]) * 60 + int(t[3])) * 60 == plan["slurm"]["time_limit_seconds"],
          f"{d}: --time={sb['time']} is plan.json's time limit")
    # the snippet leaves the site's policy alone: no default partition, no time limit from one job
    part = re.search(r"^PartitionName=(\S+) Nodes=(\S+) State=UP$", conf, re.M)
    check(part is not None and part.group(1) == sb["partition"] and part.group(2) == hosts
          and "Default=" not in conf and "MaxTime=" not in conf,
          f"{d}: --partition matches the PartitionName line, which sets neither Default nor MaxTime")


for d in sys.argv[1:]:
    check_dir(d)
    for root, dirs, _ in os.walk(d):
        check_consistency(root)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
