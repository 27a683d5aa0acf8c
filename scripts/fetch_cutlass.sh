#!/usr/bin/env bash
# scripts/fetch_cutlass.sh: CuTe / CUTLASS headers for the CUDA backend's tensor-core tiles, from PyPI's
# nvidia-cutlass (pinned; its wheel carries the C++ headers under cutlass_library/source/include), unpacked
# into build/deps/ where CMake finds them (POSENC_CUTLASS_DIR). Nothing is vendored. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.2.0.0
dest="build/deps/nvidia-cutlass-$version"
[ -f "$dest/cutlass_library/source/include/cute/tensor.hpp" ] && exit 0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$tmp" \
  "nvidia-cutlass==$version"
mkdir -p "$dest"
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$tmp"/nvidia_cutlass-*.whl "$dest"
echo "fetch_cutlass: nvidia-cutlass $version headers in $dest/cutlass_library/source/include"
