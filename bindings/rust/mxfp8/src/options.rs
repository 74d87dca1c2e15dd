//! The header's enums as Rust enums, the CUDA stream handle, and every call's options (public fields
//! that start from the C `*_INIT` defaults, read from mxfp8-sys, with a setter each).
use std::ffi::c_void;
use std::ptr;

use crate::sys;

macro_rules! c_enums {
    ($($(#[$m:meta])* $name:ident ($c_name:literal) { $($(#[$vm:meta])* $v:ident = $c:path),* $(,)? })*) => {$(
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
        impl CField for $name {
            type C = i32;
            fn from_c(c: i32, field: &str) -> Self {
                known(Self::from_raw(c), field)
            }
            fn to_c(self) -> i32 {
                self.to_raw()
            }
        }
    )*};
}

c_enums! {
    /// The encoding of the values (`mxfp8_format`).
    Format("mxfp8_format") {
        /// MXFP8 float8_e4m3fn (max 448).
        E4M3 = sys::MXFP8_FORMAT_E4M3,
        /// MXFP8 float8_e5m2 (max 57344).
        E5M2 = sys::MXFP8_FORMAT_E5M2,
        /// NVFP4 (experimental): FP4 E2M1 values two per byte, one E4M3 scale per 16 values, a float32
        /// amax (the header's "NVFP4 tensors").
        Nvfp4 = sys::MXFP8_FORMAT_NVFP4,
    }

    /// How a stored scale buffer is laid out (`mxfp8_scale_layout`).
    ScaleLayout("mxfp8_scale_layout") {
        /// Row-major, possibly padded (Transformer Engine pads rowwise scales to 128 x 4).
        RowMajor = sys::MXFP8_SCALE_LAYOUT_ROW_MAJOR,
        /// The cuBLAS 128x4 block-scaling layout.
        GemmSwizzled = sys::MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED,
    }

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
        /// DeepGEMM's scales on Hopper (SGLang's `weight_scale_inv_deepgemm` on sm90): float32 `(R, C)`,
        /// each the float32 whose bits are its E8M0 byte `<< 23`; rowwise only.
        DeepgemmFloat32 = sys::MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32,
        /// FlashInfer's TRT-LLM MoE weights (vLLM's `w2_weight`): value and scale rows permuted inside blocks
        /// of 32 (row `32b + i` to `32b + 8 * (i % 4) + i / 4`), the scales then in the 128x4 layout; R a
        /// multiple of 128 per expert. Rowwise, a convert target only (the values move too).
        TrtllmShuffled = sys::MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED,
        /// The same for a gated activation's gate-and-up weight (vLLM's `w13_weight`): rows
        /// `[gate; up]` first interleaved (row `2i` <- up row `i`, row `2i + 1` <- gate row `i`), then
        /// shuffled as [`Layout::TrtllmShuffled`].
        TrtllmShuffledGated = sys::MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED,
    }

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

    /// How many values share one scale (`mxfp8_block`).
    Block("mxfp8_block") {
        /// One scale per 32 consecutive values.
        B1x32 = sys::MXFP8_BLOCK_1X32,
        /// Transformer Engine's 2-D weights: one scale per 32 x 32 block (stored repeated as 1x32 scales).
        B32x32 = sys::MXFP8_BLOCK_32X32,
        /// One scale per 16 values of a stored row: NVFP4's only block.
        B1x16 = sys::MXFP8_BLOCK_1X16,
    }

    /// Which copy of the data a call reads (`mxfp8_direction`).
    Direction("mxfp8_direction") {
        /// Values scaled along K: scales `(*lead, ceil(K/32))`.
        Rowwise = sys::MXFP8_DIRECTION_ROWWISE,
        /// Values scaled along rows: scales `(ceil(M/32), K)`.
        Columnwise = sys::MXFP8_DIRECTION_COLUMNWISE,
    }

    /// The dtype of exported values (`mxfp8_values_dtype`, read per format).
    ValuesDtype("mxfp8_values_dtype") {
        /// The format's own type: float8 of the format; NVFP4 `kDLFloat4_e2m1fn` (shape in elements).
        Fp8 = sys::MXFP8_VALUES_FP8,
        /// The same bytes as uint8 (NVFP4: packed, two values a byte, what vLLM loads).
        Uint8 = sys::MXFP8_VALUES_UINT8,
    }

    /// The dtype of exported scales (`mxfp8_scales_dtype`, read per format): the stored scale byte either
    /// way (MXFP8 the E8M0 byte, 2^(byte - 127); NVFP4 the E4M3 byte).
    ScalesDtype("mxfp8_scales_dtype") {
        /// uint8, what vLLM and SGLang load.
        Uint8 = sys::MXFP8_SCALES_UINT8,
        /// The format's scale type: float8_e8m0fnu (NVFP4: float8_e4m3fn, vLLM's `weight_scale`).
        E8M0 = sys::MXFP8_SCALES_E8M0,
    }

    /// What an export does with row-major scales that carry padding columns (`mxfp8_padded_scales`).
    PaddedScales("mxfp8_padded_scales") {
        /// A contiguous copy.
        Copy = sys::MXFP8_PADDED_SCALES_COPY,
        /// A zero-copy view whose row stride is the padded width.
        StridedView = sys::MXFP8_PADDED_SCALES_STRIDED_VIEW,
    }

    /// Which scales an export returns (`mxfp8_scales_granularity`).
    ScalesGranularity("mxfp8_scales_granularity") {
        /// The stored 1x32 scales.
        Per32 = sys::MXFP8_SCALES_PER_32,
        /// One scale per 32 x 32 block, `(ceil(M/32), ceil(K/32))`, for a [`Block::B32x32`] tensor.
        Per32x32 = sys::MXFP8_SCALES_PER_32X32,
    }

    /// How the experts' scales sit in a grouped scale buffer (`mxfp8_grouped_scales`).
    GroupedScales("mxfp8_grouped_scales") {
        /// Each expert takes Transformer Engine's per-tensor allocation,
        /// `roundup(rows_e, 128) x roundup(ceil(K/32), 4)`, row-major or swizzled.
        Padded = sys::MXFP8_GROUPED_SCALES_PADDED,
        /// Each expert's `rows_e x ceil(K/32)` scales with no padding (row-major only).
        Compact = sys::MXFP8_GROUPED_SCALES_COMPACT,
    }

    /// How a quantize chooses a block's E8M0 scale (`mxfp8_scale_rounding`).
    #[non_exhaustive]
    ScaleRounding("mxfp8_scale_rounding") {
        /// Transformer Engine's rule: the exponent of amax / max_norm, rounded up (bit-exact with TE).
        Rceil = sys::MXFP8_SCALE_ROUNDING_RCEIL,
        /// The OCP MX v1.0 rule: floor(log2(amax)) - emax.
        Floor = sys::MXFP8_SCALE_ROUNDING_FLOOR,
        /// compressed-tensors' MX rule (llm-compressor's checkpoints): amax rounded to a power of two (up
        /// from a mantissa of 1.75), minus emax. The engines' online quantizers round as `Rceil` does.
        CompressedTensors = sys::MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS,
    }

    /// The layout a quantize writes the scales in (`mxfp8_quantized_scales`).
    QuantizedScales("mxfp8_quantized_scales") {
        /// Compact row-major: what an export returns.
        Compact = sys::MXFP8_QUANTIZED_SCALES_COMPACT,
        /// Transformer Engine's padded row-major buffer (padding zero).
        Padded = sys::MXFP8_QUANTIZED_SCALES_PADDED,
        /// The same buffer in the cuBLAS 128x4 layout.
        Swizzled = sys::MXFP8_QUANTIZED_SCALES_SWIZZLED,
    }

    /// Which second-level scale an export returns, float32, one per amax (`mxfp8_nvfp4_global_scale`).
    GlobalScale("mxfp8_nvfp4_global_scale") {
        /// `amax / (6 * E4M3_MAX)`, a float division: the factor that decodes (ModelOpt's and vLLM's
        /// `weight_scale_2`).
        Decode = sys::MXFP8_NVFP4_GLOBAL_SCALE_DECODE,
        /// `(6 * E4M3_MAX) / amax` as Transformer Engine computes it (capped at `f32::MAX`, also for NaN; 1
        /// for a zero amax or quotient): FlashInfer's global scale, compressed-tensors' `weight_global_scale`.
        Encode = sys::MXFP8_NVFP4_GLOBAL_SCALE_ENCODE,
    }

    /// How many second-level amaxes a quantize uses (`mxfp8_nvfp4_amax_scope`).
    AmaxScope("mxfp8_nvfp4_amax_scope") {
        /// One float32 for the tensor (Transformer Engine's default).
        PerTensor = sys::MXFP8_NVFP4_AMAX_PER_TENSOR,
        /// One float32 per row, M of them (TE's `row_scaled_nvfp4`); rowwise only.
        PerRow = sys::MXFP8_NVFP4_AMAX_PER_ROW,
    }

    /// Where a quantize's amax comes from (`mxfp8_nvfp4_amax_mode`).
    AmaxMode("mxfp8_nvfp4_amax_mode") {
        /// The quantize computes it (max |x|, NaN skipped, 0 when empty) and writes it to the amax buffer.
        Compute = sys::MXFP8_NVFP4_AMAX_COMPUTE,
        /// The quantize reads the amax buffer as given (any float32, used as TE would), and leaves it.
        Given = sys::MXFP8_NVFP4_AMAX_GIVEN,
    }

    /// Transformer Engine's "4over6" block scale selection (`mxfp8_nvfp4_4over6`).
    FourOverSix("mxfp8_nvfp4_4over6") {
        /// TE's default NVFP4 quantizer.
        Off = sys::MXFP8_NVFP4_4OVER6_OFF,
        /// Each block quantized with a map-to-6 and a map-to-4 scale, kept by absolute error (TE's "MAE").
        Mae = sys::MXFP8_NVFP4_4OVER6_MAE,
        /// The same, compared by squared error (TE's "MSE").
        Mse = sys::MXFP8_NVFP4_4OVER6_MSE,
    }
}

/// Converts a field of a C default struct; the defaults are `*_INIT` values this crate knows.
pub(crate) fn known<T>(value: Option<T>, field: &str) -> T {
    value.unwrap_or_else(|| panic!("mxfp8-sys's default {field} is not a value this crate knows"))
}

/// A field of a C struct as its Rust type: a header enum, a number, or the stream.
pub(crate) trait CField: Sized {
    /// The C field's type.
    type C;
    /// The value of a C default (`field` names it in the panic on a value this crate does not know).
    fn from_c(c: Self::C, field: &str) -> Self;
    /// The C value.
    fn to_c(self) -> Self::C;
}

macro_rules! plain_fields {
    ($($t:ty),*) => {$(
        impl CField for $t {
            type C = $t;
            fn from_c(c: $t, _: &str) -> Self {
                c
            }
            fn to_c(self) -> $t {
                self
            }
        }
    )*};
}
plain_fields!(i32, i64, u32, u64);

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


impl CField for Stream {
    type C = *mut c_void;
    fn from_c(c: *mut c_void, _: &str) -> Self {
        Self(c)
    }
    fn to_c(self) -> *mut c_void {
        self.0
    }
}

/// An options struct over a C one: each public field names the C field it travels in (`= c_field`),
/// and its doc is also its setter's; `Default` reads the C `*_INIT` values from mxfp8-sys (a test compares
/// them with the C macros), and `to_sys` writes them back (no allocator: the library allocates).
/// Fields after `;` are Rust's own (default `Default::default()`), not in the C struct.
macro_rules! options {
    ($(#[$m:meta])* $name:ident($c:ident) {
        $($(#[$fm:meta])* $field:ident: $ty:ty = $cf:ident,)*
        $(; $($(#[$em:meta])* $ef:ident: $ety:ty,)*)?
    }) => {
        $(#[$m])*
        pub struct $name {
            $($(#[$fm])* pub $field: $ty,)*
            $($($(#[$em])* pub $ef: $ety,)*)?
        }
        impl Default for $name {
            fn default() -> Self {
                let c = sys::$c::default();
                Self { $($field: CField::from_c(c.$cf, stringify!($cf)),)* $($($ef: Default::default(),)*)? }
            }
        }
        impl $name {
            #[doc = concat!("The defaults (`", stringify!($c), "`'s C `*_INIT` initializer).")]
            pub fn new() -> Self {
                Self::default()
            }
            setters! {
                $(#[doc = concat!("Sets `", stringify!($field), "`:")] $(#[$fm])* $field(value: $ty) => $field = value;)*
                $($(#[doc = concat!("Sets `", stringify!($ef), "`:")] $(#[$em])* $ef(value: $ety) => $ef = value;)*)?
            }
            #[doc = concat!("The C struct (`", stringify!($c), "`; no allocator: the library allocates).")]
            pub fn to_sys(&self) -> sys::$c {
                sys::$c { $($cf: self.$field.to_c(),)* ..Default::default() }
            }
        }
    };
}

options! {
    /// Options of [`Tensor::export`](crate::Tensor::export), [`Tensor::global_scale`](crate::Tensor::global_scale),
    /// the grouped exports and [`export_scales_batched`](crate::export_scales_batched) (`mxfp8_export_options`).
    /// `Default` is `MXFP8_EXPORT_OPTIONS_INIT`. [`to_sys`](Self::to_sys) leaves the shard out (the
    /// exports point the C struct at it themselves).
    ///
    /// ```
    /// use mxfp8::{Direction, ExportOptions, ScalesDtype};
    /// let options = ExportOptions::new().direction(Direction::Columnwise).scales_dtype(ScalesDtype::E8M0);
    /// assert_eq!(options.direction, Direction::Columnwise);
    /// ```
    #[derive(Clone, Debug, PartialEq, Eq)]
    ExportOptions(mxfp8_export_options) {
        /// Which direction to export (default rowwise).
        direction: Direction = direction,
        /// The dtype of the values (default the format's own: float8, NVFP4 float4).
        values_dtype: ValuesDtype = values_dtype,
        /// The dtype of the scales (default uint8).
        scales_dtype: ScalesDtype = scales_dtype,
        /// Padded row-major scales as a copy (default) or a strided view.
        padded_scales: PaddedScales = padded_scales,
        /// Per-32 (default) or per-32x32 scales.
        granularity: ScalesGranularity = scales_granularity,
        /// The fix-up of every scale the batched export writes (the other exports take only
        /// [`ScaleFixup::None`]: the library refuses the rest).
        scale_fixup: ScaleFixup = scale_fixup,
        /// The convention of an NVFP4 tensor's global scale (default decode).
        global_scale: GlobalScale = global_scale,
        /// The stream copies of CUDA memory run on (default: the legacy default stream).
        stream: Stream = stream,
        ;
        /// Only this shard of the tensor (default: the whole tensor; `options.shard` of the C export). The
        /// batched and grouped exports export whole tensors and refuse a shard.
        shard: Option<crate::Shard>,
    }
}

/// A bit of the `flags` of [`ConvertOptions`], [`QuantizeOptions`] and [`Nvfp4QuantizeOptions`]
/// (`MXFP8_CHECK_ONLY`): every check of the call, in the same order with the same error, then return
/// without writing, allocating or launching anything (buffers' addresses and sizes are read, never their
/// bytes). [`quantize`](crate::quantize) refuses it: it allocates; use [`quantize_into`](crate::quantize_into).
pub const CHECK_ONLY: u32 = sys::MXFP8_CHECK_ONLY;

options! {
    /// Options of [`Tensor::convert_into`](crate::Tensor::convert_into) and
    /// [`GroupedTensor::convert_into`](crate::GroupedTensor::convert_into) (`mxfp8_convert_options`).
    /// `Default` is `MXFP8_CONVERT_OPTIONS_INIT`: compact scales, rowwise, no fix-up, the legacy default stream.
    ///
    /// ```
    /// use mxfp8::{ConvertOptions, Layout};
    /// let deepgemm = ConvertOptions::new().target(Layout::DeepgemmPacked);
    /// assert_eq!(deepgemm.target, Layout::DeepgemmPacked);
    /// ```
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    ConvertOptions(mxfp8_convert_options) {
        /// The layout the scales are written in (default [`Layout::Compact`]).
        target: Layout = target,
        /// The direction read from a tensor (default rowwise; the DeepGEMM and TRT-LLM layouts are rowwise only).
        direction: Direction = direction,
        /// The rewrite applied to every real scale written (default none).
        scale_fixup: ScaleFixup = scale_fixup,
        /// The stream CUDA work is queued on (unused for host memory).
        stream: Stream = stream,
        /// An engine's padding, in the same launch (`mxfp8_convert_options.pad_rows_to`, rowwise; 0: none):
        /// each expert's rows (of [`Layout::TrtllmShuffledGated`], each half's) to a multiple of this. The
        /// outputs then hold the padded weight. vLLM's TRT-LLM MoE: w13 128, w2 256.
        pad_rows_to: i64 = pad_rows_to,
        /// K padded to a multiple of this, a multiple of 32 (`pad_cols_to`; 0: none). vLLM: w13 256, w2 128.
        pad_cols_to: i64 = pad_cols_to,
        /// The E8M0 byte of a padding scale (`pad_scale`, default 127 = 2^0, vLLM's).
        pad_scale: i32 = pad_scale,
        /// 0 (default), or [`CHECK_ONLY`]: the checks alone.
        flags: u64 = flags,
    }
}

options! {
    /// Options of [`quantize`](crate::quantize) and [`quantize_into`](crate::quantize_into) (`mxfp8_quantize_options`). `Default` is
    /// `MXFP8_QUANTIZE_OPTIONS_INIT`: E4M3, 1x32 blocks, RCEIL, compact scales, float8 values, uint8 scales.
    ///
    /// ```
    /// use mxfp8::{QuantizeOptions, QuantizedScales, ScaleRounding};
    /// let te_layout = QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    /// assert_eq!(te_layout.rounding, ScaleRounding::Rceil);
    /// ```
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    QuantizeOptions(mxfp8_quantize_options) {
        /// The FP8 encoding.
        format: Format = format,
        /// 1x32 or 32x32 blocks.
        block: Block = block,
        /// How each block's scale is chosen.
        rounding: ScaleRounding = scale_rounding,
        /// The layout the scales are written in.
        scales: QuantizedScales = scales_layout,
        /// The dtype of the values [`quantize`](crate::quantize) allocates.
        values_dtype: ValuesDtype = values_dtype,
        /// The dtype of the scales [`quantize`](crate::quantize) allocates.
        scales_dtype: ScalesDtype = scales_dtype,
        /// 0 (default), or [`CHECK_ONLY`] ([`quantize_into`](crate::quantize_into)): the checks alone.
        flags: u32 = flags,
        /// The stream CUDA work runs on.
        stream: Stream = stream,
    }
}

options! {
    /// Options of [`Tensor::dequantize_into`](crate::Tensor::dequantize_into) (`mxfp8_dequantize_options`).
    /// `Default` is `MXFP8_DEQUANTIZE_OPTIONS_INIT`: rowwise, the legacy default stream.
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    DequantizeOptions(mxfp8_dequantize_options) {
        /// Which direction to decode.
        direction: Direction = direction,
        /// The stream CUDA work runs on.
        stream: Stream = stream,
    }
}

options! {
    /// Options of [`nvfp4_quantize_into`](crate::nvfp4_quantize_into) (`mxfp8_nvfp4_quantize_options`).
    /// `Default` is `MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT`: per-tensor amax, computed, no 4over6, E4M3_MAX 448,
    /// compact scales, rowwise, the legacy default stream.
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    Nvfp4QuantizeOptions(mxfp8_nvfp4_quantize_options) {
        /// One amax per tensor (default) or per row (rowwise, one input only).
        amax_scope: AmaxScope = amax_scope,
        /// Compute the amax (default) or read the one given.
        amax_mode: AmaxMode = amax_mode,
        /// TE's 4over6 selection (default off).
        four_over_six: FourOverSix = four_over_six,
        /// E4M3_MAX of the second level: 448 (default), or 256 with 4over6 only.
        e4m3_max: i32 = e4m3_max,
        /// The layout the block scales are written in: compact (default), TE's padded buffer, or that buffer
        /// in the cuBLAS 128x4 layout.
        scales: QuantizedScales = scales_layout,
        /// Rowwise (default), or columnwise: the `(K, M)` transpose, blocked along M, as TE stores it.
        direction: Direction = direction,
        /// 0 (default), or [`CHECK_ONLY`]: the checks alone.
        flags: u32 = flags,
        /// The stream CUDA work runs on.
        stream: Stream = stream,
    }
}
