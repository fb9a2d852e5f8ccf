#!/usr/bin/env python3
"""Time `llmc check` on generated plans and hostlists of growing size.

usage: bench.py LLMC [--report-only]

Prints one table per shape: size, best-of-3 wall time, cost per line (or node), and
the ratio to the previous size's time (2.0 per doubling means linear growth). Exits 1
if the cost per unit at the largest size is more than 2.5 times that at the smallest
(something quadratic crept in), unless --report-only. Plans are generated in a temporary directory.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

LLMC = os.path.abspath(sys.argv[1])
REPORT_ONLY = "--report-only" in sys.argv[2:]
SIZES = [12500, 25000, 50000, 100000]

HEAD = """cluster big {
  partition = "gpu"
  nodes     = %s
  gpu       = H100_80GB x 8
  cpus      = 224
  memory    = 2 TiB
}

model m {
  arch        = qwen2
  path        = "/models/m"
  layers      = 2
  hidden      = 64
  heads       = 4
  kv_heads    = 2
  ffn         = 128
  vocab       = 256
  max_context = 512
}

train t {
  stage    = sft
  model    = m
  data     = [d0]
  template = qwen
  context  = 256
  batch    = 1 per gpu
  lr       = 1e-5
  output   = "out"
}

job j {
  run     = t
  cluster = big
  nodes   = 2
  time    = 1 h
}
"""

DATASET = """
# dataset number %d
dataset d%d {
  file    = "/data/d%d.json"
  format  = sharegpt
  samples = 100000
  columns {
    messages = "messages"
  }
  tags {
    role    = "role"
    content = "content"
  }
}
"""


def plan_of_lines(n):
    text = HEAD % "n[01-16]"
    i = 0
    while text.count("\n") < n:
        text += DATASET % (i, i, i)
        i += 1
    return text


def plan_of_nodes(n, explicit):
    if explicit:
        hosts = ",".join("n%d" % i for i in range(1, n + 1))
    else:
        hosts = "n[%06d-%06d]" % (1, n)
    return HEAD % hosts + (DATASET % (0, 0, 0))


def best_time(path):
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        r = subprocess.run([LLMC, "check", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit("llmc check failed on %s:\n%s" % (path, r.stderr.decode()[:2000]))
        best = dt if best is None else min(best, dt)
    return best


def table(title, unit, make):
    d = tempfile.mkdtemp(prefix="llmc-bench-")
    try:
        print("\n%s\n" % title)
        print("| %s | bytes | time (s) | us per %s | x previous |" % (unit, unit))
        print("|---:|---:|---:|---:|---:|")
        rows, prev = [], None
        for n in SIZES:
            path = os.path.join(d, "p%d.llm" % n)
            text = make(n)
            with open(path, "w") as f:
                f.write(text)
            t = best_time(path)
            rows.append((n, t))
            ratio = "" if prev is None else "%.2f" % (t / prev)
            print("| %d | %d | %.3f | %.2f | %s |" % (n, len(text), t, t / n * 1e6, ratio))
            prev = t
        return rows
    finally:
        shutil.rmtree(d)


def main():
    shapes = [
        ("Plans of N lines (about N/13 dataset blocks)", "line", plan_of_lines),
        ("Cluster hostlist of N nodes as one range n[000001-N]", "node", lambda n: plan_of_nodes(n, False)),
        ("Cluster hostlist of N nodes written out n1,n2,...", "node", lambda n: plan_of_nodes(n, True)),
    ]
    status = 0
    for title, unit, make in shapes:
        rows = table(title, unit, make)
        small = rows[0][1] / rows[0][0]
        large = rows[-1][1] / rows[-1][0]
        if large > 2.5 * small:
            print("\nnot linear: %.2f us per %s at %d vs %.2f at %d" % (large * 1e6, unit, rows[-1][0], small * 1e6, rows[0][0]))
            status = 1
    print("\nbinary: %s" % sys.argv[1])
    sys.exit(0 if REPORT_ONLY else status)


main()
