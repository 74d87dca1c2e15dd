//! Engine-native targets: a tensor's or grouped experts' scales (and, for the TRT-LLM layouts, values)
//! written once, checked, in the layout an engine's kernels load (the header's "Engine-native targets").
use std::ffi::c_void;
use std::ptr;

use crate::error::{check, Error};
use crate::grouped::GroupedTensor;
use crate::memory::{dl_tensor, DeviceBytes, HOST, UINT8};
use crate::options::{known, Direction, Layout, ScaleFixup, Stream};
use crate::sys;
use crate::tensor::Tensor;

/// Options of [`Tensor::convert_into`] and [`GroupedTensor::convert_into`] (`mxfp8_convert_options`).
/// `Default` is `MXFP8_CONVERT_OPTIONS_INIT`, read from mxfp8-sys (whose defaults a test compares with
/// the C macro): compact scales, rowwise, no fix-up, the legacy default stream.
///
/// ```
/// use mxfp8::{ConvertOptions, Layout};
/// let deepgemm = ConvertOptions::new().target(Layout::DeepgemmPacked);
/// assert_eq!(deepgemm.get_target(), Layout::DeepgemmPacked);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ConvertOptions {
    target: Layout,
    direction: Direction,
    scale_fixup: ScaleFixup,
    stream: Stream,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        let c = sys::mxfp8_convert_options::default();
        Self {
            target: known(Layout::from_raw(c.target), "target"),
            direction: known(Direction::from_raw(c.direction), "direction"),
            scale_fixup: known(ScaleFixup::from_raw(c.scale_fixup), "scale_fixup"),
            stream: Stream::default(),
        }
    }
}

impl ConvertOptions {
    /// The defaults (`MXFP8_CONVERT_OPTIONS_INIT`).
    pub fn new() -> Self {
        Self::default()
    }
    /// The layout the scales are written in (default [`Layout::Compact`]).
    pub fn target(mut self, target: Layout) -> Self {
        self.target = target;
        self
    }
    /// The direction read from a tensor (default rowwise; grouped experts are rowwise only). The
    /// DeepGEMM and TRT-LLM layouts are rowwise only.
    pub fn direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }
    /// The rewrite applied to every real scale written (default none).
    pub fn scale_fixup(mut self, fixup: ScaleFixup) -> Self {
        self.scale_fixup = fixup;
        self
    }
    /// The stream CUDA work is queued on (unused for host memory).
    pub fn stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }
    /// The target set.
    pub fn get_target(&self) -> Layout {
        self.target
    }
    /// The direction set.
    pub fn get_direction(&self) -> Direction {
        self.direction
    }
    /// The fix-up set.
    pub fn get_scale_fixup(&self) -> ScaleFixup {
        self.scale_fixup
    }
    /// The stream set.
    pub fn get_stream(&self) -> Stream {
        self.stream
    }
    /// The C struct.
    pub fn to_sys(&self) -> sys::mxfp8_convert_options {
        sys::mxfp8_convert_options {
            target: self.target.to_raw(),
            direction: self.direction.to_raw(),
            scale_fixup: self.scale_fixup.to_raw(),
            stream: self.stream.as_raw(),
            ..Default::default()
        }
    }
}

/// The bytes the scales of an `rows x cols` scale matrix S take in `layout` (`mxfp8_layout_bytes`):
/// what an engine allocates before a convert or an import. `direction` says whether S is rowwise
/// (`(M, ceil(K/32))`) or columnwise (`(ceil(M/32), K)`, whose 128x4 layout swizzles S^T).
///
/// Fails with [`Status::InvalidArgument`](crate::Status::InvalidArgument) for a layout that does not take
/// this direction (DeepGEMM and TRT-LLM are rowwise only), negative sizes, and for the TRT-LLM layouts
/// `rows` not a multiple of 128 (FlashInfer's requirement).
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

/// The DLTensors of one convert call; they point into the shapes held here.
struct Outputs {
    shapes: [[i64; 1]; 2],
    values: Option<(*const c_void, sys::DLDevice)>,
    scales: (*const c_void, sys::DLDevice),
}

impl Outputs {
    /// Runs `f` with the values (or NULL) and the scales as uint8 DLTensors.
    fn with<R>(mut self, f: impl FnOnce(*mut sys::DLTensor, *mut sys::DLTensor) -> R) -> R {
        let [vshape, sshape] = &mut self.shapes;
        let mut values = self.values.map(|(p, d)| dl_tensor(p, d, UINT8, vshape));
        let mut scales = dl_tensor(self.scales.0, self.scales.1, UINT8, sshape);
        f(values.as_mut().map_or(ptr::null_mut(), |v| v as *mut _), &mut scales)
    }

    fn host(values: Option<&mut [u8]>, scales: &mut [u8]) -> Self {
        Self {
            shapes: [[values.as_ref().map_or(0, |v| v.len() as i64)], [scales.len() as i64]],
            values: values.map(|v| (v.as_mut_ptr() as *const c_void, HOST)),
            scales: (scales.as_mut_ptr() as *const c_void, HOST),
        }
    }

    fn device(values: Option<DeviceBytes>, scales: DeviceBytes) -> Self {
        Self {
            shapes: [[values.map_or(0, |v| v.len() as i64)], [scales.len() as i64]],
            values: values.map(|v| (v.as_ptr() as *const c_void, v.device())),
            scales: (scales.as_ptr() as *const c_void, scales.device()),
        }
    }
}

impl Tensor {
    /// Writes direction `options.direction` of this host tensor in layout `options.target`
    /// (`mxfp8_convert`), from the scales as stored (compact, padded or swizzled):
    ///
    /// - `scales`: exactly [`layout_bytes`] of the tensor's scale matrix; every byte is written,
    ///   padding as zero ([`Layout::DeepgemmPacked`]: the int32 `(R, ceil(C/4))` tensor's bytes;
    ///   [`Layout::DeepgemmFloat32`]: the float32 `(R, C)` tensor's).
    /// - `values`: None, or `prod(shape)` bytes that receive the values in the target's row order (a
    ///   copy, permuted for the TRT-LLM targets, which require it).
    ///
    /// The TRT-LLM targets treat the tensor as one expert of `M = prod(lead)` rows;
    /// [`Layout::TrtllmShuffledGated`] refuses more than 2 dimensions (use
    /// [`GroupedTensor::convert_into`]). Columnwise takes compact and 128x4 only. Everything is checked
    /// before anything is written; a device tensor is refused (its memory is not these slices'), see
    /// [`convert_device`](Self::convert_device).
    pub fn convert_into(&self, options: &ConvertOptions, values: Option<&mut [u8]>, scales: &mut [u8]) -> Result<(), Error> {
        let o = options.to_sys();
        // SAFETY: the slices are exclusively borrowed for this synchronous host call; the library checks
        // that they are on the tensor's device and of the right sizes.
        Outputs::host(values, scales).with(|v, s| check(unsafe { sys::mxfp8_convert(self.as_raw(), &o, v, s) }))
    }

    /// [`convert_into`](Self::convert_into) on device memory: one launch queued on `options`' stream
    /// (plus a copy of large values); the call does not wait.
    pub fn convert_device(&self, options: &ConvertOptions, values: Option<DeviceBytes>, scales: DeviceBytes) -> Result<(), Error> {
        let o = options.to_sys();
        // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
        Outputs::device(values, scales).with(|v, s| check(unsafe { sys::mxfp8_convert(self.as_raw(), &o, v, s) }))
    }
}

impl GroupedTensor {
    /// Writes all E experts (one row count N, rowwise) in layout `options.target`
    /// (`mxfp8_grouped_convert`): expert e's scales at byte `e * B` of `scales`, B =
    /// [`layout_bytes`]`(target, Rowwise, N, ceil(K/32))`, so `scales` holds exactly `E * B` bytes
    /// (DeepGEMM packed: its int32 `[E, N, ceil(sf_k/4)]`; float32: `[E, N, C]`); `values`, when given,
    /// `E * N * K` bytes stacked `[E, N, K]` in the target's row order (each expert's rows permuted for
    /// the TRT-LLM targets: vLLM's `w13_weight` / `w2_weight`). Same checks as [`Tensor::convert_into`].
    pub fn convert_into(&self, options: &ConvertOptions, values: Option<&mut [u8]>, scales: &mut [u8]) -> Result<(), Error> {
        let o = options.to_sys();
        // SAFETY: as Tensor::convert_into.
        Outputs::host(values, scales).with(|v, s| check(unsafe { sys::mxfp8_grouped_convert(self.as_raw(), &o, v, s) }))
    }

    /// [`convert_into`](Self::convert_into) on device memory: all experts in one launch queued on
    /// `options`' stream; the call does not wait.
    pub fn convert_device(&self, options: &ConvertOptions, values: Option<DeviceBytes>, scales: DeviceBytes) -> Result<(), Error> {
        let o = options.to_sys();
        // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
        Outputs::device(values, scales).with(|v, s| check(unsafe { sys::mxfp8_grouped_convert(self.as_raw(), &o, v, s) }))
    }
}
