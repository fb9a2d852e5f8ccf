#!/usr/bin/env python3
"""tests/limits/walk.py LLMC LLMC_TRAIN — walk every row of contract/plan_limits.h.

For each row (a plan.json field with its limits) and each edge value (min, max,
one step or ulp past each, open bounds, a fraction for integers, huge values,
NaN/Infinity, null, a string, a boolean):
  1. .llm side (rows that the plan spells): write the value into the tiny
     example, run `llmc check`; a value outside the row must be an error at its
     line, one inside must draw no limit error there. When the plan compiles,
     `llmc-train check-plan` must accept the emitted plan.json, which must hold
     the value.
  2. plan.json side: edit the field of a valid emitted plan.json; check-plan must
     accept exactly the values inside the row, and for every value the .llm side
     judged, both programs must agree.
Then the cases of issue 11 that only a plan.json can hold, and every row of
contract/backend_caps.h: its LoRA rank range walked at its edges through `llmc
check` on a cluster of that backend. Prints "N passed, N failed".
"""
import json, math, os, re, subprocess, sys, tempfile

LLMC, TRAIN = sys.argv[1], sys.argv[2]
ROOT = os.getcwd()
BASE_LLM = open("examples/tiny/tiny.llm").read()
passed = failed = 0


def ok():
    global passed
    passed += 1


def bad(msg):
    global failed
    failed += 1
    print("FAIL:", msg)


def rows():
    text = open("contract/plan_limits.h").read()
    body = text[text.index("#define PLAN_LIMITS(X)"):text.index("typedef enum { PLAN_INT")]
    consts = {"PLAN_INT_EXACT_MAX": "9007199254740991", "PLAN_YEAR_SECONDS": "(366.0 * 86400)"}
    out = []
    for m in re.finditer(r'X\((\w+),\s*"(\w+)",\s*"(\w+)",\s*(PLAN_INT|PLAN_NUM),\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*"([^"]*)",\s*"([^"]*)"\)', body):
        ident, sect, key, kind, lo, hi, flags, llm, meaning = m.groups()
        ev = lambda s: eval(re.sub(r"\b(PLAN_\w+)\b", lambda k: consts[k.group(1)], s), {})
        out.append(dict(id=ident, sect=sect, key=key, int=kind == "PLAN_INT", min=float(ev(lo)), max=float(ev(hi)),
                        min_open="PLAN_MIN_OPEN" in flags, max_open="PLAN_MAX_OPEN" in flags,
                        nullable="PLAN_NULLABLE" in flags, llm=None if llm == "-" else llm))
    n = len(re.findall(r"^\s*X\(", body, re.M))
    if n != len(out) or n < 30:
        bad(f"parsed {len(out)} of {n} rows of contract/plan_limits.h")
    return out


def valid(r, x):
    """The row's verdict, as the C side computes it (plan_limit_violation)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return x is None and r["nullable"]
    if not math.isfinite(x) or (r["int"] and x != math.floor(x)):
        return False
    if x < r["min"] or (r["min_open"] and x == r["min"]):
        return False
    if x > r["max"] or (r["max_open"] and x == r["max"]):
        return False
    return True


def edges(r):
    lo, hi = r["min"], r["max"]
    if r["int"]:
        vs = [int(lo), int(lo) - 1, int(hi), int(hi) + 1, int(lo) + 0.5, 2**63 - 1, -(2**63)]
    else:
        vs = [lo, math.nextafter(lo, -math.inf), math.nextafter(lo, math.inf), hi,
              math.nextafter(hi, math.inf), math.nextafter(hi, -math.inf), -1.0, 1e300]
    return vs


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


BLOCKS = {"model": "model tiny {", "dataset": "dataset arith {", "train": "train tiny_sft {"}


def llm_spelling(r, x):
    where, form = r["llm"].split(" ", 1)
    block, key = where.split(".")
    if isinstance(x, float) and x == int(x) and abs(x) < 1e17 and not r["int"]:
        num = repr(x)                      # "60.0": a float the lexer reads as one
    else:
        num = repr(x)
    if "%p" in form:
        pct = x * 100
        num = repr(pct)
    value = form.replace("%v", num).replace("%p", num)
    return block, key, value


def with_value(block, key, value):
    """The tiny plan with `key = value` in block; returns (text, line number)."""
    lines = BASE_LLM.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith(BLOCKS[block]))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("}"))
    for i in range(start, end):
        if re.match(r"\s*%s\s*=" % key, lines[i]):
            lines[i] = f"  {key} = {value}"
            return "\n".join(lines), i + 1
    lines.insert(end, f"  {key} = {value}")
    return "\n".join(lines), end + 1


LIMIT_WORDS = re.compile(r"must be (at least|at most|greater than|less than|between)|out of range|"
                         r"must be an integer|longer than a year|must not be negative|must not exceed")


def llm_side(r, x, tmp):
    """None when the value cannot be written in a plan; else True when llmc refused it at its line."""
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return None
    block, key, value = llm_spelling(r, x)
    text, line = with_value(block, key, value)
    path = os.path.join(tmp, "p.llm")
    open(path, "w").write(text)
    p = run([LLMC, "check", "--format=json", path])
    try:
        diags = json.loads(p.stdout)
    except ValueError:
        bad(f"{r['id']} = {value}: llmc check gave no JSON (exit {p.returncode}) {p.stderr[:200]}")
        return None
    at_line = [d for d in diags if d.get("severity") == "error" and d.get("range") and
               d["range"]["start"]["line"] == line]
    # a limit error about this key ('lr', 'batch', 'beta1', ...), not a cross-field
    # rule that another key's value decides (kv_heads > heads, min_lr > lr)
    names = {f"'{key}'", f"'{r['key']}'"}
    limit_err = [d for d in at_line if LIMIT_WORDS.search(d["summary"]) and any(n in d["summary"] for n in names)]
    want = valid(r, x)
    label = f"{r['id']} .llm {key} = {value}"
    if want and limit_err:
        bad(f"{label}: inside the limits, llmc refused: {limit_err[0]['summary']}")
    elif not want and not at_line:
        bad(f"{label}: outside the limits, llmc said nothing at line {line}")
    else:
        ok()
    if not want:
        return True
    if limit_err:
        return True
    if any(d.get("severity") == "error" for d in diags):
        return None    # refused by another rule: no verdict on the limit to compare

    # accepted: compile, and the trainer must accept the plan.json with the value in it
    out = os.path.join(tmp, "out")
    c = run([LLMC, path, "-o", out], cwd=ROOT)
    if c.returncode != 0:
        bad(f"{label}: check clean but compile failed: {c.stderr[:300]}")
        return False
    t = run([TRAIN, "check-plan", os.path.join(out, "plan.json")])
    if t.returncode != 0:
        bad(f"{label}: llmc accepted, llmc-train refused: {t.stderr.strip()}")
    else:
        ok()
    pj = json.load(open(os.path.join(out, "plan.json")))
    got = pj["datasets"][0][r["key"]] if r["sect"] == "datasets" else pj[r["sect"]][r["key"]]
    if got is None and r["key"] == "warmup_steps" and x == 0 and pj["train"]["warmup_ratio"] == 0:
        got = 0    # "warmup = 0 steps" is written as warmup_ratio 0
    if got is None or got != x:
        bad(f"{label}: plan.json holds {got}")
    else:
        ok()
    return False


def json_edit(base, r, x):
    p = json.loads(json.dumps(base))
    obj = p["datasets"][0] if r["sect"] == "datasets" else p[r["sect"]]
    obj[r["key"]] = x
    num = isinstance(x, (int, float)) and not isinstance(x, bool) and valid(r, x)
    tr, par = p["train"], p["parallel"]
    # keep the cross-field rules satisfied, so that only the row decides
    if r["key"] == "heads" and num:
        p["model"]["kv_heads"] = 1
    if r["key"] == "kv_heads" and num:
        p["model"]["heads"] = x
    if r["key"] == "data_parallel" and num:
        par["world_size"] = x
    if r["key"] == "lr" and num:
        tr["min_lr"] = 0
    if r["key"] == "min_lr" and num:
        tr["lr"] = max(x, tr["lr"])
    if r["key"] == "warmup_steps" and x is not None:
        tr["warmup_ratio"] = None
    if r["key"] == "global_batch" and num:
        tr["micro_batch"] = math.gcd(int(x), 65536)
        tr["grad_accum"] = int(x) // tr["micro_batch"]
    if r["key"] == "warmup_ratio" and x is None:
        tr["warmup_steps"] = 5
    if r["key"] == "epochs" and x is None:
        tr["max_steps"] = 10
    if r["key"] == "context" and num:
        p["model"]["max_context"] = max(x, 2)
    if r["key"] == "max_context" and num and x >= 2:
        # both programs refuse data.context > model.max_context: keep the pair valid
        p["data"]["context"] = min(p["data"]["context"], int(x))
    if r["key"] in ("micro_batch", "grad_accum", "data_parallel") and num:
        tr["global_batch"] = tr["micro_batch"] * tr["grad_accum"] * par["data_parallel"]
    return p


def trainer_accepts(plan, tmp, name="e.json"):
    # beside the compiled plan.json: its relative paths (the tokenizer, which
    # check-plan looks at) stay what they were
    path = os.path.join(tmp, "base", name)
    with open(path, "w") as f:
        json.dump(plan, f, indent=1)    # NaN/Infinity are written as such: not JSON, refused
    t = run([TRAIN, "check-plan", path])
    if t.returncode not in (0, 1):
        bad(f"check-plan exit {t.returncode}: {t.stderr.strip()}")
    return t.returncode == 0, t.stderr.strip()


def backend_rows():
    """The rows of contract/backend_caps.h's LLMC_BACKENDS(X)."""
    text = open("contract/backend_caps.h").read()
    body = text[text.index("#define LLMC_BACKENDS(X)"):text.index("typedef enum")]
    offloads = ["OFFLOAD_NONE", "OFFLOAD_OPTIMIZER", "OFFLOAD_ALL"]   # plan_vocab.h's order
    out = [dict(id=m.group(1), max_shard=int(m.group(2)), step=int(m.group(3)), max=int(m.group(4)),
                max_offload=offloads.index(m.group(5)), offload_multi_shard=int(m.group(6)), fp8=m.group(7) == "1",
                fp8_max_shard=int(m.group(8)), fp8_max_offload=offloads.index(m.group(9)),
                split_offload=m.group(10) == "1") for m in
           re.finditer(r'X\((\w+),\s*"\w+",\s*(\d+),\s*\d+,\s*\d+,\s*\d+,\s*(\d+),\s*(\d+),\s*(OFFLOAD_\w+),\s*(\d+),'
                       r'\s*(\d+),\s*(\d+),\s*(OFFLOAD_\w+),\s*(\d+),', body)]
    n = len(re.findall(r"^\s*X\(", body, re.M))
    if n != len(out) or n < 2:
        bad(f"parsed {len(out)} of {n} rows of contract/backend_caps.h")
    return out


def walk_backend_caps(tmp, plan_max):
    """Each backend's lora_rank range at its edges: llmc check refuses exactly
    the ranks the backend would refuse (runtime/cuda/lora_cuda.c: the same row)."""
    for b in backend_rows():
        gpu = "none" if b["id"] == "CPU" else "H100_80GB x 1"
        hi = b["max"] or plan_max
        ranks = {b["step"]: True, hi: True, hi - b["step"]: True}
        if b["step"] > 1:
            ranks.update({b["step"] + 1: False, b["step"] - 1: False, hi - 1: False})
        if hi + b["step"] <= plan_max:
            ranks[hi + b["step"]] = False
        for rank, want in sorted(ranks.items()):
            text = BASE_LLM.replace("gpu       = none", f"gpu       = {gpu}")
            if gpu != "none":
                text = text.replace("precision        = fp32", "precision        = bf16")
            text = text.replace("  packing          = true", f"  method = lora\n  lora_rank = {rank}")
            path = os.path.join(tmp, "b.llm")
            open(path, "w").write(text)
            p = run([LLMC, "check", "--color=never", path])
            refused = p.returncode == 1 and f"lora_rank = {rank}: the llmc trainer on" in p.stderr
            if p.returncode == 0 and want or refused and not want:
                ok()
            else:
                bad(f"backend {b['id']} lora_rank = {rank}: expected {'accepted' if want else 'refused'}, "
                    f"got exit {p.returncode}: {p.stderr[:300]}")


def walk_backend_parallel(tmp):
    """Each backend's ZeRO stages and offload kinds on one and two ranks
    (full training): llmc check refuses exactly what the row says the backend
    does not run (runtime/cuda/backend_cuda.c cu_unsupported: the same row and
    predicates, contract/backend_caps.h)."""
    for b in backend_rows():
        for ranks in (1, 2):
            if b["id"] == "CPU":
                text = BASE_LLM.replace("  time    = 10 min", f"  time    = 10 min\n  tasks   = {ranks}")
            else:
                text = BASE_LLM.replace("gpu       = none", f"gpu       = H100_80GB x {ranks}")
                text = text.replace("precision        = fp32", "precision        = bf16")
            for zero in range(4):
                words = ["none", "zero1", "zero2", "zero3"]
                refuse = zero > b["max_shard"] and ranks > 1
                one = text.replace("shard            = none", f"shard            = {words[zero]}")
                check_one(tmp, one, refuse, f"shard = {words[zero]} is not implemented by the llmc trainer on",
                          f"backend {b['id']} shard = {words[zero]} on {ranks} ranks")
            for k, word in enumerate(["none", "optimizer", "all"]):
                for zero in (0, 2):   # the plan's shard: none, or zero2 (each rank offloads its shard)
                    refuse = k > 0 and (k > b["max_offload"] or ranks > 1 and zero < b["offload_multi_shard"])
                    one = text.replace("  packing          = true", f"  packing          = true\n  offload = {word}")
                    one = one.replace("shard            = none", f"shard            = {['none', 'zero1', 'zero2'][zero]}")
                    check_one(tmp, one, refuse, f"offload = {word} is not implemented by the llmc trainer here",
                              f"backend {b['id']} offload = {word} shard {zero} on {ranks} ranks")


def walk_backend_formats(tmp):
    """Each backend's FP8 and split-master columns: precision = fp8 at each ZeRO
    stage on two ranks and with optimizer offload, master_weights = split with
    offload; llmc check refuses exactly what the row says the backend does not
    run (runtime/cpu/cpu_backend.c cpu_check_plan asks the same row)."""
    for b in backend_rows():
        cpu = b["id"] == "CPU"
        if cpu:
            text = BASE_LLM.replace("  time    = 10 min", "  time    = 10 min\n  tasks   = 2")
        else:
            text = BASE_LLM.replace("gpu       = none", "gpu       = H100_80GB x 2")
        words = ["none", "zero1", "zero2", "zero3"]
        for zero in range(4):
            one = text.replace("precision        = fp32", "precision        = fp8")
            one = one.replace("shard            = none", f"shard            = {words[zero]}")
            refuse = not b["fp8"] or zero > b["fp8_max_shard"]
            msg = ("cannot use precision = fp8" if cpu else
                   f"precision = fp8 with shard = {words[zero]} is not yet in llmc-train")
            check_one(tmp, one, refuse, msg, f"backend {b['id']} precision = fp8 shard = {words[zero]} on 2 ranks")
        if cpu:
            continue
        one = text.replace("precision        = fp32", "precision        = fp8")
        one = one.replace("shard            = none", "shard            = zero2")
        one = one.replace("  packing          = true", "  packing          = true\n  offload = optimizer")
        check_one(tmp, one, b["fp8_max_offload"] < 1, "precision = fp8 with offload = optimizer is not yet in",
                  f"backend {b['id']} precision = fp8 with offload = optimizer")
        for master in ("fp32", "split"):
            one = text.replace("precision        = fp32", "precision        = bf16")
            one = one.replace("shard            = none", "shard            = zero2")
            one = one.replace("  packing          = true",
                              f"  packing          = true\n  offload = optimizer\n  master_weights = {master}")
            check_one(tmp, one, master == "split" and not b["split_offload"],
                      "master_weights = split does not go with offload = optimizer",
                      f"backend {b['id']} master_weights = {master} with offload = optimizer")


def check_one(tmp, text, refuse, message, label):
    """llmc check of one plan: accepted, or refused with message."""
    path = os.path.join(tmp, "p.llm")
    open(path, "w").write(text)
    p = run([LLMC, "check", "--color=never", path])
    refused = p.returncode == 1 and message in p.stderr
    if p.returncode == 0 and not refuse or refused and refuse:
        ok()
    else:
        bad(f"{label}: expected {'refused' if refuse else 'accepted'}, got exit {p.returncode}: {p.stderr[:300]}")


def main():
    tmp = tempfile.mkdtemp(prefix="llmc-limits.")
    # the plans written into tmp name the tiny example's tokenizer relative to
    # themselves; check-plan refuses a tokenizer missing where it can be checked
    os.symlink(os.path.join(ROOT, "examples", "tiny", "tokenizer"), os.path.join(tmp, "tokenizer"))
    base_dir = os.path.join(tmp, "base")
    c = run([LLMC, "examples/tiny/tiny.llm", "-o", base_dir])
    if c.returncode != 0:
        bad("the tiny example does not compile: " + c.stderr[:300])
        print(f"{passed} passed, {failed} failed")
        return 1
    base = json.load(open(os.path.join(base_dir, "plan.json")))
    ok_base, msg = trainer_accepts(base, tmp)
    (ok if ok_base else lambda: bad("emitted tiny plan.json refused: " + msg))()

    for r in rows():
        for x in edges(r) + [math.nan, math.inf, -math.inf, "1", True, None, 1e300, -1e300]:
            llm_refused = llm_side(r, x, tmp) if r["llm"] else None
            acc, msg = trainer_accepts(json_edit(base, r, x), tmp)
            want = valid(r, x)
            label = f"{r['id']} plan.json {r['sect']}.{r['key']} = {x!r}"
            if acc != want:
                bad(f"{label}: llmc-train {'accepted' if acc else 'refused'} ({msg}); the table says {'accept' if want else 'refuse'}")
            elif not acc and isinstance(x, float) and not math.isfinite(x):
                (ok if "invalid JSON" in msg else lambda: bad(f"{label}: {msg}"))()   # JSON has no NaN/Infinity
            elif not acc and r["key"] not in msg:
                bad(f"{label}: refusal does not name the field: {msg}")
            else:
                ok()
            if llm_refused is not None:
                (ok if llm_refused == (not acc) else lambda: bad(f"{label}: llmc {'refused' if llm_refused else 'accepted'}, llmc-train {'accepted' if acc else 'refused'}"))()

    # ---- the cases of issue 11, trainer side: each refused with its field named
    def case(name, edit, field, accept=False):
        p = json.loads(json.dumps(base))
        edit(p)
        acc, msg = trainer_accepts(p, tmp)
        if acc != accept:
            bad(f"case {name}: llmc-train {'accepted' if acc else 'refused'}: {msg}")
        elif not accept and field not in msg:
            bad(f"case {name}: refusal does not name {field}: {msg}")
        else:
            ok()

    def tr(**kv):
        return lambda p: p["train"].update(kv)
    case("lr = 0", tr(lr=0.0, min_lr=0.0), "train.lr")
    case("eps = 0", tr(eps=0.0), "train.eps")
    case("min_lr > lr", tr(lr=1e-3, min_lr=0.998), "train.min_lr")
    case("seed above 2^53", tr(seed=2**53 + 2), "train.seed")
    case("max_steps = 1e16", tr(max_steps=10**16), "train.max_steps")
    case("checkpoint.dir = /", lambda p: p["checkpoint"].update(dir="/"), "checkpoint.dir")
    case("checkpoint.dir = //", lambda p: p["checkpoint"].update(dir="//"), "checkpoint.dir")
    case("output.dir = /", lambda p: p["output"].update(dir="/"), "output.dir")
    case("output.metrics = ../../..", lambda p: p["output"].update(metrics="../../.."), "output.metrics")
    case("output.metrics = a/../../m", lambda p: p["output"].update(metrics="a/../../m"), "output.metrics")
    case("output.metrics = /etc/x", lambda p: p["output"].update(metrics="/etc/x"), "output.metrics")
    case("output.metrics = logs/m.jsonl", lambda p: p["output"].update(metrics="logs/m.jsonl"), "", accept=True)
    case("every_steps = INT64_MAX", lambda p: p["checkpoint"].update(every_steps=2**63 - 1), "checkpoint.every_steps")
    case("vocab = 1", lambda p: p["model"].update(vocab=1), "model.vocab")
    case("samples = INT64_MAX", lambda p: p["datasets"][0].update(samples=2**63 - 1), "datasets[0].samples")
    case(".parquet with backend llmc", lambda p: p["datasets"][0].update(file="d/chat.parquet"), "datasets[0].file")
    case(".parquet with backend llamafactory",
         lambda p: (p["datasets"][0].update(file="d/chat.parquet"), p.update(backend="llamafactory")), "", accept=True)
    case("ESC in a column", lambda p: p["datasets"][0]["columns"].update(messages="m\x1b[2J"), "datasets[0].columns.messages")
    case("ESC in a tag", lambda p: p["datasets"][0]["tags"].update(role="r\x1b]0;x\x07"), "datasets[0].tags.role")
    case("global batch overflowing int", lambda p: (p["train"].update(micro_batch=65536, grad_accum=1 << 20, global_batch=1 << 30)),
         "train.global_batch")

    # ---- what each backend runs (contract/backend_caps.h)
    walk_backend_caps(tmp, next(int(r["max"]) for r in rows() if r["id"] == "FINETUNE_LORA_RANK"))
    walk_backend_parallel(tmp)
    walk_backend_formats(tmp)

    # ---- the stop signal against the time limit (llmc side; the bad plan has the error)
    def job_time(t, steps):
        text = re.sub(r"(checkpoint_every = \d+ steps)", lambda m: f"{m.group(1)}\n  max_steps = {steps}",
                      BASE_LLM.replace("time    = 10 min", f"time    = {t}"))
        assert "max_steps" in text
        path = os.path.join(tmp, "t.llm")
        open(path, "w").write(text)
        return run([LLMC, "check", "--color=never", path])
    p = job_time("2 min", 100000)
    if p.returncode == 0 and "spends 60 s of each of the" in p.stderr:
        ok()
    else:
        bad(f"time = 2 min, many segments: expected a warning, exit 0; got {p.returncode}: {p.stderr[:400]}")
    p = job_time("1 min", 100000)
    if p.returncode == 1 and "leaves no time to train" in p.stderr:
        ok()
    else:
        bad(f"time = 1 min, many segments: expected an error; got {p.returncode}: {p.stderr[:400]}")
    p = job_time("1 min", 10)
    if p.returncode == 0 and "leaves no time" not in p.stderr:
        ok()
    else:
        bad(f"time = 1 min, one segment: expected clean; got {p.returncode}: {p.stderr[:400]}")
    subprocess.run(["rm", "-rf", tmp])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


sys.exit(main())
