//! The library's one call for moving many tensors (`mxfp8_transfer_desc`), built from what the crate's
//! buckets, imports and prepared exports hold: each of them is a desc from tensors or a bucket into a
//! bucket, caller buffers or nothing (a check), run once, checked, or prepared.
use std::ffi::c_void;
use std::ptr;

use crate::error::{check, invalid, Error};
use crate::import::{ManifestFields, RawEntry};
use crate::shard::RawShards;
use crate::sys;

/// A desc and the arrays it points into. Moving the value moves no array (they live on the heap), so the
/// desc stays valid; what it borrows from the caller (tensor handles, shards, manifest shapes,
/// destinations, the bucket) must outlive its use.
pub(crate) struct Transfer {
    pub desc: sys::mxfp8_transfer_desc,
    directions: Vec<i32>,
    shards: Option<RawShards>,
    parts_in: Vec<sys::mxfp8_bucket_part>,
    ndims: Vec<i32>,
    shapes: Vec<*const i64>,
    formats: Vec<i32>,
    source_layouts: Vec<i32>,
    e4m3_maxes: Vec<i32>,
    scales_ndims: Vec<i32>,
    scales_shapes: Vec<*const i64>,
    parts_out: Vec<sys::mxfp8_bucket_part>,
}

impl Transfer {
    fn empty() -> Self {
        Self {
            desc: sys::mxfp8_transfer_desc::default(),
            directions: Vec::new(),
            shards: None,
            parts_in: Vec::new(),
            ndims: Vec::new(),
            shapes: Vec::new(),
            formats: Vec::new(),
            source_layouts: Vec::new(),
            e4m3_maxes: Vec::new(),
            scales_ndims: Vec::new(),
            scales_shapes: Vec::new(),
            parts_out: Vec::new(),
        }
    }

    /// From `tensors` (handles of either format: an NVFP4 handle is an `mxfp8_tensor` of format NVFP4),
    /// every entry in `options`' direction, with its scale fix-up; `shards` NULL or one pointer per tensor.
    pub fn from_tensors(tensors: &[*const sys::mxfp8_tensor], options: &sys::mxfp8_export_options,
                        shards: *const *const sys::mxfp8_shard) -> Self {
        let mut t = Self::empty();
        t.directions = vec![options.direction; tensors.len()];
        t.desc.scale_fixup = options.scale_fixup;
        t.desc.source = sys::MXFP8_TRANSFER_FROM_TENSORS;
        t.desc.count = tensors.len();
        t.desc.tensors = tensors.as_ptr();
        t.desc.directions = t.directions.as_ptr();
        t.desc.shards = shards;
        t
    }

    /// Buckets and batched exports carry the stored per-32 scales: options asking for per-32x32 ones are
    /// refused (the desc has no such field to ignore them in), as the calls before the transfer refused them.
    pub fn stored_scales(options: &sys::mxfp8_export_options) -> Result<(), Error> {
        if options.scales_granularity != sys::MXFP8_SCALES_PER_32 {
            return Err(invalid("buckets and batched exports carry the stored per-32 scales: the options' granularity \
                                must be ScalesGranularity::Per32"));
        }
        Ok(())
    }

    /// From `bucket`, described by the manifest's `entries` (each entry's parts, shape, format, E4M3_MAX,
    /// scales shape and direction, else `fields.direction`) and the `fields` they share (the bucket's
    /// scales layout, the fix-up, the shards).
    pub fn from_manifest(bucket: *const sys::DLTensor, entries: &[RawEntry<'_>], fields: &ManifestFields<'_>) -> Self {
        let mut t = Self::empty();
        t.directions = entries.iter().map(|e| e.direction.unwrap_or(fields.direction).to_raw()).collect();
        t.shards = fields.shards.map(RawShards::new);
        t.parts_in = entries.iter().map(|e| e.part).collect();
        t.ndims = entries.iter().map(|e| e.shape.len() as i32).collect();
        t.shapes = entries.iter().map(|e| e.shape.as_ptr()).collect();
        t.formats = entries.iter().map(|e| e.format).collect();
        t.source_layouts = vec![fields.bucket_scales.to_raw(); entries.len()];
        t.e4m3_maxes = entries.iter().map(|e| e.e4m3_max).collect();
        t.scales_ndims = entries.iter().map(|e| e.scales_shape.len() as i32).collect();
        t.scales_shapes = entries.iter().map(|e| e.scales_shape.as_ptr()).collect();
        let d = &mut t.desc;
        d.source = sys::MXFP8_TRANSFER_FROM_BUCKET;
        d.count = entries.len();
        d.bucket_in = bucket;
        d.directions = t.directions.as_ptr();
        d.shards = t.shards.as_ref().map_or(ptr::null(), RawShards::as_ptr);
        d.parts_in = t.parts_in.as_ptr();
        d.ndims = t.ndims.as_ptr();
        d.shapes = t.shapes.as_ptr();
        d.formats = t.formats.as_ptr();
        d.source_layouts = t.source_layouts.as_ptr();
        d.e4m3_maxes = t.e4m3_maxes.as_ptr();
        d.scales_ndims = t.scales_ndims.as_ptr();
        d.scales_shapes = t.scales_shapes.as_ptr();
        d.scale_fixup = fields.scale_fixup.to_raw();
        t
    }

    /// Into `bucket` at `parts` (from [`bucket_parts`](Self::bucket_parts) for the same desc).
    pub fn into_bucket(mut self, bucket: *mut sys::DLTensor, parts: Vec<sys::mxfp8_bucket_part>) -> Self {
        self.parts_out = parts;
        self.desc.destination = sys::MXFP8_TRANSFER_TO_BUCKET;
        self.desc.bucket_out = bucket;
        self.desc.parts_out = self.parts_out.as_ptr();
        self
    }

    /// Into the engine's buffers: entry i's values to `values[i]` (NULL: its scales only), its scales to
    /// `scales[i]` in `layouts[i]`. The arrays are borrowed: they must outlive the transfer's use.
    pub fn into_buffers(mut self, values: &[*mut sys::DLTensor], scales: &[*mut sys::DLTensor], layouts: &[i32]) -> Self {
        let d = &mut self.desc;
        d.destination = sys::MXFP8_TRANSFER_TO_BUFFERS;
        d.values = values.as_ptr();
        d.scales = scales.as_ptr();
        d.target_layouts = layouts.as_ptr();
        self
    }

    /// NVFP4 entries' global scales, in `convention` (`mxfp8_nvfp4_global_scale`), to `global_scales[i]`
    /// (`count` pointers, NULL at MXFP8 entries; borrowed as [`into_buffers`](Self::into_buffers)' arrays).
    pub fn with_global_scales(mut self, global_scales: *const *mut sys::DLTensor, convention: i32) -> Self {
        self.desc.global_scales = global_scales;
        self.desc.global_scale = convention;
        self
    }

    /// The source side alone, for `mxfp8_transfer_check`.
    pub fn into_nothing(mut self) -> Self {
        self.desc.destination = sys::MXFP8_TRANSFER_TO_NOTHING;
        self
    }

    /// `mxfp8_bucket_parts`: lays out the bucket of a desc from tensors (every part at a multiple of
    /// `alignment`); the parts and the bucket's size.
    pub fn bucket_parts(mut self, alignment: u64) -> Result<(Vec<sys::mxfp8_bucket_part>, u64), Error> {
        self.desc.destination = sys::MXFP8_TRANSFER_TO_BUCKET;
        let mut parts = vec![sys::mxfp8_bucket_part::default(); self.desc.count];
        let mut total = 0u64;
        // SAFETY: `parts` holds count elements; the desc's arrays live in self or with the caller.
        check(unsafe { sys::mxfp8_bucket_parts(&self.desc, alignment, parts.as_mut_ptr(), &mut total) })?;
        Ok((parts, total))
    }

    /// Runs the transfer on `stream` (NULL: the legacy default; host memory: done on return).
    ///
    /// # Safety
    /// Every pointer of the desc refers to memory valid for the call (and, on a device, for the queued work).
    pub unsafe fn run(&self, stream: *mut c_void) -> Result<(), Error> {
        check(sys::mxfp8_transfer(&self.desc, stream))
    }

    /// `mxfp8_transfer_check`: every check, nothing written.
    pub fn check(&self) -> Result<(), Error> {
        // SAFETY: the check reads addresses and sizes, never the bytes behind them.
        check(unsafe { sys::mxfp8_transfer_check(&self.desc) })
    }

    /// `mxfp8_transfer_prepare`: the checks once, the plan into `out`.
    ///
    /// # Safety
    /// The plan keeps the bucket's and the destinations' addresses: the caller keeps them valid.
    pub unsafe fn prepare(&self, out: &mut *mut sys::mxfp8_plan) -> Result<(), Error> {
        check(sys::mxfp8_transfer_prepare(&self.desc, out))
    }
}
