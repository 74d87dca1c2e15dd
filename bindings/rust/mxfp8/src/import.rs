//! The receiver's import on host memory: a bucket (with its manifest) or tensors written into the
//! engine's own parameter buffers, scales compact or in the cuBLAS 128x4 layout.

use core::ffi::c_void;

use crate::bucket::ManifestEntry;
use crate::error::{check, invalid, Error};
use crate::memory::{dl_tensor, HOST, UINT8};
use crate::options::{Direction, ExportOptions, Layout, ScaleFixup};
use crate::shard::{RawShards, Shard};
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

/// How a receiver reads a bucket: the `mxfp8_bucket_manifest` fields beyond the bytes. Start from
/// [`BucketImport::new`] (compact scales, no fix-up, whole tensors) and set what differs.
#[derive(Copy, Clone, Debug)]
pub struct BucketImport<'m> {
    /// One entry per tensor, in bucket order.
    pub entries: &'m [ManifestEntry],
    /// The direction the bucket's scales belong to.
    pub direction: Direction,
    /// The layout of the scales in the bucket ([`Layout::Compact`] for what
    /// [`BucketPlan::fill`](crate::BucketPlan::fill) writes; the TRT-LLM layouts are refused).
    pub bucket_scales: Layout,
    /// The rewrite applied to every scale written.
    pub scale_fixup: ScaleFixup,
    /// None, or one shard per entry: the part of each whole tensor of the bucket that the target
    /// receives ([`Shard::whole`] for all of it); the target then has the shard's sizes. Shards go to
    /// compact or 128x4 targets with the scale bytes as stored (no fix-up); see the header's
    /// "Resharding" for which 128x4 cases are [`Status::Unsupported`](crate::Status::Unsupported).
    pub shards: Option<&'m [Shard]>,
}

impl<'m> BucketImport<'m> {
    /// The entries of a bucket of compact scales in `direction`, whole tensors, no fix-up.
    pub fn new(entries: &'m [ManifestEntry], direction: Direction) -> Self {
        Self { entries, direction, bucket_scales: Layout::Compact, scale_fixup: ScaleFixup::None, shards: None }
    }
}

/// An `mxfp8_bucket_manifest` and the arrays it points into (valid as long as this value).
struct RawManifest {
    _entries: Vec<sys::mxfp8_bucket_entry>,
    _ndims: Vec<i32>,
    _shapes: Vec<*const i64>,
    _formats: Vec<i32>,
    _directions: Vec<i32>,
    _layouts: Vec<i32>,
    _shards: Option<RawShards>,
    manifest: sys::mxfp8_bucket_manifest,
}

fn raw_manifest(import: &BucketImport<'_>, targets: usize) -> Result<RawManifest, Error> {
    let entries = import.entries;
    if entries.len() != targets {
        return Err(invalid(format!("{} manifest entries but {} targets", entries.len(), targets)));
    }
    if let Some(shards) = import.shards {
        if shards.len() != entries.len() {
            return Err(invalid(format!("{} shards for {} manifest entries", shards.len(), entries.len())));
        }
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
    let directions = vec![import.direction.to_raw(); entries.len()];
    let layouts = vec![import.bucket_scales.to_raw(); entries.len()];
    let shards = import.shards.map(RawShards::new);
    // The Vecs' heap buffers do not move when they are moved into the struct below.
    let manifest = sys::mxfp8_bucket_manifest {
        count: entries.len(),
        entries: raw_entries.as_ptr(),
        ndims: ndims.as_ptr(),
        shapes: shapes.as_ptr(),
        formats: formats.as_ptr(),
        directions: directions.as_ptr(),
        scales_layouts: layouts.as_ptr(),
        scale_fixup: import.scale_fixup.to_raw(),
        shards: shards.as_ref().map_or(core::ptr::null(), |s| s.as_ptr()),
        ..Default::default()
    };
    Ok(RawManifest {
        _entries: raw_entries,
        _ndims: ndims,
        _shapes: shapes,
        _formats: formats,
        _directions: directions,
        _layouts: layouts,
        _shards: shards,
        manifest,
    })
}

/// Writes every tensor of a host `bucket` into `targets[i]` (one per manifest entry, in order): values
/// copied, scales moved from `bucket_scales` (their layout in the bucket: [`Layout::Compact`] for what
/// [`BucketPlan::fill`](crate::BucketPlan::fill) writes) into each target's layout. `direction` is the
/// direction the bucket's scales belong to. Everything is checked before anything is written. The same
/// as [`import_bucket_host_with`] with [`BucketImport::new`] and `bucket_scales`.
pub fn import_bucket_host(
    bucket: &[u8],
    entries: &[ManifestEntry],
    direction: Direction,
    bucket_scales: Layout,
    targets: &mut [ImportTarget<'_>],
) -> Result<(), Error> {
    import_bucket_host_with(bucket, &BucketImport { bucket_scales, ..BucketImport::new(entries, direction) }, targets)
}

/// [`import_bucket_host`] with every manifest field (`mxfp8_import_bucket`): a scale fix-up, and
/// per-entry shards, so that each receiver rank takes its own part of a bucket of whole tensors.
pub fn import_bucket_host_with(bucket: &[u8], import: &BucketImport<'_>, targets: &mut [ImportTarget<'_>]) -> Result<(), Error> {
    let m = raw_manifest(import, targets.len())?;
    let mut shape = [bucket.len() as i64];
    let dl = dl_tensor(bucket.as_ptr() as *const c_void, HOST, UINT8, &mut shape);
    let d = destinations(targets);
    // SAFETY: every pointer refers to memory borrowed for this call (the bucket shared, the targets
    // exclusively); host work is done when the call returns.
    check(unsafe { sys::mxfp8_import_bucket(&dl, &m.manifest, d.structs.as_ptr(), core::ptr::null_mut()) })
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

/// The direct path with shards (`mxfp8_import_tensor_shards`): `shards[i]` of `tensors[i]` into
/// `targets[i]` ([`Shard::whole`] for a whole tensor), read straight from the stored scales in one pass;
/// each target has its shard's sizes. Into a compact target any legal shard; into a 128x4 target only
/// what fills whole tiles (the header's "Resharding"), else [`Status::Unsupported`](crate::Status::Unsupported);
/// no shard goes to an engine-native layout nor with a scale fix-up.
pub fn import_tensor_shards_host(
    tensors: &[&Tensor],
    shards: &[Shard],
    options: &ExportOptions,
    targets: &mut [ImportTarget<'_>],
) -> Result<(), Error> {
    if tensors.len() != targets.len() || shards.len() != tensors.len() {
        return Err(invalid(format!("{} tensors, {} shards and {} targets", tensors.len(), shards.len(), targets.len())));
    }
    let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
    let raw = RawShards::new(shards);
    let o = options.to_sys();
    let d = destinations(targets);
    // SAFETY: as import_tensors_host; the shards are read during the call only.
    check(unsafe { sys::mxfp8_import_tensor_shards(handles.as_ptr(), raw.as_ptr(), handles.len(), &o, d.structs.as_ptr()) })
}

/// Prepares an import (for [`PreparedExport`](crate::PreparedExport)): the checks done once; the library
/// keeps the addresses of the bucket and the targets.
pub(crate) enum ImportPlan<'x> {
    Bucket(&'x [u8], &'x BucketImport<'x>),
    Tensors(&'x [&'x Tensor], Option<&'x [Shard]>, &'x ExportOptions),
}

pub(crate) unsafe fn prepare_import(
    plan: ImportPlan<'_>,
    targets: &mut [ImportTarget<'_>],
    out: &mut *mut sys::mxfp8_prepared_export,
) -> Result<(), Error> {
    match plan {
        ImportPlan::Bucket(bucket, import) => {
            let m = raw_manifest(import, targets.len())?;
            let mut shape = [bucket.len() as i64];
            let dl = dl_tensor(bucket.as_ptr() as *const c_void, HOST, UINT8, &mut shape);
            let d = destinations(targets);
            check(sys::mxfp8_prepare_import_bucket(&dl, &m.manifest, d.structs.as_ptr(), out))
        }
        ImportPlan::Tensors(tensors, shards, options) => {
            let count = shards.map_or(tensors.len(), |s| s.len());
            if tensors.len() != targets.len() || count != tensors.len() {
                return Err(invalid(format!("{} tensors, {} shards and {} targets", tensors.len(), count, targets.len())));
            }
            let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
            let o = options.to_sys();
            let d = destinations(targets);
            match shards {
                None => check(sys::mxfp8_prepare_import_tensors(handles.as_ptr(), handles.len(), &o, d.structs.as_ptr(), out)),
                Some(shards) => {
                    let raw = RawShards::new(shards);
                    check(sys::mxfp8_prepare_import_tensor_shards(handles.as_ptr(), raw.as_ptr(), handles.len(), &o, d.structs.as_ptr(), out))
                }
            }
        }
    }
}
