//! Quantizing on the host through the safe API: known answers, and swizzled outputs that a tensor built
//! from them exports back to the compact scales.
use mxfp8::{
    quantize_host, Direction, ExportOptions, HostInput, ManagedTensor, QuantizeOptions, QuantizedScales, ScaleLayout,
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
    let q = quantize_host(HostInput::F32(&x), &[3, 32], Direction::Rowwise, &QuantizeOptions::default()).unwrap();
    assert_eq!(q.scale_inv.as_host_bytes().unwrap(), &[119, 128, 0]);
    let v = q.data.as_host_bytes().unwrap();
    assert_eq!((v[0], v[32], v[65]), (0x78, 0x78, 0x80));
    // FLOOR: 500 keeps scale 127 and saturates to 448 (0x7E). bfloat16 1.0 is 0x3F80.
    let floor = QuantizeOptions::new().rounding(ScaleRounding::Floor);
    let q = quantize_host(HostInput::F32(&x), &[3, 32], Direction::Rowwise, &floor).unwrap();
    assert_eq!(q.scale_inv.as_host_bytes().unwrap()[1], 127);
    assert_eq!(q.data.as_host_bytes().unwrap()[32], 0x7E);
    let bf16 = [0x3F80u16; 32];
    let q = quantize_host(HostInput::Bf16Bits(&bf16), &[1, 32], Direction::Rowwise, &QuantizeOptions::default()).unwrap();
    assert_eq!(q.scale_inv.as_host_bytes().unwrap(), &[119]);
    let err = quantize_host(HostInput::F32(&x), &[4, 32], Direction::Rowwise, &QuantizeOptions::default()).unwrap_err();
    assert!(err.message.contains("cannot have the shape"), "{err}");
}

#[test]
fn swizzled_outputs_build_a_tensor_that_exports_the_compact_scales() {
    let (rows, k) = (100usize, 200usize);
    let x: Vec<f32> = (0..rows * k).map(|i| ((i * 7919) % 1000) as f32 * 0.37 - 185.0).collect();
    let shape = [rows as i64, k as i64];
    let compact = quantize_host(HostInput::F32(&x), &shape, Direction::Rowwise, &QuantizeOptions::default()).unwrap();
    let te = QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    let swizzled = quantize_host(HostInput::F32(&x), &shape, Direction::Rowwise, &te).unwrap();
    assert_eq!(swizzled.scale_inv.shape(), &[128, 8]);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host_bytes(swizzled.data.to_host_vec().unwrap(), &shape).unwrap(),
            ManagedTensor::from_host_bytes(swizzled.scale_inv.to_host_vec().unwrap(), &[128, 8]).unwrap(),
        )
        .build()
        .unwrap();
    let parts = tensor.export(&ExportOptions::default()).unwrap();
    assert_eq!(parts.scales.as_host_bytes().unwrap(), compact.scale_inv.as_host_bytes().unwrap());
    // Decoding undoes the quantization to within E4M3's 3 mantissa bits for the block's large values.
    let y = tensor.dequantize_host(Direction::Rowwise).unwrap();
    for (a, b) in x.iter().zip(&y) {
        assert!((a - b).abs() <= a.abs() / 16.0 + 4.0, "{a} decoded as {b}");
    }
}
