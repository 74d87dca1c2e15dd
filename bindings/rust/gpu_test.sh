#!/usr/bin/env bash
# The Rust device wrappers on a GPU (mxfp8/tests/cuda.rs), against a CUDA build of libmxfp8.
#   bindings/rust/gpu_test.sh [build folder, default build-gpu]   (from the repository root)
# bench/device/gpu_check.sh calls it after its build. Fails when no GPU is visible (MXFP8_REQUIRE_GPU=1).
set -euo pipefail
cd "$(dirname "$0")"
build=$(cd ../.. && realpath "${1:-build-gpu}")
if ! command -v cargo >/dev/null; then
  echo "SKIPPED: no cargo on this machine: the Rust GPU test did not run"
  exit 0
fi
cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
export MXFP8_LIB_DIR="$build" MXFP8_INCLUDE_DIR="$PWD/../../include" MXFP8_REQUIRE_GPU=1 \
  LIBRARY_PATH="$cuda_lib${LIBRARY_PATH:+:$LIBRARY_PATH}" \
  LD_LIBRARY_PATH="$build:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo test --offline --features cuda-tests --test cuda -- --nocapture 2>&1
