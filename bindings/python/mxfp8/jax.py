"""The library's operations inside ``jax.jit``: XLA FFI targets (libmxfp8_xla, next to libmxfp8 in this
package) wrapped as functions of ``jax.Array``\\ s.

    import mxfp8.jax as mj

    @jax.jit
    def step(w):
        values, scales = mj.quantize(w, scales="swizzled")                 # TE-exact, in TE's layout
        return mj.convert(values, scales, "cutlass_128x4", swizzled=True)  # what the engine loads

Each call is one custom call in the compiled program: on the GPU it runs on XLA's stream, with no host
round trip; on the CPU platform the library's host path runs. Shapes, dtypes and options are static (they
come from the inputs' shapes and the keyword arguments), so the output shapes are known at trace time, and
so is every refusal: before a call is added to the program, the library checks it on its operands' shapes
and dtypes alone (libmxfp8_xla's ``mxfp8_xla_check``: the handler's own path with ``MXFP8_CHECK_ONLY``,
at addresses no memory backs), so a bad input or option raises here, with the library's message —
ValueError for an input it refuses, TypeError for what it does not do — and nothing reaches a device.
``jax.vmap`` maps a leading batch axis by running the call once per element (``vmap_method="sequential"``).

Operations: ``unswizzle_scales`` / ``swizzle_scales`` (one scale matrix, 128x4), ``export_components``
(values and compact scales from TE's storage), ``convert`` (one tensor or
grouped experts into an engine layout, as :func:`mxfp8.convert`), ``quantize`` and ``dequantize`` (MXFP8,
1x32 blocks), ``nvfp4_quantize`` and ``nvfp4_dequantize`` (the amax computed in the call).
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _args, _mxfp8
from ._convert import _GROUPED_SCALES
from ._import import _DIRECTIONS, _FORMATS, _code, _fixup, layout_bytes
from ._manifest import LAYOUT_WORDS, LAYOUTS
from ._nvfp4_quantize import _FOUR_OVER_SIX, _shapes as _nvfp4_shapes
from ._quantize import _ROUNDINGS, _SCALE_LAYOUTS

_LIBRARY = "libmxfp8_xla.so"
_OPERATIONS = ("unswizzle_scales", "swizzle_scales", "convert", "quantize", "dequantize", "nvfp4_quantize",
               "nvfp4_dequantize")
_FP8 = {"e4m3": jnp.float8_e4m3fn, "e5m2": jnp.float8_e5m2}


def xla_library_path() -> str:
    """The path of libmxfp8_xla.so. It is built into the package when jaxlib's FFI headers are found at
    build time (``pip install --no-build-isolation .`` with jax installed)."""
    path = Path(__file__).with_name(_LIBRARY)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: this mxfp8 was built without jaxlib's FFI headers. Install jax and reinstall "
            "mxfp8 (pip install --no-build-isolation .)")
    return str(path)


class _Operand(ctypes.Structure):
    """mxfp8_xla_operand: one operand of a call as a tracer knows it."""

    _fields_ = [("ndim", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64)), ("dtype", ctypes.c_char_p)]


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    library = ctypes.CDLL(xla_library_path())
    library.mxfp8_xla_check.restype = ctypes.c_int32
    library.mxfp8_xla_check.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Operand), ctypes.c_int32,
                                        ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int64),
                                        ctypes.c_int32, ctypes.POINTER(ctypes.c_char_p)]
    return library


@functools.lru_cache(maxsize=None)
def _registered() -> bool:
    """Registers every target with XLA, once: the host handlers for the CPU platform and the CUDA ones
    for a CUDA platform when this jaxlib has one."""
    library = _library()
    for name in _OPERATIONS:
        jax.ffi.register_ffi_target(f"mxfp8_{name}", jax.ffi.pycapsule(getattr(library, f"mxfp8_xla_{name}_host")),
                                    platform="cpu")
    try:
        cuda = bool(jax.devices("cuda"))
    except RuntimeError:  # no CUDA backend in this jaxlib
        cuda = False
    if cuda:
        for name in _OPERATIONS:
            jax.ffi.register_ffi_target(f"mxfp8_{name}",
                                        jax.ffi.pycapsule(getattr(library, f"mxfp8_xla_{name}_cuda")), platform="CUDA")
    return True


# The element types the library takes. Anything else is refused here, before JAX converts it on its way
# into the call without a word (a NumPy float64 array to float32 when x64 is off, a list to int32).
_TAKEN = tuple(np.dtype(t) for t in (np.uint8, np.int32, np.float32, np.float16, jnp.bfloat16, jnp.float8_e4m3fn,
                                      jnp.float8_e5m2, jnp.float8_e8m0fnu))


def _operand(name: str, array: Any) -> Any:
    """`array` (a jax.Array, a tracer or a NumPy array) checked for an element type the library takes."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or not hasattr(array, "shape"):
        raise TypeError(f"{name} must be an array (jax.Array or NumPy), got {type(array).__name__}")
    try:
        np.dtype(dtype)
    except TypeError:  # a torch tensor, a PRNG key array: no NumPy dtype
        raise TypeError(f"{name} must be a jax.Array or NumPy array of a NumPy dtype, got {type(array).__name__} "
                        f"of {dtype}") from None
    if np.dtype(dtype) not in _TAKEN:
        raise ValueError(f"{name} is {np.dtype(dtype)}, which the library never takes (its types: "
                         f"{', '.join(str(t) for t in _TAKEN)}); JAX would not say so before converting it")
    return array


_CHECK_ERRORS = {3: ValueError, 12: TypeError, 8: MemoryError}  # XLA's kInvalidArgument, kUnimplemented, ...


@functools.lru_cache(maxsize=4096)
def _check(name: str, operands: Tuple[Tuple[Tuple[int, ...], str], ...], attributes: Tuple[Tuple[str, int], ...]):
    """The library's checks of the call `name` on operands (shape, dtype name: the arguments, then the
    results) and attributes, run on shapes alone by libmxfp8_xla: the error the call would end in when it
    runs, raised now, while the program is traced."""
    shapes = [(ctypes.c_int64 * max(len(shape), 1))(*shape) for shape, _ in operands]
    described = (_Operand * len(operands))(*(_Operand(len(shape), dims, dtype.encode())
                                            for (shape, dtype), dims in zip(operands, shapes)))
    names = (ctypes.c_char_p * len(attributes))(*(k.encode() for k, _ in attributes))
    values = (ctypes.c_int64 * len(attributes))(*(v for _, v in attributes))
    message = ctypes.c_char_p()
    code = _library().mxfp8_xla_check(name.encode(), described, len(operands), names, values, len(attributes),
                                      ctypes.byref(message))
    if code:
        raise _CHECK_ERRORS.get(code, RuntimeError)(message.value.decode())


def _call(name: str, results: Any, operands: Sequence[Tuple[str, Any]], **attributes: Any) -> Any:
    _registered()
    arrays = [_operand(n, a) for n, a in operands]
    described = (*arrays, *(results if isinstance(results, (list, tuple)) else [results]))
    _check(name, tuple((tuple(int(d) for d in x.shape), np.dtype(x.dtype).name) for x in described),
           tuple((k, int(v)) for k, v in attributes.items()))
    call = jax.ffi.ffi_call(f"mxfp8_{name}", results, vmap_method="sequential")
    # int32 attributes, but for those given as np.int64 (the padding's extents, int64 in the C options)
    return call(*arrays, **{k: v if isinstance(v, np.int64) else np.int32(v) for k, v in attributes.items()})


def _scale_matrix(name: str, shape: Sequence[int], direction: str) -> Tuple[int, int]:
    """(R, C) of the scales of a tensor of logical `shape` (the argument `name`'s) in `direction`."""
    if not shape:
        raise ValueError(f"{name} is 0-dimensional: an MXFP8 tensor needs a last dimension K")
    m, k = _args.numel(shape[:-1]), int(shape[-1])
    return ((-(-m // 32), k) if _code("direction", direction, _DIRECTIONS) == 1 else (m, -(-k // 32)))


def _fp8_format(data: Any, fp8_dtype: Optional[str]) -> int:
    """The mxfp8_format of `data`: from its float8 dtype, or fp8_dtype for uint8 bytes."""
    for name, dtype in _FP8.items():
        if data.dtype == dtype:
            if fp8_dtype not in (None, name):
                raise ValueError(f"fp8_dtype is {fp8_dtype!r} but data is {data.dtype}")
            return _FORMATS[name]
    return _code("fp8_dtype", fp8_dtype or "e4m3", _FORMATS)


def unswizzle_scales(swizzled: jax.Array, rows: int, cols: int) -> jax.Array:
    """The compact (rows, cols) uint8 matrix whose 128x4 swizzled layout is `swizzled`
    (``roundup(rows, 128) * roundup(cols, 4)`` bytes, any shape; mxfp8_unswizzle_scales)."""
    shape = (_args.integer("rows", rows, 0, _args.INT32_MAX), _args.integer("cols", cols, 0, _args.INT32_MAX))
    return _call("unswizzle_scales", jax.ShapeDtypeStruct(shape, jnp.uint8), [("swizzled", swizzled)])


def swizzle_scales(compact: jax.Array) -> jax.Array:
    """The 128x4 swizzled layout of the compact scale matrix `compact` (its shape gives R and C,
    leading dimensions flattened into rows), flat, padding zero (mxfp8_swizzle_scales)."""
    _operand("compact", compact)
    if compact.ndim == 0:
        raise ValueError("compact is 0-dimensional: a scale matrix needs its columns as the last dimension")
    r, c = _args.numel(compact.shape[:-1]), int(compact.shape[-1])
    n = layout_bytes("cutlass_128x4", r, c)
    return _call("swizzle_scales", jax.ShapeDtypeStruct((n,), jnp.uint8), [("compact", compact)])


class Converted(NamedTuple):
    """What convert returns: the values (None unless asked for) and the scales."""

    values: Any
    scales: Any


def convert(data: jax.Array, scale_inv: jax.Array, target: str, *, swizzled: bool, direction: str = "rowwise",
            fp8_dtype: Optional[str] = None, num_experts: Optional[int] = None, scales: str = "padded",
            values: bool = False, zero_exponent_as_one: bool = False, pad_rows_to: int = 0, pad_cols_to: int = 0,
            pad_scale: int = 127) -> Converted:
    """One MXFP8 tensor (or `num_experts` grouped experts of equal rows, stacked) in the engine layout
    `target`, as :func:`mxfp8.convert` writes it (its docs list the targets and the engine parameter
    each one is). data: the values (float8, or uint8 with fp8_dtype), whose shape is the logical shape;
    scale_inv: the scales as stored (compact, TE-padded or, with `swizzled`, 128x4).

    scales: with num_experts, how each expert's scales sit in `scale_inv`, back to back: ``"padded"``
    (Transformer Engine's per-expert allocation, roundup(N, 128) x roundup(C, 4), row-major or swizzled) or
    ``"compact"`` (N x C each, row-major only); bytes past the experts' scales are never read (Transformer
    Engine's JAX grouped quantize allocates for its worst case).

    The scales come back as the engine's parameter: ``"compact"`` and ``"deepgemm_float32"`` shaped
    ``(*lead, ceil(K/32))`` (``(ceil(M/32), K)`` columnwise, compact only; grouped ``[E, N, C]``), ``"trtllm"`` / ``"trtllm_gated"`` ``(R, roundup(C, 4))``
    per expert, ``"cutlass_128x4"`` flat per matrix, and ``"deepgemm"`` as the int32 storage of DeepGEMM's
    MN-major tensor, flat per expert (JAX arrays have no strides: ``storage.reshape(ceil(C/4),
    roundup(N, 4)).T[:N]`` is the logical ``[N, ceil(C/4)]``). values=True also returns the values in the
    target's row order (required by the TRT-LLM targets, which permute rows).

    pad_rows_to / pad_cols_to / pad_scale: the engine's padding, as :func:`mxfp8.convert` takes it (vLLM's
    MXFP8 MoE alignment before its TRT-LLM shuffle: ``pad_rows_to=128, pad_cols_to=256`` for w13,
    ``256, 128`` for w2); the padded weight is a new array, so values=True is required."""
    if not isinstance(target, str) or target not in LAYOUTS:
        raise ValueError(f"target is {target!r}, expected one of {', '.join(map(repr, LAYOUTS))}")
    shape = tuple(int(d) for d in _operand("data", data).shape)
    if not shape:
        raise ValueError("data is 0-dimensional: an MXFP8 tensor needs a last dimension K")
    experts = 0 if num_experts is None else _args.integer("num_experts", num_experts, 1, _args.INT32_MAX)
    # The engine parameter's shapes (padded when asked) and one matrix's scale bytes: the extension's rule,
    # the one mxfp8.convert allocates by (it refuses what the target cannot take).
    values_shape, scales_shape, per = _mxfp8.engine_parameter(shape, target, direction, num_experts, pad_rows_to,
                                                              pad_cols_to)
    word = LAYOUT_WORDS.get(target)
    if target == "deepgemm":  # no strides in JAX: the int32 storage, flat per expert
        scales_shape = ((experts,) if experts else ()) + (per // 4,)
    dtype = {"int32": jnp.int32, "float32": jnp.float32}.get(word, jnp.uint8)
    results = [jax.ShapeDtypeStruct(scales_shape, dtype)]
    if values is not None and _args.flag("values", values):  # None: not asked for, as mxfp8.convert takes it
        results.insert(0, jax.ShapeDtypeStruct(values_shape, data.dtype))
    out = _call("convert", results, [("data", data), ("scale_inv", scale_inv)], format=_fp8_format(data, fp8_dtype),
                swizzled=_args.flag("swizzled", swizzled), direction=_code("direction", direction, _DIRECTIONS),
                target=LAYOUTS[target], scale_fixup=_fixup(zero_exponent_as_one), num_experts=experts,
                grouped_scales=_code("scales", scales, _GROUPED_SCALES), pad_rows_to=np.int64(pad_rows_to),
                pad_cols_to=np.int64(pad_cols_to),  # read as integers by engine_parameter; checked by the library
                pad_scale=_args.integer("pad_scale", pad_scale, -2**31, _args.INT32_MAX))
    return Converted(out[0], out[1]) if len(out) == 2 else Converted(None, out[0])


def export_components(data: jax.Array, scale_inv: jax.Array, *, swizzled: bool, direction: str = "rowwise",
                      fp8_dtype: Optional[str] = None) -> Tuple[jax.Array, jax.Array]:
    """(values, compact scales) of one direction, as :func:`mxfp8.export_components` gives them: the values
    as they are (a JAX array is immutable, so nothing needs copying) and the scales compact, ``(*lead,
    ceil(K/32))`` rowwise or ``(ceil(M/32), K)`` columnwise, from TE's padded or swizzled storage."""
    return data, convert(data, scale_inv, "compact", swizzled=swizzled, direction=direction, fp8_dtype=fp8_dtype).scales


def quantize(x: jax.Array, *, fp8_dtype: str = "e4m3", rounding: str = "rceil", scales: str = "compact",
             direction: str = "rowwise", values_dtype: str = "fp8") -> Tuple[jax.Array, jax.Array]:
    """One direction of `x` (bfloat16, float16 or float32, shape (*lead, K)) quantized to MXFP8 with 1x32
    blocks, bit-exact with :func:`mxfp8.quantize`: (values, scales). values: x's shape, float8 (or uint8
    with values_dtype="uint8"); scales uint8: ``"compact"`` ``(*lead, ceil(K/32))`` rowwise or
    ``(ceil(M/32), K)`` columnwise, ``"padded"`` / ``"swizzled"`` Transformer Engine's buffer
    ``(roundup(M, 128), roundup(ceil(K/32), 4))`` (columnwise ``(roundup(ceil(M/32), 4), roundup(K, 128))``)."""
    shape = tuple(int(d) for d in _operand("x", x).shape)
    r, c = _scale_matrix("x", shape, direction)
    layout = _code("scales", scales, _SCALE_LAYOUTS)
    if layout == 0:
        scales_shape = (r, c) if direction == "columnwise" else shape[:-1] + (c,)
    elif direction == "columnwise":  # Transformer Engine's padded buffer (swizzled: the same bytes, permuted)
        scales_shape = (_args.round_up(r, 4), _args.round_up(c, 128))
    else:
        scales_shape = (_args.round_up(r, 128), _args.round_up(c, 4))
    fmt = _code("fp8_dtype", fp8_dtype, _FORMATS)
    values = {"fp8": _FP8[fp8_dtype], "uint8": jnp.uint8}
    if not isinstance(values_dtype, str) or values_dtype not in values:
        raise ValueError(f"values_dtype is {values_dtype!r}, expected 'fp8' or 'uint8'")
    return tuple(_call("quantize", [jax.ShapeDtypeStruct(shape, values[values_dtype]),
                                    jax.ShapeDtypeStruct(scales_shape, jnp.uint8)], [("x", x)],
                       format=fmt, scale_rounding=_code("rounding", rounding, _ROUNDINGS),
                       scales_layout=layout, direction=_code("direction", direction, _DIRECTIONS)))


def _decoded_dtype(dtype: Any) -> Any:
    """The `dtype` argument of the decoders: float32 or bfloat16, said of what the caller passed (None is not
    NumPy's float64 here, nor 'bogus' NumPy's own message)."""
    try:
        decoded = None if dtype is None else jnp.dtype(dtype)
    except TypeError:
        decoded = None
    if decoded not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16)):
        raise ValueError(f"dtype must be float32 or bfloat16, got {dtype!r}")
    return decoded


def dequantize(data: jax.Array, scale_inv: jax.Array, *, swizzled: bool, direction: str = "rowwise",
               fp8_dtype: Optional[str] = None, dtype: Any = jnp.float32) -> jax.Array:
    """One direction of a stored MXFP8 tensor decoded, as :func:`mxfp8.dequantize`: fp8_value *
    2^(scale - 127) in float32 or bfloat16 (rounded to nearest-even), data's shape."""
    dtype = _decoded_dtype(dtype)
    return _call("dequantize", jax.ShapeDtypeStruct(_operand("data", data).shape, dtype),
                 [("data", data), ("scale_inv", scale_inv)],
                 format=_fp8_format(data, fp8_dtype), swizzled=_args.flag("swizzled", swizzled),
                 direction=_code("direction", direction, _DIRECTIONS))


def nvfp4_quantize(x: jax.Array, *, per_row: bool = False, four_over_six: Optional[str] = None, e4m3_max: int = 448,
                   scales: str = "compact", columnwise: bool = False) -> Tuple[jax.Array, jax.Array, jax.Array]:
    """`x` (bfloat16, float16 or float32, (*lead, K), K even) quantized to NVFP4 as
    :func:`mxfp8.nvfp4_quantize` does, the amax computed: (values uint8 (*lead, K/2), scales uint8 E4M3,
    amax float32 (1,) or (M,) with per_row). Columnwise quantizes the transpose (values (K, M/2))."""
    layout = _code("scales", scales, _SCALE_LAYOUTS)
    mode = _code("four_over_six", "off" if four_over_six is None else four_over_six, _FOUR_OVER_SIX)
    e4m3_max = _args.e4m3_max("e4m3_max", e4m3_max)
    col, row = _args.flag("columnwise", columnwise), _args.flag("per_row", per_row)
    if _operand("x", x).ndim == 0:
        raise ValueError("x is 0-dimensional: NVFP4 needs a last dimension K")
    values_shape, scales_shape, lines = _nvfp4_shapes(tuple(int(d) for d in x.shape), scales, col)
    results = [jax.ShapeDtypeStruct(values_shape, jnp.uint8), jax.ShapeDtypeStruct(scales_shape, jnp.uint8),
               jax.ShapeDtypeStruct((lines if row else 1,), jnp.float32)]
    return tuple(_call("nvfp4_quantize", results, [("x", x)], amax_scope=int(row), four_over_six=mode, e4m3_max=e4m3_max,
                       scales_layout=layout, direction=int(col)))


def nvfp4_dequantize(data: jax.Array, scale_inv: jax.Array, amax: jax.Array, *, swizzled: bool,
                     columnwise: bool = False, e4m3_max: int = 448, dtype: Any = jnp.float32) -> jax.Array:
    """One direction of a stored NVFP4 tensor decoded as :func:`mxfp8.nvfp4.dequantize` does: the stored
    matrix, (*lead, K) rowwise or the (K, M) transpose columnwise, in float32 or bfloat16. data: the packed
    uint8 values; scale_inv: the E4M3 scales as stored (compact, padded or, with `swizzled`, 128x4)."""
    dtype = _decoded_dtype(dtype)
    if _operand("data", data).ndim == 0:
        raise ValueError("data is 0-dimensional: NVFP4 values need a last dimension (K/2 bytes)")
    e4m3_max = _args.e4m3_max("e4m3_max", e4m3_max)
    shape = tuple(data.shape[:-1]) + (2 * int(data.shape[-1]),)
    return _call("nvfp4_dequantize", jax.ShapeDtypeStruct(shape, dtype),
                 [("data", data), ("scale_inv", scale_inv), ("amax", amax)],
                 swizzled=_args.flag("swizzled", swizzled), e4m3_max=e4m3_max,
                 direction=int(_args.flag("columnwise", columnwise)))

