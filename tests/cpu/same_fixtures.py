#!/usr/bin/python3
"""Compare fixtures written by make_fixtures.py (and make_lora_fixtures.py) here
with the committed ones.

    /usr/bin/python3 tests/cpu/same_fixtures.py NEW_DIR COMMITTED_DIR

The reference is float64 torch, whose BLAS kernels (and so its last bits) differ
between CPUs; a byte comparison would pass only on the machine that wrote the files.
What must hold on any x86-64 machine:
  - the header: tensor names, shapes, dtypes and metadata are identical;
  - the inputs (w.*, lora.*, batch.*: torch's seeded generator) are identical to the bit;
  - values of one forward/backward (logits, loss, g.*) agree to float64 accuracy
    after rounding to fp32: within 2 fp32 ulps, plus 1e-12 absolute for values that
    cancel to near zero (float64 rounding, 1e-16 of terms of size ~1, is far below);
  - weights after AdamW steps (adam.*w.*) agree within Adam's own bound: m^/sqrt(v^)
    turns a float64 rounding-sized gradient into a step of up to lr, so the two
    machines' trajectories may part by 2 lr R_t per step (R_t as in test_model.c).
Prints one line per file and "N passed, N failed".
"""
import json, math, os, struct, sys

import numpy as np


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        tensors[name] = np.frombuffer(data[b:e], dtype=np.float32).astype(np.float64)
    shapes = {k: (v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"}
    return header.get("__metadata__", {}), shapes, tensors


def ratio_bound(b1, b2, t):
    s = 0.0
    for k in range(1, t + 1):
        a = (1 - b1) * b1 ** (t - k) / (1 - b1 ** t)
        b = (1 - b2) * b2 ** (t - k) / (1 - b2 ** t)
        s += a * a / b
    return math.sqrt(s)


def lr_at(o, step):
    w, total = o["warmup_steps"], o["steps"]
    if step < w:
        return o["lr"] * step / max(1, w)
    progress = (step - w) / max(1, total - w)
    f = 0.5 * (1.0 + math.cos(math.pi * progress))
    rate = o["min_lr"] / o["lr"]
    return o["lr"] * max(0.0, f * (1 - rate) + rate)


def adam_limit(o, steps):
    """How far two trajectories of `steps` AdamW steps can part, element by element."""
    return sum(2 * lr_at(o, s) * ratio_bound(o["beta1"], o["beta2"], s + 1) for s in range(steps))


def compare(new, old):
    meta_n, shapes_n, tn = read(new)
    meta_o, shapes_o, to = read(old)
    if meta_n != meta_o:
        return "metadata differs"
    if shapes_n != shapes_o:
        return "tensor names, shapes or dtypes differ"
    o = json.loads(meta_n["optim"])
    ulp2 = 2.0 ** -22   # 2 ulps of fp32, relative
    for name in sorted(tn):
        a, b = tn[name], to[name]
        if name.startswith(("w.", "batch.", "lora.")):
            if not np.array_equal(a, b):
                return f"input {name} differs"
            continue
        d = np.abs(a - b)
        tight = ulp2 * np.maximum(np.abs(a), np.abs(b)) + 1e-12
        if not name.startswith("adam."):
            if (d > tight).any():
                i = int(np.argmax(d - tight))
                return f"{name}[{i}]: {a[i]!r} vs {b[i]!r}, beyond 2 ulps"
            continue
        # adam.lr: the schedule, exact; adam.w.* after all steps, adam.S.w.* before step S
        # (S steps taken), adam.S.next.w.* after it: within Adam's bound. The rest of the
        # trajectory (moments, gradients, losses along it) is torch's own state that
        # follows those weights; test_model.c replays it against ours.
        parts = name.split(".")
        if name == "adam.lr":
            lim = tight
        elif parts[1] == "w":
            lim = adam_limit(o, o["steps"])
        elif parts[1].isdigit() and parts[2] == "w":
            lim = adam_limit(o, int(parts[1]))
        elif parts[1].isdigit() and parts[2:4] == ["next", "w"]:
            lim = adam_limit(o, int(parts[1]) + 1)
        else:
            continue
        if (d > lim).any():
            i = int(np.argmax(d - lim))
            return f"{name}[{i}]: {a[i]!r} vs {b[i]!r}, beyond {'2 ulps' if name == 'adam.lr' else 'Adam bound'}"
    return None


def main():
    new, old = sys.argv[1], sys.argv[2]
    passed = failed = 0
    names = sorted(f for f in os.listdir(old) if f.endswith(".safetensors"))
    if sorted(f for f in os.listdir(new) if f.endswith(".safetensors")) != names or not names:
        print("FAIL fixture files differ:", names)
        failed += 1
    for f in names:
        if not os.path.exists(os.path.join(new, f)):
            continue
        why = compare(os.path.join(new, f), os.path.join(old, f))
        if why:
            print(f"FAIL {f}: {why}")
            failed += 1
        else:
            print(f"ok   {f}: inputs identical, outputs within float64 accuracy and Adam's bound")
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return failed != 0


if __name__ == "__main__":
    sys.exit(main())
