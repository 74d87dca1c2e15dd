//! The library's one call for moving many tensors (`mxfp8_transfer_desc`), built from what the crate's
//! buckets, imports and prepared exports hold: each of them is a desc from tensors or a bucket into a
//! bucket, caller buffers or nothing (a check), run once, checked, or prepared.
use std::ffi::c_void;
use std::ptr;

use crate::error::{check, invalid, Error};
use crate::sys;

/// A desc and the arrays it points into. Moving the value moves no array (they live on the heap), so the
/// desc stays valid; what it borrows from the caller (tensor handles, shards, destinations, the bucket)
/// must outlive its use.
pub(crate) struct Transfer {
    pub desc: sys::mxfp8_transfer_desc,
    directions: Vec<i32>,
    parts_in: Vec<sys::mxfp8_bucket_part>,
    parts_out: Vec<sys::mxfp8_bucket_part>,
    formats: Vec<i32>,
    source_layouts: Vec<i32>,
    e4m3_maxes: Vec<i32>,
    values: Vec<*mut sys::DLTensor>,
    scales: Vec<*mut sys::DLTensor>,
    targets: Vec<i32>,
}

impl Transfer {
    fn empty() -> Self {
        Self {
            desc: sys::mxfp8_transfer_desc::default(),
            directions: Vec::new(),
            parts_in: Vec::new(),
            parts_out: Vec::new(),
            formats: Vec::new(),
            source_layouts: Vec::new(),
            e4m3_maxes: Vec::new(),
            values: Vec::new(),
            scales: Vec::new(),
            targets: Vec::new(),
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

    /// From `bucket`, described by a manifest (the crate's manifests are built as the older
    /// `mxfp8_bucket_manifest`): its parts and NVFP4 entries become the desc's parts, its formats,
    /// layouts (compact when not given) and E4M3_MAX the desc's arrays; shards, fix-up and global scales
    /// carry over.
    pub fn from_manifest(bucket: *const sys::DLTensor, m: &sys::mxfp8_bucket_manifest) -> Self {
        // The crate's manifests always carry their entries; NULL ones are left for the library to name.
        let n = if m.entries.is_null() { 0 } else { m.count };
        let mut t = Self::empty();
        // SAFETY: the manifest's arrays hold `count` elements each where set (the crate builds them so).
        let at = |p: *const i32, i: usize, default: i32| if p.is_null() { default } else { unsafe { *p.add(i) } };
        for i in 0..n {
            let e = unsafe { *m.entries.add(i) };
            let nv = if m.nvfp4_entries.is_null() { sys::mxfp8_bucket_nvfp4_entry::default() } else { unsafe { *m.nvfp4_entries.add(i) } };
            t.parts_in.push(sys::mxfp8_bucket_part {
                values_offset: e.values_offset,
                values_bytes: e.values_bytes,
                scales_offset: e.scales_offset,
                scales_bytes: e.scales_bytes,
                amax_offset: nv.amax_offset,
                amax_bytes: nv.amax_bytes,
            });
            t.formats.push(at(m.formats, i, sys::MXFP8_FORMAT_E4M3));
            t.source_layouts.push(at(m.scales_layouts, i, sys::MXFP8_LAYOUT_COMPACT));
            t.e4m3_maxes.push(nv.e4m3_max);
        }
        let d = &mut t.desc;
        d.source = sys::MXFP8_TRANSFER_FROM_BUCKET;
        d.count = m.count;
        d.bucket_in = bucket;
        d.parts_in = if m.entries.is_null() { ptr::null() } else { t.parts_in.as_ptr() };
        d.ndims = m.ndims;
        d.shapes = m.shapes;
        d.formats = t.formats.as_ptr();
        d.directions = m.directions;
        d.source_layouts = t.source_layouts.as_ptr();
        d.e4m3_maxes = t.e4m3_maxes.as_ptr();
        d.scales_ndims = m.scales_ndims;
        d.scales_shapes = m.scales_shapes;
        d.shards = m.shards;
        d.scale_fixup = m.scale_fixup;
        d.global_scales = m.global_scales;
        d.global_scale = m.global_scale;
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

    /// Into the engine's buffers: `destinations[i]` receives entry i (values, scales in its layout); NVFP4
    /// entries' global scales go to `global_scales` (NULL when there is none) in `convention`.
    pub fn into_buffers(mut self, destinations: &[sys::mxfp8_import_destination], global_scales: *const *mut sys::DLTensor,
                        convention: i32) -> Self {
        self.values = destinations.iter().map(|d| d.values).collect();
        self.scales = destinations.iter().map(|d| d.scales).collect();
        self.targets = destinations.iter().map(|d| d.scales_layout).collect();
        let d = &mut self.desc;
        d.destination = sys::MXFP8_TRANSFER_TO_BUFFERS;
        d.values = self.values.as_ptr();
        d.scales = self.scales.as_ptr();
        d.target_layouts = self.targets.as_ptr();
        if !global_scales.is_null() {
            d.global_scales = global_scales;
            d.global_scale = convention;
        }
        self
    }

    /// The source side alone, for `mxfp8_transfer_check`.
    pub fn into_nothing(mut self) -> Self {
        self.desc.destination = sys::MXFP8_TRANSFER_TO_NOTHING;
        self.desc.global_scales = ptr::null();
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
