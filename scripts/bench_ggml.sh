#!/usr/bin/env bash
# scripts/bench_ggml.sh: posenc next to ggml (llama.cpp's CPU engine), benchmark only (bench/ggml/README.md).
# From a checkout whose build/release is built: fetches ggml's source from PyPI (the llama-cpp-python
# sdist vendors llama.cpp), builds ggml alone, compiles bench/ggml/compare.cc against it and against
# build/release/src/libposenc.a, runs it and prints one table. Everything it makes lives in build/ggml/
# (git-ignored): ggml never becomes a dependency of the library or of its tests, and build/release is
# only read. Arguments go to compare (e.g. --sizes 1024 --threads 2 for a quick run).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
posenc_lib=build/release/src/libposenc.a
if [ ! -f "$posenc_lib" ]; then
  echo "bench_ggml: $posenc_lib is missing; build posenc first:" \
    "cmake --preset release && cmake --build build/release" >&2
  exit 1
fi

version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
out=build/ggml
sdist=$out/llama_cpp_python-$version.tar.gz
src=$out/llama_cpp_python-$version
ggml_src=$src/vendor/llama.cpp/ggml
mkdir -p "$out"

# 1. Source: the sdist only (--no-binary), never a prebuilt wheel, so we build ggml with our own flags.
if [ ! -f "$sdist" ]; then
  pip=pip
  command -v pip >/dev/null || pip=$root/.venv/bin/pip
  [ -x "$(command -v "$pip")" ] || { echo "bench_ggml: neither pip nor .venv/bin/pip found" >&2; exit 1; }
  echo "bench_ggml: downloading llama-cpp-python==$version (sdist)"
  "$pip" download --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$out/" >"$out/pip.log" 2>&1 ||
    { tail -20 "$out/pip.log" >&2; echo "bench_ggml: pip download failed (log: $out/pip.log)" >&2; exit 1; }
fi
[ -d "$ggml_src" ] || tar -xzf "$sdist" -C "$out"
[ -f "$ggml_src/CMakeLists.txt" ] || { echo "bench_ggml: $ggml_src missing from the sdist" >&2; exit 1; }

# 2. ggml alone. A two-line parent project adds it as a subdirectory: configured standalone, ggml
# wants ggml.pc.in, which the sdist leaves out. CPU backend only; OpenMP off so that ggml runs on its
# own threadpool of plain threads, as posenc does; no BLAS (flash attention and RoPE never call it);
# GGML_NATIVE for -march=native, the best ggml can do on this CPU.
mkdir -p "$out/wrapper"
cat >"$out/wrapper/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.14)
project(ggml_only C CXX)
add_subdirectory(${GGML_SRC} ggml)
EOF
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$out/build/CMakeCache.txt" ]; then
  echo "bench_ggml: configuring ggml"
  cmake -S "$out/wrapper" -B "$out/build" "${generator[@]}" -DGGML_SRC="$root/$ggml_src" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CPU=ON -DGGML_OPENMP=OFF -DGGML_BLAS=OFF \
    -DGGML_LLAMAFILE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_CCACHE=OFF \
    -DBUILD_SHARED_LIBS=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >"$out/cmake.log" 2>&1 ||
    { tail -20 "$out/cmake.log" >&2; echo "bench_ggml: ggml configure failed" >&2; exit 1; }
fi
echo "bench_ggml: building ggml (log: $out/build.log)"
cmake --build "$out/build" -j "$(nproc)" >"$out/build.log" 2>&1 ||
  { tail -20 "$out/build.log" >&2; echo "bench_ggml: ggml build failed" >&2; exit 1; }
libs=$out/build/ggml/src

# 3. compare: -O2 is enough for the driver; the kernels are each library's own (ggml: -O3 -march=native,
# posenc: its release build with Highway's runtime dispatch).
echo "bench_ggml: compiling bench/ggml/compare.cc"
g++ -std=c++20 -O2 -march=native -Wall -Wextra -I include -I . -I "$ggml_src/include" \
  bench/ggml/compare.cc -o "$out/compare" \
  "$posenc_lib" "$libs/libggml.a" "$libs/libggml-cpu.a" "$libs/libggml-base.a" -lhwy -lpthread -lm

# 4. Run. The version lines come from ggml's configure and the package's changelog (its vendored commit).
ggml_version=$(sed -n 's/.*ggml version: *//p' "$out/cmake.log" | head -1)
ggml_commit=$(sed -n 's/.*ggml commit: *//p' "$out/cmake.log" | head -1)
llama_commit=$(grep -o -m1 'ggml-org/llama.cpp@[0-9a-f]*' "$src/CHANGELOG.md" || true)
echo "ggml $ggml_version (commit $ggml_commit; llama-cpp-python $version vendors $llama_commit)"
head=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
echo "posenc: $posenc_lib (built $(date -r "$posenc_lib" '+%F %T'); checkout HEAD $head)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
"$out/compare" "$@"
