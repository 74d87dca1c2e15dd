#!/usr/bin/env python3
"""Per-call overhead of the tvm-ffi adapter from Python, against the pybind11 binding and the C call.

One tiny job, the (128, 128) tensor's swizzled scales (512 bytes) unswizzled into a caller buffer of
(128, 4), through three doors in the same run:
  us         tvm_ffi.load_module(mxfp8.tvm_ffi_library_path()).unswizzle_scales(swizzled, compact)
  pybind_us  mxfp8.unswizzle_scales(swizzled, 128, 4, out=compact)            (the pybind11 path)
  c_us       mxfp8_unswizzle_scales(&swizzled, &compact, stream) through ctypes, DLTensors built once
Host wall clock per call, median of --samples single calls each followed by a synchronize of the stream
(torch's current stream; nothing to wait for on the CPU), and, under "no_sync", the mean of bursts of
--burst calls with one synchronize after the burst (the launch cost alone).

  python3 bench/tvm_ffi_overhead.py --device cuda --out bench/results/run/tvm_ffi.json   # on the GPU
  python3 bench/tvm_ffi_overhead.py --device cpu --samples 2000                        # smoke run, NumPy

Writes {"us", "pybind_us", "c_us", "no_sync": {...}, "device", ...} as JSON (the "tvm_ffi" entry of
bench/results/latest-h200.json) and prints it.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import mxfp8

ROWS, COLS = 128, 4  # the scales of a (128, 128) tensor: one 128x4 tile, 512 bytes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


def c_tensor(address, device_type, device_id, shape, keep):
    """A uint8 row-major DLTensor over `address`; `keep` holds the ctypes arrays it points into."""
    shape_arr = (ctypes.c_int64 * len(shape))(*shape)
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    strides_arr = (ctypes.c_int64 * len(shape))(*strides)
    keep += [shape_arr, strides_arr]
    return DLTensor(address, DLDevice(device_type, device_id), len(shape), DLDataType(1, 8, 1), shape_arr,
                    strides_arr, 0)


def swizzled_of(s):
    """The cuBLAS 128x4 layout of a compact (R, C) scale matrix (R, C multiples of 128 and 4 here)."""
    r, c = s.shape
    return s.reshape(r // 128, 4, 32, c // 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1).copy()


def median_us(call, sync, samples, warmup=200):
    times = []
    for i in range(samples + warmup):
        t0 = time.perf_counter()
        call()
        sync()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def burst_us(call, sync, bursts, burst):
    for _ in range(burst):  # warm up
        call()
    sync()
    per_call = []
    for _ in range(bursts):
        t0 = time.perf_counter()
        for _ in range(burst):
            call()
        per_call.append((time.perf_counter() - t0) * 1e6 / burst)
        sync()
    return statistics.median(per_call)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when torch sees one")
    p.add_argument("--samples", type=int, default=5000)
    p.add_argument("--burst", type=int, default=100)
    p.add_argument("--out", type=Path, help="write the JSON here too")
    args = p.parse_args()

    import tvm_ffi

    mod = tvm_ffi.load_module(mxfp8.tvm_ffi_library_path())
    lib = ctypes.CDLL(str(Path(mxfp8.__file__).with_name("libmxfp8.so.0")))
    lib.mxfp8_unswizzle_scales.argtypes = [ctypes.POINTER(DLTensor), ctypes.POINTER(DLTensor), ctypes.c_void_p]
    lib.mxfp8_unswizzle_scales.restype = ctypes.c_int

    s = np.random.default_rng(0).integers(1, 255, (ROWS, COLS), dtype=np.uint8)
    device = args.device
    torch = None
    if device != "cpu":
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None or not torch.cuda.is_available():
            if device == "cuda":
                sys.exit("--device cuda: torch with a CUDA device is needed")
            device = "cpu"
        else:
            device = "cuda"

    if device == "cuda":
        swizzled = torch.from_numpy(swizzled_of(s)).cuda()
        compact = torch.empty((ROWS, COLS), dtype=torch.uint8, device="cuda")
        stream = torch.cuda.current_stream()
        sync = stream.synchronize
        c_args = (swizzled.data_ptr(), compact.data_ptr(), 2, torch.cuda.current_device())
        stream_ptr = ctypes.c_void_p(stream.cuda_stream)
        fetch = lambda: compact.cpu().numpy()  # noqa: E731
        poison = lambda: compact.fill_(0xFF)  # noqa: E731
    else:
        swizzled = swizzled_of(s)
        compact = np.empty((ROWS, COLS), np.uint8)
        sync = lambda: None  # noqa: E731
        c_args = (swizzled.ctypes.data, compact.ctypes.data, 1, 0)
        stream_ptr = ctypes.c_void_p(None)
        fetch = lambda: compact.copy()  # noqa: E731
        poison = lambda: compact.fill(0xFF)  # noqa: E731

    keep = []
    c_swizzled = c_tensor(c_args[0], c_args[2], c_args[3], [ROWS * COLS], keep)
    c_compact = c_tensor(c_args[1], c_args[2], c_args[3], [ROWS, COLS], keep)
    c_swizzled_ref, c_compact_ref = ctypes.byref(c_swizzled), ctypes.byref(c_compact)
    unswizzle_c = lib.mxfp8_unswizzle_scales

    def via_c():
        if unswizzle_c(c_swizzled_ref, c_compact_ref, stream_ptr) != 0:
            raise RuntimeError("mxfp8_unswizzle_scales failed")

    doors = {
        "us": lambda: mod.unswizzle_scales(swizzled, compact),
        "pybind_us": lambda: mxfp8.unswizzle_scales(swizzled, ROWS, COLS, out=compact),
        "c_us": via_c,
    }
    for name, call in doors.items():  # every door computes the right thing before it is timed
        poison()
        sync()
        call()
        sync()
        if not np.array_equal(fetch(), s):
            sys.exit(f"{name}: wrong scales")

    result = {"device": device, "shape": [128, 128], "samples": args.samples, "burst": args.burst,
              "tvm_ffi_version": tvm_ffi.__version__}
    result.update({name: round(median_us(call, sync, args.samples), 2) for name, call in doors.items()})
    result["no_sync"] = {name: round(burst_us(call, sync, max(1, args.samples // args.burst), args.burst), 2)
                         for name, call in doors.items()}
    result["ratio_to_c"] = round(result["us"] / result["c_us"], 3)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
