#!/usr/bin/env python3
"""A PyTorch re-implementation of what `llmc-train run PLAN.json` does on a from-scratch
plan (the tiny plan of tests/cuda/make_tiny_run.sh), to compare learning: fp32 on the
CPU it tracks our CPU trainer step by step; bf16 (autocast, fp32 master weights and
AdamW) on the GPU it is the reference that our CUDA trainer's learning is judged by
(issue 27, item 3; docs/cuda.md, "PyTorch reference trainer").

usage: torch_ref.py PLAN.json --out OUTDIR [--eval-shards DIR] [--precision fp32|bf16]
                    [--device cpu|cuda] [--seed N] [--stop-after N] [--fp32-logits]
                    [--fp32-softmax] [--fp32-norms] [--fp32-residual] [--threads N]

Writes OUTDIR/metrics.jsonl (one line a step: step, loss, lr, grad_norm, tokens,
step_time_s, as ours), OUTDIR/result.json (steps, final_loss, unigram_baseline and,
with --eval-shards, eval_loss, eval_documents, eval_correct, eval_accuracy, as ours)
and OUTDIR/config.json (what ran: plan, seed, precision, device, numerics options).

The recipe is the one of our C code, read from it:
- model (runtime/model/model.c, ops_cpu.c): Llama/Qwen2/Qwen3 decoder, RMSNorm
  x * rsqrt(mean(x^2) + eps) * w, q/k/v biases (qkv_bias), q/k RMSNorm (qk_norm), RoPE
  rotate-half with angle pos * theta^(-2i/head_dim) where pos is the shard's position
  (0 at every document start), grouped-query attention (query head h reads kv head
  h / (heads/kv_heads)), scores scaled by 1/sqrt(head_dim), SwiGLU MLP, tied or untied LM head.
- attention mask (runtime/data/shard.h): token j sees i iff j - pos[j] <= i <= j.
- init (model_init_random, runtime/base/rng.c): xoshiro256** seeded by splitmix64 with
  train.seed; every tensor in model_layout order; norm weights 1, biases 0, the others
  rng_normal() * 0.02 (Box-Muller, one normal per element), rounded to fp32. The same
  seed gives bit-identical initial weights to the C trainers.
- data order (runtime/data/row_stream.c): epoch e is a Fisher-Yates permutation of the
  rows (from the end, rng_below) of an Rng seeded with seed ^ (0x9e3779b97f4a7c15 *
  (e + 1)); step s takes stream rows [s*G, (s+1)*G); micro-batch slot a (of S =
  data_parallel * grad_accum) takes positions a, a+S, a+2S, ... (train_loop.c).
- labels: row position t predicts id[t+1] where mask[t+1] == 1 and pos[t+1] > 0.
- loss: the sum of the token cross-entropies over the whole optimizer step divided by
  its label count; gradients are summed unscaled over micro-batches, then multiplied
  once by (float)(1 / label count) (HF's num_items_in_batch).
- schedule (runtime/model/optim.c lr_at): step s (0-based) runs at lr * s / warmup while
  s < warmup (warmup = ceil(total * warmup_ratio) or warmup_steps), then constant,
  linear (total - s) / (total - warmup) or cosine 0.5 (1 + cos(pi progress)) from lr
  down to min_lr; total = max_steps or ceil(epochs * rows / global_batch).
- clipping: global L2 norm of the scaled gradients (summed in fp64), scaled by
  max_norm / (norm + 1e-6) when that is below 1 (torch's clip_grad_norm_); grad_norm in
  the metrics is the norm before clipping.
- AdamW (optim.c adamw_step): torch.optim.AdamW's single-tensor formula in fp32,
  in our order: w *= 1 - lr*wd (matrices and embeddings only, not norms or biases),
  m = b1 m + (1-b1) g, v = b2 v + (1-b2) g g, w -= (lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps),
  bias corrections from the step count t = 1, 2, ...
- eval (train_loop.c evaluate): the held-out rows in micro-batches; the loss summed
  over label tokens / their count; a document (a pos == 0 started segment of a row
  with at least one label) is correct iff the argmax (first maximum) at every label
  position is its label: greedy decoding reproduces the answer exactly.
- final_loss: the mean of the last 10% (at least 1) of the steps' losses.

Precision:
  fp32  every tensor fp32, no TF32 (our CPU trainer's arithmetic up to summation order).
  bf16  torch.autocast(bfloat16) runs every matmul (linear layers, attention products,
        LM head) with bf16 inputs; the parameters are fp32 master weights with fp32
        gradients (autocast's bf16 copies' gradients are added into them), clipped and
        updated by the fp32 AdamW above. Between the matmuls the activations are bf16,
        as our CUDA trainer keeps them ("bf16 weights and activations"): the embedding
        output and the residual stream, RMSNorm (statistic in fp32 from the upcast input,
        then HF's LlamaRMSNorm on a bf16 weight: w_bf16 * x_hat.to(bf16)), RoPE (fp32
        cos/sin cast to bf16, HF's form), the attention scores (bf16 GEMM output) with a
        softmax computed in fp32 and rounded to bf16 probabilities (HF's eager attention),
        SwiGLU, and the logits (bf16 GEMM output, upcast to fp32 for the loss, as HF's
        loss and our loss kernel do). Activation gradients follow their tensors' dtype.
  Each of these moves one part to fp32 (bf16 only; combine them freely):
  --fp32-logits   the LM head in fp32: final RMSNorm output, weight and logits fp32 (an
                  fp32 GEMM, never rounded to bf16), so the loss and dlogits are fp32 too.
  --fp32-softmax  attention scores Q K^T accumulated and kept in fp32 (from the bf16 q and
                  k), the masked softmax and its statistics in fp32, the probabilities
                  rounded to bf16 only as the P V GEMM's input (FlashAttention's numerics).
  --fp32-norms    RMSNorm wholly in fp32 (the weight multiply and the weight's gradient
                  too); its output is rounded only as the next GEMM's bf16 input.
  --fp32-residual the residual stream (embedding output, both residual adds of every
                  layer, the norms' inputs) and its gradient in fp32 (what plain autocast
                  over HF modules with fp32 weights gives).
Plain autocast over HF's Qwen2 with fp32 weights corresponds to --fp32-norms
--fp32-residual (and --fp32-softmax with SDPA's fused kernels).

Not covered (refused with a message): LoRA/freeze fine-tuning, init from a checkpoint.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

PROG = "torch_ref"
M64 = (1 << 64) - 1


class RefError(Exception):
    """Bad input: reported as 'torch_ref: error: ...', exit 1."""


def f32(x):
    """x rounded to the nearest fp32, as C's (float) cast."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- runtime/base/rng.c: xoshiro256** seeded by splitmix64 ----

def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Rng:
    def __init__(self, seed):
        x = seed & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    def next(self):
        s0, s1, s2, s3 = self.s
        result = (_rotl((s1 * 5) & M64, 7) * 9) & M64
        t = (s1 << 17) & M64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = _rotl(s3, 45)
        self.s = [s0, s1, s2, s3]
        return result

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def normal(self):
        u1 = 1.0 - self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.next()
            if x < limit:
                return x % n


class RowStream:
    """runtime/data/row_stream.c: the shuffled stream of row indices."""

    def __init__(self, n_rows, seed):
        self.n, self.seed, self.epoch, self.perm = n_rows, seed, -1, None

    def row(self, i):
        epoch = i // self.n
        if epoch != self.epoch:
            r = Rng(self.seed ^ ((0x9E3779B97F4A7C15 * (epoch + 1)) & M64))
            perm = list(range(self.n))
            for k in range(self.n - 1, 0, -1):
                j = r.below(k + 1)
                perm[k], perm[j] = perm[j], perm[k]
            self.perm, self.epoch = perm, epoch
        return self.perm[i % self.n]


# ---- the plan ----

class Plan:
    def __init__(self, path):
        try:
            with open(path) as f:
                j = json.load(f)
        except OSError as e:
            raise RefError(f"{path}: {e.strerror}")
        except ValueError as e:
            raise RefError(f"{path}: not JSON: {e}")
        self.path, self.dir = path, os.path.dirname(os.path.abspath(path))

        def get(section, key, kinds, nullable=False):
            sec = j.get(section)
            if not isinstance(sec, dict) or key not in sec:
                raise RefError(f"{path}: {section}.{key} is missing")
            v = sec[key]
            if v is None and nullable:
                return None
            if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
                raise RefError(f"{path}: {section}.{key} is {json.dumps(v)}, not a {kinds[0].__name__}")
            return v

        num = (int, float)
        self.arch = get("model", "arch", (str,))
        if self.arch not in ("llama", "qwen2", "qwen3"):
            raise RefError(f"{path}: model.arch '{self.arch}' is not llama, qwen2 or qwen3")
        for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"):
            v = get("model", k, (int,))
            if v < 1:
                raise RefError(f"{path}: model.{k} is {v}, must be positive")
            setattr(self, k, v)
        if self.heads % self.kv_heads or self.head_dim % 2:
            raise RefError(f"{path}: model.heads must be a multiple of kv_heads and head_dim even")
        self.rope_theta = float(get("model", "rope_theta", num))
        self.rms_eps = float(get("model", "rms_eps", num))
        self.tie = get("model", "tie_embeddings", (bool,))
        self.qkv_bias = get("model", "qkv_bias", (bool,))
        self.qk_norm = get("model", "qk_norm", (bool,))
        init = get("model", "init", (str,))
        if init != "scratch":
            raise RefError(f"{path}: model.init is '{init}': the reference trains from scratch only")
        method = get("finetune", "method", (str,))
        if method != "full":
            raise RefError(f"{path}: finetune.method is '{method}': the reference does full training only")
        self.context = get("data", "context", (int,))
        self.shards_dir = os.path.join(self.dir, get("data", "shards_dir", (str,)))
        self.epochs = get("train", "epochs", num, nullable=True)
        self.max_steps = get("train", "max_steps", (int,), nullable=True)
        if self.epochs is None and self.max_steps is None:
            raise RefError(f"{path}: train.epochs and train.max_steps are both null")
        self.micro_batch = get("train", "micro_batch", (int,))
        self.grad_accum = get("train", "grad_accum", (int,))
        self.global_batch = get("train", "global_batch", (int,))
        self.data_parallel = get("parallel", "data_parallel", (int,))
        if min(self.micro_batch, self.grad_accum, self.data_parallel) < 1 or \
                self.global_batch != self.micro_batch * self.grad_accum * self.data_parallel:
            raise RefError(f"{path}: train.global_batch {self.global_batch} is not micro_batch "
                           f"{self.micro_batch} x grad_accum {self.grad_accum} x data_parallel {self.data_parallel}")
        self.lr = float(get("train", "lr", num))
        self.min_lr = float(get("train", "min_lr", num, nullable=True) or 0.0)
        self.schedule = get("train", "schedule", (str,))
        if self.schedule not in ("cosine", "linear", "constant"):
            raise RefError(f"{path}: train.schedule '{self.schedule}' is not cosine, linear or constant")
        self.warmup_ratio = get("train", "warmup_ratio", num, nullable=True)
        self.warmup_steps = get("train", "warmup_steps", (int,), nullable=True)
        if (self.warmup_ratio is None) == (self.warmup_steps is None):
            raise RefError(f"{path}: exactly one of train.warmup_ratio and train.warmup_steps must be non-null")
        self.weight_decay = float(get("train", "weight_decay", num))
        self.beta1 = float(get("train", "beta1", num))
        self.beta2 = float(get("train", "beta2", num))
        self.eps = float(get("train", "eps", num))
        self.grad_clip = float(get("train", "grad_clip", num, nullable=True) or 0.0)
        self.seed = get("train", "seed", (int,))
        if not 0 <= self.seed <= M64:
            raise RefError(f"{path}: train.seed {self.seed} is not a 64-bit unsigned integer")
        self.precision = get("train", "precision", (str,))


# ---- runtime/data/shard.h, shard_io.c ----

HEADER = struct.Struct("<8sIIQIIQQ16s")   # ShardHeader, 64 bytes


def read_shards(d, torch):
    """index.json's shards in order -> (context, pad_id, ids, pos, mask) over all rows."""
    ipath = os.path.join(d, "index.json")
    try:
        with open(ipath) as f:
            idx = json.load(f)
    except OSError as e:
        raise RefError(f"{ipath}: {e.strerror} (prepare the shards with `llmc-train prepare` first)")
    except ValueError as e:
        raise RefError(f"{ipath}: not JSON: {e}")
    try:
        context, pad_id, entries = int(idx["context"]), int(idx["pad_id"]), list(idx["shards"])
    except (KeyError, TypeError, ValueError):
        raise RefError(f"{ipath}: needs context, pad_id and a shards list")
    ids, pos, mask = [], [], []
    for e in entries:
        try:
            fpath, want_rows = os.path.join(d, e["file"]), int(e["n_rows"])
        except (KeyError, TypeError, ValueError):
            raise RefError(f"{ipath}: a shards entry needs file and n_rows")
        try:
            with open(fpath, "rb") as f:
                data = f.read()
        except OSError as err:
            raise RefError(f"{fpath}: {err.strerror}")
        if len(data) < HEADER.size:
            raise RefError(f"{fpath}: shorter than its 64-byte header")
        magic, version, ctx, n_rows, _vocab, pad, _docs, _labels, _ = HEADER.unpack_from(data)
        if magic != b"LLMCSHD\0" or version != 1:
            raise RefError(f"{fpath}: not a version-1 llmc shard")
        if ctx != context or pad != pad_id or n_rows != want_rows:
            raise RefError(f"{fpath}: header (context {ctx}, pad {pad}, {n_rows} rows) disagrees with index.json")
        n = n_rows * ctx
        if len(data) != HEADER.size + 9 * n:
            raise RefError(f"{fpath}: {len(data)} bytes, a shard of {n_rows} rows of {ctx} has {HEADER.size + 9 * n}")
        buf = bytearray(data)
        o = HEADER.size
        ids.append(torch.frombuffer(buf, dtype=torch.int32, count=n, offset=o).view(n_rows, ctx))
        pos.append(torch.frombuffer(buf, dtype=torch.int32, count=n, offset=o + 4 * n).view(n_rows, ctx))
        mask.append(torch.frombuffer(buf, dtype=torch.uint8, count=n, offset=o + 8 * n).view(n_rows, ctx))
    if not ids or sum(t.shape[0] for t in ids) == 0:
        raise RefError(f"{ipath}: no rows")
    ids, pos, mask = (torch.cat(t).long() for t in (ids, pos, mask))
    return context, pad_id, ids, pos, mask.bool()


def check_rows(d, ids, pos, vocab, torch):
    """As train_loop.c batch_read: ids inside the vocabulary, positions not before the row's start.
    (uint32 values >= 2^31 read as negative int32: also caught here.)"""
    bad = (ids < 0) | (ids >= vocab)
    if bad.any():
        r, t = (int(v) for v in bad.nonzero()[0])
        raise RefError(f"{d}: row {r} has token id {int(ids[r, t]) & 0xFFFFFFFF}, outside the model's "
                       f"vocabulary of {vocab}")
    tpos = torch.arange(ids.shape[1]).expand_as(pos)
    bad = (pos < 0) | (pos > tpos)
    if bad.any():
        r, t = (int(v) for v in bad.nonzero()[0])
        raise RefError(f"{d}: row {r} position {t} has pos {int(pos[r, t]) & 0xFFFFFFFF} (before the row's start)")


def unigram_baseline(ids, pos, mask, vocab, torch):
    lab = mask[:, 1:] & (pos[:, 1:] > 0)
    counts = torch.bincount(ids[:, 1:][lab], minlength=vocab).double()
    total = counts.sum()
    if total == 0:
        return float("nan")
    p = counts[counts > 0] / total
    return float(-(p * p.log()).sum())


# ---- model (runtime/model/model.c) ----

def layout(P):
    """(name, shape, decay) in model_layout order."""
    H, qd, kd = P.hidden, P.heads * P.head_dim, P.kv_heads * P.head_dim
    out = [("model.embed_tokens.weight", (P.vocab, H), True)]
    for l in range(P.layers):
        pre = f"model.layers.{l}."
        out.append((pre + "input_layernorm.weight", (H,), False))
        for n, d in (("q", qd), ("k", kd), ("v", kd)):
            out.append((pre + f"self_attn.{n}_proj.weight", (d, H), True))
            if P.qkv_bias:
                out.append((pre + f"self_attn.{n}_proj.bias", (d,), False))
        if P.qk_norm:
            out.append((pre + "self_attn.q_norm.weight", (P.head_dim,), False))
            out.append((pre + "self_attn.k_norm.weight", (P.head_dim,), False))
        out += [(pre + "self_attn.o_proj.weight", (H, qd), True),
                (pre + "post_attention_layernorm.weight", (H,), False),
                (pre + "mlp.gate_proj.weight", (P.ffn, H), True),
                (pre + "mlp.up_proj.weight", (P.ffn, H), True),
                (pre + "mlp.down_proj.weight", (H, P.ffn), True)]
    out.append(("model.norm.weight", (H,), False))
    if not P.tie:
        out.append(("lm_head.weight", (P.vocab, H), True))
    return out


def init_params(P, seed, torch):
    """model_init_random(seed, 0.02): the C trainers' initial weights, bit for bit."""
    r = Rng(seed)
    params = {}
    for name, shape, _ in layout(P):
        numel = math.prod(shape)
        if "norm.weight" in name:
            t = torch.ones(shape)
        elif name.endswith(".bias"):
            t = torch.zeros(shape)
        else:
            vals = [r.normal() * 0.02 for _ in range(numel)]   # in double, then (float)
            t = torch.tensor(vals, dtype=torch.float64).to(torch.float32).view(shape)
        params[name] = t
    return params


class Numerics:
    def __init__(self, bf16, fp32_logits, fp32_softmax, fp32_norms, fp32_residual, device_type, torch):
        self.bf16 = bf16
        self.torch = torch
        self.device_type = device_type
        self.act = torch.bfloat16 if bf16 else torch.float32   # activations between matmuls
        self.fp32_logits = fp32_logits or not bf16
        self.fp32_softmax = fp32_softmax or not bf16
        self.fp32_norms = fp32_norms or not bf16
        self.res = torch.float32 if (fp32_residual or not bf16) else self.act   # the residual stream

    def autocast(self, enabled=True):
        return self.torch.autocast(device_type=self.device_type, dtype=self.torch.bfloat16,
                                   enabled=self.bf16 and enabled)


def rmsnorm(x, w, eps, num, fp32=False):
    torch = num.torch
    xf = x.float()
    hs = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if fp32 or num.fp32_norms:
        return w * hs
    return w.to(num.act) * hs.to(num.act)   # HF's LlamaRMSNorm on a bf16 weight


def rope_tables(pos, P, num):
    """cos, sin [B, T, 1, head_dim] (rotate-half layout), fp32, angles as ops_cpu.c op_rope."""
    torch = num.torch
    expo = torch.arange(0, P.head_dim, 2, device=pos.device, dtype=torch.float32) / P.head_dim
    inv_freq = 1.0 / torch.pow(torch.tensor(P.rope_theta, dtype=torch.float32, device=pos.device), expo)
    ang = pos.float().unsqueeze(-1) * inv_freq          # [B, T, half]
    ang = torch.cat([ang, ang], dim=-1).unsqueeze(2)    # [B, T, 1, hd]: element i pairs with i + half
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin, torch):
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)   # HF's rotate_half
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    return x * c + rot * s


def forward(params, ids, pos, P, num):
    """Logits [B, T, V] (bf16 or fp32, see Numerics)."""
    torch = num.torch
    F = torch.nn.functional
    B, T = ids.shape
    H, nh, nkv, hd = P.hidden, P.heads, P.kv_heads, P.head_dim
    group = nh // nkv
    eps = P.rms_eps
    E = params["model.embed_tokens.weight"]
    ar = torch.arange(T, device=ids.device)
    lo = ar.unsqueeze(0) - pos                                    # [B, T]: first visible key
    allowed = (ar.view(1, 1, T) <= ar.view(1, T, 1)) & (ar.view(1, 1, T) >= lo.unsqueeze(-1))
    allowed = allowed.unsqueeze(1)                                # [B, 1, T(query), T(key)]
    cos, sin = rope_tables(pos, P, num)
    scale = 1.0 / math.sqrt(hd)
    x = F.embedding(ids, E).to(num.res)
    with num.autocast():
        for l in range(P.layers):
            p = lambda n: params.get(f"model.layers.{l}.{n}")
            h = rmsnorm(x, p("input_layernorm.weight"), eps, num)
            q = F.linear(h, p("self_attn.q_proj.weight"), p("self_attn.q_proj.bias")).view(B, T, nh, hd)
            k = F.linear(h, p("self_attn.k_proj.weight"), p("self_attn.k_proj.bias")).view(B, T, nkv, hd)
            v = F.linear(h, p("self_attn.v_proj.weight"), p("self_attn.v_proj.bias")).view(B, T, nkv, hd)
            if P.qk_norm:
                q = rmsnorm(q, p("self_attn.q_norm.weight"), eps, num).to(num.act)
                k = rmsnorm(k, p("self_attn.k_norm.weight"), eps, num).to(num.act)
            q, k = apply_rope(q, cos, sin, torch), apply_rope(k, cos, sin, torch)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))          # [B, heads, T, hd]
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            if num.fp32_softmax:
                with num.autocast(enabled=False):
                    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
            else:
                s = torch.matmul(q, k.transpose(-1, -2)) * scale     # bf16 scores
            s = s.masked_fill(~allowed, float("-inf"))
            probs = torch.softmax(s, dim=-1, dtype=torch.float32).to(num.act)
            att = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, nh * hd)
            o = F.linear(att, p("self_attn.o_proj.weight"))
            x = (x + o.to(num.res)).to(num.res)
            h = rmsnorm(x, p("post_attention_layernorm.weight"), eps, num)
            gate = F.linear(h, p("mlp.gate_proj.weight"))
            up = F.linear(h, p("mlp.up_proj.weight"))
            act = F.silu(gate) * up
            d = F.linear(act, p("mlp.down_proj.weight"))
            x = (x + d.to(num.res)).to(num.res)
        head = E if P.tie else params["lm_head.weight"]
        if num.fp32_logits:
            with num.autocast(enabled=False):
                hf = rmsnorm(x, params["model.norm.weight"], eps, num, fp32=True)
                logits = F.linear(hf, head)
        else:
            hf = rmsnorm(x, params["model.norm.weight"], eps, num)
            logits = F.linear(hf, head)                               # bf16 logits
    return logits


def label_targets(ids, pos, mask, torch):
    """targets [B, T]: id[t+1] where position t carries a loss term, else -1."""
    tgt = torch.full_like(ids, -1)
    lab = mask[:, 1:] & (pos[:, 1:] > 0)
    tgt[:, :-1] = torch.where(lab, ids[:, 1:], torch.full_like(ids[:, 1:], -1))
    return tgt


def loss_sum(logits, tgt, torch):
    """Sum of the label tokens' cross-entropies, in fp32 from the (upcast) logits; label count."""
    sel = tgt >= 0
    n = int(sel.sum())
    if n == 0:
        return logits.float().sum() * 0.0, 0
    lg = logits[sel].float()
    return torch.nn.functional.cross_entropy(lg, tgt[sel], reduction="sum"), n


# ---- schedule, clipping, AdamW (runtime/model/optim.c) ----

def lr_at(P, step, warmup, total):
    if step < warmup:
        f = step / (warmup if warmup > 1 else 1)
    elif P.schedule == "constant":
        f = 1.0
    else:
        span = total - warmup
        progress = (step - warmup) / (span if span > 1 else 1)
        if P.schedule == "linear":
            f = max(0.0, (total - step) / (span if span > 1 else 1))
        else:
            rate = P.min_lr / P.lr if P.lr > 0 else 0.0
            f = 0.5 * (1.0 + math.cos(math.pi * progress))
            f = max(0.0, f * (1.0 - rate) + rate)
    return P.lr * f


class AdamW:
    """optim.c adamw_step: fp32 moments, torch's AdamW formula in our order of operations."""

    def __init__(self, params, decay, P, torch):
        self.params, self.decay, self.P, self.t = params, decay, P, 0
        self.m = {n: torch.zeros_like(w) for n, w in params.items()}
        self.v = {n: torch.zeros_like(w) for n, w in params.items()}

    def step(self, grads, lr):
        P = self.P
        self.t += 1
        bc1, bc2 = 1.0 - P.beta1 ** self.t, 1.0 - P.beta2 ** self.t
        step_size, bc2_sqrt, eps = f32(lr / bc1), f32(math.sqrt(bc2)), f32(P.eps)
        b1, b2 = f32(P.beta1), f32(P.beta2)
        omb1, omb2 = f32(1.0 - b1), f32(1.0 - b2)
        for n, w in self.params.items():
            g, m, v = grads[n], self.m[n], self.v[n]
            if self.decay[n]:
                w.mul_(f32(1.0 - lr * P.weight_decay))
            m.mul_(b1).add_(g * omb1)
            v.mul_(b2).add_((g * omb2) * g)
            denom = v.sqrt().div_(bc2_sqrt).add_(eps)
            w.sub_((m * step_size).div_(denom))


# ---- the run ----

def parse_args(argv):
    ap = argparse.ArgumentParser(prog="torch_ref.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan", metavar="PLAN.json")
    ap.add_argument("--out", required=True, metavar="OUTDIR", help="metrics.jsonl, result.json, config.json go here")
    ap.add_argument("--eval-shards", metavar="DIR", help="held-out shards: eval loss and greedy exact match")
    ap.add_argument("--precision", choices=("fp32", "bf16"), help="default: the plan's train.precision")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--seed", type=int, help="instead of the plan's train.seed")
    ap.add_argument("--stop-after", type=int, metavar="N", help="train only the first N steps of the plan's schedule")
    ap.add_argument("--fp32-logits", action="store_true", help="bf16: the LM head, logits and loss in fp32")
    ap.add_argument("--fp32-softmax", action="store_true", help="bf16: attention scores and softmax in fp32")
    ap.add_argument("--fp32-norms", action="store_true", help="bf16: RMSNorm wholly in fp32")
    ap.add_argument("--fp32-residual", action="store_true", help="bf16: the residual stream in fp32")
    ap.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's)")
    ap.add_argument("--log-every", type=int, default=100, metavar="N", help="progress line every N steps (stdout)")
    a = ap.parse_args(argv)
    if a.seed is not None and not 0 <= a.seed <= M64:
        ap.error(f"--seed {a.seed} is not a 64-bit unsigned integer")
    if a.stop_after is not None and a.stop_after < 1:
        ap.error(f"--stop-after {a.stop_after}: must be at least 1")
    if a.threads is not None and a.threads < 1:
        ap.error(f"--threads {a.threads}: must be at least 1")
    if a.log_every < 1:
        ap.error(f"--log-every {a.log_every}: must be at least 1")
    return a


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def evaluate(params, P, num, shards, B, dev, torch):
    """train_loop.c evaluate(): (loss, documents, correct)."""
    _, _, ids, pos, mask = shards
    loss, labels, docs, correct = 0.0, 0, 0, 0
    with torch.no_grad():
        for r0 in range(0, ids.shape[0], B):
            bi, bp, bm = (t[r0:r0 + B].to(dev) for t in (ids, pos, mask))
            logits = forward(params, bi, bp, P, num)
            tgt = label_targets(bi, bp, bm, torch)
            ls, n = loss_sum(logits, tgt, torch)
            loss += float(ls)
            labels += n
            am = logits.float().argmax(dim=-1)
            wrong = (tgt >= 0) & (am != tgt)
            lab, wrong, bp = tgt.cpu() >= 0, wrong.cpu(), bp.cpu()
            for r in range(bi.shape[0]):
                starts = [t for t in range(1, bp.shape[1]) if bp[r, t] == 0] + [bp.shape[1]]
                s0 = 0
                for s1 in starts:   # a document is [s0, s1): its label positions lie inside it
                    if lab[r, s0:s1].any():
                        docs += 1
                        correct += int(not wrong[r, s0:s1].any())
                    s0 = s1
    return (loss / labels if labels else 0.0), docs, correct


def main(argv):
    a = parse_args(argv)
    if a.device == "cuda":   # deterministic cuBLAS: before torch touches CUDA
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    P = Plan(a.plan)
    seed = P.seed if a.seed is None else a.seed
    precision = a.precision or P.precision
    if precision not in ("fp32", "bf16"):
        raise RefError(f"{a.plan}: train.precision '{precision}': give --precision fp32 or bf16")
    if precision == "fp32" and (a.fp32_logits or a.fp32_softmax or a.fp32_norms or a.fp32_residual):
        raise RefError("--fp32-logits/--fp32-softmax/--fp32-norms/--fp32-residual change bf16 runs only")
    if a.device == "cuda" and not torch.cuda.is_available():
        raise RefError("--device cuda: this torch sees no CUDA device")
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:   # bf16 GEMMs accumulate in fp32 throughout, as cuBLASLt does for us (torch >= 1.12)
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    except (AttributeError, AssertionError):
        pass
    torch.use_deterministic_algorithms(True, warn_only=True)
    dev = torch.device(a.device)

    # every input read and checked before anything is written
    train = read_shards(P.shards_dir, torch)
    if train[0] != P.context:
        raise RefError(f"{P.shards_dir}: shards have context {train[0]}; the plan wants {P.context}")
    check_rows(P.shards_dir, train[2], train[3], P.vocab, torch)
    evals = None
    if a.eval_shards:
        evals = read_shards(a.eval_shards, torch)
        check_rows(a.eval_shards, evals[2], evals[3], P.vocab, torch)
    n_rows = train[2].shape[0]
    G, MB, S = P.global_batch, P.micro_batch, P.grad_accum * P.data_parallel
    total = P.max_steps if P.max_steps and P.max_steps > 0 else math.ceil(P.epochs * n_rows / G)
    total = max(total, 1)
    warmup = P.warmup_steps if P.warmup_steps is not None and P.warmup_steps >= 0 \
        else math.ceil(total * P.warmup_ratio)
    steps = min(total, a.stop_after) if a.stop_after else total
    baseline = unigram_baseline(train[2], train[3], train[4], P.vocab, torch)

    num = Numerics(precision == "bf16", a.fp32_logits, a.fp32_softmax, a.fp32_norms, a.fp32_residual,
                   a.device, torch)
    params = {n: t.to(dev).requires_grad_(True) for n, t in init_params(P, seed, torch).items()}
    decay = {n: d for n, _, d in layout(P)}
    opt = AdamW({n: w.data for n, w in params.items()}, decay, P, torch)
    stream = RowStream(n_rows, seed)
    _, pad_id, ids_all, pos_all, mask_all = train

    os.makedirs(a.out, exist_ok=True)
    config = {"plan": os.path.abspath(a.plan), "seed": seed, "precision": precision, "device": a.device,
              "fp32_logits": a.fp32_logits, "fp32_softmax": a.fp32_softmax, "fp32_norms": a.fp32_norms,
              "fp32_residual": a.fp32_residual, "torch": torch.__version__, "steps_total": total,
              "warmup_steps": warmup}
    write_atomic(os.path.join(a.out, "config.json"), json.dumps(config, indent=1) + "\n")
    mpath = os.path.join(a.out, "metrics.jsonl")
    losses = []
    print(f"{PROG}: {total} steps ({steps} run), {sum(t.numel() for t in params.values())} parameters, "
          f"{n_rows} rows of {P.context}, global batch {G} (micro {MB} x {S} slots), {precision} on {a.device}, "
          f"seed {seed}, unigram baseline {baseline:.4f}", flush=True)
    t_start = time.monotonic()
    with open(mpath, "w") as mf:
        for step in range(steps):
            t0 = time.monotonic()
            for w in params.values():
                w.grad = None
            lsum, nlab, ntok = 0.0, 0, 0
            for slot in range(S):
                rows = [stream.row(step * G + slot + i * S) for i in range(MB)]
                bi, bp, bm = (t[rows] for t in (ids_all, pos_all, mask_all))
                ntok += int((~((bi == pad_id) & (bp == 0) & ~bm)).sum())
                bi, bp, bm = bi.to(dev), bp.to(dev), bm.to(dev)
                logits = forward(params, bi, bp, P, num)
                ls, n = loss_sum(logits, label_targets(bi, bp, bm, torch), torch)
                ls.backward()
                lsum += float(ls)
                nlab += n
            lr = lr_at(P, step, warmup, total)
            with torch.no_grad():
                inv = f32(1.0 / nlab) if nlab > 0 else 0.0
                grads = {}
                for n, w in params.items():
                    g = w.grad if w.grad is not None else torch.zeros_like(w)
                    grads[n] = g.mul_(inv)
                gn = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values()))
                if P.grad_clip > 0:
                    coef = P.grad_clip / (gn + 1e-6)
                    if coef < 1.0:
                        for g in grads.values():
                            g.mul_(f32(coef))
                opt.step(grads, lr)
            loss = lsum / nlab if nlab > 0 else 0.0
            if not math.isfinite(loss):
                raise RefError(f"step {step + 1}: loss is {loss}; stopping")
            dt = time.monotonic() - t0
            line = {"step": step + 1, "loss": float(f"{loss:.9g}"), "lr": float(f"{lr:.9g}"),
                    "grad_norm": float(f"{gn:.9g}"), "tokens": ntok, "step_time_s": round(dt, 6)}
            mf.write(json.dumps(line) + "\n")
            mf.flush()
            losses.append(line["loss"])
            if (step + 1) % a.log_every == 0 or step + 1 == steps:
                el = time.monotonic() - t_start
                print(f"{PROG}: step {step + 1}/{total} loss {loss:.4f} lr {lr:.3g} grad_norm {gn:.3f} "
                      f"({el / (step + 1):.3f} s/step)", flush=True)
    k = max(1, len(losses) // 10)
    final = sum(losses[-k:]) / k
    res = f'{{\n  "steps": {steps},\n  "final_loss": {final:.6f},\n  "unigram_baseline": {baseline:.6f}'
    msg = ""
    if evals is not None:
        el, docs, correct = evaluate(params, P, num, evals, MB, dev, torch)
        res += (f',\n  "eval_loss": {el:.6f},\n  "eval_documents": {docs},\n  "eval_correct": {correct},'
                f'\n  "eval_accuracy": {correct / docs if docs else 0.0:.6f}')
        msg = f"; held-out: loss {el:.4f}, greedy exact match {correct}/{docs}"
    write_atomic(os.path.join(a.out, "result.json"), res + "\n}\n")
    print(f"{PROG}: done: {steps} steps, final loss {final:.4f}{msg}; "
          f"{time.monotonic() - t_start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except RefError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
