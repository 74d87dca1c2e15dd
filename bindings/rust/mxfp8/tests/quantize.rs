//! Quantizing on the host through the safe API: known answers, and swizzled outputs that a tensor built
//! from them exports back to the compact scales.
mod common;

use mxfp8::{
    quantize, Buf, BufMut, Direction, ExportOptions, ManagedTensor, QuantizeOptions, Quantized, QuantizedScales, ScaleLayout,
    ScaleRounding, TensorBuilder,
};

#[test]
fn known_answers() {
    // Row 0: amax 1, 1/448 rounds up to 2^-8: scale 119, 1 * 2^8 = 256 = 0x78. Row 1: amax 500: scale 128,
    // 500 / 2 = 250 rounds to 256. Row 2: all zero: scale 0, -0 keeps its sign (0x80).
    let mut x = vec![0f32; 3 * 32];
    x[0] = 1.0;
    x[32] = 500.0;
    x[65] = -0.0;
    let q = quantize(Buf::from(&x), &[3, 32], &[Direction::Rowwise], &QuantizeOptions::default()).unwrap().remove(0);
    assert_eq!(q.scale_inv.as_host_bytes().unwrap(), &[119, 128, 0]);
    let v = q.data.as_host_bytes().unwrap();
    assert_eq!((v[0], v[32], v[65]), (0x78, 0x78, 0x80));
    // FLOOR: 500 keeps scale 127 and saturates to 448 (0x7E). bfloat16 1.0 is 0x3F80.
    let floor = QuantizeOptions::new().rounding(ScaleRounding::Floor);
    let q = quantize(Buf::from(&x), &[3, 32], &[Direction::Rowwise], &floor).unwrap().remove(0);
    assert_eq!(q.scale_inv.as_host_bytes().unwrap()[1], 127);
    assert_eq!(q.data.as_host_bytes().unwrap()[32], 0x7E);
    // compressed-tensors: 500 (mantissa 1.95 >= 1.75) rounds up to 2^9: scale 128, as RCEIL here; an Inf
    // makes its block's scale 255 and its finite values 0.
    let ct = QuantizeOptions::new().rounding(ScaleRounding::CompressedTensors);
    x[64] = f32::INFINITY;
    let q = quantize(Buf::from(&x), &[3, 32], &[Direction::Rowwise], &ct).unwrap().remove(0);
    assert_eq!(q.scale_inv.as_host_bytes().unwrap(), &[119, 128, 255]);
    let v = q.data.as_host_bytes().unwrap();
    assert_eq!((v[0], v[32], v[64], v[65]), (0x78, 0x78, 0x7F, 0x80));
    x[64] = 0.0;
    let bf16 = [0x3F80u16; 32];
    let q = quantize(Buf::bf16(&bf16), &[1, 32], &[Direction::Rowwise], &QuantizeOptions::default()).unwrap().remove(0);
    assert_eq!(q.scale_inv.as_host_bytes().unwrap(), &[119]);
    let err = quantize(Buf::from(&x), &[4, 32], &[Direction::Rowwise], &QuantizeOptions::default()).unwrap_err();
    assert!(err.message.contains("cannot have the shape"), "{err}");
}

#[test]
fn swizzled_outputs_build_a_tensor_that_exports_the_compact_scales() {
    let (rows, k) = (100usize, 200usize);
    let x: Vec<f32> = (0..rows * k).map(|i| ((i * 7919) % 1000) as f32 * 0.37 - 185.0).collect();
    let shape = [rows as i64, k as i64];
    let compact = quantize(Buf::from(&x), &shape, &[Direction::Rowwise], &QuantizeOptions::default()).unwrap().remove(0);
    let te = QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    let swizzled = quantize(Buf::from(&x), &shape, &[Direction::Rowwise], &te).unwrap().remove(0);
    assert_eq!(swizzled.scale_inv.shape(), &[128, 8]);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(swizzled.data.to_host::<u8>().unwrap(), &shape).unwrap(),
            ManagedTensor::from_host(swizzled.scale_inv.to_host::<u8>().unwrap(), &[128, 8]).unwrap(),
        )
        .build()
        .unwrap();
    let parts = tensor.export(&ExportOptions::default()).unwrap();
    assert_eq!(parts.scales.as_host_bytes().unwrap(), compact.scale_inv.as_host_bytes().unwrap());
    // Decoding undoes the quantization to within E4M3's 3 mantissa bits for the block's large values.
    let y = common::dequantize_host(&tensor, Direction::Rowwise).unwrap();
    for (a, b) in x.iter().zip(&y) {
        assert!((a - b).abs() <= a.abs() / 16.0 + 4.0, "{a} decoded as {b}");
    }
}

use common::*;

use mxfp8::{
    quantize_into, Block, DequantizeOptions, Status,
};

/// Every scale layout and both directions of quantize_into over caller slices, against the reference
/// quantizer and layouts of tests/common (a shape that is a multiple of nothing: 70 x 100).
#[test]
fn quantize_into_matches_the_reference_in_every_layout() {
    let (m, k) = (70usize, 100usize);
    let x = random_floats(m * k, 5);
    let shape = [m as i64, k as i64];
    let (rv, rs) = quantize_rowwise_reference(&x, m, k);
    let (cv, cs) = quantize_columnwise_reference(&x, m, k);
    let (rc, cr) = (k.div_ceil(32), m.div_ceil(32));
    for layout in [QuantizedScales::Compact, QuantizedScales::Padded, QuantizedScales::Swizzled] {
        let options = QuantizeOptions::new().scales(layout);
        let (row_scales, col_scales) = match layout {
            QuantizedScales::Compact => (rs.clone(), cs.clone()),
            QuantizedScales::Padded => (pad_reference(&rs, m, rc, 128, 4, 0), pad_reference(&cs, cr, k, 4, 128, 0)),
            QuantizedScales::Swizzled => (swizzle_reference(&rs, m, rc, 0), swizzle_reference(&transpose(&cs, cr, k), k, cr, 0)),
        };
        let rshape = quantized_scales_shape(layout, &shape, Direction::Rowwise);
        let cshape = quantized_scales_shape(layout, &shape, Direction::Columnwise);
        assert_eq!(rshape.iter().product::<i64>() as usize, row_scales.len(), "{layout:?}");
        assert_eq!(cshape.iter().product::<i64>() as usize, col_scales.len(), "{layout:?}");
        let (mut v1, mut s1) = (vec![POISON; m * k], vec![POISON; row_scales.len()]);
        let (mut v2, mut s2) = (vec![POISON; m * k], vec![POISON; col_scales.len()]);
        quantize_into(
            Buf::from(&x),
            &shape,
            &options,
            Some((BufMut::from(&mut v1), BufMut::from(&mut s1))),
            Some((BufMut::from(&mut v2), BufMut::from(&mut s2))),
        )
        .unwrap();
        assert!(v1 == rv && s1 == row_scales, "rowwise {layout:?}");
        assert!(v2 == cv && s2 == col_scales, "columnwise {layout:?}");
        // The allocating quantize agrees, and its scale shape is the header's.
        let q = quantize(Buf::from(&x), &shape, &[Direction::Columnwise], &options).unwrap().remove(0);
        assert_eq!(q.scale_inv.shape(), &cshape[..], "{layout:?}");
        assert_eq!(q.scale_inv.to_host::<u8>().unwrap(), col_scales);
    }
    // 32x32 blocks: compact scales are one per block.
    let q = quantize(Buf::from(&x), &shape, &[Direction::Rowwise], &QuantizeOptions::new().block(Block::B32x32)).unwrap().remove(0);
    assert_eq!(q.scale_inv.shape(), &[3, 4]);
}

#[test]
fn quantize_into_reads_bfloat16_and_checks_its_buffers() {
    let (m, k) = (33usize, 64usize);
    let bits: Vec<u16> = random_floats(m * k, 8).into_iter().map(f32_to_bf16).collect();
    let x: Vec<f32> = bits.iter().map(|&b| bf16_to_f32(b)).collect();
    let (rv, rs) = quantize_rowwise_reference(&x, m, k);
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; m * 2]);
    let shape = [m as i64, k as i64];
    let options = QuantizeOptions::new();
    quantize_into(Buf::bf16(&bits), &shape, &options, Some((BufMut::from(&mut v), BufMut::from(&mut s))), None).unwrap();
    assert_eq!((v, s), (rv, rs));

    // A scale buffer of the wrong size: the library's error, and nothing written.
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; m * 2 - 1]);
    let err = quantize_into(Buf::bf16(&bits), &shape, &options, Some((BufMut::from(&mut v), BufMut::from(&mut s))), None)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("rowwise_scale_inv"), "{err}");
    assert!(v.iter().chain(&s).all(|&b| b == POISON));
    // No direction at all.
    let err = quantize_into(Buf::bf16(&bits), &shape, &options, None, None).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(!err.message.is_empty());
}

/// Dequantize into caller buffers (float32 and bfloat16) against value * 2^(scale - 127) computed here.
#[test]
fn dequantize_into_matches_the_decode_formula() {
    let (m, k) = (40usize, 72usize);
    let (c, cr) = (k.div_ceil(32), m.div_ceil(32));
    let values = random_bytes(m * k, 11, 0, 0x7E); // no NaN codes
    let values: Vec<u8> = values.iter().enumerate().map(|(i, &v)| if i % 3 == 0 { v | 0x80 } else { v }).collect();
    let rs = random_bytes(m * c, 12, 100, 150);
    let cs = random_bytes(cr * k, 13, 100, 150);
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
                 ManagedTensor::from_host(rs.clone(), &[m as i64, c as i64]).unwrap())
        .columnwise(ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
                    ManagedTensor::from_host(cs.clone(), &[cr as i64, k as i64]).unwrap())
        .build()
        .unwrap();
    for direction in [Direction::Rowwise, Direction::Columnwise] {
        let expected: Vec<f32> = (0..m * k)
            .map(|i| {
                let (r, j) = (i / k, i % k);
                let e = if direction == Direction::Rowwise { rs[r * c + j / 32] } else { cs[(r / 32) * k + j] };
                (decode_e4m3(values[i]) * 2f64.powi(e as i32 - 127)) as f32
            })
            .collect();
        let mut out = vec![f32::NAN; m * k];
        tensor.dequantize_into(BufMut::from(&mut out), &DequantizeOptions::new().direction(direction)).unwrap();
        assert!(out.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()), "{direction:?}");
        let mut bf = vec![0xFFFFu16; m * k];
        tensor.dequantize_into(BufMut::bf16(&mut bf), &DequantizeOptions::new().direction(direction)).unwrap();
        assert!(bf.iter().zip(&expected).all(|(&a, &b)| a == f32_to_bf16(b)), "{direction:?} bf16");
    }
    let mut short = vec![0f32; m * k - 1];
    let err = tensor.dequantize_into(BufMut::from(&mut short), &DequantizeOptions::new()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("output"), "{err}");
}

#[test]
fn both_directions_in_one_call_in_the_order_given() {
    let (m, k) = (45usize, 70usize);
    let x = random_floats(m * k, 14);
    let shape = [m as i64, k as i64];
    let both = [Direction::Columnwise, Direction::Rowwise];
    let [c, r]: [Quantized; 2] = quantize(Buf::from(&x), &shape, &both, &QuantizeOptions::new()).unwrap().try_into().unwrap();
    let ((rv, rs), (cv, cs)) = (quantize_rowwise_reference(&x, m, k), quantize_columnwise_reference(&x, m, k));
    assert_eq!((r.data.to_host::<u8>().unwrap(), r.scale_inv.to_host::<u8>().unwrap()), (rv, rs));
    assert_eq!((c.data.to_host::<u8>().unwrap(), c.scale_inv.to_host::<u8>().unwrap()), (cv, cs));
    assert_eq!(c.scale_inv.shape(), &[2, 70]);
    // A direction given twice would be two owners of one output: refused before the call.
    let err = quantize(Buf::from(&x), &shape, &[Direction::Rowwise; 2], &QuantizeOptions::new()).unwrap_err();
    assert!(err.message.contains("Rowwise given twice"), "{err}");
}

/// compressed-tensors' MX scale of a block's amax (E4M3, emax 8), from the header's rule: the amax
/// rounded to a power of two (up from a mantissa of 1.75, so >= 1.75 * 2^127 is Inf), e = clamp(log2(p) -
/// 8 + 127, 0, 255), 0 for a zero or subnormal amax, 255 for Inf and NaN.
fn compressed_tensors_scale(amax: f32) -> u8 {
    if !amax.is_finite() {
        return 255;
    }
    let bits = amax.to_bits();
    let (exp, mantissa) = ((bits >> 23) & 0xFF, bits & 0x7F_FFFF);
    if exp == 0 {
        return 0;
    }
    let up = mantissa >= 0x60_0000; // 1.75 = 1 + 0x600000 / 2^23
    if exp == 254 && up {
        return 255;
    }
    (exp as i32 + up as i32 - 8).clamp(0, 255) as u8
}

#[test]
fn compressed_tensors_rounding_matches_its_rule() {
    // (37, 100): partial blocks along K; random binades, an all-zero block, a NaN, and blocks whose amax
    // sits on both sides of the 1.75 mantissa boundary.
    let (m, k) = (37usize, 100usize);
    let c = k.div_ceil(32);
    let mut x = common::random_floats(m * k, 41);
    for j in 0..32 {
        (x[5 * k + j], x[6 * k + j]) = (x[5 * k + j] / 4096.0, x[6 * k + j] / 4096.0); // below 1
    }
    x[5 * k] = 1.75 * 4.0;
    x[6 * k] = f32::from_bits((1.75f32 * 4.0).to_bits() - 1);
    x[7 * k + 40] = -1.25;
    x[8 * k] = f32::NAN;
    let ct = QuantizeOptions::new().rounding(ScaleRounding::CompressedTensors);
    let q = quantize(Buf::from(&x), &[m as i64, k as i64], &[Direction::Rowwise], &ct).unwrap().remove(0);
    let (values, scales) = (q.data.as_host_bytes().unwrap(), q.scale_inv.as_host_bytes().unwrap());
    let mut differs_from_rceil = 0;
    for r in 0..m {
        for b in 0..c {
            let cols = b * 32..((b + 1) * 32).min(k);
            let block = &x[r * k + cols.start..r * k + cols.end];
            let amax = if block.iter().any(|v| v.is_nan()) { f32::NAN } else { block.iter().fold(0f32, |a, v| a.max(v.abs())) };
            let e = compressed_tensors_scale(amax);
            assert_eq!(scales[r * c + b], e, "row {r} block {b}: amax {amax}");
            differs_from_rceil += (amax.is_finite() && e != common::rceil_scale(amax)) as usize;
            let factor = if e == 255 { 0.0 } else { 2f32.powi(127 - e as i32) };
            for j in cols {
                let want = if x[r * k + j].is_nan() { 0x7F } else { common::encode_e4m3(x[r * k + j] * factor) };
                assert_eq!(values[r * k + j], want, "row {r} column {j}: {} with scale {e}", x[r * k + j]);
            }
        }
    }
    // The rules part where the mantissa is exactly 1.75 (7 = 1.75 * 4: CT rounds up to 2^3, RCEIL keeps
    // 7 / 448 = 2^-6); just below it they agree.
    assert_eq!((scales[5 * c], scales[6 * c]), (3 + 127 - 8, 2 + 127 - 8));
    assert_eq!(common::rceil_scale(7.0), 127 - 6);
    assert!(differs_from_rceil >= 1, "the inputs must exercise where the two rules differ");
}
