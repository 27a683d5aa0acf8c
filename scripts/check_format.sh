#!/usr/bin/env bash
# scripts/check_format.sh: every C++ file of the tree (tracked, or new and not ignored) is formatted by
# .clang-format (110 columns).
# With --fix, formats them in place instead. Part of the test command (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format is missing (apt-get install clang-format)" >&2; exit 1; }
# Tracked files and new ones not yet added (not ignored), so a file is formatted before its first commit.
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' '*.cpp' '*.cu' '*.cuh' | grep -v '^tests/data/')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/posenc_format.log; then
  grep -m 20 "error:" /tmp/posenc_format.log >&2 || true
  echo "check_format: files above differ from .clang-format; run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
