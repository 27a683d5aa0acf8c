#!/usr/bin/env bash
# fuzz/regression.sh TARGET CORPUS DICT RUNS MAX_LEN: the CTest regression check of one fuzz target
# (DICT "-": none).
# 1. Runs every committed input of CORPUS whole (crashers found earlier stay there, whatever their
#    size); 2. RUNS fuzzing runs from seed 1 that start from that corpus. New inputs go to a
#    temporary directory, never into the committed corpus; a crashing input is written to the
#    current directory (crash-<sha1>). Inputs needing more than 2 GiB are findings (sizes must be
#    bounded), as are inputs running longer than 20 s.
set -euo pipefail
target=$1 corpus=$2 dict=$3 runs=$4 max_len=$5
limits=(-timeout=20 -rss_limit_mb=2048)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" "$scratch.log"' EXIT
shopt -s nullglob
inputs=("$corpus"/*)
echo "== $(basename "$target"): ${#inputs[@]} committed inputs of $corpus"
status=0
"$target" "${limits[@]}" "${inputs[@]}" >"$scratch.log" 2>&1 || status=$?
grep -v "^Running: \|^Executed " "$scratch.log" || true
rm -f "$scratch.log"
[ "$status" -eq 0 ]
echo "== $(basename "$target"): $runs runs from seed 1"
dict_flag=()
[ "$dict" = "-" ] || dict_flag=(-dict="$dict")
"$target" "${limits[@]}" -runs="$runs" -seed=1 "${dict_flag[@]}" -max_len="$max_len" -print_final_stats=1 \
  "$scratch" "$corpus"
