#!/usr/bin/env python3
"""The loss curve of a run as a PNG (pure python3: zlib and struct only).

    python3 examples/tiny/plot_loss.py METRICS.jsonl OUT.png [BASELINE]

The trainer writes the same curve as SVG (loss_curve.svg); a PNG is what an
image viewer, a chat or an issue tracker shows without a browser. The PNG's
compression is Python's own zlib module, part of every python3, so the demo
needs nothing installed. Loss on a log scale (one grid line per decade,
labelled), the unigram baseline dashed, steps along x (first and last labelled).
"""
import json
import math
import os
import struct
import sys
import zlib

W, H, LEFT, RIGHT, TOP, BOTTOM = 720, 400, 56, 16, 16, 28
# 3x5 glyphs, rows top to bottom, 3 bits each (1 = ink)
FONT = {"0": "7 5 5 5 7", "1": "2 6 2 2 7", "2": "7 1 7 4 7", "3": "7 1 7 1 7", "4": "5 5 7 1 1",
        "5": "7 4 7 1 7", "6": "7 4 7 5 7", "7": "7 1 1 1 1", "8": "7 5 7 5 7", "9": "7 5 7 1 7",
        ".": "0 0 0 0 2", "e": "0 7 7 4 7", "-": "0 0 7 0 0"}


class Image:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, rgb):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(rgb)

    def line(self, x0, y0, x1, y1, rgb, dash=0):
        """Bresenham; dash > 0 leaves gaps of that many pixels."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, n = dx + dy, 0
        while True:
            if not dash or (n // dash) % 2 == 0:
                self.dot(x0, y0, rgb)
                self.dot(x0, y0 + 1, rgb)
            n += 1
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, rgb=(60, 60, 60), scale=2):
        for ch in s:
            rows = FONT.get(ch)
            if rows:
                for r, bits in enumerate(int(b) for b in rows.split()):
                    for c in range(3):
                        if bits & (4 >> c):
                            for a in range(scale):
                                for b in range(scale):
                                    self.dot(x + c * scale + a, y + r * scale + b, rgb)
            x += 4 * scale

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    metrics, out = sys.argv[1], sys.argv[2]
    baseline = float(sys.argv[3]) if len(sys.argv) > 3 else None
    pts = []
    for line in open(metrics):
        r = json.loads(line)
        if isinstance(r.get("loss"), (int, float)) and r["loss"] > 0 and "step" in r:
            pts.append((r["step"], r["loss"]))
    if not pts:
        sys.exit("plot_loss.py: %s: no loss values" % metrics)
    ys = [l for _, l in pts] + ([baseline] if baseline else [])
    lo, hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    hi = hi if hi > lo else lo + 1
    s0, s1 = pts[0][0], max(pts[-1][0], pts[0][0] + 1)
    img = Image(W, H)
    px = lambda s: LEFT + round((s - s0) / (s1 - s0) * (W - LEFT - RIGHT - 1))
    py = lambda l: TOP + round((hi - math.log10(l)) / (hi - lo) * (H - TOP - BOTTOM - 1))
    for k in range(lo, hi + 1):           # a grid line per decade, labelled
        y = py(10.0 ** k)
        img.line(LEFT, y, W - RIGHT - 1, y, (225, 225, 225))
        label = ("%g" % 10.0 ** k) if k >= -3 else "1e%d" % k
        img.text(LEFT - 8 - 8 * len(label), y - 5, label)
    img.line(LEFT, TOP, LEFT, H - BOTTOM, (90, 90, 90))
    img.line(LEFT, H - BOTTOM, W - RIGHT - 1, H - BOTTOM, (90, 90, 90))
    img.text(LEFT, H - BOTTOM + 8, str(s0))
    img.text(W - RIGHT - 8 * len(str(s1)), H - BOTTOM + 8, str(s1))
    if baseline:
        img.line(LEFT, py(baseline), W - RIGHT - 1, py(baseline), (200, 80, 60), dash=6)
    prev = None
    for s, l in pts:
        p = (px(s), py(l))
        if prev:
            img.line(prev[0], prev[1], p[0], p[1], (40, 90, 200))
        prev = p
    with open(out + ".tmp", "wb") as f:
        f.write(img.png())
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
