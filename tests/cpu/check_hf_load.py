#!/usr/bin/env python3
"""Load llmc-train's HF exports and compare logits with ours.

    python3 tests/cpu/check_hf_load.py [--local] [FIXTURE_DIR]

FIXTURE_DIR (default tests/cpu/fixtures/hf) holds CASE/ (an exported model:
config.json + model.safetensors, written by `test_model --export-hf`) and
CASE.logits.safetensors (input_ids [1,T] and llmc's logits [1,T,V]).

Default mode (the GPU machine, transformers installed): each CASE/ is loaded
with transformers.AutoModelForCausalLM, unchanged, in float32 with eager
attention; its logits must match ours within abs 1e-4.
--local (this machine: /usr/bin/python3 with torch, no transformers): the same
files are read with the hand-written PyTorch model of make_fixtures.py, which
checks the file format, tensor names and config fields that the model uses.
Prints one line per case and "N passed, N failed"; exit 1 on any failure.
"""
import json, os, struct, sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[info["dtype"]]
        b, e = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:e]), dtype=dt).reshape(info["shape"]).float()
    return out


def local_logits(model_dir, ids):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_fixtures as mf
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    c = dict(layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"], heads=cfg["num_attention_heads"],
             kv_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"], ffn=cfg["intermediate_size"],
             vocab=cfg["vocab_size"], rope_theta=cfg["rope_theta"], rms_eps=cfg["rms_norm_eps"],
             tie_embeddings=cfg["tie_word_embeddings"],
             qkv_bias=cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False),
             qk_norm=cfg["model_type"] == "qwen3")
    w = {k: v.double() for k, v in read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
    assert set(w) == set(mf.param_names(c)), "tensor names differ from the HF layout"
    T = ids.shape[1]
    pos = torch.arange(T)[None, :]
    mask = torch.zeros_like(ids)
    with torch.no_grad():
        _, logits, _, _ = mf.forward(c, w, ids, pos, mask)
    return logits.reshape(1, T, -1).float()


def hf_logits(model_dir, ids):
    from transformers import AutoModelForCausalLM
    try:
        m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        m = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    m.eval()
    with torch.no_grad():
        return m(input_ids=ids).logits.float()


def main():
    args = [a for a in sys.argv[1:] if a != "--local"]
    local = "--local" in sys.argv[1:]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hf")
    passed = failed = 0
    cases = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    for case in cases:
        ref = read_safetensors(os.path.join(root, case + ".logits.safetensors"))
        ids = ref["input_ids"].long()
        try:
            got = (local_logits if local else hf_logits)(os.path.join(root, case), ids)
            diff = (got - ref["logits"]).abs().max().item()
            ok = diff < 1e-4
            msg = f"max abs logit difference {diff:.3g}"
        except Exception as e:  # a load failure is a test failure, reported
            ok, msg = False, f"{type(e).__name__}: {e}"
        print(f"{'ok  ' if ok else 'FAIL'} {case} ({'hand-written torch' if local else 'transformers'}): {msg}")
        passed += ok
        failed += not ok
    print(f"hf-load: {passed} passed, {failed} failed")
    sys.exit(1 if failed or not cases else 0)


if __name__ == "__main__":
    main()
