"""Buckets for weight sync: many tensors' values and compact scales in one buffer, one launch, plus the
manifest a receiver needs to rebuild them; and the scale swizzle both ways for the import side."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from . import _args, _mxfp8
from ._api import _DIRECTIONS, _FORMATS, Components, _choice, _flag, _has_exchange_api, _inputs

_SPEC_KEYS = ("data", "scale_inv", "fp8_dtype", "swizzled", "shape")
_MANIFEST_KEYS = ("name", "shape", "fp8_dtype", "values_offset", "values_bytes", "scales_offset", "scales_bytes",
                  "scales_shape")


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def _compact_scales_shapes(shape) -> Tuple[tuple, tuple]:
    """The compact scale shapes of a tensor of `shape`: rowwise (*lead, ceil(K/32)), columnwise
    (ceil(M/32), K)."""
    m = _numel(shape[:-1])
    return (*shape[:-1], _ceil_div(shape[-1], 32)), (_ceil_div(m, 32), shape[-1])


class _Spec:
    """One entry of export_bucket's `tensors`, its keys checked."""

    def __init__(self, name: Any, spec: Any):
        where = f"tensors[{name!r}]"
        if not isinstance(spec, Mapping):
            raise TypeError(f"{where} must be a dict with 'data' and 'scale_inv', got {type(spec).__name__}")
        unknown = [k for k in spec if k not in _SPEC_KEYS]
        if unknown:
            raise ValueError(f"{where} has an unknown key {unknown[0]!r} (known: {', '.join(_SPEC_KEYS)})")
        for key in ("data", "scale_inv"):
            if spec.get(key) is None:
                raise ValueError(f"{where} has no {key!r}")
        self.name, self.where = name, where
        self.data, self.scale_inv = spec["data"], spec["scale_inv"]
        self.fp8_dtype = spec.get("fp8_dtype", "e4m3")
        self.format = _choice(f"{where}['fp8_dtype']", self.fp8_dtype, _FORMATS)
        self.swizzled = _flag(f"{where}['swizzled']", spec.get("swizzled", False))
        given = spec.get("shape")
        if given is not None:
            self.shape = tuple(_args.shape(f"{where}['shape']", given))
            if not self.shape:
                raise ValueError(f"{where}['shape'] is empty: an MXFP8 tensor needs a last dimension K")
        else:
            self.shape = tuple(int(d) for d in self.data.shape)
            if not self.shape:
                raise ValueError(f"{where}['data'] is 0-dimensional: an MXFP8 tensor needs a last dimension K")

    def packed_bytes(self, direction: int, alignment: int) -> int:
        scales = _numel(_compact_scales_shapes(self.shape)[direction])
        return _round_up(_numel(self.shape), alignment) + _round_up(scales, alignment)


def _spec_inputs(specs: List[_Spec], stream: Any):
    """Every spec's buffers checked for one device (before any __dlpack__ call); the first decides the
    device and the stream."""
    objects = {}
    for spec in specs:
        objects[f"{spec.where}['data']"] = spec.data
        objects[f"{spec.where}['scale_inv']"] = spec.scale_inv
    return _inputs(stream, **objects)


def _spec_handle(spec: _Spec, dir_code: int, inputs) -> Any:
    """The library's handle on one spec's direction; its errors name the spec (tensors['w']: ...)."""
    prefix = "rowwise" if dir_code == 0 else "columnwise"
    try:
        return _mxfp8.Tensor(
            **{f"{prefix}_data": spec.data, f"{prefix}_scale_inv": spec.scale_inv},
            shape=list(spec.shape), format=spec.format, swizzled=spec.swizzled, stream=inputs.dlpack_stream,
            data_name=f"{spec.where}['data']", scale_inv_name=f"{spec.where}['scale_inv']",
            exchange=inputs.exchange)
    except (ValueError, TypeError) as e:  # the library's message, said of which tensor
        if str(e).startswith(spec.where):
            raise
        raise type(e)(f"{spec.where}: {e}") from None


def _specs(tensors: Any) -> List[_Spec]:
    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors must be a dict name -> {{'data', 'scale_inv', ...}}, got {type(tensors).__name__}")
    return [_Spec(name, spec) for name, spec in tensors.items()]


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
            (False), "shape"}: the arguments export_components takes, one direction's buffers. Other keys
            are an error.
        direction: "rowwise" or "columnwise", for every tensor.
        alignment: every part starts at a multiple of this many bytes (a power of two).
        bucket: a contiguous, writeable byte buffer to fill (torch, CuPy, NumPy...) on the tensors'
            device. None: a new one, torch.empty on the tensors' device for torch inputs, numpy.empty
            for host memory.
        stream: as for export_components.

    Returns:
        (bucket, manifest): manifest[i] = {"name", "shape", "fp8_dtype", "direction", "scales_layout"
        ("compact"), "values_offset", "values_bytes", "scales_offset", "scales_bytes", "scales_shape"} in
        bucket order (mxfp8.import_bucket writes it into engine parameters); the bucket can go through one
        CUDA IPC handle or one NCCL broadcast, and unpack_bucket rebuilds the parts on the other side.

    Raises:
        ValueError: bad input (messages name the tensor, e.g. tensors['w']['scale_inv']), tensors or the
        bucket on different devices, a read-only bucket; TypeError: an argument of the wrong type.
    """
    return _export_bucket(tensors, direction, alignment, bucket, stream, "bucket")


def _plan_bucket(specs: List[_Spec], direction: str, dir_code: int, alignment: int, inputs):
    """The library's handles on `specs`, the bucket's manifest, its layout (mxfp8_bucket_plan's entries)
    and its size in bytes."""
    handles, manifest = [], []
    for spec in specs:
        handles.append(_spec_handle(spec, dir_code, inputs))
        # direction and scales_layout: what mxfp8.import_bucket needs to know about the parts.
        manifest.append({"name": spec.name, "shape": spec.shape, "fp8_dtype": spec.fp8_dtype,
                         "scales_shape": _compact_scales_shapes(spec.shape)[dir_code],
                         "direction": direction, "scales_layout": "compact"})
    plan, total = _mxfp8.bucket_plan(handles, direction=dir_code, alignment=alignment)
    for entry, (vo, vb, so, sb) in zip(manifest, plan):
        entry.update(values_offset=vo, values_bytes=vb, scales_offset=so, scales_bytes=sb)
    return handles, manifest, plan, total


def _bucket_groups(specs: List[_Spec], dir_code: int, alignment: int, bucket_bytes: int) -> List[List[_Spec]]:
    """Consecutive groups of `specs` whose packed size fits `bucket_bytes`; a tensor larger than that is
    a group alone."""
    groups, size = [], 0
    for spec in specs:
        n = spec.packed_bytes(dir_code, alignment)
        if groups and groups[-1] and size + n <= bucket_bytes:
            groups[-1].append(spec)
            size += n
        else:
            groups.append([spec])
            size = n
    return groups


def _export_bucket(tensors, direction, alignment, bucket, stream, bucket_name: str):
    """export_bucket, with errors about the bucket naming the caller's argument (`buffer` for
    iter_buckets)."""
    specs = _specs(tensors)
    if not specs:
        raise ValueError("tensors is empty: nothing to pack")
    dir_code = _choice("direction", direction, _DIRECTIONS)
    alignment = _args.power_of_two("alignment", alignment)
    inputs = _spec_inputs(specs, stream)
    if bucket is not None:
        inputs.check_output(bucket_name, bucket)
    handles, manifest, plan, total = _plan_bucket(specs, direction, dir_code, alignment, inputs)
    if bucket is None:
        if inputs.torch is not None:
            bucket = inputs.torch.empty(total, dtype=inputs.torch.uint8, device=specs[0].data.device)
        elif not inputs.cuda:
            import numpy

            bucket = numpy.empty(total, dtype=numpy.uint8)
        else:
            raise ValueError("pass bucket=: a CUDA buffer of at least %d bytes (no torch to allocate one)" % total)
    _mxfp8.export_bucket(handles, plan, bucket, direction=dir_code, stream=inputs.stream,
                         dlpack_stream=inputs.dlpack_stream, bucket_name=bucket_name)
    return bucket, manifest


def _bucket_bytes(bucket: Any) -> int:
    """The size of a 1-D contiguous byte buffer (NumPy, torch, CuPy)."""
    dims = tuple(getattr(bucket, "shape", None) or ()) if hasattr(bucket, "shape") else None
    if dims is None or len(dims) != 1:
        raise ValueError(f"bucket must be a 1-D byte buffer, got shape {dims}")
    dtype = getattr(bucket, "dtype", None)
    itemsize = getattr(dtype, "itemsize", None)
    if itemsize != 1:
        raise ValueError(f"bucket must hold bytes (uint8), got dtype {dtype}")
    stride = bucket.stride(0) if callable(getattr(bucket, "stride", None)) else getattr(bucket, "strides", (1,))[0]
    if dims[0] > 1 and stride != 1:
        raise ValueError(f"bucket must be contiguous, its stride is {stride}")
    return int(dims[0])


def _check_manifest(manifest: Any, size: int) -> List[dict]:
    """Each entry against the bucket's `size` and the other entries: whole, typed, consistent with its
    shape, inside the bucket, overlapping nothing. Returns the entries with Python ints and tuples."""
    if isinstance(manifest, (str, bytes, Mapping)) or not hasattr(manifest, "__iter__"):
        raise TypeError(f"manifest must be the list export_bucket returned, got {type(manifest).__name__}")
    checked, parts, names = [], [], set()
    for i, e in enumerate(manifest):
        where = f"manifest[{i}]"
        if not isinstance(e, Mapping):
            raise TypeError(f"{where} must be a dict, got {type(e).__name__}")
        for key in _MANIFEST_KEYS:
            if key not in e:
                raise ValueError(f"{where} has no {key!r}")
        name = e["name"]
        where = f"manifest[{i}] ({name!r})"
        try:
            duplicate = name in names
        except TypeError:
            raise TypeError(f"{where}: name must be hashable, got {type(name).__name__}") from None
        if duplicate:
            raise ValueError(f"{where}: the name appears twice")
        names.add(name)
        _choice(f"{where}: fp8_dtype", e["fp8_dtype"], _FORMATS)
        shape = tuple(_args.shape(f"{where}: shape", e["shape"]))
        scales_shape = tuple(_args.shape(f"{where}: scales_shape", e["scales_shape"]))
        if not shape or any(d < 0 for d in shape):
            raise ValueError(f"{where}: shape {shape} is not the shape of an MXFP8 tensor")
        fields = {k: _args.integer(f"{where}: {k}", e[k], 0, _args.INT64_MAX)
                  for k in ("values_offset", "values_bytes", "scales_offset", "scales_bytes")}
        if fields["values_bytes"] != _numel(shape):
            raise ValueError(f"{where}: values_bytes is {fields['values_bytes']} but shape {shape} holds "
                             f"{_numel(shape)} values")
        rowwise, columnwise = _compact_scales_shapes(shape)
        if scales_shape not in (rowwise, columnwise):
            raise ValueError(f"{where}: scales_shape {scales_shape} is not the compact scale shape of {shape} "
                             f"({rowwise} rowwise, {columnwise} columnwise)")
        if fields["scales_bytes"] != _numel(scales_shape):
            raise ValueError(f"{where}: scales_bytes is {fields['scales_bytes']} but scales_shape {scales_shape} "
                             f"holds {_numel(scales_shape)} scales")
        for part in ("values", "scales"):
            start, n = fields[f"{part}_offset"], fields[f"{part}_bytes"]
            if start + n > size:
                raise ValueError(f"{where}: {part}_offset {start} + {part}_bytes {n} runs past the end of the "
                                 f"bucket ({size} bytes)")
            if n:
                parts.append((start, start + n, i, f"{where} {part}"))
        checked.append(dict(e, shape=shape, scales_shape=scales_shape, **fields))
    parts.sort()  # by start: if any two parts overlap, two neighbours do
    for a, b in zip(parts, parts[1:]):
        if b[0] < a[1]:
            earlier, later = sorted((a, b), key=lambda p: p[2])  # name the later entry as the one that lies
            raise ValueError(f"{later[3]} (bytes {later[0]} to {later[1]}) overlaps {earlier[3]} "
                             f"(bytes {earlier[0]} to {earlier[1]})")
    return checked


def unpack_bucket(bucket: Any, manifest: List[Dict[str, Any]]) -> Dict[str, Components]:
    """Views of each tensor's values (float8 for torch, uint8 for NumPy) and compact uint8 scales inside
    a bucket made by export_bucket. Nothing is copied: the views share the bucket's memory.

    The manifest is checked first (it may come from another process): every entry complete, its sizes
    those of its shape and compact scale shape, its parts inside the bucket and overlapping no other part;
    a ValueError names the entry and the field that is wrong, a TypeError a field of the wrong type."""
    size = _bucket_bytes(bucket)
    module = type(bucket).__module__
    parts = {}
    for e in _check_manifest(manifest, size):
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
    cuBLAS needs. `out`: roundup(R,128) * roundup(C,4) writeable bytes on compact's device; None: a new
    1-D buffer like `compact`."""
    if stream is None and _has_exchange_api(compact):  # the common case, in the extension alone
        done = _mxfp8.swizzle_fast(compact, out, True, None, None, stream)
        if done is not NotImplemented:
            return done
    inputs = _inputs(stream, compact=compact)
    cols = _args.last_dimension("compact", compact)
    rows = _numel(tuple(compact.shape)[:-1])
    if out is None:
        n = _round_up(rows, 128) * _round_up(cols, 4)
        if inputs.torch is not None:
            out = inputs.torch.empty(n, dtype=inputs.torch.uint8, device=compact.device)
        else:
            import numpy

            out = numpy.empty(n, dtype=numpy.uint8)
    else:
        inputs.check_output("out", out)
    _mxfp8.swizzle_pair(compact, out, True, stream=inputs.stream, dlpack_stream=inputs.dlpack_stream)
    return out


def unswizzle_scales(swizzled: Any, rows: int, cols: int, out: Any = None, *, stream: Any = None) -> Any:
    """The (rows, cols) compact scale matrix held in a swizzled buffer (into `out`, writeable, on
    swizzled's device, when given)."""
    if stream is None and _has_exchange_api(swizzled):  # the common case, in the extension alone
        done = _mxfp8.swizzle_fast(swizzled, out, False, rows, cols, stream)
        if done is not NotImplemented:
            return done
    inputs = _inputs(stream, swizzled=swizzled)
    rows = _args.integer("rows", rows, 0)
    cols = _args.integer("cols", cols, 0)
    if out is None:
        if inputs.torch is not None:
            out = inputs.torch.empty((rows, cols), dtype=inputs.torch.uint8, device=swizzled.device)
        else:
            import numpy

            out = numpy.empty((rows, cols), dtype=numpy.uint8)
    else:
        inputs.check_output("out", out)
    _mxfp8.swizzle_pair(swizzled, out, False, stream=inputs.stream, dlpack_stream=inputs.dlpack_stream)
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
    alignment = _args.power_of_two("alignment", alignment)
    bucket_bytes = _args.integer("bucket_bytes", bucket_bytes, 1)
    specs = _specs(tensors)  # every spec checked before the first bucket is filled
    caller_buffer = buffer is not None
    for group in _bucket_groups(specs, dir_code, alignment, bucket_bytes):
        group_tensors = {spec.name: tensors[spec.name] for spec in group}
        total = sum(spec.packed_bytes(dir_code, alignment) for spec in group)
        if buffer is None or _numel(buffer.shape) < total:
            if caller_buffer:
                raise ValueError(f"buffer holds {_numel(buffer.shape)} bytes, a bucket needs {total}: "
                                 "make it at least bucket_bytes and as large as the largest tensor")
            # let export_bucket allocate one of the right size, then keep it
            buffer, manifest = _export_bucket(group_tensors, direction, alignment, None, stream, "buffer")
            yield buffer, manifest
        else:
            yield _export_bucket(group_tensors, direction, alignment, buffer[:total], stream, "buffer")
