//! Shards in buckets, in transfers into buffers and in their prepared forms, on the host path: every result
//! against the crop of values and compact scales drawn by the test (stored swizzled or padded by the
//! layout formulas, padding poisoned), into poisoned targets.
mod common;
use common::*;

use mxfp8::{
    Layout, ManagedTensor, Manifest, ScaleFixup, ScaleLayout, Shard, Status, Stream, Target, Tensor, TensorBuilder, Transfer,
};

struct Weight {
    tensor: Tensor,
    values: Vec<u8>,
    scales: Vec<u8>,
    m: usize,
    k: usize,
}

/// A rowwise (m, k) weight stored swizzled or TE-padded (padding poisoned); scales drawn from `low..=254`.
fn weight(m: usize, k: usize, seed: u64, swizzled: bool, low: u8) -> Weight {
    let c = k.div_ceil(32);
    let values = random_bytes(m * k, seed, 0, 255);
    let scales = random_bytes(m * c, seed + 1, low, 254);
    let (rp, cp) = (round_up(m, 128), round_up(c, 4));
    let stored = if swizzled { swizzle_reference(&scales, m, c, POISON) } else { pad_reference(&scales, m, c, rp, cp, POISON) };
    let tensor = TensorBuilder::new()
        .scale_layout(if swizzled { ScaleLayout::GemmSwizzled } else { ScaleLayout::RowMajor })
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(stored, &[rp as i64, cp as i64]).unwrap(),
        )
        .build()
        .unwrap();
    Weight { tensor, values, scales, m, k }
}

/// The crop of a weight's values and compact rowwise scales for a shard (written from the header's
/// definition: the rows in order, K columns, blocks of 32).
fn crop(w: &Weight, shard: &Shard) -> (Vec<u8>, Vec<u8>) {
    let rows: Vec<usize> = if shard.rows.is_empty() { (0..w.m).collect() } else { shard.rows.iter().flat_map(|r| r.start as usize..r.end as usize).collect() };
    let cols = shard.cols.clone().map_or(0..w.k, |c| c.start as usize..c.end as usize);
    let c = w.k.div_ceil(32);
    let (c0, c1) = (cols.start / 32, cols.end.div_ceil(32));
    let values = rows.iter().flat_map(|&r| w.values[r * w.k + cols.start..r * w.k + cols.end].to_vec()).collect();
    let scales = rows.iter().flat_map(|&r| w.scales[r * c + c0..r * c + c1].to_vec()).collect();
    (values, scales)
}

#[test]
fn a_bucket_of_shards_carries_each_part() {
    let a = weight(300, 200, 1, true, 1);
    let b = weight(257, 200, 3, false, 1);
    let c = weight(40, 64, 5, true, 1);
    let shards = [Shard::row_pieces(&[200..300, 0..50]), Shard::cols(64..200), Shard::whole()];
    let tensors = [&a.tensor, &b.tensor, &c.tensor];
    let send = Transfer::from_tensors(&tensors).shards(&shards);
    let (parts, total) = send.bucket_parts(64).unwrap();
    let manifest = send.manifest(["a", "b", "c"], &parts).unwrap();
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
    let views = manifest.unpack(&bucket).unwrap();
    for ((w, shard), view) in [&a, &b, &c].iter().zip(&shards).zip(&views) {
        let (values, scales) = crop(w, shard);
        let e = view.entry;
        assert_eq!(e.shape, shard.shape_of(&[w.m as i64, w.k as i64]));
        assert_eq!((view.values.as_host().unwrap(), view.scales.as_host().unwrap()), (&values[..], &scales[..]), "{}", e.name);
        assert_eq!(e.scales_shape, [e.shape[0], (e.shape[1] + 31) / 32], "{}", e.name);
    }
    assert_eq!(views[0].entry.shape, [150, 200]);
    assert_eq!(views[2].entry.shape, [40, 64]);
    // The prepared fill writes the same bytes at every run.
    let mut again = vec![POISON; bucket.len()];
    {
        let prepared = Transfer::from_tensors(&tensors).shards(&shards).to_bucket(&mut again, &parts).prepare().unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    }
    assert_eq!(again, bucket);
    // A shard boundary off the 32-blocks is named; a fix-up with shards is not offered.
    let err = Transfer::from_tensors(&tensors).shards(&[Shard::whole(), Shard::cols(16..200), Shard::whole()]).bucket_parts(64).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("shards[1]"), "{err}");
    let send = Transfer::from_tensors(&tensors).shards(&shards).scale_fixup(ScaleFixup::ZeroExponentAsOne);
    let err = send.bucket_parts(64).and_then(|(parts, _)| send.to_bucket(&mut bucket, &parts).run(Stream::default())).unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    let err = Transfer::from_tensors(&tensors).shards(&shards[..2]).bucket_parts(64).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
}

#[test]
fn tensor_shards_import_into_compact_and_128x4_targets() {
    let padded = weight(300, 200, 11, false, 1);
    let swizzled = weight(300, 200, 13, true, 1);
    let shard = Shard::rows(13..250);
    let (values, scales) = crop(&padded, &shard);
    let (rows, c) = (237usize, 7usize);
    let want_128x4 = swizzle_reference(&scales, rows, c, 0);
    let (mut v1, mut s1, mut v2, mut s2) = (vec![POISON; values.len()], vec![POISON; scales.len()], vec![POISON; values.len()], vec![POISON; want_128x4.len()]);
    let targets = vec![Target::new(&mut v1, &mut s1, Layout::Compact), Target::new(&mut v2, &mut s2, Layout::Cutlass128x4)];
    Transfer::from_tensors(&[&padded.tensor, &padded.tensor]).shards(&[shard.clone(), shard.clone()]).to_buffers(targets).run(Stream::default()).unwrap();
    assert_eq!((&v1, &s1), (&values, &scales));
    assert_eq!((&v2, &s2), (&values, &want_128x4));
    // Swizzled storage: a shard goes to a compact target only.
    let (sv, ss) = crop(&swizzled, &shard);
    let (mut v3, mut s3) = (vec![POISON; sv.len()], vec![POISON; ss.len()]);
    let one = [shard.clone()];
    Transfer::from_tensors(&[&swizzled.tensor]).shards(&one).to_buffers(vec![Target::new(&mut v3, &mut s3, Layout::Compact)]).run(Stream::default()).unwrap();
    assert_eq!((&v3, &s3), (&sv, &ss));
    let (mut v4, mut s4) = (vec![POISON; sv.len()], vec![POISON; want_128x4.len()]);
    let err = Transfer::from_tensors(&[&swizzled.tensor])
        .shards(&one)
        .to_buffers(vec![Target::new(&mut v4, &mut s4, Layout::Cutlass128x4)])
        .run(Stream::default())
        .unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    assert!(v4.iter().chain(&s4).all(|&b| b == POISON), "a failed import wrote");
    // Prepared: the same bytes at every run.
    let (mut v5, mut s5) = (vec![POISON; values.len()], vec![POISON; want_128x4.len()]);
    {
        let targets = vec![Target::new(&mut v5, &mut s5, Layout::Cutlass128x4)];
        let prepared = Transfer::from_tensors(&[&padded.tensor]).shards(&one).to_buffers(targets).prepare().unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    }
    assert_eq!((&v5, &s5), (&values, &want_128x4));
    // Whole tensors, prepared.
    let (mut v6, mut s6) = (vec![POISON; 300 * 200], vec![POISON; 300 * 7]);
    {
        let targets = vec![Target::new(&mut v6, &mut s6, Layout::Compact)];
        let prepared = Transfer::from_tensors(&[&swizzled.tensor]).to_buffers(targets).prepare().unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    }
    assert_eq!((&v6, &s6), (&swizzled.values, &swizzled.scales));
}

#[test]
fn a_receiver_takes_its_shard_of_a_bucket_and_the_fixup_applies() {
    // Scales from 0..=254, so some are the byte 0.
    let w = weight(300, 96, 21, true, 0);
    assert!(w.scales.contains(&0));
    let send = Transfer::from_tensors(&[&w.tensor]);
    let (parts, total) = send.bucket_parts(64).unwrap();
    let manifest: Manifest = send.manifest(["w"], &parts).unwrap();
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
    // This rank's rows 150..300.
    let shards = [Shard::rows(150..300)];
    let (values, scales) = crop(&w, &shards[0]);
    let (mut v, mut s) = (vec![POISON; values.len()], vec![POISON; scales.len()]);
    fn receive<'a>(bucket: &'a [u8], manifest: &'a Manifest, t: Target<'a>) -> Transfer<'a, 'a> {
        Transfer::from_bucket(bucket, manifest).to_buffers(vec![t])
    }
    receive(&bucket, &manifest, Target::new(&mut v, &mut s, Layout::Compact)).shards(&shards).run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &scales));
    // The whole tensor with the zero-exponent fix-up, into the 128x4 layout: padding stays zero.
    let fixed: Vec<u8> = w.scales.iter().map(|&b| b.max(1)).collect();
    let want = swizzle_reference(&fixed, 300, 3, 0);
    let (mut v, mut s) = (vec![POISON; 300 * 96], vec![POISON; want.len()]);
    receive(&bucket, &manifest, Target::new(&mut v, &mut s, Layout::Cutlass128x4)).scale_fixup(ScaleFixup::ZeroExponentAsOne).run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&w.values, &want));
    // Prepared, the same.
    let (mut v2, mut s2) = (vec![POISON; 300 * 96], vec![POISON; want.len()]);
    {
        let target = Target::new(&mut v2, &mut s2, Layout::Cutlass128x4);
        let prepared = receive(&bucket, &manifest, target).scale_fixup(ScaleFixup::ZeroExponentAsOne).prepare().unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    }
    assert_eq!((&v2, &s2), (&w.values, &want));
    // A fix-up with a shard is not offered; a shard list of the wrong length is refused here.
    let (mut v, mut s) = (vec![POISON; values.len()], vec![POISON; scales.len()]);
    let err = receive(&bucket, &manifest, Target::new(&mut v, &mut s, Layout::Compact))
        .shards(&shards)
        .scale_fixup(ScaleFixup::ZeroExponentAsOne)
        .run(Stream::default())
        .unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    let err = receive(&bucket, &manifest, Target::new(&mut v, &mut s, Layout::Compact)).shards(&[]).run(Stream::default()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("0 shards for 1 entries"), "{err}");
    assert!(v.iter().chain(&s).all(|&b| b == POISON), "a failed import wrote");
}

/// `Shard::END` (`MXFP8_SHARD_END`) ends the one row range or the column range at M or K: the manifest
/// entry carries the shard's real shape, and the receiver's views hold the crop of `Shard::rows(a..m)` /
/// `Shard::cols(b..k)` (the crate once wrote `END - start` into the manifest: `(-1, 64)`).
#[test]
fn shard_end_is_the_dimension_end_in_the_manifest() {
    let w = weight(200, 96, 71, true, 1);
    for (open, closed) in [
        (Shard::rows(72..Shard::END), Shard::rows(72..200)),
        (Shard::cols(32..Shard::END), Shard::cols(32..96)),
        (Shard { rows: vec![0..Shard::END], cols: Some(64..Shard::END) }, Shard { rows: vec![0..200], cols: Some(64..96) }),
    ] {
        let send = Transfer::from_tensors(&[&w.tensor]).shards(std::slice::from_ref(&open));
        let (parts, total) = send.bucket_parts(256).unwrap();
        let manifest = send.manifest(["w"], &parts).unwrap();
        let want_shape = closed.shape_of(&[200, 96]);
        assert_eq!(open.shape_of(&[200, 96]), want_shape, "{open:?}");
        assert_eq!(manifest.entries[0].shape, want_shape, "{open:?}");
        let mut bucket = vec![POISON; total as usize];
        send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
        let views = manifest.unpack(&bucket).unwrap();
        let (values, scales) = crop(&w, &closed);
        assert_eq!(views[0].values.as_host(), Some(&values[..]), "{open:?} values");
        assert_eq!(views[0].scales.as_host(), Some(&scales[..]), "{open:?} scales");
    }
}

/// `Shard::END` in several row pieces was refused under the C desc's name (`desc.shards[0].row_pieces[3] is
/// -1`); the crate says it (the Rust probe's message).
#[test]
fn end_in_row_pieces_is_refused_naming_the_shard() {
    let w = weight(64, 64, 81, true, 1);
    let err = Transfer::from_tensors(&[&w.tensor]).shards(&[Shard::row_pieces(&[0..4, 8..Shard::END])]).check().unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("shards[0]: Shard::END ends the one row range only"), "{err}");
    Transfer::from_tensors(&[&w.tensor]).shards(&[Shard::rows(8..Shard::END)]).check().unwrap();
}
