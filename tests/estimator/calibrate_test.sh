#!/bin/bash
# tests/estimator/calibrate_test.sh LLMC — `llmc calibrate`
# (docs/estimator.md, "Site profiles"): profiles fitted back from runs whose
# step times follow a known profile (LLaMA-Factory trainer_log.jsonl, the CUDA
# trainer's gpu_metrics.jsonl, the CPU trainer's metrics.jsonl), the prediction
# check on recorded CPU runs (tests/estimator/calib/cpu_b*: record_cpu.sh), bad
# input, and the checker's rules for the profile block (the check on runs made
# here: calibrate_live_test.sh, suite estimator-live). Ends with "N passed, N failed".
set -u
llmc=$1
here=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-python3}
T=$(mktemp -d /tmp/llmc-calib-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
ok() { pass=$((pass + 1)); }   # quiet: only failures are shown
# near GOT WANT REL: |got - want| <= rel x |want|
near() { $PY -c 'import sys; g, w, r = map(float, sys.argv[1:]); sys.exit(0 if abs(g - w) <= r * abs(w) else 1)' "$@"; }
# the value of KEY in a profile file (the number before any unit)
pval() { sed -n "s/^  $2 *= *\([0-9.e+-]*\).*/\1/p" "$1"; }
. "$here/calib/lib.sh"   # pred_err, within15
est() { $PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["estimate"][sys.argv[2]])' "$1" "$2"; }

# ---- LLaMA-Factory: ZeRO-3 Qwen2.5-14B on 1 and 4 nodes, compiled with
# profile tcp_site (mfu 0.3, 5 GBps between nodes); trainer_log.jsonl written
# as callbacks.py LogCallback writes it (str(timedelta(seconds=int(t)))), an
# evaluation at step 300 splitting the log. Fitting both runs gives the profile back.
lf_log() {   # PLAN_JSON OUT_FILE
    $PY - "$1" "$2" <<'PY'
import json, sys
from datetime import timedelta
s = json.load(open(sys.argv[1]))["estimate"]["step_seconds"]
with open(sys.argv[2], "w") as f:
    for k in range(1, 601):
        el = 7 + k * s + (60 if k > 300 else 0)
        rec = dict(current_steps=k, total_steps=30518, loss=2.5, lr=1e-05, epoch=round(k / 30518, 4),
                   percentage=round(k / 30518 * 100, 2), elapsed_time=str(timedelta(seconds=int(el))),
                   remaining_time=str(timedelta(seconds=int((30518 - k) * s))))
        f.write(json.dumps(rec) + "\n")
        if k == 300:
            f.write(json.dumps(dict(current_steps=k, total_steps=30518, eval_loss=2.4, epoch=0.01, percentage=0.98,
                                    elapsed_time=str(timedelta(seconds=int(el + 30))), remaining_time="0:00:00")) + "\n")
PY
}
for n in 1 4; do
    "$llmc" "$here/calib/lf_q14b_${n}n.llm" -o "$T/lf$n" >/dev/null 2>&1 || bad "compile lf_q14b_${n}n"
    mkdir -p "$T/lf$n/runs/pt"
    lf_log "$T/lf$n/plan.json" "$T/lf$n/runs/pt/trainer_log.jsonl"
done
if "$llmc" calibrate "$T/lf1/runs/pt" "$T/lf4/runs/pt" --name tcp_site -o "$T/lf.llm" 2>"$T/lf.err"; then
    m=$(pval "$T/lf.llm" mfu) bw=$(pval "$T/lf.llm" inter_node_bw)
    near "$m" 0.3 0.01 && near "$bw" 5 0.02 && ok || bad "LF fit: mfu $m (want 0.3), inter_node_bw $bw GBps (want 5)"
    grep -q '^  backend       = llamafactory$' "$T/lf.llm" && ! grep -q 'intra_node_bw\|step_overhead' "$T/lf.llm" \
        && ok || bad "LF profile: two runs, two values (mfu, inter_node_bw):$(cat "$T/lf.llm")"
    grep -q "trainer_log.jsonl, 299 steps" "$T/lf.err" && ok || bad "LF: the longest stretch without evaluation (299 steps):$(cat "$T/lf.err")"
    # the written profile is a valid block a plan can use
    sed -e "s|^use .*|use \"$T/lf.llm\"|" "$here/calib/lf_q14b_4n.llm" >"$T/use_fitted.llm"
    "$llmc" check "$T/use_fitted.llm" >/dev/null 2>&1 && ok || bad "a plan using the fitted profile checks clean"
else
    bad "calibrate LF runs: $(cat "$T/lf.err")"
fi
# one run: the mfu alone (one shape, one value)
"$llmc" calibrate "$T/lf1/runs/pt" -o "$T/lf_one.llm" 2>/dev/null
m=$(pval "$T/lf_one.llm" mfu)
near "${m:-0}" 0.3 0.01 && ! grep -q inter_node_bw "$T/lf_one.llm" && ok || bad "one LF run: mfu $m alone"

# ---- the CUDA trainer's gpu_metrics.jsonl: one GPU, steps twice the estimate -> half the mfu
"$llmc" "$here/plans/qwen05b_llmc_bench.llm" -o "$T/g" >/dev/null 2>&1 || bad "compile qwen05b_llmc_bench"
s=$(est "$T/g/plan.json" step_seconds) m0=$(est "$T/g/plan.json" mfu)
mkdir -p "$T/g/run"
for k in $(seq 1 40); do
    t=$($PY -c "print('%.6f' % ((3 if $k == 1 else 2) * $s))")
    echo "{\"step\":$k,\"step_time_s\":$t,\"gpu_peak_bytes\":24000000000,\"gpu_allocated_bytes\":19000000000}"
done >"$T/g/run/gpu_metrics.jsonl"
"$llmc" calibrate "$T/g/run" -o "$T/g.llm" 2>/dev/null
m=$(pval "$T/g.llm" mfu)
near "${m:-0}" "$($PY -c "print($m0 / 2)")" 0.002 && grep -q 'backend       = llmc' "$T/g.llm" && ok \
    || bad "gpu_metrics.jsonl: mfu $m, want $m0 / 2"

# ---- the CUDA trainer's metrics.jsonl (runtime/train/metrics.c writes it for both
# backends; llmc-train-cuda writes gpu_metrics.jsonl beside it): Qwen2.5-0.5B on 1 and
# 4 H200, compiled with profile h200_llmc (mfu 0.42, 150 GBps inside the node); every
# line in the trainer's format, one with a non-finite loss written as null with its
# "nonfinite" note, step 1 three times slower (warm-up). The gpu_metrics.jsonl beside
# it logs 10x slower steps: calibrate reads metrics.jsonl when both are there.
gpu_run() {   # PLAN_JSON RUN_DIR
    $PY - "$1" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["estimate"]["step_seconds"]
with open(sys.argv[2] + "/metrics.jsonl", "w") as m, open(sys.argv[2] + "/gpu_metrics.jsonl", "w") as g:
    for k in range(1, 61):
        t = (3 if k == 1 else 1) * s
        loss = "null" if k == 30 else "%.9g" % (3.0 - k / 100)
        note = ',"nonfinite":{"loss":"nan"}' if k == 30 else ""
        m.write('{"step":%d,"time":"2026-12-02T10:00:%02d.000Z","loss":%s,"lr":0.0003,"grad_norm":1.25,'
                '"tokens":16384,"tokens_per_s":%.1f,"step_time_s":%.6f,"peak_rss_bytes":9876543210%s}\n'
                % (k, k % 60, loss, 16384 / t, t, note))
        g.write('{"step":%d,"step_time_s":%.6f,"gpu_peak_bytes":24000000000,"gpu_allocated_bytes":19000000000}\n'
                % (k, 10 * t))
PY
}
for g in 1 4; do
    "$llmc" "$here/calib/llmc_q05b_${g}g.llm" -o "$T/q$g" >/dev/null 2>&1 || bad "compile llmc_q05b_${g}g"
    mkdir -p "$T/q$g/run" && gpu_run "$T/q$g/plan.json" "$T/q$g/run"
done
if "$llmc" calibrate "$T/q1/run" "$T/q4/run" --name h200_llmc -o "$T/q.llm" 2>"$T/q.err"; then
    m=$(pval "$T/q.llm" mfu) bw=$(pval "$T/q.llm" intra_node_bw)
    near "$m" 0.42 0.01 && near "$bw" 150 0.03 && ok || bad "GPU metrics.jsonl fit: mfu $m (want 0.42), intra_node_bw $bw GBps (want 150)"
    grep -q '^  backend       = llmc$' "$T/q.llm" && ! grep -q 'inter_node_bw\|step_overhead' "$T/q.llm" \
        && grep -q "(qwen_gpu: 24 layers x 896, 1 node x 4 GPUs, 2 x 2048 x 1; metrics.jsonl, 54 steps)" "$T/q.err" \
        && ok || bad "GPU profile: two runs, mfu and intra_node_bw, from metrics.jsonl (54 steps after warm-up):$(cat "$T/q.llm" "$T/q.err")"
else
    bad "calibrate GPU metrics.jsonl runs: $(cat "$T/q.err")"
fi

# ---- the CPU trainer's metrics.jsonl: steps of 2 x the estimate (mfu 0.2 -> 0.1) + 50 ms
for b in 8 32; do
    mkdir -p "$T/s$b/runs/tiny_sft"
    cp "$here/calib/cpu_b$b/plan.json" "$T/s$b/"
    s=$(est "$T/s$b/plan.json" step_seconds)
    for k in $(seq 1 30); do
        echo "{\"step\":$k,\"time\":\"2026-12-02T10:00:00.000Z\",\"loss\":2.5,\"lr\":0.003,\"grad_norm\":1,\"tokens\":1000,\"tokens_per_s\":1000.0,\"step_time_s\":$($PY -c "print('%.6f' % (2 * $s + 0.05))"),\"peak_rss_bytes\":38000000}"
    done >"$T/s$b/runs/tiny_sft/metrics.jsonl"
done
"$llmc" calibrate "$T/s8/runs/tiny_sft" "$T/s32/runs/tiny_sft" -o "$T/s.llm" 2>/dev/null
m=$(pval "$T/s.llm" mfu) o=$(pval "$T/s.llm" step_overhead)
near "${m:-0}" 0.1 0.005 && near "${o:-0}" 0.05 0.01 && ok || bad "CPU fit: mfu $m (want 0.1), step_overhead $o (want 0.05)"
# the same file twice is one shape: the mfu alone
"$llmc" calibrate "$T/s8/runs/tiny_sft" "$T/s8/runs/tiny_sft/metrics.jsonl" -o "$T/s_one.llm" 2>/dev/null
! grep -q step_overhead "$T/s_one.llm" && grep -q '^  mfu' "$T/s_one.llm" && ok || bad "one shape fits one value"

# ---- the prediction check on real runs of the CPU trainer (recorded by
# calib/record_cpu.sh): fit batches 8 and 32, predict 16 within 15%
out=$("$llmc" calibrate "$here/calib/cpu_b8/runs/tiny_sft" "$here/calib/cpu_b32/runs/tiny_sft" \
      --check "$here/calib/cpu_b16/runs/tiny_sft" 2>&1 >/dev/null)
err=$(pred_err "$out")
echo "  prediction check (CPU trainer, batch 16 from 8 and 32): $(grep '^  check     step' <<<"$out" | sed 's/^ *check *//')"
within15 "$err" && ok || bad "prediction within 15%: $out"

# ---- the same check on real runs of the CUDA trainer (calib/record_gpu.sh on one
# H200: a Qwen2.5-0.5B-shaped model on the tiny data, bf16, micro batches 32, 64 and
# 128 x 128 tokens, 60 steps each): fit 32 and 128, predict 64 within 15%, from the
# loop's metrics.jsonl and from the GPU trainer's own gpu_metrics.jsonl alike
# (recorded 2026-12-03: -0.1% with the profile, -16.8% before it)
for src in "" /gpu_metrics.jsonl; do
    out=$("$llmc" calibrate "$here/calib/gpu_b32/runs/tiny_sft$src" "$here/calib/gpu_b128/runs/tiny_sft$src" \
          --check "$here/calib/gpu_b64/runs/tiny_sft$src" 2>&1 >/dev/null)
    err=$(pred_err "$out")
    echo "  prediction check (CUDA trainer, H200, batch 64 from 32 and 128${src:+, $src}): $(grep '^  check     step' <<<"$out" | sed 's/^ *check *//')"
    within15 "$err" && ok || bad "GPU prediction within 15% ($src): $out"
done

# ---- the published FSDP cases (docs/estimator.md, "Published measurements"):
# trainer_log.jsonl files at the published tokens/s per GPU; on the 16-node A100
# cluster, fitting 7B and 70B predicts 13B and 34B (the issue's bar: 15%)
for c in a100_7b:3700 a100_13b:1800 a100_34b:700 a100_70b:370 h100_7b:7500 h100_70b:800; do
    n=${c%%:*}
    "$llmc" "$here/plans/calib_ibm_$n.llm" -o "$T/pub_$n" >/dev/null 2>&1 || bad "compile calib_ibm_$n"
    mkdir -p "$T/pub_$n/run"
    $PY - "$T/pub_$n/plan.json" "${c#*:}" "$T/pub_$n/run/trainer_log.jsonl" <<'PY'
import json, sys
from datetime import timedelta
e = json.load(open(sys.argv[1]))["estimate"]
step = e["global_batch"] * e["seq_tokens"] / (float(sys.argv[2]) * e["world_size"])
with open(sys.argv[3], "w") as f:
    for k in range(1, 201):
        f.write(json.dumps(dict(current_steps=k, total_steps=1000, loss=2.0, lr=1e-4, epoch=0.1, percentage=k / 10,
                                elapsed_time=str(timedelta(seconds=int(30 + k * step))), remaining_time="0:00:00")) + "\n")
PY
done
out=$("$llmc" calibrate "$T/pub_a100_7b/run" "$T/pub_a100_70b/run" --check "$T/pub_a100_13b/run" \
      --check "$T/pub_a100_34b/run" 2>&1 >/dev/null)
errs=$(sed -n 's/^  check .*with the profile (\([-+0-9.]*\)%).*/\1/p' <<<"$out" | tr '\n' ' ')
echo "  published A100 FSDP, fitted on 7B and 70B: 13B and 34B predicted with errors $errs(%)"
[[ $(wc -w <<<"$errs") == 2 ]] && $PY -c "import sys; sys.exit(0 if all(abs(float(x)) <= 15 for x in sys.argv[1:]) else 1)" $errs \
    && ok || bad "published A100 predictions within 15%: $out"
grep -q "warning: the fitted mfu" <<<"$out" && ok || bad "an mfu above what training reaches is flagged: $out"
# leave-one-out, as docs/estimator.md ("Site profiles", published multi-node cases) reports it:
# each case predicted by the profile fitted on its cluster's other cases; the table's figures
# within 0.2 points
loo() {   # CASE WANT_PERCENT OTHER...
    local c=$1 want=$2; shift 2
    local fit=() o; for o in "$@"; do fit+=("$T/pub_$o/run"); done
    local got
    got=$("$llmc" calibrate "${fit[@]}" --check "$T/pub_$c/run" 2>&1 >/dev/null |
          sed -n 's/^  check .*with the profile (\([-+0-9.]*\)%).*/\1/p')
    [[ -n $got ]] && $PY -c "import sys; sys.exit(0 if abs($got - ($want)) <= 0.2 else 1)" && ok \
        || bad "leave-one-out $c: ${got:-none}%, the docs say $want%"
    loo_seen+=" $c ${got}%"
}
loo_seen=""
loo a100_7b -17.0 a100_13b a100_34b a100_70b; loo a100_13b 2.8 a100_7b a100_34b a100_70b
loo a100_34b -1.1 a100_7b a100_13b a100_70b; loo a100_70b 9.7 a100_7b a100_13b a100_34b
loo h100_7b -23.7 h100_70b; loo h100_70b 33.6 h100_7b
echo "  leave-one-out:$loo_seen"

# ---- bad input: FILE:LINE, exit 1 (data) or 2 (usage, I/O), nothing written
expect() {   # WANT_EXIT PATTERN ARGS...
    local want=$1 pat=$2; shift 2
    rm -f "$T/never.llm"
    "$llmc" calibrate "$@" -o "$T/never.llm" >/dev/null 2>"$T/e"; local rc=$?
    if [[ $rc == "$want" ]] && grep -q -- "$pat" "$T/e" && [[ ! -e $T/never.llm && ! -e $T/never.llm.tmp ]]; then ok
    else bad "calibrate $*: exit $rc (want $want), '$pat' in: $(cat "$T/e")"; fi
}
mkdir -p "$T/b1"; cp "$T/s8/plan.json" "$T/b1/"
{ head -2 "$T/s8/runs/tiny_sft/metrics.jsonl"; echo '{"step":3,"step_time_s":-0.5}'; } >"$T/b1/metrics.jsonl"
expect 1 "metrics.jsonl:3: 'step_time_s' must be a number in \[0, 86400\], found -0.5" "$T/b1"
echo '{"step":1,"step_time_s":0.1}' >"$T/b1/metrics.jsonl"; echo 'not json' >>"$T/b1/metrics.jsonl"
expect 1 "metrics.jsonl:2: not a JSON object" "$T/b1"
echo '{"step":1.5,"step_time_s":0.1}' >"$T/b1/metrics.jsonl"
expect 1 "metrics.jsonl:1: 'step' must be a whole number" "$T/b1"
echo '{"step":1,"step_time_s":0.1}' >"$T/b1/metrics.jsonl"
expect 1 "1 step logged; calibration needs at least 3" "$T/b1"
mkdir -p "$T/b2"; cp "$T/lf1/plan.json" "$T/b2/"
{ head -1 "$T/lf1/runs/pt/trainer_log.jsonl"; echo '{"current_steps": 2, "total_steps": 10, "loss": 1, "elapsed_time": "ten minutes"}'; } >"$T/b2/trainer_log.jsonl"
expect 1 "trainer_log.jsonl:2: 'elapsed_time' must be H:MM:SS" "$T/b2"
echo '{"current_steps": 12, "total_steps": 10, "loss": 1, "elapsed_time": "0:00:05"}' >"$T/b2/trainer_log.jsonl"
expect 1 "trainer_log.jsonl:1: current_steps 12 of total_steps 10" "$T/b2"
head -5 "$T/lf1/runs/pt/trainer_log.jsonl" >"$T/b2/trainer_log.jsonl"
expect 1 "no stretch of at least 3 training steps over 10 s" "$T/b2"
mkdir -p "$T/b3/x/y/z/w/v"; cp "$T/s8/runs/tiny_sft/metrics.jsonl" "$T/b3/x/y/z/w/v/"
cp "$T/s8/plan.json" "$T/b3/"
expect 2 "no plan.json in the run directory or the 4 above it" "$T/b3/x/y/z/w/v"
mkdir -p "$T/b4"
expect 2 "no metrics.jsonl, gpu_metrics.jsonl or trainer_log.jsonl" "$T/b4"
expect 2 "No such file" "$T/does-not-exist"
mkdir -p "$T/b5"; cp "$T/s8/runs/tiny_sft/metrics.jsonl" "$T/b5/"; echo '{"model": {}}' >"$T/b5/plan.json"
expect 1 "not a plan.json written by llmc" "$T/b5"
mkdir -p "$T/b6"; cp "$T/lf1/runs/pt/trainer_log.jsonl" "$T/b6/"; cp "$T/s8/plan.json" "$T/b6/"
expect 1 "is LLaMA-Factory's log, but .* is a plan for backend = llmc" "$T/b6"
expect 1 "ran different trainers" "$T/s8/runs/tiny_sft" "$T/lf1/runs/pt"
$PY -c 'import json,sys; p=json.load(open(sys.argv[1])); p["train"]["micro_batch"]=-4; json.dump(p, open(sys.argv[2], "w"))' "$T/s8/plan.json" "$T/b1/plan.json"
cp "$T/s8/runs/tiny_sft/metrics.jsonl" "$T/b1/"
expect 1 "train.micro_batch must be a number in \[1, 1048576\]" "$T/b1"
expect 2 "not a block name" --name "1bad" "$T/s8/runs/tiny_sft"
mkdir -p "$T/line
break"; cp "$T/s8/runs/tiny_sft/metrics.jsonl" "$T/s8/plan.json" "$T/line
break/"
expect 2 "control character" "$T/line
break"
"$llmc" calibrate >/dev/null 2>&1; [[ $? == 2 ]] && ok || bad "calibrate without runs exits 2"
"$llmc" calibrate --help | grep -q 'usage: llmc calibrate' && ok || bad "calibrate --help"

# ---- the checker: the profile block and a job's profile
check_err() {   # FILE PATTERN
    "$llmc" check --color=never "$1" >/dev/null 2>"$T/ce"; local rc=$?
    [[ $rc == 1 ]] && grep -q -- "$2" "$T/ce" && ok || bad "check $1: exit $rc, '$2' in: $(cat "$T/ce")"
}
printf 'profile p {\n  mfu = 0.3\n  inter_node_bw = 40 Gbps\n}\n' >"$T/p1.llm"
check_err "$T/p1.llm" "p1.llm:3:.*'inter_node_bw' takes bytes per second, not Gbps"
printf 'profile p {\n  from = ["a"]\n}\n' >"$T/p2.llm"
check_err "$T/p2.llm" "p2.llm:1:.*profile 'p' sets none of mfu, step_overhead, intra_node_bw, inter_node_bw"
printf 'profile p {\n  mfu = 1.5\n  step_overhead = 2 h\n  latency = 3\n}\n' >"$T/p3.llm"
check_err "$T/p3.llm" "p3.llm:2:.*'mfu'"
check_err "$T/p3.llm" "p3.llm:3:.*'step_overhead' must be at most 1 h"
check_err "$T/p3.llm" "p3.llm:4:.*unknown key 'latency'"
sed -e "s|^job bench {|use \"$here/profiles/site_tcp.llm\"\njob bench {\n  profile = tcp_site|" "$here/plans/qwen05b_llmc_bench.llm" >"$T/p4.llm"
check_err "$T/p4.llm" "profile 'tcp_site' was measured on backend = llamafactory, but run .* uses backend = llmc"
sed -e "s|^job bench {|job bench {\n  profile = nowhere|" "$here/plans/qwen05b_llmc_bench.llm" >"$T/p5.llm"
check_err "$T/p5.llm" "nowhere"

finish
