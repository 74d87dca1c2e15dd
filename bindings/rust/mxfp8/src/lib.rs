//! Safe Rust API over libmxfp8, as thin as its header: one [`Tensor`] of any format (MXFP8 or NVFP4, as
//! Transformer Engine stores it) in, values and compact scales out; one [`Transfer`] (from tensors or a
//! bucket, to a bucket, the engine's buffers or a check; whole or sharded) run at once or prepared into
//! one [`Plan`]; grouped MoE experts, engine-native layouts (CUTLASS 128x4, DeepGEMM, TRT-LLM), quantize
//! (bit-exact with Transformer Engine), dequantize and the scale swizzle. Host and device memory go
//! through the same calls, as a [`Buf`] (read) or [`BufMut`] (written).
//!
//! ```
//! use mxfp8::{ExportOptions, Format, ManagedTensor, ScaleLayout, TensorBuilder};
//! # fn main() -> Result<(), mxfp8::Error> {
//! // A (100, 48) weight: 2 scales per row, stored swizzled in one 128 x 4 tile.
//! let compact: Vec<u8> = (0..200).map(|i| 100 + (i % 50) as u8).collect();
//! let mut swizzled = vec![0u8; 128 * 4];
//! mxfp8::swizzle_scales(&compact, 100, 2, &mut swizzled, mxfp8::Stream::default())?;
//! let tensor = TensorBuilder::new()
//!     .format(Format::E4M3)
//!     .scale_layout(ScaleLayout::GemmSwizzled)
//!     .rowwise(ManagedTensor::from_host(vec![0x38; 100 * 48], &[100, 48])?,
//!              ManagedTensor::from_host(swizzled, &[128, 4])?)
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
//! | `mxfp8_tensor_create` / `_release` (any format) | [`TensorBuilder`] -> [`Tensor`] (drop releases) |
//! | `mxfp8_export_components` (with `options.shard`) + `mxfp8_export_global_scale` | [`Tensor::export`] -> [`Components`] ([`ExportOptions`], [`Shard`]); [`Tensor::global_scale`] |
//! | `mxfp8_export_scales_batched` | [`export_scales_batched`] |
//! | `mxfp8_transfer` / `mxfp8_transfer_check` / `mxfp8_bucket_parts` | [`Transfer`] ([`Transfer::from_tensors`] / [`from_bucket`](Transfer::from_bucket), [`to_buffers`](Transfer::to_buffers) ([`Target`]) / [`to_bucket`](Transfer::to_bucket)): [`run`](Transfer::run), [`check`](Transfer::check), [`bucket_parts`](Transfer::bucket_parts) ([`BucketPart`]); [`Transfer::manifest`] -> [`Manifest::unpack`] -> [`BucketView`] (views of parts the library checked) |
//! | `mxfp8_transfer_prepare` / `mxfp8_plan_run` / `mxfp8_plan_release` | [`Transfer::prepare`] -> [`Plan::run`] (drop releases) |
//! | `mxfp8_grouped_*` | [`GroupedBuilder`] -> [`GroupedTensor::expert`], [`GroupedTensor::export`] |
//! | `mxfp8_convert` / `mxfp8_grouped_convert` / `mxfp8_layout_bytes` | [`Tensor::convert_into`], [`GroupedTensor::convert_into`] ([`ConvertOptions`], [`Layout`], [`ScaleFixup`]), [`layout_bytes`] |
//! | `mxfp8_swizzle_scales` / `mxfp8_unswizzle_scales` | [`swizzle_scales`], [`unswizzle_scales`] |
//! | `mxfp8_quantize` | [`quantize`] |
//! | `mxfp8_quantize_into` | [`quantize_into`] ([`QuantizeOptions`]) |
//! | `mxfp8_nvfp4_quantize_into` | [`nvfp4_quantize_into`] ([`Nvfp4Part`], [`Nvfp4QuantizeOptions`]) |
//! | `mxfp8_dequantize` | [`Tensor::dequantize_into`] ([`DequantizeOptions`]) |
//! | `mxfp8_version`, `mxfp8_status_string`, `mxfp8_last_error` | [`version`], [`Status`], [`Error`] |
//!
//! Not offered safely: the option structs' `allocator` callbacks (outputs are allocated by the
//! library; use mxfp8-sys to pass a framework's allocator).
//!
//! Memory: a call reads a [`Buf`] and writes a [`BufMut`], made from host slices (`&[u8]`, `&mut [f32]`,
//! ...) or from [`DeviceBytes`] (device memory, whose `unsafe` constructor states what the caller
//! promises; or a [`ManagedTensor`] taken with [`ManagedTensor::from_raw`]); CUDA work is queued on a
//! [`Stream`] and the calls do not wait. Rust checks only what it must to describe a buffer (that it
//! holds the elements of the shape it is given); every rule is the library's, and its refusal comes back
//! as an [`Error`] with its message.
//!
//! Ownership follows the C API: a [`TensorBuilder`] hands its [`ManagedTensor`]s to the library when
//! [`TensorBuilder::build`] succeeds (and drops them, running their deleters, when it fails); the
//! [`Components`] of an export keep what they view alive on their own, so they may outlive the
//! [`Tensor`]. Bucket views borrow the bucket, and a [`Plan`] borrows the host buffers it writes: the
//! compiler rejects one that outlives them.
#![deny(missing_docs)]

pub use mxfp8_sys as sys;

/// Builder methods that set one field, `name(args) => field = value;`: each a `fn name(mut self, args)
/// -> Self` with its doc.
macro_rules! setters {
    ($($(#[$m:meta])* $name:ident($($arg:ident: $ty:ty),*) => $field:ident = $value:expr;)*) => {$(
        $(#[$m])*
        pub fn $name(mut self, $($arg: $ty),*) -> Self {
            self.$field = $value;
            self
        }
    )*};
}

mod convert;
mod error;
mod grouped;
mod handle;
mod managed;
mod memory;
mod options;
mod quantize;
mod shard;
mod tensor;
mod transfer;

pub use convert::{layout_bytes, swizzle_scales, unswizzle_scales};
pub use error::{Error, Status};
pub use grouped::{GroupedBuilder, GroupedTensor};
pub use managed::ManagedTensor;
pub use memory::{Buf, BufMut, DeviceBytes, Dtype, Element};
pub use options::{
    AmaxMode, AmaxScope, Block, ConvertOptions, CHECK_ONLY, DequantizeOptions, Direction, ExportOptions, Format, FourOverSix, GlobalScale,
    GroupedScales, Layout, Nvfp4QuantizeOptions, PaddedScales, QuantizeOptions, QuantizedScales, ScaleFixup, ScaleLayout, ScaleRounding,
    ScalesDtype, ScalesGranularity, Stream, ValuesDtype,
};
pub use quantize::{nvfp4_quantize_into, quantize, quantize_into, Nvfp4Part, Quantized};
pub use shard::Shard;
pub use tensor::{export_scales_batched, Components, Tensor, TensorBuilder};
pub use transfer::{BucketPart, BucketView, Manifest, ManifestEntry, Plan, Target, Transfer};

/// The version of the loaded library, `MAJOR * 10000 + MINOR * 100 + PATCH`; compare it with
/// [`sys::MXFP8_VERSION`] to detect a header/library mismatch.
pub fn version() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { sys::mxfp8_version() }
}
