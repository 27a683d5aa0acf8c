#!/usr/bin/env bash
# scripts/setup.sh: install what posenc needs from Debian's packages, only what is missing.
# Idempotent: a second run installs nothing.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config python3   # toolchain; python3 checks .npy output in the CLI test
  ccache                                      # compiler cache: `pip install .` reuses the release objects
  clang-format                                # the formatting check (scripts/check_format.sh)
  # clang 14: the ubsan-clang preset (checks g++'s UBSan lacks) and the libFuzzer targets (fuzz/);
  # libclang-rt-14-dev holds the sanitizer and libFuzzer runtimes.
  clang-14 libclang-rt-14-dev
  libhwy-dev                                  # Google Highway: portable SIMD, runtime dispatch, Sin/Cos
  libgtest-dev libbenchmark-dev               # tests, benchmarks
  libcli11-dev nlohmann-json3-dev             # the CLI, config.json parsing
  libopenblas-dev                             # sgemm: the reference of the attention and lab benchmarks
  bible-kjv bible-kjv-text                    # the lab's default corpus (scripts/prepare_corpus.sh)
  # The Python package (scripts/python_env.sh): Debian's interpreter and its venv module; every
  # Python package of .venv comes from PyPI (python/requirements.txt). python3-dev: <Python.h>, for
  # the nanobind extension and for torch.compile (inductor compiles C++ that includes it).
  python3-venv python3-dev
)

# The CUDA backend's tensor-core tiles take CuTe / CUTLASS headers from PyPI (scripts/fetch_cutlass.sh),
# fetched with pip, where a CUDA compiler is present.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  packages+=(python3-pip)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
fetch_cutlass() {
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    "$(dirname "$0")/fetch_cutlass.sh"
  fi
}
if [ ${#missing[@]} -eq 0 ]; then
  fetch_cutlass
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
fetch_cutlass
