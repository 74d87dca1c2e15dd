"""mxfp8.checkpoint.save against a plain safetensors save_file of the same bytes (the disk's and
safetensors' own speed), same run: is the save bound by the disk or by us?

    python3 bench/checkpoint_save.py [--layers 8] [--hidden 4096] [--device cpu|cuda] [--out OUT.json]

A Llama-like stack of MXFP8 (compressed-tensors) or NVFP4 (ModelOpt) Linears in Transformer Engine's
storage (swizzled scales) is saved three times each way into a fresh folder under --dir; the figure is
the median MB/s of the bytes written. Each save's files are checked equal to the first's. The disk of a
shared machine is noisy, so it also reports what the save costs without the writing: the same save with
safetensors' file writer stubbed out (the export, the host copies, the configs).
"""
import argparse
import datetime
import json
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

import mxfp8
import mxfp8.checkpoint as ckpt


def storage(layers, hidden, fmt, device):
    g = torch.Generator().manual_seed(0)
    out = {}
    for i in range(layers):
        for leaf, shape in (("self_attn.o_proj", (hidden, hidden)), ("mlp.down_proj", (hidden, 3 * hidden))):
            w = (torch.randn(shape, generator=g) * 0.02).to(device)
            name = f"model.layers.{i}.{leaf}.weight"
            if fmt == "mxfp8":
                q = mxfp8.quantize(w, scales="swizzled")
                out[name] = {"data": q.rowwise_data, "scale_inv": q.rowwise_scale_inv, "swizzled": True}
            else:
                q = mxfp8.nvfp4_quantize(w, scales="swizzled")
                out[name] = {"format": "nvfp4", "data": q.values, "scale_inv": q.scales, "amax": q.amax,
                             "swizzled": True, "shape": shape}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--out")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(dir=args.dir))
    result = {"date": datetime.date.today().isoformat(), "machine": platform.node(), "device": args.device,
              "layers": args.layers, "hidden": args.hidden}
    try:
        for fmt, name in (("mxfp8", "compressed-tensors"), ("nvfp4", "modelopt")):
            st = storage(args.layers, args.hidden, fmt, args.device)
            ours, plain, size = [], [], 0
            for rep in range(args.reps):
                start = time.perf_counter()
                folder = ckpt.save(root / f"{fmt}-{rep}", st, format=name)
                ours.append(time.perf_counter() - start)
                size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
                tensors = {}
                for k, v in ckpt.load(folder).tensors.items():
                    for i, part in enumerate(v):
                        tensors[f"{k}.{i}"] = part.contiguous()
                start = time.perf_counter()
                save_file(tensors, str(root / f"plain-{fmt}-{rep}.safetensors"))
                plain.append(time.perf_counter() - start)
                if rep:
                    assert (folder / "model.safetensors").read_bytes() == (root / f"{fmt}-0" / "model.safetensors").read_bytes()
                shutil.rmtree(folder) if rep else None
            import safetensors.torch as writer

            real, writer.save_file = writer.save_file, lambda tensors, filename, metadata=None: open(filename, "wb").close()
            try:
                start = time.perf_counter()
                ckpt.save(root / f"{fmt}-nowrite", st, format=name)
                no_write = time.perf_counter() - start
            finally:
                writer.save_file = real
            result[fmt] = {"bytes": size, "without_writing_ms": round(no_write * 1e3, 1),
                           "ours_ms": round(statistics.median(ours) * 1e3, 1), "ours_mb_s": round(size / statistics.median(ours) / 1e6),
                           "plain_save_file_mb_s": round(size / statistics.median(plain) / 1e6),
                           "ours_over_plain": round(statistics.median(plain) / statistics.median(ours), 3)}
            print(f"{fmt} ({name}): {size / 1e6:.0f} MB, ours {result[fmt]['ours_mb_s']} MB/s, plain save_file "
                  f"{result[fmt]['plain_save_file_mb_s']} MB/s ({result[fmt]['ours_over_plain']:.2f} of its speed); "
                  f"without the writing {result[fmt]['without_writing_ms']} ms of {result[fmt]['ours_ms']} ms",
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"checkpoint_save": result}, indent=1) + "\n")


if __name__ == "__main__":
    main()
