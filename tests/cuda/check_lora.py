#!/usr/bin/env python3
"""LoRA in llmc-train-cuda against PyTorch + peft (run on the GPU machine).

The model of check_vs_hf.py (HF transformers, fp32) with a peft LoRA adapter whose
A and B are both random (peft starts B at zero, which would leave A's gradient
zero), saved with peft's save_pretrained. llmc-train-cuda's `check --lora DIR`
trains the same adapter on the frozen bf16 base:
1. logits, loss and the gradient of every adapter tensor at step 0, against peft's;
2. a loss curve of --steps AdamW steps on the adapters (torch.optim.AdamW over the
   peft model's trainable parameters, clip_grad_norm_);
3. the adapter it writes after the last step (runtime/store/checkpoint.c's PEFT export)
   loads with peft's PeftModel.from_pretrained, and its loss on the first batch
   is the PyTorch-trained adapter's within the curve tolerance, and below that
   batch's loss at step 0 (it learned).

Tolerances are check_vs_hf.py's (bf16 weights and activations, fp32 accumulation,
against fp32): the adapters' gradients flow through the same bf16 chain as the
base model's, so the same 5e-2 relative L2 error per tensor holds.

usage: check_lora.py --bin build/llmc-train-cuda --work DIR [--steps 30] [--rank 8]
       [--targets all|q_proj,v_proj,...] [--rslora] [--head-dim 32]
Prints one line per check and closes with "N passed, N failed".
"""
import argparse, os, sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_vs_hf as hf  # noqa: E402  (the model, token files, tolerances and runner)

ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def rows(rng, B, T, V):
    """Plain causal rows (one document each) from a noisy affine chain, so the
    loss can fall; the first tokens of row 0 are prompt."""
    ids = np.zeros((B, T), np.int32)
    for b in range(B):
        a, c, x = int(rng.integers(1, 7)), int(rng.integers(0, V)), int(rng.integers(0, V))
        for t in range(T):
            ids[b, t] = x
            x = (a * x + c) % V if rng.random() < 0.9 else int(rng.integers(0, V))
    pos = np.tile(np.arange(T, dtype=np.int32), (B, 1))
    mask = np.ones((B, T), np.int32)
    mask[0, :7] = 0
    return ids, pos, hf.targets_of(ids, pos, mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/llmc-train-cuda")
    ap.add_argument("--work", default="/tmp/llmc-cuda-lora")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=int, default=16)
    ap.add_argument("--targets", default="all")
    ap.add_argument("--rslora", action="store_true")
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--selective-recompute", action="store_true")
    ap.add_argument("--recompute", action="store_true")
    args = ap.parse_args()
    from peft import LoraConfig, PeftModel, get_peft_model

    os.makedirs(args.work, exist_ok=True)
    hf.CFG["head_dim"] = args.head_dim
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    res = hf.Results()
    V = hf.CFG["vocab_size"]
    targets = ALL if args.targets == "all" else args.targets.split(",")
    extra = (["--selective-recompute"] if args.selective_recompute else []) + \
        (["--recompute"] if args.recompute else [])

    cfg, base = hf.make_weights(1234)
    hf.save_model(cfg, base, args.work)
    lcfg = LoraConfig(r=args.rank, lora_alpha=args.alpha, target_modules=targets, lora_dropout=0.0,
                      use_rslora=args.rslora, bias="none")
    model = get_peft_model(base, lcfg)
    torch.manual_seed(99)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_" in n:   # both random, bf16-exact like the base
                p.copy_(hf.bf16_round(0.06 * torch.randn_like(p)))
    adir = os.path.join(args.work, "adapter_in")
    model.save_pretrained(adir)
    model = model.to(dev)

    # 0. the merged model (W + scale B A, by hand in fp32) through our plain path: tells
    #    a LoRA-path error from a reference error when the checks below fail
    scale = args.alpha / (args.rank ** 0.5 if args.rslora else args.rank)
    sd = {k: v.detach().cpu().clone() for k, v in base.state_dict().items()}
    merged = {}
    for k, v in sd.items():
        if ".lora_" in k or "lm_head" in k:
            continue
        kk = k.replace(".base_layer.", ".").replace("base_model.model.", "")
        merged[kk] = v
    for k, v in sd.items():
        if ".lora_A." in k:
            pre = k.split(".lora_A.")[0]
            A, Bm = v, sd[pre + ".lora_B." + k.split(".lora_A.")[1]]
            wk = pre.replace("base_model.model.", "") + ".weight"
            merged[wk] = merged[wk] + scale * (Bm @ A)
    mdir = os.path.join(args.work, "merged")
    os.makedirs(mdir, exist_ok=True)
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in merged.items()}, os.path.join(mdir, "model.safetensors"))
    import json, shutil
    shutil.copy(os.path.join(args.work, "config.json"), os.path.join(mdir, "config.json"))

    # 1. step 0: logits, loss, adapter gradients
    rng = np.random.default_rng(5)
    B, T = 2, 128
    batches = [rows(rng, B, T, V) for _ in range(args.steps)]
    tok = os.path.join(args.work, "lora.bin")
    hp = dict(lr=2e-3, wd=0.1, clip=1.0, b1=0.9, b2=0.95, eps=1e-8)
    hf.write_tokens(tok, batches)
    tok0 = os.path.join(args.work, "first.bin")
    hf.write_tokens(tok0, batches[:1])
    margs = argparse.Namespace(bin=args.bin)
    lm, _, _ = hf.run_ours(margs, mdir, tok0, extra + ["--lr", "0"])
    logits, grads, losses = hf.run_ours(args, args.work, tok, extra + ["--lora", adir,
        "--lr", str(hp["lr"]), "--wd", str(hp["wd"]), "--clip", str(hp["clip"]),
        "--beta1", str(hp["b1"]), "--beta2", str(hp["b2"]), "--eps", str(hp["eps"])])
    # peft's parameter names carry the adapter's name ("lora_A.default.weight"); its files do not
    names = {n.replace(".default.", "."): p for n, p in model.named_parameters() if p.requires_grad}
    res.check("adapters: the same tensors as peft's", 0.0 if set(grads) == set(names) else 1.0, 0.5)
    opt = torch.optim.AdamW(list(names.values()), lr=hp["lr"], betas=(hp["b1"], hp["b2"]), eps=hp["eps"],
                            weight_decay=hp["wd"])
    ref_losses = []
    for s, (i, p, t) in enumerate(batches):
        i, p, t = (torch.tensor(a, device=dev).long() for a in (i, p, t))
        opt.zero_grad()
        out = model(input_ids=i, position_ids=p).logits.float()
        loss = hf.ce(out, t)
        loss.backward()
        if s == 0:
            res.check("peft logits rel err", hf.rel(logits, out.detach().cpu()), hf.TOL_LOGITS)
            res.check("ours, merged model: logits rel err vs peft", hf.rel(lm, out.detach().cpu()), hf.TOL_LOGITS)
            res.check("ours, LoRA vs the merged model: logits rel err", hf.rel(logits, lm), hf.TOL_LOGITS)
            res.check("peft loss abs err", abs(losses[0] - loss.item()), hf.TOL_LOSS0)
            for n, v in names.items():
                if n in grads:
                    res.check(f"peft grad {n}", hf.rel(grads[n], v.grad.cpu()), hf.TOL_GRAD)
        torch.nn.utils.clip_grad_norm_(list(names.values()), hp["clip"])
        opt.step()
        ref_losses.append(loss.item())
    # 2. the curve
    diffs = [abs(a - b) for a, b in zip(losses, ref_losses)]
    res.check(f"loss curve max abs err over {len(diffs)} steps", max(diffs), hf.TOL_CURVE)
    print(f"loss curve: ours {losses[0]:.4f} -> {losses[-1]:.4f}, peft {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}")

    # 3. our trained adapter in peft
    i, p, t = (torch.tensor(a, device=dev).long() for a in batches[0])
    with torch.no_grad():
        torch_final = hf.ce(model(input_ids=i, position_ids=p).logits.float(), t).item()
    _, fresh = hf.make_weights(1234)
    loaded = PeftModel.from_pretrained(fresh, os.path.join(args.work, "out_lora", "adapter")).to(dev)
    with torch.no_grad():
        ours_final = hf.ce(loaded(input_ids=i, position_ids=p).logits.float(), t).item()
    res.check("our adapter in peft: loss vs the torch-trained adapter's", abs(ours_final - torch_final), hf.TOL_CURVE)
    res.check("our adapter learned: batch 0's loss fell by 0.05 or more", 0.0 if ours_final < losses[0] - 0.05 else 1.0,
              0.5)
    print(f"after {len(batches)} steps, batch 0: our adapter (in peft) {ours_final:.4f}, peft-trained {torch_final:.4f}")
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
