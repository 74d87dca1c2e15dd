#!/usr/bin/env python3
"""Runs the libmxfp8 GPU benchmark and its PyTorch baseline in one process tree and writes the results.

The baseline is the seed's method: undo the GEMM swizzle with one PyTorch view/permute/reshape, crop the
padding and make it contiguous. It is timed exactly like the library (bench_scales.cu): cold caches by
rotating over >= 256 MiB of inputs, iterations enqueued back to back between two CUDA events, median over
repetitions; bandwidth counts bytes read plus bytes written.

Writes OUT/results.json (the schema of bench/results/latest-h200.json) and OUT/results.md.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bindings", "python", "tests"))
from mx_reference_torch import quantize_rowwise  # noqa: E402  (the PyTorch quantize baseline)

COLD_BYTES = 256 << 20
REPETITIONS = 15
LAYER = [(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)]


def round_up(n, d):
    return (n + d - 1) // d * d


def torch_unswizzle(swizzled, rows, cols):
    """The seed's permute-based unswizzle of a rowwise scale matrix."""
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    tiles = swizzled.view(rp // 128, cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.reshape(rp, cp)[:rows, :cols].contiguous()


def median_ms_per_iteration(iterations, body):
    for i in range(iterations):
        body(i)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(REPETITIONS):
        start.record()
        for i in range(iterations):
            body(i)
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / iterations)
    return statistics.median(samples)


def swizzled_inputs(rows, k, copies):
    cols = (k + 31) // 32
    n = round_up(rows, 128) * round_up(cols, 4)
    return [torch.randint(1, 255, (n,), dtype=torch.uint8, device="cuda") for _ in range(copies)], cols


def torch_shape(rows, k):
    cols = (k + 31) // 32
    nbytes = round_up(rows, 128) * round_up(cols, 4) + rows * cols
    inputs, cols = swizzled_inputs(rows, k, max(2, COLD_BYTES // nbytes))
    ms = median_ms_per_iteration(len(inputs), lambda i: torch_unswizzle(inputs[i], rows, cols))
    return nbytes, ms


def torch_whole_model(layers=80):
    inputs = []
    for _ in range(layers):
        for rows, k in LAYER:
            x, cols = swizzled_inputs(rows, k, 1)
            inputs.append((x[0], rows, cols))
    return median_ms_per_iteration(1, lambda _: [torch_unswizzle(x, r, c) for x, r, c in inputs])


def torch_moe(sets=4, experts=128):
    """The per-expert loop: one permute-unswizzle per expert of a 128-expert layer, 256 calls."""
    layers = []
    for _ in range(sets):
        layer = []
        for rows, k in ((1536, 4096), (4096, 768)):
            flat, cols = swizzled_inputs(rows * experts, k, 1)
            per_expert = round_up(rows, 128) * round_up(cols, 4)
            layer += [(flat[0][e * per_expert:(e + 1) * per_expert], rows, cols) for e in range(experts)]
        layers.append(layer)
    return median_ms_per_iteration(sets, lambda s: [torch_unswizzle(x, r, c) for x, r, c in layers[s]])


def weight_sync(layers=8, bucket_bytes=1 << 30):
    """An 8-layer 70B-class weight set in TE's layout: packed into 1 GiB buckets by mxfp8.iter_buckets
    (values copied, scales unswizzled in place, one launch a bucket) vs the per-tensor path RL frameworks
    use today (values .clone(), scales through the permute .contiguous(), one tensor at a time, freed
    after it is sent). GPU time and peak extra memory of each."""
    import mxfp8

    specs, nbytes = {}, 0
    for layer in range(layers):
        for i, (rows, k) in enumerate(LAYER):
            cols = (k + 31) // 32
            specs[f"{layer}.{i}"] = {
                "data": torch.randint(0, 256, (rows, k), dtype=torch.uint8, device="cuda"),
                "scale_inv": torch.randint(1, 255, (round_up(rows, 128), round_up(cols, 4)), dtype=torch.uint8, device="cuda"),
                "swizzled": True,
            }
            nbytes += rows * k + rows * cols
    torch.cuda.synchronize()

    def timed(run):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run()  # warm-up (allocates the bucket once)
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(5):
            start.record()
            run()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
        return statistics.median(samples), (torch.cuda.max_memory_allocated() - base) / 2**20

    sink = []

    def bucketed():
        for bucket, manifest in mxfp8.iter_buckets(specs, bucket_bytes=bucket_bytes):
            sink.append(bucket.data_ptr())  # stands for the send; the buffer is refilled next

    def per_tensor():
        for spec in specs.values():
            rows, k = spec["data"].shape
            values = spec["data"].clone()
            scales = torch_unswizzle(spec["scale_inv"].view(-1), rows, (k + 31) // 32)
            sink.append((values.data_ptr(), scales.data_ptr()))
            del values, scales

    bucketed_ms, bucketed_mb = timed(bucketed)
    per_tensor_ms, per_tensor_mb = timed(per_tensor)
    return {"tensors": len(specs), "gb": round(nbytes / 1e9, 3), "bucket_mb": bucket_bytes >> 20,
            "bucketed_ms": round(bucketed_ms, 3), "per_tensor_ms": round(per_tensor_ms, 3),
            "peak_extra_mb": round(bucketed_mb, 1), "per_tensor_peak_extra_mb": round(per_tensor_mb, 1)}


def torch_tiny_us():
    x, cols = swizzled_inputs(128, 128, 1)
    samples = []
    for i in range(2200):
        t0 = time.perf_counter()
        torch_unswizzle(x[0], 128, cols)
        torch.cuda.current_stream().synchronize()
        if i >= 200:
            samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def torch_quantize(rows, k):
    """The PyTorch reference quantizer (same rules, bit-exact with libmxfp8) on the benchmark's shape, and
    whether libmxfp8 gives the same bytes on that input."""
    x = (torch.randn(rows, k, device="cuda") * torch.exp(torch.randn(rows, 1, device="cuda") * 4)).to(torch.bfloat16)
    ms = median_ms_per_iteration(2, lambda i: quantize_rowwise(x))
    try:
        import mxfp8
        ours = mxfp8.quantize(x)
        values, scales = quantize_rowwise(x)
        same = bool(torch.equal(ours.rowwise_data.view(torch.uint8), values) and
                    torch.equal(ours.rowwise_scale_inv, scales))
    except ImportError:
        same = None
    del x
    torch.cuda.empty_cache()
    return ms, same


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bench-binary", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    print("running", args.bench_binary, flush=True)
    ours = json.loads(subprocess.run([args.bench_binary], check=True, capture_output=True, text=True).stdout)
    print("libmxfp8 done; timing the PyTorch baseline", flush=True)
    for key, (rows, k) in zip(ours["shapes"], LAYER):
        nbytes, ms = torch_shape(rows, k)
        assert nbytes == ours["shapes"][key]["bytes"], (nbytes, ours["shapes"][key]["bytes"])
        ours["shapes"][key]["torch_ms"] = round(ms, 5)
        ours["shapes"][key]["torch_gbps"] = round(nbytes / ms / 1e6, 1)
    ours["whole_model"]["torch_ms"] = round(torch_whole_model(), 4)
    ours["moe"]["torch_ms"] = round(torch_moe(), 4)
    ours["tiny"]["torch_us"] = round(torch_tiny_us(), 2)
    ours["weight_sync"] = weight_sync()
    q = ours["quantize"]
    q["torch_ms"], q["bit_exact_with_torch_reference"] = torch_quantize(*q["shape"])
    q["torch_ms"] = round(q["torch_ms"], 4)
    ours["date"] = datetime.date.today().isoformat()
    ours["torch"] = torch.__version__

    # Where each target of the GPU issue stands.
    big = [s for s in ours["shapes"].values() if s["bytes"] >= 8e6]
    wm = ours["whole_model"]
    ours["targets"] = {
        "large_shapes_fraction_of_copy": [round(s["unswizzle_gbps"] / s["copy_gbps"], 3) for s in big],
        "large_shapes_ge_90pct_of_copy": all(s["unswizzle_gbps"] >= 0.9 * s["copy_gbps"] for s in big),
        "large_shapes_swizzle_fraction_of_copy": [round(s["swizzle_gbps"] / s["copy_gbps"], 3) for s in big],
        "large_shapes_swizzle_ge_90pct_of_copy": all(s["swizzle_gbps"] >= 0.9 * s["copy_gbps"] for s in big),
        "whole_model_le_1p2_ms": wm["ms"] <= 1.2,
        "whole_model_speedup_vs_torch": round(wm["torch_ms"] / wm["ms"], 2),
        "whole_model_ge_6p5x_torch": wm["torch_ms"] / wm["ms"] >= 6.5,
        "tiny_le_10_us": ours["tiny"]["us"] <= 10.0,
        "moe_speedup_vs_torch": round(ours["moe"]["torch_ms"] / ours["moe"]["ms"], 1),
        "moe_ge_10x_torch": ours["moe"]["torch_ms"] / ours["moe"]["ms"] >= 10,
        "moe_fraction_of_copy": round(ours["moe"]["copy_ms"] / ours["moe"]["ms"], 3),
        "moe_ge_80pct_of_copy": ours["moe"]["copy_ms"] / ours["moe"]["ms"] >= 0.8,
        "quantize_fraction_of_copy": round(q["copy_ms"] / q["ms"], 3),
        "quantize_ge_80pct_of_copy": q["copy_ms"] / q["ms"] >= 0.8,
        "quantize_speedup_vs_torch": round(q["torch_ms"] / q["ms"], 1),
        "quantize_faster_than_torch": q["torch_ms"] > q["ms"],
    }
    with open(f"{args.out}/results.json", "w") as f:
        json.dump(ours, f, indent=2)

    lines = [
        f"# libmxfp8 GPU benchmark, {ours['date']}, {ours['gpu']}",
        "",
        f"PyTorch {ours['torch']}. Device-to-device copy peak (1 GiB): {ours['copy_peak_gbps']} GB/s (read + write).",
        "Cold caches (rotating over >= 256 MiB), CUDA events around back-to-back iterations, median of 15.",
        "",
        "| scales of weight | bytes moved | unswizzle | GB/s | % of copy | swizzle | % of copy | copy GB/s | "
        "PyTorch permute GB/s | speedup |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, s in ours["shapes"].items():
        torch_cols = (f"{s['torch_gbps']} | {s['torch_ms'] / s['unswizzle_ms']:.1f}x" if "torch_ms" in s
                      else "- | -")  # the two larger scale matrices have no PyTorch baseline
        lines.append(
            f"| {key} | {s['bytes'] / 1e6:.1f} MB | {s['unswizzle_ms'] * 1e3:.1f} µs | {s['unswizzle_gbps']} | "
            f"{100 * s['unswizzle_gbps'] / s['copy_gbps']:.0f}% | {s['swizzle_ms'] * 1e3:.1f} µs | "
            f"{100 * s['swizzle_gbps'] / s['copy_gbps']:.0f}% | {s['copy_gbps']} | {torch_cols} |")
    lines += [
        "",
        f"Whole 80-layer model ({wm['tensors']} weights, {wm['bytes'] / 1e9:.2f} GB moved): libmxfp8 batched "
        f"{wm['ms']:.3f} ms, PyTorch {wm['tensors']} calls {wm['torch_ms']:.3f} ms "
        f"({wm['torch_ms'] / wm['ms']:.1f}x), one copy of the same bytes {wm['copy_ms']:.3f} ms.",
        "",
        f"MoE layer ({ours['moe']['experts']} experts: 128 x (1536, 4096) + 128 x (4096, 768), swizzled, "
        f"{ours['moe']['bytes'] / 1e6:.1f} MB moved): libmxfp8 one batched call {ours['moe']['ms'] * 1e3:.1f} µs, "
        f"PyTorch per-expert loop {ours['moe']['torch_ms'] * 1e3:.1f} µs "
        f"({ours['moe']['torch_ms'] / ours['moe']['ms']:.1f}x), copy of the same bytes {ours['moe']['copy_ms'] * 1e3:.1f} µs "
        f"({100 * ours['moe']['copy_ms'] / ours['moe']['ms']:.0f}% of copy bandwidth).",
        "",
        "Weight sync export of {tensors} tensors of an 8-layer 70B-class set ({gb} GB of values and scales): "
        "mxfp8.iter_buckets into {bucket_mb} MiB buckets {bucketed_ms} ms with {peak_extra_mb} MiB extra memory; "
        "per-tensor clone + permute {per_tensor_ms} ms with {per_tensor_peak_extra_mb} MiB extra.".format(**ours["weight_sync"]),
        "",
        f"Tiny (128, 128) swizzled export, host wall clock including the wait: libmxfp8 from C "
        f"{ours['tiny']['us']} µs ({ours['tiny']['unswizzle_into_buffer_us']} µs into a buffer allocated once; "
        f"launching an empty kernel plus the same wait takes {ours['tiny']['empty_kernel_and_sync_us']} µs), "
        f"PyTorch permute from Python {ours['tiny']['torch_us']} µs.",
        "",
        f"Quantize a ({q['shape'][0]}, {q['shape'][1]}) BF16 weight to MXFP8 E4M3 (rowwise, RCEIL, compact scales; "
        f"{q['bytes'] / 1e6:.0f} MB moved): libmxfp8 {q['ms'] * 1e3:.1f} µs "
        f"({q['bytes'] / q['ms'] / 1e6:.0f} GB/s, {100 * q['copy_ms'] / q['ms']:.0f}% of a copy of the same bytes, "
        f"{q['copy_ms'] * 1e3:.1f} µs), PyTorch reference {q['torch_ms'] * 1e3:.1f} µs "
        f"({q['torch_ms'] / q['ms']:.1f}x; bit-exact with libmxfp8: {q['bit_exact_with_torch_reference']}). "
        f"Both directions into TE's swizzled layout: {q['both_directions_swizzled_ms'] * 1e3:.1f} µs; with 32x32 "
        f"blocks: {q['block_32x32_both_directions_swizzled_ms'] * 1e3:.1f} µs.",
        "",
        "Targets: " + json.dumps(ours["targets"]),
    ]
    with open(f"{args.out}/results.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
