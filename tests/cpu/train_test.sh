#!/bin/bash
# tests/cpu/train_test.sh LLMC_TRAIN MAKE_SHARDS — `llmc-train run` end to end on
# synthetic shards: learning, resume bit-identity, 2 ranks == 1 rank with twice
# the accumulation (same bits), HF export + verify, pretrained load, plan errors.
set -u
BIN=$(realpath "$1"); MKSH=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/cpu-train.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
# a private copy: other builds in the shared tree may relink build/llmc-train meanwhile
cp "$BIN" "$T/llmc-train" && BIN="$T/llmc-train"
unset OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_JOB_ID SLURM_JOBID
export LLMC_THREADS=2
pass=0 fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; for f in "$@"; do echo "--- $f"; tail -n 30 "$f"; done; fail=$((fail + 1)); }
PY=python3

# mkrun DIR [python expression editing plan dict p]
mkrun() {
    mkdir -p "$1/shards"
    cp -r "$T/shards/." "$1/shards/"
    $PY - "$HERE/tiny_plan.json" "$1/plan.json" "${2:-}" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
if sys.argv[3]:
    exec(sys.argv[3])
json.dump(p, open(sys.argv[2], "w"), indent=1)
PYEOF
}
losses() { $PY -c 'import json,sys; [print(json.loads(l)["step"], repr(json.loads(l)["loss"]), repr(json.loads(l)["grad_norm"])) for l in open(sys.argv[1])]' "$1"; }

mkdir -p "$T/shards"; "$MKSH" "$T/shards" 64 32 64 7 >/dev/null 2>&1 || { echo "FAIL make_shards"; echo "cpu-train: 0 passed, 1 failed"; exit 1; }

# 1. a plain run learns: final loss well under the unigram baseline
mkrun "$T/a"
(cd "$T/a" && "$BIN" run plan.json) >"$T/a.log" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["steps"]==12 and r["final_loss"] < 0.75*r["unigram_baseline"] else 1)' "$T/a/run/result.json"
then ok "run: 12 steps, final loss < 0.75 x unigram baseline ($(grep -o '"final_loss": [0-9.]*' "$T/a/run/result.json"))"
else bad "run (exit $rc)" "$T/a.log"; fi
[[ $(wc -l <"$T/a/run/metrics.jsonl") -eq 12 ]] && grep -q '"peak_rss_bytes":[1-9]' "$T/a/run/metrics.jsonl" \
    && grep -q '"tokens_per_s"' "$T/a/run/metrics.jsonl" && ok "metrics: 12 JSON lines with loss, lr, grad_norm, tokens/s, RSS, time" \
    || bad "metrics file" "$T/a/run/metrics.jsonl"
grep -q '<polyline' "$T/a/run/loss_curve.svg" 2>/dev/null && ok "loss curve SVG written" || bad "loss curve SVG" "$T/a.log"
[[ $(ls -d "$T"/a/ckpt/step-* | wc -l) -eq 2 && $(cat "$T/a/ckpt/latest") == step-00000012 ]] \
    && ok "checkpoints: keep 2, latest -> step-00000012" || bad "checkpoint keep/latest" "$T/a.log"

# 2. stop after step 5 (exit 3, as a preemption signal does), resume: same bytes as uninterrupted
mkrun "$T/b"
(cd "$T/b" && "$BIN" run plan.json --stop-after 5) >"$T/b1.log" 2>&1; rc1=$?
(cd "$T/b" && "$BIN" run plan.json) >"$T/b2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 3 && $rc2 -eq 0 ]] && grep -q "resumed from .* at step 5" "$T/b2.log" \
   && cmp -s "$T/a/run/final/model.safetensors" "$T/b/run/final/model.safetensors" \
   && cmp -s "$T/a/ckpt/step-00000012/optimizer.safetensors" "$T/b/ckpt/step-00000012/optimizer.safetensors"
then ok "stop at step 5 (exit 3) + resume: final weights and optimizer state bit-identical"
else bad "resume bit-identity (exit $rc1, $rc2)" "$T/b1.log" "$T/b2.log"; fi
if diff <(losses "$T/a/run/metrics.jsonl") <(losses "$T/b/run/metrics.jsonl") >/dev/null
then ok "resumed metrics: one line per step, losses and grad norms identical"
else bad "resumed metrics differ" "$T/a/run/metrics.jsonl" "$T/b/run/metrics.jsonl"; fi

# 2b. a real SIGUSR2 mid-run: checkpoint at the step it was in, exit 3; resume = uninterrupted
mkrun "$T/s0" 'p["train"]["max_steps"]=150; p["checkpoint"]["every_steps"]=None'
mkrun "$T/s1" 'p["train"]["max_steps"]=150; p["checkpoint"]["every_steps"]=None'
(cd "$T/s0" && "$BIN" run plan.json) >"$T/s0.log" 2>&1
(cd "$T/s1" && exec "$BIN" run plan.json) >"$T/s1.log" 2>&1 &
spid=$!; PIDS+=($spid)
for _ in $(seq 1 600); do [[ $( (wc -l <"$T/s1/run/metrics.jsonl") 2>/dev/null || echo 0) -ge 3 ]] && break; sleep 0.05; done
kill -USR2 "$spid" 2>/dev/null
wait "$spid"; rc1=$?
(cd "$T/s1" && "$BIN" run plan.json) >"$T/s2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 3 && $rc2 -eq 0 ]] && grep -q "stopping at step [0-9]* (USR2)" "$T/s1.log" \
   && cmp -s "$T/s0/run/final/model.safetensors" "$T/s1/run/final/model.safetensors"
then ok "SIGUSR2 at $(grep -o 'stopping at step [0-9]*' "$T/s1.log"): exit 3, resume -> bit-identical to uninterrupted"
else bad "SIGUSR2 stop/resume (exit $rc1, $rc2)" "$T/s1.log" "$T/s2.log"; fi

# 2c. time-based cadence: every_seconds (tiny) checkpoints each step; keep 2 prunes the rest
mkrun "$T/t" 'p["checkpoint"]["every_steps"]=None; p["checkpoint"]["every_seconds"]=0.001'
(cd "$T/t" && "$BIN" run plan.json) >"$T/t.log" 2>&1; rc=$?
[[ $rc -eq 0 && $(grep -c "checkpoint step" "$T/t.log") -eq 11 && $(ls -d "$T"/t/ckpt/step-* | wc -l) -eq 2 ]] \
    && ok "every_seconds cadence: a checkpoint after each of steps 1..11, 2 kept" || bad "every_seconds (exit $rc)" "$T/t.log"

# 2d. held-out evaluation on prepared shards: every labelled document counted once
mkrun "$T/ev" 'p["train"]["max_steps"]=40'
mkdir -p "$T/ev/eval"; "$MKSH" "$T/ev/eval" 16 32 64 99 >/dev/null 2>&1
(cd "$T/ev" && "$BIN" run plan.json --eval-shards eval) >"$T/ev.log" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && $PY - "$T/ev/run/result.json" "$T/ev/eval/index.json" <<'PYEOF'
import json, sys
r, idx = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ok = (r["eval_documents"] == idx["n_docs"] and 0 < r["eval_correct"] <= r["eval_documents"]
      and abs(r["eval_accuracy"] - r["eval_correct"] / r["eval_documents"]) < 1e-6
      and r["eval_loss"] < 0.5 * r["unigram_baseline"])
sys.exit(0 if ok else 1)
PYEOF
then ok "eval: $(grep -o '"eval_correct": [0-9]*' "$T/ev/run/result.json") of $(grep -o '"eval_documents": [0-9]*' "$T/ev/run/result.json"), loss < half the baseline"
else bad "eval (exit $rc)" "$T/ev.log" "$T/ev/run/result.json"; fi

mkrun "$T/ev0" 'p["train"]["max_steps"]=1; p["train"]["lr"]=0.0; p["train"]["min_lr"]=0.0'
cp -r "$T/ev/eval" "$T/ev0/eval"
(cd "$T/ev0" && "$BIN" run plan.json --eval-shards eval) >"$T/ev0.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["eval_correct"] * 4 < r["eval_documents"] else 1)' "$T/ev0/run/result.json" \
    && ok "eval of an untrained model: $(grep -o '"eval_correct": [0-9]*' "$T/ev0/run/result.json") (the metric can fail)" \
    || bad "untrained eval (exit $rc)" "$T/ev0.log" "$T/ev0/run/result.json"

# 3. two ranks (srun-style TCP rendezvous) with accumulation 1 == one rank with accumulation 2
mkrun "$T/c" 'p["train"]["grad_accum"]=1; p["parallel"]["world_size"]=2; p["parallel"]["data_parallel"]=2'
PORT=$((21000 + $$ % 20000))
while ss -Htan "sport = :$PORT" 2>/dev/null | grep -q .; do PORT=$((PORT + 1)); done
RANKS=()
for r in 0 1; do
    (cd "$T/c" && SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=$r SLURM_LOCALID=$r MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$PORT timeout 120 "$BIN" run plan.json) >"$T/c.$r.log" 2>&1 &
    PIDS+=($!); RANKS+=($!)
done
wait "${RANKS[0]}"; rc0=$?; wait "${RANKS[1]}"; rc1=$?
if [[ $rc0 -eq 0 && $rc1 -eq 0 ]] && cmp -s "$T/a/run/final/model.safetensors" "$T/c/run/final/model.safetensors"
then ok "2 ranks x accum 1 == 1 rank x accum 2: final weights bit-identical"
else bad "2-rank run (exit $rc0, $rc1)" "$T/c.0.log" "$T/c.1.log"; fi

# 4. the HF export and its manifest
F="$T/a/run/final"
if [[ -f $F/config.json && -f $F/model.safetensors ]] && "$BIN" verify "$F" >"$T/v.log" 2>&1 \
   && (cd "$F" && sha256sum -c --quiet MANIFEST.sha256) >/dev/null 2>&1
then ok "export: config.json + model.safetensors; verify and sha256sum -c agree"
else bad "export/verify" "$T/v.log"; fi
cp -r "$F" "$T/corrupt"
printf '\x01' | dd of="$T/corrupt/model.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
"$BIN" verify "$T/corrupt" >"$T/vc.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "model.safetensors: FAILED" "$T/vc.log" && ok "verify: a flipped byte -> FAILED, exit 1" || bad "verify corrupt (exit $rc)" "$T/vc.log"
echo extra >"$T/corrupt/stray.txt"; cp "$F/model.safetensors" "$T/corrupt/"
"$BIN" verify "$T/corrupt" >"$T/vs.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "stray.txt: FAILED not in manifest" "$T/vs.log" && ok "verify: an unlisted file -> exit 1" || bad "verify stray (exit $rc)" "$T/vs.log"
"$BIN" verify "$T/nonexistent" >"$T/vn.log" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q "MANIFEST.sha256" "$T/vn.log" && ok "verify: no manifest -> exit 2 with the path" || bad "verify missing (exit $rc)" "$T/vn.log"

# 5. start from the exported model (pretrained); lr 0 keeps the weights: export round trip is exact
mkrun "$T/d" "p['model']['init']='pretrained'; p['model']['path']='$F'; p['train']['lr']=0.0; p['train']['min_lr']=0.0; p['train']['max_steps']=1"
(cd "$T/d" && "$BIN" run plan.json) >"$T/d.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && cmp -s "$F/model.safetensors" "$T/d/run/final/model.safetensors" \
    && ok "pretrained load of our export + lr 0 step: weights byte-identical" || bad "pretrained load (exit $rc)" "$T/d.log"
# bf16 export, read back as a pretrained bf16 model
mkrun "$T/e" "p['model']['init']='pretrained'; p['model']['path']='$F'; p['train']['lr']=0.0; p['train']['min_lr']=0.0; p['train']['max_steps']=1; p['train']['precision']='bf16'"
(cd "$T/e" && "$BIN" run plan.json) >"$T/e.log" 2>&1; rc=$?
mkrun "$T/e2" "p['model']['init']='pretrained'; p['model']['path']='$T/e/run/final'; p['train']['lr']=0.0; p['train']['min_lr']=0.0; p['train']['max_steps']=1; p['train']['precision']='bf16'"
(cd "$T/e2" && "$BIN" run plan.json) >>"$T/e.log" 2>&1; rc2=$?
[[ $rc -eq 0 && $rc2 -eq 0 ]] && grep -q '"torch_dtype": "bfloat16"' "$T/e/run/final/config.json" \
    && grep -q '"BF16"' "$T/e/run/final/model.safetensors" && cmp -s "$T/e/run/final/model.safetensors" "$T/e2/run/final/model.safetensors" \
    && ok "bf16 export and bf16 load: round trip stable" || bad "bf16 export/load (exit $rc, $rc2)" "$T/e.log"
mkrun "$T/f" "p['model']['init']='pretrained'; p['model']['path']='$F'; p['model']['ffn']=96"
(cd "$T/f" && "$BIN" run plan.json) >"$T/f.log" 2>&1; rc=$?
[[ $rc -ne 0 ]] && grep -q "config.json disagrees with the plan's model: ffn 96 vs 64" "$T/f.log" \
    && ok "pretrained config mismatch: named field, non-zero exit" || bad "config mismatch (exit $rc)" "$T/f.log"

# 5b. a corrupted latest checkpoint is refused, not trained from
mkrun "$T/k"
(cd "$T/k" && "$BIN" run plan.json --stop-after 4) >/dev/null 2>&1
printf '\x01' | dd of="$T/k/ckpt/step-00000004/model.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
(cd "$T/k" && "$BIN" run plan.json) >"$T/k.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "step-00000004 fails its manifest" "$T/k.log" \
    && ok "corrupted checkpoint: named, exit 1" || bad "corrupted checkpoint (exit $rc)" "$T/k.log"
# 5c. a model that cannot fit in this machine's memory is refused before allocating
mkrun "$T/m" 'p["model"].update(vocab=152064, hidden=8192, layers=80, ffn=29568, heads=64, kv_heads=8, head_dim=128, max_context=4096); p["data"]["context"]=4096'
(cd "$T/m" && "$BIN" run plan.json) >"$T/m.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "the CPU backend needs [0-9.]* GiB for this model" "$T/m.log" \
    && ok "72B-sized model on this CPU: refused up front with the memory it needs" || bad "memory check (exit $rc)" "$T/m.log"

# 6. bad plans: exit 2, the key path in the message
check_plan() {   # NAME EDIT EXPECTED-TEXT
    mkrun "$T/p" "$2"
    (cd "$T/p" && "$BIN" run plan.json) >"$T/p.log" 2>&1; local rc=$?
    if [[ $rc -eq 2 ]] && grep -qF "$3" "$T/p.log"; then ok "bad plan ($1): exit 2, '$3'"
    else bad "bad plan $1 (exit $rc)" "$T/p.log"; fi
    rm -rf "$T/p"
}
check_plan version 'p["llmc_plan_version"]=2' "llmc_plan_version: this llmc-train reads version 1; the plan is version 2"
check_plan missing 'del p["train"]["lr"]' "plan.json: train.lr: missing key"
check_plan type 'p["train"]["micro_batch"]="8"' "plan.json: train.micro_batch: expected a number"
check_plan enum 'p["train"]["schedule"]="cosin"' "train.schedule: 'cosin' is not one of cosine, linear, constant"
check_plan batch 'p["train"]["global_batch"]=16' "train.global_batch: 16 is not micro_batch (4) x grad_accum (2) x data_parallel (1)"
check_plan heads 'p["model"]["kv_heads"]=3' "heads must be a multiple of kv_heads"
mkdir -p "$T/g"; printf '{\n  "llmc_plan_version": 1,\n  "job": x\n}\n' >"$T/g/plan.json"
"$BIN" run "$T/g/plan.json" >"$T/g.log" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q "plan.json:3:10: invalid JSON" "$T/g.log" && ok "invalid JSON: file:line:col, exit 2" || bad "invalid JSON (exit $rc)" "$T/g.log"
mkrun "$T/h"; rm -rf "$T/h/shards"
(cd "$T/h" && "$BIN" run plan.json) >"$T/h.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "llmc-train prepare" "$T/h.log" && [[ ! -e $T/h/run/final ]] \
    && ok "no shards: says to run prepare, exit 1, nothing exported" || bad "no shards (exit $rc)" "$T/h.log"

echo "cpu-train: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
