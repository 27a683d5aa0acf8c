#!/usr/bin/env bash
# scripts/python_env.sh: the Python environment .venv, then `pip install .` of posenc into it.
#
# The interpreter is Debian's /usr/bin/python3 (not whatever `python3` is first on PATH), with
# --system-site-packages so that Debian's numpy, matplotlib and torch 1.13 (CPU-only, ~80 MB with
# their dependencies, against PyPI's torch 2.x whose wheels pull in gigabytes of CUDA libraries
# that no test here can use) are visible; every PyPI package is pinned in python/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
.venv/bin/pip install -q --disable-pip-version-check --no-deps -r python/requirements.txt
# Built by CMake through scikit-build-core in build/python (kept, so a second install is quick).
.venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation .
.venv/bin/python -c "import posenc, posenc.torch; print('python_env: posenc', posenc.__version__, 'in .venv')"
