#!/bin/bash
# tests/cpu/bundle.sh DIR — the CPU suite's binaries and the shared libraries they
# need beyond glibc and Open MPI, for running tests/cpu/run.sh on another x86-64
# machine that cannot build them (the GPU machine: no OpenBLAS, cJSON or libyaml),
# to prove the suite under OpenBLAS kernel sets this CPU cannot run (SkylakeX,
# Cooperlake). There, from the repository root:
#   LD_LIBRARY_PATH=$PWD/DIR/lib OPENBLAS_CORETYPE=SkylakeX PYTHON=python3 bash tests/cpu/run.sh DIR/build
# (PYTHON: any python3 with torch and numpy; DIR ignored by git, e.g. .cpurun).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: bundle.sh DIR}
make -s all build/tests/cpu/test_model build/tests/cpu/test_formats build/tests/cpu/make_shards build/tests/cpu/loop_test
rm -rf "$dir"
mkdir -p "$dir/lib" "$dir/build/tests/cpu"
cp build/llmc build/llmc-train "$dir/build/"
cp build/tests/cpu/test_model build/tests/cpu/test_formats build/tests/cpu/make_shards build/tests/cpu/loop_test "$dir/build/tests/cpu/"
for b in "$dir"/build/llmc* "$dir"/build/tests/cpu/*; do
    ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    case $name in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libmpi*|libopen-*|libpmix*|libhwloc*|libevent*|libz.so*|libudev*) ;;
        *) cp -L "$path" "$dir/lib/$name" ;;
    esac
done
echo "bundle.sh: $dir ($(du -sh "$dir" | cut -f1))"
