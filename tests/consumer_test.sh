#!/usr/bin/env bash
# tests/consumer_test.sh SOURCE_DIR BUILD_DIR [CXX_FLAGS [CXX_COMPILER]]: install posenc into a
# temporary prefix, then build and run tests/consumer against it with find_package(posenc).
# CXX_FLAGS and CXX_COMPILER carry the parent build's (the sanitizer presets', so the instrumented
# library links; clang's -fsanitize= checks are unknown to g++).
set -eu
src=$1 build=$2 flags=${3:-} compiler=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" ${compiler:+-DCMAKE_CXX_COMPILER="$compiler"} \
  >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer_static"
if [ -x "$tmp/build/consumer_shared" ]; then LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/build/consumer_shared"; fi
echo "find_package(posenc) consumer built and ran"
