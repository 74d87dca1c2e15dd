//! Quantizing BF16/FP16/FP32 to MXFP8 (bit-exact with Transformer Engine) and decoding it back.
use std::ffi::c_void;
use std::ptr;

use crate::sys::{self, DLDataTypeCode, DLDeviceType};
use crate::{check, invalid, Block, Direction, Error, Format, ManagedTensor, Tensor};

/// How a block's E8M0 scale is chosen (see `mxfp8_scale_rounding` in mxfp8.h).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ScaleRounding {
    /// Transformer Engine's and NVIDIA hardware's rule: the exponent of amax / max_norm, rounded up.
    Rceil,
    /// The OCP MX v1.0 rule: floor(log2(amax)) - emax.
    Floor,
}

/// The layout a quantize writes the scales in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum QuantizedScales {
    /// Compact row-major: (*lead, ceil(K/32)) rowwise, (ceil(M/32), K) columnwise.
    Compact,
    /// Transformer Engine's padded buffer (padding zero).
    Padded,
    /// The same buffer in the cuBLAS 128x4 layout.
    Swizzled,
}

/// Options of a quantize; `Default` matches `MXFP8_QUANTIZE_OPTIONS_INIT`.
#[derive(Copy, Clone, Debug)]
pub struct QuantizeOptions {
    pub format: Format,
    pub block: Block,
    pub rounding: ScaleRounding,
    pub scales: QuantizedScales,
    /// The cudaStream_t the kernel runs on (NULL: legacy default stream); unused for host memory.
    pub stream: *mut c_void,
}

impl Default for QuantizeOptions {
    fn default() -> Self {
        Self {
            format: Format::E4M3,
            block: Block::B1x32,
            rounding: ScaleRounding::Rceil,
            scales: QuantizedScales::Compact,
            stream: ptr::null_mut(),
        }
    }
}

impl QuantizeOptions {
    fn to_sys(self) -> sys::mxfp8_quantize_options {
        sys::mxfp8_quantize_options {
            format: crate::format_to_sys(self.format),
            block: crate::block_to_sys(self.block),
            scale_rounding: match self.rounding {
                ScaleRounding::Rceil => sys::MXFP8_SCALE_ROUNDING_RCEIL,
                ScaleRounding::Floor => sys::MXFP8_SCALE_ROUNDING_FLOOR,
            },
            scales_layout: match self.scales {
                QuantizedScales::Compact => sys::MXFP8_QUANTIZED_SCALES_COMPACT,
                QuantizedScales::Padded => sys::MXFP8_QUANTIZED_SCALES_PADDED,
                QuantizedScales::Swizzled => sys::MXFP8_QUANTIZED_SCALES_SWIZZLED,
            },
            values_dtype: sys::MXFP8_VALUES_UINT8,
            stream: self.stream,
            ..Default::default()
        }
    }
}

/// A quantizer input in host memory: float32 values, or the bits of bfloat16 / float16 values.
#[derive(Copy, Clone, Debug)]
pub enum HostInput<'a> {
    F32(&'a [f32]),
    Bf16Bits(&'a [u16]),
    F16Bits(&'a [u16]),
}

/// One direction of a quantize: the FP8 values (uint8, the input's shape) and the E8M0 scales.
#[derive(Debug)]
pub struct Quantized {
    pub data: ManagedTensor,
    pub scale_inv: ManagedTensor,
}

/// Quantizes a row-major host tensor of `shape` in `direction`.
pub fn quantize_host(
    input: HostInput<'_>,
    shape: &[i64],
    direction: Direction,
    options: &QuantizeOptions,
) -> Result<Quantized, Error> {
    let (data, len, code, bits) = match input {
        HostInput::F32(v) => (v.as_ptr() as *mut c_void, v.len(), DLDataTypeCode::FLOAT, 32),
        HostInput::Bf16Bits(v) => (v.as_ptr() as *mut c_void, v.len(), DLDataTypeCode::BFLOAT, 16),
        HostInput::F16Bits(v) => (v.as_ptr() as *mut c_void, v.len(), DLDataTypeCode::FLOAT, 16),
    };
    let numel = shape.iter().try_fold(1i64, |n, &d| if d < 0 { None } else { n.checked_mul(d) });
    if numel != Some(len as i64) {
        return Err(invalid(format!("{len} input values cannot have the shape {shape:?}")));
    }
    let mut shape = shape.to_vec();
    let t = sys::DLTensor {
        data,
        device: sys::DLDevice { device_type: DLDeviceType::CPU, device_id: 0 },
        ndim: shape.len() as i32,
        dtype: sys::DLDataType { code, bits, lanes: 1 },
        shape: shape.as_mut_ptr(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    // SAFETY: `t` describes the borrowed slice, which outlives this synchronous host call.
    unsafe { quantize_raw(&t, direction, options) }
}

/// Quantizes any DLPack tensor the library takes (host or CUDA memory) in `direction`.
///
/// # Safety
/// `input` must describe memory that stays valid and unwritten until the quantize has run: the call's
/// return for host memory, the work queued on `options.stream` for CUDA memory.
pub unsafe fn quantize_raw(
    input: &sys::DLTensor,
    direction: Direction,
    options: &QuantizeOptions,
) -> Result<Quantized, Error> {
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

impl Tensor {
    /// Decodes `direction` of a tensor in host memory to float32: value * 2^(scale - 127), every NaN
    /// as 0x7FFFFFFF.
    pub fn dequantize_host(&self, direction: Direction) -> Result<Vec<f32>, Error> {
        let mut o = sys::mxfp8_export_options { direction: crate::direction_to_sys(direction), ..Default::default() };
        o.values_dtype = sys::MXFP8_VALUES_UINT8;
        let mut values = ptr::null_mut();
        // SAFETY: valid handle and options; only the values (a view) are asked for.
        check(unsafe { sys::mxfp8_export_components(self.raw.as_ptr(), &o, &mut values, ptr::null_mut()) })?;
        // SAFETY: a fresh managed tensor we now own (dropped at the end of this scope).
        let values = unsafe { ManagedTensor::from_raw(values) }.expect("export returned OK and no values");
        let mut shape = values.shape().to_vec();
        let mut out = vec![0f32; shape.iter().product::<i64>() as usize];
        let mut t = sys::DLTensor {
            data: out.as_mut_ptr() as *mut c_void,
            device: values.device(),
            ndim: shape.len() as i32,
            dtype: sys::DLDataType { code: DLDataTypeCode::FLOAT, bits: 32, lanes: 1 },
            shape: shape.as_mut_ptr(),
            strides: ptr::null_mut(),
            byte_offset: 0,
        };
        let d = sys::mxfp8_dequantize_options { direction: o.direction, ..Default::default() };
        // SAFETY: `t` describes `out`; a tensor outside host memory fails the device check.
        check(unsafe { sys::mxfp8_dequantize(self.raw.as_ptr(), &d, &mut t) })?;
        Ok(out)
    }
}
