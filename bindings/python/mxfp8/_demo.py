"""The main job on a built-in synthetic weight set (GPU when PyTorch sees one, else CPU):

1. quantize each BF16 weight into Transformer Engine's layout (rowwise + columnwise, padded,
   GEMM-swizzled scales), as a trainer holds it;
2. export the rowwise components the way an inference engine loads them (values: a zero-copy view;
   scales: compact (*shape[:-1], ceil(K/32)), unswizzled by the library);
3. check them bit for bit against a direct compact quantize, and decode them twice: with
   mxfp8.dequantize and with a decoder written here from the bit formats. The two must agree exactly.

--format nvfp4 does the same for NVFP4 (rowwise, packed E2M1 values, E4M3 scales per 16 values,
swizzled, per-tensor amax; the export adds weight_scale_2 = amax / 2688), and also checks every decoded
element against the input within the format's error bound (within_nvfp4_bound).
"""
from __future__ import annotations

import argparse  # only the Namespace run() reads
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
    ours = backend.numpy(mxfp8.dequantize(exported.values, exported.scales, swizzled=False))
    theirs = decode(values, scales)
    decoded_same = np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))
    x = np.asarray(backend.numpy(w.float()) if backend.torch else w.astype(np.float32))
    error = np.sqrt(np.mean((ours - x) ** 2) / np.mean(x ** 2))
    view = (exported.values.data_ptr() == te.rowwise_data.data_ptr()) if backend.torch else \
        not exported.values.is_copy
    copied = scales.nbytes
    return dict(name=name, shape=tuple(shape), view=view, copied=copied, quantize_ms=(t1 - t0) * 1e3,
                export_ms=(t2 - t1) * 1e3, ok=same and decoded_same and view, error=error)


# ---- NVFP4 (--format nvfp4) ---------------------------------------------------------------------------
# The same job for NVFP4: mxfp8.nvfp4_quantize writes each weight as Transformer Engine's NVFP4 quantizer
# does (bit-exact: packed E2M1 values, the even element in the low nibble; one E4M3 scale per 16 values,
# padded and 128x4-swizzled; the per-tensor amax), the export hands back the values (a view), compact
# scales and vLLM ModelOpt's weight_scale_2 = amax / (6 * 448), and the decode is checked twice: against a
# decoder written here from the format, and against the input with the format's error bound.

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


def unpack_nvfp4(packed: np.ndarray) -> np.ndarray:
    """(M, K/2) bytes -> (M, K) E2M1 codes 0..15: element 2i is the low nibble of byte i."""
    codes = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    codes[:, 0::2], codes[:, 1::2] = packed & 0xF, packed >> 4
    return codes


def nvfp4_decode(codes: np.ndarray, scale_bytes: np.ndarray, amax: np.float32) -> np.ndarray:
    """TE's decode, in its float32 order: e2m1 * ((e4m3 * amax) * float32(1 / 2688))."""
    value = np.concatenate([E2M1, -E2M1])[codes]
    block = np.repeat(fp8_e4m3_table()[scale_bytes], 16, axis=1)[:, : codes.shape[1]]
    with np.errstate(invalid="ignore", over="ignore"):
        return value * ((block * amax) * (np.float32(1.0) / np.float32(2688.0)))


def within_nvfp4_bound(x: np.ndarray, decoded: np.ndarray, scale_bytes: np.ndarray, amax: np.float32) -> bool:
    """|x - decoded| <= max(d, amax * 2^-10 / 448) for every element, d = e4m3(scale) * amax / 2688 its
    block's decode factor. Why: a block's scale is s = (block amax / 6) * (2688 / amax), rounded to nearest
    in E4M3 (s_q), and its elements are coded as the E2M1 value nearest c = x / d, saturating at 6.
    Rounding within the grid costs at most 1 (the half-gap between 4 and 6), in units of d. If s_q < s, the
    block's largest |c| is 6 s / s_q and saturating it costs 6 (s - s_q) / s_q units: at most 6 / 16 < 1
    when s_q is a normal E4M3 (3 mantissa bits), and for subnormal scales (s_q - s at most half of the
    2^-9 step) at most 6 * 2^-10 * amax / 2688 = amax * 2^-10 / 448 absolute; a scale that rounds to zero
    has s < 2^-10, so its block's whole magnitude is below that too."""
    d = np.repeat(fp8_e4m3_table()[scale_bytes].astype(np.float64) * float(amax) / 2688.0, 16, axis=1)
    bound = np.maximum(d[:, : x.shape[1]], float(amax) * 2.0 ** -10 / 448.0) * (1 + 2.0 ** -10)
    return bool(np.all(np.abs(x.astype(np.float64) - decoded) <= bound))


def run_one_nvfp4(backend: Backend, name: str, shape) -> dict:
    w = backend.weight(shape)
    backend.sync()
    t0 = time.perf_counter()
    te = mxfp8.nvfp4_quantize(w, scales="swizzled")  # TE's storage: values, swizzled scales, amax
    backend.sync()
    t1 = time.perf_counter()
    parts = mxfp8.nvfp4.export_components(te.values, te.scales, te.amax, swizzled=True)
    backend.sync()
    t2 = time.perf_counter()
    direct = mxfp8.nvfp4_quantize(w, amax=te.amax)  # compact scales, the same amax
    values, scales = backend.numpy(parts.values), backend.numpy(parts.scales)
    k = shape[-1]
    values, scales = values.reshape(-1, k // 2), scales.reshape(-1, -(-k // 16))
    amax = backend.numpy(te.amax).reshape(-1)[0]
    same = np.array_equal(values, backend.numpy(direct.values).reshape(values.shape)) and \
        np.array_equal(scales, backend.numpy(direct.scales).reshape(scales.shape)) and \
        backend.numpy(parts.global_scale).reshape(-1)[0] == amax / np.float32(2688.0)
    # what a consumer decodes: the exported values and compact scales, with the stored amax
    ours = backend.numpy(mxfp8.nvfp4.dequantize(parts.values, parts.scales, te.amax, swizzled=False)).reshape(values.shape[0], k)
    decoded_same = np.array_equal(ours.view(np.uint32), nvfp4_decode(unpack_nvfp4(values), scales, amax).view(np.uint32))
    x = np.asarray(backend.numpy(w.float()) if backend.torch else w.astype(np.float32)).reshape(-1, k)
    bounded = within_nvfp4_bound(x, ours, scales, amax)
    error = np.sqrt(np.mean((ours - x) ** 2) / np.mean(x ** 2))
    view = (parts.values.data_ptr() == te.values.data_ptr()) if backend.torch else \
        (not parts.values.is_copy and parts.values.data_ptr == te.values.ctypes.data)
    return dict(name=name, shape=tuple(shape), view=view, copied=scales.nbytes, quantize_ms=(t1 - t0) * 1e3,
                export_ms=(t2 - t1) * 1e3, ok=same and decoded_same and view and bounded, error=error)


def run(device: str = "auto", size: str = "auto", fmt: str = "mxfp8") -> int:
    """The demo (python -m mxfp8 demo; its options are described by python -m mxfp8 demo --help)."""
    args = argparse.Namespace(device=device, size=size, format=fmt)
    backend = Backend(args.device)
    nvfp4 = args.format == "nvfp4"
    big = args.size == "large" or (args.size == "auto" and backend.torch is not None and not nvfp4)
    weights = weight_set(big)
    one = run_one_nvfp4 if nvfp4 else run_one
    if nvfp4:
        print(f"mxfp8 {mxfp8.__version__} demo on {backend.name}: {len(weights)} BF16 weights -> NVFP4 in "
              "Transformer Engine's layout (E2M1 values, swizzled E4M3 scales per 16, amax) -> values + compact "
              "scales + weight_scale_2 -> decoded and checked bit for bit")
    else:
        print(f"mxfp8 {mxfp8.__version__} demo on {backend.name}: {len(weights)} BF16 weights -> MXFP8 E4M3 in "
              "Transformer Engine's layout -> compact components -> decoded and checked bit for bit")
    if backend.torch:
        one(backend, *weights[-1])  # warm up (CUDA context, allocator)
    header = (f"{'tensor':30} {'shape':>16} {'values':>6} {'scales copied':>13} {'quantize':>10} {'export':>9} "
              f"{'rel. error':>10}  check")
    print(header + "\n" + "-" * len(header), flush=True)
    progress = sys.stderr.isatty()
    rows, start = [], time.perf_counter()
    for i, (name, shape) in enumerate(weights):
        if progress:
            print(f"[{i + 1}/{len(weights)}] quantizing {name} {shape} ...", end="\r", file=sys.stderr, flush=True)
        r = one(backend, name, shape)
        rows.append(r)
        if progress:
            print(" " * 79, end="\r", file=sys.stderr)
        print(f"{r['name']:30} {str(r['shape']):>16} {'view' if r['view'] else 'COPY':>6} {r['copied'] / 1024:9.1f} KiB "
              f"{r['quantize_ms']:7.2f} ms {r['export_ms']:6.2f} ms {r['error']:10.2e}  "
              f"{'bit-exact' if r['ok'] else 'MISMATCH'}", flush=True)
    bad = [r["name"] for r in rows if not r["ok"]]
    total = sum(int(np.prod(r["shape"])) for r in rows)
    print(f"{len(rows)} weights, {total / 1e6:.1f} M values, {time.perf_counter() - start:.1f} s: "
          + (("all bit-exact (export == direct compact quantize, weight_scale_2 == amax / 2688; "
              "mxfp8.nvfp4.dequantize == the decoder written here; |decoded - input| <= max(block decode "
              "scale, amax / 2^10 / 448) for every element)" if nvfp4 else
              "all bit-exact (export == direct compact quantize; mxfp8.dequantize == the decoder written here)")
             if not bad else f"MISMATCH in {', '.join(bad)}"))
    return 1 if bad else 0


def main(argv=None) -> int:
    """python -m mxfp8 demo ARGS (kept for callers of the former entry point)."""
    from ._cli import main as cli_main

    return cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])
