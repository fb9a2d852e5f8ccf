#!/usr/bin/env python3
"""Which recipe makes the tiny plan learn whatever the seed and the numerics (issue 27,
item 3)? For each recipe (plan.json overrides of .cuda-run/tiny/plan-gpu.json) and
each seed: our CUDA trainer (bf16) and the PyTorch bf16 reference (tests/cuda/torch_ref.py),
run side by side on the one GPU, then the held-out exact match of each, the seeds at
>= 95%, and the worst loss spike after a quarter of the run (the largest rise of the
loss over its running minimum, a diverging run's signature).

usage: tests/cuda/tiny_recipes.py OUTDIR [--seeds 1,2,3,4,5] [--jobs 8] [--no-ref]
                                  [--recipe NAME:KEY=JSON,KEY=JSON ...]
KEY is train.X or data.X. Default recipes: the plan as it is, and a few candidates.
Needs build/llmc-train-cuda and .cuda-run/tiny (tests/cuda/make_tiny_run.sh).
Prints one line per recipe; OUTDIR/recipes.json holds every run's figures."""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time

R = ".cuda-run/tiny"
DEFAULT = [
    "plan:",
    "beta2_95:train.beta2=0.95",
    "lr1e-3:train.lr=1e-3",
    "beta2_95_wd:train.beta2=0.95,train.weight_decay=0.1",
    "lr1e-3_beta2_95:train.lr=1e-3,train.beta2=0.95",
]


def variant(kind, name, seed, sets):
    """The plan of one run: its own file and output directory per kind (ours and
    the reference run at once and must not share or remove each other's)."""
    p = json.load(open(f"{R}/plan-gpu.json"))
    p["output"]["dir"] = f"run-rc-{kind}-{name}-{seed}"
    p["checkpoint"]["dir"] = f"run-rc-{kind}-{name}-{seed}/ckpt"
    p["train"]["seed"] = seed
    for kv in sets:
        k, v = kv.split("=", 1)
        sect, key = k.split(".")
        p[sect][key] = json.loads(v)
    path = f"{R}/plan-rc-{kind}-{name}-{seed}.json"
    json.dump(p, open(path, "w"), indent=1)
    return path, f"{R}/run-rc-{kind}-{name}-{seed}"


def spike(metrics):
    """The largest rise of the loss over its running minimum after a quarter of the steps."""
    loss = [json.loads(l)["loss"] for l in open(metrics)]
    lo, worst = float("inf"), 0.0
    for i, x in enumerate(loss):
        lo = min(lo, x)
        if i >= len(loss) // 4:
            worst = max(worst, x - lo)
    return worst


def one(kind, name, seed, sets, out):
    plan, run = variant(kind, name, seed, sets)
    subprocess.run(["rm", "-rf", run], check=False, stderr=subprocess.DEVNULL)
    t0 = time.time()
    log = open(f"{out}/{kind}-{name}-{seed}.log", "w")
    if kind == "ours":
        cmd = ["./build/llmc-train-cuda", "run", plan, "--eval-shards", f"{R}/shards-eval"]
        res, met = f"{run}/result.json", f"{run}/metrics.jsonl"
    else:
        d = f"{out}/ref-{name}-{seed}"
        os.makedirs(d, exist_ok=True)
        cmd = [sys.executable, "tests/cuda/torch_ref.py", plan, "--out", d, "--eval-shards", f"{R}/shards-eval",
               "--seed", str(seed), "--precision", "bf16", "--device", "cuda", "--threads", "1"]
        res, met = f"{d}/result.json", f"{d}/metrics.jsonl"
    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    row = {"kind": kind, "recipe": name, "seed": seed, "rc": rc, "seconds": round(time.time() - t0, 1)}
    if rc == 0 and not os.path.exists(res):
        row["rc"] = -1   # ran, but wrote no result: reported, not a crash of the sweep
    if row["rc"] == 0:
        r = json.load(open(res))
        row.update(correct=r["eval_correct"], documents=r["eval_documents"], final_loss=r["final_loss"],
                   spike=round(spike(met), 4))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--no-ref", action="store_true")
    ap.add_argument("--recipe", action="append")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    seeds = [int(s) for s in a.seeds.split(",")]
    recipes = []
    for spec in a.recipe or DEFAULT:
        name, _, sets = spec.partition(":")
        recipes.append((name, [s for s in sets.split(",") if s]))
    kinds = ["ours"] + ([] if a.no_ref else ["ref"])
    rows = []
    # ours first (seconds a run), then the reference (minutes): each run's line as it
    # ends, so that a call cut short still reports what finished
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(one, k, n, s, sets, a.out) for k in kinds for n, sets in recipes for s in seeds]
        for f in cf.as_completed(futs):
            r = f.result()
            rows.append(r)
            print(f"run {r['kind']} {r['recipe']} seed {r['seed']}: exit {r['rc']}, "
                  f"{r.get('correct', '-')}/{r.get('documents', '-')}, spike {r.get('spike', '-')}, {r['seconds']} s",
                  flush=True)
            json.dump(rows, open(f"{a.out}/recipes.json", "w"), indent=1)
    for n, sets in recipes:
        for k in kinds:
            rs = [r for r in rows if r["recipe"] == n and r["kind"] == k]
            good = sum(1 for r in rs if r["rc"] == 0 and r["correct"] >= 0.95 * r["documents"])
            accs = " ".join(str(r["correct"]) if r["rc"] == 0 else f"exit{r['rc']}" for r in rs)
            spikes = " ".join(f"{r.get('spike', 0):.2f}" for r in rs)
            print(f"recipe {n} ({','.join(sets) or 'as planned'}) {k}: held-out {accs} /400; "
                  f"{good}/{len(rs)} seeds >= 95%; spikes {spikes}; {max(r['seconds'] for r in rs):.0f} s")


if __name__ == "__main__":
    main()
