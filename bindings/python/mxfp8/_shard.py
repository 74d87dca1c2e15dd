"""Shard arguments as Python spells them, turned into the C library's mxfp8_shard fields.

    rows=(r0, r1)                       rows [r0, r1) of M (a column-parallel shard of N)
    rows=[(q0, q1), (k0, k1), (v0, v1)]  several row ranges, concatenated (fused QKV / gate-up)
    cols=(k0, k1)                       K columns [k0, k1) (a row-parallel shard of K)

An end of None means the end of the dimension. Only the Python types are checked here; the boundaries
(multiples of 32 along the direction's scale blocks, inside the tensor, not empty) are the C library's."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

from . import _args

SHARD_END = -1  # MXFP8_SHARD_END

Range = Tuple[int, Optional[int]]
Rows = Union[Range, Sequence[Tuple[int, int]]]


def _is_pair(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2 and not isinstance(value[0], (tuple, list))


def _range(name: str, value: Any, open_end: bool = True) -> Tuple[int, int]:
    if not _is_pair(value):
        raise TypeError(f"{name} must be a (begin, end) pair of ints, got {value!r}")
    begin = _args.integer(f"{name}[0]", value[0])
    if value[1] is None and open_end:
        return begin, SHARD_END
    end = _args.integer(f"{name}[1]", value[1])
    # Only None says "to the end": -1 would reach the library as MXFP8_SHARD_END (every row, where a
    # Python slice means all but the last), and no negative end names a position.
    if end < 0:
        raise ValueError(f"{name} is {tuple(value)!r}: an end is a position, not negative"
                         + (" (None is the end of the dimension)" if open_end else ""))
    return begin, end


def shard_fields(rows: Optional[Rows] = None, cols: Optional[Range] = None, name: str = "") -> Dict[str, Any]:
    """The keyword arguments of the extension's export_shard (row_begin, row_end, col_begin, col_end,
    row_pieces) for `rows` and `cols`; None: the whole dimension."""
    fields: Dict[str, Any] = {"row_begin": 0, "row_end": SHARD_END, "col_begin": 0, "col_end": SHARD_END,
                              "row_pieces": None}
    if cols is not None:
        fields["col_begin"], fields["col_end"] = _range(f"{name}cols", cols)
    if rows is None:
        return fields
    if _is_pair(rows):
        fields["row_begin"], fields["row_end"] = _range(f"{name}rows", rows)
        return fields
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__len__") or len(rows) == 0:
        raise TypeError(f"{name}rows must be a (begin, end) pair or a non-empty list of them, got {rows!r}")
    pieces = []
    for i, piece in enumerate(rows):
        pieces.extend(_range(f"{name}rows[{i}]", piece, open_end=False))
    fields["row_pieces"] = pieces
    return fields


def is_shard(rows: Any, cols: Any) -> bool:
    return rows is not None or cols is not None


def shard_shape(fields: Dict[str, Any], m: int, k: int) -> Tuple[int, int]:
    """(rows, cols) of the shard `fields` (shard_fields' dict) of an (m, k) tensor, for planning; the C
    library checks the boundaries."""
    if fields["row_pieces"] is not None:
        p = fields["row_pieces"]
        rows = sum(p[i + 1] - p[i] for i in range(0, len(p), 2))
    else:
        rows = (m if fields["row_end"] == SHARD_END else fields["row_end"]) - fields["row_begin"]
    cols = (k if fields["col_end"] == SHARD_END else fields["col_end"]) - fields["col_begin"]
    return rows, cols


def shard_spec(name: str, spec: Any) -> Optional[Dict[str, Any]]:
    """shard_fields of a dict with optional "rows" and "cols" (a bucket spec, or an entry of the import
    call's `shards`), or None when it names neither."""
    rows, cols = spec.get("rows"), spec.get("cols")
    if rows is None and cols is None:
        return None
    return shard_fields(rows, cols, name=f"{name}")
