#!/usr/bin/env python3
"""The host cost of the receiver's direct import from Python at model scale (issue 33), where no GPU is at hand.

`--tensors` (3008) sources in Transformer Engine's storage, (rows, cols) values (uint8, every other one
float8_e4m3fn) with swizzled 128x4 scale_inv (three in four) or compact ones, each written into its own
(values, scales, layout) parameter, "cutlass_128x4" and "compact" in turn: the weight-sync receiver's
call over a whole model. CPU torch tensors take the path CUDA ones take (the DLPack C exchange API, the
C library's checks) less the CUDA calls; NumPy arrays go through __dlpack__. Figures are the median of
`--reps` calls, in µs per tensor:
  prepare    prepare_import_tensors: every check, the plan built, nothing written
  immediate  import_tensors: the same checks, then the copies (done here on the host CPU)
  run        plan.run() of the prepared plan: the copies alone (on a GPU a launch)
  host       immediate - run: what the immediate call costs besides the copies
    python3 bench/python_import_host.py [--tensors 3008] [--rows 256] [--cols 512] [--reps 7] [--json PATH]
"""
import argparse
import json
import statistics
import time

import numpy as np
import torch

import mxfp8


def round_up(n, d):
    return (n + d - 1) // d * d


def build(n, rows, cols, seed=0):
    """n torch CPU sources and parameters, and the same as NumPy arrays (shared memory)."""
    g = torch.Generator().manual_seed(seed)
    c = -(-cols // 32)
    tensors, params = {}, {}
    for i in range(n):
        data = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, generator=g)
        if i % 2:
            data = data.view(torch.float8_e4m3fn)
        swizzled = i % 4 != 3
        if swizzled:
            scale_inv = torch.randint(1, 255, (round_up(rows, 128) * round_up(c, 4),), dtype=torch.uint8, generator=g)
        else:
            scale_inv = torch.randint(1, 255, (rows, c), dtype=torch.uint8, generator=g)
        name = f"model.layers.{i // 8}.w{i % 8}.weight"
        tensors[name] = {"data": data, "scale_inv": scale_inv, "swizzled": swizzled, "fp8_dtype": "e4m3"}
        layout = "cutlass_128x4" if i % 2 == 0 else "compact"
        values = torch.empty((rows, cols), dtype=torch.uint8)
        scales = torch.empty(mxfp8.scales_shape((rows, cols), layout), dtype=torch.uint8)
        params[name] = (values, scales, layout)
    as_numpy = lambda t: t.view(torch.uint8).numpy()  # NumPy has no float8: the bytes, as TE's uint8 storage
    np_tensors = {k: {**v, "data": as_numpy(v["data"]), "scale_inv": as_numpy(v["scale_inv"])} for k, v in tensors.items()}
    np_params = {k: (as_numpy(v), as_numpy(s), layout) for k, (v, s, layout) in params.items()}
    return (tensors, params), (np_tensors, np_params)


def median_us(body, n, reps):
    body()  # warm: the exchange API's per-type lookup, first-touch of the parameters
    times = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        body()
        times.append((time.perf_counter_ns() - start) / n / 1000)
    return round(statistics.median(times), 3)


def measure(tensors, params, reps):
    n = len(tensors)
    plan = mxfp8.prepare_import_tensors(tensors, params)
    r = {
        "prepare_us": median_us(lambda: mxfp8.prepare_import_tensors(tensors, params), n, reps),
        "immediate_us": median_us(lambda: mxfp8.import_tensors(tensors, params), n, reps),
        "run_us": median_us(plan.run, n, reps),
    }
    r["host_us"] = round(r["immediate_us"] - r["run_us"], 3)
    return r


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tensors", type=int, default=3008)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=512)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    (t, p), (nt, np_) = build(args.tensors, args.rows, args.cols)
    results = {"tensors": args.tensors, "shape": [args.rows, args.cols], "reps": args.reps,
               "torch_cpu": measure(t, p, args.reps), "numpy": measure(nt, np_, args.reps)}
    # The bytes: the torch parameters hold what the last NumPy call wrote (they share memory); the
    # library's own tests check them against references, this only guards the bench's inputs.
    first = next(iter(t))
    assert torch.equal(p[first][0], t[first]["data"].view(torch.uint8)), "the import did not write the values"
    print(f"{args.tensors} tensors of {args.rows} x {args.cols}, median of {args.reps}, µs per tensor")
    print(f"{'':10} {'prepare':>9} {'immediate':>10} {'run':>8} {'host':>8}")
    for kind in ("torch_cpu", "numpy"):
        r = results[kind]
        print(f"{kind:10} {r['prepare_us']:9.2f} {r['immediate_us']:10.2f} {r['run_us']:8.2f} {r['host_us']:8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
