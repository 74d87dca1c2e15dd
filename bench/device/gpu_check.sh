#!/usr/bin/env bash
# Everything this repository runs on a GPU, in one call: build with CUDA, run the whole C test suite
# (the GPU cases included), run the GPU cases under compute-sanitizer, then the benchmark.
# Writes its logs and results to $OUT (default bench/results/run), including
# results.json and results.md for bench/results/.
#
# BENCH_ONLY=1 skips compute-sanitizer and the Python tests (for tuning runs; not for recorded results).
# C_ONLY=1 stops after the C suite and the GPU test executables (a quick check of the CUDA path).
# TESTS_ONLY=1 runs every test (C, Python, examples) but neither compute-sanitizer nor the benchmarks, so
# that a full check and the recorded benchmark can go in two calls of the device tool (10 minutes each).
# MXFP8_WHEEL_CHECK=1 adds the CUDA wheel's test at the end (see there).
# The device machine has no network: dlpack.h and cmocka travel in .carry/ (see bench/device/README.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/results/run}
mkdir -p "$OUT"
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

step "apache-tvm-ffi, for the tvm-ffi adapter (installed from .carry/wheels when missing)"
if ! python3 -c "import tvm_ffi" 2>/dev/null && ls .carry/wheels/apache_tvm_ffi-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --find-links .carry/wheels apache-tvm-ffi 2>&1 | tail -2
fi
if python3 -c "import tvm_ffi; print('apache-tvm-ffi', tvm_ffi.__version__)" 2>/dev/null; then
  export MXFP8_REQUIRE_TVM_FFI=1  # the adapter is built: its tests (in the Python tests below) must run
else
  echo "apache-tvm-ffi is not importable: the tvm-ffi adapter is not built, its tests skip, its benchmark is skipped"
fi
if python3 -c "import jax.ffi" 2>/dev/null; then
  export MXFP8_REQUIRE_JAX=1  # the package builds libmxfp8_xla: the mxfp8.jax tests must run
fi

step "configure and build"
source bench/device/carried_deps.sh
cmake_args=(-S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXFP8_BUILD_TESTS=ON "${carried_cmake_args[@]}")
cmake "${cmake_args[@]}" 2>&1 | grep -E "mxfp8|Error" || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j "$(nproc)" 2>&1 | tail -3 || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"

step "C test suite (ctest)"
(cd build-gpu && ctest --output-on-failure 2>&1) | tee "$OUT/ctest.log" || status=1
for t in test_gpu test_gpu_quantize test_gpu_failures test_gpu_import test_gpu_trtllm test_nvfp4 test_gpu_nvfp4_quantize test_transfer_nvfp4; do build-gpu/tests/c/$t 2>&1 | tee -a "$OUT/ctest.log" | tail -4; done
# Every value byte through the kernel (no cudaMemcpyAsync for large parts): the wide-chunk copy path.
# And every large-enough plain copy off the kernel (threshold 1 byte): the bulk copy, then cudaMemcpyAsync.
for t in test_gpu test_gpu_import; do
  MXFP8_COPY_ENGINE_MIN_BYTES=0 build-gpu/tests/c/$t >"$OUT/$t-kernel-copies.log" 2>&1 || status=1
  echo "$t with MXFP8_COPY_ENGINE_MIN_BYTES=0: $(tail -1 "$OUT/$t-kernel-copies.log")"
  MXFP8_COPY_ENGINE_MIN_BYTES=1 build-gpu/tests/c/$t >"$OUT/$t-copy-engine.log" 2>&1 || status=1
  echo "$t with MXFP8_COPY_ENGINE_MIN_BYTES=1 (the bulk copy on sm_90+): $(tail -1 "$OUT/$t-copy-engine.log")"
  MXFP8_BULK_COPY=0 MXFP8_COPY_ENGINE_MIN_BYTES=1 build-gpu/tests/c/$t >"$OUT/$t-memcpy.log" 2>&1 || status=1
  echo "$t with MXFP8_BULK_COPY=0 MXFP8_COPY_ENGINE_MIN_BYTES=1 (cudaMemcpyAsync): $(tail -1 "$OUT/$t-memcpy.log")"
done
grep -q "SKIPPED" "$OUT/ctest.log" && { echo "GPU cases were skipped on a GPU machine"; status=1; }
[ "${C_ONLY:-0}" = 1 ] && { step "done (C only): status $status"; exit $status; }

if [ "${BENCH_ONLY:-0}" != 1 ] && [ "${TESTS_ONLY:-0}" != 1 ]; then
step "compute-sanitizer"
for t in test_gpu test_gpu_quantize test_gpu_import test_gpu_trtllm test_nvfp4 test_gpu_nvfp4_quantize test_transfer_nvfp4; do
for tool in memcheck racecheck initcheck synccheck; do
  # initcheck does not see the bytes a TMA bulk copy (cp.async.bulk, the values route on sm_90) writes: a
  # later read of them is reported as uninitialized (2026-12-06, H100: 261,632 reports in test_gpu's shard
  # import, none with MXFP8_BULK_COPY=0 or MXFP8_COPY_ENGINE_MIN_BYTES=0, outputs bit-exact either way).
  # So initcheck runs the cudaMemcpyAsync route; the other tools run the bulk copy.
  bulk=1; [ "$tool" = initcheck ] && bulk=0
  MXFP8_BULK_COPY=$bulk MXFP8_TEST_QUICK=1 timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 build-gpu/tests/c/$t \
    >"$OUT/sanitizer-$tool.tmp" 2>&1
  rc=$?
  echo "$t $tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.tmp" | tail -1)"
  { echo "=== $t $tool"; cat "$OUT/sanitizer-$tool.tmp"; } >>"$OUT/sanitizer.log" && rm -f "$OUT/sanitizer-$tool.tmp"
  [ $rc -eq 0 ] || status=1
done
done 2>&1 | tee "$OUT/sanitizer-summary.txt"

fi

step "Python package${BENCH_ONLY:+ (tests skipped)}"
pip_args=(--no-build-isolation --no-deps -q "${carried_pip_args[@]}")
python3 -m pip install "${pip_args[@]}" . 2>&1 | tail -3
if [ "${BENCH_ONLY:-0}" != 1 ]; then
  (cd /tmp && python3 -m pytest -q -rs -p no:cacheprovider "$OLDPWD/bindings/python/tests" 2>&1) | tee "$OUT/pytest.log" | tail -25
  grep -qE "[0-9]+ passed" "$OUT/pytest.log" && ! grep -qE "[0-9]+ failed|error" "$OUT/pytest.log" || status=1
  # the GPU modules (test_gpu_torch.py, test_gpu_hostile.py) must run here, not skip
  grep -E "SKIPPED.*needs a CUDA device" "$OUT/pytest.log" && { echo "Python GPU tests were skipped on a GPU machine"; status=1; }
  step "the demo on the GPU (python -m mxfp8 demo)"
  python3 -m mxfp8 demo 2>&1 | tee "$OUT/examples.log" || status=1
  python3 -m mxfp8 demo --format nvfp4 2>&1 | tee -a "$OUT/examples.log" || status=1
  step "weight sync example over CUDA IPC"
  python3 examples/weight_sync/weight_sync.py --transport ipc --path direct --steps 3 --layers 8 --hidden 2048 \
    2>&1 | tee -a "$OUT/examples.log" || status=1
  python3 examples/weight_sync/weight_sync.py --transport ipc --path direct --layout compact --steps 2 --layers 2 \
    2>&1 | tee -a "$OUT/examples.log" || status=1
  python3 examples/weight_sync/weight_sync.py --transport ipc --path bucketed --steps 3 --layers 8 --hidden 2048 \
    --bucket-mb 64 2>&1 | tee -a "$OUT/examples.log" || status=1
  # Resharding: two receivers map the trainer's whole buckets, each imports its TP-2 shard (issue 20).
  python3 examples/weight_sync/weight_sync.py --transport ipc --tp 2 --steps 2 --layers 4 --hidden 2048 \
    --bucket-mb 64 2>&1 | tee -a "$OUT/examples.log" || status=1
  python3 examples/weight_sync/weight_sync.py --transport ipc --tp 2 --layout compact --steps 2 --layers 2 \
    2>&1 | tee -a "$OUT/examples.log" || status=1
  # NVFP4 storage (issue 22): the direct path and buckets into vLLM ModelOpt's parameters.
  python3 examples/weight_sync/weight_sync.py --transport ipc --format nvfp4 --path direct --steps 2 --layers 4 \
    --hidden 2048 2>&1 | tee -a "$OUT/examples.log" || status=1
  python3 examples/weight_sync/weight_sync.py --transport ipc --format nvfp4 --path bucketed --layout compact --steps 2 \
    --layers 4 --hidden 2048 --bucket-mb 16 2>&1 | tee -a "$OUT/examples.log" || status=1
  # Across ranks of a torch.distributed group (issue 37): gloo moving CUDA tensors, every rank on this GPU.
  step "dist weight sync example under torchrun (gloo, CUDA tensors)"
  (cd /tmp && torchrun --standalone --nproc-per-node 3 "$OLDPWD/examples/weight_sync/dist_sync.py" --backend gloo \
    --device cuda --steps 5 --tp 2 --layers 2 --hidden 1024 --layout cutlass_128x4 --bucket-mb 4 2>&1) \
    | grep -v "^W[0-9]" | tee -a "$OUT/examples.log" | tail -3
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

[ "${TESTS_ONLY:-0}" = 1 ] && { step "done (tests only): status $status"; exit $status; }
step "benchmark"
PYTHONUNBUFFERED=1 python3 bench/run_bench.py --bench-binary build-gpu/bench/bench_scales --out "$OUT" || status=1
step "the cost of a call from Python (bench/python_overhead.py)"
PYTHONUNBUFFERED=1 python3 bench/python_overhead.py --out "$OUT" || status=1

step "end-to-end weight sync benchmark (bench/weight_sync_e2e.py: direct, bucketed, by hand, copy)"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/weight_sync_e2e.py --smoke >"$OUT/weight_sync_e2e_smoke.log" 2>&1 \
  && echo "smoke run OK" || { echo "smoke run FAILED"; tail -20 "$OUT/weight_sync_e2e_smoke.log"; status=1; }
PYTHONUNBUFFERED=1 timeout 300 python3 bench/weight_sync_e2e.py --out "$OUT/weight_sync_e2e.json" 2>&1 \
  | tee "$OUT/weight_sync_e2e.log" | tail -45
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# The same with every value byte in the kernel (no copy engine), to see which wins.
MXFP8_COPY_ENGINE_MIN_BYTES=0 PYTHONUNBUFFERED=1 timeout 300 python3 bench/weight_sync_e2e.py \
  --out "$OUT/weight_sync_e2e_kernel_only.json" >"$OUT/weight_sync_e2e_kernel_only.log" 2>&1 || status=1
grep -E '"(direct|bucketed|by_hand|copy|bucket_fill)_ms"' "$OUT/weight_sync_e2e_kernel_only.json" | head -5

step "a refit at production scale (bench/refit_scale.py: 3008 MoE tensors, a TP-8 dense shard; bulk copy, memcpy, kernel)"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/refit_scale.py --case smoke >"$OUT/refit_scale_smoke.log" 2>&1 \
  && echo "smoke run OK" || { echo "smoke run FAILED"; tail -20 "$OUT/refit_scale_smoke.log"; status=1; }
PYTHONUNBUFFERED=1 timeout 400 python3 bench/refit_scale.py --out "$OUT/refit_scale.json" 2>&1 | tee "$OUT/refit_scale.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "dist weight sync step over gloo with CUDA tensors (bench/dist_sync.py: ours vs per-tensor broadcasts)"
(cd /tmp && PYTHONUNBUFFERED=1 timeout 300 torchrun --standalone --nproc-per-node 2 "$OLDPWD/bench/dist_sync.py" \
  --backend gloo --device cuda --out "$OUT/dist_sync.json" 2>&1) | grep -v "^W[0-9]" | tail -20
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
step "resharding benchmark (bench/reshard.py: one TP-8 shard and the 80-layer model's, vs copy and crop)"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/reshard.py --smoke >"$OUT/reshard_smoke.log" 2>&1 \
  && echo "smoke run OK" || { echo "smoke run FAILED"; tail -20 "$OUT/reshard_smoke.log"; status=1; }
PYTHONUNBUFFERED=1 timeout 400 python3 bench/reshard.py --out "$OUT/reshard.json" --merge "$OUT/results.json" 2>&1 \
  | tee "$OUT/reshard.log" | tail -30
step "engine-native targets (bench/engine_layouts.py: a 128-expert MoE layer into each target)"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/engine_layouts.py --smoke >"$OUT/engine_layouts_smoke.log" 2>&1 \
  && echo "smoke run OK" || { echo "smoke run FAILED"; tail -20 "$OUT/engine_layouts_smoke.log"; status=1; }
PYTHONUNBUFFERED=1 timeout 300 python3 bench/engine_layouts.py --out "$OUT/engine_layouts.json" 2>&1 \
  | tee "$OUT/engine_layouts.log" | tail -40
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "NVFP4 quantize of a (8192, 28672) BF16 weight, and the export of its swizzled scales, against copies (bench/nvfp4_bench.py)"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/nvfp4_bench.py --out "$OUT/nvfp4.json" 2>&1 | tee "$OUT/nvfp4.log" | tail -20
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

if python3 -c "import tvm_ffi, mxfp8; mxfp8.tvm_ffi_library_path()" 2>/dev/null; then
  step "the cost of a call through the tvm-ffi module (bench/tvm_ffi_overhead.py)"
  python3 bench/tvm_ffi_overhead.py --device cuda --out "$OUT/tvm_ffi.json" || status=1
fi

# ----------------------------------------------------------------------------------------------------
# Optional, MXFP8_WHEEL_CHECK=1: the CUDA wheel as a user installs it (about 2-4 minutes more). Build it on
# the CPU machine first, which has the network that `python -m build` and auditwheel need:
#   scripts/wheel.sh cuda .carry/wheels        (then carry .carry)
# Here it is checked (sm_90 and sm_100 code; nothing needed but glibc, libstdc++, libgcc) and installed into
# a fresh venv with no compiler on the PATH, where the Python tests run with the GPU ones required, and
# the demo runs on the GPU. When no carried wheel matches this machine's Python, one is built here with
# `pip wheel` (the same build, not auditwheel-repaired) and tested the same way; the log says which.
if [ "${MXFP8_WHEEL_CHECK:-0}" = 1 ]; then
  step "optional: the CUDA wheel in a fresh venv (MXFP8_WHEEL_CHECK=1)"
  tag=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  wheel=$(ls .carry/wheels/cuda/mxfp8-*-"$tag"-"$tag"-manylinux*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ]; then
    wheel_dir=$(mktemp -d)
    echo "no carried CUDA wheel for $tag: building one here with pip wheel (not auditwheel-repaired)"
    python3 -m pip wheel "${pip_args[@]}" -w "$wheel_dir" -C cmake.define.MXFP8_CUDA=ON . 2>&1 | tail -3
    wheel=$(ls "$wheel_dir"/mxfp8-*.whl)
  fi
  echo "testing $wheel"
  MXFP8_WHEEL_GPU=1 bash scripts/wheel.sh test "$wheel" 2>&1 | tee -a "$OUT/examples.log" || status=1
fi

step "done: status $status"
exit $status
