#!/usr/bin/env python3
"""lf_accepts.py LF_SRC YAML... — does LLaMA-Factory's own argument parser take
the training YAML llmc wrote?

LF_SRC is LLaMA-Factory's src/llamafactory directory (a checkout). The five
hparams dataclass files are imported verbatim; the rest of the package (peft,
datasets, ...) is not needed to parse, so extras/ is replaced by the few names
the dataclasses import (the enums are copied from extras/constants.py by AST).
Each YAML goes through HfArgumentParser(ModelArguments, DataArguments,
TrainingArguments, FinetuningArguments, GeneratingArguments).parse_dict with
allow_extra_keys=False — exactly LLaMA-Factory's _parse_train_args — so an
unknown key or a value of the wrong type fails here as it would there.
`deepspeed` is dropped before parsing (transformers would import DeepSpeed to
read the file); its file is checked to be JSON instead.

Needs Python with torch + transformers + PyYAML (the GPU machine's
/opt/torch/.venv). Not part of `make test` (this machine has no transformers);
run by hand: python3 tests/emitters/lf_accepts.py LF/src/llamafactory golden/lf_sft/*.yaml
A merge job's llamafactory_merge.yaml goes through the parser of
`llamafactory-cli export` instead (get_infer_args: ModelArguments,
DataArguments, FinetuningArguments, GeneratingArguments, no training
arguments), with export_model's own checks (export_dir set, no
export_quantization_bit beside an adapter).
Prints "ok"/"FAIL" lines and "N passed, N failed".
"""
import ast
import json
import os
import shutil
import sys
import tempfile

import yaml

src, yamls = sys.argv[1], sys.argv[2:]
pkg_root = tempfile.mkdtemp(prefix="lf_accepts.")
pkg = os.path.join(pkg_root, "llamafactory")
os.makedirs(os.path.join(pkg, "hparams"))
os.makedirs(os.path.join(pkg, "extras"))
open(os.path.join(pkg, "__init__.py"), "w").close()
open(os.path.join(pkg, "hparams", "__init__.py"), "w").close()
for f in ("data_args", "finetuning_args", "model_args", "training_args", "generating_args"):
    shutil.copy(os.path.join(src, "hparams", f + ".py"), os.path.join(pkg, "hparams", f + ".py"))

# extras: the enums verbatim, small stand-ins for the helpers
with open(os.path.join(src, "extras", "constants.py")) as f:
    tree = ast.parse(f.read())
wanted = {"AttentionFunction", "EngineName", "QuantizationMethod", "RopeScaling"}
parts = ["from enum import StrEnum, unique"]
for node in tree.body:
    if isinstance(node, ast.ClassDef) and node.name in wanted:
        parts.append(ast.get_source_segment(open(os.path.join(src, "extras", "constants.py")).read(), node))
        for d in node.decorator_list:
            parts[-1] = "@" + ast.unparse(d) + "\n" + parts[-1]
with open(os.path.join(pkg, "extras", "constants.py"), "w") as f:
    f.write("\n\n".join(parts) + "\n")
with open(os.path.join(pkg, "extras", "__init__.py"), "w") as f:
    f.write("")
with open(os.path.join(pkg, "extras", "logging.py"), "w") as f:
    f.write("import logging\ndef get_logger(name=None):\n    return logging.getLogger(name)\n")
with open(os.path.join(pkg, "extras", "misc.py"), "w") as f:
    f.write("import os\n"
            "def is_env_enabled(name, default='0'):\n"
            "    return os.getenv(name, default).lower() in ('true', 'y', '1')\n"
            "def use_ray():\n    return False\n"
            "def get_current_device():\n    return 'cpu'\n")
with open(os.path.join(pkg, "extras", "packages.py"), "w") as f:
    f.write("def is_mcore_adapter_available():\n    return False\n")
try:
    import omegaconf  # noqa: F401
except ImportError:
    os.makedirs(os.path.join(pkg_root, "omegaconf"))
    with open(os.path.join(pkg_root, "omegaconf", "__init__.py"), "w") as f:
        f.write("class OmegaConf:\n    pass\n")
sys.path.insert(0, pkg_root)

from transformers import HfArgumentParser  # noqa: E402
from llamafactory.hparams.data_args import DataArguments  # noqa: E402
from llamafactory.hparams.finetuning_args import FinetuningArguments  # noqa: E402
from llamafactory.hparams.generating_args import GeneratingArguments  # noqa: E402
from llamafactory.hparams.model_args import ModelArguments  # noqa: E402
from llamafactory.hparams.training_args import TrainingArguments  # noqa: E402

parser = HfArgumentParser([ModelArguments, DataArguments, TrainingArguments, FinetuningArguments,
                           GeneratingArguments])
infer_parser = HfArgumentParser([ModelArguments, DataArguments, FinetuningArguments, GeneratingArguments])
passed = failed = 0
for path in yamls:
    with open(path) as f:
        args = yaml.safe_load(f)
    if os.path.basename(path) == "llamafactory_merge.yaml":
        try:
            model, data, finetuning, _ = infer_parser.parse_dict(args, allow_extra_keys=False)
            assert model.export_dir and model.adapter_name_or_path and model.export_quantization_bit is None
            assert finetuning.finetuning_type == "lora" and data.template == args["template"]
            print(f"ok   {path}: llamafactory-cli export's parser takes every key (export_dir {model.export_dir}, "
                  f"adapter {model.adapter_name_or_path}, export_size {model.export_size}, device {model.export_device})")
            passed += 1
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {path}: {type(e).__name__}: {e}")
            failed += 1
        continue
    ds = args.pop("deepspeed", None)
    if ds:
        try:
            with open(os.path.join(os.path.dirname(path), ds)) as f:
                json.load(f)
            print(f"ok   {path}: deepspeed file {ds} is JSON")
            passed += 1
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {path}: deepspeed file {ds}: {e}")
            failed += 1
    try:
        model, data, training, finetuning, _ = parser.parse_dict(args, allow_extra_keys=False)
        assert training.learning_rate == args["learning_rate"]
        assert training.per_device_train_batch_size == args["per_device_train_batch_size"]
        # DataArguments.__post_init__ takes one off cutoff_len when packing (LLaMA-Factory
        # ff6d4d1: "avoid pad_to_multiple_of"): the parser then holds cutoff - 1
        packed = 1 if args.get("packing") or args.get("neat_packing") else 0
        assert finetuning.stage == args["stage"] and data.cutoff_len in (args["cutoff_len"], args["cutoff_len"] - packed)
        print(f"ok   {path}: LLaMA-Factory's HfArgumentParser takes every key "
              f"(lr {training.learning_rate}, scheduler {training.lr_scheduler_type}, "
              f"bf16 {training.bf16}, template {data.template})")
        passed += 1
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {path}: {type(e).__name__}: {e}")
        failed += 1
shutil.rmtree(pkg_root, ignore_errors=True)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
