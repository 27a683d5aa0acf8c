#!/usr/bin/env bash
# scripts/gpu_check.sh [OUT]: the one command for a machine with an NVIDIA GPU. Runs what
# scripts/gpu_build.sh prepared in build/gpu-carry (or builds it there from the carried Debian packages when
# those binaries do not run on that machine's image): prints the device, runs every GPU test under a
# timeout (a hang must not eat the machine's time), compute-sanitizer memcheck on small cases, then times
# every CUDA op against the card's copy bandwidth and the PyTorch anchors of the same shapes, in the same
# run. Writes logs, JSON lines and a table to OUT (default results/gpu); the table is printed last.
# Budget: ~8 minutes end to end.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-results/gpu}}"
mkdir -p "$out"
carry=build/gpu-carry
export LD_LIBRARY_PATH="$PWD/$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
phase() { echo "== [${SECONDS}s] $*"; }
phase "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/device.txt"

# The carried binaries come packed (xz: an eighth of their size, within the carried paths' limit).
carried=/tmp/posenc-carry
mkdir -p "$carried" && tar -C "$carried" -xJf "$carry/bin.tar.xz"
bin="$carried/bin"
if ! "$bin/test_cuda_elements" --gtest_list_tests >/dev/null 2>&1; then
  phase "the carried binaries do not run here: building from the carried packages"
  prefix=/tmp/posenc-deps
  mkdir -p "$prefix"
  for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  mkdir -p /tmp/posenc-cutlass && tar -C /tmp/posenc-cutlass -xJf "$carry/cutlass-include.tar.xz"
  cmake -S . -B /tmp/posenc-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSENC_CUDA=ON -DPOSENC_BUILD_CLI=OFF \
    -DPOSENC_BUILD_LAB=OFF -DPOSENC_BUILD_SHARED=OFF -DPOSENC_BUILD_TESTS=ON -DPOSENC_BUILD_BENCH=OFF \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_CXX_FLAGS="-isystem $prefix/usr/include" \
    -DPOSENC_CUTLASS_DIR=/tmp/posenc-cutlass >"$out/build.log" 2>&1
  cmake --build /tmp/posenc-gpu --target test_cuda_elements test_attention_elements test_rope_cuda \
    test_bias_cuda test_absolute_cuda test_attention_cuda test_attention_xl_cuda test_kv_cache_cuda \
    >>"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; exit 1; }
  bin=/tmp/posenc-gpu/tests
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
fi

failed=0
phase "tests"
for t in test_cuda_elements test_attention_elements test_rope_cuda test_bias_cuda test_absolute_cuda \
  test_attention_cuda test_attention_xl_cuda test_kv_cache_cuda; do
  timeout 300 "$bin/$t" --gtest_output="json:$out/$t.json" >"$out/$t.log" 2>&1
  status=$?
  tail -3 "$out/$t.log"
  [ $status -eq 0 ] || { echo "$t FAILED (exit $status)"; failed=1; }
done

phase "compute-sanitizer memcheck"
if command -v compute-sanitizer >/dev/null; then
  timeout 180 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_rope_cuda" \
    --gtest_filter='RopeCuda.StridedAndMisalignedViews:RopeCuda.PositionsPast*:RopeCuda.CosSinTable' \
    >"$out/memcheck.log" 2>&1
  status=$?
  tail -4 "$out/memcheck.log"
  [ $status -eq 0 ] || { echo "memcheck FAILED (exit $status)"; failed=1; }
  timeout 180 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_attention_cuda" \
    --gtest_filter='AttentionCuda.SlicesOfAFusedQkvBuffer:AttentionCuda.ExplicitPositions*' \
    >"$out/memcheck_attention.log" 2>&1
  status=$?
  tail -4 "$out/memcheck_attention.log"
  [ $status -eq 0 ] || { echo "attention memcheck FAILED (exit $status)"; failed=1; }
  timeout 180 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_attention_xl_cuda" \
    --gtest_filter='AttentionXLCuda.SmallShapes*' >"$out/memcheck_attention_xl.log" 2>&1
  status=$?
  tail -4 "$out/memcheck_attention_xl.log"
  [ $status -eq 0 ] || { echo "attention XL memcheck FAILED (exit $status)"; failed=1; }
fi

phase "benchmarks (posenc, then the PyTorch anchors)"
: >"$out/bench_posenc.jsonl"
for b in bench_rope_cuda bench_bias_cuda bench_absolute_cuda bench_attention_cuda; do
  [ -x "$carried/bin/$b" ] && timeout 120 "$carried/bin/$b" | tee -a "$out/bench_posenc.jsonl"
done
timeout 300 python3 scripts/gpu_anchors.py | tee "$out/bench_torch.jsonl"
phase "python: pip install . here, posenc.torch on CUDA tensors"
prefix=/tmp/posenc-deps
mkdir -p "$prefix"
for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
mkdir -p /tmp/posenc-cutlass && tar -C /tmp/posenc-cutlass -xJf "$carry/cutlass-include.tar.xz"
site=/tmp/posenc-site
python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/posenc-build-backend "$carry"/wheels/*.whl \
  >"$out/python_build.log" 2>&1
if PYTHONPATH=/tmp/posenc-build-backend timeout 480 python3 -m pip install -v --no-deps --no-build-isolation \
  --target "$site" --config-settings=build-dir=/tmp/posenc-python-build \
  --config-settings=cmake.define.CMAKE_PREFIX_PATH="$prefix/usr" \
  --config-settings=cmake.define.CMAKE_CXX_FLAGS="-isystem $prefix/usr/include" \
  --config-settings=cmake.define.POSENC_CUTLASS_DIR=/tmp/posenc-cutlass . >>"$out/python_build.log" 2>&1; then
  LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH" PYTHONPATH="$site" HF_HUB_OFFLINE=1 \
    timeout 300 python3 -m pytest -q -p no:cacheprovider python/tests/test_torch_cuda.py \
    python/tests/test_torch_cuda_xl.py >"$out/pytest_cuda.log" 2>&1
  status=$?
  tail -3 "$out/pytest_cuda.log"
  [ $status -eq 0 ] || { echo "pytest on CUDA FAILED (exit $status)"; failed=1; }
else
  status=$?
  tail -20 "$out/python_build.log"
  echo "python build FAILED (exit $status; 124: past its time limit)"
  failed=1
fi

phase "table"
python3 scripts/gpu_table.py "$out" | tee "$out/table.md"
phase "done (failed=$failed)"
exit $failed
