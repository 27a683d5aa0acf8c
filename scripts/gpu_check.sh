#!/usr/bin/env bash
# scripts/gpu_check.sh [OUT]: the one command for a machine with an NVIDIA GPU. Runs what
# scripts/gpu_build.sh prepared in build/gpu-carry (or builds it there from the carried Debian packages when
# those binaries do not run on that machine's image): prints the device, runs every GPU test under a
# timeout (a hang must not eat the machine's time), times every CUDA op against the card's copy bandwidth,
# a large matmul and the PyTorch anchors of the same shapes in the same run, runs compute-sanitizer (memcheck,
# and racecheck where shared memory is shared by groups of lanes) on small cases, then posenc.torch's tests
# on CUDA tensors, and the command line's `posenc attention --device cuda` with each encoding. Writes logs,
# JSON lines and a table to OUT (default results/gpu); the table is printed last.
#
# The whole run stays within GPU_CHECK_SECONDS (default 560: one command of a short GPU window). The Python
# package compiles on the CPUs in the background while the GPU runs the tests and benchmarks; a phase that
# no longer fits is skipped and says so. GPU_CHECK_PHASES picks phases for a second run (default all of
# "tests bench memcheck python cli"), e.g. GPU_CHECK_PHASES="tests" after a fix.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out="${1:-${OUT:-results/gpu}}"
mkdir -p "$out"
deadline=${GPU_CHECK_SECONDS:-560}
phases=" ${GPU_CHECK_PHASES:-tests bench memcheck python cli} "
carry=build/gpu-carry
export LD_LIBRARY_PATH="$PWD/$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
phase() { echo "== [${SECONDS}s] $*"; }
wanted() { [[ "$phases" == *" $1 "* ]]; }
left() { echo $((deadline - SECONDS)); }
# fits N: at least N seconds remain (the phase's usual time plus a margin); says so when not.
fits() {
  [ "$(left)" -ge "$1" ] && return 0
  echo "skipped: $(left) s left, the phase needs about $1"
  return 1
}
limit() { local l; l=$(left); echo $((l < $1 ? l : $1)); }  # a timeout within the deadline
phase "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv |
  tee "$out/device.txt"
prefix=/tmp/posenc-deps
unpack_deps() {
  mkdir -p "$prefix" /tmp/posenc-cutlass
  for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  tar -C /tmp/posenc-cutlass -xJf "$carry/cutlass-include.tar.xz"
}
unpack_deps

# The Python package: pip builds it here (this machine's Python and PyTorch), in the background on 12 of the
# CPUs while the tests and benchmarks use the GPU; the rest stay for the tests' CPU references.
python_build_pid=
if wanted python; then
  site=/tmp/posenc-site
  (
    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/posenc-build-backend \
      "$carry"/wheels/*.whl && CMAKE_BUILD_PARALLEL_LEVEL=12 PYTHONPATH=/tmp/posenc-build-backend \
      timeout "$(limit 420)" python3 -m pip install -v --no-deps --no-build-isolation --target "$site" \
      --config-settings=build-dir=/tmp/posenc-python-build \
      --config-settings=cmake.define.CMAKE_PREFIX_PATH="$prefix/usr" \
      --config-settings=cmake.define.CMAKE_CXX_FLAGS="-isystem $prefix/usr/include" \
      --config-settings=cmake.define.POSENC_CUTLASS_DIR=/tmp/posenc-cutlass .
  ) >"$out/python_build.log" 2>&1 &
  python_build_pid=$!
fi

# The carried binaries come packed (xz: an eighth of their size, within the carried paths' limit).
carried=/tmp/posenc-carry
mkdir -p "$carried" && tar -C "$carried" -xJf "$carry/bin.tar.xz"
bin="$carried/bin"
tests=(test_cuda_elements test_attention_elements test_rope_cuda test_bias_cuda test_absolute_cuda
  test_attention_cuda test_attention_rope_cuda test_attention_xl_cuda test_attention_shaw_backward_cuda
  test_attention_xl_backward_cuda test_kv_cache_cuda)
benches=(bench_rope_cuda bench_bias_cuda bench_absolute_cuda bench_attention_cuda)
if ! "$bin/test_cuda_elements" --gtest_list_tests >/dev/null 2>&1; then
  phase "the carried binaries do not run here: building from the carried packages"
  cmake -S . -B /tmp/posenc-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSENC_CUDA=ON -DPOSENC_BUILD_CLI=OFF \
    -DPOSENC_BUILD_LAB=OFF -DPOSENC_BUILD_SHARED=OFF -DPOSENC_BUILD_TESTS=ON -DPOSENC_BUILD_BENCH=ON \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_CXX_FLAGS="-isystem $prefix/usr/include" \
    -DPOSENC_CUTLASS_DIR=/tmp/posenc-cutlass >"$out/build.log" 2>&1
  timeout "$(limit 400)" cmake --build /tmp/posenc-gpu --target "${tests[@]}" "${benches[@]}" \
    >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  mkdir -p /tmp/posenc-gpu/bin
  for t in "${tests[@]}" "${benches[@]}"; do
    find /tmp/posenc-gpu -name "$t" -type f -perm -u+x -exec cp {} /tmp/posenc-gpu/bin/ \;
  done
  bin=/tmp/posenc-gpu/bin
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
fi

failed=0
# The sm_90a attention kernels first, each on one small case under a short timeout: a kernel that hangs (an
# mbarrier never completing, a turn never coming) must not take the other tests' and the benchmarks' time.
# If one fails, everything after runs on the tiled kernels in its place (POSENC_TEST_FORWARD_KERNEL and
# POSENC_TEST_BACKWARD_KERNEL, read by the attention tests and benchmark) and its own tests are left out.
export POSENC_TEST_FORWARD_KERNEL=automatic POSENC_TEST_BACKWARD_KERNEL=automatic
sm90_filter=()
if wanted tests || wanted bench; then
  left_out=()
  for pass in forward backward; do
    case_name=Sm90KernelSmallCase tests_left=Sm90Kernel*:AttentionXLCuda.Sm90Kernel*
    [ $pass = backward ] && case_name=Sm90BackwardSmallCase tests_left=Sm90Backward*
    phase "sm_90a attention $pass: one small case"
    timeout 30 "$bin/test_attention_cuda" --gtest_filter="AttentionCuda.$case_name" \
      >"$out/sm90_${pass}_smoke.log" 2>&1
    status=$?
    tail -3 "$out/sm90_${pass}_smoke.log"
    # The forward with Transformer-XL's terms (its own instantiations of the kernel) the same way.
    if [ $pass = forward ] && [ $status -eq 0 ]; then
      timeout 30 "$bin/test_attention_xl_cuda" --gtest_filter="AttentionXLCuda.Sm90KernelSmallCase" \
        >"$out/sm90_forward_xl_smoke.log" 2>&1
      status=$?
      tail -3 "$out/sm90_forward_xl_smoke.log"
    fi
    if [ $status -ne 0 ]; then
      echo "sm_90a attention $pass FAILED (exit $status; 124: a hang): the rest runs on the tiled kernel"
      failed=1
      [ $pass = forward ] && export POSENC_TEST_FORWARD_KERNEL=tiled
      [ $pass = backward ] && export POSENC_TEST_BACKWARD_KERNEL=tiled
      left_out+=("AttentionCuda.$tests_left")
    fi
  done
  if [ ${#left_out[@]} -gt 0 ]; then
    sm90_filter=(--gtest_filter=-"$(IFS=:; echo "${left_out[*]}")")
  fi
fi
if wanted tests; then
  phase "tests"
  # Scratch device memory NaN until written (src/cuda/device.cc): a kernel reading what nothing wrote fails
  # the tests instead of reading the zeros a fresh allocation often holds. Not for the benchmarks.
  export POSENC_CUDA_POISON_SCRATCH=1
  for t in "${tests[@]}"; do
    fits 20 || break
    filter=() seconds=120
    # The forward's file checks about 300 calls against the double reference (on the CPU): more time.
    [ "$t" = test_attention_cuda ] && filter=(${sm90_filter[@]+"${sm90_filter[@]}"}) seconds=240
    [ "$t" = test_attention_xl_cuda ] && filter=(${sm90_filter[@]+"${sm90_filter[@]}"})
    timeout "$(limit "$seconds")" "$bin/$t" ${filter[@]+"${filter[@]}"} --gtest_output="json:$out/$t.json" \
      >"$out/$t.log" 2>&1
    status=$?
    tail -3 "$out/$t.log"
    [ $status -eq 0 ] || { echo "$t FAILED (exit $status; 124: past its time limit)"; failed=1; }
  done
  # The attention tests once more with the sm_90a kernels wherever they fit (the shapes above mostly take
  # the tiled kernels: their blocks do not fill the GPU); one that failed its small case stays tiled.
  if fits 20 && [ "$POSENC_TEST_FORWARD_KERNEL$POSENC_TEST_BACKWARD_KERNEL" != tiledtiled ]; then
    [ "$POSENC_TEST_FORWARD_KERNEL" = automatic ] && export POSENC_TEST_FORWARD_KERNEL=sm90
    [ "$POSENC_TEST_BACKWARD_KERNEL" = automatic ] && export POSENC_TEST_BACKWARD_KERNEL=sm90
    timeout "$(limit 240)" "$bin/test_attention_cuda" ${sm90_filter[@]+"${sm90_filter[@]}"} \
      --gtest_output="json:$out/test_attention_cuda_sm90.json" >"$out/test_attention_cuda_sm90.log" 2>&1
    status=$?
    tail -3 "$out/test_attention_cuda_sm90.log"
    [ $status -eq 0 ] || { echo "test_attention_cuda on sm90 FAILED (exit $status)"; failed=1; }
    # The benchmarks below choose for themselves (automatic), unless a small case failed.
    [ "$POSENC_TEST_FORWARD_KERNEL" = sm90 ] && export POSENC_TEST_FORWARD_KERNEL=automatic
    [ "$POSENC_TEST_BACKWARD_KERNEL" = sm90 ] && export POSENC_TEST_BACKWARD_KERNEL=automatic
  fi
  unset POSENC_CUDA_POISON_SCRATCH
fi

if wanted bench && phase "benchmarks (posenc, then the PyTorch anchors)" && fits 150; then
  : >"$out/bench_posenc.jsonl"
  for b in "${benches[@]}"; do
    [ -x "$bin/$b" ] && timeout "$(limit 90)" "$bin/$b" | tee -a "$out/bench_posenc.jsonl"
  done
  fits 60 && timeout "$(limit 240)" python3 scripts/gpu_anchors.py | tee "$out/bench_torch.jsonl"
fi

# The command line on the device: forward and backward of each encoding, the output against the double
# reference (--check prints the largest difference; bf16 outputs are within a few 2^-8 of |out| <= 4).
if wanted cli && [ -x "$bin/posenc" ] && phase "posenc attention --device cuda" && fits 30; then
  for e in none alibi t5 relative shaw transformer_xl rope+alibi rope+t5; do
    timeout "$(limit 30)" "$bin/posenc" attention --device cuda --dtype bf16 -e "$e" --seq 200 --heads 4 \
      --kv-heads 2 --dim 64 --causal --backward --check --repeat 3 >"$out/cli_$e.log" 2>&1
    status=$?
    echo "$e: $(grep -E 'backward|reference' "$out/cli_$e.log" | tr -s ' ' | paste -sd ';')"
    if [ $status -ne 0 ]; then
      echo "posenc attention -e $e FAILED (exit $status)" && tail -3 "$out/cli_$e.log" && failed=1
    fi
  done
fi

# The sanitizers run kernels 10-100x slower: small cases only, after the figures.
sanitize() {  # sanitize TOOL NAME BINARY FILTER
  fits 40 || return 0
  timeout "$(limit 150)" compute-sanitizer --tool "$1" --error-exitcode 3 "$bin/$3" --gtest_filter="$4" \
    >"$out/$1_$2.log" 2>&1
  local status=$?
  tail -4 "$out/$1_$2.log"
  [ $status -eq 0 ] || { echo "$1 $2 FAILED (exit $status)"; failed=1; }
}
if wanted memcheck && phase "compute-sanitizer" && command -v compute-sanitizer >/dev/null; then
  sanitize memcheck rope test_rope_cuda \
    'RopeCuda.StridedAndMisalignedViews:RopeCuda.PositionsPast*:RopeCuda.CosSinTable'
  sanitize memcheck attention test_attention_cuda \
    'AttentionCuda.SlicesOfAFusedQkvBuffer:AttentionCuda.ExplicitPositions*'
  # The sm_90a kernel's barriers and TMA writes: memcheck and racecheck on its own test's shapes.
  sanitize memcheck attention_sm90 test_attention_cuda 'AttentionCuda.Sm90KernelSmallCase'
  sanitize racecheck attention_sm90 test_attention_cuda 'AttentionCuda.Sm90KernelSmallCase'
  # Its rotation of q in shared memory (after the TMA's load, before the products), and the gradients stored
  # into the caller's views by the keys blocks.
  sanitize memcheck attention_rope test_attention_rope_cuda 'AttentionRopeCuda.*'
  sanitize racecheck attention_sm90_rope test_attention_rope_cuda 'AttentionRopeCuda.Sm90KernelRotatesQ*'
  # The sm_90a backward: its barriers, TMA loads, bulk reductions of dQ and the blocks' turns.
  sanitize memcheck attention_sm90_backward test_attention_cuda 'AttentionCuda.Sm90BackwardSmallCase'
  sanitize racecheck attention_sm90_backward test_attention_cuda 'AttentionCuda.Sm90BackwardSmallCase'
  sanitize memcheck shaw test_attention_shaw_backward_cuda 'AttentionShawBackwardCuda.PartialGradientsInWaves'
  sanitize memcheck attention_xl test_attention_xl_cuda 'AttentionXLCuda.SmallShapes*'
  sanitize memcheck attention_xl_backward test_attention_xl_backward_cuda \
    'AttentionXLBackwardCuda.SmallShapes*'
  # Shaw's sums by distance: shared memory written by groups of lanes (a small case with tiles wholly
  # beyond max_distance and tiles near the diagonal).
  sanitize racecheck shaw test_attention_shaw_backward_cuda \
    'AttentionShawBackwardCuda.PartialGradientsInWaves'
  # Transformer-XL's band in shared memory: staged 16-bit rows, then fp32 products, half copied on reuse.
  sanitize racecheck attention_xl test_attention_xl_cuda 'AttentionXLCuda.SmallShapes*'
  # The sm_90a kernel's band: chunks stored by each warpgroup, read skewed after its barrier.
  sanitize memcheck attention_sm90_xl test_attention_xl_cuda 'AttentionXLCuda.Sm90KernelSmallCase'
  sanitize racecheck attention_sm90_xl test_attention_xl_cuda 'AttentionXLCuda.Sm90KernelSmallCase'
  # Its backward: the bands, the sums of dS per key and per delta, dS skewed into band columns.
  sanitize racecheck attention_xl_backward test_attention_xl_backward_cuda \
    'AttentionXLBackwardCuda.SmallShapes*'
fi

if [ -n "$python_build_pid" ]; then
  phase "python: posenc.torch on CUDA tensors (built in the background)"
  if wait "$python_build_pid"; then
    if fits 30; then
      LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH" PYTHONPATH="$site" \
        HF_HUB_OFFLINE=1 timeout "$(limit 200)" python3 -m pytest -q -p no:cacheprovider \
        python/tests/test_torch_cuda*.py \
        >"$out/pytest_cuda.log" 2>&1
      status=$?
      tail -3 "$out/pytest_cuda.log"
      [ $status -eq 0 ] || { echo "pytest on CUDA FAILED (exit $status)"; failed=1; }
    fi
    if wanted bench && fits 20; then  # posenc.torch.rope beside the C++ call's figure
      LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH" PYTHONPATH="$site" \
        timeout "$(limit 60)" python3 scripts/gpu_torch_rope.py | tee -a "$out/bench_torch.jsonl"
    fi
  else
    status=$?
    tail -20 "$out/python_build.log"
    echo "python build FAILED (exit $status; 124: past its time limit)"
    failed=1
  fi
fi

phase "table"
python3 scripts/gpu_table.py "$out" | tee "$out/table.md"
phase "done (failed=$failed)"
exit $failed
