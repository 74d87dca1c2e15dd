//! The receiver's import on host memory: a bucket (with its manifest) or tensors written into the
//! engine's own parameter buffers, scales compact or in the cuBLAS 128x4 layout.

use core::ffi::c_void;

use crate::bucket::ManifestEntry;
use crate::error::{check, invalid, Error};
use crate::memory::{dl_tensor, HOST, UINT8};
use crate::options::{Direction, ExportOptions, Layout};
use crate::sys;
use crate::tensor::Tensor;

/// One tensor's destination: the engine's parameter bytes, written in place (every byte, padding
/// included). `values` holds `prod(shape)` bytes; `scales` exactly what `layout` needs (see
/// [`swizzled_len`](crate::swizzled_len) for the 128x4 layout).
pub struct ImportTarget<'a> {
    /// The FP8 values, row-major.
    pub values: &'a mut [u8],
    /// The E8M0 scales in `layout`.
    pub scales: &'a mut [u8],
    /// The layout the engine wants.
    pub layout: Layout,
}

/// The destinations as the C call takes them; the DLTensors point into `shapes` and `dls`, which live
/// as long as this does.
struct Destinations {
    _shapes: Vec<[i64; 1]>,
    _dls: Vec<sys::DLTensor>,
    structs: Vec<sys::mxfp8_import_destination>,
}

fn destinations(targets: &mut [ImportTarget<'_>]) -> Destinations {
    let mut shapes: Vec<[i64; 1]> = targets.iter().flat_map(|t| [[t.values.len() as i64], [t.scales.len() as i64]]).collect();
    let mut dls: Vec<sys::DLTensor> = Vec::with_capacity(shapes.len());
    let pointers: Vec<*const c_void> =
        targets.iter_mut().flat_map(|t| [t.values.as_mut_ptr() as *const c_void, t.scales.as_mut_ptr() as *const c_void]).collect();
    for (p, s) in pointers.iter().zip(shapes.iter_mut()) {
        dls.push(dl_tensor(*p, HOST, UINT8, s));
    }
    // Pointers into `dls` are taken after it stops growing.
    let base = dls.as_mut_ptr();
    let structs = targets
        .iter()
        .enumerate()
        .map(|(i, t)| sys::mxfp8_import_destination {
            // SAFETY: 2i and 2i + 1 are inside dls, which has two entries per target.
            values: unsafe { base.add(2 * i) },
            scales: unsafe { base.add(2 * i + 1) },
            scales_layout: t.layout.to_raw(),
            reserved: 0,
        })
        .collect();
    Destinations { _shapes: shapes, _dls: dls, structs }
}

/// Writes every tensor of a host `bucket` into `targets[i]` (one per manifest entry, in order): values
/// copied, scales moved from `bucket_scales` (their layout in the bucket: [`Layout::Compact`] for what
/// [`BucketPlan::fill`](crate::BucketPlan::fill) writes) into each target's layout. `direction` is the
/// direction the bucket's scales belong to. Everything is checked before anything is written.
pub fn import_bucket_host(
    bucket: &[u8],
    entries: &[ManifestEntry],
    direction: Direction,
    bucket_scales: Layout,
    targets: &mut [ImportTarget<'_>],
) -> Result<(), Error> {
    if entries.len() != targets.len() {
        return Err(invalid(format!("{} manifest entries but {} targets", entries.len(), targets.len())));
    }
    let raw_entries: Vec<sys::mxfp8_bucket_entry> = entries
        .iter()
        .map(|e| sys::mxfp8_bucket_entry {
            values_offset: e.values_offset,
            values_bytes: e.values_bytes,
            scales_offset: e.scales_offset,
            scales_bytes: e.scales_bytes,
        })
        .collect();
    let ndims: Vec<i32> = entries.iter().map(|e| e.shape.len() as i32).collect();
    let shapes: Vec<*const i64> = entries.iter().map(|e| e.shape.as_ptr()).collect();
    let formats: Vec<i32> = entries.iter().map(|e| e.format.to_raw()).collect();
    let directions = vec![direction.to_raw(); entries.len()];
    let layouts = vec![bucket_scales.to_raw(); entries.len()];
    let manifest = sys::mxfp8_bucket_manifest {
        count: entries.len(),
        entries: raw_entries.as_ptr(),
        ndims: ndims.as_ptr(),
        shapes: shapes.as_ptr(),
        formats: formats.as_ptr(),
        directions: directions.as_ptr(),
        scales_layouts: layouts.as_ptr(),
        ..Default::default()
    };
    let mut shape = [bucket.len() as i64];
    let dl = dl_tensor(bucket.as_ptr() as *const c_void, HOST, UINT8, &mut shape);
    let d = destinations(targets);
    // SAFETY: every pointer refers to memory borrowed for this call (the bucket shared, the targets
    // exclusively); host work is done when the call returns.
    check(unsafe { sys::mxfp8_import_bucket(&dl, &manifest, d.structs.as_ptr(), core::ptr::null_mut()) })
}

/// The direct path on host memory: direction `options.direction` of `tensors[i]` into `targets[i]`, in
/// one pass (the layout transform fused).
pub fn import_tensors_host(tensors: &[&Tensor], options: &ExportOptions, targets: &mut [ImportTarget<'_>]) -> Result<(), Error> {
    if tensors.len() != targets.len() {
        return Err(invalid(format!("{} tensors but {} targets", tensors.len(), targets.len())));
    }
    let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
    let o = options.to_sys();
    let d = destinations(targets);
    // SAFETY: the tensors are live handles, the targets exclusively borrowed; the library checks that
    // they are host memory like the tensors (a device tensor fails instead of being written from here).
    check(unsafe { sys::mxfp8_import_tensors(handles.as_ptr(), handles.len(), &o, d.structs.as_ptr()) })
}
