#!/usr/bin/env bash
# scripts/gpu_build.sh: prepares what scripts/gpu_check.sh runs on a GPU machine, here (no GPU needed): the
# CUDA test and benchmark binaries and the `posenc` command built from this tree (release, C++ runtime linked
# statically, Highway's shared library beside them), and the Debian packages a build on that machine would
# need instead (its image has nvcc, CMake, ninja and PyTorch, but not Highway, nlohmann-json or GoogleTest).
# Everything goes to build/gpu-carry/, which the GPU machine receives as a carried path.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
carry=build/gpu-carry
stage=build/gpu-stage  # the binaries, packed into $carry/bin.tar.xz (static: ~12 MB each unpacked)
rm -rf "$carry" "$stage"
mkdir -p "$carry/lib" "$carry/debs" "$stage/bin"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSENC_CUDA=ON -DPOSENC_BUILD_CLI=ON \
  -DPOSENC_BUILD_LAB=ON -DPOSENC_BUILD_SHARED=OFF -DPOSENC_BUILD_TESTS=ON -DPOSENC_BUILD_BENCH=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc -Wl,-rpath,\$ORIGIN/../lib" >/dev/null
targets=(test_cuda_elements test_attention_elements test_rope_cuda test_bias_cuda test_absolute_cuda
  test_attention_cuda test_attention_rope_cuda test_attention_xl_cuda test_attention_shaw_backward_cuda
  test_attention_xl_backward_cuda test_kv_cache_cuda
  bench_rope_cuda bench_bias_cuda bench_absolute_cuda bench_attention_cuda)
cmake --build build/gpu --target "${targets[@]}" posenc_cli
for t in "${targets[@]}"; do
  find build/gpu -name "$t" -type f -perm -u+x -exec cp {} "$stage/bin/" \;
done
cp build/gpu/tools/posenc "$stage/bin/"
tar -C "$stage" -cf - bin | xz -T2 -6 >"$carry/bin.tar.xz"
cp -L /usr/lib/x86_64-linux-gnu/libhwy.so.1 "$carry/lib/"
# The fallback: the packages a build on the GPU machine unpacks (dpkg -x) when the binaries do not run there.
(cd "$carry/debs" && apt-get download -qq libhwy-dev libhwy1 libgtest-dev nlohmann-json3-dev \
  libbenchmark-dev libbenchmark1debian 2>/dev/null) ||
  echo "gpu_build: could not download the fallback packages (apt-get update first?)" >&2
# The Python package is built there (its Python and PyTorch differ from these): the pinned build backend.
mkdir -p "$carry/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$carry/wheels" scikit-build-core==0.10.7 \
  nanobind==2.4.0 pathspec packaging ||
  echo "gpu_build: could not download the Python build backend" >&2
# CuTe / CUTLASS headers for a build there (the attention kernels): the headers of the pinned wheel, no more.
cutlass_include="$(sed -n 's/^POSENC_CUTLASS_DIR:PATH=//p' build/gpu/CMakeCache.txt)"
tar -C "$cutlass_include" -cJf "$carry/cutlass-include.tar.xz" cute cutlass
du -sh "$carry"
