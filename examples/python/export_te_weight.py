"""The seed's use case end to end: an MXFP8 weight stored the way Transformer Engine stores it (values
plus E8M0 scales padded to 128 x 4 tiles and swizzled for cuBLAS), exported to FP8 values plus compact
scales, handed to torch through DLPack, decoded, and compared with the weight it was made from.

Runs on the GPU when torch sees one, else on the CPU (torch when installed, else NumPy + ml_dtypes).
    python examples/python/export_te_weight.py
"""
import numpy as np

import mxfp8

ROWS, K = 300, 200  # K % 32 = 8: the last block of each row holds 8 values and keeps its own scale
C = -(-K // 32)


def quantize_reference(w):
    """A plain MXFP8 quantization (E4M3, power-of-two scale per 32 values) to have a weight to export."""
    import ml_dtypes

    blocks = np.zeros((ROWS, C * 32), np.float32)
    blocks[:, :K] = w
    amax = np.abs(blocks.reshape(ROWS, C, 32)).max(axis=2)
    exponent = np.ceil(np.log2(np.maximum(amax, 1e-30) / 448.0)).astype(np.int32)
    scales = np.clip(exponent + 127, 1, 254).astype(np.uint8)
    scaled = blocks.reshape(ROWS, C, 32) / np.ldexp(1.0, scales.astype(np.int32) - 127)[..., None]
    values = scaled.reshape(ROWS, C * 32)[:, :K].astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    return values, scales


def te_layout(scales):
    """TE's optimize_for_gemm buffer: padded to (roundup(ROWS,128), roundup(C,4)), 128x4 tiles."""
    rp, cp = -(-ROWS // 128) * 128, -(-C // 4) * 4
    padded = np.zeros((rp, cp), np.uint8)
    padded[:ROWS, :C] = scales
    return padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4).reshape(rp, cp).copy()


def main():
    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((ROWS, K)) * np.exp(rng.uniform(-4, 4, (ROWS, 1)))).astype(np.float32)
    values, scales = quantize_reference(weight)
    swizzled = te_layout(scales)

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() and mxfp8._mxfp8.with_cuda else "cpu"
        data, scale_inv = torch.from_numpy(values).to(device), torch.from_numpy(swizzled).to(device)
        out_values, out_scales = mxfp8.export_components(data, scale_inv, swizzled=True)
        print(f"torch on {device}: values {tuple(out_values.shape)} {out_values.dtype} "
              f"(same memory: {out_values.data_ptr() == data.data_ptr()}), scales {tuple(out_scales.shape)} {out_scales.dtype}")
        decoded = out_values.float().reshape(ROWS, K) * torch.repeat_interleave(
            torch.exp2(out_scales.float() - 127), 32, dim=1)[:, :K]
        decoded = decoded.cpu().numpy()
        got_scales = out_scales.cpu().numpy()
    else:
        import ml_dtypes

        out_values, out_scales = mxfp8.export_components(values, swizzled, swizzled=True, values_dtype="uint8")
        v, got_scales = np.from_dlpack(out_values), np.from_dlpack(out_scales)
        print(f"NumPy: values {v.shape} (same memory: {np.shares_memory(v, values)}), scales {got_scales.shape}")
        decoded = v.view(ml_dtypes.float8_e4m3fn).astype(np.float32) * np.repeat(
            np.ldexp(np.float32(1), got_scales.astype(np.int32) - 127), 32, axis=1)[:, :K]

    expected = values.view(__import__("ml_dtypes").float8_e4m3fn).astype(np.float32) * np.repeat(
        np.ldexp(np.float32(1), scales.astype(np.int32) - 127), 32, axis=1)[:, :K]
    exact = np.array_equal(got_scales, scales) and np.array_equal(decoded, expected)
    error = np.linalg.norm(decoded - weight) / np.linalg.norm(weight)
    print(f"scales identical to the quantizer's: {np.array_equal(got_scales, scales)}; "
          f"decode bit-exact: {exact}; relative error vs the float32 weight: {error:.4f}")
    if not exact:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
