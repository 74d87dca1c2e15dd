//! NVFP4 (the header's NVFP4 sections): Transformer Engine's FP4 E2M1 values, E4M3 block scales per 16
//! values and a float32 second-level amax; describe, export, dequantize, and quantize (bit-exact with
//! Transformer Engine), also several fused shards under one global scale.
use std::ffi::c_void;
use std::fmt;
use std::ptr::{self, NonNull};

use crate::error::{check, invalid, Error};
use crate::managed::ManagedTensor;
use crate::memory::{dl_tensor, numel, DeviceBytes, FLOAT32, HOST, UINT8};
use crate::options::{c_enum, known, Direction, PaddedScales, QuantizedScales, ScaleLayout, Stream};
use crate::quantize::{check_numel, device_output, host_output, output_vec, DequantizeOptions, DequantizeOutput, HostInput, InputDtype, OutputDtype};
use crate::sys;

c_enum! {
    /// The dtype of exported NVFP4 values (`mxfp8_values_dtype` read for NVFP4); the bytes are the stored
    /// ones either way, two values each, the even element in the low nibble.
    Nvfp4ValuesDtype("mxfp8_values_dtype") {
        /// Packed bytes, `(*lead, K/2)` rowwise, `(K, M/2)` columnwise: what ModelOpt checkpoints and vLLM load.
        Uint8 = sys::MXFP8_VALUES_UINT8,
        /// DLPack's `kDLFloat4_e2m1fn` (bits 4, lanes 1): `(*lead, K)` rowwise, `(K, M)` columnwise
        /// (`MXFP8_VALUES_FP8`, the format's own type).
        Float4 = sys::MXFP8_VALUES_FP8,
    }
}

c_enum! {
    /// The dtype of exported NVFP4 block scales (`mxfp8_scales_dtype` read for NVFP4): the E4M3 byte
    /// either way.
    Nvfp4ScalesDtype("mxfp8_scales_dtype") {
        /// uint8.
        Uint8 = sys::MXFP8_SCALES_UINT8,
        /// float8_e4m3fn: what vLLM's `weight_scale` parameter holds (`MXFP8_SCALES_E8M0`, the format's
        /// scale type).
        E4M3 = sys::MXFP8_SCALES_E8M0,
    }
}

c_enum! {
    /// Which second-level scale an export returns, float32, one per amax (`mxfp8_nvfp4_global_scale`).
    GlobalScale("mxfp8_nvfp4_global_scale") {
        /// `amax / (6 * E4M3_MAX)`, a float division: the factor that decodes (ModelOpt's and vLLM's
        /// `weight_scale_2`).
        Decode = sys::MXFP8_NVFP4_GLOBAL_SCALE_DECODE,
        /// `(6 * E4M3_MAX) / amax` as Transformer Engine's quantizer computes it: capped at `f32::MAX`
        /// (also for a NaN amax), and 1 when amax is zero or the quotient is zero (amax Inf). FlashInfer's
        /// `nvfp4_quantize` global scale; compressed-tensors' `weight_global_scale`.
        Encode = sys::MXFP8_NVFP4_GLOBAL_SCALE_ENCODE,
    }
}

c_enum! {
    /// How many second-level amaxes a quantize uses (`mxfp8_nvfp4_amax_scope`).
    AmaxScope("mxfp8_nvfp4_amax_scope") {
        /// One float32 for the tensor (Transformer Engine's default).
        PerTensor = sys::MXFP8_NVFP4_AMAX_PER_TENSOR,
        /// One float32 per row, M of them (TE's `row_scaled_nvfp4`); rowwise only.
        PerRow = sys::MXFP8_NVFP4_AMAX_PER_ROW,
    }
}

c_enum! {
    /// Where a quantize's amax comes from (`mxfp8_nvfp4_amax_mode`).
    AmaxMode("mxfp8_nvfp4_amax_mode") {
        /// The quantize computes it (max |x|, NaN skipped, 0 when empty) and writes it to the amax buffer.
        Compute = sys::MXFP8_NVFP4_AMAX_COMPUTE,
        /// The quantize reads the amax buffer as given (any float32, used as TE would), and leaves it.
        Given = sys::MXFP8_NVFP4_AMAX_GIVEN,
    }
}

c_enum! {
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

/// E4M3_MAX of a tensor that does not say otherwise: Transformer Engine's default (256 is its 4over6).
const DEFAULT_E4M3_MAX: i32 = 448;

/// Describes an NVFP4 tensor as Transformer Engine stores it (an `mxfp8_tensor_desc` of format
/// `MXFP8_FORMAT_NVFP4`, block `MXFP8_BLOCK_1X16`); [`build`](Self::build) validates it into an
/// [`Nvfp4Tensor`]. Defaults: row-major scales (`MXFP8_TENSOR_DESC_INIT`'s, read from mxfp8-sys),
/// E4M3_MAX 448, the shape from the data.
///
/// Per direction three tensors on one device: the stored matrix (R, C) of packed values (rowwise
/// `(M, K)` as `(*lead, K/2)` bytes; columnwise the transpose `(K, M)`, as `(K, M/2)` bytes; C even),
/// its E4M3 block scales for the `R x ceil(C/16)` matrix (row-major, compact or padded, or swizzled:
/// exactly `roundup(R, 128) * roundup(ceil(C/16), 4)` bytes), and its float32 amax (one, or M for
/// rowwise per-row scaling). Ownership as [`TensorBuilder`](crate::TensorBuilder): the tensor takes them
/// when `build` succeeds; they are dropped with the builder when it fails.
///
/// ```
/// # use mxfp8::{ManagedTensor, Nvfp4TensorBuilder};
/// # fn main() -> Result<(), mxfp8::Error> {
/// // A (2, 32) tensor: 2 rows of 16 bytes, 2 scales per row, one amax.
/// let tensor = Nvfp4TensorBuilder::new()
///     .rowwise(ManagedTensor::from_host_bytes(vec![0x21; 32], &[2, 16])?,
///              ManagedTensor::from_host_bytes(vec![0x38; 4], &[2, 2])?,
///              ManagedTensor::from_host_f32(vec![2688.0], &[1])?)
///     .build()?;
/// // 0x21: 0.5 (low nibble), 1.0 (high); scale 0x38 = 1.0; global decode 2688 / 2688 = 1.
/// assert_eq!(&tensor.dequantize_host(mxfp8::Direction::Rowwise)?[..2], &[0.5, 1.0]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Nvfp4TensorBuilder {
    layout: ScaleLayout,
    e4m3_max: i32,
    shape: Option<Vec<i64>>,
    rowwise: Option<[ManagedTensor; 3]>,
    columnwise: Option<[ManagedTensor; 3]>,
}

impl Default for Nvfp4TensorBuilder {
    fn default() -> Self {
        let c = sys::mxfp8_tensor_desc::default();
        Self {
            layout: known(ScaleLayout::from_raw(c.scale_layout), "scale_layout"),
            // The C desc leaves E4M3_MAX "not said" (0, refused for NVFP4); TE's default is 448.
            e4m3_max: DEFAULT_E4M3_MAX,
            shape: None,
            rowwise: None,
            columnwise: None,
        }
    }
}

impl Nvfp4TensorBuilder {
    /// The defaults: row-major scales, E4M3_MAX 448, the shape taken from the data.
    pub fn new() -> Self {
        Self::default()
    }
    /// The layout of both directions' block scales (TE's `with_gemm_swizzled_scales`).
    pub fn scale_layout(mut self, layout: ScaleLayout) -> Self {
        self.layout = layout;
        self
    }
    /// E4M3_MAX of the second level: 448, or 256 for TE's 4over6 tensors (`nvfp4_e4m3_max`).
    pub fn e4m3_max(mut self, e4m3_max: i32) -> Self {
        self.e4m3_max = e4m3_max;
        self
    }
    /// The logical shape `(*lead, K)`, checked against each direction's data (default: from the data).
    pub fn shape(mut self, shape: &[i64]) -> Self {
        self.shape = Some(shape.to_vec());
        self
    }
    /// The rowwise packed values `(*lead, K/2)` (uint8, or float4 `(*lead, K)`), block scales and amax
    /// (one, or M).
    pub fn rowwise(mut self, data: ManagedTensor, scale_inv: ManagedTensor, amax: ManagedTensor) -> Self {
        self.rowwise = Some([data, scale_inv, amax]);
        self
    }
    /// The columnwise packed values (the transpose, `(K, M/2)` uint8), block scales and amax (one).
    pub fn columnwise(mut self, data: ManagedTensor, scale_inv: ManagedTensor, amax: ManagedTensor) -> Self {
        self.columnwise = Some([data, scale_inv, amax]);
        self
    }

    /// Validates everything (shapes, dtypes, devices, buffer sizes, amax counts). On success the tensor
    /// owns the inputs; on failure they are dropped with the builder.
    pub fn build(self) -> Result<Nvfp4Tensor, Error> {
        let raw = |d: &Option<[ManagedTensor; 3]>, i: usize| d.as_ref().map_or(ptr::null_mut(), |d| d[i].as_raw());
        let desc = sys::mxfp8_tensor_desc {
            format: sys::MXFP8_FORMAT_NVFP4,
            block: sys::MXFP8_BLOCK_1X16,
            scale_layout: self.layout.to_raw(),
            e4m3_max: self.e4m3_max,
            ndim: self.shape.as_ref().map_or(0, |s| s.len() as i32),
            shape: self.shape.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            rowwise_data: raw(&self.rowwise, 0),
            rowwise_scale_inv: raw(&self.rowwise, 1),
            rowwise_amax: raw(&self.rowwise, 2),
            columnwise_data: raw(&self.columnwise, 0),
            columnwise_scale_inv: raw(&self.columnwise, 1),
            columnwise_amax: raw(&self.columnwise, 2),
            ..Default::default()
        };
        let mut out = ptr::null_mut();
        // SAFETY: desc and its pointers are valid for the call; on success the library took the managed
        // tensors, so they must not be dropped here.
        check(unsafe { sys::mxfp8_tensor_create(&desc, &mut out) })?;
        let shape = match (&self.shape, &self.rowwise, &self.columnwise) {
            (Some(shape), _, _) => shape.clone(),
            (None, Some(r), _) => logical_shape_of_rowwise(&r[0]),
            (None, None, Some(c)) => logical_shape_of_columnwise(&c[0]),
            (None, None, None) => Vec::new(),
        };
        for parts in [self.rowwise, self.columnwise].into_iter().flatten() {
            for part in parts {
                part.into_raw();
            }
        }
        let raw = NonNull::new(out).expect("mxfp8_tensor_create returned OK and NULL");
        Ok(Nvfp4Tensor { raw, shape, e4m3_max: self.e4m3_max })
    }
}

/// Elements per stored dimension entry of a data tensor: 2 for packed bytes, 1 for float4.
fn values_per_element(data: &ManagedTensor) -> i64 {
    if data.dtype().bits == 8 {
        2
    } else {
        1
    }
}

/// The header's rule for rowwise data: the leading dimensions, and K = 2 * last for bytes.
fn logical_shape_of_rowwise(data: &ManagedTensor) -> Vec<i64> {
    let mut shape = data.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last *= values_per_element(data);
    }
    shape
}

/// The header's rule for columnwise data as TE reads it back: (K, d1, ..., dn) is (d1, ..., 2 * dn, K).
fn logical_shape_of_columnwise(data: &ManagedTensor) -> Vec<i64> {
    let Some((&k, rest)) = data.shape().split_first() else { return Vec::new() };
    let mut shape = rest.to_vec();
    if let Some(last) = shape.last_mut() {
        *last *= values_per_element(data);
    }
    shape.push(k);
    shape
}

/// A validated NVFP4 tensor (a C `mxfp8_tensor` handle of format NVFP4). Immutable; export from it on any
/// thread.
pub struct Nvfp4Tensor {
    raw: NonNull<sys::mxfp8_tensor>,
    shape: Vec<i64>,
    e4m3_max: i32,
}

// SAFETY: mxfp8/tensor.h: "An immutable, reference-counted handle on a validated tensor of either format.
// Thread-safe" (any number of threads may export from it at once; the reference count is atomic).
unsafe impl Send for Nvfp4Tensor {}
unsafe impl Sync for Nvfp4Tensor {}

impl fmt::Debug for Nvfp4Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nvfp4Tensor").field("shape", &self.shape).field("e4m3_max", &self.e4m3_max).finish()
    }
}

impl Drop for Nvfp4Tensor {
    fn drop(&mut self) {
        // SAFETY: we own one reference; exported views hold their own.
        unsafe { sys::mxfp8_tensor_release(self.raw.as_ptr()) }
    }
}

/// Options of [`Nvfp4Tensor::export`] (an `mxfp8_export_options`). `Default` is
/// `MXFP8_EXPORT_OPTIONS_INIT`, read from mxfp8-sys (rowwise, uint8 scales, padded scales copied, the
/// decode global scale, the legacy default stream), except the values: uint8 packed bytes here, where the
/// C default is the format's own float4.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Nvfp4ExportOptions {
    direction: Direction,
    values_dtype: Nvfp4ValuesDtype,
    scales_dtype: Nvfp4ScalesDtype,
    padded_scales: PaddedScales,
    global_scale: GlobalScale,
    stream: Stream,
}

impl Default for Nvfp4ExportOptions {
    fn default() -> Self {
        let c = sys::mxfp8_export_options::default();
        Self {
            direction: known(Direction::from_raw(c.direction), "direction"),
            values_dtype: Nvfp4ValuesDtype::Uint8,
            scales_dtype: known(Nvfp4ScalesDtype::from_raw(c.scales_dtype), "scales_dtype"),
            padded_scales: known(PaddedScales::from_raw(c.padded_scales), "padded_scales"),
            global_scale: known(GlobalScale::from_raw(c.global_scale), "global_scale"),
            stream: Stream::default(),
        }
    }
}

impl Nvfp4ExportOptions {
    /// The defaults (`MXFP8_EXPORT_OPTIONS_INIT` with uint8 values).
    pub fn new() -> Self {
        Self::default()
    }
    /// Which direction to export.
    pub fn direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }
    /// Packed bytes (default) or float4 values.
    pub fn values_dtype(mut self, dtype: Nvfp4ValuesDtype) -> Self {
        self.values_dtype = dtype;
        self
    }
    /// uint8 (default) or float8_e4m3fn scales.
    pub fn scales_dtype(mut self, dtype: Nvfp4ScalesDtype) -> Self {
        self.scales_dtype = dtype;
        self
    }
    /// Padded row-major scales as a copy (default) or a strided view.
    pub fn padded_scales(mut self, padded: PaddedScales) -> Self {
        self.padded_scales = padded;
        self
    }
    /// The convention of the global scale (default decode).
    pub fn global_scale(mut self, convention: GlobalScale) -> Self {
        self.global_scale = convention;
        self
    }
    /// The stream copies of CUDA memory run on.
    pub fn stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }
    /// The direction set.
    pub fn get_direction(&self) -> Direction {
        self.direction
    }
    /// The values dtype set.
    pub fn get_values_dtype(&self) -> Nvfp4ValuesDtype {
        self.values_dtype
    }
    /// The scales dtype set.
    pub fn get_scales_dtype(&self) -> Nvfp4ScalesDtype {
        self.scales_dtype
    }
    /// The padded-scales choice set.
    pub fn get_padded_scales(&self) -> PaddedScales {
        self.padded_scales
    }
    /// The global scale convention set.
    pub fn get_global_scale(&self) -> GlobalScale {
        self.global_scale
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
            global_scale: self.global_scale.to_raw(),
            stream: self.stream.as_raw(),
            ..Default::default()
        }
    }
}

/// One direction of an NVFP4 export. Each part keeps what it views alive on its own, so it may outlive
/// the [`Nvfp4Tensor`].
#[derive(Debug)]
pub struct Nvfp4Components {
    /// The stored packed values, always a zero-copy view (in-place updates show through): rowwise
    /// `(*lead, K/2)` uint8 or `(*lead, K)` float4; columnwise the stored transpose.
    pub values: ManagedTensor,
    /// The compact E4M3 block scales, rowwise `(*lead, ceil(K/16))`, columnwise `(K, ceil(M/16))`: a view
    /// when the stored bytes already lie so, else a contiguous copy (flagged as one).
    pub scales: ManagedTensor,
    /// float32, the amax's shape, always a copy: each amax in the options' [`GlobalScale`] convention.
    pub global_scale: ManagedTensor,
}

impl Nvfp4Tensor {
    /// The logical shape `(*lead, K)`.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// E4M3_MAX of the second level (448, or 256).
    pub fn e4m3_max(&self) -> i32 {
        self.e4m3_max
    }

    /// The C handle, still owned by `self` (for calls into mxfp8-sys).
    pub fn as_raw(&self) -> *const sys::mxfp8_tensor {
        self.raw.as_ptr()
    }

    /// Exports the values, compact block scales and global scale of `options`' direction
    /// (`mxfp8_export_components`, then `mxfp8_export_global_scale`). CUDA: the copies and the global scale's kernel are queued on
    /// the options' stream. Fails with [`Status::MissingData`](crate::Status::MissingData) when the tensor
    /// has no data for the direction.
    pub fn export(&self, options: &Nvfp4ExportOptions) -> Result<Nvfp4Components, Error> {
        let o = options.to_sys();
        let (mut values, mut scales) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid handle and options; the outputs are written only on success.
        check(unsafe { sys::mxfp8_export_components(self.raw.as_ptr(), &o, &mut values, &mut scales) })?;
        // SAFETY: on success both are fresh managed tensors that we now own (dropped if the global scale fails).
        let (values, scales) = unsafe {
            (ManagedTensor::from_raw(values).expect("values"), ManagedTensor::from_raw(scales).expect("scales"))
        };
        let global_scale = self.global_scale(options)?;
        Ok(Nvfp4Components { values, scales, global_scale })
    }

    /// Only the global scale of `options`' direction, in its convention (float32, the amax's shape, a
    /// copy; `mxfp8_export_global_scale`): no values view and no scale copy are made.
    pub fn global_scale(&self, options: &Nvfp4ExportOptions) -> Result<ManagedTensor, Error> {
        let o = options.to_sys();
        let mut global = ptr::null_mut();
        // SAFETY: valid handle and options; the output is written on success only.
        check(unsafe { sys::mxfp8_export_global_scale(self.raw.as_ptr(), &o, &mut global) })?;
        // SAFETY: a fresh managed tensor that we now own.
        Ok(unsafe { ManagedTensor::from_raw(global) }.expect("global_scale"))
    }

    /// Decodes `direction` of a tensor in host memory to float32: the stored matrix (R * C elements;
    /// columnwise is the `(K, M)` transpose), each element `e2m1 * ((e4m3 * amax) * (1 / (6 * E4M3_MAX)))`
    /// in float, every NaN as 0x7FFFFFFF.
    pub fn dequantize_host(&self, direction: Direction) -> Result<Vec<f32>, Error> {
        let mut out = output_vec(&self.shape)?;
        self.dequantize_into(DequantizeOutput::F32(&mut out), &DequantizeOptions::new().direction(direction))?;
        Ok(out)
    }

    /// Decodes a tensor in host memory into `output` (`mxfp8_dequantize`): float32, or bfloat16
    /// rounded to nearest-even (NaN as 0x7FFF), exactly R * C elements of the stored matrix.
    pub fn dequantize_into(&self, output: DequantizeOutput<'_>, options: &DequantizeOptions) -> Result<(), Error> {
        let mut shape = [0i64];
        let mut t = host_output(output, &mut shape);
        let o = options.to_sys();
        // SAFETY: `t` describes the exclusively borrowed slice; a tensor on a device fails the device check.
        check(unsafe { sys::mxfp8_dequantize(self.raw.as_ptr(), &o, &mut t) })
    }

    /// Decodes a tensor in device memory into `output` (R * C elements of `dtype`): one kernel queued on
    /// `options`' stream; the call does not wait.
    pub fn dequantize_into_device(&self, output: DeviceBytes, dtype: OutputDtype, options: &DequantizeOptions) -> Result<(), Error> {
        let mut shape = [0i64];
        let mut t = device_output(output, dtype, &mut shape)?;
        let o = options.to_sys();
        // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
        check(unsafe { sys::mxfp8_dequantize(self.raw.as_ptr(), &o, &mut t) })
    }
}

/// Options of the NVFP4 quantize calls (`mxfp8_nvfp4_quantize_options`). `Default` is
/// `MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT`, read from mxfp8-sys: per-tensor amax, computed, no 4over6,
/// E4M3_MAX 448, compact scales, rowwise, the legacy default stream.
///
/// ```
/// use mxfp8::{Direction, Nvfp4QuantizeOptions, QuantizedScales};
/// let te = Nvfp4QuantizeOptions::new().scales(QuantizedScales::Swizzled).direction(Direction::Columnwise);
/// // Columnwise quantizes the transpose: (K, M) = (40, 100), scales padded to (128, roundup(7, 4)).
/// assert_eq!(te.scales_shape(&[100, 40]), vec![128, 8]);
/// assert_eq!(te.values_len(&[100, 40]), Some(2000));
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Nvfp4QuantizeOptions {
    amax_scope: AmaxScope,
    amax_mode: AmaxMode,
    four_over_six: FourOverSix,
    e4m3_max: i32,
    scales: QuantizedScales,
    direction: Direction,
    stream: Stream,
}

impl Default for Nvfp4QuantizeOptions {
    fn default() -> Self {
        let c = sys::mxfp8_nvfp4_quantize_options::default();
        Self {
            amax_scope: known(AmaxScope::from_raw(c.amax_scope), "amax_scope"),
            amax_mode: known(AmaxMode::from_raw(c.amax_mode), "amax_mode"),
            four_over_six: known(FourOverSix::from_raw(c.four_over_six), "four_over_six"),
            e4m3_max: c.e4m3_max,
            scales: known(QuantizedScales::from_raw(c.scales_layout), "scales_layout"),
            direction: known(Direction::from_raw(c.direction), "direction"),
            stream: Stream::default(),
        }
    }
}

impl Nvfp4QuantizeOptions {
    /// The defaults (`MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT`).
    pub fn new() -> Self {
        Self::default()
    }
    /// One amax per tensor (default) or per row (rowwise only).
    pub fn amax_scope(mut self, scope: AmaxScope) -> Self {
        self.amax_scope = scope;
        self
    }
    /// Compute the amax (default) or read the one given.
    pub fn amax_mode(mut self, mode: AmaxMode) -> Self {
        self.amax_mode = mode;
        self
    }
    /// TE's 4over6 selection (default off).
    pub fn four_over_six(mut self, mode: FourOverSix) -> Self {
        self.four_over_six = mode;
        self
    }
    /// E4M3_MAX of the second level: 448 (default), or 256 with 4over6 only.
    pub fn e4m3_max(mut self, e4m3_max: i32) -> Self {
        self.e4m3_max = e4m3_max;
        self
    }
    /// The layout the block scales are written in: compact (default), TE's padded buffer, or that buffer
    /// in the cuBLAS 128x4 layout.
    pub fn scales(mut self, scales: QuantizedScales) -> Self {
        self.scales = scales;
        self
    }
    /// Rowwise (default), or columnwise: the `(K, M)` transpose, blocked along M, as TE stores it.
    pub fn direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }
    /// The stream CUDA work runs on.
    pub fn stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }
    /// The amax scope set.
    pub fn get_amax_scope(&self) -> AmaxScope {
        self.amax_scope
    }
    /// The amax mode set.
    pub fn get_amax_mode(&self) -> AmaxMode {
        self.amax_mode
    }
    /// The 4over6 mode set.
    pub fn get_four_over_six(&self) -> FourOverSix {
        self.four_over_six
    }
    /// The E4M3_MAX set.
    pub fn get_e4m3_max(&self) -> i32 {
        self.e4m3_max
    }
    /// The scale layout set.
    pub fn get_scales(&self) -> QuantizedScales {
        self.scales
    }
    /// The direction set.
    pub fn get_direction(&self) -> Direction {
        self.direction
    }
    /// The stream set.
    pub fn get_stream(&self) -> Stream {
        self.stream
    }
    /// The C struct.
    pub fn to_sys(&self) -> sys::mxfp8_nvfp4_quantize_options {
        sys::mxfp8_nvfp4_quantize_options {
            amax_scope: self.amax_scope.to_raw(),
            amax_mode: self.amax_mode.to_raw(),
            four_over_six: self.four_over_six.to_raw(),
            e4m3_max: self.e4m3_max,
            scales_layout: self.scales.to_raw(),
            direction: self.direction.to_raw(),
            stream: self.stream.as_raw(),
            ..Default::default()
        }
    }

    /// The stored matrix (R, C) of an input of logical `shape`: (M, K) rowwise, (K, M) columnwise.
    fn stored(&self, shape: &[i64]) -> (i64, i64) {
        let (k, m) = match shape.split_last() {
            Some((&k, lead)) => (k, lead.iter().product::<i64>()),
            None => (1, 1),
        };
        match self.direction {
            Direction::Rowwise => (m, k),
            Direction::Columnwise => (k, m),
        }
    }

    /// The shape of the block scales a quantize of an input of logical `shape` writes (the header's
    /// formulas; the quantize wants exactly this many bytes): compact `(R, ceil(C/16))`, padded or
    /// swizzled `(roundup(R, 128), roundup(ceil(C/16), 4))`, for the stored matrix (R, C).
    pub fn scales_shape(&self, shape: &[i64]) -> Vec<i64> {
        let (r, c) = self.stored(shape);
        let up = |n: i64, d: i64| (n + d - 1) / d * d;
        match self.scales {
            QuantizedScales::Compact => vec![r, (c + 15) / 16],
            _ => vec![up(r, 128), up((c + 15) / 16, 4)],
        }
    }

    /// The packed bytes of the values, `R * C / 2`; None when C is odd (refused by the quantize) or the
    /// size overflows.
    pub fn values_len(&self, shape: &[i64]) -> Option<usize> {
        let (r, c) = self.stored(shape);
        if c % 2 != 0 {
            return None;
        }
        numel(&[r, c / 2])
    }

    /// The float32 amaxes: 1 per tensor, M per row.
    pub fn amax_len(&self, shape: &[i64]) -> usize {
        match self.amax_scope {
            AmaxScope::PerTensor => 1,
            AmaxScope::PerRow => numel(shape.split_last().map_or(&[][..], |(_, lead)| lead)).unwrap_or(0),
        }
    }
}

/// Host buffers one NVFP4 quantize writes: the packed values ([`Nvfp4QuantizeOptions::values_len`]
/// bytes) and the E4M3 block scales (exactly [`Nvfp4QuantizeOptions::scales_shape`]'s element count;
/// padding bytes are written as zero).
#[derive(Debug)]
pub struct Nvfp4Output<'a> {
    /// Two E2M1 values per byte, the even element in the low nibble.
    pub values: &'a mut [u8],
    /// The E4M3 block scales.
    pub scales: &'a mut [u8],
}

/// Quantizes a row-major host tensor of logical `shape` (bfloat16, float16 or float32) to NVFP4 into
/// caller slices (`mxfp8_nvfp4_quantize_into`), bit-exact with Transformer Engine's quantizer (the
/// header spells out every float step).
///
/// `amax` holds 1 float32 (per tensor) or M (per row, rowwise only): written with
/// [`AmaxMode::Compute`], read with [`AmaxMode::Given`]. The stored matrix's C (K rowwise, M columnwise)
/// must be even. Everything is checked before anything is written; large inputs run on several threads.
///
/// ```
/// # use mxfp8::{nvfp4_quantize_into, HostInput, Nvfp4Output, Nvfp4QuantizeOptions};
/// # fn main() -> Result<(), mxfp8::Error> {
/// let x = [6.0f32, -3.0, 0.5, 0.0];
/// let (mut values, mut scales, mut amax) = ([0u8; 2], [0u8; 1], [0f32; 1]);
/// let options = Nvfp4QuantizeOptions::new();
/// nvfp4_quantize_into(HostInput::F32(&x), &[1, 4], &options,
///                     Nvfp4Output { values: &mut values, scales: &mut scales }, &mut amax)?;
/// assert_eq!(amax, [6.0]);
/// assert_eq!(values, [0xD7, 0x01]); // 6 = code 7, -3 = code 0xD; 0.5 = 1, 0 = 0
/// # Ok(()) }
/// ```
pub fn nvfp4_quantize_into(
    input: HostInput<'_>,
    shape: &[i64],
    options: &Nvfp4QuantizeOptions,
    output: Nvfp4Output<'_>,
    amax: &mut [f32],
) -> Result<(), Error> {
    let (data, len, dtype) = input.parts();
    check_numel(shape, len, "input values")?;
    let mut shape = shape.to_vec();
    let t = dl_tensor(data, HOST, dtype.dl(), &mut shape);
    let (mut vshape, mut sshape, mut ashape) = ([output.values.len() as i64], [output.scales.len() as i64], [amax.len() as i64]);
    let mut v = dl_tensor(output.values.as_mut_ptr() as *const c_void, HOST, UINT8, &mut vshape);
    let mut s = dl_tensor(output.scales.as_mut_ptr() as *const c_void, HOST, UINT8, &mut sshape);
    let mut a = dl_tensor(amax.as_mut_ptr() as *const c_void, HOST, FLOAT32, &mut ashape);
    let o = options.to_sys();
    let (inputs, values, scales) = ([&t as *const sys::DLTensor], [&mut v as *mut sys::DLTensor], [&mut s as *mut sys::DLTensor]);
    // SAFETY: every DLTensor describes a live host slice (the outputs exclusively borrowed); the arrays
    // hold one pointer each; host work is done when the call returns.
    check(unsafe { sys::mxfp8_nvfp4_quantize_into(inputs.as_ptr(), 1, &o, values.as_ptr(), scales.as_ptr(), &mut a) })
}

/// [`nvfp4_quantize_into`] on device memory: `input` holds `prod(shape)` elements of `dtype`, `amax`
/// 4 bytes per float32. Queued on `options`' stream (a memset, the amax kernel when it is computed, the
/// quantize kernel); the call does not wait, and the amax never leaves the device.
pub fn nvfp4_quantize_into_device(
    input: DeviceBytes,
    dtype: InputDtype,
    shape: &[i64],
    options: &Nvfp4QuantizeOptions,
    values: DeviceBytes,
    scales: DeviceBytes,
    amax: DeviceBytes,
) -> Result<(), Error> {
    let mut input_shape = device_input_shape(&input, dtype, shape)?;
    let t = dl_tensor(input.as_ptr(), input.device(), dtype.dl(), &mut input_shape);
    let (mut vshape, mut sshape, mut ashape) = ([values.len() as i64], [scales.len() as i64], [amax_elements(&amax)?]);
    let mut v = dl_tensor(values.as_ptr(), values.device(), UINT8, &mut vshape);
    let mut s = dl_tensor(scales.as_ptr(), scales.device(), UINT8, &mut sshape);
    let mut a = dl_tensor(amax.as_ptr(), amax.device(), FLOAT32, &mut ashape);
    let o = options.to_sys();
    let (inputs, values, scales) = ([&t as *const sys::DLTensor], [&mut v as *mut sys::DLTensor], [&mut s as *mut sys::DLTensor]);
    // SAFETY: DeviceBytes' constructor promised the memory for the queued work; the arrays hold one
    // pointer each, read during the call only.
    check(unsafe { sys::mxfp8_nvfp4_quantize_into(inputs.as_ptr(), 1, &o, values.as_ptr(), scales.as_ptr(), &mut a) })
}

fn device_input_shape(input: &DeviceBytes, dtype: InputDtype, shape: &[i64]) -> Result<Vec<i64>, Error> {
    let element = dtype.dl().bits as usize / 8;
    if numel(shape).and_then(|n| n.checked_mul(element)) != Some(input.len()) {
        return Err(invalid(format!("input: {} bytes cannot hold {dtype:?} elements of shape {shape:?}", input.len())));
    }
    Ok(shape.to_vec())
}

fn amax_elements(amax: &DeviceBytes) -> Result<i64, Error> {
    float32_elements(amax, "amax")
}

/// The float32 elements of device memory named `what`; an error when its size is not a whole number.
pub(crate) fn float32_elements(bytes: &DeviceBytes, what: &str) -> Result<i64, Error> {
    if bytes.len() % 4 != 0 {
        return Err(invalid(format!("{what}: {} bytes is not a whole number of float32", bytes.len())));
    }
    Ok((bytes.len() / 4) as i64)
}

/// The fused calls take one per-tensor amax, whatever the shard count (the C call takes per-row amaxes
/// for a single input, count 1, which [`nvfp4_quantize_into`] is for).
fn check_fused_scope(options: &Nvfp4QuantizeOptions) -> Result<(), Error> {
    if matches!(options.amax_scope, AmaxScope::PerRow) {
        return Err(invalid(
            "options.amax_scope is AmaxScope::PerRow: fused shards share one per-tensor amax (quantize per-row \
             shards one by one with nvfp4_quantize_into)",
        ));
    }
    Ok(())
}

/// One shard of [`nvfp4_quantize_fused_into`]: a row-major host input of logical `shape` and the
/// buffers its values and scales go to.
#[derive(Debug)]
pub struct FusedShard<'a> {
    /// The shard's values.
    pub input: HostInput<'a>,
    /// Its logical shape `(*lead, K)`; every shard has the same K.
    pub shape: &'a [i64],
    /// Where its packed values and block scales go.
    pub output: Nvfp4Output<'a>,
}

/// Fused shards under one global scale (`mxfp8_nvfp4_quantize_into` with `count` shards): the Q/K/V or gate/up
/// shards an engine stores as one tensor with one `weight_scale_2`. Every shard (same dtype, same K) is
/// quantized against one shared per-tensor amax, so each shard's block scales are re-derived against
/// the common encode scale: with [`AmaxMode::Compute`] the shared amax is the largest of the shards'
/// amaxes and is written to `amax`; with [`AmaxMode::Given`] it is read from there. Each shard comes out
/// byte for byte as [`nvfp4_quantize_into`] would write it with that amax given. The options' amax scope
/// must be per tensor. Everything is checked before anything is written.
pub fn nvfp4_quantize_fused_into(shards: &mut [FusedShard<'_>], options: &Nvfp4QuantizeOptions, amax: &mut f32) -> Result<(), Error> {
    check_fused_scope(options)?;
    let mut shapes = Vec::with_capacity(shards.len());
    for shard in shards.iter() {
        let (_, len, _) = shard.input.parts();
        check_numel(shard.shape, len, "input values")?;
        shapes.push((shard.shape.to_vec(), [shard.output.values.len() as i64], [shard.output.scales.len() as i64]));
    }
    let mut inputs = Vec::with_capacity(shards.len());
    let mut values = Vec::with_capacity(shards.len());
    let mut scales = Vec::with_capacity(shards.len());
    for (shard, (shape, vshape, sshape)) in shards.iter_mut().zip(shapes.iter_mut()) {
        let (data, _, dtype) = shard.input.parts();
        inputs.push(dl_tensor(data, HOST, dtype.dl(), shape));
        values.push(dl_tensor(shard.output.values.as_mut_ptr() as *const c_void, HOST, UINT8, vshape));
        scales.push(dl_tensor(shard.output.scales.as_mut_ptr() as *const c_void, HOST, UINT8, sshape));
    }
    let input_ptrs: Vec<*const sys::DLTensor> = inputs.iter().map(|t| t as *const _).collect();
    let value_ptrs: Vec<*mut sys::DLTensor> = values.iter_mut().map(|t| t as *mut _).collect();
    let scale_ptrs: Vec<*mut sys::DLTensor> = scales.iter_mut().map(|t| t as *mut _).collect();
    let mut ashape = [1i64];
    let mut a = dl_tensor(amax as *mut f32 as *const c_void, HOST, FLOAT32, &mut ashape);
    let o = options.to_sys();
    // SAFETY: every DLTensor describes a live host slice or the borrowed amax (outputs exclusively
    // borrowed); the arrays hold shards.len() pointers; host work is done when the call returns.
    check(unsafe {
        sys::mxfp8_nvfp4_quantize_into(input_ptrs.as_ptr(), input_ptrs.len(), &o, value_ptrs.as_ptr(), scale_ptrs.as_ptr(), &mut a)
    })
}

/// One shard of [`nvfp4_quantize_fused_into_device`]: `prod(shape)` input elements and the buffers its
/// packed values and block scales go to, in device memory.
#[derive(Copy, Clone, Debug)]
pub struct DeviceFusedShard<'a> {
    /// The shard's values, of the call's input dtype.
    pub input: DeviceBytes,
    /// Its logical shape `(*lead, K)`; every shard has the same K.
    pub shape: &'a [i64],
    /// Its packed values.
    pub values: DeviceBytes,
    /// Its E4M3 block scales.
    pub scales: DeviceBytes,
}

/// [`nvfp4_quantize_fused_into`] on device memory: every input of `dtype`, `amax` one float32 (4
/// bytes). Queued on `options`' stream; the call does not wait, and the shared amax never leaves the
/// device.
pub fn nvfp4_quantize_fused_into_device(
    shards: &[DeviceFusedShard<'_>],
    dtype: InputDtype,
    options: &Nvfp4QuantizeOptions,
    amax: DeviceBytes,
) -> Result<(), Error> {
    check_fused_scope(options)?;
    let mut shapes = Vec::with_capacity(shards.len());
    for shard in shards {
        shapes.push((device_input_shape(&shard.input, dtype, shard.shape)?, [shard.values.len() as i64], [shard.scales.len() as i64]));
    }
    let mut inputs = Vec::with_capacity(shards.len());
    let mut values = Vec::with_capacity(shards.len());
    let mut scales = Vec::with_capacity(shards.len());
    for (shard, (shape, vshape, sshape)) in shards.iter().zip(shapes.iter_mut()) {
        inputs.push(dl_tensor(shard.input.as_ptr(), shard.input.device(), dtype.dl(), shape));
        values.push(dl_tensor(shard.values.as_ptr(), shard.values.device(), UINT8, vshape));
        scales.push(dl_tensor(shard.scales.as_ptr(), shard.scales.device(), UINT8, sshape));
    }
    let input_ptrs: Vec<*const sys::DLTensor> = inputs.iter().map(|t| t as *const _).collect();
    let value_ptrs: Vec<*mut sys::DLTensor> = values.iter_mut().map(|t| t as *mut _).collect();
    let scale_ptrs: Vec<*mut sys::DLTensor> = scales.iter_mut().map(|t| t as *mut _).collect();
    let mut ashape = [amax_elements(&amax)?];
    let mut a = dl_tensor(amax.as_ptr(), amax.device(), FLOAT32, &mut ashape);
    let o = options.to_sys();
    // SAFETY: DeviceBytes' constructor promised the memory for the queued work; the arrays hold
    // shards.len() pointers, read during the call only.
    check(unsafe {
        sys::mxfp8_nvfp4_quantize_into(input_ptrs.as_ptr(), input_ptrs.len(), &o, value_ptrs.as_ptr(), scale_ptrs.as_ptr(), &mut a)
    })
}
