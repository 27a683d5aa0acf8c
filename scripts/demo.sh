#!/usr/bin/env bash
# scripts/demo.sh: a tour of the CLI (the main job is scripts/run.sh, the lab): every encoding
# listed, a few of them tabulated the way the seeds show them, seed 004's four conditions measured
# for all of them, and the fused attention timed and checked.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release -DPOSENC_BUILD_CLI=ON -DPOSENC_BUILD_TESTS=OFF -DPOSENC_BUILD_BENCH=OFF >/dev/null
cmake --build --preset release --target posenc_cli
posenc=build/release/tools/posenc
set -x
$posenc list
$posenc encode sinusoidal --dim 4 --positions 0:4                 # seed 003: PE(2) = (sin 2, cos 2, sin .02, cos .02)
$posenc encode binary --positions 6:10 --unsigned                  # seed 004: 7 = 0111 and 8 = 1000 are far apart
$posenc encode t5 --positions 0:6 --show buckets                   # T5's buckets of key - query
$posenc encode alibi --heads 4 --positions 0:4                     # ALiBi: -m (i - j) per head
$posenc encode rope --head-dim 8 --positions 0,1,2,1048576 --show cos
$posenc encode learned --max-len 8 --positions 6:10 || true        # a learned table cannot extrapolate: an error
$posenc analyze                                                     # seed 004's four conditions, measured
$posenc attention -e rope+alibi --seq 1024 --heads 8 --dim 64 --causal --backward   # fused attention
$posenc attention -e shaw --seq 128 --heads 2 --dim 32 --check     # vs the double reference
