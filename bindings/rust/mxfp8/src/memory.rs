//! Memory the library reads or writes in place: host slices, and device memory behind an unsafe promise.
use std::ffi::c_void;
use std::ptr;

use crate::sys::{self, DLDataTypeCode, DLDeviceType};

/// `len` bytes of device memory (CUDA, or any device DLPack names) that a call reads or writes in place.
///
/// Rust cannot check device memory, so the constructor is `unsafe` and the promise made there is what
/// makes the calls that take a `DeviceBytes` safe.
///
/// ```no_run
/// # use std::ffi::c_void;
/// # use mxfp8::{BucketPlan, DeviceBytes, ExportOptions, Stream, Tensor};
/// # fn send(weights: &[&Tensor], bucket_ptr: *mut c_void, stream_ptr: *mut c_void) -> Result<(), mxfp8::Error> {
/// // `bucket_ptr`: a cudaMalloc'ed buffer on GPU 0 (e.g. one registered for CUDA IPC), `stream_ptr`
/// // the cudaStream_t the framework runs on.
/// let stream = unsafe { Stream::from_raw(stream_ptr) };
/// let plan = BucketPlan::new(weights, &ExportOptions::new().stream(stream), 256)?;
/// let bucket = unsafe { DeviceBytes::cuda(bucket_ptr, plan.total_bytes() as usize, 0) };
/// plan.fill_device(bucket)?; // one launch, queued on `stream`
/// # Ok(()) }
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeviceBytes {
    ptr: *mut c_void,
    len: usize,
    device: sys::DLDevice,
}

// SAFETY: a DeviceBytes is an address and a length, never dereferenced by Rust; the constructor's caller
// promised the memory stays valid for the work queued on it, from whichever thread queues it.
unsafe impl Send for DeviceBytes {}
unsafe impl Sync for DeviceBytes {}

impl DeviceBytes {
    /// Device memory at `ptr` on `device`.
    ///
    /// # Safety
    /// `ptr` must point to `len` bytes allocated on `device` (for kDLCUDA, memory of that GPU) that
    /// stay allocated, and that nothing else reads or writes unordered with this crate's use of them,
    /// until every piece of work that a call taking this value queued on its stream has completed. Memory
    /// a call only reads (an input) may be shared with other readers.
    pub unsafe fn new(ptr: *mut c_void, len: usize, device: sys::DLDevice) -> Self {
        Self { ptr, len, device }
    }

    /// `len` bytes of CUDA device memory on GPU `device_id`.
    ///
    /// # Safety
    /// As [`DeviceBytes::new`] with `device` = `(kDLCUDA, device_id)`.
    pub unsafe fn cuda(ptr: *mut c_void, len: usize, device_id: i32) -> Self {
        Self { ptr, len, device: sys::DLDevice { device_type: DLDeviceType::CUDA, device_id } }
    }

    /// The address.
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the memory lives.
    pub fn device(&self) -> sys::DLDevice {
        self.device
    }
}

pub(crate) const UINT8: sys::DLDataType = sys::DLDataType { code: DLDataTypeCode::UINT, bits: 8, lanes: 1 };
pub(crate) const FLOAT32: sys::DLDataType = sys::DLDataType { code: DLDataTypeCode::FLOAT, bits: 32, lanes: 1 };
pub(crate) const HOST: sys::DLDevice = sys::DLDevice { device_type: DLDeviceType::CPU, device_id: 0 };

/// A DLTensor over memory whose shape array the caller keeps alive for as long as the DLTensor is used.
pub(crate) fn dl_tensor(data: *const c_void, device: sys::DLDevice, dtype: sys::DLDataType, shape: &mut [i64]) -> sys::DLTensor {
    sys::DLTensor {
        data: data as *mut c_void,
        device,
        ndim: shape.len() as i32,
        dtype,
        shape: if shape.is_empty() { ptr::null_mut() } else { shape.as_mut_ptr() },
        strides: ptr::null_mut(),
        byte_offset: 0,
    }
}

/// Runs `f` on a one-dimensional uint8 DLTensor over `len` bytes at `data` on `device` (a bucket).
pub(crate) fn with_byte_tensor<R>(data: *const c_void, len: usize, device: sys::DLDevice, f: impl FnOnce(&mut sys::DLTensor) -> R) -> R {
    let mut shape = [len as i64];
    let mut t = dl_tensor(data, device, UINT8, &mut shape);
    f(&mut t)
}

/// The product of `shape`, or None when a dimension is negative or the product overflows.
pub(crate) fn numel(shape: &[i64]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| usize::try_from(d).ok().and_then(|d| n.checked_mul(d)))
}

pub(crate) fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}
