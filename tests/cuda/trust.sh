#!/bin/bash
# GPU trust (issue 27), the `trust` section of tests/cuda/device.sh: two runs of one
# plan giving the same bits, the tiny plan's held-out exact match over seeds (ours
# and the PyTorch bf16 reference's), and compute-sanitizer over a few steps of
# every path the trainer has.
#   tests/cuda/trust.sh OUTDIR [SECTION...]     sections: repro seeds san hf (default: all)
# hf: check_vs_hf.py, 200 steps against PyTorch + transformers (the default path unchanged)
# san first runs tests/cuda/initcheck_probe.c plainly and under initcheck (docs/cuda.md).
#   TRUST_SEEDS="1 2 3 4 5"  the seeds of `seeds`
#   TRUST_SAN="small-fp8 small-z2"  only these paths of `san` (default: every path)
#   TRUST_TOOLS="initcheck racecheck" only these tools of `san` (default: each path's list)
#   TRUST_TWICE="fp8 z3"             only these plans of `repro` (default: every plan)
#   TRUST_SEED_JOBS=10               runs of `seeds` at once (ours and the reference's)
#   TRUST_JOBS=6, TRUST_RACE_JOBS=3  paths of `san` at once; racecheck runs among them at once
# Needs build/llmc-train-cuda and .cuda-run/tiny (tests/cuda/make_tiny_run.sh).
# Shapes: tiny (head_dim 16: materialised attention only), small (head_dim 64,
# cuDNN and the flash kernels), 0.5b (Qwen2.5-0.5B's layers on the tiny vocabulary).
set -uo pipefail
out=${1:?usage: trust.sh OUTDIR [SECTION...]}
shift
sections=${*:-repro seeds san hf}
has() { [[ " $sections " == *" $1 "* ]]; }
seeds=${TRUST_SEEDS:-1 2 3 4 5}
r=.cuda-run/tiny bin=./build/llmc-train-cuda
mkdir -p "$out"
note() { echo "$*" | tee -a "$out/summary.txt"; }
# variant BASE NAME SEED [KEY=JSON...]: plan-NAME.json, BASE with its own output and
# seed; KEY is train.X, model.X or a shape (shape=small|0.5b)
variant() {
    python3 - "$r/$1.json" "$r/plan-$2.json" "$2" "$3" "${@:4}" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); n = sys.argv[3]
p["output"]["dir"] = "run-" + n; p["checkpoint"]["dir"] = "run-" + n + "/ckpt"
p["train"]["seed"] = int(sys.argv[4])
shapes = {"small": dict(hidden=128, heads=2, kv_heads=1, head_dim=64, ffn=352),
          "0.5b": dict(layers=24, hidden=896, heads=14, kv_heads=2, head_dim=64, ffn=4864)}
for kv in sys.argv[5:]:
    k, v = kv.split("=", 1)
    if k == "shape": p["model"].update(shapes[v]); continue
    sect, key = k.split(".")
    p[sect][key] = json.loads(v)
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
}
# same A B: the per-step loss, lr and grad-norm of two runs, and their exported weights
same() {
    python3 - "$r/run-$1" "$r/run-$2" <<'PY'
import hashlib, json, os, sys
def steps(d):
    return [(o["step"], o["loss"], o["lr"], o.get("grad_norm")) for o in map(json.loads, open(d + "/metrics.jsonl"))]
def sha(d):
    h = {}
    for sub in ("final", "adapter"):
        for root, _, files in os.walk(os.path.join(d, sub)):
            for f in sorted(files):
                if f.endswith(".safetensors"):
                    h[os.path.join(sub, f)] = hashlib.sha256(open(os.path.join(root, f), "rb").read()).hexdigest()
    return h
a, b = steps(sys.argv[1]), steps(sys.argv[2])
diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
ha, hb = sha(sys.argv[1]), sha(sys.argv[2])
ok = len(a) == len(b) and diff is None and ha == hb and ha
print(("SAME" if ok else "DIFFERENT") + f": {len(a)} vs {len(b)} steps, first differing step "
      f"{a[diff][0] if diff is not None else '-'}, final loss {a[-1][1] if a else '-'} / {b[-1][1] if b else '-'}, "
      f"weights {'equal' if ha == hb else 'differ'} ({', '.join(k + ' ' + v[:12] for k, v in sorted(ha.items()))})")
PY
}
# twice NAME BASE [KEY=JSON...]: the plan run twice from scratch, compared
twice() {
    local name=$1 base=$2; shift 2
    [[ -n ${TRUST_TWICE:-} && " $TRUST_TWICE " != *" $name "* ]] && return
    for k in a b; do   # both at once: the bits may not depend on what else the GPU runs
        variant "$base" "$name$k" 42 "$@"
        rm -rf "$r/run-$name$k"
        ( t0=$SECONDS
          $bin run "$r/plan-$name$k.json" > "$out/twice_$name$k.log" 2>&1 || note "twice $name: run $k exit $?"
          echo "$name$k: $((SECONDS - t0)) s" >> "$out/times.txt" ) &
    done
    wait
    note "twice $name ($*): $(same "${name}a" "${name}b")"
}
repro_section() {
    twice tiny plan-gpu
    twice small plan-gpu shape=small train.attention='"flash"'
    LLMC_ATTN=cudnn twice small-cudnn plan-gpu shape=small train.attention='"flash"'
    twice small-nondet plan-gpu shape=small train.attention='"flash"' train.deterministic=false
    twice lora plan-gpu-lora
    twice 0.5b plan-gpu shape=0.5b train.attention='"flash"' train.max_steps=200
    # ZeRO-2/3 on one rank (the buckets, shards and gathers run as on several)
    twice z2 plan-gpu shape=small train.attention='"flash"' parallel.zero_stage=2
    twice z3 plan-gpu shape=small train.attention='"flash"' parallel.zero_stage=3
    # the number formats a plan chooses (issue 31)
    # (fp8_lm_head: the tiny plan, compiled with bf16, says false; fp8's default is true)
    twice fp8 plan-gpu shape=small train.attention='"flash"' train.precision='"fp8"' train.fp8_lm_head=true
    twice fp8-bf16-head plan-gpu shape=small train.attention='"flash"' train.precision='"fp8"' \
        train.fp8_lm_head=false
    twice lora-fp8 plan-gpu-lora train.precision='"fp8"' train.fp8_lm_head=true   # the head frozen: no dW
    twice states-bf16 plan-gpu shape=small train.attention='"flash"' train.optimizer_states='"bf16"' \
        train.master_weights='"split"'
    # a tuned GEMM choice made once (LLMC_GEMM_TUNE=1 into a choices file, gemm_choices.h),
    # then the FP8 plan twice from the file: timings chose, the file fixes the bits
    if [[ -z ${TRUST_TWICE:-} || " $TRUST_TWICE " == *" fp8-choices "* ]]; then
        local gc=$PWD/$r/gemm-choices.txt
        rm -f "$gc"
        variant plan-gpu fp8-tune 42 shape=small train.attention='"flash"' train.precision='"fp8"' \
            train.fp8_lm_head=true
        rm -rf "$r/run-fp8-tune"
        LLMC_GEMM_TUNE=1 LLMC_GEMM_CHOICES=$gc $bin run "$r/plan-fp8-tune.json" --stop-after 2 > "$out/fp8-tune.log" 2>&1
        note "GEMM choices tuned into a file: exit $? (3 wanted), $(($(wc -l < "$gc" 2>/dev/null || echo 1) - 1)) shapes"
        LLMC_GEMM_CHOICES=$gc twice fp8-choices plan-gpu shape=small train.attention='"flash"' train.precision='"fp8"' \
            train.fp8_lm_head=true
    fi
}
# the plan as it is over the seeds, ours and the PyTorch bf16 reference side by
# side (tiny_recipes.py: every run at once, TRUST_SEED_JOBS of them)
seeds_section() {
    python3 tests/cuda/tiny_recipes.py "$out/seeds" --recipe "plan:" --seeds "${seeds// /,}" \
        --jobs "${TRUST_SEED_JOBS:-10}" > "$out/seeds.log" 2>&1
    note "seeds (exit $?): $(grep -h '^recipe ' "$out/seeds.log" | tr '\n' ';')"
}
# san NAME TOOLS BASE [KEY=JSON...]: each tool over 3 steps of the plan, in the
# background (TRUST_JOBS paths at once: the tools are CPU-bound, the plans small), each
# run cut at TRUST_SAN_TIMEOUT s; initcheck's reports are counted by kernel, so a
# report outside the listed false positive (docs/cuda.md) is visible in the summary.
# SAN_RUN="ARGS" (before san): the run's arguments instead of --stop-after 3, to its
# normal end (exit 0): the held-out pass after the last step (--eval-shards)
san_one() {
    local name=$1 tools=$2 tool rc args=(--stop-after 3) want=3
    [[ -n ${SAN_RUN:-} ]] && { read -ra args <<< "$SAN_RUN"; want=0; }
    for tool in $tools; do
        [[ -n ${TRUST_TOOLS:-} && " $TRUST_TOOLS " != *" $tool "* ]] && continue
        rm -rf "$r/run-san-$name"
        # racecheck's shadow state is large: at most TRUST_RACE_JOBS of them at once
        # (with ten at once beside the repro and seed runs, three ended with status 9)
        local slot=""
        if [[ $tool == racecheck ]]; then
            while [[ -z $slot ]]; do
                for ((k = 1; k <= ${TRUST_RACE_JOBS:-3}; k++)); do
                    exec {lockfd}>"$out/.race.$k"
                    if flock -n "$lockfd"; then slot=$k; break; fi
                    exec {lockfd}>&-
                done
                [[ -n $slot ]] || sleep 1
            done
        fi
        timeout "${TRUST_SAN_TIMEOUT:-900}" compute-sanitizer --tool "$tool" --show-backtrace device --print-limit 2000 \
            $bin run "$r/plan-san-$name.json" "${args[@]}" > "$out/san_${name}_$tool.log" 2>&1
        rc=$?
        [[ -n $slot ]] && exec {lockfd}>&-
        # 3: --stop-after's "stopped, requeue me", the run's normal end here (0 with
        # SAN_RUN); any other status is a failure whatever the summary line says
        note "sanitizer $tool $name: exit $rc ; $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/san_${name}_$tool.log" | tail -1)" \
             "$( ((rc == 124)) && echo "(cut at ${TRUST_SAN_TIMEOUT:-900} s)")" \
             "$( ((rc != want && rc != 124)) && echo "FAILED: $(grep -hv '^=========\s*$' "$out/san_${name}_$tool.log" | grep -hi 'error\|fail\|abort\|internal' | grep -v 'ERROR SUMMARY' | tail -2 | tr '\n' ' ')")" \
             "$(awk '/^========= [A-Z]/ { want = 1; next } want && /^=========     at / { sub(/^=========     at /, ""); sub(/\(.*\)\+0x[0-9a-f]* in .*\//, " @ "); sub(/\(.*\)\+0x[0-9a-f]* in /, " @ "); k[$0]++; want = 0 }
                     END { for (x in k) printf "%s%s x%d", (n++ ? ", " : "by kernel: "), x, k[x] }' "$out/san_${name}_$tool.log")"
    done
}
san() {
    local name=$1 tools=$2 base=$3; shift 3
    [[ -n ${TRUST_SAN:-} && " $TRUST_SAN " != *" $name "* ]] && return
    variant "$base" "san-$name" 42 "$@"
    while (( $(jobs -rp | wc -l) >= ${TRUST_JOBS:-6} )); do wait -n; done
    san_one "$name" "$tools" &
}
san_section() {
    # initcheck's qkv_rope_fwd_k report: is the product's buffer really unwritten?
    if [[ -n ${TRUST_SAN:-} ]]; then :
    elif make -s initcheck-probe > "$out/probe_build.log" 2>&1; then
        ./build/initcheck_probe > "$out/probe.log" 2>&1
        note "initcheck probe, plain: exit $? ; $(tail -1 "$out/probe.log")"
        compute-sanitizer --tool initcheck --print-limit 5 ./build/initcheck_probe > "$out/probe_initcheck.log" 2>&1
        note "initcheck probe under initcheck: exit $? ; $(grep -h 'passed,' "$out/probe_initcheck.log" | tail -1) ;" \
             "$(grep -h 'ERROR SUMMARY' "$out/probe_initcheck.log" | tail -1)"
    else
        note "initcheck probe: build FAILED"
    fi
    all="memcheck initcheck racecheck synccheck"
    flash='train.attention="flash"'
    san tiny "$all" plan-gpu
    # 3 steps to the end, then the held-out pass (k_argmax_rows)
    SAN_RUN="--eval-shards $r/shards-eval" san tiny-eval "memcheck initcheck racecheck" plan-gpu train.max_steps=3
    san small-flash "$all" plan-gpu shape=small "$flash"
    LLMC_ATTN=cudnn san small-cudnn "$all" plan-gpu shape=small "$flash"
    san small-cudnn-nondet "memcheck initcheck racecheck" plan-gpu shape=small "$flash" train.deterministic=false
    LLMC_ATTN=flash san small-flash-nondet "memcheck initcheck racecheck" plan-gpu shape=small "$flash" \
        train.deterministic=false
    san small-recompute "memcheck initcheck" plan-gpu shape=small "$flash" train.recompute='"full"'
    san small-selective "memcheck initcheck" plan-gpu shape=small "$flash" train.recompute='"selective"'
    san small-offload "memcheck initcheck" plan-gpu shape=small "$flash" parallel.offload='"optimizer"'
    san small-qwen3 "memcheck initcheck" plan-gpu shape=small "$flash" model.arch='"qwen3"' model.qk_norm=true \
        model.qkv_bias=false
    san small-split "memcheck initcheck" plan-gpu shape=small "$flash" train.master_weights='"split"'
    san small-states-bf16 "memcheck initcheck" plan-gpu shape=small "$flash" train.optimizer_states='"bf16"'
    san small-fp8 "memcheck initcheck racecheck" plan-gpu shape=small "$flash" train.precision='"fp8"' \
        train.fp8_lm_head=true
    san small-z2 "memcheck initcheck racecheck" plan-gpu shape=small "$flash" parallel.zero_stage=2
    san small-z3 "memcheck initcheck racecheck" plan-gpu shape=small "$flash" parallel.zero_stage=3

    san lora "$all" plan-gpu-lora
    san lora-fp8 "memcheck initcheck racecheck" plan-gpu-lora train.precision='"fp8"' train.fp8_lm_head=true
    san freeze "memcheck initcheck racecheck" plan-gpu-freeze
    san 0.5b "memcheck initcheck" plan-gpu shape=0.5b "$flash"
    wait
}
hf_section() {
    python3 tests/cuda/check_vs_hf.py --bin "$bin" --work /tmp/trust_hf --steps 200 > "$out/check_vs_hf.log" 2>&1
    note "check_vs_hf 200 steps (exit $?): $(tail -1 "$out/check_vs_hf.log") ; $(grep -h 'loss curve:' "$out/check_vs_hf.log")"
}
# the sections at once (one GPU holds them all; each its own runs and logs), so
# that `device.sh OUT trust` fits one call; each section's wall time in times.txt
for s in repro seeds san hf; do
    if has $s; then ( t0=$SECONDS; ${s}_section; echo "section $s: $((SECONDS - t0)) s" >> "$out/times.txt" ) & fi
done
wait
