#!/usr/bin/env bash
# scripts/python_env.sh: the Python environment .venv, then `pip install .` of posenc into it.
#
# The interpreter is Debian's /usr/bin/python3 (3.11; not whatever `python3` is first on PATH),
# WITHOUT --system-site-packages: Debian's numpy 1.24, matplotlib and torch 1.13 would mix with the
# venv's numpy 2. Every package comes from PyPI, pinned in python/requirements.txt and installed with
# --no-deps (torch 2.15 + the CUDA-13 libraries it loads, transformers 5.23, numpy 2.4, matplotlib,
# pytest, hypothesis, the build backend). A stamp file holds the hash of the requirements, so a
# second run skips pip when the pinned set is already installed.
# PIP_FLAGS (environment) is passed on to that install, e.g. PIP_FLAGS="--find-links DIR".
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ ! -x .venv/bin/python ] || grep -q "include-system-site-packages = true" .venv/pyvenv.cfg 2>/dev/null; then
  # A venv from before (with Debian's site-packages) is rebuilt from scratch.
  rm -rf .venv
  /usr/bin/python3 -m venv .venv
fi
stamp=.venv/.requirements.sha256
want="$(sha256sum python/requirements.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  start=$SECONDS
  # shellcheck disable=SC2086
  .venv/bin/pip install -q --disable-pip-version-check --no-deps ${PIP_FLAGS:-} -r python/requirements.txt
  echo "$want" >"$stamp"
  echo "python_env: installed python/requirements.txt in $((SECONDS - start)) s"
fi
# Built by CMake through scikit-build-core in build/python (kept, so a second install is quick), with
# the compiler the release preset finds (c++), so that ccache serves the library's objects it compiled.
CXX="${CXX:-/usr/bin/c++}" .venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation .
.venv/bin/python -c "import posenc, posenc.torch, torch, transformers; print('python_env: posenc', posenc.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, 'in .venv')"
