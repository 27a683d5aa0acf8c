#!/usr/bin/env bash
# scripts/test.sh: install what is missing, build and run every test: the C++ suite in release (g++),
# then once more under clang 14's AddressSanitizer + UndefinedBehaviorSanitizer with the fuzz targets'
# regression checks (sanitize-clang: besides ASan and the usual UBSan checks, float casts, pointer
# overflow and implicit truncation, which g++ does not check; every committed fuzz input plus a fixed
# number of runs), then the Python package's pytest suite in its virtual environment. This is the
# README's test command and .ci/run (docs/building.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's start goes to the log with the wall time and the CPU time (user + system, this script and
# every process it waited for, in seconds) spent so far: the whole command must stay under 20 minutes on
# 2 cores, and on a shared machine the CPU time is the steadier figure.
phase() {
  local stat
  read -r -a stat </proc/$$/stat  # utime, stime, cutime, cstime: fields 14-17, in clock ticks
  echo "== [${SECONDS}s, $(((stat[13] + stat[14] + stat[15] + stat[16]) / $(getconf CLK_TCK))) CPU-s] $*"
}
./scripts/setup.sh
phase "format: clang-format check"
./scripts/check_format.sh
# The sanitizer build checks one SIMD target, AVX2's, on every machine (the one most users' x86 CPUs run):
# AVX-512's kernels beside it would take ~1/3 more of its compile time, and where the CPU has AVX-512 twice
# the test time. The release build compiles and tests every target, AVX-512 included.
sanitizer_targets=(-DPOSENC_HWY_DISABLED_TARGETS="HWY_SSSE3|HWY_SSE4|HWY_AVX3|HWY_AVX3_DL")
# On a CPU with AVX2 the sanitizer build takes it as its baseline, so Highway compiles AVX2 alone (not the
# EMU128 fallback beside it): ~2 min less on 2 cores. The sanitizers then check the kernels users' x86
# machines run; EMU128's 4-lane tails and AVX-512's 16 lanes are tested by the release build.
cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
has_all=1
for flag in avx2 fma bmi2 f16c aes pclmulqdq; do
  grep -qw "$flag" <<<"$cpu_flags" || has_all=0
done
if [ "$has_all" = 1 ]; then
  sanitizer_targets+=(-DPOSENC_BASELINE_FLAGS="-mavx2 -mfma -mbmi2 -mf16c -maes -mpclmul")
fi
for preset in release sanitize-clang; do
  phase "$preset: configure, build, test"
  extra=()
  [ "$preset" = release ] || extra=("${sanitizer_targets[@]}")
  # Benchmarks are not tests: the release test build leaves them out (build them with `cmake --preset release`).
  cmake --preset "$preset" -DPOSENC_BUILD_TESTS=ON -DPOSENC_BUILD_CLI=ON -DPOSENC_BUILD_BENCH=OFF \
    ${extra[@]+"${extra[@]}"} >/dev/null
  cmake --build --preset "$preset"
  ctest --preset "$preset" -j 2
done
phase "python: pip install . into .venv, pytest"
./scripts/python_env.sh
# The release CLI writes the lab checkpoints that python/tests/test_lab_checkpoint.py reads.
# HF_HUB_OFFLINE: transformers builds its modules from configs here and must never reach the hub.
# -n 2 (pytest-xdist): both cores; the families harness is mostly single-threaded Python.
HF_HUB_OFFLINE=1 POSENC_CLI="$PWD/build/release/tools/posenc" .venv/bin/python -m pytest -q -n 2 python/tests
phase "done"
