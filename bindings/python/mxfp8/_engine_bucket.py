"""A bucket read for an engine's weight-update entry point (mxfp8.vllm, mxfp8.sglang): the checks both engines
need before they name a bucket's parts as their MXFP8 linears' parameters."""
from __future__ import annotations

from typing import Any, List, Mapping, Tuple

from . import _mxfp8
from ._bucket import _read_once


def engine_entries(bucket: Any, manifest: Any, engine: str, scale_parameter: str,
                   nvfp4_why: str) -> List[Tuple[Mapping[str, Any], str]]:
    """(entry, module) for every entry of `manifest` over `bucket` (the 1-D uint8 torch tensor iter_buckets /
    a prepare_buckets plan filled), read once and checked against the bucket by the C library; refused, with
    the entry named: a name that is not a str or names no module, NVFP4 (`nvfp4_why`), columnwise values or
    scales not compact, and two entries that give `engine` the same parameter (``X`` and ``X.weight`` both
    load ``X.weight`` and ``X`` + `scale_parameter`)."""
    import torch

    if not isinstance(bucket, torch.Tensor) or bucket.dtype != torch.uint8 or bucket.dim() != 1:
        raise TypeError("bucket must be the 1-D uint8 torch tensor iter_buckets / a prepare_buckets plan filled, "
                        f"got {type(bucket).__name__}")
    manifest = _read_once(manifest)  # read by the check and here
    _mxfp8.bucket_manifest_check(bucket, manifest)  # every entry checked against the bytes
    entries, seen = [], set()
    for i, entry in enumerate(manifest):
        name = entry["name"]
        if not isinstance(name, str):  # the C library's check takes any name; an engine's are strings
            raise TypeError(f"manifest[{i}]['name'] must be a str (a {engine} parameter name), got {name!r}")
        where = f"manifest entry {name!r}"
        if entry.get("format") == "nvfp4":
            raise ValueError(f"{where} is NVFP4: {nvfp4_why}")
        direction = entry.get("direction", "rowwise")
        if direction != "rowwise" or entry.get("scales_layout", "compact") != "compact":
            raise ValueError(f"{where} is {direction} with {entry.get('scales_layout', 'compact')} scales: {engine} "
                             "loads rowwise values with compact scales")
        module = name[:-len(".weight")] if name.endswith(".weight") else name
        if not module:
            raise ValueError(f"{where} has no module name: {engine} loads <module>.weight and <module>{scale_parameter}")
        for suffix in (".weight", scale_parameter):
            if module + suffix in seen:
                raise ValueError(f"{where} gives {module + suffix!r} again (entries {module!r} and "
                                 f"{module + '.weight'!r} are the same {engine} parameter)")
            seen.add(module + suffix)
        entries.append((entry, module))
    return entries
