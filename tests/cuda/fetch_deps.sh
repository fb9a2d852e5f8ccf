#!/bin/bash
# Unpack what the GPU machine lacks, for carrying there (run here, from the repo root):
#   .deps/       libcjson1 + libcjson-dev, libssl3 + libssl-dev (libcrypto: checkpoint
#                hashes) (the Makefile picks .deps up by itself)
#   .deps-cuda/  libblas3 + libblas-dev + a cblas.h wrapper (device.sh copies it into
#                .deps/ on the GPU machine only: here it would shadow OpenBLAS's cblas.h),
#                bin/re2c and ucd/ (the three Unicode Character Database files the
#                tokenizer's tables are generated from): there, run with
#                PATH=$PWD/.deps-cuda/bin:$PATH UCD_DIR=$PWD/.deps-cuda/ucd
# Both directories are ignored (.gitignore has /.deps/; /.deps-cuda/ goes to .git/info/exclude).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download libcjson1 libcjson-dev libssl3 libssl-dev libblas3 libblas-dev 2>/dev/null)
mkdir -p .deps .deps-cuda
for p in libcjson1 libcjson-dev libssl3 libssl-dev; do dpkg -x "$tmp"/${p}_*.deb .deps; done
for p in libblas3 libblas-dev; do dpkg -x "$tmp"/${p}_*.deb .deps-cuda; done
printf '/* netlib CBLAS for the GPU machine, which has no OpenBLAS */\n#include <x86_64-linux-gnu/cblas-netlib.h>\n' \
    > .deps-cuda/usr/include/cblas.h
rm -rf .deps/usr/share .deps-cuda/usr/share
rm -f .deps/usr/lib/x86_64-linux-gnu/lib{ssl,crypto}.a   # never linked; keeps the carry small
mkdir -p .deps-cuda/bin .deps-cuda/ucd
cp "$(command -v re2c)" .deps-cuda/bin/
for f in UnicodeData.txt PropList.txt DerivedNormalizationProps.txt; do cp /usr/share/unicode/$f .deps-cuda/ucd/; done
grep -qx '/.deps-cuda/' .git/info/exclude 2>/dev/null || echo '/.deps-cuda/' >> .git/info/exclude
grep -qx '/.cuda-run/' .git/info/exclude 2>/dev/null || echo '/.cuda-run/' >> .git/info/exclude
echo "fetch_deps: .deps and .deps-cuda ready"
