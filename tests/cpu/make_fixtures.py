#!/usr/bin/python3
"""Reference fixtures for the CPU trainer, computed by a hand-written PyTorch model
(torch 1.13 CPU, float64; no transformers). Run with /usr/bin/python3:

    /usr/bin/python3 tests/cpu/make_fixtures.py tests/cpu/fixtures

Each case writes CASE.safetensors holding, for one small model:
  w.NAME        initial parameters (HF names, model.h order)
  batch.ids/pos/mask   two micro-batches A and B (rows x context), stored as F32
  logits        logits of batch A            loss   mean CE over A's label tokens
  g.NAME        gradient of that mean loss
  adam.w.NAME   parameters after 10 AdamW steps (grad accumulation over A and B,
                clip_grad_norm_, warmup + cosine-with-min-lr schedule)
  adam.loss / adam.lr / adam.grad_norm   per step
  adam.S.{w,m,v,g}.NAME     for the optimizer steps S in STATE_STEPS: the state before
                step S (weights, AdamW moments, accumulated and clipped gradient), and
  adam.S.next.{w,m,v}.NAME  the state after it, so each step can be tested alone
and the config plus optimizer settings as JSON in the header's __metadata__.
"""
import json, math, os, struct, sys
import torch

torch.set_default_dtype(torch.float64)


def param_names(c):
    names = ["model.embed_tokens.weight"]
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        names.append(p + "input_layernorm.weight")
        for x in "qkv":
            names.append(p + f"self_attn.{x}_proj.weight")
            if c["qkv_bias"]:
                names.append(p + f"self_attn.{x}_proj.bias")
        if c["qk_norm"]:
            names += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"]
        names += [p + "self_attn.o_proj.weight", p + "post_attention_layernorm.weight",
                  p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"]
    names.append("model.norm.weight")
    if not c["tie_embeddings"]:
        names.append("lm_head.weight")
    return names


def shape_of(c, name):
    H, hd, F, V = c["hidden"], c["head_dim"], c["ffn"], c["vocab"]
    qd, kd = c["heads"] * hd, c["kv_heads"] * hd
    if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
        return (V, H)
    if "norm.weight" in name:
        return (hd,) if ("q_norm" in name or "k_norm" in name) else (H,)
    table = {"q_proj.weight": (qd, H), "k_proj.weight": (kd, H), "v_proj.weight": (kd, H),
             "q_proj.bias": (qd,), "k_proj.bias": (kd,), "v_proj.bias": (kd,),
             "o_proj.weight": (H, qd), "gate_proj.weight": (F, H), "up_proj.weight": (F, H),
             "down_proj.weight": (H, F)}
    for k, v in table.items():
        if name.endswith(k):
            return v
    raise KeyError(name)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, theta):
    # x [N, heads, hd]; HF rotate-half; inv_freq computed in float32 as HF does
    hd = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    ang = (pos.float()[:, None] * inv_freq[None, :]).double()
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def forward(c, P, ids, pos, mask, lora=None):
    """Mean CE over label tokens (sum / count), logits, sum, count. lora(module,
    input): an adapter's term added to that linear layer's output (or None);
    module is the HF prefix, e.g. model.layers.0.self_attn.q_proj."""
    B, T = ids.shape
    H, nh, kv, hd = c["hidden"], c["heads"], c["kv_heads"], c["head_dim"]
    eps = c["rms_eps"]
    x = P["model.embed_tokens.weight"][ids.reshape(-1)]
    posf = pos.reshape(-1)
    # document-causal mask: j sees i iff j - pos[j] <= i <= j (within a row)
    i = torch.arange(T)
    allowed = (i[None, :] <= i[:, None]) & (i[None, :] >= (i[:, None] - pos[:, :, None]))  # [B,T,T]
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, P[p + "input_layernorm.weight"], eps)
        def lin(name, inp):
            y = inp @ P[p + name + ".weight"].T
            if c["qkv_bias"] and (p + name + ".bias") in P:
                y = y + P[p + name + ".bias"]
            if lora is not None:
                y = y + lora(p + name, inp)
            return y
        q = lin("self_attn.q_proj", h).view(-1, nh, hd)
        k = lin("self_attn.k_proj", h).view(-1, kv, hd)
        v = lin("self_attn.v_proj", h).view(-1, kv, hd)
        if c["qk_norm"]:
            q = rmsnorm(q, P[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, P[p + "self_attn.k_norm.weight"], eps)
        q = rope(q, posf, c["rope_theta"])
        k = rope(k, posf, c["rope_theta"])
        q = q.view(B, T, nh, hd).transpose(1, 2)
        k = k.view(B, T, kv, hd).transpose(1, 2).repeat_interleave(nh // kv, dim=1)
        v = v.view(B, T, kv, hd).transpose(1, 2).repeat_interleave(nh // kv, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(~allowed[:, None], float("-inf"))
        a = torch.softmax(s, -1) @ v                                 # [B, nh, T, hd]
        a = a.transpose(1, 2).reshape(B * T, nh * hd)
        x = x + lin("self_attn.o_proj", a)
        h = rmsnorm(x, P[p + "post_attention_layernorm.weight"], eps)
        g = lin("mlp.gate_proj", h)
        u = lin("mlp.up_proj", h)
        x = x + lin("mlp.down_proj", torch.nn.functional.silu(g) * u)
    h = rmsnorm(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if c["tie_embeddings"] else P["lm_head.weight"]
    logits = h @ head.T
    # position t predicts ids[t+1] when mask[t+1] and pos[t+1] > 0
    lab = torch.zeros(B, T, dtype=torch.bool)
    lab[:, :-1] = (mask[:, 1:] > 0) & (pos[:, 1:] > 0)
    tgt = torch.zeros(B, T, dtype=torch.int64)
    tgt[:, :-1] = ids[:, 1:]
    ce = torch.nn.functional.cross_entropy(logits, tgt.reshape(-1), reduction="none")
    ce = ce * lab.reshape(-1)
    total, count = ce.sum(), int(lab.sum())
    return total / count, logits, total, count


def make_batch(gen, c, B, T, packed):
    ids = torch.randint(0, c["vocab"], (B, T), generator=gen)
    pos = torch.zeros(B, T, dtype=torch.int64)
    mask = torch.zeros(B, T, dtype=torch.int64)
    for b in range(B):
        t = 0
        # documents of random length; the last row ends in padding
        while t < T:
            n = int(torch.randint(3, T // 2 + 2, (1,), generator=gen))
            n = min(n, T - t)
            if not packed and b == B - 1 and t + n >= T - 3 and t == 0:
                n = T - 3
            prompt = int(torch.randint(1, max(2, n // 2), (1,), generator=gen))
            for j in range(n):
                pos[b, t + j] = j
                mask[b, t + j] = 1 if j >= prompt else 0
            t += n
            if not packed:
                break
        for j in range(t, T):   # padding: pos 0, mask 0, pad id 0
            ids[b, j] = 0
    return ids, pos, mask


def lr_lambda(step, o):
    w, total = o["warmup_steps"], o["steps"]
    if step < w:
        return step / max(1, w)
    progress = (step - w) / max(1, total - w)
    f = 0.5 * (1.0 + math.cos(math.pi * 2.0 * 0.5 * progress))
    rate = o["min_lr"] / o["lr"]
    return max(0.0, f * (1 - rate) + rate)


def decay_names(names):
    # HF Trainer.get_decay_parameter_names: no decay for biases and norm weights
    return [n for n in names if not (n.endswith(".bias") or "norm" in n)]


# Optimizer steps whose whole state is recorded: the first with a nonzero learning rate
# (warmup) and the last (cosine tail, bias correction at t = 10).
STATE_STEPS = (1, 9)


def write_safetensors(path, tensors, meta):
    header, off, blobs = {"__metadata__": meta}, 0, []
    for name, t in tensors:
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_case(out, name, c, opt, seed):
    gen = torch.Generator().manual_seed(seed)
    names = param_names(c)
    P = {}
    for n in names:
        shp = shape_of(c, n)
        if "norm.weight" in n:
            P[n] = 1.0 + 0.1 * torch.randn(shp, generator=gen)
        elif n.endswith(".bias"):
            P[n] = 0.1 * torch.randn(shp, generator=gen)
        else:
            P[n] = 0.3 * torch.randn(shp, generator=gen)
        P[n].requires_grad_(True)
    B, T = 2, 12
    A = make_batch(gen, c, B, T, packed=True)
    Bb = make_batch(gen, c, B, T, packed=False)
    tensors = [("w." + n, P[n]) for n in names]
    for tag, (ids, pos, mask) in (("A", A), ("B", Bb)):
        tensors += [(f"batch.{tag}.ids", ids.double()), (f"batch.{tag}.pos", pos.double()),
                    (f"batch.{tag}.mask", mask.double())]
    loss, logits, _, _ = forward(c, P, *A)
    loss.backward()
    tensors += [("logits", logits), ("loss", loss.reshape(1))]
    tensors += [("g." + n, P[n].grad) for n in names]

    # 10 AdamW steps, grad accumulation over micro-batches A and B (HF: sum / all label tokens)
    Q = {n: P[n].detach().clone().requires_grad_(True) for n in names}
    dec = set(decay_names(names))
    optim = torch.optim.AdamW([{"params": [Q[n] for n in names if n in dec], "weight_decay": opt["weight_decay"]},
                               {"params": [Q[n] for n in names if n not in dec], "weight_decay": 0.0}],
                              lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: lr_lambda(s, opt))
    losses, lrs, norms = [], [], []
    for step in range(opt["steps"]):
        optim.zero_grad()
        _, _, sa, ca = forward(c, Q, *A)
        _, _, sb, cb = forward(c, Q, *Bb)
        loss = (sa + sb) / (ca + cb)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_([Q[n] for n in names], opt["grad_clip"])
        lrs.append(optim.param_groups[0]["lr"])
        if step in STATE_STEPS:
            st = lambda n, k: optim.state[Q[n]][k] if Q[n] in optim.state else torch.zeros_like(Q[n])
            tensors += [(f"adam.{step}.w." + n, Q[n].detach().clone()) for n in names]
            tensors += [(f"adam.{step}.m." + n, st(n, "exp_avg").clone()) for n in names]
            tensors += [(f"adam.{step}.v." + n, st(n, "exp_avg_sq").clone()) for n in names]
            tensors += [(f"adam.{step}.g." + n, Q[n].grad.detach().clone()) for n in names]
        optim.step()
        if step in STATE_STEPS:
            tensors += [(f"adam.{step}.next.w." + n, Q[n].detach().clone()) for n in names]
            tensors += [(f"adam.{step}.next.m." + n, optim.state[Q[n]]["exp_avg"].clone()) for n in names]
            tensors += [(f"adam.{step}.next.v." + n, optim.state[Q[n]]["exp_avg_sq"].clone()) for n in names]
        sched.step()
        losses.append(float(loss))
        norms.append(float(gn))
    tensors += [("adam.w." + n, Q[n]) for n in names]
    tensors += [("adam.loss", torch.tensor(losses)), ("adam.lr", torch.tensor(lrs)),
                ("adam.grad_norm", torch.tensor(norms))]
    write_safetensors(os.path.join(out, name + ".safetensors"), tensors,
                      {"config": json.dumps(c, sort_keys=True), "optim": json.dumps(opt, sort_keys=True)})
    print(f"{name}: loss {float(loss):.6f}, {len(names)} tensors")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixtures")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    base = dict(layers=2, hidden=16, heads=4, head_dim=4, ffn=24, vocab=40, max_context=64,
                rope_theta=10000.0, rms_eps=1e-6)
    opt = dict(lr=1e-2, min_lr=1e-3, warmup_steps=2, steps=10, weight_decay=0.1,
               beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=0.5)
    cases = [
        ("qwen2_gqa_bias_untied", dict(base, arch="qwen2", kv_heads=2, qkv_bias=True, qk_norm=False, tie_embeddings=False)),
        ("llama_tied", dict(base, arch="llama", kv_heads=4, qkv_bias=False, qk_norm=False, tie_embeddings=True)),
        ("qwen3_qknorm_mqa", dict(base, arch="qwen3", kv_heads=1, qkv_bias=False, qk_norm=True, tie_embeddings=False,
                                  rope_theta=1000000.0)),
    ]
    for i, (name, c) in enumerate(cases):
        make_case(out, name, c, opt, 1234 + i)


if __name__ == "__main__":
    main()
