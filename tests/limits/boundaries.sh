#!/bin/bash
# tests/limits/boundaries.sh CC_AND_FLAGS RUNTIME_INC COMPILER_INC — the include
# boundaries of the build (Makefile): with llmc-train's include paths a file that
# includes a compiler header does not compile, with llmc's one that includes a
# runtime header does not; each compiles with its own side's paths (so a failure
# is the boundary, not a broken probe). Run by `make test-boundaries` from the
# repository root. Prints "N passed, N failed".
set -u
CC=$1 RT=$2 CO=$3
T=$(mktemp -d /tmp/llmc-boundaries.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; [[ -f $T/err ]] && head -5 "$T/err"; fail=$((fail + 1)); }
probe() {   # header -> $T/probe.c including it from outside the tree
    printf '#include "%s"\nint llmc_probe(void) { return 0; }\n' "$1" >"$T/probe.c"
}
builds() { $CC $1 -c -o "$T/probe.o" "$T/probe.c" 2>"$T/err"; }

# compiler headers: diag.h (diagnostics), estimate.h; runtime headers: log.h, train_loop.h
for h in diag.h estimate.h; do
    probe "$h"
    builds "$CO" && ok "$h builds with llmc's include paths" || bad "$h does not build with llmc's include paths"
    if builds "$RT"; then bad "$h builds with llmc-train's include paths (the runtime could include the compiler)"
    elif grep -q "$h" "$T/err"; then ok "$h: a runtime file that includes it fails to build ($(grep -m1 -o 'fatal error: .*' "$T/err"))"
    else bad "$h: failed for another reason"; fi
done
for h in log.h train_loop.h; do
    probe "$h"
    builds "$RT" && ok "$h builds with llmc-train's include paths" || bad "$h does not build with llmc-train's include paths"
    if builds "$CO"; then bad "$h builds with llmc's include paths (the compiler could include the runtime)"
    elif grep -q "$h" "$T/err"; then ok "$h: a compiler file that includes it fails to build"
    else bad "$h: failed for another reason"; fi
done
# ... and no path around the include paths: no "../compiler/x.h" in the runtime
# (runtime/cuda/ reaches runtime/ by "../", which is its own side), none the other way
if grep -rnE '#[[:space:]]*include[[:space:]]*"[^"]*compiler/' runtime >"$T/err"; then bad "a runtime file names a compiler path"
else ok "no runtime file names a compiler/ path"; fi
if grep -rnE '#[[:space:]]*include[[:space:]]*"[^"]*(runtime/|\.\./)' compiler grammar >"$T/err"; then bad "a compiler file names a runtime path"
else ok "no compiler file names a runtime/ or ../ path"; fi
# both sides share contract/
probe plan_limits.h
builds "$RT" && builds "$CO" && ok "contract/plan_limits.h builds on both sides" || bad "contract/plan_limits.h"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
