#!/usr/bin/env bash
# scripts/check_format.sh: every C++ file of the tree (tracked, or new and not ignored) is formatted by
# .clang-format (110 columns), and every Python file passes ruff's lint (pyproject.toml [tool.ruff]: 110
# columns, pycodestyle, pyflakes, import order, bugbear).
# With --fix, formats the C++ files in place and applies ruff's safe fixes (import order, unused imports);
# long Python lines are wrapped by hand. Part of the test command (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format is missing (apt-get install clang-format)" >&2; exit 1; }
# Tracked files and new ones not yet added (not ignored), so a file is formatted before its first commit.
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' '*.cpp' '*.cu' '*.cuh' | grep -v '^tests/data/')
# ruff, at the version python/requirements.txt pins, in .venv (made here if scripts/python_env.sh has not
# run yet; python_env.sh keeps it and installs the rest).
ruff_version="$(sed -n 's/^ruff==//p' python/requirements.txt)"
[ -n "$ruff_version" ] || { echo "check_format: python/requirements.txt pins no ruff version" >&2; exit 1; }
ruff=.venv/bin/ruff
if [ "$("$ruff" --version 2>/dev/null)" != "ruff $ruff_version" ]; then
  [ -x .venv/bin/python ] || /usr/bin/python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "ruff==$ruff_version"
fi
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exec "$ruff" check --fix --quiet .  # what it cannot fix (long lines) is listed, and fails
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/posenc_format.log; then
  grep -m 20 "error:" /tmp/posenc_format.log >&2 || true
  echo "check_format: files above differ from .clang-format; run scripts/check_format.sh --fix" >&2
  exit 1
fi
if ! "$ruff" check --quiet .; then
  echo "check_format: ruff found the Python lines above (config: pyproject.toml [tool.ruff])" >&2
  exit 1
fi
echo "check_format: ${#files[@]} C++ files formatted; $(git ls-files --cached --others --exclude-standard '*.py' | wc -l) Python files pass ruff $ruff_version"
