#!/usr/bin/env bash
# What a user of CMake expects, checked on a fresh configure each time (no build of its own but the
# consumers; the library comes from BUILD_DIR, built by scripts/test.sh):
#   1. no CMAKE_BUILD_TYPE: Release (-O3 -DNDEBUG on the library's sources); a multi-config generator keeps
#      its per-build choice;
#   2. cmocka missing: MXFP8_BUILD_TESTS=AUTO configures the library, examples and benchmarks and says the
#      tests are off; MXFP8_BUILD_TESTS=ON fails, naming cmocka; OFF configures no test;
#   3. programs in the build tree run without LD_LIBRARY_PATH (RPATH);
#   4. cmake --install to a prefix: a find_package(mxfp8) consumer and a pkg-config consumer build against
#      it and run without LD_LIBRARY_PATH, the find_package one also once installed to a prefix of its own.
# Usage: tests/install/test_cmake_defaults.sh [BUILD_DIR]   (default build/; the library must be built)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset LD_LIBRARY_PATH  # everything below must run without it
# The cheapest configure of the library: no CUDA, no tvm-ffi adapter, no XLA handlers (none changes what is checked).
configure() { local dir=$1; shift; cmake -S "$root" -B "$work/$dir" -DMXFP8_CUDA=OFF -DMXFP8_TVM_FFI=OFF -DMXFP8_JAX=OFF "$@" >"$work/$dir.log" 2>&1; }

# 1. Release by default.
configure default -DCMAKE_EXPORT_COMPILE_COMMANDS=ON || { cat "$work/default.log"; fail "configure with no build type"; }
grep -q "^CMAKE_BUILD_TYPE:STRING=Release$" "$work/default/CMakeCache.txt" || fail "no build type did not become Release"
grep -q "mxfp8: build type Release (the default" "$work/default.log" || fail "configure does not say the build type"
python3 - "$work/default/compile_commands.json" <<'PY' || fail "the library is not compiled with Release flags"
import json, sys
commands = [c["command"] for c in json.load(open(sys.argv[1])) if c["file"].endswith("src/api/export.cpp")]
assert commands and all("-O3" in c.split() and "-DNDEBUG" in c.split() for c in commands), commands
PY
configure chosen -DCMAKE_BUILD_TYPE=Debug && grep -q "^CMAKE_BUILD_TYPE:STRING=Debug$" "$work/chosen/CMakeCache.txt" ||
  fail "-DCMAKE_BUILD_TYPE=Debug was not kept"
if command -v ninja >/dev/null; then
  configure multi -G "Ninja Multi-Config" || { cat "$work/multi.log"; fail "configure with Ninja Multi-Config"; }
  ! grep -q "^CMAKE_BUILD_TYPE:STRING=Release" "$work/multi/CMakeCache.txt" || fail "a build type forced on a multi-config generator"
fi
echo "no build type: Release (-O3 -DNDEBUG); an explicit one is kept; multi-config generators left alone"

# 2. cmocka only for the tests (CMAKE_DISABLE_FIND_PACKAGE_cmocka: a machine without it).
configure nocmocka -DCMAKE_DISABLE_FIND_PACKAGE_cmocka=ON || { cat "$work/nocmocka.log"; fail "configure without cmocka"; }
grep -q "mxfp8: tests OFF: cmocka not found" "$work/nocmocka.log" || fail "AUTO without cmocka does not say the tests are off"
grep -q "examples ON; benchmarks ON" "$work/nocmocka.log" || fail "without cmocka the examples or benchmarks went"
[ ! -e "$work/nocmocka/tests" ] || fail "tests configured without cmocka"
if configure nocmocka-on -DCMAKE_DISABLE_FIND_PACKAGE_cmocka=ON -DMXFP8_BUILD_TESTS=ON; then
  fail "MXFP8_BUILD_TESTS=ON without cmocka configured"
fi
grep -qi "cmocka" "$work/nocmocka-on.log" || fail "MXFP8_BUILD_TESTS=ON without cmocka fails without naming cmocka"
configure notests -DMXFP8_BUILD_TESTS=OFF && [ ! -e "$work/notests/tests" ] || fail "MXFP8_BUILD_TESTS=OFF"
if pkg-config --exists cmocka 2>/dev/null || [ -e /usr/include/cmocka.h ]; then
  grep -q "mxfp8: tests ON (cmocka found" "$work/default.log" || fail "AUTO with cmocka installed did not turn the tests on"
fi
echo "without cmocka: AUTO configures the library, examples and benchmarks (tests off, said so); ON fails naming cmocka"

# Whether `program` resolves libmxfp8.so.0 to a path starting with `where`. ldd's output is read whole
# first: `ldd | grep -q` fails under pipefail whenever grep's early exit kills ldd with SIGPIPE.
finds_library() {
  local resolved
  resolved=$(ldd "$1")
  [[ $resolved == *"libmxfp8.so.0 => $2"* ]]
}

# 3. The build tree's programs.
for program in "$build/examples/c/export_te_layout" "$build/bench/host_bench"; do
  [ -x "$program" ] || continue
  finds_library "$program" "$build/libmxfp8.so.0" || fail "$program does not find $build/libmxfp8.so.0: $(ldd "$program" | grep mxfp8)"
done
"$build/examples/c/export_te_layout" >/dev/null || fail "the example does not run from the build tree"
echo "build tree: programs find libmxfp8.so.0 through their RPATH ($(readelf -d "$build/examples/c/export_te_layout" | sed -nE 's/.*Library (runpath|rpath): \[(.*)\]/\1 \2/p' | head -1))"

# 4. Installed to a prefix.
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$root/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "configuring the find_package consumer"; }
cmake --build "$work/consumer" >/dev/null
finds_library "$work/consumer/consumer" "$prefix/lib" || fail "the consumer does not find $prefix/lib/libmxfp8.so.0"
"$work/consumer/consumer" | tail -1
cmake --install "$work/consumer" --prefix "$work/consumer-prefix" >/dev/null
"$work/consumer-prefix/bin/consumer" >/dev/null || fail "the installed find_package consumer does not run"
echo "find_package(mxfp8) consumer: runs from its build tree and installed, without LD_LIBRARY_PATH"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -std=c99 "$root/examples/c/export_te_layout.c" -o "$work/consumer_pc" $(pkg-config --cflags --libs mxfp8)
"$work/consumer_pc" | tail -1
echo "pkg-config consumer: cc \$(pkg-config --cflags --libs mxfp8) runs without LD_LIBRARY_PATH"
