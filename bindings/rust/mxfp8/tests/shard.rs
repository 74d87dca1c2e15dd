//! Tensor::export with ExportOptions::shard on the host path against the crop of references built here (values and compact
//! scales drawn by the test, stored swizzled by the layout formula with poisoned padding).
mod common;
use common::*;

use mxfp8::{Direction, ExportOptions, ManagedTensor, ScaleLayout, Shard, Status, TensorBuilder};

#[test]
fn shards_of_a_swizzled_tensor_are_the_crop() {
    let (m, k) = (300usize, 200usize);
    let c = k.div_ceil(32);
    let values = random_bytes(m * k, 7, 0, 255);
    let scales = random_bytes(m * c, 8, 1, 254);
    let (rp, cp) = (m.div_ceil(128) * 128, c.div_ceil(4) * 4);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(swizzle_reference(&scales, m, c, POISON), &[rp as i64, cp as i64]).unwrap(),
        )
        .build()
        .unwrap();
    let options = ExportOptions::new().direction(Direction::Rowwise);
    for (shard, rows, cols) in [
        (Shard::rows(13..250), (13..250).collect::<Vec<usize>>(), 0..k),
        (Shard { rows: vec![200..300, 0..50], cols: Some(64..200) }, (200..300).chain(0..50).collect(), 64..k),
        (Shard::cols(32..96), (0..m).collect(), 32..96),
    ] {
        let out = tensor.export(&options.clone().shard(Some(shard.clone()))).unwrap();
        let want_values: Vec<u8> = rows.iter().flat_map(|&r| values[r * k + cols.start..r * k + cols.end].to_vec()).collect();
        let (c0, c1) = (cols.start / 32, cols.end.div_ceil(32));
        let want_scales: Vec<u8> = rows.iter().flat_map(|&r| scales[r * c + c0..r * c + c1].to_vec()).collect();
        assert_eq!(out.values.shape(), &[rows.len() as i64, cols.len() as i64]);
        assert_eq!(out.values.to_host::<u8>().unwrap(), want_values, "{shard:?}");
        assert_eq!(out.scales.to_host::<u8>().unwrap(), want_scales, "{shard:?}");
        assert!(out.scales.is_copy());
    }
    let err = tensor.export(&options.clone().shard(Some(Shard::cols(16..200)))).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("options.shard.col_begin is 16, not a multiple of 32"), "{err}");
}

/// Shapes the crate computes (a shard's, a tensor's compact scales) from ranges and dimensions no one
/// has checked yet, or from the widest tensor the library accepts, never overflow: they used to panic
/// ("attempt to subtract with overflow", "attempt to add with overflow") before the library could refuse.
#[test]
fn computed_shapes_never_overflow() {
    let whole = [4i64, 64];
    // Unchecked ranges (Shard::shape_of does not check): no panic, the library refuses them later.
    let _ = Shard::rows(i64::MIN..i64::MAX).shape_of(&whole);
    let _ = Shard { rows: vec![], cols: Some(std::ops::Range { start: i64::MAX, end: i64::MIN }) }.shape_of(&whole);
    let _ = Shard::row_pieces(&[0..i64::MAX, 0..i64::MAX]).shape_of(&whole);
    let _ = Shard::cols(0..8).shape_of(&[i64::MAX, i64::MAX, 8]);
    // (0, i64::MAX): no values, ceil(K / 32) = 2^58 scale columns, accepted by the library.
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(ManagedTensor::from_host(Vec::<u8>::new(), &[0, i64::MAX]).unwrap(),
                 ManagedTensor::from_host(Vec::<u8>::new(), &[0, 1 << 58]).unwrap())
        .build()
        .unwrap();
    assert_eq!(tensor.scales_shape(Direction::Rowwise), [0, 1 << 58]);
    assert_eq!(tensor.scales_shape(Direction::Columnwise), [0, i64::MAX]);
}
