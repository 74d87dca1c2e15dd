"""Engine-native targets: a tensor, or grouped MoE experts, written once in the layout an engine's kernels
load, so that the engine runs no load-time pass of its own.

    out = mxfp8.convert(data, scale_inv, "deepgemm", num_experts=128)  # out.scales: SGLang's parameter

Targets, and the parameter each engine loads (docs/api.md, "Engine layouts, shards, experts"):

- ``"compact"``: uint8 ``(*lead, ceil(K/32))`` (grouped ``[E, N, ceil(K/32)]``): vLLM / SGLang
  ``weight_scale`` / ``weight_scale_inv`` as checkpoints store them.
- ``"cutlass_128x4"``: uint8, flat ``roundup(R, 128) * roundup(C, 4)`` bytes (grouped ``[E, bytes]``),
  the cuBLAS / CUTLASS 128x4 layout with zero padding: vLLM's FlashInfer-CUTLASS MXFP8 linear, SGLang's
  ``weight_scale_inv_swizzled``. Columnwise scales are laid out transposed, as cuBLAS reads them.
- ``"deepgemm"``: int32 ``[mn, ceil(sf_k/4)]`` (grouped ``[E, mn, ceil(sf_k/4)]``) with DeepGEMM's
  MN-major strides ``(ceil(sf_k/4) * mn_aligned, 1, mn_aligned)``, ``mn_aligned = roundup(mn, 4)``, four
  consecutive K-block exponents per int32 (the first in the lowest byte): what SGLang's DeepGEMM path gets
  from ``get_mn_major_tma_aligned_packed_ue8m0_tensor`` on Blackwell (sm100 / sm120). Rowwise only.
- ``"deepgemm_float32"``: float32 ``(*lead, ceil(K/32))`` (grouped ``[E, N, ceil(K/32)]``), each scale the
  float32 whose bits are its E8M0 byte ``<< 23``: SGLang's ``weight_scale_inv_deepgemm`` for DeepGEMM on
  Hopper (sm90), ``(u8.to(torch.int32) << 23).view(torch.float32)``. Rowwise only.
- ``"trtllm"`` and ``"trtllm_gated"``: FlashInfer's TRT-LLM MoE layouts, what vLLM's MXFP8 MoE backend
  loads after its ``_shuffle_mxfp8_moe_weights`` (``"trtllm_gated"``: ``w13_weight`` of SwiGLU experts,
  source rows ``[gate; up]`` as vLLM holds them; ``"trtllm"``: ``w2_weight``). Per expert the value rows and
  the scale rows move by FlashInfer's ``shuffle_matrix_a`` permutation (after, for ``w13``, vLLM's
  ``swap_w13_to_w31`` and FlashInfer's ``reorder_rows_for_gated_act_gemm``), and the scales are then laid out
  128x4 (``shuffle_matrix_sf_a``). Values are required (``values=True`` or a buffer): values ``[E, M, K]``
  and scales uint8 ``[E, M, roundup(C, 4)]``, which is vLLM's ``w13_weight_scale`` / ``w2_weight_scale``
  ``[E, M, C]`` (C = K / 32, a multiple of 4 there). Rows per expert a multiple of 128; rowwise only.
"""
from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional, Tuple

from . import _args
from ._import import LAYOUT_WORDS, LAYOUTS, _call_stream, _code, _DIRECTIONS, _fixup, _FORMATS, layout_bytes
from ._mxfp8 import convert as _c_convert

_GROUPED_SCALES = {"padded": 0, "compact": 1}


class Converted(NamedTuple):
    """The outputs of convert: the values (None unless asked for) and the scales, shaped as the target's
    engine parameter."""

    values: Any
    scales: Any


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch")


def _empty(like: Any, count: int, dtype: str) -> Any:
    """A new 1-D buffer of `count` elements next to `like`: torch for torch inputs, NumPy on the host."""
    if _is_torch(like):
        import torch

        return torch.empty(count, dtype=getattr(torch, dtype), device=like.device)
    if like.__dlpack_device__()[0] not in _args.HOST_DEVICES:
        raise TypeError("outputs are allocated here for torch tensors and host arrays only: pass values= and "
                        "out= buffers of your framework (JAX: mxfp8.jax.convert allocates them, inside jit too)")
    import numpy

    return numpy.empty(count, dtype=dtype)


def _strided(flat: Any, shape: Tuple[int, ...], strides: Tuple[int, ...]) -> Any:
    if _is_torch(flat):
        return flat.as_strided(shape, strides)
    import numpy

    return numpy.lib.stride_tricks.as_strided(flat, shape, tuple(s * flat.itemsize for s in strides), writeable=True)


def _engine_parameter(flat: Any, target: str, experts: int, lead: Tuple[int, ...], r: int, c: int) -> Any:
    """The flat scales output viewed as the target's engine parameter."""
    g = (experts,) if experts else ()
    if target in ("compact", "deepgemm_float32"):
        return flat.reshape(*g, *lead, c)
    if target == "deepgemm":
        packed, aligned = -(-c // 4), -(-r // 4) * 4
        return _strided(flat, (*g, r, packed), ((packed * aligned,) if experts else ()) + (1, aligned))
    if target in ("trtllm", "trtllm_gated"):  # vLLM's [E, M, C] parameter (C % 4 == 0 there)
        return flat.reshape(*g, r, -(-c // 4) * 4)
    return flat.reshape(*g, -1)  # cutlass_128x4: flat per matrix


def convert(
    data: Any,
    scale_inv: Any,
    target: str,
    *,
    shape: Optional[Any] = None,
    fp8_dtype: str = "e4m3",
    swizzled: bool,
    direction: str = "rowwise",
    num_experts: Optional[int] = None,
    scales: str = "padded",
    values: Any = False,
    out: Any = None,
    zero_exponent_as_one: bool = False,
    pad_rows_to: int = 0,
    pad_cols_to: int = 0,
    pad_scale: int = 127,
    stream: Any = None,
) -> Converted:
    """Writes the scales of one MXFP8 tensor (or of `num_experts` grouped experts of equal rows, stacked)
    in `target` (see the module docs), checked, in one pass (one launch on CUDA).

    Args:
        data, scale_inv: the values and scales as the producer stores them (Transformer Engine: padded,
            maybe `swizzled`); for grouped experts the flat buffers of mxfp8_grouped_desc, their scales
            "padded" per expert or "compact" (`scales`).
        shape: the logical shape (*lead, K); default data.shape.
        swizzled: required, no default: True when the scales are in the cuBLAS 128x4 layout, False when
            row-major (a wrong guess would convert silently).
        values: False (not written), True (a new copy, stacked [E, N, K] for experts), or a buffer to
            write them into (what a target that permutes rows needs).
        out: the buffer to write the scales into (any shape of exactly the target's bytes, or the
            engine's own parameter); default: a new one, returned shaped as the engine's parameter.
        zero_exponent_as_one: write E8M0 exponent byte 0 as 1 (NeMo RL #3477); padding stays 0.
        pad_rows_to, pad_cols_to, pad_scale: an engine's padding, in the same launch (rowwise; 0: none):
            each expert's N rows to a multiple of pad_rows_to (``"trtllm_gated"``: each half of
            [gate; up] on its own), K to a multiple of pad_cols_to (a multiple of 32), padding values 0
            and padding scales the E8M0 byte pad_scale; the target then lays out the padded weight, and
            the values (required) come back padded, [E, N', K']. vLLM's FlashInfer TRT-LLM MXFP8 MoE
            (``align_mxfp8_moe_weights_for_fi_trtllm``): w13 with ``pad_rows_to=128, pad_cols_to=256``,
            w2 with ``pad_rows_to=256, pad_cols_to=128``, pad_scale 127.
        stream: CUDA stream (torch's current stream by default for torch tensors).
    """
    if target not in LAYOUTS:
        raise ValueError(f"target is {target!r}, expected one of {', '.join(map(repr, LAYOUTS))}")
    dims = tuple(_args.shape("shape", shape if shape is not None else data.shape))
    if not dims:
        raise ValueError("shape must have at least one dimension (K)")
    experts = 0 if num_experts is None else _args.integer("num_experts", num_experts, 1, _args.INT32_MAX)
    col = _code("direction", direction, _DIRECTIONS) == 1
    m, k = _args.numel(dims[:-1]), dims[-1]
    lead = dims[:-1]
    if experts:
        if m % experts:
            raise ValueError(f"the experts' {m} rows do not split into {experts} experts of equal size")
        m //= experts
        lead = (m,)
    rows_to, cols_to = _args.integer("pad_rows_to", pad_rows_to), _args.integer("pad_cols_to", pad_cols_to)
    if rows_to > 1 or cols_to > 0:  # the padded extent (mxfp8_convert_options; the library checks the outputs')
        halves = 2 if target == "trtllm_gated" and m % 2 == 0 else 1
        m = halves * -(-(m // halves) // rows_to) * rows_to if rows_to > 1 else m
        k = -(-k // cols_to) * cols_to if cols_to > 0 and cols_to % 32 == 0 else k
        if m > _args.INT64_MAX:  # the gated target's 2 * roundup(I, pad_rows_to): refused as the library does
            raise ValueError(f"the padded rows overflows int64 ({m} rows an expert for pad_rows_to {rows_to})")
        lead = (m,)
    r, c = (-(-m // 32), k) if col else (m, -(-k // 32))
    _, stream_ptr, dlpack_stream = _call_stream(data, stream, "data")
    per = layout_bytes(target, r, c, direction)
    word = LAYOUT_WORDS.get(target)
    flat = None
    if out is None:
        flat = _empty(data, max(experts, 1) * per // (4 if word else 1), word or "uint8")
        out = flat
    values_out = None
    if values is True:
        values_out = _empty(data, max(experts, 1) * m * k, "uint8")
        if _is_torch(data):
            values_out = values_out.view(data.dtype)
    elif values is not False and values is not None:
        values_out = values
    _c_convert(data, scale_inv, list(dims), _code("fp8_dtype", fp8_dtype, _FORMATS), _args.flag("swizzled", swizzled),
               int(col), experts, _code("scales", scales, _GROUPED_SCALES), LAYOUTS[target], _fixup(zero_exponent_as_one),
               rows_to, cols_to, _args.integer("pad_scale", pad_scale, -(2**31), 2**31 - 1), values_out, out, stream_ptr,
               dlpack_stream)
    if flat is not None:
        out = _engine_parameter(flat, target, experts, lead if not col else (r,), r, c)
    if values is True:
        values_out = values_out.reshape(*((experts, m) if experts else lead), k)
    return Converted(values_out, out)
