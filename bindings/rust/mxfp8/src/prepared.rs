//! Prepared exports: a batched export checked once and run at every step with one launch.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::bucket::BucketPlan;
use crate::error::{check, invalid, Error};
use crate::import::{prepare_import, BucketImport, DeviceImportTarget, Destinations, ImportSource, ImportTarget};
use crate::memory::{dl_tensor, with_byte_tensor, DeviceBytes, HOST, UINT8};
use crate::mixed::{
    import_bucket_mixed_raw, import_tensors_mixed_raw, DeviceMixedImportTarget, MixedBucketImport, MixedBucketPlan, MixedDestinations,
    MixedImportTarget, MixedTensor,
};
use crate::nvfp4::GlobalScale;
use crate::options::{ExportOptions, Stream};
use crate::shard::Shard;
use crate::sys;
use crate::tensor::Tensor;
use crate::transfer::Transfer;

/// An `mxfp8_plan`: the checks of a batched export, bucket fill or import done once, its work kept. Each
/// [`run`](PreparedExport::run) is one launch with no check, no allocation and no synchronization, so it
/// can be captured in a CUDA graph. The plan holds a reference on every tensor; the destinations stay
/// borrowed (host slices) or promised (device memory) for the plan's lifetime `'a`.
///
/// A plan is `Send` but not `Sync`: its runs write the same destinations, so two at once would race.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<mxfp8::PreparedExport<'static>>();
/// ```
pub struct PreparedExport<'a> {
    raw: NonNull<sys::mxfp8_plan>,
    _destinations: PhantomData<&'a mut [u8]>,
}

// SAFETY: the plan is immutable and owns its tensor references (the header: it may be run and released
// from any thread); the borrowed destinations are tied to 'a. Not Sync: two runs of one plan that overlap
// write the same destinations (the header says they must be ordered), so `run(&self)` from two threads
// would be a data race in safe code. Share one behind a Mutex, or prepare one plan per thread.
unsafe impl Send for PreparedExport<'_> {}

impl<'a> PreparedExport<'a> {
    /// Prepares [`export_scales_batched`](crate::export_scales_batched) into host slices, which stay
    /// borrowed until the plan is dropped: every run writes them again.
    pub fn scales_batched(tensors: &[&Tensor], destinations: &'a mut [&'a mut [u8]], options: &ExportOptions) -> Result<Self, Error> {
        let dls: Vec<(*const core::ffi::c_void, usize)> =
            destinations.iter_mut().map(|d| (d.as_mut_ptr() as *const core::ffi::c_void, d.len())).collect();
        // SAFETY: the slices are exclusively borrowed for 'a, as long as the plan can run.
        unsafe { Self::prepare(tensors, &dls, HOST, options) }
    }

    /// Prepares [`export_scales_batched_device`](crate::export_scales_batched_device). Each
    /// [`DeviceBytes`] promise extends to every run of the plan.
    pub fn scales_batched_device(tensors: &[&Tensor], destinations: &[DeviceBytes], options: &ExportOptions) -> Result<Self, Error> {
        let device = destinations.first().map(|d| d.device()).unwrap_or(HOST);
        let dls: Vec<(*const core::ffi::c_void, usize)> = destinations.iter().map(|d| (d.as_ptr() as *const core::ffi::c_void, d.len())).collect();
        // SAFETY: DeviceBytes' constructor promised the memory for the work queued on it.
        unsafe { Self::prepare(tensors, &dls, device, options) }
    }

    unsafe fn prepare(
        tensors: &[&Tensor],
        buffers: &[(*const core::ffi::c_void, usize)],
        device: sys::DLDevice,
        options: &ExportOptions,
    ) -> Result<Self, Error> {
        if tensors.len() != buffers.len() {
            return Err(invalid(format!("{} tensors but {} destinations", tensors.len(), buffers.len())));
        }
        let mut shapes: Vec<[i64; 1]> = buffers.iter().map(|(_, len)| [*len as i64]).collect();
        let mut dls: Vec<sys::DLTensor> = buffers.iter().zip(&mut shapes).map(|((p, _), s)| dl_tensor(*p, device, UINT8, s)).collect();
        let ptrs: Vec<*mut sys::DLTensor> = dls.iter_mut().map(|d| d as *mut _).collect();
        let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
        Transfer::stored_scales(&options.to_sys())?;
        let mut t = Transfer::from_tensors(&handles, &options.to_sys(), core::ptr::null());
        // Scales only: the transfer's destination buffers without a values array.
        t.desc.destination = sys::MXFP8_TRANSFER_TO_BUFFERS;
        t.desc.scales = ptrs.as_ptr();
        let mut raw = core::ptr::null_mut();
        // The library copies what it keeps (the jobs hold addresses, not the DLTensors).
        t.prepare(&mut raw)?;
        Ok(Self::from_raw(raw))
    }

    /// Prepares `plan`'s [`fill`](BucketPlan::fill) (`mxfp8_transfer_prepare`, with the shards for a plan of
    /// shards) into a host bucket, which stays borrowed until the plan is dropped: every run fills it
    /// again from the tensors' current bytes. The plan cannot outlive the bucket:
    ///
    /// ```compile_fail,E0597
    /// # use mxfp8::{BucketPlan, ExportOptions, PreparedExport, Stream};
    /// # let plan = BucketPlan::new(&[], &ExportOptions::default(), 256).unwrap();
    /// let prepared = {
    ///     let mut bucket = vec![0u8; 64];
    ///     PreparedExport::bucket(&plan, &mut bucket).unwrap()
    /// }; // error: `bucket` does not live long enough
    /// prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    /// ```
    pub fn bucket(plan: &BucketPlan<'_>, bucket: &'a mut [u8]) -> Result<Self, Error> {
        // SAFETY: the bucket is exclusively borrowed for 'a, as long as the plan can run.
        unsafe { Self::prepare_bucket((bucket.as_mut_ptr() as *const c_void, bucket.len(), HOST), |t, out| plan.transfer_raw(t, Some(out))) }
    }

    /// Prepares `plan`'s [`fill_device`](BucketPlan::fill_device). The [`DeviceBytes`] promise extends
    /// to every run of the plan.
    pub fn bucket_device(plan: &BucketPlan<'_>, bucket: DeviceBytes) -> Result<Self, Error> {
        // SAFETY: DeviceBytes' constructor promised the memory for the work queued on it.
        unsafe { Self::prepare_bucket((bucket.as_ptr(), bucket.len(), bucket.device()), |t, out| plan.transfer_raw(t, Some(out))) }
    }

    /// Prepares `plan`'s [`fill`](MixedBucketPlan::fill) (`mxfp8_transfer_prepare`) into a host
    /// bucket, which stays borrowed until the prepared export is dropped: every run fills it again from
    /// the tensors' current bytes, MXFP8 and NVFP4 entries in one launch. It holds a reference on every
    /// tensor of both kinds, so it may outlive `plan`, but not the bucket:
    ///
    /// ```compile_fail,E0597
    /// # use mxfp8::{ExportOptions, MixedBucketPlan, PreparedExport, Stream};
    /// # let plan = MixedBucketPlan::new(&[], &ExportOptions::default(), 256).unwrap();
    /// let prepared = {
    ///     let mut bucket = vec![0u8; 64];
    ///     PreparedExport::bucket_mixed(&plan, &mut bucket).unwrap()
    /// }; // error: `bucket` does not live long enough
    /// prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    /// ```
    pub fn bucket_mixed(plan: &MixedBucketPlan<'_>, bucket: &'a mut [u8]) -> Result<Self, Error> {
        // SAFETY: the bucket is exclusively borrowed for 'a, as long as the plan can run.
        unsafe { Self::prepare_bucket((bucket.as_mut_ptr() as *const c_void, bucket.len(), HOST), |t, out| plan.export_raw(t, Some(out))) }
    }

    /// Prepares `plan`'s [`fill_device`](MixedBucketPlan::fill_device). The [`DeviceBytes`] promise
    /// extends to every run of the plan.
    pub fn bucket_mixed_device(plan: &MixedBucketPlan<'_>, bucket: DeviceBytes) -> Result<Self, Error> {
        // SAFETY: DeviceBytes' constructor promised the memory for the work queued on it.
        unsafe { Self::prepare_bucket((bucket.as_ptr(), bucket.len(), bucket.device()), |t, out| plan.export_raw(t, Some(out))) }
    }

    /// Runs a plan's `prepare` on the bucket (address, bytes, device), which the caller keeps valid for
    /// every run.
    unsafe fn prepare_bucket(
        bucket: (*const c_void, usize, sys::DLDevice),
        prepare: impl FnOnce(&mut sys::DLTensor, &mut *mut sys::mxfp8_plan) -> Result<(), Error>,
    ) -> Result<Self, Error> {
        let mut raw = core::ptr::null_mut();
        with_byte_tensor(bucket.0, bucket.1, bucket.2, |t| prepare(t, &mut raw))?;
        Ok(Self::from_raw(raw))
    }

    /// Prepares [`import_bucket_host_with`](crate::import_bucket_host_with) (`mxfp8_transfer_prepare`):
    /// the bucket (read at every run) and the targets (written at every run) stay borrowed until the plan
    /// is dropped. The manifest is not kept.
    pub fn import_bucket(bucket: &'a [u8], import: &BucketImport<'_>, targets: &'a mut [ImportTarget<'a>]) -> Result<Self, Error> {
        let d = Destinations::host(targets);
        let source = ImportSource::Bucket((bucket.as_ptr() as *const core::ffi::c_void, bucket.len(), HOST), import);
        // SAFETY: the bucket is borrowed and the targets exclusively borrowed for 'a.
        unsafe { Self::prepare_import(source, &d) }
    }

    /// Prepares [`import_bucket_device`](crate::import_bucket_device); the [`DeviceBytes`] promises
    /// extend to every run of the plan.
    pub fn import_bucket_device(bucket: DeviceBytes, import: &BucketImport<'_>, targets: &[DeviceImportTarget]) -> Result<Self, Error> {
        let d = Destinations::device(targets);
        let source = ImportSource::Bucket((bucket.as_ptr() as *const core::ffi::c_void, bucket.len(), bucket.device()), import);
        // SAFETY: DeviceBytes' constructor promised the memory for the work queued on it.
        unsafe { Self::prepare_import(source, &d) }
    }

    /// Prepares [`import_tensors_host`](crate::import_tensors_host) (`mxfp8_transfer_prepare`); the
    /// plan holds a reference on every tensor, and the targets stay borrowed until it is dropped.
    pub fn import_tensors(tensors: &[&Tensor], options: &ExportOptions, targets: &'a mut [ImportTarget<'a>]) -> Result<Self, Error> {
        let d = Destinations::host(targets);
        // SAFETY: the targets are exclusively borrowed for 'a.
        unsafe { Self::prepare_import(ImportSource::Tensors(tensors, None, options), &d) }
    }

    /// Prepares [`import_tensor_shards_host`](crate::import_tensor_shards_host)
    /// (`mxfp8_transfer_prepare` with `desc.shards`), as [`import_tensors`](Self::import_tensors).
    pub fn import_tensor_shards(
        tensors: &[&Tensor],
        shards: &[Shard],
        options: &ExportOptions,
        targets: &'a mut [ImportTarget<'a>],
    ) -> Result<Self, Error> {
        let d = Destinations::host(targets);
        // SAFETY: the targets are exclusively borrowed for 'a.
        unsafe { Self::prepare_import(ImportSource::Tensors(tensors, Some(shards), options), &d) }
    }

    /// Prepares [`import_tensors_device`](crate::import_tensors_device), or with `shards`
    /// [`import_tensor_shards_device`](crate::import_tensor_shards_device); the [`DeviceBytes`] promises
    /// extend to every run of the plan.
    pub fn import_tensors_device(
        tensors: &[&Tensor],
        shards: Option<&[Shard]>,
        options: &ExportOptions,
        targets: &[DeviceImportTarget],
    ) -> Result<Self, Error> {
        let d = Destinations::device(targets);
        // SAFETY: DeviceBytes' constructor promised the memory for the work queued on it.
        unsafe { Self::prepare_import(ImportSource::Tensors(tensors, shards, options), &d) }
    }

    /// Prepares [`import_tensors_mixed_host`](crate::import_tensors_mixed_host)
    /// (`mxfp8_transfer_prepare`): the plan holds a reference on every tensor of both kinds,
    /// and the targets (global scales included) stay borrowed until it is dropped; every run writes them
    /// again from the tensors' current bytes.
    ///
    /// ```compile_fail,E0597
    /// # use mxfp8::{ExportOptions, GlobalScale, PreparedExport, Stream};
    /// let prepared = {
    ///     let mut targets = Vec::new();
    ///     PreparedExport::import_tensors_mixed(&[], &ExportOptions::default(), GlobalScale::Decode, &mut targets).unwrap()
    /// }; // error: `targets` does not live long enough
    /// prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    /// ```
    pub fn import_tensors_mixed(
        tensors: &[MixedTensor<'_>],
        options: &ExportOptions,
        global_scale: GlobalScale,
        targets: &'a mut [MixedImportTarget<'a>],
    ) -> Result<Self, Error> {
        let d = MixedDestinations::host(targets);
        let mut raw = core::ptr::null_mut();
        // SAFETY: the targets are exclusively borrowed for 'a, as long as the plan can run.
        unsafe { import_tensors_mixed_raw(tensors, options, global_scale, &d, Some(&mut raw))? };
        Ok(Self::from_raw(raw))
    }

    /// Prepares [`import_tensors_mixed_device`](crate::import_tensors_mixed_device); the [`DeviceBytes`]
    /// promises extend to every run of the plan.
    pub fn import_tensors_mixed_device(
        tensors: &[MixedTensor<'_>],
        options: &ExportOptions,
        global_scale: GlobalScale,
        targets: &[DeviceMixedImportTarget],
    ) -> Result<Self, Error> {
        let d = MixedDestinations::device(targets)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: DeviceBytes' constructor promised the memory for the work queued on it.
        unsafe { import_tensors_mixed_raw(tensors, options, global_scale, &d, Some(&mut raw))? };
        Ok(Self::from_raw(raw))
    }

    /// Prepares [`import_bucket_mixed_host`](crate::import_bucket_mixed_host)
    /// (`mxfp8_transfer_prepare` from a bucket with NVFP4 entries): the bucket (read at every run) and the targets
    /// (global scales included, written at every run) stay borrowed until the plan is dropped. The
    /// manifest is not kept.
    pub fn import_bucket_mixed(bucket: &'a [u8], import: &MixedBucketImport<'_>, targets: &'a mut [MixedImportTarget<'a>]) -> Result<Self, Error> {
        let d = MixedDestinations::host(targets);
        let mut raw = core::ptr::null_mut();
        // SAFETY: the bucket is borrowed and the targets exclusively borrowed for 'a.
        unsafe { import_bucket_mixed_raw((bucket.as_ptr() as *const c_void, bucket.len(), HOST), import, &d, Stream::default(), Some(&mut raw))? };
        Ok(Self::from_raw(raw))
    }

    /// Prepares [`import_bucket_mixed_device`](crate::import_bucket_mixed_device); the [`DeviceBytes`]
    /// promises extend to every run of the plan.
    pub fn import_bucket_mixed_device(bucket: DeviceBytes, import: &MixedBucketImport<'_>, targets: &[DeviceMixedImportTarget]) -> Result<Self, Error> {
        let d = MixedDestinations::device(targets)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: DeviceBytes' constructor promised the memory for the work queued on it.
        unsafe {
            import_bucket_mixed_raw((bucket.as_ptr() as *const c_void, bucket.len(), bucket.device()), import, &d, Stream::default(), Some(&mut raw))?
        };
        Ok(Self::from_raw(raw))
    }

    unsafe fn prepare_import(source: ImportSource<'_>, d: &Destinations) -> Result<Self, Error> {
        let mut raw = core::ptr::null_mut();
        prepare_import(source, d, &mut raw)?;
        Ok(Self::from_raw(raw))
    }

    fn from_raw(raw: *mut sys::mxfp8_plan) -> Self {
        Self { raw: NonNull::new(raw).expect("a prepare call returned OK and NULL"), _destinations: PhantomData }
    }

    /// Runs the export on `stream` (ignored for host memory, where the run is done on return).
    pub fn run(&self, stream: Stream) -> Result<(), Error> {
        // SAFETY: the plan is live; the stream's validity is Stream::from_raw's promise.
        check(unsafe { sys::mxfp8_plan_run(self.raw.as_ptr(), stream.as_raw()) })
    }
}

impl Drop for PreparedExport<'_> {
    fn drop(&mut self) {
        // SAFETY: the plan is live and dropped once.
        unsafe { sys::mxfp8_plan_release(self.raw.as_ptr()) }
    }
}
