#!/usr/bin/env python3
"""A refit at production scale on one GPU (issue 36): the trainer's TE storage (FP8 values, 128x4-swizzled
E8M0 scales) written into an engine's parameters (values, CUTLASS 128x4 scales) by
mxfp8.prepare_import_tensors + plan.run, against one device-to-device copy of the same bytes.

Cases (one GPU's share):
  moe    EP-8 of a Qwen3-235B-A22B-class MoE: 94 layers x 16 experts x (w13 3072x4096, w2 4096x1536),
         3008 tensors, ~29 GB
  dense  TP-8 of a 70B-class dense model: 80 layers x (qkv 1280x8192, o 8192x1024, gate_up 7168x8192,
         down 8192x3584), 320 tensors, ~8.8 GB
  nvfp4  the moe case's tensors in NVFP4 (packed values, swizzled E4M3 scales, a per-tensor amax) into
         (values, 128x4 scales, global scale) parameters: 3008 tensors, ~15 GB
  smoke  a few small tensors with partial tiles: checks the logic in seconds (nvfp4_smoke: the same in NVFP4)

Each route runs in a process of its own, since the library reads its environment once:
  bulk     the default: on sm_90+ the values of all tensors go to one bulk-copy launch per 1000 tensors
  memcpy   MXFP8_BULK_COPY=0: one cudaMemcpyAsync per tensor's values (the route before the pipeline)
  kernel   MXFP8_COPY_ENGINE_MIN_BYTES=0: every byte through the scale kernel's row segments

Per route and case: plan.run on the GPU (CUDA events) and its host enqueue time, prepare_import_tensors'
host time (the median of 5, and the first of the process), the immediate import_tensors (host + GPU, synchronized), and in the same process one copy of
the same bytes (a flat tensor copy_: the sources lie in one buffer, the parameters in another), where a
run's device time goes (run_device_parts: each kernel's milliseconds per run, torch.profiler) and the
per-tensor copy_ loop a framework writes by hand (values and scales, no layout change: both sides 128x4
here). Before the checked run the parameters are poisoned; after it every tensor is compared with torch's
own unswizzle + swizzle of the source: any mismatch fails the run.

  python bench/refit_scale.py --out bench/results/refit_scale.json     # on a GPU with ~70 GB free
  python bench/refit_scale.py --case smoke                             # seconds
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

CASES = {
    "moe": (94 * 16, [(3072, 4096), (4096, 1536)]),
    "dense": (80, [(1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)]),
    "smoke": (3, [(256, 512), (130, 1000), (384, 96), (1, 33)]),
}
CASES["nvfp4"] = CASES["moe"]
CASES["nvfp4_smoke"] = (3, [(256, 512), (130, 1008), (384, 96), (1, 32)])  # K even: NVFP4 packs 2 a byte
E4M3_MAX = 448
ROUTES = {"bulk": {}, "memcpy": {"MXFP8_BULK_COPY": "0"}, "kernel": {"MXFP8_COPY_ENGINE_MIN_BYTES": "0"}}
ALIGN = 256
POISON = 0xFF


def round_up(n, d):
    return (n + d - 1) // d * d


def median(xs):
    return round(statistics.median(xs), 3)


def torch_unswizzle(torch, swizzled, rows, cols):
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    return swizzled.view(rp // 128, cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4).reshape(rp, cp)[:rows, :cols]


def torch_swizzle(torch, compact):
    rows, cols = compact.shape
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    padded = torch.zeros((rp, cp), dtype=torch.uint8, device=compact.device)
    padded[:rows, :cols] = compact
    return padded.view(rp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4).reshape(-1)


def child(case, reps, by_hand):
    import torch

    import mxfp8

    groups, shapes = CASES[case]
    nvfp4 = case.startswith("nvfp4")
    # (name, rows, k, scale cols, values offset, scales offset, scale bytes, amax offset or None, values bytes)
    entries, offset = [], 0
    for g in range(groups):
        for i, (rows, k) in enumerate(shapes):
            cols = (k + 15) // 16 if nvfp4 else (k + 31) // 32
            vb = rows * k // 2 if nvfp4 else rows * k
            scale_bytes = round_up(rows, 128) * round_up(cols, 4)
            s = offset + round_up(vb, ALIGN)
            a = s + round_up(scale_bytes, ALIGN) if nvfp4 else None
            entries.append((f"{g}.{i}", rows, k, cols, offset, s, scale_bytes, a, vb))
            offset = s + round_up(scale_bytes, ALIGN) + (ALIGN if nvfp4 else 0)
    total = offset
    src = torch.empty(total, dtype=torch.uint8, device="cuda")
    dst = torch.empty(total, dtype=torch.uint8, device="cuda")
    src.random_(0, 256)
    storage, params, moved = {}, {}, 0
    for name, rows, k, cols, v, s, sb, a, vb in entries:
        scale_inv = src[s:s + sb]
        if rows % 128 or cols % 4:  # TE leaves the padding unwritten: never trusted, so poison it
            real = torch_swizzle(torch, torch.ones((rows, cols), dtype=torch.uint8, device="cuda")) == 1
            scale_inv[~real] = POISON
        if nvfp4:  # a finite, positive amax (TE's); the engine's global scale is amax / (6 * E4M3_MAX)
            amax = src[a:a + 4].view(torch.float32)
            amax.uniform_(1.0, 1000.0)
            storage[name] = {"format": "nvfp4", "data": src[v:v + vb].view(rows, k // 2), "scale_inv": scale_inv,
                             "amax": amax, "swizzled": True, "shape": (rows, k), "e4m3_max": E4M3_MAX}
            params[name] = (dst[v:v + vb].view(rows, k // 2), dst[s:s + sb], dst[a:a + 4].view(torch.float32),
                            "cutlass_128x4")
            moved += vb + sb + 8
        else:
            storage[name] = {"data": src[v:v + vb].view(rows, k), "scale_inv": scale_inv, "swizzled": True}
            params[name] = (dst[v:v + vb].view(torch.float8_e4m3fn).view(rows, k), dst[s:s + sb], "cutlass_128x4")
            moved += vb + sb
    torch.cuda.synchronize()

    # The first prepare of a process pays one-time costs (the first touch of every tensor's Python objects);
    # the figure is the median of 5, the first kept beside it.
    prepares = []
    for _ in range(5):
        t = time.perf_counter()
        plan = mxfp8.prepare_import_tensors(storage, params)
        prepares.append((time.perf_counter() - t) * 1e3)
    prepare_ms = statistics.median(prepares)

    dst.fill_(POISON)
    plan.run()
    torch.cuda.synchronize()
    bad = [name for name, rows, k, cols, v, s, sb, a, vb in entries
           if not torch.equal(dst[v:v + vb], src[v:v + vb])
           or not torch.equal(dst[s:s + sb], torch_swizzle(torch, torch_unswizzle(torch, src[s:s + sb], rows, cols)))
           or (a is not None and not torch.equal(dst[a:a + 4].view(torch.float32).cpu(),
                                                 src[a:a + 4].view(torch.float32).cpu() / (6.0 * E4M3_MAX)))]
    if bad:
        raise SystemExit(f"refit_scale: {len(bad)} of {len(entries)} tensors differ after plan.run, first {bad[0]}")

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def gpu_ms(fn):
        torch.cuda.synchronize()
        start.record()
        t0 = time.perf_counter()
        fn()
        host = (time.perf_counter() - t0) * 1e3
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop), host

    def by_hand_loop():
        for name, rows, k, cols, v, s, sb, a, vb in entries:
            params[name][0].view(torch.uint8).copy_(storage[name]["data"])
            params[name][1].copy_(storage[name]["scale_inv"])
            if a is not None:
                torch.div(storage[name]["amax"], 6.0 * E4M3_MAX, out=params[name][2])

    runs = [gpu_ms(plan.run) for _ in range(reps + 2)][2:]
    copies = [gpu_ms(lambda: dst.copy_(src))[0] for _ in range(reps + 2)][2:]
    immediate = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        mxfp8.import_tensors(storage, params)
        torch.cuda.synchronize()
        immediate.append((time.perf_counter() - t0) * 1e3)
    result = {
        "tensors": len(entries), "bytes_moved": moved, "buffer_bytes": total,
        "run_ms": median([r[0] for r in runs]), "run_host_enqueue_ms": median([r[1] for r in runs]),
        "copy_ms": median(copies), "prepare_host_ms": round(prepare_ms, 3),
        "prepare_host_ms_first": round(prepares[0], 3), "immediate_ms": median(immediate),
        "bit_exact": True,
    }
    result["run_fraction_of_copy"] = round(result["copy_ms"] / result["run_ms"], 3)
    # Where a run's GPU time goes: each kernel's (and copy's) device time per run, and what they leave.
    from engine_layouts import device_parts
    result["run_device_parts"] = device_parts(plan.run, 3, result["run_ms"])
    if by_hand:
        hand = [gpu_ms(by_hand_loop)[0] for _ in range(3)]
        result["by_hand_copy_loop_ms"] = median(hand)
    print("RESULT " + json.dumps(result), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="moe,dense,nvfp4", help="comma-separated: moe, dense, nvfp4, smoke, nvfp4_smoke")
    parser.add_argument("--routes", default="bulk,memcpy,kernel")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        case, by_hand = args.child.split(":")
        return child(case, args.reps, by_hand == "1")

    import torch

    import mxfp8

    if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
        raise SystemExit("refit_scale: needs a CUDA device and a CUDA build of mxfp8")
    results = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
               "torch": torch.__version__, "reps": args.reps, "cases": {}}
    for case in args.case.split(","):
        if case not in CASES:
            raise SystemExit(f"refit_scale: unknown case {case!r}")
        results["cases"][case] = {}
        for i, route in enumerate(args.routes.split(",")):
            env = dict(os.environ, **ROUTES[route])
            began = time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--child", f"{case}:{int(i == 0)}", "--reps", str(args.reps)],
                                  env=env, capture_output=True, text=True)
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not line:
                raise SystemExit(f"refit_scale: {case} / {route} failed:\n{proc.stdout}\n{proc.stderr}")
            r = json.loads(line[0][len("RESULT "):])
            results["cases"][case][route] = r
            print(f"{case:6s} {route:7s} run {r['run_ms']:8.3f} ms (host enqueue {r['run_host_enqueue_ms']:7.3f}) "
                  f"copy {r['copy_ms']:8.3f} ms = {r['run_fraction_of_copy']:.2f} of copy; prepare "
                  f"{r['prepare_host_ms']:.1f} ms, immediate {r['immediate_ms']:.1f} ms"
                  + (f"; copy_ loop by hand {r['by_hand_copy_loop_ms']:.2f} ms" if "by_hand_copy_loop_ms" in r else "")
                  + f"  [{r['tensors']} tensors, {r['bytes_moved'] / 1e9:.2f} GB, {time.perf_counter() - began:.0f} s]"
                  + f"\n       device parts of a run (ms): {r['run_device_parts']}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
