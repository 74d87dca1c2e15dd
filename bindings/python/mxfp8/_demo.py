"""The main job on a built-in synthetic weight set (GPU when PyTorch sees one, else CPU):

1. quantize each BF16 weight into Transformer Engine's layout (rowwise + columnwise, padded,
   GEMM-swizzled scales), as a trainer holds it;
2. export the rowwise components the way an inference engine loads them (values: a zero-copy view;
   scales: compact (*shape[:-1], ceil(K/32)), unswizzled by the library);
3. check them bit for bit against a direct compact quantize, and decode them twice: with
   mxfp8.dequantize and with a decoder written here from the bit formats. The two must agree exactly.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import mxfp8


def fp8_e4m3_table() -> np.ndarray:
    """The float32 value of every E4M3 byte, from the format's definition."""
    table = np.empty(256, np.float32)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exponent, mantissa = (byte >> 3) & 0xF, byte & 0x7
        if exponent == 0xF and mantissa == 7:
            table[byte] = np.nan
        elif exponent == 0:
            table[byte] = sign * mantissa * 2.0 ** -9
        else:
            table[byte] = sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return table


def decode(values_u8: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """values * 2^(scale - 127), rowwise blocks of 32, in float32."""
    k = values_u8.shape[-1]
    v = fp8_e4m3_table()[values_u8.reshape(-1, k)]
    s = np.ldexp(np.float32(1.0), scales.reshape(v.shape[0], -1).astype(np.int32) - 127).astype(np.float32)
    s[scales.reshape(v.shape[0], -1) == 255] = np.nan
    with np.errstate(invalid="ignore", over="ignore"):
        return (v * np.repeat(s, 32, axis=1)[:, :k]).reshape(values_u8.shape)


def weight_set(big: bool) -> list[tuple[str, tuple[int, ...]]]:
    """A transformer's weights: attention, MLP (K = 2816 and 1000 give partial scale tiles and blocks), an
    embedding, and stacked MoE experts."""
    h, f, layers = (4096, 14336, 2) if big else (1024, 2816, 2)
    shapes = [("embed_tokens", (32000 if big else 8000, h))]
    for i in range(layers):
        p = f"layers.{i}."
        shapes += [(p + "self_attn.qkv_proj", (h + 2 * (h // 4), h)), (p + "self_attn.o_proj", (h, h)),
                   (p + "mlp.gate_up_proj", (2 * f, h)), (p + "mlp.down_proj", (h, f))]
    shapes += [("layers.1.moe.experts.w13", (8, 2 * (f // 4), h)), ("lm_head.partial_blocks", (1000, 1000))]
    return shapes


class Backend:
    """Makes weights and reads results on one device: torch on CUDA, or NumPy on the host."""

    def __init__(self, device: str):
        self.torch = None
        if device in ("auto", "cuda"):
            try:
                import torch

                if torch.cuda.is_available() and mxfp8._mxfp8.with_cuda:
                    self.torch = torch
            except ImportError:
                pass
            if device == "cuda" and self.torch is None:
                raise SystemExit("--device cuda needs PyTorch with a CUDA device and a CUDA build of mxfp8")
        self.name = f"GPU ({self.torch.cuda.get_device_name()})" if self.torch else "CPU"
        self.rng = np.random.default_rng(2026)

    def weight(self, shape):
        """Normal values with per-row magnitudes spanning 2^-12..2^12, a few outliers, as BF16 (float32 on
        a host without ml_dtypes)."""
        rows = int(np.prod(shape[:-1]))
        if self.torch:
            t = self.torch
            g = t.Generator(device="cuda").manual_seed(len(shape) * 1000 + rows)
            w = t.randn(shape, device="cuda", generator=g) * t.exp2(t.randint(-12, 13, (*shape[:-1], 1), device="cuda",
                                                                              generator=g).float())
            return w.to(t.bfloat16)
        w = self.rng.standard_normal(shape, dtype=np.float32)
        w *= np.exp2(self.rng.integers(-12, 13, (*shape[:-1], 1))).astype(np.float32)
        try:
            import ml_dtypes

            return w.astype(ml_dtypes.bfloat16)
        except ImportError:
            return w

    def sync(self):
        if self.torch:
            self.torch.cuda.synchronize()

    def numpy(self, a):
        """A result as a host NumPy array (FP8 values as their uint8 bytes)."""
        if self.torch:
            return a.view(self.torch.uint8).cpu().numpy() if a.dtype != self.torch.float32 else a.cpu().numpy()
        return np.from_dlpack(a) if not isinstance(a, np.ndarray) else a


def run_one(backend: Backend, name: str, shape) -> dict:
    w = backend.weight(shape)
    backend.sync()
    t0 = time.perf_counter()
    te = mxfp8.quantize(w, rowwise=True, columnwise=True, scales="swizzled", values_dtype="uint8")
    backend.sync()
    t1 = time.perf_counter()
    exported = mxfp8.export_components(te.rowwise_data, te.rowwise_scale_inv, swizzled=True, values_dtype="uint8")
    backend.sync()
    t2 = time.perf_counter()
    direct = mxfp8.quantize(w, values_dtype="uint8")
    values, scales = backend.numpy(exported.values), backend.numpy(exported.scales)
    same = np.array_equal(values, backend.numpy(direct.rowwise_data)) and \
        np.array_equal(scales, backend.numpy(direct.rowwise_scale_inv))
    ours = backend.numpy(mxfp8.dequantize(exported.values, exported.scales))
    theirs = decode(values, scales)
    decoded_same = np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))
    x = np.asarray(backend.numpy(w.float()) if backend.torch else w.astype(np.float32))
    error = np.sqrt(np.mean((ours - x) ** 2) / np.mean(x ** 2))
    view = (exported.values.data_ptr() == te.rowwise_data.data_ptr()) if backend.torch else \
        not exported.values.is_copy
    copied = scales.nbytes
    return dict(name=name, shape=tuple(shape), view=view, copied=copied, quantize_ms=(t1 - t0) * 1e3,
                export_ms=(t2 - t1) * 1e3, ok=same and decoded_same and view, error=error)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mxfp8", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["demo"])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--size", choices=["auto", "small", "large"], default="auto",
                        help="the weight set: small (1024 hidden), large (4096 hidden); auto: large on a GPU")
    args = parser.parse_args(argv)
    backend = Backend(args.device)
    big = args.size == "large" or (args.size == "auto" and backend.torch is not None)
    weights = weight_set(big)
    print(f"mxfp8 {mxfp8.__version__} demo on {backend.name}: {len(weights)} BF16 weights -> MXFP8 E4M3 in "
          "Transformer Engine's layout -> compact components -> decoded and checked bit for bit")
    if backend.torch:
        run_one(backend, *weights[-1])  # warm up (CUDA context, allocator)
    header = (f"{'tensor':30} {'shape':>16} {'values':>6} {'scales copied':>13} {'quantize':>10} {'export':>9} "
              f"{'rel. error':>10}  check")
    print(header + "\n" + "-" * len(header), flush=True)
    progress = sys.stderr.isatty()
    rows, start = [], time.perf_counter()
    for i, (name, shape) in enumerate(weights):
        if progress:
            print(f"[{i + 1}/{len(weights)}] quantizing {name} {shape} ...", end="\r", file=sys.stderr, flush=True)
        r = run_one(backend, name, shape)
        rows.append(r)
        if progress:
            print(" " * 79, end="\r", file=sys.stderr)
        print(f"{r['name']:30} {str(r['shape']):>16} {'view' if r['view'] else 'COPY':>6} {r['copied'] / 1024:9.1f} KiB "
              f"{r['quantize_ms']:7.2f} ms {r['export_ms']:6.2f} ms {r['error']:10.2e}  "
              f"{'bit-exact' if r['ok'] else 'MISMATCH'}", flush=True)
    bad = [r["name"] for r in rows if not r["ok"]]
    total = sum(int(np.prod(r["shape"])) for r in rows)
    print(f"{len(rows)} weights, {total / 1e6:.1f} M values, {time.perf_counter() - start:.1f} s: "
          + ("all bit-exact (export == direct compact quantize; mxfp8.dequantize == the decoder written here)"
             if not bad else f"MISMATCH in {', '.join(bad)}"))
    return 1 if bad else 0
