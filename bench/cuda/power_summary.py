#!/usr/bin/env python3
"""The GPU's power and SM clock while it worked, from `nvidia-smi dmon -s pc` output.

    nvidia-smi dmon -s pc -d 1 > dmon.txt &  ...  python3 bench/cuda/power_summary.py dmon.txt

Samples whose power is at least --busy-w watts (default 300: the GPU at work, not
idle between runs) are summarised: power and SM clock (pclk) at the 10th, 50th and
90th percentile and at most. A GPU at its power limit shows power near the limit with
the SM clock below its maximum (issue 31's bf16 rows). --json: the medians as one JSON
object (bench/cuda/run.sh's BENCH_POWER=1 puts it into each run's line)."""
import argparse
import json
import sys


def read_dmon(path):
    names, rows = None, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("#"):
                if names is None:
                    names = line.lstrip("#").split()
                continue
            parts = line.split()
            if not parts:
                continue
            if names is None:
                sys.exit(f"power_summary: {path}:{n}: a sample before the header line")
            if len(parts) != len(names):
                continue   # a truncated last line, or a warning of nvidia-smi's
            try:
                rows.append({k: float(v) for k, v in zip(names, parts) if k in ("pwr", "pclk")})
            except ValueError:
                continue   # '-' where a value is not available
    if names is None or "pwr" not in names or "pclk" not in names:
        sys.exit(f"power_summary: {path}: no 'pwr' and 'pclk' columns (want nvidia-smi dmon -s pc)")
    return rows


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dmon")
    ap.add_argument("--busy-w", type=float, default=300.0)
    ap.add_argument("--json", action="store_true",
                    help="one JSON object: the busy samples' median power and SM clock, and their count")
    a = ap.parse_args()
    rows = [r for r in read_dmon(a.dmon) if len(r) == 2 and r["pwr"] >= a.busy_w]
    if not rows:
        sys.exit(f"power_summary: {a.dmon}: no sample at {a.busy_w:g} W or more")
    if a.json:
        print(json.dumps({"power_w_median": pct([r["pwr"] for r in rows], 50),
                          "sm_mhz_median": pct([r["pclk"] for r in rows], 50), "power_samples": len(rows)}))
        return
    for k, unit in (("pwr", "W"), ("pclk", "MHz")):
        xs = [r[k] for r in rows]
        print(f"{k} {unit}: p10 {pct(xs, 10):g}, median {pct(xs, 50):g}, p90 {pct(xs, 90):g}, max {max(xs):g}"
              f" ({len(xs)} busy samples)")


if __name__ == "__main__":
    main()
