#!/usr/bin/env python3
"""The host cost of export_components from Python on CPU tensors (issue 15), where no GPU is at hand.

CPU torch tensors take the same path as CUDA ones (the DLPack C exchange API, the plain case of the
extension's export_components entry, the C library's checks), less the CUDA calls (the current stream, the kernel launch, the device
allocation): what this measures is the per-call Python, binding and library work that bench/python_overhead.py
sees on top of them on a GPU machine. Figures are the best of `--reps` runs of `--calls` calls (the machine is
shared: the minimum is the least disturbed), in µs per call:
  views     export_components(data, compact): two views, no copy
  swizzled  export_components(data, swizzled, swizzled=True) on (128, 128): a 512-byte host copy
  loop      a per-tensor loop of swizzled exports over 320 small weights (the model loop's shape, tiny sizes)
  torch     the seed's permute loop over the same 320 weights
    python3 bench/python_overhead_host.py [--calls 20000] [--reps 7]
"""
import argparse
import json
import time

import torch

import mxfp8

SHAPES = [(128, 128), (256, 128), (128, 512), (256, 256)]  # four weights a "layer", tiny


def round_up(n, d):
    return (n + d - 1) // d * d


def best_us(body, calls, reps):
    for _ in range(min(calls, 1000)):
        body()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter_ns()
        for _ in range(calls):
            body()
        best = min(best, (time.perf_counter_ns() - start) / calls / 1000)
    return round(best, 3)


def torch_unswizzle(swizzled, rows, cols):
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    tiles = swizzled.view(rp // 128, cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.reshape(rp, cp)[:rows, :cols].contiguous()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    torch.manual_seed(0)
    data = torch.randint(0, 255, (128, 128), dtype=torch.uint8)
    compact = torch.randint(1, 255, (128, 4), dtype=torch.uint8)
    swz = torch.randint(1, 255, (128 * 4,), dtype=torch.uint8)
    weights = []
    for _ in range(80):
        for rows, k in SHAPES:
            cols = k // 32
            weights.append((torch.randint(0, 255, (rows, k), dtype=torch.uint8),
                            torch.randint(1, 255, (round_up(rows, 128) * round_up(cols, 4),), dtype=torch.uint8), cols))
    export = mxfp8.export_components
    r = {
        "views_us": best_us(lambda: export(data, compact), args.calls, args.reps),
        "swizzled_us": best_us(lambda: export(data, swz, swizzled=True), args.calls, args.reps),
        "loop_us_per_tensor": round(best_us(lambda: [export(d, s, swizzled=True) for d, s, _ in weights],
                                            args.calls // 320 or 1, args.reps) / len(weights), 3),
        "torch_loop_us_per_tensor": round(best_us(lambda: [torch_unswizzle(s, d.shape[0], c) for d, s, c in weights],
                                                  args.calls // 320 or 1, args.reps) / len(weights), 3),
    }
    print(json.dumps(r))


if __name__ == "__main__":
    main()
