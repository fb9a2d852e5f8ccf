#!/bin/bash
# tests/cpu/bench.sh LLMC_TRAIN MAKE_SHARDS — CPU trainer throughput on synthetic
# shards for three model sizes; prints a markdown table (docs/PERFORMANCE.md).
# Each run: 6 optimizer steps; figures are medians of steps 3..6.
set -eu
BIN=$(realpath "$1"); MKSH=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/cpu-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "| model | params | micro batch x context | step (s) | tokens/s | model GFLOP/s | peak RSS |"
echo "|---|---|---|---|---|---|---|"
#    name      layers hidden heads kv head_dim ffn  vocab context micro
for cfg in "tiny     2  64  4 2 16  176  512  128 8" \
           "small    4 256  8 4 32  688 4096  256 4" \
           "medium   8 512  8 4 64 1376 8192  512 2"; do
    read -r name L H NH KV HD F V C B <<<"$cfg"
    d="$T/$name"; mkdir -p "$d/shards"
    "$MKSH" "$d/shards" $((B * 6)) "$C" "$V" 1
    python3 - "$HERE/tiny_plan.json" "$d/plan.json" "$L" "$H" "$NH" "$KV" "$HD" "$F" "$V" "$C" "$B" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
L, H, NH, KV, HD, F, V, C, B = map(int, sys.argv[3:])
p["model"].update(layers=L, hidden=H, heads=NH, kv_heads=KV, head_dim=HD, ffn=F, vocab=V, max_context=C,
                  tie_embeddings=False)
p["data"]["context"] = C
p["train"].update(max_steps=6, micro_batch=B, grad_accum=1, global_batch=B)
p["checkpoint"]["every_steps"] = None
json.dump(p, open(sys.argv[2], "w"))
PY
    (cd "$d" && "$BIN" run plan.json >/dev/null 2>&1)
    python3 - "$d/run/metrics.jsonl" "$name" "$L" "$H" "$NH" "$KV" "$HD" "$F" "$V" "$C" "$B" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][2:]
name = sys.argv[2]
L, H, NH, KV, HD, F, V, C, B = map(int, sys.argv[3:])
params = 2 * V * H + H + L * (2 * H + H * NH * HD + 2 * H * KV * HD + NH * HD + 2 * KV * HD + NH * HD * H + 3 * H * F)
tokens = B * C
# 6 x params per token for the matmuls (fwd + bwd) + causal attention (QK^T and PV, fwd + bwd)
flops = 6 * params * tokens + 6 * L * B * NH * HD * C * C
step = statistics.median(r["step_time_s"] for r in rows)
rss = max(r["peak_rss_bytes"] for r in rows)
print(f"| {name} | {params/1e6:.2f} M | {B} x {C} | {step:.3f} | {tokens/step:,.0f} | {flops/step/1e9:.1f} | {rss/2**20:.0f} MiB |")
PY
done
