#!/usr/bin/env python3
"""What a call costs from JAX: inside jax.jit (mxfp8.jax, XLA FFI) against the same work through DLPack
from Python (mxfp8.convert on jax.Arrays), and the DLPack route from torch, in the same run.

The work: --count weights of (--rows, --cols), E4M3 values with 128x4-swizzled scales, each converted to
compact scales (the export a weight sync does), one call per weight.
  jit_us_per_call     one jitted program that converts all --count weights, wall clock per weight
                      (median of --samples runs, each ended by block_until_ready)
  dlpack_us_per_call  a Python loop of mxfp8.export_components(jax arrays, ..., swizzled=True) (the same
                      compact scales, a library-allocated copy), per weight, then a sync
  torch_us_per_call   the same loop with torch tensors (when torch imports), torch.cuda.synchronize
The targets (issue 38): the jitted call costs its kernel's time (no host round trip), and the DLPack route
from JAX within 1.5x of torch's.

  python3 bench/jax_overhead.py --device cuda --out bench/results/run/jax.json   # on the GPU
  python3 bench/jax_overhead.py --device cpu --count 8 --samples 5               # smoke run
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import mxfp8
import mxfp8.jax as mj


def timed(fn, samples: int) -> float:
    fn()  # warm (compile, allocate)
    runs = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--count", type=int, default=64)
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--out")
    a = p.parse_args()
    device = jax.devices(a.device)[0]
    rng = np.random.default_rng(0)
    c = -(-a.cols // 32)
    swizzled_bytes = mxfp8.layout_bytes("cutlass_128x4", a.rows, c)
    values = [rng.integers(0, 256, (a.rows, a.cols), dtype=np.uint8) for _ in range(a.count)]
    scales = [rng.integers(1, 255, swizzled_bytes, dtype=np.uint8) for _ in range(a.count)]
    jv = [jax.device_put(jnp.asarray(v).view(jnp.float8_e4m3fn), device) for v in values]
    js = [jax.device_put(jnp.asarray(s), device) for s in scales]

    @jax.jit
    def all_weights(vs, ss):
        return [mj.convert(v, s, "compact", swizzled=True).scales for v, s in zip(vs, ss)]

    def jit_run():
        jax.block_until_ready(all_weights(jv, js))

    def dlpack_run():
        outs = [mxfp8.export_components(v, s, swizzled=True)[1] for v, s in zip(jv, js)]
        jax.block_until_ready(jax.dlpack.from_dlpack(outs[-1]))

    result = {"device": a.device, "gpu": getattr(device, "device_kind", "cpu"), "count": a.count,
              "shape": [a.rows, a.cols], "date": time.strftime("%Y-%m-%d"), "jax": jax.__version__}
    result["jit_us_per_call"] = round(timed(jit_run, a.samples) / a.count * 1e6, 2)
    try:
        result["dlpack_us_per_call"] = round(timed(dlpack_run, a.samples) / a.count * 1e6, 2)
    except Exception as e:  # a DLPack route this jax cannot take is a finding, not a crash
        result["dlpack_error"] = f"{type(e).__name__}: {e}"
    got = np.asarray(all_weights(jv, js)[0])
    want = mxfp8.convert(values[0], scales[0], "compact", swizzled=True).scales
    result["bit_exact"] = bool(np.array_equal(got, want))
    try:
        import torch

        cuda = a.device == "cuda"
        tv = [torch.from_numpy(v).to("cuda" if cuda else "cpu").view(torch.float8_e4m3fn) for v in values]
        ts = [torch.from_numpy(s).to("cuda" if cuda else "cpu") for s in scales]

        def torch_run():
            for v, s in zip(tv, ts):
                mxfp8.export_components(v, s, swizzled=True)
            if cuda:
                torch.cuda.synchronize()

        result["torch_us_per_call"] = round(timed(torch_run, a.samples) / a.count * 1e6, 2)
        if "dlpack_us_per_call" in result:
            result["dlpack_over_torch"] = round(result["dlpack_us_per_call"] / result["torch_us_per_call"], 2)
    except ImportError:
        result["torch_us_per_call"] = None
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0 if result["bit_exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
