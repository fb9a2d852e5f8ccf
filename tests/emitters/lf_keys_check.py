#!/usr/bin/env python3
"""lf_keys_check.py KEYS EMITTER_C CHAT_TEMPLATES_C DIR... — every key llmc can write into the
LLaMA-Factory YAML, and every dataset_info.json entry, against the list derived
from LLaMA-Factory's own source (tests/emitters/lf_keys.txt, lf_keys_gen.py;
the commit is in its header).

1. static: every key literal the emitter passes to yw_str/yw_int/yw_bool/yw_float/
   yw_key (compiler/emit/emit_llamafactory.c) is a field of the argument dataclasses,
   except the few listed in NOT_TOP_LEVEL with the reason.
2. each llamafactory_train.yaml under DIR: every top-level key is in the list
   and its value has the declared type (bool, int, float (an int is taken),
   str, Literal[...] values); lr_scheduler_kwargs is a mapping.
3. each dataset_info.json beside it, as parser.py's DatasetAttr.join reads
   it: only the entry keys, columns and tags it reads; formatting alpaca or
   sharegpt; ranking a bool; ranking entries name chosen and rejected; per the
   YAML's stage: rm/dpo train (and evaluate) on ranking data only, kto on
   entries with a kto_tag, pt/sft on no ranking data; every dataset and
   eval_dataset the YAML names has an entry.
4. each llamafactory_merge.yaml (a merge job's `llamafactory-cli export`), as
   export_model (train/tuner.py) after get_infer_args (hparams/parser.py)
   takes it: every key a field of the inference parser's dataclasses only
   (model, data, finetuning, generating arguments: a training argument is
   refused there), of the declared type; export_dir, model_name_or_path and
   adapter_name_or_path set, finetuning_type lora (_verify_model_args: an
   adapter only with LoRA), no export_quantization_bit beside an adapter, a
   known template; and in a chain (sibling job directories), the adapter is the
   output_dir of a LoRA training YAML and export_dir the model_name_or_path of
   the training YAML after it.
5. the chat templates llmc knows (CHAT_TEMPLATES_C: compiler/check/chat_templates.c) are LLaMA-Factory's
   ("@template" lines: data/template.py), each with the same special tokens, and
   every YAML's template is one of them.
Prints ok/FAIL lines and "N passed, N failed".
"""
import ast
import json
import os
import re
import sys

import yaml

keys_file, emitter, table, dirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
fields, attrs = {}, {"@entry": set(), "@column": set(), "@tag": set()}
origins = {}  # the dataclass file of each field
header = []
enums = {}  # LLaMA-Factory's string enums (extras/constants.py) by class name
templates = {}  # LLaMA-Factory's chat templates (data/template.py) and the special tokens of their turns
for line in open(keys_file):
    line = line.rstrip("\n")
    if line.startswith("#"):
        header.append(line)
    elif line.startswith("@template "):
        _, name, *toks = line.split(" ")
        templates[name] = toks
    elif line.startswith("@enum "):
        _, name, *vals = line.split(" ")
        enums[name] = set(vals)
    elif line.startswith("@"):
        kind, name = line.split(" ", 1)
        attrs[kind].add(name)
    elif line:
        k, ann, origin = line.split("\t")
        fields[k] = ann
        origins[k] = origin

# written inside a mapping, or for a transformers version the list is not from
NOT_TOP_LEVEL = {
    "min_lr": "inside lr_scheduler_kwargs (cosine_with_min_lr's argument), not a top-level key",
    "warmup_ratio": "transformers 4.x only; written only when the step count is unknown (see lf_body)",
    "num_decay_steps": "inside lr_scheduler_kwargs (warmup_stable_decay's argument), not a top-level key",
    "min_lr_ratio": "inside lr_scheduler_kwargs (warmup_stable_decay's argument), not a top-level key",
}
passed = failed = 0


def ok(msg):
    global passed
    passed += 1
    print("ok   " + msg)


def bad(msg):
    global failed
    failed += 1
    print("FAIL " + msg)


print("\n".join(header))
src = open(emitter).read()
written = sorted(set(re.findall(r'\byw_(?:str|word|int|bool|float|key|kmap|kseq)\(y, "([A-Za-z0-9_]+)"', src)))
missing = [k for k in written if k not in fields and k not in NOT_TOP_LEVEL]
if written and not missing:
    ok(f"{emitter}: all {len(written)} keys it can write are LLaMA-Factory/transformers arguments")
else:
    bad(f"{emitter}: keys not in {keys_file}: {missing or 'none found'}")
# the chat templates a plan may name (the checker's table, CHAT_TEMPLATES_C): each
# is LLaMA-Factory's, with exactly the special tokens its turns are written
# with there ("none" is pre-training: written as "empty")
rows = re.findall(r'^\s*\{"([a-z0-9_]+)",.*\{([^{}]*)\}\},\s*$', open(table).read(), re.M)
errs = []
for name, toks in rows:
    lf_name = "empty" if name == "none" else name
    mine = re.findall(r'"([^"]*)"', toks)
    if lf_name not in templates:
        errs.append(f"{name} is not a LLaMA-Factory template")
    elif sorted(mine) != sorted(templates[lf_name]):
        errs.append(f"{name}: tokens {mine}, LLaMA-Factory's turns use {templates[lf_name]}")
if len(rows) >= 17 and templates and not errs:
    ok(f"{table}: all {len(rows)} templates are LLaMA-Factory's, with the special tokens of its turns")
else:
    bad(f"{table}: {'; '.join(errs) or f'{len(rows)} templates read, {len(templates)} in the list'}")
for k, why in NOT_TOP_LEVEL.items():
    if k in fields:
        bad(f"{k} is listed as not accepted ({why}) but is a field now: drop it from NOT_TOP_LEVEL")


def type_ok(ann, v):
    lit = re.search(r"Literal\[(.*?)\]", ann)
    if lit:
        allowed = ast.literal_eval("[" + lit.group(1) + "]")
        if v in allowed:
            return True
        if "None" in ann and v is None:
            return True
        return False
    parts = [p.strip() for p in ann.split("|")]
    for p in parts:
        if p in enums and isinstance(v, str):
            return v in enums[p]
    if v is None:
        return "None" in parts
    if isinstance(v, bool):
        return "bool" in parts
    if isinstance(v, int):
        return "int" in parts or "float" in parts
    if isinstance(v, float):
        return "float" in parts
    if isinstance(v, str):
        return any(p in ("str",) or p[0].isupper() and p not in ("None",) for p in parts) or "str" in ann
    if isinstance(v, dict):
        return "dict" in ann
    return False


# the parser of `llamafactory-cli export`: _INFER_ARGS (hparams/parser.py)
INFER_FILES = ("model_args.py", "data_args.py", "finetuning_args.py", "generating_args.py")


def key_errors(path, args, infer):
    """Each key of a YAML against the list: known, of its declared type, a known
    template; infer (an export's YAML): an argument of the inference parser."""
    errs = []
    for k, v in args.items():
        if k in NOT_TOP_LEVEL and k not in fields and not infer:
            print(f"note {path}: {k}: {NOT_TOP_LEVEL[k]}")
        elif k not in fields:
            errs.append(f"unknown key {k}")
        elif infer and not origins[k].split(":")[0].endswith(INFER_FILES):
            errs.append(f"{k} is a training argument ({origins[k]}), which the export parser refuses")
        elif not type_ok(fields[k], v):
            errs.append(f"{k}: {v!r} is not {fields[k]}")
        elif k == "template" and v not in templates:
            errs.append(f"template {v!r} is not one of LLaMA-Factory's templates")
    return errs


def found(name):
    """Every file called name under the DIRs, in order."""
    return sorted(os.path.join(root, f) for d in dirs for root, _, files in os.walk(d) for f in files if f == name)


for path in found("llamafactory_train.yaml"):
    with open(path) as f:
        args = yaml.safe_load(f)
    errs = key_errors(path, args, False)
    if errs:
        bad(f"{path}: {'; '.join(errs)}")
    else:
        ok(f"{path}: {len(args)} keys, each a field of the declared type")
    # the DeepSpeed file it names: offload as its name says, overlap_comm off
    ds = args.get("deepspeed")
    if ds:
        with open(os.path.join(os.path.dirname(path), ds)) as f:
            z = json.load(f)["zero_optimization"]
        want_opt = "offload" in ds
        want_par = ds == "ds_z3_offload_config.json"
        cpu = {"device": "cpu", "pin_memory": True}
        errs = []
        if (z.get("offload_optimizer") == cpu) != want_opt:
            errs.append(f"offload_optimizer {z.get('offload_optimizer')}")
        if (z.get("offload_param") == cpu) != want_par:
            errs.append(f"offload_param {z.get('offload_param')}")
        if z.get("overlap_comm") is not False:
            errs.append("overlap_comm is not false")
        if z.get("stage") != int(ds[4]):
            errs.append(f"stage {z.get('stage')} in {ds}")
        if errs:
            bad(f"{path}: {ds}: {'; '.join(errs)}")
        else:
            ok(f"{path}: {ds}: stage {z['stage']}, offload optimizer {want_opt}, parameters {want_par}")
    # dataset_info.json as parser.py reads it
    info_path = os.path.join(os.path.dirname(path), "dataset_info.json")
    with open(info_path) as f:
        info = json.load(f)
    stage = args.get("stage")
    errs = []
    names = [n for n in (args.get("dataset") or "").split(",") if n]
    names += [n for n in (args.get("eval_dataset") or "").split(",") if n]
    for n in names:
        if n not in info:
            errs.append(f"{n} has no entry")
    for n, e in info.items():
        for k in e:
            if k not in attrs["@entry"]:
                errs.append(f"{n}: entry key {k} is not read by DatasetAttr.join")
        for k in e.get("columns", {}):
            if k not in attrs["@column"]:
                errs.append(f"{n}: column {k} is not read")
        for k in e.get("tags", {}):
            if k not in attrs["@tag"]:
                errs.append(f"{n}: tag {k} is not read")
        if e.get("formatting") not in ("alpaca", "sharegpt"):
            errs.append(f"{n}: formatting {e.get('formatting')!r}")
        if not isinstance(e.get("ranking"), bool):
            errs.append(f"{n}: ranking is not a bool")
        cols = e.get("columns", {})
        rank = e.get("ranking")
        if rank and not (cols.get("chosen") and cols.get("rejected")):
            errs.append(f"{n}: ranking without chosen and rejected columns")
        if n in names:
            if stage in ("rm", "dpo") and not rank:
                errs.append(f"{n}: stage {stage} on non-ranking data")
            if stage in ("pt", "sft", "kto") and rank:
                errs.append(f"{n}: stage {stage} on ranking data")
            if stage == "kto" and not cols.get("kto_tag"):
                errs.append(f"{n}: stage kto without a kto_tag column")
    if errs:
        bad(f"{info_path}: {'; '.join(errs)}")
    else:
        ok(f"{info_path}: {len(info)} entries as parser.py reads them (stage {stage})")
def resolved(yaml_path, p):
    return os.path.normpath(p if os.path.isabs(p) else os.path.join(os.path.dirname(yaml_path), p))


for path in found("llamafactory_merge.yaml"):
    with open(path) as f:
        args = yaml.safe_load(f)
    errs = key_errors(path, args, True)
    for k in ("model_name_or_path", "adapter_name_or_path", "export_dir", "template"):
        if not args.get(k):
            errs.append(f"{k} is not set")
    if args.get("finetuning_type") != "lora":
        errs.append("an adapter needs finetuning_type lora")
    if args.get("export_quantization_bit") is not None:
        errs.append("export_quantization_bit beside an adapter: LLaMA-Factory wants the adapter merged first")
    if os.path.exists(os.path.join(os.path.dirname(path), "llamafactory_train.yaml")):
        errs.append("a training YAML beside it")
    # the chain it sits in: the sibling job directories' training YAMLs
    chain = os.path.dirname(os.path.dirname(path))
    trains = []
    for sib in sorted(os.listdir(chain)):
        ty = os.path.join(chain, sib, "llamafactory_train.yaml")
        if os.path.isfile(ty):
            with open(ty) as f:
                trains.append((ty, yaml.safe_load(f)))
    adapter, export = resolved(path, args.get("adapter_name_or_path", "")), resolved(path, args.get("export_dir", ""))
    lora = [ty for ty, t in trains if t.get("finetuning_type") == "lora" and resolved(ty, t["output_dir"]) == adapter]
    users = [ty for ty, t in trains if resolved(ty, t.get("model_name_or_path", "")) == export]
    if trains and not lora:
        errs.append(f"adapter {adapter} is the output_dir of no LoRA training YAML of the chain")
    if trains and not users:
        errs.append(f"export_dir {export} is the model of no training YAML of the chain")
    if errs:
        bad(f"{path}: {'; '.join(errs)}")
    else:
        ok(f"{path}: {len(args)} keys, each an export (inference) argument of the declared type; "
           f"adapter from {len(lora)} LoRA run, merged model trained by {len(users)}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
