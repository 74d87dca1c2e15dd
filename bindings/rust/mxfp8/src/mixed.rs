//! Buckets and imports that mix MXFP8 and NVFP4 tensors (the header's transfer, experimental): an NVFP4
//! tensor is one more kind of entry of the same bucket, filled by the same one launch and imported by the
//! same one call, so a model that keeps some layers in MXFP8 travels whole.
use std::ffi::c_void;
use std::ptr;

use crate::bucket::{entry_of, part_of, BucketEntry, BucketView, ManifestEntry};
use crate::error::{invalid, Error};
use crate::import::{check_manifest, raw_entry, DeviceImportTarget, Destinations, ImportTarget, ManifestFields, Part, RawEntry};
use crate::memory::{dl_tensor, with_byte_tensor, DeviceBytes, FLOAT32, HOST};
use crate::nvfp4::{float32_elements, GlobalScale, Nvfp4Tensor};
use crate::options::{Direction, ExportOptions, Layout, ScaleFixup, Stream};
use crate::sys;
use crate::tensor::{compact_scales_shape, Tensor};
use crate::transfer::Transfer;

/// One entry of a mixed bucket or import: an MXFP8 [`Tensor`] or an NVFP4 [`Nvfp4Tensor`], borrowed
/// for as long as the plan or call that holds it (`mxfp8_bucket_parts`' `desc.tensors[i]` or
/// `nvfp4_tensors[i]`). More kinds may come, so a `match` on it needs a `_` arm.
#[derive(Copy, Clone, Debug)]
#[non_exhaustive]
pub enum MixedTensor<'t> {
    /// An MXFP8 tensor: values and compact E8M0 scales, as [`BucketPlan`](crate::BucketPlan) carries it.
    Mxfp8(&'t Tensor),
    /// An NVFP4 tensor: packed E2M1 values, compact E4M3 block scales and the float32 amax.
    Nvfp4(&'t Nvfp4Tensor),
}

impl<'t> From<&'t Tensor> for MixedTensor<'t> {
    fn from(tensor: &'t Tensor) -> Self {
        Self::Mxfp8(tensor)
    }
}

impl<'t> From<&'t Nvfp4Tensor> for MixedTensor<'t> {
    fn from(tensor: &'t Nvfp4Tensor) -> Self {
        Self::Nvfp4(tensor)
    }
}

/// The two parallel handle arrays the `_mixed` calls take: entry i set in exactly one, NULL in the other.
struct Handles {
    mxfp8: Vec<*const sys::mxfp8_tensor>,
    nvfp4: Vec<*const sys::mxfp8_tensor>,
}

impl Handles {
    fn new(tensors: &[MixedTensor<'_>]) -> Self {
        let mxfp8 = tensors.iter().map(|t| if let MixedTensor::Mxfp8(t) = t { t.as_raw() } else { ptr::null() }).collect();
        let nvfp4 = tensors.iter().map(|t| if let MixedTensor::Nvfp4(t) = t { t.as_raw() } else { ptr::null() }).collect();
        Self { mxfp8, nvfp4 }
    }

    /// One handle per entry, either format (an NVFP4 handle is an `mxfp8_tensor` of format NVFP4 to the
    /// transfer).
    fn either(&self) -> Vec<*const sys::mxfp8_tensor> {
        self.mxfp8.iter().zip(&self.nvfp4).map(|(m, n)| if m.is_null() { *n } else { *m }).collect()
    }
}

/// Where an NVFP4 entry's float32 amax lies in a bucket (the amax of the library's `mxfp8_bucket_part`)
/// and the E4M3_MAX it decodes with; all zero for an MXFP8 entry.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Nvfp4BucketEntry {
    /// Offset of the amax, a multiple of 4.
    pub amax_offset: u64,
    /// 4 per amax: 4 (per tensor) or 4 * rows (per row).
    pub amax_bytes: u64,
    /// 448, or 256 for Transformer Engine's 4over6 tensors.
    pub e4m3_max: i32,
    /// Always 0.
    pub reserved: u32,
}

/// The layout of a bucket of MXFP8 and NVFP4 tensors (`mxfp8_bucket_parts`). Entry i is
/// `tensors[i]`, its parts in bucket order, each at a multiple of the alignment:
/// - MXFP8: values then compact E8M0 scales, as [`BucketPlan`](crate::BucketPlan) plans them
///   ([`entries`](Self::entries));
/// - NVFP4, for the stored matrix (rows, cols) of the direction (rowwise `(M, K)`, columnwise the
///   `(K, M)` transpose TE stores): packed values (`rows * cols / 2` bytes, the even element in the low
///   nibble), compact E4M3 block scales (`rows x ceil(cols / 16)`) ([`entries`](Self::entries)), and the
///   float32 amax as Transformer Engine keeps it, one per tensor or (rowwise) one per row, at a multiple
///   of 4 bytes as well ([`nvfp4_entries`](Self::nvfp4_entries), which also carry E4M3_MAX).
///
/// On the wire the second level is the amax, from which a receiver computes either global-scale
/// convention bit for bit; a receiver that reads the bytes itself computes `weight_scale_2` as the
/// float32 division `amax / (6 * E4M3_MAX)`. The plan borrows the tensors, so [`fill`](Self::fill)
/// writes exactly the tensors it was made for. A plan with only MXFP8 entries equals
/// [`BucketPlan::new`](crate::BucketPlan::new)'s.
///
/// ```
/// # use mxfp8::{ExportOptions, ManagedTensor, MixedBucketPlan, MixedTensor, Nvfp4TensorBuilder, TensorBuilder};
/// # fn main() -> Result<(), mxfp8::Error> {
/// let mxfp8 = TensorBuilder::new()
///     .rowwise(ManagedTensor::from_host_bytes(vec![0x38; 4 * 64], &[4, 64])?,
///              ManagedTensor::from_host_bytes(vec![127; 4 * 2], &[4, 2])?)
///     .build()?;
/// let nvfp4 = Nvfp4TensorBuilder::new()
///     .rowwise(ManagedTensor::from_host_bytes(vec![0x21; 2 * 16], &[2, 16])?,
///              ManagedTensor::from_host_bytes(vec![0x38; 2 * 2], &[2, 2])?,
///              ManagedTensor::from_host_f32(vec![2688.0], &[1])?)
///     .build()?;
/// let plan = MixedBucketPlan::new(&[MixedTensor::Mxfp8(&mxfp8), MixedTensor::Nvfp4(&nvfp4)],
///                                 &ExportOptions::default(), 256)?;
/// let mut bucket = vec![0u8; plan.total_bytes() as usize];
/// plan.fill(&mut bucket)?;
/// let amax = plan.nvfp4_entries()[1];
/// let at = amax.amax_offset as usize;
/// assert_eq!(f32::from_le_bytes(bucket[at..at + 4].try_into().unwrap()), 2688.0);
/// assert_eq!(plan.nvfp4_entries()[0], Default::default()); // an MXFP8 entry has no amax part
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MixedBucketPlan<'t> {
    tensors: Vec<MixedTensor<'t>>,
    options: ExportOptions,
    entries: Vec<BucketEntry>,
    nvfp4_entries: Vec<Nvfp4BucketEntry>,
    total_bytes: u64,
}

impl<'t> MixedBucketPlan<'t> {
    /// Plans a bucket for `tensors` in `options`' direction (every tensor's, NVFP4 ones included; the
    /// stream is kept for [`fill_device`](Self::fill_device)), every part starting at a multiple of
    /// `alignment` (a power of two). The options' scale fix-up rewrites E8M0 bytes and so applies to the
    /// MXFP8 entries only (NVFP4 scales travel as stored). All tensors live on one device. Touches no
    /// tensor memory.
    pub fn new(tensors: &[MixedTensor<'t>], options: &ExportOptions, alignment: u64) -> Result<Self, Error> {
        let handles = Handles::new(tensors).either();
        Transfer::stored_scales(&options.to_sys())?;
        let (parts, total_bytes) = Transfer::from_tensors(&handles, &options.to_sys(), ptr::null()).bucket_parts(alignment)?;
        let entries = parts.iter().map(entry_of).collect();
        let nvfp4_entries = parts
            .iter()
            .zip(tensors)
            .map(|(p, t)| match t {
                MixedTensor::Nvfp4(t) => Nvfp4BucketEntry { amax_offset: p.amax_offset, amax_bytes: p.amax_bytes, e4m3_max: t.e4m3_max(), reserved: 0 },
                MixedTensor::Mxfp8(_) => Nvfp4BucketEntry::default(),
            })
            .collect();
        Ok(Self { tensors: tensors.to_vec(), options: *options, entries, nvfp4_entries, total_bytes })
    }

    /// The tensors, in bucket order.
    pub fn tensors(&self) -> &[MixedTensor<'t>] {
        &self.tensors
    }

    /// The values and scales parts of every entry, in tensor order.
    pub fn entries(&self) -> &[BucketEntry] {
        &self.entries
    }

    /// The amax part of every NVFP4 entry (all zero for an MXFP8 one), in tensor order.
    pub fn nvfp4_entries(&self) -> &[Nvfp4BucketEntry] {
        &self.nvfp4_entries
    }

    /// The bucket size needed.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The direction the bucket carries.
    pub fn direction(&self) -> Direction {
        self.options.get_direction()
    }

    /// The manifest a receiver needs, naming the tensors in order (one name per tensor): an MXFP8 entry
    /// as [`BucketPlan::manifest`](crate::BucketPlan::manifest) describes it, an NVFP4 entry with its
    /// amax part and E4M3_MAX.
    pub fn manifest<S: Into<String>>(&self, names: impl IntoIterator<Item = S>) -> Result<MixedManifest, Error> {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        if names.len() != self.tensors.len() {
            return Err(invalid(format!("{} names for {} tensors", names.len(), self.tensors.len())));
        }
        let direction = self.direction();
        let entries = names
            .into_iter()
            .zip(&self.tensors)
            .zip(self.entries.iter().zip(&self.nvfp4_entries))
            .map(|((name, t), (e, n))| match t {
                MixedTensor::Mxfp8(t) => MixedManifestEntry::Mxfp8(ManifestEntry {
                    name,
                    shape: t.shape().to_vec(),
                    format: t.format(),
                    values_offset: e.values_offset,
                    values_bytes: e.values_bytes,
                    scales_offset: e.scales_offset,
                    scales_bytes: e.scales_bytes,
                    scales_shape: compact_scales_shape(t.shape(), direction),
                }),
                MixedTensor::Nvfp4(t) => MixedManifestEntry::Nvfp4(Nvfp4ManifestEntry {
                    name,
                    shape: t.shape().to_vec(),
                    values_offset: e.values_offset,
                    values_bytes: e.values_bytes,
                    scales_offset: e.scales_offset,
                    scales_bytes: e.scales_bytes,
                    scales_shape: nvfp4_scales_shape(t.shape(), direction),
                    amax_offset: n.amax_offset,
                    amax_bytes: n.amax_bytes,
                    e4m3_max: n.e4m3_max,
                }),
            })
            .collect();
        Ok(MixedManifest { entries })
    }

    /// Fills a host bucket (at least [`total_bytes`](Self::total_bytes) long,
    /// `mxfp8_transfer` into the bucket): MXFP8 entries as [`BucketPlan::fill`](crate::BucketPlan::fill)
    /// fills them; NVFP4 values and amax copied, E4M3 scales cropped or unswizzled into place. Everything
    /// is checked before anything is written; bytes between parts are left as they were.
    pub fn fill(&self, bucket: &mut [u8]) -> Result<(), Error> {
        // SAFETY: the tensor describes the exclusively borrowed slice; host work is done when the call returns.
        with_byte_tensor(bucket.as_mut_ptr() as *const c_void, bucket.len(), HOST, |t| unsafe { self.export_raw(t, None) })
    }

    /// Fills a device bucket: one launch for every entry of both kinds, queued on the plan's stream; the
    /// call does not wait.
    pub fn fill_device(&self, bucket: DeviceBytes) -> Result<(), Error> {
        // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
        with_byte_tensor(bucket.as_ptr(), bucket.len(), bucket.device(), |t| unsafe { self.export_raw(t, None) })
    }

    /// Fills `bucket`, or with `prepare` prepares the fill (`mxfp8_transfer_prepare`, see
    /// [`PreparedExport`](crate::PreparedExport)), whose plan keeps the bucket's address: the caller keeps
    /// it valid.
    pub(crate) unsafe fn export_raw(&self, bucket: &mut sys::DLTensor, prepare: Option<&mut *mut sys::mxfp8_plan>) -> Result<(), Error> {
        let handles = Handles::new(&self.tensors).either();
        let o = self.options.to_sys();
        let parts = self
            .entries
            .iter()
            .zip(&self.nvfp4_entries)
            .map(|(e, n)| sys::mxfp8_bucket_part { amax_offset: n.amax_offset, amax_bytes: n.amax_bytes, ..part_of(e) })
            .collect();
        let t = Transfer::from_tensors(&handles, &o, ptr::null()).into_bucket(bucket, parts);
        match prepare {
            None => t.run(o.stream),
            Some(out) => t.prepare(out),
        }
    }
}

/// An NVFP4 tensor's destination in an engine's host parameters, written in place (every byte, padding
/// included).
pub struct Nvfp4ImportTarget<'a> {
    /// The packed E2M1 values, `rows * cols / 2` bytes of the stored matrix (vLLM's uint8 `weight`
    /// `[N, K/2]`).
    pub values: &'a mut [u8],
    /// The E4M3 block scales in `layout`: [`Layout::Compact`] (`rows * ceil(cols / 16)` bytes, vLLM's
    /// `weight_scale` as loaded) or [`Layout::Cutlass128x4`] (`roundup(rows, 128) *
    /// roundup(ceil(cols / 16), 4)` bytes, padding zero: what vLLM's ModelOpt path swizzles it into). The
    /// other layouts are MXFP8-only.
    pub scales: &'a mut [u8],
    /// The layout the engine wants.
    pub layout: Layout,
    /// One float32 per amax (1, or rows for a per-row amax), receiving each amax in the call's
    /// [`GlobalScale`] convention, bit for bit what [`Nvfp4Tensor::global_scale`] returns.
    pub global_scale: &'a mut [f32],
}

/// One destination of a mixed import: an MXFP8 target for an MXFP8 tensor, an NVFP4 one for an NVFP4
/// tensor. More kinds may come, so a `match` on it needs a `_` arm.
#[non_exhaustive]
pub enum MixedImportTarget<'a> {
    /// Values and E8M0 scales, as [`import_tensors_host`](crate::import_tensors_host) writes them.
    Mxfp8(ImportTarget<'a>),
    /// Packed values, E4M3 scales and the global scale.
    Nvfp4(Nvfp4ImportTarget<'a>),
}

/// [`Nvfp4ImportTarget`] in device memory (or any memory DLPack names), written by work queued on the
/// call's stream.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeviceNvfp4ImportTarget {
    /// The packed values, `rows * cols / 2` bytes.
    pub values: DeviceBytes,
    /// The E4M3 block scales in `layout`, exactly the bytes it needs.
    pub scales: DeviceBytes,
    /// [`Layout::Compact`] or [`Layout::Cutlass128x4`].
    pub layout: Layout,
    /// 4 bytes per amax, aligned to 4 bytes: the global scales.
    pub global_scale: DeviceBytes,
}

/// One destination of a mixed import in device memory. More kinds may come, so a `match` on it needs a
/// `_` arm.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceMixedImportTarget {
    /// As [`import_tensors_device`](crate::import_tensors_device) takes it.
    Mxfp8(DeviceImportTarget),
    /// Packed values, E4M3 scales and the global scale.
    Nvfp4(DeviceNvfp4ImportTarget),
}

/// The destinations and global scales as the transfer's destination arrays take them; the DLTensors point
/// into the owned arrays, which live as long as this does.
pub(crate) struct MixedDestinations {
    destinations: Destinations,
    _shapes: Vec<[i64; 1]>,
    _globals: Vec<sys::DLTensor>,
    global_ptrs: Vec<*mut sys::DLTensor>,
}

/// One target's parts: values, scales, layout, and the global scale of an NVFP4 one (elements, not bytes).
type TargetParts = (Part, Part, Layout, Option<Part>);

impl MixedDestinations {
    fn new(parts: Vec<TargetParts>) -> Self {
        let destinations = Destinations::new(&parts.iter().map(|(v, s, l, _)| (*v, *s, *l)).collect::<Vec<_>>());
        let mut shapes: Vec<[i64; 1]> = parts.iter().map(|(.., g)| [g.map_or(0, |g| g.1 as i64)]).collect();
        let mut globals: Vec<sys::DLTensor> = parts
            .iter()
            .zip(shapes.iter_mut())
            .map(|((.., g), shape)| {
                let (p, _, device) = g.unwrap_or((ptr::null(), 0, HOST));
                dl_tensor(p, device, FLOAT32, shape)
            })
            .collect();
        // Pointers into `globals` are taken after it stops growing; an MXFP8 entry's is NULL.
        let global_ptrs = parts
            .iter()
            .zip(globals.iter_mut())
            .map(|((.., g), t)| if g.is_some() { t as *mut sys::DLTensor } else { ptr::null_mut() })
            .collect();
        Self { destinations, _shapes: shapes, _globals: globals, global_ptrs }
    }

    pub(crate) fn host(targets: &mut [MixedImportTarget<'_>]) -> Self {
        let bytes = |b: &mut [u8]| (b.as_mut_ptr() as *const c_void, b.len(), HOST);
        let parts = targets
            .iter_mut()
            .map(|t| match t {
                MixedImportTarget::Mxfp8(t) => (bytes(t.values), bytes(t.scales), t.layout, None),
                MixedImportTarget::Nvfp4(t) => {
                    let g = (t.global_scale.as_mut_ptr() as *const c_void, t.global_scale.len(), HOST);
                    (bytes(t.values), bytes(t.scales), t.layout, Some(g))
                }
            })
            .collect();
        Self::new(parts)
    }

    pub(crate) fn device(targets: &[DeviceMixedImportTarget]) -> Result<Self, Error> {
        let part = |b: &DeviceBytes| (b.as_ptr() as *const c_void, b.len(), b.device());
        let parts = targets
            .iter()
            .enumerate()
            .map(|(i, t)| match t {
                DeviceMixedImportTarget::Mxfp8(t) => Ok((part(&t.values), part(&t.scales), t.layout, None)),
                DeviceMixedImportTarget::Nvfp4(t) => {
                    let n = float32_elements(&t.global_scale, &format!("targets[{i}].global_scale"))?;
                    let g = (t.global_scale.as_ptr() as *const c_void, n as usize, t.global_scale.device());
                    Ok((part(&t.values), part(&t.scales), t.layout, Some(g)))
                }
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Self::new(parts))
    }

    /// `t` into these destinations, each NVFP4 entry's amax written to its global scale in `convention`
    /// (`mxfp8_nvfp4_global_scale`); the arrays live in this value, which must outlive the transfer's use.
    fn receive(&self, t: Transfer, convention: i32) -> Transfer {
        self.destinations.receive(t).with_global_scales(self.global_ptrs.as_ptr(), convention)
    }

    /// Checks that target i is of entry i's kind, given as "is NVFP4" (the C call would name a missing
    /// global scale; this names the mismatch). `what` names an entry, `whats` several.
    fn check_kinds(&self, nvfp4: impl ExactSizeIterator<Item = bool>, what: &str, whats: &str) -> Result<(), Error> {
        if nvfp4.len() != self.global_ptrs.len() {
            return Err(invalid(format!("{} {whats} but {} targets", nvfp4.len(), self.global_ptrs.len())));
        }
        for (i, (is_nvfp4, g)) in nvfp4.zip(&self.global_ptrs).enumerate() {
            match (is_nvfp4, g.is_null()) {
                (false, false) => return Err(invalid(format!("targets[{i}] is an NVFP4 target for an MXFP8 {what}"))),
                (true, true) => return Err(invalid(format!("targets[{i}] is an MXFP8 target for an NVFP4 {what}"))),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The direct path with NVFP4 tensors on host memory (`mxfp8_transfer` from tensors): direction
/// `options.direction` of `tensors[i]` into `targets[i]`, in one pass. An MXFP8 entry is imported as
/// [`import_tensors_host`](crate::import_tensors_host) imports it (the options' scale fix-up applies to
/// it only); an NVFP4 entry's stored matrix is read straight from its storage: values copied, E4M3 scales
/// moved from their stored layout (compact, TE-padded or 128x4) into the target's, each amax written to
/// the target's `global_scale` in the `global_scale` convention. Each target must be of its tensor's
/// kind. No target may overlap another or any buffer of any tensor (amax included). Everything is
/// checked before anything is written.
pub fn import_tensors_mixed_host(
    tensors: &[MixedTensor<'_>],
    options: &ExportOptions,
    global_scale: GlobalScale,
    targets: &mut [MixedImportTarget<'_>],
) -> Result<(), Error> {
    let d = MixedDestinations::host(targets);
    // SAFETY: the tensors are live handles, the targets exclusively borrowed; the library checks that
    // they are host memory like the tensors.
    unsafe { import_tensors_mixed_raw(tensors, options, global_scale, &d, None) }
}

/// [`import_tensors_mixed_host`] on device memory (e.g. a trainer's storage mapped over CUDA IPC into the
/// engine's parameters): one launch on `options`' stream, and one more small kernel per NVFP4 entry for
/// its global scale; the call does not wait.
pub fn import_tensors_mixed_device(
    tensors: &[MixedTensor<'_>],
    options: &ExportOptions,
    global_scale: GlobalScale,
    targets: &[DeviceMixedImportTarget],
) -> Result<(), Error> {
    let d = MixedDestinations::device(targets)?;
    // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
    unsafe { import_tensors_mixed_raw(tensors, options, global_scale, &d, None) }
}

/// The import, or with `prepare` its prepared form (`mxfp8_transfer_prepare`), whose plan
/// keeps the destinations' and global scales' addresses: the caller keeps them valid.
pub(crate) unsafe fn import_tensors_mixed_raw(
    tensors: &[MixedTensor<'_>],
    options: &ExportOptions,
    global_scale: GlobalScale,
    d: &MixedDestinations,
    prepare: Option<&mut *mut sys::mxfp8_plan>,
) -> Result<(), Error> {
    d.check_kinds(tensors.iter().map(|t| matches!(t, MixedTensor::Nvfp4(_))), "tensor", "tensors")?;
    let handles = Handles::new(tensors).either();
    let o = options.to_sys();
    // Every tensor whole: the safe crate takes NVFP4 shards through import_bucket.
    let t = d.receive(Transfer::from_tensors(&handles, &o, ptr::null()), global_scale.to_raw());
    match prepare {
        None => t.run(o.stream),
        Some(out) => t.prepare(out),
    }
}

/// The compact E4M3 scales' shape of an NVFP4 tensor of logical `shape` in `direction`: `(rows,
/// ceil(cols / 16))` for the stored matrix, rowwise `(M, K)`, columnwise the `(K, M)` transpose.
fn nvfp4_scales_shape(shape: &[i64], direction: Direction) -> Vec<i64> {
    let Some((&k, lead)) = shape.split_last() else { return vec![1, 1] };
    let m = lead.iter().product::<i64>();
    let (rows, cols) = match direction {
        Direction::Rowwise => (m, k),
        Direction::Columnwise => (k, m),
    };
    vec![rows, (cols + 15) / 16]
}

/// Where an NVFP4 tensor's parts lie in a bucket, and what the receiver needs to shape them (the fields
/// of a Python `mxfp8.export_bucket` manifest entry of format `"nvfp4"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nvfp4ManifestEntry {
    /// The tensor's name.
    pub name: String,
    /// The logical shape `(*lead, K)`.
    pub shape: Vec<i64>,
    /// Offset of the packed values in the bucket.
    pub values_offset: u64,
    /// `prod(shape) / 2`: two E2M1 values per byte, the even element in the low nibble.
    pub values_bytes: u64,
    /// Offset of the E4M3 block scales in the bucket.
    pub scales_offset: u64,
    /// `prod(scales_shape)` (for compact scales).
    pub scales_bytes: u64,
    /// The compact scales' shape, `(rows, ceil(cols / 16))` of the stored matrix.
    pub scales_shape: Vec<i64>,
    /// Offset of the float32 amax in the bucket, a multiple of 4.
    pub amax_offset: u64,
    /// 4 per amax: 4 (per tensor) or 4 * rows (per row).
    pub amax_bytes: u64,
    /// E4M3_MAX: 448, or 256 for Transformer Engine's 4over6 tensors.
    pub e4m3_max: i32,
}

/// One entry of a bucket of MXFP8 and NVFP4 tensors. More kinds may come, so a `match` on it needs a `_`
/// arm.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MixedManifestEntry {
    /// An MXFP8 tensor.
    Mxfp8(ManifestEntry),
    /// An NVFP4 tensor.
    Nvfp4(Nvfp4ManifestEntry),
}

impl MixedManifestEntry {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Mxfp8(e) => &e.name,
            Self::Nvfp4(e) => &e.name,
        }
    }

    fn is_nvfp4(&self) -> bool {
        matches!(self, Self::Nvfp4(_))
    }

    /// The direction the entry's `scales_shape` names (an entry carries none of its own): rowwise unless
    /// the shape is the columnwise one only; this picks, the library checks.
    fn carried_direction(&self) -> Direction {
        let (shape, scales_shape): (&[i64], &[i64]) = match self {
            Self::Mxfp8(e) => (&e.shape, &e.scales_shape),
            Self::Nvfp4(e) => (&e.shape, &e.scales_shape),
        };
        let names = |direction| match self {
            Self::Mxfp8(_) => scales_shape == compact_scales_shape(shape, direction),
            Self::Nvfp4(_) => scales_shape == nvfp4_scales_shape(shape, direction),
        };
        if names(Direction::Columnwise) && !names(Direction::Rowwise) {
            Direction::Columnwise
        } else {
            Direction::Rowwise
        }
    }

    /// The entry as the transfer reads it.
    fn raw(&self) -> RawEntry<'_> {
        match self {
            Self::Mxfp8(e) => raw_entry(e),
            Self::Nvfp4(e) => {
                let (values, scales) = ((e.values_offset, e.values_bytes), (e.scales_offset, e.scales_bytes));
                RawEntry::new(&e.shape, sys::MXFP8_FORMAT_NVFP4, values, scales, &e.scales_shape)
                    .with_amax((e.amax_offset, e.amax_bytes), e.e4m3_max)
            }
        }
    }
}

/// What a bucket of MXFP8 and NVFP4 tensors holds, tensor by tensor. Made by
/// [`MixedBucketPlan::manifest`] on the sending side, or rebuilt by the receiver from whatever the
/// sender transmitted (its fields are public).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MixedManifest {
    /// The tensors, in bucket order.
    pub entries: Vec<MixedManifestEntry>,
}

/// An NVFP4 tensor inside a host bucket: views that borrow the bucket (and the manifest).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Nvfp4BucketView<'b> {
    /// The tensor's name.
    pub name: &'b str,
    /// The logical shape `(*lead, K)`.
    pub shape: &'b [i64],
    /// The packed E2M1 values of the stored matrix, row-major.
    pub values: &'b [u8],
    /// The compact E4M3 block scales, row-major.
    pub scales: &'b [u8],
    /// The shape of the scales.
    pub scales_shape: &'b [i64],
    /// The float32 amaxes' bytes as the sender's memory holds them (a bucket need not be aligned for
    /// f32; [`amax`](Self::amax) reads them).
    pub amax_bytes: &'b [u8],
    /// E4M3_MAX: 448 or 256.
    pub e4m3_max: i32,
}

impl Nvfp4BucketView<'_> {
    /// The amaxes (one, or one per row). The decode global scale (`weight_scale_2`) is the float32
    /// division `amax / (6 * E4M3_MAX)`.
    pub fn amax(&self) -> Vec<f32> {
        self.amax_bytes.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect()
    }
}

/// One tensor inside a host bucket of MXFP8 and NVFP4 tensors. More kinds may come, so a `match` on it
/// needs a `_` arm.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MixedBucketView<'b> {
    /// An MXFP8 tensor's values and E8M0 scales.
    Mxfp8(BucketView<'b>),
    /// An NVFP4 tensor's packed values, E4M3 scales and amax.
    Nvfp4(Nvfp4BucketView<'b>),
}

impl MixedManifest {
    /// A manifest of `entries`.
    pub fn new(entries: Vec<MixedManifestEntry>) -> Self {
        Self { entries }
    }

    /// Every tensor of a host bucket as views into it, after the library has checked the manifest
    /// against the bucket (`mxfp8_transfer_check` of the bucket: each part of exactly the bytes its shape gives
    /// and inside the bucket, no byte in two parts, `scales_shape` the compact scales of the stored
    /// matrix, an NVFP4 entry's amax at a multiple of 4 and its `e4m3_max` 448 or 256); its refusal
    /// comes back as the error, with the library's message. The views borrow the bucket, so they cannot
    /// outlive it.
    pub fn unpack<'b>(&'b self, bucket: &'b [u8]) -> Result<Vec<MixedBucketView<'b>>, Error> {
        let raw: Vec<RawEntry<'_>> = self.entries.iter().map(|e| e.raw().with_direction(e.carried_direction())).collect();
        check_manifest((bucket.as_ptr() as *const c_void, bucket.len(), HOST), &raw)?;
        // Every part lies inside the bucket (checked), so no slice below can panic.
        let part = |offset: u64, bytes: u64| &bucket[offset as usize..(offset + bytes) as usize];
        Ok(self
            .entries
            .iter()
            .map(|entry| match entry {
                MixedManifestEntry::Mxfp8(e) => MixedBucketView::Mxfp8(BucketView {
                    name: &e.name,
                    shape: &e.shape,
                    format: e.format,
                    values: part(e.values_offset, e.values_bytes),
                    scales: part(e.scales_offset, e.scales_bytes),
                    scales_shape: &e.scales_shape,
                }),
                MixedManifestEntry::Nvfp4(e) => MixedBucketView::Nvfp4(Nvfp4BucketView {
                    name: &e.name,
                    shape: &e.shape,
                    values: part(e.values_offset, e.values_bytes),
                    scales: part(e.scales_offset, e.scales_bytes),
                    scales_shape: &e.scales_shape,
                    amax_bytes: part(e.amax_offset, e.amax_bytes),
                    e4m3_max: e.e4m3_max,
                }),
            })
            .collect())
    }
}

/// How a receiver reads a bucket of MXFP8 and NVFP4 tensors: what the transfer from it needs beyond the
/// bytes. Start from [`MixedBucketImport::new`] (compact scales, no fix-up, the decode global scale)
/// and set what differs. This form takes whole tensors: the C transfer takes NVFP4 shards too
/// (`mxfp8_transfer_desc::shards`), which this crate does not expose yet; for shards of a bucket of MXFP8
/// tensors use [`BucketImport`](crate::BucketImport).
#[derive(Copy, Clone, Debug)]
pub struct MixedBucketImport<'m> {
    /// One entry per tensor, in bucket order.
    pub entries: &'m [MixedManifestEntry],
    /// The direction the bucket carries (NVFP4: the stored matrix of that direction).
    pub direction: Direction,
    /// The layout of the scales in the bucket: [`Layout::Compact`] for what
    /// [`MixedBucketPlan::fill`] writes; an NVFP4 entry's may also be [`Layout::Cutlass128x4`] (its E4M3
    /// scales swizzled as they are); the TRT-LLM layouts are refused.
    pub bucket_scales: Layout,
    /// The rewrite applied to every E8M0 scale written (MXFP8 entries only; NVFP4 scales are left as
    /// they are).
    pub scale_fixup: ScaleFixup,
    /// The convention each amax is written in to an NVFP4 target's `global_scale`.
    pub global_scale: GlobalScale,
}

impl<'m> MixedBucketImport<'m> {
    /// The entries of a bucket of compact scales in `direction`, no fix-up, the decode global scale
    /// (`weight_scale_2`).
    pub fn new(entries: &'m [MixedManifestEntry], direction: Direction) -> Self {
        Self { entries, direction, bucket_scales: Layout::Compact, scale_fixup: ScaleFixup::None, global_scale: GlobalScale::Decode }
    }
}

/// Writes every tensor of a host bucket of MXFP8 and NVFP4 tensors into `targets[i]` (one per manifest
/// entry, in order, of the entry's kind) with `mxfp8_transfer` from the bucket: an MXFP8 entry as
/// [`import_bucket_host_with`](crate::import_bucket_host_with) writes it; an NVFP4 entry's values
/// copied, its E4M3 scales moved into the target's layout (compact or 128x4), and each amax written to
/// the target's `global_scale` in the import's convention, bit for bit what
/// [`Nvfp4Tensor::global_scale`] gives. Everything is checked before anything is written.
pub fn import_bucket_mixed_host(bucket: &[u8], import: &MixedBucketImport<'_>, targets: &mut [MixedImportTarget<'_>]) -> Result<(), Error> {
    let d = MixedDestinations::host(targets);
    // SAFETY: every pointer refers to memory borrowed for this call (the bucket shared, the targets
    // exclusively); host work is done when the call returns.
    unsafe { import_bucket_mixed_raw((bucket.as_ptr() as *const c_void, bucket.len(), HOST), import, &d, Stream::default(), None) }
}

/// [`import_bucket_mixed_host`] on device memory: the values and scales in the bucket's one launch, and
/// one more small kernel per NVFP4 entry for its global scale, queued on `stream`; the call does not wait.
pub fn import_bucket_mixed_device(
    bucket: DeviceBytes,
    import: &MixedBucketImport<'_>,
    targets: &[DeviceMixedImportTarget],
    stream: Stream,
) -> Result<(), Error> {
    let d = MixedDestinations::device(targets)?;
    // SAFETY: DeviceBytes' and Stream's constructors promised the memory and the stream.
    unsafe { import_bucket_mixed_raw((bucket.as_ptr() as *const c_void, bucket.len(), bucket.device()), import, &d, stream, None) }
}

/// The import of a bucket, or with `prepare` its prepared form (`mxfp8_transfer_prepare`), whose
/// plan keeps the bucket's, destinations' and global scales' addresses: the caller keeps them valid.
pub(crate) unsafe fn import_bucket_mixed_raw(
    bucket: Part,
    import: &MixedBucketImport<'_>,
    d: &MixedDestinations,
    stream: Stream,
    prepare: Option<&mut *mut sys::mxfp8_plan>,
) -> Result<(), Error> {
    d.check_kinds(import.entries.iter().map(MixedManifestEntry::is_nvfp4), "manifest entry", "manifest entries")?;
    let raw: Vec<RawEntry<'_>> = import.entries.iter().map(MixedManifestEntry::raw).collect();
    let fields =
        ManifestFields { direction: import.direction, bucket_scales: import.bucket_scales, scale_fixup: import.scale_fixup, shards: None };
    with_byte_tensor(bucket.0, bucket.1, bucket.2, |dl| {
        let t = d.receive(Transfer::from_manifest(dl, &raw, &fields), import.global_scale.to_raw());
        match prepare {
            None => t.run(stream.as_raw()),
            Some(out) => t.prepare(out),
        }
    })
}
