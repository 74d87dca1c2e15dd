"""Quantizing BF16/FP16/FP32 to NVFP4, bit-exact with Transformer Engine (mxfp8_nvfp4_quantize_into)."""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence

from . import _args, _mxfp8
from ._api import _choice, _inputs
from ._quantize import _empty

_SCALE_LAYOUTS = {"compact": 0, "padded": 1, "swizzled": 2}
_FOUR_OVER_SIX = {"off": 0, "mae": 1, "mse": 2}
_AMAX_COMPUTE, _AMAX_GIVEN = 0, 1
_AMAX_PER_TENSOR, _AMAX_PER_ROW = 0, 1


class NVFP4Quantized(NamedTuple):
    """What nvfp4_quantize returns.

    values: uint8 (*lead, K/2), two E2M1 codes per byte, the even element in the low nibble
        (columnwise: the transpose, (K, M/2), as Transformer Engine stores columnwise data).
    scales: uint8 E4M3 block scales, one per 16 values: (*lead, ceil(K/16)) compact, or TE's padded
        (roundup(M,128), roundup(ceil(K/16),4)) buffer, plain or swizzled (columnwise: M and K swapped).
    amax: float32 (1,) per tensor or (M,) per row (rowwise only): decode is
        fp4 * scale * amax / (6 * e4m3_max).
    """

    values: Any
    scales: Any
    amax: Any


def _shapes(shape: tuple, layout: str, columnwise: bool):
    """(values shape, scales shape, lines) of a (*lead, K) input."""
    lead, k = shape[:-1], shape[-1]
    m = _args.numel(lead)
    if columnwise:  # the transpose (K, M), blocked along M
        lead, k, m = (k,), m, k
    c = _args.ceil_div(k, 16)
    scales = tuple(lead) + (c,) if layout == "compact" else (_args.round_up(m, 128), _args.round_up(c, 4))
    return tuple(lead) + (_args.ceil_div(k, 2),), scales, m


def _options(four_over_six: Optional[str], e4m3_max: int, scales: str) -> dict:
    mode = _choice("four_over_six", "off" if four_over_six is None else four_over_six, _FOUR_OVER_SIX)
    e4m3_max = _args.e4m3_max("e4m3_max", e4m3_max)
    return dict(four_over_six=mode, e4m3_max=e4m3_max, layout=_choice("scales", scales, _SCALE_LAYOUTS))


def nvfp4_quantize(
    x: Any,
    *,
    amax: Any = None,
    per_row: bool = False,
    four_over_six: Optional[str] = None,
    e4m3_max: int = 448,
    scales: str = "compact",
    columnwise: bool = False,
    stream: Any = None,
) -> NVFP4Quantized:
    """Quantize a bfloat16/float16/float32 tensor (row-major contiguous, shape (*lead, K)) to NVFP4.

    K must be even (M = prod(lead) for columnwise), as TE stores NVFP4: two values per byte.

    Transformer Engine's NVFP4 quantizer bit for bit (rowwise 1x16 blocks, round to nearest even; TE's
    stochastic rounding and Hadamard transform are not offered): see "NVFP4: quantizing" in mxfp8.h.

    Args:
        x: a torch tensor (host or CUDA), a NumPy array (bfloat16 through ml_dtypes), or another DLPack
            producer (CUDA outputs then come from CuPy).
        amax: None computes it (returned); else a float32 buffer of 1 (per tensor) or M (per row)
            elements, on x's device, used as given (e.g. a global scale shared with other shards).
        per_row: one amax per row (TE's row_scaled_nvfp4); rowwise only (TE keeps one columnwise amax).
        four_over_six: None, "mae" or "mse" (TE's nvfp4_use_4over6 with its error mode).
        e4m3_max: 448, or 256 (TE's nvfp4_e4m3_max; only with four_over_six).
        scales: "compact", "padded" (TE's allocation, padding zeroed) or "swizzled" (cuBLAS 128x4).
        columnwise: quantize the transpose (TE's columnwise data), blocked along M.
        stream: CUDA stream (torch/CuPy stream or int); default: torch's current stream for torch tensors.

    Returns:
        NVFP4Quantized(values, scales, amax), arrays of x's framework (amax the one given, if any).
    """
    options = _options(four_over_six, e4m3_max, scales)
    per_row = _args.flag("per_row", per_row)
    columnwise = _args.flag("columnwise", columnwise)
    inputs = _inputs(stream, x=x) if amax is None else _inputs(stream, x=x, amax=amax)
    shape = _args.dims("x", x)
    if len(shape) < 1:
        raise ValueError("x is 0-dimensional: quantizing needs a last dimension K to block")
    values_shape, scales_shape, lines = _shapes(shape, scales, columnwise)
    values = _empty(inputs.torch, inputs.cuda, x, values_shape, "uint8")
    scale_buffer = _empty(inputs.torch, inputs.cuda, x, scales_shape, "uint8")
    mode = _AMAX_GIVEN if amax is not None else _AMAX_COMPUTE
    if amax is None:
        amax = _empty(inputs.torch, inputs.cuda, x, (lines if per_row else 1,), "float32")
    _mxfp8.nvfp4_quantize([x], [values], [scale_buffer], amax, fused=False,
                          amax_scope=_AMAX_PER_ROW if per_row else _AMAX_PER_TENSOR, amax_mode=mode,
                          direction=int(columnwise), stream=inputs.stream, dlpack_stream=inputs.dlpack_stream,
                          **options)
    return NVFP4Quantized(values, scale_buffer, amax)


def nvfp4_quantize_fused(
    shards: Sequence[Any],
    *,
    amax: Any = None,
    four_over_six: Optional[str] = None,
    e4m3_max: int = 448,
    scales: str = "compact",
    columnwise: bool = False,
    stream: Any = None,
) -> List[NVFP4Quantized]:
    """Quantize fused shards (Q/K/V, gate/up: same dtype, same K, one device) under ONE per-tensor amax.

    The shared amax is the largest shard amax (what vLLM's ModelOpt loader keeps as weight_scale_2 when
    shards differ), or `amax` (a float32 buffer of one element) when given; every shard's block scales
    are derived against it. Each result is what nvfp4_quantize(shard, amax=shared) returns; all share
    the one amax array.
    """
    shards = list(shards)
    if not shards:
        raise ValueError("shards is empty: pass at least one tensor")
    options = _options(four_over_six, e4m3_max, scales)
    columnwise = _args.flag("columnwise", columnwise)
    named = {f"shards[{i}]": s for i, s in enumerate(shards)}
    if amax is not None:
        named["amax"] = amax
    inputs = _inputs(stream, **named)
    values, scale_buffers = [], []
    for i, s in enumerate(shards):
        shape = _args.dims(f"shards[{i}]", s)
        if len(shape) < 1:
            raise ValueError(f"shards[{i}] is 0-dimensional: quantizing needs a last dimension K to block")
        values_shape, scales_shape, _ = _shapes(shape, scales, columnwise)
        # next to the first shard, which decided the framework (a later one may be any producer)
        values.append(_empty(inputs.torch, inputs.cuda, shards[0], values_shape, "uint8"))
        scale_buffers.append(_empty(inputs.torch, inputs.cuda, shards[0], scales_shape, "uint8"))
    mode = _AMAX_GIVEN if amax is not None else _AMAX_COMPUTE
    if amax is None:
        amax = _empty(inputs.torch, inputs.cuda, shards[0], (1,), "float32")
    _mxfp8.nvfp4_quantize(shards, values, scale_buffers, amax, fused=True, amax_scope=_AMAX_PER_TENSOR, amax_mode=mode,
                          direction=int(columnwise), stream=inputs.stream, dlpack_stream=inputs.dlpack_stream,
                          **options)
    return [NVFP4Quantized(v, s, amax) for v, s in zip(values, scale_buffers)]
