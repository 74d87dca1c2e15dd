//! Grouped MoE experts on the host: flat buffers built here from each expert's known compact scales in
//! each documented layout; per-expert and stacked exports must give those scales back.
mod common;
use common::*;

use mxfp8::{
    export_scales_batched, BufMut, ExportOptions, Stream, Transfer, GroupedBuilder, GroupedScales, ManagedTensor, ScaleLayout, Status, Tensor,
};

struct Experts {
    values: Vec<Vec<u8>>,
    scales: Vec<Vec<u8>>,
    flat_values: Vec<u8>,
    flat_scales: Vec<u8>,
}

/// Experts of `rows` x k, their scales stored per `layout` / `scales`, `gap` poison bytes after each
/// expert's scales (for explicit offsets; 0 for back to back).
fn experts(rows: &[usize], k: usize, layout: ScaleLayout, scales: GroupedScales, gap: usize, seed: u64) -> (Experts, Vec<i64>) {
    let c = k.div_ceil(32);
    let mut e = Experts { values: vec![], scales: vec![], flat_values: vec![], flat_scales: vec![] };
    let mut offsets = vec![];
    for (i, &r) in rows.iter().enumerate() {
        let v = random_bytes(r * k, seed + 2 * i as u64, 0, 255);
        let s = random_bytes(r * c, seed + 2 * i as u64 + 1, 1, 254);
        let stored = match (scales, layout) {
            (GroupedScales::Compact, _) => s.clone(),
            (GroupedScales::Padded, ScaleLayout::RowMajor) => pad_reference(&s, r, c, r.div_ceil(128) * 128, c.div_ceil(4) * 4, POISON),
            (GroupedScales::Padded, ScaleLayout::GemmSwizzled) => swizzle_reference(&s, r, c, POISON),
        };
        offsets.push(e.flat_scales.len() as i64);
        e.flat_values.extend(&v);
        e.flat_scales.extend(&stored);
        e.flat_scales.extend(std::iter::repeat(POISON).take(gap));
        e.values.push(v);
        e.scales.push(s);
    }
    (e, offsets)
}

fn build(e: &Experts, rows: &[usize], k: usize, layout: ScaleLayout, scales: GroupedScales, offsets: Option<&[i64]>) -> mxfp8::GroupedTensor {
    let rows64: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
    let mut b = GroupedBuilder::new().scale_layout(layout).scales(scales).experts(&rows64, k as i64).buffers(
        ManagedTensor::from_host(e.flat_values.clone(), &[e.flat_values.len() as i64]).unwrap(),
        ManagedTensor::from_host(e.flat_scales.clone(), &[e.flat_scales.len() as i64]).unwrap(),
    );
    if let Some(o) = offsets {
        b = b.scale_offsets(o);
    }
    b.build().unwrap()
}

#[test]
fn every_expert_exports_its_own_scales_in_every_layout() {
    let (rows, k) = ([70usize, 0, 130, 5], 100usize);
    for (layout, scales) in [
        (ScaleLayout::RowMajor, GroupedScales::Padded),
        (ScaleLayout::GemmSwizzled, GroupedScales::Padded),
        (ScaleLayout::RowMajor, GroupedScales::Compact),
    ] {
        for gap in [0usize, 3] {
            let (e, offsets) = experts(&rows, k, layout, scales, gap, 40);
            let g = build(&e, &rows, k, layout, scales, (gap > 0).then_some(&offsets[..]));
            assert_eq!(g.num_experts(), 4);
            assert_eq!(g.expert_rows(), &[70, 0, 130, 5]);
            for (i, &r) in rows.iter().enumerate() {
                let t = g.expert(i).unwrap();
                assert_eq!(t.shape(), &[r as i64, k as i64]);
                let parts = t.export(&ExportOptions::default()).unwrap();
                assert_eq!(parts.values.to_host::<u8>().unwrap(), e.values[i], "{layout:?} {scales:?} gap {gap} expert {i}");
                assert_eq!(parts.scales.to_host::<u8>().unwrap(), e.scales[i], "{layout:?} {scales:?} gap {gap} expert {i}");
            }
            // Many experts at once: batched into slices, and packed into a bucket.
            let ts: Vec<Tensor> = (0..4).map(|i| g.expert(i).unwrap()).collect();
            let refs: Vec<&Tensor> = ts.iter().collect();
            let mut out: Vec<Vec<u8>> = e.scales.iter().map(|s| vec![POISON; s.len()]).collect();
            let slices: Vec<BufMut> = out.iter_mut().map(BufMut::from).collect();
            export_scales_batched(&refs, slices, &ExportOptions::default()).unwrap();
            assert_eq!(out, e.scales);
            let send = Transfer::from_tensors(&refs);
            let (parts, total) = send.bucket_parts(256).unwrap();
            let mut bucket = vec![0u8; total as usize];
            let manifest = send.manifest((0..4).map(|i| format!("experts.{i}")), &parts).unwrap();
            send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
            for (i, v) in manifest.unpack(&bucket).unwrap().iter().enumerate() {
                assert_eq!((v.values.as_host().unwrap(), v.scales.as_host().unwrap()), (&e.values[i][..], &e.scales[i][..]));
            }
        }
    }
}

#[test]
fn stacked_export_of_uniform_experts() {
    let (n, k) = (64usize, 96usize);
    for (layout, scales) in [(ScaleLayout::GemmSwizzled, GroupedScales::Padded), (ScaleLayout::RowMajor, GroupedScales::Compact)] {
        let (e, _) = experts(&[n; 3], k, layout, scales, 0, 50);
        let g = GroupedBuilder::new()
            .scale_layout(layout)
            .scales(scales)
            .uniform_experts(3, n as i64, k as i64)
            .buffers(
                ManagedTensor::from_host(e.flat_values.clone(), &[3, n as i64, k as i64]).unwrap(),
                ManagedTensor::from_host(e.flat_scales.clone(), &[e.flat_scales.len() as i64]).unwrap(),
            )
            .build()
            .unwrap();
        let parts = g.export(None, &ExportOptions::default()).unwrap();
        assert_eq!(parts.values.shape(), &[3, n as i64, k as i64]);
        assert_eq!(parts.scales.shape(), &[3, n as i64, 3]);
        assert!(!parts.values.is_copy());
        // A view exactly when the scales are compact and back to back.
        assert_eq!(parts.scales.is_copy(), scales == GroupedScales::Padded);
        assert_eq!(parts.values.to_host::<u8>().unwrap(), e.flat_values);
        assert_eq!(parts.scales.to_host::<u8>().unwrap(), e.scales.concat(), "{layout:?}");
    }
}

#[test]
fn grouped_errors_carry_the_librarys_message() {
    let (rows, k) = ([64usize, 32], 64usize);
    let (e, _) = experts(&rows, k, ScaleLayout::RowMajor, GroupedScales::Compact, 0, 60);
    let g = build(&e, &rows, k, ScaleLayout::RowMajor, GroupedScales::Compact, None);
    let err = g.export(None, &ExportOptions::default()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("stacking needs experts of one row count; these have 64 and 32 rows"), "{err}");
    let err = g.expert(2).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("expert 2 is out of range: the group has 2 experts"), "{err}");

    // A scale buffer too small for the experts: the build fails and names the buffer.
    let err = GroupedBuilder::new()
        .scales(GroupedScales::Compact)
        .uniform_experts(2, 64, k as i64)
        .buffers(
            ManagedTensor::from_host(vec![0; 2 * 64 * k], &[2 * 64 * k as i64]).unwrap(),
            ManagedTensor::from_host(vec![0; 2 * 64 * 2 - 1], &[2 * 64 * 2 - 1]).unwrap(),
        )
        .build()
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("scale_inv"), "{err}");
    assert!(GroupedBuilder::new().experts(&[1, 2], 32).scale_offsets(&[0]).build().is_err());
}

#[test]
fn experts_are_exported_from_many_threads() {
    let (rows, k) = ([40usize, 90, 7, 128], 200usize);
    let (e, _) = experts(&rows, k, ScaleLayout::GemmSwizzled, GroupedScales::Padded, 0, 70);
    let g = std::sync::Arc::new(build(&e, &rows, k, ScaleLayout::GemmSwizzled, GroupedScales::Padded, None));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let g = g.clone();
            std::thread::spawn(move || g.expert(i).unwrap().export(&ExportOptions::default()).unwrap().scales.to_host::<u8>().unwrap())
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), e.scales[i]);
    }
}

#[test]
fn export_experts_stacks_the_chosen_experts() {
    // 4 experts of (64, 96), compact scales back to back: consecutive experts are views, others copies.
    let (rows, k) = ([64usize; 4], 96usize);
    let (e, _) = experts(&rows, k, ScaleLayout::RowMajor, GroupedScales::Compact, 0, 60);
    let grouped = GroupedBuilder::new()
        .uniform_experts(4, 64, k as i64)
        .scales(GroupedScales::Compact)
        .buffers(
            ManagedTensor::from_host(e.flat_values.clone(), &[4 * 64, k as i64]).unwrap(),
            ManagedTensor::from_host(e.flat_scales.clone(), &[e.flat_scales.len() as i64]).unwrap(),
        )
        .build()
        .unwrap();
    for (chosen, view) in [(vec![2usize, 3], true), (vec![3, 1, 3], false)] {
        let out = grouped.export(Some(&chosen[..]), &ExportOptions::default()).unwrap();
        assert_eq!(out.values.shape(), &[chosen.len() as i64, 64, k as i64]);
        assert_eq!(out.scales.shape(), &[chosen.len() as i64, 64, 3]);
        assert_eq!(out.values.to_host::<u8>().unwrap(), chosen.iter().flat_map(|&x| e.values[x].clone()).collect::<Vec<u8>>(), "{chosen:?}");
        assert_eq!(out.scales.to_host::<u8>().unwrap(), chosen.iter().flat_map(|&x| e.scales[x].clone()).collect::<Vec<u8>>(), "{chosen:?}");
        assert_eq!((out.values.is_copy(), out.scales.is_copy()), (!view, !view), "{chosen:?}");
    }
    for bad in [vec![], vec![4usize]] {
        let err = grouped.export(Some(&bad[..]), &ExportOptions::default()).unwrap_err();
        assert_eq!(err.status, Status::InvalidArgument, "{bad:?}: {err}");
    }
}

/// `ExportOptions::shard` is refused by the exports that export whole tensors (the batched export and the
/// grouped ones; the header: "refuse a set shard"), not silently dropped: it used to export every row.
#[test]
fn whole_tensor_exports_refuse_a_shard() {
    let (rows, k) = ([64usize, 64], 64usize);
    let (e, _) = experts(&rows, k, ScaleLayout::RowMajor, GroupedScales::Compact, 0, 70);
    let g = build(&e, &rows, k, ScaleLayout::RowMajor, GroupedScales::Compact, None);
    let sharded = ExportOptions::new().shard(Some(mxfp8::Shard::rows(0..32)));
    let refused = |err: mxfp8::Error| {
        assert_eq!(err.status, Status::InvalidArgument, "{err}");
        assert!(err.message.contains("shard"), "{err}");
    };
    refused(g.export(None, &sharded).unwrap_err());
    refused(g.export(Some(&[1]), &sharded).unwrap_err());
    let expert = g.expert(0).unwrap();
    let mut out = vec![0u8; 64 * 2];
    refused(export_scales_batched(&[&expert], vec![BufMut::from(&mut out)], &sharded).unwrap_err());
    assert!(out.iter().all(|&b| b == 0), "nothing written");
    // The whole tensor (no shard) is still exported.
    export_scales_batched(&[&expert], vec![BufMut::from(&mut out)], &ExportOptions::default()).unwrap();
    assert_eq!(out, e.scales[0]);
}
