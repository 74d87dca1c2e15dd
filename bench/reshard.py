#!/usr/bin/env python3
"""Resharding benchmark (issue 20): the TP-8 shard an inference rank needs, straight from the trainer's
Transformer Engine storage (FP8 values + 128x4-swizzled E8M0 scales), three ways:

  shard     mxfp8.export_bucket with each tensor's shard (rows=, cols=): the shard's values copied and
            its compact scales read straight out of the swizzled tiles, into one bucket, one launch
            (on sm_90+ the values, whole rows or a K shard's window of each row, through the bulk copy).
            What a trainer sends one rank.
  copy      one device-to-device copy of the same number of bytes (the shard's values + compact scales):
            the bandwidth bound.
  crop      what frameworks do today: gather the whole tensor (its values and compact scales exported
            into one buffer with mxfp8.export_bucket, as a whole-weight sync sends them), then crop the
            rank's rows / columns out of it in torch (slices + contiguous copies / cat).

for one (57344, 8192) gate-up weight (rank 3 of 8: its gate rows and its up rows, two pieces) and for the
80-layer 70B-class model of bench/run_bench.py (qkv, o, gate_up, down per layer; column-parallel weights
by rows, the fused ones by pieces, row-parallel ones by K columns). Each is timed with CUDA events as the
replay of a CUDA graph holding one call (falling back to back-to-back eager calls if capture fails; the
JSON says which), median of --reps. Every shard is checked bit for bit against the torch crop first.

  python bench/reshard.py --out reshard.json --merge bench/results/latest-h200.json   # the H200 run
  python bench/reshard.py --smoke     # tiny shapes, on the CPU with NumPy when there is no GPU: seconds
  python bench/reshard.py --profile-out case.json --layers 8   # under ncu (bench/device/profile_kernels.sh)

--profile-out runs the model's shard export once inside a cudaProfilerStart/Stop range (for
`ncu --profile-from-start off`), followed by a copy kernel of the same bytes (torch's elementwise add of 0
on int64) and a torch copy_ (cudaMemcpyAsync), and writes the case list bench/device/ncu_summary.py reads.

Writes {"reshard": {"shard_ms", "shard_copy_ms", "crop_ms", "model_ms", "model_copy_ms",
"model_crop_ms", ...}}; --merge adds that key to an existing results JSON (e.g. latest-h200.json).
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import mxfp8

LAYER = [("qkv", 10240, 8192), ("o", 8192, 8192), ("gate_up", 57344, 8192), ("down", 8192, 28672)]
SMOKE_LAYER = [("qkv", 640, 256), ("o", 512, 512), ("gate_up", 1024, 256), ("down", 256, 1056)]
TP, RANK = 8, 3


def round_up(n, d):
    return (n + d - 1) // d * d


def rank_shard(kind, n, k, tp=TP, rank=RANK):
    """export_components' rows= / cols= of rank `rank` of `tp` (Llama-style: Q has 8x the K/V rows)."""
    if kind == "qkv":
        q = n * 8 // 10
        kv = (n - q) // 2
        return {"rows": [(rank * q // tp, (rank + 1) * q // tp)] +
                        [(q + j * kv + rank * kv // tp, q + j * kv + (rank + 1) * kv // tp) for j in range(2)]}
    if kind == "gate_up":
        half = n // 2
        return {"rows": [(j * half + rank * half // tp, j * half + (rank + 1) * half // tp) for j in range(2)]}
    step = round_up(-(-k // tp), 32)
    return {"cols": (min(rank * step, k), min((rank + 1) * step, k))}


def shard_rows(shard, n):
    pieces = shard.get("rows", [(0, n)])
    return [r for a, b in pieces for r in range(a, b)]


class Backend:
    """torch on the GPU (the real run), NumPy on the host (--smoke without a GPU)."""

    def __init__(self, smoke):
        self.torch = None
        try:
            import torch

            if torch.cuda.is_available() and mxfp8._mxfp8.with_cuda:
                self.torch = torch
        except ImportError:
            pass
        if self.torch is None and not smoke:
            raise SystemExit("bench/reshard.py needs a CUDA GPU, torch and a CUDA build of mxfp8 (--smoke runs on the CPU)")
        self.method = {}

    def storage(self, n, k, seed):
        """TE-like storage: values (n, k) uint8, 128x4-swizzled scales (padding random too: never read)."""
        c = -(-k // 32)
        nbytes = round_up(n, 128) * round_up(c, 4)
        if self.torch:
            torch = self.torch
            g = torch.Generator(device="cuda").manual_seed(seed)
            values = torch.randint(0, 255, (n, k), dtype=torch.uint8, device="cuda", generator=g)
            scales = torch.randint(1, 255, (nbytes,), dtype=torch.uint8, device="cuda", generator=g)
        else:
            rng = np.random.default_rng(seed)
            values = rng.integers(0, 256, (n, k), dtype=np.uint8)
            scales = rng.integers(1, 255, (nbytes,), dtype=np.uint8)
        return {"data": values, "scale_inv": scales, "swizzled": True}

    def empty(self, nbytes):
        if self.torch:
            return self.torch.empty(nbytes, dtype=self.torch.uint8, device="cuda")
        return np.empty(nbytes, np.uint8)

    def crop(self, spec, shard):
        """What frameworks do today: gather the whole tensor (its values and compact scales exported into
        a buffer, mxfp8.export_bucket), then crop the rank's rows / columns out of it in the framework,
        contiguous."""
        n, k = spec["data"].shape
        bucket, (m,) = mxfp8.export_bucket({"w": spec})
        values = bucket[m["values_offset"]:m["values_offset"] + m["values_bytes"]].reshape(n, k)
        scales = bucket[m["scales_offset"]:m["scales_offset"] + m["scales_bytes"]].reshape(n, -(-k // 32))
        k0, k1 = shard.get("cols", (0, k))
        if "rows" in shard:
            pieces = shard["rows"]
            if self.torch:
                return (self.torch.cat([values[a:b] for a, b in pieces]), self.torch.cat([scales[a:b] for a, b in pieces]))
            return np.concatenate([values[a:b] for a, b in pieces]), np.concatenate([scales[a:b] for a, b in pieces])
        if self.torch:
            return values[:, k0:k1].contiguous(), scales[:, k0 // 32:-(-k1 // 32)].contiguous()
        return np.ascontiguousarray(values[:, k0:k1]), np.ascontiguousarray(scales[:, k0 // 32:-(-k1 // 32)])

    def time_ms(self, name, body, reps):
        """Median milliseconds of one call of `body`: a CUDA graph of it replayed (eager calls when it
        cannot be captured), or perf_counter on the host."""
        if self.torch is None:
            body()
            samples = []
            for _ in range(reps):
                t = time.perf_counter()
                body()
                samples.append((time.perf_counter() - t) * 1e3)
            self.method[name] = "host"
            return round(statistics.median(samples), 3)
        torch = self.torch
        stream = torch.cuda.Stream()
        run = body
        try:
            with torch.cuda.stream(stream):
                body()  # warm up the caching allocator and the library outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                body()
            run = graph.replay
            self.method[name] = "cuda_graph"
        except Exception as e:  # capture unsupported on this path: time eager calls instead
            print(f"  {name}: CUDA graph capture failed ({type(e).__name__}: {e}); timing eager calls", flush=True)
            torch.cuda.synchronize()
            self.method[name] = "eager"
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        with torch.cuda.stream(stream):
            run()
            for _ in range(reps):
                start.record()
                run()
                stop.record()
                stop.synchronize()
                samples.append(start.elapsed_time(stop))
        return round(statistics.median(samples), 3)

    def equal(self, a, b):
        if self.torch:
            return bool(self.torch.equal(a.reshape(-1), b.reshape(-1)))
        return np.array_equal(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1))


def measure(backend, specs, shards, reps, label):
    """shard / copy / crop for one set of tensors; checks the shard bucket against the torch crop."""
    sharded = {name: dict(spec, **shards[name]) for name, spec in specs.items()}
    bucket, manifest = mxfp8.export_bucket(sharded)
    shard_bytes = sum(m["values_bytes"] + m["scales_bytes"] for m in manifest)
    # bit-exact first (outside the timing): every shard is the crop of the whole export
    for m in manifest:
        values, scales = backend.crop(specs[m["name"]], shards[m["name"]])
        got_v = bucket[m["values_offset"]:m["values_offset"] + m["values_bytes"]]
        got_s = bucket[m["scales_offset"]:m["scales_offset"] + m["scales_bytes"]]
        if not (backend.equal(got_v, values) and backend.equal(got_s, scales)):
            raise SystemExit(f"reshard: {label} {m['name']}: the shard differs from the crop of the whole export")
        del values, scales
    src, dst = backend.empty(shard_bytes), backend.empty(shard_bytes)
    if backend.torch:
        copy = lambda: dst.copy_(src)  # noqa: E731
    else:
        copy = lambda: np.copyto(dst, src)  # noqa: E731
    out = {
        "shard_ms": backend.time_ms(f"{label}shard", lambda: mxfp8.export_bucket(sharded, bucket=bucket), reps),
        "copy_ms": backend.time_ms(f"{label}copy", copy, reps),
        "shard_bytes": shard_bytes,
        "tensors": len(specs),
    }
    del src, dst, bucket  # the crop's own copies need the room
    out["crop_ms"] = backend.time_ms(f"{label}crop", lambda: [backend.crop(specs[n], shards[n]) for n in specs], reps)
    return out


def profile_shard_export(backend, layer, layers, path):
    """The model's TP-8 shard export once in a profiler range (see the docstring), and its case list."""
    torch = backend.torch
    if torch is None:
        raise SystemExit("reshard.py --profile-out needs a CUDA GPU and torch")
    model, shards = {}, {}
    for i in range(layers):
        for kind, n, k in layer:
            name = f"layers.{i}.{kind}"
            model[name] = backend.storage(n, k, seed=100 + i)
            shards[name] = rank_shard(kind, n, k)
    sharded = {name: dict(spec, **shards[name]) for name, spec in model.items()}
    bucket, manifest = mxfp8.export_bucket(sharded)
    shard_bytes = sum(m["values_bytes"] + m["scales_bytes"] for m in manifest)
    words = -(-shard_bytes // 8)
    src = torch.ones(words, dtype=torch.int64, device="cuda")
    dst = torch.empty_like(src)
    export = lambda: mxfp8.export_bucket(sharded, bucket=bucket)  # noqa: E731
    copy_kernel = lambda: torch.add(src, 0, out=dst)  # noqa: E731
    memcpy = lambda: dst.copy_(src)  # noqa: E731
    timing = {}
    for key, body in (("call_ms", export), ("copy_kernel_ms", copy_kernel), ("memcpy_ms", memcpy)):
        body()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(5):
            start.record()
            body()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
        timing[key] = round(statistics.median(samples), 5)
    from torch.cuda import profiler as cuda_profiler  # cudaProfilerStart / Stop

    torch.cuda.synchronize()
    cuda_profiler.start()
    export()
    copy_kernel()
    memcpy()
    torch.cuda.synchronize()
    cuda_profiler.stop()
    case = {"index": 0, "name": "model_shard", "bytes": shard_bytes, "sets": 1, "layers": layers,
            "tensors": len(model), "copy_kernel_pattern": "elementwise_kernel",
            "copy_engine_min_bytes": os.environ.get("MXFP8_COPY_ENGINE_MIN_BYTES", "default"),
            # timed in the process ncu runs, outside its profiler range (eager calls, median of 5)
            "timed_under_ncu": True, **timing}
    with open(path, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "timing": True, "cases": [case]}, f)
        f.write("\n")
    print(json.dumps(case))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, 2 repetitions: checks the logic")
    parser.add_argument("--layers", type=int, default=None, help="model layers (default 80; smoke 2)")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--out", help="write the JSON here")
    parser.add_argument("--merge", help="add the 'reshard' key to this existing results JSON (created if absent)")
    parser.add_argument("--profile-out", help="profile mode: the model's shard export once in a profiler range; "
                        "writes its case list here (bench/device/profile_kernels.sh)")
    args = parser.parse_args()
    backend = Backend(args.smoke)
    layer = SMOKE_LAYER if args.smoke else LAYER
    layers = args.layers or (2 if args.smoke else 80)
    if args.profile_out:
        return profile_shard_export(backend, layer, layers, args.profile_out)
    reps = args.reps or (2 if args.smoke else 10)

    # One weight: the (57344, 8192) gate-up projection, rank 3 of TP-8.
    kind, n, k = layer[2]
    one = {"gate_up": backend.storage(n, k, seed=1)}
    single = measure(backend, one, {"gate_up": rank_shard(kind, n, k)}, reps, "one ")
    print(f"one ({n}, {k}) weight, TP-{TP} rank {RANK}: shard {single['shard_ms']} ms, copy of its "
          f"{single['shard_bytes'] / 1e6:.1f} MB {single['copy_ms']} ms, export-whole-then-crop {single['crop_ms']} ms",
          flush=True)
    del one

    model, shards = {}, {}
    for i in range(layers):
        for kind, n, k in layer:
            name = f"layers.{i}.{kind}"
            model[name] = backend.storage(n, k, seed=100 + i)
            shards[name] = rank_shard(kind, n, k)
    whole = sum(int(np.prod(s["data"].shape)) for s in model.values())
    full = measure(backend, model, shards, reps, "model ")
    print(f"{layers}-layer model ({len(model)} weights, {whole / 1e9:.2f} GB of values), TP-{TP} rank {RANK}: "
          f"shard {full['shard_ms']} ms, copy of its {full['shard_bytes'] / 1e9:.2f} GB {full['copy_ms']} ms, "
          f"export-whole-then-crop {full['crop_ms']} ms", flush=True)

    out = {
        "shard_ms": single["shard_ms"],
        "shard_copy_ms": single["copy_ms"],
        "crop_ms": single["crop_ms"],
        "model_ms": full["shard_ms"],
        "model_copy_ms": full["copy_ms"],
        "model_crop_ms": full["crop_ms"],
        "shard_mb": round(single["shard_bytes"] / 1e6, 1),
        "model_shard_gb": round(full["shard_bytes"] / 1e9, 3),
        "model_tensors": full["tensors"],
        "layers": layers,
        "tp": TP,
        "rank": RANK,
        "reps": reps,
        "timing": backend.method,
        "bit_exact": True,
        "gpu": backend.torch.cuda.get_device_name() if backend.torch else "none (host)",
        "copy_engine_min_bytes": os.environ.get("MXFP8_COPY_ENGINE_MIN_BYTES", "default"),
        "smoke": args.smoke,
    }
    out["targets"] = {
        "shard_fraction_of_copy": round(out["shard_copy_ms"] / out["shard_ms"], 3),
        "shard_ge_80pct_of_copy": out["shard_copy_ms"] / out["shard_ms"] >= 0.8,
        "shard_speedup_vs_crop": round(out["crop_ms"] / out["shard_ms"], 2),
        "shard_ge_5x_crop": out["crop_ms"] >= 5 * out["shard_ms"],
        "model_fraction_of_copy": round(out["model_copy_ms"] / out["model_ms"], 3),
        "model_ge_80pct_of_copy": out["model_copy_ms"] / out["model_ms"] >= 0.8,
        "model_speedup_vs_crop": round(out["model_crop_ms"] / out["model_ms"], 2),
        "model_ge_5x_crop": out["model_crop_ms"] >= 5 * out["model_ms"],
    }
    text = json.dumps({"reshard": out}, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.merge:
        merged = {}
        if os.path.exists(args.merge):
            with open(args.merge) as f:
                merged = json.load(f)
        merged["reshard"] = out
        with open(args.merge, "w") as f:
            f.write(json.dumps(merged, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
