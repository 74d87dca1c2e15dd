//! Quantizing bfloat16 / float16 / float32 to MXFP8 or NVFP4 (bit-exact with Transformer Engine), into
//! new buffers or the caller's, host or device memory alike.
use std::ptr;

use crate::error::{check, invalid, Error};
use crate::managed::ManagedTensor;
use crate::memory::{Buf, BufMut, Dl};
use crate::options::{Direction, Nvfp4QuantizeOptions, QuantizeOptions};
use crate::sys;

/// One direction of a quantize: the FP8 values (the input's shape) and the E8M0 scales.
#[derive(Debug)]
pub struct Quantized {
    /// The FP8 values.
    pub data: ManagedTensor,
    /// The scales, in the layout the options asked for.
    pub scale_inv: ManagedTensor,
}

/// Quantizes a row-major tensor of `shape` (`mxfp8_quantize`) in each of `directions` (one pass over the
/// input for both; with 32x32 blocks both share every block's scale) into new buffers, allocated by the
/// library on the input's device (CUDA work on `options`' stream): one [`Quantized`] per direction, in
/// the order given.
pub fn quantize<'a>(input: impl Into<Buf<'a>>, shape: &[i64], directions: &[Direction], options: &QuantizeOptions) -> Result<Vec<Quantized>, Error> {
    let mut t = input.into().raw.shaped(shape, "input")?;
    let mut wanted = [false; 2];
    for &d in directions {
        if std::mem::replace(&mut wanted[d as usize], true) {
            return Err(invalid(format!("directions: {d:?} given twice")));
        }
    }
    // Rowwise then columnwise: data, scales; NULL for a direction not wanted.
    let mut out = [[ptr::null_mut(); 2]; 2];
    let [row, col] = &mut out;
    let [rd, rs] = row.each_mut().map(|p| if wanted[0] { p as *mut _ } else { ptr::null_mut() });
    let [cd, cs] = col.each_mut().map(|p| if wanted[1] { p as *mut _ } else { ptr::null_mut() });
    // SAFETY: the input is borrowed (host) or promised (DeviceBytes) for the work; outputs written on success.
    check(unsafe { sys::mxfp8_quantize(t.ptr(), &options.to_sys(), rd, rs, cd, cs) })?;
    // SAFETY: fresh managed tensors that we now own, each taken once (a direction is given once).
    let take = |p| unsafe { ManagedTensor::from_raw(p) }.expect("quantize returned OK and no output");
    Ok(directions.iter().map(|&d| Quantized { data: take(out[d as usize][0]), scale_inv: take(out[d as usize][1]) }).collect())
}

/// Quantizes a row-major tensor of `shape` into the caller's buffers (`mxfp8_quantize_into`), for the
/// directions given (at least one), each `(values, scales)`: values of the input's element count, scales
/// of exactly the bytes of the options' layout ([`layout_bytes`](crate::layout_bytes) of the scale matrix;
/// TE's padded buffer has the 128x4 layout's size). Everything is checked before anything is written;
/// device memory is written by work queued on `options`' stream.
pub fn quantize_into<'a>(
    input: impl Into<Buf<'a>>,
    shape: &[i64],
    options: &QuantizeOptions,
    rowwise: Option<(BufMut<'_>, BufMut<'_>)>,
    columnwise: Option<(BufMut<'_>, BufMut<'_>)>,
) -> Result<(), Error> {
    let mut t = input.into().raw.shaped(shape, "input")?;
    let mut outs: Vec<Option<Dl>> = [rowwise, columnwise]
        .into_iter()
        .flat_map(|d| match d {
            Some((v, s)) => [Some(v.raw.dl(None)), Some(s.raw.dl(None))],
            None => [None, None],
        })
        .collect();
    let mut p = outs.iter_mut().map(|t| t.as_mut().map_or(ptr::null_mut(), Dl::ptr));
    let (rd, rs, cd, cs) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
    let o = options.to_sys();
    // SAFETY: the buffers are borrowed (host) or promised (DeviceBytes) for the work.
    check(unsafe { sys::mxfp8_quantize_into(t.ptr(), &o, rd, rs, cd, cs) })
}

/// One input of [`nvfp4_quantize_into`] and the buffers its packed values and block scales go to.
#[derive(Debug)]
pub struct Nvfp4Part<'a> {
    /// The input values, row-major, bfloat16, float16 or float32 (every part of one dtype).
    pub input: Buf<'a>,
    /// Its logical shape `(*lead, K)`; every part has the same K.
    pub shape: &'a [i64],
    /// Two E2M1 values per byte, the even element in the low nibble: `R * C / 2` bytes of the stored matrix.
    pub values: BufMut<'a>,
    /// The E4M3 block scales: compact `R * ceil(C/16)` bytes, or TE's padded / 128x4 buffer of
    /// `roundup(R, 128) * roundup(ceil(C/16), 4)`.
    pub scales: BufMut<'a>,
}

/// Quantizes to NVFP4 (`mxfp8_nvfp4_quantize_into`), bit-exact with Transformer Engine's quantizer: one
/// part, or several fused shards (Q/K/V, gate/up) under one shared per-tensor amax, each shard byte for
/// byte what a one-part call writes with that amax given. `amax` is float32: 1 (per tensor) or M (per
/// row, one rowwise part only), written with [`AmaxMode::Compute`](crate::AmaxMode::Compute), read with
/// [`AmaxMode::Given`](crate::AmaxMode::Given). Everything is checked before anything is written; device
/// memory is written by work queued on `options`' stream.
///
/// ```
/// # use mxfp8::{nvfp4_quantize_into, Buf, Nvfp4Part, Nvfp4QuantizeOptions};
/// # fn main() -> Result<(), mxfp8::Error> {
/// let x = [6.0f32, -3.0, 0.5, 0.0];
/// let (mut values, mut scales, mut amax) = ([0u8; 2], [0u8; 1], [0f32; 1]);
/// let part = Nvfp4Part { input: Buf::from(&x), shape: &[1, 4], values: (&mut values).into(), scales: (&mut scales).into() };
/// nvfp4_quantize_into(vec![part], &Nvfp4QuantizeOptions::new(), &mut amax)?;
/// assert_eq!(amax, [6.0]);
/// assert_eq!(values, [0xD7, 0x01]); // 6 = code 7, -3 = code 0xD; 0.5 = 1, 0 = 0
/// # Ok(()) }
/// ```
pub fn nvfp4_quantize_into<'a>(parts: Vec<Nvfp4Part<'_>>, options: &Nvfp4QuantizeOptions, amax: impl Into<BufMut<'a>>) -> Result<(), Error> {
    let mut inputs = Vec::with_capacity(parts.len());
    for p in &parts {
        inputs.push(p.input.raw.shaped(p.shape, "input")?);
    }
    let mut values: Vec<Dl> = parts.iter().map(|p| p.values.raw.dl(None)).collect();
    let mut scales: Vec<Dl> = parts.iter().map(|p| p.scales.raw.dl(None)).collect();
    let input_ptrs: Vec<*const sys::DLTensor> = inputs.iter_mut().map(|t| t.ptr() as *const _).collect();
    let value_ptrs: Vec<*mut sys::DLTensor> = values.iter_mut().map(Dl::ptr).collect();
    let scale_ptrs: Vec<*mut sys::DLTensor> = scales.iter_mut().map(Dl::ptr).collect();
    let mut a = amax.into().raw.dl(None);
    let o = options.to_sys();
    // SAFETY: the arrays hold parts.len() pointers, read during the call; the buffers are borrowed (host)
    // or promised (DeviceBytes) for the work.
    check(unsafe {
        sys::mxfp8_nvfp4_quantize_into(input_ptrs.as_ptr(), input_ptrs.len(), &o, value_ptrs.as_ptr(), scale_ptrs.as_ptr(), a.ptr())
    })
}
