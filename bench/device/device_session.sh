#!/usr/bin/env bash
# The GPU check in one short device call, for sessions with little device time left: what
# bench/device/gpu_check.sh runs, minus compute-sanitizer and the slower benchmarks, with the CUDA code built for
# the H200 only (sm_90) and the Python package built at the same time as the C suite. Each step has a
# time limit and writes to $OUT as it goes, so a call cut short still returns what ran.
#   OUT=dir bash bench/device/device_session.sh          (carry .carry; see bench/device/README.md)
# SKIP_C=1 / SKIP_PYTEST=1 / SKIP_EXAMPLES=1 skip the C tests / the Python tests / the examples; BENCHES="refit_scale reshard" picks the Python
# benchmarks (python_overhead: the cost of a call from Python, issue 15; flashinfer_side_by_side: FlashInfer's scale
# kernels against ours, issue 36, FlashInfer from .carry/flashinfer.tar.xz, JIT-built on the first run).
# PROFILE=1 adds the Nsight Compute profiles of bench/device/profile_kernels.sh at the end (~3 minutes; results
# $OUT/profile.json); PROFILE=only builds and runs just those (no tests, no benchmarks).
# Logs go to $LOGS (default /tmp/device-session); $OUT gets only the results (the device tool brings back
# a handful of files).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/results/run}
LOGS=${LOGS:-/tmp/device-session}
mkdir -p "$OUT" "$LOGS"
status=0
step() { echo; echo "=== $* ($(date +%T))"; }
arch=90-real
source bench/device/carried_deps.sh

# apache-tvm-ffi from .carry/wheels when missing, so the tvm-ffi adapter is built and its tests run.
if ! python3 -c "import tvm_ffi" 2>/dev/null && ls .carry/wheels/apache_tvm_ffi-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --find-links .carry/wheels apache-tvm-ffi >"$LOGS/tvm-ffi.log" 2>&1 ||
    { echo "apache-tvm-ffi did not install from .carry/wheels (the adapter's tests will skip):"; tail -3 "$LOGS/tvm-ffi.log"; }
fi

step "Python package (in the background, sm_90 only)"
# compressed-tensors (and loguru) from .carry/wheels where the machine has its other dependencies
# (torch, transformers, pydantic), so test_quantize_compressed_tensors compares against the package itself.
if ! python3 -c "import compressed_tensors" 2>/dev/null && ls .carry/wheels/compressed_tensors-*.whl >/dev/null 2>&1; then
  if python3 -c "import torch, transformers, pydantic, psutil" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --find-links .carry/wheels compressed-tensors loguru \
      >"$LOGS/compressed-tensors.log" 2>&1 || { echo "compressed-tensors did not install:"; tail -3 "$LOGS/compressed-tensors.log"; }
  else
    echo "compressed-tensors not installed: the machine lacks one of torch, transformers, pydantic, psutil"
  fi
fi

pip_args=(--no-build-isolation --no-deps -q -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=$arch" -C build-dir=build-gpu-py
          "${carried_pip_args[@]}")
(CMAKE_BUILD_PARALLEL_LEVEL=8 timeout 300 python3 -m pip install "${pip_args[@]}" . >"$LOGS/pip.log" 2>&1; echo "pip exit $?" >>"$LOGS/pip.log") &
pip_pid=$!

step "configure and build (sm_90 only)"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXFP8_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=$arch "${carried_cmake_args[@]}" 2>&1 |
  grep -E "mxfp8|Error" || { echo "configure failed"; exit 1; }
timeout 240 cmake --build build-gpu -j 8 >"$LOGS/build.log" 2>&1 || { tail -30 "$LOGS/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$LOGS/gpu.txt"

if [ "${PROFILE:-0}" = only ]; then
  step "kernel profiles only (PROFILE=only: bench/device/profile_kernels.sh; the reshard case waits for the package)"
  wait $pip_pid
  tail -3 "$LOGS/pip.log"
  OUT="$OUT" LOGS="$LOGS/profile" timeout 200 bash bench/device/profile_kernels.sh build-gpu || status=1
  step "done: status $status"
  exit $status
fi

step "GPU test executables"
if [ "${SKIP_C:-0}" = 1 ]; then echo "skipped (SKIP_C=1)"; else
for t in test_gpu test_gpu_quantize test_gpu_failures test_gpu_import test_gpu_trtllm test_nvfp4 test_gpu_nvfp4_quantize \
         test_transfer_nvfp4; do
  [ -x build-gpu/tests/c/$t ] || continue
  # The tests take any MXFP8_TEST_QUICK, even 0, as quick mode (fewer configurations): pass it only if set.
  env ${MXFP8_TEST_QUICK:+MXFP8_TEST_QUICK=1} timeout 120 build-gpu/tests/c/$t >"$LOGS/$t.log" 2>&1 ||
    { status=1; grep -B2 -A4 -E "ERROR|Failure|expected" "$LOGS/$t.log" | head -20; }
  echo "$t: $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/$t.log" | tr '\n' ' ') $(grep -c SKIPPED "$LOGS/$t.log") skipped"
done
# Every contiguous part of values off the kernel (threshold 1 byte: the bulk copy on sm_90+, then with
# MXFP8_BULK_COPY=0 cudaMemcpyAsync), and none (0): every route of the values, on the tests' small shapes.
for route in "1 1" "1 0" "0 1"; do
  set -- $route
  for t in test_gpu test_gpu_import; do
    env ${MXFP8_TEST_QUICK:+MXFP8_TEST_QUICK=1} MXFP8_COPY_ENGINE_MIN_BYTES=$1 MXFP8_BULK_COPY=$2 timeout 120 \
      build-gpu/tests/c/$t >"$LOGS/$t-ce$1-bulk$2.log" 2>&1 ||
      { status=1; grep -B2 -A4 -E "ERROR|Failure|expected" "$LOGS/$t-ce$1-bulk$2.log" | head -20; }
    echo "$t with MXFP8_COPY_ENGINE_MIN_BYTES=$1 MXFP8_BULK_COPY=$2: $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/$t-ce$1-bulk$2.log" | tr '\n' ' ')"
  done
done
# Every scale unswizzle through shared memory (unset, as above: aligned unswizzles in registers, one chunk a block).
for path in smem; do
  env ${MXFP8_TEST_QUICK:+MXFP8_TEST_QUICK=1} MXFP8_UNSWIZZLE_PATH=$path timeout 120 build-gpu/tests/c/test_gpu \
    >"$LOGS/test_gpu-unswizzle-$path.log" 2>&1 ||
    { status=1; grep -B2 -A4 -E "ERROR|Failure|expected" "$LOGS/test_gpu-unswizzle-$path.log" | head -20; }
  echo "test_gpu with MXFP8_UNSWIZZLE_PATH=$path: $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/test_gpu-unswizzle-$path.log" | tr '\n' ' ')"
done
grep -l "SKIPPED" "$LOGS"/test_*.log && { echo "GPU cases were skipped on a GPU machine"; status=1; }
fi

step "Rust device wrappers (bindings/rust/mxfp8/tests/cuda.rs)"
# With cargo here, bindings/rust/gpu_test.sh builds and runs them; without, a test binary built on the
# developer's machine travels as .carry/rust_cuda_test (bench/device/README.md) and links this build's library.
if command -v cargo >/dev/null; then
  timeout 180 bash bindings/rust/gpu_test.sh build-gpu >"$LOGS/rust.log" 2>&1 || status=1
elif [ -x .carry/rust_cuda_test ]; then
  MXFP8_REQUIRE_GPU=1 LD_LIBRARY_PATH="$PWD/build-gpu:${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}" \
    timeout 120 .carry/rust_cuda_test --nocapture >"$LOGS/rust.log" 2>&1 || status=1
else
  echo "SKIPPED: no cargo and no .carry/rust_cuda_test" >"$LOGS/rust.log"
fi
grep -E "^test result|SKIPPED|FAILED|panicked" "$LOGS/rust.log" | head -8

step "Python tests (waiting for the package)"
wait $pip_pid
tail -3 "$LOGS/pip.log"
# One pytest process per test file, four at a time, each under its own time limit: a file that hangs
# is named (faulthandler dumps its stacks after 60 s) and costs only its own tests, not every file after it.
# PYTEST_FILES (a glob, default test_*.py) picks files, PYTEST_FILE_TIMEOUT (default 300 s) the limit.
if [ "${SKIP_PYTEST:-0}" != 1 ]; then
  mkdir -p "$LOGS/pytest"
  ls "$PWD"/bindings/python/tests/${PYTEST_FILES:-test_*.py} | xargs -P 4 -I{} sh -c 'f={}; n=$(basename $f .py);
    (cd /tmp && timeout '"${PYTEST_FILE_TIMEOUT:-300}"' python3 -m pytest -q -rs -p no:cacheprovider -o faulthandler_timeout=60 "$f") \
      >"'"$LOGS"'/pytest/$n.log" 2>&1; echo "$n: exit $? $(tail -1 "'"$LOGS"'/pytest/$n.log")"' | sort | tee "$LOGS/pytest.log"
  grep -vE ": exit (0|5) " "$LOGS/pytest.log" && status=1
fi

step "examples on the GPU"
[ "${SKIP_EXAMPLES:-0}" = 1 ] || {
  timeout 60 python3 -m mxfp8 demo --size small
  timeout 60 python3 -m mxfp8 demo --format nvfp4 --size small
  timeout 60 python3 examples/weight_sync/weight_sync.py --transport ipc --path direct --steps 2 --layers 2
  timeout 60 python3 examples/weight_sync/weight_sync.py --transport ipc --path bucketed --steps 2 --layers 2 --bucket-mb 64
  timeout 60 python3 examples/weight_sync/weight_sync.py --transport ipc --tp 2 --steps 2 --layers 2
  timeout 60 python3 examples/weight_sync/weight_sync.py --transport ipc --format nvfp4 --path direct --steps 2 --layers 2
  timeout 60 python3 examples/weight_sync/weight_sync.py --transport ipc --format nvfp4 --path bucketed --layout compact --steps 2 --layers 2 --bucket-mb 64
} >"$LOGS/examples.log" 2>&1 || status=1
grep -E "bit-exact|OK|FAIL|Error" "$LOGS/examples.log" | tail -8

step "benchmarks"
timeout 120 build-gpu/bench/bench_scales >"$OUT/bench_scales.json" 2>"$LOGS/bench_scales.err" || status=1
python3 - "$OUT/bench_scales.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
print("model", r["whole_model"], "\nmoe", r["moe"])
print("fraction of copy, unswizzle / swizzle:",
      {k: (round(v["copy_ms"] / v["unswizzle_ms"], 3), round(v["copy_ms"] / v.get("swizzle_ms", float("nan")), 3))
       for k, v in r["shapes"].items()})
if "nvfp4_export" in r:  # fractions of a same-size copy: the whole export call, its scale kernel alone
    e = r["nvfp4_export"]
    print("nvfp4 export", e["ms"], "ms:", round(e["copy_ms"] / e["ms"], 3), "of copy; GPU alone", e["gpu_ms"],
          "ms; unswizzle alone", round(e["copy_ms"] / e["unswizzle_ms"], 3))
PY
for b in "refit_scale 300" "weight_sync_e2e 150" "engine_layouts 150" "nvfp4_bench 90" "reshard 90" "python_overhead 180" \
         "flashinfer_side_by_side 300"; do
  set -- $b
  [ -f bench/$1.py ] || continue
  [ -z "${BENCHES:-}" ] || [[ " $BENCHES " == *" $1 "* ]] || continue
  PYTHONUNBUFFERED=1 timeout "$2" python3 bench/$1.py --out "$OUT/$1.json" >"$LOGS/$1.log" 2>&1 || { echo "$1 failed"; status=1; }
  tail -4 "$LOGS/$1.log"
done
if [ "${PROFILE:-0}" = 1 ]; then
  step "kernel profiles (bench/device/profile_kernels.sh)"
  OUT="$OUT" LOGS="$LOGS/profile" timeout 200 bash bench/device/profile_kernels.sh build-gpu || status=1
fi
step "done: status $status"
exit $status
