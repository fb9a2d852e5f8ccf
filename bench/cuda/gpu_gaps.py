#!/usr/bin/env python3
"""The GPU's idle time between kernels, from a kernel_trace file.

    KERNEL_TRACE=T.tsv LD_PRELOAD=build/libkernel_trace.so llmc-train-cuda bench ...
    python3 bench/cuda/gpu_gaps.py T.tsv [--last-ms MS] [--long-ms 5]

Each kernel, memcpy and memset is a busy interval; their union is the GPU's busy
time. Gaps shorter than --long-ms count as idle inside a step (launch latency, the
host waiting on the GPU); longer ones are setup or the host's own work, left out.
--last-ms keeps only activity that starts in the trace's last MS milliseconds (the
timed steps: steps x step_ms of the bench line). Prints the busy time, the short
gaps' sum and share, and the largest gaps with the record that came after each."""
import argparse
import sys


def read_trace(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                sys.exit(f"gpu_gaps: {path}:{n}: want start, end, kind, name (4 tab-separated fields)")
            try:
                s, e = int(parts[0]), int(parts[1])
            except ValueError:
                sys.exit(f"gpu_gaps: {path}:{n}: start and end must be integers (ns)")
            if e < s:
                sys.exit(f"gpu_gaps: {path}:{n}: ends before it starts")
            rows.append((s, e, parts[2] + " " + parts[3][:60]))
    if not rows:
        sys.exit(f"gpu_gaps: {path}: no GPU activity")
    return sorted(rows)


def gaps_of(rows, long_ns):
    """(busy ns, idle ns in short gaps, [(gap ns, what came after)])"""
    busy = idle = 0
    gaps = []
    cur_s, cur_e = rows[0][0], rows[0][1]
    for s, e, what in rows[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            if s - cur_e < long_ns:
                idle += s - cur_e
                gaps.append((s - cur_e, what))
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return busy + cur_e - cur_s, idle, gaps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--long-ms", type=float, default=5.0)
    ap.add_argument("--last-ms", type=float, default=0.0)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    rows = read_trace(a.trace)
    if a.last_ms > 0:
        t0 = max(r[1] for r in rows) - a.last_ms * 1e6
        rows = [r for r in rows if r[0] >= t0]
    busy, idle, gaps = gaps_of(rows, a.long_ms * 1e6)
    print(f"busy {busy / 1e6:.2f} ms, idle in short gaps {idle / 1e6:.3f} ms "
          f"({100 * idle / (busy + idle):.2f}% of busy + idle), {len(gaps)} gaps, {len(rows)} records")
    for g, what in sorted(gaps, reverse=True)[:a.top]:
        print(f"  {g / 1e3:9.1f} us before {what}")


if __name__ == "__main__":
    main()
