"""A bucket as SGLang's weight-update entry point takes it, with no copy.

SGLang's ``update_weights_from_tensor(..., load_format="flattened_bucket")`` takes, per TP rank, a dict
``{"flattened_tensor": uint8 buffer, "metadata": [FlattenedTensorMetadata(name, shape, dtype, start_idx,
end_idx, numel)]}`` and rebuilds each tensor as ``flattened_tensor[start_idx:end_idx].view(dtype)
.reshape(shape)`` (byte offsets, SGLang's tensor_bucket.py with ``supports_multi_dtypes``), then hands
them to ``model.load_weights``. A bucket of mxfp8.iter_buckets / prepare_buckets already holds each tensor's
values and compact E8M0 scales at byte offsets, so the bucket itself is that buffer: only the metadata is
new.

    from sglang.srt.weight_sync.tensor_bucket import FlattenedTensorMetadata
    for bucket, manifest in mxfp8.iter_buckets(storage, bucket_bytes=1 << 28):
        payload = mxfp8.sglang.flattened_bucket(bucket, manifest, FlattenedTensorMetadata)
        engine.update_weights_from_tensor([MultiprocessingSerializer.serialize(payload, output_str=True)] * tp,
                                          load_format="flattened_bucket")

Each MXFP8 entry ``X`` (the manifest's name, e.g. ``model.layers.0.mlp.down_proj``, or with a ``.weight``
suffix) becomes ``X.weight`` (float8_e4m3fn / float8_e5m2, the entry's shape) and ``X.weight_scale_inv``
(uint8 ``[N, ceil(K/32)]``), what SGLang's MXFP8 linear (``Fp8LinearMethod`` with mxfp8) loads. NVFP4
entries are refused: SGLang's ModelOpt loader wants ``weight_scale_2`` (amax / 2688), which the bucket
does not hold. Note that SGLang (0.5.x) does not rebuild the kernel-side copies of the scales
(swizzled, DeepGEMM, TRT-LLM) after a flattened-bucket update; see its backends' docs.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ._engine_bucket import engine_entries

_DTYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def flattened_bucket(bucket: Any, manifest: List[Mapping[str, Any]], metadata_type: Any) -> Dict[str, Any]:
    """SGLang's flattened-bucket payload over `bucket` (a 1-D uint8 torch tensor: the bytes are shared, not
    copied) for the entries of `manifest` (iter_buckets' or a prepare_buckets plan's, compact scales, rowwise MXFP8).

    metadata_type: SGLang's ``FlattenedTensorMetadata`` (the payload is pickled for SGLang, which checks
    the type), or any class taking the same fields."""
    import torch

    metadata = []
    for entry, module in engine_entries(bucket, manifest, "SGLang", ".weight_scale_inv",
                                        "SGLang's ModelOpt loader needs weight_scale_2, which a bucket does not "
                                        "carry (it carries the amax)"):
        shape = tuple(entry["shape"])
        rows = 1
        for d in shape[:-1]:
            rows *= d
        scales_shape = (rows, -(-shape[-1] // 32))  # [N, ceil(K/32)], leading dimensions flattened
        parts = ((f"{module}.weight", getattr(torch, _DTYPES[entry.get("fp8_dtype", "e4m3")]), shape,
                  entry["values_offset"], entry["values_bytes"]),
                 (f"{module}.weight_scale_inv", torch.uint8, scales_shape, entry["scales_offset"],
                  entry["scales_bytes"]))
        for part, dtype, part_shape, offset, nbytes in parts:
            metadata.append(metadata_type(name=part, shape=torch.Size(part_shape), dtype=dtype, start_idx=offset,
                                          end_idx=offset + nbytes, numel=nbytes))
    return {"flattened_tensor": bucket, "metadata": metadata}
