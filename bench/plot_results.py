#!/usr/bin/env python3
"""Draws one plot per transform from the recorded GPU results, for docs/performance.md.

  python3 bench/plot_results.py [--results bench/results/latest-h200.json] [--out docs/img]

Every figure shows bandwidth (bytes read + bytes written, per second) of the library's call beside a
device-to-device copy of the same bytes and the PyTorch path frameworks run today, from the same run.
Only what the JSON holds is drawn; a case it lacks is left out. Rerun it whenever the results change:
the PNGs are rewritten (without a timestamp, so unchanged results give unchanged files).
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LABELS = {"mxfp8": "mxfp8", "copy": "copy of the same bytes", "torch": "PyTorch path"}
COLORS = {"mxfp8": "#1f77b4", "copy": "#7f7f7f", "torch": "#d62728", "mxfp8, amax given": "#17becf"}


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9 if ms else None


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def unswizzle(r, out, gpu):
    """Scale export (unswizzle) against size: single weights, the MoE layer, the whole model."""
    points = []  # (label, bytes, ours_ms, copy_ms, torch_ms)
    for name, s in r.get("shapes", {}).items():
        points.append((f"{name} weight", s["bytes"], s["unswizzle_ms"], s["copy_ms"], s.get("torch_ms")))
    if "moe" in r:
        m = r["moe"]
        points.append((f"MoE, {m['experts']} experts", m["bytes"], m["ms"], m["copy_ms"], m.get("torch_ms")))
    if "whole_model" in r:
        m = r["whole_model"]
        points.append((f"model, {m['tensors']} weights", m["bytes"], m["ms"], m["copy_ms"], m.get("torch_ms")))
    if not points:
        return None
    points.sort(key=lambda p: p[1])
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    x = [p[1] / 1e6 for p in points]
    for key, idx, style in (("mxfp8", 2, "o-"), ("copy", 3, "s--"), ("torch", 4, "^:")):
        xs = [xi for xi, p in zip(x, points) if p[idx]]
        ys = [gbps(p[1], p[idx]) for p in points if p[idx]]
        if xs:
            ax.plot(xs, ys, style, color=COLORS[key], label={"mxfp8": "mxfp8 (one call)", "copy": "copy of the same bytes",
                                                            "torch": "PyTorch permute loop"}[key])
    for xi, p in zip(x, points):
        ax.annotate(p[0], (xi, gbps(p[1], p[2])), textcoords="offset points", xytext=(4, -12), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("bytes moved (read + written), MB")
    ax.set_ylabel("GB/s")
    ax.set_title(f"Export of 128x4-swizzled scales to compact ({gpu})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, out, "unswizzle.png")


def bars(out, name, title, cases, series):
    """Grouped bars: cases = [(label, {series: GB/s})]."""
    cases = [(label, vals) for label, vals in cases if vals.get(series[0])]
    if not cases:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    width = 0.8 / len(series)
    for i, key in enumerate(series):
        xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(cases))]
        ys = [vals.get(key) or 0 for _, vals in cases]
        bars_ = ax.bar(xs, ys, width, label=LABELS.get(key, key), color=COLORS.get(key))
        for b, y in zip(bars_, ys):
            if y:
                ax.annotate(f"{y:.0f}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([label for label, _ in cases], fontsize=8)
    ax.set_ylabel("GB/s (bytes read + written)")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, out, name)


def quantize(r, out, gpu):
    cases = []
    q = r.get("quantize")
    if q:
        b = q["bytes"]
        cases.append((f"MXFP8 E4M3 rowwise\n{tuple(q['shape'])} BF16, {b / 1e6:.0f} MB",
                      {"mxfp8": gbps(b, q["ms"]), "copy": gbps(b, q["copy_ms"]), "torch": gbps(b, q.get("torch_ms"))}))
    n = r.get("nvfp4")
    if n and n.get("quantize_ms"):
        b = n["bytes"]
        cases.append((f"NVFP4 rowwise\n{tuple(n['shape'])} BF16, {b / 1e6:.0f} MB",
                      {"mxfp8": gbps(b, n["quantize_ms"]), "mxfp8, amax given": gbps(b, n.get("quantize_given_amax_ms")),
                       "copy": gbps(b, n["quantize_copy_ms"])}))
    return bars(out, "quantize.png", f"Quantize, bit-exact with Transformer Engine ({gpu})", cases,
                ["mxfp8", "mxfp8, amax given", "copy", "torch"])


def convert(r, out, gpu):
    e = r.get("engine_layouts", {})
    cases = []
    for target in ("cutlass_128x4", "deepgemm", "trtllm"):
        t = e.get(target)
        if t:
            b = 2 * t["gb"] * 1e9  # a copy of the layer's bytes reads and writes each once
            cases.append((f"{target}\n{t['gb']:.2f} GB", {"mxfp8": gbps(b, t["ms"]), "copy": gbps(b, t["copy_ms"]),
                                                          "torch": gbps(b, t.get("torch_ms"))}))
    return bars(out, "convert.png", f"A 128-expert MoE layer into engine layouts, mxfp8.convert ({gpu})", cases,
                ["mxfp8", "copy", "torch"])


def reshard(r, out, gpu):
    s = r.get("reshard")
    if not s:
        return None
    one, model = 2 * s["shard_mb"] * 1e6, 2 * s["model_shard_gb"] * 1e9
    cases = [(f"one TP-{s['tp']} shard\n(57344, 8192), {s['shard_mb']:.0f} MB",
              {"mxfp8": gbps(one, s["shard_ms"]), "copy": gbps(one, s["shard_copy_ms"]), "torch": gbps(one, s.get("crop_ms"))}),
             (f"the {s['layers']}-layer model's shard\n{s['model_shard_gb']:.1f} GB",
              {"mxfp8": gbps(model, s["model_ms"]), "copy": gbps(model, s["model_copy_ms"]),
               "torch": gbps(model, s.get("model_crop_ms"))})]
    return bars(out, "reshard.png", f"Resharding from swizzled storage (torch: export whole, crop) ({gpu})", cases,
                ["mxfp8", "copy", "torch"])


def weight_sync(r, out, gpu):
    w = r.get("weight_sync_e2e")
    if not w:
        return None
    b = 2 * w["gb"] * 1e9
    cases = [(f"direct import\n{w['gb']:.1f} GB, {w['tensors']} tensors",
              {"mxfp8": gbps(b, w["direct_ms"]), "copy": gbps(b, w["copy_ms"]), "torch": gbps(b, w.get("by_hand_ms"))}),
             ("bucket fill", {"mxfp8": gbps(b, w["bucket_fill_ms"]), "copy": gbps(b, w["copy_ms"]),
                              "torch": gbps(b, w.get("by_hand_fill_ms"))})]
    return bars(out, "weight_sync.png", f"Weight sync, trainer to engine over CUDA IPC (torch: by hand) ({gpu})", cases,
                ["mxfp8", "copy", "torch"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", default=os.path.join(HERE, "results", "latest-h200.json"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "img"))
    args = p.parse_args()
    r = json.load(open(args.results))
    gpu = r.get("gpu", "GPU").replace("NVIDIA ", "")
    os.makedirs(args.out, exist_ok=True)
    for draw in (unswizzle, quantize, convert, reshard, weight_sync):
        path = draw(r, args.out, gpu)
        print(f"{draw.__name__}: {os.path.relpath(path, ROOT) if path else 'no data in ' + args.results}")


if __name__ == "__main__":
    main()
