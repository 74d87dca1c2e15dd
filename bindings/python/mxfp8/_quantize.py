"""Quantizing BF16/FP16/FP32 to MXFP8 (bit-exact with Transformer Engine) and decoding it back."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

from . import _mxfp8
from ._api import Components

_ROUNDINGS = {"rceil": 0, "floor": 1, "compressed_tensors": 2}  # jax.py's (the extension has its own tables)
_SCALE_LAYOUTS = {"compact": 0, "padded": 1, "swizzled": 2}
_OUTPUT_DTYPES = ("float32", "bfloat16")


class Quantized(NamedTuple):
    """What quantize returns: each direction's FP8 values and E8M0 scales (None when not asked for).

    The field names are Transformer Engine's MXFP8 storage fields, so the parts can be stored, sent, or
    handed to export_components(data, scale_inv, swizzled=...) and dequantize as they are: every form but
    one is a storage form TE keeps. That one is block="32x32" with scales="compact": one scale per 32x32
    block, (ceil(M/32), ceil(K/32)), what an engine's 2-D block GEMM reads and what
    export_components(..., block="32x32") gives. It is not read back; quantize with scales="padded" or
    "swizzled" to keep parts that are.
    """

    rowwise_data: Any
    rowwise_scale_inv: Any
    columnwise_data: Any
    columnwise_scale_inv: Any


_mxfp8.set_result_types(Components, Quantized)  # what the extension's export_components and quantize return
_quantize, _dequantize = _mxfp8.quantize, _mxfp8.dequantize  # one global lookup a call


def quantize(
    x: Any,
    *,
    fp8_dtype: str = "e4m3",
    block: str = "1x32",
    rounding: str = "rceil",
    scales: str = "compact",
    rowwise: bool = True,
    columnwise: bool = False,
    values_dtype: str = "fp8",
    scales_dtype: str = "uint8",
    stream: Any = None,
) -> Quantized:
    """Quantize a bfloat16/float16/float32 tensor (row-major contiguous, shape (*lead, K)) to MXFP8.

    The numerics are Transformer Engine's by default, bit for bit (see mxfp8_scale_rounding in mxfp8.h): one E8M0
    scale per 32 values along K (rowwise) or along the rows (columnwise), or per 32x32 block; elements are
    multiplied by the scale's reciprocal and rounded to nearest-even, saturating; NaN stays NaN.

    Args:
        x: any DLPack producer (torch, JAX, CuPy, NumPy with ml_dtypes for bfloat16), host or CUDA.
        fp8_dtype: "e4m3" or "e5m2".
        block: "1x32" or "32x32" (TE's 2-D weight quantization: both directions then share each block's
            scale).
        rounding: "rceil" (TE and NVIDIA hardware; the default), "floor" (OCP MX v1.0) or
            "compressed_tensors" (compressed-tensors' MX rule, bit for bit: llm-compressor's MXFP8
            checkpoints; a block with a NaN gets scale 255). The engines' online quantizers (vLLM,
            SGLang, ModelOpt, FlashInfer) round as "rceil" does.
        scales: "compact" ((*lead, ceil(K/32)) rowwise, (ceil(M/32), K) columnwise, (ceil(M/32),
            ceil(K/32)) for 32x32), "padded" (TE's allocation, padding zeroed) or "swizzled" (the same in
            the cuBLAS 128x4 layout, as TE's optimize_for_gemm stores it).
        rowwise, columnwise: which directions to produce (bools; at least one).
        values_dtype: "fp8" or "uint8"; scales_dtype: "uint8" or "e8m0".
        stream: CUDA stream (torch/CuPy stream or int); default: torch's current stream for torch
            tensors, else the legacy default stream.

    Returns:
        Quantized(rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv): torch tensors
        for a torch input (allocated by PyTorch), else mxfp8.Array objects.
    """
    return _quantize(x, fp8_dtype, block, rounding, scales, rowwise, columnwise, values_dtype, scales_dtype, stream)


def dequantize(
    data: Any,
    scale_inv: Any,
    *,
    shape: Optional[Sequence[int]] = None,
    fp8_dtype: str = "e4m3",
    swizzled: bool,
    direction: str = "rowwise",
    block: str = "1x32",
    dtype: str = "float32",
    out: Any = None,
    stream: Any = None,
) -> Any:
    """Decode one direction of an MXFP8 tensor: fp8_value * 2^(scale - 127), in float32 or bfloat16.

    data, scale_inv and the required `swizzled` are taken as export_components takes them (compact,
    TE-padded or swizzled scales).
    block="32x32" only changes which scale layouts are accepted: the decode uses the stored 1x32 scales
    (TE's storage of 2-D blocks, each block's scale in each of its rows; not the one-per-block compact form
    quantize(block="32x32", scales="compact") gives).

    Args:
        dtype: "float32" or "bfloat16" (rounded to nearest-even), when `out` is None.
        out: where to write (float32 or bfloat16, contiguous, prod(shape) elements, on data's device).
            None: a new torch tensor for torch inputs, a NumPy array for host inputs (bfloat16 needs
            ml_dtypes), a CuPy array for other CUDA inputs (float32 only).

    Returns:
        out, or the new array.

    Raises:
        ValueError: as export_components, and `out` on another device than data (checked before any
        DLPack call) or flagged read-only (a NumPy array with flags.writeable False).
    """
    return _dequantize(data, scale_inv, shape, fp8_dtype, swizzled, direction, block, dtype, out, stream)


def _empty(torch, cuda: bool, like: Any, shape: tuple, dtype: str) -> Any:
    """A new `dtype` array (a torch / NumPy name) of `shape` next to `like`: torch's for a torch input,
    NumPy's on the host (bfloat16 through ml_dtypes), CuPy's for other CUDA inputs."""
    if torch is not None:
        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    if not cuda:
        import numpy

        if dtype != "bfloat16":
            return numpy.empty(shape, dtype=getattr(numpy, dtype))
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError("dtype='bfloat16' on the host needs ml_dtypes (pip install ml_dtypes), or pass out=") from None
        return numpy.empty(shape, dtype=ml_dtypes.bfloat16)
    try:
        import cupy
    except ImportError:
        raise TypeError("the outputs of CUDA inputs that are not torch tensors need CuPy: install it, or pass out= "
                        "where the call takes one") from None
    if dtype == "bfloat16":
        raise ValueError("CuPy has no bfloat16: use dtype='float32' or pass out=")
    return cupy.empty(shape, dtype=getattr(cupy, dtype))
