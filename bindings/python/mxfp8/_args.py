"""The Python arguments the C library cannot see, checked before anything is called: Python types (real
bools, ints that fit the C field), the devices of every object before any ``__dlpack__`` call (a CUDA
stream handed to a host tensor's ``__dlpack__`` fails in the producer's own terms), and the stream.
Every message names the Python argument; layouts, shapes and dtypes stay the C library's to check.

The devices and the stream are the extension's to decide (``_mxfp8.inputs``, the rules its entries for
export_components, quantize, dequantize and the swizzles apply to their own objects): the calls that
still read their arguments here ask it, so that one set of rules serves every entry point."""
from __future__ import annotations

import operator
import sys
from typing import Any, NamedTuple, Optional, Sequence, Tuple

from . import _mxfp8

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


def numel(shape: Sequence[int]) -> int:
    """The element count of `shape` (1 for ())."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def round_up(n: int, d: int) -> int:
    return -(-n // d) * d


def choice(name: str, value: Any, table: dict) -> int:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ValueError(f"{name} must be one of {sorted(table)}, got {value!r}") from None


def flag(name: str, value: Any) -> bool:
    """A real bool (or NumPy's): "False" and 0 are not taken for booleans."""
    if isinstance(value, bool):
        return value
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.bool_):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def integer(name: str, value: Any, low: int = -INT64_MAX - 1, high: int = INT64_MAX) -> int:
    """An int (anything with __index__ but a bool) in [low, high]."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = operator.index(value)  # an array of several elements has __index__ but refuses
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})") from None
    if not low <= v <= high:
        raise ValueError(f"{name} is {v}, expected {low} to {high}")
    return v


def e4m3_max(name: str, value: Any) -> int:
    """An NVFP4 E4M3_MAX as the C field takes it: an int32 (448.0 or "448" is a caller's mistake, not 448).
    Which ints are E4M3 maxima (448, 256) is the library's rule alone: it refuses the rest with its message."""
    return integer(name, value, 0, INT32_MAX)


def shape(name: str, value: Any) -> list:
    """A sequence of ints that fit int64 (the C library checks what they mean)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
        raise TypeError(f"{name} must be a sequence of ints, got {value!r} ({type(value).__name__})")
    return [integer(f"{name}[{i}]", d) for i, d in enumerate(value)]


def power_of_two(name: str, value: Any) -> int:
    v = integer(name, value, 0, UINT64_MAX)
    if v == 0 or v & (v - 1):
        raise ValueError(f"{name} is {v}, expected a power of two")
    return v


def dims(name: str, obj: Any) -> tuple:
    """obj's shape, as ints: its .shape (NumPy, PyTorch, JAX, CuPy), else what its DLPack capsule says (the
    protocol promises no .shape). The Python layer reads it to size what it allocates."""
    shape = getattr(obj, "shape", None)
    return _mxfp8.dlpack_meta(name, obj)[0] if shape is None else tuple(int(d) for d in shape)


def dtype_name(name: str, obj: Any) -> str:
    """str(obj.dtype), else NumPy's name of the dtype its DLPack capsule says ("uint8", "float4_e2m1fn")."""
    dtype = getattr(obj, "dtype", None)
    return _mxfp8.dlpack_meta(name, obj)[1] if dtype is None else str(dtype)


def last_dimension(name: str, obj: Any) -> int:
    """K of an input that needs one (a 0-d array has no last dimension)."""
    shape = dims(name, obj)
    if not shape:
        raise ValueError(f"{name} is 0-dimensional: expected its last dimension to be K")
    return shape[-1]


class Inputs(NamedTuple):
    """What the inputs decide: torch (the module, for torch inputs: outputs are then torch tensors from
    PyTorch's allocator), whether they live on CUDA, the stream as a cudaStream_t value, the first
    input's name and device (what outputs are checked against), and whether the call goes through the
    framework's DLPack C exchange API (stream is then None: the extension asks the framework for its
    current stream)."""

    torch: Any
    cuda: bool
    stream: Optional[int]
    name: str
    device: Tuple[int, int]
    exchange: bool = False

    @property
    def dlpack_stream(self) -> Optional[int]:
        """The stream argument for a producer's __dlpack__: 1 names the legacy default stream; None is
        for host memory."""
        return (self.stream or 1) if self.cuda else None

    def check_output(self, name: str, obj: Any) -> None:
        """An object the library writes into lives where the inputs do (host memory, plain or pinned, is
        one kind: torch says kDLCUDAHost for a pinned tensor in __dlpack_device__ and may say kDLCPU in its
        capsule); asked with __dlpack_device__ only."""
        _mxfp8.check_output(name, obj, self.name, self.device)


def inputs(stream: Any, **objects: Any) -> Inputs:
    """Checks the named inputs are DLPack producers on one device (before any __dlpack__ call); the
    first decides the framework and the stream (the extension's rules: _mxfp8.inputs)."""
    return Inputs(*_mxfp8.inputs(stream, objects))


torch_module = _mxfp8.torch_of  # the torch module for a torch tensor, else None
stream_pointer = _mxfp8.stream_pointer  # (stream, torch, data, cuda): a cudaStream_t as an int


def sequence_of_ints(name: str, value: Optional[Sequence[Any]], low: int = -INT64_MAX - 1) -> Optional[list]:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name} must be a sequence of ints, got {value!r} ({type(value).__name__})")
    return [integer(f"{name}[{i}]", v, low) for i, v in enumerate(value)]
