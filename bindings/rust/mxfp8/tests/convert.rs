//! Engine-native targets on the host path (`Tensor::convert_into`, `GroupedTensor::convert_into`,
//! `layout_bytes`) and the scale fix-up, against references written here from the header's formulas
//! (the 128x4 offset, DeepGEMM's byte offset, FlashInfer's row map), into poisoned outputs, on shapes
//! with partial blocks.
mod common;
use common::*;

use mxfp8::{
    export_scales_batched, layout_bytes, BufMut, ConvertOptions, CHECK_ONLY, Direction, ExportOptions, GroupedBuilder, GroupedScales, GroupedTensor, Layout,
    ManagedTensor, ScaleFixup, ScaleLayout, Status, Tensor, TensorBuilder,
};

/// A rowwise (m, k) tensor stored with swizzled scales (padding poisoned); its values and compact scales.
fn swizzled(m: usize, k: usize, seed: u64, low: u8) -> (Tensor, Vec<u8>, Vec<u8>) {
    let c = k.div_ceil(32);
    let values = random_bytes(m * k, seed, 0, 255);
    let scales = random_bytes(m * c, seed + 1, low, 254);
    let stored = swizzle_reference(&scales, m, c, POISON);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(stored, &[(round_up(m, 128)) as i64, round_up(c, 4) as i64]).unwrap(),
        )
        .build()
        .unwrap();
    (tensor, values, scales)
}

#[test]
fn layout_bytes_follow_the_header_formulas() {
    for (r, c) in [(1usize, 1usize), (100, 3), (128, 4), (257, 33), (0, 5), (31, 1000)] {
        let (ri, ci) = (r as i64, c as i64);
        let row = Direction::Rowwise;
        assert_eq!(layout_bytes(Layout::Compact, row, ri, ci), Ok((r * c) as u64));
        assert_eq!(layout_bytes(Layout::Compact, Direction::Columnwise, ri, ci), Ok((r * c) as u64));
        assert_eq!(layout_bytes(Layout::Cutlass128x4, row, ri, ci), Ok((round_up(r, 128) * round_up(c, 4)) as u64));
        // Columnwise scales are swizzled as their transpose.
        assert_eq!(layout_bytes(Layout::Cutlass128x4, Direction::Columnwise, ri, ci), Ok((round_up(c, 128) * round_up(r, 4)) as u64));
        assert_eq!(layout_bytes(Layout::DeepgemmPacked, row, ri, ci), Ok((4 * c.div_ceil(4) * round_up(r, 4)) as u64));
        assert_eq!(layout_bytes(Layout::DeepgemmFloat32, row, ri, ci), Ok((4 * r * c) as u64));
    }
    for layout in [Layout::TrtllmShuffled, Layout::TrtllmShuffledGated] {
        assert_eq!(layout_bytes(layout, Direction::Rowwise, 256, 7), Ok(256 * 8));
        let err = layout_bytes(layout, Direction::Rowwise, 100, 7).unwrap_err();
        assert_eq!(err.status, Status::InvalidArgument, "{err}");
        assert!(err.message.contains("128"), "{err}");
    }
    for layout in [Layout::DeepgemmPacked, Layout::DeepgemmFloat32, Layout::TrtllmShuffled] {
        assert_eq!(layout_bytes(layout, Direction::Columnwise, 128, 4).unwrap_err().status, Status::InvalidArgument);
    }
    assert_eq!(layout_bytes(Layout::Compact, Direction::Rowwise, -1, 4).unwrap_err().status, Status::InvalidArgument);
}

#[test]
fn convert_writes_every_target_from_swizzled_storage() {
    // 256 rows (two TRT-LLM experts' worth of 128-row tiles), K = 200: a partial last block, C = 7.
    let (m, k) = (256usize, 200usize);
    let c = k.div_ceil(32);
    let (tensor, values, scales) = swizzled(m, k, 3, 1);
    let shuffled_scales = permute_rows(&scales, m, c, trtllm_destination_row);
    for (target, want_scales, want_values) in [
        (Layout::Compact, scales.clone(), values.clone()),
        (Layout::Cutlass128x4, swizzle_reference(&scales, m, c, 0), values.clone()),
        (Layout::DeepgemmPacked, deepgemm_reference(&scales, m, c, 0), values.clone()),
        (Layout::DeepgemmFloat32, hopper_deepgemm_reference(&scales), values.clone()),
        (Layout::TrtllmShuffled, swizzle_reference(&shuffled_scales, m, c, 0), permute_rows(&values, m, k, trtllm_destination_row)),
    ] {
        let bytes = layout_bytes(target, Direction::Rowwise, m as i64, c as i64).unwrap() as usize;
        let (mut out_scales, mut out_values) = (vec![POISON; bytes], vec![POISON; m * k]);
        tensor.convert_into(&ConvertOptions::new().target(target), Some(BufMut::from(&mut out_values)), &mut out_scales).unwrap();
        assert_eq!(out_scales, want_scales, "{target:?} scales");
        assert_eq!(out_values, want_values, "{target:?} values");
    }
}

#[test]
fn convert_without_values_and_with_padding_rows() {
    // 101 rows: DeepGEMM pads rows to 104 and the 128x4 tiles to 128; every padding byte comes out zero.
    let (m, k) = (101usize, 70usize);
    let c = k.div_ceil(32);
    let (tensor, _, scales) = swizzled(m, k, 5, 1);
    for (target, want) in [(Layout::DeepgemmPacked, deepgemm_reference(&scales, m, c, 0)), (Layout::Cutlass128x4, swizzle_reference(&scales, m, c, 0))] {
        let mut out = vec![POISON; want.len()];
        tensor.convert_into(&ConvertOptions::new().target(target), None, &mut out).unwrap();
        assert_eq!(out, want, "{target:?}");
    }
    // The TRT-LLM targets need the values (they move with the scales), and 128-row experts.
    let mut out = vec![POISON; 128 * 4];
    let err = tensor.convert_into(&ConvertOptions::new().target(Layout::TrtllmShuffled), None, &mut out).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(out.iter().all(|&b| b == POISON), "a failed convert wrote");
}

#[test]
fn gated_target_interleaves_up_and_gate_then_shuffles() {
    // w13 of N = 128: rows [gate; up].
    let (n, k) = (128usize, 64usize);
    let (m, c) = (2 * n, k.div_ceil(32));
    let (tensor, values, scales) = swizzled(m, k, 9, 1);
    // Destination row d takes source row gated_source_row(d), then the shuffle moves d.
    let interleave = |x: &[u8], w: usize| {
        let mut out = vec![0u8; m * w];
        for d in 0..m {
            let s = gated_source_row(d, n);
            out[d * w..(d + 1) * w].copy_from_slice(&x[s * w..(s + 1) * w]);
        }
        out
    };
    let want_values = permute_rows(&interleave(&values, k), m, k, trtllm_destination_row);
    let want_scales = swizzle_reference(&permute_rows(&interleave(&scales, c), m, c, trtllm_destination_row), m, c, 0);
    let (mut out_values, mut out_scales) = (vec![POISON; m * k], vec![POISON; want_scales.len()]);
    tensor.convert_into(&ConvertOptions::new().target(Layout::TrtllmShuffledGated), Some(BufMut::from(&mut out_values)), &mut out_scales).unwrap();
    assert_eq!(out_values, want_values);
    assert_eq!(out_scales, want_scales);
}

#[test]
fn columnwise_convert_swizzles_the_transpose() {
    let (m, k) = (70usize, 40usize);
    let r = m.div_ceil(32);
    let values = random_bytes(m * k, 11, 0, 255);
    let scales = random_bytes(r * k, 12, 1, 254); // compact (ceil(M/32), K)
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .columnwise(
            ManagedTensor::from_host(values, &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(scales.clone(), &[r as i64, k as i64]).unwrap(),
        )
        .build()
        .unwrap();
    let options = ConvertOptions::new().direction(Direction::Columnwise).target(Layout::Cutlass128x4);
    let want = swizzle_reference(&transpose(&scales, r, k), k, r, 0);
    assert_eq!(want.len() as u64, layout_bytes(Layout::Cutlass128x4, Direction::Columnwise, r as i64, k as i64).unwrap());
    let mut out = vec![POISON; want.len()];
    tensor.convert_into(&options, None, &mut out).unwrap();
    assert_eq!(out, want);
    let mut out = vec![POISON; 4 * k.div_ceil(4) * round_up(r, 4)];
    let err = tensor.convert_into(&options.target(Layout::DeepgemmPacked), None, &mut out).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    // The rowwise direction is missing.
    let err = tensor.convert_into(&ConvertOptions::new(), None, &mut vec![0; r * k]).unwrap_err();
    assert_eq!(err.status, Status::MissingData, "{err}");
}

#[test]
fn wrong_sizes_are_refused_before_anything_is_written() {
    let (tensor, _, _) = swizzled(128, 64, 13, 1);
    let mut scales = vec![POISON; 128 * 4 - 1];
    let mut values = vec![POISON; 128 * 64];
    let err = tensor.convert_into(&ConvertOptions::new().target(Layout::Cutlass128x4), Some(BufMut::from(&mut values)), &mut scales).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("scales"), "{err}");
    assert!(scales.iter().chain(&values).all(|&b| b == POISON), "a failed convert wrote");
}

/// Rows and columns are `usize`; one past i64 was cast and reported negative ("the shape [-1, 0]").
#[test]
fn scale_matrix_dimensions_past_i64_are_refused_as_themselves() {
    let mut swizzled = vec![POISON; 512];
    let err = mxfp8::swizzle_scales(&[0u8; 8], usize::MAX, 0, &mut swizzled, mxfp8::Stream::default()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains(&format!("rows is {}, past", usize::MAX)), "{err}");
    let err = mxfp8::unswizzle_scales(&swizzled, 2, 1 << 63, &mut vec![0u8; 8], mxfp8::Stream::default()).unwrap_err();
    assert!(err.message.contains(&format!("cols is {}, past", 1usize << 63)), "{err}");
    assert!(swizzled.iter().all(|&b| b == POISON));
}

/// `e` experts of (n, k) stored with compact scales back to back.
fn compact_experts(values: &[u8], scales: &[u8], e: usize, n: usize, k: usize) -> GroupedTensor {
    GroupedBuilder::new()
        .uniform_experts(e as i32, n as i64, k as i64)
        .scales(GroupedScales::Compact)
        .buffers(
            ManagedTensor::from_host(values.to_vec(), &[(e * n) as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(scales.to_vec(), &[scales.len() as i64]).unwrap(),
        )
        .build()
        .unwrap()
}

#[test]
fn grouped_experts_convert_in_one_call() {
    // 3 experts of (128, 96), compact scales back to back.
    let (e, n, k) = (3usize, 128usize, 96usize);
    let c = k.div_ceil(32);
    let values = random_bytes(e * n * k, 21, 0, 255);
    let scales = random_bytes(e * n * c, 22, 1, 254);
    let grouped = compact_experts(&values, &scales, e, n, k);
    let per_expert = layout_bytes(Layout::TrtllmShuffled, Direction::Rowwise, n as i64, c as i64).unwrap() as usize;
    let (mut out_values, mut out_scales) = (vec![POISON; e * n * k], vec![POISON; e * per_expert]);
    grouped.convert_into(&ConvertOptions::new().target(Layout::TrtllmShuffled), Some(BufMut::from(&mut out_values)), &mut out_scales).unwrap();
    for x in 0..e {
        let (v, s) = (&values[x * n * k..(x + 1) * n * k], &scales[x * n * c..(x + 1) * n * c]);
        assert_eq!(out_values[x * n * k..(x + 1) * n * k], permute_rows(v, n, k, trtllm_destination_row)[..], "expert {x} values");
        let want = swizzle_reference(&permute_rows(s, n, c, trtllm_destination_row), n, c, 0);
        assert_eq!(out_scales[x * per_expert..(x + 1) * per_expert], want[..], "expert {x} scales");
    }
    // The 128x4 target, scales only.
    let per_expert = round_up(n, 128) * round_up(c, 4);
    let mut out = vec![POISON; e * per_expert];
    grouped.convert_into(&ConvertOptions::new().target(Layout::Cutlass128x4), None, &mut out).unwrap();
    for x in 0..e {
        assert_eq!(out[x * per_expert..(x + 1) * per_expert], swizzle_reference(&scales[x * n * c..(x + 1) * n * c], n, c, 0)[..]);
    }
    // Grouped experts hold rowwise data only.
    let err = grouped.convert_into(&ConvertOptions::new().direction(Direction::Columnwise), None, &mut vec![0; e * n * c]).unwrap_err();
    assert_eq!(err.status, Status::MissingData, "{err}");
}

#[test]
fn zero_exponent_fixup_rewrites_real_scales_only() {
    // Scales drawn from 0..=3, so many are the byte 0 (an all-zero block).
    let (m, k) = (100usize, 48usize);
    let c = k.div_ceil(32);
    let (tensor, _, scales) = swizzled(m, k, 31, 0);
    let scales: Vec<u8> = scales.iter().map(|&s| s % 4).collect();
    let tensor = {
        drop(tensor);
        TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
            .rowwise(
                ManagedTensor::from_host(random_bytes(m * k, 32, 0, 255), &[m as i64, k as i64]).unwrap(),
                ManagedTensor::from_host(scales.clone(), &[m as i64, c as i64]).unwrap(),
            )
            .build()
            .unwrap()
    };
    assert!(scales.contains(&0));
    let fixed: Vec<u8> = scales.iter().map(|&s| if s == 0 { 1 } else { s }).collect();
    let mut out = vec![POISON; round_up(m, 128) * round_up(c, 4)];
    let options = ConvertOptions::new().target(Layout::Cutlass128x4).scale_fixup(ScaleFixup::ZeroExponentAsOne);
    tensor.convert_into(&options, None, &mut out).unwrap();
    assert_eq!(out, swizzle_reference(&fixed, m, c, 0), "padding stays zero, real zeros become one");
    // The batched export applies ExportOptions' fix-up; the components export (views) refuses it.
    let export = ExportOptions::new().scale_fixup(ScaleFixup::ZeroExponentAsOne);
    let mut dest = vec![POISON; m * c];
    export_scales_batched(&[&tensor], vec![BufMut::from(&mut dest)], &export).unwrap();
    assert_eq!(dest, fixed);
    let err = tensor.export(&export).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
}

#[test]
fn padding_writes_the_padded_weight_in_the_target() {
    // w2 of vLLM's TRT-LLM MoE: 2 experts of (H = 200, I = 72), padded to (256, 128): values zero past the
    // weight, scales 127 (C 3 -> 4), then the shuffle of the padded matrix.
    let (e, n, k, np, kp) = (2usize, 200usize, 72usize, 256usize, 128usize);
    let (c, cp) = (k.div_ceil(32), kp / 32);
    let values = random_bytes(e * n * k, 31, 0, 255);
    let scales = random_bytes(e * n * c, 32, 1, 254);
    let grouped = compact_experts(&values, &scales, e, n, k);
    let options = ConvertOptions::new().target(Layout::TrtllmShuffled).pad_rows_to(256).pad_cols_to(128);
    assert_eq!(options.pad_scale, 127);
    let per_expert = layout_bytes(Layout::TrtllmShuffled, Direction::Rowwise, np as i64, cp as i64).unwrap() as usize;
    let (mut out_values, mut out_scales) = (vec![POISON; e * np * kp], vec![POISON; e * per_expert]);
    grouped.convert_into(&options, Some(BufMut::from(&mut out_values)), &mut out_scales).unwrap();
    for x in 0..e {
        let (mut pv, mut ps) = (vec![0u8; np * kp], vec![127u8; np * cp]);
        for r in 0..n {
            pv[r * kp..r * kp + k].copy_from_slice(&values[(x * n + r) * k..(x * n + r + 1) * k]);
            ps[r * cp..r * cp + c].copy_from_slice(&scales[(x * n + r) * c..(x * n + r + 1) * c]);
        }
        let got_values = &out_values[x * np * kp..(x + 1) * np * kp];
        assert_eq!(got_values, &permute_rows(&pv, np, kp, trtllm_destination_row)[..], "expert {x} values");
        let want = swizzle_reference(&permute_rows(&ps, np, cp, trtllm_destination_row), np, cp, 0);
        assert_eq!(out_scales[x * per_expert..(x + 1) * per_expert], want[..], "expert {x} scales");
    }
    // The unpadded sizes are refused, nothing written.
    let (mut small_values, mut small_scales) = (vec![POISON; e * 256 * k], vec![POISON; e * per_expert]);
    let err = grouped.convert_into(&options, Some(BufMut::from(&mut small_values)), &mut small_scales).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(small_values.iter().chain(&small_scales).all(|&b| b == POISON), "a refused convert wrote");
    // Checked only: the same refusal; the right sizes accepted, nothing written; an unknown flag refused.
    let check = options.flags(CHECK_ONLY.into());
    let err = grouped.convert_into(&check, Some(BufMut::from(&mut small_values)), &mut small_scales).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    let (mut unwritten_values, mut unwritten_scales) = (vec![POISON; e * np * kp], vec![POISON; e * per_expert]);
    grouped.convert_into(&check, Some(BufMut::from(&mut unwritten_values)), &mut unwritten_scales).unwrap();
    assert!(unwritten_values.iter().chain(&unwritten_scales).all(|&b| b == POISON), "a checked-only convert wrote");
    let err = grouped
        .convert_into(&options.flags(2), Some(BufMut::from(&mut unwritten_values)), &mut unwritten_scales)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
}
