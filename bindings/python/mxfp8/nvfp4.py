"""NVFP4 tensors as Transformer Engine stores them: export their parts for a consumer, and decode them.

    parts = mxfp8.nvfp4.export_components(data, scale_inv, amax, swizzled=True)
    # parts.values: uint8 [N, K/2] (a view); parts.scales: E4M3 bytes [N, ceil(K/16)];
    # parts.global_scale: amax / (6 * 448), vLLM ModelOpt's weight_scale_2

The format (the NVFP4 section of mxfp8.h says it in full): FP4 E2M1 values two per byte, the even element
in the low nibble; one E4M3 block scale per 16 values along a row, padded by TE to (roundup(rows, 128),
roundup(ceil(cols/16), 4)) and optionally in the cuBLAS 128x4 layout; a float32 amax per tensor (or per
row), decoded as e2m1 * e4m3 * amax / (6 * E4M3_MAX). Columnwise data is stored transposed, (K, M): pass it
with direction="columnwise" and the outputs are that stored matrix's.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

from . import _args, _mxfp8, _shard
from ._api import _DIRECTIONS, _as_torch, _choice, _flag, _inputs, _te_swizzled
from ._quantize import _OUTPUT_DTYPES, _empty

# mxfp8_values_dtype / mxfp8_scales_dtype, read per format: MXFP8_VALUES_FP8 (0) is NVFP4's own float4_e2m1fn,
# MXFP8_SCALES_E8M0 (1) its float8_e4m3fn scale type.
_VALUES_DTYPES = {"uint8": 1, "float4": 0}
_SCALES_DTYPES = {"uint8": 0, "e4m3": 1}
_GLOBAL_SCALES = {"decode": 0, "encode": 1}

__all__ = ["Components", "dequantize", "export_components", "export_te"]


class Components(NamedTuple):
    """The exported parts of one direction of an NVFP4 tensor.

    values: the packed E2M1 data, always a view: uint8 (*lead, K/2) rowwise or (K, M/2) columnwise
            (values_dtype="uint8"), or float4_e2m1fn with K (M) elements per row ("float4").
    scales: the E4M3 block scales, compact: (*lead, ceil(K/16)) rowwise, (K, ceil(M/16)) columnwise; a
            view when the source's bytes already lie that way, else a copy (crop or unswizzle).
    global_scale: float32, one per amax, in the asked convention: "decode" amax / (6 * E4M3_MAX) (vLLM
            ModelOpt's weight_scale_2) or "encode" (6 * E4M3_MAX) / amax as TE computes it (FlashInfer's
            global scale; 1 for amax 0 or Inf, FLT_MAX for NaN).
    """

    values: Any
    scales: Any
    global_scale: Any


def _tensor(data, scale_inv, amax, shape, swizzled, direction, e4m3_max, inputs) -> _mxfp8.Nvfp4Tensor:
    prefix = "rowwise" if _choice("direction", direction, _DIRECTIONS) == 0 else "columnwise"
    shape = None if shape is None else _args.shape("shape", shape)
    if shape == []:  # the library reads no dimensions as "the data's shape": a () given is a mistake
        raise ValueError("shape is empty: an NVFP4 tensor needs a last dimension K")
    return _mxfp8.Nvfp4Tensor(
        **{f"{prefix}_data": data, f"{prefix}_scale_inv": scale_inv, f"{prefix}_amax": amax},
        shape=shape,
        swizzled=_flag("swizzled", swizzled),
        e4m3_max=_args.e4m3_max("e4m3_max", e4m3_max),
        stream=inputs.dlpack_stream,
        exchange=inputs.exchange,
    )


def export_components(
    data: Any,
    scale_inv: Any,
    amax: Any,
    *,
    shape: Optional[Sequence[int]] = None,
    swizzled: bool,
    direction: str = "rowwise",
    e4m3_max: int = 448,
    values_dtype: str = "uint8",
    scales_dtype: str = "uint8",
    contiguous: bool = True,
    global_scale: str = "decode",
    stream: Any = None,
    rows: Any = None,
    cols: Any = None,
) -> Components:
    """Export the values, compact E4M3 block scales and second-level scale of one direction, or of a shard.

    Args:
        data: the packed values of `direction` (TE's _rowwise_data (*lead, K/2) or _columnwise_data
            (K, M/2), uint8; or float4_e2m1fn with the unpacked last dimension), contiguous.
        scale_inv: its E4M3 block scales (uint8 or float8_e4m3fn): row-major, compact or TE-padded, or in
            the cuBLAS 128x4 layout when `swizzled` (TE's with_gemm_swizzled_scales).
        amax: float32, one element, or (rowwise) one per row (TE's row_scaled_nvfp4).
        swizzled: required, no default: True for the cuBLAS 128x4 layout, False for row-major (the two
            have the same shape, so a wrong guess would decode silently; export_te reads TE's flag).
        shape: the logical shape (*lead, K); default: from data, as TE reads it back (rowwise
            (*lead, K/2) bytes; columnwise (K, d1, ..., dn/2) bytes give (d1, ..., dn, K)).
        e4m3_max: 448, or 256 for TE's 4over6 tensors (its nvfp4_e4m3_max).
        values_dtype: "uint8" (what ModelOpt checkpoints and vLLM load) or "float4" (DLPack's packed
            float4_e2m1fn; not every framework imports it: with torch inputs, a TypeError).
        scales_dtype: "uint8" or "e4m3" (float8_e4m3fn, vLLM's weight_scale dtype).
        contiguous: padded row-major scales come back as a contiguous copy (True) or a strided view.
        global_scale: "decode" or "encode" (see Components).
        stream: CUDA stream for the copies, as mxfp8.export_components takes it.
        rows, cols: export only this shard of the logical (M, K) tensor, as mxfp8.export_components takes
            them, on NVFP4's 16-value blocks: rowwise, k0 and k1 multiples of 16 (or k1 = K), rows any
            (pieces too); columnwise (the stored (K, M) transpose), rows' boundaries multiples of 16 (or M)
            and one range only, columns any. The result is the shard of the stored matrix, 2-D: values
            (a view for one row range, else a copy), its compact scales, and the global scale of a per-row
            amax for the shard's rows (a per-tensor amax's one float).

    Returns:
        Components(values, scales, global_scale): torch tensors for torch inputs, else mxfp8.Array
        objects any DLPack consumer takes.

    Raises:
        ValueError: bad input (the library's message names the argument), or no data for `direction`.
        TypeError: an unsupported device or object, or an argument of the wrong Python type.
    """
    inputs = _inputs(stream, data=data, scale_inv=scale_inv, amax=amax)
    vd = _choice("values_dtype", values_dtype, _VALUES_DTYPES)
    if inputs.torch is not None and values_dtype == "float4":
        # Torch results are torch tensors, and torch imports no DLPack float4_e2m1fn (one value an element):
        # the export ran, then torch's from_dlpack raised its RuntimeError with a C++ backtrace.
        raise TypeError("values_dtype='float4' with torch inputs: torch does not import DLPack's float4_e2m1fn; "
                        "pass values_dtype='uint8' (the same packed bytes; .view(torch.float4_e2m1fn_x2) is torch's "
                        "packed NVFP4 dtype)")
    sd = _choice("scales_dtype", scales_dtype, _SCALES_DTYPES)
    gs = _choice("global_scale", global_scale, _GLOBAL_SCALES)
    contiguous = _flag("contiguous", contiguous)
    tensor = _tensor(data, scale_inv, amax, shape, swizzled, direction, e4m3_max, inputs)
    shard = _shard.shard_fields(rows, cols) if _shard.is_shard(rows, cols) else None
    values, scales, scale2 = tensor.export_components(direction=_DIRECTIONS[direction], values_dtype=vd,
                                                      scales_dtype=sd, contiguous=contiguous, global_scale=gs,
                                                      stream=inputs.stream, shard=shard)
    return Components(_as_torch(inputs.torch, values), _as_torch(inputs.torch, scales), _as_torch(inputs.torch, scale2))


def dequantize(
    data: Any,
    scale_inv: Any,
    amax: Any,
    *,
    shape: Optional[Sequence[int]] = None,
    swizzled: bool,
    direction: str = "rowwise",
    e4m3_max: int = 448,
    dtype: str = "float32",
    out: Any = None,
    stream: Any = None,
) -> Any:
    """Decode one direction of an NVFP4 tensor as TE's dequantize kernel does, into float32 or bfloat16.

    Each element is e2m1 * ((e4m3 * amax) * float(1 / (6 * E4M3_MAX))), in float, then rounded to
    nearest-even for bfloat16; NaN is written canonically. The result is the stored matrix: (*lead, K)
    rowwise, the (K, M) transpose columnwise.

    Args:
        data, scale_inv, amax, shape, swizzled, direction, e4m3_max: as export_components.
        dtype: "float32" or "bfloat16", when `out` is None.
        out: where to write (float32 or bfloat16, contiguous, rows * cols elements, on data's device).
            None: a new torch tensor for torch inputs, a NumPy array for host inputs (bfloat16 needs
            ml_dtypes), a CuPy array for other CUDA inputs (float32 only).

    Returns:
        out, or the new array.
    """
    inputs = _inputs(stream, data=data, scale_inv=scale_inv, amax=amax)
    if out is not None:
        inputs.check_output("out", out)  # before any __dlpack__ call
    if dtype not in _OUTPUT_DTYPES:
        raise ValueError(f"dtype must be one of {list(_OUTPUT_DTYPES)}, got {dtype!r}")
    column = _choice("direction", direction, _DIRECTIONS) == 1
    # The description is checked before `out` is allocated from its shape: a wrong shape is the library's
    # ValueError naming the data, not an allocation of that shape (terabytes, or device memory).
    tensor = _tensor(data, scale_inv, amax, shape, swizzled, direction, e4m3_max, inputs)
    if out is None:
        out = _empty(inputs.torch, inputs.cuda, data, _stored_shape(data, shape, column), dtype)
    tensor.dequantize(_DIRECTIONS[direction], out, stream=inputs.stream, dlpack_stream=inputs.dlpack_stream)
    return out


def export_te(t: Any, direction: str = "rowwise", **options: Any) -> Components:
    """Export a Transformer Engine NVFP4Tensor / NVFP4TensorStorage without importing TE.

    Reads the storage's fields (_rowwise_data, _rowwise_scale_inv, _amax_rowwise, or the _columnwise_ ones
    and _amax_columnwise; _with_gemm_swizzled_scales; _nvfp4_e4m3_max) and takes the logical shape from
    the data as TE's size() does. `options` go to export_components (values_dtype, scales_dtype,
    contiguous, global_scale, stream).

    Raises:
        TypeError: `t` is not such a tensor (it has no _{direction}_data, _{direction}_scale_inv and
            _amax_{direction}), or a field of the wrong type.
        ValueError: the tensor has no data for `direction`.
    """
    prefix = "rowwise" if _choice("direction", direction, _DIRECTIONS) == 0 else "columnwise"
    if not all(hasattr(t, f) for f in (f"_{prefix}_data", f"_{prefix}_scale_inv", f"_amax_{prefix}")):
        raise TypeError(f"export_te takes a Transformer Engine NVFP4Tensor or NVFP4TensorStorage (with _{prefix}_data, "
                        f"_{prefix}_scale_inv and _amax_{prefix}), got {type(t).__name__}; for raw buffers call "
                        "mxfp8.nvfp4.export_components")
    data = getattr(t, f"_{prefix}_data", None)
    scale_inv = getattr(t, f"_{prefix}_scale_inv", None)
    amax = getattr(t, f"_amax_{prefix}", None)
    if data is None or scale_inv is None or amax is None:
        raise ValueError(f"the NVFP4 tensor has no {prefix} data (its _{prefix}_data, _{prefix}_scale_inv or "
                         f"_amax_{prefix} is None)")
    e4m3_max = getattr(t, "_nvfp4_e4m3_max", None)  # None or 0: TE's default, 448
    e4m3_max = 448 if e4m3_max is None or (type(e4m3_max) is int and e4m3_max == 0) else \
        _args.e4m3_max("_nvfp4_e4m3_max", e4m3_max)
    return export_components(data, scale_inv, amax, swizzled=_te_swizzled(t), direction=prefix, e4m3_max=e4m3_max,
                             **options)


def _stored_shape(data: Any, shape: Optional[Sequence[int]], column: bool) -> tuple:
    """The decoded matrix's shape: the logical shape rowwise, (K, M) columnwise."""
    if shape is not None:
        logical = tuple(int(d) for d in _args.shape("shape", shape))
    else:
        stored = _args.dims("data", data)
        packed = "uint8" in _args.dtype_name("data", data)
        last = stored[-1] * 2 if packed else stored[-1]
        if not column:
            return stored[:-1] + (last,)
        if len(stored) < 2:
            raise ValueError("1-D columnwise data needs shape=")
        rows = 1  # TE's columnwise (K, d1, ..., dn/2): a (K, M) matrix
        for d in stored[1:-1]:
            rows *= d
        return (stored[0], rows * last)
    if not logical:
        raise ValueError("shape must have at least one dimension")
    if not column:
        return logical
    rows = 1
    for d in logical[:-1]:
        rows *= d
    return (logical[-1], rows)
