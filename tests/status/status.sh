#!/bin/bash
# tests/status/status.sh LLMC LLMC_TRAIN — `llmc status` on real runs (`make test-status`).
# Bad input first (exit 2, a message, never a crash); then the emitted tiny two-node
# job on the local Slurm (tests/slurm/cluster.sh): status of the running job
# (human and --format=json, every figure recomputed from the trainer's files by
# check.py), --plot SVG and PNG, --watch; a USR2 stop + requeue and the segment
# count of the requeued job.
set -u
LLMC=$(realpath "$1"); BIN=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$ROOT/tests/slurm/cluster.sh
PY=python3
T=$(mktemp -d /tmp/status-test.XXXXXX)
trap '"$CLUSTER" stop "$T/slurm" >/dev/null 2>&1; rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
BAD_TAIL=40 FINISH_SECONDS=1
unset OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_JOB_ID SLURM_JOBID
export LLMC_TRAIN=$BIN LLMC_THREADS=1

# expect_2 NAME MESSAGE-REGEX ARGS...: exit status 2 and the message on stderr
expect_2() {
    local name=$1 re=$2; shift 2
    "$LLMC" status "$@" >"$T/o.txt" 2>"$T/e.txt"
    local rc=$?
    if [[ $rc -eq 2 ]] && grep -Eq "$re" "$T/e.txt"; then ok "$name: exit 2, $(head -n 1 "$T/e.txt")"
    else echo "exit $rc" >>"$T/e.txt"; bad "$name" "$T/e.txt"; fi
}

. "$ROOT/tests/e2e/tiny_examples.sh"
mkdir -p "$T/logs" && tiny_examples "$T"
sed -e 's/max_steps        = 150/max_steps        = 20000/' -e 's/checkpoint_every = 10 steps/checkpoint_every = 20 steps/' \
    "$ROOT/tests/e2e/tiny_2node.llm" >"$T/long.llm"
(cd "$T" && "$LLMC" long.llm -o out) >"$T/llmc.log" 2>&1 || { bad "llmc compile" "$T/llmc.log"; finish; }
OUT=$T/out

# ---- bad input ------------------------------------------------------------------
expect_2 "missing directory" "no-such-dir: No such file" "$T/no-such-dir"
mkdir -p "$T/empty"
expect_2 "directory without plan.json" "no plan.json" "$T/empty"
mkdir -p "$T/dirplan/plan.json"
expect_2 "plan.json that is a directory" "not a regular file" "$T/dirplan"
mkdir -p "$T/fifo" && mkfifo "$T/fifo/plan.json"
expect_2 "plan.json that is a FIFO (no hang)" "not a regular file" "$T/fifo"
mkdir -p "$T/notplan" && echo '{"a":1}' >"$T/notplan/plan.json"
expect_2 "a JSON file that is not a plan" "not a plan.json written by llmc" "$T/notplan/plan.json"
head -c 300 "$OUT/plan.json" >"$T/notplan/cut.json"
expect_2 "a truncated plan.json" "not a plan.json written by llmc" "$T/notplan/cut.json"
expect_2 "no target" "no OUT_DIR" 
expect_2 "unknown option" "unknown option '--frobnicate'" --frobnicate "$OUT"
expect_2 "two targets" "not '.*' too" "$OUT" "$OUT"
expect_2 "--plot with another extension" "FILE.svg or FILE.png" --plot "$T/x.jpg" "$OUT"
expect_2 "--job that is not an id" "needs a Slurm job id" --job 'x;rm' "$OUT"
expect_2 "--watch=0" "0.1 to 86400" --watch=0 "$OUT"
# copy_plan NAME: $T/NAME/p/plan.json, a copy of the plan; prints its output directory
copy_plan() {
    mkdir -p "$T/$1/p" && cp "$OUT/plan.json" "$T/$1/p/plan.json" &&
        $PY -c 'import json,os,sys; p=json.load(open(sys.argv[1])); d=os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), p["output"]["dir"])); os.makedirs(d, exist_ok=True); print(d)' "$T/$1/p/plan.json"
}
# corrupt metrics: a copy of the plan whose output dir holds hand-broken files
BD=$(copy_plan bad)
printf '{"step":1,"loss":2.5,"step_time_s":0.1}\nnot json at all\n' >"$BD/metrics.jsonl"
expect_2 "a corrupt metrics.jsonl line" "metrics.jsonl:2: not a metrics line" "$T/bad/p"
printf '{"step":1,"loss":2.5}\n{"step":2}\n' >"$BD/metrics.jsonl"
expect_2 "a metrics line without loss" "metrics.jsonl:2: not a metrics line \(no numeric \"loss\"\)" "$T/bad/p"
printf '{"step":1,"loss":2.5}\n[1,2]\n' >"$BD/metrics.jsonl"
expect_2 "a metrics line that is an array" "metrics.jsonl:2: not a metrics line" "$T/bad/p"
rm "$BD/metrics.jsonl" && mkdir "$BD/metrics.jsonl"
expect_2 "metrics.jsonl that is a directory" "metrics.jsonl: not a regular file" "$T/bad/p"
rmdir "$BD/metrics.jsonl"
# a partial last line (the trainer is writing it) is not an error; it is not counted
printf '{"step":1,"loss":2.5,"step_time_s":0.1}\n{"step":2,"lo' >"$BD/metrics.jsonl"
if PATH=/usr/bin:/bin "$LLMC" status --format=json "$T/bad/p" >"$T/o.json" 2>"$T/e.txt" &&
    $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["progress"]["step"]==1, s' "$T/o.json" 2>>"$T/e.txt"; then
    ok "a partial last metrics line is skipped (step 1 shown)"
else bad "partial last line" "$T/e.txt" "$T/o.json"; fi
# without Slurm's commands on PATH: said plainly, exit 0
mkdir -p "$T/bin" && ln -sf "$(command -v python3)" "$T/bin/python3"
if PATH=$T/bin "$LLMC" status "$T/bad/p" >"$T/o.txt" 2>&1 && grep -q 'scontrol is not on PATH' "$T/o.txt"; then
    ok "no Slurm on PATH: '$(grep -o 'scontrol is not on PATH[^)]*)' "$T/o.txt")'"
else bad "no Slurm on PATH" "$T/o.txt"; fi
# scontrol on PATH but no controller (no slurm.conf here): one line, not scontrol's four;
# OUT/ with a slash names OUT/plan.json (not OUT//plan.json)
if (unset SLURM_CONF; PATH=/usr/bin:/bin "$LLMC" status "$T/bad/p/") >"$T/o.txt" 2>&1 \
   && grep -q '^  slurm       scontrol show job: no Slurm controller answers here' "$T/o.txt" \
   && ! grep -q 'resolve_ctls\|error:\|//plan.json' "$T/o.txt" && grep -q "plan $T/bad/p/plan.json)" "$T/o.txt"; then
    ok "no Slurm controller: one line ('no Slurm controller answers here'); OUT/ -> OUT/plan.json"
else bad "no Slurm controller, OUT/" "$T/o.txt"; fi
# a LLaMA-Factory run without its log yet names LF's trainer_log.jsonl, not llmc's metrics.jsonl
copy_plan lf >/dev/null
$PY -c 'import json,sys; p=json.load(open(sys.argv[1])); p["backend"]="llamafactory"; json.dump(p,open(sys.argv[1],"w"))' "$T/lf/p/plan.json"
if PATH=$T/bin "$LLMC" status "$T/lf/p" >"$T/o.txt" 2>&1 && grep -q "no metrics yet (.*/run/trainer_log.jsonl)" "$T/o.txt"; then
    ok "LLaMA-Factory run without a log: 'no metrics yet (OUT/trainer_log.jsonl)'"
else bad "LF run without a log" "$T/o.txt"; fi

# ---- the drift warning (llmc-train, no Slurm): plans whose estimate is wrong on purpose ----
# variant PLAN_OUT NAME FACTOR|=SECONDS: the plan with max_steps 40, its own output dir,
# and estimate.step_seconds multiplied by FACTOR (or set to SECONDS)
variant() {
    $PY - "$OUT/plan.json" "$1" "$2" "$3" <<'PYEOF'
import json, sys
src, dst, name, f = sys.argv[1:]
p = json.load(open(src))
p["train"]["max_steps"] = 40
dp = p["parallel"]["data_parallel"]   # one process: the same global batch by accumulation
p["train"]["grad_accum"] *= dp
for k in ("data_parallel", "world_size", "nodes"): p["parallel"][k] = 1
p["output"]["dir"] = "../" + name
p["checkpoint"]["dir"] = "../" + name + "/checkpoints"
p["checkpoint"]["every_steps"] = 20
e = p["estimate"]["step_seconds"]
p["estimate"]["step_seconds"] = float(f[1:]) if f.startswith("=") else e * float(f)
json.dump(p, open(dst, "w"), indent=1)
PYEOF
}
"$BIN" prepare "$OUT/plan.json" >"$T/prepare.log" 2>&1 || bad "prepare" "$T/prepare.log"
variant "$OUT/plan_slow.json" drift_slow 0.01
"$BIN" run "$OUT/plan_slow.json" >"$T/slow.log" 2>&1
if [[ $(grep -c 'warning: step time' "$T/slow.log") -eq 1 ]] &&
    grep -Eq 'warning: step time [0-9.e-]+ s measured \(median of steps 2-21\) vs [0-9.e-]+ s estimated: the plan under-estimated the step time \(estimate error -[0-9.]+%\): the run is [0-9.]+x slower than planned' "$T/slow.log"; then
    ok "estimate 100x too fast: one warning, both figures, 'slower than planned'"
else bad "drift warning (slow)" "$T/slow.log"; fi
variant "$OUT/plan_fast.json" drift_fast 100
"$BIN" run "$OUT/plan_fast.json" >"$T/fast.log" 2>&1
if [[ $(grep -c 'warning: step time' "$T/fast.log") -eq 1 ]] &&
    grep -Eq 'the plan over-estimated the step time \(estimate error \+[0-9.]+%\): the run is [0-9.]+x faster than planned' "$T/fast.log"; then
    ok "estimate 100x too slow: one warning, 'faster than planned'"
else bad "drift warning (fast)" "$T/fast.log"; fi
# the control: the estimate set to what the slow run measured (median) -> no warning.
# The margin is 3 (4x) here: step times on a shared CI machine swing by 2x between
# runs (seen under ASan); the two runs above are 100x off, far outside any margin.
med=$($PY -c 'import json,statistics,sys; print(statistics.median(json.loads(l)["step_time_s"] for l in open(sys.argv[1])))' "$T/drift_slow/metrics.jsonl")
variant "$OUT/plan_ok.json" drift_ok "=$med"
LLMC_DRIFT_MARGIN=3 "$BIN" run "$OUT/plan_ok.json" >"$T/ok.log" 2>&1
if grep -q 'done: 40 steps' "$T/ok.log" && ! grep -q 'warning: step time' "$T/ok.log"; then
    ok "estimate = the measured median ($med s), margin 3: no warning"
else bad "drift control" "$T/ok.log"; fi
variant "$OUT/plan_slow2.json" drift_slow2 0.01
LLMC_DRIFT_STEPS=5 "$BIN" run "$OUT/plan_slow2.json" >"$T/slow2.log" 2>&1
if grep -q 'median of steps 2-6)' "$T/slow2.log"; then ok "LLMC_DRIFT_STEPS=5: the warning after 5 steps"
else bad "LLMC_DRIFT_STEPS" "$T/slow2.log"; fi

# ---- the Grafana dashboard against the .prom file a real run wrote ----------------
if $PY "$HERE/check.py" dashboard "$ROOT/docs/grafana/llmc-train.json" "$T/drift_slow/llmc_train.prom" >"$T/check.txt" 2>&1; then
    ok "docs/grafana/llmc-train.json: $(cat "$T/check.txt")"
else bad "dashboard vs .prom" "$T/check.txt" "$T/drift_slow/llmc_train.prom"; fi
sed 's/llmc_train_tokens_per_second{/llmc_train_tokens_per_sec{/' "$ROOT/docs/grafana/llmc-train.json" >"$T/bad-dash.json"
if ! $PY "$HERE/check.py" dashboard "$T/bad-dash.json" "$T/drift_slow/llmc_train.prom" >"$T/check.txt" 2>&1 &&
    grep -q "'llmc_train_tokens_per_sec' .* is not in" "$T/check.txt"; then
    ok "the check catches a misspelt metric name"
else bad "dashboard check with a wrong name" "$T/check.txt"; fi
# status of a finished run (no Slurm job): done, final loss, the held-out marker absent
if PATH=/usr/bin:/bin "$LLMC" status --format=json "$OUT/plan_ok.json" >"$T/done.json" 2>"$T/e.txt" &&
    $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["status"]=="done" and s["progress"]["done"] and s["progress"]["step"]==40 and s["checkpoint"]["step"]==40 and s["eta"]["run_seconds"]==0, s' "$T/done.json" 2>>"$T/e.txt"; then
    ok "a finished run: done, step 40, checkpoint 40, eta 0"
else bad "finished run" "$T/e.txt" "$T/done.json"; fi

# ---- the LLaMA-Factory backend: trainer_log.jsonl and checkpoint-N -------------------
# The log is written here in LLaMA-Factory's LogCallback format (one JSON object per
# logging step: current_steps, total_steps, loss, lr, epoch, percentage,
# elapsed_time/remaining_time as str(timedelta); eval lines with eval_loss), 2.5 s a step.
mkdir -p "$T/lf/run/checkpoint-20" "$T/lf/run/checkpoint-40" "$T/lf/run/checkpoint-60"
$PY - "$ROOT/golden/lf_sft/plan.json" "$T/lf" <<'PYEOF'
import datetime, json, sys
src, d = sys.argv[1:]
p = json.load(open(src))
p["output"]["dir"] = "run"
json.dump(p, open(d + "/plan.json", "w"), indent=1)
with open(d + "/run/trainer_log.jsonl", "w") as f:
    for s in range(1, 51):
        el = int(s * 2.5)
        f.write(json.dumps({"current_steps": s, "total_steps": 200, "loss": 3.0 - s * 0.02, "lr": 1e-5,
                            "epoch": round(s / 100, 2), "percentage": s / 2,
                            "elapsed_time": str(datetime.timedelta(seconds=el)),
                            "remaining_time": str(datetime.timedelta(seconds=int((200 - s) * 2.5)))}) + "\n")
        if s % 25 == 0:
            f.write(json.dumps({"current_steps": s, "total_steps": 200, "eval_loss": 2.9 - s * 0.01, "epoch": s / 100,
                                "percentage": s / 2, "elapsed_time": str(datetime.timedelta(seconds=el)),
                                "remaining_time": "0:05:00"}) + "\n")
for n in (20, 40):
    json.dump({"global_step": n}, open(f"{d}/run/checkpoint-{n}/trainer_state.json", "w"))
PYEOF
if PATH=/usr/bin:/bin "$LLMC" status --format=json "$T/lf" >"$T/lf.json" 2>"$T/e.txt" &&
    PATH=/usr/bin:/bin "$LLMC" status --plot "$T/lf.svg" "$T/lf" >"$T/lf.txt" 2>>"$T/e.txt" &&
    $PY - "$T/lf.json" "$T/lf.svg" <<'PYEOF' 2>>"$T/e.txt"
import json, sys
s = json.load(open(sys.argv[1])); p = s["progress"]; c = s["checkpoint"]; t = s["step_time"]
assert s["backend"] == "llamafactory" and p["step"] == 50 and p["total_steps"] == 200, s
assert abs(p["loss"] - (3.0 - 50 * 0.02)) < 1e-12 and abs(p["eval_loss"] - (2.9 - 0.5)) < 1e-12, p
assert abs(t["measured_seconds"] - (int(50 * 2.5) - int(31 * 2.5)) / 19) < 1e-12, t
assert c["valid"] and c["name"] == "checkpoint-40" and c["step"] == 40, c   # checkpoint-60 has no trainer_state.json
svg = open(sys.argv[2]).read()
assert svg.count('class="eval"') == 2, "two held-out points"
PYEOF
then ok "LLaMA-Factory: step 50/200, loss, eval loss, step time from elapsed_time, checkpoint-40, plot with 2 held-out points"
else bad "LLaMA-Factory backend" "$T/e.txt" "$T/lf.json" "$T/lf.txt"; fi
# its refit: calibrate's slope of elapsed_time over the longest stretch without evaluation
# (steps 1-25: int(25 x 2.5) - int(1 x 2.5) = 60 s over 24 steps), the ETA from it
if $PY - "$T/lf.json" "$T/lf/plan.json" <<'PYEOF' 2>>"$T/e.txt"
import json, sys
s = json.load(open(sys.argv[1])); r = s["refit"]; e = s["eta"]
est = json.load(open(sys.argv[2]))["estimate"]["step_seconds"]
assert r["fitted"] and r["measured_seconds"] == 2.5 and (r["first_step"], r["last_step"]) == (1, 25), r
assert abs(r["step_seconds"] - 2.5) <= 2.5e-6 and e["from"] == "refit" and abs(e["run_seconds"] - 150 * r["step_seconds"]) < 1e-6, (r, e)
assert abs(r["estimate_error_percent"] - 100 * (est - r["step_seconds"]) / r["step_seconds"]) < 1e-9, r
assert r["drifts"] == (abs(r["estimate_error_percent"]) > 15), r
PYEOF
then ok "LLaMA-Factory refit: 2.5 s a step from elapsed_time (steps 1-25), ETA 150 steps x 2.5 s"
else bad "LLaMA-Factory refit" "$T/e.txt" "$T/lf.json"; fi

# ---- the refit on metrics files written in the trainer's format (runtime/train/metrics.h):
# step 1 five times the plan's estimate (the warm-up calibrate skips), then FACTOR x the
# estimate. One run fits the mfu alone: the refitted step time is FACTOR x the estimate and
# the mfu the plan's / FACTOR (compute time is FLOPs / mfu on this CPU plan, no fixed term; 1e-4:
# the file's step times have 6 decimals);
# drift beyond 15% (1.5x: the estimate is -33% off), none within (1.1x: -9.1%).
refit_case() {   # NAME FACTOR STEPS
    local d; d=$(copy_plan "$1") || return 1
    RD=$d   # the copy's output directory
    $PY - "$T/$1/p/plan.json" "$2" "$3" "$d/metrics.jsonl" <<'PYEOF'
import json, sys
plan, k, n, out = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
est = json.load(open(plan))["estimate"]["step_seconds"]
with open(out, "w") as f:
    for s in range(1, n + 1):
        t = (5 if s == 1 else k) * est
        f.write(json.dumps({"step": s, "time": "2026-12-02T10:00:00.000Z", "loss": 3 - s / 100, "lr": 1e-3,
                            "grad_norm": 1.0, "tokens": 1000, "tokens_per_s": round(1000 / t, 1),
                            "step_time_s": round(t, 6), "peak_rss_bytes": 40000000}) + "\n")
PYEOF
    PATH=/usr/bin:/bin "$LLMC" status "$T/$1/p" >"$T/$1.txt" 2>&1 &&
        PATH=/usr/bin:/bin "$LLMC" status --format=json "$T/$1/p" >"$T/$1.json" 2>>"$T/$1.txt"
}
mfu_is() {   # STATUS.json WANT
    $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["refit"]; w=float(sys.argv[2]); assert abs(r["mfu"]-w)<=1e-4*w, (r["mfu"], w)' "$@"
}
plan_mfu=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["estimate"]["mfu"])' "$OUT/plan.json")
if refit_case refit_slow 1.5 40 && $PY "$HERE/check.py" refit "$T/refit_slow.json" "$T/refit_slow/p/plan.json" "$RD/metrics.jsonl" >"$T/check.txt" 2>&1 &&
    mfu_is "$T/refit_slow.json" "$($PY -c "print($plan_mfu / 1.5)")" 2>>"$T/check.txt" &&
    $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["refit"]; assert r["drifts"] and abs(r["estimate_error_percent"]+100/3)<0.01 and (r["first_step"],r["last_step"])==(5,40), r' "$T/refit_slow.json" 2>>"$T/check.txt" &&
    grep -Eq '^  refit       [0-9.e-]+ s a step \(steps 5-40; mfu [0-9.e-]+ fitted, the plan.s [0-9.e-]+\): estimate error -33\.3%, the run drifts from the estimate \(beyond 15%\); fit the site profile from it: llmc calibrate .+$' "$T/refit_slow.txt" &&
    grep -Eq '^  eta         run: .* refitted \(the plan.s estimate for these steps: ' "$T/refit_slow.txt"; then
    ok "refit of a run 1.5x slower than planned: $(cat "$T/check.txt")"
else bad "refit (1.5x)" "$T/refit_slow.txt" "$T/check.txt" "$T/refit_slow.json"; fi
if refit_case refit_near 1.1 40 && $PY "$HERE/check.py" refit "$T/refit_near.json" "$T/refit_near/p/plan.json" "$RD/metrics.jsonl" >"$T/check.txt" 2>&1 &&
    $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["refit"]; assert not r["drifts"] and abs(r["estimate_error_percent"]-100*(1/1.1-1))<0.01, r' "$T/refit_near.json" 2>>"$T/check.txt" &&
    grep -Eq '^  refit       .*: estimate error -9\.1%, within 15% of the estimate$' "$T/refit_near.txt" && ! grep -q drifts "$T/refit_near.txt"; then
    ok "refit of a run 1.1x slower than planned: no drift ($(cat "$T/check.txt"))"
else bad "refit (1.1x)" "$T/refit_near.txt" "$T/check.txt" "$T/refit_near.json"; fi
# three steps: the first is warm-up, two are too few to fit; said, exit 0, the ETA from the median
if refit_case refit_few 1.5 3 && grep -Eq '^  refit       not yet: .*metrics.jsonl: 3 steps logged; calibration needs at least 3 after the first 1 \(warm-up\)$' "$T/refit_few.txt" &&
    $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); r=s["refit"]; assert not r["fitted"] and r["drifts"] is None and "needs at least 3" in r["note"] and s["eta"]["from"]=="median step time", s' "$T/refit_few.json"; then
    ok "three steps logged: 'refit not yet' with the reason, ETA from the median step time"
else bad "refit with too few steps" "$T/refit_few.txt" "$T/refit_few.json"; fi

# ---- a running job on the local Slurm --------------------------------------------
if [[ $(id -u) -ne 0 ]]; then echo "FAIL the Slurm part needs root"; fail=$((fail + 1)); finish; fi
"$CLUSTER" start "$T/slurm" "$OUT/slurm.conf" "$OUT/gres.conf" >"$T/cluster.log" 2>&1 || { bad "cluster" "$T/cluster.log"; finish; }
eval "$("$CLUSTER" env "$T/slurm")"
job_field() { scontrol show job "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -n 1 | cut -d= -f2; }

"$LLMC" status "$OUT" >"$T/before.txt" 2>&1
if grep -q "no job named tiny_2node submitted from" "$T/before.txt" && grep -q "no metrics yet" "$T/before.txt"; then
    ok "before sbatch: no job, no metrics"
else bad "before sbatch" "$T/before.txt"; fi

id=$(cd "$T" && sbatch --parsable out/tiny_2node.slurm)
M=$($PY -c 'import json,os,sys; p=json.load(open(sys.argv[1])); print(os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), p["output"]["dir"], p["output"]["metrics"])))' "$OUT/plan.json")
for ((i = 0; i < 600; i++)); do
    n=$(grep -c '' "$M" 2>/dev/null); n=${n:-0}
    [[ $n -ge 45 && -f $(dirname "$M")/checkpoints/latest ]] && break
    sleep 0.2
done
# a real nvidia-smi sample (taken on an H200 with 20 GiB allocated) as the job script writes them
cp "$HERE/nvidia-smi-h200.csv" "$T/logs/tiny_2node-$id-gpu-n1.csv"
"$LLMC" status "$OUT" >"$T/run.txt" 2>&1; rc_h=$?
"$LLMC" status --format=json "$OUT" >"$T/run.json" 2>"$T/run.err"; rc_j=$?
cat "$T/run.txt"
if [[ $rc_h -eq 0 ]] && grep -q "job $id RUNNING on n\[1-2\]" "$T/run.txt" && grep -Eq 'progress +step [0-9]+/20000' "$T/run.txt" &&
    grep -Eq 'loss +[0-9.]+ latest' "$T/run.txt" && grep -Eq 'eta +run: ' "$T/run.txt" &&
    grep -Eq 's measured \(median of the last 20\), [0-9.e-]+ s estimated: estimate error [-+][0-9.]+%' "$T/run.txt"; then
    ok "human: state, step, loss, ETA, estimate vs measured"
else bad "human status of the running job" "$T/run.txt" "$T/logs/tiny_2node-$id.err"; fi
if [[ $rc_j -eq 0 ]] && $PY "$HERE/check.py" running "$T/run.json" "$OUT/plan.json" "$id" >"$T/check.txt" 2>&1; then
    ok "--format=json of the running job, figures recomputed: $(cat "$T/check.txt")"
else bad "--format=json of the running job" "$T/check.txt" "$T/run.json" "$T/run.err"; fi
if grep -q 'accounting storage' "$T/run.txt" &&
    $PY -c 'import json,sys; s=json.load(open(sys.argv[1]))["slurm"]; assert s["segments_in_sacct"] is None and "accounting" in s["sacct"], s' "$T/run.json"; then
    ok "sacct without accounting storage: said plainly ($(grep -o 'sacct: [^;]*' "$T/run.txt"))"
else bad "sacct note" "$T/run.txt"; fi

if grep -q 'gpu         n1/0: 3% busy, 21.1 of 140.4 GiB (estimate 0.1 GiB) at 2026/12/01 10:58:43.881' "$T/run.txt" &&
    $PY -c 'import json,sys; g=json.load(open(sys.argv[1]))["gpus"]; assert g==[{"node":"n1","index":0,"utilization_percent":3,"memory_used_bytes":21619*2**20,"memory_total_bytes":143771*2**20,"time":"2026/12/01 10:58:43.881"}], g' "$T/run.json"; then
    ok "nvidia-smi samples: the last one of n1/0 (3%, 21619 of 143771 MiB) beside the estimate"
else bad "nvidia-smi samples" "$T/run.txt" "$T/run.json"; fi

# --plot: SVG and PNG from the live metrics
# from a frozen copy of the live metrics, so that the point count is exact
FD=$(copy_plan frozen) && cp "$M" "$FD/metrics.jsonl"
if PATH=/usr/bin:/bin "$LLMC" status --plot "$T/frozen.svg" "$T/frozen/p" >/dev/null 2>"$T/plot.err" &&
    $PY "$HERE/check.py" svg "$T/frozen.svg" "$FD/metrics.jsonl" >"$T/check.txt" 2>&1; then
    ok "--plot SVG: one point per step ($(cat "$T/check.txt")), the curve goes down"
else bad "--plot SVG" "$T/plot.err" "$T/check.txt"; fi
if "$LLMC" status --plot "$T/loss.png" "$OUT" >/dev/null 2>"$T/plot.err" &&
    $PY "$HERE/check.py" png "$T/loss.png" >"$T/check.txt" 2>&1; then
    ok "--plot PNG: valid PNG ($(cat "$T/check.txt"))"
else bad "--plot PNG" "$T/plot.err" "$T/check.txt"; fi
expect_2 "--plot into a missing directory" "no-dir/x.svg.tmp: No such file" --plot "$T/no-dir/x.svg" "$OUT"

# --watch: JSON lines, one per refresh, while the job runs
timeout 2.5 "$LLMC" status --watch=0.5 --format=json "$OUT" >"$T/watch.json" 2>"$T/watch.err"
if $PY "$HERE/check.py" watch "$T/watch.json" >"$T/check.txt" 2>&1; then
    ok "--watch --format=json: $(grep -c '' "$T/watch.json") snapshots in 2.5 s"
else bad "--watch" "$T/check.txt" "$T/watch.err"; fi

# ---- a requeued job: USR2 -> checkpoint, exit 3, requeue, resume --------------------
err=$T/logs/tiny_2node-$id.err out=$T/logs/tiny_2node-$id.out   # the trainer's progress: stdout
scancel --signal=USR2 "$id"
for ((i = 0; i < 450; i++)); do
    [[ $(job_field "$id" JobState) == RUNNING && $(job_field "$id" Restarts) -ge 1 ]] &&
        grep -q "resumed from .* at step" "$out" && break
    sleep 0.2
done
"$LLMC" status "$OUT" >"$T/req.txt" 2>&1
"$LLMC" status --format=json "$OUT" >"$T/req.json" 2>&1
cat "$T/req.txt"
if grep -q "job $id RUNNING.*segment 2 (1 requeue" "$T/req.txt" && $PY "$HERE/check.py" segments "$T/req.json" 2 >"$T/check.txt" 2>&1; then
    ok "requeued job: segment 2 (1 requeue) in human and JSON"
else bad "requeued job segments" "$T/req.txt" "$T/check.txt" "$out" "$err"; fi

# ---- exit status by the job's end: running 0, a failed job 1 ----
"$LLMC" status "$OUT" >"$T/r0.txt" 2>&1; rc_run=$?
scancel "$id"
part=$(sinfo -h -o %P | head -n 1 | tr -d '*')
fid=$(cd "$T" && sbatch --parsable -p "$part" -N 1 -J failing -o /dev/null --wrap 'exit 3')
for ((i = 0; i < 150; i++)); do [[ $(job_field "$fid" JobState) == FAILED ]] && break; sleep 0.2; done
"$LLMC" status --job "$fid" "$OUT" >"$T/failed.txt" 2>&1; rc_f=$?
"$LLMC" status --format=json --job "$fid" "$OUT" >/dev/null 2>&1; rc_fj=$?
if [[ $rc_run -eq 0 && $rc_f -eq 1 && $rc_fj -eq 1 ]] && grep -q "^tiny_2node: FAILED" "$T/failed.txt"
then ok "exit status: running job 0, failed job (exit 3) 1 (human and JSON)"
else bad "exit status by job state (running $rc_run, failed $rc_f/$rc_fj)" "$T/r0.txt" "$T/failed.txt"; fi
finish
