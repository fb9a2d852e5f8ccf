#!/usr/bin/env python3
"""The tiny demo's export, end to end in transformers (run on the GPU machine):

    python3 tests/cpu/check_hf_generate.py RUN_DIR [EVAL_JSON]

RUN_DIR is the demo's output directory (RUN_DIR/final, RUN_DIR/result.json).
Loads RUN_DIR/final with AutoTokenizer + AutoModelForCausalLM, renders each
held-out question as prepare does (qwen template; the record's system prompt, else the default),
decodes greedily until <|im_end|>, and counts exact answers. llmc-train's own
count (result.json eval_correct, teacher-forced argmax) must be the same.
"""
import json, os, sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def main():
    run = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..",
                                                               "examples", "tiny", "data", "arith_eval.json")
    d = os.path.join(run, "final")
    tok = AutoTokenizer.from_pretrained(d)
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    end = tok.convert_tokens_to_ids("<|im_end|>")
    correct = 0
    records = json.load(open(data))
    for rec in records:
        msgs = rec["messages"]
        system = msgs[0]["content"] if msgs[0]["role"] == "system" else SYSTEM
        q, a = msgs[-2]["content"], msgs[-1]["content"]
        prompt = f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
        ids = tok(prompt, return_tensors="pt").input_ids
        out = m.generate(ids, max_new_tokens=8, do_sample=False, eos_token_id=end,
                         pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
        correct += tok.decode(out[0, ids.shape[1]:]) == a + "<|im_end|>"
    ours = json.load(open(os.path.join(run, "result.json")))["eval_correct"]
    ok = correct == ours
    print(f"{'ok  ' if ok else 'FAIL'} transformers greedy generate: {correct}/{len(records)} exact; llmc-train: {ours}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
