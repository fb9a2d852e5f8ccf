#!/usr/bin/env python3
"""Hugging Face tokenizers on the corpus cut exactly as tokenizer_bench cut it;
prints throughput and checks that every document's ids equal llmc's.

  tokenizer_hf.py TOKENIZER_DIR CORPUS LLMC_IDS THREADS   (RAYON_NUM_THREADS=1 for one thread)
Invalid UTF-8 is decoded with errors="replace", the rule llmc applies itself."""
import os
import struct
import sys
import time

from tokenizers import Tokenizer

tok_dir, corpus, ids_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
data = open(corpus, "rb").read()
bounds = open(ids_path + ".docs", "rb").read()
docs = [data[o:o + n].decode("utf-8", errors="replace")
        for o, n in struct.iter_unpack("<QQ", bounds)]

t0 = time.perf_counter()
if threads == 1:
    out = [tok.encode(d, add_special_tokens=False).ids for d in docs]
else:
    out = [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]
s = time.perf_counter() - t0
n_tok = sum(len(x) for x in out)
print("hf threads=%d bytes=%d docs=%d tokens=%d seconds=%.3f MB/s=%.2f tokens/s=%.0f"
      % (threads, len(data), len(docs), n_tok, s, len(data) / s / 1e6, n_tok / s))

if threads == 1:
    raw = open(ids_path, "rb").read()
    at, bad = 0, 0
    for i, want in enumerate(out):
        (n,) = struct.unpack_from("<I", raw, at)
        got = list(struct.unpack_from("<%dI" % n, raw, at + 4))
        at += 4 + 4 * n
        if got != want:
            bad += 1
            if bad <= 5:
                k = next((j for j in range(min(len(got), len(want))) if got[j] != want[j]), min(len(got), len(want)))
                print("MISMATCH doc %d at token %d: llmc %s hf %s" % (i, k, got[k:k + 5], want[k:k + 5]))
    print("exactness: %d of %d documents identical to Hugging Face" % (len(out) - bad, len(out)))
    sys.exit(1 if bad else 0)
