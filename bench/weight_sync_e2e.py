#!/usr/bin/env python3
"""End-to-end weight sync on one GPU, two processes, CUDA IPC (issue 16, item 5).

A trainer process holds the 8-layer 70B-class weight set in Transformer Engine's layout (FP8 values plus
128x4-swizzled E8M0 scales, as bench/run_bench.py builds it); an inference process owns its parameters:
FP8 weights plus scales in (a) compact row-major or (b) cuBLAS 128x4 layout. One step moves every weight
from the trainer's storage into the parameters, timed three ways in the same run:

  direct    the receiver maps the trainer's storage over CUDA IPC once, mxfp8.prepare_import_tensors;
            each step is one launch (plan.run), the layout transform fused. No bucket.
  bucketed  the trainer fills one 1 GiB IPC-shared bucket from an mxfp8.BucketPlan (one launch a bucket),
            the receiver writes it into its parameters with the mxfp8.prepare_import_bucket plan of that
            bucket (one launch a bucket); both sides planned once, before the first step.
  bucketed_unprepared  the same with no plan kept: mxfp8.iter_buckets and mxfp8.import_bucket, every
            check and the manifest's trip through the pipe at every step.
  by_hand   what RL frameworks do today: per tensor, the trainer unswizzles the scales with a torch
            permute/crop and copies values and scales into the same bucket; the receiver copy_()s each
            part into its parameters and, for (b), swizzles the scales with torch for the GEMM.

These four hand each bucket over synchronously, as RL frameworks do today: the trainer fills, waits for
its stream, sends the bucket's index; the receiver imports, waits for its stream, answers; then the next.
The GPU idles through every handshake. Two more paths hand over pipelined, with the same memory (two
512 MiB buckets instead of one of 1 GiB) and no stream synchronize until the end:

  bucketed_pipelined  BucketPlan fills bucket i into buffer i % 2 and records a CUDA IPC event; the
            receiver's stream waits on that event (on the GPU) and runs its import plan, then records an
            event of its own that the trainer's stream waits on before it fills that buffer again. The
            host messages only say "enqueued", so the processes' host work overlaps the GPU's.
  by_hand_pipelined   the hand-written fill and copy_() over the same pipelined handshake, so the table
            shows what the library adds and what the handshake adds.

plus copy_ms, one device-to-device copy of the same bytes (values + compact scales), and bucket_fill_ms,
the trainer's bucket fill alone. A step is timed on the trainer's wall clock, from its start to the
receiver's "done" (its stream synchronized), handshakes included, median of --reps. Before every step the
parameters are poisoned and after it they are checked bit for bit against references made with torch
(both outside the timed part); any mismatch fails the run.

  python bench/weight_sync_e2e.py --out results.json        # the H200 run (about a minute)
  python bench/weight_sync_e2e.py --smoke                   # tiny sizes: checks the logic in seconds

Needs a CUDA GPU and a CUDA build of mxfp8: without one it fails (it never skips).
"""
import argparse
import json
import os
import statistics
import sys
import time

LAYER = [(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)]  # bench/run_bench.py's 70B-class layer
SMOKE_LAYER = [(256, 512), (128, 544), (384, 512), (130, 1000)]        # partial tiles and blocks too
POISON = 0xFF


def round_up(n, d):
    return (n + d - 1) // d * d


def torch_unswizzle(swizzled, rows, cols):
    """The hand-written unswizzle RL frameworks use: permute, crop, contiguous."""
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    tiles = swizzled.view(rp // 128, cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.reshape(rp, cp)[:rows, :cols].contiguous()


def torch_swizzle(compact):
    """The hand-written swizzle for the GEMM: zero-pad, permute, flatten."""
    import torch

    rows, cols = compact.shape
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    padded = torch.zeros((rp, cp), dtype=torch.uint8, device=compact.device)
    padded[:rows, :cols] = compact
    return padded.view(rp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4).reshape(-1)


def scale_shape(rows, k, layout):
    cols = (k + 31) // 32
    return (rows, cols) if layout == "compact" else (round_up(rows, 128) * round_up(cols, 4),)


# ------------------------------------------------------------------------------------------ receiver ---
def receiver(conn):
    import torch

    import mxfp8

    try:
        _receive(conn, torch, mxfp8)
    except BaseException as e:  # report, so the trainer fails loudly instead of waiting
        conn.send(("error", f"{type(e).__name__}: {e}"))
        raise


def _receive(conn, torch, mxfp8):
    _, storage, bucket, shapes = conn.recv()  # CUDA tensors: torch maps the trainer's memory (CUDA IPC)
    stream = torch.cuda.current_stream()
    values = {n: torch.empty(s, dtype=torch.float8_e4m3fn, device="cuda") for n, s in shapes.items()}
    params = {layout: {n: (values[n], torch.empty(scale_shape(*s, layout), dtype=torch.uint8, device="cuda"), layout)
                       for n, s in shapes.items()} for layout in ("compact", "cutlass_128x4")}
    # References, from torch alone: compact scales by the permute, the 128x4 layout by the inverse permute.
    compact_ref = {n: torch_unswizzle(storage[n]["scale_inv"].view(-1), s[0], (s[1] + 31) // 32) for n, s in shapes.items()}
    reference = {"compact": compact_ref, "cutlass_128x4": {n: torch_swizzle(c) for n, c in compact_ref.items()}}
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    plans = {layout: mxfp8.prepare_import_tensors(storage, params[layout]) for layout in params}
    torch.cuda.synchronize()
    plan_bytes = free_before - torch.cuda.mem_get_info()[0]  # device memory the plans took (expected: none)
    direct_extra = 0  # device memory a direct run took, at most (expected: none)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    conn.send(("ready",))
    while True:
        message = conn.recv()
        kind = message[0]
        if kind == "stop":
            conn.send(("memory", plan_bytes / 2**20, direct_extra / 2**20))
            return
        if kind == "prepare_buckets":  # one import plan per bucket and layout, made once
            bucket_plans = {lay: [mxfp8.prepare_import_bucket(bucket[:size], manifest, params[lay])
                                  for size, manifest in zip(message[2], message[3])] for lay in params}
            conn.send(("ok",))
            continue
        if kind == "prepare_pipelined":  # two half-size buffers, their events, one import plan per bucket
            _, buffers, filled, released, sizes, manifests = message
            pipelined_groups = manifests
            pipelined_plans = {lay: [mxfp8.prepare_import_bucket(buffers[i % 2][:size], manifest, params[lay])
                                     for i, (size, manifest) in enumerate(zip(sizes, manifests))] for lay in params}
            conn.send(("ok",))
            continue
        layout = message[1]
        p = params[layout]
        if kind == "time_import":  # every bucket's import plan back to back, CUDA events: the GPU's part
            samples = []
            for rep in range(6):
                start.record(stream)
                for plan in bucket_plans[layout]:
                    plan.run()
                stop.record(stream)
                stop.synchronize()
                if rep:
                    samples.append(start.elapsed_time(stop))
            conn.send(("timed", statistics.median(samples)))
            continue
        if kind == "poison":
            for v, s, _ in p.values():
                v.view(torch.uint8).fill_(POISON)
                s.fill_(POISON)
            torch.cuda.synchronize()
            conn.send(("ok",))
        elif kind == "direct":
            free = torch.cuda.mem_get_info()[0]
            start.record(stream)
            plans[layout].run()
            stop.record(stream)
            stop.synchronize()
            direct_extra = max(direct_extra, free - torch.cuda.mem_get_info()[0])
            conn.send(("done", start.elapsed_time(stop)))
        elif kind == "bucketed":
            bucket_plans[layout][message[2]].run()
            stream.synchronize()
            conn.send(("done", 0.0))
        elif kind == "bucketed_unprepared":
            mxfp8.import_bucket(bucket, message[2], p)
            stream.synchronize()
            conn.send(("done", 0.0))
        elif kind == "by_hand":
            copy_by_hand(torch, bucket, message[2], p, layout)
            stream.synchronize()
            conn.send(("done", 0.0))
        elif kind in ("bucketed_pipelined", "by_hand_pipelined"):  # enqueue, never wait
            i = message[2]
            stream.wait_event(filled[i % 2])
            if kind == "bucketed_pipelined":
                pipelined_plans[layout][i].run()
            else:
                copy_by_hand(torch, buffers[i % 2], pipelined_groups[i], p, layout)
            released[i % 2].record(stream)
            conn.send(("released", i))
        elif kind == "finish":
            stream.synchronize()
            conn.send(("done", 0.0))
        elif kind == "verify":
            bad = [n for n, (v, s, _) in p.items()
                   if not (torch.equal(v.view(torch.uint8), storage[n]["data"]) and torch.equal(s, reference[layout][n]))]
            conn.send(("verified", bad[:3]))


def copy_by_hand(torch, bucket, manifest, params, layout):
    """The receiver's hand-written import: copy_() each part into its parameter, swizzle with torch."""
    for e in manifest:
        v, s, _ = params[e["name"]]
        rows, k = e["shape"]
        v.view(torch.uint8).view(-1).copy_(bucket[e["values_offset"]:e["values_offset"] + e["values_bytes"]])
        compact = bucket[e["scales_offset"]:e["scales_offset"] + e["scales_bytes"]].view(rows, (k + 31) // 32)
        s.copy_(compact if layout == "compact" else torch_swizzle(compact))


def fill_by_hand(storage, bucket, manifest):
    """The trainer's hand-written bucket fill: per tensor, the values and the torch-unswizzled scales."""
    for e in manifest:
        spec = storage[e["name"]]
        rows, k = e["shape"]
        bucket[e["values_offset"]:e["values_offset"] + e["values_bytes"]].copy_(spec["data"].view(-1))
        scales = torch_unswizzle(spec["scale_inv"].view(-1), rows, (k + 31) // 32)
        bucket[e["scales_offset"]:e["scales_offset"] + e["scales_bytes"]].copy_(scales.view(-1))


# ------------------------------------------------------------------------------------------- trainer ---
def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 2 repetitions: checks the logic")
    parser.add_argument("--reps", type=int, default=None, help="timed steps per path and layout (default 5)")
    parser.add_argument("--out", help="write the JSON here (also printed)")
    parser.add_argument("--sweep-mb", type=lambda t: [int(v) for v in t.split(",") if v], default=[],
                        help="also time the pipelined paths with two buckets of each of these MiB sizes")
    args = parser.parse_args()

    import torch
    import torch.multiprocessing as mp

    import mxfp8

    if not torch.cuda.is_available():
        raise SystemExit("weight_sync_e2e: no CUDA device visible to torch; this benchmark runs on a GPU only")
    if not mxfp8._mxfp8.with_cuda:
        raise SystemExit("weight_sync_e2e: mxfp8 was built without CUDA; rebuild with nvcc on the PATH")
    layers, shapes_per_layer = (2, SMOKE_LAYER) if args.smoke else (8, LAYER)
    bucket_bytes = (1 << 20) if args.smoke else (1 << 30)
    reps = args.reps or (2 if args.smoke else 5)

    # The trainer's storage, in TE's layout, at fixed addresses.
    gen = torch.Generator(device="cuda").manual_seed(0)
    storage, shapes, nbytes = {}, {}, 0
    for layer in range(layers):
        for i, (rows, k) in enumerate(shapes_per_layer):
            cols = (k + 31) // 32
            name = f"layers.{layer}.{i}"
            compact = torch.randint(1, 255, (rows, cols), dtype=torch.uint8, device="cuda", generator=gen)
            storage[name] = {"data": torch.randint(0, 256, (rows, k), dtype=torch.uint8, device="cuda", generator=gen),
                             "scale_inv": torch_swizzle(compact), "swizzled": True}
            if rows % 128 or cols % 4:  # TE leaves padding uninitialized: never trusted, so poison it
                real = torch_swizzle(torch.ones_like(compact)) == 1
                storage[name]["scale_inv"][~real] = POISON
            shapes[name] = (rows, k)
            nbytes += rows * k + rows * cols
    bucket = torch.empty(bucket_bytes + (1 << 20), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()

    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=receiver, args=(child,), daemon=True)
    proc.start()

    def ask(*message):
        conn.send(message)
        reply = conn.recv()
        if reply[0] == "error":
            raise SystemExit(f"weight_sync_e2e: the receiver failed: {reply[1]}")
        return reply

    conn.send(("setup", storage, bucket, shapes))
    if conn.recv()[0] != "ready":
        raise SystemExit("weight_sync_e2e: the receiver did not get ready")

    # The bucket groups, from one planning pass (the same for every step).
    plan = mxfp8.BucketPlan(storage, bucket_bytes=bucket_bytes, buffer=bucket)
    groups = plan.manifests
    ask("prepare_buckets", None, plan.sizes, plan.manifests)
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream()

    def bucketed(layout):
        for i in range(len(plan)):
            plan.fill(i)
            stream.synchronize()  # the bucket is complete before the receiver reads it
            ask("bucketed", layout, i)

    def bucketed_unprepared(layout):
        for _, manifest in mxfp8.iter_buckets(storage, bucket_bytes=bucket_bytes, buffer=bucket):
            stream.synchronize()
            ask("bucketed_unprepared", layout, manifest)

    def by_hand(layout):
        for manifest in groups:
            fill_by_hand(storage, bucket, manifest)
            stream.synchronize()
            ask("by_hand", layout, manifest)

    # The pipelined handshake: two buffers of half the bucket (the same memory as the one bucket above), a
    # CUDA IPC event per buffer each way. Bucket i goes through buffer i % 2; before filling a buffer again
    # the trainer's stream waits (on the GPU) for the receiver's import of the bucket before it.
    filled = [torch.cuda.Event(interprocess=True) for _ in range(2)]
    released = [torch.cuda.Event(interprocess=True) for _ in range(2)]
    pipe = {}

    def set_up_pipelined(half, memory):
        buffers = [memory[:half + (1 << 19)], memory[half + (1 << 19):]]
        pipe["plans"] = [mxfp8.BucketPlan(storage, bucket_bytes=half, buffer=b) for b in buffers]  # same groups
        pipe["buffers"] = buffers
        ask("prepare_pipelined", buffers, filled, released, pipe["plans"][0].sizes, pipe["plans"][0].manifests)

    def pipelined(kind, layout):
        plans, buffers = pipe["plans"], pipe["buffers"]
        count = len(plans[0])
        for i in range(count):
            if i >= 2:  # the receiver has enqueued the import of bucket i - 2 and recorded released[i % 2]
                reply = conn.recv()
                if reply != ("released", i - 2):
                    raise SystemExit(f"weight_sync_e2e: the receiver answered {reply!r}")
                stream.wait_event(released[i % 2])
            if kind == "bucketed_pipelined":
                plans[i % 2].fill(i)
            else:
                fill_by_hand(storage, buffers[i % 2], plans[0].manifests[i])
            filled[i % 2].record(stream)
            conn.send((kind, layout, i))
        for i in range(max(count - 2, 0), count):
            reply = conn.recv()
            if reply != ("released", i):
                raise SystemExit(f"weight_sync_e2e: the receiver answered {reply!r}")
        ask("finish", layout)

    def median_step_ms(run, layout, path, count):
        samples = []
        for rep in range(count + 1):  # the first is a warm-up
            ask("poison", layout)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run(layout)
            elapsed = (time.perf_counter() - t0) * 1e3
            bad = ask("verify", layout)[1]
            if bad:
                failures.append(f"{path} -> {layout}: {bad} differ after step {rep}")
            if rep:
                samples.append(elapsed)
        return round(statistics.median(samples), 3)

    gpu_ms = {}

    def direct(layout):
        gpu_ms.setdefault(layout, []).append(ask("direct", layout)[1])

    results, failures = {}, []
    set_up_pipelined(bucket_bytes // 2, bucket)
    pipelined_buckets = len(pipe["plans"][0])
    for layout in ("compact", "cutlass_128x4"):
        results[layout] = {}
        for path, run in (("direct", direct), ("bucketed", bucketed), ("bucketed_unprepared", bucketed_unprepared),
                          ("by_hand", by_hand),
                          ("bucketed_pipelined", lambda layout: pipelined("bucketed_pipelined", layout)),
                          ("by_hand_pipelined", lambda layout: pipelined("by_hand_pipelined", layout))):
            results[layout][f"{path}_ms"] = median_step_ms(run, layout, path, reps)
        results[layout]["direct_gpu_ms"] = round(statistics.median(gpu_ms[layout][1:]), 3)

    # Is the handshake's cost per bucket? The pipelined paths again with other bucket sizes (the 128x4
    # layout; two buffers of each size, in memory of their own).
    sweep = {}
    for mb in args.sweep_mb:
        memory = torch.empty(2 * (mb << 20) + (1 << 20), dtype=torch.uint8, device="cuda")
        set_up_pipelined(mb << 20, memory)
        sweep[mb] = {"buckets": len(pipe["plans"][0])}
        for kind in ("bucketed_pipelined", "by_hand_pipelined"):
            sweep[mb][f"{kind}_ms"] = median_step_ms(lambda layout: pipelined(kind, layout), "cutlass_128x4", kind,
                                                     reps)
        del memory
        print(f"pipelined, two {mb} MiB buckets: {sweep[mb]}", flush=True)

    # One device-to-device copy of the same bytes, and the bucket fill alone, with CUDA events.
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def event_ms(body):
        body()
        torch.cuda.synchronize()
        samples = []
        for _ in range(reps):
            start.record()
            body()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
        return round(statistics.median(samples), 3)

    copy_ms = event_ms(lambda: dst.copy_(src))
    fill_ms = event_ms(lambda: [plan.fill(i) for i in range(len(plan))])
    fill_unprepared_ms = event_ms(
        lambda: [None for _ in mxfp8.iter_buckets(storage, bucket_bytes=bucket_bytes, buffer=bucket)])
    del src, dst
    import_ms = {layout: round(ask("time_import", layout)[1], 3) for layout in ("compact", "cutlass_128x4")}
    memory = ask("stop")
    proc.join(timeout=60)

    worst = {key: max(results[layout][key] for layout in results)
             for key in ("direct_ms", "bucketed_ms", "bucketed_unprepared_ms", "by_hand_ms", "bucketed_pipelined_ms",
                         "by_hand_pipelined_ms")}
    out = {
        "gb": round(nbytes / 1e9, 3),
        "tensors": len(storage),
        "bucket_mb": bucket_bytes >> 20,
        "buckets": len(groups),
        "pipelined_buckets": pipelined_buckets,
        "reps": reps,
        # Top level: the slower of the two engine layouts; both are below.
        **worst,
        "copy_ms": copy_ms,
        "bucket_fill_ms": fill_ms,  # BucketPlan.fill of every bucket
        "bucket_fill_unprepared_ms": fill_unprepared_ms,  # iter_buckets
        "bucket_import_ms": import_ms,  # the receiver's import plans alone, every bucket, per layout
        "pipelined_sweep_128x4": sweep,  # bucket MiB -> its count and the pipelined paths' step
        "compact": results["compact"],
        "cutlass_128x4": results["cutlass_128x4"],
        # Device memory (cudaMemGetInfo) the direct path's plans took, and the most one direct run took.
        "direct_plan_mb": round(memory[1], 1),
        "direct_run_peak_extra_mb": round(memory[2], 1),
        "bit_exact_every_step": not failures,
        "gpu": torch.cuda.get_device_name(),
        # Values of at least this many bytes go through cudaMemcpyAsync (the library's default: 4 MiB).
        "copy_engine_min_bytes": os.environ.get("MXFP8_COPY_ENGINE_MIN_BYTES", "default"),
        "smoke": args.smoke,
    }

    def speedup(baseline, path):
        return round(min(results[layout][baseline] / results[layout][path] for layout in results), 2)

    out["targets"] = {
        "direct_fraction_of_copy": round(copy_ms / worst["direct_ms"], 3),
        "direct_ge_70pct_of_copy": copy_ms / worst["direct_ms"] >= 0.7,
        # Speedups: the smaller of the two layouts' (each layout's paths against its own by-hand path).
        "direct_speedup_vs_by_hand": speedup("by_hand_ms", "direct_ms"),
        "direct_ge_2x_by_hand": speedup("by_hand_ms", "direct_ms") >= 2,
        "bucketed_speedup_vs_by_hand": speedup("by_hand_ms", "bucketed_ms"),
        "bucketed_ge_1p3x_by_hand": speedup("by_hand_ms", "bucketed_ms") >= 1.3,
        # Against what frameworks do today (by_hand, synchronous), and against the same pipelined handshake.
        "bucketed_pipelined_speedup_vs_by_hand": speedup("by_hand_ms", "bucketed_pipelined_ms"),
        "bucketed_pipelined_ge_1p3x_by_hand": speedup("by_hand_ms", "bucketed_pipelined_ms") >= 1.3,
        "bucketed_pipelined_speedup_vs_by_hand_pipelined": speedup("by_hand_pipelined_ms", "bucketed_pipelined_ms"),
        "bucket_fill_fraction_of_copy": round(copy_ms / fill_ms, 3),
        "bucket_fill_ge_90pct_of_copy": copy_ms / fill_ms >= 0.9,
        "direct_peak_extra_le_64_mib": memory[1] + memory[2] <= 64,
    }
    text = json.dumps({"weight_sync_e2e": out}, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if failures or proc.exitcode != 0:
        raise SystemExit("weight_sync_e2e: NOT bit-exact: " + "; ".join(failures[:5]) +
                         f" (receiver exit {proc.exitcode})")


if __name__ == "__main__":
    sys.exit(main())
