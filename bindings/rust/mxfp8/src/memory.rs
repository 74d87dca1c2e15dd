//! Memory the library reads or writes in place: one buffer type ([`Buf`] to read, [`BufMut`] to write)
//! over host slices and device memory, which every call takes instead of host/device twins.
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;

use crate::error::{invalid, Error};
use crate::sys::{self, DLDataTypeCode, DLDeviceType};

/// `len` bytes of device memory (CUDA, or any device DLPack names) that a call reads or writes in place.
///
/// Rust cannot check device memory, so the constructor is `unsafe` and the promise made there is what
/// makes the calls that take a `DeviceBytes` (as a [`Buf`] or [`BufMut`]) safe; [`Transfer`](crate::Transfer)'s
/// example shows the same calls on host slices.
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
    /// Device memory at `ptr` on `device` (CUDA memory of GPU `i`: `DLDevice { device_type:
    /// DLDeviceType::CUDA, device_id: i }`).
    ///
    /// # Safety
    /// `ptr` must point to `len` bytes allocated on `device` (for kDLCUDA, memory of that GPU) that
    /// stay allocated, and that nothing else reads or writes unordered with this crate's use of them,
    /// until every piece of work that a call taking this value queued on its stream has completed (for a
    /// [`Plan`](crate::Plan), until its last run has completed). "This value" is every copy of it (it is
    /// `Copy`) and every part of it a [`Buf::as_device`] gives, which safe code may pass to any call,
    /// as a [`Buf`] or a [`BufMut`]: memory that other code reads meanwhile may be shared only while no
    /// copy of this value is passed as a `BufMut` (a call that only reads it may share it with readers).
    pub unsafe fn new(ptr: *mut c_void, len: usize, device: sys::DLDevice) -> Self {
        Self { ptr, len, device }
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

/// The element type of a [`Buf`] or [`BufMut`], as the library reads it (DLPack's dtype).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// Bytes: FP8 values, scales, buckets.
    U8,
    /// float32.
    F32,
    /// bfloat16.
    Bf16,
    /// IEEE float16.
    F16,
}

impl Dtype {
    pub(crate) fn dl(self) -> sys::DLDataType {
        let (code, bits) = match self {
            Self::U8 => (DLDataTypeCode::UINT, 8),
            Self::F32 => (DLDataTypeCode::FLOAT, 32),
            Self::Bf16 => (DLDataTypeCode::BFLOAT, 16),
            Self::F16 => (DLDataTypeCode::FLOAT, 16),
        };
        sys::DLDataType { code, bits, lanes: 1 }
    }
}

/// A buffer as a call describes it to the library: address, elements, device, element type, and whether
/// it is a borrowed host slice (else DeviceBytes, whose memory Rust code never reads).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Raw {
    pub ptr: *mut c_void,
    pub len: usize,
    pub device: sys::DLDevice,
    pub dtype: Dtype,
    pub slice: bool,
}

pub(crate) const HOST: sys::DLDevice = sys::DLDevice { device_type: DLDeviceType::CPU, device_id: 0 };

impl Raw {
    fn host(ptr: *const c_void, len: usize, dtype: Dtype) -> Self {
        Self { ptr: ptr as *mut c_void, len, device: HOST, dtype, slice: true }
    }

    fn device(bytes: DeviceBytes, dtype: Dtype) -> Result<Self, Error> {
        let size = dtype.dl().bits as usize / 8;
        if bytes.len % size != 0 {
            return Err(invalid(format!("{} bytes of device memory are not a whole number of {dtype:?} elements", bytes.len)));
        }
        Ok(Self { ptr: bytes.ptr, len: bytes.len / size, device: bytes.device, dtype, slice: false })
    }

    /// A DLTensor over the buffer, of `shape` (None: one dimension of every element).
    pub fn dl(&self, shape: Option<&[i64]>) -> Dl {
        let mut shape = shape.map_or_else(|| vec![self.len as i64], <[i64]>::to_vec);
        let t = sys::DLTensor {
            data: self.ptr,
            device: self.device,
            ndim: shape.len() as i32,
            dtype: self.dtype.dl(),
            shape: if shape.is_empty() { ptr::null_mut() } else { shape.as_mut_ptr() },
            strides: ptr::null_mut(),
            byte_offset: 0,
        };
        Dl { t, _shape: shape }
    }

    /// A DLTensor of `shape` over the buffer, after checking it holds exactly that many elements.
    pub fn shaped(&self, shape: &[i64], what: &str) -> Result<Dl, Error> {
        if numel(shape) != Some(self.len) {
            return Err(invalid(format!("{what}: {} elements cannot have the shape {shape:?}", self.len)));
        }
        Ok(self.dl(Some(shape)))
    }
}

/// A DLTensor and the shape array it points into (a Vec, whose heap buffer stays put when this moves).
pub(crate) struct Dl {
    pub t: sys::DLTensor,
    _shape: Vec<i64>,
}

impl Dl {
    pub fn ptr(&mut self) -> *mut sys::DLTensor {
        &mut self.t
    }
}

/// Memory a call only reads: a host slice (`&[u8]`, `&[f32]`, or bfloat16 / float16 bits) or
/// [`DeviceBytes`]. Made with `From` (`Buf::from(&values[..])`) or the constructors below.
#[derive(Copy, Clone, Debug)]
pub struct Buf<'a> {
    pub(crate) raw: Raw,
    _borrow: PhantomData<&'a [u8]>,
}

/// Memory a call writes: a host slice exclusively borrowed (`&mut [u8]`, `&mut [f32]`, bfloat16 bits)
/// or [`DeviceBytes`]. Made with `From` (`BufMut::from(&mut out[..])`) or the constructors below.
#[derive(Debug)]
pub struct BufMut<'a> {
    pub(crate) raw: Raw,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a Buf is a shared borrow of host memory (as `&[u8]`, Send and Sync) or DeviceBytes (Send and
// Sync); a BufMut an exclusive borrow (as `&mut [u8]`), written only by the library, during a call that
// takes it or by a Plan that carries its lifetime.
unsafe impl Send for Buf<'_> {}
unsafe impl Sync for Buf<'_> {}
unsafe impl Send for BufMut<'_> {}
unsafe impl Sync for BufMut<'_> {}

/// An element type of host memory that [`Buf`], [`BufMut`] and [`ManagedTensor`](crate::ManagedTensor)
/// take as a slice or a `Vec` of its own type: `u8` (FP8 values, scales, buckets) and `f32`. Sealed:
/// bfloat16 and float16 bits are `u16`s, which say neither, so they come through [`Buf::bf16`],
/// [`Buf::f16`] and [`BufMut::bf16`].
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The dtype the library reads it as.
    const DTYPE: Dtype;
    /// What a count of them is called in an error ("bytes").
    const NAME: &'static str;
    /// Whether a tensor of `dtype` can be read as these elements (`u8`: any one-byte element).
    fn reads(dtype: sys::DLDataType) -> bool;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for f32 {}
}

impl Element for u8 {
    const DTYPE: Dtype = Dtype::U8;
    const NAME: &'static str = "bytes";
    fn reads(dtype: sys::DLDataType) -> bool {
        dtype.bits == 8
    }
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const NAME: &'static str = "float32 values";
    fn reads(dtype: sys::DLDataType) -> bool {
        dtype == Dtype::F32.dl()
    }
}

impl<'a, T: Element> From<&'a [T]> for Buf<'a> {
    fn from(s: &'a [T]) -> Self {
        Buf { raw: Raw::host(s.as_ptr() as *const c_void, s.len(), T::DTYPE), _borrow: PhantomData }
    }
}
impl<'a, T: Element> From<&'a Vec<T>> for Buf<'a> {
    fn from(s: &'a Vec<T>) -> Self {
        s.as_slice().into()
    }
}
impl<'a, T: Element, const N: usize> From<&'a [T; N]> for Buf<'a> {
    fn from(s: &'a [T; N]) -> Self {
        s.as_slice().into()
    }
}
impl<'a, T: Element> From<&'a mut [T]> for BufMut<'a> {
    fn from(s: &'a mut [T]) -> Self {
        BufMut { raw: Raw::host(s.as_mut_ptr() as *const c_void, s.len(), T::DTYPE), _borrow: PhantomData }
    }
}
impl<'a, T: Element> From<&'a mut Vec<T>> for BufMut<'a> {
    fn from(s: &'a mut Vec<T>) -> Self {
        s.as_mut_slice().into()
    }
}
impl<'a, T: Element, const N: usize> From<&'a mut [T; N]> for BufMut<'a> {
    fn from(s: &'a mut [T; N]) -> Self {
        s.as_mut_slice().into()
    }
}

impl From<DeviceBytes> for Buf<'static> {
    /// Device bytes as uint8.
    fn from(bytes: DeviceBytes) -> Self {
        Buf { raw: Raw::device(bytes, Dtype::U8).expect("bytes are whole uint8 elements"), _borrow: PhantomData }
    }
}

impl From<DeviceBytes> for BufMut<'static> {
    /// Device bytes as uint8.
    fn from(bytes: DeviceBytes) -> Self {
        BufMut { raw: Raw::device(bytes, Dtype::U8).expect("bytes are whole uint8 elements"), _borrow: PhantomData }
    }
}

impl<'a> Buf<'a> {
    /// bfloat16 values, as their bits.
    pub fn bf16(bits: &'a [u16]) -> Self {
        Buf { raw: Raw::host(bits.as_ptr() as *const c_void, bits.len(), Dtype::Bf16), _borrow: PhantomData }
    }
    /// IEEE float16 values, as their bits.
    pub fn f16(bits: &'a [u16]) -> Self {
        Buf { raw: Raw::host(bits.as_ptr() as *const c_void, bits.len(), Dtype::F16), _borrow: PhantomData }
    }
    /// Device memory holding elements of `dtype`; fails when its bytes are not a whole number of them.
    pub fn device(bytes: DeviceBytes, dtype: Dtype) -> Result<Buf<'static>, Error> {
        Ok(Buf { raw: Raw::device(bytes, dtype)?, _borrow: PhantomData })
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.raw.len
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }
    /// The bytes of a buffer made from a host slice of bytes (or a part of one); None for [`DeviceBytes`]
    /// (even of host memory: its promise covers the library's use, not a Rust borrow) or wider elements.
    pub fn as_host(&self) -> Option<&'a [u8]> {
        if !self.raw.slice || self.raw.dtype != Dtype::U8 {
            return None;
        }
        if self.raw.len == 0 {
            return Some(&[]);
        }
        // SAFETY: made from a `&'a [u8]`, or a sub-range of one that the library checked.
        Some(unsafe { std::slice::from_raw_parts(self.raw.ptr as *const u8, self.raw.len) })
    }
    /// The memory of a buffer made from [`DeviceBytes`] (or a part of one); None for a host slice.
    pub fn as_device(&self) -> Option<DeviceBytes> {
        let r = &self.raw;
        let bytes = r.len * (r.dtype.dl().bits as usize / 8);
        (!r.slice).then_some(DeviceBytes { ptr: r.ptr, len: bytes, device: r.device })
    }
    /// Bytes `offset..offset + len` of a uint8 buffer, for a range the library has checked lies inside it.
    pub(crate) fn sub(&self, offset: u64, len: u64) -> Buf<'a> {
        let ptr = (self.raw.ptr as *mut u8).wrapping_add(offset as usize) as *mut c_void;
        Buf { raw: Raw { ptr, len: len as usize, ..self.raw }, _borrow: PhantomData }
    }
}

impl<'a> BufMut<'a> {
    /// bfloat16 values, as their bits.
    pub fn bf16(bits: &'a mut [u16]) -> Self {
        BufMut { raw: Raw::host(bits.as_mut_ptr() as *const c_void, bits.len(), Dtype::Bf16), _borrow: PhantomData }
    }
    /// Device memory holding elements of `dtype`; fails when its bytes are not a whole number of them.
    pub fn device(bytes: DeviceBytes, dtype: Dtype) -> Result<BufMut<'static>, Error> {
        Ok(BufMut { raw: Raw::device(bytes, dtype)?, _borrow: PhantomData })
    }
}

/// The product of `shape`, or None when a dimension is negative or the product overflows (a shape with a
/// 0 has no elements, whatever its other dimensions multiply to, in any order).
pub(crate) fn numel(shape: &[i64]) -> Option<usize> {
    if shape.iter().any(|&d| d < 0) {
        return None;
    }
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1usize, |n, &d| usize::try_from(d).ok().and_then(|d| n.checked_mul(d)))
}

/// The row-major strides of `shape`, saturating: exact for every shape whose elements fit, and without
/// overflow for a shape of no elements whose other dimensions multiply past i64 (any strides describe it).
pub(crate) fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}
