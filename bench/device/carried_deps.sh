# Sourced by the device scripts (gpu_check.sh, device_session.sh, ab.sh) from the repository root: what
# the device machine lacks travels in the ignored folder .carry/ (bench/device/README.md says how to fill it).
# Sets carried_cmake_args and carried_pip_args, and puts the carried cmocka on LD_LIBRARY_PATH.
carried_cmake_args=()
carried_pip_args=()
if [ -d .carry/dlpack ]; then
  carried_cmake_args+=(-DDLPACK_INCLUDE_DIR="$PWD/.carry/dlpack")
  carried_pip_args+=(-C "cmake.define.DLPACK_INCLUDE_DIR=$PWD/.carry/dlpack")
fi
if [ -d .carry/cmocka ]; then
  carried_cmocka=$(ls "$PWD"/.carry/cmocka/usr/lib/*/libcmocka.so.0 | head -1)
  carried_cmake_args+=(-DCMOCKA_INCLUDE_DIR="$PWD/.carry/cmocka/usr/include" -DCMOCKA_LIBRARY="$carried_cmocka")
  export LD_LIBRARY_PATH="$(dirname "$carried_cmocka")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# The peers' files the Python tests use as oracles (conftest.oracle_wheels): vLLM's padding, carried small.
if [ -d .carry/test-wheels ]; then
  export MXFP8_TEST_WHEELS="$PWD/.carry/test-wheels"
fi
