"""The receiver's side of weight sync: write tensors from a bucket, or straight from a trainer's storage,
into the engine's own parameters, values copied and scales in the layout each parameter wants.

    mxfp8.import_bucket(bucket, manifest, params)                  # one launch for the whole bucket
    plan = mxfp8.prepare_import_bucket(bucket, manifest, params)   # checked once...
    plan.run()                                                     # ...one launch per step, graph-safe

``params`` maps each name of the manifest to the engine's parameter buffers: ``(values, scales)``, or
``(values, scales, layout)`` to give one tensor its own layout. Layouts: ``"compact"`` (scales
``(*lead, ceil(K/32))`` row-major, what vLLM / SGLang load), ``"cutlass_128x4"`` (the cuBLAS / CUTLASS
128x4 swizzled layout, flat, padding zero), ``"deepgemm"`` (DeepGEMM's packed UE8M0 scales: int32
``(M, ceil(C/4))`` MN-major, for Blackwell), ``"deepgemm_float32"`` (DeepGEMM's scales on Hopper: float32
``(*lead, ceil(K/32))``, each the float32 of bits ``e << 23``; both rowwise only); ``"trtllm"`` and ``"trtllm_gated"`` (FlashInfer's TRT-LLM MoE
layouts) move value rows, so only ``mxfp8.convert`` writes them. ``scales_shape`` gives the buffer a layout needs; ``zero_exponent_as_one=True``
writes every E8M0 exponent byte 0 as 1 (NeMo RL's convention).
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

from . import _args, _shard
from ._api import _DIRECTIONS, _FORMATS
from ._manifest import LAYOUT_WORDS, LAYOUTS
from ._bucket import _read_once
from ._plan import Plan
from ._mxfp8 import import_bucket as _c_import_bucket, import_tensors as _c_import_tensors
from ._mxfp8 import has_exchange_api as _has_exchange_api, layout_bytes as _c_layout_bytes

_FIXUP = {False: 0, True: 1}  # mxfp8_scale_fixup: none, zero exponent as one
_GLOBAL_SCALES = {"decode": 0, "encode": 1}  # mxfp8_nvfp4_global_scale


def _code(name: str, value: str, table: Mapping[str, int]) -> int:
    try:
        known = value in table
    except TypeError:  # unhashable (an array given where a word goes): refused as any other value
        known = False
    if not known:
        raise ValueError(f"{name} is {value!r}, expected one of {', '.join(map(repr, table))}")
    return table[value]


def scales_shape(shape: Sequence[int], layout: str = "compact", direction: str = "rowwise") -> Tuple[int, ...]:
    """The shape of the scale parameter a tensor of logical `shape` needs in `layout`: compact
    ``(*lead, ceil(K/32))`` rowwise or ``(ceil(M/32), K)`` columnwise; ``cutlass_128x4`` one flat
    ``roundup(R, 128) * roundup(C, 4)`` buffer (columnwise: of the transpose, as cuBLAS reads it);
    ``deepgemm`` the int32 storage of DeepGEMM's ``(M, ceil(C/4))`` tensor, flat:
    ``ceil(C/4) * roundup(M, 4)`` int32 (``mxfp8.convert`` returns it viewed with DeepGEMM's strides);
    ``deepgemm_float32`` the compact shape, of float32 elements."""
    shape = tuple(_args.shape("shape", shape))  # int() took 64.9 as 64 and "64" as 64
    if not shape or any(d < 0 for d in shape):  # (-1, -1, 64) has 1 row by the product
        raise ValueError(f"shape is {shape}: expected a last dimension K and no negative dimension")
    m, k = _args.integer("the rows of shape (the product of its leading dimensions)", _args.numel(shape[:-1])), shape[-1]
    col = _code("direction", direction, _DIRECTIONS) == 1
    r, c = (-(-m // 32), k) if col else (m, -(-k // 32))
    nbytes = layout_bytes(layout, r, c, direction)  # the library's size (and its direction check)
    if layout in ("compact", "deepgemm_float32"):
        return (r, c) if col else (*shape[:-1], c)
    return (nbytes // (4 if layout in LAYOUT_WORDS else 1),)


def layout_bytes(layout: str, rows: int, cols: int, direction: str = "rowwise") -> int:
    """The bytes an R x C scale matrix takes in `layout` (mxfp8_layout_bytes)."""
    return _c_layout_bytes(_code("layout", layout, LAYOUTS), _code("direction", direction, _DIRECTIONS),
                           _args.integer("rows", rows), _args.integer("cols", cols))


def _fixup(value: Any) -> int:
    return _FIXUP[_args.flag("zero_exponent_as_one", value)]


def _call_stream(first: Any, stream: Any, name: str, prepare: bool) -> Tuple[bool, Optional[int], Optional[int]]:
    """(cuda, stream, dlpack_stream) of a call whose first object is `first` (`name` to the caller), as
    _args.inputs decides them: stream None with a framework that has a DLPack C exchange API (torch) leaves
    the framework's current stream to the extension, which takes its objects through the API. An immediate
    call of that kind needs nothing else (cuda is a plan's), so it skips asking `first` its device here: the
    extension takes it through the API and compares every device."""
    if stream is None and not prepare and _has_exchange_api(first):
        return False, None, None
    inputs = _args.inputs(stream, **{name: first})
    return inputs.cuda, inputs.stream, inputs.dlpack_stream


def _shards(names: List[str], shards: Optional[Mapping[str, Mapping[str, Any]]], holder: str = "the manifest"):
    """The C library's shard fields per manifest entry (None: whole), from {name: {"rows", "cols"}};
    `holder` names what `names` come from, for the refusal of a name it lacks."""
    if shards is None:
        return None
    if not isinstance(shards, Mapping):
        raise TypeError(f"shards must be a dict name -> {{'rows': ..., 'cols': ...}}, got {type(shards).__name__}")
    unknown = [n for n in shards if n not in set(names)]
    if unknown:
        raise KeyError(f"shards names {unknown[:5]}, which {holder} does not hold")
    out = []
    for name in names:
        spec = shards.get(name)
        if spec is not None and not isinstance(spec, Mapping):
            raise TypeError(f"shards[{name!r}] must be a dict with 'rows' and/or 'cols', got {type(spec).__name__}")
        extra = [k for k in (spec or {}) if k not in ("rows", "cols")]
        if extra:  # a misspelt "row" would otherwise import the whole tensor
            raise ValueError(f"shards[{name!r}] has {', '.join(map(repr, extra))}: a shard takes 'rows' and 'cols' only")
        out.append(None if spec is None else _shard.shard_spec(f"shards[{name!r}]: ", spec))
    return out


def _bucket_call(bucket: Any, manifest: List[Mapping[str, Any]], params: Mapping[str, Any], layout: str,
                 stream: Any, prepare: bool, zero_exponent_as_one: bool = False,
                 shards: Optional[Mapping[str, Mapping[str, Any]]] = None, global_scale: str = "decode"):
    cuda, stream_ptr, dlpack_stream = _call_stream(bucket, stream, "bucket", prepare)
    if shards is not None:  # the manifest's names, for the shards' order (the extension reads the rest)
        manifest = _read_once(manifest)
        shards = _shards([e.get("name") if isinstance(e, Mapping) else None for e in manifest], shards)
    core = _c_import_bucket(
        bucket, manifest, params, _code("layout", layout, LAYOUTS), LAYOUTS, _fixup(zero_exponent_as_one), stream_ptr,
        dlpack_stream, prepare, shards, _code("global_scale", global_scale, _GLOBAL_SCALES))
    return Plan(core, cuda) if prepare else None


def import_bucket(bucket: Any, manifest: List[Mapping[str, Any]], params: Mapping[str, Any], *,
                  layout: str = "compact", stream: Any = None, zero_exponent_as_one: bool = False,
                  shards: Optional[Mapping[str, Mapping[str, Any]]] = None, global_scale: str = "decode") -> None:
    """Writes every tensor of `bucket` (a 1-D byte buffer made by export_bucket / iter_buckets, or any
    bucket its `manifest` describes) into ``params[name]``. The manifest entries are export_bucket's:
    name, shape, fp8_dtype, the offsets and sizes, and optionally "direction" and "scales_layout" (the
    layout the scales have in the bucket; "compact" when absent). Everything is checked before anything
    is written; CUDA: one launch on `stream`, the call does not wait. A part whose size does not match
    the layout its entry records is refused (a double transform is an error, not noise).

    shards: {name: {"rows": (r0, r1) or [(r0, r1), ...], "cols": (k0, k1)}}: this receiver takes only
    that shard of a tensor the bucket carries whole (resharding: each rank maps the trainer's bucket and
    imports its own part), into a parameter of the shard's size (``scales_shape((rows, cols), ...)``).
    The boundaries follow export_components' rows= / cols=. A shard goes into "compact" or
    "cutlass_128x4" parameters, without zero_exponent_as_one. A shard of an NVFP4 entry follows its
    16-value blocks (rowwise: cols at multiples of 16 or K; columnwise: rows at multiples of 16 or M, one
    range) and lands as its stored matrix (columnwise: (cols, rows)); a per-tensor amax is the shard's,
    a per-row one gives the shard's rows' global scales.

    NVFP4 entries ("format": "nvfp4", from a bucket of specs with "format": "nvfp4"): ``params[name]`` is
    ``(values, scales, global_scale)`` or ``(values, scales, global_scale, layout)``: values uint8
    ``(rows * cols / 2)`` bytes (any shape, e.g. vLLM's ``[N, K/2]`` weight) or float4_e2m1fn, scales
    uint8 / float8_e4m3fn in "compact" (``[N, ceil(K/16)]``) or "cutlass_128x4" layout (16-value blocks),
    global_scale one float32 per amax. The bucket carries the amax; ``global_scale="decode"`` writes
    amax / (6 * E4M3_MAX), vLLM ModelOpt's weight_scale_2, "encode" TE's (6 * E4M3_MAX) / amax.
    zero_exponent_as_one applies to MXFP8 entries only."""
    _bucket_call(bucket, manifest, params, layout, stream, False, zero_exponent_as_one, shards, global_scale)


def prepare_import_bucket(bucket: Any, manifest: List[Mapping[str, Any]], params: Mapping[str, Any], *,
                          layout: str = "compact", zero_exponent_as_one: bool = False,
                          shards: Optional[Mapping[str, Mapping[str, Any]]] = None,
                          global_scale: str = "decode") -> Plan:
    """import_bucket checked once; ``plan.run(stream)`` imports whatever the bucket holds at each run."""
    return _bucket_call(bucket, manifest, params, layout, None, True, zero_exponent_as_one, shards, global_scale)


def import_tensors(tensors: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any], *,
                   direction: str = "rowwise", layout: str = "compact", stream: Any = None,
                   zero_exponent_as_one: bool = False,
                   shards: Optional[Mapping[str, Mapping[str, Any]]] = None, global_scale: str = "decode") -> None:
    """The direct path: each source (``{"data", "scale_inv", "swizzled"}``, required, and optionally
    ``"fp8_dtype"`` and ``"shape"``: the trainer's Transformer Engine storage, e.g. mapped over CUDA IPC)
    written into ``params[name]`` in one pass, the layout transform fused into it. One launch for all
    tensors on CUDA.

    shards: as for import_bucket, {name: {"rows", "cols"}}: this receiver's shard of each source
    (the transfer's desc.shards). A shard of swizzled storage goes into "compact" parameters only.

    NVFP4 storage ({"format": "nvfp4", "data", "scale_inv", "amax", "swizzled", "shape", "e4m3_max"}, as
    export_bucket takes it) goes into ``(values, scales, global_scale[, layout])`` parameters as import_bucket
    writes an NVFP4 entry, with the amax in the `global_scale` convention (desc.global_scale),
    and takes shards as import_bucket takes an NVFP4 entry's (rows and 16-aligned columns of (M, K))."""
    # One call of the extension (issue 33): it reads every argument as _code, _fixup and _shards read them,
    # each source spec and its params entry, and runs the transfer.
    _c_import_tensors(tensors, params, direction, layout, stream, zero_exponent_as_one, shards, global_scale, False)


def prepare_import_tensors(tensors: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any], *,
                           direction: str = "rowwise", layout: str = "compact",
                           zero_exponent_as_one: bool = False,
                           shards: Optional[Mapping[str, Mapping[str, Any]]] = None,
                           global_scale: str = "decode") -> Plan:
    """import_tensors checked once; ``plan.run(stream)`` moves whatever the sources hold at each run."""
    return Plan(*_c_import_tensors(tensors, params, direction, layout, None, zero_exponent_as_one, shards, global_scale,
                                   True))
