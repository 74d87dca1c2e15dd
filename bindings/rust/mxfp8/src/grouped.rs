//! Grouped MoE experts: E experts stored back to back in one values buffer and one scale buffer.
use std::ptr;

use crate::error::{check, invalid, Error};
use crate::handle::Handle;
use crate::managed::ManagedTensor;
use crate::memory::BufMut;
use crate::options::{CField, ConvertOptions, ExportOptions, Format, GroupedScales, ScaleLayout};
use crate::sys;
use crate::tensor::{convert_call, with_shard, Components, Tensor};

/// Describes grouped experts (`mxfp8_grouped_desc`): expert e has shape `(rows_e, K)` and its values
/// start at row `rows_0 + ... + rows_{e-1}` of the values buffer. Defaults are
/// `MXFP8_GROUPED_DESC_INIT`'s, read from mxfp8-sys.
///
/// ```
/// # use mxfp8::{GroupedBuilder, ManagedTensor, GroupedScales};
/// # fn main() -> Result<(), mxfp8::Error> {
/// // 4 experts of (64, 96): compact scales, 64 x 3 per expert, back to back.
/// let experts = GroupedBuilder::new()
///     .uniform_experts(4, 64, 96)
///     .scales(GroupedScales::Compact)
///     .buffers(ManagedTensor::from_host(vec![0x38; 4 * 64 * 96], &[4, 64, 96])?,
///              ManagedTensor::from_host(vec![127; 4 * 64 * 3], &[4 * 64 * 3])?)
///     .build()?;
/// assert_eq!(experts.expert(3)?.shape(), &[64, 96]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct GroupedBuilder {
    format: Format,
    layout: ScaleLayout,
    scales: GroupedScales,
    cols: i64,
    rows: Vec<i64>,
    uniform: Option<(i32, i64)>,
    scale_offsets: Option<Vec<i64>>,
    buffers: Option<(ManagedTensor, ManagedTensor)>,
}

impl Default for GroupedBuilder {
    fn default() -> Self {
        let c = sys::mxfp8_grouped_desc::default();
        Self {
            format: CField::from_c(c.format, "format"),
            layout: CField::from_c(c.scale_layout, "scale_layout"),
            scales: CField::from_c(c.scales, "scales"),
            cols: c.cols,
            rows: Vec::new(),
            uniform: Some((c.num_experts, c.uniform_rows)),
            scale_offsets: None,
            buffers: None,
        }
    }
}

impl GroupedBuilder {
    /// The defaults: E4M3, row-major scales, each expert's scales padded as TE allocates them.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// The FP8 encoding of every expert.
        format(format: Format) => format = format;
        /// The layout of every expert's scales.
        scale_layout(layout: ScaleLayout) => layout = layout;
        /// How the experts' scales sit in the scale buffer.
        scales(scales: GroupedScales) => scales = scales;
    }
    /// `num_experts` experts of `rows` x `cols` each.
    pub fn uniform_experts(mut self, num_experts: i32, rows: i64, cols: i64) -> Self {
        self.uniform = Some((num_experts, rows));
        self.rows.clear();
        self.cols = cols;
        self
    }
    /// One expert per entry of `rows` (row counts may differ and may be 0), each `cols` wide.
    pub fn experts(mut self, rows: &[i64], cols: i64) -> Self {
        self.uniform = None;
        self.rows = rows.to_vec();
        self.cols = cols;
        self
    }
    setters! {
        /// The byte offset of each expert's scales in the scale buffer (default: back to back; the
        /// buffer may be larger: bytes past the experts' are never read).
        scale_offsets(offsets: &[i64]) => scale_offsets = Some(offsets.to_vec());
        /// The flat values (`sum(rows_e) * K` elements, any shape) and scales.
        buffers(data: ManagedTensor, scale_inv: ManagedTensor) => buffers = Some((data, scale_inv));
    }
    /// Validates every expert's region in both buffers. On success the handle owns the buffers; on
    /// failure they are dropped with the builder.
    pub fn build(self) -> Result<GroupedTensor, Error> {
        let (data, scale_inv) = self.buffers.as_ref().map_or((ptr::null_mut(), ptr::null_mut()), |(d, s)| (d.as_raw(), s.as_raw()));
        let (num_experts, uniform_rows, expert_rows) = match self.uniform {
            Some((e, rows)) => (e, rows, ptr::null()),
            None => (i32::try_from(self.rows.len()).map_err(|_| invalid("too many experts"))?, 0, self.rows.as_ptr()),
        };
        if let Some(offsets) = &self.scale_offsets {
            if offsets.len() != num_experts.max(0) as usize {
                return Err(invalid(format!("{} scale offsets for {num_experts} experts", offsets.len())));
            }
        }
        let desc = sys::mxfp8_grouped_desc {
            format: self.format.to_raw(),
            scale_layout: self.layout.to_raw(),
            scales: self.scales.to_raw(),
            num_experts,
            cols: self.cols,
            uniform_rows,
            expert_rows,
            scale_offsets: self.scale_offsets.as_ref().map_or(ptr::null(), |o| o.as_ptr()),
            data,
            scale_inv,
            ..Default::default()
        };
        // SAFETY: desc and its arrays are valid for the call; on success the library took the buffers.
        let raw = Handle::make("mxfp8_grouped_tensor_create", |out| unsafe { sys::mxfp8_grouped_tensor_create(&desc, out) })?;
        if let Some((d, s)) = self.buffers {
            d.into_raw();
            s.into_raw();
        }
        let rows = match self.uniform {
            Some((e, rows)) => vec![rows; e as usize],
            None => self.rows,
        };
        Ok(GroupedTensor { raw, rows, cols: self.cols, format: self.format })
    }
}

/// Validated grouped experts (the C `mxfp8_grouped_tensor` handle, released on drop). Thread-safe like
/// [`Tensor`].
#[derive(Debug)]
pub struct GroupedTensor {
    raw: Handle<sys::mxfp8_grouped_tensor>,
    rows: Vec<i64>,
    cols: i64,
    format: Format,
}

impl GroupedTensor {
    /// E.
    pub fn num_experts(&self) -> usize {
        self.rows.len()
    }
    /// Each expert's row count.
    pub fn expert_rows(&self) -> &[i64] {
        &self.rows
    }
    /// K.
    pub fn cols(&self) -> i64 {
        self.cols
    }
    /// The C handle, still owned by `self` (for calls into mxfp8-sys).
    pub fn as_raw(&self) -> *const sys::mxfp8_grouped_tensor {
        self.raw.as_ptr()
    }
    /// A tensor viewing expert `expert` (it keeps the buffers alive): export it, or put many experts in
    /// one batched export or bucket.
    pub fn expert(&self, expert: usize) -> Result<Tensor, Error> {
        let index = i32::try_from(expert).map_err(|_| invalid(format!("expert {expert} is out of range")))?;
        // SAFETY: valid handle; the library checks the index.
        let raw = Handle::make("mxfp8_grouped_expert", |out| unsafe { sys::mxfp8_grouped_expert(self.raw.as_ptr(), index, out) })?;
        Ok(Tensor::from_handle(raw, vec![self.rows[expert], self.cols], self.format))
    }

    /// The experts stacked (`mxfp8_grouped_export`): `None` every expert, as vLLM's MoE layers load them,
    /// or (expert parallelism) `Some` of the experts one rank serves, in the order given (each in `0..E`,
    /// repeats allowed; an empty list is an error, there would be no N). Values `[count, N, K]` and compact
    /// scales `[count, N, ceil(K/32)]`; the experts must share one row count N; rowwise, per-32 scales.
    /// Each output is a view when the experts lie back to back in that order (scales only when packed
    /// [`GroupedScales::Compact`]), otherwise a copy (one launch on
    /// `options`' stream for CUDA memory).
    pub fn export(&self, experts: Option<&[usize]>, options: &ExportOptions) -> Result<Components, Error> {
        let indices = experts
            .map(|experts| {
                let index = |&e: &usize| i32::try_from(e).map_err(|_| invalid(format!("experts: {e} is out of range")));
                experts.iter().map(index).collect::<Result<Vec<i32>, Error>>()
            })
            .transpose()?;
        // NULL and 0 choose every expert. An empty Vec's pointer is dangling, never NULL, so an empty list
        // stays a choice of none (refused by the library), not every expert.
        let (experts, count) = indices.as_ref().map_or((ptr::null(), 0), |i| (i.as_ptr(), i.len()));
        let (o, _shard) = with_shard(options);
        let (mut values, mut scales) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid handle and options; `count` indices read during the call; both outputs are
        // written only on success, fresh managed tensors that we then own.
        unsafe {
            check(sys::mxfp8_grouped_export(self.raw.as_ptr(), experts, count, &o, &mut values, &mut scales))?;
            Ok(Components::take(values, scales, None))
        }
    }

    /// Writes all E experts (one row count N, rowwise) in layout `options.target`
    /// (`mxfp8_grouped_convert`): expert e's scales at byte `e * B` of `scales`, B =
    /// [`layout_bytes`](crate::layout_bytes)`(target, Rowwise, N, ceil(K/32))`, so `scales` holds exactly
    /// `E * B` bytes; `values`, when given, `E * N * K` bytes stacked `[E, N, K]` in the target's row order
    /// (each expert's rows permuted for the TRT-LLM targets). Same checks as [`Tensor::convert_into`];
    /// device memory in one launch on `options`' stream.
    pub fn convert_into<'a>(&self, options: &ConvertOptions, values: Option<BufMut<'a>>, scales: impl Into<BufMut<'a>>) -> Result<(), Error> {
        // SAFETY: a valid handle; the arguments are convert_call's.
        convert_call(options, values, scales.into(), |o, v, s| unsafe { sys::mxfp8_grouped_convert(self.as_raw(), o, v, s) })
    }
}
