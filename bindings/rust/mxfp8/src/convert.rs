//! Scale layouts: the bytes of a layout, and the cuBLAS 128x4 swizzle of one scale matrix and its inverse.
use crate::error::{check, invalid, Error};
use crate::memory::{Buf, BufMut};
use crate::options::{Direction, Layout, Stream};
use crate::sys;

/// The bytes the scales of an `rows x cols` scale matrix S take in `layout` (`mxfp8_layout_bytes`):
/// what an engine allocates before a convert or a transfer. `direction` says whether S is rowwise
/// (`(M, ceil(K/32))`) or columnwise (`(ceil(M/32), K)`, whose 128x4 layout swizzles S^T).
///
/// ```
/// # use mxfp8::{layout_bytes, Direction, Layout};
/// assert_eq!(layout_bytes(Layout::Cutlass128x4, Direction::Rowwise, 100, 3), Ok(128 * 4));
/// ```
pub fn layout_bytes(layout: Layout, direction: Direction, rows: i64, cols: i64) -> Result<u64, Error> {
    let mut bytes = 0i64;
    // SAFETY: plain values in, one int64 out, written only on success.
    check(unsafe { sys::mxfp8_layout_bytes(layout.to_raw(), direction.to_raw(), rows, cols, &mut bytes) })?;
    Ok(bytes as u64)
}

/// Swizzles `compact` (`rows x cols`, row-major) into the cuBLAS 128x4 layout (`mxfp8_swizzle_scales`):
/// `swizzled` holds exactly [`layout_bytes`]`(Cutlass128x4, Rowwise, rows, cols)` bytes; every byte is
/// written, padding as zero. Device memory: queued on `stream`.
pub fn swizzle_scales<'a, 'b>(compact: impl Into<Buf<'a>>, rows: usize, cols: usize, swizzled: impl Into<BufMut<'b>>, stream: Stream) -> Result<(), Error> {
    let mut c = compact.into().raw.shaped(&matrix(rows, cols)?, "compact")?;
    let mut s = swizzled.into().raw.dl(None);
    // SAFETY: the buffers are borrowed (host) or promised (DeviceBytes) for the work; `c` is its size.
    check(unsafe { sys::mxfp8_swizzle_scales(c.ptr(), s.ptr(), stream.as_raw()) })
}

/// The inverse (`mxfp8_unswizzle_scales`): the `rows x cols` row-major matrix held in `swizzled`.
pub fn unswizzle_scales<'a, 'b>(swizzled: impl Into<Buf<'a>>, rows: usize, cols: usize, compact: impl Into<BufMut<'b>>, stream: Stream) -> Result<(), Error> {
    let mut s = swizzled.into().raw.dl(None);
    let mut c = compact.into().raw.shaped(&matrix(rows, cols)?, "compact")?;
    // SAFETY: as in swizzle_scales.
    check(unsafe { sys::mxfp8_unswizzle_scales(s.ptr(), c.ptr(), stream.as_raw()) })
}

/// `[rows, cols]` as the library's int64 shape; a count past it is refused as itself (not wrapped negative).
fn matrix(rows: usize, cols: usize) -> Result<[i64; 2], Error> {
    let dim = |n: usize, what: &str| i64::try_from(n).map_err(|_| invalid(format!("{what} is {n}, past the largest shape the library takes (i64)")));
    Ok([dim(rows, "rows")?, dim(cols, "cols")?])
}
