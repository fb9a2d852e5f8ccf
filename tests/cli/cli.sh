#!/bin/bash
# tests/cli/cli.sh LLMC LLMC_TRAIN [LLMC_TRAIN_CUDA] — see tests/cli/test.mk.
set -u
LLMC=$(realpath "$1"); TRAIN=$(realpath "$2"); CUDA=${3:-}
# the build directory the binaries come from (build, or build/san under make SAN=1,
# whose SAN=1 the make calls below inherit through MAKEFLAGS): its objects are the targets
OBJ=$(realpath --relative-to="$(cd "$(dirname "$0")/../.." && pwd)" "$(dirname "$LLMC")")/compiler/front/arena.o
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/cli-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
PLAN=$ROOT/examples/tiny/tiny.llm
MAKE=${MAKE:-make}

# help BIN ARGS...: exit 0, a usage on stdout, nothing on stderr
help() {
    "$@" >"$T/h.out" 2>"$T/h.err"; local rc=$?
    if [[ $rc -eq 0 ]] && grep -q "usage:" "$T/h.out" && [[ ! -s $T/h.err ]]; then ok "$(basename "$1") ${*:2}: exit 0, usage on stdout"
    else bad "$(basename "$1") ${*:2} (exit $rc)" "$T/h.out" "$T/h.err"; fi
}
for a in --help -h help "check --help" "fmt --help" "explain --help" "status --help" "submit --help" "cancel --help" "logs --help" "init-model --help" "$PLAN --help" "check -h"; do
    # shellcheck disable=SC2086
    help "$LLMC" $a
done
for a in --help help "run --help" "prepare --help" "tokenize --help" "verify --help" "check-plan --help" "generate --help" "export --help" "run -h"; do
    # shellcheck disable=SC2086
    help "$TRAIN" $a
done
if [[ -n $CUDA && -x $CUDA ]]; then
    for a in --help "run --help" "prepare --help" "params --help" "bench --help" "check --help" "verify --help" "tokenize --help"; do
        # shellcheck disable=SC2086
        help "$CUDA" $a
    done
fi
"$LLMC" --version | grep -qx "llmc [0-9.]*" && "$LLMC" check --version | grep -qx "llmc [0-9.]*" \
    && "$TRAIN" --version | grep -qx "llmc-train [0-9.]*" && ok "--version: llmc, llmc check, llmc-train" || bad "--version"

# usage errors: exit 2, the option or value named, the --help hint
usage_err() {   # WHAT EXPECTED-TEXT CMD...
    local what=$1 want=$2; shift 2
    "$@" >"$T/u.out" 2>"$T/u.err"; local rc=$?
    if [[ $rc -eq 2 ]] && grep -qF -- "$want" "$T/u.err" && grep -q "try '.* --help'" "$T/u.err"; then ok "$what: exit 2, \"$want\""
    else bad "$what (exit $rc)" "$T/u.err"; fi
}
usage_err "llmc check --format xml" "--format: 'xml' is not one of human, json" "$LLMC" check --format xml "$PLAN"
usage_err "llmc check --color=sometimes" "--color: 'sometimes' is not one of auto, always, never" "$LLMC" check --color=sometimes "$PLAN"
usage_err "llmc explain --format yaml" "'yaml'" "$LLMC" explain --format yaml "$PLAN"
usage_err "llmc -o without a value" "option '-o' needs a value" "$LLMC" "$PLAN" -o
usage_err "llmc --output without a value" "option '--output' needs a value" "$LLMC" "$PLAN" --output
usage_err "llmc check --frobnicate" "unknown option '--frobnicate'" "$LLMC" check --frobnicate "$PLAN"
usage_err "llmc fmt -o" "-o/--output is for compiling" "$LLMC" fmt -o x "$PLAN"
usage_err "llmc check --check" "'--check' is an option of llmc fmt" "$LLMC" check --check "$PLAN"
usage_err "llmc status --watch=0" "not '0'" "$LLMC" status --watch=0 "$T"
usage_err "llmc-train run --stop-after abc" "--stop-after: bad integer 'abc'" "$TRAIN" run --stop-after abc plan.json
usage_err "llmc-train run --stop-after=-1" "--stop-after: bad integer '-1'" "$TRAIN" run --stop-after=-1 plan.json
usage_err "llmc-train run --frobnicate" "unknown option '--frobnicate'" "$TRAIN" run --frobnicate plan.json
usage_err "llmc-train run, two plans" "not 'b.json' too" "$TRAIN" run a.json b.json
usage_err "llmc-train tokenize --tokenizer (no value)" "option '--tokenizer' needs a value" "$TRAIN" tokenize --tokenizer
usage_err "llmc-train tokenize --decode --tokens" "exclude each other" "$TRAIN" tokenize --tokenizer x --decode --tokens
usage_err "llmc-train verify a b" "not 'b' too" "$TRAIN" verify a b
usage_err "llmc-train prepare, LLMC_SHARD_TOKENS=12k" "LLMC_SHARD_TOKENS: bad integer '12k'" env LLMC_SHARD_TOKENS=12k "$TRAIN" prepare plan.json
usage_err "llmc-train prepare, LLMC_SHARD_TOKENS=0" "LLMC_SHARD_TOKENS: bad integer '0'" env LLMC_SHARD_TOKENS=0 "$TRAIN" prepare plan.json
env LLMC_THREADS=8x "$TRAIN" prepare --shard-tokens=0 plan.json > /dev/null 2> "$T/threads.err"
if grep -q "LLMC_THREADS='8x' is not a thread count from 1 to 4096: using the [0-9]* CPUs" "$T/threads.err"; then
    ok "LLMC_THREADS=8x: one warning, the granted CPUs"
else bad "LLMC_THREADS=8x: one warning, the granted CPUs" "$T/threads.err"; fi
usage_err "llmc-train prepare --threads abc" "--threads: bad integer 'abc' (1 to 1024)" "$TRAIN" prepare --threads abc plan.json
usage_err "llmc-train prepare --shard-tokens=0" "--shard-tokens: bad integer '0'" "$TRAIN" prepare --shard-tokens=0 plan.json
usage_err "llmc-train prepare --max-record-bytes 10" "--max-record-bytes: bad integer '10'" "$TRAIN" prepare --max-record-bytes 10 plan.json
usage_err "llmc-train prepare, two plans" "unexpected argument 'b.json'" "$TRAIN" prepare a.json b.json
usage_err "llmc-train prepare --frob" "unknown option '--frob'" "$TRAIN" prepare --frob plan.json
usage_err "llmc-train generate --max-new=0" "--max-new: bad integer '0' (1 to 4096)" "$TRAIN" generate d --max-new=0 q
usage_err "llmc-train generate, no question" "at least one question" "$TRAIN" generate d
usage_err "llmc-train verify --frob" "unknown option '--frob'" "$TRAIN" verify --frob x
if [[ -n $CUDA && -x $CUDA ]]; then
    usage_err "llmc-train-cuda bench --batch x" "--batch: bad integer 'x'" "$CUDA" bench --model tiny --batch x
    usage_err "llmc-train-cuda check --lr=abc" "--lr: bad number 'abc'" "$CUDA" check --lr=abc
fi

# both spellings: --opt=v and --opt v give the same result
"$LLMC" "$PLAN" --output "$T/o1" >/dev/null 2>&1; r1=$?
"$LLMC" "$PLAN" --output="$T/o2" >/dev/null 2>&1; r2=$?
"$LLMC" -o"$T/o3" "$PLAN" >/dev/null 2>&1; r3=$?
[[ $r1 -eq 0 && $r2 -eq 0 && $r3 -eq 0 ]] && diff -r "$T/o1" "$T/o2" >/dev/null && diff -r "$T/o1" "$T/o3" >/dev/null \
    && ok "--output DIR, --output=DIR and -oDIR (options after the plan too): the same files" || bad "--output spellings ($r1 $r2 $r3)"
printf 'train t { epoch = 1 }\n' >"$T/bad.llm"
"$LLMC" check --format json "$T/bad.llm" >"$T/j1" 2>/dev/null; "$LLMC" check "$T/bad.llm" --format=json >"$T/j2" 2>/dev/null
[[ -s $T/j1 ]] && cmp -s "$T/j1" "$T/j2" && ok "--format json == --format=json (diagnostics JSON on stdout)" || bad "--format spellings" "$T/j1" "$T/j2"

# NO_COLOR (https://no-color.org): auto colour off on a terminal; --color=always still colours
esc=$(printf '\033\\[')
tty_run() { script -qec "$1" /dev/null 2>/dev/null; }
tty_run "'$LLMC' check '$T/bad.llm'" >"$T/c1"
tty_run "NO_COLOR=1 '$LLMC' check '$T/bad.llm'" >"$T/c2"
tty_run "NO_COLOR=1 '$LLMC' check --color=always '$T/bad.llm'" >"$T/c3"
tty_run "NO_COLOR= '$LLMC' check '$T/bad.llm'" >"$T/c4"
if grep -q "$esc" "$T/c1" && ! grep -q "$esc" "$T/c2" && grep -q "error" "$T/c2" && grep -q "$esc" "$T/c3" && grep -q "$esc" "$T/c4"; then
    ok "NO_COLOR: colour on a terminal without it, none with NO_COLOR=1, --color=always wins, empty NO_COLOR ignored"
else bad "NO_COLOR" "$T/c1" "$T/c2" "$T/c3"; fi

# log_every in the plan reaches plan.json (the llmc backend reads it)
python3 - "$PLAN" "$T/le.llm" <<'PYEOF'
import re, sys
src = open(sys.argv[1]).read()
out, n = re.subn(r"(\ntrain \w+ \{\n)", r"\1  log_every = 5 steps\n", src, count=1)
assert n == 1, "no train block"
open(sys.argv[2], "w").write(out)
PYEOF
mkdir -p "$T/lewd" && cp -r "$(dirname "$PLAN")"/. "$T/lewd/"
cp "$T/le.llm" "$T/lewd/le.llm"
(cd "$T/lewd" && "$LLMC" le.llm -o "$T/le-out") >"$T/le.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["output"]["log_every"] == 5 else 1)' "$T/le-out/plan.json" \
    && ok "log_every = 5 steps (llmc backend): plan.json output.log_every 5" || bad "log_every into plan.json (exit $rc)" "$T/le.log"

# the build: the caller's CC and CFLAGS kept (ours appended), -Werror on unless WERROR=0
cd "$ROOT" || exit 1
line=$(CFLAGS=-fstack-protector-strong $MAKE -s -n -B "$OBJ" 2>/dev/null | grep -- ' -c ' | head -n 1)
[[ $line == *-fstack-protector-strong* && $line == *-Wall* && $line == *-Werror* ]] \
    && ok "CFLAGS from the environment kept, ours (-Wall, -Werror) appended" || bad "environment CFLAGS: $line"
line=$($MAKE -s -n -B CFLAGS=-O3 "$OBJ" 2>/dev/null | grep -- ' -c ' | head -n 1)
[[ $line == *-O3* && $line == *-std=c11* ]] && ok "make CFLAGS=-O3: kept, with -std=c11 appended" || bad "command-line CFLAGS: $line"
line=$($MAKE -s -n -B WERROR=0 "$OBJ" 2>/dev/null | grep -- ' -c ' | head -n 1)
[[ -n $line && $line != *-Werror* && $line == *-Wall* ]] && ok "WERROR=0: -Wall without -Werror" || bad "WERROR=0: $line"
line=$(CC=my-cc $MAKE -s -n -B "$OBJ" 2>/dev/null | grep -- ' -c ' | head -n 1)
[[ $line == my-cc\ * ]] && ok "CC from the environment" || bad "CC from the environment: $line"

# make install DESTDIR PREFIX: a working tree
D=$T/dest
if $MAKE -s install DESTDIR="$D" PREFIX=/usr >"$T/inst.log" 2>&1; then ok "make install DESTDIR=... PREFIX=/usr"
else bad "make install" "$T/inst.log"; fi
[[ -x $D/usr/bin/llmc && -x $D/usr/bin/llmc-train && -f $D/usr/share/man/man1/llmc.1 && -f $D/usr/share/man/man1/llmc-train.1 \
   && -f $D/usr/share/llmc/templates/job_llmc.slurm.tmpl ]] \
    && ok "installed: bin/llmc, bin/llmc-train, man1/llmc.1, man1/llmc-train.1, share/llmc/templates" || bad "installed files" "$T/inst.log"
# the installed llmc, run from elsewhere, writes the same files as the build's
mkdir -p "$T/elsewhere" && cp -r "$(dirname "$PLAN")"/. "$T/elsewhere/"
(cd "$T/elsewhere" && "$D/usr/bin/llmc" "$(basename "$PLAN")" -o out-installed && "$LLMC" "$(basename "$PLAN")" -o out-build) >"$T/ie.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && diff -r "$T/elsewhere/out-installed" "$T/elsewhere/out-build" >"$T/ie.diff" \
    && [[ -s $T/elsewhere/out-installed/plan.json ]] \
    && ok "the installed llmc compiles the example plan from another directory (templates compiled in): same bytes" \
    || bad "installed llmc (exit $rc)" "$T/ie.log" "$T/ie.diff"
"$D/usr/bin/llmc-train" check-plan "$T/elsewhere/out-installed/plan.json" >"$T/icp.log" 2>&1 \
    && ok "the installed llmc-train accepts the plan.json the installed llmc wrote" || bad "installed llmc-train" "$T/icp.log"
MANWIDTH=80 man -l "$D/usr/share/man/man1/llmc-train.1" 2>/dev/null | grep -q "ISO 8601" \
    && ok "the installed llmc-train(1) renders" || bad "man llmc-train"
if $MAKE -s uninstall DESTDIR="$D" PREFIX=/usr >/dev/null 2>&1 && [[ ! -e $D/usr/bin/llmc && ! -e $D/usr/share/man/man1/llmc.1 ]]; then
    ok "make uninstall removes them"
else bad "make uninstall"; fi

# plan.json's enum keys of the CUDA backend, read by the one plan reader: a bad
# spelling is refused naming the key and the accepted ones; an absent offload
# (a plan written before it) is none
"$LLMC" "$PLAN" -o "$T/enum" >/dev/null 2>&1
for kv in "parallel offload bogus" "train recompute partial" "train attention sdpa"; do
    set -- $kv
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p[sys.argv[2]][sys.argv[3]]=sys.argv[4]; json.dump(p,open(sys.argv[5],"w"))' \
        "$T/enum/plan.json" "$1" "$2" "$3" "$T/enum/bad.json"
    "$TRAIN" check-plan "$T/enum/bad.json" >/dev/null 2>"$T/enum.err"; rc=$?
    if [[ $rc -eq 1 ]] && grep -q "$1.$2: '$3' is not one of" "$T/enum.err"; then ok "check-plan refuses $1.$2 = $3, naming the key"
    else bad "check-plan $1.$2 = $3 (exit $rc)" "$T/enum.err"; fi
done
# precision = pure_bf16 is LLaMA-Factory's (the checker refuses it on backend
# llmc): its plan.json says so, and llmc-train refuses such a plan cleanly,
# naming train.precision, in check-plan and in run; the same plan at bf16 it takes
if "$LLMC" "$ROOT/tests/emitters/plans/lf_pure_bf16.llm" -o "$T/pure" >"$T/pure.log" 2>&1 &&
   grep -q '^pure_bf16: true$' "$T/pure/llamafactory_train.yaml"; then
    for cmd in check-plan run; do
        "$TRAIN" "$cmd" "$T/pure/plan.json" >/dev/null 2>"$T/pure.err"; rc=$?
        if [[ $rc -ge 1 && $rc -le 2 ]] && grep -q "train.precision: 'pure_bf16' is not one of bf16, fp16, fp32" "$T/pure.err"
        then ok "llmc-train $cmd refuses a pure_bf16 plan.json, naming train.precision (exit $rc)"
        else bad "llmc-train $cmd of a pure_bf16 plan.json (exit $rc)" "$T/pure.err"; fi
    done
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["train"]["precision"]="bf16"; json.dump(p,open(sys.argv[2],"w"))' \
        "$T/pure/plan.json" "$T/pure/bf16.json"
    "$TRAIN" check-plan "$T/pure/bf16.json" >/dev/null 2>&1 && ok "check-plan takes that plan at precision bf16" \
        || bad "check-plan of the pure_bf16 plan at bf16"
else
    bad "llmc tests/emitters/plans/lf_pure_bf16.llm: compile with pure_bf16: true" "$T/pure.log"
fi
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); del p["parallel"]["offload"]; json.dump(p,open(sys.argv[2],"w"))' \
    "$T/enum/plan.json" "$T/enum/old.json"
"$TRAIN" check-plan "$T/enum/old.json" >/dev/null 2>&1 && ok "check-plan takes a plan without parallel.offload" \
    || bad "check-plan of a plan without parallel.offload"

# -q: no notes (files not readable here), errors still shown; compile writes the same files
L=$ROOT/examples/qwen7b_lora.llm
"$LLMC" check "$L" >"$T/q0.out" 2>"$T/q0.err"; rc0=$?
"$LLMC" check -q "$L" >"$T/q1.out" 2>"$T/q1.err"; rc1=$?
"$LLMC" check --quiet --format json "$L" >"$T/q2.out" 2>"$T/q2.err"; rc2=$?
if [[ $rc0 -eq 0 && $rc1 -eq 0 && $rc2 -eq 0 ]] && grep -q "note: .* is not readable here" "$T/q0.err" \
   && [[ ! -s $T/q1.err && ! -s $T/q1.out && $(tr -d ' \n' <"$T/q2.out") == "[]" ]]
then ok "check -q / --quiet --format json: the notes not printed (exit 0)"
else bad "check -q (exit $rc0, $rc1, $rc2)" "$T/q0.err" "$T/q1.err" "$T/q2.out"; fi
"$LLMC" -q "$L" -o "$T/q-out" >"$T/q3.out" 2>"$T/q3.err"; rc=$?
"$LLMC" "$L" -o "$T/nq-out" >/dev/null 2>&1
[[ $rc -eq 0 && ! -s $T/q3.err ]] && diff -r "$T/q-out" "$T/nq-out" >/dev/null \
    && ok "llmc -q PLAN -o DIR: no notes, the same files" || bad "llmc -q PLAN -o DIR (exit $rc)" "$T/q3.err"
{ cat "$L"; echo "train broken { lr = }"; } >"$T/qbad.llm"
"$LLMC" check -q "$T/qbad.llm" >"$T/q4.out" 2>"$T/q4.err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "error:" "$T/q4.err" && ! grep -q "^[^ ]*: note:" "$T/q4.err" \
    && ok "check -q of a plan with an error: the error shown, no notes, exit 1" || bad "check -q with an error (exit $rc)" "$T/q4.err"

# --set BLOCK.KEY=VALUE (issue 34): the value lexed, parsed and checked like the
# file's, diagnostics pointing into the argument; on llmc, check and explain
"$LLMC" check --set train.batch=x "$PLAN" >"$T/s1.out" 2>"$T/s1.err"; rc=$?
if [[ $rc -eq 1 ]] && grep -q "^--set train.batch:1:19: error: 'batch' must be a count per gpu, found name 'x'" "$T/s1.err" \
   && grep -qF -- "1 | --set train.batch=x" "$T/s1.err"; then ok "check --set train.batch=x: exit 1, the error at the argument's column"
else bad "check --set train.batch=x (exit $rc)" "$T/s1.err"; fi
"$LLMC" check --set train.bach=4 "$PLAN" >/dev/null 2>"$T/s2.err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "^--set train.bach:1:13: error: unknown key 'bach' in train block 'tiny_sft'; did you mean 'batch'?" "$T/s2.err" \
    && ok "--set train.bach=4: unknown key, did you mean 'batch'" || bad "--set train.bach (exit $rc)" "$T/s2.err"
"$LLMC" check --set trian.lr=1e-3 "$PLAN" >/dev/null 2>"$T/s3.err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "no block 'trian'; did you mean 'train'?" "$T/s3.err" \
    && ok "--set trian.lr: no such block, did you mean 'train'" || bad "--set trian.lr (exit $rc)" "$T/s3.err"
"$LLMC" check --set 'train.lr=1 } job x {' "$PLAN" >/dev/null 2>"$T/s4.err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "expected one value after '='" "$T/s4.err" \
    && ok "--set with a value that closes the block: refused, one value only" || bad "--set injection (exit $rc)" "$T/s4.err"
"$LLMC" check --set train.lr=1e-3 --set train.lr=2e-3 "$PLAN" >/dev/null 2>"$T/s5.err"; rc=$?
[[ $rc -eq 2 ]] && grep -q "the key is given twice" "$T/s5.err" && ok "--set of one key twice: exit 2" || bad "--set twice (exit $rc)" "$T/s5.err"
usage_err "llmc fmt --set" "--set and --sweep are for llmc, check and explain" "$LLMC" fmt --set train.lr=1 "$PLAN"
usage_err "llmc check --sweep" "--sweep compiles one output per point" "$LLMC" check --sweep train.lr=1,2 "$PLAN"
(cd "$ROOT/examples/tiny" && "$LLMC" tiny.llm -o "$T/set-out" --set train.lr=3e-4 --set 'tiny_job.time=2 h') >"$T/s6.log" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); sys.exit(0 if abs(p["train"]["lr"]-3e-4)<1e-12 else 1)' "$T/set-out/plan.json" \
   && grep -q -- "--time=0-02:00:00" "$T/set-out/"*.slurm; then ok "llmc --set train.lr=3e-4 --set tiny_job.time=2 h: plan.json's lr, the script's --time"
else bad "compile with --set (exit $rc)" "$T/s6.log"; fi
"$LLMC" explain --set 'train.context=64' "$PLAN" >"$T/s7.out" 2>&1; rc=$?
"$LLMC" explain "$PLAN" >"$T/s7b.out" 2>&1
[[ $rc -eq 0 ]] && ! cmp -s "$T/s7.out" "$T/s7b.out" && grep -q "context 64" "$T/s7.out" \
    && ok "explain --set train.context=64: the estimate at context 64" || bad "explain --set (exit $rc)" "$T/s7.out"

# --sweep: one output directory per point (two keys: every pair), a table, exit 1 if a point has errors
(cd "$ROOT/examples/tiny" && "$LLMC" tiny.llm -o "$T/sw" --sweep 'train.lr=1e-3,2e-3,4e-3') >"$T/sw.out" 2>"$T/sw.err"; rc=$?
if [[ $rc -eq 0 && -f $T/sw/lr=1e-3/plan.json && -f $T/sw/lr=2e-3/plan.json && -f $T/sw/lr=4e-3/plan.json ]] \
   && [[ $(grep -c "tiny_job .* yes " "$T/sw.out") -eq 3 ]] && head -n 1 "$T/sw.out" | grep -q "point .*memory/device .*fits .*time to train .*tokens/s" \
   && python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["train"]["lr"]==2e-3 else 1)' "$T/sw/lr=2e-3/plan.json"
then ok "--sweep train.lr=1e-3,2e-3,4e-3: three outputs, each with its lr, a table of three rows"
else bad "--sweep lr (exit $rc)" "$T/sw.out" "$T/sw.err"; fi
(cd "$ROOT/examples/tiny" && "$LLMC" tiny.llm -o "$T/sw2" --sweep 'train.lr=1e-3,x' --sweep 'train.epochs=1,2') >"$T/sw2.out" 2>"$T/sw2.err"; rc=$?
if [[ $rc -eq 1 && -d $T/sw2/lr=1e-3,epochs=1 && -d $T/sw2/lr=1e-3,epochs=2 && ! -e $T/sw2/lr=x,epochs=1 ]] \
   && [[ $(grep -c "not written (1 error)" "$T/sw2.out") -eq 2 ]] && grep -q "^llmc: sweep point lr=x,epochs=2:" "$T/sw2.err" \
   && grep -q "^--sweep train.lr:1:18: error" "$T/sw2.err"
then ok "two --sweep: four points, the two with lr=x not written, named, exit 1"
else bad "--sweep x2 (exit $rc)" "$T/sw2.out" "$T/sw2.err"; fi
(cd "$ROOT/examples/tiny" && "$LLMC" tiny.llm -o "$T/sw3" --format json --sweep 'train.lr=1e-3,2e-3') >"$T/sw3.out" 2>"$T/sw3.err"; rc=$?
[[ $rc -eq 0 ]] && python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"]; sys.exit(0 if len(p)==2 and p[1]["values"]=={"train.lr":"2e-3"} and p[0]["jobs"][0]["estimate"]["fits"] else 1)' "$T/sw3.out" \
    && ok "--sweep --format json: the points, their values and estimates" || bad "--sweep json (exit $rc)" "$T/sw3.out" "$T/sw3.err"
usage_err "--sweep with an empty value" "an empty value" "$LLMC" "$PLAN" -o "$T/sw4" --sweep train.lr=1,,2
usage_err "--sweep with a value twice" "two points are both 'lr=1'" "$LLMC" "$PLAN" -o "$T/sw4" --sweep train.lr=1,1
usage_err "three --sweep" "at most two --sweep" "$LLMC" "$PLAN" -o "$T/sw4" --sweep train.lr=1,2 --sweep train.epochs=1,2 --sweep job.nodes=1,2
usage_err "--set and --sweep of one key" "the key is given twice" "$LLMC" "$PLAN" -o "$T/sw4" --set train.lr=1 --sweep train.lr=1,2

# llmc-train export (issue 34): any verified checkpoint as the HF model the run
# writes at its end; the last step's export is the run's final/ byte for byte
# (LoRA: the adapter too); a mid-run export loads in the PyTorch model of
# tests/cpu (check_hf_load.py's reader) and differs from the final one
ROOT_SAVE=$ROOT; . "$ROOT/tests/e2e/tiny_examples.sh"; ROOT=$ROOT_SAVE
E=$T/export && mkdir -p "$E" && tiny_examples "$E" && cp "$PLAN" "$E/examples/tiny/tiny.llm"
ex_run() {   # NAME SET...: compile the tiny plan with 40 steps, a checkpoint every 20, and train it
    local name=$1; shift
    (cd "$E" && "$LLMC" -q examples/tiny/tiny.llm -o "p-$name" --set 'train.max_steps=40' --set 'train.checkpoint_every=20 steps' \
        --set "train.output=\"run-$name\"" "$@" && env LLMC_THREADS=2 "$TRAIN" prepare "p-$name/plan.json" &&
        env LLMC_THREADS=2 "$TRAIN" run "p-$name/plan.json") >"$E/$name.log" 2>&1
}
if ex_run full; then
    (cd "$E" && "$TRAIN" export --plan p-full/plan.json run-full/checkpoints e40) >"$E/x1.log" 2>&1; rc=$?
    [[ $rc -eq 0 ]] && grep -q "exported step 40 (run-full/checkpoints/step-00000040) to e40" "$E/x1.log" && diff -r "$E/e40" "$E/run-full/final" >/dev/null \
        && ok "export of the last checkpoint (via latest) = the run's final/, byte for byte" || bad "export step 40 (exit $rc)" "$E/x1.log"
    (cd "$E" && "$TRAIN" export --plan p-full/plan.json run-full/checkpoints/step-00000020 e20 && "$TRAIN" verify e20) >"$E/x2.log" 2>&1; rc=$?
    if [[ $rc -eq 0 ]] && ! cmp -s "$E/e20/model.safetensors" "$E/e40/model.safetensors" && cmp -s "$E/e20/config.json" "$E/e40/config.json" &&
       /usr/bin/python3 - "$ROOT/tests/cpu" "$E/e20" "$E/e40" >>"$E/x2.log" 2>&1 <<'PYEOF'
import sys, torch
sys.path.insert(0, sys.argv[1])
from check_hf_load import local_logits
ids = torch.tensor([[1, 5, 9, 14, 3, 7, 2, 11]])
a, b = local_logits(sys.argv[2], ids), local_logits(sys.argv[3], ids)
assert a.shape == b.shape and a.shape[:2] == (1, 8) and torch.isfinite(a).all(), a.shape
assert (a - b).abs().max().item() > 1e-3, "step 20 and step 40 give the same logits"
PYEOF
    then ok "export of a mid-run checkpoint (step 20): verified manifest, loads in the HF-layout PyTorch model, not the final weights"
    else bad "export step 20 (exit $rc)" "$E/x2.log"; fi
    (cd "$E" && "$TRAIN" export --plan p-full/plan.json run-full/checkpoints e40) >"$E/x3.log" 2>&1; rc=$?
    [[ $rc -eq 2 ]] && grep -q "e40 exists: the export writes a new directory" "$E/x3.log" && ok "export into an existing directory: exit 2" || bad "export over e40 (exit $rc)" "$E/x3.log"
    cp -r "$E/run-full/checkpoints/step-00000020" "$E/damaged" && printf 'x' >>"$E/damaged/model.safetensors"
    (cd "$E" && "$TRAIN" export --plan p-full/plan.json damaged ed) >"$E/x4.log" 2>&1; rc=$?
    [[ $rc -eq 1 && ! -e $E/ed ]] && grep -q "damaged/model.safetensors" "$E/x4.log" \
        && ok "export of a damaged checkpoint: the manifest refuses it first (exit 1), nothing written" || bad "export of a damaged checkpoint (exit $rc)" "$E/x4.log"
    # without --plan: the plan the checkpoint records (absolute path, SHA-256)
    (cd / && "$TRAIN" export "$E/run-full/checkpoints/step-00000020" "$E/e20b") >"$E/x7.log" 2>&1; rc=$?
    [[ $rc -eq 0 ]] && diff -r "$E/e20" "$E/e20b" >/dev/null && grep -q '"plan": {"path": "'"$(realpath "$E/p-full/plan.json")"'", "sha256": "' \
        "$E/run-full/checkpoints/step-00000020/state.json" \
        && ok "export without --plan, from another directory: the recorded plan, the same bytes as with --plan" || bad "export without --plan (exit $rc)" "$E/x7.log"
    cp "$E/p-full/plan.json" "$E/plan.keep" && printf ' ' >>"$E/p-full/plan.json"
    (cd "$E" && "$TRAIN" export run-full/checkpoints ex) >"$E/x8.log" 2>&1; rc=$?
    [[ $rc -eq 2 && ! -e $E/ex ]] && grep -q "which has changed since" "$E/x8.log" && grep -q "pass --plan" "$E/x8.log" \
        && ok "export without --plan of a plan changed since: refused (exit 2), naming the plan and --plan" || bad "changed plan (exit $rc)" "$E/x8.log"
    mv "$E/plan.keep" "$E/p-full/plan.json"
    cp -r "$E/run-full/checkpoints/step-00000020" "$E/old20" && python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); del s["plan"]; json.dump(s,open(sys.argv[1],"w"))' "$E/old20/state.json"
    (cd "$E/old20" && sha256sum model.safetensors optimizer.safetensors state.json > MANIFEST.sha256)
    (cd "$E" && "$TRAIN" export old20 ex) >"$E/x9.log" 2>&1; rc=$?
    [[ $rc -eq 2 && ! -e $E/ex ]] && grep -q "records no plan" "$E/x9.log" \
        && ok "export without --plan of a checkpoint that records none: exit 2, asks for --plan" || bad "checkpoint without a plan (exit $rc)" "$E/x9.log"
    usage_err "llmc-train export --adapter of a full plan" "the plan trains no LoRA adapter" "$TRAIN" export --plan "$E/p-full/plan.json" --adapter "$E/ad" "$E/run-full/checkpoints" "$E/ex"
else bad "tiny run for export" "$E/full.log"; fi
# explain and compile count the steps from the rows prepare packed when its shards
# are known (--shards DIR; OUT/shards when compiling into OUT): the trainer's
# ceil(epochs x rows / global batch), not tokens / context (issue 34)
if [[ -f $E/p-full/shards/index.json ]]; then
    (cd "$E" && "$LLMC" explain examples/tiny/tiny.llm --shards p-full/shards) >"$E/ex1.out" 2>&1; rc1=$?
    (cd "$E" && "$LLMC" explain examples/tiny/tiny.llm) >"$E/ex0.out" 2>&1
    (cd "$E" && "$LLMC" -q examples/tiny/tiny.llm -o p-full) >"$E/ex2.out" 2>&1; rc2=$?
    if [[ $rc1 -eq 0 && $rc2 -eq 0 ]] && python3 - "$E/p-full/shards/index.json" "$E/p-full/plan.json" "$E/ex1.out" "$E/ex0.out" >"$E/ex.log" 2>&1 <<'PYEOF'
import json, math, re, sys
rows = json.load(open(sys.argv[1]))["n_rows"]
p = json.load(open(sys.argv[2]))
want = math.ceil(p["train"]["epochs"] * rows / p["train"]["global_batch"])
assert p["estimate"]["steps_total"] == want, (p["estimate"]["steps_total"], want)
steps = lambda f: int(re.search(r"^  steps +([0-9,]+)", open(f).read(), re.M).group(1).replace(",", ""))
assert steps(sys.argv[3]) == want, (steps(sys.argv[3]), want)
assert steps(sys.argv[4]) < want, "without the shards: counted from tokens / context (fewer)"
assert "rows of the prepared shards" in open(sys.argv[3]).read()
print(want)
PYEOF
    then ok "steps from prepare's rows: explain --shards and a compile into OUT with OUT/shards give the trainer's $(cat "$E/ex.log") steps"
    else bad "steps from the shards (exit $rc1, $rc2)" "$E/ex.log" "$E/ex1.out"; fi
    (cd "$E" && "$LLMC" explain examples/tiny/tiny.llm --set train.context=64 --shards p-full/shards) >"$E/ex3.out" 2>&1; rc=$?
    [[ $rc -eq 0 ]] && grep -q "warning: p-full/shards/index.json: context 128, the plan's 64: its rows are not used for the steps" "$E/ex3.out" \
        && ok "shards prepared at another context: a warning, the steps from the tokens" || bad "stale shards (exit $rc)" "$E/ex3.out"
fi
if ex_run lora --set train.method=lora --set train.lora_rank=4; then
    (cd "$E" && "$TRAIN" export --plan p-lora/plan.json run-lora/checkpoints l40) >"$E/x5.log" 2>&1; rc=$?
    [[ $rc -eq 0 ]] && diff -r "$E/l40" "$E/run-lora/final" >/dev/null && diff -r "$E/l40-adapter" "$E/run-lora/adapter" >/dev/null \
        && ok "LoRA: export of the last checkpoint = final/ (merged) and adapter/ (PEFT), byte for byte" || bad "LoRA export (exit $rc)" "$E/x5.log"
    (cd "$E" && "$TRAIN" export --plan p-full/plan.json run-lora/checkpoints lx) >"$E/x6.log" 2>&1; rc=$?
    [[ $rc -eq 1 ]] && grep -q "is p-full/plan.json the plan this checkpoint was trained with?" "$E/x6.log" \
        && ok "export of a LoRA checkpoint with the full plan: refused, naming the plan (exit 1)" || bad "export with the wrong plan (exit $rc)" "$E/x6.log"
else bad "tiny LoRA run for export" "$E/lora.log"; fi

# each man page section once (llmc.1 had two FILES sections), and -q in llmc.1
dup=$(for m in "$ROOT/docs/llmc.1" "$ROOT/docs/llmc-train.1"; do grep '^\.SH ' "$m" | sort | uniq -d | sed "s|^|${m##*/}: |"; done)
[[ -z $dup ]] && grep -q 'quiet' "$ROOT/docs/llmc.1" && ok "man pages: each section once; llmc.1 documents -q" \
    || { echo "$dup" >"$T/dup.txt"; bad "man page sections repeated" "$T/dup.txt"; }

# make on a machine without re2c/lemon: PATH of every tool but the missing ones; make
# names them and `make deps`, and builds nothing (issue 34, item 5)
nopath() { mkdir -p "$T/path-$1"; local f b; for f in /usr/bin/* /bin/*; do b=${f##*/}
    [[ " ${*:2} " == *" $b "* || -e $T/path-$1/$b ]] || ln -s "$f" "$T/path-$1/$b"; done; }
for miss in "re2c lemon" "lemon"; do
    nopath "${miss// /-}" $miss
    (cd "$ROOT" && env PATH="$T/path-${miss// /-}" "$MAKE" -s BUILD="$T/nt-${miss// /-}") >"$T/nt.out" 2>"$T/nt.err"; rc=$?
    if [[ $rc -ne 0 ]] && grep -qx "make: missing build tools: $miss; \`make deps\` installs them (.ci/deps.sh, as root or with sudo)" "$T/nt.err" \
       && ! grep -q "Error 127" "$T/nt.err" && [[ -z $(find "$T/nt-${miss// /-}" -name '*.c' 2>/dev/null) ]]
    then ok "make without $miss: names them and \`make deps\` (exit $rc), nothing generated"
    else bad "make without $miss (exit $rc)" "$T/nt.err"; fi
done

# ---- path policy (contract/path_policy.h; issue 28 item 1): what llmc check and
# llmc-train refuse to write into, normalised the same way by both
mkdir -p "$T/pp" && cp -r "$ROOT/examples/tiny/tokenizer" "$ROOT/examples/tiny/data" "$T/pp/" \
    && sed 's#^\(  output *= \).*#\1"run"#' "$ROOT/examples/tiny/tiny.llm" >"$T/pp/tiny.llm"
ln -sfn /etc "$T/pp/etc-link"
pp_check() {   # OUTPUT WANT: llmc check of the tiny plan with that output: exit 1 and WANT, or exit 0 when WANT is empty
    sed "s#^\(  output *= \).*#\1\"$1\"#" "$T/pp/tiny.llm" >"$T/pp/t.llm"
    "$LLMC" check --color=never "$T/pp/t.llm" >"$T/pp.out" 2>"$T/pp.err"; local rc=$?
    if { [[ -z $2 && $rc -eq 0 ]]; } || { [[ -n $2 && $rc -eq 1 ]] && grep -qF -- "$2" "$T/pp.err"; }
    then ok "llmc check output = \"$1\": ${2:-accepted}"
    else bad "llmc check output = \"$1\" (exit $rc, wanted: ${2:-accepted})" "$T/pp.err"; fi
}
pp_check "." "'output' \".\" resolves to \"$(realpath "$T/pp")\", which is the directory of plan file"
pp_check "data" "which is the directory of dataset 'arith', file"
pp_check "tokenizer/" "which is the tokenizer directory"
pp_check "etc-link/run" "resolves to \"/etc/run\", which is inside the system directory /etc"
pp_check "run/../../../../../../../../../../../../../../../../.." "resolves to \"/\", which is the file-system root"
pp_check "/tmp/.." "'output' \"/tmp/..\" resolves to \"/\", which is the file-system root"
pp_check "run" ""
"$LLMC" "$T/pp/tiny.llm" -o "$T/pp/out" >/dev/null 2>&1
pp_plan() {   # NAME SECT.KEY VALUE WANT: check-plan of the compiled plan with SECT.KEY = VALUE
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); s,k=sys.argv[2].split("."); p[s][k]=sys.argv[3]; json.dump(p,open(sys.argv[4],"w"))' \
        "$T/pp/out/plan.json" "$2" "$3" "$T/pp/out/$1.json"
    "$TRAIN" check-plan "$T/pp/out/$1.json" >"$T/pp.out" 2>"$T/pp.err"; local rc=$?
    if [[ $rc -eq 1 ]] && grep -qF -- "$1.json: $2: \"$3\" $4" "$T/pp.err"
    then ok "check-plan $2 = \"$3\": refused"
    else bad "check-plan $2 = \"$3\" (exit $rc, wanted: $4)" "$T/pp.err"; fi
}
pp_plan root output.dir "/." 'resolves to "/", which is the file-system root'
pp_plan up output.dir "../../../../../../../../../../../../../../../../.." 'resolves to "/", which is the file-system root'
pp_plan etc checkpoint.dir "/etc" 'resolves to "/etc", which is the system directory /etc'
pp_plan link output.dir "../etc-link/x" 'resolves to "/etc/x", which is inside the system directory /etc'
pp_plan data output.dir "../data/" "resolves to \"$(realpath "$T/pp/data")\", which is the directory of a dataset file"
pp_plan tok output.dir "../tokenizer" 'resolves to'
pp_plan self output.dir "." "resolves to \"$(realpath "$T/pp/out")\", which is the directory of plan file"
pp_plan model model.path "/tmp/.." 'resolves to "/", the file-system root, not a model or tokenizer directory'
# a C1 control character (U+0085, U+009B) in any path plan.json names: refused by
# check-plan as llmc check refuses it, the character named, nothing raw in the message
for field in output.dir checkpoint.dir model.path tokenizer.path data.shards_dir datasets.file; do
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); s,k=sys.argv[2].split(".")
o = p[s][0] if s == "datasets" else p[s]
o[k] = (o[k] or "/m") + "\u0085x\u009b"
json.dump(p, open(sys.argv[3], "w"), ensure_ascii=False)' "$T/pp/out/plan.json" "$field" "$T/pp/out/c1.json"
    "$TRAIN" check-plan "$T/pp/out/c1.json" >/dev/null 2>"$T/pp.err"; rc=$?
    want="c1.json: ${field/datasets./datasets[0].}: contains a control character (U+0085 at offset"
    [[ $rc -eq 1 ]] && grep -qF "$want" "$T/pp.err" && ! LC_ALL=C grep -qP '\xc2[\x80-\x9f]' "$T/pp.err" &&
        ok "check-plan $field with U+0085: refused, the character named" || bad "check-plan $field with a C1 control (exit $rc)" "$T/pp.err"
done
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["data"]["context"]=p["model"]["max_context"]+1; json.dump(p,open(sys.argv[2],"w"))' \
    "$T/pp/out/plan.json" "$T/pp/out/ctx.json"
"$TRAIN" check-plan "$T/pp/out/ctx.json" >/dev/null 2>"$T/pp.err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "ctx.json: data.context: [0-9]* exceeds model.max_context ([0-9]*)" "$T/pp.err" \
    && ok "check-plan of a context over max_context: refused, as llmc check does" || bad "check-plan context > max_context (exit $rc)" "$T/pp.err"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["data"]["shards_dir"]="/usr/lib/llmc-shards"; json.dump(p,open(sys.argv[2],"w"))' \
    "$T/pp/out/plan.json" "$T/pp/out/shards.json"
"$TRAIN" prepare "$T/pp/out/shards.json" >/dev/null 2>"$T/pp.err"; rc=$?
[[ $rc -eq 2 && ! -e /usr/lib/llmc-shards ]] && grep -qF 'data.shards_dir: "/usr/lib/llmc-shards" resolves to "/usr/lib/llmc-shards", which is inside the system directory /usr' "$T/pp.err" \
    && ok "prepare with data.shards_dir in /usr: refused, nothing written" || bad "prepare into a system directory (exit $rc)" "$T/pp.err"
"$TRAIN" check-plan "$T/pp/out/plan.json" >/dev/null 2>"$T/pp.err" && ok "check-plan of the compiled plan (output run/): accepted" \
    || bad "check-plan of the compiled plan" "$T/pp.err"
# llmc-train run with output.dir "/." in a sandbox: a private mount namespace
# whose tmpfs is the root of a chroot holding llmc-train, its libraries and the
# prepared plan. Refused before anything is written: the sandbox's root holds
# only what the test put there (before the policy: checkpoints/, final/,
# metrics.jsonl, result.json).
if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null && command -v chroot >/dev/null; then
    "$TRAIN" prepare "$T/pp/out/plan.json" >/dev/null 2>&1
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["train"]["max_steps"]=2; p["train"]["epochs"]=None
p["output"]["dir"]="/."; p["checkpoint"]["dir"]="/./checkpoints"; json.dump(p,open(sys.argv[1],"w"))' "$T/pp/out/plan.json"
    mkdir -p "$T/sb/root"
    unshare -m --propagation private bash -c '
        R=$1 TRAIN=$2 PP=$3
        mount -t tmpfs tmpfs "$R" || exit 3
        mkdir -p "$R/bin" "$R/w" && cp "$TRAIN" "$R/bin/llmc-train" && cp -r "$PP/out" "$PP/tokenizer" "$PP/data" "$R/w/" || exit 3
        for l in $(ldd "$TRAIN" | grep -o "/[^ ]*"); do mkdir -p "$R${l%/*}" && cp -L "$l" "$R$l" || exit 3; done
        chroot "$R" /bin/llmc-train run /w/out/plan.json >"$R/../run.log" 2>&1; echo $? >"$R/../run.rc"
        ls -A "$R" >"$R/../root.ls"' sandbox "$T/sb/root" "$TRAIN" "$T/pp" 2>"$T/sb/setup.err"; src=$?
    # the sandbox's root: bin, w and the top directories of the libraries copied in
    want_ls=$( { printf 'bin\nw\n'; ldd "$TRAIN" | grep -o "/[^ ]*" | cut -d/ -f2; } | LC_ALL=C sort -u | tr '\n' ' ')
    if [[ $src -eq 0 && $(cat "$T/sb/run.rc") -ne 0 && $(LC_ALL=C sort "$T/sb/root.ls" | tr '\n' ' ') == "$want_ls" ]] \
       && grep -qF 'output.dir: "/." resolves to "/", which is the file-system root' "$T/sb/run.log"
    then ok "run with output.dir \"/.\" in a chroot on a tmpfs: refused (exit $(cat "$T/sb/run.rc")), nothing written at its root"
    else bad "run with output.dir \"/.\" in a sandbox (setup exit $src, run exit $(cat "$T/sb/run.rc" 2>/dev/null))" \
        "$T/sb/setup.err" "$T/sb/run.log" "$T/sb/root.ls"; fi
else
    echo "skip run with output.dir \"/.\" in a sandbox: needs root, unshare and chroot"
fi

# ---- the tokenizer checked at start (issue 28 item 3): check-plan refuses a tokenizer
# that is missing where it can be checked (its directory readable here) or that holds
# neither tokenizer.json nor tokenizer_config.json; run refuses at start before writing
# anything; a checkpoint does not depend on the tokenizer's absence or path
"$LLMC" "$T/pp/tiny.llm" -o "$T/pp/out2" >/dev/null 2>&1
tk_plan() {   # NAME TOKENIZER-PATH: a copy of the compiled plan with that tokenizer.path
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["tokenizer"]["path"]=sys.argv[2]; json.dump(p,open(sys.argv[3],"w"))' \
        "$T/pp/out2/plan.json" "$2" "$T/pp/out2/$1.json"
}
tk_plan nonexistent /nonexistent
"$TRAIN" check-plan "$T/pp/out2/nonexistent.json" >"$T/tk.out" 2>"$T/tk.err"; rc=$?
[[ $rc -eq 1 ]] && grep -qF 'tokenizer.path: "/nonexistent" does not exist (its directory "/" is readable here)' "$T/tk.err" \
    && ok "check-plan tokenizer.path = \"/nonexistent\": refused" || bad "check-plan of a missing tokenizer (exit $rc)" "$T/tk.err"
tk_plan remote /mnt/llmc-not-mounted-here/tokenizers/qwen
"$TRAIN" check-plan "$T/pp/out2/remote.json" >"$T/tk.out" 2>"$T/tk.err"; rc=$?
[[ $rc -eq 0 ]] && grep -qF 'tokenizer.path "/mnt/llmc-not-mounted-here/tokenizers/qwen": No such file or directory: not readable here, not checked' "$T/tk.out" \
    && ok "check-plan of a tokenizer on a file system not here: accepted with a note" || bad "check-plan of a remote tokenizer (exit $rc)" "$T/tk.out" "$T/tk.err"
mkdir -p "$T/pp/empty-tok"
tk_plan empty ../empty-tok
"$TRAIN" check-plan "$T/pp/out2/empty.json" >"$T/tk.out" 2>"$T/tk.err"; rc=$?
[[ $rc -eq 1 ]] && grep -qF 'tokenizer.path: "../empty-tok" holds neither tokenizer.json nor tokenizer_config.json' "$T/tk.err" \
    && ok "check-plan of a tokenizer directory without its files: refused" || bad "check-plan of an empty tokenizer directory (exit $rc)" "$T/tk.err"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["train"]["max_steps"]=4; p["checkpoint"]["every_steps"]=2; json.dump(p,open(sys.argv[1],"w"))' "$T/pp/out2/plan.json"
"$TRAIN" prepare "$T/pp/out2/plan.json" >/dev/null 2>&1
"$TRAIN" run "$T/pp/out2/plan.json" --stop-after 2 >"$T/tk1.log" 2>&1; rc1=$?
mv "$T/pp/tokenizer" "$T/pp/tokenizer.away"
rm -rf "$T/pp/run.before" && cp -a "$T/pp/run" "$T/pp/run.before"
"$TRAIN" run "$T/pp/out2/plan.json" >"$T/tk2.log" 2>&1; rc2=$?
if [[ $rc1 -eq 3 && $rc2 -ne 0 && $rc2 -ne 3 ]] && grep -qF 'tokenizer.path: "../tokenizer": No such file or directory' "$T/tk2.log" \
   && diff -r "$T/pp/run.before" "$T/pp/run" >/dev/null && ! grep -q 'step\|checkpoint' "$T/tk2.log"
then ok "run with its tokenizer gone: refused at start (exit $rc2), nothing written, the checkpoints untouched"
else bad "run without its tokenizer (exit $rc1, $rc2)" "$T/tk1.log" "$T/tk2.log"; fi
mv "$T/pp/tokenizer.away" "$T/pp/tokenizer"
"$TRAIN" run "$T/pp/out2/plan.json" >"$T/tk3.log" 2>&1; rc=$?
[[ $rc -eq 0 ]] && grep -q 'resumed from .* at step 2' "$T/tk3.log" && [[ -f $T/pp/run/final/tokenizer.json ]] \
    && ok "the tokenizer restored: resumed at step 2, exported with it" || bad "resume after the tokenizer was restored (exit $rc)" "$T/tk3.log"

# disk space checked at start (issue 28, "What to build" 3): a private 1 MB tmpfs
# holding the output and checkpoint directories cannot take one checkpoint and the
# export of the tiny model (1.5 MB): refused before the first step, with the figures
if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null; then
    mkdir -p "$T/small"
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["output"]["dir"]=sys.argv[3]; p["checkpoint"]["dir"]=sys.argv[3]+"/checkpoints"
json.dump(p,open(sys.argv[2],"w"))' "$T/pp/out2/plan.json" "$T/pp/out2/small.json" "$T/small/run"
    unshare -m --propagation private bash -c 'mount -t tmpfs -o size=1m tmpfs "$1" && "$2" run "$3"; echo "rc=$?"; ls -A "$1/run/checkpoints" 2>/dev/null | grep -v "^.run.lock$"' \
        sandbox "$T/small" "$TRAIN" "$T/pp/out2/small.json" >"$T/small.log" 2>&1
    if grep -qx "rc=1" "$T/small.log" \
       && grep -q "MB free on their file system; one checkpoint (.* MB) and the export (.* MB) need .* MB: free space or point checkpoint.dir and output.dir elsewhere" "$T/small.log" \
       && ! grep -q "step 1\b\|^step-" "$T/small.log"
    then ok "run on a file system too small for a checkpoint and the export: refused at start with the figures (exit 1)"
    else bad "run with too little space" "$T/small.log"; fi
else
    echo "skip run on a small tmpfs: needs root and unshare"
fi

finish cli
