#!/usr/bin/python3
"""Compare an HF export of the fixtures (test_model --export-hf) with the committed one.

    /usr/bin/python3 tests/cpu/same_export.py NEW_DIR COMMITTED_DIR

CASE/ (config.json, model.safetensors, MANIFEST.sha256) holds the fixture's initial
weights copied, not computed: it must be the same bytes on any machine.
CASE.logits.safetensors holds our fp32 logits, which depend on the BLAS kernel set:
the header must be identical, and the values, each within rel 1e-4 + abs 1e-5 of the
float64 reference (test_model.c's error analysis), within twice that of each other.
Prints one line per case and "N passed, N failed".
"""
import filecmp, json, os, struct, sys

import numpy as np


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = f.read(n)
        data = f.read()
    return header, np.frombuffer(data, dtype=np.float32).astype(np.float64), json.loads(header)


def main():
    new, old = sys.argv[1], sys.argv[2]
    passed = failed = 0
    cases = sorted(d for d in os.listdir(old) if os.path.isdir(os.path.join(old, d)))
    for case in cases:
        why = None
        files = sorted(os.listdir(os.path.join(old, case)))
        if not os.path.isdir(os.path.join(new, case)) or sorted(os.listdir(os.path.join(new, case))) != files:
            why = "exported files differ"
        else:
            _, mismatch, errors = filecmp.cmpfiles(os.path.join(new, case), os.path.join(old, case), files, shallow=False)
            if mismatch or errors:
                why = f"bytes differ in {', '.join(mismatch + errors)}"
        if not why:
            hn, vn, jn = read(os.path.join(new, case + ".logits.safetensors"))
            ho, vo, jo = read(os.path.join(old, case + ".logits.safetensors"))
            b, e = jn["input_ids"]["data_offsets"]
            lb, le = jn["logits"]["data_offsets"]
            if hn != ho:
                why = "logits file header differs"
            elif not np.array_equal(vn[b // 4:e // 4], vo[b // 4:e // 4]):
                why = "input_ids differ"
            else:
                a, r = vn[lb // 4:le // 4], vo[lb // 4:le // 4]
                worst = float(np.max(np.abs(a - r) / (2 * (1e-5 + 1e-4 * np.abs(r)))))
                if worst > 1:
                    why = f"logits differ by {worst:.3g} of the tolerance"
        if why:
            print(f"FAIL HF export {case}: {why}")
            failed += 1
        else:
            print(f"ok   HF export {case}: model bytes identical, logits within tolerance")
            passed += 1
    if not cases:
        print("FAIL no cases in", old)
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return failed != 0


if __name__ == "__main__":
    sys.exit(main())
