//! An MXFP8 tensor: describe, validate, export (one tensor, or many tensors' scales in one call).
use std::ffi::c_void;
use std::fmt;
use std::ptr::{self, NonNull};

use crate::error::{check, invalid, Error};
use crate::managed::ManagedTensor;
use crate::memory::{dl_tensor, DeviceBytes, HOST, UINT8};
use crate::options::{known, Block, Direction, ExportOptions, Format, ScaleLayout};
use crate::sys;

/// Describes an MXFP8 tensor; [`build`](Self::build) validates it into a [`Tensor`]. The defaults
/// (format, scale layout, block) are `MXFP8_TENSOR_DESC_INIT`'s, read from mxfp8-sys.
#[derive(Debug)]
pub struct TensorBuilder {
    format: Format,
    layout: ScaleLayout,
    block: Block,
    shape: Option<Vec<i64>>,
    rowwise: Option<(ManagedTensor, ManagedTensor)>,
    columnwise: Option<(ManagedTensor, ManagedTensor)>,
}

impl Default for TensorBuilder {
    fn default() -> Self {
        let c = sys::mxfp8_tensor_desc::default();
        Self {
            format: known(Format::from_raw(c.format), "format"),
            layout: known(ScaleLayout::from_raw(c.scale_layout), "scale_layout"),
            block: known(Block::from_raw(c.block), "block"),
            shape: None,
            rowwise: None,
            columnwise: None,
        }
    }
}

impl TensorBuilder {
    /// The defaults: E4M3, row-major scales, 1x32 blocks, the shape taken from the data.
    pub fn new() -> Self {
        Self::default()
    }
    /// The FP8 encoding of the values.
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }
    /// The layout of both directions' scales.
    pub fn scale_layout(mut self, layout: ScaleLayout) -> Self {
        self.layout = layout;
        self
    }
    /// 1x32 or Transformer Engine's 32x32 blocks.
    pub fn block(mut self, block: Block) -> Self {
        self.block = block;
        self
    }
    /// The logical shape `(*lead, K)`, checked against the data (default: the data's shape).
    pub fn shape(mut self, shape: &[i64]) -> Self {
        self.shape = Some(shape.to_vec());
        self
    }
    /// The rowwise values and scales.
    pub fn rowwise(mut self, data: ManagedTensor, scale_inv: ManagedTensor) -> Self {
        self.rowwise = Some((data, scale_inv));
        self
    }
    /// The columnwise values (in the tensor's shape, not transposed) and scales.
    pub fn columnwise(mut self, data: ManagedTensor, scale_inv: ManagedTensor) -> Self {
        self.columnwise = Some((data, scale_inv));
        self
    }

    /// Validates everything (shapes, dtypes, devices, buffer sizes). On success the tensor owns the
    /// inputs; on failure they are dropped with the builder.
    pub fn build(self) -> Result<Tensor, Error> {
        let raw_of = |pair: &Option<(ManagedTensor, ManagedTensor)>| match pair {
            Some((d, s)) => (d.as_raw(), s.as_raw()),
            None => (ptr::null_mut(), ptr::null_mut()),
        };
        let (rowwise_data, rowwise_scale_inv) = raw_of(&self.rowwise);
        let (columnwise_data, columnwise_scale_inv) = raw_of(&self.columnwise);
        let desc = sys::mxfp8_tensor_desc {
            format: self.format.to_raw(),
            scale_layout: self.layout.to_raw(),
            ndim: self.shape.as_ref().map_or(0, |s| s.len() as i32),
            shape: self.shape.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            rowwise_data,
            rowwise_scale_inv,
            columnwise_data,
            columnwise_scale_inv,
            block: self.block.to_raw(),
            ..Default::default()
        };
        let mut out = ptr::null_mut();
        // SAFETY: desc and its pointers are valid for the call; on success the library took the
        // managed tensors, so they must not be dropped here.
        check(unsafe { sys::mxfp8_tensor_create(&desc, &mut out) })?;
        let data_shape = self.rowwise.as_ref().or(self.columnwise.as_ref()).map(|(d, _)| d.shape().to_vec());
        let shape = self.shape.or(data_shape).unwrap_or_default();
        for pair in [self.rowwise, self.columnwise].into_iter().flatten() {
            pair.0.into_raw();
            pair.1.into_raw();
        }
        let raw = NonNull::new(out).expect("mxfp8_tensor_create returned OK and NULL");
        Ok(Tensor { raw, shape, format: self.format, block: self.block })
    }
}

/// A validated MXFP8 tensor (the C `mxfp8_tensor` handle). Immutable; export from it on any thread.
pub struct Tensor {
    pub(crate) raw: NonNull<sys::mxfp8_tensor>,
    shape: Vec<i64>,
    format: Format,
    block: Block,
}

// SAFETY: mxfp8.h: "An immutable, reference-counted handle [...] Thread-safe: any number of threads may
// export from one handle at once." Its reference count is atomic, so it may also be released (dropped)
// on another thread than the one that made it.
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor").field("shape", &self.shape).field("format", &self.format).field("block", &self.block).finish()
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { sys::mxfp8_tensor_release(self.raw.as_ptr()) }
    }
}

/// The values (always a view) and compact scales (a view or a copy) of one direction.
#[derive(Debug)]
pub struct Components {
    /// The FP8 values in the tensor's logical shape: a view that keeps its source alive.
    pub values: ManagedTensor,
    /// The compact scales: `(*lead, ceil(K/32))` rowwise, `(ceil(M/32), K)` columnwise.
    pub scales: ManagedTensor,
}

/// The compact scale shape of a tensor of logical `shape` in `direction` (an empty shape is one value).
pub fn compact_scales_shape(shape: &[i64], direction: Direction) -> Vec<i64> {
    let Some((&k, lead)) = shape.split_last() else { return vec![1] };
    match direction {
        Direction::Rowwise => lead.iter().copied().chain([(k + 31) / 32]).collect(),
        Direction::Columnwise => vec![(lead.iter().product::<i64>() + 31) / 32, k],
    }
}

impl Tensor {
    pub(crate) fn from_handle(raw: NonNull<sys::mxfp8_tensor>, shape: Vec<i64>, format: Format) -> Self {
        Self { raw, shape, format, block: Block::B1x32 }
    }

    /// The logical shape `(*lead, K)`.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The FP8 encoding of the values.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The block the tensor was described with ([`Block::B1x32`] for a grouped expert).
    pub fn block(&self) -> Block {
        self.block
    }

    /// The shape of the compact scales of `direction` (what an export and a bucket hold).
    pub fn scales_shape(&self, direction: Direction) -> Vec<i64> {
        compact_scales_shape(&self.shape, direction)
    }

    /// The C handle, still owned by `self` (for calls into mxfp8-sys).
    pub fn as_raw(&self) -> *const sys::mxfp8_tensor {
        self.raw.as_ptr()
    }

    /// Exports the values and compact scales of `options`' direction.
    pub fn export(&self, options: &ExportOptions) -> Result<Components, Error> {
        let o = options.to_sys();
        let (mut values, mut scales) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid handle and options; both outputs are written only on success.
        check(unsafe { sys::mxfp8_export_components(self.raw.as_ptr(), &o, &mut values, &mut scales) })?;
        // SAFETY: on success both are fresh managed tensors that we now own.
        unsafe {
            Ok(Components {
                values: ManagedTensor::from_raw(values).expect("values"),
                scales: ManagedTensor::from_raw(scales).expect("scales"),
            })
        }
    }
}

/// Writes the compact scales of every tensor (in `options`' direction) into `destinations[i]`, host
/// memory, row-major as [`Tensor::export`] returns them: a whole model's scales in one call. Each slice
/// must hold exactly that many bytes ([`Tensor::scales_shape`]); every entry is checked before anything is
/// written, so a bad one leaves all destinations untouched.
pub fn export_scales_batched(tensors: &[&Tensor], destinations: &mut [&mut [u8]], options: &ExportOptions) -> Result<(), Error> {
    if tensors.len() != destinations.len() {
        return Err(invalid(format!("{} tensors but {} destinations", tensors.len(), destinations.len())));
    }
    let mut shapes: Vec<[i64; 1]> = destinations.iter().map(|d| [d.len() as i64]).collect();
    let dls: Vec<_> = destinations.iter_mut().zip(&mut shapes).map(|(d, s)| dl_tensor(d.as_mut_ptr() as *const c_void, HOST, UINT8, s)).collect();
    // SAFETY: every DLTensor describes a live, exclusively borrowed host slice; host work is done on return.
    unsafe { batched(tensors, dls, options) }
}

/// [`export_scales_batched`] into device memory: one kernel launch (per ~384 tensors) queued on
/// `options`' stream; the call does not wait.
pub fn export_scales_batched_device(tensors: &[&Tensor], destinations: &[DeviceBytes], options: &ExportOptions) -> Result<(), Error> {
    if tensors.len() != destinations.len() {
        return Err(invalid(format!("{} tensors but {} destinations", tensors.len(), destinations.len())));
    }
    let mut shapes: Vec<[i64; 1]> = destinations.iter().map(|d| [d.len() as i64]).collect();
    let dls: Vec<_> = destinations.iter().zip(&mut shapes).map(|(d, s)| dl_tensor(d.as_ptr(), d.device(), UINT8, s)).collect();
    // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
    unsafe { batched(tensors, dls, options) }
}

unsafe fn batched(tensors: &[&Tensor], mut dls: Vec<sys::DLTensor>, options: &ExportOptions) -> Result<(), Error> {
    let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
    let ptrs: Vec<*mut sys::DLTensor> = dls.iter_mut().map(|d| d as *mut _).collect();
    let o = options.to_sys();
    check(sys::mxfp8_export_scales_batched(handles.as_ptr(), ptrs.as_ptr(), handles.len(), &o))
}
