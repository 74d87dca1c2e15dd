//! The header's enums as Rust enums, the CUDA stream handle, and the export options.
use std::ffi::c_void;
use std::ptr;

use crate::sys;

macro_rules! c_enum {
    ($(#[$m:meta])* $name:ident ($c_name:literal) { $($(#[$vm:meta])* $v:ident = $c:path),* $(,)? }) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v),*
        }
        impl $name {
            #[doc = concat!("The `", $c_name, "` value.")]
            pub fn to_raw(self) -> i32 {
                match self {
                    $(Self::$v => $c),*
                }
            }
            #[doc = concat!("The variant of a `", $c_name, "` value; None for one this crate does not know.")]
            pub fn from_raw(value: i32) -> Option<Self> {
                $(if value == $c {
                    return Some(Self::$v);
                })*
                None
            }
        }
    };
}
pub(crate) use c_enum;

c_enum! {
    /// The FP8 encoding of the values (`mxfp8_format`).
    Format("mxfp8_format") {
        /// float8_e4m3fn (max 448).
        E4M3 = sys::MXFP8_FORMAT_E4M3,
        /// float8_e5m2 (max 57344).
        E5M2 = sys::MXFP8_FORMAT_E5M2,
    }
}

c_enum! {
    /// How a stored scale buffer is laid out (`mxfp8_scale_layout`).
    ScaleLayout("mxfp8_scale_layout") {
        /// Row-major, possibly padded (Transformer Engine pads rowwise scales to 128 x 4).
        RowMajor = sys::MXFP8_SCALE_LAYOUT_ROW_MAJOR,
        /// The cuBLAS 128x4 block-scaling layout.
        GemmSwizzled = sys::MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED,
    }
}

c_enum! {
    /// The layout of one tensor's parts in a bucket or in an engine's parameters (`mxfp8_scale_layout`). More
    /// layouts may come (engines add kernels), so matches need a `_` arm.
    #[non_exhaustive]
    Layout("mxfp8_scale_layout") {
        /// Scales compact row-major, exactly `R * C` bytes (what vLLM and SGLang load).
        Compact = sys::MXFP8_SCALE_LAYOUT_COMPACT,
        /// Scales in the cuBLAS / CUTLASS 128x4 layout, flat, padding zero.
        Cutlass128x4 = sys::MXFP8_SCALE_LAYOUT_128X4,
        /// DeepGEMM's packed UE8M0 scales on Blackwell (SGLang's `weight_scale_inv_deepgemm` on sm100 /
        /// sm120): int32 `(R, ceil(C/4))` MN-major, rowwise only.
        DeepgemmPacked = sys::MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED,
        /// DeepGEMM's scales on Hopper (SGLang's `weight_scale_inv_deepgemm` on sm90): float32 `(R, C)`
        /// row-major, each scale the float32 whose bits are its E8M0 byte `<< 23`, `4 * R * C` bytes;
        /// rowwise only.
        DeepgemmFloat32 = sys::MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32,
        /// FlashInfer's TRT-LLM MoE weights (vLLM's `w2_weight`): value and scale rows permuted inside
        /// blocks of 32 (row `32b + i` to `32b + 8 * (i % 4) + i / 4`), the permuted scales then in the
        /// 128x4 layout, `R * roundup(C, 4)` bytes; R a multiple of 128 per expert. Rowwise only, and a
        /// convert target only ([`Tensor::convert_into`](crate::Tensor::convert_into)): the values move too.
        TrtllmShuffled = sys::MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED,
        /// The same for a gated activation's gate-and-up weight (vLLM's `w13_weight`): rows
        /// `[gate; up]` first interleaved (row `2i` <- up row `i`, row `2i + 1` <- gate row `i`), then
        /// shuffled as [`Layout::TrtllmShuffled`].
        TrtllmShuffledGated = sys::MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED,
    }
}

c_enum! {
    /// A rewrite of scale bytes some consumers need, applied to every real scale a call writes; padding
    /// stays zero (`mxfp8_scale_fixup`).
    #[non_exhaustive]
    ScaleFixup("mxfp8_scale_fixup") {
        /// The scale bytes as stored (the default).
        None = sys::MXFP8_SCALE_FIXUP_NONE,
        /// E8M0 byte 0 (2^-127, an all-zero block) written as 1 (2^-126), as NeMo RL sends it; a block
        /// of zeros decodes to zeros either way.
        ZeroExponentAsOne = sys::MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE,
    }
}

c_enum! {
    /// How many values share one scale (`mxfp8_block`).
    Block("mxfp8_block") {
        /// One scale per 32 consecutive values.
        B1x32 = sys::MXFP8_BLOCK_1X32,
        /// Transformer Engine's 2-D weights: one scale per 32 x 32 block (stored repeated as 1x32 scales).
        B32x32 = sys::MXFP8_BLOCK_32X32,
    }
}

c_enum! {
    /// Which copy of the data a call reads (`mxfp8_direction`).
    Direction("mxfp8_direction") {
        /// Values scaled along K: scales `(*lead, ceil(K/32))`.
        Rowwise = sys::MXFP8_DIRECTION_ROWWISE,
        /// Values scaled along rows: scales `(ceil(M/32), K)`.
        Columnwise = sys::MXFP8_DIRECTION_COLUMNWISE,
    }
}

c_enum! {
    /// The dtype of exported values (`mxfp8_values_dtype`).
    ValuesDtype("mxfp8_values_dtype") {
        /// The float8 dtype of the tensor's format.
        Fp8 = sys::MXFP8_VALUES_FP8,
        /// The same bytes as uint8.
        Uint8 = sys::MXFP8_VALUES_UINT8,
    }
}

c_enum! {
    /// The dtype of exported scales (`mxfp8_scales_dtype`); both are the E8M0 byte, 2^(byte - 127).
    ScalesDtype("mxfp8_scales_dtype") {
        /// uint8, what vLLM and SGLang load.
        Uint8 = sys::MXFP8_SCALES_UINT8,
        /// float8_e8m0fnu.
        E8M0 = sys::MXFP8_SCALES_E8M0,
    }
}

c_enum! {
    /// What an export does with row-major scales that carry padding columns (`mxfp8_padded_scales`).
    PaddedScales("mxfp8_padded_scales") {
        /// A contiguous copy.
        Copy = sys::MXFP8_PADDED_SCALES_COPY,
        /// A zero-copy view whose row stride is the padded width.
        StridedView = sys::MXFP8_PADDED_SCALES_STRIDED_VIEW,
    }
}

c_enum! {
    /// Which scales an export returns (`mxfp8_scales_granularity`).
    ScalesGranularity("mxfp8_scales_granularity") {
        /// The stored 1x32 scales.
        Per32 = sys::MXFP8_SCALES_PER_32,
        /// One scale per 32 x 32 block, `(ceil(M/32), ceil(K/32))`, for a [`Block::B32x32`] tensor.
        Per32x32 = sys::MXFP8_SCALES_PER_32X32,
    }
}

c_enum! {
    /// How the experts' scales sit in a grouped scale buffer (`mxfp8_grouped_scales`).
    GroupedScales("mxfp8_grouped_scales") {
        /// Each expert takes Transformer Engine's per-tensor allocation,
        /// `roundup(rows_e, 128) x roundup(ceil(K/32), 4)`, row-major or swizzled.
        Padded = sys::MXFP8_GROUPED_SCALES_PADDED,
        /// Each expert's `rows_e x ceil(K/32)` scales with no padding (row-major only).
        Compact = sys::MXFP8_GROUPED_SCALES_COMPACT,
    }
}

c_enum! {
    /// How a quantize chooses a block's E8M0 scale (`mxfp8_scale_rounding`).
    #[non_exhaustive]
    ScaleRounding("mxfp8_scale_rounding") {
        /// Transformer Engine's rule: the exponent of amax / max_norm, rounded up (bit-exact with TE).
        Rceil = sys::MXFP8_SCALE_ROUNDING_RCEIL,
        /// The OCP MX v1.0 rule: floor(log2(amax)) - emax.
        Floor = sys::MXFP8_SCALE_ROUNDING_FLOOR,
        /// compressed-tensors' MX rule: amax rounded to a power of two (up from a mantissa of 1.75),
        /// minus emax; bit-exact with compressed-tensors (llm-compressor's checkpoints). The engines' online
        /// quantizers (vLLM, SGLang, ModelOpt, FlashInfer) round as [`ScaleRounding::Rceil`] does.
        CompressedTensors = sys::MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS,
    }
}

c_enum! {
    /// The layout a quantize writes the scales in (`mxfp8_quantized_scales`).
    QuantizedScales("mxfp8_quantized_scales") {
        /// Compact row-major: what an export returns.
        Compact = sys::MXFP8_QUANTIZED_SCALES_COMPACT,
        /// Transformer Engine's padded row-major buffer (padding zero).
        Padded = sys::MXFP8_QUANTIZED_SCALES_PADDED,
        /// The same buffer in the cuBLAS 128x4 layout.
        Swizzled = sys::MXFP8_QUANTIZED_SCALES_SWIZZLED,
    }
}

/// Converts a field of a C default struct; the defaults are `*_INIT` values this crate knows.
pub(crate) fn known<T>(value: Option<T>, field: &str) -> T {
    value.unwrap_or_else(|| panic!("mxfp8-sys's default {field} is not a value this crate knows"))
}

/// A `cudaStream_t` that CUDA work is queued on. Host-memory calls ignore it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stream(*mut c_void);

// SAFETY: a stream is a handle value, never dereferenced by Rust; CUDA streams may be used from any host
// thread, and `from_raw`'s caller promised the handle stays valid for the work queued on it.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    /// The legacy default stream (NULL), what the C `*_INIT` macros choose.
    pub const LEGACY_DEFAULT: Self = Self(ptr::null_mut());

    /// A stream from a `cudaStream_t`.
    ///
    /// # Safety
    /// `stream` must be NULL or a `cudaStream_t` of the device the memory lives on, and must exist until
    /// every call that takes it has returned, and until the deleter of every output allocated on it has
    /// run (the library frees its stream-ordered allocations on the stream they were made on).
    pub unsafe fn from_raw(stream: *mut c_void) -> Self {
        Self(stream)
    }

    /// The `cudaStream_t`.
    pub fn as_raw(self) -> *mut c_void {
        self.0
    }
}

impl Default for Stream {
    fn default() -> Self {
        Self::LEGACY_DEFAULT
    }
}

/// Options of [`Tensor::export`](crate::Tensor::export) and of the batched and bucket exports (which use
/// only the direction and the stream). `Default` is `MXFP8_EXPORT_OPTIONS_INIT`, read from mxfp8-sys
/// (whose defaults a test compares with the C macro).
///
/// ```
/// use mxfp8::{Direction, ExportOptions, ScalesDtype};
/// let options = ExportOptions::new().direction(Direction::Columnwise).scales_dtype(ScalesDtype::E8M0);
/// assert_eq!(options.get_direction(), Direction::Columnwise);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    direction: Direction,
    values_dtype: ValuesDtype,
    scales_dtype: ScalesDtype,
    padded_scales: PaddedScales,
    granularity: ScalesGranularity,
    scale_fixup: ScaleFixup,
    stream: Stream,
}

impl Default for ExportOptions {
    fn default() -> Self {
        let c = sys::mxfp8_export_options::default();
        Self {
            direction: known(Direction::from_raw(c.direction), "direction"),
            values_dtype: known(ValuesDtype::from_raw(c.values_dtype), "values_dtype"),
            scales_dtype: known(ScalesDtype::from_raw(c.scales_dtype), "scales_dtype"),
            padded_scales: known(PaddedScales::from_raw(c.padded_scales), "padded_scales"),
            granularity: known(ScalesGranularity::from_raw(c.scales_granularity), "scales_granularity"),
            scale_fixup: known(ScaleFixup::from_raw(c.scale_fixup), "scale_fixup"),
            stream: Stream(c.stream),
        }
    }
}

impl ExportOptions {
    /// The defaults (`MXFP8_EXPORT_OPTIONS_INIT`).
    pub fn new() -> Self {
        Self::default()
    }
    /// Which direction to export (default rowwise).
    pub fn direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }
    /// The dtype of the values (default float8).
    pub fn values_dtype(mut self, dtype: ValuesDtype) -> Self {
        self.values_dtype = dtype;
        self
    }
    /// The dtype of the scales (default uint8).
    pub fn scales_dtype(mut self, dtype: ScalesDtype) -> Self {
        self.scales_dtype = dtype;
        self
    }
    /// Padded row-major scales as a copy (default) or a strided view.
    pub fn padded_scales(mut self, padded: PaddedScales) -> Self {
        self.padded_scales = padded;
        self
    }
    /// Per-32 (default) or per-32x32 scales.
    pub fn granularity(mut self, granularity: ScalesGranularity) -> Self {
        self.granularity = granularity;
        self
    }
    /// The stream copies of CUDA memory run on (default: the legacy default stream).
    pub fn stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }
    /// The scale fix-up applied to every scale written by the batched export, buckets and the tensor
    /// import (default none). [`Tensor::export`](crate::Tensor::export), whose scales may be views,
    /// [`GroupedTensor::export_stacked`](crate::GroupedTensor::export_stacked), the shard exports and
    /// [`GroupedTensor::export_experts`](crate::GroupedTensor::export_experts) refuse anything but
    /// [`ScaleFixup::None`] ([`Status::InvalidArgument`](crate::Status::InvalidArgument)); the calls with
    /// shards refuse it for a tensor with a shard ([`Status::Unsupported`](crate::Status::Unsupported)).
    pub fn scale_fixup(mut self, fixup: ScaleFixup) -> Self {
        self.scale_fixup = fixup;
        self
    }
    /// The scale fix-up set.
    pub fn get_scale_fixup(&self) -> ScaleFixup {
        self.scale_fixup
    }
    /// The direction set.
    pub fn get_direction(&self) -> Direction {
        self.direction
    }
    /// The values dtype set.
    pub fn get_values_dtype(&self) -> ValuesDtype {
        self.values_dtype
    }
    /// The scales dtype set.
    pub fn get_scales_dtype(&self) -> ScalesDtype {
        self.scales_dtype
    }
    /// The padded-scales choice set.
    pub fn get_padded_scales(&self) -> PaddedScales {
        self.padded_scales
    }
    /// The granularity set.
    pub fn get_granularity(&self) -> ScalesGranularity {
        self.granularity
    }
    /// The stream set.
    pub fn get_stream(&self) -> Stream {
        self.stream
    }
    /// The C struct (no allocator: copies are allocated by the library).
    pub fn to_sys(&self) -> sys::mxfp8_export_options {
        sys::mxfp8_export_options {
            direction: self.direction.to_raw(),
            values_dtype: self.values_dtype.to_raw(),
            scales_dtype: self.scales_dtype.to_raw(),
            padded_scales: self.padded_scales.to_raw(),
            stream: self.stream.as_raw(),
            scales_granularity: self.granularity.to_raw(),
            scale_fixup: self.scale_fixup.to_raw(),
            ..Default::default()
        }
    }
}
