#!/usr/bin/env python3
"""The GPU's power and SM clock under one kind of work at a time: is a memory-bound
kernel below the power limit while a bf16 GEMM is at it? (issue 31: what overlapping
the SwiGLU, RMSNorm and RoPE passes with the GEMMs could buy on a card whose bf16
step runs at its power limit.)

    python3 bench/cuda/power_probe.py [--seconds S] [--tokens N] [--hidden C] [--ffn F]

Each workload runs back to back for S seconds (default 6) at the Qwen2.5-3B shapes of a
16 x 1024 micro-batch; nvidia-smi is polled beside it. Prints one line a workload: its
rate (TFLOP/s or TB/s of the bytes it must move), the median power and SM clock of the
samples taken while it ran (the first second left out: the clock settles), and the
energy per unit of work. Needs PyTorch with CUDA and nvidia-smi."""
import argparse
import statistics
import subprocess
import sys
import threading
import time

import torch


def poll(samples, stop):
    """(time, watts, MHz) every ~100 ms until stop is set."""
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw,clocks.sm", "--format=csv,noheader,nounits",
                          "-lms", "100"], stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        if stop.is_set():
            break
        try:
            w, mhz = (float(x) for x in line.split(","))
        except ValueError:
            continue
        samples.append((time.time(), w, mhz))
    p.terminate()


def run(name, fn, units_per_call, unit, seconds, samples):
    fn()
    torch.cuda.synchronize()
    t0 = time.time()
    calls = 0
    while time.time() - t0 < seconds:
        for _ in range(8):
            fn()
        calls += 8
        torch.cuda.synchronize()
    t1 = time.time()
    sel = [(w, m) for t, w, m in samples if t0 + 1.0 <= t <= t1]
    if not sel:
        print(f"{name}: no power samples", flush=True)
        return
    w = statistics.median(x[0] for x in sel)
    mhz = statistics.median(x[1] for x in sel)
    if unit is None:
        print(f"{name}: power median {w:.0f} W, SM clock median {mhz:.0f} MHz ({len(sel)} samples)", flush=True)
        return
    rate = units_per_call * calls / (t1 - t0)
    print(f"{name}: {rate:.1f} {unit}/s, power median {w:.0f} W, SM clock median {mhz:.0f} MHz, "
          f"{w / rate * 1000:.2f} mJ per {unit} ({len(sel)} samples)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--ffn", type=int, default=11008)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("power_probe: no CUDA device")
    N, C, F = a.tokens, a.hidden, a.ffn
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(N, C, device=dev, dtype=torch.bfloat16, generator=g)
    w = torch.randn(2 * F, C, device=dev, dtype=torch.bfloat16, generator=g) * 0.02
    gu = torch.randn(N, 2 * F, device=dev, dtype=torch.bfloat16, generator=g)
    dh = torch.randn(N, F, device=dev, dtype=torch.bfloat16, generator=g)
    out = torch.empty(N, 2 * F, device=dev, dtype=torch.bfloat16)
    h = torch.empty(N, F, device=dev, dtype=torch.bfloat16)
    samples, stop = [], threading.Event()
    th = threading.Thread(target=poll, args=(samples, stop), daemon=True)
    th.start()
    time.sleep(0.5)
    ew = 2  # bytes a bf16 element
    run("gate/up GEMM (bf16)", lambda: torch.matmul(x, w.t(), out=out), 2 * N * C * 2 * F / 1e12, "TFLOP",
        a.seconds, samples)
    run("copy (gu -> out)", lambda: out.copy_(gu), 2 * N * 2 * F * ew / 1e12, "TB", a.seconds, samples)
    gv, uv = gu[:, :F], gu[:, F:]
    # SwiGLU's forward as two PyTorch kernels (silu of g into a temporary, then times u
    # into h): 5 N F elements moved
    run("silu(g) * u (eager, 2 kernels)", lambda: torch.mul(torch.nn.functional.silu(gv, inplace=False), uv, out=h),
        5 * N * F * ew / 1e12, "TB", a.seconds, samples)
    run("idle (sleep)", lambda: time.sleep(0.05), 0, None, 3.0, samples)
    stop.set()


if __name__ == "__main__":
    main()
