"""Buckets for weight sync: many tensors' values and compact scales in one buffer, one launch, plus the
manifest a receiver needs to rebuild them; and the scale swizzle both ways for the import side."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import operator

from . import _args, _mxfp8, _shard, nvfp4
from ._api import _DIRECTIONS, _FORMATS, Components, _choice, _inputs

_swizzle_scales = _mxfp8.swizzle_scales  # both directions: the extension's one call (swizzle True / False)

_FP8_DTYPES = {code: name for name, code in _FORMATS.items()}


def _compact_scales_shapes(shape) -> Tuple[tuple, tuple]:
    """The compact scale shapes of a tensor of `shape`: rowwise (*lead, ceil(K/32)), columnwise
    (ceil(M/32), K)."""
    m = _args.numel(shape[:-1])
    return (*shape[:-1], _args.ceil_div(shape[-1], 32)), (_args.ceil_div(m, 32), shape[-1])


def _nvfp4_parts_shapes(shape, direction: int) -> Tuple[tuple, tuple]:
    """The shapes an NVFP4 entry's parts take, as mxfp8.nvfp4.export_components returns them: the packed
    values and the compact E4M3 scales of the stored matrix, rowwise (*lead, K/2) and (*lead, ceil(K/16)),
    columnwise the (K, M) transpose, (K, M/2) and (K, ceil(M/16))."""
    if direction == 1:
        m = _args.numel(shape[:-1])
        return (shape[-1], m // 2), (shape[-1], _args.ceil_div(m, 16))
    return (*shape[:-1], shape[-1] // 2), (*shape[:-1], _args.ceil_div(shape[-1], 16))


def _nvfp4_logical_shape(where: str, data: Any, direction: int) -> tuple:
    """The logical shape (*lead, K) of NVFP4 `data` as Transformer Engine reads it back: rowwise
    (*lead, K/2) bytes, columnwise (K, d1, ..., dn/2) bytes for (d1, ..., dn, K); float4 data has the
    unpacked last dimension."""
    stored = _args.dims(f"{where}['data']", data)
    packed = 1 if "float4" in _args.dtype_name(f"{where}['data']", data) else 2
    if direction == 0:
        if not stored:
            raise ValueError(f"{where}['data'] is 0-dimensional: an NVFP4 tensor needs a last dimension K")
        return stored[:-1] + (stored[-1] * packed,)
    if len(stored) < 2:
        raise ValueError(f"{where}['data'] has {len(stored)} dimension(s): give columnwise NVFP4 data as TE stores "
                         "it, (K, *lead) with the last dimension packed, or pass 'shape'")
    return stored[1:-1] + (stored[-1] * packed, stored[0])


class _Spec:
    """One entry of export_bucket's `tensors`, read and checked by the extension (_mxfp8.read_spec, the
    reader import_tensors uses): unknown keys, data and scale_inv, "format", a real bool "swizzled", each
    format's own keys, E4M3_MAX, "shape"; the shard ("rows" / "cols", as export_components takes them:
    the bucket carries only it, as a 2-D (rows, cols) tensor) by _shard."""

    def __init__(self, name: Any, spec: Any):
        self.name, self.where = name, f"tensors[{name!r}]"
        (self.data, self.scale_inv, self.amax, self.nvfp4, self.swizzled, self.format, self.e4m3_max, given,
         sharded) = _mxfp8.read_spec(name, spec)
        self.shard = _shard.shard_spec(f"{self.where}: ", spec) if sharded else None
        if self.nvfp4:
            self.given_shape = None if given is None else tuple(given)
            return
        self.fp8_dtype = _FP8_DTYPES[self.format]
        self.shape = tuple(given) if given is not None else _args.dims(f"{self.where}['data']", self.data)
        if not self.shape:
            raise ValueError(f"{self.where}['data'] is 0-dimensional: an MXFP8 tensor needs a last dimension K")
        self.packed_shape = self.shape
        if self.shard is not None:
            self.packed_shape = _shard.shard_shape(self.shard, _args.numel(self.shape[:-1]), self.shape[-1])

    def nvfp4_shape(self, direction: int) -> tuple:
        """The logical shape of an NVFP4 spec read in `direction`."""
        if self.given_shape is not None:
            return self.given_shape
        return _nvfp4_logical_shape(self.where, self.data, direction)

    def nvfp4_packed_shape(self, direction: int) -> tuple:
        """The logical shape of what the bucket carries of an NVFP4 spec: the tensor, or its shard (rows, cols)."""
        shape = self.nvfp4_shape(direction)
        if self.shard is None:
            return shape
        return _shard.shard_shape(self.shard, _args.numel(shape[:-1]), shape[-1])


def _spec_inputs(specs: List[_Spec], stream: Any):
    """Every spec's buffers checked for one device (before any __dlpack__ call); the first decides the
    device and the stream."""
    objects = {}
    for spec in specs:
        objects[f"{spec.where}['data']"] = spec.data
        objects[f"{spec.where}['scale_inv']"] = spec.scale_inv
        if spec.nvfp4:
            objects[f"{spec.where}['amax']"] = spec.amax
    return _inputs(stream, **objects)


def _plan_object(obj: Any) -> Any:
    """What a plan holds of a source: a torch tensor as a new alias (detach()), whose storage stays the one
    the plan was made over when the caller's tensor is given another (``t.data = x``, module.to()); the
    extension pins the storages of every plan's sources, destinations and bucket (its storage_of) to the
    same end, and checks at each run that none was resized in place (moved)."""
    torch = _args.torch_module(obj)
    return obj.detach() if torch is not None else obj


def _spec_handle(spec: _Spec, dir_code: int, inputs, plan: bool = False) -> Any:
    """The library's handle on one spec's direction; its errors name the spec (tensors['w']: ...). plan:
    the handle of a prepared transfer (its sources held as _plan_object makes them)."""
    prefix = "rowwise" if dir_code == 0 else "columnwise"
    held = _plan_object if plan else (lambda obj: obj)
    data, scale_inv = held(spec.data), held(spec.scale_inv)
    try:
        if spec.nvfp4:
            return _mxfp8.Nvfp4Tensor(
                **{f"{prefix}_data": data, f"{prefix}_scale_inv": scale_inv, f"{prefix}_amax": held(spec.amax)},
                shape=None if spec.given_shape is None else list(spec.given_shape), swizzled=spec.swizzled,
                e4m3_max=int(spec.e4m3_max), stream=inputs.dlpack_stream, exchange=inputs.exchange)
        return _mxfp8.Tensor(
            **{f"{prefix}_data": data, f"{prefix}_scale_inv": scale_inv},
            shape=list(spec.shape), format=spec.format, swizzled=spec.swizzled, stream=inputs.dlpack_stream,
            data_name=f"{spec.where}['data']", scale_inv_name=f"{spec.where}['scale_inv']",
            exchange=inputs.exchange)
    except (ValueError, TypeError) as e:  # the library's message, said of which tensor
        if str(e).startswith(spec.where):
            raise
        raise type(e)(f"{spec.where}: {e}") from None


def _specs(tensors: Any, nothing_to: Optional[str] = None) -> List[_Spec]:
    """Every entry of `tensors` read; none is refused as "nothing to `nothing_to`" when that is given."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors must be a dict name -> {{'data', 'scale_inv', ...}}, got {type(tensors).__name__}")
    specs = [_Spec(name, spec) for name, spec in tensors.items()]
    if not specs and nothing_to:
        raise ValueError(f"tensors is empty: nothing to {nothing_to}")
    return specs


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
        tensors: name -> {"data": ..., "scale_inv": ..., "swizzled": True or False, and optionally
            "fp8_dtype" ("e4m3"), "shape", "rows", "cols"}: the arguments export_components takes, one
            direction's buffers ("swizzled" required, as there: the two layouts have the same size); with "rows" / "cols" the bucket carries only that shard (desc.shards of the transfer),
            described in the manifest as a 2-D (rows, cols) tensor. Other keys are an error.
            An NVFP4 tensor is {"format": "nvfp4", "data", "scale_inv", "amax", "swizzled", and optionally
            "shape", "e4m3_max" (448), "rows", "cols"}: the arguments mxfp8.nvfp4.export_components takes
            (with "rows" / "cols" of the logical (M, K), its shard: columns on 16-value blocks rowwise,
            one range of 16-aligned rows columnwise, a per-row amax cut with the rows). It travels as
            its packed values, compact E4M3 scales and float32 amax (TE's own second level, per tensor or
            per row: both global-scale conventions are computed from it exactly on the receiver); one
            bucket may mix MXFP8 and NVFP4 tensors (one transfer, still one launch).
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
        An NVFP4 entry is {"name", "format": "nvfp4", "shape", "direction", "scales_layout", "e4m3_max",
        "values_offset", "values_bytes", "scales_offset", "scales_bytes", "scales_shape", "amax_offset",
        "amax_bytes"}, and has no "fp8_dtype", so a reader that expects MXFP8 fails instead of misreading it.

    Raises:
        ValueError: bad input (messages name the tensor, e.g. tensors['w']['scale_inv']), tensors or the
        bucket on different devices, a read-only bucket; TypeError: an argument of the wrong type.
    """
    specs = _specs(tensors, "pack")
    dir_code = _choice("direction", direction, _DIRECTIONS)
    alignment = _args.power_of_two("alignment", alignment)
    inputs = _spec_inputs(specs, stream)
    if bucket is not None:
        inputs.check_output("bucket", bucket)
    handles = [_spec_handle(spec, dir_code, inputs) for spec in specs]
    manifest, plan, total, shards = _plan_bucket(specs, handles, direction, dir_code, alignment)
    if bucket is None:
        bucket = _new_bucket(inputs, specs, total, "bucket=: a CUDA buffer of at least")
    _fill(handles, plan, total, bucket, dir_code, inputs, "bucket", shards)
    return bucket, manifest


def _fill(handles, plan, total: int, bucket, dir_code: int, inputs, bucket_name: str, shards) -> None:
    """Fills `bucket` as `plan` (the parts of _plan_bucket, `total` bytes) says, in one launch (mxfp8_transfer
    into it); a bucket of fewer bytes is refused in `bucket_name`'s terms."""
    _mxfp8.export_bucket(handles, *plan, total, bucket, direction=dir_code, stream=inputs.stream,
                         dlpack_stream=inputs.dlpack_stream, bucket_name=bucket_name, shards=shards)


def _prepare_fill(handles, plan, total: int, bucket, dir_code: int, inputs, bucket_name: str, shards):
    """The prepared form of _fill (an _mxfp8.Plan whose run() fills the bucket)."""
    return _mxfp8.prepare_bucket(handles, *plan, total, bucket, direction=dir_code, dlpack_stream=inputs.dlpack_stream,
                                 bucket_name=bucket_name, shards=shards)


def _shards_of(specs: List[_Spec]):
    """The specs' shards as the extension takes them: None when every tensor is whole."""
    return [spec.shard for spec in specs] if any(spec.shard is not None for spec in specs) else None


def _plan_bucket(specs: List[_Spec], handles: List[Any], direction: str, dir_code: int, alignment: int):
    """The bucket of `specs` (their `handles`): its manifest, its layout (mxfp8_bucket_parts' values and
    scales parts, and the NVFP4 entries' amax parts), its size in bytes and the specs' shards. An NVFP4
    entry says "format": "nvfp4" with its amax part and E4M3_MAX (the amax travels; import_bucket writes
    the decode or encode global scale from it). A shard is described as the 2-D (rows, cols) tensor the
    bucket carries."""
    manifest = []
    for spec in specs:
        if spec.nvfp4:
            shape = spec.nvfp4_packed_shape(dir_code)
            manifest.append({"name": spec.name, "format": "nvfp4", "shape": shape, "direction": direction,
                             "scales_layout": "compact", "scales_shape": _nvfp4_parts_shapes(shape, dir_code)[1],
                             "e4m3_max": int(spec.e4m3_max)})
        else:
            manifest.append({"name": spec.name, "shape": spec.packed_shape, "fp8_dtype": spec.fp8_dtype,
                             "scales_shape": _compact_scales_shapes(spec.packed_shape)[dir_code],
                             "direction": direction, "scales_layout": "compact"})
    shards = _shards_of(specs)
    entries, nvfp4_entries, total = _mxfp8.bucket_plan(handles, direction=dir_code, alignment=alignment, shards=shards)
    for entry, (vo, vb, so, sb), (ao, ab, _) in zip(manifest, entries, nvfp4_entries):
        entry.update(values_offset=vo, values_bytes=vb, scales_offset=so, scales_bytes=sb)
        if entry.get("format") == "nvfp4":
            entry.update(amax_offset=ao, amax_bytes=ab)
    return manifest, (entries, nvfp4_entries), total, shards


def _planned_buckets(specs: List[_Spec], direction: str, dir_code: int, alignment: int, bucket_bytes: int, inputs,
                     plan: bool = False):
    """The buckets of iter_buckets and prepare_buckets: consecutive groups of `specs` whose sizes (the
    library's, each tensor alone) fit `bucket_bytes`, a tensor larger than that alone; per group (handles,
    manifest, parts, total bytes, shards)."""
    handles = [_spec_handle(spec, dir_code, inputs, plan) for spec in specs]
    sizes = _mxfp8.bucket_entry_bytes(handles, direction=dir_code, alignment=alignment, shards=_shards_of(specs),
                                      names=[spec.where for spec in specs])
    groups, size = [], 0
    for i, n in enumerate(sizes):
        if groups and size + n <= bucket_bytes:
            groups[-1].append(i)
            size += n
        else:
            groups.append([i])
            size = n
    return [(group_handles, *_plan_bucket([specs[i] for i in group], group_handles, direction, dir_code, alignment))
            for group in groups for group_handles in ([handles[i] for i in group],)]


def _new_bucket(inputs, specs, total: int, what: str) -> Any:
    """A new uint8 buffer of `total` bytes where the tensors are: torch.empty for torch inputs, numpy.empty
    for host memory; other CUDA inputs must bring their own (`what` says which argument)."""
    if inputs.torch is not None:
        return inputs.torch.empty(total, dtype=inputs.torch.uint8, device=specs[0].data.device)
    if not inputs.cuda:
        import numpy

        return numpy.empty(total, dtype=numpy.uint8)
    raise ValueError(f"pass {what} {total} bytes (no torch to allocate one)")


def _bucket_bytes(bucket: Any, name: str = "bucket") -> int:
    """The size of a 1-D contiguous byte buffer (NumPy, torch, CuPy); `name` is what the caller called it."""
    if not hasattr(bucket, "shape"):  # bytes, a list: not an array at all
        raise TypeError(f"{name} must be a 1-D byte array (NumPy, torch, CuPy, ...), got {type(bucket).__name__}")
    dims = tuple(bucket.shape or ())
    if len(dims) != 1:
        raise ValueError(f"{name} must be a 1-D byte buffer, got shape {dims}")
    dtype = getattr(bucket, "dtype", None)
    itemsize = getattr(dtype, "itemsize", None)
    if itemsize != 1:
        raise ValueError(f"{name} must hold bytes (uint8), got dtype {dtype}")
    stride = bucket.stride(0) if callable(getattr(bucket, "stride", None)) else getattr(bucket, "strides", (1,))[0]
    if dims[0] > 1 and stride != 1:
        raise ValueError(f"{name} must be contiguous, its stride is {stride}")
    return int(dims[0])


def _storage_holds(buffer: Any, name: str) -> None:
    """A torch buffer whose storage was shrunk under it (the caller's `untyped_storage().resize_()` between two
    buckets, of the buffer or of the bucket yielded, a view of it) raised torch's own RuntimeError when sliced.
    Its storage moving is fine (share_memory_(), as SGLang's serializer does): each fill takes it anew."""
    storage = getattr(buffer, "untyped_storage", None)
    if storage is None or not type(buffer).__module__.startswith("torch"):
        return
    held = storage().nbytes() - buffer.storage_offset()
    if held < buffer.numel():
        raise ValueError(f"the {name}'s storage was resized to {held + buffer.storage_offset()} bytes since "
                         f"iter_buckets began ({name} holds {buffer.numel()}; the bucket yielded is a view of it): "
                         "leave it as it is until the iteration ends")


def _as_uint8(bucket: Any) -> Any:
    """A byte buffer of any one-byte dtype (int8, bool, a float8) as uint8: what its parts are (the scales
    came back as int8 -125 for E8M0 131)."""
    dtype = bucket.dtype
    if type(bucket).__module__.startswith("torch"):
        import torch

        return bucket if dtype == torch.uint8 else bucket.view(torch.uint8)
    if getattr(dtype, "name", None) == "uint8" or not callable(getattr(bucket, "view", None)):
        return bucket
    import numpy

    return bucket.view(numpy.uint8)


def _read_once(manifest: Any) -> Any:
    """A manifest read once, into a list of dicts of plain ints (lists of them for shapes): the extension's
    check reads it, and the caller's Python reads it again, so both must see the same values. An iterable
    that gives other entries a second time, or a number whose __index__ gives another offset, passed the
    check and then named other bytes (views of another tensor's values, without a word). What is not a
    list of mappings, and values that are not ints, are left for the extension to refuse in its words."""
    if isinstance(manifest, (str, bytes, Mapping)) or not hasattr(manifest, "__iter__"):
        return manifest
    return [{k: _shape_once(v) if isinstance(k, str) and k.endswith("shape") else _int_once(v) if k != "name" else v
             for k, v in e.items()} if isinstance(e, Mapping) else e for e in manifest]


def _shape_once(value: Any) -> Any:
    """A sequence (a list, a tuple, a 1-D array) as a list of _int_once's; anything else as it is."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
        return value
    try:
        return [_int_once(d) for d in value]
    except TypeError:  # a 0-d array has a __len__ that refuses
        return value


def _int_once(value: Any) -> Any:
    """An int (not a bool) as a Python int; anything else as it is."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        return value
    try:
        return operator.index(value)
    except TypeError:  # NumPy's bool has an __index__ that refuses
        return value


def _check_manifest(bucket: Any, manifest: Any) -> List[dict]:
    """The manifest checked by the extension and the C library (mxfp8_transfer_check of the bucket: types,
    names, sizes, bounds, overlaps, scale shapes, NVFP4 fields, as import_bucket checks them), every entry's
    scales compact. Returns the entries with Python ints and tuples (an NVFP4 entry with its values_shape)."""
    manifest = _read_once(manifest)
    _mxfp8.bucket_manifest_check(bucket, manifest, need_scales_shape=True)
    entries = []
    for i, e in enumerate(manifest):
        _check_compact(f"manifest[{i}]", e)
        e = dict(e, shape=tuple(e["shape"]), scales_shape=tuple(e["scales_shape"]))
        if e.get("format") == "nvfp4":
            e["values_shape"] = _nvfp4_parts_shapes(e["shape"], _DIRECTIONS[e["direction"]])[0]
        entries.append(e)
    return entries


def _check_compact(where: str, e: Mapping[str, Any]) -> None:
    """unpack_bucket's views are the bytes as they lie: an entry whose scales the bucket holds in another
    layout (a sender's "scales_layout") would come back as compact scales that are not. import_bucket
    moves such an entry into a parameter of the layout wanted."""
    layout = e.get("scales_layout", "compact")
    if layout != "compact":
        raise ValueError(f"{where}: scales_layout is {layout!r}: unpack_bucket gives views of compact scales only; "
                         "import_bucket(bucket, manifest, params) writes them into parameters of any layout")


def unpack_bucket(bucket: Any, manifest: List[Dict[str, Any]]) -> Dict[str, Components]:
    """Views of each tensor's values (float8 for torch, uint8 for NumPy) and compact uint8 scales inside
    a bucket made by export_bucket. Nothing is copied: the views share the bucket's memory. An NVFP4 entry
    gives an mxfp8.nvfp4.Components: views of its packed uint8 values and compact uint8 E4M3 scales, and its
    decode global scale (vLLM's weight_scale_2), the one part computed (from the amax the bucket carries).

    The manifest is checked first (it may come from another process): every entry complete, its sizes
    those of its shape and compact scale shape, its parts inside the bucket and overlapping no other part;
    a ValueError names the entry and the field that is wrong, a TypeError a field of the wrong type."""
    _bucket_bytes(bucket)
    module = type(bucket).__module__
    bucket = _as_uint8(bucket)  # any one-byte dtype is bytes (as import_bucket reads it): views of uint8
    parts = {}
    for e in _check_manifest(bucket, manifest):
        if e.get("format") == "nvfp4":
            parts[e["name"]] = _unpack_nvfp4(bucket, e, module.startswith("torch"))
            continue
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


def _unpack_nvfp4(bucket: Any, e: Mapping[str, Any], torch_bucket: bool) -> "nvfp4.Components":
    """Views of an NVFP4 entry's packed uint8 values and compact uint8 E4M3 scales, and its decode global
    scale (amax / (6 * E4M3_MAX), a float32 division: vLLM ModelOpt's weight_scale_2), a new array computed
    from the amax the bucket carries."""
    values = bucket[e["values_offset"]:e["values_offset"] + e["values_bytes"]]
    scales = bucket[e["scales_offset"]:e["scales_offset"] + e["scales_bytes"]]
    amax = bucket[e["amax_offset"]:e["amax_offset"] + e["amax_bytes"]]
    if torch_bucket:
        import torch

        amax = amax.view(torch.float32)  # aligned: _check_manifest's library check refuses an unaligned amax
        divisor = torch.tensor(6.0 * e["e4m3_max"], dtype=torch.float32, device=amax.device)
    else:
        import numpy

        amax = amax.view(numpy.float32)
        divisor = numpy.float32(6.0 * e["e4m3_max"])
    return nvfp4.Components(values.reshape(e["values_shape"]), scales.reshape(e["scales_shape"]), amax / divisor)


def swizzle_scales(compact: Any, out: Any = None, *, stream: Any = None) -> Any:
    """The cuBLAS 128x4 layout of a (R, C) compact scale matrix, padding zero: what a consumer that feeds
    cuBLAS needs. `out`: roundup(R,128) * roundup(C,4) writeable bytes on compact's device; None: a new
    1-D buffer like `compact`."""
    return _swizzle_scales(compact, out, True, None, None, stream)


def unswizzle_scales(swizzled: Any, rows: int, cols: int, out: Any = None, *, stream: Any = None) -> Any:
    """The (rows, cols) compact scale matrix held in a swizzled buffer (into `out`, writeable, on
    swizzled's device, when given)."""
    return _swizzle_scales(swizzled, out, False, rows, cols, stream)


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
    specs = _specs(tensors)  # every spec checked, and planned, before the first bucket is filled
    if not specs:
        return
    inputs = _spec_inputs(specs, stream)
    caller_buffer = buffer is not None
    if caller_buffer:
        inputs.check_output("buffer", buffer)
        _bucket_bytes(buffer, "buffer")  # 1-D bytes: each bucket is buffer[:total]
    # The handles are made before the first bucket and fill the later ones after the caller's code has run
    # between yields: the torch sources' storages are held (`t.data = x` then leaves the handles the memory
    # they describe) and each group's are checked before its fill (a storage resized in place, as FSDP
    # frees parameters, has freed it), as a Plan's are before each run.
    pins = [_mxfp8.StoragePins((spec.data, spec.scale_inv, spec.amax)) for spec in specs]
    planned = _planned_buckets(specs, direction, dir_code, alignment, bucket_bytes, inputs)
    largest = max(total for _, _, _, total, _ in planned)
    if caller_buffer and _bucket_bytes(buffer) < largest:  # before the first bucket: a step is sent whole or not at all
        raise ValueError(f"buffer holds {_bucket_bytes(buffer)} bytes, the largest bucket needs {largest}: "
                         "make it at least bucket_bytes and as large as the largest tensor")
    first = 0
    for handles, manifest, plan, total, shards in planned:
        for spec, held in zip(specs[first:first + len(handles)], pins[first:first + len(handles)]):
            held.check(f"{spec.where}: a source's storage was resized since iter_buckets began",
                       "the memory it described is freed; start a new iteration")
        first += len(handles)
        if buffer is not None:
            _storage_holds(buffer, "buffer")
        if buffer is None or _bucket_bytes(buffer) < total:
            buffer = _new_bucket(inputs, specs, total, "buffer=: a CUDA buffer of at least")  # kept, grown as needed
        _fill(handles, plan, total, buffer[:total], dir_code, inputs, "buffer", shards)
        yield buffer[:total], manifest
