"""Where the tvm-ffi kernel library of this package is, for tvm_ffi.load_module."""
from __future__ import annotations

from pathlib import Path

_LIBRARY = "libmxfp8_tvm_ffi.so"


def tvm_ffi_library_path() -> str:
    """The path of libmxfp8_tvm_ffi.so, the mxfp8 functions as an Apache TVM FFI module:

        mod = tvm_ffi.load_module(mxfp8.tvm_ffi_library_path())
        mod.unswizzle_scales(swizzled, compact)   # torch, NumPy, JAX, CuPy tensors; outputs are yours

    The library is built into the package when apache-tvm-ffi is importable at build time (an isolated
    `pip install .` always has it). Raises FileNotFoundError when this install was built without it.
    """
    path = Path(__file__).with_name(_LIBRARY)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: this mxfp8 was built without the tvm-ffi adapter (MXFP8_TVM_FFI=OFF, as "
            "scripts/demo.sh builds, or apache-tvm-ffi not importable at build time). Reinstall with it: "
            "pip install apache-tvm-ffi, then pip install --no-build-isolation "
            "--config-settings=cmake.define.MXFP8_TVM_FFI=ON .")
    return str(path)
