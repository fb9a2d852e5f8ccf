#!/usr/bin/env python3
"""tests/vocab/vocab.py LLMC ROWS READBACK — one spelling per word.

contract/plan_vocab.h holds one row per value of each enumerated plan key
(C id, .llm spelling, plan.json spelling). ROWS (tests/vocab/rows.c) prints
the rows as the programs are built from them; READBACK (tests/vocab/readback.c)
prints what llmc-train's plan reader made of a plan.json.

1. Round trip, for every row: a plan with the key set to the row's .llm
   spelling passes `llmc check` and compiles; plan.json holds the row's JSON
   spelling at the row's path (train.shard: parallel.zero_stage = the row's
   value); llmc-train's reader maps it back to the row's enum value, or, for a
   row llmc-train does not run (its LLMC_TRAIN_* mask), refuses it naming the
   key and exactly the words it takes. A word that is no row is refused by both.
2. Spellings in one place: the C sources of compiler/, runtime/ and grammar/
   (comments aside) are searched for the rows' quoted spellings (those of
   PLAN_VOCAB_LLM_CONCEPTS too, ROWS llm), written as
     a. a table or chain: two or more spellings of one concept on a line;
     b. a case or comparison of a value with its spelling: a concept's C id and
        one of its quoted spellings on a line;
     c. a comparison with a spelling: strcmp/strncmp and a quoted spelling on a
        line (but for "none", "all" and "auto", words used for many keys).
   The chat templates' names are searched too; their one place is
   compiler/check/chat_templates.c's table (ONE_PLACE), not contract/.
   Lines in tests/vocab/allowed.txt (another vocabulary that shares a word,
   with the reason) are let through; an entry that matches no line fails, so
   the list cannot go stale. The search is first run on lines it must flag.
3. Keys in one place: the C sources of compiler/check/ (comments aside) are
   searched for a string that is a key of contract/plan_keys.h's rows (ROWS
   keys prints them), written whole ("lora_rank", not a message that names
   it): the checker names a key PLAN_KEY(BLOCK, KEY), which compiles only for
   a row of the block (rule k). allowed.txt lets through the same way a word
   of another vocabulary that is also a key's name.
Prints "N passed, N failed".
"""
import json, os, re, subprocess, sys, tempfile

LLMC, ROWS, READBACK = sys.argv[1], sys.argv[2], sys.argv[3]
ROOT = os.getcwd()
TINY = os.path.join(ROOT, "examples/tiny")
passed = failed = 0


def ok():
    global passed
    passed += 1


def bad(msg):
    global failed
    failed += 1
    print("FAIL:", msg)


def load_rows(which=None):
    out = subprocess.run([ROWS] + ([which] if which else []), capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        concept, key, path, index, cid, llm, js, accept = line.split("\t")
        rows.append(dict(concept=concept, key=key, path=path, index=int(index), id=cid, llm=llm, json=js,
                         accept=accept == "1"))
    return rows


# ---------------------------------------------------------------- the plans

def dataset_block(fmt, d):
    """A dataset of format fmt (a file written into d), as the checker wants it."""
    if fmt == "text":
        recs = [{"text": "1+1=2"}] * 4
        cols = 'columns { text = "text" }'
    elif fmt == "alpaca":
        recs = [{"instruction": "1+1", "input": "", "output": "2"}] * 4
        cols = 'columns { prompt = "instruction" query = "input" response = "output" }'
    elif fmt == "ranking":
        recs = [{"instruction": "1+1", "chosen": "2", "rejected": "3"}] * 4
        cols = 'ranking = true\n  columns { prompt = "instruction" chosen = "chosen" rejected = "rejected" }'
        fmt = "alpaca"
    elif fmt == "kto":
        recs = [{"instruction": "1+1", "output": "2", "label": True}] * 4
        cols = 'columns { prompt = "instruction" response = "output" kto_tag = "label" }'
        fmt = "alpaca"
    else:
        return (f'dataset arith {{\n  file = "{TINY}/data/arith.json"\n  format = {fmt}\n'
                '  columns { messages = "messages" }\n'
                '  tags { role = "role" content = "content" user = "user" assistant = "assistant" system = "system" }\n}\n')
    path = os.path.join(d, f"data_{fmt}.json")
    with open(path, "w") as f:
        json.dump(recs, f)
    return f'dataset arith {{\n  file = "{path}"\n  format = {fmt}\n  {cols}\n}}\n'


def plan(d, train=None, model=None, fmt="sharegpt", gpu=False):
    """The tiny example (CPU, backend llmc) or a one-GPU cluster, with the
    train and model keys given set (None: the key left out)."""
    m = {"arch": "qwen2", "init": "scratch", "tokenizer": f'"{TINY}/tokenizer"', "layers": "2", "hidden": "64",
         "heads": "4", "kv_heads": "2", "ffn": "176", "vocab": "512", "max_context": "256",
         "tie_embeddings": "true"}
    t = {"stage": "sft", "model": "tiny", "data": "[arith]", "template": "qwen", "context": "128", "epochs": "1",
         "batch": "8 per gpu", "lr": "3e-3", "warmup": "5%", "precision": "bf16" if gpu else "fp32",
         "output": f'"{d}/run"'}
    m.update(model or {})
    t.update(train or {})
    if gpu:
        cluster = ('cluster c {\n  partition = "gpu"\n  nodes = gpu01\n  gpu = H200_141GB x 1\n'
                   '  cpus = 16\n  memory = 128 GiB\n}\n')
    else:
        cluster = ('cluster c {\n  partition = "debug"\n  nodes = localhost\n  gpu = none\n  cpus = 2\n'
                   '  memory = 4 GiB\n}\n')
    block = lambda kind, name, kv: f"{kind} {name} {{\n" + "".join(
        f"  {k} = {v}\n" for k, v in kv.items() if v is not None) + "}\n"
    return (cluster + block("model", "tiny", m) + dataset_block(fmt, d) + block("train", "tr", t) +
            "job j {\n  run = tr\n  cluster = c\n  nodes = 1\n  time = 1 h\n}\n")


LF = {"backend": "llamafactory"}

# What each row needs beside its own key: (train keys, model keys, dataset
# format, GPU cluster). The rest of the plan is the tiny example's.
def context(r):
    c, w = r["concept"], r["llm"]
    if c == "arch":   # a family llmc-train does not run: backend = llamafactory's
        m = {"arch": w}
        if w in ("mixtral", "qwen3_moe"):   # a mixture of experts names its experts
            m.update(experts="4", experts_per_token="2")
        return ({}, m, "sharegpt", False) if r["accept"] else (dict(LF), m, "sharegpt", True)
    if c == "init":
        return {}, {"init": w, "path": f'"{TINY}/no-model"'}, "sharegpt", False
    if c == "format":
        return ({"stage": "pt", "template": None} if w == "text" else {}), {}, w, False
    if c == "stage":
        if w == "pt":
            return {"stage": w, "template": None}, {}, "text", False
        if w == "sft":
            return {"stage": w}, {}, "sharegpt", False
        return dict(LF, stage=w), {}, "kto" if w == "kto" else "ranking", True
    if c == "method":
        if w == "qlora":
            return dict(LF, method=w), {}, "sharegpt", True
        return {"method": w}, {}, "sharegpt", False
    if c == "lora_module":
        return {"method": "lora", "lora_target": f"[{w}]"}, {}, "sharegpt", False
    if c == "precision":
        if w == "fp32":
            return {"precision": w}, {}, "sharegpt", False
        return dict(LF, precision=w) if w == "pure_bf16" else {"precision": w}, {}, "sharegpt", True
    if c == "shard":
        return {"shard": w}, {}, "sharegpt", False
    if c in ("master_weights", "optimizer_states"):   # the llmc trainer's, on CPUs as on GPUs
        return {c: w}, {}, "sharegpt", False
    if c == "offload":
        if w == "none":
            return {"offload": w}, {}, "sharegpt", False
        return dict(LF, offload=w, shard="zero3"), {}, "sharegpt", True
    if c == "backend":
        return {"backend": w}, {}, "sharegpt", w == "llamafactory"
    if c in ("recompute", "attention", "schedule", "bad_records"):
        if not r["accept"]:   # a word llmc-train does not run: LLaMA-Factory's
            return dict(LF, **{c: w}), {}, "sharegpt", True
        return {c: w}, {}, "sharegpt", False
    return None


def at_path(doc, path):
    """plan.json's value(s) at a row's path ("a.b", "datasets[].f", "f[]")."""
    cur = [doc]
    for part in path.split("."):
        many = part.endswith("[]")
        part = part[:-2] if many else part
        nxt = []
        for x in cur:
            v = x.get(part) if isinstance(x, dict) else None
            nxt.extend(v if many and isinstance(v, list) else [v])
        cur = nxt
    return cur


def readback(plan_json):
    p = subprocess.run([READBACK, plan_json], capture_output=True, text=True)
    refused = [l for l in p.stdout.splitlines() if l.startswith("refused: ")]
    if p.returncode == 1 and refused:
        return None, refused[0][len("refused: "):].strip()
    if p.returncode != 0:
        return None, f"readback exit {p.returncode}: {p.stderr.strip()}"
    got = {}
    for line in p.stdout.splitlines():
        k, v = line.split()
        got.setdefault(k, []).append(int(v))
    return got, None


def round_trip(rows, tmp):
    by_concept = {}
    for r in rows:
        by_concept.setdefault(r["concept"], []).append(r)
    for r in rows:
        what = f"{r['key']} = {r['llm']} ({r['id']})"
        ctx = context(r)
        if ctx is None:
            bad(f"{what}: the test has no plan for concept {r['concept']}; add it to context()")
            continue
        train, model, fmt, gpu = ctx
        d = tempfile.mkdtemp(dir=tmp)
        src = os.path.join(d, "p.llm")
        with open(src, "w") as f:
            f.write(plan(d, train, model, fmt, gpu))
        out = os.path.join(d, "out")
        c = subprocess.run([LLMC, src, "-o", out], capture_output=True, text=True)
        if c.returncode != 0:
            bad(f"{what}: llmc refused the plan (exit {c.returncode}):\n{c.stderr}")
            continue
        ok()
        plan_json = os.path.join(out, "plan.json")
        doc = json.load(open(plan_json))
        if r["concept"] == "shard":
            vals = at_path(doc, "parallel.zero_stage")
            want = [r["index"]]
        else:
            vals = at_path(doc, r["path"])
            want = [r["json"]]
        if vals == want:
            ok()
        else:
            bad(f"{what}: plan.json {r['path']} is {vals}, expected {want}")
            continue
        got, refusal = readback(plan_json)
        key_in_json = {"shard": "parallel.zero_stage"}.get(r["concept"], r["path"].replace("[]", ""))
        if r["accept"]:
            if got is None:
                bad(f"{what}: llmc-train refused the plan: {refusal}")
            elif got.get(r["concept"]) != [r["index"]]:
                bad(f"{what}: llmc-train read {r['concept']} as {got.get(r['concept'])}, expected [{r['index']}]")
            else:
                ok()
        else:
            takes = ", ".join(x["json"] for x in by_concept[r["concept"]] if x["accept"])
            msg = f"'{r['json']}' is not one of {takes}"
            if got is not None:
                bad(f"{what}: llmc-train accepted a row outside its LLMC_TRAIN mask")
            elif key_in_json.split(".")[-1] not in refusal or msg not in refusal:
                bad(f"{what}: llmc-train's refusal does not say \"{key_in_json}: {msg}\": {refusal}")
            else:
                ok()


def unknown_words(rows, tmp):
    """A word that is no row: llmc names the key's words, llmc-train refuses."""
    d = tempfile.mkdtemp(dir=tmp)
    src = os.path.join(d, "p.llm")
    with open(src, "w") as f:
        f.write(plan(d, {"schedule": "cosin"}))
    c = subprocess.run([LLMC, "check", src], capture_output=True, text=True)
    words = ", ".join(r["llm"] for r in rows if r["concept"] == "schedule")
    if c.returncode == 1 and "unknown schedule 'cosin'; did you mean 'cosine'?" in c.stderr and words in c.stderr:
        ok()
    else:
        bad(f"llmc check schedule = cosin: exit {c.returncode}, expected the rows' words ({words}):\n{c.stderr}")
    with open(src, "w") as f:
        f.write(plan(d))
    out = os.path.join(d, "out")
    subprocess.run([LLMC, src, "-o", out], capture_output=True, check=True)
    pj = os.path.join(out, "plan.json")
    doc = json.load(open(pj))
    doc["train"]["recompute"] = "ful"
    json.dump(doc, open(pj, "w"))
    got, refusal = readback(pj)
    words = ", ".join(r["json"] for r in rows if r["concept"] == "recompute")
    if got is None and f"train.recompute: 'ful' is not one of {words}" in (refusal or ""):
        ok()
    else:
        bad(f"plan.json train.recompute = ful: expected a refusal naming {words}, got {refusal or got}")


def fp8_lm_head(tmp):
    """train.fp8_lm_head, a bool beside the enums: llmc writes it for backend
    llmc (false with bf16); llmc-train reads it, derives it when absent (true
    with fp8) and refuses true with another precision, naming the key."""
    d = tempfile.mkdtemp(dir=tmp)
    src = os.path.join(d, "p.llm")
    with open(src, "w") as f:
        f.write(plan(d, gpu=True))
    out = os.path.join(d, "out")
    c = subprocess.run([LLMC, src, "-o", out], capture_output=True, text=True)
    if c.returncode != 0:
        bad(f"fp8_lm_head: the bf16 GPU plan does not compile:\n{c.stderr}")
        return
    pj = os.path.join(out, "plan.json")
    doc = json.load(open(pj))
    if doc["train"].get("fp8_lm_head") is False:
        ok()
    else:
        bad(f"plan.json train.fp8_lm_head with bf16: {doc['train'].get('fp8_lm_head')!r}, expected false")
    cases = [("bf16", False, 0, None), ("bf16", None, 0, None), ("fp8", None, 1, None), ("fp8", False, 0, None),
             ("fp8", True, 1, None), ("bf16", True, None, "train.fp8_lm_head: true needs precision fp8, found bf16")]
    for prec, head, want, refusal_want in cases:
        doc["train"]["precision"] = prec
        doc["train"].pop("fp8_lm_head", None)
        if head is not None:
            doc["train"]["fp8_lm_head"] = head
        json.dump(doc, open(pj, "w"))
        got, refusal = readback(pj)
        what = f"plan.json precision {prec}, fp8_lm_head {'absent' if head is None else head}"
        if refusal_want is not None:
            if got is None and refusal_want in (refusal or ""):
                ok()
            else:
                bad(f"{what}: expected the refusal \"{refusal_want}\", got {refusal or got}")
        elif got is not None and got.get("fp8_lm_head") == [want]:
            ok()
        else:
            bad(f"{what}: llmc-train read fp8_lm_head {got and got.get('fp8_lm_head')}, expected {want} ({refusal})")


# ---------------------------------------------------------- spellings search

# Words the language uses for several keys (`gpu = none`, `template = none`,
# `lora_target = all`, `fp8_backend = auto`, `device = auto`, and `--color auto`):
# a comparison with one alone (rule c) is not taken for a row's spelling; rules
# a and b still see them.
GENERAL_WORDS = {"none", "all", "auto"}
QUOTED = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/', re.S)


def strip_comments(text):
    """Comments blanked (newlines kept, so line numbers hold); strings kept."""
    out, i = [], 0
    while i < len(text):
        m = TOKEN.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        tok = m.group(0)
        out.append(tok if tok[0] in "\"'" else re.sub(r"[^\n]", " ", tok))
        i = m.end()
    return "".join(out)


# A concept whose words' one place is a table outside contract/, because the
# table holds more than the words (ROWS llm prints it as it is built): the
# chat templates, with what each one is for and writes. That file is not
# searched for the concept's words; every other file is.
ONE_PLACE = {"template": "compiler/check/chat_templates.c"}


def findings(path, text, rows):
    """(line number, rule, line) for every line the rules flag."""
    spell = {}          # concept -> set of spellings
    ids = {}            # concept -> set of C ids
    for r in rows:
        if ONE_PLACE.get(r["concept"]) == path:
            continue
        spell.setdefault(r["concept"], set()).update([r["llm"], r["json"]])
        ids.setdefault(r["concept"], set()).add(r["id"])
    every = set().union(*spell.values())
    out = []
    for n, line in enumerate(strip_comments(text).splitlines(), 1):
        quoted = set(QUOTED.findall(line))
        if not quoted & every:
            continue
        words = set(re.findall(r"\b\w+\b", QUOTED.sub('""', line)))
        for c, s in spell.items():
            hit = quoted & s
            if len(hit) >= 2:
                out.append((n, f"a: {len(hit)} spellings of {c} ({', '.join(sorted(hit))})", line.strip()))
            elif hit and words & ids[c]:
                out.append((n, f"b: {c}'s id and its spelling {sorted(hit)[0]!r}", line.strip()))
            elif hit - GENERAL_WORDS and re.search(r"\bstrn?cmp\s*\(", line):
                out.append((n, f"c: a comparison with {c}'s spelling {sorted(hit)[0]!r}", line.strip()))
    return out


def load_keys():
    out = subprocess.run([ROWS, "keys"], capture_output=True, text=True, check=True).stdout
    return {line.split("\t")[1] for line in out.splitlines()}


def key_findings(text, keys):
    """(line number, rule, line) for every line holding a string that is a key."""
    out = []
    for n, line in enumerate(strip_comments(text).splitlines(), 1):
        hit = sorted(set(QUOTED.findall(line)) & keys)
        if hit:
            out.append((n, f"k: the key {hit[0]!r} as a string; name it PLAN_KEY(BLOCK, {hit[0]})", line.strip()))
    return out


def load_allowed():
    allowed = []
    for n, line in enumerate(open("tests/vocab/allowed.txt"), 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or not parts[2].strip():
            bad(f"tests/vocab/allowed.txt:{n}: expected PATH<TAB>TEXT ON THE LINE<TAB>WHY")
            continue
        allowed.append(dict(path=parts[0], text=parts[1], why=parts[2], used=0, at=n))
    return allowed


def search(rows):
    # the rules must catch what they are for
    must = {
        'static const char *const names[] = {"none", "zero1", "zero2", "zero3"};': "a",
        'return a == ARCH_QWEN3 ? "qwen3" : a == ARCH_QWEN2 ? "qwen2" : "llama";': "a",
        '    case ARCH_LLAMA: return "llama";': "b",
        '    if (!strcmp(mt, "qwen2")) out->arch = 1;': "c",
        '    bool lf = strcmp(s->backend, "llamafactory") == 0;': "c",
        '    static const char *const qm[] = {"bnb", "hqq", "eetq"};': "a",   # a concept plan.json does not hold
        # the word lists the checker and the emitters once wrote themselves
        'static const char *const container_runtimes[] = {"pyxis", "apptainer"};': "a",
        'static const char *const host_link_names[] = {"pcie4", "pcie5", "c2c"};': "a",
        'static const char *const link_names[] = {"nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5"};': "a",
        '    static const char *const dtypes[] = {"auto", "bfloat16", "float16", "float32"};   /* MergeDtype */': "a",
        '    if (s->mail_type && strcmp(s->mail_type, "NONE") != 0) x = 1;': "c",
        'static const char *const taint_effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute"};': "a",
        '    case TEMPLATE_LLAMA3: return "llama3";': "b",   # the template table's words, outside it
        '    if (!strcmp(tpl->name, "qwen3_nothink")) x = 1;': "c",
    }
    must_not = ['    /* "llama", "qwen2" */ x = 1;', '    add_str(cols, "text", c.text);',
                '    printf("%s\\n", arch_llm_names[ARCH_LLAMA]);']
    for line, rule in must.items():
        f = findings("(probe)", line + "\n", rows)
        if f and f[0][1].startswith(rule + ":"):
            ok()
        else:
            bad(f"the search does not flag (rule {rule}): {line}")
    for line in must_not:
        if findings("(probe)", line + "\n", rows):
            bad(f"the search flags a line it must not: {line}")
        else:
            ok()
    # a table's words in their one place (ONE_PLACE) pass there, and nowhere else
    line = '    {"qwen3_nothink", 0, {"qwen3"}, false, false, {0}},\n'
    for path, want in ((ONE_PLACE["template"], False), ("compiler/emit/emit_llamafactory.c", True)):
        if bool(findings(path, line, rows)) == want:
            ok()
        else:
            bad(f"the search {'does not flag' if want else 'flags'} the template table's line in {path}")

    keys = load_keys()
    if len(keys) >= 150:
        ok()
    else:
        bad(f"rows keys: {len(keys)} distinct keys; expected at least 150")
    for line, want in {'    if ((e = find(s, "lora_rank"))) get_int32(c, e, 1, 4096, &t->lora_rank);': True,
                       '    static const char *const k[] = {"pref_beta", "pref_ftx"};': True,
                       '    if ((e = find(s, PLAN_KEY(TRAIN, lora_rank)))) x = 1;': False,
                       '    x = 1;   /* find(s, "lora_rank") */': False,
                       '    diag_error(c->d, at, "\'lora_dropout\' must be below 1");': False}.items():
        if bool(key_findings(line + "\n", keys)) == want:
            ok()
        else:
            bad(f"the key search {'does not flag' if want else 'flags'}: {line}")

    allowed = load_allowed()
    files = []
    for top in ("compiler", "runtime", "grammar"):
        for d, _, names in os.walk(top):
            files += [os.path.join(d, n) for n in sorted(names)
                      if n.endswith((".c", ".h", ".cu", ".cuh", ".re", ".y"))]
    flagged = 0
    for path in sorted(files):
        text = open(path, encoding="utf-8", errors="replace").read()
        found = findings(path, text, rows)
        if path.startswith("compiler/check/"):
            found += key_findings(text, keys)
        for n, rule, line in found:
            a = next((a for a in allowed if a["path"] == path and a["text"] in line), None)
            if a:
                a["used"] += 1
                continue
            flagged += 1
            what = "a key of contract/plan_keys.h" if rule.startswith("k:") else "a spelling of contract/plan_vocab.h"
            bad(f"{path}:{n}: {what} written again ({rule}):\n    {line}")
    if flagged == 0:
        ok()
    for a in allowed:
        if a["used"]:
            ok()
        else:
            bad(f"tests/vocab/allowed.txt:{a['at']}: {a['path']}: no line holds {a['text']!r} any more; remove the entry")


def templates_agree(llm_rows):
    """The checker's mark of the chat templates llmc-train renders (the table's
    llmc column) and llmc-train's own renderers (runtime/data/chat_template.c):
    the same set, so neither list can drift from the other."""
    marked = {r["llm"]: r["accept"] for r in llm_rows if r["concept"] == "template" and r["llm"] != "none"}
    p = subprocess.run([READBACK, "--templates"] + sorted(marked), capture_output=True, text=True)
    renders = dict((name, flag == "1") for name, flag in (l.split() for l in p.stdout.splitlines()))
    if p.returncode != 0 or renders.keys() != marked.keys():
        bad(f"readback --templates: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
        return
    differ = sorted(n for n in marked if marked[n] != renders[n])
    if sum(marked.values()) >= 2 and not differ:
        ok()
    else:
        bad("chat templates: the checker marks " + ", ".join(sorted(n for n in marked if marked[n])) +
            " as llmc-train's; llmc-train renders " + ", ".join(sorted(n for n in renders if renders[n])))


def main():
    rows = load_rows()
    if len(rows) >= 40 and len({r["concept"] for r in rows}) >= 14:
        ok()
    else:
        bad(f"rows: {len(rows)} rows of {len({r['concept'] for r in rows})} concepts; expected at least 40 of 14")
    with tempfile.TemporaryDirectory() as tmp:
        round_trip(rows, tmp)
        unknown_words(rows, tmp)
        fp8_lm_head(tmp)
    llm_rows = load_rows("llm")
    templates_agree(llm_rows)
    # the spellings search covers the concepts plan.json does not hold too
    search(rows + llm_rows)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
