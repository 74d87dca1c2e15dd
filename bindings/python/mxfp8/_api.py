"""The Python API: argument names in, C library calls out. Layouts, shapes, dtypes and sizes are the C
library's to check. export_components (like quantize, dequantize and the swizzles) is one call of the
extension, which checks its Python arguments and devices itself; the other calls check theirs in _args."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

from . import _args, _mxfp8
from ._args import choice as _choice
from ._args import flag as _flag
from ._args import inputs as _inputs

_FORMATS = {"e4m3": 1, "e5m2": 2}
_DIRECTIONS = {"rowwise": 0, "columnwise": 1}
_VALUES_DTYPES = {"fp8": 0, "uint8": 1}
_SCALES_DTYPES = {"uint8": 0, "e8m0": 1}
_BLOCKS = {"1x32": 0, "32x32": 1}
_GROUPED_SCALES = {"padded": 0, "compact": 1}


class Components(NamedTuple):
    """The exported parts of an MXFP8 tensor.

    values: the FP8 data, shape = the tensor's shape, a view of the source (a copy only for a shard of
            several row pieces, or grouped experts chosen out of order or with gaps).
    scales: the E8M0 scales, (*shape[:-1], ceil(K/32)) rowwise or (ceil(M/32), K) columnwise; a view
            when the source's bytes already lie that way, else a copy.
    """

    values: Any
    scales: Any


_mxfp8.set_result_types(Components)  # what the extension's export_components returns
_export_components = _mxfp8.export_components  # one global lookup a call, not two


def export_components(
    data: Any,
    scale_inv: Any,
    *,
    shape: Optional[Sequence[int]] = None,
    fp8_dtype: str = "e4m3",
    swizzled: bool,
    direction: str = "rowwise",
    values_dtype: str = "fp8",
    scales_dtype: str = "uint8",
    contiguous: bool = True,
    block: str = "1x32",
    stream: Any = None,
    rows: Any = None,
    cols: Any = None,
) -> Components:
    """Export the values and compact scales of one direction of an MXFP8 tensor, or of one shard of it.

    Args:
        data: the FP8 values of `direction` (uint8 or float8), the tensor's shape, contiguous.
        scale_inv: its E8M0 scales (uint8 or float8_e8m0fnu): row-major, possibly padded (Transformer
            Engine pads to 128 x 4 rowwise, 4 x 128 columnwise), or GEMM-swizzled when `swizzled`.
        shape: the logical shape, checked against `data`; defaults to data's shape.
        fp8_dtype: "e4m3" or "e5m2".
        swizzled: required, no default: True when the scales are in the cuBLAS 128x4 block layout (TE's
            optimize_for_gemm / _with_gemm_swizzled_scales), False when row-major (compact or padded). The
            two layouts of one tensor have the same shape, so a wrong guess would decode silently; for a TE
            tensor, export_te reads the flag itself.
        direction: "rowwise" or "columnwise".
        values_dtype: "fp8" (float8_e4m3fn / float8_e5m2) or "uint8" for consumers without float8.
        scales_dtype: "uint8" (what vLLM and SGLang load) or "e8m0" (float8_e8m0fnu).
        contiguous: padded row-major scales come back as a contiguous copy (True) or a strided view.
        block: "1x32", or "32x32" for Transformer Engine's 2-D quantized weights: the scales then come
            back one per 32 x 32 block, (ceil(M/32), ceil(K/32)), after checking that each block's stored
            scales agree (ValueError naming the first that does not).
        stream: CUDA stream for the copy (torch/CuPy stream or int); default: torch's current stream
            for torch tensors, else the legacy default stream.
        rows, cols: export only this shard (mxfp8_export_components' options.shard): rows ``(r0, r1)``
            of M (or a list of such ranges, concatenated: a rank's Q, K and V rows of a fused QKV weight)
            and K columns ``(k0, k1)``; an end of None is the end of the dimension. Rowwise, k0 and k1 are multiples of
            32 (or k1 = K); columnwise, every row boundary is a multiple of 32 (or M). The result is 2-D:
            values ``(rows, cols)`` (a strided view for one row range, else a copy) and the shard's
            compact scales, exactly the crop of the whole export, read straight from the stored (padded
            or swizzled) scales. Needs block="1x32".

    Returns:
        Components(values, scales): torch tensors for torch inputs, else mxfp8.Array objects that any
        DLPack consumer takes (torch.from_dlpack, jax.dlpack.from_dlpack, cupy.from_dlpack,
        numpy.from_dlpack).

    Raises:
        ValueError: bad input, or no data for `direction`, or data and scale_inv on different devices
        (checked before either is asked for its DLPack capsule), or a DLPack tensor of another major
        version; TypeError: an unsupported device or object, or an argument of the wrong Python type
        (swizzled and contiguous must be bools, shape a sequence of ints); RuntimeError: a CUDA failure.
        Messages come from the C library, or name the Python argument for what only Python sees.
    """
    return _export_components(data, scale_inv, shape, fp8_dtype, swizzled, direction, values_dtype, scales_dtype,
                              contiguous, block, stream, rows, cols)


_torch_allocator = _mxfp8.torch_allocator  # (torch, data): torch.empty on data's device for torch inputs, else None


def _components(torch, values, scales) -> Components:
    """Torch tensors for torch inputs (already so when they came through the exchange API)."""
    return Components(_as_torch(torch, values), _as_torch(torch, scales))


def _as_torch(torch, result):
    if torch is not None and isinstance(result, _mxfp8.Array):
        return torch.from_dlpack(result)
    return result


def export_grouped(
    data: Any,
    scale_inv: Any,
    *,
    num_experts: int,
    expert_rows: Optional[Sequence[int]] = None,
    scale_offsets: Optional[Sequence[int]] = None,
    scales: str = "padded",
    fp8_dtype: str = "e4m3",
    swizzled: bool,
    stacked: bool = True,
    values_dtype: str = "fp8",
    scales_dtype: str = "uint8",
    stream: Any = None,
    experts: Optional[Sequence[int]] = None,
):
    """Export E MoE experts held in one flat values buffer and one flat scale buffer (rowwise).

    Args:
        data: all experts' values back to back, sum(rows_e) x K (any shape; K is its last dimension).
        scale_inv: all experts' scales, flat.
        num_experts: E.
        expert_rows: each expert's row count; None: E experts of equal size.
        scale_offsets: byte offset of each expert's scales in scale_inv; None: back to back (scale_inv may
            be larger: bytes past the experts' are never read).
        scales: "padded" (each expert's scales take TE's roundup(rows,128) x roundup(ceil(K/32),4)) or
            "compact" (rows x ceil(K/32), row-major only).
        swizzled: required: True when each expert's scales are in the cuBLAS 128x4 layout (needs
            "padded"), False when row-major.
        stacked: return one Components with values [E, N, K] and scales [E, N, ceil(K/32)] (the shape
            vLLM's MoE layers load; one launch for all experts); else a list of per-expert Components.
        experts: only these experts, in this order (expert parallelism: the experts one rank serves),
            stacked [len(experts), N, K] (mxfp8_grouped_export of them: views when they lie back to back
            in order, else copies made in one launch); they must share one row count. Needs stacked.
        Other arguments as export_components.
    """
    inputs = _inputs(stream, data=data, scale_inv=scale_inv)
    num_experts = _args.integer("num_experts", num_experts, 1, _args.INT32_MAX)
    k = _args.last_dimension("data", data)
    expert_rows = _args.sequence_of_ints("expert_rows", expert_rows)
    scale_offsets = _args.sequence_of_ints("scale_offsets", scale_offsets)
    format_code = _choice("fp8_dtype", fp8_dtype, _FORMATS)
    swizzled = _flag("swizzled", swizzled)
    packing = _choice("scales", scales, _GROUPED_SCALES)
    stacked = _flag("stacked", stacked)
    vd = _choice("values_dtype", values_dtype, _VALUES_DTYPES)
    sd = _choice("scales_dtype", scales_dtype, _SCALES_DTYPES)
    uniform_rows = 0
    if expert_rows is None:
        dims = _args.dims("data", data)
        if any(d < 0 for d in dims):  # said of data, not of the uniform_rows the C desc would be given
            raise ValueError(f"data: shape {dims} has a negative dimension")
        total = _args.numel(dims[:-1])
        if total % num_experts:
            raise ValueError(f"{total} rows do not split into {num_experts} equal experts: pass expert_rows")
        uniform_rows = total // num_experts
    grouped = _mxfp8.Grouped(
        data=data,
        scale_inv=scale_inv,
        num_experts=num_experts,
        cols=k,
        expert_rows=expert_rows,
        uniform_rows=uniform_rows,
        scale_offsets=scale_offsets,
        format=format_code,
        swizzled=swizzled,
        packing=packing,
        stream=inputs.dlpack_stream,
        exchange=inputs.exchange,
    )
    allocator = _torch_allocator(inputs.torch, data)
    chosen = None  # every expert
    if experts is not None:
        if isinstance(experts, (str, bytes)) or not hasattr(experts, "__len__"):
            raise TypeError(f"experts must be a sequence of ints, got {experts!r}")
        chosen = [_args.integer(f"experts[{i}]", e, -_args.INT32_MAX - 1, _args.INT32_MAX) for i, e in enumerate(experts)]
        if not stacked:
            raise ValueError("experts= returns the chosen experts stacked: leave stacked=True")
    if stacked:
        return _components(inputs.torch, *grouped.export_experts(chosen, values_dtype=vd, scales_dtype=sd,
                                                                 stream=inputs.stream, allocator=allocator))
    parts = []
    for e in range(num_experts):
        parts.append(_components(inputs.torch, *grouped.expert(e).export_components(
            values_dtype=vd, scales_dtype=sd, stream=inputs.stream, allocator=allocator)))
    return parts


def export_te(t: Any, direction: str = "rowwise") -> Components:
    """Export a Transformer Engine MXFP8Tensor / MXFP8TensorStorage without importing TE.

    Reads the storage's private fields (_rowwise_data, _rowwise_scale_inv, _columnwise_data,
    _columnwise_scale_inv, _fp8_dtype, _with_gemm_swizzled_scales) and returns torch tensors with the
    semantics of TE's MXFP8Components: values a view, scales (*shape[:-1], ceil(K/32)) uint8.

    Raises:
        TypeError: `t` is not such a tensor (it has no _{direction}_data and _{direction}_scale_inv).
        ValueError: the tensor has no data for `direction` (as TE's export_components does).
    """
    prefix = "rowwise" if _choice("direction", direction, _DIRECTIONS) == 0 else "columnwise"
    if not (hasattr(t, f"_{prefix}_data") and hasattr(t, f"_{prefix}_scale_inv")):
        raise TypeError(f"export_te takes a Transformer Engine MXFP8Tensor or MXFP8TensorStorage (with _{prefix}_data "
                        f"and _{prefix}_scale_inv), got {type(t).__name__}; for raw buffers call export_components")
    data = getattr(t, f"_{prefix}_data", None)
    scale_inv = getattr(t, f"_{prefix}_scale_inv", None)
    if data is None or scale_inv is None:
        raise ValueError(f"the MXFP8 tensor has no {prefix} data (its _{prefix}_data or _{prefix}_scale_inv is None)")
    fp8 = str(getattr(t, "_fp8_dtype", "")).lower()
    if "e4m3" in fp8:
        fp8_dtype = "e4m3"
    elif "e5m2" in fp8:
        fp8_dtype = "e5m2"
    else:
        raise ValueError(f"unrecognized _fp8_dtype {getattr(t, '_fp8_dtype', None)!r}: expected an E4M3 or E5M2 type")
    return export_components(data, scale_inv, fp8_dtype=fp8_dtype, swizzled=_te_swizzled(t), direction=prefix)


def _te_swizzled(t: Any) -> bool:
    """TE's _with_gemm_swizzled_scales: a bool, or None (absent: False). Anything else is refused, as
    export_components refuses it: bool("False") would read the scales as swizzled."""
    swizzled = getattr(t, "_with_gemm_swizzled_scales", None)
    return False if swizzled is None else _flag("_with_gemm_swizzled_scales", swizzled)
