//! Export a weight stored with Transformer Engine's padded, GEMM-swizzled scales into FP8 values plus
//! compact scales, from Rust. Run: cargo run --offline --example export_swizzled (in bindings/rust,
//! with MXFP8_LIB_DIR pointing at the CMake build folder).
use mxfp8::{swizzle_scales, ExportOptions, Format, ManagedTensor, ScaleLayout, Stream, TensorBuilder};

fn main() -> Result<(), mxfp8::Error> {
    let (rows, k) = (200usize, 80usize);
    let c = k.div_ceil(32); // 3 scales per row; the last block holds 16 values
    let scales: Vec<u8> = (0..rows * c).map(|i| 120 + (i % 15) as u8).collect();
    let mut swizzled = vec![0u8; 256 * 4]; // roundup(200, 128) x roundup(3, 4)
    swizzle_scales(&scales, rows, c, &mut swizzled, Stream::default())?; // what TE stores with optimize_for_gemm
    let values: Vec<u8> = (0..rows * k).map(|i| (i * 37 + 11) as u8).collect();

    let tensor = TensorBuilder::new()
        .format(Format::E4M3)
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(values, &[rows as i64, k as i64])?,
            ManagedTensor::from_host(swizzled, &[256, 4])?,
        )
        .build()?;
    let parts = tensor.export(&ExportOptions::default())?;
    println!("libmxfp8 {}: values {:?} (view: {}), scales {:?} (copy: {})", mxfp8::version(),
             parts.values.shape(), !parts.values.is_copy(), parts.scales.shape(), parts.scales.is_copy());
    let same = parts.scales.as_host_bytes() == Some(&scales[..]);
    println!("all {} scales match the ones stored: {}", scales.len(), if same { "yes" } else { "NO" });
    if same { Ok(()) } else { std::process::exit(1) }
}
