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

The export (issue 22, item 5, second half): the same weight as Transformer Engine stores it with GEMM-swizzled
scales (packed values, the (8192, 1792) E4M3 block scales in the cuBLAS 128x4 layout, the amax), exported
through mxfp8.nvfp4.export_components(..., swizzled=True): values a zero-copy view, the scales unswizzled on
the GPU into compact (M, ceil(K/16)), the decode global scale amax / 2688 (a second, one-thread kernel).
  export_us        one export call: a CUDA graph of 8 calls on 8 distinct swizzled buffers (117 MB in, as
                   much out: larger than L2) replayed 4 times between two CUDA events, per call; median of
                   --reps samples ("export_timing" says "eager" if the capture failed: then it is host-bound);
  export_copy_us   one device-to-device copy of export_copy_bytes = export_bytes / 2, where export_bytes =
                   the swizzled buffer read + the compact scales written (bench/README.md's "same-size
                   copy" of the MXFP8 unswizzle: bytes read plus written, the copy moving as many); for this
                   shape, with no padding, the copy is exactly the swizzled buffer's size; timed the same way;
  export_fraction_of_copy  export_copy_us / export_us; targets.export_ge_85pct_of_copy: it is >= 0.85.
The swizzled input is built here from the layout's formula (the compact scales of mxfp8.nvfp4_quantize put
in TE's padded buffer, its padding poisoned, then tiled with torch reshape/permute), and every exported
scale matrix the graph wrote (poisoned first) is checked bit for bit against this file's own
unswizzle-and-crop of its input, and the global scale against amax / 2688 ("export_bit_exact");
"export_values_view": the values are the input's memory (same pointer, shape (M, K/2), uint8).

  python3 bench/nvfp4_bench.py --out run/nvfp4.json                 # the H200 run
  python3 bench/nvfp4_bench.py --merge bench/results/latest-h200.json  # also merge "nvfp4" into it
  python3 bench/nvfp4_bench.py --smoke                              # CPU, small shape, seconds

Writes {"nvfp4": {...}}; --merge updates only that key's fields and leaves the rest of the file as it was.
Without a GPU (or torch, or a CUDA build of mxfp8) only --smoke runs: the same steps on NumPy arrays.
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
# 200 rows and 67 scale columns: the swizzled buffer has padding rows and columns (poisoned, never read).
SMOKE_SHAPE = (200, 1024 + 48)
EXPORT_ROTATION = 8  # distinct swizzled buffers one timed burst walks (8 x 14.7 MB in + out: > the 50-60 MB L2)
EXPORT_REPLAYS = 4  # graph replays between two events: one launch's latency spread over 32 calls
POISON = 0x7F  # an E4M3 NaN in the padding of the swizzled input; 0xAA in outputs before they are written


def bytes_moved(rows: int, k: int, element_bytes: int = 2) -> int:
    """One pass: the input read once, packed values, compact scales and the amax written."""
    return element_bytes * rows * k + rows * -(-k // 2) + rows * -(-k // 16) + 4


def bytes_with_amax_pass(rows: int, k: int, element_bytes: int = 2) -> int:
    """What a call that computes the per-tensor amax moves: the input is read by the amax pass too."""
    return bytes_moved(rows, k, element_bytes) + element_bytes * rows * k


def round_up(n: int, d: int) -> int:
    return -(-n // d) * d


def swizzle_by_formula(padded, permute):
    """The cuBLAS 128x4 layout of a padded (Rp, Cp) scale matrix, from mxfp8.h's formula
    offset(r, c) = ((r / 128) * (Cp / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4:
    (r / 128, (r % 128) / 32, r % 32, c / 4, c % 4) stored in the order (r / 128, c / 4, r % 32, (r % 128) / 32,
    c % 4). `permute` is torch's Tensor.permute or NumPy's transpose; the result has the padded shape, as
    TE allocates the buffer it swizzles."""
    rp, cp = padded.shape
    return permute(padded.reshape(rp // 128, 4, 32, cp // 4, 4), (0, 3, 2, 1, 4)).reshape(rp, cp)


def unswizzle_by_formula(swizzled, rows: int, cols: int, permute):
    """The inverse (the same permutation, which is its own inverse), cropped to the (rows, cols) matrix."""
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    tiles = permute(swizzled.reshape(rp // 128, cp // 4, 32, 4, 4), (0, 3, 2, 1, 4))
    return tiles.reshape(rp, cp)[:rows, :cols]


def export_bytes(rows: int, k: int):
    """(bytes the export's scale copy moves: the swizzled buffer read + the compact matrix written, bytes of
    the same-size copy: half of that, so the copy moves as many, read plus written)."""
    cols = -(-k // 16)
    moved = round_up(rows, 128) * round_up(cols, 4) + rows * cols
    return moved, moved // 2


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
    del q, hq
    out.update(bench_export_cuda(inputs[0], reps))
    return out, moved, bytes_with_amax_pass(rows, k)


def bench_export_cuda(w, reps):
    """export_us / export_copy_us of a swizzled NVFP4 weight made from `w` (module docstring)."""
    import torch

    rows, k = w.shape
    cols = -(-k // 16)
    permute = lambda t, order: t.permute(*order)  # noqa: E731
    q = mxfp8.nvfp4_quantize(w)  # packed values, compact scales, amax
    padded = torch.full((round_up(rows, 128), round_up(cols, 4)), POISON, dtype=torch.uint8, device="cuda")
    padded[:rows, :cols] = q.scales
    swizzled = [swizzle_by_formula(padded, permute).clone() for _ in range(EXPORT_ROTATION)]
    expected = unswizzle_by_formula(swizzled[0], rows, cols, permute)
    # amax / (6 * 448) as one float32 division (NumPy's; torch on CUDA may multiply by the reciprocal)
    decode_scale = q.amax.cpu().numpy() / np.float32(2688.0)
    # The quantizer's own swizzled output is the same layout (its padding aside): TE's storage, as built here.
    te = mxfp8.nvfp4_quantize(w, amax=q.amax, scales="swizzled")
    checks = {"formula_round_trip": bool(torch.equal(expected, q.scales)),
              "quantizer_swizzle_agrees": bool(torch.equal(unswizzle_by_formula(te.scales, rows, cols, permute), q.scales))}
    del te, padded

    def export(i):
        return mxfp8.nvfp4.export_components(q.values, swizzled[i], q.amax, swizzled=True)

    parts = export(0)
    view = (parts.values.data_ptr() == q.values.data_ptr() and tuple(parts.values.shape) == (rows, k // 2)
            and parts.values.dtype == torch.uint8)
    del parts

    def burst():
        return [export(i) for i in range(EXPORT_ROTATION)]

    moved, copy_bytes = export_bytes(rows, k)
    src = [torch.full((copy_bytes,), i, dtype=torch.uint8, device="cuda") for i in range(EXPORT_ROTATION)]
    dst = [torch.empty(copy_bytes, dtype=torch.uint8, device="cuda") for _ in range(EXPORT_ROTATION)]

    def copy_burst():
        for i in range(EXPORT_ROTATION):
            dst[i].copy_(src[i])

    stream = torch.cuda.Stream()
    torch.cuda.synchronize()  # the inputs were made on the default stream
    export_us, export_run, export_timing, captured = time_burst_us(torch, stream, burst, reps)
    copy_us, _, copy_timing, _ = time_burst_us(torch, stream, copy_burst, reps)
    # Bit-exact: poison what the timed burst writes, run it once more, compare with this file's unswizzle.
    with torch.cuda.stream(stream):
        for p in captured or []:
            p.scales.fill_(0xAA)
            p.global_scale.fill_(float("nan"))
        exported = export_run()
    stream.synchronize()
    exact = all(torch.equal(p.scales, expected) and np.array_equal(p.global_scale.cpu().numpy(), decode_scale)
                for p in exported)
    return {
        "export_us": export_us,
        "export_copy_us": copy_us,
        "export_bytes": moved,
        "export_copy_bytes": copy_bytes,
        "export_bit_exact": bool(exact and checks["formula_round_trip"]),
        "export_values_view": bool(view),
        "export_quantizer_swizzle_agrees": checks["quantizer_swizzle_agrees"],
        "export_timing": export_timing if export_timing == copy_timing else f"{export_timing}, copy {copy_timing}",
        "export_rotation": EXPORT_ROTATION,
    }


def time_burst_us(torch, stream, burst, reps):
    """(median microseconds per call, a callable that runs the burst and returns its outputs, "cuda_graph" or
    "eager", the captured outputs or None): a CUDA graph of `burst` (EXPORT_ROTATION calls) replayed
    EXPORT_REPLAYS times between two events, per call; eager bursts when the capture fails (then the host's
    time per call shows)."""
    with torch.cuda.stream(stream):
        burst()  # warm up the caching allocator and the library outside the capture
        burst()
    stream.synchronize()
    run, timing, captured = burst, "eager", None
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            captured = burst()  # kept alive: the graph writes these on every replay

        def run():
            graph.replay()
            return captured

        timing = "cuda_graph"
        with torch.cuda.stream(stream):
            run()
        stream.synchronize()
    except Exception as e:  # capture unsupported on this path: time eager calls instead
        print(f"nvfp4_bench: CUDA graph capture failed ({type(e).__name__}: {e}); timing eager calls", flush=True)
        torch.cuda.synchronize()
        run, timing, captured = burst, "eager", None
    samples = []
    with torch.cuda.stream(stream):
        for _ in range(reps + 2):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(EXPORT_REPLAYS):
                run()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop) * 1e3 / (EXPORT_REPLAYS * EXPORT_ROTATION))
    return statistics.median(samples[2:]), run, timing, captured


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
    out.update(bench_export_host(x, reps))
    return out, moved, bytes_with_amax_pass(rows, k, 4)


def bench_export_host(x, reps):
    """The export's steps and checks on NumPy arrays (--smoke): times from the host clock, one buffer."""
    rows, k = x.shape
    cols = -(-k // 16)
    q = mxfp8.nvfp4_quantize(x)
    padded = np.full((round_up(rows, 128), round_up(cols, 4)), POISON, np.uint8)
    padded[:rows, :cols] = q.scales
    swizzled = np.ascontiguousarray(swizzle_by_formula(padded, np.transpose))
    expected = unswizzle_by_formula(swizzled, rows, cols, np.transpose)
    te = mxfp8.nvfp4_quantize(x, amax=q.amax, scales="swizzled")
    agrees = np.array_equal(unswizzle_by_formula(te.scales, rows, cols, np.transpose), q.scales)

    def export():
        return mxfp8.nvfp4.export_components(q.values, swizzled, q.amax, swizzled=True)

    parts = export()
    view = (not parts.values.is_copy and parts.values.data_ptr == q.values.ctypes.data
            and tuple(parts.values.shape) == (rows, k // 2) and parts.values.dtype == "uint8")
    exact = (np.array_equal(expected, q.scales) and np.array_equal(np.from_dlpack(parts.scales), expected)
             and np.array_equal(np.from_dlpack(parts.global_scale), q.amax / np.float32(2688.0)))
    moved, copy_bytes = export_bytes(rows, k)
    src, dst = np.ones(copy_bytes, np.uint8), np.empty(copy_bytes, np.uint8)

    def timed_us(fn):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e6)
        return statistics.median(times)

    return {
        "export_us": timed_us(export),
        "export_copy_us": timed_us(lambda: np.copyto(dst, src)),
        "export_bytes": moved,
        "export_copy_bytes": copy_bytes,
        "export_bit_exact": bool(exact),
        "export_values_view": bool(view),
        "export_quantizer_swizzle_agrees": bool(agrees),
        "export_timing": "host",
        "export_rotation": 1,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="CPU, small shape: checks the script in seconds")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", help="write {'nvfp4': ...} here")
    p.add_argument("--merge", help="merge the 'nvfp4' fields into this results JSON (e.g. latest-h200.json)")
    args = p.parse_args()
    shape = SMOKE_SHAPE if args.smoke else SHAPE
    if not args.smoke:
        try:
            import torch

            usable = torch.cuda.is_available() and mxfp8._mxfp8.with_cuda
        except ImportError:
            usable = False
        if not usable:
            raise SystemExit("nvfp4_bench: needs a CUDA GPU, torch and a CUDA build of mxfp8 (--smoke runs on the CPU)")
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
        "export_fraction_of_copy": round(result["export_copy_us"] / result["export_us"], 3),
        "smoke": args.smoke,
    })
    result["targets"] = {"export_ge_85pct_of_copy": result["export_fraction_of_copy"] >= 0.85}
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
    print(f"nvfp4 export {shape[0]}x{shape[1]}, swizzled scales ({result['export_timing']}): {result['export_us']} us = "
          f"{result['export_fraction_of_copy']} of a copy of {result['export_copy_bytes']} bytes "
          f"({result['export_copy_us']} us; target 0.85: {result['targets']['export_ge_85pct_of_copy']}); scales "
          f"bit-exact with the formula's unswizzle: {result['export_bit_exact']}; values a view: "
          f"{result['export_values_view']}")
    if not result["bit_exact_with_host"]:
        raise SystemExit("nvfp4_bench: the GPU result differs from the host path")
    if not (result["export_bit_exact"] and result["export_values_view"] and result["export_quantizer_swizzle_agrees"]):
        raise SystemExit("nvfp4_bench: the export differs from the formula's unswizzle, or its values are not a view")


if __name__ == "__main__":
    sys.exit(main())
