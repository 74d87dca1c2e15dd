//! Owned DLPack tensors.
use std::ffi::c_void;
use std::fmt;
use std::ptr::{self, NonNull};

use crate::error::{invalid, Error};
use crate::memory::{numel, row_major_strides, Element, HOST};
use crate::sys::{self, DLDeviceType};

/// An owned DLPack tensor (`DLManagedTensorVersioned`). Dropping it calls its deleter exactly once.
pub struct ManagedTensor {
    raw: NonNull<sys::DLManagedTensorVersioned>,
}

// SAFETY: a ManagedTensor is only read through &self, and its deleter is called once, from whichever
// thread drops it. The deleters this crate and libmxfp8 install are thread-safe (they free memory and
// drop an atomic reference count); `from_raw` makes its caller promise the same of foreign ones.
unsafe impl Send for ManagedTensor {}
unsafe impl Sync for ManagedTensor {}

/// Host memory owned by a ManagedTensor made in Rust: the elements kept in a Vec of their own type, so
/// that the buffer has their alignment.
struct HostTensor<T> {
    managed: sys::DLManagedTensorVersioned,
    elements: Vec<T>,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

unsafe extern "C" fn drop_host_tensor<T>(self_: *mut sys::DLManagedTensorVersioned) {
    // SAFETY: manager_ctx is the Box leaked in from_host, and DLPack calls the deleter once.
    drop(unsafe { Box::from_raw((*self_).manager_ctx as *mut HostTensor<T>) });
}

impl ManagedTensor {
    /// A host tensor of `shape` over `elements` (row-major): uint8 bytes, or float32 values (e.g. an
    /// NVFP4 amax); fails if the sizes disagree.
    pub fn from_host<T: Element>(elements: Vec<T>, shape: &[i64]) -> Result<Self, Error> {
        if numel(shape) != Some(elements.len()) {
            return Err(invalid(format!("{} {} cannot have shape {:?}", elements.len(), T::NAME, shape)));
        }
        let mut host = Box::new(HostTensor {
            managed: sys::DLManagedTensorVersioned {
                version: sys::DLPackVersion { major: 1, minor: 1 },
                manager_ctx: ptr::null_mut(),
                deleter: Some(drop_host_tensor::<T>),
                flags: 0,
                dl_tensor: sys::DLTensor {
                    data: ptr::null_mut(),
                    device: HOST,
                    ndim: shape.len() as i32,
                    dtype: T::DTYPE.dl(),
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            elements,
            shape: shape.to_vec(),
            strides: row_major_strides(shape),
        });
        // The Vecs' heap buffers do not move when the Box does.
        host.managed.dl_tensor.data = host.elements.as_mut_ptr() as *mut c_void;
        host.managed.dl_tensor.shape = host.shape.as_mut_ptr();
        host.managed.dl_tensor.strides = host.strides.as_mut_ptr();
        let raw = Box::into_raw(host);
        // SAFETY: raw is a valid, leaked HostTensor; `managed` is one of its fields.
        unsafe {
            (*raw).managed.manager_ctx = raw as *mut c_void;
            Ok(Self { raw: NonNull::new_unchecked(ptr::addr_of_mut!((*raw).managed)) })
        }
    }

    /// Takes ownership of a DLPack tensor from elsewhere (None for NULL). This is how device memory (a
    /// framework's tensor, e.g. through DLPack's exchange API) enters the safe API.
    ///
    /// # Safety
    /// `raw` must be a valid DLManagedTensorVersioned that nobody else will release, whose memory stays
    /// valid until its deleter runs (a NULL deleter: for as long as this value and every tensor, plan and
    /// view made from it live), whose deleter may be called from any thread, and whose memory is not
    /// written while Rust code reads it through this value or the library reads it. CUDA work is queued
    /// and not waited for, and dropping the last owner (this value, a [`Tensor`](crate::Tensor) built
    /// from it, its views, a [`Plan`](crate::Plan)) runs the deleter at once: device memory must stay
    /// valid until the work queued on it before that has completed (a stream-ordered free, as a
    /// framework's caching allocator does, or a synchronize before the last drop).
    pub unsafe fn from_raw(raw: *mut sys::DLManagedTensorVersioned) -> Option<Self> {
        NonNull::new(raw).map(|raw| Self { raw })
    }
    /// Gives up ownership: the caller must call the deleter (or hand the tensor on).
    pub fn into_raw(self) -> *mut sys::DLManagedTensorVersioned {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }
    /// The managed tensor, still owned by `self`.
    pub fn as_raw(&self) -> *mut sys::DLManagedTensorVersioned {
        self.raw.as_ptr()
    }
    /// The DLTensor inside.
    pub fn tensor(&self) -> &sys::DLTensor {
        // SAFETY: self.raw is valid until Drop.
        unsafe { &(*self.raw.as_ptr()).dl_tensor }
    }
    /// The `DLPACK_FLAG_BITMASK_*` flags.
    pub fn flags(&self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.raw.as_ptr()).flags }
    }
    /// The export made a new buffer (DLPACK_FLAG_BITMASK_IS_COPIED) rather than a view.
    pub fn is_copy(&self) -> bool {
        self.flags() & sys::DLPACK_FLAG_BITMASK_IS_COPIED != 0
    }
    /// The shape.
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

    /// Where the memory lives.
    pub fn device(&self) -> sys::DLDevice {
        self.tensor().device
    }
    /// The element type.
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
        numel(self.shape()).unwrap_or(0)
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

    /// The elements of a tensor in host memory in row-major order, read through its strides: `u8` for
    /// any one-byte elements (FP8 values, scales), `f32` for float32; None for device memory or another
    /// dtype.
    pub fn to_host<T: Element>(&self) -> Option<Vec<T>> {
        if !self.in_host_memory() || !T::reads(self.dtype()) {
            return None;
        }
        // SAFETY: a tensor in host memory whose elements are `T`s.
        Some(unsafe { self.gather::<T>() })
    }

    /// Every element in row-major order, read through the strides.
    ///
    /// # Safety
    /// The tensor is in host memory and its elements are `T`s.
    unsafe fn gather<T: Copy>(&self) -> Vec<T> {
        let (shape, strides) = (self.shape().to_vec(), self.strides());
        let base = self.data_ptr() as *const T;
        let mut out = Vec::with_capacity(self.element_count());
        for index in 0..self.element_count() {
            let (mut rest, mut offset) = (index as i64, 0i64);
            for d in (0..shape.len()).rev() {
                offset += (rest % shape[d]) * strides[d];
                rest /= shape[d];
            }
            // SAFETY: offset addresses an element of the tensor, valid while self lives (DLPack's
            // contract); read_unaligned assumes nothing of the producer's alignment.
            out.push(base.offset(offset as isize).read_unaligned());
        }
        out
    }
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
