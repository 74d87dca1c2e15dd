//! NVFP4 through the safe API on the host path: describe, export (both global scale conventions),
//! dequantize, quantize into caller slices in every scale layout, and fused shards under one global
//! scale, against references written here from the header's rules (E2M1 and E4M3 decoded from their bit
//! formats, Transformer Engine's float steps), into poisoned outputs, on shapes with partial blocks.
mod common;
use common::*;

use mxfp8::{
    nvfp4_quantize_into, AmaxMode, AmaxScope, Buf, BufMut, DequantizeOptions, Direction, ExportOptions, Format, GlobalScale, ManagedTensor,
    Nvfp4Part, Nvfp4QuantizeOptions, PaddedScales, QuantizedScales, ScaleLayout, ScalesDtype, Status, Stream, TensorBuilder, Transfer,
    ValuesDtype,
};

const E2M1: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// An E2M1 nibble: sign bit 3, magnitude index in bits 0..3.
fn decode_e2m1(n: u8) -> f32 {
    let m = E2M1[(n & 7) as usize];
    if n & 8 != 0 {
        -m
    } else {
        m
    }
}

/// f32 to E2M1: the nearest magnitude, ties to the even code, saturating at 6; zero keeps its sign; NaN
/// is +6 (0x7).
fn encode_e2m1(y: f32) -> u8 {
    if y.is_nan() {
        return 7;
    }
    let a = y.abs();
    let mut best = 0usize;
    for (code, &m) in E2M1.iter().enumerate() {
        let (d, db) = ((m - a).abs(), (E2M1[best] - a).abs());
        if d < db || (d == db && code % 2 == 0) {
            best = code;
        }
    }
    best as u8 | if y.is_sign_negative() { 8 } else { 0 }
}

/// Element j of a packed row: the even element in the low nibble.
fn nibble(row: &[u8], j: usize) -> u8 {
    (row[j / 2] >> (4 * (j % 2))) & 0xF
}

/// The header's decode of one element, in float, in its order; NaN as 0x7FFFFFFF.
fn decode(v: u8, scale: u8, amax: f32) -> u32 {
    let x = decode_e2m1(v) * ((decode_e4m3(scale) as f32 * amax) * (1.0f32 / 2688.0));
    if x.is_nan() {
        0x7FFF_FFFF
    } else {
        x.to_bits()
    }
}

/// The dequantize of a stored (r, c) matrix with compact scales and one amax per row (`amax(row)`).
fn dequantize_reference(values: &[u8], scales: &[u8], r: usize, c: usize, amax: impl Fn(usize) -> f32) -> Vec<u32> {
    let sc = c.div_ceil(16);
    (0..r * c).map(|i| decode(nibble(&values[(i / c) * c / 2..], i % c), scales[(i / c) * sc + (i % c) / 16], amax(i / c))).collect()
}

/// Transformer Engine's encode scale of an amax, per the header: (6 * E4M3_MAX) / amax capped at FLT_MAX
/// (NaN too), 1 for a zero amax or a zero quotient.
fn encode_scale_with(amax: f32, e4m3_max: f32) -> f32 {
    let s = (6.0 * e4m3_max) / amax;
    let s = if s.is_nan() { f32::MAX } else { s.min(f32::MAX) };
    if amax == 0.0 || s == 0.0 {
        1.0
    } else {
        s
    }
}

fn encode_scale(amax: f32) -> f32 {
    encode_scale_with(amax, 448.0)
}

/// The header's NVFP4 quantizer (no 4over6) of a stored (r, c) matrix with one amax: packed values and
/// compact (r, ceil(c/16)) scales.
fn quantize_reference(x: &[f32], r: usize, c: usize, amax: f32) -> (Vec<u8>, Vec<u8>) {
    let sc = c.div_ceil(16);
    let s_enc = encode_scale(amax);
    let s_dec = 1.0 / s_enc;
    let (mut values, mut scales) = (vec![0u8; r * c / 2], vec![0u8; r * sc]);
    for row in 0..r {
        for b in 0..sc {
            let cols = b * 16..((b + 1) * 16).min(c);
            let block_amax = cols.clone().map(|j| x[row * c + j].abs()).filter(|v| !v.is_nan()).fold(0f32, f32::max);
            let scale = encode_e4m3(block_amax * (s_enc * (1.0f32 / 6.0)));
            scales[row * sc + b] = scale;
            let recip = if scale == 0 { f32::MAX } else { (1.0 / (decode_e4m3(scale) as f32 * s_dec)).min(f32::MAX) };
            for j in cols {
                values[(row * c + j) / 2] |= encode_e2m1(x[row * c + j] * recip) << (4 * (j % 2));
            }
        }
    }
    (values, scales)
}

fn amax_of(x: &[f32]) -> f32 {
    x.iter().filter(|v| !v.is_nan()).fold(0f32, |a, v| a.max(v.abs()))
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn export_and_dequantize_a_swizzled_tensor() {
    // Logical (1, 37, 40): 37 rows, 3 blocks of 16 per row, the last one partial (8 values).
    let (m, k) = (37usize, 40usize);
    let c = k.div_ceil(16);
    let values = random_bytes(m * k / 2, 51, 0, 255);
    let mut scales = random_bytes(m * c, 52, 0x20, 0x50);
    scales[2 * c + 1] = 0x7F; // an E4M3 NaN scale (row 2, block 1) decodes its block to NaN
    let amax = 3.7f32;
    let tensor = TensorBuilder::new().format(Format::Nvfp4)
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(ManagedTensor::from_host(values.clone(), &[1, m as i64, (k / 2) as i64]).unwrap(), ManagedTensor::from_host(swizzle_reference(&scales, m, c, POISON), &[128, 4]).unwrap()).amax(Direction::Rowwise, ManagedTensor::from_host(vec![amax], &[1]).unwrap())
        .build()
        .unwrap();
    assert_eq!(tensor.shape(), &[1, m as i64, k as i64]);
    let parts = tensor.export(&ExportOptions::new().values_dtype(ValuesDtype::Uint8)).unwrap();
    assert_eq!(parts.values.shape(), &[1, m as i64, (k / 2) as i64]);
    assert_eq!(parts.values.as_host_bytes().unwrap(), &values[..]);
    assert!(!parts.values.is_copy());
    assert_eq!(parts.scales.shape(), &[1, m as i64, c as i64]);
    assert_eq!(parts.scales.to_host::<u8>().unwrap(), scales);
    assert!(parts.scales.is_copy());
    assert_eq!(bits(&parts.global_scale.as_ref().unwrap().to_host::<f32>().unwrap()), bits(&[amax / 2688.0]));
    let encode = tensor.global_scale(&ExportOptions::new().values_dtype(ValuesDtype::Uint8).global_scale(GlobalScale::Encode)).unwrap();
    assert_eq!(bits(&encode.to_host::<f32>().unwrap()), bits(&[2688.0 / amax]));
    // float4 values: the same bytes, described as (.., K) 4-bit elements.
    let f4 = tensor.export(&ExportOptions::new().values_dtype(ValuesDtype::Uint8).values_dtype(ValuesDtype::Fp8)).unwrap();
    assert_eq!((f4.values.dtype().code.0, f4.values.dtype().bits), (17, 4));
    assert_eq!(f4.values.shape(), &[1, m as i64, k as i64]);

    let want = dequantize_reference(&values, &scales, m, k, |_| amax);
    assert_eq!(bits(&common::dequantize_host(&tensor, Direction::Rowwise).unwrap()), want);
    assert_eq!(want[2 * k + 16..2 * k + 32].iter().filter(|&&b| b == 0x7FFF_FFFF).count(), 16, "the NaN scale's block");
    // bfloat16 output: the float32 result rounded to nearest-even.
    let mut bf16 = vec![0xEEEEu16; m * k];
    tensor.dequantize_into(BufMut::bf16(&mut bf16), &DequantizeOptions::new()).unwrap();
    let want16: Vec<u16> = want.iter().map(|&b| if b == 0x7FFF_FFFF { 0x7FFF } else { f32_to_bf16(f32::from_bits(b)) }).collect();
    assert_eq!(bf16, want16);
    // The wrong output size and the missing direction.
    let mut short = vec![0f32; m * k - 1];
    let err = tensor.dequantize_into(BufMut::from(&mut short), &DequantizeOptions::new()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    let err = tensor.export(&ExportOptions::new().values_dtype(ValuesDtype::Uint8).direction(Direction::Columnwise)).unwrap_err();
    assert_eq!(err.status, Status::MissingData, "{err}");
}

#[test]
fn global_scale_conventions_at_the_edges() {
    // Per-row amax (TE's row_scaled_nvfp4): zero, Inf, NaN, tiny, ordinary.
    let amax = [0.0f32, f32::INFINITY, f32::NAN, 1e-30, 448.0];
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor).format(Format::Nvfp4)
        .rowwise(ManagedTensor::from_host(vec![0x11; 5 * 8], &[5, 8]).unwrap(), ManagedTensor::from_host(vec![0x38; 5], &[5, 1]).unwrap()).amax(Direction::Rowwise, ManagedTensor::from_host(amax.to_vec(), &[5]).unwrap())
        .build()
        .unwrap();
    let encode = tensor.global_scale(&ExportOptions::new().values_dtype(ValuesDtype::Uint8).global_scale(GlobalScale::Encode)).unwrap();
    assert_eq!(encode.shape(), &[5]);
    let want: Vec<f32> = amax.iter().map(|&a| encode_scale(a)).collect();
    assert_eq!(bits(&encode.to_host::<f32>().unwrap()), bits(&want));
    assert_eq!(&want[..3], &[1.0, 1.0, f32::MAX]);
    let decode = tensor.global_scale(&ExportOptions::new().values_dtype(ValuesDtype::Uint8)).unwrap().to_host::<f32>().unwrap();
    assert_eq!(bits(&decode[..2]), bits(&[0.0, f32::INFINITY]));
    assert!(decode[2].is_nan());
    assert_eq!(bits(&decode[3..]), bits(&[1e-30 / 2688.0, 448.0 / 2688.0]));
    // A per-row amax of the wrong count.
    let err = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor).format(Format::Nvfp4)
        .rowwise(ManagedTensor::from_host(vec![0x11; 5 * 8], &[5, 8]).unwrap(), ManagedTensor::from_host(vec![0x38; 5], &[5, 1]).unwrap()).amax(Direction::Rowwise, ManagedTensor::from_host(vec![1.0; 3], &[3]).unwrap())
        .build()
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("amax"), "{err}");
}

#[test]
fn columnwise_data_is_the_stored_transpose() {
    // Logical (32, 24): the columnwise data is the (24, 32) transpose, stored (24, 16) bytes, with TE's
    // padded scales (roundup(24, 128), roundup(2, 4)), padding poisoned.
    let (m, k) = (32usize, 24usize);
    let (r, c) = (k, m);
    let sc = c.div_ceil(16);
    let values = random_bytes(r * c / 2, 61, 0, 255);
    let scales = random_bytes(r * sc, 62, 0x28, 0x48);
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor).format(Format::Nvfp4)
        .columnwise(ManagedTensor::from_host(values.clone(), &[r as i64, (c / 2) as i64]).unwrap(), ManagedTensor::from_host(pad_reference(&scales, r, sc, 128, 4, POISON), &[128, 4]).unwrap()).amax(Direction::Columnwise, ManagedTensor::from_host(vec![5.0], &[]).unwrap())
        .build()
        .unwrap();
    assert_eq!(tensor.shape(), &[m as i64, k as i64], "(K, M/2) bytes read back as (M, K)");
    let parts = tensor.export(&ExportOptions::new().values_dtype(ValuesDtype::Uint8).direction(Direction::Columnwise)).unwrap();
    assert_eq!(parts.values.shape(), &[r as i64, (c / 2) as i64]);
    assert_eq!(parts.scales.shape(), &[r as i64, sc as i64]);
    assert_eq!(parts.scales.to_host::<u8>().unwrap(), scales);
    // Padded row-major scales as a strided view (row stride 4) instead of a copy; E4M3 as their dtype.
    let view = tensor
        .export(&ExportOptions::new().values_dtype(ValuesDtype::Uint8).direction(Direction::Columnwise).padded_scales(PaddedScales::StridedView).scales_dtype(ScalesDtype::E8M0))
        .unwrap();
    assert!(!view.scales.is_copy());
    assert_eq!((view.scales.strides(), view.scales.dtype().code.0), (vec![4, 1], 10));
    assert_eq!(view.scales.to_host::<u8>().unwrap(), scales);
    let mut out = vec![f32::from_bits(0xEEEE_EEEE); r * c];
    tensor.dequantize_into(BufMut::from(&mut out), &DequantizeOptions::new().direction(Direction::Columnwise)).unwrap();
    assert_eq!(bits(&out), dequantize_reference(&values, &scales, r, c, |_| 5.0));
}

fn poisoned(n: usize) -> Vec<u8> {
    vec![POISON; n]
}

#[test]
fn quantize_into_matches_the_reference_in_every_layout() {
    // (37, 40): partial last blocks, rows not a multiple of anything; random binades, an all-zero block,
    // -0, a NaN, and values that tie between E2M1 codes.
    let (m, k) = (37usize, 40usize);
    let sc = k.div_ceil(16);
    let mut x = random_floats(m * k, 71);
    x[40] = -0.0;
    x[41] = f32::NAN;
    let amax = amax_of(&x);
    let (want_values, want_scales) = quantize_reference(&x, m, k, amax);
    for (layout, want) in [
        (QuantizedScales::Compact, want_scales.clone()),
        (QuantizedScales::Padded, pad_reference(&want_scales, m, sc, 128, 4, 0)),
        (QuantizedScales::Swizzled, swizzle_reference(&want_scales, m, sc, 0)),
    ] {
        let options = Nvfp4QuantizeOptions::new().scales(layout);
        let (mut values, mut scales, mut out_amax) = (poisoned(m * k / 2), poisoned(want.len()), [f32::NAN]);
        nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &[m as i64, k as i64], values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut out_amax)
            .unwrap();
        assert_eq!(out_amax[0].to_bits(), amax.to_bits());
        assert_eq!(values, want_values, "{layout:?} values");
        assert_eq!(scales, want, "{layout:?} scales");
    }
    // bfloat16 input: the same rules on the bfloat16 values.
    let xb: Vec<u16> = x.iter().map(|&v| if v.is_nan() { 0x7FC0 } else { f32_to_bf16(v) }).collect();
    let xf: Vec<f32> = xb.iter().map(|&b| bf16_to_f32(b)).collect();
    let (want_values, want_scales) = quantize_reference(&xf, m, k, amax_of(&xf));
    let (mut values, mut scales, mut out_amax) = (poisoned(m * k / 2), poisoned(m * sc), [0f32]);
    let options = Nvfp4QuantizeOptions::new();
    nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::bf16(&xb), shape: &[m as i64, k as i64], values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut out_amax)
        .unwrap();
    assert_eq!((values, scales), (want_values.clone(), want_scales.clone()));
    // The quantized bytes describe a tensor that dequantizes by the decode rule.
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor).format(Format::Nvfp4)
        .rowwise(ManagedTensor::from_host(want_values.clone(), &[m as i64, (k / 2) as i64]).unwrap(), ManagedTensor::from_host(want_scales.clone(), &[m as i64, sc as i64]).unwrap()).amax(Direction::Rowwise, ManagedTensor::from_host(out_amax.to_vec(), &[1]).unwrap())
        .build()
        .unwrap();
    assert_eq!(bits(&common::dequantize_host(&tensor, Direction::Rowwise).unwrap()), dequantize_reference(&want_values, &want_scales, m, k, |_| out_amax[0]));
}

#[test]
fn columnwise_per_row_and_given_amax() {
    let (m, k) = (38usize, 20usize);
    let shape = [m as i64, k as i64];
    let x = random_floats(m * k, 81);
    // Columnwise: the (K, M) transpose, blocked along M.
    let xt = transpose_f32(&x, m, k);
    let (want_values, want_scales) = quantize_reference(&xt, k, m, amax_of(&x));
    let options = Nvfp4QuantizeOptions::new().direction(Direction::Columnwise);
    let (mut values, mut scales, mut amax) = (poisoned(k * m / 2), poisoned(k * m.div_ceil(16)), [0f32]);
    nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &shape, values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut amax).unwrap();
    assert_eq!((values, scales), (want_values, want_scales));
    // Per row: each row against its own amax.
    let options = Nvfp4QuantizeOptions::new().amax_scope(AmaxScope::PerRow);
    let (mut values, mut scales, mut amax) = (poisoned(m * k / 2), poisoned(m * k.div_ceil(16)), vec![0f32; m]);
    nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &shape, values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut amax).unwrap();
    for r in 0..m {
        let row = &x[r * k..(r + 1) * k];
        assert_eq!(amax[r].to_bits(), amax_of(row).to_bits(), "row {r}");
        let (v, s) = quantize_reference(row, 1, k, amax_of(row));
        assert_eq!((&values[r * k / 2..(r + 1) * k / 2], &scales[r * 2..(r + 1) * 2]), (&v[..], &s[..]), "row {r}");
    }
    // Given: the amax is read as the caller set it, and left alone.
    let options = Nvfp4QuantizeOptions::new().amax_mode(AmaxMode::Given);
    let (mut values, mut scales, mut amax) = (poisoned(m * k / 2), poisoned(m * 2), [10.0f32]);
    nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &shape, values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut amax).unwrap();
    assert_eq!(amax, [10.0]);
    assert_eq!((values, scales), quantize_reference(&x, m, k, 10.0));
}

#[test]
fn bad_quantize_calls_write_nothing() {
    let x = random_floats(4 * 15, 91);
    let (mut values, mut scales, mut amax) = (poisoned(30), poisoned(4), [f32::from_bits(0xEEEE_EEEE)]);
    // K = 15 is odd: rows of whole bytes cannot hold it.
    let err = nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &[4, 15], values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &Nvfp4QuantizeOptions::new(), &mut amax)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(values.iter().chain(&scales).all(|&b| b == POISON) && amax[0].to_bits() == 0xEEEE_EEEE, "a failed quantize wrote");
    // Per-row amax is rowwise only.
    let x = random_floats(4 * 16, 92);
    let options = Nvfp4QuantizeOptions::new().amax_scope(AmaxScope::PerRow).direction(Direction::Columnwise);
    let (mut values, mut scales, mut amax) = (poisoned(32), poisoned(16), [0f32; 4]);
    let err = nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &[4, 16], values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut amax).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    // A scale buffer of the wrong size.
    let (mut values, mut scales, mut amax) = (poisoned(32), poisoned(5), [0f32]);
    let err = nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &[4, 16], values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &Nvfp4QuantizeOptions::new(), &mut amax)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("scales"), "{err}");
    assert!(values.iter().chain(&scales).all(|&b| b == POISON));
}

#[test]
fn fused_shards_share_one_global_scale() {
    // Q/K/V-like shards of one K with different magnitudes: the shared amax is the largest.
    let k = 48usize;
    let rows = [20usize, 13, 7];
    let xs: Vec<Vec<f32>> = rows
        .iter()
        .enumerate()
        .map(|(i, &r)| random_floats(r * k, 100 + i as u64).iter().map(|v| v * 10f32.powi(i as i32)).collect())
        .collect();
    let shapes: Vec<[i64; 2]> = rows.iter().map(|&r| [r as i64, k as i64]).collect();
    let shared = xs.iter().map(|x| amax_of(x)).fold(0f32, f32::max);
    let mut outs: Vec<(Vec<u8>, Vec<u8>)> = rows.iter().map(|&r| (poisoned(r * k / 2), poisoned(r * k.div_ceil(16)))).collect();
    let mut amax = 0f32;
    let shards: Vec<Nvfp4Part<'_>> = xs
        .iter()
        .zip(&shapes)
        .zip(outs.iter_mut())
        .map(|((x, shape), (v, s))| Nvfp4Part { input: Buf::from(x), shape, values: v.into(), scales: s.into() })
        .collect();
    nvfp4_quantize_into(shards, &Nvfp4QuantizeOptions::new(), std::slice::from_mut(&mut amax)).unwrap();
    assert_eq!(amax.to_bits(), shared.to_bits());
    for (i, (x, out)) in xs.iter().zip(&outs).enumerate() {
        assert_eq!(*out, quantize_reference(x, rows[i], k, shared), "shard {i}");
        // What the single-tensor call writes with the shared amax given.
        let (mut v, mut s, mut a) = (poisoned(out.0.len()), poisoned(out.1.len()), [shared]);
        let given = Nvfp4QuantizeOptions::new().amax_mode(AmaxMode::Given);
        nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(x), shape: &shapes[i], values: BufMut::from(&mut v), scales: BufMut::from(&mut s) }], &given, &mut a).unwrap();
        assert_eq!((v, s), out.clone(), "shard {i}");
    }
    // The reconcile is not a no-op: the smallest shard's own amax gives other block scales.
    assert_ne!(quantize_reference(&xs[0], rows[0], k, amax_of(&xs[0])).1, outs[0].1);
    // Per-row scope is refused for fused shards (the C call takes per-row amaxes at count 1 only): the
    // library says so, and writes nothing.
    let (mut v0, mut s0, mut v1, mut s1) = (poisoned(rows[0] * k / 2), poisoned(rows[0] * 3), poisoned(rows[1] * k / 2), poisoned(rows[1] * 3));
    let two = vec![
        Nvfp4Part { input: Buf::from(&xs[0]), shape: &shapes[0], values: (&mut v0).into(), scales: (&mut s0).into() },
        Nvfp4Part { input: Buf::from(&xs[1]), shape: &shapes[1], values: (&mut v1).into(), scales: (&mut s1).into() },
    ];
    let mut row_amax = vec![0f32; rows[0] + rows[1]];
    let err = nvfp4_quantize_into(two, &Nvfp4QuantizeOptions::new().amax_scope(AmaxScope::PerRow), &mut row_amax).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("amax_scope"), "{err}");
    assert!(v0.iter().chain(&s0).chain(&v1).chain(&s1).all(|&b| b == POISON), "a refused quantize wrote");
}

/// The header's 4over6 quantizer of a stored (r, c) matrix with one amax and E4M3_MAX `e4m3_max`: each
/// block quantized with the map-to-6 and the map-to-4 scale, the latter kept only when its summed error
/// (`mse`: squared, else absolute; in element order, in float) is strictly smaller.
fn quantize_4over6_reference(x: &[f32], r: usize, c: usize, amax: f32, e4m3_max: f32, mse: bool) -> (Vec<u8>, Vec<u8>) {
    let sc = c.div_ceil(16);
    let s_enc = encode_scale_with(amax, e4m3_max);
    let s_dec = 1.0 / s_enc;
    let (mut values, mut scales) = (vec![0u8; r * c / 2], vec![0u8; r * sc]);
    for row in 0..r {
        for b in 0..sc {
            let cols = b * 16..((b + 1) * 16).min(c);
            let block_amax = cols.clone().map(|j| x[row * c + j].abs()).filter(|v| !v.is_nan()).fold(0f32, f32::max);
            let candidate = |factor: f32| {
                let scale = encode_e4m3(((block_amax / 6.0) * s_enc * factor).min(448.0));
                let recip = if scale == 0 { f32::MAX } else { (1.0 / (decode_e4m3(scale) as f32 * s_dec)).min(f32::MAX) };
                let codes: Vec<u8> = cols.clone().map(|j| encode_e2m1(x[row * c + j] * recip)).collect();
                let mut err = 0f32;
                for (code, j) in codes.iter().zip(cols.clone()) {
                    let d = ((decode_e2m1(*code) * decode_e4m3(scale) as f32) * amax) / (6.0 * e4m3_max) - x[row * c + j];
                    err += if mse { d * d } else { d.abs() };
                }
                (scale, codes, err)
            };
            let (six, four) = (candidate(1.0), candidate(1.5));
            let (scale, codes, _) = if four.2 < six.2 { four } else { six };
            scales[row * sc + b] = scale;
            for (code, j) in codes.into_iter().zip(cols) {
                values[(row * c + j) / 2] |= code << (4 * (j % 2));
            }
        }
    }
    (values, scales)
}

#[test]
fn four_over_six_matches_its_rule() {
    use mxfp8::FourOverSix;
    let (m, k) = (37usize, 40usize);
    let x = random_floats(m * k, 95);
    let amax = amax_of(&x);
    for (mode, e4m3_max) in [(FourOverSix::Mae, 448), (FourOverSix::Mse, 256), (FourOverSix::Mse, 448)] {
        let options = Nvfp4QuantizeOptions::new().four_over_six(mode).e4m3_max(e4m3_max);
        let (mut values, mut scales, mut out_amax) = (poisoned(m * k / 2), poisoned(m * 3), [0f32]);
        nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &[m as i64, k as i64], values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut out_amax)
            .unwrap();
        let want = quantize_4over6_reference(&x, m, k, amax, e4m3_max as f32, mode == FourOverSix::Mse);
        assert_eq!((&values, &scales), (&want.0, &want.1), "{mode:?} {e4m3_max}");
        if e4m3_max == 448 {
            assert_ne!(scales, quantize_reference(&x, m, k, amax).1, "{mode:?}: some blocks must map to 4");
            continue;
        }
        // A 4over6 tensor decodes with 1 / (6 * 256).
        let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor).format(Format::Nvfp4)
            .e4m3_max(256)
            .rowwise(ManagedTensor::from_host(values.clone(), &[m as i64, (k / 2) as i64]).unwrap(), ManagedTensor::from_host(scales.clone(), &[m as i64, 3]).unwrap()).amax(Direction::Rowwise, ManagedTensor::from_host(out_amax.to_vec(), &[1]).unwrap())
            .build()
            .unwrap();
        assert_eq!(tensor.e4m3_max(), Some(256));
        let got = common::dequantize_host(&tensor, Direction::Rowwise).unwrap();
        for (i, g) in got.iter().enumerate() {
            let (row, j) = (i / k, i % k);
            let want = decode_e2m1(nibble(&values[row * k / 2..], j)) * ((decode_e4m3(scales[row * 3 + j / 16]) as f32 * amax) * (1.0f32 / 1536.0));
            assert_eq!(g.to_bits(), want.to_bits(), "element {i}");
        }
    }
    // E4M3_MAX 256 is 4over6's alone.
    let options = Nvfp4QuantizeOptions::new().e4m3_max(256);
    let (mut values, mut scales, mut out_amax) = (poisoned(m * k / 2), poisoned(m * 3), [0f32]);
    let err = nvfp4_quantize_into(vec![Nvfp4Part { input: Buf::from(&x), shape: &[m as i64, k as i64], values: BufMut::from(&mut values), scales: BufMut::from(&mut scales) }], &options, &mut out_amax)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
}

#[test]
fn scales_shape_keeps_the_leading_dimensions_as_the_export_does() {
    // Logical (2, 32, 48) rowwise: the header's compact NVFP4 scales are (*lead, ceil(K/16)) = (2, 32, 3),
    // as MXFP8's keep theirs; the shape a manifest carries is that one too, so that a receiver in any
    // binding rebuilds the sender's scales, not a flattened (64, 3).
    let (lead, m, k) = (2usize, 32usize, 48usize);
    let values = random_bytes(lead * m * k / 2, 71, 0, 255);
    let scales = random_bytes(lead * m * k.div_ceil(16), 72, 0x28, 0x48);
    let tensor = TensorBuilder::new().format(Format::Nvfp4).scale_layout(ScaleLayout::RowMajor)
        .rowwise(ManagedTensor::from_host(values.clone(), &[lead as i64, m as i64, (k / 2) as i64]).unwrap(),
                 ManagedTensor::from_host(scales.clone(), &[(lead * m) as i64, k.div_ceil(16) as i64]).unwrap())
        .amax(Direction::Rowwise, ManagedTensor::from_host(vec![3.0f32], &[1]).unwrap())
        .build()
        .unwrap();
    let expected = [lead as i64, m as i64, k.div_ceil(16) as i64];
    assert_eq!(tensor.scales_shape(Direction::Rowwise), expected);
    let parts = tensor.export(&ExportOptions::new()).unwrap();
    assert_eq!((parts.scales.shape(), parts.scales.to_host::<u8>().unwrap()), (&expected[..], scales.clone()));

    let send = Transfer::from_tensors(&[&tensor]);
    let (bucket_parts, total) = send.bucket_parts(64).unwrap();
    let manifest = send.manifest(["w"], &bucket_parts).unwrap();
    assert_eq!(manifest.entries[0].scales_shape, expected);
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(&mut bucket, &bucket_parts).run(Stream::default()).unwrap();
    let views = manifest.unpack(&bucket).unwrap();
    assert_eq!((views[0].scales.as_host().unwrap(), views[0].values.as_host().unwrap()), (&scales[..], &values[..]));
}
