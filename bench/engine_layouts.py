#!/usr/bin/env python3
"""One 128-expert MoE layer written into each engine-native target (issue 18), three ways:

  ms        mxfp8.convert on the grouped experts: values copied and scales written in the target, all
            experts in one call (one kernel launch, plus the copy engine for the values);
  torch_ms  what engines do at load today: per expert, copy_() the values into the parameter and build
            the target's scales with torch ops (pad, view, permute / transpose);
  copy_ms   one device-to-device copy of the same bytes (values + the target's scale bytes).

The layer is Qwen3-235B-A22B's (128 experts, hidden 4096, moe_intermediate 1536): w13 [128, 3072, 4096]
(gate and up) and w2 [128, 4096, 1536], FP8 E4M3 values with compact E8M0 scales, 2.4 GB of values.
Every target is checked bit for bit against the torch path before it is timed; a mismatch fails the run.
Median of --reps, CUDA events.

  python3 bench/engine_layouts.py --out results.json                       # the H200 run (~30 s)
  python3 bench/engine_layouts.py --merge bench/results/latest-h200.json   # also merged there
  python3 bench/engine_layouts.py --smoke                                  # tiny, CPU or GPU, seconds

Writes {"engine_layouts": {"cutlass_128x4": {"ms", "copy_ms", "torch_ms", ...}, "deepgemm": {...}}}.
Without a GPU (or without torch) --smoke runs the same conversions on tiny host arrays against NumPy
references; the full run needs a CUDA GPU and a CUDA build of mxfp8.
"""
import argparse
import json
import statistics
import sys
import time

EXPERTS = 128
LAYER = {"w13": (3072, 4096), "w2": (4096, 1536)}  # Qwen3-235B-A22B: (rows N, K) per expert
SMOKE_EXPERTS = 6
SMOKE_LAYER = {"w13": (102, 200), "w2": (64, 96)}  # mn not a multiple of 4, sf_k not of 4


def round_up(n, d):
    return (n + d - 1) // d * d


# --- the per-expert torch paths (what engines run at load), one per target ------------------------------
def torch_cutlass_128x4(compact):
    """vLLM / SGLang's swizzle of one expert's (N, C) scales: zero-pad, permute, flatten."""
    import torch

    rows, cols = compact.shape
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    padded = torch.zeros((rp, cp), dtype=torch.uint8, device=compact.device)
    padded[:rows, :cols] = compact
    return padded.view(rp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4).reshape(-1)


def torch_deepgemm(compact):
    """DeepGEMM's packed UE8M0 tensor of one expert's (mn, sf_k) scales, as its torch path builds it:
    zero-pad, view as int32, store MN-major (strides (1, mn_aligned)); returned as the flat storage."""
    import torch

    mn, sf_k = compact.shape
    mn_aligned, k_aligned = round_up(mn, 4), round_up(sf_k, 4)
    padded = torch.zeros((mn_aligned, k_aligned), dtype=torch.uint8, device=compact.device)
    padded[:mn, :sf_k] = compact
    return padded.view(torch.int32).t().contiguous().view(torch.uint8).reshape(-1)


# 18b adds "trtllm": its per-expert torch path (FlashInfer's shuffle), and it is timed like the others.
TORCH_PATHS = {"cutlass_128x4": torch_cutlass_128x4, "deepgemm": torch_deepgemm}


def numpy_reference(compact, target):
    """The same two layouts in NumPy, for the smoke run on a machine without torch."""
    import numpy as np

    rows, cols = compact.shape
    if target == "cutlass_128x4":
        rp, cp = round_up(rows, 128), round_up(cols, 4)
        padded = np.zeros((rp, cp), np.uint8)
        padded[:rows, :cols] = compact
        return padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1)
    padded = np.zeros((round_up(rows, 4), round_up(cols, 4)), np.uint8)
    padded[:rows, :cols] = compact
    return np.ascontiguousarray(padded.view("<i4").T).view(np.uint8).reshape(-1)


def flat_bytes(t, nbytes):
    """The first `nbytes` of a convert output's storage (DeepGEMM's strided int32 view included), flat."""
    import numpy as np

    return np.lib.stride_tricks.as_strided(t, (nbytes // t.itemsize,), (t.itemsize,)).view(np.uint8)


def timed(fn, reps, cuda):
    """Median milliseconds of fn() over reps runs (after one warm-up)."""
    fn()
    times = []
    if cuda:
        import torch

        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run_torch(experts, layer, reps, device):
    import torch

    import mxfp8

    cuda = device == "cuda"
    torch.manual_seed(0)
    results = {}
    weights = {}
    for name, (n, k) in layer.items():
        c = -(-k // 32)
        values = torch.randint(0, 256, (experts * n, k), dtype=torch.uint8, device=device)
        scales = torch.randint(1, 255, (experts, n, c), dtype=torch.uint8, device=device)
        weights[name] = (values.view(torch.float8_e4m3fn), scales, n, k, c)
    for target, torch_path in TORCH_PATHS.items():
        per = {name: mxfp8.layout_bytes(target, n, c) for name, (_, _, n, _, c) in weights.items()}
        # The engine's parameters, allocated once (their addresses are the engine's).
        ours = {name: (torch.empty_like(v), torch.empty(experts * per[name], dtype=torch.uint8, device=device))
                for name, (v, _, _, _, _) in weights.items()}
        theirs = {name: (torch.empty_like(v), torch.empty(experts * per[name], dtype=torch.uint8, device=device))
                  for name, (v, _, _, _, _) in weights.items()}
        copy_src = torch.empty(sum(v.numel() + experts * per[name] for name, (v, *_) in weights.items()),
                               dtype=torch.uint8, device=device)
        copy_dst = torch.empty_like(copy_src)

        def ours_step():
            for name, (v, s, n, k, c) in weights.items():
                mxfp8.convert(v, s.reshape(-1), target, num_experts=experts, scales="compact", values=ours[name][0],
                              out=ours[name][1])

        def torch_step():
            for name, (v, s, n, k, c) in weights.items():
                pv, ps = theirs[name]
                for e in range(experts):
                    pv[e * n:(e + 1) * n].copy_(v[e * n:(e + 1) * n])
                    ps[e * per[name]:(e + 1) * per[name]].copy_(torch_path(s[e]))

        ours_step()
        torch_step()
        if cuda:
            torch.cuda.synchronize()
        for name in weights:
            if not (torch.equal(ours[name][0].view(torch.uint8), theirs[name][0].view(torch.uint8)) and
                    torch.equal(ours[name][1], theirs[name][1])):
                raise SystemExit(f"engine_layouts: {target} {name}: mxfp8.convert and the torch path differ")
        gb = copy_src.numel() / 1e9
        results[target] = {
            "ms": round(timed(ours_step, reps, cuda), 4),
            "copy_ms": round(timed(lambda: copy_dst.copy_(copy_src), reps, cuda), 4),
            "torch_ms": round(timed(torch_step, max(1, reps // 4), cuda), 4),
            "gb": round(gb, 3),
            "bit_exact": True,
        }
        r = results[target]
        r["fraction_of_copy"] = round(r["copy_ms"] / r["ms"], 3)
        r["speedup_vs_torch"] = round(r["torch_ms"] / r["ms"], 1)
        r["targets_met"] = {"ge_70pct_of_copy": r["fraction_of_copy"] >= 0.7, "ge_20x_torch": r["speedup_vs_torch"] >= 20}
    return results


def run_numpy_smoke(experts, layer, reps):
    import numpy as np

    import mxfp8

    rng = np.random.default_rng(0)
    results = {}
    for target in TORCH_PATHS:
        ms, ref_ms, ok = 0.0, 0.0, True
        for name, (n, k) in layer.items():
            c = -(-k // 32)
            values = rng.integers(0, 256, (experts * n, k), dtype=np.uint8)
            scales = rng.integers(1, 255, (experts, n, c), dtype=np.uint8)
            out = mxfp8.convert(values, scales.reshape(-1), target, num_experts=experts, scales="compact", values=True)
            want = np.concatenate([numpy_reference(scales[e], target) for e in range(experts)])
            ok &= bool(np.array_equal(flat_bytes(out.scales, want.size), want) and np.array_equal(out.values.reshape(-1, k), values))
            ms += timed(lambda: mxfp8.convert(values, scales.reshape(-1), target, num_experts=experts, scales="compact",
                                              values=True), reps, False)
            ref_ms += timed(lambda: [numpy_reference(scales[e], target) for e in range(experts)], reps, False)
        if not ok:
            raise SystemExit(f"engine_layouts --smoke: {target}: mxfp8.convert and the NumPy reference differ")
        results[target] = {"ms": round(ms, 4), "copy_ms": None, "torch_ms": None, "numpy_reference_ms": round(ref_ms, 4),
                           "bit_exact": True}
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; CPU when there is no GPU")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", help="write the JSON here")
    parser.add_argument("--merge", help="also set the engine_layouts key of this JSON file (e.g. latest-h200.json)")
    args = parser.parse_args()
    experts, layer = (SMOKE_EXPERTS, SMOKE_LAYER) if args.smoke else (EXPERTS, LAYER)
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        torch, cuda = None, False
    if not cuda and not args.smoke:
        raise SystemExit("engine_layouts: needs a CUDA GPU and torch (use --smoke for a CPU check)")
    if torch is not None:
        results = run_torch(experts, layer, 3 if args.smoke else args.reps, "cuda" if cuda else "cpu")
    else:
        results = run_numpy_smoke(experts, layer, 3)
    out = {
        **results,
        "layer": {"model": "Qwen3-235B-A22B" if not args.smoke else "smoke", "experts": experts,
                  "w13": list(layer["w13"]), "w2": list(layer["w2"]), "values": "e4m3", "source_scales": "compact"},
        "device": (torch.cuda.get_device_name() if cuda else "cpu"),
        "smoke": args.smoke,
    }
    text = json.dumps({"engine_layouts": out}, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.merge:
        with open(args.merge) as f:
            merged = json.load(f)
        merged["engine_layouts"] = out
        with open(args.merge, "w") as f:
            f.write(json.dumps(merged, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
