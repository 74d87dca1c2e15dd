//! One scale matrix between caller-owned buffers: the cuBLAS 128x4 swizzle and its inverse.
use std::ffi::c_void;

use crate::error::{check, invalid, Error};
use crate::memory::{dl_tensor, DeviceBytes, HOST, UINT8};
use crate::options::Stream;
use crate::sys;

/// The size of the swizzled buffer of a `rows x cols` scale matrix: `roundup(rows, 128) * roundup(cols, 4)`.
pub fn swizzled_len(rows: usize, cols: usize) -> usize {
    rows.div_ceil(128) * 128 * (cols.div_ceil(4) * 4)
}

fn matrix_len(rows: usize, cols: usize, len: usize, what: &str) -> Result<(), Error> {
    match rows.checked_mul(cols) {
        Some(n) if n == len => Ok(()),
        _ => Err(invalid(format!("{what}: {len} scales cannot be a {rows} x {cols} matrix"))),
    }
}

/// The cuBLAS 128x4 layout of a `rows x cols` row-major scale matrix in host memory (padding zero).
pub fn swizzle_scales_host(compact: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>, Error> {
    let mut out = vec![0u8; swizzled_len(rows, cols)];
    swizzle_scales_into(compact, rows, cols, &mut out)?;
    Ok(out)
}

/// Swizzles `compact` (`rows x cols`, row-major) into `swizzled`, which must hold exactly
/// [`swizzled_len`] bytes; every byte is written, padding as zero.
pub fn swizzle_scales_into(compact: &[u8], rows: usize, cols: usize, swizzled: &mut [u8]) -> Result<(), Error> {
    matrix_len(rows, cols, compact.len(), "compact")?;
    let (mut cshape, mut sshape) = ([rows as i64, cols as i64], [swizzled.len() as i64]);
    let c = dl_tensor(compact.as_ptr() as *const c_void, HOST, UINT8, &mut cshape);
    let mut s = dl_tensor(swizzled.as_mut_ptr() as *const c_void, HOST, UINT8, &mut sshape);
    // SAFETY: both tensors describe live host slices of the sizes given; the call is synchronous.
    check(unsafe { sys::mxfp8_swizzle_scales(&c, &mut s, std::ptr::null_mut()) })
}

/// The row-major `rows x cols` scale matrix held in a swizzled host buffer.
pub fn unswizzle_scales_host(swizzled: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>, Error> {
    let mut out = vec![0u8; rows.checked_mul(cols).ok_or_else(|| invalid("rows x cols overflows"))?];
    unswizzle_scales_into(swizzled, rows, cols, &mut out)?;
    Ok(out)
}

/// Unswizzles `swizzled` (exactly [`swizzled_len`] bytes) into `compact` (`rows x cols`, row-major).
pub fn unswizzle_scales_into(swizzled: &[u8], rows: usize, cols: usize, compact: &mut [u8]) -> Result<(), Error> {
    matrix_len(rows, cols, compact.len(), "compact")?;
    let (mut cshape, mut sshape) = ([rows as i64, cols as i64], [swizzled.len() as i64]);
    let s = dl_tensor(swizzled.as_ptr() as *const c_void, HOST, UINT8, &mut sshape);
    let mut c = dl_tensor(compact.as_mut_ptr() as *const c_void, HOST, UINT8, &mut cshape);
    // SAFETY: as above; the library checks the swizzled size against rows x cols.
    check(unsafe { sys::mxfp8_unswizzle_scales(&s, &mut c, std::ptr::null_mut()) })
}

/// [`swizzle_scales_into`] on device memory, queued on `stream`; the call does not wait.
pub fn swizzle_scales_device(compact: DeviceBytes, rows: usize, cols: usize, swizzled: DeviceBytes, stream: Stream) -> Result<(), Error> {
    matrix_len(rows, cols, compact.len(), "compact")?;
    let (mut cshape, mut sshape) = ([rows as i64, cols as i64], [swizzled.len() as i64]);
    let c = dl_tensor(compact.as_ptr(), compact.device(), UINT8, &mut cshape);
    let mut s = dl_tensor(swizzled.as_ptr(), swizzled.device(), UINT8, &mut sshape);
    // SAFETY: DeviceBytes' and Stream's constructors promised the memory and the stream.
    check(unsafe { sys::mxfp8_swizzle_scales(&c, &mut s, stream.as_raw()) })
}

/// [`unswizzle_scales_into`] on device memory, queued on `stream`; the call does not wait.
pub fn unswizzle_scales_device(swizzled: DeviceBytes, rows: usize, cols: usize, compact: DeviceBytes, stream: Stream) -> Result<(), Error> {
    matrix_len(rows, cols, compact.len(), "compact")?;
    let (mut cshape, mut sshape) = ([rows as i64, cols as i64], [swizzled.len() as i64]);
    let s = dl_tensor(swizzled.as_ptr(), swizzled.device(), UINT8, &mut sshape);
    let mut c = dl_tensor(compact.as_ptr(), compact.device(), UINT8, &mut cshape);
    // SAFETY: as above.
    check(unsafe { sys::mxfp8_unswizzle_scales(&s, &mut c, stream.as_raw()) })
}
