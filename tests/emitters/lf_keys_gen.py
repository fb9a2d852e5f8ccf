#!/usr/bin/env python3
"""lf_keys_gen.py LF_REPO LF_COMMIT [TRANSFORMERS_FILE... --transformers-version V]
   > tests/emitters/lf_keys.txt

Regenerates the list of YAML keys LLaMA-Factory's training parser accepts, from
a fetched copy of its source (never committed here): every field of every
dataclass in src/llamafactory/hparams/{model,data,training,finetuning,
generating}_args.py (the classes _parse_train_args hands to HfArgumentParser),
plus the fields of transformers' TrainingArguments / Seq2SeqTrainingArguments
(LLaMA-Factory's TrainingArguments inherits them) read from the given
transformers source files (training_args.py, training_args_seq2seq.py).
Fields are read with Python's ast, nothing is imported.

Also the dataset_info.json attributes src/llamafactory/data/parser.py reads
(DatasetAttr.join: the names in its column_names / tag_names lists, the
top-level keys it sets), as lines "@column NAME", "@tag NAME", "@entry NAME";
and the chat templates of src/llamafactory/data/template.py (register_template)
with the special tokens of their turns, as lines "@template NAME TOKEN...".

Output, one key a line: KEY<TAB>TYPE<TAB>ORIGIN, where TYPE is the declared
annotation (Literal[...] keeps its values) and ORIGIN file:class. Comment lines
(#) record the commits/versions the list came from. Sorted, deterministic.
"""
import ast
import os
import re
import sys

args = sys.argv[1:]
tver = "unknown"
if "--transformers-version" in args:
    i = args.index("--transformers-version")
    tver = args[i + 1]
    del args[i:i + 2]
lf_repo, lf_commit, tfiles = args[0], args[1], args[2:]

fields = {}


def collect(path, origin):
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if not any((isinstance(d, ast.Name) and d.id == "dataclass") or
                   (isinstance(d, ast.Call) and getattr(d.func, "id", "") == "dataclass")
                   for d in node.decorator_list):
            continue
        for st in node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                name = st.target.id
                if name.startswith("_"):
                    continue
                ann = ast.unparse(st.annotation).replace("\t", " ")
                fields.setdefault(name, (ann, f"{origin}:{node.name}"))


hp = os.path.join(lf_repo, "src", "llamafactory", "hparams")
for f in ("model_args", "data_args", "training_args", "finetuning_args", "generating_args"):
    collect(os.path.join(hp, f + ".py"), "llamafactory/hparams/" + f + ".py")
for t in tfiles:
    collect(t, "transformers/" + os.path.basename(t))

print(f"# YAML keys LLaMA-Factory's HfArgumentParser accepts (parse_dict, allow_extra_keys=False)")
print(f"# llamafactory: github.com/hiyouga/LLaMA-Factory commit {lf_commit}")
print(f"# transformers: {tver} ({', '.join(os.path.basename(t) for t in tfiles) or 'none'})")
print(f"# regenerate: python3 tests/emitters/lf_keys_gen.py LF_REPO COMMIT TRANSFORMERS_FILES --transformers-version V")
# dataset_info.json: what DatasetAttr.join reads
with open(os.path.join(lf_repo, "src", "llamafactory", "data", "parser.py")) as f:
    ptree = ast.parse(f.read())
attrs = {"@column": set(), "@tag": set(), "@entry": {"file_name", "hf_hub_url", "ms_hub_url", "om_hub_url",
                                                     "script_url", "cloud_file_name", "columns", "tags"}}
for node in ast.walk(ptree):
    if isinstance(node, ast.FunctionDef) and node.name == "join":
        for st in ast.walk(node):
            if isinstance(st, (ast.Assign, ast.AugAssign)) and isinstance(st.value, ast.List):
                tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target
                kind = {"column_names": "@column", "tag_names": "@tag"}.get(getattr(tgt, "id", ""))
                if kind:
                    attrs[kind].update(e.value for e in st.value.elts)
            if (isinstance(st, ast.Call) and getattr(st.func, "attr", "") == "set_attr" and st.args and
                    isinstance(st.args[0], ast.Constant) and isinstance(st.args[1], ast.Name) and st.args[1].id == "attr"):
                attrs["@entry"].add(st.args[0].value)
# the string enums of extras/constants.py that annotations name (QuantizationMethod, ...)
with open(os.path.join(lf_repo, "src", "llamafactory", "extras", "constants.py")) as f:
    ctree = ast.parse(f.read())
used = " ".join(a for a, _ in fields.values())
for node in ctree.body:
    if isinstance(node, ast.ClassDef) and re.search(r"\b" + node.name + r"\b", used):
        vals = [st.value.value for st in node.body if isinstance(st, ast.Assign) and
                isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)]
        if vals:
            print(f"@enum {node.name} {' '.join(vals)}")
for kind in ("@entry", "@column", "@tag"):
    for n in sorted(attrs[kind]):
        print(f"{kind} {n}")
# chat templates: every register_template name in data/template.py, with the
# special tokens its user, assistant, system and prefix slots are written with
# (the literals shaped <|x|>, <x_of_turn>, <｜x｜>, [gMASK], <sop>)
special = re.compile(r"<\|[^|<>\s]+\|>|<[a-z_]+_of_turn>|<｜[^｜]+｜>|\[gMASK\]|<sop>")
with open(os.path.join(lf_repo, "src", "llamafactory", "data", "template.py")) as f:
    ttree = ast.parse(f.read())
templates = {}
for node in ast.walk(ttree):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "register_template":
        kw = {k.arg: k.value for k in node.keywords}
        if "name" not in kw:
            continue
        toks = []
        for slot in ("format_user", "format_assistant", "format_system", "format_prefix"):
            for c in ast.walk(kw.get(slot, ast.Constant(None))):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    for t in special.findall(c.value):
                        if t not in toks:
                            toks.append(t)
        templates[ast.literal_eval(kw["name"])] = toks
for n in sorted(templates):
    print(" ".join(["@template", n] + templates[n]))
for k in sorted(fields):
    ann, origin = fields[k]
    print(f"{k}\t{ann}\t{origin}")
