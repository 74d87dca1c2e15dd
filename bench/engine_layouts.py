#!/usr/bin/env python3
"""One 128-expert MoE layer written into each engine-native target (issue 18), three ways:

  ms        mxfp8.convert on the grouped experts: values copied and scales written in the target, all
            experts in one call (one kernel launch, plus the copy engine for the values);
  torch_ms  what engines do at load today: per expert, copy_() the values into the parameter and build
            the target's scales with torch ops (pad, view, permute / transpose); for "trtllm", vLLM's
            per-expert _shuffle_mxfp8_moe_weights loop (FlashInfer's row indices built per call on the
            host, rows gathered, scales interleaved), w13 gated, w2 not;
  copy_ms   one device-to-device copy of the same bytes (values + the target's scale bytes).

The layer is Qwen3-235B-A22B's (128 experts, hidden 4096, moe_intermediate 1536): w13 [128, 3072, 4096]
(gate and up) and w2 [128, 4096, 1536], FP8 E4M3 values with compact E8M0 scales, 2.4 GB of values.
Every target is checked bit for bit against the torch path before it is timed; a mismatch fails the run.
Median of --reps, CUDA events.

  python3 bench/engine_layouts.py --out results.json                       # the H200 run (~30 s)
  python3 bench/engine_layouts.py --merge bench/results/latest-h200.json   # also merged there
  python3 bench/engine_layouts.py --smoke                                  # tiny, CPU or GPU, seconds

Writes {"engine_layouts": {"cutlass_128x4": {"ms", "copy_ms", "torch_ms", ...}, "deepgemm": {...},
"trtllm": {...}}}; "trtllm" writes w13 as "trtllm_gated" and w2 as "trtllm", values moved with the scales.
On CUDA each target also gets "device_parts": the device time per step of each kernel and copy the
timed call launches (torch.profiler), and what is left of "ms" ("host_and_gaps_ms": the host's
time before the first launch, launch gaps). "trtllm" gets "split": its one launch (values and scales
of all experts) against the same kernel moving the values alone (scales from TE's swizzled storage,
which go through the batched scale kernel instead: "layout_job_scales_ms"), and a copy of the values
alone ("values_copy_ms").
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
SMOKE_LAYER_TRTLLM = {"w13": (256, 200), "w2": (128, 96)}  # FlashInfer needs rows % 128 == 0
# The mxfp8 target each weight of the layer is written in, per benchmarked target.
WEIGHT_TARGETS = {"trtllm": {"w13": "trtllm_gated", "w2": "trtllm"}}


def weight_target(target, name):
    return WEIGHT_TARGETS.get(target, {}).get(name, target)


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


SRC_TO_DST_BLK32_ROW_MAP = [0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                            4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31]


def flashinfer_row_indices(m, gated):
    """FlashInfer's row indices as its helpers build them, on the host (torch.arange, per call):
    get_reorder_rows_for_gated_act_gemm_row_indices (gated), then get_shuffle_matrix_a_row_indices(m, 128)."""
    import torch

    shuffle = torch.empty(m, dtype=torch.long)
    old = torch.arange(m, dtype=torch.long)
    shuffle[old // 32 * 32 + torch.tensor(SRC_TO_DST_BLK32_ROW_MAP)[old % 32]] = old
    if not gated:
        return None, shuffle
    rows = torch.arange(m, dtype=torch.long)
    reorder = torch.empty_like(rows)
    reorder[0::2], reorder[1::2] = rows[:(m + 1) // 2], rows[(m + 1) // 2:]
    return reorder, shuffle


def torch_trtllm(values, compact, gated):
    """vLLM's per-expert loop of _shuffle_mxfp8_moe_weights for one expert (after swap_w13_to_w31 for w13):
    reorder_rows_for_gated_act_gemm, shuffle_matrix_a, shuffle_matrix_sf_a (same rows, then the 128x4
    interleave). Returns (values, flat scales)."""
    import torch

    m = values.shape[0]
    if gated:  # swap_w13_to_w31: [gate; up] -> [up; gate]
        values = torch.cat([values[m // 2:], values[:m // 2]])
        compact = torch.cat([compact[m // 2:], compact[:m // 2]])
    reorder, shuffle = flashinfer_row_indices(m, gated)
    if reorder is not None:
        reorder = reorder.to(values.device)
        values, compact = values[reorder], compact[reorder]
    shuffle = shuffle.to(values.device)
    return values[shuffle], torch_cutlass_128x4(compact[shuffle])


TORCH_PATHS = {"cutlass_128x4": torch_cutlass_128x4, "deepgemm": torch_deepgemm, "trtllm": torch_trtllm}


def numpy_trtllm(values, compact, gated):
    """torch_trtllm in NumPy: (values, flat scales)."""
    import numpy as np

    m = values.shape[0]
    if gated:
        values, compact = np.concatenate([values[m // 2:], values[:m // 2]]), np.concatenate([compact[m // 2:], compact[:m // 2]])
        reorder = np.empty(m, np.int64)
        reorder[0::2], reorder[1::2] = np.arange((m + 1) // 2), np.arange((m + 1) // 2, m)
        values, compact = values[reorder], compact[reorder]
    old = np.arange(m)
    shuffle = np.empty(m, np.int64)
    shuffle[old // 32 * 32 + np.asarray(SRC_TO_DST_BLK32_ROW_MAP)[old % 32]] = old
    return values[shuffle], numpy_reference(compact[shuffle], "cutlass_128x4")


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


# The kernels and copies of a step, by the short names device_parts reports.
KERNEL_NAMES = {"permute_rows_kernel": "row_kernel", "produce_compact_kernel": "scale_kernel", "bulk_copy_kernel": "bulk_copy",
                "Memcpy": "memcpy"}


def device_parts(fn, reps, ms):
    """Device milliseconds per step of each kind of kernel and copy fn() launches (torch.profiler's CUDA
    activity), their sum, and what of `ms` (the step's CUDA-event time) they leave. {"error": ...} when
    the profiler is not available: the rest of the run does not depend on it."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile

        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        parts = {}
        for evt in prof.events():
            if evt.device_type != torch.autograd.DeviceType.CUDA:
                continue
            name = next((short for key, short in KERNEL_NAMES.items() if key in evt.name), evt.name[:60])
            parts[name] = parts.get(name, 0.0) + evt.time_range.elapsed_us() / 1e3 / reps
        parts = {k: round(v, 4) for k, v in parts.items()}
        parts["sum"] = round(sum(parts.values()), 4)
        parts["host_and_gaps_ms"] = round(ms - parts["sum"], 4)
        return parts
    except Exception as e:  # noqa: BLE001 - a profiler problem must not lose the run's other numbers
        return {"error": f"{type(e).__name__}: {e}"}


def make_weights(experts, layer, device):
    import torch

    torch.manual_seed(0)
    weights = {}
    for name, (n, k) in layer.items():
        c = -(-k // 32)
        values = torch.randint(0, 256, (experts * n, k), dtype=torch.uint8, device=device)
        scales = torch.randint(1, 255, (experts, n, c), dtype=torch.uint8, device=device)
        weights[name] = (values.view(torch.float8_e4m3fn), scales, n, k, c)
    return weights


PROFILED_REPS = 5


def trtllm_split(weights, per, ours, theirs, copy_src, copy_dst, r, reps):
    """Where the trtllm step's time goes: its one launch (values and scales) against the same kernel
    moving the values alone, and the values alone against a copy of their bytes. For the values alone
    the scales come from TE's padded swizzled storage, which the row kernel does not take (they go
    through the batched scale kernel's layout jobs, the path all TRT-LLM scales took before)."""
    import torch

    import mxfp8

    experts = next(iter(weights.values()))[1].shape[0]
    swizzled = {name: torch.cat([torch_cutlass_128x4(s[e]) for e in range(experts)])
                for name, (_, s, _, _, _) in weights.items()}

    def swizzled_step():
        for name, (v, _, n, k, c) in weights.items():
            mxfp8.convert(v, swizzled[name], weight_target("trtllm", name), num_experts=experts, scales="padded",
                          swizzled=True, values=ours[name][0], out=ours[name][1])

    for name in weights:  # poisoned first, then checked like the timed call
        ours[name][0].view(torch.uint8).fill_(0xFF)
        ours[name][1].fill_(0xFF)
    swizzled_step()
    torch.cuda.synchronize()
    for name in weights:
        if not (torch.equal(ours[name][0].view(torch.uint8), theirs[name][0].view(torch.uint8)) and
                torch.equal(ours[name][1], theirs[name][1])):
            raise SystemExit(f"engine_layouts: trtllm {name} from swizzled scales: mxfp8.convert and the torch path differ")
    values_bytes = sum(v.numel() for v, *_ in weights.values())
    values_copy_ms = timed(lambda: copy_dst[:values_bytes].copy_(copy_src[:values_bytes]), reps, True)
    swizzled_ms = timed(swizzled_step, reps, True)
    fused = r["device_parts"].get("row_kernel")
    alone = device_parts(swizzled_step, PROFILED_REPS, swizzled_ms)
    out = {
        "whole_ms": r["ms"],
        "row_kernel_ms": fused,  # values and scales of all experts, one launch per weight
        "values_alone_row_kernel_ms": alone.get("row_kernel"),
        "values_copy_ms": round(values_copy_ms, 4),
        "values_gb": round(values_bytes / 1e9, 3),
        "layout_job_scales_ms": alone.get("scale_kernel"),  # from swizzled scales, the batched kernel
        "swizzled_source_ms": round(swizzled_ms, 4),
        "swizzled_source_parts": alone,
    }
    if fused is not None and out["values_alone_row_kernel_ms"] is not None:
        out["scales_in_row_kernel_ms"] = round(fused - out["values_alone_row_kernel_ms"], 4)
        out["values_fraction_of_copy"] = round(values_copy_ms / out["values_alone_row_kernel_ms"], 3)
    return out


def run_torch(experts, layer, reps, device, trtllm_layer=None):
    import torch

    import mxfp8

    cuda = device == "cuda"
    results = {}
    all_weights = make_weights(experts, layer, device)
    trtllm_weights = all_weights if trtllm_layer is None else make_weights(experts, trtllm_layer, device)
    for target, torch_path in TORCH_PATHS.items():
        weights = trtllm_weights if target == "trtllm" else all_weights
        per = {name: mxfp8.layout_bytes(weight_target(target, name), n, c) for name, (_, _, n, _, c) in weights.items()}
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
                mxfp8.convert(v, s.reshape(-1), weight_target(target, name), num_experts=experts, scales="compact",
                              values=ours[name][0], out=ours[name][1], swizzled=False)

        def torch_step():
            for name, (v, s, n, k, c) in weights.items():
                pv, ps = theirs[name]
                for e in range(experts):
                    if target == "trtllm":
                        ve, se = torch_path(v[e * n:(e + 1) * n].view(torch.uint8), s[e], name == "w13")
                        pv[e * n:(e + 1) * n].view(torch.uint8).copy_(ve)
                        ps[e * per[name]:(e + 1) * per[name]].copy_(se)
                        continue
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
        if cuda:
            r["device_parts"] = device_parts(ours_step, PROFILED_REPS, r["ms"])
            if target == "trtllm":
                r["split"] = trtllm_split(weights, per, ours, theirs, copy_src, copy_dst, r, reps)
        r["fraction_of_copy"] = round(r["copy_ms"] / r["ms"], 3)
        r["speedup_vs_torch"] = round(r["torch_ms"] / r["ms"], 1)
        r["targets_met"] = {"ge_70pct_of_copy": r["fraction_of_copy"] >= 0.7, "ge_20x_torch": r["speedup_vs_torch"] >= 20}
    return results


def run_numpy_smoke(experts, layer, reps, trtllm_layer):
    import numpy as np

    import mxfp8

    rng = np.random.default_rng(0)
    results = {}
    for target in TORCH_PATHS:
        ms, ref_ms, ok = 0.0, 0.0, True
        for name, (n, k) in (trtllm_layer if target == "trtllm" else layer).items():
            c = -(-k // 32)
            values = rng.integers(0, 256, (experts * n, k), dtype=np.uint8)
            scales = rng.integers(1, 255, (experts, n, c), dtype=np.uint8)
            wt = weight_target(target, name)
            out = mxfp8.convert(values, scales.reshape(-1), wt, num_experts=experts, scales="compact", values=True, swizzled=False)
            if target == "trtllm":
                refs = [numpy_trtllm(values[e * n:(e + 1) * n], scales[e], name == "w13") for e in range(experts)]
                want = np.concatenate([r[1] for r in refs])
                want_values = np.concatenate([r[0] for r in refs])
                reference = lambda: [numpy_trtllm(values[e * n:(e + 1) * n], scales[e], name == "w13") for e in range(experts)]
            else:
                want = np.concatenate([numpy_reference(scales[e], target) for e in range(experts)])
                want_values = values
                reference = lambda: [numpy_reference(scales[e], target) for e in range(experts)]
            ok &= bool(np.array_equal(flat_bytes(out.scales, want.size), want) and
                       np.array_equal(out.values.reshape(-1, k), want_values))
            ms += timed(lambda: mxfp8.convert(values, scales.reshape(-1), wt, num_experts=experts, scales="compact",
                                              values=True, swizzled=False), reps, False)
            ref_ms += timed(reference, reps, False)
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
    trtllm_layer = SMOKE_LAYER_TRTLLM if args.smoke else None
    if torch is not None:
        results = run_torch(experts, layer, 3 if args.smoke else args.reps, "cuda" if cuda else "cpu", trtllm_layer)
    else:
        results = run_numpy_smoke(experts, layer, 3, SMOKE_LAYER_TRTLLM)
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
