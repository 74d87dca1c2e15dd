//! Safe Rust API over libmxfp8: MXFP8 tensors as producers store them (Transformer Engine's padded or
//! GEMM-swizzled scales) in, FP8 values and compact E8M0 scales out; buckets for weight sync and the
//! receiver's import, shards for resharding, grouped MoE experts, engine-native layouts (CUTLASS 128x4,
//! DeepGEMM, TRT-LLM), quantize (bit-exact with Transformer Engine), dequantize, the scale swizzle, and
//! the same for NVFP4.
//!
//! ```
//! use mxfp8::{ExportOptions, Format, ManagedTensor, ScaleLayout, TensorBuilder};
//! # fn main() -> Result<(), mxfp8::Error> {
//! // A (100, 48) weight: 2 scales per row, stored swizzled in one 128 x 4 tile.
//! let compact: Vec<u8> = (0..200).map(|i| 100 + (i % 50) as u8).collect();
//! let swizzled = mxfp8::swizzle_scales_host(&compact, 100, 2)?;
//! let tensor = TensorBuilder::new()
//!     .format(Format::E4M3)
//!     .scale_layout(ScaleLayout::GemmSwizzled)
//!     .rowwise(ManagedTensor::from_host_bytes(vec![0x38; 100 * 48], &[100, 48])?,
//!              ManagedTensor::from_host_bytes(swizzled, &[128, 4])?)
//!     .build()?;
//! let parts = tensor.export(&ExportOptions::default())?;
//! assert_eq!(parts.scales.shape(), &[100, 2]);
//! assert_eq!(parts.scales.as_host_bytes(), Some(&compact[..]));
//! # Ok(()) }
//! ```
//!
//! Linking and running: the library is linked from `MXFP8_LIB_DIR` (the folder holding `libmxfp8.so`) or
//! else `pkg-config mxfp8`, and that folder goes into the RPATH of this crate's tests and examples, so
//! they run without `LD_LIBRARY_PATH`. A program of yours adds it in its own build script
//! (`cargo:rustc-link-arg=-Wl,-rpath,<folder>`): Cargo applies link arguments to their own package only.
//! The crate's README ("Finding libmxfp8") has the details.
//!
//! The surface, by C function (every function of `mxfp8.h` has a safe form):
//!
//! | mxfp8.h | here |
//! |---|---|
//! | `mxfp8_tensor_create` / `_release` | [`TensorBuilder`] -> [`Tensor`] (drop releases) |
//! | `mxfp8_export_components` | [`Tensor::export`] -> [`Components`] |
//! | `mxfp8_export_scales_batched` | [`export_scales_batched`] (host slices), [`export_scales_batched_device`] |
//! | `mxfp8_transfer` / `mxfp8_transfer_check` / `mxfp8_transfer_prepare` / `mxfp8_plan_run` / `mxfp8_bucket_parts` (one `mxfp8_transfer_desc`: from tensors or a bucket, to a bucket, buffers or a check) | buckets: [`BucketPlan::new`], [`BucketPlan::fill`] / [`fill_device`](BucketPlan::fill_device), [`BucketPlan::manifest`] -> [`Manifest::unpack`] (checked by the library before it makes a view); imports: [`import_bucket_host`], [`import_bucket_host_with`] ([`BucketImport`]: fix-up, shards), [`import_bucket_device`], [`import_tensors_host`], [`import_tensors_device`]; prepared: [`PreparedExport::scales_batched`] (and `_device`), [`PreparedExport::bucket`], [`PreparedExport::import_bucket`], [`PreparedExport::import_tensors`] (and `_device`), [`PreparedExport::run`] |
//! | `mxfp8_grouped_*` | [`GroupedBuilder`] -> [`GroupedTensor::expert`], [`GroupedTensor::export_stacked`], [`GroupedTensor::export_experts`] |
//! | `mxfp8_convert` / `mxfp8_grouped_convert` / `mxfp8_layout_bytes` | [`Tensor::convert_into`] / [`convert_device`](Tensor::convert_device), [`GroupedTensor::convert_into`] / [`convert_device`](GroupedTensor::convert_device), [`layout_bytes`] ([`ConvertOptions`], [`Layout`], [`ScaleFixup`]) |
//! | `mxfp8_export_components` with `options.shard` | [`Tensor::export_shard`] ([`Shard`]) |
//! | the transfer with shards (`desc.shards`) | [`BucketPlan::with_shards`], then `fill`, `fill_device`, [`PreparedExport::bucket`]; [`import_tensor_shards_host`], [`import_tensor_shards_device`], [`PreparedExport::import_tensor_shards`] (and `import_tensors_device` with shards) |
//! | `mxfp8_swizzle_scales` / `mxfp8_unswizzle_scales` | [`swizzle_scales_host`], [`swizzle_scales_into`], [`swizzle_scales_device`] (and `unswizzle_*`) |
//! | `mxfp8_quantize` | [`quantize_host`], [`quantize_host_both`], [`quantize_raw`] |
//! | `mxfp8_quantize_into` | [`quantize_into`] (host slices), [`quantize_into_device`] |
//! | `mxfp8_dequantize` | [`Tensor::dequantize_host`], [`Tensor::dequantize_into`], [`Tensor::dequantize_into_device`] |
//! | `mxfp8_tensor_create` / `_release` of format NVFP4 | [`Nvfp4TensorBuilder`] -> [`Nvfp4Tensor`] |
//! | `mxfp8_export_components` + `mxfp8_export_global_scale` of an NVFP4 tensor | [`Nvfp4Tensor::export`] -> [`Nvfp4Components`], [`Nvfp4Tensor::global_scale`] ([`GlobalScale`]) |
//! | `mxfp8_dequantize` of an NVFP4 tensor | [`Nvfp4Tensor::dequantize_host`], [`Nvfp4Tensor::dequantize_into`], [`Nvfp4Tensor::dequantize_into_device`] |
//! | `mxfp8_nvfp4_quantize_into` | count 1: [`nvfp4_quantize_into`], [`nvfp4_quantize_into_device`] ([`Nvfp4QuantizeOptions`]); fused shards: [`nvfp4_quantize_fused_into`], [`nvfp4_quantize_fused_into_device`] |
//! | the transfer with NVFP4 entries (handles of either format) | [`MixedBucketPlan::new`] ([`MixedTensor`]: MXFP8 or NVFP4; [`Nvfp4BucketEntry`]), [`MixedBucketPlan::fill`] / [`fill_device`](MixedBucketPlan::fill_device), [`PreparedExport::bucket_mixed`] (and `_device`) |
//! | the transfer from a bucket with NVFP4 entries (their amax parts, `e4m3_maxes`, `global_scales`) | [`MixedBucketPlan::manifest`] -> [`MixedManifest`] ([`MixedManifestEntry`], [`Nvfp4ManifestEntry`]) -> [`MixedManifest::unpack`] ([`MixedBucketView`], [`Nvfp4BucketView`]); [`import_bucket_mixed_host`] ([`MixedBucketImport`]), [`import_bucket_mixed_device`], [`PreparedExport::import_bucket_mixed`] (and `_device`) |
//! | the transfer from NVFP4 tensors into buffers | [`import_tensors_mixed_host`] ([`MixedImportTarget`], [`Nvfp4ImportTarget`]), [`import_tensors_mixed_device`] ([`DeviceMixedImportTarget`]), [`PreparedExport::import_tensors_mixed`] (and `_device`) |
//! | `mxfp8_version`, `mxfp8_status_string`, `mxfp8_last_error` | [`version`], [`Status`], [`Error`] |
//!
//! Not offered safely: the option structs' `allocator` callbacks (outputs are allocated by the
//! library; use mxfp8-sys to pass a framework's allocator).
//!
//! Host memory is Rust slices and vectors. Device memory is a [`DeviceBytes`] (or a [`ManagedTensor`]
//! taken with [`ManagedTensor::from_raw`]), whose `unsafe` constructor states what the caller promises;
//! CUDA work is queued on a [`Stream`] and the calls do not wait.
//!
//! Ownership follows the C API: a [`TensorBuilder`] hands its [`ManagedTensor`]s to the library when
//! [`TensorBuilder::build`] succeeds (and drops them, running their deleters, when it fails); the
//! [`Components`] of an export keep what they view alive on their own, so they may outlive the
//! [`Tensor`]. Bucket views borrow the bucket, and a [`PreparedExport`] borrows the host buffers it
//! writes: the compiler rejects one that outlives them.
#![deny(missing_docs)]

pub use mxfp8_sys as sys;

mod bucket;
mod convert;
mod error;
mod grouped;
mod import;
mod managed;
mod memory;
mod mixed;
mod nvfp4;
mod options;
mod prepared;
mod quantize;
mod shard;
mod swizzle;
mod tensor;
mod transfer;

pub use bucket::{BucketEntry, BucketPlan, BucketView, DeviceBucketView, Manifest, ManifestEntry};
pub use convert::{layout_bytes, ConvertOptions};
pub use error::{Error, Status};
pub use grouped::{GroupedBuilder, GroupedTensor};
pub use import::{
    import_bucket_device, import_bucket_host, import_bucket_host_with, import_tensor_shards_device, import_tensor_shards_host, import_tensors_device,
    import_tensors_host, BucketImport, DeviceImportTarget, ImportTarget,
};
pub use managed::ManagedTensor;
pub use memory::DeviceBytes;
pub use mixed::{
    import_bucket_mixed_device, import_bucket_mixed_host, import_tensors_mixed_device, import_tensors_mixed_host, DeviceMixedImportTarget,
    DeviceNvfp4ImportTarget, MixedBucketImport, MixedBucketPlan, MixedBucketView, MixedImportTarget, MixedManifest, MixedManifestEntry,
    MixedTensor, Nvfp4BucketEntry, Nvfp4BucketView, Nvfp4ImportTarget, Nvfp4ManifestEntry,
};
pub use nvfp4::{
    nvfp4_quantize_fused_into, nvfp4_quantize_fused_into_device, nvfp4_quantize_into, nvfp4_quantize_into_device, AmaxMode, AmaxScope,
    DeviceFusedShard, FourOverSix, FusedShard, GlobalScale,
    Nvfp4Components, Nvfp4ExportOptions, Nvfp4Output, Nvfp4QuantizeOptions, Nvfp4ScalesDtype, Nvfp4Tensor, Nvfp4TensorBuilder,
    Nvfp4ValuesDtype,
};
pub use prepared::PreparedExport;
pub use shard::Shard;
pub use options::{
    Block, Direction, ExportOptions, Format, GroupedScales, Layout, PaddedScales, QuantizedScales, ScaleFixup, ScaleLayout, ScaleRounding,
    ScalesDtype, ScalesGranularity, Stream, ValuesDtype,
};
pub use quantize::{
    quantize_host, quantize_host_both, quantize_into, quantize_into_device, quantize_raw, DequantizeOptions, DequantizeOutput, HostInput,
    InputDtype, OutputDtype, QuantizeOptions, QuantizeOutput, Quantized,
};
pub use swizzle::{
    swizzle_scales_device, swizzle_scales_host, swizzle_scales_into, swizzled_len, unswizzle_scales_device,
    unswizzle_scales_host, unswizzle_scales_into,
};
pub use tensor::{compact_scales_shape, export_scales_batched, export_scales_batched_device, Components, Tensor, TensorBuilder};

/// The version of the loaded library, `MAJOR * 10000 + MINOR * 100 + PATCH`; compare it with
/// [`sys::MXFP8_VERSION`] to detect a header/library mismatch.
pub fn version() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { sys::mxfp8_version() }
}
