#!/bin/bash
# tests/limits/boundaries.sh MAKE BUILD — the include boundaries of the build
# (compiler/build.mk, runtime/build.mk, runtime/cuda/build.mk), and at the end the
# source files' size (none over MAX_LINES lines). Every folder of
# compiler/ and runtime/ is compiled with the include paths of the folders it may
# use, so a header from any other folder, or from the other program, is not
# found. Probes are compiled with the build's own command line for an object of
# each folder (`make -n -B OBJ`), so what is tested is what the build does.
# USES below is the rule, written down independently of the Makefile: widening a
# folder's include paths means changing both (and README's layout table).
# Run by `make test-boundaries` from the repository root. Prints "N passed, N failed".
set -u
MAKE_CMD=$1 BUILD=$2
T=$(mktemp -d /tmp/llmc-boundaries.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
bad() { echo "FAIL $1"; [[ -s $T/err ]] && head -5 "$T/err"; fail=$((fail + 1)); }   # the failed build's first lines

# What each folder may include besides itself (the pipeline, one direction).
declare -A USES=(
    [compiler/front]=""
    [compiler/check]="compiler/front"
    [compiler/estimate]="compiler/check compiler/front"
    [compiler/emit]="compiler/estimate compiler/check compiler/front"
    [compiler/cli]="compiler/emit compiler/estimate compiler/check compiler/front"
    [runtime/base]=""
    [runtime/model]="runtime/base"
    [runtime/plan]="runtime/model runtime/base"
    [runtime/data]="runtime/plan runtime/model runtime/base"
    [runtime/store]="runtime/model runtime/base"
    [runtime/train]="runtime/data runtime/store runtime/plan runtime/model runtime/base"
    [runtime/cpu]="runtime/train runtime/data runtime/store runtime/plan runtime/model runtime/base"
    [runtime/cuda]="runtime/train runtime/data runtime/store runtime/plan runtime/model runtime/base"
    [runtime/cli]="runtime/cpu runtime/train runtime/data runtime/store runtime/plan runtime/model runtime/base"
)
COMPILER_DIRS="compiler/front compiler/check compiler/estimate compiler/emit compiler/cli"
RUNTIME_DIRS="runtime/base runtime/model runtime/plan runtime/data runtime/store runtime/train runtime/cpu runtime/cuda runtime/cli"

# The folders on disk are the ones above: a new folder needs its row.
on_disk=$(find compiler runtime -mindepth 1 -maxdepth 1 -type d | sort | tr '\n' ' ')
listed=$(tr ' ' '\n' <<<"$COMPILER_DIRS $RUNTIME_DIRS" | sort | tr '\n' ' ')
[[ $on_disk == "$listed" ]] && ok "every folder of compiler/ and runtime/ has a row" \
    || { : >"$T/err"; bad "folders on disk: $on_disk; with a row: $listed"; }

# The build's compile command for folder D, without "-c -o OBJ SRC" (in $T/cmd.D).
command_of() {
    local d=$1 src obj line
    src=$(ls "$d"/*.c 2>/dev/null | head -n 1)
    [[ -n $src ]] || return 1
    if [[ $d == runtime/cuda ]]; then obj=$BUILD/cuda/$(basename "${src%.c}").o
    else obj=$BUILD/${src%.c}.o; fi
    line=$($MAKE_CMD -s -n -B --no-print-directory "$obj" 2>/dev/null | grep -F -- " -c -o $obj $src" | tail -n 1)
    [[ -n $line ]] || return 1
    printf '%s\n' "${line% -c -o $obj $src}" >"$T/cmd.${d//\//_}"
}
for d in $COMPILER_DIRS $RUNTIME_DIRS; do
    command_of "$d" || { : >"$T/err"; bad "$d: no compile command from '$MAKE_CMD -n -B'"; }
done

probe() {   # header -> $T/probe.c including it, outside the tree
    printf '#include "%s"\nint llmc_probe(void) { return 0; }\n' "$1" >"$T/probe.c"
}
# preprocess (-E) or compile (-c) the probe with folder D's command
with() { local mode=$1 d=$2; $(<"$T/cmd.${d//\//_}") "$mode" -o "$T/probe.o" "$T/probe.c" 2>"$T/err"; }
not_found() { grep -q -- "$1: No such file or directory" "$T/err"; }

# Within one program a header is included by its name alone, so names are unique.
for prog in compiler runtime; do
    dups=$(find "$prog" -name '*.h' -printf '%f\n' | sort | uniq -d | tr '\n' ' ')
    [[ -z $dups ]] && ok "$prog: every header name is unique" || { : >"$T/err"; bad "$prog: headers named twice: $dups"; }
done

# The matrix: from each folder, every header of its program is found iff its
# folder is the same or one of USES; every header of the other program is not
# found (plan.h exists on both sides, so it is probed as the other's only where
# the own side has none: never). One line per folder; each mismatch is named.
matrix() {   # folder, its program's folders, the other program's folders
    local d=$1 own=$2 other=$3 g h name allowed wrong="" n_in=0 n_out=0
    [[ -f $T/cmd.${d//\//_} ]] || return
    local own_names
    own_names=$(for g in $own; do ls "$g"/*.h 2>/dev/null; done | xargs -n1 basename | sort -u)
    for g in $own $other; do
        allowed=0
        [[ $g == "$d" || " ${USES[$d]} " == *" $g "* ]] && allowed=1
        for h in "$g"/*.h; do
            [[ -f $h ]] || continue
            name=$(basename "$h")
            # another program's header that shares a name with one of ours: skip
            [[ " $own " != *" $g "* ]] && grep -qx "$name" <<<"$own_names" && continue
            probe "$name"
            if [[ $allowed == 1 ]]; then
                if with -E "$d"; then n_in=$((n_in + 1)); else wrong+=" $g/$name(not found)"; fi
            else
                if with -E "$d"; then wrong+=" $g/$name(found)"
                elif not_found "$name"; then n_out=$((n_out + 1))
                else wrong+=" $g/$name(other error)"; fi
            fi
        done
    done
    : >"$T/err"
    if [[ -z $wrong ]]; then ok "$d: the $n_in headers of itself and ${USES[$d]:-nothing else} found, $n_out others not"
    else bad "$d: wrong:$wrong"; fi
}
for d in $COMPILER_DIRS; do matrix "$d" "$COMPILER_DIRS" "$RUNTIME_DIRS"; done
for d in $RUNTIME_DIRS; do matrix "$d" "$RUNTIME_DIRS" "$COMPILER_DIRS"; done

# Named cases, compiled (-c) with the folder's command: a forbidden include
# fails with "No such file or directory", an allowed one builds.
refused() {   # folder header why
    probe "$2"
    if [[ ! -f $T/cmd.${1//\//_} ]]; then : >"$T/err"; bad "$1: no compile command"
    elif with -c "$1"; then bad "a $1 file including $2 builds ($3)"
    elif not_found "$2"; then ok "a $1 file including $2 fails: $(grep -m1 -o "$2: No such file or directory" "$T/err")"
    else bad "a $1 file including $2 failed for another reason"; fi
}
builds() {   # folder header
    probe "$2"
    if [[ -f $T/cmd.${1//\//_} ]] && with -c "$1"; then ok "a $1 file including $2 builds"
    else bad "a $1 file including $2 does not build"; fi
}
refused runtime/data train_loop.h "data would see the training loop"
refused runtime/store plan.h "checkpoints would see the plan"
refused runtime/cpu diag.h "the runtime would see the compiler"
refused runtime/cuda estimate.h "the runtime would see the compiler"
refused compiler/front estimate.h "the parser would see the estimator"
refused compiler/front emit.h "the parser would see the emitters"
refused compiler/front plan.h "the parser would see the typed plan"
refused compiler/estimate emit.h "the estimator would see the emitters"
refused compiler/cli log.h "the compiler would see the runtime"
builds runtime/train shard_io.h
builds runtime/cuda train_loop.h
builds compiler/emit estimate.h
builds compiler/front parser.h
for d in compiler/check runtime/plan; do builds "$d" plan_limits.h; done

# ... and no way around the include paths: no file of either program includes
# a header by a path ("../log.h", "compiler/front/diag.h"), only by its name.
if grep -rnE '#[[:space:]]*include[[:space:]]*"[^"]*/' compiler runtime grammar >"$T/err"; then
    bad "a file includes a header by a path"
else : >"$T/err"; ok "no file of compiler/, runtime/ or grammar/ includes a header by a path"; fi
# The files' size (issue 29): no hand-written source file over MAX_LINES lines,
# so that each stays one role a reader can hold. The build's outputs (build/,
# where the generated lexers, parsers and tables go) and the dot folders (.deps,
# .git) are not hand-written; every other file of these kinds is, tests' too.
MAX_LINES=1500
: >"$T/err"
find . \( -path ./build -o -path './.*' \) -prune -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.y' -o -name '*.re' \) -print0 | xargs -0 wc -l | grep -v ' total$' |
    sed 's| \./| |' | sort -rn >"$T/lines"
over=$(awk -v max=$MAX_LINES '$1 > max {printf " %s (%d lines)", $2, $1}' "$T/lines")
if [[ -n $over ]]; then bad "source files over $MAX_LINES lines, to split by role:$over"
else ok "no hand-written source file is over $MAX_LINES lines (the longest: $(awk 'NR == 1 {print $2, "with", $1}' "$T/lines"))"; fi
finish
