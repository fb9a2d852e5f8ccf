#!/usr/bin/python3
"""Reference fixtures for LoRA and freeze fine-tuning on the CPU trainer, from the
hand-written PyTorch model of make_fixtures.py (torch 1.13 CPU, float64; no peft,
which is not installed here: the adapter is PEFT's LoRA Linear written out,
y = base(x) + scaling * lora_B(lora_A(x)), dropout 0, scaling = alpha / r or
alpha / sqrt(r) with rsLoRA). Run with /usr/bin/python3:

    /usr/bin/python3 tests/cpu/make_lora_fixtures.py tests/cpu/fixtures

Each case writes CASE.safetensors holding:
  w.NAME                  the frozen base (HF names)
  lora.NAME               the adapters (PEFT names, base_model.model.model.layers.N.
                          self_attn.q_proj.lora_A.weight [r, in] / lora_B.weight [out, r]);
                          B is random, not PEFT's zeros, so that every gradient is non-zero
  batch.{A,B}.{ids,pos,mask}, logits, loss     as in make_fixtures.py
  g.NAME                  gradient of A's mean loss for every trainable tensor
  adam.w.NAME             the trainable tensors after STEPS AdamW steps (accumulation
                          over A and B, clip_grad_norm_, warmup + cosine), adam.loss per step
and in __metadata__ the config, the optimizer settings and the fine-tuning
settings: {"method": "lora"|"freeze", "rank", "alpha", "rslora", "targets": [...],
"freeze_layers"}.
"""
import json, math, os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import forward, make_batch, lr_lambda, param_names, shape_of, write_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)

MODULES = {"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
           "o_proj": "self_attn.o_proj", "gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
           "down_proj": "mlp.down_proj"}
STEPS = 6


def base_params(c, gen):
    P = {}
    for n in param_names(c):
        shp = shape_of(c, n)
        if "norm.weight" in n:
            P[n] = 1.0 + 0.1 * torch.randn(shp, generator=gen)
        elif n.endswith(".bias"):
            P[n] = 0.1 * torch.randn(shp, generator=gen)
        else:
            P[n] = 0.3 * torch.randn(shp, generator=gen)
    return P


def lora_params(c, ft, gen):
    """PEFT-named adapters, layer by layer, targets in q k v o gate up down order."""
    L = {}
    for l in range(c["layers"]):
        for mod in MODULES:
            if mod not in ft["targets"]:
                continue
            out, inp = shape_of(c, f"model.layers.{l}.{MODULES[mod]}.weight")
            pre = f"base_model.model.model.layers.{l}.{MODULES[mod]}"
            L[pre + ".lora_A.weight"] = (2 * torch.rand(ft["rank"], inp, generator=gen) - 1) / math.sqrt(inp)
            L[pre + ".lora_B.weight"] = 0.2 * torch.randn(out, ft["rank"], generator=gen)
    return L


def trainable_names(c, ft, P, L):
    if ft["method"] == "lora":
        return list(L)
    n, layers = ft["freeze_layers"], c["layers"]
    ids = range(layers - n, layers) if n > 0 else range(-n)   # LLaMA-Factory: last n, or first -n
    return [k for k in P if any(f".{i}." in k for i in ids)]


def make_case(out, name, c, opt, ft, seed):
    gen = torch.Generator().manual_seed(seed)
    P = base_params(c, gen)
    L = lora_params(c, ft, gen) if ft["method"] == "lora" else {}
    scale = ft["alpha"] / (math.sqrt(ft["rank"]) if ft["rslora"] else ft["rank"])
    A = make_batch(gen, c, 2, 12, packed=True)
    Bb = make_batch(gen, c, 2, 12, packed=False)
    train = trainable_names(c, ft, P, L)

    def run(Pw, Lw, batch):
        def adapter(module, x):
            pre = "base_model.model." + module
            if pre + ".lora_A.weight" not in Lw:
                return 0
            return (x @ Lw[pre + ".lora_A.weight"].T) @ Lw[pre + ".lora_B.weight"].T * scale
        return forward(c, Pw, *batch, lora=adapter if Lw else None)

    tensors = [("w." + n, P[n]) for n in P] + [("lora." + n, L[n]) for n in L]
    for tag, (ids, pos, mask) in (("A", A), ("B", Bb)):
        tensors += [(f"batch.{tag}.ids", ids.double()), (f"batch.{tag}.pos", pos.double()),
                    (f"batch.{tag}.mask", mask.double())]
    Q = {n: t.clone().requires_grad_(n in train) for n, t in P.items()}
    M = {n: t.clone().requires_grad_(True) for n, t in L.items()}
    allp = dict(Q, **M)
    loss, logits, _, _ = run(Q, M, A)
    loss.backward()
    tensors += [("logits", logits), ("loss", loss.reshape(1))]
    tensors += [("g." + n, allp[n].grad) for n in train]

    # AdamW over the trainable tensors only; HF's decay rule (no decay for biases and norms)
    for n in train:
        allp[n].grad = None
    dec = [n for n in train if not (n.endswith(".bias") or "norm" in n)]
    optim = torch.optim.AdamW([{"params": [allp[n] for n in dec], "weight_decay": opt["weight_decay"]},
                               {"params": [allp[n] for n in train if n not in dec], "weight_decay": 0.0}],
                              lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: lr_lambda(s, opt))
    losses = []
    for step in range(opt["steps"]):
        optim.zero_grad()
        _, _, sa, ca = run(Q, M, A)
        _, _, sb, cb = run(Q, M, Bb)
        loss = (sa + sb) / (ca + cb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([allp[n] for n in train], opt["grad_clip"])
        optim.step()
        sched.step()
        losses.append(float(loss))
    tensors += [("adam.w." + n, allp[n]) for n in train]
    tensors += [("adam.loss", torch.tensor(losses))]
    write_safetensors(os.path.join(out, name + ".safetensors"), tensors,
                      {"config": json.dumps(c, sort_keys=True), "optim": json.dumps(opt, sort_keys=True),
                       "finetune": json.dumps(ft, sort_keys=True)})
    print(f"{name}: loss {float(loss):.6f}, {len(train)} trainable tensors")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixtures")
    os.makedirs(out, exist_ok=True)
    base = dict(layers=2, hidden=16, heads=4, head_dim=4, ffn=24, vocab=40, max_context=64,
                rope_theta=10000.0, rms_eps=1e-6)
    opt = dict(lr=1e-2, min_lr=1e-3, warmup_steps=2, steps=STEPS, weight_decay=0.1,
               beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=0.5)
    lora = dict(method="lora", rank=4, alpha=8, rslora=False, targets=list(MODULES), freeze_layers=2)
    cases = [
        ("lora_qwen2_all", dict(base, arch="qwen2", kv_heads=2, qkv_bias=True, qk_norm=False, tie_embeddings=False),
         lora),
        ("lora_llama_tied_rslora_qv", dict(base, arch="llama", kv_heads=4, qkv_bias=False, qk_norm=False,
                                           tie_embeddings=True),
         dict(lora, rank=2, alpha=6, rslora=True, targets=["q_proj", "v_proj"])),
        ("lora_qwen3_qknorm_mlp", dict(base, arch="qwen3", kv_heads=1, qkv_bias=False, qk_norm=True,
                                       tie_embeddings=False, rope_theta=1000000.0),
         dict(lora, rank=3, alpha=5, targets=["k_proj", "o_proj", "gate_proj", "down_proj"])),
        ("freeze_qwen2_last1", dict(base, arch="qwen2", kv_heads=2, qkv_bias=True, qk_norm=False,
                                    tie_embeddings=False),
         dict(lora, method="freeze", freeze_layers=1)),
        ("freeze_llama_tied_first1", dict(base, arch="llama", kv_heads=4, qkv_bias=False, qk_norm=False,
                                          tie_embeddings=True),
         dict(lora, method="freeze", freeze_layers=-1)),
    ]
    for i, (name, c, ft) in enumerate(cases):
        make_case(out, name, c, opt, ft, 4321 + i)


if __name__ == "__main__":
    main()
