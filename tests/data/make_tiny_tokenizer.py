#!/usr/bin/env python3
"""Train the tiny example's byte-level BPE tokenizer (pure python3, deterministic).

Writes examples/tiny/tokenizer/{tokenizer.json,tokenizer_config.json} in Hugging
Face format, shaped like Qwen2's: NFC normalizer, the GPT-4-style Split regex
(single digits, as Qwen's \\p{N}), ByteLevel pre-tokenizer/decoder, BPE with
256 byte tokens + 253 merges, then the specials <|endoftext|>, <|im_start|>,
<|im_end|>: 512 ids in all.

The training corpus is the tiny arithmetic data rendered the way the "qwen"
chat template renders it (with LLaMA-Factory's default Qwen system prompt, and
without the special tokens, which are never merged), plus a little English so
the tokenizer is not useless on other text.
"""
import json
import os
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "examples", "tiny", "tokenizer")
N_MERGES = 253
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
EXTRA_TEXT = """\
You are Qwen, created by Alibaba Cloud. You are a helpful assistant.
The answer is the sum or the difference of the two numbers.
What is the result? It's easy: add them, or subtract the second from the first.
A language model reads text as a sequence of tokens and learns to predict the next one.
Each training step takes a batch of examples, computes the loss, and updates the weights.
Addition and subtraction are simple operations, but a small network must still learn
how digits carry from one column to the next. When the model has seen enough examples,
it answers questions it has never seen before. We measure accuracy on a held-out set.
This tokenizer was trained on the arithmetic data with a byte-level algorithm: every
string can be encoded, because any byte that is not part of a longer token stays a
token of its own. Numbers are split into single digits, spaces attach to the following
word, and newlines are kept. Please check your work, then write the final answer.
Here are some common words: about, after, again, always, because, before, between,
could, during, every, example, following, however, important, number, people, problem,
question, should, something, through, together, under, until, where, which, while,
without, would, years. Thank you for reading, and good luck with your experiments!
"""


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable characters (ByteLevel)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def is_letter(c):
    return unicodedata.category(c).startswith("L")


def is_number(c):
    return unicodedata.category(c).startswith("N")


def is_space(c):
    return c in "\t\n\x0b\x0c\r\x85" or unicodedata.category(c) in ("Zs", "Zl", "Zp")


def pretokenize(s):
    """PATTERN above, by hand (python3's re has no \\p{..}): leftmost-first alternation."""
    out, i, n = [], 0, len(s)
    while i < n:
        c = s[i]
        j = 0
        if c == "'" and i + 1 < n:
            rest = s[i + 1:i + 3].lower()
            if rest[:1] in ("s", "t", "m", "d"):
                j = i + 2
            elif rest in ("re", "ve", "ll"):
                j = i + 3
        if not j:
            k = i + 1 if (c not in "\r\n" and not is_letter(c) and not is_number(c)) else i
            m = k
            while m < n and is_letter(s[m]):
                m += 1
            if m > k:
                j = m
        if not j and is_number(c):
            j = i + 1
        if not j:
            k = i + 1 if c == " " else i
            m = k
            while m < n and not is_space(s[m]) and not is_letter(s[m]) and not is_number(s[m]):
                m += 1
            if m > k:
                while m < n and s[m] in "\r\n":
                    m += 1
                j = m
        if not j and is_space(c):
            m = i
            while m < n and is_space(s[m]):
                m += 1
            last_nl = max((p for p in range(i, m) if s[p] in "\r\n"), default=-1)
            if last_nl >= 0:
                j = last_nl + 1
            elif m == n:
                j = m
            elif m - i > 1:
                j = m - 1
            else:
                j = m
        out.append(s[i:j])
        i = j
    return out


def corpus():
    texts = [EXTRA_TEXT]
    for name in ("arith.json",):
        with open(os.path.join(ROOT, "examples", "tiny", "data", name), encoding="utf-8") as f:
            for rec in json.load(f):
                texts.append("system\n" + QWEN_SYSTEM + "\n")
                for m in rec["messages"]:
                    texts.append(m["role"] + "\n" + m["content"] + "\n")
    return texts


def train():
    b2u = bytes_to_unicode()
    words = {}
    for text in corpus():
        for piece in pretokenize(unicodedata.normalize("NFC", text)):
            w = tuple(b2u[b] for b in piece.encode("utf-8"))
            words[w] = words.get(w, 0) + 1
    merges = []
    for _ in range(N_MERGES):
        pairs = {}
        for w, cnt in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + cnt
        if not pairs:
            break
        # most frequent pair; ties broken by the pair's text so the result is deterministic
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = {}
        for w, cnt in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + cnt
        words = merged
    vocab = {}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    return vocab, merges


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def main():
    vocab, merges = train()
    n = len(vocab)
    added = [{"id": n + k, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for k, t in enumerate(SPECIALS)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    config = {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in a if k != "id"} for a in added},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "clean_up_tokenization_spaces": False, "errors": "replace",
        "model_max_length": 512, "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    os.makedirs(OUT, exist_ok=True)
    write_json(os.path.join(OUT, "tokenizer.json"), tok)
    write_json(os.path.join(OUT, "tokenizer_config.json"), config)
    print("vocab %d + %d special = %d ids, %d merges" % (n, len(added), n + len(added), len(merges)))


if __name__ == "__main__":
    main()
