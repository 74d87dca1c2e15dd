#!/usr/bin/env bash
# The main job on a built-in synthetic weight set (on the GPU when PyTorch sees one, else on the CPU):
# quantize BF16 weights into Transformer Engine's layout (padded, GEMM-swizzled scales), export them as
# FP8 values plus compact E8M0 scales, decode them, and check every byte. Arguments go to the demo
# (python -m mxfp8 demo --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh demo
echo "building and installing the mxfp8 Python package (pip install .) ..."
python3 -m pip install -q --disable-pip-version-check --no-build-isolation . 2>&1 | grep -v "Running pip as the 'root' user" || true
python3 -m mxfp8 demo "$@"
