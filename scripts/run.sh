#!/usr/bin/env bash
# scripts/run.sh: the main job. Installs what is missing, prepares the default corpus (the King
# James Bible from Debian's bible-kjv-text), builds the posenc CLI and runs `posenc lab` with its
# default protocol: one small transformer per encoding and seed (three seeds), trained at length 64
# and evaluated at 1x-16x, reported as mean ± 95% interval with verdicts by a stated rule; it prints
# its predicted wall time before training (7.5 minutes on 2 cores of an AMD EPYC shared with other
# work; docs/lab.md records the run).
# Results: results/lab/results.{json,csv} and checkpoints.
# Extra arguments go to `posenc lab` (e.g. --encodings rope,alibi --steps 200).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/prepare_corpus.sh
cmake --preset release -DPOSENC_BUILD_CLI=ON -DPOSENC_BUILD_TESTS=OFF -DPOSENC_BUILD_BENCH=OFF >/dev/null
cmake --build --preset release --target posenc_cli
build/release/tools/posenc lab --out results/lab --save-checkpoints "$@"
