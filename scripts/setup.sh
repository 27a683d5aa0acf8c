#!/usr/bin/env bash
# scripts/setup.sh: install what posenc needs from Debian's packages, only what is missing.
# Idempotent: a second run installs nothing.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config python3   # toolchain; python3 checks .npy output in the CLI test
  clang-format                                # the formatting check (scripts/check_format.sh)
  libhwy-dev                                  # Google Highway: portable SIMD, runtime dispatch, Sin/Cos
  libgtest-dev libbenchmark-dev               # tests, benchmarks
  libcli11-dev nlohmann-json3-dev             # the CLI, config.json parsing
  libopenblas-dev                             # sgemm: the lab's linear layers, the attention benchmark's reference
  bible-kjv bible-kjv-text                    # the lab's default corpus (scripts/prepare_corpus.sh)
  # The Python package (scripts/python_env.sh): Debian's interpreter, numpy, matplotlib and torch
  # 1.13 (CPU), and the small pure-Python libraries transformers, hypothesis and pytest need.
  python3-venv python3-dev python3-numpy python3-matplotlib python3-torch
  python3-packaging python3-yaml python3-requests python3-attr python3-sortedcontainers python3-typing-extensions
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
