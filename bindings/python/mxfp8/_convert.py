"""Engine-native targets: a tensor, or grouped MoE experts, written once in the layout an engine's kernels
load, so that the engine runs no load-time pass of its own.

    out = mxfp8.convert(data, scale_inv, "deepgemm", swizzled=True, num_experts=128)  # out.scales: SGLang's parameter

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

from typing import Any, NamedTuple, Optional

from . import _mxfp8

_GROUPED_SCALES = {"padded": 0, "compact": 1}  # mxfp8_grouped_scales (mxfp8.jax.convert's scales=)


class Converted(NamedTuple):
    """The outputs of convert: the values (None unless asked for) and the scales, shaped as the target's
    engine parameter."""

    values: Any
    scales: Any


_mxfp8.set_result_types(converted=Converted)  # what the extension's convert returns
_c_convert = _mxfp8.convert  # one global lookup a call


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
    # One call of the extension (issue 33): it reads every argument, resolves the stream once, allocates
    # the new outputs in the inputs' framework shaped as the engine's parameter (DeepGEMM's strided int32
    # view, the padded extents), and runs mxfp8_convert / mxfp8_grouped_convert.
    return _c_convert(data, scale_inv, target, shape, fp8_dtype, swizzled, direction, num_experts, scales, values, out,
                    zero_exponent_as_one, pad_rows_to, pad_cols_to, pad_scale, stream)
