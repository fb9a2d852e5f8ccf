#!/usr/bin/env python3
"""tests/status/check.py — independent checks of `llmc status` output (tests/status/status.sh).

    check.py running STATUS.json PLAN.json JOBID     the JSON of a running job against the files
    check.py refit STATUS.json PLAN.json METRICS      the refit against the metrics file (and the plan)
    check.py segments STATUS.json N                    slurm.segments == N
    check.py svg FILE.svg METRICS.jsonl               the picture holds every step of the metrics
    check.py png FILE.png                             a valid PNG (CRCs, zlib, size) with the curve's colour
    check.py watch FILE                               >= 2 JSON lines, each a status object

Every figure is recomputed here from the trainer's own files; exit 1 with a message on a mismatch."""
import json, math, os, re, statistics, struct, sys, time, zlib
import xml.etree.ElementTree as ET


def fail(msg):
    print("check.py: " + msg)
    sys.exit(1)


def close(a, b, rel=1e-9, what=""):
    if a is None or b is None or abs(a - b) > rel * max(abs(a), abs(b), 1e-12):
        fail(f"{what}: {a} != {b}")


def metrics_lines(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.endswith("\n") and line.strip():
                out.append(json.loads(line))
    return out


def calibrate_measure(m):
    """llmc calibrate's measurement of an llmc metrics file (docs/estimator.md,
    "Site profiles"): the first 10% of the steps (at least one) are warm-up,
    the step time is the median of the rest."""
    skip = max(1, math.ceil(0.1 * len(m)))
    rest = m[skip:]
    return statistics.median(x["step_time_s"] for x in rest), rest[0]["step"], rest[-1]["step"], len(rest)


def check_refit(st, plan, m, total, step):
    """The refit of status STATUS against the metrics lines m it was fitted on:
    calibrate's measurement, the estimate refitted to it (one run fits the mfu
    alone, so the refitted step time is the measured one), the ETA from it and
    the drift at CALIB_DRIFT_PERCENT = 15."""
    r = st["refit"]
    if not r["fitted"]: fail(f"no refit: {r['note']}")
    m = [x for x in m if x["step"] <= r["last_step"]]
    meas, first, last, n = calibrate_measure(m)
    close(r["measured_seconds"], meas, 1e-12, "refit measurement")
    if (r["first_step"], r["last_step"], r["steps_used"]) != (first, last, n):
        fail(f"refit steps {r['first_step']}-{r['last_step']} ({r['steps_used']}) != {first}-{last} ({n})")
    close(r["step_seconds"], meas, 1e-6, "refitted step time")
    est = plan["estimate"]["step_seconds"]
    close(r["estimate_error_percent"], 100 * (est - r["step_seconds"]) / r["step_seconds"], 1e-9, "refit error")
    if r["drift_threshold_percent"] != 15 or r["drifts"] != (abs(r["estimate_error_percent"]) > 15):
        fail(f"drift {r['drifts']} at {r['estimate_error_percent']:+.2f}% (threshold {r['drift_threshold_percent']})")
    close(r["plan_mfu"], plan["estimate"]["mfu"], 1e-12, "the plan's mfu")
    e = st["eta"]
    if e["from"] != "refit": fail(f"eta from {e['from']}")
    close(e["run_seconds"], (total - step) * r["step_seconds"], 1e-9, "eta")
    close(e["plan_seconds"], (total - step) * est, 1e-9, "the plan's eta")
    return r


def refit(status_path, plan_path, metrics_path):
    st = json.load(open(status_path))
    plan = json.load(open(plan_path))
    r = check_refit(st, plan, metrics_lines(metrics_path), st["progress"]["total_steps"], st["progress"]["step"])
    print(f"measured {r['measured_seconds']:.4g} s over steps {r['first_step']}-{r['last_step']}, refitted "
          f"{r['step_seconds']:.4g} s (mfu {r['mfu']:.4g}, the plan's {r['plan_mfu']:.4g}), "
          f"error {r['estimate_error_percent']:+.1f}%, drifts {r['drifts']}")


def running(status_path, plan_path, jobid):
    st = json.load(open(status_path))
    plan = json.load(open(plan_path))
    pdir = os.path.dirname(plan_path)
    out_dir = os.path.join(pdir, plan["output"]["dir"])
    sl = st["slurm"]
    if sl["job_id"] != jobid: fail(f"job id {sl['job_id']} != {jobid}")
    if sl["state"] != "RUNNING": fail(f"state {sl['state']}")
    if st["status"] != "RUNNING": fail(f"status {st['status']}")
    if not (0 < sl["run_seconds"] <= sl["time_limit_seconds"]): fail(f"run {sl['run_seconds']} limit {sl['time_limit_seconds']}")
    if sl["time_limit_seconds"] != plan["slurm"]["time_limit_seconds"]: fail("time limit differs from the plan's")
    m = metrics_lines(os.path.join(out_dir, plan["output"]["metrics"]))
    p = st["progress"]
    step = p["step"]
    at = [i for i, x in enumerate(m) if x["step"] == step]
    if not at: fail(f"step {step} not in metrics.jsonl")
    i = at[-1]
    win = m[max(0, i - 19): i + 1]
    close(p["loss"], m[i]["loss"], 1e-12, "latest loss")
    close(p["loss_smoothed"], statistics.fmean(x["loss"] for x in win), 1e-9, "smoothed loss")
    close(p["tokens_per_second"], statistics.fmean(x["tokens_per_s"] for x in win), 1e-9, "tokens/s")
    meas = statistics.median(x["step_time_s"] for x in win)
    t = st["step_time"]
    close(t["measured_seconds"], meas, 1e-9, "median step time")
    close(t["estimated_seconds"], plan["estimate"]["step_seconds"], 1e-12, "estimated step time")
    close(t["estimate_error_percent"], 100 * (plan["estimate"]["step_seconds"] - meas) / meas, 1e-9, "estimate error")
    prom = open(os.path.join(out_dir, "llmc_train.prom")).read()
    total = [float(l.split()[-1]) for l in prom.splitlines() if l.startswith("llmc_train_total_steps{")][0]
    if p["total_steps"] != total: fail(f"total steps {p['total_steps']} != prom {total}")
    if p["total_steps"] != plan["train"]["max_steps"]: fail("total steps != plan's max_steps")
    close(p["percent"], 100 * step / total, 1e-9, "percent")
    rows = json.load(open(os.path.join(pdir, plan["data"]["shards_dir"], "index.json")))["n_rows"]
    close(p["epoch"], step * plan["train"]["global_batch"] / rows, 1e-9, "epoch")
    r = check_refit(st, plan, m, total, step)
    e = st["eta"]
    left = sl["time_limit_seconds"] - sl["run_seconds"]
    close(e["segment_left_seconds"], left, 1e-9, "segment left")
    if e["finishes_in_segment"] != ((total - step) * r["step_seconds"] <= left): fail("finishes_in_segment")
    c = st["checkpoint"]
    ck = os.path.join(pdir, plan["checkpoint"]["dir"])
    if not c["valid"]: fail(f"no valid checkpoint: {c['note']}")
    sj_path = os.path.join(ck, c["name"], "state.json")
    if os.path.exists(sj_path):
        sj = json.load(open(sj_path))
        if sj["step"] != c["step"]: fail(f"checkpoint step {c['step']} != state.json {sj['step']}")
    else:   # the running job wrote a newer checkpoint and pruned this one since status read it
        newer = int(open(os.path.join(ck, "latest")).read().strip().split("-")[1])
        if newer <= c["step"]: fail(f"checkpoint {c['name']} is gone and latest (step {newer}) is not newer")
    if not (0 <= c["age_seconds"] < 300): fail(f"checkpoint age {c['age_seconds']}")
    if sl["segments"] != 1: fail(f"segments {sl['segments']} in a job never requeued")
    print(f"step {step}/{int(total)}, loss {p['loss']:.4f}, measured {meas:.4g} s vs estimated "
          f"{t['estimated_seconds']:.4g} s ({t['estimate_error_percent']:+.1f}%); refitted {r['step_seconds']:.4g} s "
          f"(steps {r['first_step']}-{r['last_step']}, {r['estimate_error_percent']:+.1f}%, drifts {r['drifts']}), "
          f"eta {e['run_seconds']:.0f} s")


def segments(status_path, n):
    st = json.load(open(status_path))
    sl = st["slurm"]
    if sl["segments"] != int(n) or sl["segments_in_log"] != int(n) or sl["restarts"] != int(n) - 1:
        fail(f"segments {sl['segments']} (log {sl['segments_in_log']}, restarts {sl['restarts']}) != {n}")


def svg(path, metrics):
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}polyline")
    if len(lines) != 1: fail("one polyline expected")
    pts = lines[0].get("points").split()
    m = metrics_lines(metrics)
    if len(pts) != len(m): fail(f"{len(pts)} points for {len(m)} metrics lines")
    ys = [float(p.split(",")[1]) for p in pts]
    # the loss goes down: the last point is lower on the page (larger y) than the first
    if not ys[-1] > ys[0]: fail("the curve does not go down")
    print(f"{len(pts)} points")


def png(path):
    d = open(path, "rb").read()
    if d[:8] != b"\x89PNG\r\n\x1a\n": fail("no PNG signature")
    pos, idat, dims = 8, b"", None
    while pos < len(d):
        n, typ = struct.unpack(">I4s", d[pos:pos + 8])
        body = d[pos + 8:pos + 8 + n]
        crc = struct.unpack(">I", d[pos + 8 + n:pos + 12 + n])[0]
        if zlib.crc32(typ + body) != crc: fail(f"bad CRC in {typ}")
        if typ == b"IHDR": dims = struct.unpack(">IIBBBBB", body)
        if typ == b"IDAT": idat += body
        pos += 12 + n
    w, h, depth, colour = dims[:4]
    raw = zlib.decompress(idat)
    if (depth, colour) != (8, 2) or len(raw) != h * (1 + 3 * w): fail("bad raster size")
    blue = sum(1 for i in range(0, len(raw) - 2) if raw[i:i + 3] == b"\x1f\x77\xb4")
    if blue < 200: fail(f"only {blue} curve pixels")
    print(f"{w}x{h}, {blue} curve pixels")


def watch(path):
    objs = [json.loads(l) for l in open(path) if l.strip()]
    if len(objs) < 2 or any("progress" not in o for o in objs): fail(f"{len(objs)} snapshots")


def prom_samples(path):
    """name -> value of a Prometheus text file; every sample must have HELP and TYPE
    (gauge; counter for the one *_total)."""
    vals, typed = {}, set()
    for l in open(path):
        l = l.rstrip("\n")
        if l.startswith("# TYPE "):
            _, _, name, typ = l.split(" ", 3)
            if typ != ("counter" if name.endswith("_total") else "gauge"): fail(f"{name}: type {typ}")
            typed.add(name)
        elif l and not l.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", l).group(0)
            if name not in typed: fail(f"{name}: sample before its TYPE line")
            v = l.rsplit(" ", 1)[1]
            vals[name] = float(v.replace("+Inf", "inf").replace("-Inf", "-inf"))
    return vals


FUNCS = {"time", "label_values", "rate", "sum", "by", "avg", "max", "min"}


def dashboard(dash_path, prom_path):
    """Every metric name of every expression is one the trainer wrote, and every
    expression evaluates to a finite number against that file."""
    d = json.load(open(dash_path))
    vals = prom_samples(prom_path)
    used, nexpr = set(), 0
    exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
    if any(not p["targets"] for p in d["panels"]): fail("a panel without targets")
    for v in d["templating"]["list"]:
        if v.get("type") == "query":
            m = re.fullmatch(r"label_values\((\w+), llmc_job\)", v["query"])
            if not m or m.group(1) not in vals: fail(f"template query {v['query']}")
    for e in exprs:
        nexpr += 1
        bare = re.sub(r"\{[^}]*\}", "", e)
        names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare)) - FUNCS
        for n in names:
            if n not in vals: fail(f"'{n}' in {e!r} is not in {prom_path} (it has {sorted(vals)})")
        used |= names
        py = re.sub(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{[^}]*\}", lambda m: repr(vals[m.group(1)]), e)
        py = py.replace("time()", repr(time.time()))
        if re.search(r"[a-zA-Z_]", py.replace("e-", "").replace("e+", "")): fail(f"cannot evaluate {e!r} -> {py!r}")
        x = eval(py, {"__builtins__": {}})
        if not math.isfinite(x): fail(f"{e!r} = {x}")
    want = {"llmc_train_loss", "llmc_train_tokens_per_second", "llmc_train_step_seconds",
            "llmc_train_step_seconds_estimate", "llmc_train_peak_rss_bytes", "llmc_train_memory_estimate_bytes",
            "llmc_train_checkpoint_timestamp_seconds"}
    if want - used: fail(f"no panel shows {sorted(want - used)}")
    print(f"{nexpr} expressions, {len(used)} metric names, all in the .prom and finite")


if __name__ == "__main__":
    {"dashboard": dashboard, "running": running, "refit": refit, "segments": segments, "svg": svg, "png": png, "watch": watch}[sys.argv[1]](*sys.argv[2:])
