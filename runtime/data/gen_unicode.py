#!/usr/bin/env python3
"""Generate the tokenizer's Unicode tables from the Unicode Character Database
(Debian package unicode-data, /usr/share/unicode, Unicode 15.0).

Run by the build (runtime/build.mk), never committed:
    python3 runtime/data/gen_unicode.py UCD_DIR OUT_DIR
writes
  OUT_DIR/rt_unicode_tables.c two-stage tables for per-code-point flags and the
                             canonical combining class, full canonical
                             decompositions and canonical composition pairs (NFC)
  OUT_DIR/pretok_unicode.inc re2c definitions uL (\\p{L}), uN (\\p{N}), uWS (\\s,
                             which is White_Space in Oniguruma and in ECMAScript)
                             used by runtime/data/pretok.re
"""
import os
import sys

UCD = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
OUT = sys.argv[2] if len(sys.argv) > 2 else "."
MAX = 0x110000
HANGUL_S, HANGUL_N = 0xAC00, 11172

F_LETTER, F_NUMBER, F_SPACE, F_NFC_CHECK = 1, 2, 4, 8


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def ucd_lines(name):
    with open(os.path.join(UCD, name), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield [x.strip() for x in line.split(";")]


def cp_range(field):
    if ".." in field:
        a, b = field.split("..")
        return range(int(a, 16), int(b, 16) + 1)
    return range(int(field, 16), int(field, 16) + 1)


def load():
    cat = {}
    ccc = {}
    decomp = {}
    first = None
    for f in ucd_lines("UnicodeData.txt"):
        cp = int(f[0], 16)
        name, gc = f[1], f[2]
        if name.endswith(", First>"):
            first = cp
            continue
        lo = first if name.endswith(", Last>") else cp
        first = None
        for c in range(lo, cp + 1):
            cat[c] = gc
            if int(f[3]):
                ccc[c] = int(f[3])
        if f[5] and not f[5].startswith("<"):
            decomp[cp] = [int(x, 16) for x in f[5].split()]
    space = set()
    for f in ucd_lines("PropList.txt"):
        if f[1] == "White_Space":
            space.update(cp_range(f[0]))
    nfc_check, excluded = set(), set()
    for f in ucd_lines("DerivedNormalizationProps.txt"):
        if f[1] == "NFC_QC" and f[2] in ("N", "M"):
            nfc_check.update(cp_range(f[0]))
        elif f[1] == "Full_Composition_Exclusion":
            excluded.update(cp_range(f[0]))
    return cat, ccc, decomp, space, nfc_check, excluded


def full_decomp(cp, decomp):
    if cp not in decomp:
        return [cp]
    out = []
    for c in decomp[cp]:
        out += full_decomp(c, decomp)
    return out


def two_stage(values):
    """values: list of MAX small ints -> (stage1 block numbers, unique 256-entry blocks)."""
    blocks, index, stage1 = [], {}, []
    for b in range(MAX // 256):
        blk = tuple(values[b * 256:(b + 1) * 256])
        if blk not in index:
            index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(index[blk])
    return stage1, blocks


def c_array(ctype, name, items, per_line=16):
    lines = ["const %s %s[%d] = {" % (ctype, name, len(items))]
    for i in range(0, len(items), per_line):
        lines.append("    " + ", ".join(str(x) for x in items[i:i + per_line]) + ",")
    lines.append("};")
    return "\n".join(lines)


def re2c_class(cps):
    cps = sorted(cps)
    ranges, i = [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        ranges.append((cps[i], cps[j]))
        i = j + 1

    def esc(c):
        return "\\x%02x" % c if c < 0x80 else ("\\u%04x" % c if c < 0x10000 else "\\U%08x" % c)

    # re2c classes cannot span lines: an alternation of one-line classes
    parts = [esc(a) if a == b else "%s-%s" % (esc(a), esc(b)) for a, b in ranges]
    out, line = [], "["
    for p in parts:
        if len(line) + len(p) > 96:
            out.append(line + "]")
            line = "    | ["
        line += p
    return "\n".join(out + [line + "]"])


def main():
    cat, ccc, decomp, space, nfc_check, excluded = load()
    flags = [0] * MAX
    for c, gc in cat.items():
        if gc[0] == "L":
            flags[c] |= F_LETTER
        elif gc[0] == "N":
            flags[c] |= F_NUMBER
    for c in space:
        flags[c] |= F_SPACE
    for c in nfc_check:
        flags[c] |= F_NFC_CHECK
    cccv = [ccc.get(c, 0) for c in range(MAX)]
    f1, fb = two_stage(flags)
    c1, cb = two_stage(cccv)

    dec_index, dec_pool = [], []
    for cp in sorted(decomp):
        d = full_decomp(cp, decomp)
        dec_index += [cp, len(dec_pool), len(d)]
        dec_pool += d
    comp = []
    for cp in sorted(decomp):
        d = decomp[cp]
        if len(d) == 2 and cp not in excluded:
            comp.append((d[0], d[1], cp))
    comp.sort()
    comp_flat = [x for t in comp for x in t]

    src = [
        "/* rt_unicode_tables.c — GENERATED by runtime/data/gen_unicode.py from the Unicode",
        " * Character Database 15.0 (Debian unicode-data). Do not edit; re-run the script. */",
        "#include \"unicode.h\"",
        "",
        "const int unicode_n_decomp = %d;" % (len(dec_index) // 3),
        "const int unicode_n_comp = %d;" % len(comp),
        "",
        "/* code point c: flags = unicode_flag_blocks[unicode_flag_stage1[c >> 8] * 256 + (c & 255)] */",
        c_array("uint8_t", "unicode_flag_stage1", f1, 32),
        c_array("uint8_t", "unicode_flag_blocks", [x for b in fb for x in b], 32),
        "/* canonical combining class, same layout */",
        c_array("uint8_t", "unicode_ccc_stage1", c1, 32),
        c_array("uint8_t", "unicode_ccc_blocks", [x for b in cb for x in b], 32),
        "/* full canonical decompositions: {code point, offset into pool, length}, sorted */",
        c_array("uint32_t", "unicode_decomp_index", dec_index, 12),
        c_array("uint32_t", "unicode_decomp_pool", dec_pool, 12),
        "/* canonical compositions (primary composites): {first, second, composite}, sorted */",
        c_array("uint32_t", "unicode_comp", comp_flat, 12),
        "",
    ]
    assert len(fb) < 256 and len(cb) < 256
    write_atomically(os.path.join(OUT, "rt_unicode_tables.c"), "\n".join(src))
    valid = [c for c in range(MAX) if not 0xD800 <= c <= 0xDFFF]
    letters = [c for c in valid if flags[c] & F_LETTER]
    numbers = [c for c in valid if flags[c] & F_NUMBER]
    # [^\r\n\p{L}\p{N}] and [^\s\p{L}\p{N}] spelled out (re2c's class difference
    # needs plain classes on both sides)
    not_crlf_ln = [c for c in valid if c not in (10, 13) and not flags[c] & (F_LETTER | F_NUMBER)]
    not_ws_ln = [c for c in valid if not flags[c] & (F_LETTER | F_NUMBER | F_SPACE)]
    inc = [
        "/* pretok_unicode.inc — GENERATED by runtime/data/gen_unicode.py from the Unicode",
        " * Character Database 15.0. Do not edit. re2c definitions for runtime/data/pretok.re. */",
        "/*!re2c",
        "uL = " + re2c_class(letters) + ";",
        "uN = " + re2c_class(numbers) + ";",
        "uWS = " + re2c_class(sorted(space)) + ";",
        "uNotCrLfLN = " + re2c_class(not_crlf_ln) + ";",
        "uNotWsLN = " + re2c_class(not_ws_ln) + ";",
        "*/",
        "",
    ]
    write_atomically(os.path.join(OUT, "pretok_unicode.inc"), "\n".join(inc))


if __name__ == "__main__":
    main()
