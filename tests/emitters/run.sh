#!/bin/bash
# tests/emitters/run.sh EMIT_TEST LLMC [EMIT_TEST_SAN [LLMC_SAN]] — the emitters
# suite (make test-emitters).
#  1. emit_test: unit tests on hand-built plans (quoting, hostlists, templates,
#     emit_check positions, atomic output directory, injection property), and
#     again built with ASan+UBSan when EMIT_TEST_SAN is given.
#  2. every example and tests/emitters/plans/*.llm compiles (also with LLMC_SAN:
#     the same bytes); `bash -n` on every
#     emitted script; every JSON/YAML artifact parses and has what its consumer
#     needs (check_artifacts.py, Debian's /usr/bin/python3 with PyYAML).
#     The llmc job scripts' exit-status protocol with stand-in srun/scontrol
#     (job_protocol.sh: stops, requeues and failures, the early USR2 included).
#  3. hostile plans (tests/emitters/plans/hostile/*.llm, first line
#     "# expect: LINE:COL: MESSAGE") are rejected at that position, write
#     nothing, and run nothing.
#  4. real Slurm (root only): the two-node plan's slurm.conf + gres.conf bring
#     up both nodes IDLE with their GPUs (tests/slurm/cluster.sh), and
#     `sbatch --test-only` accepts the emitted script.
# Closes with "N passed, N failed".
set -u
EMIT_TEST=$(realpath "$1")
LLMC=$(realpath "$2")
ROOT=$(pwd)
PY=/usr/bin/python3
T=$(mktemp -d /tmp/emitters-test.XXXXXX)
SLURM_STATE=
cleanup() {
    if [[ -n $SLURM_STATE ]]; then bash "$ROOT/tests/slurm/cluster.sh" stop "$SLURM_STATE" >/dev/null 2>&1; fi
    rm -rf "$T"
}
trap cleanup EXIT
. "$ROOT/tests/lib.sh"   # ok, bad, finish
# fold a sub-run's closing "N passed, N failed" line into the totals
add_counts() {
    local line f
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
    if [[ -z $line ]]; then bad "$2: no result line"; return; fi
    pass=$((pass + ${line%% passed*}))
    f=${line#*, }
    fail=$((fail + ${f%% failed*}))
}

# 1. unit tests
mkdir -p "$T/unit"
"$EMIT_TEST" "$T/unit" >"$T/unit.log" 2>&1
grep -E '^(ok|FAIL|     )' "$T/unit.log"
add_counts "$T/unit.log" emit_test

# the same under ASan+UBSan (leaks, overflows, undefined behaviour abort it)
if [[ -n ${3:-} && -x $3 && $(realpath "$3") != "$EMIT_TEST" ]]; then
    mkdir -p "$T/unit-san"
    if "$(realpath "$3")" "$T/unit-san" >"$T/unit-san.log" 2>&1; then
        ok "emit_test under ASan+UBSan: $(tail -n 1 "$T/unit-san.log")"
    else
        bad "emit_test under ASan+UBSan"
        grep -vE '^ok' "$T/unit-san.log" | tail -n 30
    fi
fi

# 2. compile every plan that has a job
mkdir -p "$T/ex"
for p in examples/*.llm examples/*/*.llm tests/emitters/plans/*.llm; do
    [[ -f $p ]] || continue
    grep -qE '^job ' "$p" || continue
    name=$(basename "$p" .llm)
    if "$LLMC" "$p" -o "$T/ex/$name" >"$T/ex/$name.log" 2>&1; then
        ok "llmc $p -o DIR"
    else
        bad "llmc $p -o DIR"
        cat "$T/ex/$name.log"
    fi
done
while IFS= read -r s; do
    if bash -n "$s" 2>"$T/bash-n.log"; then ok "bash -n ${s#"$T"/}"; else bad "bash -n ${s#"$T"/}"; cat "$T/bash-n.log"; fi
done < <(find "$T/unit" "$T/ex" -name '*.slurm' | sort)
"$PY" tests/emitters/check_artifacts.py "$T/unit/out" "$T/unit/cpu" "$T/unit/lf" "$T/unit/multi" "$T"/ex/*/ \
    >"$T/artifacts.log" 2>&1
grep -E '^(ok|FAIL)' "$T/artifacts.log" | sed "s#$T/##"
add_counts "$T/artifacts.log" check_artifacts.py

# the llmc job scripts' exit-status protocol (stop, requeue, failure), with
# stand-in srun and scontrol: a CPU plan and a multi-node GPU plan
for name in tiny qwen72b_sft_llmc; do
    js=$(find "$T/ex/$name" -maxdepth 1 -name '*.slurm' | head -n 1)
    bash tests/emitters/job_protocol.sh "$js" "$T/ex/$name/plan.json" >"$T/proto-$name.log" 2>&1
    grep -E '^(ok|FAIL)' "$T/proto-$name.log" | sed "s#^\(ok  \|FAIL\) #&$name: #"
    add_counts "$T/proto-$name.log" "job_protocol.sh $name"
done

# every key the LLaMA-Factory emitter can write, every emitted YAML and its
# dataset_info.json against the list derived from LLaMA-Factory's source
# (tests/emitters/lf_keys.txt, its commit in the header; lf_keys_gen.py)
"$PY" tests/emitters/lf_keys_check.py tests/emitters/lf_keys.txt compiler/emit/emit_llamafactory.c \
    compiler/check/chat_templates.c "$T/unit/lf" "$T"/ex/ \
    >"$T/lfkeys.log" 2>&1
grep -E '^(ok|FAIL)' "$T/lfkeys.log" | sed "s#$T/##"
add_counts "$T/lfkeys.log" lf_keys_check.py

# Slurm on Kubernetes: every Slinky/Soperator artifact against the operators'
# CRD schemas and chart values recorded in tests/emitters/k8s_schema.json
# (commits in its "sources"; k8s_schema_gen.py), then violations introduced on purpose
k8s_dirs=$(grep -lE '^  slurm += (slinky|soperator)' examples/*.llm tests/emitters/plans/*.llm 2>/dev/null | xargs -r -n1 basename | sed "s#\.llm\$#/#; s#^#$T/ex/#")
"$PY" tests/emitters/k8s_check.py tests/emitters/k8s_schema.json $k8s_dirs >"$T/k8s.log" 2>&1
"$PY" tests/emitters/k8s_check.py --self-test tests/emitters/k8s_schema.json $k8s_dirs >>"$T/k8s.log" 2>&1
grep -E '^(ok|FAIL)' "$T/k8s.log" | sed "s#$T/##"
add_counts <(grep -E '^[0-9]+ passed' "$T/k8s.log" | awk '{p+=$1; f+=$3} END {print p " passed, " f " failed"}') k8s_check.py
[[ -n $k8s_dirs ]] && ok "k8s plans found: $(echo $k8s_dirs | wc -w)" || bad "no plan with slurm = slinky/soperator"

# recompiling into DIR replaces exactly the files llmc wrote there (its
# manifest, .llmc-output) and leaves everything else: shards, plans, checkpoints
R=$T/recompile
mkdir -p "$R"
listing() { (cd "$1" && find . -print0 | sort -z | xargs -0 stat -c '%n %F %s %a' ); }
if "$LLMC" examples/tiny/tiny.llm -o "$R/out" >"$T/re.log" 2>&1 &&
   diff <(grep -v '^#' "$R/out/.llmc-output" | sort) <(cd "$R/out" && find . -type f ! -name .llmc-output | sed 's#^\./##' | sort) >/dev/null; then
    ok "the manifest lists exactly the files llmc wrote"
else
    bad "the manifest does not list the files llmc wrote"; cat "$T/re.log" "$R/out/.llmc-output"
fi
mkdir -p "$R/out/shards" "$R/out/ckpt/step-100"
echo shard >"$R/out/shards/train-00000.bin"
echo weights >"$R/out/ckpt/step-100/model.safetensors"
cp examples/tiny/tiny.llm "$R/out/my_plan.llm"
echo edited >>"$R/out/plan.json"
if "$LLMC" examples/tiny/tiny.llm -o "$R/out" >"$T/re.log" 2>&1 &&
   [[ $(cat "$R/out/shards/train-00000.bin") == shard && $(cat "$R/out/ckpt/step-100/model.safetensors") == weights ]] &&
   cmp -s "$R/out/my_plan.llm" examples/tiny/tiny.llm; then
    ok "recompiling keeps shards, checkpoints and a plan kept in DIR"
else
    bad "recompiling lost files it did not write"; cat "$T/re.log"; ls -lAR "$R/out" | head -30
fi
"$LLMC" examples/tiny/tiny.llm -o "$R/fresh" >/dev/null 2>&1
diff -r -x shards -x ckpt -x my_plan.llm "$R/fresh" "$R/out" >"$T/re.diff" && ok "recompiling refreshes every file llmc wrote" ||
    { bad "recompiled files differ from a fresh compile"; head -20 "$T/re.diff"; }
# a file llmc no longer writes goes; one that it never wrote stays
"$LLMC" tests/emitters/plans/lf_sft.llm -o "$R/switch" >"$T/re.log" 2>&1
echo mine >"$R/switch/notes.txt"
if "$LLMC" examples/tiny/tiny.llm -o "$R/switch" >>"$T/re.log" 2>&1 && [[ ! -e $R/switch/llamafactory_train.yaml ]] &&
   [[ ! -e $R/switch/lf_job.slurm ]] && [[ -f $R/switch/tiny_job.slurm && $(cat "$R/switch/notes.txt") == mine ]] &&
   diff -r -x notes.txt "$R/fresh" "$R/switch" >/dev/null; then
    ok "files of the previous output that the new one lacks are removed, others kept"
else
    bad "switching plans in one DIR"; cat "$T/re.log"; ls -A "$R/switch"
fi
# one job, then two (a subdirectory each), then one again: the job
# subdirectories go, except one holding a file llmc did not write
# (the second job runs a train block of its own: two jobs may not write one output directory)
{ cat examples/tiny/tiny.llm
  sed -n '/^train tiny_sft {/,/^}/p' examples/tiny/tiny.llm |
      sed -e 's/^train tiny_sft {/train second_sft {/' -e 's|"../../out/tiny-run"|"../../out/tiny-run-2"|'
  printf '\njob second {\n  run     = second_sft\n  cluster = local\n  nodes   = 1\n  time    = 10 min\n}\n'; } >"$R/two.llm"
cp -r examples/tiny/tokenizer examples/tiny/data "$R/" 2>/dev/null
"$LLMC" "$R/two.llm" -o "$R/jobs" >"$T/re.log" 2>&1
echo keep >"$R/jobs/second/keep.txt"
if [[ -f $R/jobs/tiny_job/plan.json && -f $R/jobs/second/second.slurm ]] && grep -qx 'second/plan.json' "$R/jobs/.llmc-output" &&
   "$LLMC" examples/tiny/tiny.llm -o "$R/jobs" >>"$T/re.log" 2>&1 && [[ ! -e $R/jobs/tiny_job ]] &&
   [[ $(ls -A "$R/jobs/second") == keep.txt ]] && [[ -f $R/jobs/plan.json ]]; then
    ok "job subdirectories are replaced and removed like files"
else
    bad "job subdirectories"; cat "$T/re.log"; ls -AR "$R/jobs" | head -20
fi
# a file in the way that llmc did not write: refused, DIR untouched
"$LLMC" examples/tiny/tiny.llm -o "$R/way" >/dev/null 2>&1
sed -i '/^gres.conf$/d' "$R/way/.llmc-output"
echo "the admin's own" >"$R/way/gres.conf"
before=$(listing "$R/way"; cat "$R/way/.llmc-output")
"$LLMC" examples/tiny/tiny.llm -o "$R/way" >"$T/re.log" 2>&1; rc=$?
after=$(listing "$R/way"; cat "$R/way/.llmc-output")
if [[ $rc -eq 2 ]] && grep -qF "$R/way/gres.conf exists and llmc did not write it (it is not listed in .llmc-output); not replacing it" "$T/re.log" &&
   [[ $before == "$after" ]] && ! ls -A "$R" | grep -q llmc-; then
    ok "a file llmc did not write is never replaced; DIR is left as it was"
else
    bad "a file in the way (exit $rc)"; cat "$T/re.log"
fi
# a directory without the manifest is refused unless empty; an empty one is taken
mkdir -p "$R/foreign" "$R/empty"; echo x >"$R/foreign/x"
"$LLMC" examples/tiny/tiny.llm -o "$R/foreign" >"$T/re.log" 2>&1; rc=$?
[[ $rc -eq 2 && $(ls -A "$R/foreign") == x ]] && grep -q "not written by llmc" "$T/re.log" && ok "a directory llmc did not write is refused" || bad "foreign directory (exit $rc)"
"$LLMC" examples/tiny/tiny.llm -o "$R/empty" >"$T/re.log" 2>&1 && diff -r "$R/fresh" "$R/empty" >/dev/null && ok "an empty directory is written" || bad "empty directory"
# an old llmc's marker (no list): its files are replaced, nothing else is touched
"$LLMC" examples/tiny/tiny.llm -o "$R/legacy" >/dev/null 2>&1
printf 'This directory was written by llmc. It is replaced as a whole by the next\n`llmc PLAN -o DIR`; do not keep other files in it.\n' >"$R/legacy/.llmc-output"
echo mine >"$R/legacy/mine.txt"
"$LLMC" examples/tiny/tiny.llm -o "$R/legacy" >"$T/re.log" 2>&1 && [[ $(cat "$R/legacy/mine.txt") == mine ]] &&
    diff -r -x mine.txt "$R/fresh" "$R/legacy" >/dev/null && ok "an older llmc's output is taken over" || { bad "older marker"; cat "$T/re.log"; }
# a symbolic link planted as a job subdirectory is not followed
"$LLMC" "$R/two.llm" -o "$R/plant" >/dev/null 2>&1
mkdir -p "$R/elsewhere"; echo precious >"$R/elsewhere/plan.json"
rm -rf "$R/plant/second"; ln -s "$R/elsewhere" "$R/plant/second"
"$LLMC" "$R/two.llm" -o "$R/plant" >"$T/re.log" 2>&1; rc=$?
[[ $rc -eq 2 && $(cat "$R/elsewhere/plan.json") == precious ]] && ok "a link in place of a job directory is refused" || { bad "planted link (exit $rc)"; cat "$T/re.log"; }
"$LLMC" examples/tiny/tiny.llm -o "$R/plant" >"$T/re.log" 2>&1
[[ $(cat "$R/elsewhere/plan.json") == precious && -L $R/plant/second ]] && ok "removing old job files does not follow a planted link" || { bad "stale removal followed a link"; cat "$T/re.log"; }

# the tiny plan's relative paths are rewritten for plan.json's directory
if [[ -f "$T/ex/tiny/plan.json" ]]; then
    mkdir -p "$T/rel/a/b"
    "$LLMC" examples/tiny/tiny.llm -o "$T/rel/a/b/tiny" >/dev/null 2>&1
    tok=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokenizer"]["path"])' "$T/rel/a/b/tiny/plan.json")
    if [[ -f "$T/rel/a/b/tiny/$tok/tokenizer.json" ]]; then
        ok "plan.json's relative tokenizer path resolves from its own directory ($tok)"
    else
        bad "plan.json's relative tokenizer path '$tok' does not resolve from $T/rel/a/b/tiny"
    fi
fi

# llmc built with ASan+UBSan writes the same bytes for every plan
if [[ -n ${4:-} && -x $4 && $(realpath "$4") != "$LLMC" ]]; then
    mkdir -p "$T/san"   # same depth as $T/ex/NAME: relative paths must agree
    for d in "$T"/ex/*/; do
        name=$(basename "$d")
        p=$(ls examples/"$name".llm examples/*/"$name".llm tests/emitters/plans/"$name".llm 2>/dev/null | head -n 1)
        [[ -n $p ]] || continue
        if "$(realpath "$4")" "$p" -o "$T/san/$name" >"$T/san-$name.log" 2>&1 && diff -r "$d" "$T/san/$name" >/dev/null; then
            ok "llmc under ASan+UBSan: $p, same bytes"
        else
            bad "llmc under ASan+UBSan: $p"
            tail -n 20 "$T/san-$name.log"
        fi
    done
fi

# a cluster declared by node count (site_a100.llm): the admin's slurm.conf is
# used as it is, so no snippet is written, and a note says what was not checked
if [[ -f $T/ex/site_a100/plan.json && -f $T/ex/site_a100/site_pt.slurm && ! -e $T/ex/site_a100/slurm.conf &&
      ! -e $T/ex/site_a100/gres.conf ]] && ! grep -qE '^(slurm|gres)\.conf$' "$T/ex/site_a100/.llmc-output" &&
    grep -qF "note: cluster 'site' is declared by node count: no slurm.conf or gres.conf snippet is written" "$T/ex/site_a100.log" &&
    grep -qF "not checked: node names, CPUs per node (cpus_per_task defaults to 1), memory per node" "$T/ex/site_a100.log"; then
    ok "a cluster by node count: no slurm.conf/gres.conf, a note on what was not checked"
else
    bad "a cluster by node count: no slurm.conf/gres.conf, a note on what was not checked"
    ls -A "$T/ex/site_a100"; cat "$T/ex/site_a100.log"
fi

# without `output` the run goes to runs/TRAIN inside the compiled directory
# (plan.json and the LLaMA-Factory YAML), wherever that is compiled from
mkdir -p "$T/noout/plans"
sed '/^  output    = /d' tests/emitters/plans/slurm2.llm >"$T/noout/plans/pt.llm"
sed '/^  output    = /d' tests/emitters/plans/slurm2_lf.llm >"$T/noout/plans/lf.llm"
if (cd "$T/noout/plans" && "$LLMC" pt.llm -o ../out/pt && "$LLMC" lf.llm -o ../out/lf) >"$T/noout.log" 2>&1 &&
    [[ $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["output"]["dir"])' "$T/noout/out/pt/plan.json") == runs/pt ]] &&
    grep -qx 'output_dir: "runs/pt_lf"' "$T/noout/out/lf/llamafactory_train.yaml"; then
    ok "without output: runs/TRAIN relative to the compiled directory (plan.json, LLaMA-Factory YAML)"
else
    bad "without output: runs/TRAIN relative to the compiled directory"
    cat "$T/noout.log"; grep -n '"dir"' "$T/noout/out/pt/plan.json"; grep -n output_dir "$T/noout/out/lf/llamafactory_train.yaml"
fi

# a model block without a shape takes it from the readable config.json
# (transformers 5: rope_theta inside rope_parameters)
if [[ -f $T/ex/model_from_config/plan.json ]] && "$PY" - "$T/ex/model_from_config/plan.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["model"]
want = {"arch": "llama", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
        "vocab": 128256, "max_context": 8192, "rope_theta": 500000, "rms_eps": 1e-05}
sys.exit(0 if all(m.get(k) == v for k, v in want.items()) else 1)
PY
then
    ok "a model without a shape takes it from config.json (rope_parameters.rope_theta = 500000)"
else
    bad "a model without a shape takes it from config.json"
    grep -A14 '"model"' "$T/ex/model_from_config/plan.json" | head -20
fi

# a LLaMA-Factory run longer than its time limit: the script asks for USR2 to
# the batch shell and requeues itself; save_steps keeps a save inside every
# tenth of a segment (the estimate's step time); requeue off: the estimator's
# warning and no --signal; an rm full run over several limits: an error
# (LLaMA-Factory does not resume it)
sed -e 's/^  time    = 12 h/  time    = 10 min/' -e "s#^use \"../../../#use \"$ROOT/#" \
    tests/emitters/plans/lf_sft.llm >"$T/lf_short.llm"
if "$LLMC" "$T/lf_short.llm" -o "$T/lf_short" >"$T/lf_short.log" 2>&1 && ! grep -q "warning: .*time limits" "$T/lf_short.log" &&
    lead=$(sed -n 's/^#SBATCH --signal=B:USR2@\([0-9]*\)$/\1/p' "$T/lf_short"/*.slurm) && [[ -n $lead ]] &&
    grep -q '^#SBATCH --requeue$' "$T/lf_short"/*.slurm && "$PY" - "$T/lf_short" "$lead" <<'PY'
import json, sys, yaml
d, lead = sys.argv[1], int(sys.argv[2])
y = yaml.safe_load(open(d + "/llamafactory_train.yaml"))
step = json.load(open(d + "/plan.json"))["estimate"]["step_seconds"]
# at most a tenth of the segment (10 min less the lead) between saves, and the largest such count
sys.exit(0 if y["save_steps"] * step <= 0.1 * (600 - lead) < (y["save_steps"] + 1) * step else 1)
PY
then
    ok "LLaMA-Factory run longer than the limit: --signal=B:USR2@$lead, --requeue, save_steps within a tenth of a segment"
else
    bad "LLaMA-Factory run longer than the limit: --signal=B:USR2, --requeue, save_steps within a tenth of a segment"
    cat "$T/lf_short.log"; grep -h -e SBATCH -e save_steps "$T/lf_short"/* 2>/dev/null
fi
sed -e 's/^  time    = 10 min/  time    = 10 min\n  requeue = false/' "$T/lf_short.llm" >"$T/lf_noreq.llm"
if "$LLMC" "$T/lf_noreq.llm" -o "$T/lf_noreq" >"$T/lf_noreq.log" 2>&1 &&
    grep -q "warning: run may not finish inside the time limit: .*and requeue is off" "$T/lf_noreq.log" &&
    ! grep -q -- '--signal' "$T/lf_noreq"/*.slurm; then
    ok "LLaMA-Factory run longer than the limit with requeue = false: a warning, no --signal"
else
    bad "LLaMA-Factory run longer than the limit with requeue = false: a warning, no --signal"
    cat "$T/lf_noreq.log"
fi
sed -e 's/^  time    = 6 h/  time    = 10 min/' -e "s#^use \"../../../#use \"$ROOT/#" tests/emitters/plans/lf_rm.llm >"$T/lf_rm_long.llm"
"$LLMC" check "$T/lf_rm_long.llm" >"$T/lf_rm_long.log" 2>&1; rc=$?
if [[ $rc -eq 1 ]] && grep -q "error: run '[a-z_]*' needs [0-9]* time limits, but LLaMA-Factory cannot resume a freeze rm run" "$T/lf_rm_long.log"; then
    ok "an rm freeze run over several time limits is an error (LLaMA-Factory does not resume rm full/freeze)"
else
    bad "an rm freeze run over several time limits is an error (exit $rc)"
    cat "$T/lf_rm_long.log"
fi

# 3. hostile plans: rejected where they say, nothing written, nothing run
mkdir -p "$T/cwd"
for p in tests/emitters/plans/hostile/*.llm; do
    expect=$(sed -n '1s/^# expect: //p' "$p")
    rc=0
    (cd "$T/cwd" && "$LLMC" "$ROOT/$p" -o "$T/hostile-out") >"$T/hostile.log" 2>&1 || rc=$?
    if [[ $rc -eq 1 ]] && grep -qF "$ROOT/$p:$expect" "$T/hostile.log" && [[ ! -e "$T/hostile-out" ]] &&
        [[ -z $(find "$T" "$ROOT" -maxdepth 3 -name PWNED 2>/dev/null) ]]; then
        ok "hostile $(basename "$p"): rejected at $expect"
    else
        bad "hostile $(basename "$p"): expected exit 1 and '$expect', nothing written (exit $rc)"
        cat "$T/hostile.log"
    fi
    rm -rf "$T/hostile-out"
done

# 4. real Slurm: the emitted snippets bring the nodes up, sbatch takes the script
if [[ $(id -u) -ne 0 || ! -f tests/slurm/cluster.sh ]]; then
    echo "note: real-Slurm checks skipped (need root and tests/slurm/cluster.sh)"
elif [[ ! -f "$T/ex/slurm2/slurm.conf" ]]; then
    bad "real Slurm: tests/emitters/plans/slurm2.llm did not compile"
else
    SLURM_STATE="$T/slurm"
    if bash tests/slurm/cluster.sh start "$SLURM_STATE" "$T/ex/slurm2/slurm.conf" "$T/ex/slurm2/gres.conf" \
        >"$T/slurm-start.log" 2>&1; then
        ok "the emitted slurm.conf + gres.conf start a two-node Slurm"
        export SLURM_CONF="$SLURM_STATE/slurm.conf"
        sinfo -N -h -o '%N %t %G' >"$T/sinfo.log" 2>&1
        if [[ $(grep -cE '^hgx00[12] idle gpu:h100_80gb:8' "$T/sinfo.log") -eq 2 ]]; then
            ok "both nodes IDLE with gpu:h100_80gb:8"
        else
            bad "both nodes IDLE with gpu:h100_80gb:8"
            cat "$T/sinfo.log"
        fi
        # as a user would: from the compiled directory
        if (cd "$T/ex/slurm2" && mkdir -p logs/pair && sbatch --test-only pair_pt.slurm) >"$T/sbatch.log" 2>&1 &&
            grep -q 'to start at' "$T/sbatch.log"; then
            ok "sbatch --test-only accepts the emitted script ($(head -c 80 "$T/sbatch.log"))"
        else
            bad "sbatch --test-only accepts the emitted script"
            cat "$T/sbatch.log"
        fi
        # the sbatch escape hatches (tests/emitters/plans/site_escape.llm: --exclude,
        # --switches, --gpus-per-task, free-form lines): sbatch takes them, and
        # the excluded node is not the one it would start on
        if (cd "$T/ex/site_escape" && mkdir -p logs/escape && sbatch --test-only escape_pt.slurm) >"$T/sbatch-esc.log" 2>&1 &&
            grep -q 'to start at' "$T/sbatch-esc.log" && grep -q 'on nodes hgx001' "$T/sbatch-esc.log"; then
            ok "sbatch --test-only accepts --exclude, --switches, --gpus-per-task and the extra lines (hgx001)"
        else
            bad "sbatch --test-only accepts the escape-hatch script"
            cat "$T/sbatch-esc.log"
        fi
        # a script asking for more than the nodes have is refused: the check is real
        sed 's/--gres=gpu:h100_80gb:8/--gres=gpu:h100_80gb:9/' "$T/ex/slurm2/pair_pt.slurm" >"$T/ex/slurm2/too_many.slurm"
        if (cd "$T/ex/slurm2" && sbatch --test-only too_many.slurm) >"$T/sbatch-bad.log" 2>&1; then
            bad "sbatch --test-only refuses 9 GPUs per node"
            cat "$T/sbatch-bad.log"
        else
            ok "sbatch --test-only refuses 9 GPUs per node (the test can fail)"
        fi
        # The script's protocol on a real run: submitted from another directory
        # (plan found through scontrol's Command=); USR2 sent to the job's steps
        # (as --signal=USR2@T does, here at once with scancel) reaches all 16
        # ranks, they exit 3, the script requeues the job, and the second start
        # completes it. Slurm holds a requeued job for 120 s; the test makes it
        # eligible at once.
        mkdir -p "$T/ex/logs/pair"
        export LLMC_STAND_IN_LOG="$T/stand-in.log"
        jid=$(cd "$T/ex" && LLMC_TRAIN="$ROOT/tests/emitters/stand_in_trainer.sh" sbatch --parsable slurm2/pair_pt.slurm 2>"$T/sbatch-run.log")
        for ((i = 0; i < 60; i++)); do
            [[ $(grep -c '^waiting' "$LLMC_STAND_IN_LOG" 2>/dev/null) -eq 16 ]] && break
            sleep 0.5
        done
        scancel --signal=USR2 "$jid"
        state=
        for ((i = 0; i < 60; i++)); do
            state=$(scontrol show job "$jid" 2>/dev/null | grep -oE 'JobState=[A-Z]+|Restarts=[0-9]+' | tr '\n' ' ')
            [[ $state == *"Restarts=1"* && $state == *PENDING* ]] && break
            sleep 1
        done
        scontrol update JobId="$jid" StartTime=now >/dev/null 2>&1
        for ((i = 0; i < 60; i++)); do
            state=$(scontrol show job "$jid" 2>/dev/null | grep -oE 'JobState=[A-Z]+|Restarts=[0-9]+' | tr '\n' ' ')
            [[ $state == *COMPLETED* || $state == *FAILED* || $state == *CANCELLED* ]] && break
            sleep 1
        done
        plan="$T/ex/slurm2/plan.json"
        if [[ $state == *COMPLETED* && $state == *"Restarts=1"* ]] &&
            [[ $(grep -c "^run $plan rank=.* restart=0 master=127.0.0.1:" "$LLMC_STAND_IN_LOG") -eq 16 ]] &&
            [[ $(grep -c "^run $plan rank=.* restart=1 master=127.0.0.1:" "$LLMC_STAND_IN_LOG") -eq 16 ]] &&
            [[ $(grep -c "^prepare $plan rank=0" "$LLMC_STAND_IN_LOG") -eq 2 ]] &&
            [[ $(grep -c "^usr2 rank=" "$LLMC_STAND_IN_LOG") -eq 16 ]] &&
            grep -q "requeueing job $jid" "$T/ex/logs/pair/pair_pt-$jid.err"; then
            ok "USR2 reaches all 16 ranks; their exit 3 requeues the job; it runs again and completes ($state)"
        else
            bad "exit 3 from the trainer requeues the job; it runs again and completes (job ${jid:-?}: $state)"
            cat "$T/sbatch-run.log" "$T"/ex/logs/pair/*.err 2>/dev/null | tail -n 40
        fi
        # A rank that fails (exit 1) is a failure, not a stop: srun kills the
        # other ranks at once, the job fails, nothing is requeued.
        export LLMC_STAND_IN_LOG="$T/stand-in-crash.log"
        jid=$(cd "$T/ex" && LLMC_TRAIN="$ROOT/tests/emitters/stand_in_trainer.sh" LLMC_STAND_IN_CRASH_RANK=5 \
            sbatch --parsable slurm2/pair_pt.slurm 2>"$T/sbatch-crash.log")
        for ((i = 0; i < 60; i++)); do
            state=$(scontrol show job "$jid" 2>/dev/null | grep -oE 'JobState=[A-Z]+|Restarts=[0-9]+' | tr '\n' ' ')
            [[ $state == *COMPLETED* || $state == *FAILED* || $state == *CANCELLED* ]] && break
            sleep 1
        done
        if [[ $state == *FAILED* && $state == *"Restarts=0"* ]] && (( i < 30 )) &&
            grep -q "llmc: the trainer failed" "$T/ex/logs/pair/pair_pt-$jid.err"; then
            ok "a failing rank fails the job within seconds, no requeue ($state)"
        else
            bad "a failing rank fails the job within seconds, no requeue (job ${jid:-?}: $state after ${i}s)"
            cat "$T/ex/logs/pair/pair_pt-$jid.err" 2>/dev/null | tail -n 20
        fi

        # The LLaMA-Factory script: one launcher per node, NODE_RANK = node index,
        # torchrun's environment set, run in the compiled directory.
        export LLMC_STAND_IN_LOG="$T/stand-in-lf.log"
        jid=$(cd "$T/ex" && LLAMAFACTORY_CLI="$ROOT/tests/emitters/stand_in_llamafactory.sh" \
            sbatch --parsable slurm2_lf/pair_lf.slurm 2>"$T/sbatch-lf.log")
        for ((i = 0; i < 60; i++)); do
            state=$(scontrol show job "$jid" 2>/dev/null | grep -oE 'JobState=[A-Z]+' | tr '\n' ' ')
            [[ $state == *COMPLETED* || $state == *FAILED* || $state == *CANCELLED* ]] && break
            sleep 1
        done
        want="nnodes=2 nproc=8 force=1 master=127.0.0.1:$((20000 + jid % 20000))"
        if [[ $state == *COMPLETED* ]] &&
            grep -q "^train llamafactory_train.yaml node_rank=0 $want host=hgx001 cwd=$T/ex/slurm2_lf\$" "$LLMC_STAND_IN_LOG" &&
            grep -q "^train llamafactory_train.yaml node_rank=1 $want host=hgx002 cwd=$T/ex/slurm2_lf\$" "$LLMC_STAND_IN_LOG" &&
            [[ $(wc -l <"$LLMC_STAND_IN_LOG") -eq 2 ]]; then
            ok "LLaMA-Factory script: one launcher per node, NODE_RANK 0/1, torchrun env, compiled dir"
        else
            bad "LLaMA-Factory script: one launcher per node (job ${jid:-?}: $state)"
            cat "$T/sbatch-lf.log" "$LLMC_STAND_IN_LOG" "$T"/ex/logs/pair/*lf* 2>/dev/null | tail -n 20
        fi

        # A site's plan (tests/emitters/plans/site_a100.llm: untyped GRES,
        # --exclusive, mail, comment, NCCL/UCX/OMP variables, setup lines, an
        # Apptainer image): sbatch takes it, and it runs on both nodes with a
        # stand-in apptainer. Every step goes through the container with the
        # plan's image and mounts, and every rank sees the plan's environment
        # and what the setup lines exported.
        if (cd "$T/ex/site_a100" && mkdir -p logs/site && sbatch --test-only site_pt.slurm) >"$T/sbatch-site.log" 2>&1 &&
            grep -q 'to start at' "$T/sbatch-site.log"; then
            ok "sbatch --test-only accepts the site plan's script (untyped GRES, --exclusive, mail, comment)"
        else
            bad "sbatch --test-only accepts the site plan's script"
            cat "$T/sbatch-site.log"
        fi
        export LLMC_STAND_IN_LOG="$T/stand-in-site.log"
        mkdir -p "$T/ex/logs/site"
        jid=$(cd "$T/ex" && LLMC_TRAIN=$(command -v true) LLMC_APPTAINER="$ROOT/tests/emitters/stand_in_apptainer.sh" \
            sbatch --parsable site_a100/site_pt.slurm 2>"$T/sbatch-site-run.log")
        for ((i = 0; i < 60; i++)); do
            state=$(scontrol show job "$jid" 2>/dev/null | grep -oE 'JobState=[A-Z]+' | tr '\n' ' ')
            [[ $state == *COMPLETED* || $state == *FAILED* || $state == *CANCELLED* ]] && break
            sleep 1
        done
        info=$(scontrol show job "$jid" 2>/dev/null)
        sd="$T/ex/site_a100"
        want="image=/mnt/data-hps/images/llmc-train.sif nv=1 bind=$sd:$sd,$T/ex/logs/site:$T/ex/logs/site,/mnt/data-hps:/mnt/data-hps,/scratch:/scratch:rw"
        want_env="ifname=ib0 debug=WARN omp=8 setup=module loaded job=1"
        if [[ $state == *COMPLETED* ]] &&
            [[ $(grep -c "^container $want cmd=true rank=0 $want_env\$" "$LLMC_STAND_IN_LOG") -eq 1 ]] &&
            [[ $(grep -c "^container $want cmd=bash rank=[0-9]* $want_env\$" "$LLMC_STAND_IN_LOG") -eq 16 ]] &&
            [[ $(wc -l <"$LLMC_STAND_IN_LOG") -eq 17 ]] &&
            grep -q 'Comment=qwen7b pt: site test' <<<"$info" && grep -q 'MailUser=ml-infra@example.org' <<<"$info" &&
            grep -q 'MailType=END,FAIL' <<<"$info" && grep -q 'OverSubscribe=NO' <<<"$info"; then
            ok "the site plan runs: prepare and 16 ranks in the container with its mounts, env and setup ($state)"
        else
            bad "the site plan runs in the container (job ${jid:-?}: $state)"
            cat "$T/sbatch-site-run.log" "$LLMC_STAND_IN_LOG" "$T"/ex/logs/site/*.err 2>/dev/null | tail -n 30
            grep -E 'Comment|Mail|OverSubscribe' <<<"$info"
        fi
        unset SLURM_CONF LLMC_STAND_IN_LOG
    else
        bad "the emitted slurm.conf + gres.conf start a two-node Slurm"
        cat "$T/slurm-start.log"
    fi
fi

finish
