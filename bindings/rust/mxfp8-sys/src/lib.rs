//! Raw declarations mirroring `include/mxfp8/mxfp8.h` and the DLPack (>= 1.1) structs it uses.
//!
//! Nothing here is safe to call without reading the header: it documents ownership, lifetimes and
//! streams for every function. Use the `mxfp8` crate for a safe API.
//!
//! C enums that travel inside structs or come back from C are newtype integers, so that a value this
//! crate does not know (a newer library, a newer DLPack) is just an unknown value, never undefined
//! behaviour.
#![allow(non_camel_case_types)]
#![no_std]

use core::ffi::{c_char, c_int, c_void};

// ------------------------------------------------------------------------------------------------
// DLPack
// ------------------------------------------------------------------------------------------------

/// `DLDeviceType`.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub c_int);
impl DLDeviceType {
    pub const CPU: Self = Self(1);
    pub const CUDA: Self = Self(2);
    pub const CUDA_HOST: Self = Self(3);
    pub const CUDA_MANAGED: Self = Self(13);
}

/// `DLDataTypeCode`, stored in `DLDataType::code` as a byte.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DLDataTypeCode(pub u8);
impl DLDataTypeCode {
    pub const INT: Self = Self(0);
    pub const UINT: Self = Self(1);
    pub const FLOAT: Self = Self(2);
    pub const BFLOAT: Self = Self(4);
    pub const FLOAT8_E4M3FN: Self = Self(10);
    pub const FLOAT8_E5M2: Self = Self(12);
    pub const FLOAT8_E8M0FNU: Self = Self(14);
}

#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLDataType {
    pub code: DLDataTypeCode,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

// ------------------------------------------------------------------------------------------------
// mxfp8.h
// ------------------------------------------------------------------------------------------------

pub const MXFP8_VERSION_MAJOR: u32 = 0;
pub const MXFP8_VERSION_MINOR: u32 = 1;
pub const MXFP8_VERSION_PATCH: u32 = 0;
pub const MXFP8_VERSION: u32 = MXFP8_VERSION_MAJOR * 10000 + MXFP8_VERSION_MINOR * 100 + MXFP8_VERSION_PATCH;

/// `mxfp8_status`: pinned values.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct mxfp8_status(pub c_int);
impl mxfp8_status {
    pub const OK: Self = Self(0);
    pub const ERROR_INVALID_ARGUMENT: Self = Self(1);
    pub const ERROR_MISSING_DATA: Self = Self(2);
    pub const ERROR_UNSUPPORTED: Self = Self(3);
    pub const ERROR_OUT_OF_MEMORY: Self = Self(4);
    pub const ERROR_CUDA: Self = Self(5);
    pub const ERROR_INTERNAL: Self = Self(6);
}

pub const MXFP8_FORMAT_E4M3: i32 = 1;
pub const MXFP8_FORMAT_E5M2: i32 = 2;
pub const MXFP8_SCALE_LAYOUT_ROW_MAJOR: i32 = 0;
pub const MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED: i32 = 1;
pub const MXFP8_DIRECTION_ROWWISE: i32 = 0;
pub const MXFP8_DIRECTION_COLUMNWISE: i32 = 1;
pub const MXFP8_VALUES_FP8: i32 = 0;
pub const MXFP8_VALUES_UINT8: i32 = 1;
pub const MXFP8_SCALES_UINT8: i32 = 0;
pub const MXFP8_SCALES_E8M0: i32 = 1;
pub const MXFP8_PADDED_SCALES_COPY: i32 = 0;
pub const MXFP8_PADDED_SCALES_STRIDED_VIEW: i32 = 1;
pub const MXFP8_BLOCK_1X32: i32 = 0;
pub const MXFP8_BLOCK_32X32: i32 = 1;
pub const MXFP8_SCALES_PER_32: i32 = 0;
pub const MXFP8_SCALES_PER_32X32: i32 = 1;
pub const MXFP8_SCALE_ROUNDING_RCEIL: i32 = 0;
pub const MXFP8_SCALE_ROUNDING_FLOOR: i32 = 1;
pub const MXFP8_QUANTIZED_SCALES_COMPACT: i32 = 0;
pub const MXFP8_QUANTIZED_SCALES_PADDED: i32 = 1;
pub const MXFP8_QUANTIZED_SCALES_SWIZZLED: i32 = 2;
pub const MXFP8_GROUPED_SCALES_PADDED: i32 = 0;
pub const MXFP8_GROUPED_SCALES_COMPACT: i32 = 1;

/// Opaque handle.
#[repr(C)]
pub struct mxfp8_tensor {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct mxfp8_tensor_desc {
    pub struct_size: u32,
    pub format: i32,
    pub scale_layout: i32,
    pub ndim: i32,
    pub shape: *const i64,
    pub rowwise_data: *mut DLManagedTensorVersioned,
    pub rowwise_scale_inv: *mut DLManagedTensorVersioned,
    pub columnwise_data: *mut DLManagedTensorVersioned,
    pub columnwise_scale_inv: *mut DLManagedTensorVersioned,
    pub block: i32,
    pub reserved: u32,
}

impl Default for mxfp8_tensor_desc {
    /// `MXFP8_TENSOR_DESC_INIT`.
    fn default() -> Self {
        Self {
            struct_size: core::mem::size_of::<Self>() as u32,
            format: MXFP8_FORMAT_E4M3,
            scale_layout: MXFP8_SCALE_LAYOUT_ROW_MAJOR,
            ndim: 0,
            shape: core::ptr::null(),
            rowwise_data: core::ptr::null_mut(),
            rowwise_scale_inv: core::ptr::null_mut(),
            columnwise_data: core::ptr::null_mut(),
            columnwise_scale_inv: core::ptr::null_mut(),
            block: MXFP8_BLOCK_1X32,
            reserved: 0,
        }
    }
}

/// The signature of DLPack's `DLPackManagedTensorAllocator`.
pub type mxfp8_allocator = unsafe extern "C" fn(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> c_int;

#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct mxfp8_export_options {
    pub struct_size: u32,
    pub direction: i32,
    pub values_dtype: i32,
    pub scales_dtype: i32,
    pub padded_scales: i32,
    pub reserved: u32,
    pub stream: *mut c_void,
    pub allocator: Option<mxfp8_allocator>,
    pub scales_granularity: i32,
    pub reserved2: u32,
}

impl Default for mxfp8_export_options {
    /// `MXFP8_EXPORT_OPTIONS_INIT`.
    fn default() -> Self {
        Self {
            struct_size: core::mem::size_of::<Self>() as u32,
            direction: MXFP8_DIRECTION_ROWWISE,
            values_dtype: MXFP8_VALUES_FP8,
            scales_dtype: MXFP8_SCALES_UINT8,
            padded_scales: MXFP8_PADDED_SCALES_COPY,
            reserved: 0,
            stream: core::ptr::null_mut(),
            allocator: None,
            scales_granularity: MXFP8_SCALES_PER_32,
            reserved2: 0,
        }
    }
}

/// Opaque handle on grouped MoE experts.
#[repr(C)]
pub struct mxfp8_grouped_tensor {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct mxfp8_grouped_desc {
    pub struct_size: u32,
    pub format: i32,
    pub scale_layout: i32,
    pub scales: i32,
    pub num_experts: i32,
    pub reserved: u32,
    pub cols: i64,
    pub uniform_rows: i64,
    pub expert_rows: *const i64,
    pub scale_offsets: *const i64,
    pub data: *mut DLManagedTensorVersioned,
    pub scale_inv: *mut DLManagedTensorVersioned,
}

impl Default for mxfp8_grouped_desc {
    /// `MXFP8_GROUPED_DESC_INIT`.
    fn default() -> Self {
        Self {
            struct_size: core::mem::size_of::<Self>() as u32,
            format: MXFP8_FORMAT_E4M3,
            scale_layout: MXFP8_SCALE_LAYOUT_ROW_MAJOR,
            scales: MXFP8_GROUPED_SCALES_PADDED,
            num_experts: 0,
            reserved: 0,
            cols: 0,
            uniform_rows: 0,
            expert_rows: core::ptr::null(),
            scale_offsets: core::ptr::null(),
            data: core::ptr::null_mut(),
            scale_inv: core::ptr::null_mut(),
        }
    }
}

#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct mxfp8_quantize_options {
    pub struct_size: u32,
    pub format: i32,
    pub block: i32,
    pub scale_rounding: i32,
    pub scales_layout: i32,
    pub values_dtype: i32,
    pub scales_dtype: i32,
    pub reserved: u32,
    pub stream: *mut c_void,
    pub allocator: Option<mxfp8_allocator>,
}

impl Default for mxfp8_quantize_options {
    /// `MXFP8_QUANTIZE_OPTIONS_INIT`.
    fn default() -> Self {
        Self {
            struct_size: core::mem::size_of::<Self>() as u32,
            format: MXFP8_FORMAT_E4M3,
            block: MXFP8_BLOCK_1X32,
            scale_rounding: MXFP8_SCALE_ROUNDING_RCEIL,
            scales_layout: MXFP8_QUANTIZED_SCALES_COMPACT,
            values_dtype: MXFP8_VALUES_FP8,
            scales_dtype: MXFP8_SCALES_UINT8,
            reserved: 0,
            stream: core::ptr::null_mut(),
            allocator: None,
        }
    }
}

#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct mxfp8_dequantize_options {
    pub struct_size: u32,
    pub direction: i32,
    pub stream: *mut c_void,
}

impl Default for mxfp8_dequantize_options {
    /// `MXFP8_DEQUANTIZE_OPTIONS_INIT`.
    fn default() -> Self {
        Self {
            struct_size: core::mem::size_of::<Self>() as u32,
            direction: MXFP8_DIRECTION_ROWWISE,
            stream: core::ptr::null_mut(),
        }
    }
}

extern "C" {
    pub fn mxfp8_version() -> u32;
    pub fn mxfp8_status_string(status: mxfp8_status) -> *const c_char;
    pub fn mxfp8_last_error() -> *const c_char;
    pub fn mxfp8_tensor_create(desc: *const mxfp8_tensor_desc, out: *mut *mut mxfp8_tensor) -> mxfp8_status;
    pub fn mxfp8_tensor_release(tensor: *mut mxfp8_tensor);
    pub fn mxfp8_export_components(
        tensor: *const mxfp8_tensor,
        options: *const mxfp8_export_options,
        values: *mut *mut DLManagedTensorVersioned,
        scales: *mut *mut DLManagedTensorVersioned,
    ) -> mxfp8_status;
    pub fn mxfp8_export_scales_batched(
        tensors: *const *const mxfp8_tensor,
        destinations: *const *mut DLTensor,
        count: usize,
        options: *const mxfp8_export_options,
    ) -> mxfp8_status;
    pub fn mxfp8_grouped_tensor_create(desc: *const mxfp8_grouped_desc, out: *mut *mut mxfp8_grouped_tensor) -> mxfp8_status;
    pub fn mxfp8_grouped_tensor_release(grouped: *mut mxfp8_grouped_tensor);
    pub fn mxfp8_grouped_expert(grouped: *const mxfp8_grouped_tensor, expert: i32, out: *mut *mut mxfp8_tensor) -> mxfp8_status;
    pub fn mxfp8_grouped_export_stacked(
        grouped: *const mxfp8_grouped_tensor,
        options: *const mxfp8_export_options,
        values: *mut *mut DLManagedTensorVersioned,
        scales: *mut *mut DLManagedTensorVersioned,
    ) -> mxfp8_status;
    pub fn mxfp8_unswizzle_scales(swizzled: *const DLTensor, compact: *mut DLTensor, stream: *mut c_void) -> mxfp8_status;
    pub fn mxfp8_swizzle_scales(compact: *const DLTensor, swizzled: *mut DLTensor, stream: *mut c_void) -> mxfp8_status;
    pub fn mxfp8_quantize(
        input: *const DLTensor,
        options: *const mxfp8_quantize_options,
        rowwise_data: *mut *mut DLManagedTensorVersioned,
        rowwise_scale_inv: *mut *mut DLManagedTensorVersioned,
        columnwise_data: *mut *mut DLManagedTensorVersioned,
        columnwise_scale_inv: *mut *mut DLManagedTensorVersioned,
    ) -> mxfp8_status;
    pub fn mxfp8_quantize_into(
        input: *const DLTensor,
        options: *const mxfp8_quantize_options,
        rowwise_data: *mut DLTensor,
        rowwise_scale_inv: *mut DLTensor,
        columnwise_data: *mut DLTensor,
        columnwise_scale_inv: *mut DLTensor,
    ) -> mxfp8_status;
    pub fn mxfp8_dequantize(
        tensor: *const mxfp8_tensor,
        options: *const mxfp8_dequantize_options,
        output: *mut DLTensor,
    ) -> mxfp8_status;
}
