"""Buckets for weight sync: many tensors' values and compact scales in one buffer, one launch, plus the
manifest a receiver needs to rebuild them; and the scale swizzle both ways for the import side."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _mxfp8
from ._api import _CUDA_DEVICES, _DIRECTIONS, _FORMATS, Components, _choice, _dlpack_stream, _inputs

_FP8_CODES = {"e4m3": 10, "e5m2": 12}  # DLPack kDLFloat8_e4m3fn, kDLFloat8_e5m2


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def export_bucket(
    tensors: Mapping[str, Mapping[str, Any]],
    *,
    direction: str = "rowwise",
    alignment: int = 256,
    bucket: Any = None,
    stream: Any = None,
) -> Tuple[Any, List[Dict[str, Any]]]:
    """Pack the values and compact scales of many MXFP8 tensors into one buffer, in one launch.

    Args:
        tensors: name -> {"data": ..., "scale_inv": ..., and optionally "fp8_dtype" ("e4m3"), "swizzled"
            (False), "shape"}: the arguments export_components takes, one direction's buffers.
        direction: "rowwise" or "columnwise", for every tensor.
        alignment: every part starts at a multiple of this many bytes.
        bucket: a contiguous byte buffer to fill (torch, CuPy, NumPy...). None: a new one, torch.empty on
            the tensors' device for torch inputs, numpy.empty for host memory.
        stream: as for export_components.

    Returns:
        (bucket, manifest): manifest[i] = {"name", "shape", "fp8_dtype", "direction", "scales_layout"
        ("compact"), "values_offset", "values_bytes", "scales_offset", "scales_bytes", "scales_shape"} in
        bucket order (mxfp8.import_bucket writes it into engine parameters); the bucket can go through one
        CUDA IPC handle or one NCCL broadcast, and unpack_bucket rebuilds the parts on the other side.
    """
    if not tensors:
        raise ValueError("tensors is empty: nothing to pack")
    dir_code = _choice("direction", direction, _DIRECTIONS)
    handles, manifest = [], []
    first = None
    for name, spec in tensors.items():
        data, scale_inv = spec["data"], spec["scale_inv"]
        torch, cuda, stream_ptr = _inputs(stream, data=data, scale_inv=scale_inv)
        first = first or (torch, cuda, stream_ptr, data)
        fp8 = spec.get("fp8_dtype", "e4m3")
        shape = tuple(int(d) for d in (spec.get("shape") or data.shape))
        prefix = "rowwise" if dir_code == 0 else "columnwise"
        handles.append(_mxfp8.Tensor(
            **{f"{prefix}_data": data, f"{prefix}_scale_inv": scale_inv},
            shape=list(shape), format=_choice("fp8_dtype", fp8, _FORMATS), swizzled=bool(spec.get("swizzled", False)),
            stream=_dlpack_stream(stream_ptr, cuda)))
        m = _numel(shape[:-1])
        scales_shape = (*shape[:-1], -(-shape[-1] // 32)) if dir_code == 0 else (-(-m // 32), shape[-1])
        # direction and scales_layout: what mxfp8.import_bucket needs to know about the parts.
        manifest.append({"name": name, "shape": shape, "fp8_dtype": fp8, "scales_shape": scales_shape,
                         "direction": direction, "scales_layout": "compact"})
    plan, total = _mxfp8.bucket_plan(handles, direction=dir_code, alignment=int(alignment))
    for entry, (vo, vb, so, sb) in zip(manifest, plan):
        entry.update(values_offset=vo, values_bytes=vb, scales_offset=so, scales_bytes=sb)
    torch, cuda, stream_ptr, data = first
    if bucket is None:
        if torch is not None:
            bucket = torch.empty(total, dtype=torch.uint8, device=data.device)
        elif not cuda:
            import numpy

            bucket = numpy.empty(total, dtype=numpy.uint8)
        else:
            raise ValueError("pass bucket=: a CUDA buffer of at least %d bytes (no torch to allocate one)" % total)
    _mxfp8.export_bucket(handles, plan, bucket, direction=dir_code, stream=stream_ptr,
                         dlpack_stream=_dlpack_stream(stream_ptr, cuda))
    return bucket, manifest


def unpack_bucket(bucket: Any, manifest: List[Dict[str, Any]]) -> Dict[str, Components]:
    """Views of each tensor's values (float8 for torch, uint8 for NumPy) and compact uint8 scales inside
    a bucket made by export_bucket. Nothing is copied: the views share the bucket's memory."""
    module = type(bucket).__module__
    parts = {}
    for e in manifest:
        values = bucket[e["values_offset"]:e["values_offset"] + e["values_bytes"]]
        scales = bucket[e["scales_offset"]:e["scales_offset"] + e["scales_bytes"]]
        if module.startswith("torch"):
            import torch

            fp8 = torch.float8_e4m3fn if e["fp8_dtype"] == "e4m3" else torch.float8_e5m2
            values = values.view(fp8).view(e["shape"])
            scales = scales.view(e["scales_shape"])
        else:
            values = values.reshape(e["shape"])
            scales = scales.reshape(e["scales_shape"])
        parts[e["name"]] = Components(values, scales)
    return parts


def _round_up(n: int, d: int) -> int:
    return (n + d - 1) // d * d


def swizzle_scales(compact: Any, out: Any = None, *, stream: Any = None) -> Any:
    """The cuBLAS 128x4 layout of a (R, C) compact scale matrix, padding zero: what a consumer that feeds
    cuBLAS needs. `out`: roundup(R,128) * roundup(C,4) bytes; None: a new 1-D buffer like `compact`."""
    torch, cuda, stream_ptr = _inputs(stream, compact=compact)
    rows, cols = _numel(compact.shape[:-1]), int(compact.shape[-1])
    n = _round_up(rows, 128) * _round_up(cols, 4)
    if out is None:
        if torch is not None:
            out = torch.empty(n, dtype=torch.uint8, device=compact.device)
        else:
            import numpy

            out = numpy.empty(n, dtype=numpy.uint8)
    _mxfp8.swizzle_pair(compact, out, True, stream=stream_ptr, dlpack_stream=_dlpack_stream(stream_ptr, cuda))
    return out


def unswizzle_scales(swizzled: Any, rows: int, cols: int, out: Any = None, *, stream: Any = None) -> Any:
    """The (rows, cols) compact scale matrix held in a swizzled buffer."""
    torch, cuda, stream_ptr = _inputs(stream, swizzled=swizzled)
    if out is None:
        if torch is not None:
            out = torch.empty((rows, cols), dtype=torch.uint8, device=swizzled.device)
        else:
            import numpy

            out = numpy.empty((rows, cols), dtype=numpy.uint8)
    _mxfp8.swizzle_pair(swizzled, out, False, stream=stream_ptr, dlpack_stream=_dlpack_stream(stream_ptr, cuda))
    return out


def iter_buckets(
    tensors: Mapping[str, Mapping[str, Any]],
    *,
    bucket_bytes: int,
    direction: str = "rowwise",
    alignment: int = 256,
    buffer: Any = None,
    stream: Any = None,
):
    """Yield (bucket, manifest) for consecutive groups of `tensors` whose packed size fits
    `bucket_bytes` (a tensor larger than that travels alone), refilling ONE buffer: send or copy each
    bucket before asking for the next. Peak extra memory is one bucket, whatever the model size.

    buffer: the 1-D byte buffer to fill (shared memory, an IPC-registered allocation...); None: one is
    allocated as export_bucket does, and grown when a group needs more."""
    dir_code = _choice("direction", direction, _DIRECTIONS)
    group, size = {}, 0
    caller_buffer = buffer is not None

    def packed(spec) -> int:
        shape = tuple(int(d) for d in (spec.get("shape") or spec["data"].shape))
        m = _numel(shape[:-1])
        scales = m * -(-shape[-1] // 32) if dir_code == 0 else -(-m // 32) * shape[-1]
        return _round_up(_numel(shape), alignment) + _round_up(scales, alignment)

    def flush():
        nonlocal buffer
        total = sum(packed(s) for s in group.values())
        if buffer is None or _numel(buffer.shape) < total:
            if caller_buffer:
                raise ValueError(f"buffer holds {_numel(buffer.shape)} bytes, a bucket needs {total}: "
                                 "make it at least bucket_bytes and as large as the largest tensor")
            # let export_bucket allocate one of the right size, then keep it
            bucket, manifest = export_bucket(group, direction=direction, alignment=alignment, stream=stream)
            buffer = bucket
        else:
            bucket, manifest = export_bucket(group, direction=direction, alignment=alignment, bucket=buffer[:total],
                                             stream=stream)
        return bucket, manifest

    for name, spec in tensors.items():
        n = packed(spec)
        if group and size + n > bucket_bytes:
            yield flush()
            group, size = {}, 0
        group[name] = spec
        size += n
    if group:
        yield flush()
