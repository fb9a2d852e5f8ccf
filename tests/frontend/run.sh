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
pass=0 fail=0
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
hostile empty 0 "" "$TMP/empty.llm"
hostile fifo 1 "missing required keys" <(printf 'job j {}\n')
for f in garbage nul utf8 nested unclosed braces; do
    run fmt "$TMP/$f.llm" >/dev/null 2>&1; rc=$?
    if crashed $rc || [[ $rc -eq 0 ]]; then bad "fmt on hostile $f: exit $rc"; else ok; fi
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

# Docs: the man page renders without warnings; language.md documents every key.
if command -v groff >/dev/null; then
    w=$(LC_ALL=C groff -man -ww -z docs/llmc.1 2>&1)
    [[ -z $w ]] && ok || bad "docs/llmc.1: $w"
fi
missing=""
for k in $(awk '/_keys\[\] = \{/ {on=1} on {print} /\};/ {on=0}' compiler/check.c | grep -o '"[a-z_0-9]*"' | tr -d '"' | sort -u); do
    grep -q "\`$k\`" docs/language.md || missing="$missing $k"
done
[[ -z $missing ]] && ok || bad "docs/language.md does not document:$missing"

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

echo "${LABEL:+$LABEL: }$pass passed, $fail failed"
[[ $fail -eq 0 ]]
