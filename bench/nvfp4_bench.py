#!/usr/bin/env python3
"""NVFP4 quantize of a (8192, 28672) BF16 weight against a copy of the bytes it moves (issue 22, item 5).

  quantize_ms             mxfp8.nvfp4_quantize(w): per-tensor amax computed (a pass over the input, as
                          Transformer Engine does it), then one pass writing packed values, compact E4M3
                          scales and the amax;
  quantize_given_amax_ms  the same with the amax given (the single quantize pass alone);
  quantize_copy_ms        one device-to-device copy of bytes / 2, where bytes = what one pass must move
                          (2 B read + 1/2 B + 1/16 B written per element), so the copy moves the same count
                          of bytes read plus written (bench/bench_scales.cu's convention);
  quantize_all_bytes_copy_ms  the same for bytes_with_amax_pass = bytes + the input read a second time: what
                          quantize_ms's call moves in all, since the amax pass must read the whole input
                          before any block scale is known (it is larger than L2).
Fractions (copy time / quantize time; 1.0 = as fast as a copy of those bytes):
  fraction_of_copy              quantize_ms against a copy of the single-pass bytes (the issue's figure;
                                with the amax computed its ceiling is bytes / bytes_with_amax_pass, ~0.56
                                for BF16, because the input is read twice);
  fraction_of_copy_all_bytes    quantize_ms against a copy of every byte its call moves;
  given_amax_fraction_of_copy   quantize_given_amax_ms against a copy of the single-pass bytes (one pass:
                                these are all its bytes).
Median of --reps, each call on a different one of two input copies (each larger than L2), CUDA events on
torch's current stream. The outputs are checked once against the host path bit for bit (a slice).

  python3 bench/nvfp4_bench.py --out run/nvfp4.json                 # the H200 run
  python3 bench/nvfp4_bench.py --merge bench/results/latest-h200.json  # also merge "nvfp4" into it
  python3 bench/nvfp4_bench.py --smoke                              # CPU, small shape, seconds

Writes {"nvfp4": {...}}; --merge updates only that key's fields (other tools may add their own fields
to "nvfp4", e.g. export_us) and leaves the rest of the file as it was.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import mxfp8

SHAPE = (8192, 28672)
SMOKE_SHAPE = (256, 1024 + 48)


def bytes_moved(rows: int, k: int, element_bytes: int = 2) -> int:
    """One pass: the input read once, packed values, compact scales and the amax written."""
    return element_bytes * rows * k + rows * -(-k // 2) + rows * -(-k // 16) + 4


def bytes_with_amax_pass(rows: int, k: int, element_bytes: int = 2) -> int:
    """What a call that computes the per-tensor amax moves: the input is read by the amax pass too."""
    return bytes_moved(rows, k, element_bytes) + element_bytes * rows * k


def bench_cuda(shape, reps):
    import torch

    rows, k = shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = [torch.randn(shape, device="cuda", dtype=torch.float32, generator=gen).to(torch.bfloat16) for _ in range(2)]
    moved = bytes_moved(rows, k)
    half = moved // 2
    src = [torch.empty(half, dtype=torch.uint8, device="cuda").fill_(i) for i in range(2)]
    dst = [torch.empty(half, dtype=torch.uint8, device="cuda") for _ in range(2)]
    half_all = bytes_with_amax_pass(rows, k) // 2
    src_all = [torch.empty(half_all, dtype=torch.uint8, device="cuda").fill_(i) for i in range(2)]
    dst_all = [torch.empty(half_all, dtype=torch.uint8, device="cuda") for _ in range(2)]
    given = torch.tensor([float(inputs[0].abs().max())], device="cuda")

    def timed(fn):
        times = []
        for i in range(reps + 2):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(i % 2)
            end.record()
            end.synchronize()
            if i >= 2:  # warm-up
                times.append(start.elapsed_time(end))
        return statistics.median(times)

    out = {
        "quantize_ms": timed(lambda i: mxfp8.nvfp4_quantize(inputs[i])),
        "quantize_given_amax_ms": timed(lambda i: mxfp8.nvfp4_quantize(inputs[i], amax=given)),
        "quantize_copy_ms": timed(lambda i: dst[i].copy_(src[i])),
        "quantize_all_bytes_copy_ms": timed(lambda i: dst_all[i].copy_(src_all[i])),
    }
    # Bit-exact against the host path on a slice of rows (the full tensor on the host would take minutes).
    q = mxfp8.nvfp4_quantize(inputs[0])
    rows_checked = 64
    host_in = inputs[0][:rows_checked].cpu().view(torch.int16).numpy().view(np.uint16)
    import ml_dtypes

    hq = mxfp8.nvfp4_quantize(host_in.view(ml_dtypes.bfloat16), amax=q.amax.cpu().numpy())
    out["bit_exact_with_host"] = bool(
        np.array_equal(q.values[:rows_checked].cpu().numpy(), hq.values)
        and np.array_equal(q.scales[:rows_checked].cpu().numpy(), hq.scales))
    out["gpu"] = torch.cuda.get_device_name()
    return out, moved, bytes_with_amax_pass(rows, k)


def bench_host(shape, reps):
    rows, k = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    moved = bytes_moved(rows, k, 4)
    src = np.ones(moved // 2, np.uint8)
    dst = np.empty_like(src)
    src_all = np.ones(bytes_with_amax_pass(rows, k, 4) // 2, np.uint8)
    dst_all = np.empty_like(src_all)

    def timed(fn):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)

    amax = np.array([np.abs(x).max()], np.float32)
    out = {
        "quantize_ms": timed(lambda: mxfp8.nvfp4_quantize(x)),
        "quantize_given_amax_ms": timed(lambda: mxfp8.nvfp4_quantize(x, amax=amax)),
        "quantize_copy_ms": timed(lambda: np.copyto(dst, src)),
        "quantize_all_bytes_copy_ms": timed(lambda: np.copyto(dst_all, src_all)),
        "bit_exact_with_host": True,  # it is the host path
        "input_dtype": "float32",
    }
    return out, moved, bytes_with_amax_pass(rows, k, 4)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="CPU, small shape: checks the script in seconds")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", help="write {'nvfp4': ...} here")
    p.add_argument("--merge", help="merge the 'nvfp4' fields into this results JSON (e.g. latest-h200.json)")
    args = p.parse_args()
    shape = SMOKE_SHAPE if args.smoke else SHAPE
    if args.smoke:
        result, moved, moved_all = bench_host(shape, max(3, min(args.reps, 10)))
    else:
        result, moved, moved_all = bench_cuda(shape, args.reps)
    result = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}
    result.update({
        "shape": list(shape),
        "bytes": moved,
        "bytes_with_amax_pass": moved_all,
        "fraction_of_copy": round(result["quantize_copy_ms"] / result["quantize_ms"], 3),
        "fraction_of_copy_all_bytes": round(result["quantize_all_bytes_copy_ms"] / result["quantize_ms"], 3),
        "given_amax_fraction_of_copy": round(result["quantize_copy_ms"] / result["quantize_given_amax_ms"], 3),
        "smoke": args.smoke,
    })
    text = json.dumps({"nvfp4": result}, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.merge:
        with open(args.merge) as f:
            merged = json.load(f)
        merged.setdefault("nvfp4", {}).update(result)
        with open(args.merge, "w") as f:
            f.write(json.dumps(merged, indent=2) + "\n")
    # One line a log's tail shows (device_session.sh prints the last lines of each benchmark's output).
    print(f"nvfp4 quantize {shape[0]}x{shape[1]}: amax given {result['quantize_given_amax_ms']} ms = "
          f"{result['given_amax_fraction_of_copy']} of a copy of its bytes; amax computed {result['quantize_ms']} ms = "
          f"{result['fraction_of_copy']} of a copy of the single-pass bytes, {result['fraction_of_copy_all_bytes']} of "
          f"a copy of all the bytes it moves (input read twice); bit-exact with host: {result['bit_exact_with_host']}")
    if not result["bit_exact_with_host"]:
        raise SystemExit("nvfp4_bench: the GPU result differs from the host path")


if __name__ == "__main__":
    sys.exit(main())
