#!/bin/bash
# tests/cpu/train_test.sh LLMC_TRAIN MAKE_SHARDS — `llmc-train run` end to end on
# synthetic shards: learning, resume bit-identity, 2 ranks == 1 rank with twice
# the accumulation (same bits), HF export + verify (both sha256sum formats, FIFOs),
# pretrained load (the export's config.json derived from the source's), checkpoint safety (fallback from a damaged latest, rotation and
# fallback by write order, no latest: the newest verified adopted, fingerprint mismatches,
# state.json ranges, SIGINT/SIGHUP), plan errors.
set -u
BIN=$(realpath "$1"); MKSH=$(realpath "$2")
NAME=train
source "$(dirname "$0")/synth_lib.sh"
losses() { $PY -c 'import json,sys; [print(json.loads(l)["step"], repr(json.loads(l)["loss"]), repr(json.loads(l)["grad_norm"])) for l in open(sys.argv[1])]' "$1"; }

mkdir -p "$T/shards"; "$MKSH" "$T/shards" 64 32 64 7 >/dev/null 2>&1 || { bad make_shards; finish cpu-train; }

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

# 1b. logs: progress on stdout, errors on stderr; every line starts with its ISO 8601 time;
#     log_every from the plan; an ETA on each step line; checkpoint writes say so
mkrun "$T/lg" 'p["output"]["log_every"]=4'
(cd "$T/lg" && "$BIN" run plan.json) >"$T/lg.out" 2>"$T/lg.err"; rc=$?
ts='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z \[rank 0/1 [^]]*\] '
steps=$(grep -cE "${ts}step [0-9]+/12 loss .* eta [0-9?<]" "$T/lg.out")
[[ $rc -eq 0 && $steps -eq 3 ]] && grep -qE "${ts}step 4/12 .* eta (<1|[0-9]+)s" "$T/lg.out" && grep -qE "${ts}step 12/12 .* eta 0s" "$T/lg.out" \
    && ok "log_every 4: 3 step lines (4, 8, 12) on stdout, each with an ETA" || bad "log_every/ETA (exit $rc, $steps step lines)" "$T/lg.out"
[[ $(grep -cvE "$ts" "$T/lg.out") -eq 0 && -s $T/lg.out ]] && ! grep -q "step [0-9]*/12" "$T/lg.err" \
    && ok "every stdout line timestamped (ISO 8601, UTC, ms); no progress on stderr" || bad "log lines without a time, or progress on stderr" "$T/lg.out" "$T/lg.err"
grep -qE "${ts}checkpoint write step-00000012: [0-9.]+ MB .*hashed while written" "$T/lg.out" \
    && grep -qE "${ts}checkpoint write step-00000012: done, [0-9.]+ MB in [0-9.]+ s" "$T/lg.out" \
    && ok "checkpoint writes: a progress line before and after (size, time)" || bad "checkpoint progress lines" "$T/lg.out"
$PY - "$T/lg/run/metrics.jsonl" <<'PYEOF' && ok "metrics.jsonl: strict JSON, a 'time' (ISO 8601 UTC) on every line" || bad "metrics time field" "$T/lg/run/metrics.jsonl"
import json, re, sys
def no_constants(c): raise ValueError(c)
lines = [json.loads(l, parse_constant=no_constants) for l in open(sys.argv[1])]
sys.exit(0 if len(lines) == 12 and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", l["time"]) for l in lines) else 1)
PYEOF
mkrun "$T/le"; rm -rf "$T/le/shards"
(cd "$T/le" && "$BIN" run plan.json) >"$T/le.out" 2>"$T/le.err"
grep -qE "${ts}error: .*llmc-train prepare" "$T/le.err" && ! grep -q "error:" "$T/le.out" \
    && ok "errors on stderr only (timestamped)" || bad "error stream" "$T/le.out" "$T/le.err"

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

mkrun "$T/ev0" 'p["train"]["max_steps"]=1'
cp -r "$T/ev/eval" "$T/ev0/eval"
(cd "$T/ev0" && "$BIN" run plan.json --eval-shards eval) >"$T/ev0.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["eval_correct"] * 4 < r["eval_documents"] else 1)' "$T/ev0/run/result.json" \
    && ok "eval of an untrained model: $(grep -o '"eval_correct": [0-9]*' "$T/ev0/run/result.json") (the metric can fail)" \
    || bad "untrained eval (exit $rc)" "$T/ev0.log" "$T/ev0/run/result.json"

# 3. two ranks (srun-style TCP rendezvous) with accumulation 1 == one rank with accumulation 2
mkrun "$T/c" 'p["train"]["grad_accum"]=1; p["parallel"]["world_size"]=2; p["parallel"]["data_parallel"]=2'
free_port
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
cp -r "$F" "$T/vb"; (cd "$T/vb" && rm MANIFEST.sha256 && sha256sum -b -- * >MANIFEST.sha256)
"$BIN" verify "$T/vb" >"$T/vb.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && grep -q '^[0-9a-f]\{64\} \*config.json$' "$T/vb/MANIFEST.sha256" && grep -q "config.json: OK" "$T/vb.log" \
    && ok "verify: sha256sum -b (binary mode, 'HASH *FILE') manifest accepted" || bad "verify binary-mode manifest (exit $rc)" "$T/vb.log"
cp -r "$F" "$T/vf"; mkfifo "$T/vf/pipe"; printf '%064d  pipe\n' 0 >>"$T/vf/MANIFEST.sha256"
timeout 20 "$BIN" verify "$T/vf" >"$T/vf.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "pipe: FAILED not a regular file" "$T/vf.log" && grep -q "vf/pipe: not a regular file (a FIFO)" "$T/vf.log" \
    && ok "verify: a FIFO listed in the manifest -> FAILED not a regular file, exit 1, no hang" || bad "verify FIFO (exit $rc)" "$T/vf.log"
mkdir -p "$T/vm"; mkfifo "$T/vm/MANIFEST.sha256"
timeout 20 "$BIN" verify "$T/vm" >"$T/vm.log" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q "vm/MANIFEST.sha256: not a regular file (a FIFO)" "$T/vm.log" \
    && ok "verify: MANIFEST.sha256 a FIFO -> exit 2 with a message, no hang" || bad "verify FIFO manifest (exit $rc)" "$T/vm.log"

# 5. start from the exported model (pretrained); one step in warmup (lr 0 at step 0) keeps the weights: export round trip is exact
mkrun "$T/d" "p['model']['init']='pretrained'; p['model']['path']='$F'; p['train']['max_steps']=1"
(cd "$T/d" && "$BIN" run plan.json) >"$T/d.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && cmp -s "$F/model.safetensors" "$T/d/run/final/model.safetensors" \
    && ok "pretrained load of our export + lr 0 step: weights byte-identical" || bad "pretrained load (exit $rc)" "$T/d.log"
# bf16 export, read back as a pretrained bf16 model
mkrun "$T/e" "p['model']['init']='pretrained'; p['model']['path']='$F'; p['train']['max_steps']=1; p['train']['precision']='bf16'"
(cd "$T/e" && "$BIN" run plan.json) >"$T/e.log" 2>&1; rc=$?
mkrun "$T/e2" "p['model']['init']='pretrained'; p['model']['path']='$T/e/run/final'; p['train']['max_steps']=1; p['train']['precision']='bf16'"
(cd "$T/e2" && "$BIN" run plan.json) >>"$T/e.log" 2>&1; rc2=$?
[[ $rc -eq 0 && $rc2 -eq 0 ]] && grep -q '"torch_dtype": "bfloat16"' "$T/e/run/final/config.json" \
    && grep -q '"BF16"' "$T/e/run/final/model.safetensors" && cmp -s "$T/e/run/final/model.safetensors" "$T/e2/run/final/model.safetensors" \
    && ok "bf16 export and bf16 load: round trip stable" || bad "bf16 export/load (exit $rc, $rc2)" "$T/e.log"
# the export's config.json is the source model's with only the dtype changed: a
# source as transformers 5 writes it (rope_parameters, dtype) with keys llmc knows
# nothing of keeps every key, byte for byte
mkdir -p "$T/tf5"; cp "$F/model.safetensors" "$F/tokenizer.json" "$T/tf5/" 2>/dev/null
$PY - "$F/config.json" "$T/tf5/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
# theta only inside rope_parameters, and not the 10000 a reader falls back to
# without one (the reader before transformers 5 support did: the run refused then)
c.pop("rope_theta")
c["rope_parameters"] = {"rope_theta": 500000.0, "rope_type": "default"}
del c["torch_dtype"]
c.update(dtype="float32", transformers_version="5.0.0", pad_token_id=None, quantization_config=None,
         custom_pipelines={"x": {"impl": "a.B"}})
open(sys.argv[2], "w").write(json.dumps(c, indent=2) + "\n")
PYEOF
mkrun "$T/g" "p['model']['init']='pretrained'; p['model']['path']='$T/tf5'; p['model']['rope_theta']=500000.0; p['train']['max_steps']=1; p['train']['precision']='bf16'"
(cd "$T/g" && "$BIN" run plan.json) >"$T/g.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && $PY -c 'import sys; a=open(sys.argv[1]).read(); b=open(sys.argv[2]).read(); sys.exit(0 if a.replace("\"dtype\": \"float32\"", "\"dtype\": \"bfloat16\"") == b and a != b else 1)' \
    "$T/tf5/config.json" "$T/g/run/final/config.json" \
    && ok "a transformers 5 config.json (theta 5e5 only in rope_parameters) trains; its export keeps every key byte for byte, only dtype float32 -> bfloat16" \
    || bad "derived export config.json (exit $rc)" "$T/g.log" "$T/g/run/final/config.json"
mkrun "$T/f" "p['model']['init']='pretrained'; p['model']['path']='$F'; p['model']['ffn']=96"
(cd "$T/f" && "$BIN" run plan.json) >"$T/f.log" 2>&1; rc=$?
[[ $rc -ne 0 ]] && grep -q "config.json disagrees with the plan's model: ffn 96 vs 64" "$T/f.log" \
    && ok "pretrained config mismatch: named field, non-zero exit" || bad "config mismatch (exit $rc)" "$T/f.log"

# 5b. a corrupted latest checkpoint with nothing to fall back to: refused, the file named
mkrun "$T/k"
(cd "$T/k" && "$BIN" run plan.json --stop-after 4) >/dev/null 2>&1
printf '\x01' | dd of="$T/k/ckpt/step-00000004/model.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
(cd "$T/k" && "$BIN" run plan.json) >"$T/k.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "checkpoint ./ckpt/step-00000004 (named by ./ckpt/latest) fails verification: ./ckpt/step-00000004/model.safetensors: checksum differs" "$T/k.log" \
    && ok "corrupted checkpoint, none to fall back to: refused naming the file, exit 1" || bad "corrupted checkpoint (exit $rc)" "$T/k.log"

# 5b2. a corrupted latest falls back to the newest good checkpoint, with a warning naming both
mkrun "$T/fb"
(cd "$T/fb" && "$BIN" run plan.json --stop-after 8) >"$T/fb1.log" 2>&1; rc1=$?
printf '\x01' | dd of="$T/fb/ckpt/step-00000008/optimizer.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
(cd "$T/fb" && "$BIN" run plan.json) >"$T/fb2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 3 && $rc2 -eq 0 ]] && grep -q "warning: checkpoint ./ckpt/step-00000008 (named by ./ckpt/latest) fails verification: ./ckpt/step-00000008/optimizer.safetensors: checksum differs.*resuming from ./ckpt/step-00000004 instead" "$T/fb2.log" \
   && grep -q "resumed from ./ckpt at step 4" "$T/fb2.log" && cmp -s "$T/a/run/final/model.safetensors" "$T/fb/run/final/model.safetensors"
then ok "corrupted latest (step 8): warning names it and step 4, resumes there, final weights bit-identical"
else bad "fallback to the newest good checkpoint (exit $rc1, $rc2)" "$T/fb1.log" "$T/fb2.log"; fi
# latest naming a directory that is gone, or garbage: the same fallback
mkrun "$T/fg"
(cd "$T/fg" && "$BIN" run plan.json --stop-after 8) >/dev/null 2>&1
echo "step-00000099" >"$T/fg/ckpt/latest"
(cd "$T/fg" && "$BIN" run plan.json --stop-after 9) >"$T/fg.log" 2>&1; rc=$?
[[ $rc -eq 3 ]] && grep -q "step-00000099 (named by ./ckpt/latest) fails verification.*resuming from ./ckpt/step-00000008" "$T/fg.log" \
    && ok "latest names a missing checkpoint: falls back to step 8 with a warning" || bad "latest -> missing (exit $rc)" "$T/fg.log"

# the fallback goes by write order, not step number: a fresh run's step 4 is newer than an older run's step 12
mkrun "$T/fw" 'p["checkpoint"]["keep"]=3'
(cd "$T/fw" && "$BIN" run plan.json) >/dev/null 2>&1
(cd "$T/fw" && "$BIN" run plan.json --fresh --stop-after 8) >"$T/fw1.log" 2>&1; rc1=$?
printf '\x01' | dd of="$T/fw/ckpt/step-00000008/model.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
(cd "$T/fw" && "$BIN" run plan.json --stop-after 9) >"$T/fw2.log" 2>&1; rc2=$?
[[ $rc1 -eq 3 && $rc2 -eq 3 && $(cd "$T/fw/ckpt" && echo step-*) == "step-00000004 step-00000008 step-00000009" ]] \
    && grep -q "step-00000008 (named by ./ckpt/latest) fails verification.*resuming from ./ckpt/step-00000004 instead" "$T/fw2.log" \
    && grep -q "resumed from ./ckpt at step 4" "$T/fw2.log" \
    && ok "fallback by write order: the fresh run's step 4, not the older run's step 12" || bad "fallback by write order (exit $rc1, $rc2)" "$T/fw1.log" "$T/fw2.log"

# 5b3. rotation by write order: a fresh run (checkpoint.resume = false) over an older run's step-8/step-12
# keeps what it writes and what latest names; the requeued job resumes from it
mkrun "$T/rot"
(cd "$T/rot" && "$BIN" run plan.json) >/dev/null 2>&1
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["checkpoint"]["resume"]=False; json.dump(p,open(sys.argv[1],"w"))' "$T/rot/plan.json"
(cd "$T/rot" && "$BIN" run plan.json --stop-after 4) >"$T/rot1.log" 2>&1; rc1=$?
kept=$(cd "$T/rot/ckpt" && echo step-*)
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["checkpoint"]["resume"]=True; json.dump(p,open(sys.argv[1],"w"))' "$T/rot/plan.json"
(cd "$T/rot" && "$BIN" run plan.json) >"$T/rot2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 3 && $rc2 -eq 0 && $kept == "step-00000004 step-00000012" ]] && grep -q "resumed from ./ckpt at step 4" "$T/rot2.log" \
   && cmp -s "$T/a/run/final/model.safetensors" "$T/rot/run/final/model.safetensors" \
   && [[ $(cd "$T/rot/ckpt" && echo step-*) == "step-00000008 step-00000012" ]]
then ok "rotation by write order: fresh step 4 over old step 8/12 keeps step 4 (+ step 12), resume from it is bit-identical"
else bad "rotation by write order (exit $rc1, $rc2; kept: $kept)" "$T/rot1.log" "$T/rot2.log"; fi

# 5b4. step-* directories but no latest (a full disk while latest was written):
#      the newest that verifies is adopted with a warning, the result bit-identical;
#      when none verifies: refused unless --fresh
mkrun "$T/nl"
(cd "$T/nl" && "$BIN" run plan.json --stop-after 8) >/dev/null 2>&1
rm "$T/nl/ckpt/latest"
(cd "$T/nl" && "$BIN" run plan.json) >"$T/nl1.log" 2>&1; rc1=$?
if [[ $rc1 -eq 0 ]] && grep -q "warning: ./ckpt holds 2 checkpoint(s) but no ./ckpt/latest (a full disk or a crash before it was written): adopting ./ckpt/step-00000008" "$T/nl1.log" \
   && grep -q "resumed from ./ckpt at step 8" "$T/nl1.log" && cmp -s "$T/a/run/final/model.safetensors" "$T/nl/run/final/model.safetensors"
then ok "step-* but no latest: the newest verified step adopted with a warning, resumed at step 8, bit-identical"
else bad "no latest adopted (exit $rc1)" "$T/nl1.log"; fi
mkrun "$T/nv"
(cd "$T/nv" && "$BIN" run plan.json --stop-after 8) >/dev/null 2>&1
rm "$T/nv/ckpt/latest"; for d in "$T"/nv/ckpt/step-*; do printf 'x' >>"$d/model.safetensors"; done
(cd "$T/nv" && "$BIN" run plan.json) >"$T/nv1.log" 2>&1; rc1=$?
(cd "$T/nv" && "$BIN" run plan.json --fresh) >"$T/nv2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 1 ]] && grep -q "./ckpt holds 2 checkpoint(s) (the newest by write order: step-00000008) but no ./ckpt/latest, and none of them verifies (.*step-00000008.*): refusing to start over at step 0; pass --fresh" "$T/nv1.log" \
   && [[ $rc2 -eq 0 ]] && ! grep -q "resumed from" "$T/nv2.log" && grep -q "warning: --fresh: starting at step 0" "$T/nv2.log" \
   && cmp -s "$T/a/run/final/model.safetensors" "$T/nv/run/final/model.safetensors"
then ok "step-* but no latest, none verifies: refused naming the directory, the failure and --fresh; --fresh trains from step 0"
else bad "no latest, none verifies (exit $rc1, $rc2)" "$T/nv1.log" "$T/nv2.log"; fi

# 5b4b. a step directory that cannot be replaced (MANIFEST.sha256 turned into a directory):
#       resumed from the step before, and when that step is written again the broken
#       directory is set aside with a warning instead of failing there on every requeue
mkrun "$T/sa"
(cd "$T/sa" && "$BIN" run plan.json --stop-after 8) >/dev/null 2>&1
rm "$T/sa/ckpt/step-00000008/MANIFEST.sha256" && mkdir -p "$T/sa/ckpt/step-00000008/MANIFEST.sha256/x"
(cd "$T/sa" && "$BIN" run plan.json) >"$T/sa1.log" 2>&1; rc1=$?
if [[ $rc1 -eq 0 ]] && grep -q "resuming from ./ckpt/step-00000004 instead" "$T/sa1.log" \
   && grep -q "warning: ./ckpt/step-00000008 could not be removed (it holds a subdirectory.*set aside as ./ckpt/.set-aside-step-00000008-1" "$T/sa1.log" \
   && [[ -d $T/sa/ckpt/.set-aside-step-00000008-1/MANIFEST.sha256/x ]] \
   && cmp -s "$T/a/run/final/model.safetensors" "$T/sa/run/final/model.safetensors"
then ok "a step directory holding a subdirectory: resumed from step 4, the broken one set aside, finished bit-identical"
else bad "step directory with a subdirectory (exit $rc1)" "$T/sa1.log"; fi

# 5b4c. verify and resume do not follow symbolic links: a checkpoint file replaced by a
#       link to the same bytes elsewhere fails verification (resumed from the step
#       before), and so does an exported file
mkrun "$T/ln"
(cd "$T/ln" && "$BIN" run plan.json --stop-after 8) >/dev/null 2>&1
mv "$T/ln/ckpt/step-00000008/model.safetensors" "$T/ln/elsewhere.safetensors"
ln -s "$T/ln/elsewhere.safetensors" "$T/ln/ckpt/step-00000008/model.safetensors"
(cd "$T/ln" && "$BIN" run plan.json) >"$T/ln1.log" 2>&1; rc1=$?
cp -r "$T/a/run/final" "$T/ln/final-copy" && mv "$T/ln/final-copy/config.json" "$T/ln/config.json" \
    && ln -s "$T/ln/config.json" "$T/ln/final-copy/config.json"
"$BIN" verify "$T/ln/final-copy" >"$T/ln2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 0 ]] && grep -q "step-00000008/model.safetensors: not a regular file (a symbolic link); resuming from ./ckpt/step-00000004 instead" "$T/ln1.log" \
   && cmp -s "$T/a/run/final/model.safetensors" "$T/ln/run/final/model.safetensors" \
   && [[ $rc2 -eq 1 ]] && grep -q "config.json: FAILED not a regular file" "$T/ln2.log"
then ok "symbolic links not followed: a linked checkpoint file fails (resumed from step 4, bit-identical), a linked export file fails verify"
else bad "symbolic links in a checkpoint or export (exit $rc1, $rc2)" "$T/ln1.log" "$T/ln2.log"; fi

# 5b5. a checkpoint written by another plan: refused, the differing fields named
mkrun "$T/fp"
(cd "$T/fp" && "$BIN" run plan.json --stop-after 4) >/dev/null 2>&1
fp_case() {   # NAME EDIT EXPECTED-TEXT
    cp "$T/fp/plan.json" "$T/fp/plan.orig.json"
    python3 - "$T/fp/plan.json" "$2" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(p, open(sys.argv[1], "w"))
PYEOF
    (cd "$T/fp" && "$BIN" run plan.json) >"$T/fp.log" 2>&1; local rc=$?
    mv "$T/fp/plan.orig.json" "$T/fp/plan.json"
    if [[ $rc -eq 1 ]] && grep -qF "$3" "$T/fp.log"; then ok "other plan's checkpoint ($1): refused, '$3'"
    else bad "fingerprint $1 (exit $rc)" "$T/fp.log"; fi
}
fp_case lr 'p["train"]["lr"]=0.02' "checkpoint ./ckpt/step-00000004 was written with train.lr 0.01, the plan says 0.02"
fp_case batch 'p["train"]["micro_batch"]=2; p["train"]["grad_accum"]=4' "train.micro_batch 4, the plan says 2"
fp_case seed+steps 'p["train"]["seed"]=7; p["train"]["max_steps"]=20' "train.steps 12, the plan says 20; train.seed 42, the plan says 7"
fp_case model 'p["model"]["rope_theta"]=500000.0' "model.rope_theta 10000, the plan says 500000"
mv "$T/fp/shards" "$T/fp/shards.orig"; mkdir -p "$T/fp/shards"; "$MKSH" "$T/fp/shards" 64 32 64 8 >/dev/null 2>&1
fp_case shards 'pass' "data.content synthetic-64-32-64-7, the plan says synthetic-64-32-64-8"
rm -rf "$T/fp/shards"; mv "$T/fp/shards.orig" "$T/fp/shards"
(cd "$T/fp" && "$BIN" run plan.json) >"$T/fp.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && grep -q "resumed from ./ckpt at step 4" "$T/fp.log" && ok "the same plan again: resumes" || bad "fingerprint same plan (exit $rc)" "$T/fp.log"

# 5b6. every field of state.json range-checked (the manifest rewritten to match, as a careless edit would)
mkrun "$T/sj"
(cd "$T/sj" && "$BIN" run plan.json --stop-after 4) >/dev/null 2>&1
cp "$T/sj/ckpt/step-00000004/state.json" "$T/sj/state.orig"
sj_case() {   # NAME EDIT EXPECTED-TEXT
    python3 - "$T/sj/state.orig" "$T/sj/ckpt/step-00000004/state.json" "$2" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); exec(sys.argv[3]); open(sys.argv[2], "w").write(s if isinstance(s, str) else json.dumps(s))
PYEOF
    (cd "$T/sj/ckpt/step-00000004" && sha256sum model.safetensors optimizer.safetensors state.json >MANIFEST.sha256)
    (cd "$T/sj" && timeout 60 "$BIN" run plan.json) >"$T/sj.log" 2>&1; local rc=$?
    if [[ $rc -eq 1 ]] && grep -qF "./ckpt/step-00000004/state.json: $3" "$T/sj.log"; then ok "state.json $1: refused, '$3'"
    else bad "state.json $1 (exit $rc)" "$T/sj.log"; fi
}
sj_case rows-negative 's["rows_consumed"]=-5' 'field "rows_consumed" = -5 is outside 0..9007199254740992'
sj_case rows-huge 's["rows_consumed"]=4e18' 'field "rows_consumed" = 4e+18 is outside'
sj_case rows-off 's["rows_consumed"]=33' 'field "rows_consumed" = 33, not step 4 x global_batch 8'
sj_case step-negative 's["step"]=-5' 'field "step" = -5 is outside 1..12'
sj_case step-beyond 's["step"]=13' 'field "step" = 13 is outside 1..12'
sj_case step-dir 's["step"]=3; s["adam_t"]=3; s["rows_consumed"]=24' 'field "step" = 3 but the directory is for step 4'
sj_case step-fraction 's["step"]=4.5' 'field "step" is not an integer'
sj_case step-string 's["step"]="4"' 'field "step" is not an integer'
sj_case adam_t 's["adam_t"]=0' 'field "adam_t" = 0, not the step 4'
sj_case tokens 's["tokens_seen"]=-1' 'field "tokens_seen" = -1 is outside 0..1024'
sj_case rng-short 's["rng"]=s["rng"][:3]' 'field "rng" is not an array of 4 hex strings'
sj_case rng-hex 's["rng"][1]="xyz"' 'field "rng"[1] is not 16 hex digits'
sj_case rng-zero 's["rng"]=["0"*16]*4' 'field "rng" is all zero'
sj_case version 's["version"]=9' 'field "version" = 9 is outside 1..2'
sj_case write_seq 's["write_seq"]=-1' 'field "write_seq" = -1 is outside'
sj_case missing 'del s["tokens_seen"]' 'field "tokens_seen" is missing'
sj_case format 's["format"]="pytorch"' 'field "format" is not "llmc-train-checkpoint"'
sj_case not-json 's="{\"step\": 4,"' 'not a JSON object'
sj_case fingerprint 'del s["fingerprint"]' 'field "fingerprint" is missing or not an object'
sj_case fingerprint-empty 's["fingerprint"]={}' 'field "fingerprint" records none of the fields a resume checks'
sj_case plan-relative 's["plan"]["path"]="plan.json"' 'field "plan"."path" is not an absolute path'
sj_case plan-control 's["plan"]["path"]="/tmp/a\x01b"' 'field "plan"."path" is not an absolute path of at most 4095 bytes without control'
sj_case plan-sha 's["plan"]["sha256"]="ABC"' 'field "plan"."sha256" is not 64 lowercase hex digits'
sj_case plan-type 's["plan"]="plan.json"' 'field "plan" is not {"path": STRING, "sha256": STRING}'
cp "$T/sj/state.orig" "$T/sj/ckpt/step-00000004/state.json"
(cd "$T/sj/ckpt/step-00000004" && sha256sum model.safetensors optimizer.safetensors state.json >MANIFEST.sha256)
(cd "$T/sj" && "$BIN" run plan.json) >"$T/sj.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && grep -q "resumed from ./ckpt at step 4" "$T/sj.log" && cmp -s "$T/a/run/final/model.safetensors" "$T/sj/run/final/model.safetensors" \
    && ok "state.json restored (manifest in sha256sum's own format): resumes, bit-identical" || bad "state.json restored (exit $rc)" "$T/sj.log"

# 5b7. SIGINT and SIGHUP stop like SIGTERM: checkpoint at that step, exit 3. The
# run is long enough (a few ms a step here) that the signal always lands mid-run.
# Under nohup (SIGHUP ignored when this script started: SigIgn bit 0) the trainer
# keeps it ignored, as nohup asks: then a HUP must not stop a short run.
hup_ignored=$(( 0x$(awk '/^SigIgn:/ {print $2}' /proc/$$/status) & 1 ))
if [[ $hup_ignored -ne 0 ]]; then
    mkrun "$T/sigign" 'p["train"]["max_steps"]=60; p["checkpoint"]["every_steps"]=None'
    (cd "$T/sigign" && exec "$BIN" run plan.json) >"$T/sigign.log" 2>&1 &
    spid=$!; PIDS+=($spid)
    for _ in $(seq 1 600); do [[ $( (wc -l <"$T/sigign/run/metrics.jsonl") 2>/dev/null || echo 0) -ge 3 ]] && break; sleep 0.05; done
    kill -HUP "$spid" 2>/dev/null
    wait "$spid"; rc=$?
    [[ $rc -eq 0 ]] && ! grep -q "stopping at step" "$T/sigign.log" \
        && ok "SIGHUP ignored by the caller (nohup): it stays ignored, the run finishes" \
        || bad "SIGHUP under nohup (exit $rc)" "$T/sigign.log"
fi
for sig in INT HUP; do
    [[ $sig == HUP && $hup_ignored -ne 0 ]] && continue
    mkrun "$T/sig$sig" 'p["train"]["max_steps"]=100000; p["checkpoint"]["every_steps"]=None'
    (cd "$T/sig$sig" && exec "$BIN" run plan.json) >"$T/sig$sig.log" 2>&1 &
    spid=$!; PIDS+=($spid)
    for _ in $(seq 1 600); do [[ $( (wc -l <"$T/sig$sig/run/metrics.jsonl") 2>/dev/null || echo 0) -ge 3 ]] && break; sleep 0.05; done
    kill -$sig "$spid" 2>/dev/null
    wait "$spid"; rc=$?
    n=$(grep -o "stopping at step [0-9]* ($sig)" "$T/sig$sig.log" | grep -o '[0-9]*')
    if [[ $rc -eq 3 && -n $n ]] && [[ $(cat "$T/sig$sig/ckpt/latest" 2>/dev/null) == $(printf 'step-%08d' "$n") ]] \
       && "$BIN" verify "$T/sig$sig/ckpt/step-$(printf %08d "$n")" >/dev/null 2>&1
    then ok "SIG$sig at step $n: checkpoint written and verified, exit 3"
    else bad "SIG$sig stop (exit $rc)" "$T/sig$sig.log"; fi
done
# 5c. a model that cannot fit in this machine's memory is refused before allocating
mkrun "$T/m" 'p["model"].update(vocab=152064, hidden=8192, layers=80, ffn=29568, heads=64, kv_heads=8, head_dim=128, max_context=4096); p["data"]["context"]=4096'
(cd "$T/m" && "$BIN" run plan.json) >"$T/m.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "the CPU backend needs [0-9.]* GiB for this model" "$T/m.log" \
    && ok "72B-sized model on this CPU: refused up front with the memory it needs" || bad "memory check (exit $rc)" "$T/m.log"

# 5d. epochs that do not fill one optimizer step (1e-320, a denormal, passes the row's
#     "greater than 0"): refused at start as llmc check refuses it, not rounded up to a step
for ep in 1e-320 0.01; do
    mkrun "$T/ep" "p[\"train\"].update(epochs=$ep, max_steps=None)"
    (cd "$T/ep" && "$BIN" run plan.json) >"$T/ep.log" 2>&1; rc=$?
    [[ $rc -eq 1 && ! -e $T/ep/run/metrics.jsonl ]] && grep -q "train.epochs = $ep over [0-9]* rows at a global batch of [0-9]* is [0-9.e-]* of one optimizer step" "$T/ep.log" \
        && ok "epochs = $ep: under one optimizer step, refused at start" || bad "epochs = $ep (exit $rc)" "$T/ep.log"
    rm -rf "$T/ep"
done

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

# one run at a time per checkpoint directory: a second run of the plan while the
# first holds ckpt/.run.lock exits 1 naming the holder, before it touches anything;
# the first then finishes with each step once in metrics.jsonl
mkrun "$T/lk" 'p["train"]["max_steps"]=400; p["checkpoint"]["every_steps"]=100'
(cd "$T/lk" && exec "$BIN" run plan.json) >"$T/lk1.log" 2>&1 & lk=$!; PIDS+=("$lk")
for _ in $(seq 200); do grep -q "^pid $lk on " "$T/lk/ckpt/.run.lock" 2>/dev/null && break; sleep 0.05; done
kill -STOP "$lk"
before=$(cd "$T/lk" && ls -R ckpt run 2>/dev/null | md5sum)
(cd "$T/lk" && "$BIN" run plan.json) >"$T/lk2.log" 2>&1; rc=$?
after=$(cd "$T/lk" && ls -R ckpt run 2>/dev/null | md5sum)
kill -CONT "$lk"; wait "$lk"; rc1=$?
[[ $rc -eq 1 && $before == "$after" ]] && grep -q "ckpt/.run.lock: another run of this plan is using .*(pid $lk on .* since 20" "$T/lk2.log" \
    && ok "run lock: a second run exits 1 naming the holder (pid $lk), nothing written" || bad "run lock (second run exit $rc)" "$T/lk2.log"
$PY -c 'import json,sys; s=[json.loads(l)["step"] for l in open(sys.argv[1])]; sys.exit(0 if s==list(range(1,401)) else 1)' "$T/lk/run/metrics.jsonl" \
    && [[ $rc1 -eq 0 ]] && ok "run lock: the holder finishes, metrics.jsonl steps 1-400 once each, whole lines" || bad "run lock holder (exit $rc1)" "$T/lk1.log"

# a file-size limit (ulimit -f) reached while a checkpoint is written: a message naming
# the file and exit 1 (a failure the job script does not requeue), not death by SIGXFSZ
mkrun "$T/fz"
(cd "$T/fz" && ulimit -f 100 && exec "$BIN" run plan.json) >"$T/fz.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "error: checkpoint: .*/.tmp-step-00000004/.*: write failed: File too large" "$T/fz.log" \
    && ok "ulimit -f reached: 'write failed: File too large' naming the file, exit 1" || bad "file-size limit (exit $rc)" "$T/fz.log"

finish cpu-train
