#!/usr/bin/env bash
# Runs every test of the repository, after installing what they need:
#   1. the C suite (ctest: cmocka tests, the ABI checks, the C example), with the CUDA path compiled when
#      nvcc is on the PATH; GPU cases skip on a machine without a GPU (bench/gpu_check.sh runs them);
#   2. the same C suite again under AddressSanitizer + UndefinedBehaviorSanitizer with leak detection;
#   3. the Python tests (pytest) against `pip install .`;
#   4. the Rust tests (cargo test --offline) against the library built in step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
step() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)"; }

step "installing dependencies"
scripts/install_deps.sh test

step "C library and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo | grep -E "mxfp8|dlpack"
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

step "C tests under AddressSanitizer + UndefinedBehaviorSanitizer (CPU path)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMXFP8_CUDA=OFF -DMXFP8_SANITIZE=ON | grep -E "mxfp8"
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"

step "Python binding and tests"
python3 -m pip install -q --disable-pip-version-check --no-build-isolation . 2>&1 | grep -v "Running pip as the 'root' user" || true
python3 -m pytest -q -p no:cacheprovider bindings/python/tests

if [ -d bindings/rust ]; then
  step "Rust crates and tests"
  build="$PWD/build"
  (cd bindings/rust &&
    export MXFP8_LIB_DIR="$build" MXFP8_INCLUDE_DIR="$build/../include" \
      MXFP8_LAYOUT_PROBE="$build/tests/c/print_struct_layout" LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" &&
    cargo test --offline && cargo run --offline --quiet --example export_swizzled)
fi
step "all tests passed"
