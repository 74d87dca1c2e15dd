//! The receiver's import on host memory: a bucket (with its manifest) or tensors written into the
//! engine's own parameter buffers, scales compact or in the cuBLAS 128x4 layout.

use core::ffi::c_void;

use crate::bucket::ManifestEntry;
use crate::error::{invalid, Error};
use crate::memory::{dl_tensor, with_byte_tensor, DeviceBytes, HOST, UINT8};
use crate::options::{Direction, ExportOptions, Layout, ScaleFixup, Stream};
use crate::shard::{RawShards, Shard};
use crate::sys;
use crate::transfer::Transfer;
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

/// One tensor's destination in device memory (or any memory DLPack names): the engine's parameters,
/// written in place as [`ImportTarget`] describes, by work queued on the call's stream.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeviceImportTarget {
    /// The FP8 values, row-major, `prod(shape)` bytes.
    pub values: DeviceBytes,
    /// The E8M0 scales in `layout`, exactly the bytes it needs.
    pub scales: DeviceBytes,
    /// The layout the engine wants.
    pub layout: Layout,
}

/// One buffer of a destination: address, bytes, device.
pub(crate) type Part = (*const c_void, usize, sys::DLDevice);

/// The destinations as the transfer's arrays take them: entry i's values and scales DLTensors (which
/// point into `shapes` and `dls`) and its scales' layout, all living as long as this does.
pub(crate) struct Destinations {
    _shapes: Vec<[i64; 1]>,
    _dls: Vec<sys::DLTensor>,
    values: Vec<*mut sys::DLTensor>,
    scales: Vec<*mut sys::DLTensor>,
    layouts: Vec<i32>,
}

impl Destinations {
    pub(crate) fn new(parts: &[(Part, Part, Layout)]) -> Self {
        let mut shapes: Vec<[i64; 1]> = parts.iter().flat_map(|(v, s, _)| [[v.1 as i64], [s.1 as i64]]).collect();
        let mut dls: Vec<sys::DLTensor> = Vec::with_capacity(shapes.len());
        let buffers: Vec<Part> = parts.iter().flat_map(|(v, s, _)| [*v, *s]).collect();
        for ((p, _, device), s) in buffers.iter().zip(shapes.iter_mut()) {
            dls.push(dl_tensor(*p, *device, UINT8, s));
        }
        // Pointers into `dls` are taken after it stops growing.
        let base = dls.as_mut_ptr();
        // SAFETY: 2i and 2i + 1 are inside dls, which has two entries per destination.
        let values = (0..parts.len()).map(|i| unsafe { base.add(2 * i) }).collect();
        let scales = (0..parts.len()).map(|i| unsafe { base.add(2 * i + 1) }).collect();
        let layouts = parts.iter().map(|(.., layout)| layout.to_raw()).collect();
        Self { _shapes: shapes, _dls: dls, values, scales, layouts }
    }

    pub(crate) fn host(targets: &mut [ImportTarget<'_>]) -> Self {
        let parts: Vec<(Part, Part, Layout)> = targets
            .iter_mut()
            .map(|t| {
                let v = (t.values.as_mut_ptr() as *const c_void, t.values.len(), HOST);
                let s = (t.scales.as_mut_ptr() as *const c_void, t.scales.len(), HOST);
                (v, s, t.layout)
            })
            .collect();
        Self::new(&parts)
    }

    pub(crate) fn device(targets: &[DeviceImportTarget]) -> Self {
        let part = |b: &DeviceBytes| (b.as_ptr() as *const c_void, b.len(), b.device());
        let parts: Vec<(Part, Part, Layout)> = targets.iter().map(|t| (part(&t.values), part(&t.scales), t.layout)).collect();
        Self::new(&parts)
    }

    pub(crate) fn count(&self) -> usize {
        self.layouts.len()
    }

    /// `t` into these destinations (their arrays live in this value: it must outlive the transfer's use).
    pub(crate) fn receive(&self, t: Transfer) -> Transfer {
        t.into_buffers(&self.values, &self.scales, &self.layouts)
    }
}

/// How a receiver reads a bucket: what the transfer from it needs beyond the bytes. Start from
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

/// One manifest entry as the transfer from a bucket reads it (`Transfer::from_manifest`).
pub(crate) struct RawEntry<'m> {
    /// Where its values, scales and (NVFP4) amax lie in the bucket.
    pub(crate) part: sys::mxfp8_bucket_part,
    pub(crate) shape: &'m [i64],
    /// `mxfp8_format`.
    pub(crate) format: i32,
    /// An NVFP4 entry's E4M3_MAX; 0 for an MXFP8 entry.
    pub(crate) e4m3_max: i32,
    /// The sender's shape of the scales, which the library checks names S.
    pub(crate) scales_shape: &'m [i64],
    /// This entry's direction; None: the manifest's ([`ManifestFields::direction`]).
    pub(crate) direction: Option<Direction>,
}

/// The manifest fields every entry shares.
pub(crate) struct ManifestFields<'m> {
    pub(crate) direction: Direction,
    pub(crate) bucket_scales: Layout,
    pub(crate) scale_fixup: ScaleFixup,
    pub(crate) shards: Option<&'m [Shard]>,
}

impl<'m> RawEntry<'m> {
    /// An entry of `shape` and `format` (`mxfp8_format`) whose values and scales (of `scales_shape`) lie
    /// at (offset, bytes).
    pub(crate) fn new(shape: &'m [i64], format: i32, values: (u64, u64), scales: (u64, u64), scales_shape: &'m [i64]) -> Self {
        let part = sys::mxfp8_bucket_part {
            values_offset: values.0,
            values_bytes: values.1,
            scales_offset: scales.0,
            scales_bytes: scales.1,
            ..Default::default()
        };
        Self { part, shape, format, e4m3_max: 0, scales_shape, direction: None }
    }

    /// An NVFP4 entry's amax at (offset, bytes), decoded with `e4m3_max`.
    pub(crate) fn with_amax(self, amax: (u64, u64), e4m3_max: i32) -> Self {
        let part = sys::mxfp8_bucket_part { amax_offset: amax.0, amax_bytes: amax.1, ..self.part };
        Self { part, e4m3_max, ..self }
    }

    /// The entry read in `direction`, whatever the manifest's.
    pub(crate) fn with_direction(self, direction: Direction) -> Self {
        Self { direction: Some(direction), ..self }
    }
}

/// An MXFP8 manifest entry as the transfer reads it.
pub(crate) fn raw_entry(e: &ManifestEntry) -> RawEntry<'_> {
    let (values, scales) = ((e.values_offset, e.values_bytes), (e.scales_offset, e.scales_bytes));
    RawEntry::new(&e.shape, e.format.to_raw(), values, scales, &e.scales_shape)
}

/// Asks the library whether `entries` (compact scales) describe `bucket` (`mxfp8_transfer_check` of the bucket):
/// the one set of manifest rules, which the unpacks run before they make a view, so that a view covers
/// only a part the library accepted.
pub(crate) fn check_manifest(bucket: Part, entries: &[RawEntry<'_>]) -> Result<(), Error> {
    let fields = ManifestFields { direction: Direction::Rowwise, bucket_scales: Layout::Compact, scale_fixup: ScaleFixup::None, shards: None };
    // The check reads the bucket's address and size, never its bytes.
    with_byte_tensor(bucket.0, bucket.1, bucket.2, |dl| Transfer::from_manifest(dl, entries, &fields).into_nothing().check())
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

/// [`import_bucket_host`] with every manifest field (`mxfp8_transfer` from the bucket): a scale fix-up, and
/// per-entry shards, so that each receiver rank takes its own part of a bucket of whole tensors.
pub fn import_bucket_host_with(bucket: &[u8], import: &BucketImport<'_>, targets: &mut [ImportTarget<'_>]) -> Result<(), Error> {
    let d = Destinations::host(targets);
    // SAFETY: every pointer refers to memory borrowed for this call (the bucket shared, the targets
    // exclusively); host work is done when the call returns.
    unsafe { import_bucket_raw((bucket.as_ptr() as *const c_void, bucket.len(), HOST), import, &d, Stream::default(), None) }
}

/// [`import_bucket_host_with`] on device memory: one launch for the whole bucket (large values through
/// the copy engine) queued on `stream`; the call does not wait. The bucket is only read.
pub fn import_bucket_device(bucket: DeviceBytes, import: &BucketImport<'_>, targets: &[DeviceImportTarget], stream: Stream) -> Result<(), Error> {
    let d = Destinations::device(targets);
    // SAFETY: DeviceBytes' and Stream's constructors promised the memory and the stream.
    unsafe { import_bucket_raw((bucket.as_ptr() as *const c_void, bucket.len(), bucket.device()), import, &d, stream, None) }
}

/// The transfer from `bucket` (described by `import`) into `d`, run on `stream`, or with `prepare`
/// prepared (the plan keeps the bucket's and the destinations' addresses: the caller keeps them valid).
unsafe fn import_bucket_raw(bucket: Part, import: &BucketImport<'_>, d: &Destinations, stream: Stream,
                            prepare: Option<&mut *mut sys::mxfp8_plan>) -> Result<(), Error> {
    let entries = import.entries;
    if entries.len() != d.count() {
        return Err(invalid(format!("{} manifest entries but {} targets", entries.len(), d.count())));
    }
    if let Some(shards) = import.shards {
        if shards.len() != entries.len() {
            return Err(invalid(format!("{} shards for {} manifest entries", shards.len(), entries.len())));
        }
    }
    let raw: Vec<RawEntry<'_>> = entries.iter().map(raw_entry).collect();
    let fields = ManifestFields {
        direction: import.direction,
        bucket_scales: import.bucket_scales,
        scale_fixup: import.scale_fixup,
        shards: import.shards,
    };
    with_byte_tensor(bucket.0, bucket.1, bucket.2, |dl| {
        let t = d.receive(Transfer::from_manifest(dl, &raw, &fields));
        match prepare {
            None => t.run(stream.as_raw()),
            Some(out) => t.prepare(out),
        }
    })
}

/// The direct path on host memory: direction `options.direction` of `tensors[i]` into `targets[i]`, in
/// one pass (the layout transform fused).
pub fn import_tensors_host(tensors: &[&Tensor], options: &ExportOptions, targets: &mut [ImportTarget<'_>]) -> Result<(), Error> {
    let d = Destinations::host(targets);
    // SAFETY: the tensors are live handles, the targets exclusively borrowed; the library checks that
    // they are host memory like the tensors (a device tensor fails instead of being written from here).
    unsafe { import_tensors_raw(tensors, None, options, &d) }
}

/// The direct path with shards (`mxfp8_transfer` with `desc.shards`): `shards[i]` of `tensors[i]` into
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
    let d = Destinations::host(targets);
    // SAFETY: as import_tensors_host; the shards are read during the call only.
    unsafe { import_tensors_raw(tensors, Some(shards), options, &d) }
}

/// [`import_tensors_host`] on device memory (e.g. a trainer's storage mapped over CUDA IPC into the
/// engine's parameters): one launch on `options`' stream; the call does not wait.
pub fn import_tensors_device(tensors: &[&Tensor], options: &ExportOptions, targets: &[DeviceImportTarget]) -> Result<(), Error> {
    let d = Destinations::device(targets);
    // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
    unsafe { import_tensors_raw(tensors, None, options, &d) }
}

/// [`import_tensor_shards_host`] on device memory: one launch on `options`' stream.
pub fn import_tensor_shards_device(tensors: &[&Tensor], shards: &[Shard], options: &ExportOptions, targets: &[DeviceImportTarget]) -> Result<(), Error> {
    let d = Destinations::device(targets);
    // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
    unsafe { import_tensors_raw(tensors, Some(shards), options, &d) }
}

fn check_counts(tensors: usize, shards: Option<&[Shard]>, targets: usize) -> Result<(), Error> {
    let count = shards.map_or(tensors, |s| s.len());
    if tensors != targets || count != tensors {
        return Err(invalid(format!("{tensors} tensors, {count} shards and {targets} targets")));
    }
    Ok(())
}

unsafe fn import_tensors_raw(tensors: &[&Tensor], shards: Option<&[Shard]>, options: &ExportOptions, d: &Destinations) -> Result<(), Error> {
    tensor_transfer(tensors, shards, options, d, None)
}

/// The transfer from `tensors` (their `shards`) into `d`, run on the options' stream, or with `prepare`
/// prepared.
unsafe fn tensor_transfer(tensors: &[&Tensor], shards: Option<&[Shard]>, options: &ExportOptions, d: &Destinations,
                          prepare: Option<&mut *mut sys::mxfp8_plan>) -> Result<(), Error> {
    check_counts(tensors.len(), shards, d.count())?;
    let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
    let o = options.to_sys();
    let raw = RawShards::new(shards.unwrap_or(&[]));
    let t = d.receive(Transfer::from_tensors(&handles, &o, if shards.is_some() { raw.as_ptr() } else { core::ptr::null() }));
    match prepare {
        None => t.run(o.stream),
        Some(out) => t.prepare(out),
    }
}

/// What a prepared import reads: a bucket (address, bytes, device) with its manifest fields, or tensors.
pub(crate) enum ImportSource<'x> {
    Bucket((*const c_void, usize, sys::DLDevice), &'x BucketImport<'x>),
    Tensors(&'x [&'x Tensor], Option<&'x [Shard]>, &'x ExportOptions),
}

/// Prepares an import for [`PreparedExport`](crate::PreparedExport): the checks done once; the library
/// keeps the addresses of the bucket and the destinations, which the caller must keep valid.
pub(crate) unsafe fn prepare_import(source: ImportSource<'_>, d: &Destinations, out: &mut *mut sys::mxfp8_plan) -> Result<(), Error> {
    match source {
        ImportSource::Bucket(bucket, import) => import_bucket_raw(bucket, import, d, Stream::default(), Some(out)),
        ImportSource::Tensors(tensors, shards, options) => tensor_transfer(tensors, shards, options, d, Some(out)),
    }
}
