//! One tensor of any format (MXFP8 E4M3/E5M2, NVFP4): describe, validate, export, decode, convert.
use std::ptr;

use crate::error::{check, invalid, Error};
use crate::handle::Handle;
use crate::managed::ManagedTensor;
use crate::memory::{BufMut, Dl};
use crate::options::{CField, Block, ConvertOptions, DequantizeOptions, Direction, ExportOptions, Format, ScaleLayout};
use crate::shard::RawShards;
use crate::sys;

/// E4M3_MAX of an NVFP4 tensor that does not say otherwise: Transformer Engine's default (256 is its 4over6).
const DEFAULT_E4M3_MAX: i32 = 448;

/// Describes a tensor (`mxfp8_tensor_desc`); [`build`](Self::build) validates it into a [`Tensor`].
/// The scale layout has no default: [`scale_layout`](Self::scale_layout) must say it (a build without it
/// fails with the library's message, `MXFP8_SCALE_LAYOUT_UNSET`), since Transformer Engine's swizzled
/// scales and row-major ones of the same shape cannot be told apart, and a guess would decode to noise.
/// The format defaults to `MXFP8_TENSOR_DESC_INIT`'s (E4M3), the block to the format's; an NVFP4 tensor
/// ([`Format::Nvfp4`]) takes E4M3_MAX 448 unless told otherwise, and one float32 amax per direction
/// ([`amax`](Self::amax)).
///
/// ```
/// # use mxfp8::{DequantizeOptions, Direction, Format, ManagedTensor, ScaleLayout, TensorBuilder};
/// # fn main() -> Result<(), mxfp8::Error> {
/// // An NVFP4 (2, 32) tensor: 2 rows of 16 bytes, 2 scales per row, one amax.
/// let tensor = TensorBuilder::new()
///     .format(Format::Nvfp4)
///     .scale_layout(ScaleLayout::RowMajor)
///     .rowwise(ManagedTensor::from_host(vec![0x21; 32], &[2, 16])?,
///              ManagedTensor::from_host(vec![0x38; 4], &[2, 2])?)
///     .amax(Direction::Rowwise, ManagedTensor::from_host(vec![2688.0], &[1])?)
///     .build()?;
/// // 0x21: 0.5 (low nibble), 1.0 (high); scale 0x38 = 1.0; global decode 2688 / 2688 = 1.
/// let mut decoded = [0f32; 64];
/// tensor.dequantize_into(&mut decoded, &DequantizeOptions::new())?;
/// assert_eq!(&decoded[..2], &[0.5, 1.0]);
/// assert_eq!((tensor.shape(), tensor.e4m3_max()), (&[2, 32][..], Some(448)));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TensorBuilder {
    format: Format,
    layout: Option<ScaleLayout>,
    block: Option<Block>,
    e4m3_max: Option<i32>,
    shape: Option<Vec<i64>>,
    /// Rowwise then columnwise: data, scales, amax.
    parts: [[Option<ManagedTensor>; 3]; 2],
}

impl Default for TensorBuilder {
    fn default() -> Self {
        let c = sys::mxfp8_tensor_desc::default();
        Self {
            format: CField::from_c(c.format, "format"),
            layout: None,
            block: None,
            e4m3_max: None,
            shape: None,
            parts: Default::default(),
        }
    }
}

impl TensorBuilder {
    /// The defaults: E4M3, the format's block, the shape taken from the data; the scale layout unsaid.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// The encoding of the values.
        format(format: Format) => format = format;
        /// The layout of both directions' scales (TE's `with_gemm_swizzled_scales`): required.
        scale_layout(layout: ScaleLayout) => layout = Some(layout);
        /// 1x32 or Transformer Engine's 32x32 blocks for MXFP8 (default 1x32); NVFP4's is 1x16.
        block(block: Block) => block = Some(block);
        /// NVFP4's E4M3_MAX: 448 (default), or 256 for TE's 4over6 tensors (`nvfp4_e4m3_max`).
        e4m3_max(e4m3_max: i32) => e4m3_max = Some(e4m3_max);
        /// The logical shape `(*lead, K)`, checked against the data (default, or empty: from the data).
        shape(shape: &[i64]) => shape = Some(shape.to_vec());
    }
    /// The rowwise values and scales (NVFP4: packed `(*lead, K/2)` bytes and E4M3 block scales).
    pub fn rowwise(mut self, data: ManagedTensor, scale_inv: ManagedTensor) -> Self {
        (self.parts[0][0], self.parts[0][1]) = (Some(data), Some(scale_inv));
        self
    }
    /// The columnwise values (MXFP8: in the tensor's shape; NVFP4: the stored `(K, M/2)` transpose) and scales.
    pub fn columnwise(mut self, data: ManagedTensor, scale_inv: ManagedTensor) -> Self {
        (self.parts[1][0], self.parts[1][1]) = (Some(data), Some(scale_inv));
        self
    }
    /// An NVFP4 direction's float32 amax: one, or (rowwise) one per row.
    pub fn amax(mut self, direction: Direction, amax: ManagedTensor) -> Self {
        self.parts[direction as usize][2] = Some(amax);
        self
    }
    /// Validates everything (shapes, dtypes, devices, buffer sizes, amax counts). On success the tensor
    /// owns the inputs; on failure they are dropped with the builder.
    pub fn build(self) -> Result<Tensor, Error> {
        let nvfp4 = self.format == Format::Nvfp4;
        let block = self.block.unwrap_or(if nvfp4 { Block::B1x16 } else { Block::B1x32 });
        let e4m3_max = self.e4m3_max.unwrap_or(if nvfp4 { DEFAULT_E4M3_MAX } else { 0 });
        let raw = |d: usize, i: usize| self.parts[d][i].as_ref().map_or(ptr::null_mut(), ManagedTensor::as_raw);
        let desc = sys::mxfp8_tensor_desc {
            format: self.format.to_raw(),
            scale_layout: self.layout.map_or(sys::MXFP8_SCALE_LAYOUT_UNSET, ScaleLayout::to_raw),
            ndim: self.shape.as_ref().map_or(0, |s| s.len() as i32),
            shape: self.shape.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            rowwise_data: raw(0, 0),
            rowwise_scale_inv: raw(0, 1),
            rowwise_amax: raw(0, 2),
            columnwise_data: raw(1, 0),
            columnwise_scale_inv: raw(1, 1),
            columnwise_amax: raw(1, 2),
            block: block.to_raw(),
            e4m3_max,
            ..Default::default()
        };
        // SAFETY: desc and its pointers are valid for the call; on success the library took the
        // managed tensors, so they must not be dropped here.
        let raw = Handle::make("mxfp8_tensor_create", |out| unsafe { sys::mxfp8_tensor_create(&desc, out) })?;
        let [row, col] = self.parts;
        // A shape given (ndim > 0), else the data's: the header's ndim 0, an empty shape included.
        let shape = match (self.shape.filter(|s| !s.is_empty()), &row[0], &col[0]) {
            (Some(shape), ..) => shape,
            (None, Some(d), _) if nvfp4 => unpacked(d.shape(), d),
            (None, None, Some(d)) if nvfp4 => match d.shape().split_first() {
                // The header's rule for columnwise data: (K, d1, ..., dn) is (d1, ..., 2 * dn, K).
                Some((&k, rest)) => unpacked(rest, d).into_iter().chain([k]).collect(),
                None => Vec::new(),
            },
            (None, Some(d), _) | (None, None, Some(d)) => d.shape().to_vec(),
            (None, None, None) => Vec::new(),
        };
        for part in row.into_iter().chain(col).flatten() {
            part.into_raw();
        }
        Ok(Tensor { raw, shape, format: self.format, block, e4m3_max })
    }
}

/// NVFP4 data dimensions with the last one counted in values: twice the bytes of uint8 data.
fn unpacked(dims: &[i64], data: &ManagedTensor) -> Vec<i64> {
    let mut shape = dims.to_vec();
    if let (Some(last), 8) = (shape.last_mut(), data.dtype().bits) {
        *last *= 2;
    }
    shape
}

/// A validated tensor of any format (the C `mxfp8_tensor` handle, released on drop). Immutable: export
/// from it on any thread.
#[derive(Debug)]
pub struct Tensor {
    raw: Handle<sys::mxfp8_tensor>,
    shape: Vec<i64>,
    format: Format,
    block: Block,
    e4m3_max: i32,
}

/// One direction of an export. Each part keeps what it views alive on its own, so it may outlive the
/// [`Tensor`].
#[derive(Debug)]
pub struct Components {
    /// The values, always a zero-copy view: the logical shape (NVFP4: the stored matrix, packed bytes
    /// or float4).
    pub values: ManagedTensor,
    /// The compact scales (MXFP8 `(*lead, ceil(K/32))` rowwise, `(ceil(M/32), K)` columnwise; NVFP4
    /// `(*lead, ceil(K/16))` rowwise, `(K, ceil(M/16))` columnwise, of the stored matrix): a view, or a
    /// copy flagged as one.
    pub scales: ManagedTensor,
    /// NVFP4 only: float32, the amax's shape, in the options' global-scale convention (a copy); None
    /// for MXFP8.
    pub global_scale: Option<ManagedTensor>,
}

impl Components {
    /// The outputs of an export call.
    ///
    /// # Safety
    /// Both are fresh managed tensors (non-NULL after a successful call) that the caller owns.
    pub(crate) unsafe fn take(values: *mut sys::DLManagedTensorVersioned, scales: *mut sys::DLManagedTensorVersioned,
                              global_scale: Option<ManagedTensor>) -> Self {
        let take = |p| ManagedTensor::from_raw(p).expect("an export returned OK and no output");
        Components { values: take(values), scales: take(scales), global_scale }
    }
}

/// The C export options of `options` and the shard their `shard` points to (which must outlive them).
/// Every export passes the shard on, so that the exports of whole tensors refuse it rather than drop it.
pub(crate) fn with_shard(options: &ExportOptions) -> (sys::mxfp8_export_options, RawShards) {
    let (mut o, shard) = (options.to_sys(), RawShards::new(options.shard.as_slice()));
    if options.shard.is_some() {
        // SAFETY: one pointer, into `shard`'s heap buffers, which move with it unchanged.
        o.shard = unsafe { *shard.as_ptr() };
    }
    (o, shard)
}

/// The compact scale shape of a tensor of logical `shape` in `direction` (an empty shape is one value).
pub(crate) fn compact_scales_shape(shape: &[i64], direction: Direction, format: Format) -> Vec<i64> {
    let Some((&k, lead)) = shape.split_last() else { return vec![1, 1] };
    // Without overflow for any dimensions (K may be i64::MAX when M is 0; a shard's shape is unchecked).
    let m = lead.iter().fold(1i64, |m, &d| m.saturating_mul(d));
    let ceil = |n: i64, b: i64| n / b + i64::from(n % b > 0);
    match (format, direction) {
        (Format::Nvfp4, Direction::Rowwise) => lead.iter().copied().chain([ceil(k, 16)]).collect(),
        (Format::Nvfp4, Direction::Columnwise) => vec![k, ceil(m, 16)],
        (_, Direction::Rowwise) => lead.iter().copied().chain([ceil(k, 32)]).collect(),
        (_, Direction::Columnwise) => vec![ceil(m, 32), k],
    }
}

impl Tensor {
    pub(crate) fn from_handle(raw: Handle<sys::mxfp8_tensor>, shape: Vec<i64>, format: Format) -> Self {
        Self { raw, shape, format, block: Block::B1x32, e4m3_max: 0 }
    }
    /// The logical shape `(*lead, K)`.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }
    /// The encoding of the values.
    pub fn format(&self) -> Format {
        self.format
    }
    /// The block the tensor was described with ([`Block::B1x32`] for a grouped expert).
    pub fn block(&self) -> Block {
        self.block
    }
    /// NVFP4's E4M3_MAX (448 or 256); None for an MXFP8 tensor.
    pub fn e4m3_max(&self) -> Option<i32> {
        (self.format == Format::Nvfp4).then_some(self.e4m3_max)
    }
    /// The shape of the compact scales of `direction` (what an export and a bucket hold).
    pub fn scales_shape(&self, direction: Direction) -> Vec<i64> {
        compact_scales_shape(&self.shape, direction, self.format)
    }
    /// The C handle, still owned by `self` (for calls into mxfp8-sys).
    pub fn as_raw(&self) -> *const sys::mxfp8_tensor {
        self.raw.as_ptr()
    }
    /// Exports the values and compact scales of `options`' direction (`mxfp8_export_components`, with
    /// `options.shard` when set: values `(rows, cols)`, the shard's compact scales) and, for NVFP4, the
    /// global scale (`mxfp8_export_global_scale`). Fails with
    /// [`Status::MissingData`](crate::Status::MissingData) when the tensor has no data for the direction.
    pub fn export(&self, options: &ExportOptions) -> Result<Components, Error> {
        let (o, _shard) = with_shard(options);
        let (mut values, mut scales) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid handle and options; both outputs are written only on success.
        check(unsafe { sys::mxfp8_export_components(self.raw.as_ptr(), &o, &mut values, &mut scales) })?;
        // SAFETY: on success both are fresh managed tensors that we now own (dropped if the global scale fails).
        let parts = unsafe { Components::take(values, scales, None) };
        let global_scale = if self.format == Format::Nvfp4 { Some(self.global_scale(options)?) } else { None };
        Ok(Components { global_scale, ..parts })
    }

    /// An NVFP4 tensor's global scale of `options`' direction in its convention (float32, the amax's
    /// shape, a copy; `mxfp8_export_global_scale`). An MXFP8 tensor has none:
    /// [`Status::InvalidArgument`](crate::Status::InvalidArgument).
    pub fn global_scale(&self, options: &ExportOptions) -> Result<ManagedTensor, Error> {
        let (o, _shard) = with_shard(options);
        let mut global = ptr::null_mut();
        // SAFETY: valid handle and options; the output is written on success only.
        check(unsafe { sys::mxfp8_export_global_scale(self.raw.as_ptr(), &o, &mut global) })?;
        // SAFETY: a fresh managed tensor that we now own.
        Ok(unsafe { ManagedTensor::from_raw(global) }.expect("global_scale"))
    }

    /// Decodes a tensor into `output` (`mxfp8_dequantize`): float32 or bfloat16 (rounded to nearest-even),
    /// `prod(shape)` elements (NVFP4: the stored matrix of the direction), host or device memory on the
    /// tensor's device; CUDA work is queued on `options`' stream.
    pub fn dequantize_into<'a>(&self, output: impl Into<BufMut<'a>>, options: &DequantizeOptions) -> Result<(), Error> {
        let mut t = output.into().raw.dl(None);
        let o = options.to_sys();
        // SAFETY: the buffer is exclusively borrowed (host) or promised (DeviceBytes) for the work.
        check(unsafe { sys::mxfp8_dequantize(self.raw.as_ptr(), &o, t.ptr()) })
    }

    /// Writes direction `options.direction` in layout `options.target` (`mxfp8_convert`), from the scales
    /// as stored: `scales` exactly [`layout_bytes`](crate::layout_bytes) of the scale matrix (every byte
    /// written, padding zero); `values` None or `prod(shape)` bytes in the target's row order (the TRT-LLM
    /// targets permute rows and require them). Checked before anything is written; device memory: one
    /// launch on `options`' stream.
    pub fn convert_into<'a>(&self, options: &ConvertOptions, values: Option<BufMut<'a>>, scales: impl Into<BufMut<'a>>) -> Result<(), Error> {
        // SAFETY: a valid handle; the arguments are convert_call's.
        convert_call(options, values, scales.into(), |o, v, s| unsafe { sys::mxfp8_convert(self.as_raw(), o, v, s) })
    }
}

/// A convert of one tensor or of grouped experts (`mxfp8_convert` and `mxfp8_grouped_convert` take the
/// same options and buffers): `call` gets the C options and the buffers, valid for the call, exclusively
/// borrowed (host) or promised (DeviceBytes) for the work.
pub(crate) fn convert_call(options: &ConvertOptions, values: Option<BufMut<'_>>, scales: BufMut<'_>,
                           call: impl FnOnce(&sys::mxfp8_convert_options, *mut sys::DLTensor, *mut sys::DLTensor) -> sys::mxfp8_status) -> Result<(), Error> {
    let (mut v, mut s) = (values.map(|v| v.raw.dl(None)), scales.raw.dl(None));
    check(call(&options.to_sys(), v.as_mut().map_or(ptr::null_mut(), Dl::ptr), s.ptr()))
}

/// Writes the compact scales of every tensor (in `options`' direction) into `destinations[i]`, row-major
/// as [`Tensor::export`] returns them (`mxfp8_export_scales_batched`): a whole model's scales in one call
/// (one launch per ~384 tensors on a device, queued on `options`' stream). Each destination holds
/// exactly that many bytes ([`Tensor::scales_shape`]); every entry is checked before anything is written.
pub fn export_scales_batched(tensors: &[&Tensor], destinations: Vec<BufMut<'_>>, options: &ExportOptions) -> Result<(), Error> {
    if tensors.len() != destinations.len() {
        return Err(invalid(format!("{} tensors but {} destinations", tensors.len(), destinations.len())));
    }
    let mut dls: Vec<_> = destinations.iter().map(|d| d.raw.dl(None)).collect();
    let ptrs: Vec<*mut sys::DLTensor> = dls.iter_mut().map(|d| d.ptr()).collect();
    let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
    let (o, _shard) = with_shard(options);
    // SAFETY: both arrays hold count elements; the buffers are borrowed or promised for the work.
    check(unsafe { sys::mxfp8_export_scales_batched(handles.as_ptr(), ptrs.as_ptr(), handles.len(), &o) })
}
