//! Raw declarations mirroring `include/mxfp8/mxfp8.h` and the DLPack (>= 1.1) structs it uses.
//!
//! Nothing here is safe to call without reading the header: it documents ownership, lifetimes and
//! streams for every function. Use the `mxfp8` crate for a safe API.
//!
//! C enums that travel inside structs or come back from C are newtype integers, so that a value this
//! crate does not know (a newer library, a newer DLPack) is just an unknown value, never undefined
//! behaviour.
//!
//! Every `Default` impl below is the header's `*_INIT` macro restated; `bindings/rust/mxfp8/tests/abi.rs`
//! compiles a C probe against the header and checks each field of each default, and every struct's size
//! and field offsets, against what the C compiler says.
#![allow(non_camel_case_types)]
#![deny(missing_docs)]
#![no_std]

use core::ffi::{c_char, c_int, c_void};
use core::ptr::{null, null_mut};

/// A versioned struct of the header: it opens with `struct_size` (written by `Default`), and each field
/// carries the value its `*_INIT` macro gives it, so that `Default` is that macro restated line by line.
macro_rules! c_struct {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* $field:ident: $ty:ty = $default:expr,)* }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Copy, Clone, Debug)]
        pub struct $name {
            #[doc = concat!("`sizeof(", stringify!($name), ")`.")]
            pub struct_size: u32,
            $($(#[$fm])* pub $field: $ty,)*
        }
        impl Default for $name {
            #[doc = concat!("The header's `*_INIT` macro of `", stringify!($name), "`: the value beside each field.")]
            fn default() -> Self {
                Self { struct_size: core::mem::size_of::<Self>() as u32, $($field: $default,)* }
            }
        }
    };
}

// ------------------------------------------------------------------------------------------------
// DLPack
// ------------------------------------------------------------------------------------------------

/// `DLDeviceType`.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub c_int);
impl DLDeviceType {
    /// `kDLCPU`: host memory.
    pub const CPU: Self = Self(1);
    /// `kDLCUDA`: CUDA device memory.
    pub const CUDA: Self = Self(2);
    /// `kDLCUDAHost`: pinned host memory (cudaMallocHost).
    pub const CUDA_HOST: Self = Self(3);
    /// `kDLCUDAManaged`: CUDA unified memory.
    pub const CUDA_MANAGED: Self = Self(13);
}

/// `DLDataTypeCode`, stored in `DLDataType::code` as a byte.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DLDataTypeCode(pub u8);
impl DLDataTypeCode {
    /// `kDLInt`.
    pub const INT: Self = Self(0);
    /// `kDLUInt`.
    pub const UINT: Self = Self(1);
    /// `kDLFloat` (16, 32 or 64 bits).
    pub const FLOAT: Self = Self(2);
    /// `kDLBfloat` (bfloat16).
    pub const BFLOAT: Self = Self(4);
    /// `kDLFloat8_e4m3fn`.
    pub const FLOAT8_E4M3FN: Self = Self(10);
    /// `kDLFloat8_e5m2`.
    pub const FLOAT8_E5M2: Self = Self(12);
    /// `kDLFloat8_e8m0fnu` (the E8M0 scale byte).
    pub const FLOAT8_E8M0FNU: Self = Self(14);
}

/// `DLDevice`: where a tensor's memory lives.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// The kind of memory.
    pub device_type: DLDeviceType,
    /// The device ordinal (0 for host memory).
    pub device_id: i32,
}

/// `DLDataType`: an element type.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// The type family.
    pub code: DLDataTypeCode,
    /// Bits per element.
    pub bits: u8,
    /// Vector lanes (1 for every tensor this library reads or writes).
    pub lanes: u16,
}

/// `DLTensor`: a borrowed description of strided memory.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct DLTensor {
    /// The base address (device memory for CUDA tensors).
    pub data: *mut c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// The number of dimensions.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` sizes.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLPackVersion`: the DLPack ABI version a managed tensor follows.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// The tensor's memory must not be written.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// The tensor is a copy made by the producer, not a view of its source.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLManagedTensorVersioned`: a tensor with an owner; whoever holds it calls `deleter` once.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version the producer followed.
    pub version: DLPackVersion,
    /// The producer's context (the deleter's business).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; NULL when there is nothing to free.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor itself.
    pub dl_tensor: DLTensor,
}

// ------------------------------------------------------------------------------------------------
// mxfp8.h
// ------------------------------------------------------------------------------------------------

/// The major version of the header this crate mirrors.
pub const MXFP8_VERSION_MAJOR: u32 = 0;
/// The minor version of the header this crate mirrors.
pub const MXFP8_VERSION_MINOR: u32 = 1;
/// The patch version of the header this crate mirrors.
pub const MXFP8_VERSION_PATCH: u32 = 0;
/// `MAJOR * 10000 + MINOR * 100 + PATCH`, the encoding `mxfp8_version()` returns.
pub const MXFP8_VERSION: u32 = MXFP8_VERSION_MAJOR * 10000 + MXFP8_VERSION_MINOR * 100 + MXFP8_VERSION_PATCH;

/// `mxfp8_status`: pinned values.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct mxfp8_status(pub c_int);
impl mxfp8_status {
    /// `MXFP8_OK`.
    pub const OK: Self = Self(0);
    /// `MXFP8_ERROR_INVALID_ARGUMENT`.
    pub const ERROR_INVALID_ARGUMENT: Self = Self(1);
    /// `MXFP8_ERROR_MISSING_DATA`.
    pub const ERROR_MISSING_DATA: Self = Self(2);
    /// `MXFP8_ERROR_UNSUPPORTED`.
    pub const ERROR_UNSUPPORTED: Self = Self(3);
    /// `MXFP8_ERROR_OUT_OF_MEMORY`.
    pub const ERROR_OUT_OF_MEMORY: Self = Self(4);
    /// `MXFP8_ERROR_CUDA`.
    pub const ERROR_CUDA: Self = Self(5);
    /// `MXFP8_ERROR_INTERNAL`.
    pub const ERROR_INTERNAL: Self = Self(6);
    /// `MXFP8_NUM_STATUS`: not a status, one past the largest value the header knows.
    pub const NUM_STATUS: Self = Self(7);
}

/// `mxfp8_format`: float8_e4m3fn values.
pub const MXFP8_FORMAT_E4M3: i32 = 1;
/// `mxfp8_format`: float8_e5m2 values.
pub const MXFP8_FORMAT_E5M2: i32 = 2;
/// `mxfp8_format`: NVFP4 (E2M1 values, E4M3 scales per 16, float32 amax): an `mxfp8_tensor_desc` of it, or an
/// NVFP4 entry of a transfer from a bucket (`mxfp8_transfer_desc::formats`).
pub const MXFP8_FORMAT_NVFP4: i32 = 3;
/// `mxfp8_format`: not said (`MXFP8_TENSOR_DESC_INIT_UNSET`); refused by every call.
pub const MXFP8_FORMAT_UNSET: i32 = 0;
/// `mxfp8_scale_layout`: not said (`MXFP8_TENSOR_DESC_INIT_UNSET`); refused by every call.
pub const MXFP8_SCALE_LAYOUT_UNSET: i32 = -1;
/// `mxfp8_scale_layout`: row-major, possibly padded.
pub const MXFP8_SCALE_LAYOUT_ROW_MAJOR: i32 = 0;
/// `mxfp8_scale_layout`: the cuBLAS 128x4 block-scaling layout.
pub const MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED: i32 = 1;
/// `mxfp8_direction`: values scaled along K.
pub const MXFP8_DIRECTION_ROWWISE: i32 = 0;
/// `mxfp8_direction`: values scaled along rows.
pub const MXFP8_DIRECTION_COLUMNWISE: i32 = 1;
/// `mxfp8_values_dtype`: the format's own dtype (float8 of the format; float4_e2m1fn for NVFP4).
pub const MXFP8_VALUES_FP8: i32 = 0;
/// `mxfp8_values_dtype`: the same bytes as uint8.
pub const MXFP8_VALUES_UINT8: i32 = 1;
/// `mxfp8_scales_dtype`: uint8.
pub const MXFP8_SCALES_UINT8: i32 = 0;
/// `mxfp8_scales_dtype`: the format's scale dtype (float8_e8m0fnu; float8_e4m3fn for NVFP4).
pub const MXFP8_SCALES_E8M0: i32 = 1;
/// `mxfp8_padded_scales`: a contiguous copy.
pub const MXFP8_PADDED_SCALES_COPY: i32 = 0;
/// `mxfp8_padded_scales`: a zero-copy view with the padded row stride.
pub const MXFP8_PADDED_SCALES_STRIDED_VIEW: i32 = 1;
/// `mxfp8_block`: one scale per 32 consecutive values.
pub const MXFP8_BLOCK_1X32: i32 = 0;
/// `mxfp8_block`: one scale per 32 x 32 block (stored repeated as 1x32 scales).
pub const MXFP8_BLOCK_32X32: i32 = 1;
/// `mxfp8_block`: one scale per 16 values of a stored row, NVFP4's only block.
pub const MXFP8_BLOCK_1X16: i32 = 2;
/// `mxfp8_scales_granularity`: the stored 1x32 scales.
pub const MXFP8_SCALES_PER_32: i32 = 0;
/// `mxfp8_scales_granularity`: one scale per 32 x 32 block.
pub const MXFP8_SCALES_PER_32X32: i32 = 1;
/// `mxfp8_scale_rounding`: Transformer Engine's rule (the default).
pub const MXFP8_SCALE_ROUNDING_RCEIL: i32 = 0;
/// `mxfp8_scale_rounding`: the OCP MX v1.0 rule.
pub const MXFP8_SCALE_ROUNDING_FLOOR: i32 = 1;
/// `mxfp8_scale_rounding`: compressed-tensors' MX rule (llm-compressor checkpoints, vLLM's online MXFP8).
pub const MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS: i32 = 2;
/// `mxfp8_quantized_scales`: compact row-major.
pub const MXFP8_QUANTIZED_SCALES_COMPACT: i32 = 0;
/// `mxfp8_quantized_scales`: Transformer Engine's padded row-major buffer.
pub const MXFP8_QUANTIZED_SCALES_PADDED: i32 = 1;
/// `mxfp8_quantized_scales`: the padded buffer in the cuBLAS 128x4 layout.
pub const MXFP8_QUANTIZED_SCALES_SWIZZLED: i32 = 2;
/// `mxfp8_grouped_scales`: each expert takes TE's padded per-tensor allocation.
pub const MXFP8_GROUPED_SCALES_PADDED: i32 = 0;
/// `mxfp8_grouped_scales`: each expert's compact scales, no padding.
pub const MXFP8_GROUPED_SCALES_COMPACT: i32 = 1;
/// `mxfp8_tensor`: an opaque, reference-counted, thread-safe handle on a validated tensor.
#[repr(C)]
pub struct mxfp8_tensor {
    _private: [u8; 0],
}

/// `mxfp8_plan`: an opaque, immutable, thread-safe transfer, checked once (`mxfp8_transfer_prepare`).
#[repr(C)]
pub struct mxfp8_plan {
    _private: [u8; 0],
}

c_struct! {
    /// `mxfp8_tensor_desc`: what an MXFP8 or NVFP4 tensor is and where its bytes are (see the header for the rules).
    pub struct mxfp8_tensor_desc {
        /// `MXFP8_FORMAT_*`.
        format: i32 = MXFP8_FORMAT_E4M3,
        /// `MXFP8_SCALE_LAYOUT_*`, for both directions.
        scale_layout: i32 = MXFP8_SCALE_LAYOUT_ROW_MAJOR,
        /// Length of `shape`; 0 takes the logical shape from the data tensor.
        ndim: i32 = 0,
        /// The logical shape `(*lead, K)`, copied; NULL when `ndim` is 0.
        shape: *const i64 = null(),
        /// Rowwise FP8 values (taken on success).
        rowwise_data: *mut DLManagedTensorVersioned = null_mut(),
        /// Rowwise E8M0 scales (taken on success).
        rowwise_scale_inv: *mut DLManagedTensorVersioned = null_mut(),
        /// Columnwise FP8 values, in the tensor's shape (taken on success).
        columnwise_data: *mut DLManagedTensorVersioned = null_mut(),
        /// Columnwise E8M0 scales (taken on success).
        columnwise_scale_inv: *mut DLManagedTensorVersioned = null_mut(),
        /// `MXFP8_BLOCK_*`.
        block: i32 = MXFP8_BLOCK_1X32,
        /// Must be 0.
        reserved: u32 = 0,
        /// NVFP4: the rowwise float32 amax, one or one per row (taken on success); NULL for MXFP8.
        rowwise_amax: *mut DLManagedTensorVersioned = null_mut(),
        /// NVFP4: the columnwise float32 amax, one (taken on success); NULL for MXFP8.
        columnwise_amax: *mut DLManagedTensorVersioned = null_mut(),
        /// NVFP4: 448, or 256 for Transformer Engine's 4over6 tensors; 0 (not said) for MXFP8.
        e4m3_max: i32 = 0,
        /// Must be 0.
        reserved2: u32 = 0,
    }
}

/// The signature of DLPack's `DLPackManagedTensorAllocator`, which the option structs' `allocator` takes.
pub type mxfp8_allocator = unsafe extern "C" fn(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> c_int;

c_struct! {
    /// `mxfp8_export_options`: options of the exports and the batched export.
    pub struct mxfp8_export_options {
        /// `MXFP8_DIRECTION_*`.
        direction: i32 = MXFP8_DIRECTION_ROWWISE,
        /// `MXFP8_VALUES_*`.
        values_dtype: i32 = MXFP8_VALUES_FP8,
        /// `MXFP8_SCALES_UINT8` or `MXFP8_SCALES_E8M0`.
        scales_dtype: i32 = MXFP8_SCALES_UINT8,
        /// `MXFP8_PADDED_SCALES_*`.
        padded_scales: i32 = MXFP8_PADDED_SCALES_COPY,
        /// Must be 0.
        reserved: u32 = 0,
        /// The `cudaStream_t` copies run on (NULL: the legacy default stream).
        stream: *mut c_void = null_mut(),
        /// Allocates copies; None: the library allocates.
        allocator: Option<mxfp8_allocator> = None,
        /// `MXFP8_SCALES_PER_32` or `MXFP8_SCALES_PER_32X32`.
        scales_granularity: i32 = MXFP8_SCALES_PER_32,
        /// Must be 0.
        reserved2: u32 = 0,
        /// `MXFP8_SCALE_FIXUP_*` applied by `mxfp8_export_scales_batched` (a transfer has
        /// `mxfp8_transfer_desc::scale_fixup`).
        scale_fixup: i32 = MXFP8_SCALE_FIXUP_NONE,
        /// Must be 0.
        reserved3: u32 = 0,
        /// `mxfp8_export_components` exports only this shard; NULL: the whole tensor. The other calls
        /// taking these options refuse a set one.
        shard: *const mxfp8_shard = null(),
        /// `MXFP8_NVFP4_GLOBAL_SCALE_*` of `mxfp8_export_global_scale`.
        global_scale: i32 = MXFP8_NVFP4_GLOBAL_SCALE_DECODE,
        /// Must be 0.
        reserved4: u32 = 0,
    }
}

/// `mxfp8_scale_layout`: scales compact row-major, exactly `R * C` bytes.
pub const MXFP8_SCALE_LAYOUT_COMPACT: i32 = 0;
/// `mxfp8_scale_layout`: scales in the cuBLAS / CUTLASS 128x4 layout, flat, padding zero.
pub const MXFP8_SCALE_LAYOUT_128X4: i32 = 1;
/// `mxfp8_scale_layout`: FlashInfer TRT-LLM shuffled MoE weights (vLLM's `w2_weight`); `mxfp8_convert*` only.
pub const MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED: i32 = 2;
/// `mxfp8_scale_layout`: DeepGEMM's packed UE8M0 scales (int32, MN-major, rowwise only).
pub const MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED: i32 = 3;
/// `mxfp8_scale_layout`: the same for a gated activation's gate-and-up rows (vLLM's `w13_weight`).
pub const MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED: i32 = 4;
/// `mxfp8_scale_layout`: DeepGEMM's scales on Hopper: float32 `(R, C)`, each scale's bits `e << 23` (rowwise only).
pub const MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32: i32 = 5;
/// `mxfp8_scale_fixup`: scale bytes as stored.
pub const MXFP8_SCALE_FIXUP_NONE: i32 = 0;
/// `mxfp8_scale_fixup`: E8M0 exponent byte 0 written as 1 (NeMo RL).
pub const MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE: i32 = 1;

/// `mxfp8_bucket_part`: where one transfer entry's parts lie in a bucket (an array element, no
/// `struct_size`).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct mxfp8_bucket_part {
    /// Offset of the values.
    pub values_offset: u64,
    /// MXFP8: rows * cols; NVFP4: rows * cols / 2.
    pub values_bytes: u64,
    /// Offset of the scales.
    pub scales_offset: u64,
    /// The scale matrix in the part's layout.
    pub scales_bytes: u64,
    /// NVFP4: offset of the float32 amax, a multiple of 4; MXFP8: 0.
    pub amax_offset: u64,
    /// NVFP4: 4 or 4 * rows; MXFP8: 0.
    pub amax_bytes: u64,
}

/// `mxfp8_transfer_source`: not said (refused).
pub const MXFP8_TRANSFER_SOURCE_UNSET: i32 = 0;
/// `mxfp8_transfer_source`: tensor handles of either format.
pub const MXFP8_TRANSFER_FROM_TENSORS: i32 = 1;
/// `mxfp8_transfer_source`: a bucket and the per-entry arrays that describe it.
pub const MXFP8_TRANSFER_FROM_BUCKET: i32 = 2;
/// `mxfp8_transfer_destination`: not said (refused).
pub const MXFP8_TRANSFER_DESTINATION_UNSET: i32 = 0;
/// `mxfp8_transfer_destination`: caller buffers or an engine's parameters.
pub const MXFP8_TRANSFER_TO_BUFFERS: i32 = 1;
/// `mxfp8_transfer_destination`: a bucket laid out by `mxfp8_bucket_parts`.
pub const MXFP8_TRANSFER_TO_BUCKET: i32 = 2;
/// `mxfp8_transfer_destination`: nothing (`mxfp8_transfer_check` of the source side only).
pub const MXFP8_TRANSFER_TO_NOTHING: i32 = 3;

c_struct! {
/// `mxfp8_transfer_desc`: one transfer of `count` entries (per-entry parallel arrays; see transfer.h).
    /// Start from `Default` (`MXFP8_TRANSFER_DESC_INIT`).
    pub struct mxfp8_transfer_desc {
        /// `MXFP8_TRANSFER_FROM_*`; must be set.
        source: i32 = MXFP8_TRANSFER_SOURCE_UNSET,
        /// `MXFP8_TRANSFER_TO_*`; must be set.
        destination: i32 = MXFP8_TRANSFER_DESTINATION_UNSET,
        /// `MXFP8_SCALE_FIXUP_*` of every MXFP8 scale written (whole tensors only).
        scale_fixup: i32 = MXFP8_SCALE_FIXUP_NONE,
        /// `mxfp8_nvfp4_global_scale` written to `global_scales`; default decode.
        global_scale: i32 = MXFP8_NVFP4_GLOBAL_SCALE_DECODE,
        /// Must be 0.
        reserved: u32 = 0,
        /// Entries.
        count: usize = 0,
        /// `mxfp8_direction` of each entry; NULL: all rowwise.
        directions: *const i32 = null(),
        /// Each entry's shard; NULL, or a NULL entry: the whole tensor.
        shards: *const *const mxfp8_shard = null(),
        /// FROM_TENSORS: one handle per entry, either format.
        tensors: *const *const mxfp8_tensor = null(),
        /// FROM_BUCKET: the bucket.
        bucket_in: *const DLTensor = null(),
        /// FROM_BUCKET: where each entry's parts lie.
        parts_in: *const mxfp8_bucket_part = null(),
        /// FROM_BUCKET: each entry's logical rank.
        ndims: *const i32 = null(),
        /// FROM_BUCKET: each entry's logical shape.
        shapes: *const *const i64 = null(),
        /// FROM_BUCKET: `mxfp8_format` of each entry; required.
        formats: *const i32 = null(),
        /// FROM_BUCKET: `mxfp8_scale_layout` of each scales part; required.
        source_layouts: *const i32 = null(),
        /// FROM_BUCKET: E4M3_MAX of each NVFP4 entry (448 or 256).
        e4m3_maxes: *const i32 = null(),
        /// FROM_BUCKET, optional with `scales_shapes`: each scale matrix's rank.
        scales_ndims: *const i32 = null(),
        /// FROM_BUCKET, optional with `scales_ndims`: the sender's shape of each scale matrix.
        scales_shapes: *const *const i64 = null(),
        /// `mxfp8_scale_layout` each entry's scales are written in; NULL: all compact.
        target_layouts: *const i32 = null(),
        /// TO_BUFFERS: values (NULL, or a NULL entry: scales only).
        values: *const *mut DLTensor = null(),
        /// TO_BUFFERS: scales.
        scales: *const *mut DLTensor = null(),
        /// TO_BUFFERS: each NVFP4 entry's second-level scales (float32).
        global_scales: *const *mut DLTensor = null(),
        /// TO_BUCKET: the bucket.
        bucket_out: *mut DLTensor = null_mut(),
        /// TO_BUCKET: its parts, from `mxfp8_bucket_parts`.
        parts_out: *const mxfp8_bucket_part = null(),
    }
}

/// In `mxfp8_shard::row_end` / `col_end`: the end of the dimension.
pub const MXFP8_SHARD_END: i64 = -1;

c_struct! {
/// `mxfp8_shard`: rows `[row_begin, row_end)` (or `num_row_pieces` ranges in `row_pieces`, concatenated)
    /// and K columns `[col_begin, col_end)` of one tensor. Start from `Default` (`MXFP8_SHARD_INIT`, the whole
    /// tensor).
    pub struct mxfp8_shard {
        /// Must be 0.
        reserved: u32 = 0,
        /// First row of M = prod(lead).
        row_begin: i64 = 0,
        /// One past the last row, or `MXFP8_SHARD_END`.
        row_end: i64 = MXFP8_SHARD_END,
        /// First column of K.
        col_begin: i64 = 0,
        /// One past the last column, or `MXFP8_SHARD_END`.
        col_end: i64 = MXFP8_SHARD_END,
        /// Row pieces: how many begin / end pairs `row_pieces` holds; 0: the one range.
        num_row_pieces: usize = 0,
        /// `2 * num_row_pieces` begins and ends, concatenated in order; NULL with 0 pieces.
        row_pieces: *const i64 = null(),
    }
}

/// `mxfp8_grouped_tensor`: an opaque, thread-safe handle on validated grouped MoE experts.
#[repr(C)]
pub struct mxfp8_grouped_tensor {
    _private: [u8; 0],
}

c_struct! {
    /// `mxfp8_grouped_desc`: E experts of shapes `(rows_e, K)` stored back to back in two flat buffers.
    pub struct mxfp8_grouped_desc {
        /// `MXFP8_FORMAT_*`.
        format: i32 = MXFP8_FORMAT_E4M3,
        /// `MXFP8_SCALE_LAYOUT_*` of every expert's scales.
        scale_layout: i32 = MXFP8_SCALE_LAYOUT_ROW_MAJOR,
        /// `MXFP8_GROUPED_SCALES_*`.
        scales: i32 = MXFP8_GROUPED_SCALES_PADDED,
        /// E >= 1.
        num_experts: i32 = 0,
        /// Must be 0.
        reserved: u32 = 0,
        /// K, shared by all experts.
        cols: i64 = 0,
        /// Rows of every expert when `expert_rows` is NULL.
        uniform_rows: i64 = 0,
        /// E row counts (copied), or NULL.
        expert_rows: *const i64 = null(),
        /// E byte offsets of each expert's scales in `scale_inv` (copied), or NULL: back to back.
        scale_offsets: *const i64 = null(),
        /// The flat values (taken on success).
        data: *mut DLManagedTensorVersioned = null_mut(),
        /// The flat scales (taken on success).
        scale_inv: *mut DLManagedTensorVersioned = null_mut(),
    }
}

c_struct! {
    /// `mxfp8_quantize_options`: options of `mxfp8_quantize` and `mxfp8_quantize_into`.
    pub struct mxfp8_quantize_options {
        /// `MXFP8_FORMAT_*`.
        format: i32 = MXFP8_FORMAT_E4M3,
        /// `MXFP8_BLOCK_*`.
        block: i32 = MXFP8_BLOCK_1X32,
        /// `MXFP8_SCALE_ROUNDING_*`.
        scale_rounding: i32 = MXFP8_SCALE_ROUNDING_RCEIL,
        /// `MXFP8_QUANTIZED_SCALES_*`.
        scales_layout: i32 = MXFP8_QUANTIZED_SCALES_COMPACT,
        /// `MXFP8_VALUES_*` of the values `mxfp8_quantize` allocates.
        values_dtype: i32 = MXFP8_VALUES_FP8,
        /// `MXFP8_SCALES_UINT8` or `MXFP8_SCALES_E8M0` of the scales `mxfp8_quantize` allocates.
        scales_dtype: i32 = MXFP8_SCALES_UINT8,
        /// `MXFP8_CHECK_ONLY` or 0.
        flags: u32 = 0,
        /// The `cudaStream_t` the kernel runs on (NULL: the legacy default stream).
        stream: *mut c_void = null_mut(),
        /// Allocates `mxfp8_quantize`'s outputs; None: the library allocates.
        allocator: Option<mxfp8_allocator> = None,
    }
}

c_struct! {
    /// `mxfp8_dequantize_options`: options of `mxfp8_dequantize`.
    pub struct mxfp8_dequantize_options {
        /// `MXFP8_DIRECTION_*`.
        direction: i32 = MXFP8_DIRECTION_ROWWISE,
        /// The `cudaStream_t` the kernel runs on.
        stream: *mut c_void = null_mut(),
    }
}

c_struct! {
    /// `mxfp8_convert_options`: options of `mxfp8_convert` and `mxfp8_grouped_convert`.
    pub struct mxfp8_convert_options {
        /// `mxfp8_scale_layout` the scales are written in.
        target: i32 = MXFP8_SCALE_LAYOUT_COMPACT,
        /// `MXFP8_DIRECTION_*` read from a tensor.
        direction: i32 = MXFP8_DIRECTION_ROWWISE,
        /// `MXFP8_SCALE_FIXUP_*`.
        scale_fixup: i32 = MXFP8_SCALE_FIXUP_NONE,
        /// The `cudaStream_t` the work is queued on.
        stream: *mut c_void = null_mut(),
        /// Each expert's rows (of the gated target, each half's) padded to a multiple of this; 0: none.
        pad_rows_to: i64 = 0,
        /// K padded to a multiple of this (a multiple of 32); 0: none.
        pad_cols_to: i64 = 0,
        /// The E8M0 byte of a padding scale (default 127).
        pad_scale: i32 = 127,
        /// `MXFP8_CHECK_ONLY` or 0.
        flags: u64 = 0,
    }
}

/// A bit of an options struct's `flags`: every check of the call, then return without writing, allocating
/// or launching anything.
pub const MXFP8_CHECK_ONLY: u32 = 1;

/// `mxfp8_nvfp4_global_scale`: amax / (6 * E4M3_MAX), vLLM ModelOpt's weight_scale_2.
pub const MXFP8_NVFP4_GLOBAL_SCALE_DECODE: i32 = 0;
/// `mxfp8_nvfp4_global_scale`: (6 * E4M3_MAX) / amax as Transformer Engine computes it.
pub const MXFP8_NVFP4_GLOBAL_SCALE_ENCODE: i32 = 1;

/// `mxfp8_nvfp4_amax_scope`: one float32 amax for the tensor.
pub const MXFP8_NVFP4_AMAX_PER_TENSOR: i32 = 0;
/// `mxfp8_nvfp4_amax_scope`: one float32 amax per row (TE's row_scaled_nvfp4).
pub const MXFP8_NVFP4_AMAX_PER_ROW: i32 = 1;
/// `mxfp8_nvfp4_amax_mode`: the quantize computes the amax and writes it.
pub const MXFP8_NVFP4_AMAX_COMPUTE: i32 = 0;
/// `mxfp8_nvfp4_amax_mode`: the quantize reads the amax as given.
pub const MXFP8_NVFP4_AMAX_GIVEN: i32 = 1;
/// `mxfp8_nvfp4_4over6`: TE's default NVFP4 quantizer.
pub const MXFP8_NVFP4_4OVER6_OFF: i32 = 0;
/// `mxfp8_nvfp4_4over6`: 4over6, candidates compared by absolute error.
pub const MXFP8_NVFP4_4OVER6_MAE: i32 = 1;
/// `mxfp8_nvfp4_4over6`: 4over6, candidates compared by squared error.
pub const MXFP8_NVFP4_4OVER6_MSE: i32 = 2;

c_struct! {
    /// `mxfp8_nvfp4_quantize_options`: options of the NVFP4 quantize calls.
    pub struct mxfp8_nvfp4_quantize_options {
        /// `MXFP8_NVFP4_AMAX_PER_*`.
        amax_scope: i32 = MXFP8_NVFP4_AMAX_PER_TENSOR,
        /// `MXFP8_NVFP4_AMAX_COMPUTE` or `MXFP8_NVFP4_AMAX_GIVEN`.
        amax_mode: i32 = MXFP8_NVFP4_AMAX_COMPUTE,
        /// `MXFP8_NVFP4_4OVER6_*`.
        four_over_six: i32 = MXFP8_NVFP4_4OVER6_OFF,
        /// E4M3_MAX of the second level: 448, or 256 with 4over6.
        e4m3_max: i32 = 448,
        /// `MXFP8_QUANTIZED_SCALES_*`.
        scales_layout: i32 = MXFP8_QUANTIZED_SCALES_COMPACT,
        /// `MXFP8_DIRECTION_*` (columnwise: the transpose, as TE stores it).
        direction: i32 = MXFP8_DIRECTION_ROWWISE,
        /// `MXFP8_CHECK_ONLY` or 0.
        flags: u32 = 0,
        /// The `cudaStream_t` the kernels run on.
        stream: *mut c_void = null_mut(),
    }
}

// One declaration per function of mxfp8.h, in the header's order; the header documents each.
extern "C" {
    /// The loaded library's version, encoded as [`MXFP8_VERSION`]. Cannot fail.
    pub fn mxfp8_version() -> u32;
    /// A static English name for a status. Never NULL. Cannot fail.
    pub fn mxfp8_status_string(status: mxfp8_status) -> *const c_char;
    /// The message of this thread's last failed call; valid until its next call. Never NULL.
    pub fn mxfp8_last_error() -> *const c_char;
    /// Validates `desc` and wraps it in a handle, taking its managed tensors on success.
    pub fn mxfp8_tensor_create(desc: *const mxfp8_tensor_desc, out: *mut *mut mxfp8_tensor) -> mxfp8_status;
    /// Drops the caller's reference (NULL is fine).
    pub fn mxfp8_tensor_release(tensor: *mut mxfp8_tensor);
    /// Exports one direction as values (a view) and compact scales (a view or a copy).
    pub fn mxfp8_export_components(
        tensor: *const mxfp8_tensor,
        options: *const mxfp8_export_options,
        values: *mut *mut DLManagedTensorVersioned,
        scales: *mut *mut DLManagedTensorVersioned,
    ) -> mxfp8_status;
    /// An NVFP4 tensor's second-level scale of one direction (float32, the amax's shape), always a copy.
    pub fn mxfp8_export_global_scale(
        tensor: *const mxfp8_tensor,
        options: *const mxfp8_export_options,
        global_scale: *mut *mut DLManagedTensorVersioned,
    ) -> mxfp8_status;
    /// Writes the compact scales of `count` tensors into caller-owned buffers, in one launch.
    pub fn mxfp8_export_scales_batched(
        tensors: *const *const mxfp8_tensor,
        destinations: *const *mut DLTensor,
        count: usize,
        options: *const mxfp8_export_options,
    ) -> mxfp8_status;
    /// Lays out the bucket of a FROM_TENSORS, TO_BUCKET transfer.
    pub fn mxfp8_bucket_parts(
        desc: *const mxfp8_transfer_desc,
        alignment: u64,
        parts: *mut mxfp8_bucket_part,
        total_bytes: *mut u64,
    ) -> mxfp8_status;
    /// Checks everything, then moves every entry (one launch on CUDA memory).
    pub fn mxfp8_transfer(desc: *const mxfp8_transfer_desc, stream: *mut c_void) -> mxfp8_status;
    /// The checks of `mxfp8_transfer`, nothing written, nothing kept.
    pub fn mxfp8_transfer_check(desc: *const mxfp8_transfer_desc) -> mxfp8_status;
    /// The checks once; the work kept as a plan.
    pub fn mxfp8_transfer_prepare(desc: *const mxfp8_transfer_desc, out: *mut *mut mxfp8_plan) -> mxfp8_status;
    /// Launches a plan on `stream`: no check, no allocation, no synchronization.
    pub fn mxfp8_plan_run(plan: *const mxfp8_plan, stream: *mut c_void) -> mxfp8_status;
    /// Drops a plan and its tensor references (NULL is fine).
    pub fn mxfp8_plan_release(plan: *mut mxfp8_plan);
    /// Validates grouped experts and wraps them in a handle, taking the buffers on success.
    pub fn mxfp8_grouped_tensor_create(desc: *const mxfp8_grouped_desc, out: *mut *mut mxfp8_grouped_tensor) -> mxfp8_status;
    /// Drops the caller's reference (NULL is fine).
    pub fn mxfp8_grouped_tensor_release(grouped: *mut mxfp8_grouped_tensor);
    /// A new tensor handle viewing one expert.
    pub fn mxfp8_grouped_expert(grouped: *const mxfp8_grouped_tensor, expert: i32, out: *mut *mut mxfp8_tensor) -> mxfp8_status;
    /// Experts stacked: values `[count, N, K]` and scales `[count, N, ceil(K/32)]`; `experts` NULL and
    /// `count` 0: every expert, else the chosen ones in the order given.
    pub fn mxfp8_grouped_export(
        grouped: *const mxfp8_grouped_tensor,
        experts: *const i32,
        count: usize,
        options: *const mxfp8_export_options,
        values: *mut *mut DLManagedTensorVersioned,
        scales: *mut *mut DLManagedTensorVersioned,
    ) -> mxfp8_status;
    /// A tensor's scales (and values) written in an engine-native target, into caller buffers.
    pub fn mxfp8_convert(
        tensor: *const mxfp8_tensor,
        options: *const mxfp8_convert_options,
        values: *mut DLTensor,
        scales: *mut DLTensor,
    ) -> mxfp8_status;
    /// Grouped experts of one row count written stacked in an engine-native target, one launch.
    pub fn mxfp8_grouped_convert(
        grouped: *const mxfp8_grouped_tensor,
        options: *const mxfp8_convert_options,
        values: *mut DLTensor,
        scales: *mut DLTensor,
    ) -> mxfp8_status;
    /// The bytes an R x C scale matrix takes in a layout.
    pub fn mxfp8_layout_bytes(layout: i32, direction: i32, rows: i64, cols: i64, bytes: *mut i64) -> mxfp8_status;
    /// Undoes the GEMM swizzle of one scale matrix into `compact`.
    pub fn mxfp8_unswizzle_scales(swizzled: *const DLTensor, compact: *mut DLTensor, stream: *mut c_void) -> mxfp8_status;
    /// Swizzles one compact scale matrix into the cuBLAS layout, padding zero.
    pub fn mxfp8_swizzle_scales(compact: *const DLTensor, swizzled: *mut DLTensor, stream: *mut c_void) -> mxfp8_status;
    /// Quantizes into new buffers (the directions whose pointers are not NULL).
    pub fn mxfp8_quantize(
        input: *const DLTensor,
        options: *const mxfp8_quantize_options,
        rowwise_data: *mut *mut DLManagedTensorVersioned,
        rowwise_scale_inv: *mut *mut DLManagedTensorVersioned,
        columnwise_data: *mut *mut DLManagedTensorVersioned,
        columnwise_scale_inv: *mut *mut DLManagedTensorVersioned,
    ) -> mxfp8_status;
    /// Quantizes into caller-owned buffers (the directions whose pointers are not NULL).
    pub fn mxfp8_quantize_into(
        input: *const DLTensor,
        options: *const mxfp8_quantize_options,
        rowwise_data: *mut DLTensor,
        rowwise_scale_inv: *mut DLTensor,
        columnwise_data: *mut DLTensor,
        columnwise_scale_inv: *mut DLTensor,
    ) -> mxfp8_status;
    /// Decodes one direction into a float32 or bfloat16 buffer.
    pub fn mxfp8_dequantize(
        tensor: *const mxfp8_tensor,
        options: *const mxfp8_dequantize_options,
        output: *mut DLTensor,
    ) -> mxfp8_status;
    /// Quantizes `count` inputs to NVFP4 (packed E2M1 values, E4M3 block scales, float32 amax) into
    /// caller buffers: one input (count 1, either amax scope), or fused shards under one shared per-tensor
    /// amax (count > 1).
    pub fn mxfp8_nvfp4_quantize_into(
        inputs: *const *const DLTensor,
        count: usize,
        options: *const mxfp8_nvfp4_quantize_options,
        values: *const *mut DLTensor,
        scales: *const *mut DLTensor,
        amax: *mut DLTensor,
    ) -> mxfp8_status;
}
