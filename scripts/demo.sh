#!/usr/bin/env bash
# The main job on its built-in sample: build libmxfp8 and export a weight stored the way Transformer
# Engine stores it (padded, GEMM-swizzled scales) into FP8 values plus compact uint8 scales.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh build
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMXFP8_BUILD_TESTS=OFF >/dev/null
cmake --build build --target export_te_layout -j "$(nproc)" >/dev/null
build/examples/c/export_te_layout
