#!/usr/bin/env bash
# The main job on a built-in synthetic weight set (on the GPU when PyTorch sees one, else on the CPU):
# quantize BF16 weights into Transformer Engine's layout (padded, GEMM-swizzled scales), export them as
# FP8 values plus compact E8M0 scales, decode them, and check every byte. Arguments go to the demo
# (python -m mxfp8 demo --help).
#
# Everything goes into the checkout's virtual environment .venv (scripts/venv.sh), never the machine's
# Python: the build tools, numpy, and mxfp8 itself (`pip install .`, Release, the Python package only: no
# C tests, examples, benchmarks or tvm-ffi adapter). Afterwards `. .venv/bin/activate` gives you that mxfp8.
#
# The CUDA path is built when a GPU is visible (nvidia-smi lists one) and a CUDA compiler is found; with no
# GPU it is left out, as the demo would not use it (building it takes minutes). MXFP8_CUDA=ON or OFF decides
# instead.
set -euo pipefail
cd "$(dirname "$0")/.."
export MXFP8_SCRIPT_START=$(date +%s)  # one clock for the stages of this script and install_deps.sh
mxfp8_helpers_only=1 . scripts/venv.sh  # stage; the venv itself after install_deps.sh
scripts/install_deps.sh demo
. scripts/venv.sh

cuda=${MXFP8_CUDA:-}
if [ -n "$cuda" ]; then
  what="MXFP8_CUDA=$cuda"
elif command -v nvidia-smi >/dev/null && [[ $(nvidia-smi -L 2>/dev/null) == GPU\ * ]]; then
  cuda=AUTO what="a GPU is visible: with the CUDA path if a CUDA compiler is found"
else
  cuda=OFF what="no GPU visible: the CPU path only; MXFP8_CUDA=ON adds the CUDA path"
fi
stage "building mxfp8 into $VIRTUAL_ENV with pip install . ($what; the Python package only, Release)"
# pip -v shows the build's own output; its progress lines ([n/N] Building ...) are shown as they come.
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# The CMake settings go through scikit-build-core's environment variables (added to pyproject's cmake.define),
# not pip's -C, which the pip of a venv made by Debian 12's Python (23.0) does not have. A build folder of its
# own: CMake's cache would otherwise carry these settings into a later plain `pip install .`.
run_logged pip-install-mxfp8 '^ *\[ *[0-9]+(/[0-9]+| *%)\]|mxfp8: CUDA path' \
  env SKBUILD_CMAKE_DEFINE="MXFP8_CUDA=$cuda;MXFP8_TVM_FFI=OFF;MXFP8_JAX=OFF" SKBUILD_BUILD_DIR="build/demo-{wheel_tag}" \
  python3 -m pip install -v --no-build-isolation .

stage "python -m mxfp8 demo${*:+ $*}"
python3 -m mxfp8 demo "$@"
stage_done
