#!/usr/bin/env python3
"""The host cost of the receiver's prepared and immediate transfer from Python at model scale (issues 33, 36),
where no GPU is at hand, against the same transfer from C (bench/host_transfer.c).

`--layers` x `--experts` x 2 sources in Transformer Engine's storage, as bench/refit_scale.py --case moe
lays them out on a GPU but small enough for the CPU: w13 (96, 128) and w2 (128, 64) FP8 values (uint8,
every other one float8_e4m3fn for torch) with 128x4-swizzled scale_inv, each written into its own
(values, scales) parameter in "cutlass_128x4". 94 x 16 x 2 = 3008 tensors by default. CPU torch tensors
take the path CUDA ones take (the DLPack C exchange API, the C library's checks) less the CUDA calls;
NumPy arrays go through __dlpack__. Figures are the median of `--reps` calls, in µs per tensor:
  prepare    mxfp8.prepare_import_tensors: every check, the plan built, nothing written
  run        plan.run(): the copies alone (on a GPU a launch)
  immediate  mxfp8.import_tensors: the checks, then the copies
  bucket_*   the same receiver from a bucket: prepare_import_bucket and import_bucket of one bucket
             holding every source (export_bucket's, compact scales; the manifest read by the extension)
  c          the same three from C (mxfp8_tensor_create of each source + mxfp8_transfer_prepare /
             mxfp8_plan_run / mxfp8_transfer), when --c-bench names the built bench/host_transfer
  overhead   Python - C for prepare and immediate: what the binding adds per tensor

    python3 bench/python_host_cost.py [--layers 94] [--experts 16] [--reps 7] [--c-bench build/bench/host_transfer]
                                      [--json PATH] [--profile prepare|immediate]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np
import torch

import mxfp8

SHAPES = [(96, 128), (128, 64)]  # w13, w2 of one expert


def round_up(n, d):
    return (n + d - 1) // d * d


def build(layers, experts, seed=0, nvfp4=False):
    """The torch CPU sources and parameters, and the same as NumPy arrays (shared memory). nvfp4: the same
    tensors in NVFP4 as refit_scale.py --case nvfp4 gives them (packed values, swizzled E4M3 scales, a
    per-tensor amax, "shape" and "e4m3_max" given), into (values, scales, global_scale) parameters."""
    g = torch.Generator().manual_seed(seed)
    tensors, params = {}, {}
    for layer in range(layers):
        for e in range(experts):
            for w, (rows, cols) in zip(("w13", "w2"), SHAPES):
                name = f"model.layers.{layer}.mlp.experts.{e}.{w}.weight"
                if nvfp4:
                    c = -(-cols // 16)
                    tensors[name] = {
                        "format": "nvfp4", "swizzled": True, "shape": (rows, cols), "e4m3_max": 448,
                        "data": torch.randint(0, 256, (rows, cols // 2), dtype=torch.uint8, generator=g),
                        "scale_inv": torch.randint(1, 0x7F, (round_up(rows, 128) * round_up(c, 4),), dtype=torch.uint8,
                                                   generator=g),
                        "amax": torch.rand(1, generator=g) * 100 + 1}
                    params[name] = (torch.empty((rows, cols // 2), dtype=torch.uint8),
                                    torch.empty(round_up(rows, 128) * round_up(c, 4), dtype=torch.uint8),
                                    torch.empty(1))
                    continue
                c = -(-cols // 32)
                data = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, generator=g)
                if w == "w2":
                    data = data.view(torch.float8_e4m3fn)
                scale_inv = torch.randint(1, 255, (round_up(rows, 128) * round_up(c, 4),), dtype=torch.uint8,
                                          generator=g)
                tensors[name] = {"data": data, "scale_inv": scale_inv, "swizzled": True}
                values = torch.empty((rows, cols), dtype=torch.uint8)
                scales = torch.empty(mxfp8.scales_shape((rows, cols), "cutlass_128x4"), dtype=torch.uint8)
                params[name] = (values, scales)
    # NumPy has no float8: the bytes, as TE's uint8 storage (float32 amaxes and global scales as they are)
    as_numpy = lambda t: (t if t.dtype == torch.float32 else t.view(torch.uint8)).numpy()
    np_tensors = {k: {**v, **{b: as_numpy(v[b]) for b in ("data", "scale_inv", "amax") if b in v}}
                  for k, v in tensors.items()}
    np_params = {k: tuple(as_numpy(t) for t in ts) for k, ts in params.items()}
    return (tensors, params), (np_tensors, np_params)


def median_us(body, n, reps):
    body()  # warm: the exchange API's per-type lookup, first-touch of the parameters
    times = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        body()
        times.append((time.perf_counter_ns() - start) / n / 1000)
    return round(statistics.median(times), 3)


def calls(tensors, params):
    return {"prepare": lambda: mxfp8.prepare_import_tensors(tensors, params, layout="cutlass_128x4"),
            "immediate": lambda: mxfp8.import_tensors(tensors, params, layout="cutlass_128x4")}


def measure(tensors, params, reps):
    n = len(tensors)
    call = calls(tensors, params)
    plan = call["prepare"]()
    bucket, manifest = mxfp8.export_bucket(tensors)
    return {"prepare_us": median_us(call["prepare"], n, reps), "run_us": median_us(plan.run, n, reps),
            "immediate_us": median_us(call["immediate"], n, reps),
            "bucket_prepare_us": median_us(lambda: mxfp8.prepare_import_bucket(bucket, manifest, params,
                                                                               layout="cutlass_128x4"), n, reps),
            "bucket_immediate_us": median_us(lambda: mxfp8.import_bucket(bucket, manifest, params,
                                                                         layout="cutlass_128x4"), n, reps)}


def c_figures(path, layers, experts, reps):
    out = subprocess.run([path, "--layers", str(layers), "--experts", str(experts), "--reps", str(reps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=94)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--c-bench", default="build/bench/host_transfer",
                        help="the built bench/host_transfer.c (skipped when absent)")
    parser.add_argument("--format", choices=("mxfp8", "nvfp4"), default="mxfp8",
                        help="the sources' format (nvfp4: no C figures, bench/host_transfer is MXFP8's)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--profile", choices=("prepare", "immediate"), help="cProfile one torch CPU call instead")
    args = parser.parse_args()
    nvfp4 = args.format == "nvfp4"
    (t, p), (nt, np_) = build(args.layers, args.experts, nvfp4=nvfp4)
    n = len(t)
    if args.profile:
        import cProfile
        import pstats

        body = calls(t, p)[args.profile]
        body()
        cProfile.runctx("body()", globals(), {"body": body}, "/tmp/python_host_cost.prof")
        pstats.Stats("/tmp/python_host_cost.prof").sort_stats("tottime").print_stats(25)
        return
    results = {"tensors": n, "format": args.format, "shapes": SHAPES, "reps": args.reps,
               "torch_cpu": measure(t, p, args.reps), "numpy": measure(nt, np_, args.reps)}
    if os.path.exists(args.c_bench) and not nvfp4:
        results["c"] = c_figures(args.c_bench, args.layers, args.experts, args.reps)
    # The bytes: the torch parameters hold what the last NumPy call wrote (they share memory); the
    # library's own tests check them against references, this only guards the bench's inputs.
    first = next(iter(t))
    assert torch.equal(p[first][0], t[first]["data"].view(torch.uint8)), "the import did not write the values"
    print(f"{n} tensors ({args.layers} x {args.experts} x {SHAPES}), median of {args.reps}, µs per tensor")
    print(f"{'':10} {'prepare':>9} {'run':>8} {'immediate':>10} {'bucket prepare':>15} {'bucket immediate':>17}")
    for kind in ("torch_cpu", "numpy", "c"):
        if kind in results:
            r = results[kind]
            bucket = (f" {r['bucket_prepare_us']:15.2f} {r['bucket_immediate_us']:17.2f}" if "bucket_prepare_us" in r
                      else "")
            print(f"{kind:10} {r['prepare_us']:9.2f} {r['run_us']:8.2f} {r['immediate_us']:10.2f}{bucket}")
    if "c" in results:
        for kind in ("torch_cpu", "numpy"):
            r, c = results[kind], results["c"]
            r["overhead_us"] = {k: round(r[f"{k}_us"] - c[f"{k}_us"], 3) for k in ("prepare", "immediate")}
            print(f"{kind} over C: prepare {r['overhead_us']['prepare']:.2f}, "
                  f"immediate {r['overhead_us']['immediate']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
