from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Tuple, Union

version: int
header_version: int
with_cuda: bool

class Array:
    """A DLPack-exportable output of an export (values or scales)."""
    def __dlpack__(
        self, *, stream: Optional[int] = None, max_version: Optional[tuple[int, int]] = None,
        dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def is_copy(self) -> bool: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def data_ptr(self) -> int: ...

class Tensor:
    def __init__(
        self, *, rowwise_data: Any = None, rowwise_scale_inv: Any = None, columnwise_data: Any = None,
        columnwise_scale_inv: Any = None, shape: Optional[Sequence[int]] = None, format: int = 1,
        swizzled: bool = False, block: int = 0, stream: Optional[int] = None, data_name: Optional[str] = None,
        scale_inv_name: Optional[str] = None, exchange: bool = False,
    ) -> None: ...
    def export_components(
        self, *, direction: int = 0, values_dtype: int = 0, scales_dtype: int = 0, contiguous: bool = True,
        block_scales: bool = False, stream: Optional[int] = None,
        allocator: Optional[Callable[[list[int], tuple[int, int]], Any]] = None,
    ) -> tuple[Any, Any]: ...  # Arrays, or the framework's tensors (exchange mode)

class Grouped:
    def __init__(
        self, *, data: Any, scale_inv: Any, num_experts: int, cols: int, expert_rows: Optional[Sequence[int]] = None,
        uniform_rows: int = 0, scale_offsets: Optional[Sequence[int]] = None, format: int = 1, swizzled: bool = False,
        packing: int = 0, stream: Optional[int] = None, exchange: bool = False,
    ) -> None: ...
    def expert(self, expert: int) -> Tensor: ...
    def export_experts(
        self, experts: Optional[Sequence[int]] = None, *, values_dtype: int = 0, scales_dtype: int = 0,
        stream: Optional[int] = None, allocator: Optional[Callable[[list[int], tuple[int, int]], Any]] = None,
    ) -> tuple[Any, Any]: ...  # mxfp8_grouped_export of every expert stacked (None) or of the chosen ones

class Nvfp4Tensor:
    def __init__(
        self, *, rowwise_data: Any = None, rowwise_scale_inv: Any = None, rowwise_amax: Any = None,
        columnwise_data: Any = None, columnwise_scale_inv: Any = None, columnwise_amax: Any = None,
        shape: Optional[Sequence[int]] = None, swizzled: bool = False, e4m3_max: int = 448,
        stream: Optional[int] = None, exchange: bool = False,
    ) -> None: ...
    def export_components(
        self, *, direction: int = 0, values_dtype: int = 0, scales_dtype: int = 0, contiguous: bool = True,
        global_scale: int = 0, stream: Optional[int] = None, shard: Optional[dict[str, Any]] = None,
    ) -> tuple[Any, Any, Any]: ...  # Arrays, or the framework's tensors (exchange mode)
    def dequantize(
        self, direction: int, output: Any, stream: Optional[int] = None, dlpack_stream: Optional[int] = None,
    ) -> None: ...  # a NumPy bfloat16 output (ml_dtypes) is taken as its uint16 bits

class Plan:
    """A prepared transfer (an mxfp8_plan) and the objects it writes: mxfp8.Plan's core."""
    def run(self, stream: Optional[int] = None) -> None: ...  # None: the framework's current stream, else 0
    def check_storages(self) -> None: ...  # ValueError for a torch storage resized since the plan was made

class StoragePins:
    """The storages of the torch tensors among `objects`, held, with the address and size each had."""
    def __init__(self, objects: Iterable[Any]) -> None: ...
    def check(self, resized: str, advice: str) -> None: ...  # ValueError "<resized> (...): <advice>"

def prepare_export(
    tensors: Sequence[Tensor], destinations: Sequence[Any], direction: int = 0, dlpack_stream: Optional[int] = None,
    names: Optional[Sequence[str]] = None,
) -> Plan: ...  # mxfp8_transfer_prepare, tensors to scales-only buffers
def bucket_plan(
    tensors: list[Union[Tensor, Nvfp4Tensor]], direction: int = 0, alignment: int = 256,
    shards: Optional[Sequence[Any]] = None,
) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, int]], int]: ...  # mxfp8_bucket_parts
def bucket_entry_bytes(
    tensors: list[Union[Tensor, Nvfp4Tensor]], direction: int = 0, alignment: int = 256,
    shards: Optional[Sequence[Any]] = None, names: Sequence[str] = (),
) -> list[int]: ...  # each entry's bytes in a bucket of its own
def export_bucket(
    tensors: list[Union[Tensor, Nvfp4Tensor]], plan: list[tuple[int, int, int, int]],
    nvfp4_plan: list[tuple[int, int, int]], total: int, bucket: Any, *, direction: int = 0,
    stream: Optional[int] = None,
    dlpack_stream: Optional[int] = None, bucket_name: str = "bucket", shards: Optional[Sequence[Any]] = None,
) -> None: ...
def prepare_bucket(
    tensors: list[Union[Tensor, Nvfp4Tensor]], plan: list[tuple[int, int, int, int]],
    nvfp4_plan: list[tuple[int, int, int]], total: int, bucket: Any, *, direction: int = 0,
    dlpack_stream: Optional[int] = None,
    bucket_name: str = "bucket", shards: Optional[Sequence[Any]] = None,
) -> Plan: ...  # mxfp8_transfer_prepare, tensors to a bucket
def nvfp4_quantize(
    inputs: Sequence[Any], values: Sequence[Any], scales: Sequence[Any], amax: Any, *, fused: bool, amax_scope: int,
    amax_mode: int, four_over_six: int, e4m3_max: int, layout: int, direction: int = 0, stream: Optional[int] = None,
    dlpack_stream: Optional[int] = None,
) -> None: ...  # NumPy bfloat16 inputs (ml_dtypes) are taken as their uint16 bits; writes values, scales (and amax when computed) in place
def import_bucket(
    bucket: Any, manifest: Sequence[Mapping[str, Any]], params: Mapping[Any, Any], layout: int, layouts: dict[str, int],
    scale_fixup: int, stream: Optional[int], dlpack_stream: Any, prepare: bool, shards: Optional[Sequence[Any]] = None,
    global_scale: int = 0,
) -> Optional[Plan]: ...  # mxfp8_transfer from a bucket into params[name]; a Plan with prepare=True
def bucket_manifest_check(
    bucket: Any, manifest: Sequence[Mapping[str, Any]], need_scales_shape: bool = False,
) -> None: ...  # the manifest read, then mxfp8_transfer_check from the bucket to nothing
def read_spec(name: Any, spec: Mapping[str, Any]) -> tuple[Any, Any, Any, bool, bool, int, int, Optional[list[int]], bool]: ...
def import_tensors(
    tensors: Mapping[Any, Mapping[str, Any]], params: Mapping[Any, Any], direction: str, layout: str, stream: Any,
    zero_exponent_as_one: bool, shards: Optional[Mapping[Any, Any]], global_scale: str, prepare: bool,
) -> Optional[Tuple[Plan, bool]]: ...  # mxfp8.import_tensors (None); prepare: (Plan, cuda) for mxfp8.Plan
def layout_bytes(layout: int, direction: int, rows: int, cols: int) -> int: ...
def inputs(
    stream: Any, objects: dict[str, Any],
) -> tuple[Any, bool, Optional[int], str, tuple[int, int], bool]: ...  # _args.Inputs' fields
def check_output(name: str, obj: Any, first_name: str, device: tuple[int, int]) -> None: ...
def stream_pointer(stream: Any, torch: Any, data: Any, cuda: bool) -> int: ...
def torch_allocator(torch: Any, data: Any) -> Optional[Callable[[list[int], tuple[int, int]], Any]]: ...
def dlpack_meta(name: str, obj: Any) -> tuple[tuple[int, ...], str]: ...  # (shape, dtype name): _args.dims, dtype_name
def torch_of(obj: Any) -> Any: ...  # the torch module for a torch tensor, else None
def has_exchange_api(obj: Any) -> bool: ...
def taken_counts() -> dict[str, int]: ...
def fast_exports() -> int: ...
def taken_by_jax() -> int: ...
def set_result_types(
    components: Optional[type] = None, quantized: Optional[type] = None, converted: Optional[type] = None,
) -> None: ...  # what export_components / quantize / convert return
# The Python API's calls, each one call of the extension (METH_FASTCALL: positional only): every argument
# form the Python function takes, checked here; the plain case (exchange API tensors) runs no Python code.
def export_components(
    data: Any, scale_inv: Any, shape: Any, fp8_dtype: Any, swizzled: Any, direction: Any, values_dtype: Any,
    scales_dtype: Any, contiguous: Any, block: Any, stream: Any, rows: Any, cols: Any, /,
) -> Any: ...  # a Components
def dequantize(
    data: Any, scale_inv: Any, shape: Any, fp8_dtype: Any, swizzled: Any, direction: Any, block: Any, dtype: Any,
    out: Any, stream: Any, /,
) -> Any: ...  # out, or the new array
def quantize(
    x: Any, fp8_dtype: Any, block: Any, rounding: Any, scales: Any, rowwise: Any, columnwise: Any, values_dtype: Any,
    scales_dtype: Any, stream: Any, allocator: Optional[Callable[[list[int], tuple[int, int]], Any]] = None, /,
) -> Any: ...  # a Quantized (rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv)
def swizzle_scales(source: Any, out: Any, swizzle: bool, rows: Any, cols: Any, stream: Any, /) -> Any: ...  # out or the new buffer
def convert(
    data: Any, scale_inv: Any, target: Any, shape: Any, fp8_dtype: Any, swizzled: Any, direction: Any, num_experts: Any,
    scales: Any, values: Any, out: Any, zero_exponent_as_one: Any, pad_rows_to: Any, pad_cols_to: Any, pad_scale: Any,
    stream: Any, /,
) -> Any: ...  # a Converted (values, scales): mxfp8_convert (num_experts None) or mxfp8_grouped_convert
def engine_parameter(
    shape: Any, target: Any, direction: Any, num_experts: Any, pad_rows_to: Any, pad_cols_to: Any, /,
) -> Tuple[Tuple[int, ...], Tuple[int, ...], int]: ...  # (values shape, scales shape, one matrix's scale bytes)
