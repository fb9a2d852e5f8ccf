#!/usr/bin/env python3
"""Reference figures for the estimator's check vectors, from PyTorch + transformers.

Needs transformers (the GPU machine's /opt/torch/.venv has it; this machine's
Debian python3 does not), so its output is committed as hf_reference.json and
the C test reads the numbers from there. Run:

    python3 tests/estimator/hf_reference.py > tests/estimator/hf_reference.json

1. Parameter counts of real architectures, counted by transformers itself on
   the meta device (no weights are downloaded or allocated).
2. Bytes of activations one decoder layer saves for backward, measured with
   autograd's saved-tensor hooks: the model is run with 2 layers and with 1,
   and the difference is one layer. Parameters (and views of them) are not
   counted; tensors sharing storage are counted once.
3. The peak memory of one forward + backward of a whole bf16 model (above its
   weights), with and without gradient checkpointing (GPU only).
"""
import json
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

ARCHS = {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config}

# name: arch, layers, hidden, heads, kv_heads, head_dim, ffn, vocab, tied
MODELS = {
    "Qwen2.5-0.5B": ("qwen2", 24, 896, 14, 2, 64, 4864, 151936, True),
    "Qwen2.5-1.5B": ("qwen2", 28, 1536, 12, 2, 128, 8960, 151936, True),
    "Qwen2.5-32B": ("qwen2", 64, 5120, 40, 8, 128, 27648, 152064, False),
    "Qwen2.5-72B": ("qwen2", 80, 8192, 64, 8, 128, 29568, 152064, False),
    "Llama-3-8B": ("llama", 32, 4096, 32, 8, 128, 14336, 128256, False),
    "Llama-3.2-1B": ("llama", 16, 2048, 32, 8, 64, 8192, 128256, True),
    "Qwen3-0.6B": ("qwen3", 28, 1024, 16, 8, 128, 3072, 151936, True),
    "Qwen3-8B": ("qwen3", 36, 4096, 32, 8, 128, 12288, 151936, False),
}


def make_config(arch, layers, hidden, heads, kv, head_dim, ffn, vocab, tied, attn="eager"):
    cfg = ARCHS[arch](
        num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
        num_key_value_heads=kv, intermediate_size=ffn, vocab_size=vocab,
        tie_word_embeddings=tied, max_position_embeddings=4096,
    )
    cfg.head_dim = head_dim
    cfg._attn_implementation = attn
    return cfg


def count_params(spec):
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(make_config(*spec))
    return sum(p.numel() for p in model.parameters())  # shared (tied) weights once


def saved_bytes(spec, s, b, attn, device):
    """Bytes of non-parameter tensors autograd saves in the decoder stack."""
    model = AutoModelForCausalLM.from_config(make_config(*spec, attn=attn))
    model = model.to(device=device, dtype=torch.bfloat16).eval()
    param_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in param_storages:
            seen[st.data_ptr()] = st.nbytes()
        return t

    x = torch.randn(b, s, spec[2], device=device, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model.model(inputs_embeds=x).last_hidden_state
    del out
    return sum(seen.values())


def step_peak(spec, s, b, checkpointing):
    """Peak bytes allocated during one forward + backward of a bf16 model, on
    top of its weights: gradients, activations, logits and the loss."""
    model = AutoModelForCausalLM.from_config(make_config(*spec, attn="sdpa"))
    model = model.to(device="cuda", dtype=torch.bfloat16).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    ids = torch.randint(0, spec[7], (b, s), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del model, loss
    torch.cuda.empty_cache()
    return peak


def main():
    ref = {"torch": torch.__version__, "transformers": transformers.__version__,
           "params": {name: count_params(spec) for name, spec in MODELS.items()},
           "layer_activation_bytes": []}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # Small layers, run for real: arch, hidden, heads, kv, head_dim, ffn, vocab; s, b.
    small = [("llama", 512, 8, 2, 64, 1408, 1000), ("qwen2", 512, 8, 2, 64, 1408, 1000),
             ("qwen3", 512, 8, 4, 128, 1536, 1000)]
    attns = ["eager"] + (["sdpa"] if device == "cuda" else [])
    for arch, h, heads, kv, hd, ffn, vocab in small:
        for attn in attns:
            s, b = 256, 2
            one = saved_bytes((arch, 1, h, heads, kv, hd, ffn, vocab, False), s, b, attn, device)
            two = saved_bytes((arch, 2, h, heads, kv, hd, ffn, vocab, False), s, b, attn, device)
            ref["layer_activation_bytes"].append({
                "arch": arch, "hidden": h, "heads": heads, "kv_heads": kv, "head_dim": hd,
                "ffn": ffn, "s": s, "b": b, "attention": attn, "device": device,
                "bytes": two - one})
    # Whole forward + backward, Qwen2.5-0.5B's shape, b = 4, s = 2048, SDPA.
    ref["step_peak_bytes"] = []
    if device == "cuda":
        for ckpt in (False, True):
            ref["step_peak_bytes"].append({
                "model": "Qwen2.5-0.5B", "s": 2048, "b": 4, "attention": "sdpa",
                "gradient_checkpointing": ckpt,
                "bytes": step_peak(MODELS["Qwen2.5-0.5B"], 2048, 4, ckpt)})
    json.dump(ref, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
