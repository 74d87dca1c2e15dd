//! Safe Rust API over libmxfp8.
//!
//! ```no_run
//! use mxfp8::{Format, ManagedTensor, ScaleLayout, TensorBuilder, ExportOptions};
//! # fn main() -> Result<(), mxfp8::Error> {
//! # let (values, swizzled) = (vec![0u8; 100 * 48], vec![127u8; 512]);
//! let tensor = TensorBuilder::new()
//!     .format(Format::E4M3)
//!     .scale_layout(ScaleLayout::GemmSwizzled)
//!     .rowwise(ManagedTensor::from_host_bytes(values, &[100, 48])?,
//!              ManagedTensor::from_host_bytes(swizzled, &[128, 4])?)
//!     .build()?;
//! let parts = tensor.export(&ExportOptions::default())?;
//! assert_eq!(parts.scales.shape(), &[100, 2]);
//! # Ok(()) }
//! ```
//!
//! Ownership follows the C API: a [`TensorBuilder`] hands its [`ManagedTensor`]s to the library when
//! [`TensorBuilder::build`] succeeds (and drops them, running their deleters, when it fails); the
//! [`Components`] of an export keep what they view alive on their own, so they may outlive the
//! [`Tensor`].
use std::ffi::{c_void, CStr};
use std::fmt;
use std::ptr::{self, NonNull};

pub use mxfp8_sys as sys;
use sys::{DLDataTypeCode, DLDeviceType};

mod quantize;
pub use quantize::{quantize_host, quantize_raw, HostInput, QuantizeOptions, Quantized, QuantizedScales, ScaleRounding};

/// The version of the loaded library, `MAJOR * 10000 + MINOR * 100 + PATCH`.
pub fn version() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { sys::mxfp8_version() }
}

/// A failed call: the library's status and its message for this thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: sys::mxfp8_status,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: mxfp8_status_string returns a static, NUL-terminated string for any value.
        let name = unsafe { CStr::from_ptr(sys::mxfp8_status_string(self.status)) };
        write!(f, "{}: {}", name.to_string_lossy(), self.message)
    }
}

impl std::error::Error for Error {}

fn check(status: sys::mxfp8_status) -> Result<(), Error> {
    if status == sys::mxfp8_status::OK {
        return Ok(());
    }
    // SAFETY: mxfp8_last_error never returns NULL; the text is valid until this thread's next call.
    let message = unsafe { CStr::from_ptr(sys::mxfp8_last_error()) }.to_string_lossy().into_owned();
    Err(Error { status, message })
}

fn invalid(message: String) -> Error {
    Error { status: sys::mxfp8_status::ERROR_INVALID_ARGUMENT, message }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Format {
    E4M3,
    E5M2,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ScaleLayout {
    /// Row-major, possibly padded (Transformer Engine pads rowwise scales to 128 x 4).
    RowMajor,
    /// The cuBLAS 128x4 block-scaling layout.
    GemmSwizzled,
}

/// How many values share one scale.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Block {
    /// One scale per 32 consecutive values.
    B1x32,
    /// Transformer Engine's 2-D weights: one scale per 32 x 32 block (stored repeated as 1x32 scales).
    B32x32,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    Rowwise,
    Columnwise,
}

fn format_to_sys(format: Format) -> i32 {
    match format {
        Format::E4M3 => sys::MXFP8_FORMAT_E4M3,
        Format::E5M2 => sys::MXFP8_FORMAT_E5M2,
    }
}

fn block_to_sys(block: Block) -> i32 {
    match block {
        Block::B1x32 => sys::MXFP8_BLOCK_1X32,
        Block::B32x32 => sys::MXFP8_BLOCK_32X32,
    }
}

fn direction_to_sys(direction: Direction) -> i32 {
    match direction {
        Direction::Rowwise => sys::MXFP8_DIRECTION_ROWWISE,
        Direction::Columnwise => sys::MXFP8_DIRECTION_COLUMNWISE,
    }
}

/// An owned DLPack tensor. Dropping it calls its deleter exactly once.
pub struct ManagedTensor {
    raw: NonNull<sys::DLManagedTensorVersioned>,
}

// SAFETY: a ManagedTensor is only read through &self, and its deleter is called once, from whichever
// thread drops it. The deleters this crate and libmxfp8 install are thread-safe (they free memory and
// drop an atomic reference count); `from_raw` makes its caller promise the same of foreign ones.
unsafe impl Send for ManagedTensor {}
unsafe impl Sync for ManagedTensor {}

/// Host memory owned by a ManagedTensor made in Rust.
struct HostBytes {
    managed: sys::DLManagedTensorVersioned,
    _bytes: Vec<u8>,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
}

unsafe extern "C" fn drop_host_bytes(self_: *mut sys::DLManagedTensorVersioned) {
    // SAFETY: manager_ctx is the Box leaked in from_host_bytes, and DLPack calls the deleter once.
    drop(unsafe { Box::from_raw((*self_).manager_ctx as *mut HostBytes) });
}

impl ManagedTensor {
    /// A uint8 host tensor of `shape` over `bytes` (row-major); fails if the sizes disagree.
    pub fn from_host_bytes(bytes: Vec<u8>, shape: &[i64]) -> Result<Self, Error> {
        let count = shape.iter().try_fold(1i64, |n, &d| if d < 0 { None } else { n.checked_mul(d) });
        if count != Some(bytes.len() as i64) {
            return Err(invalid(format!("{} bytes cannot have shape {:?}", bytes.len(), shape)));
        }
        let mut host = Box::new(HostBytes {
            managed: sys::DLManagedTensorVersioned {
                version: sys::DLPackVersion { major: 1, minor: 1 },
                manager_ctx: ptr::null_mut(),
                deleter: Some(drop_host_bytes),
                flags: 0,
                dl_tensor: sys::DLTensor {
                    data: ptr::null_mut(),
                    device: sys::DLDevice { device_type: DLDeviceType::CPU, device_id: 0 },
                    ndim: shape.len() as i32,
                    dtype: sys::DLDataType { code: DLDataTypeCode::UINT, bits: 8, lanes: 1 },
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            _bytes: bytes,
            _shape: shape.to_vec(),
            _strides: row_major_strides(shape),
        });
        // The Vecs' heap buffers do not move when the Box does.
        host.managed.dl_tensor.data = host._bytes.as_mut_ptr() as *mut c_void;
        host.managed.dl_tensor.shape = host._shape.as_mut_ptr();
        host.managed.dl_tensor.strides = host._strides.as_mut_ptr();
        let raw = Box::into_raw(host);
        // SAFETY: raw is a valid, leaked HostBytes; `managed` is its first field's address.
        unsafe {
            (*raw).managed.manager_ctx = raw as *mut c_void;
            Ok(Self { raw: NonNull::new_unchecked(ptr::addr_of_mut!((*raw).managed)) })
        }
    }

    /// Takes ownership of a DLPack tensor from elsewhere (None for NULL).
    ///
    /// # Safety
    /// `raw` must be a valid DLManagedTensorVersioned that nobody else will release, whose memory stays
    /// valid until its deleter runs, whose deleter may be called from any thread, and whose memory is
    /// not written while Rust code reads it through this value.
    pub unsafe fn from_raw(raw: *mut sys::DLManagedTensorVersioned) -> Option<Self> {
        NonNull::new(raw).map(|raw| Self { raw })
    }

    /// Gives up ownership: the caller must call the deleter (or hand the tensor on).
    pub fn into_raw(self) -> *mut sys::DLManagedTensorVersioned {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    pub fn as_raw(&self) -> *mut sys::DLManagedTensorVersioned {
        self.raw.as_ptr()
    }

    pub fn tensor(&self) -> &sys::DLTensor {
        // SAFETY: self.raw is valid until Drop.
        unsafe { &(*self.raw.as_ptr()).dl_tensor }
    }

    pub fn flags(&self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.raw.as_ptr()).flags }
    }

    /// The export made a new buffer (DLPACK_FLAG_BITMASK_IS_COPIED) rather than a view.
    pub fn is_copy(&self) -> bool {
        self.flags() & sys::DLPACK_FLAG_BITMASK_IS_COPIED != 0
    }

    pub fn shape(&self) -> &[i64] {
        let t = self.tensor();
        if t.ndim <= 0 || t.shape.is_null() {
            return &[];
        }
        // SAFETY: DLPack: shape points to ndim values while the tensor lives.
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
    }

    /// The strides in elements (row-major ones when the producer left them NULL).
    pub fn strides(&self) -> Vec<i64> {
        let t = self.tensor();
        if !t.strides.is_null() && t.ndim > 0 {
            // SAFETY: DLPack: strides points to ndim values when not NULL.
            return unsafe { std::slice::from_raw_parts(t.strides, t.ndim as usize) }.to_vec();
        }
        row_major_strides(self.shape())
    }

    pub fn device(&self) -> sys::DLDevice {
        self.tensor().device
    }

    pub fn dtype(&self) -> sys::DLDataType {
        self.tensor().dtype
    }

    /// The address of the first element (data + byte_offset), for device memory.
    pub fn data_ptr(&self) -> *mut c_void {
        let t = self.tensor();
        (t.data as *mut u8).wrapping_add(t.byte_offset as usize) as *mut c_void
    }

    fn in_host_memory(&self) -> bool {
        matches!(self.device().device_type, DLDeviceType::CPU | DLDeviceType::CUDA_HOST)
    }

    fn element_count(&self) -> usize {
        self.shape().iter().product::<i64>().max(0) as usize
    }

    /// The bytes of a contiguous byte tensor in host memory; None for device memory, strided
    /// tensors or elements wider than a byte.
    pub fn as_host_bytes(&self) -> Option<&[u8]> {
        let contiguous = self.strides() == row_major_strides(self.shape());
        if !self.in_host_memory() || !contiguous || self.dtype().bits != 8 {
            return None;
        }
        let n = self.element_count();
        if n == 0 {
            return Some(&[]);
        }
        // SAFETY: host memory of n bytes from data_ptr, valid while self lives (DLPack contract).
        Some(unsafe { std::slice::from_raw_parts(self.data_ptr() as *const u8, n) })
    }

    /// The elements of a byte tensor in host memory in row-major order, read through its strides.
    pub fn to_host_vec(&self) -> Option<Vec<u8>> {
        if !self.in_host_memory() || self.dtype().bits != 8 {
            return None;
        }
        let (shape, strides) = (self.shape().to_vec(), self.strides());
        let base = self.data_ptr() as *const u8;
        let mut out = Vec::with_capacity(self.element_count());
        for index in 0..self.element_count() {
            let (mut rest, mut offset) = (index as i64, 0i64);
            for d in (0..shape.len()).rev() {
                offset += (rest % shape[d]) * strides[d];
                rest /= shape[d];
            }
            // SAFETY: offset addresses an element of the tensor, valid while self lives.
            out.push(unsafe { *base.offset(offset as isize) });
        }
        Some(out)
    }
}

fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        // SAFETY: we own the tensor; DLPack's contract is one deleter call.
        unsafe {
            if let Some(deleter) = (*self.raw.as_ptr()).deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

impl fmt::Debug for ManagedTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedTensor")
            .field("shape", &self.shape())
            .field("dtype", &self.dtype())
            .field("device", &self.device())
            .field("is_copy", &self.is_copy())
            .finish()
    }
}

/// Describes an MXFP8 tensor; [`build`](Self::build) validates it into a [`Tensor`].
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
        Self::new()
    }
}

impl TensorBuilder {
    pub fn new() -> Self {
        Self {
            format: Format::E4M3,
            layout: ScaleLayout::RowMajor,
            block: Block::B1x32,
            shape: None,
            rowwise: None,
            columnwise: None,
        }
    }
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }
    pub fn scale_layout(mut self, layout: ScaleLayout) -> Self {
        self.layout = layout;
        self
    }
    pub fn block(mut self, block: Block) -> Self {
        self.block = block;
        self
    }
    /// The logical shape, checked against the data (default: the data's shape).
    pub fn shape(mut self, shape: &[i64]) -> Self {
        self.shape = Some(shape.to_vec());
        self
    }
    pub fn rowwise(mut self, data: ManagedTensor, scale_inv: ManagedTensor) -> Self {
        self.rowwise = Some((data, scale_inv));
        self
    }
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
            format: format_to_sys(self.format),
            scale_layout: match self.layout {
                ScaleLayout::RowMajor => sys::MXFP8_SCALE_LAYOUT_ROW_MAJOR,
                ScaleLayout::GemmSwizzled => sys::MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED,
            },
            ndim: self.shape.as_ref().map_or(0, |s| s.len() as i32),
            shape: self.shape.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            rowwise_data,
            rowwise_scale_inv,
            columnwise_data,
            columnwise_scale_inv,
            block: block_to_sys(self.block),
            ..Default::default()
        };
        let mut out = ptr::null_mut();
        // SAFETY: desc and its pointers are valid for the call; on success the library took the
        // managed tensors, so they must not be dropped here.
        check(unsafe { sys::mxfp8_tensor_create(&desc, &mut out) })?;
        for pair in [self.rowwise, self.columnwise].into_iter().flatten() {
            pair.0.into_raw();
            pair.1.into_raw();
        }
        Ok(Tensor { raw: NonNull::new(out).expect("mxfp8_tensor_create returned OK and NULL") })
    }
}

/// A validated MXFP8 tensor (the C `mxfp8_tensor` handle).
pub struct Tensor {
    raw: NonNull<sys::mxfp8_tensor>,
}

// SAFETY: the C handle is immutable after creation, its reference count is atomic, and mxfp8.h
// documents that any number of threads may export from one handle at once.
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor").field("handle", &self.raw).finish()
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { sys::mxfp8_tensor_release(self.raw.as_ptr()) }
    }
}

/// Options of an export; `Default` matches `MXFP8_EXPORT_OPTIONS_INIT`.
#[derive(Copy, Clone, Debug)]
pub struct ExportOptions {
    pub direction: Direction,
    /// Values as uint8 instead of the float8 dtype.
    pub values_as_uint8: bool,
    /// Scales as float8_e8m0fnu instead of uint8.
    pub scales_as_e8m0: bool,
    /// Padded row-major scales as a strided view instead of a contiguous copy.
    pub strided_padded_scales: bool,
    /// One scale per 32 x 32 block, (ceil(M/32), ceil(K/32)), for tensors built with [`Block::B32x32`].
    pub block_scales: bool,
    /// The cudaStream_t copies of CUDA memory run on (NULL: legacy default stream).
    pub stream: *mut c_void,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            direction: Direction::Rowwise,
            values_as_uint8: false,
            scales_as_e8m0: false,
            strided_padded_scales: false,
            block_scales: false,
            stream: ptr::null_mut(),
        }
    }
}

/// The values (always a view) and compact scales (a view or a copy) of one direction.
#[derive(Debug)]
pub struct Components {
    pub values: ManagedTensor,
    pub scales: ManagedTensor,
}

impl Tensor {
    /// Exports the values and compact scales of `options.direction`.
    pub fn export(&self, options: &ExportOptions) -> Result<Components, Error> {
        let o = sys::mxfp8_export_options {
            direction: direction_to_sys(options.direction),
            values_dtype: if options.values_as_uint8 { sys::MXFP8_VALUES_UINT8 } else { sys::MXFP8_VALUES_FP8 },
            scales_dtype: if options.scales_as_e8m0 { sys::MXFP8_SCALES_E8M0 } else { sys::MXFP8_SCALES_UINT8 },
            padded_scales: if options.strided_padded_scales {
                sys::MXFP8_PADDED_SCALES_STRIDED_VIEW
            } else {
                sys::MXFP8_PADDED_SCALES_COPY
            },
            stream: options.stream,
            scales_granularity: if options.block_scales { sys::MXFP8_SCALES_PER_32X32 } else { sys::MXFP8_SCALES_PER_32 },
            ..Default::default()
        };
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

fn host_matrix(data: *const u8, shape: &mut [i64; 2]) -> sys::DLTensor {
    sys::DLTensor {
        data: data as *mut c_void,
        device: sys::DLDevice { device_type: DLDeviceType::CPU, device_id: 0 },
        ndim: 2,
        dtype: sys::DLDataType { code: DLDataTypeCode::UINT, bits: 8, lanes: 1 },
        shape: shape.as_mut_ptr(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    }
}

fn swizzled_len(rows: usize, cols: usize) -> usize {
    rows.div_ceil(128) * 128 * (cols.div_ceil(4) * 4)
}

/// The cuBLAS 128x4 layout of a `rows x cols` row-major scale matrix in host memory (padding zero).
pub fn swizzle_scales_host(compact: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>, Error> {
    if compact.len() != rows * cols {
        return Err(invalid(format!("{} scales cannot be a {rows} x {cols} matrix", compact.len())));
    }
    let mut out = vec![0u8; swizzled_len(rows, cols)];
    let (mut cshape, mut sshape) = ([rows as i64, cols as i64], [1, out.len() as i64]);
    let c = host_matrix(compact.as_ptr(), &mut cshape);
    let mut s = host_matrix(out.as_mut_ptr(), &mut sshape);
    // SAFETY: both tensors describe live host buffers of the sizes given; the call is synchronous.
    check(unsafe { sys::mxfp8_swizzle_scales(&c, &mut s, ptr::null_mut()) })?;
    Ok(out)
}

/// The row-major `rows x cols` scale matrix held in a swizzled host buffer.
pub fn unswizzle_scales_host(swizzled: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>, Error> {
    let mut out = vec![0u8; rows * cols];
    let (mut cshape, mut sshape) = ([rows as i64, cols as i64], [1, swizzled.len() as i64]);
    let s = host_matrix(swizzled.as_ptr(), &mut sshape);
    let mut c = host_matrix(out.as_mut_ptr(), &mut cshape);
    // SAFETY: as above; the library checks that the swizzled size matches rows x cols.
    check(unsafe { sys::mxfp8_unswizzle_scales(&s, &mut c, ptr::null_mut()) })?;
    Ok(out)
}
