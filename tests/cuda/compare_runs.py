#!/usr/bin/env python3
"""Compare two training runs' metrics.jsonl (same plan, same init, same data order):
the CUDA trainer (bf16) against the CPU trainer (fp32), or one GPU against two.

usage: compare_runs.py REFERENCE.jsonl CANDIDATE.jsonl [--tol-mean X] [--tol-final X]
Passes when the mean |loss difference| over all steps is below --tol-mean and the
mean loss of the last 10% of steps differs by less than --tol-final (relative).
Prints "N passed, N failed"."""
import argparse, json, sys


def losses(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r["step"]] = r["loss"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref"); ap.add_argument("cand")
    ap.add_argument("--tol-mean", type=float, default=0.05)
    ap.add_argument("--tol-final", type=float, default=0.05)
    a = ap.parse_args()
    ref, cand = losses(a.ref), losses(a.cand)
    steps = sorted(set(ref) & set(cand))
    passed = failed = 0
    def check(name, ok, detail):
        nonlocal passed, failed
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
        passed += ok; failed += not ok
    check("same steps", len(steps) == len(ref) == len(cand) and len(steps) > 0,
          f"{len(ref)} vs {len(cand)} steps")
    if steps:
        d = [abs(ref[s] - cand[s]) for s in steps]
        k = max(1, len(steps) // 10)
        fr = sum(ref[s] for s in steps[-k:]) / k
        fc = sum(cand[s] for s in steps[-k:]) / k
        check("mean |loss diff|", sum(d) / len(d) < a.tol_mean, f"{sum(d) / len(d):.4f} (max {max(d):.4f})")
        check("final loss", abs(fr - fc) / fr < a.tol_final, f"{fr:.4f} vs {fc:.4f}")
        for s in steps[:3] + steps[len(steps) // 2:len(steps) // 2 + 1] + steps[-2:]:
            print(f"  step {s}: {ref[s]:.4f} vs {cand[s]:.4f}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
