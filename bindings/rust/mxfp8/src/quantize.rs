//! Quantizing BF16/FP16/FP32 to MXFP8 (bit-exact with Transformer Engine) and decoding it back.
use std::ffi::c_void;
use std::ptr;

use crate::error::{check, invalid, Error};
use crate::managed::ManagedTensor;
use crate::memory::{dl_tensor, numel, DeviceBytes, HOST, UINT8};
use crate::options::{known, Block, Direction, Format, QuantizedScales, ScaleRounding, ScalesDtype, Stream, ValuesDtype};
use crate::sys::{self, DLDataTypeCode};
use crate::tensor::{compact_scales_shape, Tensor};

/// Options of a quantize. `Default` is `MXFP8_QUANTIZE_OPTIONS_INIT`, read from mxfp8-sys (whose
/// defaults a test compares with the C macro).
///
/// ```
/// use mxfp8::{QuantizeOptions, QuantizedScales, ScaleRounding};
/// let te_layout = QuantizeOptions::new().scales(QuantizedScales::Swizzled);
/// assert_eq!(te_layout.get_rounding(), ScaleRounding::Rceil);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct QuantizeOptions {
    format: Format,
    block: Block,
    rounding: ScaleRounding,
    scales: QuantizedScales,
    values_dtype: ValuesDtype,
    scales_dtype: ScalesDtype,
    stream: Stream,
}

impl Default for QuantizeOptions {
    fn default() -> Self {
        let c = sys::mxfp8_quantize_options::default();
        Self {
            format: known(Format::from_raw(c.format), "format"),
            block: known(Block::from_raw(c.block), "block"),
            rounding: known(ScaleRounding::from_raw(c.scale_rounding), "scale_rounding"),
            scales: known(QuantizedScales::from_raw(c.scales_layout), "scales_layout"),
            values_dtype: known(ValuesDtype::from_raw(c.values_dtype), "values_dtype"),
            scales_dtype: known(ScalesDtype::from_raw(c.scales_dtype), "scales_dtype"),
            stream: Stream::default(),
        }
    }
}

impl QuantizeOptions {
    /// The defaults: E4M3, 1x32 blocks, RCEIL, compact scales, float8 values, uint8 scales.
    pub fn new() -> Self {
        Self::default()
    }
    /// The FP8 encoding.
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }
    /// 1x32 or 32x32 blocks.
    pub fn block(mut self, block: Block) -> Self {
        self.block = block;
        self
    }
    /// How each block's scale is chosen.
    pub fn rounding(mut self, rounding: ScaleRounding) -> Self {
        self.rounding = rounding;
        self
    }
    /// The layout the scales are written in.
    pub fn scales(mut self, scales: QuantizedScales) -> Self {
        self.scales = scales;
        self
    }
    /// The dtype of the values [`quantize_host`] and [`quantize_raw`] allocate.
    pub fn values_dtype(mut self, dtype: ValuesDtype) -> Self {
        self.values_dtype = dtype;
        self
    }
    /// The dtype of the scales [`quantize_host`] and [`quantize_raw`] allocate.
    pub fn scales_dtype(mut self, dtype: ScalesDtype) -> Self {
        self.scales_dtype = dtype;
        self
    }
    /// The stream CUDA work runs on.
    pub fn stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }
    /// The format set.
    pub fn get_format(&self) -> Format {
        self.format
    }
    /// The block set.
    pub fn get_block(&self) -> Block {
        self.block
    }
    /// The rounding set.
    pub fn get_rounding(&self) -> ScaleRounding {
        self.rounding
    }
    /// The scale layout set.
    pub fn get_scales(&self) -> QuantizedScales {
        self.scales
    }
    /// The values dtype set.
    pub fn get_values_dtype(&self) -> ValuesDtype {
        self.values_dtype
    }
    /// The scales dtype set.
    pub fn get_scales_dtype(&self) -> ScalesDtype {
        self.scales_dtype
    }
    /// The stream set.
    pub fn get_stream(&self) -> Stream {
        self.stream
    }
    /// The C struct (no allocator: the library allocates).
    pub fn to_sys(&self) -> sys::mxfp8_quantize_options {
        sys::mxfp8_quantize_options {
            format: self.format.to_raw(),
            block: self.block.to_raw(),
            scale_rounding: self.rounding.to_raw(),
            scales_layout: self.scales.to_raw(),
            values_dtype: self.values_dtype.to_raw(),
            scales_dtype: self.scales_dtype.to_raw(),
            stream: self.stream.as_raw(),
            ..Default::default()
        }
    }

    /// The shape of the scales a quantize of an input of `shape` writes for `direction` with these
    /// options (the header's formulas; [`quantize_into`] wants exactly this many bytes).
    pub fn scales_shape(&self, shape: &[i64], direction: Direction) -> Vec<i64> {
        let (k, m) = match shape.split_last() {
            Some((&k, lead)) => (k, lead.iter().product::<i64>()),
            None => (1, 1),
        };
        let (up, blocks) = (|n: i64, d: i64| (n + d - 1) / d * d, |n: i64| (n + 31) / 32);
        match (self.scales, direction) {
            (QuantizedScales::Compact, _) if self.block == Block::B32x32 => vec![blocks(m), blocks(k)],
            (QuantizedScales::Compact, d) => compact_scales_shape(shape, d),
            (_, Direction::Rowwise) => vec![up(m, 128), up(blocks(k), 4)],
            (_, Direction::Columnwise) => vec![up(blocks(m), 4), up(k, 128)],
        }
    }
}

/// A quantizer input in host memory: float32 values, or the bits of bfloat16 / float16 values.
#[derive(Copy, Clone, Debug)]
pub enum HostInput<'a> {
    /// float32.
    F32(&'a [f32]),
    /// bfloat16, as its bits.
    Bf16Bits(&'a [u16]),
    /// IEEE float16, as its bits.
    F16Bits(&'a [u16]),
}

/// The element type of a quantizer input in device memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InputDtype {
    /// float32.
    F32,
    /// bfloat16.
    Bf16,
    /// IEEE float16.
    F16,
}

impl InputDtype {
    pub(crate) fn dl(self) -> sys::DLDataType {
        let (code, bits) = match self {
            Self::F32 => (DLDataTypeCode::FLOAT, 32),
            Self::Bf16 => (DLDataTypeCode::BFLOAT, 16),
            Self::F16 => (DLDataTypeCode::FLOAT, 16),
        };
        sys::DLDataType { code, bits, lanes: 1 }
    }
}

impl HostInput<'_> {
    pub(crate) fn parts(self) -> (*const c_void, usize, InputDtype) {
        match self {
            HostInput::F32(v) => (v.as_ptr() as *const c_void, v.len(), InputDtype::F32),
            HostInput::Bf16Bits(v) => (v.as_ptr() as *const c_void, v.len(), InputDtype::Bf16),
            HostInput::F16Bits(v) => (v.as_ptr() as *const c_void, v.len(), InputDtype::F16),
        }
    }
}

pub(crate) fn check_numel(shape: &[i64], len: usize, what: &str) -> Result<(), Error> {
    if numel(shape) != Some(len) {
        return Err(invalid(format!("{len} {what} cannot have the shape {shape:?}")));
    }
    Ok(())
}

/// One direction of a quantize: the FP8 values (the input's shape) and the E8M0 scales.
#[derive(Debug)]
pub struct Quantized {
    /// The FP8 values.
    pub data: ManagedTensor,
    /// The scales, in the layout the options asked for.
    pub scale_inv: ManagedTensor,
}

/// Quantizes a row-major host tensor of `shape` in `direction` into new buffers.
pub fn quantize_host(input: HostInput<'_>, shape: &[i64], direction: Direction, options: &QuantizeOptions) -> Result<Quantized, Error> {
    let (data, len, dtype) = input.parts();
    check_numel(shape, len, "input values")?;
    let mut shape = shape.to_vec();
    let t = dl_tensor(data, HOST, dtype.dl(), &mut shape);
    // SAFETY: `t` describes the borrowed slice, which outlives this synchronous host call.
    unsafe { quantize_raw(&t, direction, options) }
}

/// Quantizes a row-major host tensor of `shape` in both directions in one call (one pass over the
/// input): `(rowwise, columnwise)`. With 32x32 blocks both share every block's scale.
pub fn quantize_host_both(input: HostInput<'_>, shape: &[i64], options: &QuantizeOptions) -> Result<(Quantized, Quantized), Error> {
    let (data, len, dtype) = input.parts();
    check_numel(shape, len, "input values")?;
    let mut shape = shape.to_vec();
    let t = dl_tensor(data, HOST, dtype.dl(), &mut shape);
    let o = options.to_sys();
    let mut out = [ptr::null_mut(); 4];
    let [rd, rs, cd, cs] = &mut out;
    // SAFETY: `t` describes the borrowed slice, which outlives this synchronous host call; the four
    // outputs are written only on success.
    check(unsafe { sys::mxfp8_quantize(&t, &o, rd, rs, cd, cs) })?;
    // SAFETY: fresh managed tensors that we now own.
    let take = |p| unsafe { ManagedTensor::from_raw(p) }.expect("quantize returned OK and no output");
    Ok((Quantized { data: take(out[0]), scale_inv: take(out[1]) }, Quantized { data: take(out[2]), scale_inv: take(out[3]) }))
}

/// Quantizes any DLPack tensor the library takes (host or CUDA memory) in `direction` into new buffers.
///
/// # Safety
/// `input` must describe memory that stays valid and unwritten until the quantize has run: the call's
/// return for host memory, the work queued on `options`' stream for CUDA memory.
pub unsafe fn quantize_raw(input: &sys::DLTensor, direction: Direction, options: &QuantizeOptions) -> Result<Quantized, Error> {
    let o = options.to_sys();
    let (mut data, mut scales) = (ptr::null_mut(), ptr::null_mut());
    let none = ptr::null_mut();
    let status = match direction {
        Direction::Rowwise => sys::mxfp8_quantize(input, &o, &mut data, &mut scales, none, none),
        Direction::Columnwise => sys::mxfp8_quantize(input, &o, none, none, &mut data, &mut scales),
    };
    check(status)?;
    // SAFETY: on success both outputs are fresh managed tensors that we now own.
    Ok(Quantized {
        data: ManagedTensor::from_raw(data).expect("quantize returned OK and no values"),
        scale_inv: ManagedTensor::from_raw(scales).expect("quantize returned OK and no scales"),
    })
}

/// Host buffers one direction of [`quantize_into`] writes: `values` of the input's element count and
/// `scales` of exactly [`QuantizeOptions::scales_shape`]'s element count.
#[derive(Debug)]
pub struct QuantizeOutput<'a> {
    /// The FP8 values.
    pub values: &'a mut [u8],
    /// The E8M0 scales.
    pub scales: &'a mut [u8],
}

/// Quantizes a row-major host tensor of `shape` into caller-owned buffers, for the directions given (at
/// least one). Everything is checked before anything is written.
pub fn quantize_into(
    input: HostInput<'_>,
    shape: &[i64],
    options: &QuantizeOptions,
    rowwise: Option<QuantizeOutput<'_>>,
    columnwise: Option<QuantizeOutput<'_>>,
) -> Result<(), Error> {
    let (data, len, dtype) = input.parts();
    check_numel(shape, len, "input values")?;
    let mut shape = shape.to_vec();
    let t = dl_tensor(data, HOST, dtype.dl(), &mut shape);
    let mut shapes = [[0i64; 1]; 4];
    let mut outs: Vec<Option<sys::DLTensor>> = Vec::new();
    let mut slots = shapes.iter_mut();
    for out in [rowwise, columnwise] {
        match out {
            Some(QuantizeOutput { values, scales }) => {
                for buf in [values, scales] {
                    let s = slots.next().unwrap();
                    s[0] = buf.len() as i64;
                    outs.push(Some(dl_tensor(buf.as_mut_ptr() as *const c_void, HOST, UINT8, s)));
                }
            }
            None => outs.extend([None, None]),
        }
    }
    // SAFETY: every DLTensor describes a live host slice (outputs exclusively borrowed); host work is
    // done when the call returns.
    unsafe { quantize_into_raw(&t, options, &mut outs) }
}

/// [`quantize_into`] on device memory: `input` holds `prod(shape)` elements of `dtype`; queued on
/// `options`' stream, the call does not wait.
pub fn quantize_into_device(
    input: DeviceBytes,
    dtype: InputDtype,
    shape: &[i64],
    options: &QuantizeOptions,
    rowwise: Option<(DeviceBytes, DeviceBytes)>,
    columnwise: Option<(DeviceBytes, DeviceBytes)>,
) -> Result<(), Error> {
    let element = dtype.dl().bits as usize / 8;
    if numel(shape).and_then(|n| n.checked_mul(element)) != Some(input.len()) {
        return Err(invalid(format!("input: {} bytes cannot hold {dtype:?} elements of shape {shape:?}", input.len())));
    }
    let mut shape = shape.to_vec();
    let t = dl_tensor(input.as_ptr(), input.device(), dtype.dl(), &mut shape);
    let mut shapes = [[0i64; 1]; 4];
    let mut outs: Vec<Option<sys::DLTensor>> = Vec::new();
    let mut slots = shapes.iter_mut();
    for out in [rowwise, columnwise] {
        match out {
            Some((values, scales)) => {
                for buf in [values, scales] {
                    let s = slots.next().unwrap();
                    s[0] = buf.len() as i64;
                    outs.push(Some(dl_tensor(buf.as_ptr(), buf.device(), UINT8, s)));
                }
            }
            None => outs.extend([None, None]),
        }
    }
    // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
    unsafe { quantize_into_raw(&t, options, &mut outs) }
}

unsafe fn quantize_into_raw(input: &sys::DLTensor, options: &QuantizeOptions, outs: &mut [Option<sys::DLTensor>]) -> Result<(), Error> {
    let o = options.to_sys();
    let mut p = outs.iter_mut().map(|t| t.as_mut().map_or(ptr::null_mut(), |t| t as *mut sys::DLTensor));
    let (rd, rs, cd, cs) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
    check(sys::mxfp8_quantize_into(input, &o, rd, rs, cd, cs))
}

/// Options of a dequantize. `Default` is `MXFP8_DEQUANTIZE_OPTIONS_INIT`, read from mxfp8-sys.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DequantizeOptions {
    direction: Direction,
    stream: Stream,
}

impl Default for DequantizeOptions {
    fn default() -> Self {
        let c = sys::mxfp8_dequantize_options::default();
        Self { direction: known(Direction::from_raw(c.direction), "direction"), stream: Stream::default() }
    }
}

impl DequantizeOptions {
    /// The defaults: rowwise, the legacy default stream.
    pub fn new() -> Self {
        Self::default()
    }
    /// Which direction to decode.
    pub fn direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }
    /// The stream CUDA work runs on.
    pub fn stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }
    /// The direction set.
    pub fn get_direction(&self) -> Direction {
        self.direction
    }
    /// The stream set.
    pub fn get_stream(&self) -> Stream {
        self.stream
    }
    /// The C struct.
    pub fn to_sys(&self) -> sys::mxfp8_dequantize_options {
        sys::mxfp8_dequantize_options { direction: self.direction.to_raw(), stream: self.stream.as_raw(), ..Default::default() }
    }
}

/// A host buffer a dequantize writes, `prod(shape)` elements.
#[derive(Debug)]
pub enum DequantizeOutput<'a> {
    /// float32.
    F32(&'a mut [f32]),
    /// bfloat16, as its bits.
    Bf16Bits(&'a mut [u16]),
}

/// The element type of a dequantize output in device memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OutputDtype {
    /// float32.
    F32,
    /// bfloat16.
    Bf16,
}

/// The DLTensor of a host dequantize output, over `shape`, which the caller keeps alive while it is used.
pub(crate) fn host_output(output: DequantizeOutput<'_>, shape: &mut [i64; 1]) -> sys::DLTensor {
    let (data, len, code, bits) = match output {
        DequantizeOutput::F32(v) => (v.as_mut_ptr() as *const c_void, v.len(), DLDataTypeCode::FLOAT, 32),
        DequantizeOutput::Bf16Bits(v) => (v.as_mut_ptr() as *const c_void, v.len(), DLDataTypeCode::BFLOAT, 16),
    };
    shape[0] = len as i64;
    dl_tensor(data, HOST, sys::DLDataType { code, bits, lanes: 1 }, shape)
}

/// The DLTensor of a device dequantize output of `dtype` elements, over `shape` (as [`host_output`]);
/// fails when the bytes are not a whole number of elements.
pub(crate) fn device_output(output: DeviceBytes, dtype: OutputDtype, shape: &mut [i64; 1]) -> Result<sys::DLTensor, Error> {
    let (code, bits) = match dtype {
        OutputDtype::F32 => (DLDataTypeCode::FLOAT, 32u8),
        OutputDtype::Bf16 => (DLDataTypeCode::BFLOAT, 16),
    };
    if output.len() % (bits as usize / 8) != 0 {
        return Err(invalid(format!("output: {} bytes is not a whole number of {dtype:?} elements", output.len())));
    }
    shape[0] = (output.len() / (bits as usize / 8)) as i64;
    Ok(dl_tensor(output.as_ptr(), output.device(), sys::DLDataType { code, bits, lanes: 1 }, shape))
}

/// A float32 vector of `prod(shape)` elements for a `dequantize_host`.
pub(crate) fn output_vec(shape: &[i64]) -> Result<Vec<f32>, Error> {
    Ok(vec![0f32; numel(shape).ok_or_else(|| invalid("the tensor's shape overflows"))?])
}

impl Tensor {
    /// Decodes `direction` of a tensor in host memory to float32: value * 2^(scale - 127), every NaN as
    /// 0x7FFFFFFF.
    pub fn dequantize_host(&self, direction: Direction) -> Result<Vec<f32>, Error> {
        let mut out = output_vec(self.shape())?;
        self.dequantize_into(DequantizeOutput::F32(&mut out), &DequantizeOptions::new().direction(direction))?;
        Ok(out)
    }

    /// Decodes a tensor in host memory into `output` (float32, or bfloat16 rounded to nearest-even).
    pub fn dequantize_into(&self, output: DequantizeOutput<'_>, options: &DequantizeOptions) -> Result<(), Error> {
        let mut shape = [0i64];
        let mut t = host_output(output, &mut shape);
        let o = options.to_sys();
        // SAFETY: `t` describes the exclusively borrowed slice; a tensor on a device fails the device check.
        check(unsafe { sys::mxfp8_dequantize(self.raw.as_ptr(), &o, &mut t) })
    }

    /// Decodes a tensor in device memory into `output` (`prod(shape)` elements of `dtype`), queued on
    /// `options`' stream.
    pub fn dequantize_into_device(&self, output: DeviceBytes, dtype: OutputDtype, options: &DequantizeOptions) -> Result<(), Error> {
        let mut shape = [0i64];
        let mut t = device_output(output, dtype, &mut shape)?;
        let o = options.to_sys();
        // SAFETY: DeviceBytes' constructor promised the memory for the queued work.
        check(unsafe { sys::mxfp8_dequantize(self.raw.as_ptr(), &o, &mut t) })
    }
}
