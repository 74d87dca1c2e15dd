"""A bucket manifest (the list export_bucket returns, or a sender's JSON of it) read into the per-entry lists
of the C library's mxfp8_transfer_desc (a bucket source), for import_bucket and unpack_bucket alike.

Only what Python alone sees is checked here: a list of dicts, the keys each entry needs, names hashable
and unique, numbers that are Python ints of their C field's range, known words. What the manifest means
(each part's size against its shape, direction and layout; parts inside the bucket and overlapping
nothing; scale shapes; NVFP4 amax and e4m3_max) is the C library's mxfp8_transfer_check of the bucket, the
same check its mxfp8_transfer makes: every receiver, in every binding, refuses the same manifests with the
same message (desc.parts_in[i] there is manifest[i] here)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple

from . import _args
from ._api import _DIRECTIONS, _FORMATS
from ._args import choice

LAYOUTS = {"compact": 0, "cutlass_128x4": 1, "trtllm": 2, "deepgemm": 3, "trtllm_gated": 4,  # mxfp8_scale_layout
           "deepgemm_float32": 5}
# The element type an engine holds a layout's scales in, when it is not bytes (4 bytes an element).
LAYOUT_WORDS = {"deepgemm": "int32", "deepgemm_float32": "float32"}
FORMAT_NVFP4 = 3  # MXFP8_FORMAT_NVFP4
ENTRY_FORMATS = {"mxfp8": 0, "nvfp4": 1}  # an entry's "format" (absent: mxfp8)

_PARTS = ("values_offset", "values_bytes", "scales_offset", "scales_bytes")
_REQUIRED = ("name", "shape") + _PARTS
_NVFP4_REQUIRED = _REQUIRED + ("direction", "scales_shape", "amax_offset", "amax_bytes", "e4m3_max")


class Manifest(NamedTuple):
    """A manifest read: each entry as a dict of Python ints and tuples (for the views unpack_bucket
    makes), whether each is NVFP4, and the lists the C calls take (keyword arguments)."""

    entries: List[Dict[str, Any]]
    nvfp4: List[bool]
    lists: Dict[str, Any]


def read(manifest: Any, *, need_scales_shape: bool = False) -> Manifest:
    """`manifest` as the C library's lists. need_scales_shape: every entry must give "scales_shape" and
    "fp8_dtype" (unpack_bucket shapes its views by them); else an entry may leave them out (import_bucket
    needs only the parts), and scales shapes are checked when every entry gives one."""
    if isinstance(manifest, (str, bytes, Mapping)) or not hasattr(manifest, "__iter__"):
        raise TypeError(f"manifest must be the list export_bucket returned, got {type(manifest).__name__}")
    entries, nvfp4, names = [], [], set()
    for i, e in enumerate(manifest):
        where = f"manifest[{i}]"
        if not isinstance(e, Mapping):
            raise TypeError(f"{where} must be a dict, got {type(e).__name__}")
        kind = choice(f"{where}['format']", e.get("format", "mxfp8"), ENTRY_FORMATS) == 1
        required = _NVFP4_REQUIRED if kind else _REQUIRED + (("fp8_dtype", "scales_shape") if need_scales_shape else ())
        for key in required:
            if key not in e:
                raise ValueError(f"{where} has no {key!r}")
        name = e["name"]
        try:
            duplicate = name in names
        except TypeError:
            raise TypeError(f"{where}['name'] must be hashable, got {type(name).__name__}") from None
        if duplicate:
            raise ValueError(f"{where}['name'] {name!r} appears twice")
        names.add(name)
        entry = dict(e, shape=tuple(_args.shape(f"{where}['shape']", e["shape"])))
        for key in _PARTS + (("amax_offset", "amax_bytes") if kind else ()):
            entry[key] = _args.integer(f"{where}[{key!r}]", e[key], 0, _args.UINT64_MAX)
        if "scales_shape" in e:
            entry["scales_shape"] = tuple(_args.shape(f"{where}['scales_shape']", e["scales_shape"]))
        if kind:
            entry["e4m3_max"] = _args.integer(f"{where}['e4m3_max']", e["e4m3_max"], 0, _args.INT32_MAX)
            entry["format_code"] = FORMAT_NVFP4
        else:
            entry["format_code"] = choice(f"{where}['fp8_dtype']", e.get("fp8_dtype", "e4m3"), _FORMATS)
        entry["direction_code"] = choice(f"{where}['direction']", e.get("direction", "rowwise"), _DIRECTIONS)
        entry["layout_code"] = choice(f"{where}['scales_layout']", e.get("scales_layout", "compact"), LAYOUTS)
        entries.append(entry)
        nvfp4.append(kind)
    every_scales_shape = bool(entries) and all("scales_shape" in e for e in entries)
    lists = dict(
        entries=[tuple(e[k] for k in _PARTS) for e in entries],
        shapes=[list(e["shape"]) for e in entries],
        formats=[e["format_code"] for e in entries],
        directions=[e["direction_code"] for e in entries],
        scales_layouts=[e["layout_code"] for e in entries],
        nvfp4_entries=[(e["amax_offset"], e["amax_bytes"], e["e4m3_max"]) if kind else (0, 0, 0)
                       for e, kind in zip(entries, nvfp4)] if any(nvfp4) else None,
        scales_shapes=[list(e["scales_shape"]) for e in entries] if every_scales_shape else None,
    )
    return Manifest(entries, nvfp4, lists)
