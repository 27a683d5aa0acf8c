#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...]: build the `fuzz` preset (clang 14, libFuzzer + ASan + UBSan)
# and run each fuzz target for SECONDS (default 600) on one core, one after the other. New inputs
# go to build/fuzz/corpus/<target> (seeded from the committed fuzz/corpus/<name>); a crash stops
# the script and leaves its input in build/fuzz/artifacts/. Keep a crashing input by copying it
# into fuzz/corpus/<name> with a regression test beside the fix (docs/building.md, "Fuzzing").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_config_json fuzz_safetensors fuzz_attention)
./scripts/setup.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
mkdir -p build/fuzz/artifacts
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  dict=(-dict="fuzz/$name.dict")
  case "$name" in
    config_json) max_len=8192 ;;
    attention) max_len=2048 dict=() ;;  # structured: no dictionary
    *) max_len=4096 ;;
  esac
  mkdir -p "build/fuzz/corpus/$t"
  echo "== $t: ${seconds} s"
  "build/fuzz/fuzz/$t" -max_total_time="$seconds" "${dict[@]}" -max_len="$max_len" \
    -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$t-" \
    "build/fuzz/corpus/$t" "fuzz/corpus/$name"
done
