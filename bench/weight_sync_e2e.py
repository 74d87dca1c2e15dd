#!/usr/bin/env python3
"""End-to-end weight sync on one GPU, two processes, CUDA IPC (issue 16, item 5).

A trainer process holds the 8-layer 70B-class weight set in Transformer Engine's layout (FP8 values plus
128x4-swizzled E8M0 scales, as bench/run_bench.py builds it); an inference process owns its parameters:
FP8 weights plus scales in (a) compact row-major or (b) cuBLAS 128x4 layout. One step moves every weight
from the trainer's storage into the parameters, timed three ways in the same run:

  direct    the receiver maps the trainer's storage over CUDA IPC once, mxfp8.prepare_import_tensors;
            each step is one launch (plan.run), the layout transform fused. No bucket.
  bucketed  the trainer fills one 1 GiB IPC-shared bucket from mxfp8.prepare_buckets plans (one launch a bucket),
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

  bucketed_pipelined  a prepare_buckets plan fills bucket i into buffer i % 2 and records a CUDA IPC event; the
            receiver's stream waits on that event (on the GPU) and runs its import plan, then records an
            event of its own that the trainer's stream waits on before it fills that buffer again. The
            host messages only say "enqueued", so the processes' host work overlaps the GPU's.
  by_hand_pipelined   the hand-written fill and copy_() over the same pipelined handshake, so the table
            shows what the library adds and what the handshake adds.

A step is timed on the trainer's wall clock, from its start to the receiver's "done" (its stream
synchronized after the last bucket's import), handshakes included. The paths take turns: --warmup rounds,
then --reps rounds, each round one step of every path and layout, in an order that rotates from round to
round, so slow drift (clocks, the other process) falls on every path alike. Each path reports its median
and spread (min, quartiles, max) over the rounds; a speedup is the ratio of two medians of this run, and
the per-round ratio of the same two paths (paired_speedup_vs_by_hand) shows how far it moves. Before every
step the parameters are poisoned and after it they are checked bit for bit against references made with
torch (both outside the timed part); any mismatch fails the run.

With CUDA events, the trainer alone, no transport, the same rounds: copy_ms, one device-to-device copy of
the same bytes (values + compact scales); bucket_fill_ms, the run of every bucket's plan; clone_permute_ms,
the hand-written export of the same tensors (per tensor: values .clone(), scales through the same torch
permute/crop the by-hand path uses, each freed before the next, as frameworks send them); by_hand_fill_ms,
the by-hand path's own fill of every bucket. The direct path's device memory: what its plans took, the
most a step left allocated, and the lowest free memory a polling thread saw during untimed runs. `targets`
holds each target of issue 16, computed from these numbers.

  python bench/weight_sync_e2e.py --out results.json        # the H200 run (a minute or two)
  python bench/weight_sync_e2e.py --smoke                   # tiny sizes: checks the logic in seconds

Needs a CUDA GPU and a CUDA build of mxfp8: without one it fails (it never skips).
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import threading
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


def summary(samples):
    """Median and spread of a path's samples (ms, or a ratio): what a single median hides."""
    ordered = sorted(samples)
    q1, q3 = (statistics.quantiles(ordered, n=4, method="inclusive")[::2] if len(ordered) > 1
              else (ordered[0], ordered[0]))
    return {"median": round(statistics.median(ordered), 3), "min": round(ordered[0], 3), "q1": round(q1, 3),
            "q3": round(q3, 3), "max": round(ordered[-1], 3), "n": len(ordered)}


def rotated(items, by):
    """items starting at index `by` (mod len): each round of steps starts with another path."""
    by %= len(items)
    return list(items[by:]) + list(items[:by])


def clone_permute(torch, storage, shapes):
    """The hand-written export frameworks run today, tensor by tensor: the values cloned, the scales through
    the by-hand path's torch permute/crop; each pair is dropped before the next (as once sent), so torch's
    caching allocator reuses one tensor's memory for the next."""
    for name, (rows, k) in shapes.items():
        values = storage[name]["data"].clone()
        scales = torch_unswizzle(storage[name]["scale_inv"].view(-1), rows, (k + 31) // 32)
        del values, scales


def cpu_path_in_ci():
    """Whether CI's script (scripts/test.sh) runs the weight-sync example over shared memory (the CPU path)."""
    script = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "test.sh"
    return script.is_file() and "examples/weight_sync/weight_sync.py --transport shm" in script.read_text()


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
    device = torch.cuda.current_device()
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
        elif kind in ("bucketed_pipelined", "by_hand_pipelined"):  # enqueue; wait only after the last bucket
            i, last = message[2], message[3]
            stream.wait_event(filled[i % 2])
            if kind == "bucketed_pipelined":
                pipelined_plans[layout][i].run()
            else:
                copy_by_hand(torch, buffers[i % 2], pipelined_groups[i], p, layout)
            released[i % 2].record(stream)
            conn.send(("released", i))
            if last:  # the receiver knows the step's end: no extra round trip to ask for the sync
                stream.synchronize()
                conn.send(("done", 0.0))
        elif kind == "probe_direct_memory":  # untimed direct runs while a thread polls the free memory
            runs = message[2]
            torch.cuda.synchronize()
            base = torch.cuda.mem_get_info(device)[0]
            lowest, polls, stop_polling = [base], [0], threading.Event()

            def poll():
                while not stop_polling.is_set():
                    lowest[0] = min(lowest[0], torch.cuda.mem_get_info(device)[0])
                    polls[0] += 1

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            while polls[0] == 0:  # the poller is running before the first launch
                time.sleep(0.001)
            for _ in range(runs):
                plans[layout].run()
            torch.cuda.synchronize()  # releases the GIL: the poller samples while the GPU runs
            stop_polling.set()
            poller.join()
            conn.send(("probed", (base - lowest[0]) / 2**20, polls[0]))
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


# ----------------------------------------------------------------------------- what the run reports ---
PATHS = ("direct", "bucketed", "bucketed_unprepared", "by_hand", "bucketed_pipelined", "by_hand_pipelined")
LAYOUTS = ("compact", "cutlass_128x4")
EVENT_TIMED = ("copy", "bucket_fill", "bucket_fill_unprepared", "clone_permute", "by_hand_fill")


def layout_results(samples, direct_gpu):
    """One layout's steps: `<path>_ms` (the median, the figure the README and latest-h200.json quote), the
    spread of each path, and each path's per-round speedup over by_hand (the two steps of one round)."""
    out = {f"{path}_ms": summary(samples[path])["median"] for path in PATHS}
    out["direct_gpu_ms"] = summary(direct_gpu)["median"]
    out["stats_ms"] = {path: summary(samples[path]) for path in PATHS}
    out["stats_ms"]["direct_gpu"] = summary(direct_gpu)
    out["paired_speedup_vs_by_hand"] = {
        path: summary([hand / mine for hand, mine in zip(samples["by_hand"], samples[path])])
        for path in PATHS if path != "by_hand"}
    return out


def issue_targets(results, events, direct_peak_mb, bit_exact, cpu_in_ci):
    """Each target of issue 16, from this run's numbers. Speedups: each layout's path against that layout's
    by-hand path, medians of this run; the smaller of the two layouts counts."""
    worst = {key: max(results[layout][key] for layout in results) for key in (f"{p}_ms" for p in PATHS)}
    copy_ms, fill_ms, clone_ms = events["copy_ms"], events["bucket_fill_ms"], events["clone_permute_ms"]

    def speedup(baseline, path):
        return round(min(results[layout][f"{baseline}_ms"] / results[layout][f"{path}_ms"] for layout in results), 2)

    def paired(path):  # the spread of the per-round ratio, in the layout whose median ratio is the smaller
        layout = min(results, key=lambda lay: results[lay]["paired_speedup_vs_by_hand"][path]["median"])
        ratio = results[layout]["paired_speedup_vs_by_hand"][path]
        return [ratio["min"], ratio["q1"], ratio["median"], ratio["q3"], ratio["max"]]

    return {
        # Direct path: >= 70% of a copy of the bytes that move, >= 2x the hand-written path.
        "direct_fraction_of_copy": round(copy_ms / worst["direct_ms"], 3),
        "direct_ge_70pct_of_copy": copy_ms / worst["direct_ms"] >= 0.7,
        "direct_speedup_vs_by_hand": speedup("by_hand", "direct"),
        "direct_ge_2x_by_hand": speedup("by_hand", "direct") >= 2,
        # Bucketed path: >= 1.3x the hand-written path (what frameworks do today: by_hand, synchronous),
        # with the synchronous handshake and with the pipelined one; and against by-hand code given the same
        # pipelined handshake. *_paired: min, q1, median, q3, max of the per-round ratio.
        "bucketed_speedup_vs_by_hand": speedup("by_hand", "bucketed"),
        "bucketed_ge_1p3x_by_hand": speedup("by_hand", "bucketed") >= 1.3,
        "bucketed_speedup_vs_by_hand_paired": paired("bucketed"),
        "bucketed_pipelined_speedup_vs_by_hand": speedup("by_hand", "bucketed_pipelined"),
        "bucketed_pipelined_ge_1p3x_by_hand": speedup("by_hand", "bucketed_pipelined") >= 1.3,
        "bucketed_pipelined_speedup_vs_by_hand_paired": paired("bucketed_pipelined"),
        "bucketed_pipelined_speedup_vs_by_hand_pipelined": speedup("by_hand_pipelined", "bucketed_pipelined"),
        # Bucket fill alone: >= 90% of a copy of the same bytes, and faster than per-tensor clone + permute.
        "bucket_fill_fraction_of_copy": round(copy_ms / fill_ms, 3),
        "bucket_fill_ge_90pct_of_copy": copy_ms / fill_ms >= 0.9,
        "clone_permute_fraction_of_copy": round(copy_ms / clone_ms, 3),
        "bucket_fill_speedup_vs_clone_permute": round(clone_ms / fill_ms, 3),
        "bucket_fill_faster_than_clone_permute": fill_ms < clone_ms,
        # Peak extra device memory of the direct path (its plans plus the most a run took): <= 64 MiB.
        "direct_peak_extra_mb": round(direct_peak_mb, 1),
        "direct_peak_extra_le_64_mib": direct_peak_mb <= 64,
        # The GPU path bit-exact on every step of this run; the CPU (shared-memory) path in CI's script.
        "gpu_bit_exact_every_step": bit_exact,
        "cpu_path_in_ci_script": cpu_in_ci,
    }


def target_lines(targets):
    """The targets in a few lines, for the end of the log (device_session.sh shows its last lines)."""
    t = targets
    return [
        f"direct: {t['direct_fraction_of_copy']:.0%} of copy (>= 70%: {t['direct_ge_70pct_of_copy']}), "
        f"{t['direct_speedup_vs_by_hand']}x by hand (>= 2x: {t['direct_ge_2x_by_hand']}), "
        f"peak extra {t['direct_peak_extra_mb']} MiB (<= 64: {t['direct_peak_extra_le_64_mib']})",
        f"bucketed vs by hand (>= 1.3x): synchronous {t['bucketed_speedup_vs_by_hand']}x "
        f"{t['bucketed_ge_1p3x_by_hand']}, pipelined {t['bucketed_pipelined_speedup_vs_by_hand']}x "
        f"{t['bucketed_pipelined_ge_1p3x_by_hand']} (per round min/q1/med/q3/max "
        f"{t['bucketed_pipelined_speedup_vs_by_hand_paired']})",
        f"bucket fill: {t['bucket_fill_fraction_of_copy']:.0%} of copy (>= 90%: {t['bucket_fill_ge_90pct_of_copy']}), "
        f"{t['bucket_fill_speedup_vs_clone_permute']}x clone + permute (faster: "
        f"{t['bucket_fill_faster_than_clone_permute']}; clone + permute {t['clone_permute_fraction_of_copy']:.0%} of copy)",
        f"bit-exact every step: {t['gpu_bit_exact_every_step']}; CPU path in CI's script: {t['cpu_path_in_ci_script']}",
    ]


# ------------------------------------------------------------------------------------------- trainer ---
def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 2 rounds: checks the logic")
    parser.add_argument("--reps", type=int, default=None,
                        help="timed rounds: steps per path and layout (default 15; --smoke 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed rounds first (default 2; --smoke 1)")
    parser.add_argument("--time-limit-s", type=float, default=100,
                        help="stop adding timed rounds (after at least 5) once the run has taken this long, so "
                             "that a caller's time limit (bench/device/device_session.sh: 150 s) still gets the JSON; "
                             "'reps' records the rounds run (default 100)")
    parser.add_argument("--out", help="write the JSON here (also printed)")
    parser.add_argument("--sweep-mb", type=lambda t: [int(v) for v in t.split(",") if v], default=[],
                        help="also time the pipelined paths with two buckets of each of these MiB sizes")
    args = parser.parse_args()
    began = time.perf_counter()

    import torch
    import torch.multiprocessing as mp

    import mxfp8

    if not torch.cuda.is_available():
        raise SystemExit("weight_sync_e2e: no CUDA device visible to torch; this benchmark runs on a GPU only")
    if not mxfp8._mxfp8.with_cuda:
        raise SystemExit("weight_sync_e2e: mxfp8 was built without CUDA; rebuild with nvcc on the PATH")
    layers, shapes_per_layer = (2, SMOKE_LAYER) if args.smoke else (8, LAYER)
    bucket_bytes = (1 << 20) if args.smoke else (1 << 30)
    reps = args.reps or (2 if args.smoke else 15)
    warmup = args.warmup if args.warmup is not None else (1 if args.smoke else 2)
    if reps < 1 or warmup < 0:
        raise SystemExit("weight_sync_e2e: --reps must be at least 1 and --warmup at least 0")

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

    def expect(wanted):  # a reply of the pipelined handshake
        reply = conn.recv()
        if reply[:len(wanted)] != wanted:
            raise SystemExit(f"weight_sync_e2e: the receiver answered {reply!r}, expected {wanted!r}")

    conn.send(("setup", storage, bucket, shapes))
    if conn.recv()[0] != "ready":
        raise SystemExit("weight_sync_e2e: the receiver did not get ready")

    # The bucket groups, from one planning pass (the same for every step).
    plans = mxfp8.prepare_buckets(storage, bucket_bytes=bucket_bytes, buffer=bucket)
    groups = [p.manifest for p in plans]
    ask("prepare_buckets", None, [p.buffer.numel() for p in plans], groups)
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream()

    def bucketed(layout):
        for i, plan in enumerate(plans):
            plan.run()
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
        pipe["plans"] = [mxfp8.prepare_buckets(storage, bucket_bytes=half, buffer=b) for b in buffers]  # same groups
        pipe["buffers"] = buffers
        ask("prepare_pipelined", buffers, filled, released, [p.buffer.numel() for p in pipe["plans"][0]],
            [p.manifest for p in pipe["plans"][0]])

    def pipelined(kind, layout):
        plans, buffers = pipe["plans"], pipe["buffers"]
        count = len(plans[0])
        for i in range(count):
            if i >= 2:  # the receiver has enqueued the import of bucket i - 2 and recorded released[i % 2]
                expect(("released", i - 2))
                stream.wait_event(released[i % 2])
            if kind == "bucketed_pipelined":
                plans[i % 2][i].run()
            else:
                fill_by_hand(storage, buffers[i % 2], plans[0][i].manifest)
            filled[i % 2].record(stream)
            conn.send((kind, layout, i, i == count - 1))
        for i in range(max(count - 2, 0), count):
            expect(("released", i))
        expect(("done",))  # the receiver synchronized its stream after the last bucket's import

    failures, steps_checked = [], [0]

    def step_ms(run, layout, path, label):
        """One step of `path` into `layout`'s parameters: poisoned before, checked bit for bit after."""
        ask("poison", layout)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run(layout)
        elapsed = (time.perf_counter() - t0) * 1e3
        bad = ask("verify", layout)[1]
        steps_checked[0] += 1
        if bad:
            failures.append(f"{path} -> {layout}: {bad} differ after {label}")
        return elapsed

    gpu_ms = {layout: [] for layout in LAYOUTS}

    def direct(layout):
        gpu_ms[layout].append(ask("direct", layout)[1])

    runs = {"direct": direct, "bucketed": bucketed, "bucketed_unprepared": bucketed_unprepared, "by_hand": by_hand,
            "bucketed_pipelined": lambda layout: pipelined("bucketed_pipelined", layout),
            "by_hand_pipelined": lambda layout: pipelined("by_hand_pipelined", layout)}
    set_up_pipelined(bucket_bytes // 2, bucket)
    pipelined_buckets = len(pipe["plans"][0])
    # Rounds: one step of every path and layout each, the order rotating; the first `warmup` are not kept.
    samples = {layout: {path: [] for path in PATHS} for layout in LAYOUTS}
    combos = [(layout, path) for layout in LAYOUTS for path in PATHS]
    for rnd in range(warmup + reps):
        for layout, path in rotated(combos, rnd * (len(PATHS) + 1)):
            ms = step_ms(runs[path], layout, path, f"round {rnd}")
            if rnd >= warmup:
                samples[layout][path].append(ms)
        print(f"round {rnd + 1}/{warmup + reps} ({'warm-up' if rnd < warmup else 'timed'}), "
              f"{time.perf_counter() - began:.0f} s", flush=True)
        if rnd + 1 - warmup >= min(reps, 5) and time.perf_counter() - began > args.time_limit_s:
            print(f"time limit: {rnd + 1 - warmup} timed rounds of {reps}", flush=True)
            reps = rnd + 1 - warmup  # what the medians rest on; the sweep and event timings use as many
            break
    results = {layout: layout_results(samples[layout], gpu_ms[layout][warmup:]) for layout in LAYOUTS}

    # The direct path's memory with a polling thread (untimed runs, checked bit for bit too).
    probe = {}
    for layout in LAYOUTS:
        ask("poison", layout)
        probe[layout] = ask("probe_direct_memory", layout, 3 if args.smoke else 20)[1:]
        steps_checked[0] += 1
        bad = ask("verify", layout)[1]
        if bad:
            failures.append(f"direct (memory probe) -> {layout}: {bad} differ")

    # Is the handshake's cost per bucket? The pipelined paths again with other bucket sizes (the 128x4
    # layout; two buffers of each size, in memory of their own).
    sweep = {}
    for mb in args.sweep_mb:
        memory = torch.empty(2 * (mb << 20) + (1 << 20), dtype=torch.uint8, device="cuda")
        set_up_pipelined(mb << 20, memory)
        kinds = ("bucketed_pipelined", "by_hand_pipelined")
        swept = {kind: [] for kind in kinds}
        for rnd in range(warmup + reps):
            for kind in rotated(kinds, rnd):
                ms = step_ms(runs[kind], "cutlass_128x4", kind, f"sweep {mb} MiB round {rnd}")
                if rnd >= warmup:
                    swept[kind].append(ms)
        sweep[mb] = {"buckets": len(pipe["plans"][0]),
                     **{f"{kind}_ms": summary(swept[kind])["median"] for kind in kinds},
                     "stats_ms": {kind: summary(swept[kind]) for kind in kinds}}
        del memory
        print(f"pipelined, two {mb} MiB buckets: {sweep[mb]}", flush=True)

    # The trainer alone, no transport, CUDA events, the same rounds: one device-to-device copy of the same
    # bytes, the bucket fills, the hand-written per-tensor export and the by-hand path's own fill.
    copied = {"src": torch.empty(nbytes, dtype=torch.uint8, device="cuda")}
    copied["dst"] = torch.empty_like(copied["src"])
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    bodies = {
        "copy": lambda: copied["dst"].copy_(copied["src"]),
        "bucket_fill": lambda: [plan.run() for plan in plans],
        "bucket_fill_unprepared": lambda: [None for _ in mxfp8.iter_buckets(storage, bucket_bytes=bucket_bytes,
                                                                             buffer=bucket)],
        "clone_permute": lambda: clone_permute(torch, storage, shapes),
        "by_hand_fill": lambda: [fill_by_hand(storage, bucket, manifest) for manifest in groups],
    }
    timed = {name: [] for name in EVENT_TIMED}
    for rnd in range(warmup + reps):
        for name in rotated(EVENT_TIMED, rnd):
            torch.cuda.synchronize()
            start.record()
            bodies[name]()
            stop.record()
            stop.synchronize()
            if rnd >= warmup:
                timed[name].append(start.elapsed_time(stop))
    events = {f"{name}_ms": summary(timed[name])["median"] for name in EVENT_TIMED}
    copied.clear()
    import_ms = {layout: round(ask("time_import", layout)[1], 3) for layout in LAYOUTS}
    memory = ask("stop")
    proc.join(timeout=60)

    # The direct path's extra device memory: its plans, plus the most a run took (after a step, or seen by
    # the polling thread during one).
    run_peak_mb = max([memory[2]] + [probe[layout][0] for layout in LAYOUTS])
    worst = {f"{path}_ms": max(results[layout][f"{path}_ms"] for layout in LAYOUTS) for path in PATHS}
    out = {
        "gb": round(nbytes / 1e9, 3),
        "tensors": len(storage),
        "bucket_mb": bucket_bytes >> 20,
        "buckets": len(groups),
        "pipelined_buckets": pipelined_buckets,
        "reps": reps,  # timed rounds: steps per path and layout behind each median
        "warmup": warmup,
        "steps_checked": steps_checked[0],  # steps whose parameters were poisoned before and checked after
        # Top level: the slower of the two engine layouts' medians; both, with their spread, are below.
        **worst,
        **events,  # copy, bucket_fill (prepare_buckets), bucket_fill_unprepared (iter_buckets), clone_permute,
                   # by_hand_fill: medians, CUDA events
        "event_stats_ms": {name: summary(timed[name]) for name in EVENT_TIMED},
        "bucket_import_ms": import_ms,  # the receiver's import plans alone, every bucket, per layout
        "pipelined_sweep_128x4": sweep,  # bucket MiB -> its count and the pipelined paths' step
        "compact": results["compact"],
        "cutlass_128x4": results["cutlass_128x4"],
        # Device memory (cudaMemGetInfo) the direct path's plans took, and the most one direct run took.
        "direct_plan_mb": round(memory[1], 1),
        "direct_run_peak_extra_mb": round(run_peak_mb, 1),
        "direct_run_after_step_extra_mb": round(memory[2], 1),  # free memory before a step minus after it
        "direct_run_polled_extra_mb": {layout: round(probe[layout][0], 1) for layout in LAYOUTS},
        "direct_run_polls": {layout: probe[layout][1] for layout in LAYOUTS},  # samples the poller took
        "bit_exact_every_step": not failures,
        "gpu": torch.cuda.get_device_name(),
        # Values of at least this many bytes go through cudaMemcpyAsync (the library's default: 4 MiB).
        "copy_engine_min_bytes": os.environ.get("MXFP8_COPY_ENGINE_MIN_BYTES", "default"),
        "smoke": args.smoke,
        "wall_s": round(time.perf_counter() - began, 1),
    }
    out["targets"] = issue_targets(results, events, memory[1] + run_peak_mb, not failures, cpu_path_in_ci())
    text = json.dumps({"weight_sync_e2e": out}, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print("\n".join(target_lines(out["targets"])))
    if failures or proc.exitcode != 0:
        raise SystemExit("weight_sync_e2e: NOT bit-exact: " + "; ".join(failures[:5]) +
                         f" (receiver exit {proc.exitcode})")


if __name__ == "__main__":
    sys.exit(main())
