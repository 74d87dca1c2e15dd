#!/usr/bin/env bash
# Runs every test of the repository, after installing what they need:
#   1. the C suite (ctest: cmocka tests, the ABI checks, the examples), with the CUDA path compiled when
#      nvcc is on the PATH; GPU cases skip on a machine without a GPU (bench/device/gpu_check.sh runs them); then
#      the host benchmark (bench/host_bench, a few seconds; its JSON lands in build/latest-host.json);
#   2. what a CMake user expects (tests/install/test_cmake_defaults.sh: Release by default, cmocka only for
#      the tests, RPATH in the build tree, an install into a temporary prefix used by a find_package and a
#      pkg-config consumer, none of them needing LD_LIBRARY_PATH); the ABI gate
#      (scripts/abi.sh, tests/abi/test_gate.sh); the cpack tarball and .deb, and a consumer of the tarball;
#   3. the same C suite again under AddressSanitizer + UndefinedBehaviorSanitizer with leak detection,
#      the threading and lifetime tests under ThreadSanitizer, and bounded libFuzzer runs (60 s each for
#      the export, the quantize, the hostile-caller and the receiver's bucket-and-manifest harness; a unit
#      slower than 10 s fails);
#   4. the Python tests (pytest), the demo (python -m mxfp8 demo) and the Python examples against
#      `pip install .` (into .venv); then the sdist and a CPU-only wheel (scripts/wheel.sh), tested in a fresh venv;
#   5. the Rust tests (cargo test --offline, the ABI probe required), the Rust docs without warnings, the
#      export example, and the Python weight-sync trainer sending buckets over shared memory to the Rust
#      receiver example, against the library built in step 1;
#   6. every Python, C and Rust block of README.md and docs/*.md, as written (scripts/test_docs.py).
#
# Python runs in the checkout's virtual environment (.venv, scripts/venv.sh): every pip install goes there,
# never into the machine's Python. Each stage prints a line with the time since the start; any failure
# stops the run with the failing command's output.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
export MXFP8_SCRIPT_START=$(date +%s)  # one clock for the stages of this script and install_deps.sh
mxfp8_helpers_only=1 . scripts/venv.sh  # stage; the venv itself after install_deps.sh
step() { echo; stage "$@"; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

step "installing dependencies"
scripts/install_deps.sh test
. scripts/venv.sh

step "C library and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMXFP8_TVM_FFI=ON -DMXFP8_JAX=ON -DMXFP8_BUILD_TESTS=ON | grep -E "mxfp8|dlpack"
cmake --build build -j "$jobs"
ctest --no-tests=error --test-dir build --output-on-failure -j "$jobs" | tee -a "$log"

step "host benchmark (numbers only, no threshold; bench/README.md)"
build/bench/host_bench --reps 3 --out build/latest-host.json --note "scripts/test.sh on $(hostname)" | grep -E '"(cpu|cores|quantize|dequantize|unswizzle)"'

step "ABI gate: this build against abi/, and a scratch build that must fail it"
scripts/abi.sh check build/libmxfp8.so.0
tests/abi/test_gate.sh

step "CMake as users meet it: default build type, cmocka only for tests, RPATH, find_package and pkg-config consumers"
tests/install/test_cmake_defaults.sh build

step "release packages (cpack tarball and .deb): a consumer builds against the unpacked tarball"
tests/install/test_package.sh build

step "C tests under AddressSanitizer + UndefinedBehaviorSanitizer (CPU path)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMXFP8_CUDA=OFF -DMXFP8_SANITIZE=address,undefined -DMXFP8_BUILD_TESTS=ON | grep -E "mxfp8"
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --no-tests=error --test-dir build-asan --output-on-failure -j "$jobs" | tee -a "$log"

step "concurrency and lifetime tests under ThreadSanitizer (CPU path)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DMXFP8_CUDA=OFF -DMXFP8_SANITIZE=thread -DMXFP8_BUILD_TESTS=ON | grep -E "mxfp8"
cmake --build build-tsan -j "$jobs"
TSAN_OPTIONS=halt_on_error=1 ctest --no-tests=error --test-dir build-tsan --output-on-failure -R "concurrency|lifetime|export_semantics|host_threads|engine_layouts|transfer_nvfp4" | tee -a "$log"

step "fuzzing the host path for ${MXFP8_FUZZ_SECONDS:=60} s per harness (libFuzzer + ASan + UBSan)"
# Debug: -O0 with assertions, as this build always was (before Release became the default build type)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DMXFP8_CUDA=OFF -DMXFP8_BUILD_FUZZERS=ON -DMXFP8_BUILD_TESTS=OFF \
  -DMXFP8_BUILD_EXAMPLES=OFF | grep -E "mxfp8"
cmake --build build-fuzz --target fuzz_export fuzz_quantize fuzz_hostile fuzz_receive -j "$jobs"
for harness in export quantize hostile receive; do
  seeds=fuzz/corpus; [ "$harness" = quantize ] && seeds=fuzz/corpus_quantize
  [ "$harness" = hostile ] && seeds=fuzz/corpus_hostile
  [ "$harness" = receive ] && seeds=fuzz/corpus_receive
  corpus=$(mktemp -d)
  cp "$seeds"/* "$corpus"/
  echo "fuzz_$harness:"
  build-fuzz/fuzz/fuzz_$harness "$corpus" -max_total_time="$MXFP8_FUZZ_SECONDS" -timeout=10 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/ 2>&1 | grep -E "^(stat::number_of_executed_units|stat::new_units_added)|ERROR|SUMMARY|Done|fuzz_"
  rm -rf "$corpus"
done

step "Python binding and tests"
# The settings said outright (a folder's CMake cache would otherwise keep those of an earlier build there).
run_logged pip-install-mxfp8 '^ *\[ *[0-9]+/[0-9]+\]|mxfp8: (CUDA path|tvm-ffi|XLA FFI)' \
  env SKBUILD_CMAKE_DEFINE="MXFP8_CUDA=AUTO;MXFP8_TVM_FFI=ON;MXFP8_JAX=ON" python3 -m pip install -v --no-build-isolation .
# apache-tvm-ffi and jax are installed (install_deps.sh), so the package holds the tvm-ffi adapter and the
# XLA FFI handlers: their tests must run.
export MXFP8_REQUIRE_TVM_FFI=1 MXFP8_REQUIRE_JAX=1
python3 -m pytest -q -p no:cacheprovider bindings/python/tests | tee -a "$log"
python3 -m mxfp8 demo --size small
python3 -m mxfp8 demo --format nvfp4 --size small
python3 examples/python/export_te_weight.py
python3 examples/weight_sync/weight_sync.py --transport shm --steps 2
python3 bench/tvm_ffi_overhead.py --device cpu --samples 300 --burst 20 | tr -d '\n ' && echo  # the benchmark still runs
python3 bench/device/test_ncu_summary.py  # the profile post-processor (bench/device/profile_kernels.sh) on hand-made ncu CSVs

step "Python release: sdist and CPU-only manylinux wheel, tested in a fresh venv with no compiler"
env -u MXFP8_REQUIRE_TVM_FFI -u MXFP8_REQUIRE_JAX scripts/wheel.sh cpu  # the wheels carry neither adapter (wheel.sh says why)

if [ -d bindings/rust ]; then
  step "Rust crates and tests"
  build="$PWD/build"
  (cd bindings/rust &&
    # No LD_LIBRARY_PATH: the tests, doc tests and examples find libmxfp8 through their RPATH (build.rs).
    export MXFP8_LIB_DIR="$build" MXFP8_INCLUDE_DIR="$build/../include" MXFP8_REQUIRE_ABI_PROBE=1 &&
    unset LD_LIBRARY_PATH &&
    cargo test --offline 2>&1 && RUSTDOCFLAGS="-D warnings" cargo doc --offline --no-deps 2>&1 &&
    cargo run --offline --quiet --example export_swizzled &&
    cargo build --offline --quiet --example receive_bucket &&
    python3 ../../examples/rust/send_bucket.py target/debug/examples/receive_bucket) | tee -a "$log"
fi

step "README.md and docs/*.md: every code block, as written (scripts/test_docs.py)"
python3 scripts/test_docs.py --build-dir build --python "$(command -v python3)" | tee -a "$log"

step "summary"
stage_done
# ctest counts executables (each holds many cmocka cases), pytest and cargo count cases.
passed=$(grep -oE "failed out of [0-9]+|[0-9]+ passed" "$log" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) n += $i} END {print n}')
echo "ctest, pytest and cargo: $passed passed, 0 failed"
