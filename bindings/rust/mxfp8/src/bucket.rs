//! Buckets for weight sync: many tensors' values and compact scales packed into one buffer (one IPC
//! handle, one NCCL broadcast, one shared-memory segment), and the manifest a receiver unpacks it with.
use std::ffi::c_void;

use crate::error::{invalid, Error};
use crate::import::{check_manifest, raw_entry, Part, RawEntry};
use crate::memory::{with_byte_tensor, DeviceBytes, HOST};
use crate::options::{Direction, ExportOptions, Format};
use crate::shard::{RawShards, Shard};
use crate::sys;
use crate::tensor::{compact_scales_shape, Tensor};
use crate::transfer::Transfer;

/// A bucket entry as the transfer's part (an MXFP8 entry has no amax part).
pub(crate) fn part_of(e: &BucketEntry) -> sys::mxfp8_bucket_part {
    sys::mxfp8_bucket_part {
        values_offset: e.values_offset,
        values_bytes: e.values_bytes,
        scales_offset: e.scales_offset,
        scales_bytes: e.scales_bytes,
        ..Default::default()
    }
}

/// The transfer's part as a bucket entry.
pub(crate) fn entry_of(p: &sys::mxfp8_bucket_part) -> BucketEntry {
    BucketEntry { values_offset: p.values_offset, values_bytes: p.values_bytes, scales_offset: p.scales_offset, scales_bytes: p.scales_bytes }
}

/// Where one tensor's parts sit in a bucket, in bytes from its first byte (the values and scales of
/// the library's `mxfp8_bucket_part`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct BucketEntry {
    /// Offset of the values.
    pub values_offset: u64,
    /// The values' bytes: `prod(shape)` row-major (a shard's `(rows, cols)`; an NVFP4 entry's packed,
    /// `rows * cols / 2`).
    pub values_bytes: u64,
    /// Offset of the compact scales.
    pub scales_offset: u64,
    /// The compact scales, row-major.
    pub scales_bytes: u64,
}

/// The layout of a bucket for some tensors (`mxfp8_bucket_parts`): tensor i's values at
/// `entries()[i].values_offset`, its compact scales right after, every part aligned, in tensor order.
/// The plan borrows the tensors, so [`fill`](Self::fill) writes exactly the tensors it was made for.
///
/// ```
/// # use mxfp8::{BucketPlan, ExportOptions, ManagedTensor, TensorBuilder};
/// # fn main() -> Result<(), mxfp8::Error> {
/// let weight = TensorBuilder::new()
///     .rowwise(ManagedTensor::from_host_bytes(vec![0x38; 4 * 64], &[4, 64])?,
///              ManagedTensor::from_host_bytes(vec![127; 4 * 2], &[4, 2])?)
///     .build()?;
/// let plan = BucketPlan::new(&[&weight], &ExportOptions::default(), 256)?;
/// let mut bucket = vec![0u8; plan.total_bytes() as usize];
/// plan.fill(&mut bucket)?;
/// let manifest = plan.manifest(["layer0.weight"])?;
/// let views = manifest.unpack(&bucket)?;
/// assert_eq!(views[0].scales, &[127; 8]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct BucketPlan<'t> {
    tensors: Vec<&'t Tensor>,
    options: ExportOptions,
    entries: Vec<BucketEntry>,
    total_bytes: u64,
    /// Empty for whole tensors; else one shard per tensor.
    shards: Vec<Shard>,
}

impl<'t> BucketPlan<'t> {
    /// Plans a bucket for `tensors` in `options`' direction (the stream is kept for
    /// [`fill_device`](Self::fill_device)), every part starting at a multiple of `alignment` (a power
    /// of two; 256 suits every consumer's vector loads). Touches no tensor memory.
    pub fn new(tensors: &[&'t Tensor], options: &ExportOptions, alignment: u64) -> Result<Self, Error> {
        let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
        Transfer::stored_scales(&options.to_sys())?;
        let (parts, total_bytes) = Transfer::from_tensors(&handles, &options.to_sys(), core::ptr::null()).bucket_parts(alignment)?;
        let entries = parts.iter().map(entry_of).collect();
        Ok(Self { tensors: tensors.to_vec(), options: *options, entries, total_bytes, shards: Vec::new() })
    }

    /// Plans a bucket of shards (`mxfp8_bucket_parts` with shards): entry i holds `shards[i]` of `tensors[i]`
    /// (one shard per tensor; [`Shard::whole`] for a whole tensor), its values row-major `(rows, cols)`
    /// then its compact scales, so that a trainer sends each rank only its part. The library checks each
    /// shard against its tensor's direction (rowwise: K boundaries multiples of 32 or K; columnwise: row
    /// boundaries multiples of 32 or M) and names the bad one (`shards[i]`). The options' scale fix-up
    /// applies to whole tensors only: with a shard it is [`Status::Unsupported`](crate::Status::Unsupported).
    pub fn with_shards(tensors: &[&'t Tensor], shards: &[Shard], options: &ExportOptions, alignment: u64) -> Result<Self, Error> {
        if shards.len() != tensors.len() {
            return Err(invalid(format!("{} shards for {} tensors", shards.len(), tensors.len())));
        }
        let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
        let raw = RawShards::new(shards);
        // The shards are read during the call only.
        Transfer::stored_scales(&options.to_sys())?;
        let (parts, total_bytes) = Transfer::from_tensors(&handles, &options.to_sys(), raw.as_ptr()).bucket_parts(alignment)?;
        let entries = parts.iter().map(entry_of).collect();
        Ok(Self { tensors: tensors.to_vec(), options: *options, entries, total_bytes, shards: shards.to_vec() })
    }

    /// The shards the plan was made with (empty for whole tensors).
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// One entry per tensor, in tensor order.
    pub fn entries(&self) -> &[BucketEntry] {
        &self.entries
    }

    /// The bucket size needed.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The direction the bucket carries.
    pub fn direction(&self) -> Direction {
        self.options.get_direction()
    }

    /// Fills a host bucket (at least [`total_bytes`](Self::total_bytes) long): values copied, scales
    /// unswizzled or cropped straight into place. Bytes between parts are left as they were.
    pub fn fill(&self, bucket: &mut [u8]) -> Result<(), Error> {
        // SAFETY: the tensor describes the exclusively borrowed slice; host work is done when the call returns.
        with_byte_tensor(bucket.as_mut_ptr() as *const c_void, bucket.len(), HOST, |t| unsafe { self.fill_raw(t) })
    }

    /// Fills a device bucket: one kernel launch, queued on the plan's stream; the call does not wait.
    pub fn fill_device(&self, bucket: DeviceBytes) -> Result<(), Error> {
        // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
        with_byte_tensor(bucket.as_ptr(), bucket.len(), bucket.device(), |t| unsafe { self.fill_raw(t) })
    }

    unsafe fn fill_raw(&self, bucket: &mut sys::DLTensor) -> Result<(), Error> {
        self.transfer_raw(bucket, None)
    }

    /// Fills `bucket` (`mxfp8_transfer` into the planned parts), or with `prepare` prepares the fill
    /// (`mxfp8_transfer_prepare`; see [`PreparedExport`](crate::PreparedExport)), whose plan keeps the
    /// bucket's address: the caller keeps it valid.
    pub(crate) unsafe fn transfer_raw(&self, bucket: &mut sys::DLTensor, prepare: Option<&mut *mut sys::mxfp8_plan>) -> Result<(), Error> {
        let handles: Vec<*const sys::mxfp8_tensor> = self.tensors.iter().map(|t| t.as_raw()).collect();
        let o = self.options.to_sys();
        let shards = RawShards::new(&self.shards);
        let shard_ptrs = if self.shards.is_empty() { core::ptr::null() } else { shards.as_ptr() };
        let t = Transfer::from_tensors(&handles, &o, shard_ptrs).into_bucket(bucket, self.entries.iter().map(part_of).collect());
        match prepare {
            None => t.run(o.stream),
            Some(out) => t.prepare(out),
        }
    }

    /// The manifest a receiver needs, naming the tensors in order (one name per tensor). An entry of a
    /// shard has the shard's shape `(rows, cols)` ([`Shard::shape_of`]) and its compact scales' shape.
    pub fn manifest<S: Into<String>>(&self, names: impl IntoIterator<Item = S>) -> Result<Manifest, Error> {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        if names.len() != self.tensors.len() {
            return Err(invalid(format!("{} names for {} tensors", names.len(), self.tensors.len())));
        }
        let entries = names
            .into_iter()
            .zip(&self.tensors)
            .zip(&self.entries)
            .enumerate()
            .map(|(i, ((name, t), e))| {
                let shape = self.shards.get(i).map_or_else(|| t.shape().to_vec(), |s| s.shape_of(t.shape()));
                ManifestEntry {
                    name,
                    scales_shape: compact_scales_shape(&shape, self.direction()),
                    shape,
                    format: t.format(),
                    values_offset: e.values_offset,
                    values_bytes: e.values_bytes,
                    scales_offset: e.scales_offset,
                    scales_bytes: e.scales_bytes,
                }
            })
            .collect();
        Ok(Manifest { entries })
    }
}

/// One tensor of a bucket: what the receiver needs to find and shape its parts (the same fields as a
/// Python `mxfp8.export_bucket` manifest entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The tensor's name.
    pub name: String,
    /// The logical shape of the values.
    pub shape: Vec<i64>,
    /// The FP8 encoding of the values.
    pub format: Format,
    /// Offset of the values in the bucket.
    pub values_offset: u64,
    /// `prod(shape)`.
    pub values_bytes: u64,
    /// Offset of the compact scales in the bucket.
    pub scales_offset: u64,
    /// `prod(scales_shape)`.
    pub scales_bytes: u64,
    /// The shape of the compact scales.
    pub scales_shape: Vec<i64>,
}

/// What a bucket holds, tensor by tensor. Made by [`BucketPlan::manifest`] on the sending side, or
/// rebuilt by the receiver from whatever the sender transmitted (its fields are public).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The tensors, in bucket order.
    pub entries: Vec<ManifestEntry>,
}

/// One tensor inside a host bucket: views that borrow the bucket (and the manifest), never copies.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BucketView<'b> {
    /// The tensor's name.
    pub name: &'b str,
    /// The logical shape of the values.
    pub shape: &'b [i64],
    /// The FP8 encoding of the values.
    pub format: Format,
    /// The FP8 values, row-major.
    pub values: &'b [u8],
    /// The compact E8M0 scales, row-major.
    pub scales: &'b [u8],
    /// The shape of the scales.
    pub scales_shape: &'b [i64],
}

/// One tensor inside a device bucket: sub-ranges of the bucket's memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeviceBucketView<'m> {
    /// The tensor's name.
    pub name: &'m str,
    /// The logical shape of the values.
    pub shape: &'m [i64],
    /// The FP8 encoding of the values.
    pub format: Format,
    /// The FP8 values, row-major.
    pub values: DeviceBytes,
    /// The compact E8M0 scales, row-major.
    pub scales: DeviceBytes,
    /// The shape of the scales.
    pub scales_shape: &'m [i64],
}

impl Manifest {
    /// A manifest of `entries`.
    pub fn new(entries: Vec<ManifestEntry>) -> Self {
        Self { entries }
    }

    /// The bucket size the entries need (the end of the last part), or None when an entry's offset plus
    /// bytes does not fit in `u64` (no bucket holds that entry; the fields are public, so a receiver may
    /// have filled them from anything).
    pub fn bucket_bytes(&self) -> Option<u64> {
        self.entries.iter().try_fold(0u64, |end, e| {
            Some(end.max(e.values_offset.checked_add(e.values_bytes)?).max(e.scales_offset.checked_add(e.scales_bytes)?))
        })
    }

    /// `mxfp8_transfer_check` of the bucket of the entries against a bucket (address, bytes, device).
    fn check(&self, bucket: Part) -> Result<(), Error> {
        let raw: Vec<RawEntry<'_>> = self.entries.iter().map(|e| raw_entry(e).with_direction(carried_direction(e))).collect();
        check_manifest(bucket, &raw)
    }

    /// Every tensor of a host bucket as views into it, after the library has checked the manifest
    /// against the bucket (`mxfp8_transfer_check` of the bucket: each part of exactly the bytes its shape gives
    /// and inside the bucket, no byte in two parts, `scales_shape` the compact scales of `shape`); its
    /// refusal comes back as the error, with the library's message. The views borrow the bucket, so
    /// they cannot outlive it:
    ///
    /// ```compile_fail,E0597
    /// # let manifest = mxfp8::Manifest::default();
    /// let views = {
    ///     let bucket = vec![0u8; 1024];
    ///     manifest.unpack(&bucket).unwrap()
    /// }; // error: `bucket` does not live long enough
    /// println!("{}", views.len());
    /// ```
    pub fn unpack<'b>(&'b self, bucket: &'b [u8]) -> Result<Vec<BucketView<'b>>, Error> {
        self.check((bucket.as_ptr() as *const c_void, bucket.len(), HOST))?;
        // Every part lies inside the bucket (checked), so no slice below can panic.
        let part = |offset: u64, bytes: u64| &bucket[offset as usize..(offset + bytes) as usize];
        Ok(self
            .entries
            .iter()
            .map(|e| BucketView {
                name: &e.name,
                shape: &e.shape,
                format: e.format,
                values: part(e.values_offset, e.values_bytes),
                scales: part(e.scales_offset, e.scales_bytes),
                scales_shape: &e.scales_shape,
            })
            .collect())
    }

    /// Every tensor of a device bucket as sub-ranges of its memory, checked as [`unpack`](Self::unpack)
    /// checks them (the check reads the bucket's address and size, never its bytes).
    pub fn unpack_device(&self, bucket: DeviceBytes) -> Result<Vec<DeviceBucketView<'_>>, Error> {
        self.check((bucket.as_ptr() as *const c_void, bucket.len(), bucket.device()))?;
        let sub = |offset: u64, bytes: u64| {
            // SAFETY: a sub-range the library checked lies inside memory the bucket's constructor made
            // promises about.
            unsafe { DeviceBytes::new((bucket.as_ptr() as *mut u8).wrapping_add(offset as usize) as *mut c_void, bytes as usize, bucket.device()) }
        };
        Ok(self
            .entries
            .iter()
            .map(|e| DeviceBucketView {
                name: &e.name,
                shape: &e.shape,
                format: e.format,
                values: sub(e.values_offset, e.values_bytes),
                scales: sub(e.scales_offset, e.scales_bytes),
                scales_shape: &e.scales_shape,
            })
            .collect())
    }
}

/// The direction an entry's scales are read in: a manifest entry carries none of its own, but its
/// `scales_shape` names it (rowwise `(*lead, ceil(K/32))`, columnwise `(ceil(M/32), K)`). Rowwise unless
/// the shape is the columnwise one only; this picks, the library checks.
fn carried_direction(e: &ManifestEntry) -> Direction {
    let names = |direction| e.scales_shape == compact_scales_shape(&e.shape, direction);
    if names(Direction::Columnwise) && !names(Direction::Rowwise) {
        Direction::Columnwise
    } else {
        Direction::Rowwise
    }
}
