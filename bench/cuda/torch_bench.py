#!/usr/bin/env python3
"""PyTorch + transformers training-step benchmark on the shapes llmc-train-cuda bench uses.

Qwen2ForCausalLM from the Qwen2.5 config (random init), bf16 weights, SDPA attention,
torch.optim.AdamW(fused=True), loss over all next-token targets; --compile wraps the
model in torch.compile; --accum N sums the gradients of N micro-batches per optimizer
step (the loss of each scaled by 1/N). Prints one JSON line, the same keys as
llmc-train-cuda bench. peak_mem_gib is the peak of memory allocated by the run,
the bf16 weights included (as ours counts its weights); reserved_gib what the
caching allocator held from the device at most.
MFU uses the same formula: FLOPs/token = 6*N + 12*L*H*D*T (N = parameters in matmuls,
LM head counted once), peak 989.4 TFLOP/s (H200 SXM dense bf16).
"""
import argparse, json, time

import torch

SHAPES = {
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2),
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2),
    "qwen2.5-3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                       num_attention_heads=16, num_key_value_heads=2),
    "qwen2.5-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    if min(a.batch, a.seq, a.steps, a.accum) < 1 or a.warmup < 0:
        ap.error("--batch, --seq, --steps and --accum take a positive integer, --warmup one >= 0")
    from transformers import Qwen2Config, Qwen2ForCausalLM
    s = SHAPES[a.model]
    cfg = Qwen2Config(**{"vocab_size": 151936, "rope_theta": 1e6, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
                         "max_position_embeddings": 32768, **s})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()   # before the model: its weights count
    model = Qwen2ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)
    model.config.use_cache = False
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, betas=(0.9, 0.95), fused=True)
    fwd = torch.compile(model) if a.compile else model
    L, C, H, D = s["num_hidden_layers"], s["hidden_size"], s["num_attention_heads"], s["hidden_size"] // s["num_attention_heads"]
    KVD = s["num_key_value_heads"] * D
    n_mm = L * (C * (H * D + 2 * KVD) + H * D * C + 3 * C * s["intermediate_size"]) + 151936 * C
    flops_tok = 6 * n_mm + 12 * L * H * D * a.seq
    times = []
    for step in range(a.warmup + a.steps):
        ids = torch.randint(0, 151936, (a.batch, a.seq), device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.accum):   # the same tokens again: the step's shape is what counts
            out = fwd(input_ids=ids, labels=ids)
            (out.loss / a.accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    step_s = sum(times) / len(times)
    tok_s = a.batch * a.seq * a.accum / step_s
    print(json.dumps({"impl": "pytorch-" + ("compile" if a.compile else "eager"), "model": a.model,
                      "batch": a.batch, "accum": a.accum, "seq": a.seq, "params": n_params, "step_ms": round(step_s * 1e3, 2),
                      "step_ms_min": round(min(times) * 1e3, 2), "tokens_per_s": round(tok_s),
                      "mfu": round(tok_s * flops_tok / 989.4e12, 4),
                      "peak_mem_gib": round((torch.cuda.max_memory_allocated() - base) / 2**30, 2),
                      "reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
                      "loss": round(out.loss.item(), 4), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
