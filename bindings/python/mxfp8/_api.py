"""The Python API: argument names in, C library calls out. Every check is the C library's."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

from . import _mxfp8

_FORMATS = {"e4m3": 1, "e5m2": 2}
_DIRECTIONS = {"rowwise": 0, "columnwise": 1}
_VALUES_DTYPES = {"fp8": 0, "uint8": 1}
_SCALES_DTYPES = {"uint8": 0, "e8m0": 1}
_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged


class Components(NamedTuple):
    """The exported parts of an MXFP8 tensor.

    values: the FP8 data, shape = the tensor's shape, always a view of the source.
    scales: the E8M0 scales, (*shape[:-1], ceil(K/32)) rowwise or (ceil(M/32), K) columnwise; a view
            when the source's bytes already lie that way, else a copy.
    """

    values: Any
    scales: Any


def _choice(name: str, value: str, table: dict) -> int:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ValueError(f"{name} must be one of {sorted(table)}, got {value!r}") from None


def _torch_module(obj: Any):
    module = type(obj).__module__
    if module.startswith("torch"):
        import torch

        if isinstance(obj, torch.Tensor):
            return torch
    return None


def _stream_pointer(stream: Any, torch, data: Any, cuda: bool) -> int:
    """A cudaStream_t as an int: from torch/CuPy stream objects, ints, or torch's current stream."""
    if not cuda:
        if stream is not None:
            raise ValueError("stream is only meaningful for CUDA tensors")
        return 0
    if stream is None:
        return torch.cuda.current_stream(data.device).cuda_stream if torch is not None else 0
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    return int(stream)


def export_components(
    data: Any,
    scale_inv: Any,
    *,
    shape: Optional[Sequence[int]] = None,
    fp8_dtype: str = "e4m3",
    swizzled: bool = False,
    direction: str = "rowwise",
    values_dtype: str = "fp8",
    scales_dtype: str = "uint8",
    contiguous: bool = True,
    stream: Any = None,
) -> Components:
    """Export the values and compact scales of one direction of an MXFP8 tensor.

    Args:
        data: the FP8 values of `direction` (uint8 or float8), the tensor's shape, contiguous.
        scale_inv: its E8M0 scales (uint8 or float8_e8m0fnu): row-major, possibly padded (Transformer
            Engine pads to 128 x 4 rowwise, 4 x 128 columnwise), or GEMM-swizzled when `swizzled`.
        shape: the logical shape, checked against `data`; defaults to data's shape.
        fp8_dtype: "e4m3" or "e5m2".
        swizzled: the scales are in the cuBLAS 128x4 block layout (TE's optimize_for_gemm).
        direction: "rowwise" or "columnwise".
        values_dtype: "fp8" (float8_e4m3fn / float8_e5m2) or "uint8" for consumers without float8.
        scales_dtype: "uint8" (what vLLM and SGLang load) or "e8m0" (float8_e8m0fnu).
        contiguous: padded row-major scales come back as a contiguous copy (True) or a strided view.
        stream: CUDA stream for the copy (torch/CuPy stream or int); default: torch's current stream
            for torch tensors, else the legacy default stream.

    Returns:
        Components(values, scales): torch tensors for torch inputs, else mxfp8.Array objects that any
        DLPack consumer takes (torch.from_dlpack, jax.dlpack.from_dlpack, cupy.from_dlpack,
        numpy.from_dlpack).

    Raises:
        ValueError: bad input, or no data for `direction`; TypeError: an unsupported device or object;
        RuntimeError: a CUDA failure. Messages come from the C library.
    """
    for name, obj in (("data", data), ("scale_inv", scale_inv)):
        if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
            raise TypeError(f"{name}: expected an object with __dlpack__ (torch, JAX, CuPy, NumPy), got {type(obj).__name__}")
    torch = _torch_module(data)
    device_type, _ = data.__dlpack_device__()
    cuda = device_type in _CUDA_DEVICES
    stream_ptr = _stream_pointer(stream, torch, data, cuda)
    prefix = "rowwise" if _choice("direction", direction, _DIRECTIONS) == 0 else "columnwise"
    tensor = _mxfp8.Tensor(
        **{f"{prefix}_data": data, f"{prefix}_scale_inv": scale_inv},
        shape=None if shape is None else [int(d) for d in shape],
        format=_choice("fp8_dtype", fp8_dtype, _FORMATS),
        swizzled=bool(swizzled),
        # DLPack: 1 names the legacy default stream; None is for host memory.
        stream=(stream_ptr or 1) if cuda else None,
    )
    allocator = None
    if torch is not None:
        device = data.device

        def allocator(shape, _dl_device):  # copies come from PyTorch's caching allocator
            return torch.empty(shape, dtype=torch.uint8, device=device)

    values, scales = tensor.export_components(
        direction=_DIRECTIONS[direction],
        values_dtype=_choice("values_dtype", values_dtype, _VALUES_DTYPES),
        scales_dtype=_choice("scales_dtype", scales_dtype, _SCALES_DTYPES),
        contiguous=bool(contiguous),
        stream=stream_ptr,
        allocator=allocator,
    )
    if torch is not None:
        return Components(torch.from_dlpack(values), torch.from_dlpack(scales))
    return Components(values, scales)


def export_te(t: Any, direction: str = "rowwise") -> Components:
    """Export a Transformer Engine MXFP8Tensor / MXFP8TensorStorage without importing TE.

    Reads the storage's private fields (_rowwise_data, _rowwise_scale_inv, _columnwise_data,
    _columnwise_scale_inv, _fp8_dtype, _with_gemm_swizzled_scales) and returns torch tensors with the
    semantics of TE's MXFP8Components: values a view, scales (*shape[:-1], ceil(K/32)) uint8.

    Raises:
        ValueError: the tensor has no data for `direction` (as TE's export_components does).
    """
    prefix = "rowwise" if _choice("direction", direction, _DIRECTIONS) == 0 else "columnwise"
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
    return export_components(
        data,
        scale_inv,
        shape=tuple(data.shape),
        fp8_dtype=fp8_dtype,
        swizzled=bool(getattr(t, "_with_gemm_swizzled_scales", False)),
        direction=prefix,
    )
