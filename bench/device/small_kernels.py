#!/usr/bin/env python3
"""Kernel time of the scale swizzle and unswizzle at small sizes, ours against FlashInfer's JIT kernels (issue
36: FlashInfer side by side), as Nsight Compute measures each kernel alone (cold caches, no launch gaps): which
part of bench/flashinfer_side_by_side.py's event-timed gap at 128-1024 rows is the kernel itself.

    ncu --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread \\
        --csv python3 bench/device/small_kernels.py run > kernels.csv      # on the GPU; FlashInfer as the
    python3 bench/device/small_kernels.py table kernels.csv [--out small_kernels.json]   # side-by-side sets it up

`run` makes each call twice per shape, in NVTX ranges named for it; `table` keeps one line per kernel
launch (each shape's random-fill kernel left out) and prints them. results/small_kernels_ncu_h100_2026-12-07.json
holds two such tables, before and after a change.
"""
import argparse
import collections
import csv
import json
import os
import sys

SHAPES = [(128, 128), (1024, 160), (8192, 224)]


def run():
    import torch

    import mxfp8

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import flashinfer_side_by_side as fsb

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    args = argparse.Namespace(flashinfer_dir="/tmp/mxfp8-flashinfer", wheels=os.path.join(root, ".carry", "wheels"),
                              flashinfer_tar=os.path.join(root, ".carry", "flashinfer.tar.xz"))
    _, fi = fsb.import_flashinfer(args, torch.cuda.get_device_capability(), {})
    for rows, cols in SHAPES:
        rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
        compact = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, device="cuda")
        ours_swizzled, fi_swizzled = (torch.empty(rp * cp, dtype=torch.uint8, device="cuda") for _ in range(2))
        ours_compact = torch.empty((rows, cols), dtype=torch.uint8, device="cuda")
        fi_compact = torch.empty((rp, cp), dtype=torch.uint8, device="cuda")
        calls = {"ours_swizzle": lambda: mxfp8.swizzle_scales(compact, ours_swizzled),
                 "flashinfer_swizzle": lambda: fi.block_scale_interleave_sm100(compact, fi_swizzled),
                 "ours_unswizzle": lambda: mxfp8.unswizzle_scales(ours_swizzled, rows, cols, ours_compact),
                 "flashinfer_unswizzle": lambda: fi.block_scale_interleave_reverse_sm100(ours_swizzled.view(rp, cp),
                                                                                       fi_compact)}
        for _ in range(2):
            for name, call in calls.items():
                torch.cuda.nvtx.range_push(f"{name} {rows}x{cols}")
                call()
                torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


def table(path, out):
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    header = rows[0]
    at = {k: header.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
    kernels = collections.defaultdict(dict)
    for r in rows[1:]:
        kernel = kernels[int(r[at["ID"]])]
        kernel["kernel"] = r[at["Kernel Name"]][:60]
        kernel[r[at["Metric Name"]].split("__")[-1]] = r[at["Metric Value"]].replace(",", "")
    kept = [dict(id=i, **k) for i, k in sorted(kernels.items()) if "distribution" not in k["kernel"]]
    for k in kept:
        print(k["id"], k["kernel"][:40], " ".join(f"{a}={b}" for a, b in k.items() if a not in ("id", "kernel")))
    if out:
        with open(out, "w") as f:
            json.dump({"shapes": SHAPES, "unit": "gpu__time_duration.sum in ns", "kernels": kept}, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("run", "table"))
    parser.add_argument("csv", nargs="?", help="table: ncu's --csv output of `run`")
    parser.add_argument("--out", help="table: also write the kernels as JSON here")
    args = parser.parse_args()
    if args.mode == "run":
        run()
    else:
        table(args.csv, args.out)


if __name__ == "__main__":
    main()
